//! Which schema version a journal is at, read without writing anything (a
//! worker refuses a schema older or newer than it knows; `hcp-workflow migrate` says from
//! which version to which).
//!
//! The version is sqlx's: the newest successful row of `_sqlx_migrations`, against the
//! newest migration compiled into this binary ([`crate::SqliteStore::latest_schema_version`],
//! [`crate::PostgresStore::latest_schema_version`]).

use crate::error;
use hcp_runtime::StoreError;

/// A journal's schema against this binary's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaStatus {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// The newest migration applied; `None`: no journal there yet (a missing SQLite file, or
    /// a database without hcp-workflow's migrations table).
    pub applied: Option<i64>,
    /// The newest migration this binary knows.
    pub latest: i64,
}

/// How a journal's schema compares with this binary's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaVerdict {
    /// No journal yet.
    Fresh,
    /// The version this binary knows.
    Current,
    /// Older: `migrate` upgrades it.
    Older,
    /// Newer: a newer binary migrated it.
    Newer,
}

impl SchemaStatus {
    /// How the journal's schema compares with this binary's.
    pub fn verdict(&self) -> SchemaVerdict {
        match self.applied {
            None => SchemaVerdict::Fresh,
            Some(v) if v == self.latest => SchemaVerdict::Current,
            Some(v) if v < self.latest => SchemaVerdict::Older,
            Some(_) => SchemaVerdict::Newer,
        }
    }
}

/// The schema status of the journal `url` names, read without writing or creating anything
/// (SQLite is opened read-only; Postgres gets plain queries on one connection).
///
/// # Errors
/// As [`crate::open`]: an unsupported URL, an unreachable database ([`StoreError::Transient`]).
pub async fn schema_status(url: &str) -> Result<SchemaStatus, StoreError> {
    use sqlx::Connection as _;
    use std::str::FromStr as _;
    const VERSION: &str = "SELECT coalesce(max(version), 0) FROM _sqlx_migrations WHERE success";
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        let latest = crate::SqliteStore::latest_schema_version();
        let bare = path.split_once('?').map_or(path, |(p, _)| p);
        if bare.is_empty() || !std::path::Path::new(bare).exists() {
            return Ok(SchemaStatus {
                backend: "sqlite",
                applied: None,
                latest,
            });
        }
        let look = |options: sqlx::sqlite::SqliteConnectOptions| async move {
            let mut c = sqlx::SqliteConnection::connect_with(&options).await?;
            let table: Option<(String,)> = sqlx::query_as(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            )
            .fetch_optional(&mut c)
            .await?;
            let applied = match table {
                Some(_) => Some(
                    sqlx::query_scalar::<_, i64>(VERSION)
                        .fetch_one(&mut c)
                        .await?,
                ),
                None => None,
            };
            let _ = c.close().await;
            Ok::<_, sqlx::Error>(applied)
        };
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(bare)
            .read_only(true);
        // A WAL journal in a directory this process may not write cannot get its `-shm`
        // index: read the file as it is (no process can be writing through it then).
        let applied = match look(options.clone()).await {
            Ok(a) => a,
            Err(_) => look(options.immutable(true))
                .await
                .map_err(error::classify)?,
        };
        return Ok(SchemaStatus {
            backend: "sqlite",
            applied,
            latest,
        });
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let (url, _pooled) = crate::postgres::pooler_of(url);
        let options = sqlx::postgres::PgConnectOptions::from_str(&url).map_err(error::classify)?;
        let mut c = sqlx::PgConnection::connect_with(&options)
            .await
            .map_err(error::classify)?;
        // Named (sqlx's default) statements, never unnamed ones (`persistent(false)`):
        // through a transaction pooler the Bind may reach another server connection than
        // its Parse, and PgBouncer (1.21+, `max_prepared_statements`) re-prepares only
        // named statements there ("unnamed prepared statement does not exist").
        let found: (Option<String>,) =
            sqlx::query_as("SELECT to_regclass('_sqlx_migrations')::text")
                .fetch_one(&mut c)
                .await
                .map_err(error::classify)?;
        let applied = match found.0 {
            Some(_) => Some(
                sqlx::query_scalar::<_, i64>(VERSION)
                    .fetch_one(&mut c)
                    .await
                    .map_err(error::classify)?,
            ),
            None => None,
        };
        let _ = c.close().await;
        return Ok(SchemaStatus {
            backend: "postgres",
            applied,
            latest: crate::PostgresStore::latest_schema_version(),
        });
    }
    // Name only the scheme: the rest of a URL may carry a password.
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    Err(StoreError::permanent(format!(
        "unsupported journal URL scheme {scheme:?}: expected sqlite://PATH, postgres://… or \
         postgresql://…"
    )))
}
