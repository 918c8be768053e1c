//! The journal store contract.
//!
//! The runtime owns the contract; `persistence/` implements it for SQLite and Postgres and
//! [`crate::MemoryStore`] implements it in memory. Every implementation must pass the
//! conformance suite in [`crate::conformance`] (feature `conformance`).
//!
//! The store is deliberately ignorant of the saga: it stores the DAG and events as opaque
//! JSON text, keeps one summary row per run, and arbitrates leases. Decoding (and deciding
//! what an undecodable row means) is the runtime's job, so a corrupt row parks one run
//! instead of failing every query that touches it.
//!
//! # Guarantees every implementation gives
//! - **Atomic appends.** [`JournalStore::append`] writes all its events, the summary patch
//!   and the command acknowledgements in one transaction, or nothing.
//! - **Durability.** When `append` returns `Ok`, the write survives a process crash (SQLite:
//!   WAL + `synchronous=FULL`; Postgres: a committed transaction).
//! - **Fencing.** `append`, `release` and `renew` succeed only for the lease holder at the
//!   lease's epoch; a worker whose lease was taken over gets [`StoreError::Fenced`] and its
//!   write leaves no trace.
//! - **Exclusive leases.** At most one owner holds an unexpired lease on a run; `acquire`
//!   takes expired leases over and bumps the epoch. Postgres decides expiry by the
//!   database's clock (the `now` callers pass only says which runs are due).
//! - **Idempotent create.** A second `create_run` with the same idempotency key returns the
//!   first run's id and writes nothing, if it names the same workflow and exclusive key;
//!   otherwise [`CreateOutcome::KeyReused`] and nothing is written.
//! - **One unfinished run per exclusive key.** At most one run that is not terminal
//!   (succeeded, rolled back, cancelled) holds a given [`NewRun::exclusive_key`]. A create
//!   that would make a second one gets [`CreateOutcome::Busy`] naming the holder, and writes
//!   nothing. Enforced by the store itself (a unique partial index on SQLite and Postgres),
//!   so two processes racing to start the same cluster cannot both win.
//! - **Targeted leases.** A run journaled with a [`NewRun::target`] is only leased by a
//!   worker that serves that target ([`JournalStore::acquire_targeted`]); a run without one
//!   by any worker.
//! - **Commands never need the lease.** Operators write to a per-run inbox that the lease
//!   holder drains; a run with pending commands is acquirable even if it has no timer.
//! - **Reports beside runs.** [`JournalStore::record_report`] keeps what a read-only check
//!   found (a cluster's verify), newest first per subject, pruned to the newest `keep`.
//! - **Shared token buckets.** [`JournalStore::take_tokens`] refills and takes in one
//!   atomic step: tokens granted to all processes together never exceed the bucket's
//!   capacity plus its refill since it was created.
//! - **One claimant per schedule slot.** [`JournalStore::claim_schedule`] is a compare and
//!   set on the slot's next due time: of any number of processes asking at once for a slot
//!   that is due, exactly one gets `true`; the next due time it sets survives restarts.

use crate::journal::RunState;
use crate::time::Timestamp;
use async_trait::async_trait;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;
use uuid::Uuid;

/// A run's identifier.
pub type RunId = Uuid;

/// Store failures, classified.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The caller's lease was taken over (or released): its write was refused.
    #[error("lease on run {run} lost (epoch {epoch} is no longer current): write refused")]
    Fenced {
        /// The run.
        run: RunId,
        /// The stale epoch.
        epoch: i64,
    },
    /// No such run.
    #[error("run {0} not found")]
    NotFound(RunId),
    /// Another executor owns this journal (SQLite allows one executor per file).
    #[error("{0}")]
    ExecutorBusy(String),
    /// Worth retrying: busy/locked database, lost connection, pool timeout.
    #[error("transient journal store error: {0}")]
    Transient(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Not worth retrying: constraint violation, schema mismatch, bad configuration.
    #[error("journal store error: {0}")]
    Permanent(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// Whether retrying the same call may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Transient(_))
    }

    /// A permanent error from a message.
    pub fn permanent(msg: impl Into<String>) -> Self {
        Self::Permanent(msg.into().into())
    }

    /// A transient error from a message.
    pub fn transient(msg: impl Into<String>) -> Self {
        Self::Transient(msg.into().into())
    }
}

