//! The SQL of every SQLite write, run by the writer task inside its transaction.
//!
//! Each function assumes it runs inside the writer's `BEGIN IMMEDIATE` transaction, so it
//! may take several statements without racing anyone: no other connection in any process
//! can write until the batch commits. Fencing is still done in the writing statement itself
//! (`WHERE id = ? AND lease_owner = ? AND lease_epoch = ?`), never by a separate read, so a
//! fenced call writes nothing at all, and neither does a call for a missing run
//! ([`fails_cleanly`]): the writer relies on that to skip savepoints.
//!
//! Most calls are one round trip to SQLite's thread (several statements in one query where
//! needed) and every statement is a cached prepared statement (sqlx keeps a per-connection
//! cache keyed by SQL text), so the hot path re-prepares nothing. See [`append_statements`]
//! for the one trap in sqlx's multi-statement queries (parameter numbering).

use super::{id_text, parse_id};
use crate::error::classify;
use hcp_runtime::StoreError;
use hcp_runtime::Timestamp;
use hcp_runtime::store::{
    Append, CreateOutcome, Lease, NewCommand, NewReport, NewRun, RunId, TokenGrant,
};
use sqlx::Row;
use sqlx::sqlite::SqliteConnection;
use std::sync::OnceLock;

/// A write, as sent to the writer task.
#[derive(Debug)]
pub(crate) enum WriteOp {
    CreateRun(NewRun),
    Acquire {
        owner: String,
        now: Timestamp,
        expires_at: Timestamp,
        limit: i64,
        only: Option<RunId>,
        /// JSON array of the targets served, or `None` for any.
        targets: Option<String>,
    },
    Append {
        lease: Lease,
        append: Append,
    },
    Renew {
        owner: String,
        until: Timestamp,
    },
    Release {
        lease: Lease,
        wake_at: Option<Timestamp>,
    },
    SubmitCommand {
        run: RunId,
        cmd: NewCommand,
    },
    /// `claim_executor`: every other lease holder is dead.
    ReleaseAllLeases,
    RecordReport(NewReport),
    TakeTokens {
        key: String,
        want: u32,
        capacity: f64,
        per_second: f64,
        now: Timestamp,
    },
    ClaimSchedule {
        key: String,
        by: String,
        now: Timestamp,
        next: Timestamp,
    },
    /// Diagnostics: the writer connection's settings.
    Settings,
}

/// What a write returns.
#[derive(Debug)]
pub(crate) enum WriteOk {
    Created(CreateOutcome),
    Leases(Vec<Lease>),
    Seq(i64),
    Runs(Vec<RunId>),
    Unit,
    CommandId(i64),
    ReportId(i64),
    Tokens(TokenGrant),
    Claimed(bool),
    Count(u64),
    Settings(SqliteSettings),
}

/// The settings of the writer connection that durability and concurrency depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteSettings {
    /// `PRAGMA journal_mode` (`wal`).
    pub journal_mode: String,
    /// `PRAGMA synchronous` by name (`FULL`: every commit is fsynced).
    pub synchronous: String,
    /// `PRAGMA foreign_keys`.
    pub foreign_keys: bool,
    /// `PRAGMA busy_timeout`, in milliseconds.
    pub busy_timeout_ms: i64,
}

/// Whether a failed [`apply`] is known to have written nothing, so the transaction it ran
/// in can go on without a rollback. Every op checks for a missing run and for a lost lease
/// in the statement that would write (or before writing anything), so `NotFound` and
/// `Fenced` qualify; anything else (a constraint, I/O, a decoding error) may come after a
/// partial write.
pub(crate) fn fails_cleanly(err: &StoreError) -> bool {
    matches!(err, StoreError::Fenced { .. } | StoreError::NotFound(_))
}

/// The summary a run starts with (the in-memory store's wording).
const INITIAL_BLOCKED_ON: &str = "waiting for a worker to pick the run up";

pub(crate) async fn apply(
    conn: &mut SqliteConnection,
    op: &WriteOp,
) -> Result<WriteOk, StoreError> {
    match op {
        WriteOp::CreateRun(run) => create_run(conn, run).await.map(WriteOk::Created),
        WriteOp::Acquire {
            owner,
            now,
            expires_at,
            limit,
            only,
            targets,
        } => acquire(
            conn,
            owner,
            *now,
            *expires_at,
            *limit,
            *only,
            targets.as_deref(),
        )
        .await
        .map(WriteOk::Leases),
        WriteOp::Append { lease, append } => {
            append_events(conn, lease, append).await.map(WriteOk::Seq)
        }
        WriteOp::Renew { owner, until } => renew(conn, owner, *until).await.map(WriteOk::Runs),
        WriteOp::Release { lease, wake_at } => {
            release(conn, lease, *wake_at).await.map(|()| WriteOk::Unit)
        }
        WriteOp::SubmitCommand { run, cmd } => submit_command(conn, *run, cmd)
            .await
            .map(WriteOk::CommandId),
        WriteOp::ReleaseAllLeases => release_all_leases(conn).await.map(WriteOk::Count),
        WriteOp::RecordReport(r) => record_report(conn, r).await.map(WriteOk::ReportId),
        WriteOp::TakeTokens {
            key,
            want,
            capacity,
            per_second,
            now,
        } => take_tokens(conn, key, *want, *capacity, *per_second, *now)
            .await
            .map(WriteOk::Tokens),
        WriteOp::ClaimSchedule { key, by, now, next } => claim_schedule(conn, key, by, *now, *next)
            .await
            .map(WriteOk::Claimed),
        WriteOp::Settings => settings(conn).await.map(WriteOk::Settings),
    }
}

