//! A fault-injection switch for tests of separate processes: with
//! `HINDSIGHT_FAULT_INDEX_DOWN_FILE` naming a path, every index call fails as
//! an unreachable server's would ([`IndexError::Unavailable`]) while a file
//! exists at that path. An embedded index lives inside the persist process and
//! cannot be taken away from it from outside; this lets a test play an index
//! outage against the real `hindsight run persist`. Unset (always, outside
//! tests), [`crate::open`] returns the index itself.

use std::{path::PathBuf, sync::Arc};

use async_trait::async_trait;
use uuid::Uuid;

use crate::{Collection, Hit, IndexError, Scope, VectorIndex};

/// The environment variable naming the outage file.
pub const ENV: &str = "HINDSIGHT_FAULT_INDEX_DOWN_FILE";

pub struct Outage {
    inner: Arc<dyn VectorIndex>,
    file: PathBuf,
}

impl Outage {
    pub fn new(inner: Arc<dyn VectorIndex>, file: PathBuf) -> Self {
        tracing::warn!(file = %file.display(), "fault injection: the vector index is down while this file exists");
        Self { inner, file }
    }

    fn check(&self) -> Result<(), IndexError> {
        if self.file.exists() {
            Err(IndexError::Unavailable(format!(
                "fault injected: {} exists",
                self.file.display()
            )))
        } else {
            Ok(())
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
