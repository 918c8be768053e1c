//! The PostgreSQL journal store.
//!
//! Many workers (processes, hosts) may share one database: leases are taken with
//! `FOR UPDATE SKIP LOCKED`, so concurrent `acquire`s split the due runs between them
//! instead of queueing on the same rows, and every write under a lease is fenced in its own
//! `UPDATE`. Each call is one transaction on a pooled connection, in most cases a single
//! statement (data-modifying CTEs), so it costs one round trip.
//!
//! Wake-ups: inserting a run or a command fires a trigger that `NOTIFY`s
//! `hcp_workflow_wake` at commit; a background [`PgListener`] task bumps the watch channel
//! [`JournalStore::subscribe`] hands out. It is only a hint — workers poll regardless — so
//! a lost notification (the listener reconnecting) just means waiting for the next poll,
//! and the listener bumps the channel after every reconnect to cover that gap.
//!
//! Times are `timestamptz`; the runtime's milliseconds are converted in SQL by the
//! migration's `hcp_ts(bigint)` / `hcp_ms(timestamptz)`.

mod batch;

use crate::error::{bad_row, classify, migrate_error};
use crate::rows;
use async_trait::async_trait;
use hcp_runtime::store::{
    Append, CommandRecord, CreateOutcome, JournalStore, Lease, NewCommand, NewReport, NewRun,
    ReportFilter, ReportRecord, RunFilter, RunId, RunRecord, RunSummary, StoredEvent, TokenGrant,
};
use hcp_runtime::{StoreError, Timestamp};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions, Connection, Executor, Postgres, QueryBuilder, Row};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The NOTIFY channel (the migration's trigger function names it too).
pub const WAKE_CHANNEL: &str = "hcp_workflow_wake";

/// Pooled connections per store. A worker's calls are short single statements; ten covers
/// the executor's concurrent appends plus the listener plus an operator's reads, and stays
/// far below a default server's 100 connections with several workers.
const POOL_SIZE: u32 = 10;

/// How long a call waits for a pooled connection before a (transient) `PoolTimedOut`.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// Back-off after the listener fails to (re)connect, so a down server is not hammered.
const LISTENER_RETRY: Duration = Duration::from_secs(2);

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The PostgreSQL journal store.
///
/// # Guarantees
/// Everything the [`JournalStore`] contract lists, plus:
/// - **Shared by many workers.** `acquire` skips rows another worker's `acquire` has locked
///   and never hands one run to two owners; `claim_executor` is a no-op.
/// - **Wake-ups across processes.** `create_run` and `submit_command` anywhere on the
///   database bump [`JournalStore::subscribe`] here (as a hint).
///
/// # Caveats
/// The NOTIFY channel is per database, not per schema: stores in different schemas of one
/// database wake each other spuriously (harmless; it only triggers a poll).
pub struct PostgresStore {
    pool: PgPool,
    schema: Option<String>,
    wake: Arc<watch::Sender<u64>>,
    listener: JoinHandle<()>,
    batcher: batch::Batcher,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // The listener holds a connection of its own; it must not outlive the store.
        self.listener.abort();
    }
}