/// Terminal states, spelled exactly like the partial indexes' predicate in the migration
/// (SQLite only uses a partial index when the query repeats its terms).
macro_rules! active {
    () => {
        "state NOT IN ('succeeded', 'rolled-back', 'cancelled')"
    };
}

async fn create_run(
    conn: &mut SqliteConnection,
    run: &NewRun,
) -> Result<CreateOutcome, StoreError> {
    // Inside the writer's IMMEDIATE transaction nobody can insert the same idempotency or
    // exclusive key between these reads and the insert below, in this process or any other
    // (the unique indexes would refuse it anyway).
    if let Some(key) = &run.idempotency_key {
        let existing: Option<(String, String, Option<String>)> = sqlx::query_as(
            "SELECT id, workflow, exclusive_key FROM runs WHERE idempotency_key = ?1",
        )
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(classify)?;
        if let Some((id, workflow, exclusive)) = existing {
            return Ok(crate::rows::key_taken(
                parse_id(&id)?,
                &workflow,
                exclusive.as_deref(),
                run,
            ));
        }
    }
    if let Some(key) = &run.exclusive_key {
        let holder: Option<String> = sqlx::query_scalar(concat!(
            "SELECT id FROM runs WHERE exclusive_key = ?1 AND exclusive_key IS NOT NULL AND ",
            active!()
        ))
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(classify)?;
        if let Some(id) = holder {
            return Ok(CreateOutcome::Busy(parse_id(&id)?));
        }
    }
    let labels =
        serde_json::to_string(&run.labels).map_err(|e| StoreError::Permanent(Box::new(e)))?;
    // One round trip: the run row, its DAG and its exploded labels. A duplicate id fails
    // the first statement (primary key, permanent) and the rest never runs. Positional
    // parameters, bound in order of appearance (see `append_statements` on why not `?N`).
    let id = id_text(run.id);
    sqlx::query(
        "INSERT INTO runs (id, workflow, workflow_version, labels, idempotency_key, \
                           exclusive_key, target, state, blocked_on, created_at, updated_at, \
                           wake_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?); \
         INSERT INTO run_dags (run_id, dag) VALUES (?, ?); \
         INSERT INTO run_labels (run_id, key, value) SELECT ?, key, value FROM json_each(?)",
    )
    .bind(&id)
    .bind(&run.workflow)
    .bind(i64::from(run.workflow_version))
    .bind(&labels)
    .bind(run.idempotency_key.as_deref())
    .bind(run.exclusive_key.as_deref())
    .bind(run.target.as_deref())
    .bind(INITIAL_BLOCKED_ON)
    .bind(run.created_at.0)
    .bind(run.created_at.0)
    .bind(run.created_at.0)
    .bind(&id)
    .bind(&run.dag)
    .bind(&id)
    .bind(&labels)
    .execute(&mut *conn)
    .await
    .map_err(classify)?;
    Ok(CreateOutcome::Created(run.id))
}

/// A lease nobody holds any more (never taken, released, or expired before `?3`).
macro_rules! lease_free {
    () => {
        "(lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at < ?3)"
    };
}

/// The run's target is served (`?5`: a JSON array of targets, or NULL for any).
macro_rules! target_ok {
    () => {
        "(target IS NULL OR ?5 IS NULL OR target IN (SELECT value FROM json_each(?5)))"
    };
}

/// Due by timer or by command, as a UNION so each branch is one partial-index range scan
/// (an OR would make SQLite scan every active run).
const ACQUIRE: &str = concat!(
    "UPDATE runs SET lease_owner = ?1, lease_epoch = lease_epoch + 1, lease_expires_at = ?2 \
     WHERE id IN (SELECT id FROM (\
        SELECT id, wake_at FROM runs WHERE ",
    active!(),
    " AND wake_at <= ?3 AND ",
    lease_free!(),
    " AND ",
    target_ok!(),
    " UNION SELECT id, wake_at FROM runs WHERE commands_pending = 1 AND ",
    active!(),
    " AND ",
    lease_free!(),
    " AND ",
    target_ok!(),
    ") ORDER BY coalesce(wake_at, ?3), id LIMIT ?4) \
     RETURNING id, lease_epoch, wake_at"
);

