//! A vector index that can be switched off, to play an index outage: while
//! off, every call fails as an unreachable server would.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use async_trait::async_trait;
use hindsight_index::{Collection, Hit, IndexError, Point, Scope, VectorIndex};
use uuid::Uuid;

pub struct SwitchableIndex {
    inner: Arc<dyn VectorIndex>,
    up: AtomicBool,
}

impl SwitchableIndex {
    pub fn new(inner: Arc<dyn VectorIndex>) -> Self {
        Self {
            inner,
            up: AtomicBool::new(true),
        }
    }

    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), IndexError> {
        if self.up.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(IndexError::Unavailable("switched off by the test".into()))
        }
    }
}

#[async_trait]
impl VectorIndex for SwitchableIndex {
    async fn ensure(&self, c: &Collection) -> Result<(), IndexError> {
        self.check()?;
        self.inner.ensure(c).await
    }
    async fn upsert(&self, c: &Collection, points: Vec<Point>) -> Result<(), IndexError> {
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
}
