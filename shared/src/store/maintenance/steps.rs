//! The reads and batch writes of each step of a run. Reads are stretches in
//! physical order ([`Stretch`]), or one user's memories at a time; writes
//! take whole batches through `unnest`, with one audit event per changed
//! memory carrying the values it replaced, so that [`super::restore`] can put
//! them back.

use chrono::{DateTime, Utc};
use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
};
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::ACTOR;
use crate::store::StoreError;

/// What the policy needs of a memory (content only for constraints, whose
/// words decide a health-and-safety floor).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StateRow {
    pub id: Uuid,
    pub tenant: String,
    pub user_id: String,
    #[sqlx(try_from = "String")]
    pub kind: Kind,
    #[sqlx(try_from = "String")]
    pub fact_type: FactType,
    #[sqlx(try_from = "String")]
    pub status: Status,
    pub content: String,
    pub importance: f32,
    pub access_count: i32,
    pub created_at: DateTime<Utc>,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub decayed_at: Option<DateTime<Utc>>,
    pub archived_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

const STATE_COLUMNS: &str = "id, tenant, user_id, kind, fact_type, status,
    CASE WHEN fact_type = 'constraint' THEN content ELSE '' END AS content,
    importance, access_count, created_at, last_accessed_at, decayed_at, archived_at, updated_at,
    expires_at";

/// The last time anyone used a memory, in SQL (as `MemoryState::last_touch`).
const LAST_TOUCH: &str = "greatest(coalesce(last_accessed_at, created_at), created_at)";

/// Where a read of `memories` in physical order stands: after the row at
/// this `ctid` (block, line pointer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    pub block: i64,
    pub line: i32,
}

/// A stretch of `memories` read in physical order: its candidates in batches
/// to write one after the other (each at most one row of any block), and
/// where the next stretch starts (`None`: the table is done).
///
/// Decay and archive read this way rather than by id: a stretch is a few
/// thousand contiguous blocks read in sequence, and a block's rows are
/// written in consecutive transactions, so that each block is written back
/// (and copied whole to the WAL after a checkpoint) about once, instead of
/// once per row in transactions far apart as with random ids. And a block's
/// rows are written in separate transactions: each update finds the room its
/// block kept (fillfactor) freed by the previous one and stays in place
/// (HOT, for decay), whereas updating them together moves all but the first
/// elsewhere, with new entries in every index (the decay of a million
/// memories took 69 s that way, 25 s by id).
///
/// A row that a concurrent write moves to a block already read is left to
/// the next run, which decays it for the whole time since (decay composes).
/// Rows the run itself rewrote no longer match the step's condition.
#[derive(Debug, Default)]
pub struct Stretch {
    pub batches: Vec<Vec<StateRow>>,
    pub next: Option<Position>,
}

#[derive(sqlx::FromRow)]
struct Located {
    #[sqlx(flatten)]
    row: StateRow,
    block: i64,
    line: i32,
}

/// The active memories (of `tenant`, if any) matching `condition` (where
/// `$2` is `before`) in the `limit` blocks after `from`, in batches of at
/// most `limit`.
async fn stretch(
    conn: &mut PgConnection,
    condition: &str,
    tenant: Option<&str>,
    before: DateTime<Utc>,
    from: Position,
    limit: i64,
) -> Result<Stretch, StoreError> {
    let limit = limit.max(1);
    let blocks: i64 = sqlx::query_scalar(
        "SELECT pg_relation_size('memories') / current_setting('block_size')::bigint",
    )
    .fetch_one(&mut *conn)
    .await?;
    if from.block >= blocks {
        return Ok(Stretch::default());
    }
    let end = from.block + limit;
    // Rows of small memories crowd a block: a stretch ends early past this many.
    let most = limit * 4;
    let sql = format!(
        "SELECT {STATE_COLUMNS}, (ctid::text::point)[0]::bigint AS block,
                (ctid::text::point)[1]::int AS line
         FROM memories
         WHERE ctid > format('(%s,%s)', $3::bigint, $4::int)::tid
           AND ctid < format('(%s,0)', $5::bigint)::tid
           AND status = 'active' AND ($1::text IS NULL OR tenant = $1) AND {condition}
         ORDER BY ctid LIMIT $6"
    );
    let rows: Vec<Located> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(before)
        .bind(from.block)
        .bind(from.line)
        .bind(end)
        .bind(most)
        .fetch_all(&mut *conn)
        .await?;
    let next = match rows.last() {
        Some(last) if rows.len() as i64 == most => Some(Position {
            block: last.block,
            line: last.line,
        }),
        _ => (end < blocks).then_some(Position {
            block: end,
            line: 0,
        }),
    };
    // The first row of each block, then the second, and so on.
    let mut ranks: Vec<Vec<StateRow>> = Vec::new();
    let (mut block, mut rank) = (-1, 0);
    for r in rows {
        rank = if r.block == block { rank + 1 } else { 0 };
        block = r.block;
        if ranks.len() == rank {
            ranks.push(Vec::new());
        }
        ranks[rank].push(r.row);
    }
    let batches = ranks
        .into_iter()
        .flat_map(|rank| {
            let mut rank = rank.into_iter().peekable();
            std::iter::from_fn(move || {
                rank.peek()?;
                Some(rank.by_ref().take(limit as usize).collect::<Vec<_>>())
            })
        })
        .collect();
    Ok(Stretch { batches, next })
}