/// A run to create.
#[derive(Clone, Debug)]
pub struct NewRun {
    /// Its id (chosen by the caller so it can be printed before anything else happens).
    pub id: RunId,
    /// Workflow name.
    pub workflow: String,
    /// Workflow definition version.
    pub workflow_version: u32,
    /// Free-form labels (`cluster` = name), for listing.
    pub labels: BTreeMap<String, String>,
    /// Caller-supplied key: a second start with the same key returns this run.
    pub idempotency_key: Option<String>,
    /// What the run works on exclusively (e.g. `cluster/<subscription>/<name>/<infra-id>`):
    /// while this run is unfinished, no other run with the same key can be created.
    pub exclusive_key: Option<String>,
    /// The world the run's steps talk to (e.g. `azure/public`, `simulator/in-process`):
    /// only workers serving it lease the run. `None`: any worker.
    pub target: Option<String>,
    /// The serialized [`crate::SagaDag`].
    pub dag: String,
    /// Creation time (also the first wake time).
    pub created_at: Timestamp,
}

/// Result of [`JournalStore::create_run`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateOutcome {
    /// A new run was journaled.
    Created(RunId),
    /// A run with the same idempotency key, workflow and exclusive key already existed.
    Existing(RunId),
    /// The idempotency key belongs to this run of another workflow or exclusive key:
    /// nothing was written.
    KeyReused(RunId),
    /// This unfinished run holds the exclusive key: nothing was written.
    Busy(RunId),
}

impl CreateOutcome {
    /// The run id: the new run, or the one that already existed or is in the way.
    pub fn id(self) -> RunId {
        match self {
            Self::Created(id) | Self::Existing(id) | Self::KeyReused(id) | Self::Busy(id) => id,
        }
    }
}

/// A lease on a run: the right to append to its journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: RunId,
    /// The holder (a worker id).
    pub owner: String,
    /// Fencing token: bumped on every acquisition.
    pub epoch: i64,
    /// When the lease lapses unless renewed.
    pub expires_at: Timestamp,
}

/// An event to append (serialized by the runtime).
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// Event type (`node_started`, …).
    pub kind: String,
    /// Node it concerns.
    pub node: Option<String>,
    /// JSON text of the event.
    pub data: String,
    /// When it happened.
    pub at: Timestamp,
}

/// An event as stored.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StoredEvent {
    /// 1-based position in the run's journal.
    pub seq: i64,
    /// Event type.
    pub kind: String,
    /// Node it concerns.
    pub node: Option<String>,
    /// JSON text (may be undecodable if the row is corrupt).
    pub data: String,
    /// When it happened.
    pub at: Timestamp,
}

/// The summary columns the executor maintains with every append.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPatch {
    /// State after this append.
    pub state: RunState,
    /// One-line "blocked on".
    pub blocked_on: String,
    /// The step operators should look at.
    pub current_step: Option<String>,
    /// When a worker should look at the run next (`None`: only commands wake it). A store
    /// may keep the run's earlier wake time when both it and this one are due (`<=
    /// updated_at`): "due" is all `acquire` asks, and Postgres then rewrites no index.
    pub wake_at: Option<Timestamp>,
    /// Time of the append.
    pub updated_at: Timestamp,
}

/// One atomic journal write.
#[derive(Clone, Debug)]
pub struct Append {
    /// Events, in order.
    pub events: Vec<NewEvent>,
    /// New summary.
    pub patch: RunPatch,
    /// Commands acknowledged by this write.
    pub applied_commands: Vec<i64>,
    /// The seq of the run's last event as the writer knows it (`None`: the writer does not
    /// say). The events get the seqs that follow it. Every store refuses the append as
    /// [`StoreError::Fenced`] when the run's journal has moved past it (another writer got
    /// there first, or this very append was already written: a retry after a commit whose
    /// answer was lost), so a journal write is never doubled, and an append without
    /// events never writes a stale summary over a newer one.
    pub after_seq: Option<i64>,
    /// The run's state is the one this writer's previous append under the same lease
    /// wrote, and that append and this one both leave the run due (a wake time no later
    /// than its `updated_at`). The run's row then needs no change beyond the summary's
    /// step, "blocked on" and time, which a store may keep with the events instead
    /// (Postgres: a step's commit that only inserts).
    pub summary_kept: bool,
}

