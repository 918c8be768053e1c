//! Group commit for Postgres: the appends and releases of many runs in one transaction.
//!
//! Every step of every run ends in one journal append. One transaction per append means one
//! WAL flush and one pooled connection per step, so a worker that takes over thousands of
//! runs at once queues them all on its ten connections, and its own lease renewals wait
//! behind them until leases lapse. Instead, [`Batcher::WRITERS`] tasks each take whatever
//! is queued (up to [`MAX_BATCH`]) and write it in **one** transaction:
//!
//! 1. lock the batch's run rows in id order (`SELECT … ORDER BY id FOR UPDATE`), so two
//!    batches, or a batch and a renewal, can never wait on each other in a cycle;
//! 2. one statement fences, patches and allocates seqs for every append (`UPDATE … FROM
//!    unnest(…)`) and inserts all their events;
//! 3. one statement releases every lease given back;
//! 4. commit, then answer each caller: rows the fence did not match are `Fenced` (the row
//!    was locked in step 1, so it exists) or `NotFound` (it was not).
//!
//! While one batch commits the next queues up, so batches grow with the load by
//! themselves: a lone request is written on its own, with the single-statement path (no
//! explicit transaction, one round trip), on the caller's own task when nothing else is
//! queued or being written, over a connection kept for lone requests (`Batcher::lone`): the pool
//! answers every statement with a second round trip on release (sqlx 0.8 pings each
//! connection given back), and hands out another backend each time.
//!
//! # Guarantees
//! - A caller hears `Ok` only after its batch committed.
//! - A request fails alone: if a batch transaction fails, nothing of it is kept and every
//!   request in it is redone on its own.
//! - One run appears at most once per batch (a later request of the same run waits for
//!   the next batch), so the `UPDATE … FROM` never matches a row twice.
//! - Requests whose caller has gone away are skipped.

use crate::error::classify;
use hcp_runtime::StoreError;
use hcp_runtime::store::{Append, Lease, RunId};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Connection as _, Postgres, Row};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, mpsc, oneshot};

/// Most requests per transaction: big enough to amortise the commit to nothing, small
/// enough that one statement's arrays stay a few hundred kilobytes.
pub(crate) const MAX_BATCH: usize = 256;

/// Queue depth before callers wait (back-pressure instead of unbounded memory).
const QUEUE: usize = 8 * MAX_BATCH;

/// One batched write.
#[derive(Debug)]
pub(crate) enum Op {
    /// [`hcp_runtime::store::JournalStore::append`] without command acknowledgements.
    Append(Lease, Append),
    /// [`hcp_runtime::store::JournalStore::release`].
    Release(Lease, Option<i64>),
}

impl Op {
    fn lease(&self) -> &Lease {
        match self {
            Self::Append(l, _) | Self::Release(l, _) => l,
        }
    }
}

struct Request {
    op: Op,
    /// `Ok(last seq)` for an append, `Ok(0)` for a release.
    reply: oneshot::Sender<Result<i64, StoreError>>,
    /// Busy until answered (or dropped).
    _busy: Busy,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

/// The callers' end. Dropping it stops the tasks once the queue is drained.
#[derive(Debug, Clone)]
pub(crate) struct Batcher {
    tx: mpsc::Sender<Request>,
    pool: PgPool,
    /// Requests queued or being written (by a writer task or by a caller itself).
    busy: Arc<AtomicUsize>,
    /// The connection lone requests are written on, and when it was last used.
    ///
    /// A pooled connection costs a Postgres step a second round trip: sqlx 0.8 pings every
    /// connection given back to its pool (`Sync` → `ReadyForQuery`, on the server while the
    /// next step's statement waits for a CPU), and the next statement goes to whichever
    /// backend is idle, often one asleep. One connection, used by one lone request at a time
    /// (the `busy` count admits one), keeps the step at one round trip to one warm backend.
    /// It is dropped after any error (the next lone request connects afresh: a statement that
    /// failed on it is never retried here, so an append is never sent twice by this path) and
    /// after [`LONE_IDLE`] unused (a server or pooler may have closed it meanwhile).
    lone: Arc<Mutex<Option<(PgConnection, Instant)>>>,
}

/// How long the lone connection may sit unused before it is replaced rather than used.
const LONE_IDLE: Duration = Duration::from_secs(60);

/// Counts a request as busy until dropped (a caller that goes away mid-write included).
struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Batcher {
    /// Writer tasks (and so connections used for batches): two, so one batch's SQL runs
    /// while the other's commit is being flushed.
    pub(crate) const WRITERS: usize = 2;

    pub(crate) fn spawn(pool: PgPool) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..Self::WRITERS {
            let w = Writer {
                pool: pool.clone(),
                rx: Arc::clone(&rx),
                held: Vec::new(),
            };
            tokio::spawn(w.run());
        }
        Self {
            tx,
            pool,
            busy: Arc::new(AtomicUsize::new(0)),
            lone: Arc::new(Mutex::new(None)),
        }
    }

