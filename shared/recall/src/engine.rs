//! The recall engine: channels concurrently, RRF, the score, conflicts, the
//! budget, then access counting off the reply path.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use chrono::Utc;
use hindsight_shared::events;
use uuid::Uuid;

use crate::{
    Timings,
    rank::{budget, conflicts, diversity, entities, fusion, sources, when},
    request::{ExplainedCandidate, RecallRequest, RecallResponse},
    sql::{
        keyword::{self, KeywordQuery},
        rows::{self, Filters},
    },
};
use crate::{
    channels::Dense,
    recaller::{CHANNEL_DEPTH, RecallError, Recaller},
    scoring::{Scoring, recalled},
};

impl Recaller {
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
        let now = req.as_of.unwrap_or_else(Utc::now);
        let statuses = req.statuses();
        let filters = Filters {
            session_id: req.session_id.clone(),
            fact_types: req.fact_types.clone(),
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
            candidates: self.config.keyword_candidates,
        };
        let use_filter_channel =
            filter_w > 0.0 && (!filters.is_empty() || req.query.trim().is_empty());
        // Candidates the index did not score need their vectors for a cosine.
        let vectors = dense_w > 0.0;
        // Each channel reads its candidates' rows as soon as it answers: the
        // reads overlap the slower channels instead of following them all.
        let rows_of = |ids: Vec<Uuid>, with_vectors: bool| {
            let (statuses, filters) = (&statuses, &filters);
            timed(async move {
                self.candidate_rows(tenant, req, statuses, filters, &ids, with_vectors)
                    .await
            })
        };
        let (
            (dense, dense_time, dense_rows),
            (keyword, keyword_time, keyword_rows),
            (filtered, filter_time, filter_rows),
            (entity, entity_time, entity_rows),
            working,
        ) = tokio::join!(
            async {
                let (dense, time) = timed(self.dense(tenant, req, &statuses, dense_w > 0.0)).await;
                let ids = dense
                    .as_ref()
                    .map(|d| d.hits.iter().map(|h| h.id).collect())
                    .unwrap_or_default();
                (dense, time, rows_of(ids, false).await)
            },
            async {
                let (keyword, time) = timed(keyword::search(&self.store, &keyword_query)).await;
                let ids = keyword
                    .as_ref()
                    .map(|k| k.hits.iter().map(|h| h.id).collect())
                    .unwrap_or_default();
                (keyword, time, rows_of(ids, vectors).await)
            },
            async {
                let (filtered, time) = timed(async {
                    if use_filter_channel {
                        rows::filter_channel(
                            &self.store,
                            tenant,
                            &req.user_id,
                            &statuses,
                            &filters,
                            CHANNEL_DEPTH,
                        )
                        .await
                    } else {
                        Ok(Vec::new())
                    }
                })
                .await;
                let ids = filtered.as_ref().cloned().unwrap_or_default();
                (filtered, time, rows_of(ids, vectors).await)
            },
            async {
                let (entity, time) = timed(rows::entity_channel(
                    &self.store,
                    tenant,
                    &req.user_id,
                    &statuses,
                    &query_entities,
                    CHANNEL_DEPTH,
                ))
                .await;
                let ids = entity.as_ref().map(|e| e.ids.clone()).unwrap_or_default();
                (entity, time, rows_of(ids, vectors).await)
            },
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

        // Every channel's candidates, each read once and scored by every
        // signal. The dense channel's rows come first: they need no vector.
        let mut ids: Vec<Uuid> = dense.hits.iter().map(|h| h.id).collect();
        ids.extend(keyword.hits.iter().map(|h| h.id));
        ids.extend(filtered.iter().copied());
        ids.extend(entity.ids.iter().copied());
        let mut rows = HashMap::new();
        for (read, time) in [dense_rows, keyword_rows, filter_rows, entity_rows] {
            timings.rows = timings.rows.max(time);
            for (id, row) in read? {
                rows.entry(id).or_insert(row);
            }
        }

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
            if m.expired_at(now) && !req.includes_expired() {
                if req.explain {
                    let mut e = ExplainedCandidate::new(
                        f.id,
                        m.content.clone(),
                        &f.ranks,
                        f.relevance,
                        zero(),
                    );
                    e.left_out = Some("expired: past its end at the recall's as_of".into());
                    explained.push(e);
                }
                continue;
            }
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
            ranked.push(recalled(m, parts.score, now));
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
                if let Err(e) = rows::record_access(&store, &ids).await {
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
