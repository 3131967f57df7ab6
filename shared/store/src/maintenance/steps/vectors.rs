//! Reading memories with their vectors, one user and model at a time: what
//! merges and consolidations compare.

use chrono::{DateTime, Utc};
use hindsight_core::fact::FactType;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreError;

/// The memories of one user and embedding model that a step looks at together.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Group {
    pub tenant: String,
    pub user_id: String,
    pub embedding_model: String,
}

/// Users (per model) with at least two active memories: where merges can
/// happen (pinned memories are left alone).
pub async fn merge_groups(
    conn: &mut PgConnection,
    tenant: Option<&str>,
) -> Result<Vec<Group>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant, user_id, embedding_model FROM memories
         WHERE status = 'active' AND NOT pinned AND ($1::text IS NULL OR tenant = $1)
         GROUP BY 1, 2, 3 HAVING count(*) > 1 ORDER BY 1, 2, 3",
    )
    .bind(tenant)
    .fetch_all(conn)
    .await?)
}

/// A memory with what a merge or a consolidation needs.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct VectorRow {
    pub id: Uuid,
    pub tenant: String,
    pub user_id: String,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub fact_type: FactType,
    pub content: String,
    pub entities: Vec<String>,
    pub importance: f32,
    pub confidence: f32,
    pub source_trust: String,
    pub access_count: i32,
    pub occurred_at: Option<DateTime<Utc>>,
    pub valid_from: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub status_at: Option<DateTime<Utc>>,
    pub embedding_model: String,
    pub embedding_version: String,
    #[sqlx(try_from = "Floats")]
    pub embedding: Vec<f32>,
}

/// A `real[]` read straight from Postgres' binary array format. Merge and
/// consolidation read every active memory's vector; decoding each element
/// through sqlx's generic `Decode` took a third of the merge's time on the
/// client over a million memories.
struct Floats(Vec<f32>);

impl From<Floats> for Vec<f32> {
    fn from(f: Floats) -> Self {
        f.0
    }
}

impl sqlx::Type<sqlx::Postgres> for Floats {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <Vec<f32> as sqlx::Type<sqlx::Postgres>>::type_info()
    }

    fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
        <Vec<f32> as sqlx::Type<sqlx::Postgres>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Postgres> for Floats {
    fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        if value.format() != sqlx::postgres::PgValueFormat::Binary {
            return Ok(Floats(<Vec<f32> as sqlx::Decode<sqlx::Postgres>>::decode(
                value,
            )?));
        }
        decode_floats(value.as_bytes()?).map(Floats)
    }
}

/// A one-dimensional `float4[]` without nulls in binary format: dimensions,
/// a null flag, the element type, (length, lower bound) per dimension, then
/// (byte length, big-endian value) per element.
fn decode_floats(bytes: &[u8]) -> Result<Vec<f32>, sqlx::error::BoxDynError> {
    fn int(bytes: &[u8], at: usize) -> Result<i32, sqlx::error::BoxDynError> {
        let b = bytes.get(at..at + 4).ok_or("truncated real[]")?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    let dimensions = int(bytes, 0)?;
    if dimensions == 0 {
        return Ok(Vec::new());
    }
    if dimensions != 1 {
        return Err(
            format!("expected a one-dimensional real[], got {dimensions} dimensions").into(),
        );
    }
    let len = usize::try_from(int(bytes, 12)?)?;
    let mut out = Vec::with_capacity(len);
    let mut at = 20;
    for _ in 0..len {
        if int(bytes, at)? != 4 {
            return Err("a real[] element is null or not 4 bytes".into());
        }
        out.push(f32::from_bits(int(bytes, at + 4)? as u32));
        at += 8;
    }
    Ok(out)
}

/// Over `memories m JOIN memory_vectors v`: a memory without a vector has
/// nothing to compare (the groups above may count it; it is never read).
const VECTOR_COLUMNS: &str =
    "m.id, m.tenant, m.user_id, m.agent_id, m.session_id, m.fact_type, m.content, m.entities,
    m.importance, m.confidence, m.source_trust, m.access_count, m.occurred_at, m.valid_from, m.created_at,
    m.last_accessed_at, m.updated_at, m.status_at, m.embedding_model, m.embedding_version, v.embedding";

/// One group's active memories.
pub async fn merge_rows(
    conn: &mut PgConnection,
    group: &Group,
) -> Result<Vec<VectorRow>, StoreError> {
    let sql = format!(
        "SELECT {VECTOR_COLUMNS} FROM memories m JOIN memory_vectors v ON v.id = m.id
         WHERE m.status = 'active' AND NOT m.pinned
           AND m.tenant = $1 AND m.user_id = $2 AND m.embedding_model = $3
         ORDER BY m.id"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&group.tenant)
        .bind(&group.user_id)
        .bind(&group.embedding_model)
        .fetch_all(conn)
        .await?)
}

/// Users (per model) with episodic memories a consolidation takes.
pub async fn consolidate_groups(
    conn: &mut PgConnection,
    tenant: Option<&str>,
    created_before: DateTime<Utc>,
    max_accesses: i32,
) -> Result<Vec<Group>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant, user_id, embedding_model FROM memories
         WHERE status = 'active' AND NOT pinned AND kind = 'episodic'
           AND ($1::text IS NULL OR tenant = $1) AND created_at <= $2 AND access_count < $3
         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    )
    .bind(tenant)
    .bind(created_before)
    .bind(max_accesses)
    .fetch_all(conn)
    .await?)
}

/// One group's episodic memories old and unused enough to consolidate.
pub async fn consolidate_rows(
    conn: &mut PgConnection,
    group: &Group,
    created_before: DateTime<Utc>,
    max_accesses: i32,
) -> Result<Vec<VectorRow>, StoreError> {
    let sql = format!(
        "SELECT {VECTOR_COLUMNS} FROM memories m JOIN memory_vectors v ON v.id = m.id
         WHERE m.status = 'active' AND NOT m.pinned AND m.kind = 'episodic'
           AND m.tenant = $1 AND m.user_id = $2 AND m.embedding_model = $3
           AND m.created_at <= $4 AND m.access_count < $5
         ORDER BY coalesce(m.occurred_at, m.created_at), m.id"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&group.tenant)
        .bind(&group.user_id)
        .bind(&group.embedding_model)
        .bind(created_before)
        .bind(max_accesses)
        .fetch_all(conn)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::decode_floats;

    #[test]
    fn reads_binary_real_arrays() {
        let mut bytes = Vec::new();
        for header in [1i32, 0, 700, 2, 1] {
            bytes.extend(header.to_be_bytes());
        }
        for x in [1.5f32, -0.25] {
            bytes.extend(4i32.to_be_bytes());
            bytes.extend(x.to_be_bytes());
        }
        assert_eq!(decode_floats(&bytes).expect("decoded"), vec![1.5, -0.25]);
        assert_eq!(
            decode_floats(&0i32.to_be_bytes()).expect("empty"),
            Vec::<f32>::new()
        );
        assert!(decode_floats(&bytes[..30]).is_err(), "truncated");
        let mut null = bytes.clone();
        null[28..32].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_floats(&null).is_err(), "null element");
    }
}
