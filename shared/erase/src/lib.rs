//! Erasing one user everywhere hindsight keeps what they said.
//!
//! An erase is a job (`erasures` in Postgres) with a state per place
//! ([`Place`]). It visits the places in order and marks each done; a job
//! killed halfway is picked up by the next erase of the same user, which
//! skips the places already done and counts nothing twice. The database
//! place runs in one transaction and writes down, with the rows it deletes,
//! what the places outside Postgres still have to remove, so a kill between
//! places loses none of it.
//!
//! The contract for turns in motion: turns published before the erase
//! started are erased, wherever they are (archived, between two stages, dead
//! lettered); while the job runs the filter refuses the user's new turns and
//! writes them down for the job to remove; after the places, the job passes
//! over the database and the streams again until a pass finds nothing (a
//! stage may have been holding a turn of the user when the job started).
//! What is guaranteed, and what is not, is in `docs/erase.md`.

pub mod exports;
pub mod streams;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use async_nats::jetstream;
use hindsight_core::{
    Namespace,
    erase::{Counts, Place},
    ids,
};
use hindsight_recall::WorkingMemory;
use hindsight_shared::events;
use hindsight_store::{
    Store, StoreError,
    erase::{Erasure, ErasureRecord, user_hash},
};
use serde::Serialize;
use uuid::Uuid;

use crate::streams::Streams;

/// How long an erase waits by default for the index's owner to remove the
/// user's points before it leaves the job running and says so.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// Passes over the database and the streams after the places, at most.
const PASSES: u32 = 10;
/// The pause before each pass: time for a stage to finish what it holds.
const SETTLE: Duration = Duration::from_millis(300);

