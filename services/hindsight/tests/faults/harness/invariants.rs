//! What became of a suite's turns, and every invariant checked afterwards.

use super::*;

/// What became of a suite's turns.
#[derive(Debug, Default)]
pub struct Counts {
    pub published: usize,
    pub stored: u64,
    pub kept: i64,
    pub dropped: i64,
    pub quarantined: i64,
    pub dlq: usize,
    pub by_extractor: BTreeMap<String, i64>,
    pub facts: i64,
    pub memories: i64,
    pub by_status: BTreeMap<String, i64>,
    pub indexed_points: u64,
}

impl Counts {
    pub fn extractors(&self) -> String {
        self.by_extractor
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn statuses(&self) -> String {
        self.by_status
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The counts as one line of a summary.
    pub fn line(&self) -> String {
        format!(
            "published {} (stored once each: {}), kept {}, dropped {}, DLQ {}, extracted by {}, facts {}, memories {} ({}), points in the index {}",
            self.published,
            self.stored,
            self.kept,
            self.dropped,
            self.dlq,
            self.extractors(),
            self.facts,
            self.memories,
            self.statuses(),
            self.indexed_points
        )
    }
}

async fn scalar(d: &Deployment, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(&d.ctx.store.pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Checks every invariant once the pipeline is drained and its processes
/// stopped (the embedded index is read here, so persist must have let go of
/// it): the counts, and every violation found.
pub async fn verify(d: &Deployment, turns: &Turns) -> (Counts, Vec<String>) {
    let mut bad = Vec::new();
    let pool = &d.ctx.store.pool;
    let mut counts = Counts {
        published: turns.envelopes.len(),
        ..Default::default()
    };

    // Every publish stored exactly once.
    counts.stored = d.stream_messages("TURNS").await;
    if counts.stored != turns.envelopes.len() as u64 {
        bad.push(format!(
            "TURNS holds {} messages for {} turns published",
            counts.stored,
            turns.envelopes.len()
        ));
    }

    // Every valid turn archived once with its fate, every invalid one in the DLQ.
    let archived: Vec<(String, String)> = sqlx::query_as("SELECT turn_id, fate FROM turns")
        .fetch_all(pool)
        .await
        .expect("turns");
    let archived_ids: HashSet<&str> = archived.iter().map(|(id, _)| id.as_str()).collect();
    for (_, fate) in &archived {
        match fate.as_str() {
            "kept" => counts.kept += 1,
            _ => counts.dropped += 1,
        }
    }
    let valid: HashSet<&str> = turns.valid.iter().map(String::as_str).collect();
    let missing: Vec<&&str> = valid
        .iter()
        .filter(|id| !archived_ids.contains(**id))
        .collect();
    if !missing.is_empty() {
        bad.push(format!(
            "{} valid turns not archived, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        ));
    }
    let strangers = archived_ids
        .iter()
        .filter(|id| !valid.contains(**id))
        .count();
    if strangers > 0 {
        bad.push(format!(
            "{strangers} archived turns that were not published as valid"
        ));
    }
    let letters = dead_letters(d).await.expect("DLQ readable");
    counts.dlq = letters.len();
    let mut lettered: HashMap<String, usize> = HashMap::new();
    for l in &letters {
        let id = serde_json::from_slice::<Value>(&l.payload)
            .ok()
            .and_then(|v| v["turn_id"].as_str().map(str::to_string))
            .unwrap_or_default();
        if l.stage != "filter" {
            bad.push(format!(
                "dead letter at {} ({} deliveries): {} — {}",
                l.stage, l.deliveries, l.reason, l.payload_preview
            ));
        } else if l.reason.trim().is_empty() {
            bad.push(format!("dead letter without a reason: {id}"));
        }
        *lettered.entry(id).or_default() += 1;
    }
    for id in &turns.invalid {
        match lettered.get(id) {
            Some(1) => {}
            Some(n) => bad.push(format!("invalid turn {id} dead-lettered {n} times")),
            None => bad.push(format!("invalid turn {id} not in the DLQ")),
        }
    }

    // Every kept turn extracted, and by whom.
    let unextracted = scalar(
        d,
        "SELECT count(*) FROM turns WHERE fate = 'kept' AND extract_outcome IS NULL",
    )
    .await;
    if unextracted > 0 {
        bad.push(format!("{unextracted} kept turns never extracted"));
    }
    counts.quarantined = scalar(d, "SELECT count(*) FROM turns WHERE quarantine").await;
    let extractors: Vec<(Option<String>, i64)> = sqlx::query_as(
        "SELECT extractor, count(*) FROM turns WHERE fate = 'kept' GROUP BY extractor",
    )
    .fetch_all(pool)
    .await
    .expect("extractors");
    counts.by_extractor = extractors
        .into_iter()
        .map(|(e, n)| (e.unwrap_or_else(|| "none".into()), n))
        .collect();

    // Every fact in exactly one memory; every memory with provenance.
    counts.facts = scalar(
        d,
        "SELECT coalesce(sum(jsonb_array_length(facts)), 0)::bigint FROM turns",
    )
    .await;
    let sources = scalar(d, "SELECT count(*) FROM memory_sources").await;
    if sources != counts.facts {
        bad.push(format!(
            "{} facts extracted, {sources} provenance rows",
            counts.facts
        ));
    }
    let unpersisted = scalar(
        d,
        "SELECT count(*) FROM turns t, jsonb_array_elements(t.facts) f
         WHERE NOT EXISTS (SELECT 1 FROM memory_sources s
                           WHERE s.tenant = t.tenant AND s.fact_id = f->>'fact_id')",
    )
    .await;
    if unpersisted > 0 {
        bad.push(format!("{unpersisted} facts in no memory"));
    }
    let orphans = scalar(
        d,
        "SELECT count(*) FROM memory_sources s WHERE NOT EXISTS (
             SELECT 1 FROM turns t, jsonb_array_elements(t.facts) f
             WHERE t.tenant = s.tenant AND t.turn_id = s.turn_id AND f->>'fact_id' = s.fact_id)",
    )
    .await;
    if orphans > 0 {
        bad.push(format!(
            "{orphans} provenance rows naming no extracted fact"
        ));
    }
    let twice = scalar(
        d,
        "SELECT count(*) FROM (SELECT 1 FROM memory_sources GROUP BY tenant, fact_id HAVING count(*) > 1) x",
    )
    .await;
    if twice > 0 {
        bad.push(format!("{twice} facts persisted more than once"));
    }
    let duplicates = scalar(
        d,
        "SELECT count(*) FROM (SELECT 1 FROM memories WHERE status = 'active'
             GROUP BY tenant, user_id, embedding_model, content_key HAVING count(*) > 1) x",
    )
    .await;
    if duplicates > 0 {
        bad.push(format!(
            "{duplicates} groups of active memories of one user with the same content key"
        ));
    }
    let unsourced = scalar(
        d,
        "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_sources s WHERE s.memory_id = m.id)",
    )
    .await;
    if unsourced > 0 {
        bad.push(format!("{unsourced} memories without provenance"));
    }
    counts.memories = scalar(d, "SELECT count(*) FROM memories").await;
    let statuses: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM memories GROUP BY status")
            .fetch_all(pool)
            .await
            .expect("statuses");
    counts.by_status = statuses.into_iter().collect();

    // The index caught up, and holds exactly the memories that belong in it.
    let pending = scalar(
        d,
        "SELECT count(*) FROM memories WHERE index_state = 'pending'",
    )
    .await;
    if pending > 0 {
        bad.push(format!("{pending} memories still pending indexing"));
    }
    let index =
        hindsight_index::open(&d.config().index, &d.config().data_dir).expect("the index opens");
    for (name, version, dimension) in d.ctx.store.embedding_models().await.expect("models") {
        let collection = hindsight_index::Collection::for_model(
            &d.config().namespace,
            &hindsight_core::embedding::ModelId {
                name: name.clone(),
                version: version.clone(),
                dimension: dimension.max(0) as usize,
            },
        );
        let points = index.count(&collection, None).await.expect("index count");
        let expected: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM memories WHERE embedding_model = $1 AND embedding_version = $2
                AND status = ANY($3)",
        )
        .bind(&name)
        .bind(&version)
        .bind(hindsight_core::closed_set::names(
            &hindsight_core::memory::Status::INDEXED,
        ))
        .fetch_one(pool)
        .await
        .expect("indexable memories");
        counts.indexed_points += points;
        if points != expected as u64 {
            bad.push(format!(
                "the index holds {points} points of {name}, Postgres {expected} indexable memories"
            ));
        }
    }
    (counts, bad)
}