/// Active memories untouched (and undecayed) since `stale_before`: the
/// stretch from `from` (see [`Stretch`]).
pub async fn decay_candidates(
    conn: &mut PgConnection,
    tenant: Option<&str>,
    stale_before: DateTime<Utc>,
    from: Position,
    limit: i64,
) -> Result<Stretch, StoreError> {
    let condition = format!("greatest({LAST_TOUCH}, coalesce(decayed_at, created_at)) <= $2");
    stretch(conn, &condition, tenant, stale_before, from, limit).await
}

/// Active memories untouched since `idle_before`, and those with an end
/// (`expires_at`, which the policy compares with the run's clock): the
/// stretch from `from` (see [`Stretch`]).
pub async fn archive_candidates(
    conn: &mut PgConnection,
    tenant: Option<&str>,
    idle_before: DateTime<Utc>,
    from: Position,
    limit: i64,
) -> Result<Stretch, StoreError> {
    let condition = format!("({LAST_TOUCH} <= $2 OR expires_at IS NOT NULL)");
    stretch(conn, &condition, tenant, idle_before, from, limit).await
}

/// Archived and deleted memories archived at or before `archived_before`.
pub async fn purge_candidates(
    conn: &mut PgConnection,
    tenant: Option<&str>,
    archived_before: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<StateRow>, StoreError> {
    let sql = format!(
        "SELECT {STATE_COLUMNS} FROM memories
         WHERE status IN ('archived', 'deleted') AND ($1::text IS NULL OR tenant = $1)
           AND archived_at <= $2
         ORDER BY archived_at, id LIMIT $3"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(archived_before)
        .bind(limit)
        .fetch_all(conn)
        .await?)
}

/// The memories of one user and embedding model that a step looks at together.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Group {
    pub tenant: String,
    pub user_id: String,
    pub embedding_model: String,
}

/// Users (per model) with at least two active memories: where merges can happen.
pub async fn merge_groups(
    conn: &mut PgConnection,
    tenant: Option<&str>,
) -> Result<Vec<Group>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant, user_id, embedding_model FROM memories
         WHERE status = 'active' AND embedding IS NOT NULL AND ($1::text IS NULL OR tenant = $1)
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

const VECTOR_COLUMNS: &str =
    "id, tenant, user_id, agent_id, session_id, fact_type, content, entities,
    importance, confidence, source_trust, access_count, occurred_at, valid_from, created_at,
    last_accessed_at, updated_at, embedding_model, embedding_version, embedding";