    /// `op` on the lone connection (connected first when there is none or it sat idle).
    async fn lone(&self, op: &Op) -> Result<i64, StoreError> {
        let mut guard = self.lone.lock().await;
        let kept = guard.take().and_then(|(c, used)| {
            if used.elapsed() < LONE_IDLE {
                return Some(c);
            }
            // Closed quietly in the background: nothing of ours is pending on it.
            tokio::spawn(async move {
                let _ = c.close().await;
            });
            None
        });
        let mut conn = match kept {
            Some(c) => c,
            None => PgConnection::connect_with(&self.pool.connect_options())
                .await
                .map_err(classify)?,
        };
        let out = one_on(&mut conn, &self.pool, op).await;
        if out.is_ok()
            || matches!(
                out,
                Err(StoreError::Fenced { .. } | StoreError::NotFound(_))
            )
        {
            *guard = Some((conn, Instant::now()));
        }
        out
    }

    pub(crate) async fn call(&self, op: Op) -> Result<i64, StoreError> {
        let busy = Busy(Arc::clone(&self.busy));
        if self.busy.fetch_add(1, Ordering::SeqCst) == 0 {
            // Nothing else queued or being written: a lone request is written on this very
            // task, the single-statement path a writer would take for a batch of one,
            // without the two hops to a writer task and back (a step at the
            // floor). Requests arriving meanwhile queue for the writers as before.
            let out = self.lone(&op).await;
            drop(busy);
            return out;
        }
        let (reply, rx) = oneshot::channel();
        let request = Request {
            op,
            reply,
            _busy: busy,
        };
        self.tx
            .send(request)
            .await
            .map_err(|_| StoreError::transient("journal batch writer stopped"))?;
        rx.await
            .map_err(|_| StoreError::transient("journal batch writer dropped the request"))?
    }
}

struct Writer {
    pool: PgPool,
    rx: Arc<Mutex<mpsc::Receiver<Request>>>,
    /// Requests held back because their run was already in the batch.
    held: Vec<Request>,
}

impl Writer {
    async fn run(mut self) {
        loop {
            let mut batch: Vec<Request> = Vec::new();
            let mut runs: HashSet<RunId> = HashSet::new();
            for r in std::mem::take(&mut self.held) {
                self.admit(r, &mut batch, &mut runs);
            }
            let queue = Arc::clone(&self.rx);
            if batch.is_empty() {
                // Nothing held back: wait for work (the other writer waits for the lock).
                let mut rx = queue.lock().await;
                let Some(r) = rx.recv().await else { return };
                self.admit(r, &mut batch, &mut runs);
                self.fill(&mut rx, &mut batch, &mut runs);
            } else if let Ok(mut rx) = queue.try_lock() {
                // Requests held back are ready now: never wait for the lock with them (the
                // other writer may be holding it while it waits for new requests).
                self.fill(&mut rx, &mut batch, &mut runs);
            }
            batch.retain(|r| !r.reply.is_closed());
            match batch.len() {
                0 => {}
                1 => {
                    if let Some(r) = batch.pop() {
                        let out = one(&self.pool, &r.op).await;
                        let _ = r.reply.send(out);
                    }
                }
                _ => self.commit(batch).await,
            }
        }
    }

    /// Add whatever is queued, up to [`MAX_BATCH`]; a second request of a run already in
    /// the batch is held back for the next one.
    fn fill(
        &mut self,
        rx: &mut mpsc::Receiver<Request>,
        batch: &mut Vec<Request>,
        runs: &mut HashSet<RunId>,
    ) {
        while batch.len() < MAX_BATCH {
            let Ok(r) = rx.try_recv() else { break };
            self.admit(r, batch, runs);
        }
    }

    /// Put `r` in the batch, or hold it back for the next one (batch full, or its run is
    /// already in it).
    fn admit(&mut self, r: Request, batch: &mut Vec<Request>, runs: &mut HashSet<RunId>) {
        if batch.len() < MAX_BATCH && runs.insert(r.op.lease().run_id) {
            batch.push(r);
        } else {
            self.held.push(r);
        }
    }

