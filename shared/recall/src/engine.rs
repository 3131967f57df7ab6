//! The recall engine: channels concurrently, RRF, the score, conflicts, the
//! budget, then access counting off the reply path.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use hindsight_core::{Namespace, embedding::cosine, memory::Status};
use hindsight_embedder::Embedder;
use hindsight_index::{Collection, Hit, Scope, VectorIndex};
use hindsight_shared::{
    config::RecallConfig,
    events,
    recall::{
        budget, conflicts, diversity, entities,
        fusion::{self, Fused, Signal, Weights},
        memory::{self, RecalledMemory},
        second_hop, sources, when,
    },
    store::{
        Store, StoreError,
        keyword::{KeywordQuery, KeywordScorer},
        recall::{Filters, MemoryRow, RecallRow},
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
/// How many of the first round's best memories seed the second hop.
pub const SECOND_HOP_SEEDS: usize = 3;

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
    config: RecallConfig,
    working: Option<WorkingMemory>,
    record_access: bool,
    spread_sources: bool,
}

/// What the dense channel found: its hits, the query's vector and how long
/// embedding it took.
struct Dense {
    hits: Vec<Hit>,
    vector: Vec<f32>,
    embed_time: Duration,
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
        Self {
            store,
            index,
            embedder,
            namespace,
            config: config.clone(),
            working: None,
            record_access: true,
            spread_sources: true,
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

    /// Other fusion settings and weights (for evaluations that compare settings).
    pub fn with_config(mut self, config: RecallConfig) -> Self {
        self.config = config;
        self
    }

    pub fn config(&self) -> &RecallConfig {
        &self.config
    }

    pub fn weights(&self) -> Weights {
        let [relevance, recency, importance, access] = self.config.weights;
        Weights {
            relevance,
            recency,
            importance,
            access,
            half_life_hours: self.config.half_life.as_secs_f64() / 3600.0,
        }
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
        let now = Utc::now();
        let statuses = req.statuses();
        let filters = Filters {
            session_id: req.session_id.clone(),
            fact_types: req.fact_type_filter(),
            occurred_from: req.from,
            occurred_to: req.to,
        };
        let [dense_w, keyword_w, filter_w, entity_w] = self.config.signal_weights;
        let query_entities = if entity_w > 0.0 {
            entities::of_query(&req.query, &req.entities)
        } else {
            Vec::new()
        };
        let keyword_query = KeywordQuery {
            tenant,
            user_id: &req.user_id,
            text: if keyword_w > 0.0 { &req.query } else { "" },
            statuses: &statuses,
            limit: CHANNEL_DEPTH,
            matching: self.config.matching,
        };
        let use_filter_channel =
            filter_w > 0.0 && (!filters.is_empty() || req.query.trim().is_empty());
        let (
            (dense, dense_time),
            (keyword, keyword_time),
            (filtered, filter_time),
            (entity, entity_time),
            working,
        ) = tokio::join!(
            timed(self.dense(tenant, req, &statuses, dense_w > 0.0)),
            timed(self.store.keyword_search(&keyword_query)),
            timed(async {
                if use_filter_channel {
                    self.store
                        .filter_channel(tenant, &req.user_id, &statuses, &filters, CHANNEL_DEPTH)
                        .await
                } else {
                    Ok(Vec::new())
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
        if use_filter_channel {
            timings.filter = filter_time;
        }
        let (dense, degraded_reason) = match dense {
            Ok(d) => {
                timings.embed = d.embed_time;
                (d, None)
            }
            Err(reason) => {
                events::RecallDegraded {
                    tenant,
                    reason: &reason,
                }
                .emit();
                (
                    Dense {
                        hits: Vec::new(),
                        vector: Vec::new(),
                        embed_time: Duration::ZERO,
                    },
                    Some(reason),
                )
            }
        };
        let keyword = keyword?;
        let filtered = filtered?;
        let entity = entity?;

        // Every channel's candidates, each read once and scored by every signal.
        let mut ids: Vec<Uuid> = dense.hits.iter().map(|h| h.id).collect();
        ids.extend(keyword.hits.iter().map(|h| h.id));
        ids.extend(filtered.iter().copied());
        ids.extend(entity.ids.iter().copied());
        let rows_started = Instant::now();
        let mut rows = self
            .rows(tenant, req, &statuses, &filters, &ids, &dense)
            .await?;
        timings.rows = rows_started.elapsed();

        let rank_started = Instant::now();
        let periods = when::periods(&req.query, now);
        let scoring = Scoring {
            config: &self.config,
            dense: &dense,
            keyword: &keyword.scorer,
            filtered: &filtered,
            entities: &entity.entities,
        };
        let mut fused = scoring.fuse(&ids, &rows, None);
        if self.config.second_hop > 0.0 && !dense.vector.is_empty() {
            let hop_started = Instant::now();
            if let Some(hop) = self
                .second_hop(tenant, req, &statuses, &filters, &dense, &fused, &rows)
                .await?
            {
                ids.extend(hop.hits.iter().map(|h| h.id));
                for (id, row) in hop.rows {
                    rows.entry(id).or_insert(row);
                }
                fused = scoring.fuse(&ids, &rows, Some((&hop.vector, &hop.hits)));
            }
            timings.second_hop = hop_started.elapsed();
        }

        let weights = self.weights();
        let mut ranked = Vec::new();
        let mut explained = Vec::new();
        for f in &fused {
            let Some(row) = rows.get(&f.id) else {
                if req.explain {
                    let mut e =
                        ExplainedCandidate::new(f.id, String::new(), &f.ranks, f.relevance, zero());
                    e.left_out = Some("outside the request's filters or statuses".into());
                    explained.push(e);
                }
                continue;
            };
            let m = &row.memory;
            // Recency is that of the information: when it happened or was
            // said, not when this row was written (a replayed history would
            // otherwise look brand new, and undated facts newer than dated ones).
            let dated = m.valid_from.unwrap_or(m.created_at);
            let age_hours = (now - dated).num_seconds().max(0) as f64 / 3600.0;
            let in_period = periods.iter().any(|p| p.contains(dated));
            let relevance = f.relevance
                + if in_period {
                    self.config.time_boost
                } else {
                    0.0
                };
            let parts = fusion::score(
                &weights,
                relevance,
                age_hours,
                f64::from(m.importance),
                i64::from(m.access_count),
            );
            if req.explain {
                explained.push(ExplainedCandidate::new(
                    f.id,
                    m.content.clone(),
                    &f.ranks,
                    f.relevance,
                    parts,
                ));
            }
            ranked.push(recalled(m, parts.score));
        }
        ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
        if self.spread_sources {
            ranked = diversity::spread_sources(ranked);
        }
        ranked = sources::users_word_first(ranked);
        let mut memories = budget::cut(
            ranked,
            req.top_k,
            req.max_tokens.unwrap_or(self.config.max_tokens),
        );
        let links: Vec<(Uuid, Option<Uuid>)> = memories
            .iter()
            .map(|m| (m.id, rows.get(&m.id).and_then(|r| r.memory.superseded_by)))
            .collect();
        conflicts::flag(&mut memories, &links);
        timings.rank = rank_started.elapsed().saturating_sub(timings.second_hop);

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
        let tokens = memories.iter().map(budget::memory_tokens).sum();
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

    /// The candidates' rows, by id, with the vectors of those the dense
    /// channel did not score (so that every candidate gets its cosine).
    async fn rows(
        &self,
        tenant: &str,
        req: &RecallRequest,
        statuses: &[Status],
        filters: &Filters,
        ids: &[Uuid],
        dense: &Dense,
    ) -> Result<HashMap<Uuid, RecallRow>, StoreError> {
        let mut unique = ids.to_vec();
        unique.sort();
        unique.dedup();
        let unscored: Vec<Uuid> = if dense.vector.is_empty() {
            Vec::new()
        } else {
            unique
                .iter()
                .filter(|id| !dense.hits.iter().any(|h| h.id == **id))
                .copied()
                .collect()
        };
        Ok(self
            .store
            .recall_rows(tenant, &req.user_id, statuses, filters, &unique, &unscored)
            .await?
            .into_iter()
            .map(|r| (r.memory.id, r))
            .collect())
    }

    /// The second hop: the query's vector moved towards the first round's
    /// best memories searches again (pseudo-relevance feedback), so that
    /// memories that share meaning with what was found, but not with the
    /// question's words, can join. `None` when there is nothing to seed it.
    #[allow(clippy::too_many_arguments)]
    async fn second_hop(
        &self,
        tenant: &str,
        req: &RecallRequest,
        statuses: &[Status],
        filters: &Filters,
        dense: &Dense,
        fused: &[Fused],
        rows: &HashMap<Uuid, RecallRow>,
    ) -> Result<Option<SecondHop>, StoreError> {
        // Only memories the first round found something for seed the hop.
        let seeds: Vec<Uuid> = fused
            .iter()
            .filter(|f| f.relevance > 0.0 && rows.contains_key(&f.id))
            .take(SECOND_HOP_SEEDS)
            .map(|f| f.id)
            .collect();
        let vectors = self.store.embeddings(tenant, &seeds).await?;
        let seeds: Vec<&[f32]> = seeds
            .iter()
            .filter_map(|id| vectors.get(id).map(Vec::as_slice))
            .collect();
        let Some(vector) = second_hop::vector(&dense.vector, &seeds) else {
            return Ok(None);
        };
        let hits = match self.search(tenant, req, statuses, &vector).await {
            Ok(hits) => hits,
            Err(reason) => {
                tracing::debug!(%reason, "second hop skipped");
                return Ok(None);
            }
        };
        let new: Vec<Uuid> = hits
            .iter()
            .map(|h| h.id)
            .filter(|id| !rows.contains_key(id))
            .collect();
        let rows = self
            .rows(tenant, req, statuses, filters, &new, dense)
            .await?;
        Ok(Some(SecondHop { hits, vector, rows }))
    }

    /// The dense channel: the query's vector and its nearest memories, or why
    /// it could not answer. Off (`on` false) or with an empty query it finds nothing.
    async fn dense(
        &self,
        tenant: &str,
        req: &RecallRequest,
        statuses: &[Status],
        on: bool,
    ) -> Result<Dense, String> {
        let (Some(_), Some(embedder)) = (&self.index, &self.embedder) else {
            return Err("no vector index in this process; answered from keyword search".into());
        };
        if !on || req.query.trim().is_empty() {
            return Ok(Dense {
                hits: Vec::new(),
                vector: Vec::new(),
                embed_time: Duration::ZERO,
            });
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
            let hits = self.search(tenant, req, statuses, &vector).await?;
            Ok(Dense {
                hits,
                vector,
                embed_time,
            })
        };
        match tokio::time::timeout(self.config.index_timeout, search).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "index did not answer within {} ms; answered from keyword search",
                self.config.index_timeout.as_millis()
            )),
        }
    }

    /// The user's memories nearest to `vector` in the index.
    async fn search(
        &self,
        tenant: &str,
        req: &RecallRequest,
        statuses: &[Status],
        vector: &[f32],
    ) -> Result<Vec<Hit>, String> {
        let (Some(index), Some(embedder)) = (&self.index, &self.embedder) else {
            return Err("no vector index in this process".into());
        };
        let collection = Collection::for_model(&self.namespace, embedder.model());
        let scope = Scope {
            tenant: tenant.to_string(),
            user_id: req.user_id.clone(),
            statuses: statuses.to_vec(),
            fact_types: req.fact_type_filter(),
            session_id: req.session_id.clone(),
            // The time range is applied in Postgres, on the memory's date
            // (when it happened, else when it was learnt).
            occurred_from: None,
            occurred_to: None,
        };
        index
            .search(&collection, vector, &scope, CHANNEL_DEPTH)
            .await
            .map_err(|e| format!("index unavailable ({e}); answered from keyword search"))
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

/// What the second hop found.
struct SecondHop {
    hits: Vec<Hit>,
    vector: Vec<f32>,
    rows: HashMap<Uuid, RecallRow>,
}

/// Scores every candidate by every signal, whichever channel proposed it.
struct Scoring<'a> {
    config: &'a RecallConfig,
    dense: &'a Dense,
    keyword: &'a KeywordScorer,
    filtered: &'a [Uuid],
    entities: &'a [String],
}

impl Scoring<'_> {
    /// The candidates fused, best first; with the second hop's vector (and
    /// what it found), its cosine is one more signal. Cosines come from the
    /// index where it scored the candidate, else from the candidate's vector.
    fn fuse(
        &self,
        ids: &[Uuid],
        rows: &HashMap<Uuid, RecallRow>,
        hop: Option<(&[f32], &[Hit])>,
    ) -> Vec<Fused> {
        let [dense_w, keyword_w, filter_w, entity_w] = self.config.signal_weights;
        let cosines = |vector: &[f32], weight: f64, index_hits: &[Hit]| {
            let mut values: HashMap<Uuid, f64> = index_hits
                .iter()
                .map(|h| (h.id, f64::from(h.score)))
                .collect();
            if !vector.is_empty() {
                for (id, row) in rows {
                    if let Some(e) = row.embedding.as_deref().filter(|e| e.len() == vector.len()) {
                        values.insert(*id, f64::from(cosine(vector, e)));
                    }
                }
            }
            Signal { weight, values }
        };
        let mut signals = vec![
            cosines(&self.dense.vector, dense_w, &self.dense.hits),
            Signal {
                weight: keyword_w,
                values: rows
                    .iter()
                    .map(|(id, r)| (*id, self.keyword.score(&r.terms)))
                    .collect(),
            },
            Signal {
                weight: filter_w,
                values: self
                    .filtered
                    .iter()
                    .enumerate()
                    .map(|(i, id)| (*id, 1.0 / (i + 1) as f64))
                    .collect(),
            },
            Signal {
                weight: entity_w,
                values: rows
                    .iter()
                    .map(|(id, r)| {
                        let shared = self
                            .entities
                            .iter()
                            .filter(|e| r.memory.entities.contains(e))
                            .count();
                        (*id, shared as f64)
                    })
                    .collect(),
            },
        ];
        if let Some((vector, hits)) = hop {
            signals.push(cosines(vector, self.config.second_hop, hits));
        }
        fusion::fuse(ids, &signals, self.config.fusion)
    }
}

/// A row as the answer shows it.
pub fn recalled(row: &MemoryRow, score: f64) -> RecalledMemory {
    RecalledMemory {
        id: row.id,
        content: row.content.clone(),
        context: row.context.as_ref().map(memory::shown_context),
        fact_type: row.fact_type,
        status: row.status,
        importance: row.importance,
        confidence: row.confidence,
        source: row.source.clone(),
        trust: row.source_trust.clone(),
        flags: row.flags.clone(),
        inferred: row.inferred,
        occurred_at: row.occurred_at,
        created_at: row.created_at,
        provenance: row.provenance.clone(),
        score,
        conflicts_with: Vec::new(),
    }
}
