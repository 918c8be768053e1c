//! The SQLite journal store.
//!
//! Layout of one store:
//! - a **writer task** (`writer.rs`) owning the only writing connection, group committing
//!   every write (`ops.rs` has the SQL);
//! - a small **read pool** for `load_run`, `list_runs`, `pending_commands` and
//!   `runs_with_commands`: WAL lets readers run beside the writer and see the last commit;
//! - the **executor lock** (`lock.rs`), taken by [`JournalStore::claim_executor`].
//!
//! Every connection is opened with WAL, `synchronous=FULL` (a commit survives power loss),
//! `foreign_keys=ON` and a `busy_timeout`, once, at connect time: nothing is set per call.
//! Another process may open the same file at the same time (an operator running `list`,
//! `show` or `cancel`): its reads never block, and its writes (`submit_command`) wait for
//! the executor's current batch only: they announce themselves on a write-intent lock and
//! the executor lets them go before its next batch (`lock.rs` explains why SQLite's own
//! busy handling alone would starve them). [`BUSY_TIMEOUT`] bounds every wait.

mod lock;
mod ops;
mod writer;

use crate::error::{bad_row, classify, migrate_error};
use async_trait::async_trait;
use hcp_runtime::store::{
    Append, CommandRecord, CreateOutcome, JournalStore, Lease, NewCommand, NewReport, NewRun,
    ReportFilter, ReportRecord, RunFilter, RunId, RunRecord, RunSummary, StoredEvent, TokenGrant,
};
use hcp_runtime::{StoreError, Timestamp};
pub use ops::SqliteSettings;
use ops::{WriteOk, WriteOp};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, QueryBuilder, Row, Sqlite};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, watch};
use uuid::Uuid;
use writer::WriterHandle;
pub use writer::WriterStats;

/// How long a write waits for another process's write transaction before failing with a
/// (transient) `SQLITE_BUSY`. Our own batches hold the lock for milliseconds; this covers an
/// operator process and the executor contending, and a checkpoint.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Read connections. Reads are short index lookups; more connections than cores buys
/// nothing, and each one holds its own page cache.
const READERS: u32 = 4;

/// Prepared statements kept per connection (the writer's few dozen, list_runs' variants).
const STATEMENT_CACHE: usize = 256;

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The SQLite journal store.
///
/// # Guarantees
/// Everything the [`JournalStore`] contract lists, plus:
/// - **Group commit.** Concurrent writes share one transaction and one fsync; each still
///   succeeds or fails on its own (see `writer`).
/// - **One executor per file.** [`JournalStore::claim_executor`] takes an OS lock on
///   `<path>.executor.lock` for the store's lifetime; a second executor (another process,
///   or another store in this one) gets [`StoreError::ExecutorBusy`] naming the holder's pid
///   and worker. Taking the lock releases every lease in the file at once: their holders
///   are dead, so recovery after a crash does not wait for lease expiry.
/// - **Readers beside the executor.** Any number of other stores (processes) on the same
///   file may read, create runs and submit commands while the executor runs.
///
/// # Caveats
/// Cross-process wake-ups are not relayed: [`JournalStore::subscribe`] only changes for runs
/// created and commands submitted through this store. Workers poll anyway (and
/// `runs_with_commands` finds other processes' commands in one query).
pub struct SqliteStore {
    path: PathBuf,
    writer: WriterHandle,
    readers: SqlitePool,
    wake: Arc<watch::Sender<u64>>,
    executor: Mutex<Option<Claim>>,
    /// Set once this store holds the executor lock (read by the writer task).
    is_executor: Arc<AtomicBool>,
}