const ACQUIRE_ONE: &str = concat!(
    "UPDATE runs SET lease_owner = ?1, lease_epoch = lease_epoch + 1, lease_expires_at = ?2 \
     WHERE id = ?4 AND ",
    active!(),
    " AND (wake_at <= ?3 OR commands_pending = 1) AND ",
    lease_free!(),
    " AND ",
    target_ok!(),
    " RETURNING id, lease_epoch, wake_at"
);

async fn acquire(
    conn: &mut SqliteConnection,
    owner: &str,
    now: Timestamp,
    expires_at: Timestamp,
    limit: i64,
    only: Option<RunId>,
    targets: Option<&str>,
) -> Result<Vec<Lease>, StoreError> {
    if limit <= 0 {
        return Ok(Vec::new());
    }
    let q = match only {
        Some(id) => sqlx::query(ACQUIRE_ONE)
            .bind(owner)
            .bind(expires_at.0)
            .bind(now.0)
            .bind(id_text(id))
            .bind(targets),
        None => sqlx::query(ACQUIRE)
            .bind(owner)
            .bind(expires_at.0)
            .bind(now.0)
            .bind(limit)
            .bind(targets),
    };
    let rows = q.fetch_all(&mut *conn).await.map_err(classify)?;
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.try_get(0).map_err(classify)?;
        let epoch: i64 = row.try_get(1).map_err(classify)?;
        let wake_at: Option<i64> = row.try_get(2).map_err(classify)?;
        due.push((wake_at.unwrap_or(now.0), parse_id(&id)?, epoch));
    }
    Ok(crate::rows::leases_most_overdue_first(
        due, owner, expires_at,
    ))
}

/// Most events per INSERT statement (a handful of parameters each, far below SQLite's
/// limit); longer appends take several statements in the same savepoint.
const EVENTS_PER_INSERT: usize = 32;

/// The statements of one append: an INSERT of its `n` events after the run's counter
/// (`last_seq`), fenced; then the fenced UPDATE (patch, counter and fence in one statement;
/// no row returned means the lease is not, or no longer, ours). Both fences are the same
/// predicate on the run row as it was before the query (the UPDATE, which advances the
/// counter, comes last), so a fenced append inserts nothing either. A writer that numbers
/// its events ([`Append::after_seq`]) is fenced by it too: the counter (always the
/// journal's last seq here) must be at it, so the same append sent again after its
/// commit's answer was lost is refused as `Fenced` and written once.
///
/// Parameters are positional (`?`), bound by [`bind_append`] in the order they appear.
/// Numbered parameters (`?7`) would read better but are unsafe in sqlx's multi-statement
/// queries: a statement that skips a number makes sqlx treat the gap as positional
/// parameters and, past the end of the arguments, stop binding that statement's remaining
/// parameters, which then silently read as NULL.
fn append_statements(n: usize) -> String {
    let update = "UPDATE runs SET state = ?, blocked_on = ?, current_step = ?, wake_at = ?, \
                  updated_at = ?, last_seq = last_seq + ? \
                  WHERE id = ? AND lease_owner = ? AND lease_epoch = ? \
                    AND last_seq = coalesce(?, last_seq) \
                  RETURNING id, last_seq";
    if n == 0 {
        return update.to_string();
    }
    let values = (0..n)
        .map(|i| format!("({}, ?, ?, ?, ?)", i + 1))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "INSERT INTO events (run_id, seq, kind, node, data, at) \
         SELECT runs.id, runs.last_seq + v.column1, v.column2, v.column3, v.column4, \
                v.column5 \
         FROM runs, (VALUES {values}) AS v \
         WHERE runs.id = ? AND runs.lease_owner = ? AND runs.lease_epoch = ? \
           AND runs.last_seq = coalesce(?, runs.last_seq); \
         {update}"
    )
}

/// One append of `n` events (at most [`EVENTS_PER_INSERT`] of them inline) as one
/// multi-statement query: one round trip to SQLite's thread. Built once per `n`.
fn append_sql(n: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| (0..=EVENTS_PER_INSERT).map(append_statements).collect());
    &all[n.min(EVENTS_PER_INSERT)]
}

/// Appends per grouped query (see [`append_group`]): the writer's whole batch.
pub(crate) const GROUP: usize = super::writer::MAX_BATCH;

/// If `op` is an append that [`append_group`] can run with others: its run.
pub(crate) fn groupable(op: &WriteOp) -> Option<RunId> {
    match op {
        WriteOp::Append { lease, append } if append.applied_commands.is_empty() => {
            Some(lease.run_id)
        }
        _ => None,
    }
}