/// An operator command to submit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCommand {
    /// JSON of the [`crate::OperatorCommand`].
    pub command: String,
    /// Who (user@host).
    pub requested_by: String,
    /// Why.
    pub reason: String,
    /// When.
    pub requested_at: Timestamp,
}

/// A command as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandRecord {
    /// Store-assigned id.
    pub id: i64,
    /// JSON of the [`crate::OperatorCommand`].
    pub command: String,
    /// Who.
    pub requested_by: String,
    /// Why.
    pub reason: String,
    /// When requested.
    pub requested_at: Timestamp,
    /// When a worker applied it.
    pub applied_at: Option<Timestamp>,
}

/// A report to keep (see [`JournalStore::record_report`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReport {
    /// What kind of report (`verify`).
    pub kind: String,
    /// What it is about (`cluster/<name>`).
    pub subject: String,
    /// When it was made.
    pub at: Timestamp,
    /// Whether everything it checked was as expected.
    pub ok: bool,
    /// Who made it (a worker id, or `user@host`).
    pub by: String,
    /// Its rows, as JSON text (the store never reads it).
    pub data: String,
    /// Keep at most this many reports of this kind and subject (the oldest go); 0: all.
    pub keep: usize,
}

/// A report as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportRecord {
    /// Store-assigned id, increasing.
    pub id: i64,
    /// Kind.
    pub kind: String,
    /// Subject.
    pub subject: String,
    /// When it was made.
    pub at: Timestamp,
    /// Whether everything was as expected.
    pub ok: bool,
    /// Who made it.
    pub by: String,
    /// JSON text, byte for byte.
    pub data: String,
}

/// What [`JournalStore::take_tokens`] granted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenGrant {
    /// Whole tokens taken (at most what was asked).
    pub granted: u32,
    /// Tokens left in the bucket after the take (fractional).
    pub left: f64,
    /// The bucket's refill rate (tokens per second), as given.
    pub per_second: f64,
}

impl TokenGrant {
    /// How long until the bucket holds one whole token again.
    pub fn next_token_in(&self) -> Duration {
        if self.left >= 1.0 {
            Duration::ZERO
        } else if self.per_second <= 0.0 {
            Duration::from_secs(3600)
        } else {
            Duration::from_secs_f64((1.0 - self.left) / self.per_second)
        }
    }
}

/// Filter for [`JournalStore::list_reports`].
#[derive(Clone, Debug, Default)]
pub struct ReportFilter {
    /// Only this kind.
    pub kind: String,
    /// Only this subject (`None`: every subject).
    pub subject: Option<String>,
    /// Only the newest report of each subject.
    pub latest_only: bool,
    /// At most this many (newest first); 0 = no limit.
    pub limit: usize,
}

/// The per-run summary row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    /// Run id.
    pub id: RunId,
    /// Workflow.
    pub workflow: String,
    /// Workflow version.
    pub workflow_version: u32,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Idempotency key.
    pub idempotency_key: Option<String>,
    /// Exclusive key (see [`NewRun::exclusive_key`]).
    pub exclusive_key: Option<String>,
    /// Target (see [`NewRun::target`]).
    pub target: Option<String>,
    /// State.
    pub state: RunState,
    /// Blocked-on line.
    pub blocked_on: String,
    /// Current step.
    pub current_step: Option<String>,
    /// Created.
    pub created_at: Timestamp,
    /// Last journal write.
    pub updated_at: Timestamp,
    /// Next wake-up.
    pub wake_at: Option<Timestamp>,
    /// Lease holder.
    pub lease_owner: Option<String>,
    /// Lease epoch.
    pub lease_epoch: i64,
    /// Lease expiry.
    pub lease_expires_at: Option<Timestamp>,
    /// Commands waiting for the lease holder.
    pub commands_pending: bool,
}

/// Everything stored about a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// Summary row.
    pub summary: RunSummary,
    /// DAG JSON text.
    pub dag: String,
    /// Journal, in order.
    pub events: Vec<StoredEvent>,
    /// Operator commands, in order.
    pub commands: Vec<CommandRecord>,
}

