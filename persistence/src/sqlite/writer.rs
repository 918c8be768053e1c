//! The SQLite writer task: every write of a [`super::SqliteStore`], group committed.
//!
//! With `synchronous=FULL` each commit is an fsync (0.2–0.5 ms on the disks we run on), so a
//! transaction per call would cap the executor at a few thousand writes per second no matter
//! how many runs are in flight. Instead one task owns the only writing connection; callers
//! send it a [`WriteOp`] and wait on a oneshot. The task takes everything queued (up to
//! [`MAX_BATCH`]), runs it in **one** `BEGIN IMMEDIATE` transaction, commits once and
//! answers everyone. While that fsync is in flight the next batch queues up, so the batch
//! size adapts to the load by itself: one request when idle (lowest latency), hundreds when
//! a thousand runs are stepping.
//!
//! What a request costs is mostly the round trip to the thread sqlx runs SQLite on, so a
//! batch is first run the cheap way ([`optimistic`]): no savepoints, and small appends sent
//! [`ops::GROUP`] at a time in one multi-statement query. The failures the executor expects
//! (a fenced write, a missing run) write nothing by construction, so they need no rollback.
//! Only an unexpected failure (a constraint, I/O) rolls the batch back and reruns it
//! [`with_savepoints`], one savepoint per request, so that request fails alone.
//!
//! # Guarantees
//! - A reply of `Ok` is sent only after the batch's `COMMIT` returned (durability).
//! - A request that fails gets its own error and leaves no trace; the others in the batch
//!   commit.
//! - If `BEGIN`, a savepoint or `COMMIT` fails, every request of the batch gets that error
//!   (classified once, shared) and nothing of the batch is kept; the connection is then
//!   replaced, so a wedged transaction cannot poison later batches.
//! - Requests whose caller has gone away (its future was dropped) before the batch started
//!   are skipped.
//! - Requests are applied in the order they were sent, except that small appends of
//!   *different* runs within one batch may be reordered among themselves (all were in
//!   flight at once, so no caller can tell).

use super::lock::WriteIntent;
use super::ops::{self, WriteOk, WriteOp};
use crate::error::Shared;
use hcp_runtime::StoreError;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// Most requests per transaction. Large enough that the fsync is amortised to nothing (at
/// ~30 µs of SQL per append, 512 requests are ~15 ms of work per commit), small enough that
/// one transaction never holds the write lock long enough to starve operators in other
/// processes waiting on `busy_timeout`.
pub(crate) const MAX_BATCH: usize = 512;

/// Queue depth before callers wait: back-pressure instead of unbounded memory.
const QUEUE: usize = 4 * MAX_BATCH;

/// One write and where to send its result.
#[derive(Debug)]
struct WriteRequest {
    op: WriteOp,
    reply: oneshot::Sender<Result<WriteOk, StoreError>>,
}

/// Counters of the writer task (see [`WriterStats`]).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    transactions: AtomicU64,
    requests: AtomicU64,
    failed_transactions: AtomicU64,
    redone_with_savepoints: AtomicU64,
}

/// What the writer task has done so far: how well group commit is batching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Transactions attempted (each committed one is one fsync).
    pub transactions: u64,
    /// Write requests run in them.
    pub requests: u64,
    /// Transactions that failed as a whole (every request in them got the error).
    pub failed_transactions: u64,
    /// Batches rolled back and redone with a savepoint per request because a request failed
    /// unexpectedly (counted once more in `transactions`).
    pub redone_with_savepoints: u64,
}

/// The callers' end of the writer task. Dropping every handle stops the task once it has
/// finished what is queued.
#[derive(Debug, Clone)]
pub(crate) struct WriterHandle {
    tx: mpsc::Sender<WriteRequest>,
    /// Lease bookkeeping (see [`urgent`]): served before anything in `tx`.
    urgent_tx: mpsc::Sender<WriteRequest>,
    counters: Arc<Counters>,
}

