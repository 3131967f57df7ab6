//! Tenants and their bearer keys. A key is 256 random bits shown once; only
//! its SHA-256 is stored, so a leaked table does not leak keys.

use sha2::{Digest, Sha256};

use super::{Store, StoreError};

/// The prefix every key starts with, so a key is recognisable in a config file.
pub const KEY_PREFIX: &str = "hsk_";

pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

fn new_key() -> String {
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    format!("{KEY_PREFIX}{a}{b}")
}

impl Store {
    /// Creates the tenant if needed and a new key for it; returns the key,
    /// which is not stored anywhere.
    pub async fn create_tenant_key(&self, tenant: &str) -> Result<String, StoreError> {
        let key = new_key();
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO tenants (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
            .bind(tenant)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO api_keys (key_hash, tenant, prefix) VALUES ($1, $2, $3)")
            .bind(hash_key(&key))
            .bind(tenant)
            .bind(&key[..KEY_PREFIX.len() + 6])
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(key)
    }

    /// The tenant a key belongs to, if it is a live key.
    pub async fn tenant_of_key(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT tenant FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        )
        .bind(hash_key(key))
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Revokes every key of the tenant; returns how many.
    pub async fn revoke_tenant_keys(&self, tenant: &str) -> Result<u64, StoreError> {
        Ok(sqlx::query(
            "UPDATE api_keys SET revoked_at = now() WHERE tenant = $1 AND revoked_at IS NULL",
        )
        .bind(tenant)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}
