//! The engine: start runs, submit operator commands, and run workers.
//!
//! A worker leases due runs from the store and drives each in its own task
//! ([`crate::driver`]). Leases are renewed in bulk every `lease_ttl / 3`; a run whose
//! lease is lost is abandoned at once (its in-flight attempts are dropped and its writes
//! would be fenced anyway). A run that only waits on a far timer gives its lease back with
//! `wake_at` set, so long waits cost no lease and any worker can pick the run up later.
//!
//! # Guarantees
//! - Intent before effect: a node's `started` event is durable before its action runs.
//! - Journal writes are retried until they succeed or the lease is lost; never skipped.
//! - A failure or cancellation unwinds every started node in reverse dependency order.
//!
//! # Caveats
//! Actions must be idempotent: after a crash the interrupted attempt is run again.

use crate::action::{Phase, Registry};
use crate::dag::SagaDag;
use crate::driver::{self, RunDriver};
use crate::journal::{OperatorCommand, RunState, RunView};
use crate::store::{CreateOutcome, JournalStore, NewCommand, NewRun, RunId, StoreError};
use crate::time::{Clock, SystemClock, Timestamp};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, info_span, warn};
use uuid::Uuid;

/// Journal loads in flight per worker (see `Shared::load_gate`): enough to keep a store's
/// connections busy, few enough to leave room for renewals and appends.
const LOAD_CONCURRENCY: usize = 32;

/// Runs loaded per [`JournalStore::load_runs`] round trip when a worker leases many at once.
const LOAD_BATCH: usize = 256;

/// Batched loads in flight per worker (each holds one `load_gate` permit too).
const BATCH_LOADS: usize = 2;

/// Engine errors (configuration, input, store).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The journal store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such run.
    #[error("run {0} not found")]
    NotFound(RunId),
    /// The run's journal cannot be read by this binary.
    #[error("run {run} cannot be loaded: {reason}")]
    Unreadable {
        /// The run.
        run: RunId,
        /// Why.
        reason: String,
    },
    /// An operator command does not apply to the run's current state.
    #[error("{0}")]
    CommandRefused(String),
    /// The idempotency key belongs to a run of another workflow or exclusive key.
    #[error(
        "key {key:?} already belongs to run {run} ({workflow}); a key names one start of one workflow for one cluster: pick another key"
    )]
    KeyReused {
        /// The key.
        key: String,
        /// The run that owns it.
        run: RunId,
        /// That run's workflow.
        workflow: String,
    },
    /// Another unfinished run holds the exclusive key.
    #[error(
        "run {run} ({workflow}, {state}) is still working on {key}; finish, resume or cancel it first"
    )]
    Busy {
        /// The exclusive key.
        key: String,
        /// The run in the way.
        run: RunId,
        /// Its workflow.
        workflow: String,
        /// Its state.
        state: RunState,
    },
    /// The DAG uses actions this binary does not know.
    #[error("workflow uses unknown step action(s): {0}")]
    UnknownActions(String),
    /// Serialization of the DAG failed.
    #[error("cannot serialize the saga DAG: {0}")]
    Dag(String),
}

/// Where in an attempt a boundary hook fires (crash tests kill the process there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundaryPoint {
    /// The `started` intent is durable; the side effect has not run yet.
    BeforeEffect,
    /// The side effect returned; its outcome is not journaled yet.
    AfterEffect,
    /// The outcome is journaled.
    AfterWrite,
}

impl BoundaryPoint {
    /// kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BeforeEffect => "before-effect",
            Self::AfterEffect => "after-effect",
            Self::AfterWrite => "after-write",
        }
    }
}

/// A journal boundary of one attempt.
#[derive(Debug, Clone, Copy)]
pub struct Boundary<'a> {
    /// The run.
    pub run_id: RunId,
    /// The node.
    pub node: &'a str,
    /// Action or undo.
    pub phase: Phase,
    /// Attempt number of that phase.
    pub attempt: u32,
    /// Where.
    pub point: BoundaryPoint,
}

/// Observation hooks. The crash-test harness parks the process at a chosen boundary so the
/// test can SIGKILL it there.
pub trait EngineHooks: Send + Sync + fmt::Debug + 'static {
    /// Called at each journal boundary of every attempt.
    fn boundary(&self, b: &Boundary<'_>) {
        let _ = b;
    }

    /// Fault injection for tests: a permanent error to report instead of a *completed*
    /// action attempt of `node` (its side effect has happened; the step still fails, so
    /// its undo must clean up without an output). `None` (the default) injects nothing.
    fn inject_failure(&self, node: &str, phase: Phase) -> Option<crate::StepError> {
        let _ = (node, phase);
        None
    }
}

