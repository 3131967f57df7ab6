//! The steps of a run, in chunks: repair ([`crate::repair`]), decay and
//! archive (one pass), merge, review, consolidate, purge, turns (the last
//! three and review in [`crate::retention`]). What each step decides is plain logic ([`policy`],
//! [`similarity`](crate::similarity), [`consolidate`]); here it is read,
//! applied and counted.

use std::{collections::HashMap, time::Instant};

use chrono::{DateTime, Utc};
use hindsight_core::memory::{Kind, Status};
use hindsight_store::{
    Store,
    maintenance::steps::{self, Archive, Decay, Position, Survivor},
};
use hindsight_text::frame::Reading;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::{
    consolidate,
    counts::Counts,
    export::Export,
    janitor::Janitor,
    policy::{self, MemoryState, Policy},
    request::JanitorError,
    similarity, summary,
};

/// The state of one executing run.
pub(crate) struct Exec<'a> {
    pub(crate) janitor: &'a Janitor,
    pub(crate) id: Uuid,
    pub(crate) as_of: DateTime<Utc>,
    pub(crate) tenant: Option<String>,
    pub(crate) dry_run: bool,
    pub(crate) counts: Counts,
    pub(crate) chunks: usize,
    pub(crate) export: Export,
    /// In a real run, a second connection that reads the next page of decay
    /// and archive candidates while the current page is written (the pages
    /// hold different memories, and what was written is committed). A dry
    /// run reads through its own transaction, to see what it changed.
    pub(crate) reader: Option<PgConnection>,
}

/// What decay and archive change in one batch.
#[derive(Debug, Default)]
struct Changes {
    decays: Vec<Decay>,
    archives: Vec<Archive>,
}

/// A memory archived where it is (not folded into another).
pub(crate) fn archived(r: &steps::StateRow) -> Archive {
    Archive {
        id: r.id,
        tenant: r.tenant.clone(),
        into: None,
        before_status: r.status,
        before_archived_at: r.archived_at,
        before_updated_at: r.updated_at,
        before_status_at: r.status_at,
        importance: None,
    }
}

pub(crate) fn state(r: &steps::StateRow) -> MemoryState<'_> {
    MemoryState {
        fact_type: r.fact_type,
        kind: r.kind,
        status: r.status,
        content: &r.content,
        importance: r.importance,
        access_count: r.access_count,
        created_at: r.created_at,
        last_accessed_at: r.last_accessed_at,
        decayed_at: r.decayed_at,
        archived_at: r.archived_at,
        expires_at: r.expires_at,
        status_at: r.status_at,
        pinned: r.pinned,
    }
}

