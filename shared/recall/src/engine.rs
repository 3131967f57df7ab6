//! The recall engine: channels concurrently, RRF, the score, conflicts, the
//! budget, then access counting off the reply path.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use hindsight_embedder::Embedder;
use hindsight_index::{Collection, Scope, VectorIndex};
use hindsight_shared::{
    Namespace,
    config::RecallConfig,
    events,
    recall::{
        budget, conflicts, diversity, entities,
        fusion::{self, RRF_K, Weights},
        memory::RecalledMemory,
    },
    store::{
        Store, StoreError,
        keyword::KeywordQuery,
        recall::{Filters, MemoryRow},
    },
};
use uuid::Uuid;

use crate::{
    Timings,
    request::{ExplainedCandidate, RecallRequest, RecallResponse, RequestError},
    working::WorkingMemory,
};

/// How many candidates each channel proposes.
pub const CHANNEL_DEPTH: usize = 50;

#[derive(Debug, thiserror::Error)]
pub enum RecallError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("recall could not read memories: {0}")]
    Store(#[from] StoreError),
}

/// Answers recall requests. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Recaller {
    store: Store,
    index: Option<Arc<dyn VectorIndex>>,
    embedder: Option<Arc<dyn Embedder>>,
    namespace: Namespace,
    weights: Weights,
    max_tokens: usize,
    index_timeout: Duration,
    working: Option<WorkingMemory>,
    record_access: bool,
    spread_sources: bool,
    /// Which of [`crate::CHANNELS`] run (all, unless an evaluation compares).
    channels: [bool; 4],
}

impl Recaller {
    /// A recaller with every channel. Without an index or an embedder, the
    /// dense channel is off and every answer says it is degraded.
    pub fn new(
        store: Store,
        index: Option<Arc<dyn VectorIndex>>,
        embedder: Option<Arc<dyn Embedder>>,
        namespace: Namespace,
        config: &RecallConfig,
    ) -> Self {
        let [relevance, recency, importance, access] = config.weights;
        Self {
            store,
            index,
            embedder,
            namespace,
            weights: Weights {
                relevance,
                recency,
                importance,
                access,
                half_life_hours: config.half_life.as_secs_f64() / 3600.0,
            },
            max_tokens: config.max_tokens,
            index_timeout: config.index_timeout,
            working: None,
            record_access: true,
            spread_sources: true,
            channels: [true; 4],
        }
    }

    pub fn with_working_memory(mut self, working: WorkingMemory) -> Self {
        self.working = Some(working);
        self
    }

    /// Whether answers count as accesses (an evaluation turns this off so
    /// that its own questions do not change the scores).
    pub fn recording_access(mut self, on: bool) -> Self {
        self.record_access = on;
        self
    }

    /// Whether memories that add no new source turn move after those that do
    /// ([`diversity::spread_sources`]); on by default.
    pub fn spreading_sources(mut self, on: bool) -> Self {
        self.spread_sources = on;
        self
    }

    /// Runs only the channels marked true (for evaluations that compare channels).
    pub fn with_channels(mut self, channels: [bool; 4]) -> Self {
        self.channels = channels;
        self
    }

    /// Other score weights (for evaluations that compare settings).
    pub fn with_weights(mut self, weights: Weights) -> Self {
        self.weights = weights;
        self
    }

    pub fn weights(&self) -> Weights {
        self.weights
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.as_ref()
    }

    pub fn working(&self) -> Option<&WorkingMemory> {
        self.working.as_ref()
    }

    /// Recalls for one tenant; the tenant comes from the caller's credentials.
    pub async fn recall(
        &self,
        tenant: &str,
        req: &RecallRequest,
    ) -> Result<RecallResponse, RecallError> {
        self.recall_timed(tenant, req)
            .await
            .map(|(answer, _)| answer)
    }