impl PostgresStore {
    /// Connect to the database at `url` and bring its schema up to date.
    ///
    /// # Errors
    /// [`StoreError::Transient`] if the server is unreachable; [`StoreError::Permanent`] for a
    /// bad URL, refused credentials, or a schema migrated by a newer binary.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let (url, pooled) = pooler_of(url);
        let options = PgConnectOptions::from_str(&url).map_err(classify)?;
        if pooled {
            return Self::start_pooled(options).await;
        }
        Self::start(options, None).await
    }

    /// Behind a transaction pooler (PgBouncer `pool_mode = transaction`, as Azure Database
    /// for PostgreSQL builds in): nothing may outlive a transaction on a server connection.
    /// So: no LISTEN (wake-ups come from polling alone), no migrations (they hold a session
    /// advisory lock: run them against the server itself), no session settings. Every store
    /// call is already one statement or one explicit transaction.
    ///
    /// # Caveats
    /// sqlx speaks the extended protocol: every statement is a protocol-level prepared
    /// statement, which a transaction pooler supports only from PgBouncer 1.21 on, with
    /// `max_prepared_statements` > 0 (it then re-prepares them on whichever server
    /// connection it hands out). Debian 12's PgBouncer 1.18 refuses them ("prepared
    /// statement … already exists"). Statements must stay named: an unnamed one
    /// (`persistent(false)`) is parsed in one round trip and bound in the next, which the
    /// pooler may send to another server connection ("unnamed prepared statement does not
    /// exist"). Tested through PgBouncer 1.24: `persistence/tests/store/pgbouncer_conformance.rs`.
    async fn start_pooled(options: PgConnectOptions) -> Result<Self, StoreError> {
        let pool = pool_options()
            .connect_with(options)
            .await
            .map_err(classify)?;
        let latest = Self::latest_schema_version();
        let found: Option<i64> =
            sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
                .fetch_one(&pool)
                .await
                .unwrap_or(None);
        match found {
            Some(v) if v == latest => {}
            Some(v) if v > latest => {
                return Err(StoreError::permanent(format!(
                    "the journal's schema is version {v}, newer than this binary's {latest}: use a newer hcp-workflow"
                )));
            }
            other => {
                return Err(StoreError::permanent(format!(
                    "the journal's schema is {}, this binary needs version {latest}; through a transaction pooler nothing is migrated: run `hcp-workflow migrate --database <the server's own URL>` first",
                    other.map_or_else(|| "missing".to_string(), |v| format!("version {v}"))
                )));
            }
        }
        tracing::warn!(
            "the journal is reached through a transaction pooler (pooler=transaction): no LISTEN/NOTIFY, workers and views poll for changes"
        );
        let wake = Arc::new(watch::channel(0).0);
        let listener = tokio::spawn(std::future::pending::<()>());
        let batcher = batch::Batcher::spawn(pool.clone());
        Ok(Self {
            pool,
            schema: None,
            wake,
            listener,
            batcher,
        })
    }

    /// Like [`PostgresStore::connect`], but in schema `schema` (created if missing): every
    /// pooled connection gets `search_path=<schema>`, so tables, migrations and the
    /// conversion functions all live there. Meant for tests (one schema per test).
    ///
    /// # Errors
    /// As [`PostgresStore::connect`]; [`StoreError::Permanent`] for a schema name that is not
    /// a lowercase identifier (`[a-z_][a-z0-9_]*`, at most 63 bytes).
    pub async fn connect_with_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        let valid = !schema.is_empty()
            && schema.len() <= 63
            && schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !schema.as_bytes()[0].is_ascii_digit();
        if !valid {
            return Err(StoreError::permanent(format!(
                "invalid journal schema name {schema:?}: use [a-z_][a-z0-9_]*"
            )));
        }
        let options = PgConnectOptions::from_str(url).map_err(classify)?;
        let mut conn = options.connect().await.map_err(classify)?;
        // Validated above, so quoting is only belt and braces.
        conn.execute(format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"").as_str())
            .await
            .map_err(classify)?;
        conn.close().await.map_err(classify)?;
        let options = options.options([("search_path", schema)]);
        Self::start(options, Some(schema.to_string())).await
    }

    async fn start(options: PgConnectOptions, schema: Option<String>) -> Result<Self, StoreError> {
        let pool = pool_options()
            .connect_with(options)
            .await
            .map_err(classify)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| migrate_error(e, Self::latest_schema_version()))?;
        let wake = Arc::new(watch::channel(0).0);
        let mut listener = PgListener::connect_with(&pool).await.map_err(classify)?;
        listener.listen(WAKE_CHANNEL).await.map_err(classify)?;
        let listener = tokio::spawn(listen(listener, Arc::clone(&wake)));
        let batcher = batch::Batcher::spawn(pool.clone());
        Ok(Self {
            pool,
            schema,
            wake,
            listener,
            batcher,
        })
    }

    /// The schema this store lives in (`None`: the connection's default search path).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The pool, for tests and tools that need raw SQL (e.g. to corrupt a row on purpose).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The newest migration applied (sqlx's `_sqlx_migrations` table).
    ///
    /// # Errors
    /// [`StoreError`] if the table cannot be read.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(&self.pool)
            .await
            .map_err(classify)
    }

    /// The newest migration this binary knows.
    pub fn latest_schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    fn poke(&self) {
        self.wake.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// After a fenced statement matched no row: lease lost, or no such run?
pub(crate) async fn fenced_or_missing<'e, E>(exec: E, lease: &Lease) -> StoreError
where
    E: Executor<'e, Database = Postgres>,
{
    match sqlx::query_scalar::<_, bool>("SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)")
        .bind(lease.run_id)
        .fetch_one(exec)
        .await
    {
        Ok(true) => StoreError::Fenced {
            run: lease.run_id,
            epoch: lease.epoch,
        },
        Ok(false) => StoreError::NotFound(lease.run_id),
        Err(e) => classify(e),
    }
}

type PgQueryScalar<'q, T> = sqlx::query::QueryScalar<'q, Postgres, T, sqlx::postgres::PgArguments>;

/// An append's events as the four parallel arrays the append statements `unnest`.
type EventColumns<'q> = (Vec<&'q str>, Vec<Option<&'q str>>, Vec<&'q str>, Vec<i64>);

fn event_columns(append: &Append) -> EventColumns<'_> {
    let e = &append.events;
    (
        e.iter().map(|e| e.kind.as_str()).collect(),
        e.iter().map(|e| e.node.as_deref()).collect(),
        e.iter().map(|e| e.data.as_str()).collect(),
        e.iter().map(|e| e.at.0).collect(),
    )
}

