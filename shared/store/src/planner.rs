//! The planner's statistics of the tables the pipeline writes, kept fresh
//! when the server's autovacuum does not. Persist's dedupe reads a user's
//! memories by their rarest terms (the terms index): with statistics from an
//! empty table the planner reads every row of the user instead, a cost that
//! grows with the user, per fact. Servers run with `autovacuum = off` exist
//! (this project's CI machine is one).

use crate::{Store, StoreError};

/// The tables whose statistics the pipeline's plans depend on.
pub const TABLES: [&str; 4] = ["memories", "memory_terms", "memory_sources", "turns"];

impl Store {
    /// Analyzes each of [`TABLES`] changed by more than autovacuum's default
    /// share (50 rows and 10 %) since its last analysis, if the server's
    /// autovacuum is off (when it is on, it does this itself); returns the
    /// tables analyzed.
    pub async fn refresh_statistics(&self) -> Result<Vec<String>, StoreError> {
        let stale: Vec<String> = sqlx::query_scalar(
            "SELECT relname::text FROM pg_stat_user_tables
             WHERE current_setting('autovacuum') = 'off'
               AND schemaname = current_schema() AND relname = ANY($1)
               AND n_mod_since_analyze > 50 + 0.1 * greatest(n_live_tup, 0)",
        )
        .bind(&TABLES[..])
        .fetch_all(&self.pool)
        .await?;
        for table in &stale {
            // Only names of TABLES reach here; identifiers cannot be bound.
            if TABLES.contains(&table.as_str()) {
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("ANALYZE {table}")))
                    .execute(&self.pool)
                    .await?;
            }
        }
        Ok(stale)
    }
}