impl WriterHandle {
    /// Start the writer task on `conn` (already migrated). `executor` tells it whether
    /// this store holds the executor lock (it then yields to other stores' announced
    /// writes instead of announcing its own); `intent` is the journal's write-intent lock
    /// (`None` if it could not be opened: no fairness, same correctness).
    pub(crate) fn spawn(
        conn: SqliteConnection,
        options: SqliteConnectOptions,
        wake: Arc<watch::Sender<u64>>,
        executor: Arc<AtomicBool>,
        intent: Option<WriteIntent>,
        patience: Duration,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (urgent_tx, urgent_rx) = mpsc::channel(QUEUE);
        let counters = Arc::new(Counters::default());
        let writer = Writer {
            conn: Some(conn),
            options,
            rx,
            urgent_rx,
            wake,
            counters: Arc::clone(&counters),
            executor,
            intent,
            patience,
        };
        tokio::spawn(writer.run());
        Self {
            tx,
            urgent_tx,
            counters,
        }
    }

    pub(crate) fn stats(&self) -> WriterStats {
        WriterStats {
            transactions: self.counters.transactions.load(Ordering::Relaxed),
            requests: self.counters.requests.load(Ordering::Relaxed),
            failed_transactions: self.counters.failed_transactions.load(Ordering::Relaxed),
            redone_with_savepoints: self.counters.redone_with_savepoints.load(Ordering::Relaxed),
        }
    }

    /// Run `op` in the next group commit.
    ///
    /// # Errors
    /// The op's own error, the batch's error, or [`StoreError::Permanent`] if the writer
    /// task is gone (it only stops when the store is dropped, or if it panicked).
    pub(crate) async fn call(&self, op: WriteOp) -> Result<WriteOk, StoreError> {
        let (reply, rx) = oneshot::channel();
        let queue = if urgent(&op) {
            &self.urgent_tx
        } else {
            &self.tx
        };
        queue
            .send(WriteRequest { op, reply })
            .await
            .map_err(|_| StoreError::permanent("the SQLite journal writer task has stopped"))?;
        rx.await.map_err(|_| {
            StoreError::permanent("the SQLite journal writer task stopped before answering")
        })?
    }
}

struct Writer {
    /// `None` after a batch-level failure: reconnect before the next batch.
    conn: Option<SqliteConnection>,
    options: SqliteConnectOptions,
    rx: mpsc::Receiver<WriteRequest>,
    urgent_rx: mpsc::Receiver<WriteRequest>,
    wake: Arc<watch::Sender<u64>>,
    counters: Arc<Counters>,
    executor: Arc<AtomicBool>,
    intent: Option<WriteIntent>,
    /// Bound on waiting for the write-intent lock (the busy timeout).
    patience: Duration,
}

impl Writer {
    async fn run(mut self) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        loop {
            // Lease bookkeeping first, then whatever else fits in the batch.
            let first = tokio::select! {
                biased;
                Some(r) = self.urgent_rx.recv() => Some(r),
                r = self.rx.recv() => r,
            };
            // `None`: every handle is gone and the queue is empty.
            let Some(first) = first else { break };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                let Ok(r) = self.urgent_rx.try_recv() else {
                    break;
                };
                batch.push(r);
            }
            while batch.len() < MAX_BATCH {
                let Ok(r) = self.rx.try_recv() else { break };
                batch.push(r);
            }
            batch.retain(|r: &WriteRequest| !r.reply.is_closed());
            if !batch.is_empty() {
                self.commit_batch(&mut batch).await;
            }
            batch.clear();
        }
        if let Some(conn) = self.conn.take()
            && let Err(e) = conn.close().await
        {
            tracing::debug!(error = %e, "closing the SQLite journal writer connection");
        }
    }

    async fn commit_batch(&mut self, batch: &mut Vec<WriteRequest>) {
        self.counters.transactions.fetch_add(1, Ordering::Relaxed);
        self.counters
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let conn = match &mut self.conn {
            Some(c) => c,
            None => match self.options.connect().await {
                Ok(c) => self.conn.insert(c),
                Err(e) => {
                    self.counters
                        .failed_transactions
                        .fetch_add(1, Ordering::Relaxed);
                    let e = Shared::new(e);
                    for r in batch.drain(..) {
                        let _ = r.reply.send(Err(e.to_store_error()));
                    }
                    return;
                }
            },
        };
        // Take turns with writers in other stores (see `lock`): the executor lets an
        // announced operator write go first; everyone else announces theirs.
        let _turn = match &self.intent {
            Some(i) if self.executor.load(Ordering::Relaxed) => {
                i.yield_to_others().await;
                None
            }
            Some(i) => i.announce(self.patience).await,
            None => None,
        };
        match run_batch(conn, batch, &self.counters).await {
            Ok((results, keep_conn)) => {
                if !keep_conn {
                    self.conn = None;
                }
                let wake = results.iter().any(|r| {
                    matches!(
                        r,
                        Ok(
                            WriteOk::Created(hcp_runtime::store::CreateOutcome::Created(_))
                                | WriteOk::CommandId(_)
                        )
                    )
                });
                if wake {
                    self.wake.send_modify(|v| *v = v.wrapping_add(1));
                }
                for (r, res) in batch.drain(..).zip(results) {
                    // The caller may have given up meanwhile; its write stands regardless.
                    let _ = r.reply.send(res);
                }
            }
            Err(e) => {
                self.counters
                    .failed_transactions
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    error = %e.to_store_error(),
                    requests = batch.len(),
                    "SQLite journal group commit failed; reconnecting"
                );
                self.conn = None;
                for r in batch.drain(..) {
                    let _ = r.reply.send(Err(e.to_store_error()));
                }
            }
        }
    }
}