/// One append as one statement: fence + patch + seq allocation + events. If the fenced
/// UPDATE matches nothing, `r` is empty and so is the INSERT, and no row comes back. The
/// events follow the writer's `after_seq`, or (a writer that does not say) the journal's
/// last seq; `summary_seq` records that the row's summary is current at the last of them.
/// A writer that numbers its events and finds the journal already past its `after_seq` (the
/// same append sent again after its answer was lost) matches no row and is answered
/// `Fenced`, events or not: with events the primary key would refuse it too, but an append
/// without events would otherwise write its stale summary.
/// For a writer that does not say, the row's own `summary_seq` is the part that keeps two
/// concurrent appends apart: the second waits for the first's row lock and then re-reads
/// the row, but its `max(seq)` over `events` keeps the statement's first snapshot.
pub(crate) fn append_statement<'q>(lease: &'q Lease, append: &'q Append) -> PgQueryScalar<'q, i64> {
    let p = &append.patch;
    let n = i64::try_from(append.events.len()).unwrap_or(i64::MAX);
    let (kinds, nodes, datas, ats) = event_columns(append);
    sqlx::query_scalar::<_, i64>(
        "WITH r AS ( \
             UPDATE runs SET state = $4, blocked_on = $5, current_step = $6, \
                             wake_at = hcp_keep_due(wake_at, $7, $8), updated_at = hcp_ts($8), \
                             summary_seq = coalesce($14::int8, greatest( \
                                 coalesce(summary_seq, 0), ( \
                                 SELECT coalesce(max(seq), 0) FROM events WHERE run_id = $1))) \
                                 + $9 \
             WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 \
               AND ($14::int8 IS NULL OR NOT EXISTS ( \
                   SELECT 1 FROM events WHERE run_id = $1 AND seq > $14)) \
             RETURNING summary_seq), \
         ins AS ( \
             INSERT INTO events (run_id, seq, kind, node, data, at) \
             SELECT $1, r.summary_seq - $9 + e.ord, e.kind, e.node, e.data, hcp_ts(e.at) \
             FROM r, unnest($10::text[], $11::text[], $12::text[], $13::int8[]) \
                  WITH ORDINALITY AS e(kind, node, data, at, ord)) \
         SELECT summary_seq FROM r",
    )
    .bind(lease.run_id)
    .bind(&lease.owner)
    .bind(lease.epoch)
    .bind(p.state.as_str())
    .bind(&p.blocked_on)
    .bind(p.current_step.as_deref())
    .bind(p.wake_at.map(|t| t.0))
    .bind(p.updated_at.0)
    .bind(n)
    .bind(kinds)
    .bind(nodes)
    .bind(datas)
    .bind(ats)
    .bind(append.after_seq)
}

/// Whether `append` may be written by [`append_insert_only`]: the writer numbers its events
/// and says the run's row needs no change ([`Append::summary_kept`]), and it has events to
/// carry the summary.
pub(crate) fn insert_only(append: &Append) -> Option<i64> {
    (append.summary_kept && !append.events.is_empty() && append.applied_commands.is_empty())
        .then_some(append.after_seq)
        .flatten()
}

/// A step whose run keeps its state and stays due: its events alone, numbered after
/// `after` (schema v8). The run row is not written, only share-locked: the lease check
/// waits for (and then sees) an acquisition in progress, and an acquisition waits for this
/// commit, so no event is ever written under a lease that another worker has taken. The
/// last event carries the summary. Rows inserted: the number of events, or 0 when the
/// lease does not match.
pub(crate) fn append_insert_only<'q>(
    lease: &'q Lease,
    append: &'q Append,
    after: i64,
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    let p = &append.patch;
    let n = i64::try_from(append.events.len()).unwrap_or(i64::MAX);
    let (kinds, nodes, datas, ats) = event_columns(append);
    sqlx::query(
        "INSERT INTO events (run_id, seq, kind, node, data, at, \
                             run_blocked_on, run_step, run_updated_at) \
         SELECT $1, $4 + e.ord, e.kind, e.node, e.data, hcp_ts(e.at), \
                CASE WHEN e.ord = $5 THEN $6 END, CASE WHEN e.ord = $5 THEN $7 END, \
                CASE WHEN e.ord = $5 THEN hcp_ts($8) END \
         FROM (SELECT 1 FROM runs WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 \
               FOR SHARE) AS fence, \
              unnest($9::text[], $10::text[], $11::text[], $12::int8[]) \
                  WITH ORDINALITY AS e(kind, node, data, at, ord)",
    )
    .bind(lease.run_id)
    .bind(&lease.owner)
    .bind(lease.epoch)
    .bind(after)
    .bind(n)
    .bind(&p.blocked_on)
    .bind(p.current_step.as_deref())
    .bind(p.updated_at.0)
    .bind(kinds)
    .bind(nodes)
    .bind(datas)
    .bind(ats)
}

/// An append's error: an event seq already taken means the writer's view of the journal is
/// behind it (another writer, or this append already written), answered like a lost lease;
/// anything else as [`classify`] says.
pub(crate) fn append_error(e: sqlx::Error, lease: &Lease) -> StoreError {
    match &e {
        sqlx::Error::Database(db)
            if db.code().as_deref() == Some("23505") && db.constraint() == Some("events_pkey") =>
        {
            StoreError::Fenced {
                run: lease.run_id,
                epoch: lease.epoch,
            }
        }
        _ => classify(e),
    }
}

/// One release as one statement (fenced).
pub(crate) fn release_statement(
    lease: &Lease,
    wake_at: Option<i64>,
) -> sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, wake_at = hcp_ts($4) \
         WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3",
    )
    .bind(lease.run_id)
    .bind(&lease.owner)
    .bind(lease.epoch)
    .bind(wake_at)
}