    async fn commit(&self, batch: Vec<Request>) {
        match many(&self.pool, &batch).await {
            Ok(mut results) => {
                for r in batch {
                    let out = results
                        .remove(&r.op.lease().run_id)
                        .unwrap_or_else(|| Err(StoreError::transient("no result for the run")));
                    let _ = r.reply.send(out);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, n = batch.len(), "journal batch failed; redoing each request alone");
                for r in batch {
                    let out = one(&self.pool, &r.op).await;
                    let _ = r.reply.send(out);
                }
            }
        }
    }
}

/// One request on its own (one statement, autocommit).
async fn one(pool: &PgPool, op: &Op) -> Result<i64, StoreError> {
    let mut conn = pool.acquire().await.map_err(classify)?;
    one_on(&mut conn, pool, op).await
}

/// [`one`] on `conn`; `pool` only to tell a fenced lease from a missing run.
async fn one_on(conn: &mut PgConnection, pool: &PgPool, op: &Op) -> Result<i64, StoreError> {
    match op {
        Op::Append(lease, append) => {
            let refused = |e| super::append_error(e, lease);
            if let Some(after) = super::insert_only(append) {
                let n = append.events.len();
                let done = super::append_insert_only(lease, append, after)
                    .execute(&mut *conn)
                    .await
                    .map_err(refused)?;
                if done.rows_affected() == 0 {
                    return Err(super::fenced_or_missing(pool, lease).await);
                }
                return Ok(after + i64::try_from(n).unwrap_or(i64::MAX));
            }
            let last = super::append_statement(lease, append)
                .fetch_optional(&mut *conn)
                .await
                .map_err(refused)?;
            match last {
                Some(last) => Ok(last),
                None => Err(super::fenced_or_missing(pool, lease).await),
            }
        }
        Op::Release(lease, wake_at) => {
            let done = super::release_statement(lease, *wake_at)
                .execute(&mut *conn)
                .await
                .map_err(classify)?;
            if done.rows_affected() == 0 {
                return Err(super::fenced_or_missing(pool, lease).await);
            }
            Ok(0)
        }
    }
}