/// Whether `op` jumps the queue. Leasing, renewing and reclaiming leases are a handful of
/// statements that decide whether a worker may go on at all: a renewal stuck behind
/// thousands of queued appends lets leases lapse, and an acquire stuck there keeps a
/// worker that is taking over thousands of runs from starting the rest. Nothing else is
/// reordered by this, and none of these depends on an append queued before it.
fn urgent(op: &WriteOp) -> bool {
    matches!(
        op,
        WriteOp::Acquire { .. } | WriteOp::Renew { .. } | WriteOp::ReleaseAllLeases
    )
}

type Results = Vec<Result<WriteOk, StoreError>>;

/// One transaction for the whole batch. `Ok((results, keep_conn))`: committed (or, for a
/// lone failed request, rolled back); `Err`: nothing of the batch was kept.
async fn run_batch(
    conn: &mut SqliteConnection,
    batch: &[WriteRequest],
    counters: &Counters,
) -> Result<(Results, bool), Shared> {
    if let [only] = batch {
        exec(conn, "BEGIN IMMEDIATE").await?;
        // A batch of one needs no savepoint: on failure the whole transaction goes.
        let res = ops::apply(conn, &only.op).await;
        let keep = if res.is_ok() {
            if let Err(e) = exec(conn, "COMMIT").await {
                return Err(abort(conn, e).await);
            }
            true
        } else {
            exec(conn, "ROLLBACK").await.is_ok()
        };
        return Ok((vec![res], keep));
    }
    match optimistic(conn, batch).await? {
        Some(results) => Ok((results, true)),
        None => {
            counters.transactions.fetch_add(1, Ordering::Relaxed);
            counters
                .redone_with_savepoints
                .fetch_add(1, Ordering::Relaxed);
            with_savepoints(conn, batch).await
        }
    }
}