/// Relay NOTIFYs to the watch channel until the store drops (aborts) this task.
async fn listen(mut listener: PgListener, wake: Arc<watch::Sender<u64>>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(_)) => {}
            // The connection was lost and re-established: notifications sent meanwhile are
            // gone, so wake everyone once to cover them.
            Ok(None) => tracing::debug!("journal wake-up listener reconnected"),
            Err(e) => {
                tracing::warn!(error = %e, "journal wake-up listener failed; retrying");
                tokio::time::sleep(LISTENER_RETRY).await;
            }
        }
        wake.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// `runs` columns for a [`RunSummary`], times as epoch milliseconds, in
/// [`summary_from_row`]'s order.
macro_rules! summary_columns {
    () => {
        "runs.id, runs.workflow, runs.workflow_version, runs.labels::text, \
         runs.idempotency_key, runs.state, \
         CASE WHEN head.fresh THEN head.run_blocked_on ELSE runs.blocked_on END, \
         CASE WHEN head.fresh THEN head.run_step ELSE runs.current_step END, \
         hcp_ms(runs.created_at), \
         hcp_ms(CASE WHEN head.fresh THEN head.run_updated_at ELSE runs.updated_at END), \
         hcp_ms(runs.wake_at), \
         runs.lease_owner, runs.lease_epoch, hcp_ms(runs.lease_expires_at), \
         runs.commands_pending, runs.exclusive_key, runs.target"
    };
}

/// The run's newest event as `head`: `head.fresh` when it carries a summary newer than the
/// row's (a step written by [`append_insert_only`]); `summary_columns!` then takes it.
macro_rules! head_join {
    () => {
        " LEFT JOIN LATERAL ( \
             SELECT (h.run_blocked_on IS NOT NULL \
                     AND h.seq > coalesce(runs.summary_seq, 0)) AS fresh, \
                    h.run_blocked_on, h.run_step, h.run_updated_at \
             FROM events h WHERE h.run_id = runs.id ORDER BY h.seq DESC LIMIT 1) AS head ON true "
    };
}

/// Terminal states, spelled like the partial indexes' predicate in the migration.
macro_rules! active {
    () => {
        "state NOT IN ('succeeded', 'rolled-back', 'cancelled')"
    };
}

/// The run's target is served (`$5`: the targets, or NULL for any).
macro_rules! target_ok {
    () => {
        "(target IS NULL OR $5::text[] IS NULL OR target = ANY($5::text[]))"
    };
}

/// A lease nobody holds any more (never taken, released, or expired before `$3`).
/// Whether a run's lease is free, by the **database's** clock: a worker whose
/// clock runs ahead must not find a live lease expired and take the run over.
macro_rules! lease_free {
    () => {
        "(lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < now())"
    };
}

fn summary_from_row(row: &PgRow) -> Result<RunSummary, StoreError> {
    let id: RunId = row.try_get(0).map_err(classify)?;
    rows::summary_from_row(row, id)
}

fn command_from_row(row: &PgRow) -> Result<CommandRecord, StoreError> {
    Ok(CommandRecord {
        id: row.try_get(0).map_err(classify)?,
        command: row.try_get(1).map_err(classify)?,
        requested_by: row.try_get(2).map_err(classify)?,
        reason: row.try_get(3).map_err(classify)?,
        requested_at: Timestamp(row.try_get(4).map_err(classify)?),
        applied_at: row
            .try_get::<Option<i64>, _>(5)
            .map_err(classify)?
            .map(Timestamp),
    })
}

/// One run's record from `load_runs`' row (summary, DAG, then the parallel arrays).
fn record_from_row(row: &PgRow) -> Result<RunRecord, StoreError> {
    let summary = summary_from_row(row)?;
    let run = summary.id;
    let w = rows::SUMMARY_WIDTH;
    let dag: String = row.try_get(w).map_err(classify)?;
    let col = |i: usize| row.try_get::<Option<Vec<i64>>, _>(i).map_err(classify);
    let text = |i: usize| row.try_get::<Option<Vec<String>>, _>(i).map_err(classify);
    let seqs = col(w + 1)?.unwrap_or_default();
    let kinds = text(w + 2)?.unwrap_or_default();
    let nodes = row
        .try_get::<Option<Vec<Option<String>>>, _>(w + 3)
        .map_err(classify)?
        .unwrap_or_default();
    let datas = text(w + 4)?.unwrap_or_default();
    let ats = col(w + 5)?.unwrap_or_default();
    let n = seqs.len();
    if [kinds.len(), nodes.len(), datas.len(), ats.len()] != [n; 4] {
        return Err(bad_row(format!(
            "run {run}: event columns of unequal length"
        )));
    }
    let events = seqs
        .into_iter()
        .zip(kinds)
        .zip(nodes)
        .zip(datas)
        .zip(ats)
        .map(|((((seq, kind), node), data), at)| StoredEvent {
            seq,
            kind,
            node,
            data,
            at: Timestamp(at),
        })
        .collect();
    let ids = col(w + 6)?.unwrap_or_default();
    let commands_text = text(w + 7)?.unwrap_or_default();
    let bys = text(w + 8)?.unwrap_or_default();
    let reasons = text(w + 9)?.unwrap_or_default();
    let requested = col(w + 10)?.unwrap_or_default();
    let applied = row
        .try_get::<Option<Vec<Option<i64>>>, _>(w + 11)
        .map_err(classify)?
        .unwrap_or_default();
    let n = ids.len();
    if [
        commands_text.len(),
        bys.len(),
        reasons.len(),
        requested.len(),
        applied.len(),
    ] != [n; 5]
    {
        return Err(bad_row(format!(
            "run {run}: command columns of unequal length"
        )));
    }
    let commands = ids
        .into_iter()
        .zip(commands_text)
        .zip(bys)
        .zip(reasons)
        .zip(requested)
        .zip(applied)
        .map(
            |(((((id, command), requested_by), reason), requested_at), applied_at)| CommandRecord {
                id,
                command,
                requested_by,
                reason,
                requested_at: Timestamp(requested_at),
                applied_at: applied_at.map(Timestamp),
            },
        )
        .collect();
    Ok(RunRecord {
        summary,
        dag,
        events,
        commands,
    })
}

