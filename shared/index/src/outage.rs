//! An index that can be taken down, to play an outage: while down, every call
//! fails as an unreachable server's would ([`IndexError::Unavailable`]).
//!
//! In-process tests flip it with [`Outage::set_up`]. Tests of separate
//! processes set `HINDSIGHT_FAULT_INDEX_DOWN_FILE` to a path: the index is
//! down while a file exists there. An embedded index lives inside the persist
//! process and cannot be taken away from it from outside; the file lets a test
//! play an index outage against the real `hindsight run persist`. Unset
//! (always, outside tests), [`crate::open`] returns the index itself.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use async_trait::async_trait;
use uuid::Uuid;

use crate::{Collection, Hit, IndexError, Scope, VectorIndex};

/// The environment variable naming the outage file.
pub const ENV: &str = "HINDSIGHT_FAULT_INDEX_DOWN_FILE";

pub struct Outage {
    inner: Arc<dyn VectorIndex>,
    /// Down while this file exists (when set).
    file: Option<PathBuf>,
    /// Down while this is false.
    up: AtomicBool,
}

impl Outage {
    /// An index that is down while a file exists at `file`.
    pub fn while_file_exists(inner: Arc<dyn VectorIndex>, file: PathBuf) -> Self {
        tracing::warn!(file = %file.display(), "fault injection: the vector index is down while this file exists");
        Self {
            inner,
            file: Some(file),
            up: AtomicBool::new(true),
        }
    }

    /// An index that is up until [`Self::set_up`] takes it down.
    pub fn switchable(inner: Arc<dyn VectorIndex>) -> Self {
        Self {
            inner,
            file: None,
            up: AtomicBool::new(true),
        }
    }

    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), IndexError> {
        if !self.up.load(Ordering::SeqCst) {
            return Err(IndexError::Unavailable(
                "fault injected: switched off".into(),
            ));
        }
        match &self.file {
            Some(file) if file.exists() => Err(IndexError::Unavailable(format!(
                "fault injected: {} exists",
                file.display()
            ))),
            _ => Ok(()),
        }
    }
}

#[async_trait]
impl VectorIndex for Outage {
    async fn ensure(&self, c: &Collection) -> Result<(), IndexError> {
        self.check()?;
        self.inner.ensure(c).await
    }
    async fn upsert(&self, c: &Collection, points: Vec<crate::Point>) -> Result<(), IndexError> {
        self.check()?;
        self.inner.upsert(c, points).await
    }
    async fn delete(&self, c: &Collection, ids: Vec<Uuid>) -> Result<(), IndexError> {
        self.check()?;
        self.inner.delete(c, ids).await
    }
    async fn search(
        &self,
        c: &Collection,
        v: &[f32],
        s: &Scope,
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        self.check()?;
        self.inner.search(c, v, s, limit).await
    }
    async fn count(&self, c: &Collection, s: Option<&Scope>) -> Result<u64, IndexError> {
        self.check()?;
        self.inner.count(c, s).await
    }
    async fn clear(&self, c: &Collection) -> Result<(), IndexError> {
        self.check()?;
        self.inner.clear(c).await
    }
    async fn optimize(&self, c: &Collection) -> Result<(), IndexError> {
        self.check()?;
        self.inner.optimize(c).await
    }
}