/// Filter for [`JournalStore::list_runs`]. Empty fields match everything.
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    /// Only these states.
    pub states: Vec<RunState>,
    /// Only this workflow.
    pub workflow: Option<String>,
    /// Only runs with this label value (e.g. `("cluster", "demo")`).
    pub label: Option<(String, String)>,
    /// Only runs created at or after.
    pub since: Option<Timestamp>,
    /// At most this many (newest first); 0 = no limit.
    pub limit: usize,
}

impl RunFilter {
    /// Whether `s` passes the filter (used by stores that filter in memory).
    pub fn matches(&self, s: &RunSummary) -> bool {
        (self.states.is_empty() || self.states.contains(&s.state))
            && self.workflow.as_ref().is_none_or(|w| w == &s.workflow)
            && self
                .label
                .as_ref()
                .is_none_or(|(k, v)| s.labels.get(k) == Some(v))
            && self.since.is_none_or(|t| s.created_at >= t)
    }
}

/// Who holds a SQLite journal's executor lock (see [`JournalStore::executor_holder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorHolder {
    /// Its process id, as it wrote it ("unknown" if it did not).
    pub pid: String,
    /// Its worker id(s).
    pub worker: String,
    /// The targets it leases runs of; `None`: any (or not recorded).
    pub serves: Option<Vec<String>>,
}

impl ExecutorHolder {
    /// Whether it would ever lease a run of `target`.
    #[must_use]
    pub fn serves(&self, target: &str) -> bool {
        self.serves
            .as_ref()
            .is_none_or(|s| s.iter().any(|t| t == target))
    }
}