#[derive(Debug, thiserror::Error)]
pub enum EraseError {
    #[error(
        "invalid user id {0:?}: a user id is 1 to {max} characters of A-Z a-z 0-9 . _ : / @ -",
        max = ids::MAX_ID_LEN
    )]
    InvalidUser(String),
    #[error("invalid tenant {0:?}: a tenant is 1 to {max} characters of A-Z a-z 0-9 _ : / @ -", max = ids::MAX_ID_LEN)]
    InvalidTenant(String),
    #[error(
        "erase {erasure} is still running: {left} index points wait for the index's owner \
         (the persist service) to remove them; is it running? Run the erase again to resume it"
    )]
    IndexPending { erasure: Uuid, left: i64 },
    #[error(
        "erase {erasure} is still running: each of {PASSES} passes found more of the user's \
         data arriving; run the erase again to resume it"
    )]
    Unsettled { erasure: Uuid },
    #[error("erase: the streams: {0}")]
    Streams(String),
    #[error("erase: working memory: {0}")]
    Working(String),
    #[error("erase: the purge exports: {0}")]
    Exports(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an erase did (or, in a dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The job; `None` in a dry run.
    pub erasure: Option<Uuid>,
    pub tenant: String,
    /// What the erase's record keeps instead of the user's id.
    pub user_hash: String,
    pub dry_run: bool,
    /// Whether this erase finished a job an earlier one left running.
    pub resumed: bool,
    /// Everything removed, this call and any earlier call of the same job.
    /// A dry run counts Postgres' rows, the TURNS messages they name, the
    /// working-memory keys and the export rows.
    pub counts: Counts,
}

/// Runs erases.
pub struct Eraser {
    store: Store,
    streams: Streams,
    working: WorkingMemory,
    exports: PathBuf,
    wait: Duration,
}

impl Eraser {
    /// An eraser of the namespace's streams and working memory, and of the
    /// purge exports under `data_dir`.
    pub async fn open(
        store: Store,
        js: jetstream::Context,
        ns: Namespace,
        data_dir: &Path,
    ) -> Result<Self, EraseError> {
        let working = WorkingMemory::open(&js, &ns)
            .await
            .map_err(|e| EraseError::Working(e.to_string()))?;
        Ok(Self {
            store,
            streams: Streams::new(js, ns)?,
            working,
            exports: hindsight_shared::exports::dir(data_dir),
            wait: DEFAULT_WAIT,
        })
    }

    /// How long to wait for the index's owner before leaving the job running.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Erases the user, or (dry run) counts what an erase would remove. An
    /// unknown user erases nothing and reports zero counts.
    pub async fn erase(
        &self,
        tenant: &str,
        user_id: &str,
        actor: &str,
        dry_run: bool,
    ) -> Result<Report, EraseError> {
        if !ids::is_valid_tenant(tenant) {
            return Err(EraseError::InvalidTenant(tenant.to_string()));
        }
        if !ids::is_valid_id(user_id) {
            return Err(EraseError::InvalidUser(user_id.to_string()));
        }
        if dry_run {
            let mut counts = self.store.erasable(tenant, user_id).await?;
            counts.working_keys = self
                .working
                .user_keys(tenant, user_id)
                .await
                .map_err(|e| EraseError::Working(e.to_string()))?;
            counts.export_rows = exports::count(&self.exports, tenant, user_id).await?;
            return Ok(Report {
                erasure: None,
                tenant: tenant.to_string(),
                user_hash: user_hash(tenant, user_id),
                dry_run,
                resumed: false,
                counts,
            });
        }
        let job = self.store.start_erasure(tenant, user_id, actor).await?;
        tracing::info!(erasure = %job.id, tenant, resumed = job.resumed, "erase started");
        let record = match self.run(&job).await {
            Ok(record) => record,
            Err(e) => {
                events::Erased {
                    erasure: &job.id.to_string(),
                    finished: false,
                    removed: &[],
                }
                .emit();
                return Err(e);
            }
        };
        events::Erased {
            erasure: &job.id.to_string(),
            finished: true,
            removed: &removed(&record.counts),
        }
        .emit();
        Ok(Report {
            erasure: Some(job.id),
            tenant: record.tenant,
            user_hash: record.user_hash,
            dry_run,
            resumed: job.resumed,
            counts: record.counts,
        })
    }

    /// Visits the places not done yet, then passes until nothing is left.
    async fn run(&self, job: &Erasure) -> Result<ErasureRecord, EraseError> {
        for place in Place::ORDER {
            if !job.is_done(place) {
                self.visit(job, place).await?;
                self.store.erasure_place_done(job.id, place).await?;
            }
        }
        self.settle(job).await
    }

    async fn visit(&self, job: &Erasure, place: Place) -> Result<(), EraseError> {
        match place {
            Place::Database => {
                let c = self.store.erase_rows(job).await?;
                tracing::info!(erasure = %job.id, memories = c.memories, turns = c.turns, "database erased");
            }
            Place::Streams => {
                let found = self.streams.scan(&self.store, job).await?;
                self.streams.remove(&self.store, job).await?;
                tracing::info!(erasure = %job.id, in_flight = found, "streams erased");
            }
            Place::Working => {
                let step = "working";
                let keys = self
                    .working
                    .user_keys(&job.tenant, &job.user_id)
                    .await
                    .map_err(|e| EraseError::Working(e.to_string()))?;
                let removes = Counts {
                    working_keys: keys,
                    ..Counts::default()
                };
                self.store.begin_step(job, step, &removes, &[]).await?;
                let erased = self
                    .working
                    .erase_user(&job.tenant, &job.user_id)
                    .await
                    .map_err(|e| EraseError::Working(e.to_string()))?;
                self.store.step_done(job.id, step).await?;
                tracing::info!(erasure = %job.id, keys, entries = erased.entries, records = erased.records, "working memory erased");
            }
            Place::Exports => {
                let files = exports::erase(&self.store, &self.exports, job).await?;
                tracing::info!(erasure = %job.id, files, "purge exports rewritten");
            }
            Place::Index => self.wait_for_index(job.id).await?,
        }
        Ok(())
    }

    /// Passes over the places until one finds nothing, then ends the job.
    async fn settle(&self, job: &Erasure) -> Result<ErasureRecord, EraseError> {
        for _ in 0..PASSES {
            tokio::time::sleep(SETTLE).await;
            let rows = self.store.erase_rows(job).await?;
            let found = self.streams.scan(&self.store, job).await?;
            self.streams.remove(&self.store, job).await?;
            self.wait_for_index(job.id).await?;
            if rows.total() > 0 || found > 0 {
                tracing::info!(erasure = %job.id, rows = rows.total(), messages = found, "erase pass found more");
                continue;
            }
            if let Some(record) = self.store.finish_erasure(job.id).await? {
                return Ok(record);
            }
        }
        Err(EraseError::Unsettled { erasure: job.id })
    }

    /// Waits until the index's owner has removed every point of the job.
    async fn wait_for_index(&self, erasure: Uuid) -> Result<(), EraseError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let left = self.store.points_left(erasure).await?;
            if left == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EraseError::IndexPending { erasure, left });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The counts by name, as the metric labels them.
fn removed(c: &Counts) -> [(&'static str, u64); 10] {
    [
        ("memories", c.memories),
        ("sources", c.sources),
        ("events", c.events),
        ("turns", c.turns),
        ("keyword_stats", c.keyword_stats),
        ("contexts", c.contexts),
        ("index_points", c.index_points),
        ("working_keys", c.working_keys),
        ("export_rows", c.export_rows),
        ("stream_messages", c.stream_messages.values().sum()),
    ]
}