    /// [`Self::recall`], also saying where the time went.
    pub async fn recall_timed(
        &self,
        tenant: &str,
        req: &RecallRequest,
    ) -> Result<(RecallResponse, Timings), RecallError> {
        req.validate()?;
        let mut timings = Timings::default();
        let started = Instant::now();
        let statuses = req.statuses();
        let filters = Filters {
            session_id: req.session_id.clone(),
            fact_types: req.fact_types.clone(),
            occurred_from: req.from,
            occurred_to: req.to,
        };
        let query_entities = entities::of_query(&req.query, &req.entities);
        let keyword_query = KeywordQuery {
            tenant,
            user_id: &req.user_id,
            text: &req.query,
            statuses: &statuses,
            limit: CHANNEL_DEPTH,
        };
        let use_filter_channel = !filters.is_empty() || req.query.trim().is_empty();
        let (
            (dense, dense_time),
            (keyword, keyword_time),
            (filtered, filter_time),
            (entity, entity_time),
            working,
        ) = tokio::join!(
            timed(self.dense(tenant, req, &statuses)),
            timed(self.store.keyword_search(&keyword_query)),
            timed(async {
                if use_filter_channel {
                    self.store
                        .filter_channel(tenant, &req.user_id, &statuses, &filters, CHANNEL_DEPTH)
                        .await
                        .map(Some)
                } else {
                    Ok(None)
                }
            }),
            timed(self.store.entity_channel(
                tenant,
                &req.user_id,
                &statuses,
                &query_entities,
                CHANNEL_DEPTH,
            )),
            self.working_memory(tenant, req),
        );
        timings.dense = dense_time;
        timings.keyword = keyword_time;
        timings.entity = entity_time;
        let filtered = filtered?;
        if filtered.is_some() {
            timings.filter = filter_time;
        }
        let (dense, degraded_reason) = match dense {
            Ok((ids, embed_time)) => {
                timings.embed = embed_time;
                (ids, None)
            }
            Err(reason) => {
                events::RecallDegraded {
                    tenant,
                    reason: &reason,
                }
                .emit();
                (Vec::new(), Some(reason))
            }
        };
        let keyword: Vec<Uuid> = keyword?.into_iter().map(|h| h.id).collect();
        let mut channels = [dense, keyword, filtered.unwrap_or_default(), entity?];
        for (ranking, on) in channels.iter_mut().zip(self.channels) {
            if !on {
                ranking.clear();
            }
        }
        let fused = fusion::rrf(&channels, RRF_K);

        let ids: Vec<Uuid> = fused.iter().map(|f| f.id).collect();
        let rows_started = Instant::now();
        let rows: HashMap<Uuid, MemoryRow> = self
            .store
            .recall_rows(tenant, &req.user_id, &statuses, &filters, &ids)
            .await?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        // Relevance is scaled over the candidates that can be returned.
        let present = fused.iter().filter(|f| rows.contains_key(&f.id));
        let (min, max) = present.fold((f64::MAX, f64::MIN), |(lo, hi), f| {
            (lo.min(f.rrf), hi.max(f.rrf))
        });
        timings.rows = rows_started.elapsed();
        let rank_started = Instant::now();
        let now = Utc::now();
        let mut ranked = Vec::new();
        let mut explained = Vec::new();
        for f in &fused {
            let Some(row) = rows.get(&f.id) else {
                if req.explain {
                    let mut e =
                        ExplainedCandidate::new(f.id, String::new(), &f.ranks, f.rrf, zero());
                    e.left_out = Some("outside the request's filters or statuses".into());
                    explained.push(e);
                }
                continue;
            };
            // Recency is that of the information: when it happened or was
            // said, not when this row was written (a replayed history would
            // otherwise look brand new, and undated facts newer than dated ones).
            let age_hours = (now - row.valid_from.unwrap_or(row.created_at))
                .num_seconds()
                .max(0) as f64
                / 3600.0;
            let parts = fusion::score(
                &self.weights,
                fusion::relevance(f.rrf, min, max),
                age_hours,
                f64::from(row.importance),
                i64::from(row.access_count),
            );
            if req.explain {
                explained.push(ExplainedCandidate::new(
                    f.id,
                    row.content.clone(),
                    &f.ranks,
                    f.rrf,
                    parts,
                ));
            }
            ranked.push(recalled(row, parts.score));
        }
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        if self.spread_sources {
            ranked = diversity::spread_sources(ranked);
        }
        let mut memories =
            budget::cut(ranked, req.top_k, req.max_tokens.unwrap_or(self.max_tokens));
        let links: Vec<(Uuid, Option<Uuid>)> = memories
            .iter()
            .map(|m| (m.id, rows.get(&m.id).and_then(|r| r.superseded_by)))
            .collect();
        conflicts::flag(&mut memories, &links);
        timings.rank = rank_started.elapsed();

        if req.explain {
            for e in &mut explained {
                if memories.iter().any(|m| m.id == e.id) {
                    e.returned = true;
                } else if e.left_out.is_none() {
                    e.left_out =
                        Some("ranked below the cut (top_k, dynamic k or token budget)".into());
                }
            }
            explained.sort_by(|a, b| b.score.total_cmp(&a.score));
        }
        if self.record_access && !memories.is_empty() {
            let store = self.store.clone();
            let ids: Vec<Uuid> = memories.iter().map(|m| m.id).collect();
            tokio::spawn(async move {
                if let Err(e) = store.record_access(&ids).await {
                    tracing::warn!(error = %e, "could not record recall accesses");
                }
            });
        }
        let tokens = memories
            .iter()
            .map(|m| budget::estimate_tokens(&m.content))
            .sum();
        timings.total = started.elapsed();
        timings.emit();
        events::Recalled {
            tenant,
            elapsed: timings.total,
            memories: memories.len(),
            tokens,
        }
        .emit();
        let answer = RecallResponse {
            memories,
            degraded: degraded_reason.is_some(),
            degraded_reason,
            working_memory: working,
            tokens,
            explain: req.explain.then_some(explained),
        };
        Ok((answer, timings))
    }