/// One group's active memories.
pub async fn merge_rows(
    conn: &mut PgConnection,
    group: &Group,
) -> Result<Vec<VectorRow>, StoreError> {
    let sql = format!(
        "SELECT {VECTOR_COLUMNS} FROM memories
         WHERE status = 'active' AND embedding IS NOT NULL
           AND tenant = $1 AND user_id = $2 AND embedding_model = $3
         ORDER BY id"
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
         WHERE status = 'active' AND kind = 'episodic' AND embedding IS NOT NULL
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
        "SELECT {VECTOR_COLUMNS} FROM memories
         WHERE status = 'active' AND kind = 'episodic' AND embedding IS NOT NULL
           AND tenant = $1 AND user_id = $2 AND embedding_model = $3
           AND created_at <= $4 AND access_count < $5
         ORDER BY coalesce(occurred_at, created_at), id"
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

/// Writes one audit event per memory of a run.
async fn add_events(
    conn: &mut PgConnection,
    run: Uuid,
    event: &str,
    rows: Vec<(Uuid, String, Value)>,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut ids = Vec::with_capacity(rows.len());
    let mut tenants = Vec::with_capacity(rows.len());
    let mut details = Vec::with_capacity(rows.len());
    for (id, tenant, detail) in rows {
        ids.push(id);
        tenants.push(tenant);
        details.push(detail);
    }
    sqlx::query(
        "INSERT INTO memory_events (memory_id, tenant, event, actor, run_id, detail)
         SELECT id, tenant, $4, $5, $6, detail
         FROM unnest($1::uuid[], $2::text[], $3::jsonb[]) AS e(id, tenant, detail)",
    )
    .bind(ids)
    .bind(tenants)
    .bind(details)
    .bind(event)
    .bind(ACTOR)
    .bind(run)
    .execute(conn)
    .await?;
    Ok(())
}

/// A memory's importance lowered by decay.
#[derive(Debug, Clone)]
pub struct Decay {
    pub id: Uuid,
    pub tenant: String,
    pub importance: f32,
    pub before_importance: f32,
    pub before_decayed_at: Option<DateTime<Utc>>,
}

/// Decays a batch. Only `importance` and `decayed_at` change (no indexed
/// column, so Postgres can update the rows in place).
pub async fn apply_decay(
    conn: &mut PgConnection,
    run: Uuid,
    as_of: DateTime<Utc>,
    rows: &[Decay],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let importance: Vec<f32> = rows.iter().map(|r| r.importance).collect();
    sqlx::query(
        "UPDATE memories m SET importance = u.importance, decayed_at = $3
         FROM unnest($1::uuid[], $2::real[]) AS u(id, importance) WHERE m.id = u.id",
    )
    .bind(&ids)
    .bind(&importance)
    .bind(as_of)
    .execute(&mut *conn)
    .await?;
    let events = rows
        .iter()
        .map(|r| {
            let detail = json!({
                "before": {"importance": r.before_importance, "decayed_at": r.before_decayed_at},
                "after": {"importance": r.importance, "decayed_at": as_of},
            });
            (r.id, r.tenant.clone(), detail)
        })
        .collect();
    add_events(conn, run, "decay", events).await
}

/// A memory moved to `archived` (by the archive step, or folded into another).
#[derive(Debug, Clone)]
pub struct Archive {
    pub id: Uuid,
    pub tenant: String,
    /// The survivor or summary it was folded into; `None` for a plain archive.
    pub into: Option<Uuid>,
    pub before_status: Status,
    pub before_archived_at: Option<DateTime<Utc>>,
    pub before_updated_at: DateTime<Utc>,
}

/// Archives a batch (out of the index and of recall, still in Postgres). A
/// folded memory's provenance moves to the memory it was folded into, and its
/// event lists the moved facts so that a restore can move them back.
pub async fn apply_archive(
    conn: &mut PgConnection,
    run: Uuid,
    as_of: DateTime<Utc>,
    event: &str,
    rows: &[Archive],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let into: Vec<Option<Uuid>> = rows.iter().map(|r| r.into).collect();
    sqlx::query(
        "UPDATE memories m SET status = 'archived', archived_at = $3, merged_into = u.into_id,
                updated_at = clock_timestamp(), index_state = 'pending'
         FROM unnest($1::uuid[], $2::uuid[]) AS u(id, into_id) WHERE m.id = u.id",
    )
    .bind(&ids)
    .bind(&into)
    .bind(as_of)
    .execute(&mut *conn)
    .await?;
    let moved: Vec<(Uuid, Vec<String>)> = sqlx::query_as(
        "WITH moved AS (
            UPDATE memory_sources s SET memory_id = u.into_id
            FROM unnest($1::uuid[], $2::uuid[]) AS u(id, into_id)
            WHERE s.memory_id = u.id AND u.into_id IS NOT NULL
            RETURNING u.id, s.fact_id)
         SELECT id, array_agg(fact_id ORDER BY fact_id) FROM moved GROUP BY id",
    )
    .bind(&ids)
    .bind(&into)
    .fetch_all(&mut *conn)
    .await?;
    let mut moved: std::collections::HashMap<Uuid, Vec<String>> = moved.into_iter().collect();
    let events = rows
        .iter()
        .map(|r| {
            let mut detail = json!({
                "before": {"status": r.before_status, "archived_at": r.before_archived_at,
                           "updated_at": r.before_updated_at},
                "after": {"status": "archived", "archived_at": as_of},
            });
            if let Some(into) = r.into {
                detail["role"] = json!("folded");
                detail["into"] = json!(into);
                detail["fact_ids"] = json!(moved.remove(&r.id).unwrap_or_default());
            }
            (r.id, r.tenant.clone(), detail)
        })
        .collect();
    add_events(conn, run, event, events).await
}

/// What a merge does to the memory that survives it.
#[derive(Debug, Clone)]
pub struct Survivor {
    pub id: Uuid,
    pub tenant: String,
    pub merged: Vec<Uuid>,
    pub importance: f32,
    pub access_count: i32,
    pub last_accessed_at: Option<DateTime<Utc>>,
    pub before_importance: f32,
    pub before_access_count: i32,
    pub before_last_accessed_at: Option<DateTime<Utc>>,
    pub before_updated_at: DateTime<Utc>,
}

/// Gives survivors the combined importance and use of what merged into them.
pub async fn apply_survivors(
    conn: &mut PgConnection,
    run: Uuid,
    rows: &[Survivor],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let importance: Vec<f32> = rows.iter().map(|r| r.importance).collect();
    let access: Vec<i32> = rows.iter().map(|r| r.access_count).collect();
    let last: Vec<Option<DateTime<Utc>>> = rows.iter().map(|r| r.last_accessed_at).collect();
    sqlx::query(
        "UPDATE memories m SET importance = u.importance, access_count = u.access_count,
                last_accessed_at = u.last_accessed_at, updated_at = clock_timestamp()
         FROM unnest($1::uuid[], $2::real[], $3::int[], $4::timestamptz[])
              AS u(id, importance, access_count, last_accessed_at)
         WHERE m.id = u.id",
    )
    .bind(&ids)
    .bind(&importance)
    .bind(&access)
    .bind(&last)
    .execute(&mut *conn)
    .await?;
    let events = rows
        .iter()
        .map(|r| {
            let detail = json!({
                "role": "survivor",
                "merged": r.merged,
                "before": {"importance": r.before_importance, "access_count": r.before_access_count,
                           "last_accessed_at": r.before_last_accessed_at, "updated_at": r.before_updated_at},
                "after": {"importance": r.importance, "access_count": r.access_count,
                          "last_accessed_at": r.last_accessed_at},
            });
            (r.id, r.tenant.clone(), detail)
        })
        .collect();
    add_events(conn, run, "merge", events).await
}

/// Writes consolidated summaries (new semantic memories) with their events;
/// the originals are archived into them with [`apply_archive`] afterwards.
pub async fn insert_summaries(
    conn: &mut PgConnection,
    run: Uuid,
    as_of: DateTime<Utc>,
    summaries: &[(crate::store::memories::NewMemory, Vec<Uuid>)],
) -> Result<(), StoreError> {
    if summaries.is_empty() {
        return Ok(());
    }
    for (m, _) in summaries {
        crate::store::memories::insert_on(&mut *conn, m).await?;
    }
    // Written as of the run's clock, so a resumed run writes the same rows.
    let ids: Vec<Uuid> = summaries.iter().map(|(m, _)| m.id).collect();
    sqlx::query("UPDATE memories SET created_at = $2 WHERE id = ANY($1)")
        .bind(&ids)
        .bind(as_of)
        .execute(&mut *conn)
        .await?;
    let events = summaries
        .iter()
        .map(|(m, originals)| {
            let detail = json!({"role": "summary", "originals": originals});
            (m.id, m.tenant.clone(), detail)
        })
        .collect();
    add_events(conn, run, "consolidate", events).await
}

/// The rows a purge is about to delete, each as one JSON object with its
/// provenance, to be written to the export before they go.
pub async fn export_rows(conn: &mut PgConnection, ids: &[Uuid]) -> Result<Vec<Value>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT to_jsonb(m) || jsonb_build_object('sources', coalesce(
                    (SELECT jsonb_agg(jsonb_build_object('fact_id', s.fact_id, 'turn_id', s.turn_id,
                                                         'added_at', s.added_at) ORDER BY s.fact_id)
                     FROM memory_sources s WHERE s.memory_id = m.id), '[]'::jsonb))
         FROM memories m WHERE m.id = ANY($1) ORDER BY m.id",
    )
    .bind(ids)
    .fetch_all(conn)
    .await?)
}

/// Deletes exported rows (their provenance goes with them), with a `purge`
/// event naming the export that holds them.
pub async fn apply_purge(
    conn: &mut PgConnection,
    run: Uuid,
    rows: &[(Uuid, String)],
    export: &str,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.0).collect();
    sqlx::query("DELETE FROM memories WHERE id = ANY($1)")
        .bind(&ids)
        .execute(&mut *conn)
        .await?;
    let events = rows
        .iter()
        .map(|(id, tenant)| (*id, tenant.clone(), json!({"export": export})))
        .collect();
    add_events(conn, run, "purge", events).await
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
