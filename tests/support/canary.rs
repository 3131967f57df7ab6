//! Looking for a string everywhere a deployment keeps data: every row of
//! every table (any column, as text), every message of every stream of its
//! namespace, every line of the purge exports. What an erase test asks after
//! erasing a user: is their canary anywhere, and is everyone else's data as
//! it was.

use futures::TryStreamExt;

use crate::Deployment;

/// Every table of the deployment's database.
async fn tables(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
          WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .expect("tables")
}

/// How many rows of each table hold `needle`, any column, as text.
pub async fn rows_holding(d: &Deployment, needle: &str) -> Vec<(String, i64)> {
    let pool = &d.ctx.store.pool;
    let tables = tables(pool).await;
    let mut out = Vec::new();
    for table in tables {
        let sql = format!("SELECT count(*) FROM \"{table}\" AS r WHERE r::text ILIKE $1");
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(format!("%{needle}%"))
            .fetch_one(pool)
            .await
            .expect("count");
        if n > 0 {
            out.push((table, n));
        }
    }
    out
}

/// A hash of every row (any table) that names `user`, in a stable order.
pub async fn rows_hash(d: &Deployment, user: &str) -> Vec<(String, String)> {
    let pool = &d.ctx.store.pool;
    let tables = tables(pool).await;
    let mut out = Vec::new();
    for table in tables {
        let sql = format!(
            "SELECT coalesce(md5(string_agg(r::text, '|' ORDER BY r::text)), '') FROM \"{table}\" AS r
              WHERE r::text LIKE $1"
        );
        let hash: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(format!("%{user}%"))
            .fetch_one(pool)
            .await
            .expect("hash");
        out.push((table, hash));
    }
    out
}

/// Every message of every stream of the deployment's namespace (KV buckets
/// included), as (stream, sequence, headers and body as text).
pub async fn stream_messages(d: &Deployment) -> Vec<(String, u64, String)> {
    let js = &d.ctx.bus.js;
    let prefix = d.config().namespace.stream_name("");
    let names: Vec<String> = js.stream_names().try_collect().await.expect("stream names");
    let mut out = Vec::new();
    for name in names.into_iter().filter(|n| n.contains(&prefix)) {
        let mut stream = js.get_stream(&name).await.expect("stream");
        let state = stream.info().await.expect("info").state.clone();
        if state.messages == 0 {
            continue;
        }
        for seq in state.first_sequence..=state.last_sequence {
            if let Ok(msg) = stream.get_raw_message(seq).await {
                let mut headers: Vec<String> = msg
                    .headers
                    .iter()
                    .map(|(k, v)| format!("{k}={v:?}"))
                    .collect();
                headers.sort();
                let text = format!(
                    "{} {} {}",
                    msg.subject,
                    headers.join(","),
                    String::from_utf8_lossy(&msg.payload)
                );
                out.push((name.clone(), seq, text));
            }
        }
    }
    out
}

/// The messages holding `needle`, as (stream, sequence).
pub async fn messages_holding(d: &Deployment, needle: &str) -> Vec<(String, u64)> {
    stream_messages(d)
        .await
        .into_iter()
        .filter(|(_, _, text)| text.contains(needle))
        .map(|(stream, seq, _)| (stream, seq))
        .collect()
}

/// The messages naming `user` as their user, whole.
pub async fn messages_of(d: &Deployment, user: &str) -> Vec<(String, u64, String)> {
    let named = format!("\"user_id\":\"{user}\"");
    stream_messages(d)
        .await
        .into_iter()
        .filter(|(_, _, text)| text.contains(&named))
        .collect()
}

/// The export lines holding `needle`, as "file: line".
pub fn files_holding(dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the export directory") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("an export");
        for line in text.lines().filter(|l| l.contains(needle)) {
            out.push(format!("{}: {line}", path.display()));
        }
    }
    out
}

/// The export lines of a user's memories.
pub fn lines_of(dir: &std::path::Path, user: &str) -> Vec<String> {
    files_holding(dir, &format!("\"user_id\":\"{user}\""))
}