/// This store's executor claim.
#[derive(Debug)]
struct Claim {
    lock: lock::ExecutorLock,
    /// Whether the dead holders' leases were released (a transient failure doing so is
    /// retried by the next `claim_executor`).
    leases_released: bool,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Open (creating if missing) the journal at `path` and bring its schema up to date.
    ///
    /// # Errors
    /// [`StoreError::Transient`] if the file is locked by another writer for longer than
    /// [`BUSY_TIMEOUT`]; [`StoreError::Permanent`] if it cannot be opened, is not a journal,
    /// or was migrated by a newer binary.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        // Processes that open one new journal at the same instant race for the lock that
        // switching it to WAL and creating its schema take; the loser can be answered
        // `SQLITE_BUSY` at once (before a busy handler applies), seen as "database is
        // locked" from a start racing another start. Opening is idempotent: lock
        // contention (only that: a full disk is the caller's to report and wait out) is
        // retried, for as long as a busy writer would be waited for.
        let path = path.as_ref();
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut attempt: u32 = 0;
        loop {
            match Self::open_once(path).await {
                Err(e)
                    if crate::error::is_lock_contention(&e)
                        && std::time::Instant::now() < deadline =>
                {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "opening the journal failed; retrying");
                    tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt.min(10))))
                        .await;
                }
                other => return other,
            }
        }
    }

    async fn open_once(path: &Path) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT)
            .statement_cache_capacity(STATEMENT_CACHE);
        // Migrate through the pool: sqlx's migrator over a bare `&mut SqliteConnection`
        // yields a future that is not `Send`, which `open` must be.
        let readers = SqlitePoolOptions::new()
            .max_connections(READERS)
            .min_connections(0)
            .connect_with(options.clone())
            .await
            .map_err(classify)?;
        migrate(&readers).await?;
        // The lock files are named after the journal's real path (symlinks resolved; the
        // file exists now): a second name for the same journal (`alias.db -> j.db`) must
        // meet the same executor lock, or two executors would share one file and release
        // each other's leases. (A hard link is still a second name: don't make one.)
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        let intent = lock::WriteIntent::open(&path)
            .inspect_err(|e| {
                // Info, not a warning: a reader in a directory it may not write (`list` on
                // a read-only journal) has no writes to hand over.
                tracing::info!(
                    error = %e,
                    journal = %path.display(),
                    "cannot open the write-intent lock; writes from other processes may \
                     wait longer behind a busy executor"
                );
            })
            .ok();
        Self::assemble(path, readers, options, intent).await
    }

    /// The store over `readers`, with a writer connection made from `options`.
    async fn assemble(
        path: PathBuf,
        readers: SqlitePool,
        options: SqliteConnectOptions,
        intent: Option<lock::WriteIntent>,
    ) -> Result<Self, StoreError> {
        let conn = options.connect().await.map_err(classify)?;
        let wake = Arc::new(watch::channel(0).0);
        let is_executor = Arc::new(AtomicBool::new(false));
        let writer = WriterHandle::spawn(
            conn,
            options,
            Arc::clone(&wake),
            Arc::clone(&is_executor),
            intent,
            BUSY_TIMEOUT,
        );
        Ok(Self {
            path,
            writer,
            readers,
            wake,
            executor: Mutex::new(None),
            is_executor,
        })
    }

    /// Open an existing, migrated journal for reading only: nothing is created, migrated
    /// or locked, and every write fails. For read-only commands on a journal whose directory
    /// (or file) this process may not write: `list` and `show` must still work there
    /// , where [`SqliteStore::open`] fails at its first write.
    ///
    /// # Errors
    /// [`StoreError::Permanent`] if the file cannot be read.
    pub async fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        let base = SqliteConnectOptions::new()
            .filename(&path)
            .read_only(true)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT)
            .statement_cache_capacity(STATEMENT_CACHE);
        let pool = |o: SqliteConnectOptions| async move {
            let p = SqlitePoolOptions::new()
                .max_connections(READERS)
                .min_connections(0)
                .connect_with(o)
                .await?;
            // A WAL journal whose `-shm` cannot be created answers "attempt to write a
            // readonly database" at the first read, not at connect.
            sqlx::query("SELECT count(*) FROM sqlite_master")
                .execute(&p)
                .await?;
            Ok::<_, sqlx::Error>(p)
        };
        // Read-only first (sees a live writer's WAL); where the WAL index cannot be created
        // (a read-only directory: then no process can be writing through it either),
        // `immutable`: the file as it is.
        let (readers, options) = match pool(base.clone()).await {
            Ok(p) => (p, base),
            Err(_) => {
                let immutable = base.immutable(true);
                (pool(immutable.clone()).await.map_err(classify)?, immutable)
            }
        };
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        Self::assemble(path, readers, options, None).await
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The newest migration applied to this journal (sqlx's `_sqlx_migrations` table).
    ///
    /// # Errors
    /// [`StoreError`] if the table cannot be read.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(&self.readers)
            .await
            .map_err(classify)
    }

    /// The newest migration this binary knows.
    pub fn latest_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// The writer connection's durability and concurrency settings (for `doctor`-style
    /// diagnostics and tests).
    ///
    /// # Errors
    /// [`StoreError`] if the writer cannot run the query.
    pub async fn settings(&self) -> Result<SqliteSettings, StoreError> {
        match self.write(WriteOp::Settings).await? {
            WriteOk::Settings(s) => Ok(s),
            other => Err(unexpected("settings", other)),
        }
    }

    /// Group-commit counters since the store was opened.
    pub fn writer_stats(&self) -> WriterStats {
        self.writer.stats()
    }

    async fn write(&self, op: WriteOp) -> Result<WriteOk, StoreError> {
        self.writer.call(op).await
    }
}