/// Hooks that do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;
impl EngineHooks for NoHooks {}

/// Tunables. Defaults suit production; tests shorten them.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Lease duration; renewed every third of it. A crashed worker's runs are taken over
    /// after at most this long (SQLite: at once, since one executor owns the file).
    pub lease_ttl: Duration,
    /// How often an idle worker looks for due runs (wake-up hints make it sooner).
    pub poll_interval: Duration,
    /// Runs one worker drives at once.
    pub max_runs: usize,
    /// A run whose next timer is further away than this gives its lease back.
    pub hold_threshold: Duration,
    /// Runs leased per store round trip.
    pub acquire_batch: usize,
    /// Identifier of this worker in leases (default: `host-pid-uuid`).
    pub worker_id: String,
    /// The targets this worker serves (see [`crate::store::NewRun::target`]): it leases
    /// only runs without a target or with one of these. `None`: any (tests, tools).
    pub targets: Option<Vec<String>>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            lease_ttl: Duration::from_secs(15),
            poll_interval: Duration::from_millis(500),
            max_runs: 20_000,
            hold_threshold: Duration::from_secs(5),
            acquire_batch: 1_000,
            worker_id: default_worker_id(),
            targets: None,
        }
    }
}

fn default_worker_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".into());
    let short = Uuid::new_v4().simple().to_string();
    format!("{host}-{}-{}", std::process::id(), &short[..8])
}

/// Options for [`Engine::start`].
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// A second start with the same key returns the first run.
    pub idempotency_key: Option<String>,
    /// Labels for listing (e.g. `cluster`).
    pub labels: BTreeMap<String, String>,
    /// At most one unfinished run per exclusive key (e.g. one cluster).
    pub exclusive_key: Option<String>,
    /// Only workers serving this target lease the run.
    pub target: Option<String>,
}

/// Result of [`Engine::start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    /// The run.
    pub run_id: RunId,
    /// Whether it already existed (same idempotency key).
    pub existing: bool,
}

/// How a driven run left the worker.
#[derive(Debug, Clone, PartialEq)]
pub enum RunExit {
    /// Reached a terminal state.
    Finished(RunState),
    /// Waits for an operator (stuck undo).
    NeedsOperator,
    /// Parked: cannot be executed by this binary.
    Parked(String),
    /// Gave its lease back until `wake_at`.
    Released(Option<Timestamp>),
    /// Lease lost to another worker.
    LeaseLost,
    /// The worker is shutting down.
    Shutdown,
}

pub(crate) struct Shared {
    /// Bounds how many drivers load their journal at once, so a worker that takes over
    /// thousands of runs does not starve its own lease renewals of store connections.
    pub load_gate: tokio::sync::Semaphore,
    /// Bounds the batched loads of freshly leased runs (see [`preload`]).
    pub batch_gate: Arc<tokio::sync::Semaphore>,
    /// Drivers of freshly leased runs that have not journaled their resumption yet (see
    /// [`Resuming`]).
    pub resuming: std::sync::atomic::AtomicUsize,
    /// Notified when `resuming` drops to zero.
    pub resumed: tokio::sync::Notify,
    pub store: Arc<dyn JournalStore>,
    pub registry: Registry,
    pub clock: Arc<dyn Clock>,
    pub hooks: Arc<dyn EngineHooks>,
    pub config: EngineConfig,
    /// What the worker loop knows of its own health (see [`Engine::health`]).
    pub(crate) health: crate::health::Tracker,
}

/// The saga engine (cheap to clone).
#[derive(Clone)]
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.shared.store.backend())
            .field("worker_id", &self.shared.config.worker_id)
            .finish()
    }
}

impl Engine {
    /// An engine over `store` running the actions in `registry`.
    pub fn new(store: Arc<dyn JournalStore>, registry: Registry) -> Self {
        Self::with(
            store,
            registry,
            Arc::new(SystemClock),
            Arc::new(NoHooks),
            EngineConfig::default(),
        )
    }

