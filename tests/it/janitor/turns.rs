//! The retention of the `turns` archive: old turns emptied, older ones
//! deleted, each exported first; the dry run predicts the run exactly, and a
//! restore writes every turn back as it was.

use super::*;

/// A turn received `days` before `now()`, with content, metadata and facts.
async fn turn(pool: &PgPool, tenant: &str, id: &str, days: i64) {
    let at = now() - Duration::days(days);
    sqlx::query(
        "INSERT INTO turns (tenant, turn_id, user_id, session_id, speaker, role, source, trust,
                            content, metadata, ts, received_at, stream_seq, fate, reason, flags,
                            extract_outcome, extractor, facts)
         VALUES ($1, $2, 'li', 's1', 'Li', 'user', 'user', 'high', $3, $4, $5, $5, 1, 'kept', NULL,
                 '{screen:0.01}', 'facts', 'rules', $6)",
    )
    .bind(tenant)
    .bind(id)
    .bind(format!("Turn {id}: I moved to Oslo"))
    .bind(serde_json::json!({"channel": "chat", "turn": id}))
    .bind(at)
    .bind(serde_json::json!([{"fact_id": format!("{id}-f1"), "content": "Li moved to Oslo"}]))
    .execute(pool)
    .await
    .expect("turn written");
}

async fn turns(pool: &PgPool) -> Vec<Value> {
    sqlx::query_scalar("SELECT to_jsonb(t) FROM turns t ORDER BY tenant, turn_id")
        .fetch_all(pool)
        .await
        .expect("turns read")
}

#[tokio::test]
async fn old_turns_are_emptied_then_deleted_exported_first_and_restored_exactly() {
    let d = Deployment::new("janitor-turns", |_| {}).await;
    let pool = d.ctx.store.pool.clone();
    // Received 1 and 29 days ago: kept whole. 30, 100, 179 (and globex's 50):
    // emptied. 180 and 400: deleted.
    for (id, days) in [
        ("t01", 1),
        ("t29", 29),
        ("t30", 30),
        ("t100", 100),
        ("t179", 179),
        ("t180", 180),
        ("t400", 400),
    ] {
        turn(&pool, "acme", id, days).await;
    }
    turn(&pool, "globex", "g50", 50).await;
    let before = turns(&pool).await;
    let j = janitor(&d);
    let expected = StepCounts {
        turns_emptied: 4,
        turns_purged: 2,
        ..Default::default()
    };

    let dry = ran(&j, request(true)).await;
    assert_eq!(dry.status, "finished", "{:?}", dry.errors);
    assert_eq!(dry.counts.total, expected);
    assert_eq!(turns(&pool).await, before, "a dry run changes nothing");
    assert!(!d.config().data_dir.join("exports").exists());

    let run = ran(&j, request(false)).await;
    assert_eq!(run.status, "finished", "{:?}", run.errors);
    assert_eq!(run.counts.total, expected, "the dry run predicted the run");
    assert_eq!(run.counts.by_tenant["globex"].turns_emptied, 1);

    let after = turns(&pool).await;
    let ids: Vec<&str> = after
        .iter()
        .map(|t| t["turn_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["t01", "t100", "t179", "t29", "t30", "g50"]);
    for t in &after {
        let id = t["turn_id"].as_str().expect("id");
        let was = before
            .iter()
            .find(|b| b["turn_id"] == t["turn_id"])
            .expect("seeded");
        if matches!(id, "t01" | "t29") {
            assert_eq!(t, was, "{id} untouched");
            continue;
        }
        assert_eq!(t["content"], "", "{id} emptied");
        assert_eq!(t["metadata"], serde_json::json!({}));
        assert_eq!(t["facts"], Value::Null);
        assert!(t["content_dropped_at"].is_string());
        // What stays: who, when, what became of it and why.
        for kept in [
            "tenant",
            "user_id",
            "session_id",
            "speaker",
            "role",
            "ts",
            "received_at",
            "stream_seq",
            "fate",
            "reason",
            "flags",
            "extract_outcome",
        ] {
            assert_eq!(t[kept], was[kept], "{id}: {kept} kept");
        }
    }
    let export = std::fs::read_to_string(
        d.config()
            .data_dir
            .join("exports")
            .join(format!("{}.jsonl", run.id)),
    )
    .expect("the export exists");
    let lines: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(lines.len(), 6);
    for line in &lines {
        assert_eq!(line["record"], "turn");
        let mut row = line.clone();
        row.as_object_mut().expect("object").remove("record");
        assert!(before.contains(&row), "exported as it was: {line}");
    }

    let again = ran(&j, request(false)).await;
    assert_eq!(again.counts.total, StepCounts::default());

    // Without --purged the turns stay as the run left them; with it, as before.
    let plain = j.restore(run.id, false).await.expect("restored");
    assert_eq!(plain.turns.refilled + plain.turns.reinserted, 0);
    assert_eq!(turns(&pool).await, after);
    let back = j.restore(run.id, true).await.expect("turns restored");
    assert_eq!((back.turns.refilled, back.turns.reinserted), (4, 2));
    assert_eq!(turns(&pool).await, before);
    d.remove().await;
}
