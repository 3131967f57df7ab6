//! A throw-away deployment on the configured servers: a fresh namespace, a
//! fresh database and a fresh data directory, removed again afterwards. Tests,
//! benchmarks and evaluations run in one, so they never mix with a running
//! deployment or with each other.

use std::{path::PathBuf, str::FromStr};

use sqlx::{ConnectOptions, Connection, postgres::PgConnectOptions};

use hindsight_core::Namespace;

use hindsight_store::StoreError;

use crate::{bus::Bus, config::Config, streams::Topology};

/// `url` with its database name replaced.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_start = base.find("://").map(|i| i + 3).unwrap_or(0);
    let path_start = base[authority_start..]
        .find('/')
        .map(|i| i + authority_start)
        .unwrap_or(base.len());
    let mut out = format!("{}/{}", &base[..path_start], database);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// A unique sandbox derived from `base` (which names the servers to use).
#[derive(Clone)]
pub struct Sandbox {
    pub config: Config,
    pub database: String,
}

impl Sandbox {
    /// `label` shows up in names, to tell sandboxes apart (`test`, `bench`, `eval`).
    pub fn new(base: &Config, label: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let short = &id[..12];
        let namespace =
            Namespace::new(&format!("{label}-{short}")).unwrap_or_else(|_| base.namespace.clone());
        let database = format!("hindsight_{label}_{short}");
        let mut config = base.clone();
        config.namespace = namespace;
        config.database_url = with_database(&base.database_url, &database);
        config.http_addr = ([127, 0, 0, 1], 0).into();
        config.data_dir = std::env::temp_dir().join(format!("hindsight-{label}-{short}"));
        Self { config, database }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.config.data_dir.clone()
    }

    /// Deletes the namespace's streams and buckets, the database and the data directory.
    pub async fn remove(&self, bus: &Bus) -> Result<(), StoreError> {
        if let Ok(topology) = Topology::load() {
            for (spec, _) in &topology.streams {
                let _ = bus
                    .js
                    .delete_stream(self.config.namespace.stream_name(&spec.name))
                    .await;
            }
            for bucket in &topology.buckets {
                let name = self.config.namespace.stream_name(&bucket.name);
                let _ = bus.js.delete_stream(format!("KV_{name}")).await;
            }
        }
        self.drop_database().await?;
        let _ = std::fs::remove_dir_all(&self.config.data_dir);
        Ok(())
    }

    /// Drops the sandbox's database (for sandboxes that never touched NATS).
    pub async fn drop_database(&self) -> Result<(), StoreError> {
        let options = PgConnectOptions::from_str(&self.config.database_url)
            .map_err(|e| StoreError::Url(e.to_string()))?
            .database("postgres")
            .disable_statement_logging();
        let mut conn = sqlx::PgConnection::connect_with(&options)
            .await
            .map_err(|e| StoreError::Connect(e.to_string()))?;
        let drop = sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.database
        ));
        sqlx::raw_sql(drop).execute(&mut conn).await?;
        let _ = conn.close().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_name_only() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/hindsight", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h/db?sslmode=disable", "y"),
            "postgres://u:p@h/y?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://h:5432", "z"),
            "postgres://h:5432/z"
        );
    }
}