/// The journal store.
///
/// # Caveats
/// Implementations retry nothing themselves; the executor retries transient errors of
/// journal writes (never skipping one) and gives up a run's lease on a fenced write.
#[async_trait]
pub trait JournalStore: Send + Sync + fmt::Debug + 'static {
    /// `memory`, `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Declare this process an executor. SQLite: take the file's executor lock (a second
    /// executor gets [`StoreError::ExecutorBusy`]) and, since every other lease holder must
    /// then be dead, release their leases. Postgres and memory: nothing to do.
    /// `serves`: the targets the claimant leases runs of (`None`: any), recorded so that a
    /// process that cannot execute beside it can say who is in the way and what it serves.
    async fn claim_executor(
        &self,
        owner: &str,
        serves: Option<&[String]>,
    ) -> Result<(), StoreError>;

    /// The process that holds this journal's single-executor lock, when the backend has one
    /// (SQLite) and another process (or store) holds it: a run of a target it does not
    /// serve would wait for ever beside it. `None` for Postgres and memory (any number of
    /// executors) and when nobody holds it.
    async fn executor_holder(&self) -> Result<Option<ExecutorHolder>, StoreError> {
        Ok(None)
    }

    /// The database's own clock, for a journal shared by workers on several hosts
    /// (Postgres): what [`crate::AlignedClock`] sets their engines to. `None` when the
    /// journal has no clock of its own to share (SQLite: one host; memory).
    async fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        Ok(None)
    }

    /// Journal a new run, or find the existing one with the same idempotency key, or name
    /// the run that is in the way (see the module's guarantees). Checked in this order:
    /// the idempotency key (even if its run is finished), then the exclusive key.
    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError>;

    /// Lease up to `limit` runs that are due (`wake_at <= now` or commands pending), not
    /// terminal, and not leased (or whose lease expired before `now`). Each acquisition
    /// bumps the run's epoch. `only` restricts to one run. Any target (tests, tools):
    /// workers use [`JournalStore::acquire_targeted`].
    async fn acquire(
        &self,
        owner: &str,
        now: Timestamp,
        lease_for: Duration,
        limit: usize,
        only: Option<RunId>,
    ) -> Result<Vec<Lease>, StoreError> {
        self.acquire_targeted(owner, now, lease_for, limit, only, None)
            .await
    }

    /// [`JournalStore::acquire`], restricted to runs without a target or whose target is
    /// one of `targets` (`None`: any target). A run of another target is never leased,
    /// so a worker pointed at the wrong world leaves it pending for the right one.
    async fn acquire_targeted(
        &self,
        owner: &str,
        now: Timestamp,
        lease_for: Duration,
        limit: usize,
        only: Option<RunId>,
        targets: Option<&[String]>,
    ) -> Result<Vec<Lease>, StoreError>;

    /// Append atomically under `lease`. Returns the seq of the last event written.
    async fn append(&self, lease: &Lease, append: Append) -> Result<i64, StoreError>;

    /// Extend every lease `owner` holds to `until`; returns the runs still held. A store
    /// may leave out (and not extend) the lease of a run that is already finished: nothing
    /// is left to fence on it, and its holder is about to release it.
    async fn renew(&self, owner: &str, until: Timestamp) -> Result<Vec<RunId>, StoreError>;

    /// Extend every lease `owner` holds for `ttl` from now, where "now" is the store's
    /// clock when it has one: Postgres decides lease expiry by the database's `now()`
    /// , so a worker whose clock runs ahead can neither take a live run over nor
    /// keep its own leases longer. The default is [`JournalStore::renew`] to `now + ttl`
    /// (`now`: the caller's clock).
    async fn renew_for(
        &self,
        owner: &str,
        now: Timestamp,
        ttl: Duration,
    ) -> Result<Vec<RunId>, StoreError> {
        self.renew(owner, now.plus(ttl)).await
    }

    /// Give the lease up; the run is next due at `wake_at` (`None`: only commands wake it).
    async fn release(&self, lease: &Lease, wake_at: Option<Timestamp>) -> Result<(), StoreError>;

    /// Everything about one run, or `None`.
    async fn load_run(&self, run: RunId) -> Result<Option<RunRecord>, StoreError>;

    /// Everything about each of `runs` that exists, in no particular order (missing runs
    /// are left out). A worker that takes over thousands of runs loads them this way, a
    /// few hundred per round trip, instead of one [`JournalStore::load_run`] each. Each
    /// record is a consistent snapshot of its run (not necessarily of all of them at once).
    ///
    /// The default calls `load_run` for each; stores override it with a batched query.
    async fn load_runs(&self, runs: &[RunId]) -> Result<Vec<RunRecord>, StoreError> {
        let mut out = Vec::with_capacity(runs.len());
        for id in runs {
            if let Some(r) = self.load_run(*id).await? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Summaries, newest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError>;

    /// Queue an operator command for the run's lease holder. Needs no lease.
    async fn submit_command(&self, run: RunId, cmd: NewCommand) -> Result<i64, StoreError>;

    /// Commands not applied yet, oldest first.
    async fn pending_commands(&self, run: RunId) -> Result<Vec<CommandRecord>, StoreError>;

    /// Runs leased by `owner` that have commands waiting (one cheap query per poll, so a
    /// worker notices an operator in another process without polling every run).
    async fn runs_with_commands(&self, owner: &str) -> Result<Vec<RunId>, StoreError>;

    /// A wake-up hint that changes when runs are created or commands submitted (in this
    /// process; Postgres also relays other processes' NOTIFYs). Workers poll regardless.
    fn subscribe(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Keep a report (needs no lease; any process may write one). Returns its id. Reports
    /// of the same kind and subject beyond the newest `keep` are removed in the same
    /// transaction.
    async fn record_report(&self, report: NewReport) -> Result<i64, StoreError>;

    /// Reports, newest first (by id).
    async fn list_reports(&self, filter: &ReportFilter) -> Result<Vec<ReportRecord>, StoreError>;

    /// A token bucket shared by every process on this journal (e.g. one ARM subscription's
    /// write budget): refill bucket `key` (`capacity` tokens, `per_second` refill, full when
    /// first used) to now, then take up to `want` whole tokens. SQLite and memory use `now`;
    /// Postgres uses the database's clock, so workers whose clocks disagree still share one
    /// bucket. Atomic across processes.
    async fn take_tokens(
        &self,
        key: &str,
        want: u32,
        capacity: f64,
        per_second: f64,
        now: Timestamp,
    ) -> Result<TokenGrant, StoreError>;

    /// Claim the schedule slot `key` for `by` at `now`: when no slot `key` exists yet, or
    /// its next due time is at or before `now`, set it to `next` and return `true`;
    /// otherwise change nothing and return `false`. Atomic across processes: of several
    /// claimants of one due slot, exactly one gets `true`.
    async fn claim_schedule(
        &self,
        key: &str,
        by: &str,
        now: Timestamp,
        next: Timestamp,
    ) -> Result<bool, StoreError>;
}
