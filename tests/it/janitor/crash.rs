//! Two janitors at once perform one run; a run killed midway and run again
//! ends where an uninterrupted run does.

use super::*;

#[tokio::test]
async fn two_janitors_started_together_perform_one_run() {
    let d = Deployment::new("janitor-one-run", |_| {}).await;
    let pool = d.ctx.store.pool.clone();
    world(&pool).await;
    // The default schedule: its latest slot (last Sunday 02:00) is owed at start-up.
    let schedule = Schedule::parse("0 0 2 * * Sun").expect("cron");
    let slot = schedule.previous_slot(Utc::now()).expect("a slot");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let a = tokio::spawn(hindsight_janitor::schedule::serve(
        janitor(&d),
        schedule.clone(),
        shutdown.clone(),
    ));
    let b = tokio::spawn(hindsight_janitor::schedule::serve(
        janitor(&d),
        schedule.clone(),
        shutdown.clone(),
    ));
    let finished = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM maintenance_runs WHERE scheduled_for = $1 AND status = 'finished'",
        )
        .bind(slot)
        .fetch_one(&pool)
        .await
        .expect("count")
    };
    eventually(
        "the owed run finished",
        StdDuration::from_secs(30),
        || async { finished().await == 1 },
    )
    .await;
    // Both janitors are past their start-up check once the run is done and a moment passed.
    tokio::time::sleep(StdDuration::from_secs(1)).await;
    shutdown.cancel();
    a.await.expect("janitor a").expect("janitor a ran");
    b.await.expect("janitor b").expect("janitor b ran");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM maintenance_runs WHERE NOT dry_run")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(
        runs, 1,
        "one run for the slot, whatever the number of janitors"
    );
    // Asking again for the same slot is answered, not run.
    let again = janitor(&d)
        .run(RunRequest {
            dry_run: false,
            tenant: None,
            as_of: None,
            trigger: Trigger::Schedule,
            scheduled_for: Some(slot),
        })
        .await
        .expect("answered");
    assert!(matches!(again, Outcome::AlreadyServed { .. }), "{again:?}");
    // While one run holds the lock, another is told so.
    let lock = d
        .ctx
        .store
        .try_lock_janitor()
        .await
        .expect("lock")
        .expect("free");
    assert!(matches!(
        janitor(&d).run(request(false)).await.expect("answered"),
        Outcome::Busy
    ));
    lock.release().await.expect("released");
    d.remove().await;
}

/// The state two runs must agree on: memories (less the clock of their
/// last write) and provenance.
async fn state(pool: &PgPool) -> (Vec<Value>, Vec<Value>) {
    let rows = seed::memories(pool)
        .await
        .into_iter()
        .map(|mut r| {
            if let Some(o) = r.as_object_mut() {
                o.remove("updated_at");
            }
            r
        })
        .collect();
    (rows, seed::sources(pool).await)
}

/// Asserts two states are equal, naming the rows and fields that differ.
fn same_state(got: &(Vec<Value>, Vec<Value>), want: &(Vec<Value>, Vec<Value>), crash_after: usize) {
    let mut differences = Vec::new();
    for (g, w) in got.0.iter().zip(&want.0) {
        if g == w {
            continue;
        }
        let fields: Vec<String> = w
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, v)| g.get(k.as_str()) != Some(v))
                    .map(|(k, v)| {
                        format!("{k}: {} != {v}", g.get(k.as_str()).unwrap_or(&Value::Null))
                    })
                    .collect()
            })
            .unwrap_or_default();
        differences.push(format!(
            "{} {}: {}",
            w["id"],
            w["content"],
            fields.join(", ")
        ));
    }
    assert_eq!(
        got.0.len(),
        want.0.len(),
        "killed after {crash_after}: row count"
    );
    assert!(
        differences.is_empty(),
        "killed after {crash_after}:\n{}",
        differences.join("\n")
    );
    assert_eq!(got.1, want.1, "killed after {crash_after}: provenance");
}

/// Writes the same world (same ids) into a database: memories first, then
/// what refers to them.
async fn copy_world(from: &PgPool, to: &PgPool) {
    for table in ["memories", "memory_vectors", "memory_sources"] {
        let rows: Vec<Value> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT to_jsonb(r) FROM {table} r"
        )))
        .fetch_all(from)
        .await
        .expect("rows");
        for r in rows {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {table} SELECT * FROM jsonb_populate_record(NULL::{table}, $1)"
            )))
            .bind(r)
            .execute(to)
            .await
            .expect("copied");
        }
    }
}

#[tokio::test]
async fn a_run_killed_midway_and_rerun_ends_where_an_uninterrupted_run_does() {
    let reference = Deployment::new("janitor-whole", |_| {}).await;
    let pool = reference.ctx.store.pool.clone();
    world(&pool).await;
    let original = Deployment::new("janitor-original", |_| {}).await;
    copy_world(&pool, &original.ctx.store.pool).await;
    let whole = ran(&janitor(&reference).with_chunk(2), request(false)).await;
    let expected = state(&pool).await;

    // Killed after the first chunk, halfway, and before the last.
    assert!(whole.chunks >= 6, "{} chunks", whole.chunks);
    for crash_after in [1, whole.chunks / 2, whole.chunks - 1] {
        let d = Deployment::new("janitor-killed", |_| {}).await;
        copy_world(&original.ctx.store.pool, &d.ctx.store.pool).await;
        let dying = janitor(&d).with_chunk(2).crash_after_chunks(crash_after);
        match dying.run(request(false)).await {
            Err(JanitorError::Crashed(_)) => {}
            other => panic!("expected the simulated crash, got {other:?}"),
        }
        // A new janitor (a restarted process) resumes the run with its clock.
        let rerun = ran(&janitor(&d).with_chunk(2), RunRequest::manual(false)).await;
        assert!(rerun.resumed, "the interrupted run is resumed");
        assert_eq!(rerun.as_of, now(), "with the clock it started with");
        assert_eq!(
            rerun.counts.total, whole.counts.total,
            "killed after {crash_after}"
        );
        same_state(&state(&d.ctx.store.pool).await, &expected, crash_after);
        d.remove().await;
    }
    original.remove().await;
    reference.remove().await;
}
