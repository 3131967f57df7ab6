//! The keyword channel of recall: BM25 over the memories' stored search terms
//! (`memories.terms`, made by [`crate::terms`]), in Postgres so that it answers
//! when the vector index does not.
//!
//! Terms are stored once per memory, so every term frequency is 1 and BM25
//! reduces to the sum over matched query terms of idf × length normalisation.
//! Document frequencies and the mean length come from the user's memories in
//! the statuses asked for: a name that appears in most of a user's memories
//! (the user's own) weighs almost nothing.

use uuid::Uuid;

use super::{Store, StoreError};
use crate::terms;

/// BM25's usual constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct KeywordHit {
    pub id: Uuid,
    pub score: f64,
}

/// What the keyword channel may see: always one tenant and one user.
#[derive(Debug, Clone)]
pub struct KeywordQuery<'a> {
    pub tenant: &'a str,
    pub user_id: &'a str,
    pub text: &'a str,
    /// Memory statuses searched; never empty.
    pub statuses: &'a [String],
    pub limit: usize,
}

impl Store {
    /// The user's memories sharing terms with the query, best BM25 first.
    pub async fn keyword_search(
        &self,
        q: &KeywordQuery<'_>,
    ) -> Result<Vec<KeywordHit>, StoreError> {
        let query_terms = terms::distinct_terms(q.text);
        if query_terms.is_empty() || q.limit == 0 {
            return Ok(Vec::new());
        }
        let hits = sqlx::query_as(
            "WITH scope AS (
                 SELECT id, terms FROM memories
                 WHERE tenant = $1 AND user_id = $2 AND status = ANY($4)
             ),
             stats AS (
                 SELECT count(*)::float8 AS n, greatest(avg(cardinality(terms)), 1)::float8 AS avgdl FROM scope
             ),
             idf AS (
                 SELECT q.t, ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5)) AS w
                 FROM unnest($3::text[]) AS q(t)
                 CROSS JOIN stats
                 CROSS JOIN LATERAL (SELECT count(*)::float8 AS df FROM scope WHERE scope.terms @> ARRAY[q.t]) df
                 WHERE df.df > 0
             )
             SELECT s.id,
                    (SELECT sum(idf.w) FROM idf WHERE idf.t = ANY(s.terms))
                      * ($6 + 1) / (1 + $6 * (1 - $7 + $7 * cardinality(s.terms) / stats.avgdl)) AS score
             FROM scope s CROSS JOIN stats
             WHERE s.terms && $3::text[]
             ORDER BY score DESC, s.id
             LIMIT $5",
        )
        .bind(q.tenant)
        .bind(q.user_id)
        .bind(&query_terms)
        .bind(q.statuses)
        .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
        .bind(K1)
        .bind(B)
        .fetch_all(&self.pool)
        .await?;
        Ok(hits)
    }
}
