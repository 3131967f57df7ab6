//! The export a purge writes before it deletes anything: one JSON object per
//! line (a memory's columns and its provenance, or a turn's columns with
//! `"record": "turn"`) in
//! `HINDSIGHT_DATA_DIR/exports/<run id>.jsonl`, synced to disk first. A chunk
//! interrupted between its export and its delete is exported again by the
//! resumed run, so a line may repeat; the memory id tells them apart.

use std::path::{Path, PathBuf};

use serde_json::Value;
use uuid::Uuid;

use crate::request::JanitorError;

pub struct Export {
    path: PathBuf,
}

impl Export {
    pub fn new(dir: &Path, run: Uuid) -> Self {
        Self {
            path: dir.join(format!("{run}.jsonl")),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Appends rows and syncs the file (under the file's lock, which an
    /// erase of a user rewriting it takes too).
    pub async fn append(&self, rows: &[Value]) -> Result<(), JanitorError> {
        let (path, rows) = (self.path.clone(), rows.to_vec());
        self.blocking(move || hindsight_shared::exports::append(&path, &rows))
            .await
    }

    /// Appends rows Postgres wrote as JSON text, one per line, and syncs the file.
    pub async fn append_lines(&self, lines: Vec<String>) -> Result<(), JanitorError> {
        let path = self.path.clone();
        self.blocking(move || hindsight_shared::exports::append_lines(&path, &lines))
            .await
    }

    async fn blocking(
        &self,
        write: impl FnOnce() -> std::io::Result<()> + Send + 'static,
    ) -> Result<(), JanitorError> {
        let result = tokio::task::spawn_blocking(write)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|r| r);
        result.map_err(|e| JanitorError::Export {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }
}
