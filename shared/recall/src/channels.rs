//! The reads of recall: the dense channel (the query embedded, the index
//! searched), the candidates' rows, the second hop, working memory.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use hindsight_core::memory::Status;
use hindsight_index::{Collection, Hit, Scope};
use hindsight_store::StoreError;
use uuid::Uuid;

use crate::rank::{fusion::Fused, second_hop};
use crate::recaller::{CHANNEL_DEPTH, Recaller, SECOND_HOP_SEEDS};
use crate::request::RecallRequest;
use crate::sql::rows::{self, Filters, RecallRow};

/// What the dense channel found: its hits, the query's vector and how long
/// embedding it took.
pub(crate) struct Dense {
    pub(crate) hits: Vec<Hit>,
    pub(crate) vector: Vec<f32>,
    pub(crate) embed_time: Duration,
}

/// What the second hop found.
pub(crate) struct SecondHop {
    pub(crate) hits: Vec<Hit>,
    pub(crate) vector: Vec<f32>,
    pub(crate) rows: HashMap<Uuid, RecallRow>,
}

impl Recaller {
    /// Rows of candidates by id, with their vectors when `with_vectors` (for
    /// candidates the index did not score, so that every candidate gets its
    /// cosine). Each channel reads its own candidates' rows as soon as it
    /// answers, so that the reads overlap the slower channels.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn candidate_rows(
        &self,
        tenant: &str,
        req: &RecallRequest,
        statuses: &[Status],
        filters: &Filters,
        ids: &[Uuid],
        with_vectors: bool,
    ) -> Result<HashMap<Uuid, RecallRow>, StoreError> {
        let mut unique = ids.to_vec();
        unique.sort();
        unique.dedup();
        Ok(rows::recall_rows(
            &self.store,
            tenant,
            &req.user_id,
            statuses,
            filters,
            &unique,
            with_vectors,
        )
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
    pub(crate) async fn second_hop(
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
        let vectors = rows::embeddings(&self.store, tenant, &seeds).await?;
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
            .candidate_rows(
                tenant,
                req,
                statuses,
                filters,
                &new,
                !dense.vector.is_empty(),
            )
            .await?;
        Ok(Some(SecondHop { hits, vector, rows }))
    }

    /// The dense channel: the query's vector and its nearest memories, or why
    /// it could not answer. Off (`on` false) or with an empty query it finds nothing.
    pub(crate) async fn dense(
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
    pub(crate) async fn search(
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
            fact_types: req.fact_types.clone(),
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

    pub(crate) async fn working_memory(
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
