use std::{str::FromStr, time::Duration};

use sqlx::{
    ConnectOptions, Connection, PgConnection, PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

use hindsight_core::retry;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid database URL: {0}")]
    Url(String),
    #[error("cannot reach Postgres: {0}")]
    Connect(String),
    #[error("cannot create database {name}: {reason}")]
    Create { name: String, reason: String },
    #[error("migrating the database: {0}")]
    Migrate(String),
    #[error("database: {0}")]
    Query(#[from] sqlx::Error),
    #[error("a stored value outside its set: {0}")]
    Stored(#[from] hindsight_core::closed_set::UnknownName),
}

/// The Postgres pool every store module works through.
#[derive(Clone, Debug)]
pub struct Store {
    pub pool: PgPool,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

impl Store {
    /// Connects to the database at `url` with a pool of up to `pool` connections,
    /// creating the database if missing and applying migrations. Retries for up to
    /// 30 s while Postgres is starting.
    pub async fn connect(url: &str, pool: u32) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Url(e.to_string()))?
            .disable_statement_logging();
        create_database_if_missing(&options).await?;
        let pool = retry::with_backoff("postgres", Duration::from_secs(30), || {
            PgPoolOptions::new()
                .max_connections(pool)
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options.clone())
        })
        .await
        .map_err(|e| StoreError::Connect(e.to_string()))?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| StoreError::Migrate(e.to_string()))?;
        Ok(Self { pool })
    }
}

/// Creates the target database through the `postgres` maintenance database.
/// Two processes racing to create it are fine: the loser sees it exists.
async fn create_database_if_missing(options: &PgConnectOptions) -> Result<(), StoreError> {
    let name = options.get_database().unwrap_or("postgres").to_string();
    let admin = options.clone().database("postgres");
    let mut conn = retry::with_backoff("postgres", Duration::from_secs(30), || {
        PgConnection::connect_with(&admin)
    })
    .await
    .map_err(|e| StoreError::Connect(e.to_string()))?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(&name)
            .fetch_one(&mut conn)
            .await?;
    if !exists {
        // Identifiers cannot be bound as parameters; the name is quoted instead.
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        let create = sqlx::AssertSqlSafe(format!("CREATE DATABASE {quoted}"));
        match sqlx::raw_sql(create).execute(&mut conn).await {
            Ok(_) => tracing::info!(database = %name, "database created"),
            // 42P04: duplicate_database, another process won the race.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
            // 23505: unique_violation on pg_database, the same race seen earlier.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {}
            Err(e) => {
                return Err(StoreError::Create {
                    name,
                    reason: e.to_string(),
                });
            }
        }
    }
    let _ = conn.close().await;
    Ok(())
}