    /// The dense channel and how long its query embedding took, or why it
    /// could not answer.
    async fn dense(
        &self,
        tenant: &str,
        req: &RecallRequest,
        statuses: &[String],
    ) -> Result<(Vec<Uuid>, Duration), String> {
        let (Some(index), Some(embedder)) = (&self.index, &self.embedder) else {
            return Err("no vector index in this process; answered from keyword search".into());
        };
        if req.query.trim().is_empty() {
            return Ok((Vec::new(), Duration::ZERO));
        }
        let search = async {
            let embed_started = Instant::now();
            let vector = embedder
                .embed(std::slice::from_ref(&req.query))
                .await
                .map_err(|e| format!("query embedding failed ({e}); answered from keyword search"))?
                .into_iter()
                .next()
                .ok_or_else(|| {
                    "the embedder returned no vector; answered from keyword search".to_string()
                })?;
            let embed_time = embed_started.elapsed();
            let collection = Collection::for_model(&self.namespace, embedder.model());
            let scope = Scope {
                tenant: tenant.to_string(),
                user_id: req.user_id.clone(),
                statuses: statuses.to_vec(),
                fact_types: req.fact_types.clone(),
                session_id: req.session_id.clone(),
                // The time range is applied in Postgres, on the memory's date
                // (when it happened, else when it was learnt).
                occurred_from: None,
                occurred_to: None,
            };
            index
                .search(&collection, &vector, &scope, CHANNEL_DEPTH)
                .await
                .map(|hits| (hits.into_iter().map(|h| h.id).collect(), embed_time))
                .map_err(|e| format!("index unavailable ({e}); answered from keyword search"))
        };
        match tokio::time::timeout(self.index_timeout, search).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "index did not answer within {} ms; answered from keyword search",
                self.index_timeout.as_millis()
            )),
        }
    }

    async fn working_memory(
        &self,
        tenant: &str,
        req: &RecallRequest,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        let (Some(session), Some(working)) = (&req.session_id, &self.working) else {
            return None;
        };
        match working.get(tenant, &req.user_id, session).await {
            Ok(map) => Some(map),
            Err(e) => {
                tracing::warn!(error = %e, "working memory unavailable for recall");
                None
            }
        }
    }
}

/// Runs a future and measures it.
async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = work.await;
    (out, started.elapsed())
}

fn zero() -> fusion::Parts {
    fusion::Parts {
        relevance: 0.0,
        recency: 0.0,
        importance: 0.0,
        access: 0.0,
        score: 0.0,
    }
}

/// A row as the answer shows it.
pub fn recalled(row: &MemoryRow, score: f64) -> RecalledMemory {
    RecalledMemory {
        id: row.id,
        content: row.content.clone(),
        fact_type: row.fact_type.clone(),
        status: row.status.clone(),
        importance: row.importance,
        confidence: row.confidence,
        source: row.source_trust.clone(),
        occurred_at: row.occurred_at,
        created_at: row.created_at,
        provenance: row.provenance.clone(),
        score,
        conflicts_with: Vec::new(),
    }
}
