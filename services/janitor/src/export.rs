//! The export a purge writes before it deletes anything: one JSON object per
//! line (the memory's columns and its provenance) in
//! `HINDSIGHT_DATA_DIR/exports/<run id>.jsonl`, synced to disk first. A chunk
//! interrupted between its export and its delete is exported again by the
//! resumed run, so a line may repeat; the memory id tells them apart.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokio::io::AsyncWriteExt;
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

    /// Appends rows and syncs the file.
    pub async fn append(&self, rows: &[Value]) -> Result<(), JanitorError> {
        let failed = |e: std::io::Error| JanitorError::Export {
            path: self.path.clone(),
            reason: e.to_string(),
        };
        if let Some(dir) = self.path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(failed)?;
        }
        let mut text = String::new();
        for row in rows {
            text.push_str(&row.to_string());
            text.push('\n');
        }
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .await
            .map_err(failed)?;
        file.write_all(text.as_bytes()).await.map_err(failed)?;
        file.sync_all().await.map_err(failed)?;
        Ok(())
    }
}
