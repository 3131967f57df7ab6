//! What is asked of the janitor and what it answers: a run's request and
//! trigger, its report, the outcome of asking, and the errors.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use hindsight_store::StoreError;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::counts::Counts;

#[derive(Debug, thiserror::Error)]
pub enum JanitorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("cannot write the purge export {path}: {reason}")]
    Export { path: PathBuf, reason: String },
    /// Test hook: the run stopped as if its process had been killed.
    #[error("run {0} stopped midway (simulated crash)")]
    Crashed(Uuid),
    #[error("no maintenance run {0}")]
    NoSuchRun(Uuid),
    #[error("run {id} cannot be restored: {reason}")]
    NotRestorable { id: Uuid, reason: String },
    #[error("another maintenance run is executing; try again when it ends")]
    Busy,
    #[error("embedding the parts of a wrongly merged memory: {0}")]
    Embed(String),
}

/// Why a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The cron schedule fired.
    Schedule,
    /// A scheduled run was missed while no janitor was up.
    Startup,
    /// `hindsight maintenance run`.
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Startup => "startup",
            Trigger::Manual => "manual",
        }
    }
}

/// A run to execute.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub dry_run: bool,
    /// Only this tenant's memories; `None`: every tenant.
    pub tenant: Option<String>,
    /// The run's clock; `None`: now. Tests backdate memories relative to it.
    pub as_of: Option<DateTime<Utc>>,
    pub trigger: Trigger,
    /// The schedule slot served: at most one real run per slot.
    pub scheduled_for: Option<DateTime<Utc>>,
}

impl RunRequest {
    pub fn manual(dry_run: bool) -> Self {
        Self {
            dry_run,
            tenant: None,
            as_of: None,
            trigger: Trigger::Manual,
            scheduled_for: None,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    pub id: Uuid,
    pub dry_run: bool,
    pub tenant: Option<String>,
    pub trigger: String,
    pub as_of: DateTime<Utc>,
    pub scheduled_for: Option<DateTime<Utc>>,
    /// A run interrupted earlier and finished by this one.
    pub resumed: bool,
    pub status: String,
    pub counts: Counts,
    pub errors: Vec<String>,
    pub seconds: f64,
    /// Transactions committed (by this attempt, for a resumed run).
    pub chunks: usize,
}

/// The result of asking for a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Ran(Box<RunReport>),
    /// Another janitor is executing a run.
    Busy,
    /// The schedule slot already has its run (another janitor served it).
    AlreadyServed {
        scheduled_for: DateTime<Utc>,
    },
}