/// The summary a run starts with (the in-memory store's wording).
const INITIAL_BLOCKED_ON: &str = "waiting for a worker to pick the run up";

#[async_trait]
impl JournalStore for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    /// The server's `clock_timestamp()` (not `now()`, the start of a transaction).
    async fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        let ms: i64 = sqlx::query_scalar("SELECT hcp_ms(clock_timestamp())")
            .fetch_one(&self.pool)
            .await
            .map_err(classify)?;
        Ok(Some(Timestamp(ms)))
    }

    /// Nothing to claim: many workers share a Postgres journal, and leases alone keep them
    /// apart.
    async fn claim_executor(
        &self,
        _owner: &str,
        _serves: Option<&[String]>,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        let labels =
            serde_json::to_string(&run.labels).map_err(|e| StoreError::Permanent(Box::new(e)))?;
        // One statement: the run and its DAG, or nothing if the idempotency key is taken or
        // an unfinished run holds the exclusive key (ON CONFLICT without a target covers
        // every unique index, the partial `runs_exclusive` included, and waits for a
        // concurrent insert of the same key to commit or abort). A duplicate *id* is the
        // primary key: also "nothing", told apart below.
        let created: Option<RunId> = sqlx::query_scalar(
            "WITH ins AS ( \
                 INSERT INTO runs (id, workflow, workflow_version, labels, idempotency_key, \
                                   exclusive_key, target, state, blocked_on, created_at, \
                                   updated_at, wake_at) \
                 VALUES ($1, $2, $3, $4::jsonb, $5, $9, $10, 'pending', $6, hcp_ts($7), \
                         hcp_ts($7), hcp_ts($7)) \
                 ON CONFLICT DO NOTHING \
                 RETURNING id), \
             dag AS (INSERT INTO run_dags (run_id, dag) SELECT id, $8 FROM ins) \
             SELECT id FROM ins",
        )
        .bind(run.id)
        .bind(&run.workflow)
        .bind(i64::from(run.workflow_version))
        .bind(&labels)
        .bind(run.idempotency_key.as_deref())
        .bind(INITIAL_BLOCKED_ON)
        .bind(run.created_at.0)
        .bind(&run.dag)
        .bind(run.exclusive_key.as_deref())
        .bind(run.target.as_deref())
        .fetch_optional(&self.pool)
        .await
        .map_err(classify)?;
        if let Some(id) = created {
            self.poke();
            return Ok(CreateOutcome::Created(id));
        }
        // Which key was in the way: the idempotency key first (the contract's order).
        if let Some(key) = &run.idempotency_key {
            let existing: Option<(RunId, String, Option<String>)> = sqlx::query_as(
                "SELECT id, workflow, exclusive_key FROM runs WHERE idempotency_key = $1",
            )
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(classify)?;
            if let Some((id, workflow, exclusive)) = existing {
                return Ok(rows::key_taken(id, &workflow, exclusive.as_deref(), &run));
            }
        }
        if let Some(key) = &run.exclusive_key {
            let holder: Option<RunId> = sqlx::query_scalar(concat!(
                "SELECT id FROM runs WHERE exclusive_key = $1 AND exclusive_key IS NOT NULL AND ",
                active!()
            ))
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(classify)?;
            if let Some(id) = holder {
                return Ok(CreateOutcome::Busy(id));
            }
        }
        let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)")
            .bind(run.id)
            .fetch_one(&self.pool)
            .await
            .map_err(classify)?;
        if exists {
            return Err(StoreError::permanent(format!(
                "run {} already exists",
                run.id
            )));
        }
        // The conflicting run finished (or vanished) between the two statements: worth a
        // retry rather than a failure.
        Err(StoreError::transient(format!(
            "run {} conflicted with a run that no longer holds its keys; retry",
            run.id
        )))
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
        let expires_at = now.plus(lease_for);
        // The lease runs for `lease_for` from the database's now (not the worker's).
        let lease_ms = i64::try_from(lease_for.as_millis()).unwrap_or(i64::MAX);
        // SKIP LOCKED: rows another worker is acquiring right now are left to it. Rows it
        // updated and committed meanwhile are re-checked against the WHERE clause on their
        // new version (so a run just leased by someone else is not taken twice).
        let rows = match only {
            None => sqlx::query(concat!(
                "UPDATE runs SET lease_owner = $1, lease_epoch = runs.lease_epoch + 1, \
                                 lease_expires_at = now() + $2 * interval '1 millisecond' \
                 FROM (SELECT id FROM runs \
                       WHERE ",
                active!(),
                " AND (wake_at <= hcp_ts($3) OR commands_pending) AND ",
                lease_free!(),
                " AND ",
                target_ok!(),
                " ORDER BY coalesce(wake_at, hcp_ts($3)), id \
                       LIMIT $4 \
                       FOR UPDATE SKIP LOCKED) AS due \
                 WHERE runs.id = due.id \
                 RETURNING runs.id, runs.lease_epoch, hcp_ms(runs.wake_at)"
            ))
            .bind(owner)
            .bind(lease_ms)
            .bind(now.0)
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .bind(targets),
            // One run by primary key (a separate statement, so its plan is a key lookup).
            Some(id) => sqlx::query(concat!(
                "UPDATE runs SET lease_owner = $1, lease_epoch = lease_epoch + 1, \
                                 lease_expires_at = now() + $2 * interval '1 millisecond' \
                 WHERE id = $4 AND ",
                active!(),
                " AND (wake_at <= hcp_ts($3) OR commands_pending) AND ",
                lease_free!(),
                " AND ",
                target_ok!(),
                " RETURNING id, lease_epoch, hcp_ms(wake_at)"
            ))
            .bind(owner)
            .bind(lease_ms)
            .bind(now.0)
            .bind(id)
            .bind(targets),
        }
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        let mut due = Vec::with_capacity(rows.len());
        for row in rows {
            let id: RunId = row.try_get(0).map_err(classify)?;
            let epoch: i64 = row.try_get(1).map_err(classify)?;
            let wake_at: Option<i64> = row.try_get(2).map_err(classify)?;
            due.push((wake_at.unwrap_or(now.0), id, epoch));
        }
        Ok(rows::leases_most_overdue_first(due, owner, expires_at))
    }

    async fn append(&self, lease: &Lease, append: Append) -> Result<i64, StoreError> {
        if append.applied_commands.is_empty() {
            // The common case: group committed with other runs' appends.
            return self
                .batcher
                .call(batch::Op::Append(lease.clone(), append))
                .await;
        }
        // Acknowledging commands takes a transaction: the fenced UPDATE locks the run row,
        // so no `submit_command` (which updates the same row first) can slip a command in
        // between the acknowledgement and the recomputation of `commands_pending`.
        let p = &append.patch;
        let mut tx = self.pool.begin().await.map_err(classify)?;
        let Some(last) = append_statement(lease, &append)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| append_error(e, lease))?
        else {
            let err = fenced_or_missing(&mut *tx, lease).await;
            return Err(err);
        };
        sqlx::query(
            "UPDATE commands SET applied_at = hcp_ts($3) \
             WHERE run_id = $1 AND applied_at IS NULL AND id = ANY($2)",
        )
        .bind(lease.run_id)
        .bind(&append.applied_commands)
        .bind(p.updated_at.0)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        sqlx::query(
            "UPDATE runs SET commands_pending = EXISTS ( \
                 SELECT 1 FROM commands WHERE run_id = $1 AND applied_at IS NULL) \
             WHERE id = $1",
        )
        .bind(lease.run_id)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        tx.commit().await.map_err(classify)?;
        Ok(last)
    }

    async fn renew_for(
        &self,
        owner: &str,
        _now: Timestamp,
        ttl: Duration,
    ) -> Result<Vec<RunId>, StoreError> {
        // By the database's clock, as acquisition decides expiry.
        sqlx::query_scalar(concat!(
            "UPDATE runs SET lease_expires_at = now() + $2 * interval '1 millisecond' \
                 FROM (SELECT id FROM runs WHERE ",
            active!(),
            " AND lease_owner = $1 ORDER BY id FOR UPDATE) AS mine \
                 WHERE runs.id = mine.id AND runs.lease_owner = $1 \
                 RETURNING runs.id"
        ))
        .bind(owner)
        .bind(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(classify)
    }

    async fn renew(&self, owner: &str, until: Timestamp) -> Result<Vec<RunId>, StoreError> {
        // Rows are locked in id order, as the batch writer locks them, so a renewal and a
        // batch can never wait on each other in a cycle.
        sqlx::query_scalar(concat!(
            "UPDATE runs SET lease_expires_at = hcp_ts($2) \
                 FROM (SELECT id FROM runs WHERE ",
            active!(),
            " AND lease_owner = $1 ORDER BY id FOR UPDATE) AS mine \
                 WHERE runs.id = mine.id AND runs.lease_owner = $1 \
                 RETURNING runs.id"
        ))
        .bind(owner)
        .bind(until.0)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)
    }

    async fn release(&self, lease: &Lease, wake_at: Option<Timestamp>) -> Result<(), StoreError> {
        self.batcher
            .call(batch::Op::Release(lease.clone(), wake_at.map(|t| t.0)))
            .await
            .map(|_| ())
    }

    async fn load_run(&self, run: RunId) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.load_runs(&[run]).await?.pop())
    }

    async fn load_runs(&self, runs: &[RunId]) -> Result<Vec<RunRecord>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        // One statement, so one snapshot and one round trip: each run's journal and inbox
        // come back as parallel arrays (NULL when empty), each in order.
        sqlx::query(concat!(
            "SELECT ",
            summary_columns!(),
            ", coalesce(run_dags.dag, ''), \
               e.seqs, e.kinds, e.nodes, e.datas, e.ats, \
               c.ids, c.commands, c.bys, c.reasons, c.requested, c.applied \
             FROM runs ",
            head_join!(),
            " LEFT JOIN run_dags ON run_dags.run_id = runs.id \
             CROSS JOIN LATERAL ( \
                 SELECT array_agg(seq ORDER BY seq) AS seqs, \
                        array_agg(kind ORDER BY seq) AS kinds, \
                        array_agg(node ORDER BY seq) AS nodes, \
                        array_agg(data ORDER BY seq) AS datas, \
                        array_agg(hcp_ms(at) ORDER BY seq) AS ats \
                 FROM events WHERE events.run_id = runs.id) AS e \
             CROSS JOIN LATERAL ( \
                 SELECT array_agg(id ORDER BY id) AS ids, \
                        array_agg(command ORDER BY id) AS commands, \
                        array_agg(requested_by ORDER BY id) AS bys, \
                        array_agg(reason ORDER BY id) AS reasons, \
                        array_agg(hcp_ms(requested_at) ORDER BY id) AS requested, \
                        array_agg(hcp_ms(applied_at) ORDER BY id) AS applied \
                 FROM commands WHERE commands.run_id = runs.id) AS c \
             WHERE runs.id = ANY($1)"
        ))
        .bind(runs)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?
        .iter()
        .map(record_from_row)
        .collect()
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let mut q = QueryBuilder::<Postgres>::new(concat!(
            "SELECT ",
            summary_columns!(),
            " FROM runs",
            head_join!(),
            "WHERE true"
        ));
        if !filter.states.is_empty() {
            let states: Vec<&str> = filter.states.iter().map(|s| s.as_str()).collect();
            q.push(" AND state = ANY(").push_bind(states).push(")");
        }
        if let Some(w) = &filter.workflow {
            q.push(" AND workflow = ").push_bind(w.as_str());
        }
        if let Some((k, v)) = &filter.label {
            // `@>` on the GIN (jsonb_path_ops) index.
            q.push(" AND labels @> jsonb_build_object(")
                .push_bind(k.as_str())
                .push("::text, ")
                .push_bind(v.as_str())
                .push("::text)");
        }
        if let Some(t) = filter.since {
            q.push(" AND created_at >= hcp_ts(")
                .push_bind(t.0)
                .push(")");
        }
        q.push(" ORDER BY created_at DESC, id DESC");
        if filter.limit > 0 {
            q.push(" LIMIT ")
                .push_bind(i64::try_from(filter.limit).unwrap_or(i64::MAX));
        }
        q.build()
            .fetch_all(&self.pool)
            .await
            .map_err(classify)?
            .iter()
            .map(summary_from_row)
            .collect()
    }

    async fn submit_command(&self, run: RunId, cmd: NewCommand) -> Result<i64, StoreError> {
        // Flag and insert in one statement; the INSERT selects from the flagged row, so a
        // missing run inserts nothing. Updating the run row first serialises with an append
        // that is acknowledging commands (it holds that row's lock).
        let id: Option<i64> = sqlx::query_scalar(
            "WITH r AS (UPDATE runs SET commands_pending = true WHERE id = $1 RETURNING id) \
             INSERT INTO commands (run_id, command, requested_by, reason, requested_at) \
             SELECT r.id, $2, $3, $4, hcp_ts($5) FROM r \
             RETURNING id",
        )
        .bind(run)
        .bind(&cmd.command)
        .bind(&cmd.requested_by)
        .bind(&cmd.reason)
        .bind(cmd.requested_at.0)
        .fetch_optional(&self.pool)
        .await
        .map_err(classify)?;
        let id = id.ok_or(StoreError::NotFound(run))?;
        self.poke();
        Ok(id)
    }

    async fn pending_commands(&self, run: RunId) -> Result<Vec<CommandRecord>, StoreError> {
        // The run's existence and its inbox in one statement (a LEFT JOIN from the run row).
        let rows = sqlx::query(
            "SELECT c.id, c.command, c.requested_by, c.reason, hcp_ms(c.requested_at), \
                    hcp_ms(c.applied_at) \
             FROM runs LEFT JOIN commands c ON c.run_id = runs.id AND c.applied_at IS NULL \
             WHERE runs.id = $1 ORDER BY c.id",
        )
        .bind(run)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)?;
        if rows.is_empty() {
            return Err(StoreError::NotFound(run));
        }
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            if row
                .try_get::<Option<i64>, _>(0)
                .map_err(classify)?
                .is_some()
            {
                out.push(command_from_row(row)?);
            }
        }
        Ok(out)
    }

    async fn runs_with_commands(&self, owner: &str) -> Result<Vec<RunId>, StoreError> {
        sqlx::query_scalar(concat!(
            "SELECT id FROM runs WHERE commands_pending AND ",
            active!(),
            " AND lease_owner = $1"
        ))
        .bind(owner)
        .fetch_all(&self.pool)
        .await
        .map_err(classify)
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    async fn record_report(&self, r: NewReport) -> Result<i64, StoreError> {
        let mut tx = self.pool.begin().await.map_err(classify)?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO reports (kind, subject, at, ok, made_by, data) \
             VALUES ($1, $2, hcp_ts($3), $4, $5, $6) RETURNING id",
        )
        .bind(&r.kind)
        .bind(&r.subject)
        .bind(r.at.0)
        .bind(r.ok)
        .bind(&r.by)
        .bind(&r.data)
        .fetch_one(&mut *tx)
        .await
        .map_err(classify)?;
        if r.keep > 0 {
            sqlx::query(
                "DELETE FROM reports WHERE kind = $1 AND subject = $2 AND id < \
                 (SELECT id FROM reports WHERE kind = $1 AND subject = $2 \
                  ORDER BY id DESC LIMIT 1 OFFSET $3)",
            )
            .bind(&r.kind)
            .bind(&r.subject)
            .bind(i64::try_from(r.keep - 1).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        tx.commit().await.map_err(classify)?;
        Ok(id)
    }

    async fn list_reports(&self, filter: &ReportFilter) -> Result<Vec<ReportRecord>, StoreError> {
        let mut q = QueryBuilder::<Postgres>::new(
            "SELECT id, kind, subject, hcp_ms(at), ok, made_by, data FROM reports r WHERE kind = ",
        );
        crate::rows::push_report_filter(&mut q, filter);
        q.build()
            .fetch_all(&self.pool)
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
        _now: Timestamp,
    ) -> Result<TokenGrant, StoreError> {
        // The database's clock refills: workers whose clocks disagree share one bucket.
        let row: (f64, i32) = sqlx::query_as(
            "INSERT INTO token_buckets AS b (key, tokens, at, granted) \
             VALUES ($1, $3 - least($2, floor($3)), clock_timestamp(), least($2, floor($3))) \
             ON CONFLICT (key) DO UPDATE SET \
                 granted = least($2, floor(least($3, b.tokens + \
                     greatest(0, extract(epoch FROM clock_timestamp() - b.at)) * $4))), \
                 tokens = least($3, b.tokens + \
                     greatest(0, extract(epoch FROM clock_timestamp() - b.at)) * $4) \
                     - least($2, floor(least($3, b.tokens + \
                     greatest(0, extract(epoch FROM clock_timestamp() - b.at)) * $4))), \
                 at = greatest(b.at, clock_timestamp()) \
             RETURNING tokens, granted",
        )
        .bind(key)
        .bind(f64::from(want))
        .bind(capacity)
        .bind(per_second)
        .fetch_one(&self.pool)
        .await
        .map_err(classify)?;
        Ok(TokenGrant {
            granted: u32::try_from(row.1.max(0)).unwrap_or(0),
            left: row.0,
            per_second,
        })
    }

    async fn claim_schedule(
        &self,
        key: &str,
        by: &str,
        now: Timestamp,
        next: Timestamp,
    ) -> Result<bool, StoreError> {
        // One statement: a new slot is inserted; a due one is updated; a slot another
        // claimant just moved on is left alone (its row lock makes this one wait for that
        // commit, then re-check the WHERE against the new due time).
        let claimed: Option<String> = sqlx::query_scalar(
            "INSERT INTO schedules (key, next_at, claimed_by, claimed_at) \
             VALUES ($1, hcp_ts($2), $3, hcp_ts($4)) \
             ON CONFLICT (key) DO UPDATE SET next_at = excluded.next_at, \
                 claimed_by = excluded.claimed_by, claimed_at = excluded.claimed_at \
             WHERE schedules.next_at <= hcp_ts($4) \
             RETURNING key",
        )
        .bind(key)
        .bind(next.0)
        .bind(by)
        .bind(now.0)
        .fetch_optional(&self.pool)
        .await
        .map_err(classify)?;
        Ok(claimed.is_some())
    }
}

/// The store's connection pool, direct or behind a pooler.
fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .min_connections(0)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // No ping before each use (sqlx's default): it is a second round trip per statement
        // . A connection the server dropped fails its statement instead, which
        // is classified transient and retried on a fresh connection.
        .test_before_acquire(false)
}

