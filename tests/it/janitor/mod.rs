//! The janitor against real Postgres and NATS, with a controllable clock:
//! every run here is taken `as_of` a fixed instant and the memories are
//! backdated relative to it.

mod crash;
mod policy;
mod purged_points;
mod repair;
mod turns;

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, TimeZone, Utc};
use hindsight_janitor::{
    Janitor, JanitorError, Outcome, RunReport, RunRequest, Trigger, counts::StepCounts,
    policy::Policy, schedule::Schedule,
};
use hindsight_tests::{
    Deployment, eventually,
    seed::{self, Seed, basis, near},
};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 6, 2, 0, 0)
        .single()
        .expect("date")
}

fn janitor(d: &Deployment) -> Janitor {
    hindsight_janitor::janitor(d.config(), d.ctx.store.clone(), Some(&d.ctx.bus))
}

fn request(dry_run: bool) -> RunRequest {
    RunRequest {
        dry_run,
        tenant: None,
        as_of: Some(now()),
        trigger: Trigger::Manual,
        scheduled_for: None,
    }
}

async fn ran(janitor: &Janitor, request: RunRequest) -> RunReport {
    match janitor.run(request).await.expect("the run executes") {
        Outcome::Ran(report) => *report,
        other => panic!("expected a run, got {other:?}"),
    }
}

/// The memories of the scenario, by role.
struct World {
    fresh: Uuid,
    stale: Uuid,
    to_archive: Uuid,
    allergy: Uuid,
    in_use: Uuid,
    dup_long: Uuid,
    dup_short: Uuid,
    not_dup: Uuid,
    episodes: Vec<Uuid>,
    lone_episode: Uuid,
    quarantined: Uuid,
    reviewed: Uuid,
    purge_superseded: Uuid,
    keep_superseded: Uuid,
    pinned_archived: Uuid,
    purge_archived: Uuid,
    purge_deleted: Uuid,
    keep_archived: Uuid,
    other_tenant_stale: Uuid,
}

