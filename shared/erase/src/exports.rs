//! The exports' part of an erase: the janitor's purge exports hold memories
//! it purged, the user's among them; each file holding rows of the user is
//! rewritten without them (`hindsight_shared::exports::remove`: under the
//! file's lock, replaced whole, never left half written).

use std::path::Path;

use hindsight_core::erase::Counts;
use hindsight_shared::exports;
use hindsight_store::{Store, erase::Erasure};
use serde_json::Value;
use uuid::Uuid;

use crate::EraseError;

fn failed(path: &Path, e: impl std::fmt::Display) -> EraseError {
    EraseError::Exports(format!("{}: {e}", path.display()))
}

/// Whether an export row is a memory of the user.
fn users_row(row: &Value, tenant: &str, user_id: &str) -> bool {
    row.get("tenant").and_then(Value::as_str) == Some(tenant)
        && row.get("user_id").and_then(Value::as_str) == Some(user_id)
}

async fn blocking<T: Send + 'static>(
    path: &Path,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, EraseError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| failed(path, e))?
        .map_err(|e| failed(path, e))
}

/// The user's rows in every export, counting only (a dry run).
pub async fn count(dir: &Path, tenant: &str, user_id: &str) -> Result<u64, EraseError> {
    let (t, u) = (tenant.to_string(), user_id.to_string());
    let d = dir.to_path_buf();
    blocking(dir, move || {
        let mut n = 0;
        for path in exports::files(&d)? {
            n += exports::matching(&path, &|v| users_row(v, &t, &u))?.len() as u64;
        }
        Ok(n)
    })
    .await
}

/// Rewrites every export holding rows of the user without them. A file is
/// written down (with its rows counted) before its rewrite and crossed off
/// after, so a job killed in between rewrites it again and counts it once.
pub async fn erase(store: &Store, dir: &Path, job: &Erasure) -> Result<u64, EraseError> {
    let mut rewritten = 0;
    let d = dir.to_path_buf();
    let files = blocking(dir, move || exports::files(&d)).await?;
    // Steps a killed run of this job began: files to rewrite even if they
    // no longer hold the user's rows (the kill fell after the rewrite).
    let begun = store.steps_begun(job.id).await?;
    for path in files {
        let name = file_name(&path);
        let (t, u, p) = (job.tenant.clone(), job.user_id.clone(), path.clone());
        let rows = blocking(&path, move || {
            exports::matching(&p, &|v| users_row(v, &t, &u))
        })
        .await?;
        let step = format!("export:{name}");
        if rows.is_empty() && !begun.contains(&step) {
            continue;
        }
        let ids: Vec<Uuid> = rows
            .iter()
            .filter_map(|r| r.get("id").and_then(Value::as_str))
            .filter_map(|id| Uuid::parse_str(id).ok())
            .collect();
        let removes = Counts {
            export_rows: rows.len() as u64,
            ..Counts::default()
        };
        store.begin_step(job, &step, &removes, &ids).await?;
        let (t, u, p) = (job.tenant.clone(), job.user_id.clone(), path.clone());
        blocking(&path, move || {
            exports::remove(&p, &|v| users_row(v, &t, &u))
        })
        .await?;
        store.step_done(job.id, &step).await?;
        rewritten += 1;
    }
    Ok(rewritten)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_row_is_the_users_by_tenant_and_user() {
        assert!(users_row(
            &json!({"tenant": "acme", "user_id": "ann"}),
            "acme",
            "ann"
        ));
        assert!(!users_row(
            &json!({"tenant": "other", "user_id": "ann"}),
            "acme",
            "ann"
        ));
        assert!(!users_row(
            &json!({"tenant": "acme", "user_id": "anna"}),
            "acme",
            "ann"
        ));
    }
}
