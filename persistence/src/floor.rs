//! The durable-commit floor of a journal's database: how long the smallest
//! durable write takes there, so `bench engine` can say how close a step is to it.
//!
//! One autocommit `INSERT` of one short row into a probe table (dropped afterwards), `n`
//! times, through the same driver, settings and connection options the store uses: SQLite
//! in WAL with `synchronous=FULL`, Postgres with the server's `synchronous_commit`.

use crate::error::classify;
use hcp_runtime::StoreError;
use sqlx::Connection as _;
use std::str::FromStr as _;
use std::time::{Duration, Instant};

/// The latency of each of `n` single-row durable commits on the database of `url`.
///
/// # Errors
/// The database cannot be reached or written.
pub async fn commit_floor(url: &str, n: usize) -> Result<Vec<Duration>, StoreError> {
    const PROBE: &str = "hcp_bench_commit_floor";
    let mut out = Vec::with_capacity(n);
    if let Some(path) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Full);
        let mut c = sqlx::SqliteConnection::connect_with(&options)
            .await
            .map_err(classify)?;
        sqlx::query(&format!(
            "CREATE TABLE IF NOT EXISTS {PROBE} (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"
        ))
        .execute(&mut c)
        .await
        .map_err(classify)?;
        for i in 0..n {
            let t = Instant::now();
            sqlx::query(&format!("INSERT INTO {PROBE} (v) VALUES (?1)"))
                .bind(format!("probe {i}"))
                .execute(&mut c)
                .await
                .map_err(classify)?;
            out.push(t.elapsed());
        }
        sqlx::query(&format!("DROP TABLE {PROBE}"))
            .execute(&mut c)
            .await
            .map_err(classify)?;
        let _ = c.close().await;
        return Ok(out);
    }
    let options = sqlx::postgres::PgConnectOptions::from_str(url).map_err(classify)?;
    let mut c = sqlx::PgConnection::connect_with(&options)
        .await
        .map_err(classify)?;
    sqlx::query(&format!(
        "CREATE TABLE IF NOT EXISTS {PROBE} (id bigserial PRIMARY KEY, v text NOT NULL)"
    ))
    .execute(&mut c)
    .await
    .map_err(classify)?;
    for i in 0..n {
        let t = Instant::now();
        sqlx::query(&format!("INSERT INTO {PROBE} (v) VALUES ($1)"))
            .bind(format!("probe {i}"))
            .execute(&mut c)
            .await
            .map_err(classify)?;
        out.push(t.elapsed());
    }
    sqlx::query(&format!("DROP TABLE {PROBE}"))
        .execute(&mut c)
        .await
        .map_err(classify)?;
    let _ = c.close().await;
    Ok(out)
}