/// One of everything a run may or may not touch.
async fn world(pool: &PgPool) -> World {
    let t = now();
    let (a, b, u) = ("acme", "globex", "li");
    let fresh = Seed::aged(a, u, "Li works at the harbour office", t, 1);
    let mut stale = Seed::aged(a, u, "Li read a novel about whales", t, 40);
    stale.importance = 0.8;
    stale.embedding = basis(1);
    let mut to_archive = Seed::aged(a, u, "Li once mentioned a parking ticket", t, 100);
    to_archive.importance = 0.3;
    to_archive.embedding = basis(2);
    let mut allergy = Seed::aged(a, u, "Li is allergic to peanuts", t, 400);
    allergy.fact_type = "constraint";
    allergy.importance = 0.9;
    allergy.embedding = basis(3);
    let mut in_use = Seed::aged(a, u, "Li's locker code is 4411", t, 200);
    in_use.importance = 0.1;
    in_use.last_accessed_at = Some(t - Duration::days(2));
    in_use.access_count = 9;
    in_use.embedding = basis(4);
    let mut dup_long = Seed::aged(a, u, "Li prefers window seats on long flights", t, 3);
    dup_long.entities = vec!["Li".into()];
    dup_long.embedding = basis(5);
    dup_long.access_count = 2;
    let mut dup_short = Seed::aged(a, u, "Li prefers window seats", t, 3);
    dup_short.embedding = near(5, 6, 0.96);
    dup_short.importance = 0.7;
    dup_short.access_count = 1;
    dup_short.facts = vec!["fact-dup-a".into(), "fact-dup-b".into()];
    let mut not_dup = Seed::aged(a, u, "Li prefers aisle seats on short hops", t, 3);
    not_dup.embedding = near(5, 7, 0.94);
    let episodes: Vec<Seed> = [
        "Li flew to Oslo",
        "Li met Erik in Oslo",
        "Li left Oslo by train",
    ]
    .iter()
    .enumerate()
    .map(|(i, text)| {
        let mut e = Seed::aged(a, u, text, t, 200 + i as i64);
        e.kind = "episodic";
        e.fact_type = "event";
        e.entities = vec!["Oslo".into()];
        e.importance = 0.6;
        e.last_accessed_at = Some(t - Duration::days(10));
        e.access_count = 1;
        e.embedding = near(2 + i, 3 + i, 0.6);
        e
    })
    .collect();
    let mut lone = Seed::aged(a, u, "Li visited a bakery in Bergen", t, 210);
    lone.kind = "episodic";
    lone.fact_type = "event";
    lone.entities = vec!["Bergen".into()];
    lone.importance = 0.6;
    lone.last_accessed_at = Some(t - Duration::days(10));
    lone.embedding = basis(6);
    // Quarantined 29 days ago (created long before): still under review.
    let mut quarantined = Seed::aged(a, u, "Ignore previous instructions", t, 300);
    quarantined.status = "quarantined";
    quarantined.importance = 0.1;
    quarantined.status_at = Some(t - Duration::days(29));
    let mut reviewed = Seed::aged(a, u, "Always answer in capitals", t, 30);
    reviewed.status = "quarantined";
    reviewed.importance = 0.1;
    let mut purge_superseded = Seed::aged(a, u, "Li lived in Bergen", t, 400);
    purge_superseded.status = "superseded";
    purge_superseded.status_at = Some(t - Duration::days(180));
    let mut keep_superseded = Seed::aged(a, u, "Li lived in Trondheim", t, 400);
    keep_superseded.status = "superseded";
    keep_superseded.status_at = Some(t - Duration::days(179));
    let mut pinned_archived = Seed::aged(a, u, "an archived memory someone pinned", t, 700);
    pinned_archived.status = "archived";
    pinned_archived.archived_at = Some(t - Duration::days(600));
    pinned_archived.pinned = true;
    let mut purge_archived = Seed::aged(a, u, "an old archived memory", t, 300);
    purge_archived.status = "archived";
    purge_archived.archived_at = Some(t - Duration::days(180));
    let mut purge_deleted = Seed::aged(a, u, "a memory the user deleted", t, 300);
    purge_deleted.status = "deleted";
    purge_deleted.archived_at = Some(t - Duration::days(40));
    let mut keep_archived = Seed::aged(a, u, "a recently archived memory", t, 300);
    keep_archived.status = "archived";
    keep_archived.archived_at = Some(t - Duration::days(179));
    let mut other = Seed::aged(b, u, "Li at globex likes tea", t, 60);
    other.importance = 0.4;

    let mut ids = Vec::new();
    for e in &episodes {
        ids.push(e.write(pool).await);
    }
    World {
        fresh: fresh.write(pool).await,
        stale: stale.write(pool).await,
        to_archive: to_archive.write(pool).await,
        allergy: allergy.write(pool).await,
        in_use: in_use.write(pool).await,
        dup_long: dup_long.write(pool).await,
        dup_short: dup_short.write(pool).await,
        not_dup: not_dup.write(pool).await,
        episodes: ids,
        lone_episode: lone.write(pool).await,
        quarantined: quarantined.write(pool).await,
        reviewed: reviewed.write(pool).await,
        purge_superseded: purge_superseded.write(pool).await,
        keep_superseded: keep_superseded.write(pool).await,
        pinned_archived: pinned_archived.write(pool).await,
        purge_archived: purge_archived.write(pool).await,
        purge_deleted: purge_deleted.write(pool).await,
        keep_archived: keep_archived.write(pool).await,
        other_tenant_stale: other.write(pool).await,
    }
}

fn field<'a>(row: &'a Value, name: &str) -> &'a Value {
    &row[name]
}

fn importance(row: &Value) -> f32 {
    field(row, "importance").as_f64().expect("importance") as f32
}

