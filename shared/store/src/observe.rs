//! What operators watch: memory counts by status and the last maintenance run
//! (the `/ops` page and the gauges the gateway polls).

use chrono::{DateTime, Utc};
use hindsight_core::memory::Status;
use serde::Serialize;

use super::{
    Store, StoreError,
    maintenance::runs::{RUN_COLUMNS, RunRow},
};

/// One tenant's memories in one status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct MemoryCount {
    pub tenant: String,
    #[sqlx(try_from = "String")]
    pub status: Status,
    pub count: i64,
}

impl Store {
    /// Memories per tenant and status, every tenant and status that has any.
    pub async fn memory_counts(&self) -> Result<Vec<MemoryCount>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT tenant, status, count(*) AS count FROM memories
             GROUP BY tenant, status ORDER BY tenant, status",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// The latest real (not dry) maintenance run, finished or not.
    pub async fn last_real_run(&self) -> Result<Option<RunRow>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM maintenance_runs WHERE NOT dry_run
             ORDER BY started_at DESC LIMIT 1"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_optional(&self.pool)
            .await?)
    }

    /// When the latest real maintenance run finished.
    pub async fn last_finished_run_at(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT max(finished_at) FROM maintenance_runs WHERE NOT dry_run AND status = 'finished'",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}
