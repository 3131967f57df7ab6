//! Reading what a step looks at: the policy's view of a memory, and the
//! stretches of `memories` that decay, archive and purge read in physical order.

use chrono::{DateTime, Utc};
use hindsight_core::{
    fact::FactType,
    memory::{Kind, Status},
};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreError;

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
    pub status_at: Option<DateTime<Utc>>,
    pub pinned: bool,
}

const STATE_COLUMNS: &str = "id, tenant, user_id, kind, fact_type, status,
    CASE WHEN fact_type = 'constraint' THEN content ELSE '' END AS content,
    importance, access_count, created_at, last_accessed_at, decayed_at, archived_at, updated_at,
    expires_at, status_at, pinned";

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
/// Decay and archive (one pass) read this way rather than by id: a stretch
/// is a few thousand contiguous blocks read in sequence, and a block's rows are
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
/// A row the run itself decayed and moved further on may be read again; the
/// policy then leaves it as it is (its decay is done; an archived row is no
/// longer active and is not read).
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
/// `$2` and `$7` are `before`) in the `limit` blocks after `from`, in
/// batches of at most `limit`.
async fn stretch(
    conn: &mut PgConnection,
    condition: &str,
    tenant: Option<&str>,
    before: (DateTime<Utc>, DateTime<Utc>),
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
           AND status = 'active' AND NOT pinned AND ($1::text IS NULL OR tenant = $1)
           AND {condition}
         ORDER BY ctid LIMIT $6"
    );
    let rows: Vec<Located> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(before.0)
        .bind(from.block)
        .bind(from.line)
        .bind(end)
        .bind(most)
        .bind(before.1)
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

/// Active memories untouched (and undecayed) since `stale_before`, those
/// untouched since `idle_before`, and those with an end (`expires_at`, which
/// the policy compares with the run's clock): what decay and archive look
/// at, the stretch from `from` (see [`Stretch`]).
pub async fn decay_archive_candidates(
    conn: &mut PgConnection,
    tenant: Option<&str>,
    stale_before: DateTime<Utc>,
    idle_before: DateTime<Utc>,
    from: Position,
    limit: i64,
) -> Result<Stretch, StoreError> {
    let condition = format!(
        "(greatest({LAST_TOUCH}, coalesce(decayed_at, created_at)) <= $2
          OR {LAST_TOUCH} <= $7 OR expires_at IS NOT NULL)"
    );
    let before = (stale_before, idle_before);
    stretch(conn, &condition, tenant, before, from, limit).await
}

/// The memories no longer current that a purge looks at, each class read
/// through its own index in the order of its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeClass {
    /// Archived (expired plans among them), by `archived_at`.
    Archived,
    /// Deleted through the API, by `archived_at`.
    Deleted,
    /// Superseded, by when they were (`status_at`).
    Superseded,
}

impl PurgeClass {
    pub const ALL: [PurgeClass; 3] = [Self::Archived, Self::Deleted, Self::Superseded];

    fn condition(self) -> &'static str {
        match self {
            Self::Archived => "status = 'archived' AND archived_at <= $2",
            Self::Deleted => "status = 'deleted' AND archived_at <= $2",
            Self::Superseded => "status = 'superseded' AND coalesce(status_at, created_at) <= $2",
        }
    }

    fn order(self) -> &'static str {
        match self {
            Self::Archived | Self::Deleted => "archived_at, id",
            Self::Superseded => "coalesce(status_at, created_at), id",
        }
    }
}

/// Unpinned memories of `class` whose clock is at or before `before`, the
/// oldest first.
pub async fn purge_candidates(
    conn: &mut PgConnection,
    tenant: Option<&str>,
    class: PurgeClass,
    before: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<StateRow>, StoreError> {
    let sql = format!(
        "SELECT {STATE_COLUMNS} FROM memories
         WHERE {} AND NOT pinned AND ($1::text IS NULL OR tenant = $1)
         ORDER BY {} LIMIT $3",
        class.condition(),
        class.order()
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(before)
        .bind(limit)
        .fetch_all(conn)
        .await?)
}

/// Unpinned quarantined memories quarantined at or before `before`, the
/// oldest first: those whose review period has ended.
pub async fn review_candidates(
    conn: &mut PgConnection,
    tenant: Option<&str>,
    before: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<StateRow>, StoreError> {
    let sql = format!(
        "SELECT {STATE_COLUMNS} FROM memories
         WHERE status = 'quarantined' AND coalesce(status_at, created_at) <= $2
           AND NOT pinned AND ($1::text IS NULL OR tenant = $1)
         ORDER BY coalesce(status_at, created_at), id LIMIT $3"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant)
        .bind(before)
        .bind(limit)
        .fetch_all(conn)
        .await?)
}