/// Many appends (of distinct runs) as one query of five statements, all reading one JSON
/// parameter (`?1`, an array with one object per append). Every statement's fence is the
/// same predicate on the run rows as they were before the query (the counter `last_seq`
/// is advanced last): the lease, and, when the writer numbers its events, the counter at
/// its `after_seq` (the counter is always the journal's last seq here), so the same append
/// sent again after its commit's answer was lost is answered `Fenced` and written once.
/// First one row saying per append whether its fence matches and its last seq; then the
/// INSERT of the events of every matching run after its counter; the state, in a statement
/// of its own that only writes runs whose state changes (three indexes depend on `state`,
/// and SQLite maintains them for every row an UPDATE assigns it to, changed or not: most
/// appends leave it alone); and last the UPDATE of the summary and the counter. One round
/// trip and one row back, however many appends: what a grouped append costs is SQLite's
/// own work.
const GROUP_SQL: &str = "\
    SELECT json_group_array(json_array(a.key, runs.last_seq + (a.value ->> 'n'), \
               runs.lease_owner IS a.value ->> 'o' AND runs.lease_epoch IS a.value ->> 'e' \
               AND runs.last_seq = coalesce(a.value ->> 'a', runs.last_seq))) \
    FROM json_each(?1) AS a LEFT JOIN runs ON runs.id = a.value ->> 'i'; \
    INSERT INTO events (run_id, seq, kind, node, data, at) \
    SELECT runs.id, runs.last_seq + v.key + 1, \
           v.value ->> 0, v.value ->> 1, v.value ->> 2, v.value ->> 3 \
    FROM json_each(?1) AS a \
    JOIN runs ON runs.id = a.value ->> 'i' AND runs.lease_owner = a.value ->> 'o' \
             AND runs.lease_epoch = a.value ->> 'e' \
             AND runs.last_seq = coalesce(a.value ->> 'a', runs.last_seq) \
    JOIN json_each(a.value, '$.v') AS v; \
    UPDATE runs SET state = j.s \
    FROM (SELECT value ->> 'i' AS i, value ->> 'o' AS o, value ->> 'e' AS e, \
                 value ->> 's' AS s, value ->> 'a' AS a \
          FROM json_each(?1)) AS j \
    WHERE runs.id = j.i AND runs.lease_owner = j.o AND runs.lease_epoch = j.e \
      AND runs.state <> j.s AND runs.last_seq = coalesce(j.a, runs.last_seq); \
    UPDATE runs SET blocked_on = j.b, current_step = j.c, wake_at = j.w, \
                    updated_at = j.u, last_seq = runs.last_seq + j.n \
    FROM (SELECT value ->> 'i' AS i, value ->> 'o' AS o, value ->> 'e' AS e, \
                 value ->> 'b' AS b, value ->> 'c' AS c, \
                 value ->> 'w' AS w, value ->> 'u' AS u, value ->> 'n' AS n, \
                 value ->> 'a' AS a \
          FROM json_each(?1)) AS j \
    WHERE runs.id = j.i AND runs.lease_owner = j.o AND runs.lease_epoch = j.e \
      AND runs.last_seq = coalesce(j.a, runs.last_seq)";

#[derive(serde::Serialize)]
struct GroupMember<'a> {
    i: String,
    o: &'a str,
    e: i64,
    s: &'a str,
    b: &'a str,
    c: Option<&'a str>,
    w: Option<i64>,
    u: i64,
    n: usize,
    /// [`Append::after_seq`].
    a: Option<i64>,
    /// Events as `[kind, node, data, at]`.
    v: Vec<(&'a str, Option<&'a str>, &'a str, i64)>,
}