impl Exec<'_> {
    pub(crate) fn policy(&self) -> &Policy {
        &self.janitor.policy
    }

    pub(crate) async fn steps(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        let t = Instant::now();
        self.repair(conn).await?;
        self.step_done("repair", t);
        // Decay and archive in one pass (a memory archived is rewritten
        // once), before merge: what is archived is no longer compared (most
        // idle memories are archived, and merge reads every active vector).
        let t = Instant::now();
        self.decay_and_archive(conn).await?;
        self.step_done("decay_archive", t);
        let t = Instant::now();
        self.merge(conn).await?;
        self.step_done("merge", t);
        let t = Instant::now();
        self.review(conn).await?;
        self.step_done("review", t);
        let t = Instant::now();
        self.consolidate(conn).await?;
        self.step_done("consolidate", t);
        let t = Instant::now();
        self.purge(conn).await?;
        self.step_done("purge", t);
        let t = Instant::now();
        self.turns(conn).await?;
        self.step_done("turns", t);
        Ok(())
    }

    fn step_done(&mut self, step: &str, started: Instant) {
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(run = %self.id, step, seconds, dry_run = self.dry_run, "maintenance step done");
        self.counts.seconds.insert(step.into(), seconds);
    }

    /// Ends a chunk: its counts are saved in its transaction, then it commits.
    pub(crate) async fn commit(
        &mut self,
        mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    ) -> Result<(), JanitorError> {
        Store::save_run_counts(&mut tx, self.id, &self.counts.to_json()).await?;
        tx.commit().await?;
        self.chunks += 1;
        if self.janitor.crash_after_chunks == Some(self.chunks) {
            return Err(JanitorError::Crashed(self.id));
        }
        Ok(())
    }

    async fn decay_and_archive(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        let mut reader = self.reader.take();
        let result = self.decay_archive_pages(conn, reader.as_mut()).await;
        self.reader = reader;
        result
    }

    async fn decay_archive_pages(
        &mut self,
        conn: &mut PgConnection,
        mut reader: Option<&mut PgConnection>,
    ) -> Result<(), JanitorError> {
        let stale_before = self.as_of - self.policy().decay_after;
        let idle_before = self.as_of - self.policy().archive_idle;
        let (tenant, chunk) = (self.tenant.clone(), self.janitor.chunk);
        let read = async |c: &mut PgConnection, from: Position| {
            steps::decay_archive_candidates(
                c,
                tenant.as_deref(),
                stale_before,
                idle_before,
                from,
                chunk,
            )
            .await
        };
        let first = Position::default();
        let mut current = Some(read(reader.as_deref_mut().unwrap_or(conn), first).await?);
        while let Some(stretch) = current.take() {
            let mut batches = stretch.batches.iter().map(|page| self.decide(page));
            let head = batches.next().unwrap_or_default();
            let rest: Vec<Changes> = batches.collect();
            // The next stretch is read while the first batch of this one is written.
            match (stretch.next, reader.as_deref_mut()) {
                (Some(from), Some(r)) => {
                    let (next, applied) =
                        tokio::join!(read(r, from), self.apply_changes(conn, &head));
                    applied?;
                    current = Some(next?);
                }
                _ => self.apply_changes(conn, &head).await?,
            }
            for batch in &rest {
                self.apply_changes(conn, batch).await?;
            }
            if let (Some(from), None) = (stretch.next, &current) {
                current = Some(read(conn, from).await?);
            }
        }
        Ok(())
    }

    /// What decay and archive do to a batch: the archive judges the
    /// importance decay leaves.
    fn decide(&self, page: &[steps::StateRow]) -> Changes {
        let (policy, as_of) = (self.policy(), self.as_of);
        let mut changes = Changes::default();
        for r in page {
            let now = state(r);
            let importance = policy::decayed_importance(policy, &now, as_of);
            let decay = (importance != r.importance).then(|| Decay {
                id: r.id,
                tenant: r.tenant.clone(),
                importance,
                before_importance: r.importance,
                before_decayed_at: r.decayed_at,
            });
            if policy::archives(policy, &now, importance, as_of) {
                changes.archives.push(Archive {
                    importance: decay.as_ref().map(|d| d.importance),
                    ..archived(r)
                });
            }
            changes.decays.extend(decay);
        }
        changes
    }

    async fn apply_changes(
        &mut self,
        conn: &mut PgConnection,
        changes: &Changes,
    ) -> Result<(), JanitorError> {
        if changes.decays.is_empty() && changes.archives.is_empty() {
            return Ok(());
        }
        let mut tx = conn.begin().await?;
        steps::apply_decay_archive(
            &mut tx,
            self.id,
            self.as_of,
            &changes.decays,
            &changes.archives,
        )
        .await?;
        for d in &changes.decays {
            self.counts.record(&d.tenant, |c| c.decayed += 1);
        }
        for a in &changes.archives {
            self.counts.record(&a.tenant, |c| c.archived += 1);
        }
        self.commit(tx).await
    }

    async fn merge(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        let groups = steps::merge_groups(conn, self.tenant.as_deref()).await?;
        let mut survivors: Vec<Survivor> = Vec::new();
        let mut folded: Vec<Archive> = Vec::new();
        let mut groups = groups.iter();
        let cosine = self.policy().merge_cosine;
        let mut next = match groups.next() {
            Some(group) => Some(steps::merge_rows(conn, group).await?),
            None => None,
        };
        while let Some(rows) = next.take() {
            // One group's vectors are compared on a blocking thread while the
            // next group is read: the comparisons and Postgres take about as
            // long, and each has a core.
            let compared = tokio::task::spawn_blocking(move || {
                let vectors: Vec<&[f32]> = rows.iter().map(|r| r.embedding.as_slice()).collect();
                let mut pairs = similarity::near_pairs(&vectors, cosine);
                // The words decide what the vectors suggest: the model may not
                // read the script (to all-MiniLM-L6-v2 most Chinese sentences
                // are near one another).
                let mut readings: HashMap<usize, Reading> = HashMap::new();
                pairs.retain(|&(a, b)| {
                    for i in [a, b] {
                        readings
                            .entry(i)
                            .or_insert_with(|| Reading::new(&rows[i].content));
                    }
                    readings[&a].restated_by(&readings[&b]).is_some()
                });
                let components = similarity::components(rows.len(), &pairs);
                (rows, components)
            });
            next = match groups.next() {
                Some(group) => Some(steps::merge_rows(conn, group).await?),
                None => None,
            };
            let (rows, components) = match compared.await {
                Ok(done) => done,
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            };
            for component in components {
                let members: Vec<&steps::VectorRow> = component.iter().map(|&i| &rows[i]).collect();
                let survivor = most_specific(&members);
                let others: Vec<&&steps::VectorRow> =
                    members.iter().filter(|m| m.id != survivor.id).collect();
                survivors.push(Survivor {
                    id: survivor.id,
                    tenant: survivor.tenant.clone(),
                    merged: others.iter().map(|m| m.id).collect(),
                    importance: members.iter().map(|m| m.importance).fold(0.0, f32::max),
                    access_count: members.iter().map(|m| m.access_count).sum(),
                    last_accessed_at: members.iter().filter_map(|m| m.last_accessed_at).max(),
                    before_importance: survivor.importance,
                    before_access_count: survivor.access_count,
                    before_last_accessed_at: survivor.last_accessed_at,
                    before_updated_at: survivor.updated_at,
                });
                folded.extend(others.iter().map(|m| Archive {
                    id: m.id,
                    tenant: m.tenant.clone(),
                    into: Some(survivor.id),
                    before_status: Status::Active,
                    before_archived_at: None,
                    before_updated_at: m.updated_at,
                    before_status_at: m.status_at,
                    importance: None,
                }));
            }
            if folded.len() as i64 >= self.janitor.chunk {
                self.commit_merges(conn, &mut survivors, &mut folded)
                    .await?;
            }
        }
        self.commit_merges(conn, &mut survivors, &mut folded).await
    }

    async fn commit_merges(
        &mut self,
        conn: &mut PgConnection,
        survivors: &mut Vec<Survivor>,
        folded: &mut Vec<Archive>,
    ) -> Result<(), JanitorError> {
        if folded.is_empty() {
            return Ok(());
        }
        let mut tx = conn.begin().await?;
        steps::apply_survivors(&mut tx, self.id, survivors).await?;
        steps::apply_archive(&mut tx, self.id, self.as_of, "merge", folded).await?;
        for s in survivors.iter() {
            self.counts.record(&s.tenant, |c| c.merge_survivors += 1);
        }
        for f in folded.iter() {
            self.counts.record(&f.tenant, |c| c.merged += 1);
        }
        self.commit(tx).await?;
        survivors.clear();
        folded.clear();
        Ok(())
    }

    async fn consolidate(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        let created_before = self.as_of - self.policy().consolidate_age;
        let max_accesses = self.policy().consolidate_max_accesses;
        let groups =
            steps::consolidate_groups(conn, self.tenant.as_deref(), created_before, max_accesses)
                .await?;
        for group in groups {
            let rows = steps::consolidate_rows(conn, &group, created_before, max_accesses).await?;
            // The policy is the judge; the query only narrows the read.
            let rows: Vec<steps::VectorRow> = rows
                .into_iter()
                .filter(|r| {
                    let m = MemoryState {
                        fact_type: r.fact_type,
                        kind: Kind::Episodic,
                        status: Status::Active,
                        content: &r.content,
                        importance: r.importance,
                        access_count: r.access_count,
                        created_at: r.created_at,
                        last_accessed_at: r.last_accessed_at,
                        decayed_at: None,
                        archived_at: None,
                        expires_at: None,
                        status_at: r.status_at,
                        pinned: false,
                    };
                    policy::consolidates(self.policy(), &m, self.as_of)
                })
                .collect();
            let mut summaries = consolidate::summarise(&rows);
            if summaries.is_empty() {
                continue;
            }
            self.write_with_llm(&mut summaries).await;
            let by_id: std::collections::HashMap<Uuid, &steps::VectorRow> =
                rows.iter().map(|r| (r.id, r)).collect();
            for batch in summaries.chunks(self.janitor.chunk.max(1) as usize / 8 + 1) {
                let folded: Vec<Archive> = batch
                    .iter()
                    .flat_map(|s| {
                        s.originals
                            .iter()
                            .filter_map(|id| by_id.get(id))
                            .map(|r| Archive {
                                id: r.id,
                                tenant: r.tenant.clone(),
                                into: Some(s.memory.id),
                                before_status: Status::Active,
                                before_archived_at: None,
                                before_updated_at: r.updated_at,
                                before_status_at: r.status_at,
                                importance: None,
                            })
                    })
                    .collect();
                let written: Vec<_> = batch
                    .iter()
                    .map(|s| (s.memory.clone(), s.originals.clone()))
                    .collect();
                let mut tx = conn.begin().await?;
                steps::insert_summaries(&mut tx, self.id, self.as_of, &written).await?;
                steps::apply_archive(&mut tx, self.id, self.as_of, "consolidate", &folded).await?;
                for s in batch {
                    self.counts.record(&s.memory.tenant, |c| c.summaries += 1);
                }
                for f in &folded {
                    self.counts.record(&f.tenant, |c| c.consolidated += 1);
                }
                self.commit(tx).await?;
            }
        }
        Ok(())
    }

    /// Asks the LLM (when there is one, and not in a dry run) for each
    /// summary's text; on failure the rules' text stays.
    async fn write_with_llm(&mut self, summaries: &mut [consolidate::Summary]) {
        let Some(llm) = self.janitor.llm.clone() else {
            return;
        };
        if self.dry_run {
            return;
        }
        for s in summaries.iter_mut() {
            match summary::summarise(&llm, &s.memory.tenant, &s.topic, &s.episodes).await {
                Ok(text) => {
                    s.rewrite(text);
                    self.counts.llm_summaries += 1;
                }
                Err(e) => {
                    tracing::warn!(tenant = %s.memory.tenant, topic = %s.topic, error = %e, "LLM summary unavailable: keeping the rules' summary")
                }
            }
        }
    }
}

/// The member whose content is kept: the one naming the most entities, then
/// the longest, then the most important, then the oldest.
fn most_specific<'a>(members: &[&'a steps::VectorRow]) -> &'a steps::VectorRow {
    let mut best = members[0];
    for &m in &members[1..] {
        let key = |r: &steps::VectorRow| {
            (
                r.entities.len(),
                r.content.chars().count(),
                (r.importance * 1000.0) as i64,
                std::cmp::Reverse(r.created_at),
                std::cmp::Reverse(r.id),
            )
        };
        if key(m) > key(best) {
            best = m;
        }
    }
    best
}