/// Every request of `batch` (distinct runs) in one transaction. `Err` only when the
/// transaction as a whole failed (nothing was kept).
async fn many(
    pool: &PgPool,
    batch: &[Request],
) -> Result<HashMap<RunId, Result<i64, StoreError>>, StoreError> {
    let mut ids: Vec<RunId> = batch.iter().map(|r| r.op.lease().run_id).collect();
    ids.sort_unstable();
    let mut tx = pool.begin().await.map_err(classify)?;
    let existing: HashSet<RunId> = sqlx::query_scalar::<_, RunId>(
        "SELECT id FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await
    .map_err(classify)?
    .into_iter()
    .collect();

    let mut done: HashMap<RunId, i64> = HashMap::new();
    let appends: Vec<(&Lease, &Append)> = batch
        .iter()
        .filter_map(|r| match &r.op {
            Op::Append(l, a) => Some((l, a)),
            Op::Release(..) => None,
        })
        .collect();
    if !appends.is_empty() {
        for row in append_many(&appends)?
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
        {
            let id: RunId = row.try_get(0).map_err(classify)?;
            let last: i64 = row.try_get(1).map_err(classify)?;
            done.insert(id, last);
        }
    }
    let releases: Vec<(&Lease, Option<i64>)> = batch
        .iter()
        .filter_map(|r| match &r.op {
            Op::Release(l, w) => Some((l, *w)),
            Op::Append(..) => None,
        })
        .collect();
    if !releases.is_empty() {
        for id in release_many(&releases)
            .fetch_all(&mut *tx)
            .await
            .map_err(classify)?
        {
            done.insert(id, 0);
        }
    }
    tx.commit().await.map_err(classify)?;
    Ok(batch
        .iter()
        .map(|r| {
            let l = r.op.lease();
            let out = match done.get(&l.run_id) {
                Some(&v) => Ok(v),
                None if existing.contains(&l.run_id) => Err(StoreError::Fenced {
                    run: l.run_id,
                    epoch: l.epoch,
                }),
                None => Err(StoreError::NotFound(l.run_id)),
            };
            (l.run_id, out)
        })
        .collect())
}

type Query<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

/// Fence, patch and seq allocation for every append, and all their events: the events of
/// runs whose fence did not match join no `r` row and are not inserted. An append numbered
/// behind its journal (`after_seq` below the last seq) does not match either, so it is
/// answered `Fenced` instead of failing the whole batch on the primary key (or, without
/// events, writing its stale summary).
fn append_many<'q>(appends: &[(&'q Lease, &'q Append)]) -> Result<Query<'q>, StoreError> {
    let n = appends.len();
    let (mut ids, mut owners, mut epochs) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut afters: Vec<Option<i64>> = Vec::with_capacity(n);
    let (mut states, mut blocked, mut current, mut wakes, mut updated, mut counts) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut e_run, mut e_ord, mut e_kind, mut e_node, mut e_data, mut e_at) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for (l, a) in appends {
        let p = &a.patch;
        ids.push(l.run_id);
        owners.push(l.owner.as_str());
        epochs.push(l.epoch);
        states.push(p.state.as_str());
        blocked.push(p.blocked_on.as_str());
        current.push(p.current_step.as_deref());
        wakes.push(p.wake_at.map(|t| t.0));
        updated.push(p.updated_at.0);
        afters.push(a.after_seq);
        counts.push(
            i64::try_from(a.events.len())
                .map_err(|_| StoreError::permanent("too many events in one append"))?,
        );
        for (i, e) in a.events.iter().enumerate() {
            e_run.push(l.run_id);
            e_ord.push(i64::try_from(i + 1).unwrap_or(i64::MAX));
            e_kind.push(e.kind.as_str());
            e_node.push(e.node.as_deref());
            e_data.push(e.data.as_str());
            e_at.push(e.at.0);
        }
    }
    Ok(sqlx::query(
        "WITH i AS ( \
             SELECT * FROM unnest($1::uuid[], $2::text[], $3::int8[], $4::text[], $5::text[], \
                                  $6::text[], $7::int8[], $8::int8[], $9::int8[], $16::int8[]) \
                 AS i(id, owner, epoch, state, blocked_on, current_step, wake_at, updated_at, n, \
                      after_seq)), \
         r AS ( \
             UPDATE runs SET state = i.state, blocked_on = i.blocked_on, \
                             current_step = i.current_step, \
                             wake_at = hcp_keep_due(runs.wake_at, i.wake_at, i.updated_at), \
                             updated_at = hcp_ts(i.updated_at), \
                             summary_seq = coalesce(i.after_seq, greatest( \
                                 coalesce(runs.summary_seq, 0), ( \
                                 SELECT coalesce(max(seq), 0) FROM events \
                                 WHERE events.run_id = runs.id))) + i.n \
             FROM i \
             WHERE runs.id = i.id AND runs.lease_owner = i.owner AND runs.lease_epoch = i.epoch \
               AND (i.after_seq IS NULL OR NOT EXISTS ( \
                   SELECT 1 FROM events WHERE events.run_id = runs.id \
                                          AND events.seq > i.after_seq)) \
             RETURNING runs.id, runs.summary_seq, i.n), \
         ins AS ( \
             INSERT INTO events (run_id, seq, kind, node, data, at) \
             SELECT e.run_id, r.summary_seq - r.n + e.ord, e.kind, e.node, e.data, hcp_ts(e.at) \
             FROM unnest($10::uuid[], $11::int8[], $12::text[], $13::text[], $14::text[], \
                         $15::int8[]) AS e(run_id, ord, kind, node, data, at) \
             JOIN r ON r.id = e.run_id) \
         SELECT id, summary_seq FROM r",
    )
    .bind(ids)
    .bind(owners)
    .bind(epochs)
    .bind(states)
    .bind(blocked)
    .bind(current)
    .bind(wakes)
    .bind(updated)
    .bind(counts)
    .bind(e_run)
    .bind(e_ord)
    .bind(e_kind)
    .bind(e_node)
    .bind(e_data)
    .bind(e_at)
    .bind(afters))
}

/// Every release whose fence matches; returns the released ids.
fn release_many<'q>(
    releases: &[(&'q Lease, Option<i64>)],
) -> sqlx::query::QueryScalar<'q, Postgres, RunId, sqlx::postgres::PgArguments> {
    let ids: Vec<RunId> = releases.iter().map(|(l, _)| l.run_id).collect();
    let owners: Vec<&str> = releases.iter().map(|(l, _)| l.owner.as_str()).collect();
    let epochs: Vec<i64> = releases.iter().map(|(l, _)| l.epoch).collect();
    let wakes: Vec<Option<i64>> = releases.iter().map(|(_, w)| *w).collect();
    sqlx::query_scalar(
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL, wake_at = hcp_ts(i.wake_at) \
         FROM unnest($1::uuid[], $2::text[], $3::int8[], $4::int8[]) AS i(id, owner, epoch, wake_at) \
         WHERE runs.id = i.id AND runs.lease_owner = i.owner AND runs.lease_epoch = i.epoch \
         RETURNING runs.id",
    )
    .bind(ids)
    .bind(owners)
    .bind(epochs)
    .bind(wakes)
}
