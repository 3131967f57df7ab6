//! Working memory: per session, exact keys (task state, ids from tool
//! results) that an agent needs verbatim for the next turns and that expire by
//! themselves. One JetStream KV entry per (tenant, user, session) holds the
//! session's keys as a JSON object; the bucket's TTL (`streams/kv.toml`, 1 h)
//! runs from the last write. Every write is also recorded, without its
//! content, for counting expired keys ([`crate::working_expiry`]).

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use hindsight_core::Namespace;
use serde_json::{Map, Value};

use crate::working_expiry::WriteLog;

/// The largest working memory of one session, serialised.
pub const MAX_BYTES: usize = 64 * 1024;
/// The bucket, relative to the namespace.
pub const BUCKET: &str = "WORKING";

#[derive(Debug, thiserror::Error)]
pub enum WorkingError {
    #[error("working memory unavailable: {0}")]
    Unavailable(String),
    #[error("working memory of a session may hold at most {MAX_BYTES} bytes of JSON")]
    TooLarge,
    #[error("working memory changed concurrently; try again")]
    Conflict,
}

#[derive(Clone)]
pub struct WorkingMemory {
    kv: kv::Store,
    log: WriteLog,
}

/// A KV key for the scope: each part hex-encoded, since ids may hold any
/// character and KV keys may not.
fn key(tenant: &str, user_id: &str, session_id: &str) -> String {
    format!(
        "{}.{}",
        user_prefix(tenant, user_id),
        hex::encode(session_id)
    )
}

/// The part of every key of one user's sessions.
fn user_prefix(tenant: &str, user_id: &str) -> String {
    format!("{}.{}", hex::encode(tenant), hex::encode(user_id))
}

/// What erasing a user's working memory removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Erased {
    /// Messages of the bucket's stream (one per session, with its history).
    pub entries: u64,
    /// Records of the write log (which hold no content, only the key names).
    pub records: u64,
}

impl WorkingMemory {
    /// Opens the namespace's bucket (created by `hindsight streams apply`).
    pub async fn open(js: &jetstream::Context, ns: &Namespace) -> Result<Self, WorkingError> {
        let kv = js
            .get_key_value(ns.stream_name(BUCKET))
            .await
            .map_err(|e| WorkingError::Unavailable(e.to_string()))?;
        let log = WriteLog::open(js, ns)
            .await
            .map_err(WorkingError::Unavailable)?;
        Ok(Self { kv, log })
    }

    /// The session's keys (empty when none, or expired).
    pub async fn get(
        &self,
        tenant: &str,
        user_id: &str,
        session_id: &str,
    ) -> Result<Map<String, Value>, WorkingError> {
        Ok(self
            .entry(&key(tenant, user_id, session_id))
            .await?
            .map(|(m, _)| m)
            .unwrap_or_default())
    }

    async fn entry(&self, key: &str) -> Result<Option<(Map<String, Value>, u64)>, WorkingError> {
        let entry = self
            .kv
            .entry(key)
            .await
            .map_err(|e| WorkingError::Unavailable(e.to_string()))?;
        Ok(entry.and_then(|e| {
            if e.operation != kv::Operation::Put {
                return None;
            }
            // A value this code did not write reads as empty rather than failing recall.
            let map = serde_json::from_slice::<Map<String, Value>>(&e.value).unwrap_or_default();
            Some((map, e.revision))
        }))
    }

    /// Sets keys (a `null` value removes the key) and returns the session's
    /// keys after the change. Concurrent writers do not lose each other's keys.
    pub async fn merge(
        &self,
        tenant: &str,
        user_id: &str,
        session_id: &str,
        changes: &Map<String, Value>,
    ) -> Result<Map<String, Value>, WorkingError> {
        let key = key(tenant, user_id, session_id);
        for _ in 0..5 {
            let current = self.entry(&key).await?;
            let (mut map, revision) = match current {
                Some((m, r)) => (m, Some(r)),
                None => (Map::new(), None),
            };
            for (k, v) in changes {
                if v.is_null() {
                    map.remove(k);
                } else {
                    map.insert(k.clone(), v.clone());
                }
            }
            let bytes = serde_json::to_vec(&map).unwrap_or_default();
            if bytes.len() > MAX_BYTES {
                return Err(WorkingError::TooLarge);
            }
            let written = match revision {
                Some(r) => self
                    .kv
                    .update(&key, bytes.into(), r)
                    .await
                    .map(|revision| (revision, None))
                    .map_err(|e| e.to_string()),
                None => {
                    // A new lifetime of the key. How the previous one ended is
                    // read first: once the key exists, others record writes of it.
                    let previous = self.log.last_write(&key).await;
                    self.kv
                        .create(&key, bytes.into())
                        .await
                        .map(|revision| (revision, previous))
                        .map_err(|e| e.to_string())
                }
            };
            match written {
                Ok((revision, previous)) => {
                    self.log.put(&key, revision, previous).await;
                    return Ok(map);
                }
                // Someone else wrote in between: read again and retry.
                Err(e) if e.contains("wrong last sequence") || e.contains("already exists") => {
                    continue;
                }
                Err(e) => return Err(WorkingError::Unavailable(e)),
            }
        }
        Err(WorkingError::Conflict)
    }

    /// How many keys the user's sessions hold now.
    pub async fn user_keys(&self, tenant: &str, user_id: &str) -> Result<u64, WorkingError> {
        let filter = format!("{}{}.>", self.kv.prefix, user_prefix(tenant, user_id));
        let mut listing = self
            .kv
            .stream
            .info_with_subjects(&filter)
            .await
            .map_err(|e| WorkingError::Unavailable(e.to_string()))?;
        let mut subjects = Vec::new();
        while let Some(entry) = listing.next().await {
            subjects.push(
                entry
                    .map_err(|e| WorkingError::Unavailable(e.to_string()))?
                    .0,
            );
        }
        let mut keys = 0;
        for subject in &subjects {
            if let Some(key) = subject.strip_prefix(&self.kv.prefix)
                && let Some((map, _)) = self.entry(key).await?
            {
                keys += map.len() as u64;
            }
        }
        Ok(keys)
    }

    /// Removes every session's working memory of a user, with its history
    /// and its write records (erasing the user). The caller counts the keys
    /// first ([`Self::user_keys`]), when it needs them.
    pub async fn erase_user(&self, tenant: &str, user_id: &str) -> Result<Erased, WorkingError> {
        let unavailable = |e: String| WorkingError::Unavailable(e);
        let filter = format!("{}{}.>", self.kv.prefix, user_prefix(tenant, user_id));
        let entries = self
            .kv
            .stream
            .purge()
            .filter(&filter)
            .await
            .map_err(|e| unavailable(e.to_string()))?
            .purged;
        let records = self
            .log
            .purge(&user_prefix(tenant, user_id))
            .await
            .map_err(unavailable)?;
        Ok(Erased { entries, records })
    }

    /// Forgets the session's keys now rather than at expiry.
    pub async fn clear(
        &self,
        tenant: &str,
        user_id: &str,
        session_id: &str,
    ) -> Result<(), WorkingError> {
        let key = key(tenant, user_id, session_id);
        self.kv
            .delete(&key)
            .await
            .map_err(|e| WorkingError::Unavailable(e.to_string()))?;
        self.log.deleted(&key).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hold_any_id_in_kv_safe_characters() {
        let k = key("acme", "user@example.com", "会话 1");
        assert!(k.chars().all(|c| c.is_ascii_hexdigit() || c == '.'));
        assert_ne!(key("a", "bc", "d"), key("ab", "c", "d"));
    }
}