/// The common case: the batch without savepoints, small appends grouped. The expected
/// failures (a fenced write, a missing run) write nothing by construction
/// ([`ops::fails_cleanly`]), so they need no rollback. Any other failure may have left part
/// of its request written: then everything is rolled back and `Ok(None)` asks for the
/// batch to be redone [`with_savepoints`] (nothing of this attempt is kept, so running the
/// requests again is safe).
///
/// Small appends (the executor's bread and butter) of the same size are sent to SQLite
/// [`ops::GROUP`] at a time in one multi-statement query, since the round trip to SQLite's
/// thread, not SQLite itself, is what an append costs. This reorders appends of *different*
/// runs within the batch, which is harmless: they were all in flight at once, so no caller
/// can have observed an order. Requests of the same run, and everything around a request
/// that is not a small append, keep their order.
async fn optimistic(
    conn: &mut SqliteConnection,
    batch: &[WriteRequest],
) -> Result<Option<Results>, Shared> {
    exec(conn, "BEGIN IMMEDIATE").await?;
    let mut results: Vec<Option<Result<WriteOk, StoreError>>> =
        std::iter::repeat_with(|| None).take(batch.len()).collect();
    let mut groups = Groups::default();
    for (i, req) in batch.iter().enumerate() {
        if let Some(run) = ops::groupable(&req.op) {
            if groups.runs.contains(&run) && !groups.flush_all(conn, batch, &mut results).await {
                exec(conn, "ROLLBACK").await?;
                return Ok(None);
            }
            groups.runs.insert(run);
            groups.waiting.push(i);
            if groups.waiting.len() == ops::GROUP
                && !groups.flush_all(conn, batch, &mut results).await
            {
                exec(conn, "ROLLBACK").await?;
                return Ok(None);
            }
            continue;
        }
        let ok = groups.flush_all(conn, batch, &mut results).await && {
            let res = ops::apply(conn, &req.op).await;
            let clean = res.as_ref().err().is_none_or(ops::fails_cleanly);
            results[i] = Some(res);
            clean
        };
        if !ok {
            exec(conn, "ROLLBACK").await?;
            return Ok(None);
        }
    }
    if !groups.flush_all(conn, batch, &mut results).await {
        exec(conn, "ROLLBACK").await?;
        return Ok(None);
    }
    if let Err(e) = exec(conn, "COMMIT").await {
        return Err(abort(conn, e).await);
    }
    Ok(Some(
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(StoreError::permanent("internal: request skipped"))))
            .collect(),
    ))
}

/// Appends waiting to be sent (indexes into the batch).
#[derive(Default)]
struct Groups {
    waiting: Vec<usize>,
    /// Runs with an append waiting, so a second one for the same run goes after it.
    runs: std::collections::HashSet<hcp_runtime::RunId>,
}

impl Groups {
    /// Send every waiting append. `false`: a failure that needs the batch rolled back.
    async fn flush_all(
        &mut self,
        conn: &mut SqliteConnection,
        batch: &[WriteRequest],
        results: &mut [Option<Result<WriteOk, StoreError>>],
    ) -> bool {
        let idx = std::mem::take(&mut self.waiting);
        self.runs.clear();
        if idx.is_empty() {
            return true;
        }
        let ops: Vec<&WriteOp> = idx.iter().map(|&i| &batch[i].op).collect();
        match ops::append_group(conn, &ops).await {
            Ok(out) => {
                let mut clean = true;
                for (i, res) in idx.into_iter().zip(out) {
                    clean &= res.as_ref().err().is_none_or(ops::fails_cleanly);
                    results[i] = Some(res);
                }
                clean
            }
            Err(_) => false,
        }
    }
}

/// Each request in its own savepoint, so a failing one is rolled back alone. One savepoint,
/// reused: a failed request rolls back to it (which keeps it open for the next one), a
/// successful one is released into the transaction and a new one taken, in one round trip.
/// COMMIT releases whatever savepoint is still open.
async fn with_savepoints(
    conn: &mut SqliteConnection,
    batch: &[WriteRequest],
) -> Result<(Results, bool), Shared> {
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE; SAVEPOINT request").await {
        return Err(abort(conn, e).await);
    }
    let mut results = Vec::with_capacity(batch.len());
    for (i, req) in batch.iter().enumerate() {
        let res = ops::apply(conn, &req.op).await;
        let last = i + 1 == batch.len();
        let next = match (res.is_ok(), last) {
            (true, false) => "RELEASE request; SAVEPOINT request",
            (false, false) => "ROLLBACK TO request",
            (true, true) => "COMMIT",
            (false, true) => "ROLLBACK TO request; COMMIT",
        };
        if let Err(e) = exec(conn, next).await {
            return Err(abort(conn, e).await);
        }
        results.push(res);
    }
    Ok((results, true))
}

async fn exec(conn: &mut SqliteConnection, sql: &'static str) -> Result<(), Shared> {
    sqlx::query(sql)
        .execute(&mut *conn)
        .await
        .map(drop)
        .map_err(Shared::new)
}

/// Roll the batch back after `err`; the caller drops the connection either way.
async fn abort(conn: &mut SqliteConnection, err: Shared) -> Shared {
    if let Err(e) = exec(conn, "ROLLBACK").await {
        tracing::debug!(error = %e.to_store_error(), "rollback after a failed group commit");
    }
    err
}