/// Bring the schema up to date. Two processes opening a new journal at the same instant
/// race to create it; the loser's migration fails (busy snapshot, or "table already
/// exists"), so a failure is retried a few times, and the retry finds the migration applied
/// by the winner and does nothing.
async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    let mut attempt = 0;
    loop {
        match MIGRATOR.run(pool).await {
            Ok(()) => return Ok(()),
            Err(e)
                if attempt < 3 && !matches!(e, sqlx::migrate::MigrateError::VersionMissing(_)) =>
            {
                attempt += 1;
                tracing::debug!(error = %e, attempt, "journal migration failed; retrying");
                tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
            }
            Err(e) => {
                return Err(migrate_error(e, SqliteStore::latest_schema_version()));
            }
        }
    }
}

/// Runs are stored by their hyphenated lowercase text, whose byte order is the UUID order.
pub(crate) fn id_text(id: RunId) -> String {
    id.hyphenated().to_string()
}

pub(crate) fn parse_id(s: &str) -> Result<RunId, StoreError> {
    Uuid::parse_str(s).map_err(|e| bad_row(format!("run id {s:?}: {e}")))
}

fn unexpected(op: &str, got: WriteOk) -> StoreError {
    StoreError::permanent(format!("journal writer answered {op} with {got:?}"))
}

/// The `runs` columns a [`RunSummary`] is decoded from, in [`summary_from_row`]'s order.
const SUMMARY_COLUMNS: &str = "runs.id, runs.workflow, runs.workflow_version, runs.labels, \
    runs.idempotency_key, runs.state, runs.blocked_on, runs.current_step, runs.created_at, \
    runs.updated_at, runs.wake_at, runs.lease_owner, runs.lease_epoch, runs.lease_expires_at, \
    runs.commands_pending, runs.exclusive_key, runs.target";

fn summary_from_row(row: &SqliteRow) -> Result<RunSummary, StoreError> {
    let id: String = row.try_get(0).map_err(classify)?;
    crate::rows::summary_from_row(row, parse_id(&id)?)
}