/// Several appends (each [`groupable`], distinct runs) in one round trip ([`GROUP_SQL`]).
/// Each gets its own result: its last seq, or `Fenced`/`NotFound` (which wrote nothing).
/// `Err`: the query failed; the caller rolls back.
pub(crate) async fn append_group(
    conn: &mut SqliteConnection,
    members: &[&WriteOp],
) -> Result<Vec<Result<WriteOk, StoreError>>, StoreError> {
    let mut leases = Vec::with_capacity(members.len());
    let mut json = Vec::with_capacity(members.len());
    for op in members {
        let WriteOp::Append { lease, append } = op else {
            return Err(StoreError::permanent("internal: malformed append group"));
        };
        let p = &append.patch;
        leases.push(lease);
        json.push(GroupMember {
            i: id_text(lease.run_id),
            o: &lease.owner,
            e: lease.epoch,
            s: p.state.as_str(),
            b: &p.blocked_on,
            c: p.current_step.as_deref(),
            w: p.wake_at.map(|t| t.0),
            u: p.updated_at.0,
            n: append.events.len(),
            a: append.after_seq,
            v: append
                .events
                .iter()
                .map(|e| (e.kind.as_str(), e.node.as_deref(), e.data.as_str(), e.at.0))
                .collect(),
        });
    }
    let json = serde_json::to_string(&json).map_err(|e| StoreError::Permanent(Box::new(e)))?;
    // fetch_all: every statement must run (a row limit would stop the query early).
    let rows = sqlx::query(GROUP_SQL)
        .bind(json)
        .fetch_all(&mut *conn)
        .await
        .map_err(classify)?;
    let text: String = match rows.first() {
        Some(r) => r.try_get(0).map_err(classify)?,
        None => {
            return Err(StoreError::permanent(
                "internal: append group answered nothing",
            ));
        }
    };
    // `[position, last seq or null, fence matched (1/0) or null]` per member.
    let rows: Vec<(usize, Option<i64>, Option<i64>)> =
        serde_json::from_str(&text).map_err(|e| StoreError::Permanent(Box::new(e)))?;
    let mut answers = vec![None; leases.len()];
    for (k, seq, matched) in rows {
        if let Some(a) = answers.get_mut(k) {
            *a = Some((seq, matched));
        }
    }
    Ok(leases
        .iter()
        .zip(answers)
        .map(|(lease, answer)| match answer.unwrap_or((None, None)) {
            (Some(seq), Some(1)) => Ok(WriteOk::Seq(seq)),
            (Some(_), _) => Err(StoreError::Fenced {
                run: lease.run_id,
                epoch: lease.epoch,
            }),
            (None, _) => Err(StoreError::NotFound(lease.run_id)),
        })
        .collect())
}

type Bound<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>;

/// Bind one append's parameters in [`append_statements`] order (`inline`: the events that
/// statement inserts).
fn bind_append<'q>(
    mut q: Bound<'q>,
    id: &'q str,
    lease: &'q Lease,
    append: &'q Append,
    inline: &'q [hcp_runtime::store::NewEvent],
) -> Bound<'q> {
    let p = &append.patch;
    let n = i64::try_from(append.events.len()).unwrap_or(i64::MAX);
    if !inline.is_empty() {
        for e in inline {
            q = q
                .bind(&e.kind)
                .bind(e.node.as_deref())
                .bind(&e.data)
                .bind(e.at.0);
        }
        q = q
            .bind(id)
            .bind(&lease.owner)
            .bind(lease.epoch)
            .bind(append.after_seq);
    }
    q.bind(p.state.as_str())
        .bind(&p.blocked_on)
        .bind(p.current_step.as_deref())
        .bind(p.wake_at.map(|t| t.0))
        .bind(p.updated_at.0)
        .bind(n)
        .bind(id)
        .bind(&lease.owner)
        .bind(lease.epoch)
        .bind(append.after_seq)
}

/// `INSERT INTO events … VALUES (?1, ?2, …), (?1, ?7, …)` for `n` rows with known seqs (the
/// tail of an append longer than [`EVENTS_PER_INSERT`]), built once per `n`.
fn insert_events_sql(n: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    let all = SQL.get_or_init(|| {
        (0..=EVENTS_PER_INSERT)
            .map(|rows| {
                let values: Vec<String> = (0..rows)
                    .map(|i| {
                        let b = 2 + i * 5;
                        format!(
                            "(?1, ?{}, ?{}, ?{}, ?{}, ?{})",
                            b,
                            b + 1,
                            b + 2,
                            b + 3,
                            b + 4
                        )
                    })
                    .collect();
                format!(
                    "INSERT INTO events (run_id, seq, kind, node, data, at) VALUES {}",
                    values.join(", ")
                )
            })
            .collect()
    });
    &all[n.min(EVENTS_PER_INSERT)]
}