    /// Full constructor.
    pub fn with(
        store: Arc<dyn JournalStore>,
        registry: Registry,
        clock: Arc<dyn Clock>,
        hooks: Arc<dyn EngineHooks>,
        config: EngineConfig,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                load_gate: tokio::sync::Semaphore::new(LOAD_CONCURRENCY),
                batch_gate: Arc::new(tokio::sync::Semaphore::new(BATCH_LOADS)),
                resuming: std::sync::atomic::AtomicUsize::new(0),
                resumed: tokio::sync::Notify::new(),
                store,
                registry,
                clock,
                hooks,
                health: crate::health::Tracker::default(),
                config,
            }),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn JournalStore> {
        &self.shared.store
    }

    /// This worker's id.
    pub fn worker_id(&self) -> &str {
        &self.shared.config.worker_id
    }

    /// A copy of what the worker loop ([`Engine::run_worker`]) knows of its own health:
    /// whether it works or drains, the runs it holds, when its leases last renewed.
    pub fn health(&self) -> crate::health::WorkerHealth {
        self.shared.health.snapshot()
    }

    /// Journal a new run of `dag` (or return the run with the same idempotency key).
    ///
    /// # Errors
    /// [`EngineError::UnknownActions`] if the DAG uses actions this binary does not know;
    /// store errors.
    pub async fn start(&self, dag: &SagaDag, opts: StartOptions) -> Result<Started, EngineError> {
        let unknown: Vec<&str> = dag
            .nodes
            .iter()
            .filter(|n| !self.shared.registry.contains(&n.action))
            .map(|n| n.action.as_str())
            .collect();
        if !unknown.is_empty() {
            return Err(EngineError::UnknownActions(unknown.join(", ")));
        }
        let text = serde_json::to_string(dag).map_err(|e| EngineError::Dag(e.to_string()))?;
        let key = opts.idempotency_key.clone();
        let exclusive = opts.exclusive_key.clone();
        let out = self
            .shared
            .store
            .create_run(NewRun {
                id: Uuid::now_v7(),
                workflow: dag.workflow.clone(),
                workflow_version: dag.version,
                labels: opts.labels,
                idempotency_key: opts.idempotency_key,
                exclusive_key: opts.exclusive_key,
                target: opts.target,
                dag: text,
                created_at: self.shared.clock.now(),
            })
            .await?;
        match out {
            CreateOutcome::Created(run_id) => Ok(Started {
                run_id,
                existing: false,
            }),
            CreateOutcome::Existing(run_id) => Ok(Started {
                run_id,
                existing: true,
            }),
            CreateOutcome::KeyReused(run) => {
                let workflow = self.summary(run).await?.workflow;
                Err(EngineError::KeyReused {
                    key: key.unwrap_or_default(),
                    run,
                    workflow,
                })
            }
            CreateOutcome::Busy(run) => {
                let s = self.summary(run).await?;
                Err(EngineError::Busy {
                    key: exclusive.unwrap_or_default(),
                    run,
                    workflow: s.workflow,
                    state: s.state,
                })
            }
        }
    }

    async fn summary(&self, run: RunId) -> Result<crate::store::RunSummary, EngineError> {
        Ok(self
            .shared
            .store
            .load_run(run)
            .await?
            .ok_or(EngineError::NotFound(run))?
            .summary)
    }

    /// Load and fold a run (read-only; works while another process executes it).
    ///
    /// # Errors
    /// [`EngineError::NotFound`], [`EngineError::Unreadable`] for a corrupt journal.
    pub async fn view(&self, run: RunId) -> Result<RunView, EngineError> {
        let rec = self
            .shared
            .store
            .load_run(run)
            .await?
            .ok_or(EngineError::NotFound(run))?;
        driver::fold(&rec).map_err(|reason| EngineError::Unreadable { run, reason })
    }

    /// Queue an operator command after checking that it applies to the run's state.
    /// Returns the command id. The lease holder applies it (journaling who/when/why).
    ///
    /// # Errors
    /// [`EngineError::CommandRefused`] with an explanation when it does not apply.
    pub async fn submit(
        &self,
        run: RunId,
        command: OperatorCommand,
        by: &str,
        reason: &str,
    ) -> Result<i64, EngineError> {
        match self.view(run).await {
            Ok(view) => {
                driver::check_command(&view, &command).map_err(EngineError::CommandRefused)?
            }
            // A journal we cannot fold can still be resumed (after an upgrade) or cancelled,
            // unless its summary says it already ended: a finished run has nothing to cancel.
            Err(EngineError::Unreadable { .. })
                if matches!(command, OperatorCommand::Resume | OperatorCommand::Cancel) =>
            {
                if let Some(rec) = self.shared.store.load_run(run).await?
                    && rec.summary.state.is_terminal()
                {
                    return Err(EngineError::CommandRefused(format!(
                        "the run already ended ({}); its journal cannot be read by this binary, and there is nothing to {command}",
                        rec.summary.state
                    )));
                }
            }
            Err(e) => return Err(e),
        }
        let text = serde_json::to_string(&command).map_err(|e| EngineError::Dag(e.to_string()))?;
        Ok(self
            .shared
            .store
            .submit_command(
                run,
                NewCommand {
                    command: text,
                    requested_by: by.to_string(),
                    reason: reason.to_string(),
                    requested_at: self.shared.clock.now(),
                },
            )
            .await?)
    }

    /// Apply a queued `cancel` at once, in this process, to a run that never started a
    /// step and that no worker holds: there is nothing to undo, so there is no reason to
    /// wait (perhaps for ever) for a worker of its target. Leases the run only if it is
    /// free, and journals the cancel like a worker would (who, when, why; `cancelled`).
    ///
    /// Returns the run's state when it was applied; `None` when it was not (a worker holds
    /// the run, a step has started, or no cancel is queued): the worker applies it then.
    ///
    /// # Errors
    /// Store errors.
    pub async fn cancel_unstarted(&self, run: RunId) -> Result<Option<RunState>, EngineError> {
        let sh = &self.shared;
        let Some(rec) = sh.store.load_run(run).await? else {
            return Err(EngineError::NotFound(run));
        };
        // A lease held by a dead worker is fine: acquiring below only takes a free one.
        let untouched = rec.events.is_empty() && !rec.summary.state.is_terminal();
        if !untouched {
            return Ok(None);
        }
        let owner = format!("{}-cancel", sh.config.worker_id);
        let leases = sh
            .store
            .acquire_targeted(
                &owner,
                sh.clock.now(),
                sh.config.lease_ttl,
                1,
                Some(run),
                None,
            )
            .await?;
        let Some(lease) = leases.into_iter().next() else {
            return Ok(None);
        };
        // Leased: re-read (a worker may have started it in between and let it go).
        let started = sh
            .store
            .load_run(run)
            .await?
            .is_none_or(|r| !r.events.is_empty());
        if started {
            let _ = sh.store.release(&lease, Some(sh.clock.now())).await;
            return Ok(None);
        }
        let (_stop_tx, stop_rx) = tokio::sync::watch::channel(driver::Halt::Run);
        let exit = RunDriver::new(
            self.shared.clone(),
            lease,
            Resuming::new(&self.shared),
            None,
            Arc::new(std::sync::atomic::AtomicBool::new(false)),
            Arc::new(tokio::sync::Notify::new()),
            stop_rx,
        )
        .drive()
        .await;
        Ok(match exit {
            RunExit::Finished(st) => Some(st),
            _ => None,
        })
    }

    /// Run a worker until `shutdown` resolves: lease due runs, drive them, recover expired
    /// leases. On shutdown, in-flight attempts are dropped (they re-run elsewhere) and every
    /// lease is released so another worker can continue at once.
    ///
    /// # Errors
    /// [`StoreError::ExecutorBusy`] when another executor owns a SQLite journal; store
    /// errors that are not transient.
    pub async fn run_worker(
        &self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), EngineError> {
        self.work(None, shutdown, Duration::ZERO).await.map(|_| ())
    }

    /// [`Engine::run_worker`] that drains on shutdown: it leases nothing more, starts no
    /// new step attempt and applies no operator command, but lets the attempts in flight
    /// end and journals their outcomes (renewing its leases meanwhile), then releases each
    /// run as soon as it has nothing in flight, due again at once for another worker. What
    /// is still in flight after `grace` is dropped and released as [`Engine::run_worker`]
    /// does (that attempt runs again elsewhere: actions are idempotent).
    ///
    /// # Errors
    /// As [`Engine::run_worker`].
    pub async fn run_worker_draining(
        &self,
        shutdown: impl Future<Output = ()> + Send,
        grace: Duration,
    ) -> Result<(), EngineError> {
        self.work(None, shutdown, grace).await.map(|_| ())
    }

    /// Drive one run until it finishes, needs an operator, or is parked (used by
    /// `hcp-workflow start` in the foreground). Other runs are left alone.
    ///
    /// # Errors
    /// As [`Engine::run_worker`].
    pub async fn drive(
        &self,
        run: RunId,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<RunExit, EngineError> {
        self.work(Some(run), shutdown, Duration::ZERO).await
    }

    async fn work(
        &self,
        only: Option<RunId>,
        shutdown: impl Future<Output = ()> + Send,
        grace: Duration,
    ) -> Result<RunExit, EngineError> {
        let sh = &self.shared;
        let owner = sh.config.worker_id.clone();
        sh.store
            .claim_executor(&owner, sh.config.targets.as_deref())
            .await?;
        sh.health.update(|h| {
            h.working = true;
            h.draining = false;
            h.lease_ttl = sh.config.lease_ttl;
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(driver::Halt::Run);
        let mut wake = sh.store.subscribe();
        let mut runs: JoinSet<(RunId, RunExit)> = JoinSet::new();
        // Per driven run: its task, its wake-up, and whether it is giving its lease back
        // (so a renewal that no longer lists it does not mistake that for a lost lease).
        let mut active: Active = HashMap::new();
        let renew_every = sh.config.lease_ttl / 3;
        let mut renew = tokio::time::interval(renew_every);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut poll = tokio::time::interval(sh.config.poll_interval);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        let mut last_exit = RunExit::Shutdown;
        // Held while acquire rounds come back full (a takeover in progress): the runs of the
        // next round count as resuming before they are even leased.
        let mut taking_over: Option<Resuming> = None;
        // After a failed acquire: not before this instant, and the delay that led to it.
        let mut acquire_pause: Option<(tokio::time::Instant, Duration)> = None;
        loop {
            // Driving one run: stop if it is already somewhere no worker takes it (finished,
            // waiting for an operator, parked) and nobody holds or is asked to move it.
            if let Some(id) = only
                && !active.contains_key(&id)
            {
                let Some(rec) = sh.store.load_run(id).await? else {
                    return Err(EngineError::NotFound(id));
                };
                let s = &rec.summary;
                // Nobody holds it: no lease, or the lease of a process that died (it lapsed;
                // a run waiting for an operator has no wake-up, so no acquire would ever
                // take it over just to say so).
                let lease_lapsed = s.lease_expires_at.is_none_or(|t| t <= sh.clock.now());
                let idle = (s.lease_owner.is_none() || lease_lapsed) && !s.commands_pending;
                match s.state {
                    st if st.is_terminal() => return Ok(RunExit::Finished(st)),
                    // A paused run whose deadline passed is due: drive its unwind.
                    RunState::NeedsOperator
                        if idle && s.wake_at.is_none_or(|t| t > sh.clock.now()) =>
                    {
                        return Ok(RunExit::NeedsOperator);
                    }
                    // Parked for an operator. (A run parked by an older binary for steps it
                    // did not know stays due: this binary leases it and goes on.)
                    RunState::Failed if idle && s.wake_at.is_none() => {
                        return Ok(RunExit::Parked(s.blocked_on.clone()));
                    }
                    _ => {}
                }
            }
            // Lease what is due, up to capacity.
            let room = sh.config.max_runs.saturating_sub(active.len());
            let paused =
                acquire_pause.is_some_and(|(until, _)| tokio::time::Instant::now() < until);
            if room > 0 && !paused {
                let limit = room.min(sh.config.acquire_batch);
                match sh
                    .store
                    .acquire_targeted(
                        &owner,
                        sh.clock.now(),
                        sh.config.lease_ttl,
                        limit,
                        only,
                        sh.config.targets.as_deref(),
                    )
                    .await
                {
                    Ok(leases) => {
                        acquire_pause = None;
                        let got = leases.len();
                        sh.health.update(|h| {
                            h.last_acquire = Some(std::time::Instant::now());
                            h.runs_leased += got as u64;
                        });
                        let mut loads = preload(&self.shared, &leases);
                        for lease in leases {
                            let id = lease.run_id;
                            let notify = Arc::new(tokio::sync::Notify::new());
                            let leaving = Arc::new(std::sync::atomic::AtomicBool::new(false));
                            let d = RunDriver::new(
                                self.shared.clone(),
                                lease,
                                Resuming::new(&self.shared),
                                loads.remove(&id),
                                leaving.clone(),
                                notify.clone(),
                                stop_rx.clone(),
                            );
                            let span = info_span!("run", run_id = %id);
                            let h =
                                runs.spawn(async move { (id, d.drive().await) }.instrument(span));
                            active.insert(id, (h, notify, leaving));
                        }
                        if got == limit {
                            // More may be due: go round again before sleeping.
                            taking_over.get_or_insert_with(|| Resuming::new(&self.shared));
                            tokio::task::yield_now().await;
                            continue;
                        }
                    }
                    Err(e) if e.is_retryable() => {
                        // Backed off (a full disk fails every write at once: no hot loop
                        // of warnings), from the poll interval up to 5 s.
                        let delay = acquire_pause.map_or(sh.config.poll_interval, |(_, d)| {
                            (d * 2).min(Duration::from_secs(5))
                        });
                        acquire_pause = Some((tokio::time::Instant::now() + delay, delay));
                        sh.health.update(|h| h.acquire_failures += 1);
                        warn!(error = %e, retry_in = ?delay, "acquire failed; will retry");
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            taking_over = None;
            sh.health.update(|h| h.held_runs = active.len());
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                Some(done) = runs.join_next(), if !runs.is_empty() => {
                    match done {
                        Ok((id, exit)) => {
                            active.remove(&id);
                            debug!(run_id = %id, ?exit, "run left the worker");
                            if only == Some(id) {
                                match exit {
                                    RunExit::Released(_) | RunExit::LeaseLost => {}
                                    other => { last_exit = other; break; }
                                }
                            }
                        }
                        Err(e) => {
                            active.retain(|_, (h, _, _)| !h.is_finished());
                            if !e.is_cancelled() {
                                warn!(error = %e, "run task panicked");
                            }
                        }
                    }
                }
                _ = renew.tick() => renew_leases(sh, &owner, &active).await,
                r = wake.changed() => {
                    if r.is_ok() {
                        for (_, n, _) in active.values() {
                            n.notify_one();
                        }
                    }
                }
                _ = poll.tick() => {
                    // Operators in other processes: one query tells which held runs have
                    // commands waiting.
                    if !active.is_empty()
                        && let Ok(ids) = sh.store.runs_with_commands(&owner).await
                    {
                        for id in ids {
                            if let Some((_, n, _)) = active.get(&id) {
                                n.notify_one();
                            }
                        }
                    }
                }
            }
        }
        sh.health.update(|h| h.draining = true);
        // Drain: no new run, step or command; the attempts in flight end and are
        // journaled, and each run is released once it has nothing in flight. Leases keep
        // renewing meanwhile, or another worker would take the runs over mid-step.
        if !grace.is_zero() && !runs.is_empty() {
            let _ = stop_tx.send(driver::Halt::Drain);
            info!(
                runs = active.len(),
                ?grace,
                "draining: the steps in flight end, then every run is released"
            );
            let deadline = tokio::time::sleep(grace);
            tokio::pin!(deadline);
            loop {
                sh.health.update(|h| h.held_runs = active.len());
                tokio::select! {
                    biased;
                    () = &mut deadline => break,
                    done = runs.join_next() => match done {
                        None => break,
                        Some(Ok((id, exit))) => {
                            active.remove(&id);
                            if only == Some(id) && !matches!(exit, RunExit::Shutdown) {
                                last_exit = exit;
                            }
                        }
                        Some(Err(_)) => active.retain(|_, (h, _, _)| !h.is_finished()),
                    },
                    _ = renew.tick() => renew_leases(sh, &owner, &active).await,
                }
            }
            if !runs.is_empty() {
                sh.health.update(|h| h.cut_short += runs.len() as u64);
                warn!(
                    runs = runs.len(),
                    ?grace,
                    "grace period over: the steps still in flight are dropped and their runs released (those attempts run again elsewhere)"
                );
            }
        }
        // Shutdown: ask every driver to stop at its next boundary and release its lease.
        let _ = stop_tx.send(driver::Halt::Now);
        while let Some(done) = runs.join_next().await {
            if let Ok((id, exit)) = done
                && only == Some(id)
                && !matches!(exit, RunExit::Shutdown)
            {
                last_exit = exit;
            }
        }
        sh.health.update(|h| {
            h.held_runs = 0;
            h.working = false;
        });
        Ok(last_exit)
    }
}

/// Per driven run: its task, its wake-up, and whether it is giving its lease back.
type Active = HashMap<
    RunId,
    (
        tokio::task::AbortHandle,
        Arc<tokio::sync::Notify>,
        Arc<std::sync::atomic::AtomicBool>,
    ),
>;

/// Renew every lease `owner` holds (one bulk call), abandon the runs whose lease another
/// worker took, and note the outcome in the worker's health.
async fn renew_leases(sh: &Shared, owner: &str, active: &Active) {
    match sh
        .store
        .renew_for(owner, sh.clock.now(), sh.config.lease_ttl)
        .await
    {
        Ok(held) => {
            let held: std::collections::HashSet<RunId> = held.into_iter().collect();
            let mut lost = 0;
            for (id, (h, _, leaving)) in active {
                // A driver that gave its lease back is leaving anyway; only
                // one still running has lost it to someone else.
                if !held.contains(id)
                    && !h.is_finished()
                    && !leaving.load(std::sync::atomic::Ordering::SeqCst)
                {
                    warn!(run_id = %id, "lease lost; abandoning the run");
                    h.abort();
                    lost += 1;
                }
            }
            sh.health.update(|h| {
                h.last_renewal = Some(std::time::Instant::now());
                h.renewals += 1;
                h.last_renewal_error = None;
                h.leases_lost += lost;
            });
        }
        Err(e) => {
            sh.health.update(|h| {
                h.renewal_failures += 1;
                h.last_renewal_error = Some(e.to_string());
            });
            warn!(error = %e, "lease renewal failed");
        }
    }
}

/// A freshly leased run's journal, on its way from a batched load.
pub(crate) type Preloaded = tokio::sync::oneshot::Receiver<crate::store::RunRecord>;

/// Load the journals of many freshly leased runs a batch per round trip (a worker taking
/// over thousands of runs would otherwise spend one or more round trips per run before any
/// of them could move). Each driver gets a receiver for its record; a driver whose record
/// does not arrive (the batch failed, the run vanished) loads its journal itself. A single
/// lease is left to its driver: no batching to gain.
fn preload(sh: &Arc<Shared>, leases: &[crate::store::Lease]) -> HashMap<RunId, Preloaded> {
    let mut out = HashMap::new();
    if leases.len() < 2 {
        return out;
    }
    for chunk in leases.chunks(LOAD_BATCH) {
        let mut senders = HashMap::with_capacity(chunk.len());
        for l in chunk {
            let (tx, rx) = tokio::sync::oneshot::channel();
            senders.insert(l.run_id, tx);
            out.insert(l.run_id, rx);
        }
        let ids: Vec<RunId> = chunk.iter().map(|l| l.run_id).collect();
        let store = sh.store.clone();
        let gate = sh.batch_gate.clone();
        tokio::spawn(async move {
            let Ok(_permit) = gate.acquire_owned().await else {
                return;
            };
            match store.load_runs(&ids).await {
                Ok(records) => {
                    for rec in records {
                        if let Some(tx) = senders.remove(&rec.summary.id) {
                            let _ = tx.send(rec);
                        }
                    }
                }
                Err(e) => {
                    warn!(error = %e, runs = ids.len(), "batched journal load failed; each run loads its own")
                }
            }
        });
    }
    out
}

/// Counts a freshly leased run until its first journal write (its resumption) is durable.
///
/// While any run is resuming, runs that already resumed hold their further writes back
/// (for at most [`RESUME_PRIORITY_CAP`]): after a takeover, every run gets its next intent
/// journaled first, instead of the first few hundred running ahead and filling the
/// journal's write queue while thousands wait to resume. Dropping the counter (first
/// write done, or the driver left early) releases it.
pub(crate) struct Resuming {
    sh: Arc<Shared>,
}

/// Longest a resumed run's write waits for other runs to resume.
pub(crate) const RESUME_PRIORITY_CAP: Duration = Duration::from_secs(2);

impl Resuming {
    pub(crate) fn new(sh: &Arc<Shared>) -> Self {
        sh.resuming
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self { sh: sh.clone() }
    }
}

impl Drop for Resuming {
    fn drop(&mut self) {
        if self
            .sh
            .resuming
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            self.sh.resumed.notify_waiters();
        }
    }
}

/// Wait (at most [`RESUME_PRIORITY_CAP`]) until no run is resuming.
pub(crate) async fn after_resumptions(sh: &Shared) {
    let wait = async {
        loop {
            let notified = sh.resumed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a drop to zero in between is not missed.
            notified.as_mut().enable();
            if sh.resuming.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    };
    let _ = tokio::time::timeout(RESUME_PRIORITY_CAP, wait).await;
}