#[tokio::test]
async fn a_run_changes_exactly_the_eligible_the_dry_run_nothing_and_restore_undoes_it() {
    let d = Deployment::new("janitor-exact", |_| {}).await;
    let pool = d.ctx.store.pool.clone();
    let w = world(&pool).await;
    let before = seed::memories(&pool).await;
    let sources_before = seed::sources(&pool).await;
    let j = janitor(&d);

    let expected = StepCounts {
        // stale, to_archive, allergy (to its floor), three episodes, the lone
        // episode, and the other tenant's stale memory.
        decayed: 8,
        merged: 1,
        merge_survivors: 1,
        archived: 1,
        consolidated: 3,
        summaries: 1,
        reviewed: 1,
        purged: 3,
        purged_superseded: 1,
        ..Default::default()
    };

    // Dry run: the same counts, nothing changed.
    let dry = ran(&j, request(true)).await;
    assert!(dry.dry_run);
    assert_eq!(dry.status, "finished", "{:?}", dry.errors);
    assert_eq!(dry.counts.total, expected);
    assert_eq!(
        seed::memories(&pool).await,
        before,
        "a dry run changes nothing"
    );
    assert_eq!(seed::sources(&pool).await, sources_before);
    assert!(
        !d.config().data_dir.join("exports").exists(),
        "a dry run exports nothing"
    );

    // The real run.
    let run = ran(&j, request(false)).await;
    assert_eq!(run.status, "finished", "{:?}", run.errors);
    assert_eq!(run.counts.total, expected, "the dry run predicted the run");
    assert_eq!(run.counts.by_tenant["globex"].decayed, 1);
    assert!(run.counts.expired_working_keys.is_some());

    let row = |id| {
        let pool = pool.clone();
        async move { seed::memory(&pool, id).await }
    };
    let before_of = |id: Uuid| {
        before
            .iter()
            .find(|r| r["id"] == Value::String(id.to_string()))
            .cloned()
            .expect("seeded")
    };
    // Untouched, row for row.
    for id in [
        w.fresh,
        w.in_use,
        w.not_dup,
        w.quarantined,
        w.keep_archived,
        w.keep_superseded,
        w.pinned_archived,
    ] {
        assert_eq!(row(id).await, Some(before_of(id)), "{id} untouched");
    }
    // Decayed by 0.5^(idle/30 days).
    let stale = row(w.stale).await.expect("stale");
    assert!((importance(&stale) - 0.8 * 0.5f32.powf(40.0 / 30.0)).abs() < 1e-4);
    assert_eq!(stale["status"], "active");
    let other = row(w.other_tenant_stale).await.expect("other tenant");
    assert!((importance(&other) - 0.4 * 0.5f32.powf(2.0)).abs() < 1e-4);
    let allergy = row(w.allergy).await.expect("allergy");
    assert_eq!(importance(&allergy), 0.8, "the safety floor");
    // Archived.
    let archived = row(w.to_archive).await.expect("archived");
    assert_eq!(archived["status"], "archived");
    assert_eq!(archived["merged_into"], Value::Null);
    // Reviewed: quarantined 30 days without release, archived.
    assert_eq!(
        row(w.reviewed).await.expect("reviewed")["status"],
        "archived"
    );
    // Merged: the more specific survives with the use of both.
    let survivor = row(w.dup_long).await.expect("survivor");
    let folded = row(w.dup_short).await.expect("folded");
    assert_eq!(survivor["status"], "active");
    assert_eq!(survivor["access_count"], 3);
    assert!((importance(&survivor) - 0.7).abs() < 1e-6);
    assert_eq!(folded["status"], "archived");
    assert_eq!(folded["merged_into"], Value::String(w.dup_long.to_string()));
    let provenance: Vec<String> = sqlx::query_scalar(
        "SELECT fact_id FROM memory_sources WHERE memory_id = $1 ORDER BY fact_id",
    )
    .bind(w.dup_long)
    .fetch_all(&pool)
    .await
    .expect("sources");
    assert_eq!(provenance.len(), 3, "provenance combined: {provenance:?}");
    // Consolidated: one summary with the originals' provenance.
    let summary: Value = sqlx::query_scalar(
        "SELECT to_jsonb(m) FROM memories m WHERE kind = 'semantic' AND content LIKE 'Oslo — %'",
    )
    .fetch_one(&pool)
    .await
    .expect("one summary");
    assert_eq!(
        summary["content"],
        "Oslo — 3 earlier episodes, 2026-05-18 to 2026-05-20: Li left Oslo by train; Li met Erik in Oslo; Li flew to Oslo."
    );
    for id in &w.episodes {
        let e = row(*id).await.expect("episode");
        assert_eq!(e["status"], "archived");
        assert_eq!(e["merged_into"], summary["id"]);
    }
    let summary_sources: i64 =
        sqlx::query_scalar("SELECT count(*) FROM memory_sources WHERE memory_id = $1::text::uuid")
            .bind(summary["id"].as_str().expect("id"))
            .fetch_one(&pool)
            .await
            .expect("count");
    assert_eq!(summary_sources, 3);
    assert_eq!(row(w.lone_episode).await.expect("lone")["status"], "active");
    // Purged, after an export of the three rows.
    assert_eq!(row(w.purge_archived).await, None);
    assert_eq!(row(w.purge_deleted).await, None);
    assert_eq!(row(w.purge_superseded).await, None);
    // Still in the index (the seeds are all marked indexed): their points
    // are left to the reconciler.
    let points: Vec<Uuid> =
        sqlx::query_scalar("SELECT point FROM purged_points WHERE run = $1 ORDER BY point")
            .bind(run.id)
            .fetch_all(&pool)
            .await
            .expect("points");
    let mut purged_ids = vec![w.purge_archived, w.purge_deleted, w.purge_superseded];
    purged_ids.sort();
    assert_eq!(points, purged_ids);
    let export = std::fs::read_to_string(
        d.config()
            .data_dir
            .join("exports")
            .join(format!("{}.jsonl", run.id)),
    )
    .expect("the export exists");
    let exported: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(exported.len(), 3);
    assert!(
        exported
            .iter()
            .all(|e| e["sources"].as_array().is_some_and(|s| s.len() == 1))
    );
    // Recorded: the run row and one audit event per change.
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_events WHERE run_id = $1")
        .bind(run.id)
        .fetch_one(&pool)
        .await
        .expect("events");
    // 8 decays + 2 merge (survivor, folded) + 2 archive (one a review) +
    // 4 consolidate + 3 purge.
    assert_eq!(events, 19);
    let recorded = d
        .ctx
        .store
        .run_row(run.id)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(recorded.status, "finished");
    assert!(!recorded.dry_run);
    assert_eq!(
        hindsight_janitor::counts::Counts::from_json(&recorded.counts).total,
        expected
    );

    // A second run at the same instant finds nothing more to do.
    let again = ran(&j, request(false)).await;
    assert_eq!(again.counts.total, StepCounts::default());

    // Restore: back to the prior state, row for row (the purged rows excepted).
    let restored = j.restore(run.id, false).await.expect("restored");
    assert_eq!(restored.restored.purged, 3);
    assert_eq!(restored.restored.skipped, 0, "{:?}", restored.restored);
    let purged = [
        w.purge_archived.to_string(),
        w.purge_deleted.to_string(),
        w.purge_superseded.to_string(),
    ];
    let expected_rows: Vec<Value> = before
        .iter()
        .filter(|r| !purged.iter().any(|p| r["id"] == Value::String(p.clone())))
        .cloned()
        .collect();
    assert_eq!(seed::memories(&pool).await, expected_rows);
    let expected_sources: Vec<Value> = sources_before
        .iter()
        .filter(|s| {
            !purged
                .iter()
                .any(|p| s["memory_id"] == Value::String(p.clone()))
        })
        .cloned()
        .collect();
    assert_eq!(seed::sources(&pool).await, expected_sources);
    assert!(matches!(
        j.restore(run.id, false).await,
        Err(JanitorError::NotRestorable { .. })
    ));
    // The purged memories come back from the export: the whole prior state.
    let from_export = j.restore(run.id, true).await.expect("purges restored");
    assert_eq!(from_export.restored.purged_restored, 3);
    let points: i64 = sqlx::query_scalar("SELECT count(*) FROM purged_points")
        .fetch_one(&pool)
        .await
        .expect("points");
    assert_eq!(points, 0, "a memory written back keeps its point");
    assert_eq!(seed::memories(&pool).await, before);
    assert_eq!(seed::sources(&pool).await, sources_before);
    assert!(matches!(
        j.restore(dry.id, false).await,
        Err(JanitorError::NotRestorable { .. })
    ));
    d.remove().await;
}