async fn append_events(
    conn: &mut SqliteConnection,
    lease: &Lease,
    append: &Append,
) -> Result<i64, StoreError> {
    let id = id_text(lease.run_id);
    let p = &append.patch;
    let n = i64::try_from(append.events.len())
        .map_err(|_| StoreError::permanent("too many events in one append"))?;
    let (head, tail) = append
        .events
        .split_at(append.events.len().min(EVENTS_PER_INSERT));
    let q = bind_append(
        sqlx::query(append_sql(head.len())),
        &id,
        lease,
        append,
        head,
    );
    // fetch_all, not fetch_optional: sqlx stops a multi-statement query after the row
    // limit, which would skip the INSERT.
    let rows = q.fetch_all(&mut *conn).await.map_err(classify)?;
    let Some(row) = rows.first() else {
        return Err(fenced_or_missing(conn, lease).await);
    };
    let last: i64 = row.try_get(1).map_err(classify)?;
    let mut seq = last - n + i64::try_from(head.len()).unwrap_or(0);
    for chunk in tail.chunks(EVENTS_PER_INSERT) {
        let mut q = sqlx::query(insert_events_sql(chunk.len())).bind(&id);
        for e in chunk {
            seq += 1;
            q = q
                .bind(seq)
                .bind(&e.kind)
                .bind(e.node.as_deref())
                .bind(&e.data)
                .bind(e.at.0);
        }
        q.execute(&mut *conn).await.map_err(classify)?;
    }
    if !append.applied_commands.is_empty() {
        let ids = serde_json::to_string(&append.applied_commands)
            .map_err(|e| StoreError::Permanent(Box::new(e)))?;
        // Only this run's commands; `commands_pending` is recomputed rather than cleared
        // because a command submitted after the worker read the inbox is still pending.
        // (Each statement numbers its parameters from ?1 without gaps, which sqlx's
        // multi-statement binding needs: see `append_statements`.)
        sqlx::query(
            "UPDATE commands SET applied_at = ?3 \
             WHERE run_id = ?1 AND applied_at IS NULL \
               AND id IN (SELECT value FROM json_each(?2)); \
             UPDATE runs SET commands_pending = EXISTS ( \
                 SELECT 1 FROM commands WHERE run_id = ?1 AND applied_at IS NULL) \
             WHERE id = ?1",
        )
        .bind(&id)
        .bind(ids)
        .bind(p.updated_at.0)
        .execute(&mut *conn)
        .await
        .map_err(classify)?;
    }
    Ok(last)
}

async fn renew(
    conn: &mut SqliteConnection,
    owner: &str,
    until: Timestamp,
) -> Result<Vec<RunId>, StoreError> {
    let ids: Vec<String> = sqlx::query_scalar(
        "UPDATE runs SET lease_expires_at = ?2 WHERE lease_owner = ?1 RETURNING id",
    )
    .bind(owner)
    .bind(until.0)
    .fetch_all(&mut *conn)
    .await
    .map_err(classify)?;
    ids.iter().map(|s| parse_id(s)).collect()
}

async fn release(
    conn: &mut SqliteConnection,
    lease: &Lease,
    wake_at: Option<Timestamp>,
) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, wake_at = ?4 \
         WHERE id = ?1 AND lease_owner = ?2 AND lease_epoch = ?3",
    )
    .bind(id_text(lease.run_id))
    .bind(&lease.owner)
    .bind(lease.epoch)
    .bind(wake_at.map(|t| t.0))
    .execute(&mut *conn)
    .await
    .map_err(classify)?;
    if done.rows_affected() == 0 {
        return Err(fenced_or_missing(conn, lease).await);
    }
    Ok(())
}

async fn submit_command(
    conn: &mut SqliteConnection,
    run: RunId,
    cmd: &NewCommand,
) -> Result<i64, StoreError> {
    // Flag and insert in one round trip; the INSERT selects from the run row so a missing
    // run inserts nothing (and the UPDATE before it touched nothing either). Both
    // statements number their parameters from ?1 without gaps (see `append_statements`).
    let ids: Vec<i64> = sqlx::query_scalar(
        "UPDATE runs SET commands_pending = 1 WHERE id = ?1; \
         INSERT INTO commands (run_id, command, requested_by, reason, requested_at) \
         SELECT id, ?2, ?3, ?4, ?5 FROM runs WHERE id = ?1 \
         RETURNING id",
    )
    .bind(id_text(run))
    .bind(&cmd.command)
    .bind(&cmd.requested_by)
    .bind(&cmd.reason)
    .bind(cmd.requested_at.0)
    .fetch_all(&mut *conn)
    .await
    .map_err(classify)?;
    ids.first().copied().ok_or(StoreError::NotFound(run))
}

async fn record_report(conn: &mut SqliteConnection, r: &NewReport) -> Result<i64, StoreError> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO reports (kind, subject, at, ok, made_by, data) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
    )
    .bind(&r.kind)
    .bind(&r.subject)
    .bind(r.at.0)
    .bind(r.ok)
    .bind(&r.by)
    .bind(&r.data)
    .fetch_one(&mut *conn)
    .await
    .map_err(classify)?;
    if r.keep > 0 {
        // Everything of this subject older than its `keep`-th newest report.
        sqlx::query(
            "DELETE FROM reports WHERE kind = ?1 AND subject = ?2 AND id < \
             (SELECT id FROM reports WHERE kind = ?1 AND subject = ?2 \
              ORDER BY id DESC LIMIT 1 OFFSET ?3)",
        )
        .bind(&r.kind)
        .bind(&r.subject)
        .bind(i64::try_from(r.keep - 1).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await
        .map_err(classify)?;
    }
    Ok(id)
}