/// `url` without hcp-workflow's own `pooler=transaction` query parameter, and whether it
/// was there (the journal is reached through a transaction pooler such as PgBouncer).
pub(crate) fn pooler_of(url: &str) -> (String, bool) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), false);
    };
    let mut pooled = false;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| {
            let ours = kv.eq_ignore_ascii_case("pooler=transaction");
            pooled |= ours;
            !ours && !kv.is_empty()
        })
        .collect();
    if rest.is_empty() {
        (base.to_string(), pooled)
    } else {
        (format!("{base}?{}", rest.join("&")), pooled)
    }
}

#[cfg(test)]
mod pooler_tests {
    #[test]
    fn the_pooler_parameter_is_ours_and_removed() {
        assert_eq!(
            super::pooler_of("postgres://u@h:6432/db?pooler=transaction"),
            ("postgres://u@h:6432/db".to_string(), true)
        );
        assert_eq!(
            super::pooler_of(
                "postgres://u@h/db?sslmode=require&pooler=transaction&application_name=x"
            ),
            (
                "postgres://u@h/db?sslmode=require&application_name=x".to_string(),
                true
            )
        );
        assert_eq!(
            super::pooler_of("postgres://u@h/db?sslmode=require"),
            ("postgres://u@h/db?sslmode=require".to_string(), false)
        );
    }
}
