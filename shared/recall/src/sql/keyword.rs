//! The keyword channel of recall: BM25 over the memories' stored search terms
//! (`memories.terms`, made by [`hindsight_text::terms`]), in Postgres so that it answers
//! when the vector index does not.
//!
//! Terms are stored once per memory, so every term frequency is 1 and BM25
//! reduces to the sum over matched query terms of idf × length normalisation.
//! Document frequencies and the mean length are the user's own (a name that
//! appears in most of a user's memories, the user's, weighs almost nothing),
//! read from `memory_terms` and `memory_users`, which a trigger keeps.
//!
//! Candidates are the memories holding the query's rarer terms: the rarest
//! terms are taken until their document frequencies add up to the query's
//! candidate budget ([`KeywordQuery::candidates`],
//! `HINDSIGHT_RECALL_KEYWORD_CANDIDATES`; when the rarest alone is over it,
//! memories holding the two rarest together, at most that many of them, those
//! holding every query term first). A memory matching only very common terms
//! would score near zero anyway; scoring it would cost a scan of most of the
//! user's rows, and the time of a recall. Each candidate costs Postgres about
//! 6 µs (its row read, its terms matched against three query terms), so the
//! budget bounds the channel's time for a user of any size.

use hindsight_core::{closed_set::names, memory::Status};
use uuid::Uuid;

use hindsight_store::{Store, StoreError, memories};
use hindsight_text::terms;

/// The parameter number of the first scored term in the scoring query (the
/// terms follow the query's nine fixed parameters, their weights follow them).
const FIRST_TERM: usize = 10;

/// BM25's usual constants.
const K1: f64 = 1.2;
const B: f64 = 0.75;

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct KeywordHit {
    pub id: Uuid,
    pub score: f64,
}

/// The channel's answer: its best memories, and the query's BM25 weights,
/// which score any other memory of the user the same way from its terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeywordAnswer {
    pub hits: Vec<KeywordHit>,
    pub scorer: KeywordScorer,
}

/// BM25 of one query over one user's memories: the query's terms the user
/// has, their idf, and the user's mean number of terms per memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeywordScorer {
    terms: Vec<(String, f64)>,
    avgdl: f64,
}

impl KeywordScorer {
    /// The BM25 of a memory with these (sorted) terms; 0 without a query term.
    pub fn score(&self, memory_terms: &[String]) -> f64 {
        let matched: f64 = self
            .terms
            .iter()
            .filter(|(t, _)| memory_terms.binary_search(t).is_ok())
            .map(|(_, idf)| idf)
            .sum();
        if matched == 0.0 {
            return 0.0;
        }
        let len = memory_terms.len() as f64;
        matched * (K1 + 1.0) / (1.0 + K1 * (1.0 - B + B * len / self.avgdl))
    }

    /// The query terms the user's memories hold (what the channel searched for).
    pub fn terms(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|(t, _)| t.as_str())
    }
}

/// What the keyword channel may see: always one tenant and one user.
#[derive(Debug, Clone)]
pub struct KeywordQuery<'a> {
    pub tenant: &'a str,
    pub user_id: &'a str,
    pub text: &'a str,
    /// Memory statuses searched; never empty.
    pub statuses: &'a [Status],
    pub limit: usize,
    pub matching: terms::Matching,
    /// How many memories the channel scores at most (see the module doc).
    pub candidates: usize,
}

/// Per query term the user has: the user's memory count and total terms
/// (the same on every row), the term, and its document frequency (one row of
/// nulls but the first two when the user has none of the terms).
type TermStats = (i64, i64, Option<String>, Option<i64>);