async fn take_tokens(
    conn: &mut SqliteConnection,
    key: &str,
    want: u32,
    capacity: f64,
    per_second: f64,
    now: Timestamp,
) -> Result<TokenGrant, StoreError> {
    // Refill to `now` (never backwards), take whole tokens up to `want`, keep the grant.
    let row: (f64, i64) = sqlx::query_as(
        "INSERT INTO token_buckets (key, tokens, at, granted) \
         VALUES (?1, ?3 - min(?2, CAST(?3 AS INTEGER)), ?5, min(?2, CAST(?3 AS INTEGER))) \
         ON CONFLICT (key) DO UPDATE SET \
             granted = min(?2, CAST(min(?3, tokens + max(0, ?5 - at) / 1000.0 * ?4) AS INTEGER)), \
             tokens = min(?3, tokens + max(0, ?5 - at) / 1000.0 * ?4) \
                 - min(?2, CAST(min(?3, tokens + max(0, ?5 - at) / 1000.0 * ?4) AS INTEGER)), \
             at = max(at, ?5) \
         RETURNING tokens, granted",
    )
    .bind(key)
    .bind(i64::from(want))
    .bind(capacity)
    .bind(per_second)
    .bind(now.0)
    .fetch_one(&mut *conn)
    .await
    .map_err(classify)?;
    Ok(TokenGrant {
        granted: u32::try_from(row.1.max(0)).unwrap_or(0),
        left: row.0,
        per_second,
    })
}

async fn claim_schedule(
    conn: &mut SqliteConnection,
    key: &str,
    by: &str,
    now: Timestamp,
    next: Timestamp,
) -> Result<bool, StoreError> {
    // Inside the writer's IMMEDIATE transaction: no other process writes between the check
    // and the update (the WHERE of the upsert is the check).
    let claimed: Option<String> = sqlx::query_scalar(
        "INSERT INTO schedules (key, next_at, claimed_by, claimed_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (key) DO UPDATE SET next_at = excluded.next_at, \
             claimed_by = excluded.claimed_by, claimed_at = excluded.claimed_at \
         WHERE schedules.next_at <= ?4 \
         RETURNING key",
    )
    .bind(key)
    .bind(next.0)
    .bind(by)
    .bind(now.0)
    .fetch_optional(&mut *conn)
    .await
    .map_err(classify)?;
    Ok(claimed.is_some())
}

async fn release_all_leases(conn: &mut SqliteConnection) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner IS NOT NULL",
    )
    .execute(&mut *conn)
    .await
    .map_err(classify)?;
    Ok(done.rows_affected())
}

async fn settings(conn: &mut SqliteConnection) -> Result<SqliteSettings, StoreError> {
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await
        .map_err(classify)?;
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await
        .map_err(classify)?;
    let foreign_keys: bool = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(&mut *conn)
        .await
        .map_err(classify)?;
    let busy_timeout_ms: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(&mut *conn)
        .await
        .map_err(classify)?;
    let synchronous = match synchronous {
        0 => "OFF",
        1 => "NORMAL",
        2 => "FULL",
        3 => "EXTRA",
        _ => "UNKNOWN",
    };
    Ok(SqliteSettings {
        journal_mode,
        synchronous: synchronous.to_string(),
        foreign_keys,
        busy_timeout_ms,
    })
}

/// After a fenced statement matched no row: was the lease lost, or is there no such run?
async fn fenced_or_missing(conn: &mut SqliteConnection, lease: &Lease) -> StoreError {
    let exists = sqlx::query_scalar::<_, i64>("SELECT 1 FROM runs WHERE id = ?1")
        .bind(id_text(lease.run_id))
        .fetch_optional(&mut *conn)
        .await;
    match exists {
        Ok(Some(_)) => StoreError::Fenced {
            run: lease.run_id,
            epoch: lease.epoch,
        },
        Ok(None) => StoreError::NotFound(lease.run_id),
        Err(e) => classify(e),
    }
}

