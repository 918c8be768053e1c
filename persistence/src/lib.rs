//! # hcp-persistence: durable journal stores for the hcp-workflow runtime
//!
//! Implements [`hcp_runtime::JournalStore`] (the contract in `hcp_runtime::store`, whose
//! rustdoc lists the guarantees) for two backends:
//!
//! - [`SqliteStore`]: one file, WAL + `synchronous=FULL`, one executor process per file
//!   (an OS advisory lock, [`JournalStore::claim_executor`]) and any number of readers and
//!   operators beside it. Every write goes through a single writer task that **group
//!   commits**: whatever is queued is written in one `BEGIN IMMEDIATE` transaction, each
//!   request in its own savepoint, so N concurrent appends cost one fsync, not N.
//! - [`PostgresStore`]: a connection pool, one transaction (usually one statement) per call,
//!   `FOR UPDATE SKIP LOCKED` lease acquisition so many workers share the database, and
//!   `LISTEN/NOTIFY` as a wake-up hint.
//!
//! Both pass the runtime's conformance suite (`tests/*_conformance.rs`). [`open`] picks the
//! backend from a URL.
//!
//! Module map: [`sqlite`] (store, writer task, executor lock), [`postgres`] (store, wake-up
//! listener), [`error`] (sqlx error classification).
//!
//! # Architecture invariants
//! - **Fencing lives in the writing statement.** Every write under a lease is an
//!   `UPDATE runs … WHERE id = ? AND lease_owner = ? AND lease_epoch = ?`; zero rows means
//!   [`StoreError::Fenced`] (or `NotFound`) and nothing else of that call is written.
//! - **The store never interprets journal text.** Event data and DAGs are TEXT, returned
//!   byte for byte; deciding what a corrupt row means is the runtime's job.
//! - **Errors are classified by code, never by message text** ([`error::classify`]).

pub mod error;
pub mod floor;
pub mod postgres;
mod rows;
mod schema;
pub mod sqlite;

pub use postgres::PostgresStore;
pub use schema::{SchemaStatus, SchemaVerdict, schema_status};
pub use sqlite::SqliteStore;

use hcp_runtime::{JournalStore, StoreError};
use std::sync::Arc;

/// Open the journal store named by `url`.
///
/// - `sqlite://PATH` (or `sqlite:PATH`): the SQLite file at `PATH`, created if missing
///   (`sqlite:///abs/path.db`, `sqlite://relative.db`).
/// - `postgres://…` or `postgresql://…`: a PostgreSQL database (schema `public`, or
///   whatever the URL's options select).
///
/// Migrations run before this returns.
///
/// # Errors
/// [`StoreError::Permanent`] for an unsupported scheme (the message names it) or a schema
/// this binary does not know; [`StoreError::Transient`] when the database is unreachable or
/// busy.
pub async fn open(url: &str) -> Result<Arc<dyn JournalStore>, StoreError> {
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        if path.is_empty() {
            return Err(StoreError::permanent(format!(
                "journal URL {url:?} names no file (expected sqlite://PATH)"
            )));
        }
        return Ok(Arc::new(SqliteStore::open(path).await?));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect(url).await?));
    }
    // Name only the scheme: the rest of a URL may carry a password.
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    Err(StoreError::permanent(format!(
        "unsupported journal URL scheme {scheme:?}: expected sqlite://PATH, postgres://… or \
         postgresql://…"
    )))
}

/// Open the journal at `url` for a read-only command: like [`open`]; when a SQLite journal
/// cannot be opened for writing (a read-only directory or file, a read-only mount), it is
/// opened read-only instead and `Ok((store, Some(why)))` says why. Postgres opens as usual.
///
/// # Errors
/// As [`open`], when the read-only open fails too.
pub async fn open_for_reading(
    url: &str,
) -> Result<(Arc<dyn JournalStore>, Option<String>), StoreError> {
    match open(url).await {
        Ok(s) => Ok((s, None)),
        Err(e) => {
            let Some(path) = url
                .strip_prefix("sqlite://")
                .or_else(|| url.strip_prefix("sqlite:"))
                .filter(|p| !p.is_empty())
            else {
                return Err(e);
            };
            match SqliteStore::open_read_only(path).await {
                Ok(s) => Ok((Arc::new(s), Some(e.to_string()))),
                Err(ro) => {
                    tracing::debug!(error = %ro, "the read-only open failed too");
                    Err(e)
                }
            }
        }
    }
}

/// Whether the database `url` names holds an hcp-workflow journal (its migrations table),
/// checked without writing anything: read-only commands (`list`, `show`, `ui`, …) ask this
/// first and never migrate. (They used to: `list` on an empty Postgres database created the
/// whole schema, and `list` on a 0-byte SQLite file initialised it.) SQLite is opened
/// read-only; Postgres gets one plain query.
///
/// # Errors
/// As [`open`], for an unreachable database or an unsupported URL.
pub async fn is_migrated(url: &str) -> Result<bool, StoreError> {
    use sqlx::Connection as _;
    use std::str::FromStr as _;
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        let bare = path.split_once('?').map_or(path, |(p, _)| p);
        if !std::path::Path::new(bare).exists() {
            return Ok(false);
        }
        let look = |options: sqlx::sqlite::SqliteConnectOptions| async move {
            let mut c = sqlx::SqliteConnection::connect_with(&options).await?;
            let found: Option<(String,)> = sqlx::query_as(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            )
            .fetch_optional(&mut c)
            .await?;
            let _ = c.close().await;
            Ok::<_, sqlx::Error>(found.is_some())
        };
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(bare)
            .read_only(true);
        // A WAL journal in a directory this process may not write cannot get its `-shm`
        // index: read the file as it is (no process can be writing through it then).
        return match look(options.clone()).await {
            Ok(found) => Ok(found),
            Err(_) => look(options.immutable(true)).await.map_err(error::classify),
        };
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let (url, _pooled) = postgres::pooler_of(url);
        let options = sqlx::postgres::PgConnectOptions::from_str(&url).map_err(error::classify)?;
        let mut c = sqlx::PgConnection::connect_with(&options)
            .await
            .map_err(error::classify)?;
        let found: (Option<String>,) =
            sqlx::query_as("SELECT to_regclass('_sqlx_migrations')::text")
                .fetch_one(&mut c)
                .await
                .map_err(error::classify)?;
        let _ = c.close().await;
        return Ok(found.0.is_some());
    }
    // `open` says what is wrong with the URL.
    Ok(true)
}