/// The user's memories sharing terms with the query, best BM25 first.
pub async fn search(store: &Store, q: &KeywordQuery<'_>) -> Result<KeywordAnswer, StoreError> {
    let query_terms = terms::query_terms(q.text, q.matching);
    if query_terms.is_empty() || q.limit == 0 || q.candidates == 0 {
        return Ok(KeywordAnswer::default());
    }
    // Every condition on memory_terms names its key's three columns, so
    // that even a generic plan with stale statistics (after a bulk load)
    // reads the terms' rows by key: a join on the user alone was planned
    // as a read of all the user's terms (17 ms at 100,000 of them).
    let stats: Vec<TermStats> = sqlx::query_as(
        "SELECT u.memories, u.total_terms, t.term, t.df
         FROM (SELECT memories, total_terms FROM memory_users WHERE tenant = $1 AND user_id = $2) AS u
         LEFT JOIN LATERAL (SELECT term, df FROM memory_terms
                            WHERE tenant = $1 AND user_id = $2 AND term = ANY($3)) AS t ON true",
    )
    .bind(q.tenant)
    .bind(q.user_id)
    .bind(&query_terms)
    .fetch_all(&store.pool)
    .await?;
    let n = stats.first().map_or(0, |s| s.0);
    if n <= 0 {
        return Ok(KeywordAnswer::default());
    }
    let total = stats.first().map_or(0, |s| s.1);
    let avgdl = (total as f64 / n as f64).max(1.0);
    let mut known: Vec<(String, i64)> = stats
        .into_iter()
        .filter_map(|(_, _, t, df)| Some((t?, df.filter(|d| *d > 0)?)))
        .collect();
    // The rows come in key order: put them in the query's, so that terms
    // of equal frequency are chosen as candidates in the order asked.
    known.sort_by_key(|(t, _)| query_terms.iter().position(|q| q == t));
    if known.is_empty() {
        return Ok(KeywordAnswer::default());
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
    // When even the rarest term is too common to score its every memory,
    // candidates must hold the two rarest terms together (a GIN
    // intersection); memories with one common term would score low
    // anyway. Those can still be many (two words that always come
    // together): then at most `budget` are scored, those holding every
    // known query term first, as they score highest.
    let budget = i64::try_from(q.candidates).unwrap_or(i64::MAX);
    let intersect = known[0].1 > budget && known.len() >= 2;
    let candidates: Vec<String> = if intersect {
        vec![known[0].0.clone(), known[1].0.clone()]
    } else {
        memories::rarest_terms(known.clone(), budget)
    };
    let indexed = super::indexed_clause(q.statuses);
    let candidate_rows = if intersect {
        let two_rarest = format!(
            "SELECT m.id, m.terms FROM memories m
            WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($4) {indexed}
              AND m.terms @> $9::text[]"
        );
        if known.len() > 2 {
            format!(
                "SELECT DISTINCT ON (id) id, terms FROM (
                   (SELECT m.id, m.terms FROM memories m
                    WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($4) {indexed}
                      AND m.terms @> $3::text[])
                   UNION ALL ({two_rarest})
                   LIMIT {budget}) AS t"
            )
        } else {
            format!("{two_rarest} LIMIT {budget}")
        }
    } else {
        // The budget binds only for a lone term too common to score in full.
        format!(
            "SELECT m.id, m.terms FROM memories m
             WHERE m.tenant = $1 AND m.user_id = $2 AND m.status = ANY($4) {indexed}
               AND m.terms && $9::text[]
             LIMIT {budget}"
        )
    };
    // The idf of each scored term the candidate holds, summed in one
    // expression with each term and weight a parameter of its own: a
    // sub-select per candidate (unnest the query's terms, filter, sum) cost
    // a fifth more than the whole query does now.
    let matched = (0..scored.len())
        .map(|i| {
            format!(
                "CASE WHEN ${} = ANY(c.terms) THEN ${}::float8 ELSE 0 END",
                FIRST_TERM + i,
                FIRST_TERM + scored.len() + i
            )
        })
        .collect::<Vec<_>>()
        .join(" + ");
    let sql = format!(
        "SELECT c.id,
                ({matched}) * ($6 + 1) / (1 + $6 * (1 - $7 + $7 * cardinality(c.terms) / $5)) AS score
         FROM ({candidate_rows}) AS c
         ORDER BY score DESC, c.id
         LIMIT $8"
    );
    let scorer = KeywordScorer {
        terms: scored.iter().cloned().zip(idf.iter().copied()).collect(),
        avgdl,
    };
    // Planned for its parameters on every call (an unnamed statement): the
    // plan depends on how common the candidate terms are, and a cached
    // generic plan, which cannot know, intersected the terms index with the
    // user's whole index (12 of the channel's 19 ms at 100,000 memories).
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .persistent(false)
        .bind(q.tenant)
        .bind(q.user_id)
        .bind(&scored)
        .bind(names(q.statuses))
        .bind(avgdl)
        .bind(K1)
        .bind(B)
        .bind(i64::try_from(q.limit).unwrap_or(i64::MAX))
        .bind(&candidates);
    for term in &scored {
        query = query.bind(term);
    }
    for weight in &idf {
        query = query.bind(weight);
    }
    let hits = query.fetch_all(&store.pool).await?;
    Ok(KeywordAnswer { hits, scorer })
}