/// Keep `RunState` in sync with the schema's CHECK constraint (a new state needs a
/// migration).
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use hcp_runtime::RunState;

    #[test]
    fn schema_knows_every_state() {
        let schema = include_str!("../../migrations/sqlite/0001_journal.sql");
        for s in RunState::ALL {
            assert!(schema.contains(&format!("'{}'", s.as_str())), "{s}");
        }
        let terminal: Vec<_> = RunState::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        assert!(active!().contains(&terminal.join(", ")));
        assert!(schema.contains(active!()));
    }

    async fn plan(sql: &str, args: usize) -> String {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.db");
        let _store = super::super::SqliteStore::open(&path).await.unwrap();
        let mut conn = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        let mut q = sqlx::query(&explain);
        for _ in 0..args {
            q = q.bind(1_i64);
        }
        let rows = q.fetch_all(&mut conn).await.unwrap();
        rows.iter()
            .map(|r| r.get::<String, _>(3))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A grouped append looks every member's run up by key: none of its statements scans
    /// the runs or events tables (a journal holds many more runs than one batch touches).
    #[tokio::test]
    async fn group_append_looks_runs_up_by_key() {
        for stmt in GROUP_SQL.split("; ") {
            let p = plan(stmt, 1).await;
            assert!(p.contains("sqlite_autoindex_runs_1 (id=?)"), "{stmt}\n{p}");
            assert!(
                !p.lines()
                    .any(|l| l.trim_end() == "SCAN runs" || l.trim_end() == "SCAN events"),
                "{stmt}\n{p}"
            );
        }
    }

    /// `acquire` must not scan the runs table: with 10,000 finished runs it would read them
    /// all on every poll. Each UNION branch is a range scan of its partial index.
    #[tokio::test]
    async fn acquire_uses_the_partial_indexes() {
        let p = plan(ACQUIRE, 4).await;
        assert!(p.contains("USING INDEX runs_due (wake_at<?)"), "{p}");
        assert!(p.contains("USING INDEX runs_commands_pending"), "{p}");
        assert!(!p.lines().any(|l| l.trim_end() == "SCAN runs"), "{p}");
        let p = plan(ACQUIRE_ONE, 4).await;
        assert!(
            p.contains("USING INTEGER PRIMARY KEY") || p.contains("sqlite_autoindex_runs_1"),
            "{p}"
        );
    }

    #[test]
    fn append_sql_repeats_the_fence() {
        let zero = append_sql(0);
        assert!(zero.starts_with("UPDATE runs SET state = ?"), "{zero}");
        assert!(zero.ends_with("RETURNING id, last_seq"), "{zero}");
        let two = append_sql(2);
        assert!(two.starts_with("INSERT INTO events"), "{two}");
        assert!(two.ends_with(zero), "{two}");
        assert!(
            two.contains("(VALUES (1, ?, ?, ?, ?), (2, ?, ?, ?, ?))"),
            "{two}"
        );
        assert!(
            two.contains(
                "WHERE runs.id = ? AND runs.lease_owner = ? AND runs.lease_epoch = ? \
                 AND runs.last_seq = coalesce(?, runs.last_seq); UPDATE"
            ),
            "{two}"
        );
        // The writer's numbering fences the UPDATE too.
        assert!(
            zero.contains("AND last_seq = coalesce(?, last_seq)"),
            "{zero}"
        );
        assert_eq!(append_sql(1000), append_sql(EVENTS_PER_INSERT));
    }

    #[test]
    fn insert_sql_numbers_parameters() {
        assert_eq!(
            insert_events_sql(2),
            "INSERT INTO events (run_id, seq, kind, node, data, at) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6), (?1, ?7, ?8, ?9, ?10, ?11)"
        );
    }
}

/// Every member of a group is bound and written (a parameter-numbering mistake once left
/// the third member's fence unbound, so it read as fenced).
#[cfg(test)]
mod group_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use hcp_runtime::JournalStore;
    use hcp_runtime::RunState;
    use hcp_runtime::store::{NewEvent, RunPatch};
    use sqlx::Connection;

    #[tokio::test]
    async fn every_member_of_a_group_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let store = super::super::SqliteStore::open(&path).await.unwrap();
        for _ in 0..40 {
            store
                .create_run(NewRun {
                    id: uuid::Uuid::new_v4(),
                    workflow: "w".into(),
                    workflow_version: 1,
                    labels: Default::default(),
                    idempotency_key: None,
                    exclusive_key: None,
                    target: None,
                    dag: "{}".into(),
                    created_at: Timestamp(0),
                })
                .await
                .unwrap();
        }
        let leases = store
            .acquire(
                "w",
                Timestamp(0),
                std::time::Duration::from_secs(60),
                100,
                None,
            )
            .await
            .unwrap();
        drop(store);
        let mut conn = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let ops: Vec<WriteOp> = leases
            .iter()
            .map(|l| WriteOp::Append {
                lease: l.clone(),
                append: Append {
                    events: vec![
                        NewEvent {
                            kind: "a".into(),
                            node: None,
                            data: "{}".into(),
                            at: Timestamp(0),
                        },
                        NewEvent {
                            kind: "b".into(),
                            node: None,
                            data: "{}".into(),
                            at: Timestamp(0),
                        },
                    ],
                    patch: RunPatch {
                        state: RunState::Running,
                        blocked_on: "x".into(),
                        current_step: None,
                        wake_at: None,
                        updated_at: Timestamp(0),
                    },
                    applied_commands: vec![],
                    after_seq: None,
                    summary_kept: false,
                },
            })
            .collect();
        let refs: Vec<&WriteOp> = ops.iter().collect();
        assert_eq!(refs.len(), 40);
        let out = append_group(&mut conn, &refs).await.unwrap();
        assert!(
            out.iter().all(|r| matches!(r, Ok(WriteOk::Seq(2)))),
            "{out:?}"
        );
        let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(events, 80);
    }
}