/// Text the runtime wrote, returned as stored. Read as bytes so that even a row corrupted
/// into invalid UTF-8 comes back (lossily) for the runtime to reject, instead of failing
/// the whole query.
fn raw_text(row: &SqliteRow, i: usize) -> Result<String, StoreError> {
    let bytes: Vec<u8> = row.try_get(i).map_err(classify)?;
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

fn command_from_row(row: &SqliteRow) -> Result<CommandRecord, StoreError> {
    command_from_row_at(row, 0)
}

/// A command from [`COMMAND_COLUMNS`] starting at column `o`.
fn command_from_row_at(row: &SqliteRow, o: usize) -> Result<CommandRecord, StoreError> {
    Ok(CommandRecord {
        id: row.try_get(o).map_err(classify)?,
        command: raw_text(row, o + 1)?,
        requested_by: row.try_get(o + 2).map_err(classify)?,
        reason: row.try_get(o + 3).map_err(classify)?,
        requested_at: Timestamp(row.try_get(o + 4).map_err(classify)?),
        applied_at: row
            .try_get::<Option<i64>, _>(o + 5)
            .map_err(classify)?
            .map(Timestamp),
    })
}

const COMMAND_COLUMNS: &str = "id, command, requested_by, reason, requested_at, applied_at";

#[async_trait]
impl JournalStore for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn claim_executor(
        &self,
        owner: &str,
        serves: Option<&[String]>,
    ) -> Result<(), StoreError> {
        let mut claim = self.executor.lock().await;
        let claim = match &mut *claim {
            Some(c) => {
                // Already ours. Another worker id of this process joins without touching
                // leases: those it would release belong to live workers of this store.
                c.lock.add_owner(owner, serves)?;
                c
            }
            None => {
                let lock = lock::ExecutorLock::acquire(
                    &self.path,
                    &lock::lock_path(&self.path),
                    owner,
                    serves,
                )?;
                self.is_executor.store(true, Ordering::Relaxed);
                claim.insert(Claim {
                    lock,
                    leases_released: false,
                })
            }
        };
        if !claim.leases_released {
            // We hold the lock, so whoever holds a lease in this file is dead (or was a
            // worker of this store before it claimed, which the engine does not do).
            match self.write(WriteOp::ReleaseAllLeases).await? {
                WriteOk::Count(n) if n > 0 => {
                    tracing::info!(
                        journal = %self.path.display(),
                        leases = n,
                        "executor lock taken; released the leases of dead executors"
                    );
                }
                WriteOk::Count(_) => {}
                other => return Err(unexpected("claim_executor", other)),
            }
            claim.leases_released = true;
        }
        Ok(())
    }

    async fn executor_holder(&self) -> Result<Option<hcp_runtime::ExecutorHolder>, StoreError> {
        if self.executor.lock().await.is_some() {
            // This store is the executor.
            return Ok(None);
        }
        lock::holder(&lock::lock_path(&self.path))
    }

    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        match self.write(WriteOp::CreateRun(run)).await? {
            WriteOk::Created(c) => Ok(c),
            other => Err(unexpected("create_run", other)),
        }
    }

    async fn acquire_targeted(
        &self,
        owner: &str,
        now: Timestamp,
        lease_for: Duration,
        limit: usize,
        only: Option<RunId>,
        targets: Option<&[String]>,
    ) -> Result<Vec<Lease>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let targets = match targets {
            Some(t) => {
                Some(serde_json::to_string(t).map_err(|e| StoreError::Permanent(Box::new(e)))?)
            }
            None => None,
        };
        let op = WriteOp::Acquire {
            owner: owner.to_string(),
            now,
            expires_at: now.plus(lease_for),
            limit: i64::try_from(limit).unwrap_or(i64::MAX),
            only,
            targets,
        };
        match self.write(op).await? {
            WriteOk::Leases(l) => Ok(l),
            other => Err(unexpected("acquire", other)),
        }
    }

    async fn append(&self, lease: &Lease, append: Append) -> Result<i64, StoreError> {
        let op = WriteOp::Append {
            lease: lease.clone(),
            append,
        };
        match self.write(op).await? {
            WriteOk::Seq(s) => Ok(s),
            other => Err(unexpected("append", other)),
        }
    }

    async fn renew(&self, owner: &str, until: Timestamp) -> Result<Vec<RunId>, StoreError> {
        let op = WriteOp::Renew {
            owner: owner.to_string(),
            until,
        };
        match self.write(op).await? {
            WriteOk::Runs(r) => Ok(r),
            other => Err(unexpected("renew", other)),
        }
    }

    async fn release(&self, lease: &Lease, wake_at: Option<Timestamp>) -> Result<(), StoreError> {
        let op = WriteOp::Release {
            lease: lease.clone(),
            wake_at,
        };
        match self.write(op).await? {
            WriteOk::Unit => Ok(()),
            other => Err(unexpected("release", other)),
        }
    }

    async fn load_run(&self, run: RunId) -> Result<Option<RunRecord>, StoreError> {
        // One batch of one: the same snapshot guarantees, one code path.
        Ok(self.load_runs(&[run]).await?.pop())
    }

    async fn load_runs(&self, runs: &[RunId]) -> Result<Vec<RunRecord>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        // The ids travel as one JSON array parameter (`json_each`), so one prepared
        // statement serves every batch size. One read transaction: one snapshot.
        let ids: Vec<String> = runs.iter().map(|r| id_text(*r)).collect();
        let ids = serde_json::to_string(&ids).map_err(|e| StoreError::Permanent(Box::new(e)))?;
        let mut tx = self.readers.begin().await.map_err(classify)?;
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS}, coalesce(run_dags.dag, '') FROM runs \
             LEFT JOIN run_dags ON run_dags.run_id = runs.id \
             WHERE runs.id IN (SELECT value FROM json_each(?1))"
        );
        let mut out: Vec<RunRecord> = Vec::with_capacity(runs.len());
        let mut at: std::collections::HashMap<String, usize> =
            std::collections::HashMap::with_capacity(runs.len());
        for row in sqlx::query(&sql)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
        {
            let summary = summary_from_row(&row)?;
            at.insert(id_text(summary.id), out.len());
            out.push(RunRecord {
                summary,
                dag: raw_text(&row, crate::rows::SUMMARY_WIDTH)?,
                events: Vec::new(),
                commands: Vec::new(),
            });
        }
        let events = sqlx::query(
            "SELECT run_id, seq, kind, node, data, at FROM events \
             WHERE run_id IN (SELECT value FROM json_each(?1)) ORDER BY run_id, seq",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        for r in &events {
            let run: String = r.try_get(0).map_err(classify)?;
            let Some(&i) = at.get(&run) else { continue };
            out[i].events.push(StoredEvent {
                seq: r.try_get(1).map_err(classify)?,
                kind: r.try_get(2).map_err(classify)?,
                node: r.try_get(3).map_err(classify)?,
                data: raw_text(r, 4)?,
                at: Timestamp(r.try_get(5).map_err(classify)?),
            });
        }
        let commands = sqlx::query(&format!(
            "SELECT run_id, {COMMAND_COLUMNS} FROM commands \
             WHERE run_id IN (SELECT value FROM json_each(?1)) ORDER BY id"
        ))
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?;
        for r in &commands {
            let run: String = r.try_get(0).map_err(classify)?;
            let Some(&i) = at.get(&run) else { continue };
            out[i].commands.push(command_from_row_at(r, 1)?);
        }
        tx.commit().await.map_err(classify)?;
        Ok(out)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let mut q =
            QueryBuilder::<Sqlite>::new(format!("SELECT {SUMMARY_COLUMNS} FROM runs WHERE 1 = 1"));
        if !filter.states.is_empty() {
            q.push(" AND state IN (");
            let mut list = q.separated(", ");
            for s in &filter.states {
                list.push_bind(s.as_str());
            }
            q.push(")");
        }
        if let Some(w) = &filter.workflow {
            q.push(" AND workflow = ").push_bind(w.as_str());
        }
        if let Some((k, v)) = &filter.label {
            q.push(" AND id IN (SELECT run_id FROM run_labels WHERE key = ")
                .push_bind(k.as_str())
                .push(" AND value = ")
                .push_bind(v.as_str())
                .push(")");
        }
        if let Some(t) = filter.since {
            q.push(" AND created_at >= ").push_bind(t.0);
        }
        q.push(" ORDER BY created_at DESC, id DESC");
        if filter.limit > 0 {
            q.push(" LIMIT ")
                .push_bind(i64::try_from(filter.limit).unwrap_or(i64::MAX));
        }
        q.build()
            .fetch_all(&self.readers)
            .await
            .map_err(classify)?
            .iter()
            .map(summary_from_row)
            .collect()
    }

    async fn submit_command(&self, run: RunId, cmd: NewCommand) -> Result<i64, StoreError> {
        match self.write(WriteOp::SubmitCommand { run, cmd }).await? {
            WriteOk::CommandId(id) => Ok(id),
            other => Err(unexpected("submit_command", other)),
        }
    }

    async fn pending_commands(&self, run: RunId) -> Result<Vec<CommandRecord>, StoreError> {
        let id = id_text(run);
        let mut tx = self.readers.begin().await.map_err(classify)?;
        let pending = sqlx::query(&format!(
            "SELECT {COMMAND_COLUMNS} FROM commands \
             WHERE run_id = ?1 AND applied_at IS NULL ORDER BY id"
        ))
        .bind(&id)
        .fetch_all(&mut *tx)
        .await
        .map_err(classify)?
        .iter()
        .map(command_from_row)
        .collect::<Result<Vec<_>, StoreError>>()?;
        if pending.is_empty() {
            let exists = sqlx::query_scalar::<_, i64>("SELECT 1 FROM runs WHERE id = ?1")
                .bind(&id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(classify)?;
            if exists.is_none() {
                return Err(StoreError::NotFound(run));
            }
        }
        tx.commit().await.map_err(classify)?;
        Ok(pending)
    }

    async fn runs_with_commands(&self, owner: &str) -> Result<Vec<RunId>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM runs WHERE lease_owner = ?1 AND commands_pending = 1",
        )
        .bind(owner)
        .fetch_all(&self.readers)
        .await
        .map_err(classify)?;
        ids.iter().map(|s| parse_id(s)).collect()
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    async fn record_report(&self, report: NewReport) -> Result<i64, StoreError> {
        match self.write(WriteOp::RecordReport(report)).await? {
            WriteOk::ReportId(id) => Ok(id),
            other => Err(unexpected("record_report", other)),
        }
    }

    async fn list_reports(&self, filter: &ReportFilter) -> Result<Vec<ReportRecord>, StoreError> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "SELECT id, kind, subject, at, ok, made_by, data FROM reports r WHERE kind = ",
        );
        crate::rows::push_report_filter(&mut q, filter);
        q.build()
            .fetch_all(&self.readers)
            .await
            .map_err(classify)?
            .iter()
            .map(crate::rows::report_from_row)
            .collect()
    }

    async fn take_tokens(
        &self,
        key: &str,
        want: u32,
        capacity: f64,
        per_second: f64,
        now: Timestamp,
    ) -> Result<TokenGrant, StoreError> {
        let op = WriteOp::TakeTokens {
            key: key.to_string(),
            want,
            capacity,
            per_second,
            now,
        };
        match self.write(op).await? {
            WriteOk::Tokens(t) => Ok(t),
            other => Err(unexpected("take_tokens", other)),
        }
    }

    async fn claim_schedule(
        &self,
        key: &str,
        by: &str,
        now: Timestamp,
        next: Timestamp,
    ) -> Result<bool, StoreError> {
        let op = WriteOp::ClaimSchedule {
            key: key.to_string(),
            by: by.to_string(),
            now,
            next,
        };
        match self.write(op).await? {
            WriteOk::Claimed(c) => Ok(c),
            other => Err(unexpected("claim_schedule", other)),
        }
    }
}
