//! The keyword channel of recall: BM25 over the memories' stored search terms
//! (`memories.terms`, made by [`crate::terms`]), in Postgres so that it answers
//! when the vector index does not.
//!
//! Terms are stored once per memory, so every term frequency is 1 and BM25
//! reduces to the sum over matched query terms of idf × length normalisation.
//! Document frequencies and the mean length are the user's own (a name that
//! appears in most of a user's memories, the user's, weighs almost nothing),
//! read from `memory_terms` and `memory_users`, which a trigger keeps.
//!
//! Candidates are the memories holding the query's rarer terms: the rarest
//! terms are taken until their document frequencies add up to
//! [`CANDIDATE_BUDGET`] (when the rarest alone is over it, memories holding
//! the two rarest together). A memory matching only very common terms would
//! score near zero anyway; scoring it would cost a scan of most of the user's rows.

use uuid::Uuid;

use super::{Store, StoreError};
use crate::terms;

/// How many postings candidate selection may read (see the module doc).
pub const CANDIDATE_BUDGET: i64 = 2_000;

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

/// Per query term: the user's memory count and total terms (the same on
/// every row), the term, and its document frequency.
type TermStats = (Option<i64>, Option<i64>, String, Option<i64>);

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
        let stats: Vec<TermStats> = sqlx::query_as(
            "SELECT u.memories, u.total_terms, q.t, t.df
             FROM unnest($3::text[]) AS q(t)
             LEFT JOIN memory_users u ON u.tenant = $1 AND u.user_id = $2
             LEFT JOIN memory_terms t ON t.tenant = $1 AND t.user_id = $2 AND t.term = q.t",
        )
        .bind(q.tenant)
        .bind(q.user_id)
        .bind(&query_terms)
        .fetch_all(&self.pool)
        .await?;
        let n = stats.first().and_then(|s| s.0).unwrap_or(0);
        if n <= 0 {
            return Ok(Vec::new());
        }
        let total = stats.first().and_then(|s| s.1).unwrap_or(0);
        let avgdl = (total as f64 / n as f64).max(1.0);
        let mut known: Vec<(String, i64)> = stats
            .into_iter()
            .filter_map(|(_, _, t, df)| df.filter(|d| *d > 0).map(|d| (t, d)))
            .collect();
        if known.is_empty() {
            return Ok(Vec::new());
        }
        let idf: Vec<f64> = known
            .iter()
            .map(|(_, df)| {
                let (n, df) = (n as f64, *df as f64);
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let scored: Vec<String> = known.iter().map(|(t, _)| t.clone()).collect();
        known.sort_by_key(|(_, df)| *df);
        let mut budget = 0;
        let candidates: Vec<String> = known
            .iter()
            .take_while(|(_, df)| {
                let first = budget == 0;
                budget += df;
                first || budget <= CANDIDATE_BUDGET
            })
            .map(|(t, _)| t.clone())
            .collect();
        // When even the rarest term is too common to score its every memory,
        // candidates must hold the two rarest terms together (a GIN
        // intersection); memories with one common term would score low anyway.
        let (operator, candidates) = if known[0].1 > CANDIDATE_BUDGET && known.len() >= 2 {
            ("@>", vec![known[0].0.clone(), known[1].0.clone()])
        } else {
            ("&&", candidates)
        };
        let sql = format!(
            "SELECT m.id,
                    (SELECT sum(x.w) FROM unnest($3::text[], $4::float8[]) AS x(t, w) WHERE x.t = ANY(m.terms))
                      * ($7 + 1) / (1 + $7 * (1 - $8 + $8 * cardinality(m.terms) / $6)) AS score
             FROM memories m
             WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($5) AND m.terms {operator} $10::text[]
             ORDER BY score DESC, m.id
             LIMIT $9"
        );
        let hits = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(q.tenant)
            .bind(q.user_id)
            .bind(&scored)
            .bind(&idf)
            .bind(q.statuses)
            .bind(avgdl)
            .bind(K1)
            .bind(B)
            .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
            .bind(&candidates)
            .fetch_all(&self.pool)
            .await?;
        Ok(hits)
    }
}
