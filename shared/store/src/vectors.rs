//! `memory_vectors`: each memory's stored vector, in a table of its own (see
//! migration 0015), so that a memory's row stays narrow for every scan that
//! does not need the vector. Kept so that the index can be rebuilt without
//! re-embedding, and read by dedupe, the janitor and recall.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreError;

/// Writes (or replaces) the vector of a memory; call it in the transaction
/// that writes the memory.
pub async fn put(conn: &mut PgConnection, id: Uuid, embedding: &[f32]) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO memory_vectors (id, embedding) VALUES ($1, $2)
         ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding",
    )
    .bind(id)
    .bind(embedding)
    .execute(conn)
    .await?;
    Ok(())
}
