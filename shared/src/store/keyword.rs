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
        // Three plain statements rather than one: a CTE over the user's rows
        // hides the GIN index from the per-term counts and costs minutes at
        // 100k memories; these use `memories_terms` and `memories_by_user`.
        let (n, avgdl): (i64, Option<f64>) = sqlx::query_as(
            "SELECT count(*), avg(cardinality(terms))::float8 FROM memories
             WHERE tenant = $1 AND user_id = $2 AND status = ANY($3)",
        )
        .bind(q.tenant)
        .bind(q.user_id)
        .bind(q.statuses)
        .fetch_one(&self.pool)
        .await?;
        let dfs: Vec<i64> = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM memories m
                     WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($4) AND m.terms @> ARRAY[q.t])
             FROM unnest($3::text[]) WITH ORDINALITY AS q(t, i) ORDER BY q.i",
        )
        .bind(q.tenant)
        .bind(q.user_id)
        .bind(&query_terms)
        .bind(q.statuses)
        .fetch_all(&self.pool)
        .await?;
        let n = n as f64;
        let idf: Vec<f64> = dfs
            .iter()
            .map(|&df| {
                let df = df as f64;
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let hits = sqlx::query_as(
            "SELECT m.id,
                    (SELECT sum(x.w) FROM unnest($3::text[], $4::float8[]) AS x(t, w) WHERE x.t = ANY(m.terms))
                      * ($7 + 1) / (1 + $7 * (1 - $8 + $8 * cardinality(m.terms) / $6)) AS score
             FROM memories m
             WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($5) AND m.terms && $3::text[]
             ORDER BY score DESC, m.id
             LIMIT $9",
        )
        .bind(q.tenant)
        .bind(q.user_id)
        .bind(&query_terms)
        .bind(&idf)
        .bind(q.statuses)
        .bind(avgdl.unwrap_or(1.0).max(1.0))
        .bind(K1)
        .bind(B)
        .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        Ok(hits)
    }
}
