//! Opening the journal named by `--database`: for writing (a new SQLite file is created),
//! for a read-only command (nothing is created, an unmigrated database is refused), or
//! patiently for a worker (a full disk or a restarting database is waited out).

use super::{clock, shutdown_signal};
use crate::output;
use anyhow::{Context, Result};
use hcp_runtime::JournalStore;
use std::sync::Arc;
use std::time::Duration;

/// Default journal: a SQLite file in the current directory.
pub const DEFAULT_DATABASE: &str = "sqlite://./hcp-workflow.db";

/// Open the journal named by `--database`.
pub async fn open_store(url: &str) -> Result<Arc<dyn JournalStore>> {
    if url == "memory:" {
        // Nothing survives the process: for benchmarks of the engine's own overhead.
        return Ok(Arc::new(hcp_runtime::MemoryStore::new()));
    }
    // Only `migrate` changes an existing schema: see `schema::gate`.
    crate::services::schema::gate(url).await?;
    match hcp_persistence::open(url).await {
        Ok(s) => {
            // Engines built after this keep the journal database's time.
            clock::align_clock(&s).await;
            Ok(s)
        }
        // A journal this process may only read: say so, and what still works (exit 2).
        Err(e) if e.to_string().contains("readonly database") => {
            Err(output::Refused::refused(format!(
                "the journal at {} cannot be written by this process (a read-only file, directory or mount): this command writes to it, so nothing was done; run it as the journal's owner, or fix the permissions (list, show, why, history, watch, inventory and clusters still work)",
                shown_url(url)
            )))
        }
        Err(e) => {
            Err(anyhow::Error::new(e).context(format!("opening the journal at {}", shown_url(url))))
        }
    }
}

/// No journal where a read-only command expected one (exit 2, see [`open_existing_store`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "no journal at {path} ({url}): start a run first, or pass --database / HCP_WORKFLOW_DATABASE_URL"
)]
pub struct NoJournal {
    pub path: String,
    pub url: String,
}

/// The SQLite file a `sqlite://PATH` (or `sqlite:PATH`) URL names, when it names one that
/// does not exist (query parameters, `?mode=ro` say, are not part of the path). `None` for
/// an existing file, `memory:`, Postgres and anything else.
pub fn missing_sqlite_file(url: &str) -> Option<String> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    if path.is_empty() || path.starts_with(":memory:") {
        return None;
    }
    let bare = path.split_once('?').map_or(path, |(p, _)| p);
    let exists = |p: &str| std::path::Path::new(p).exists();
    if exists(path) || exists(bare) {
        return None;
    }
    Some(bare.to_string())
}

/// Open the journal for a read-only command (`list`, `show`, `why`, `history`, `watch`,
/// `inventory`): like [`open_store`], but a SQLite file that does not exist is not created
/// (an empty journal would only hide a wrong path or directory). The error is a
/// [`NoJournal`], which `main` reports with exit 2.
pub async fn open_existing_store(url: &str) -> Result<Arc<dyn JournalStore>> {
    if let Some(path) = missing_sqlite_file(url) {
        return Err(NoJournal {
            path,
            url: url.to_string(),
        }
        .into());
    }
    // Never migrate from a read-only command: a wrong URL must not grow a schema (or turn a
    // 0-byte file into a journal).
    if url != "memory:"
        && !hcp_persistence::is_migrated(url)
            .await
            .with_context(|| format!("opening the journal at {}", shown_url(url)))?
    {
        return Err(Unmigrated {
            url: shown_url(url),
        }
        .into());
    }
    open_store(url).await
}

/// [`open_existing_store`] for the commands that only read (`list`, `show`, `why`,
/// `history`, `watch`, `inventory`, `clusters`): a SQLite journal this process may not
/// write (a read-only directory, file or mount) is opened read-only instead of failing
/// , with a note on stderr.
pub async fn open_existing_store_read_only(url: &str) -> Result<Arc<dyn JournalStore>> {
    if url == "memory:" || !url.starts_with("sqlite:") {
        return open_existing_store(url).await;
    }
    if let Some(path) = missing_sqlite_file(url) {
        return Err(NoJournal {
            path,
            url: url.to_string(),
        }
        .into());
    }
    if !hcp_persistence::is_migrated(url)
        .await
        .with_context(|| format!("opening the journal at {}", shown_url(url)))?
    {
        return Err(Unmigrated {
            url: shown_url(url),
        }
        .into());
    }
    crate::services::schema::gate(url).await?;
    let (store, read_only) = hcp_persistence::open_for_reading(url)
        .await
        .with_context(|| format!("opening the journal at {}", shown_url(url)))?;
    if let Some(why) = read_only {
        eprintln!(
            "note: the journal at {} cannot be written by this process ({why}); it is read only: reads work, commands that write do not",
            shown_url(url)
        );
    }
    Ok(store)
}

/// A database that holds no journal, for a read-only command (exit 2): nothing is created.
#[derive(Debug, thiserror::Error)]
#[error(
    "{url} holds no hcp-workflow journal (never migrated); read-only commands create nothing: check --database / HCP_WORKFLOW_DATABASE_URL, or create the journal with `hcp-workflow --database {url} migrate` (on SQLite, start and worker create it too)"
)]
pub struct Unmigrated {
    pub url: String,
}

/// A worker opens its journal like [`open_store`], but waits out a transient failure (a
/// full disk, a database that is restarting) instead of exiting, saying so on every try
/// (a full disk made the SQLite worker exit, and nothing resumed until someone
/// restarted it). Ctrl-C stops waiting.
pub async fn open_store_patiently(db: &str) -> Result<Arc<dyn hcp_runtime::JournalStore>> {
    let mut delay = Duration::from_secs(1);
    loop {
        match open_store(db).await {
            Ok(s) => return Ok(s),
            Err(e)
                if e.chain().any(|c| {
                    c.downcast_ref::<hcp_runtime::StoreError>()
                        .is_some_and(hcp_runtime::StoreError::is_retryable)
                }) =>
            {
                eprintln!(
                    "warning: the journal at {} cannot be opened now ({}); a full disk or a restarting database is waited out: trying again in {}s",
                    shown_url(db),
                    e.root_cause(),
                    delay.as_secs()
                );
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = shutdown_signal() => return Err(e),
                }
                delay = (delay * 2).min(Duration::from_secs(30));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A journal URL as it may be shown (suggested commands, the UI, errors): a password in it
/// becomes `***` (`postgres://app:***@db/hcp`); anything else is unchanged.
pub fn shown_url(db: &str) -> String {
    match url::Url::parse(db) {
        Ok(mut u) if u.password().is_some() => {
            if u.set_password(Some("***")).is_ok() {
                u.to_string()
            } else {
                db.to_string()
            }
        }
        _ => db.to_string(),
    }
}
