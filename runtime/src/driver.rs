//! One run's executor: loads the journal, decides what may run, journals the intent,
//! runs attempts, journals their outcomes, applies operator commands, and unwinds.
//!
//! The driver is the run's single journal writer while it holds the lease: every event is
//! validated against the folded [`RunView`] before it is written, and the view is only
//! advanced by events that were written (a failed write ends the driver, so memory never
//! runs ahead of the journal for long).

use crate::action::{BoxFuture, CheckpointSink, Phase, StepContext};
use crate::dag::{FailurePolicy, SagaDag};
use crate::engine::{Boundary, BoundaryPoint, RunExit, Shared};
use crate::error::{StepError, kind};
use crate::journal::{
    Event, NodeStatus, OPERATOR_APPLIED, OperatorCommand, PauseCause, RunState, RunView,
    UnwindCause,
};
use crate::retry::RetryDecision;
use crate::store::{Append, CommandRecord, Lease, NewEvent, RunPatch, RunRecord, StoreError};
use crate::time::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, Notify, watch};
use tokio::task::{AbortHandle, JoinSet};
use tracing::{Instrument, error, info, info_span, warn};

/// Fold a stored run into a view, explaining the first thing that does not decode or fit.
pub(crate) fn fold(rec: &RunRecord) -> Result<RunView, String> {
    let dag: SagaDag =
        serde_json::from_str(&rec.dag).map_err(|e| format!("its saga DAG does not decode: {e}"))?;
    let mut view = RunView::new(dag);
    for e in &rec.events {
        let ev: Event = serde_json::from_str(&e.data).map_err(|err| {
            format!(
                "journal event #{} ({}) does not decode: {err}",
                e.seq, e.kind
            )
        })?;
        view.apply(&ev, e.at).map_err(|err| {
            format!(
                "journal event #{} does not fit the state machine: {err}",
                e.seq
            )
        })?;
    }
    Ok(view)
}

/// Whether `cmd` applies to the run as it stands; `Err` explains why not.
pub(crate) fn check_command(view: &RunView, cmd: &OperatorCommand) -> Result<(), String> {
    if let Some(s) = view.finished {
        return Err(format!("the run is already {s}: nothing to do"));
    }
    let names = || {
        view.dag
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let retryable = |s: &NodeStatus| {
        matches!(
            s,
            NodeStatus::Waiting { .. }
                | NodeStatus::RetryScheduled { .. }
                | NodeStatus::Stalled { .. }
                | NodeStatus::UndoWaiting { .. }
                | NodeStatus::UndoRetryScheduled { .. }
                | NodeStatus::UndoFailed { .. }
        )
    };
    match cmd {
        OperatorCommand::Cancel => match &view.unwinding {
            Some(UnwindCause::Cancelled { by, .. }) => {
                Err(format!("the run is already being cancelled (by {by})"))
            }
            Some(UnwindCause::NodeFailed { node }) => Err(format!(
                "the run is already unwinding because {node} failed"
            )),
            Some(UnwindCause::PauseExpired { node, .. }) => Err(format!(
                "the run is already unwinding: it was paused after {node} failed and its deadline passed"
            )),
            None => Ok(()),
        },
        OperatorCommand::Retry { step } if view.paused.is_some() => {
            let failed: Vec<&str> = view
                .dag
                .nodes
                .iter()
                .zip(&view.nodes)
                .filter(|(_, st)| matches!(st.status, NodeStatus::Failed { .. }))
                .map(|(n, _)| n.name.as_str())
                .collect();
            match step {
                Some(s) if !failed.contains(&s.as_str()) => Err(format!(
                    "the run is paused after a failure; only its failed step{} can be retried: {}",
                    if failed.len() == 1 { "" } else { "s" },
                    failed.join(", ")
                )),
                _ => Ok(()),
            }
        }
        OperatorCommand::Retry { step: Some(step) } => {
            let n = view.node(step).ok_or_else(|| {
                format!(
                    "no step named `{step}` in this run; its steps are: {}",
                    names()
                )
            })?;
            if retryable(&n.status) {
                Ok(())
            } else {
                Err(format!(
                    "step `{step}` is {}: only a waiting, backing-off, stalled or stuck step can be retried",
                    n.status.name()
                ))
            }
        }
        OperatorCommand::Retry { step: None } => {
            if view.nodes.iter().any(|n| retryable(&n.status)) {
                Ok(())
            } else {
                Err("no step is waiting, backing off, stalled or stuck".into())
            }
        }
        OperatorCommand::Resolve { step } => {
            let n = view.node(step).ok_or_else(|| {
                format!(
                    "no step named `{step}` in this run; its steps are: {}",
                    names()
                )
            })?;
            match n.status {
                NodeStatus::UndoFailed { .. } => Ok(()),
                ref s => Err(format!(
                    "step `{step}` is {}: only a step whose undo gave up (undo-failed) can be resolved by hand",
                    s.name()
                )),
            }
        }
        OperatorCommand::Resume if view.paused.is_some() => Err(
            "the run is paused after a step failed: `retry` re-runs the failed step and goes on, `cancel` unwinds".into(),
        ),
        OperatorCommand::Resume => match view.state() {
            RunState::Failed | RunState::NeedsOperator => Ok(()),
            s => Err(format!(
                "the run is {s}: it is neither parked nor stuck, nothing to resume"
            )),
        },
    }
}

/// How far the worker's shutdown has gone (the drivers' `stop` channel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Halt {
    /// Work as usual.
    Run,
    /// Drain: start no new attempt and apply no command; journal the outcomes of the
    /// attempts in flight, then stop (and release the lease) once none is left.
    Drain,
    /// Stop at once: drop the attempts in flight (they run again elsewhere).
    Now,
}

/// Why the driver stops early.
enum Stop {
    LeaseLost,
    Shutdown,
    Broken(String),
}

struct Writer {
    sh: Arc<Shared>,
    lease: Lease,
    view: RunView,
    /// Held until this run's first write is durable (see [`crate::engine::Resuming`]).
    resuming: Option<crate::engine::Resuming>,
    /// The driver's `leaving` flag: set before the write that finishes the run (a store
    /// may stop counting a finished run's lease as held from then on).
    leaving: Arc<std::sync::atomic::AtomicBool>,
    /// Events applied to `view` but not yet durable: an attempt's outcome waits here so it
    /// is written in the same append as the intent of the steps it unblocks (one durable
    /// write per step instead of two). Nothing may observe or act on them before `flush`.
    staged: Vec<NewEvent>,
    /// The seq of the run's last durable event (as loaded, then as each append returned).
    last_seq: i64,
    /// The state this writer's previous append wrote, if that append left the run due
    /// (`None` before its first): whether the next one keeps the run's summary row as it is
    /// ([`Append::summary_kept`]).
    left_due: Option<RunState>,
}

/// Whether `p` leaves its run due (wake time no later than the append itself).
fn leaves_due(p: &RunPatch) -> bool {
    p.wake_at.is_some_and(|w| w <= p.updated_at)
}

impl Writer {
    fn patch(&self, now: Timestamp) -> RunPatch {
        let state = self.view.state();
        let wake_at = match state {
            s if s.is_terminal() => None,
            // Parked for steps this binary does not know: due again for a newer worker.
            RunState::Failed if self.view.parked.is_some() && self.view.parked_recheck => {
                Some(now.plus(UNKNOWN_STEP_RECHECK))
            }
            // A paused run with a deadline is due at its deadline (then it unwinds).
            RunState::NeedsOperator | RunState::Failed => {
                self.view.paused.as_ref().and_then(|p| p.unwind_at)
            }
            RunState::Waiting => self.view.next_timer(),
            _ => Some(now),
        };
        RunPatch {
            state,
            blocked_on: self.view.blocked_on(),
            current_step: self.view.current_step().map(str::to_string),
            wake_at,
            updated_at: now,
        }
    }

    /// Validate, then durably append `events` (one transaction, together with anything
    /// staged), retrying store errors.
    async fn write(&mut self, events: Vec<Event>, applied: Vec<i64>) -> Result<(), Stop> {
        self.stage(events)?;
        self.flush(applied).await
    }

    /// Validate and apply `events` to the view; they become durable with the next flush.
    fn stage(&mut self, events: Vec<Event>) -> Result<(), Stop> {
        let now = self.sh.clock.now();
        for ev in &events {
            self.view
                .apply(ev, now)
                .map_err(|e| Stop::Broken(format!("engine bug, refused to journal: {e}")))?;
            let data = serde_json::to_string(ev)
                .map_err(|e| Stop::Broken(format!("event not serializable: {e}")))?;
            self.staged.push(NewEvent {
                kind: ev.kind().to_string(),
                node: ev.node().map(str::to_string),
                data,
                at: now,
            });
        }
        Ok(())
    }

    /// Durably write the run's summary alone (no event): after a poll that changed
    /// nothing, so `list` shows the poll count and the store the next wake time.
    async fn touch(&mut self) -> Result<(), Stop> {
        self.append(vec![]).await
    }

    /// Durably append everything staged (and acknowledge `applied` commands).
    async fn flush(&mut self, applied: Vec<i64>) -> Result<(), Stop> {
        if self.staged.is_empty() && applied.is_empty() {
            return Ok(());
        }
        self.append(applied).await
    }

    /// One append of what is staged (possibly nothing: then the summary alone) with the
    /// run's current summary.
    async fn append(&mut self, applied: Vec<i64>) -> Result<(), Stop> {
        if self.resuming.is_none() {
            crate::engine::after_resumptions(&self.sh).await;
        }
        let now = self.sh.clock.now();
        let patch = self.patch(now);
        let summary_kept =
            applied.is_empty() && leaves_due(&patch) && self.left_due == Some(patch.state);
        let append = Append {
            events: std::mem::take(&mut self.staged),
            patch,
            applied_commands: applied,
            after_seq: Some(self.last_seq),
            summary_kept,
        };
        if append.patch.state.is_terminal() {
            self.leaving
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let last = persist(&self.sh, |s| {
            let a = append.clone();
            let l = self.lease.clone();
            async move { s.append(&l, a).await }
        })
        .await?;
        self.last_seq = last;
        self.left_due = leaves_due(&append.patch).then_some(append.patch.state);
        self.resuming = None;
        Ok(())
    }
}

/// Retry a store call until it succeeds; a fenced call ends the driver. Journal writes are
/// retried, never skipped; a permanent error is retried too (slowly), because giving up
/// would lose the write: the run is abandoned only after many failures.
async fn persist<T, F, Fut>(sh: &Arc<Shared>, mut f: F) -> Result<T, Stop>
where
    F: FnMut(Arc<dyn crate::store::JournalStore>) -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut delay = Duration::from_millis(20);
    let mut permanent = 0;
    loop {
        match f(sh.store.clone()).await {
            Ok(v) => return Ok(v),
            Err(e @ StoreError::Fenced { .. }) => {
                warn!(error = %e, "journal write refused: another worker took the run over");
                return Err(Stop::LeaseLost);
            }
            Err(e) => {
                if !e.is_retryable() {
                    permanent += 1;
                    if permanent > 20 {
                        return Err(Stop::Broken(format!("journal store keeps failing: {e}")));
                    }
                }
                warn!(error = %e, ?delay, "journal write failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

struct Sink(Arc<Mutex<Writer>>);

impl CheckpointSink for Sink {
    fn save<'a>(
        &'a self,
        node: &'a str,
        phase: Phase,
        data: serde_json::Value,
    ) -> BoxFuture<'a, Result<(), StepError>> {
        Box::pin(async move {
            let ev = match phase {
                Phase::Action => Event::NodeCheckpoint {
                    node: node.to_string(),
                    data,
                },
                Phase::Undo => Event::UndoCheckpoint {
                    node: node.to_string(),
                    data,
                },
            };
            let mut w = self.0.lock().await;
            // A poll of a waiting node runs without `started` journaled first (a quiet
            // poll). Saving a checkpoint is news: the attempt re-enters `running` under its
            // journaled intent first, as when the poll's outcome is news. Without this the
            // journal refused the checkpoint (a node that is not running) and the step was
            // told its lease was lost when nothing was lost.
            let mut events = Vec::with_capacity(2);
            if let Some(again) = reenter_quiet(&w.view, node, phase) {
                events.push(again);
            }
            events.push(ev);
            w.write(events, vec![]).await.map_err(|stop| match stop {
                Stop::LeaseLost => StepError::retryable(
                    kind::INTERRUPTED,
                    "checkpoint could not be journaled: another worker took the run over",
                ),
                Stop::Shutdown => StepError::retryable(
                    kind::INTERRUPTED,
                    "checkpoint could not be journaled: the worker is shutting down",
                ),
                Stop::Broken(why) => StepError::retryable(
                    kind::INTERRUPTED,
                    format!("checkpoint could not be journaled: {why}"),
                ),
            })
        })
    }
}

struct AttemptDone {
    idx: usize,
    phase: Phase,
    attempt: u32,
    result: Result<AttemptOk, StepError>,
}

enum AttemptOk {
    Action(crate::action::RawOutcome),
    Undo(crate::action::UndoOutcome),
}

struct InFlight {
    phase: Phase,
    attempt: u32,
    /// A poll of a waiting node, run without journaling `started(same)` first (see the
    /// journal module: a poll that changes nothing is not journaled).
    quiet: bool,
    abort: AbortHandle,
}

pub(crate) struct RunDriver {
    sh: Arc<Shared>,
    lease: Lease,
    resuming: Option<crate::engine::Resuming>,
    preloaded: Option<crate::engine::Preloaded>,
    /// Set just before this driver releases its lease (read by the worker's renewals).
    leaving: Arc<std::sync::atomic::AtomicBool>,
    /// When a run parked for unknown steps is due again (ms; 0: not so parked).
    park_wake: Arc<std::sync::atomic::AtomicI64>,
    notify: Arc<Notify>,
    stop: watch::Receiver<Halt>,
}

impl RunDriver {
    pub(crate) fn new(
        sh: Arc<Shared>,
        lease: Lease,
        resuming: crate::engine::Resuming,
        preloaded: Option<crate::engine::Preloaded>,
        leaving: Arc<std::sync::atomic::AtomicBool>,
        notify: Arc<Notify>,
        stop: watch::Receiver<Halt>,
    ) -> Self {
        Self {
            sh,
            lease,
            resuming: Some(resuming),
            preloaded,
            leaving,
            park_wake: Arc::new(std::sync::atomic::AtomicI64::new(0)),
            notify,
            stop,
        }
    }

    pub(crate) async fn drive(self) -> RunExit {
        let sh = self.sh.clone();
        let lease = self.lease.clone();
        let leaving = self.leaving.clone();
        let park_wake = self.park_wake.clone();
        let out = self.drive_inner().await;
        leaving.store(true, std::sync::atomic::Ordering::SeqCst);
        let exit = match out {
            Ok(exit) => exit,
            Err(Stop::LeaseLost) => {
                // Refused because another worker holds the run (then this release is
                // refused too), or because the journal moved past what this driver knows
                // (an append already written, its answer lost): then the lease is still
                // ours, and would be renewed for ever with no driver behind it. Give it
                // back, due at once, so the run is loaded afresh.
                let now = sh.clock.now();
                let _ = sh.store.release(&lease, Some(now)).await;
                return RunExit::LeaseLost;
            }
            Err(Stop::Shutdown) => {
                // Due again at once, so another worker continues without waiting.
                let now = sh.clock.now();
                let _ = sh.store.release(&lease, Some(now)).await;
                return RunExit::Shutdown;
            }
            Err(Stop::Broken(reason)) => {
                error!(run_id = %lease.run_id, %reason, "run abandoned by this worker");
                return park_broken(&sh, &lease, &reason).await;
            }
        };
        let wake = match &exit {
            RunExit::Released(w) => *w,
            RunExit::Parked(_) => match park_wake.load(std::sync::atomic::Ordering::SeqCst) {
                0 => None,
                t => Some(Timestamp(t)),
            },
            _ => None,
        };
        if let Err(e) = sh.store.release(&lease, wake).await {
            warn!(run_id = %lease.run_id, error = %e, "releasing the lease failed; it will expire");
        }
        exit
    }

    async fn drive_inner(mut self) -> Result<RunExit, Stop> {
        let sh = self.sh.clone();
        let run_id = self.lease.run_id;
        // Loaded with a batch of other runs, or (if that did not deliver) on its own. The
        // batch read happened after this lease was taken, so it is as fresh as our own.
        let preloaded = match self.preloaded.take() {
            Some(rx) => rx.await.ok(),
            None => None,
        };
        let rec = match preloaded {
            Some(rec) => Some(rec),
            None => {
                let _permit = sh.load_gate.acquire().await;
                persist(&sh, |s| async move { s.load_run(run_id).await }).await?
            }
        };
        let Some(rec) = rec else {
            return Err(Stop::Broken("run vanished from the journal".into()));
        };
        let labels = Arc::new(rec.summary.labels.clone());
        // The inbox as of the load: the first command check needs no query of its own.
        let mut inbox: Option<Vec<CommandRecord>> = Some(
            rec.commands
                .iter()
                .filter(|c| c.applied_at.is_none())
                .cloned()
                .collect(),
        );
        let mut view = match fold(&rec) {
            Ok(v) => v,
            Err(reason) => return self.park_unreadable(&rec, reason).await,
        };
        if let Some(step) = &rec.summary.current_step {
            view.seed_quiet_polls(
                step,
                crate::journal::quiet_polls_in(&rec.summary.blocked_on),
            );
        }
        if view.finished.is_some() {
            return Ok(RunExit::Finished(view.state()));
        }
        let writer = Arc::new(Mutex::new(Writer {
            sh: sh.clone(),
            lease: self.lease.clone(),
            resuming: self.resuming.take(),
            leaving: self.leaving.clone(),
            view,
            staged: Vec::new(),
            last_seq: rec.events.last().map_or(0, |e| e.seq),
            left_due: None,
        }));
        // Every action the persisted DAG names must be known to this binary, unless the
        // run never started a step and a cancel is queued: then nothing will run (an
        // operator's process applies such a cancel at once; see `Engine::cancel_unstarted`).
        let cancel_unstarted = inbox.as_ref().is_some_and(|cmds| {
            cmds.iter().any(|c| {
                matches!(
                    serde_json::from_str::<OperatorCommand>(&c.command),
                    Ok(OperatorCommand::Cancel)
                )
            })
        }) && writer
            .lock()
            .await
            .view
            .nodes
            .iter()
            .all(|n| n.status == NodeStatus::Pending);
        if !cancel_unstarted {
            let mut w = writer.lock().await;
            let mut unknown: Vec<String> = w
                .view
                .dag
                .nodes
                .iter()
                .filter(|n| !sh.registry.contains(&n.action))
                .map(|n| format!("{} (action {})", n.name, n.action))
                .collect();
            unknown.dedup();
            if !unknown.is_empty() {
                let reason = format!(
                    "this binary does not know step(s) {}; a worker whose binary knows them takes the run over by itself (due again every {} s), or run one and `hcp-workflow resume {run_id}`",
                    unknown.join(", "),
                    UNKNOWN_STEP_RECHECK.as_secs()
                );
                let cmds = inbox.take().unwrap_or_default();
                let mut events = Vec::new();
                for c in &cmds {
                    if let Ok(command) = serde_json::from_str::<OperatorCommand>(&c.command) {
                        events.push(Event::Operator {
                            command_id: c.id,
                            command,
                            by: c.requested_by.clone(),
                            reason: c.reason.clone(),
                            outcome: format!("refused: {reason}"),
                        });
                    }
                }
                if w.view.parked.as_deref() != Some(reason.as_str()) {
                    if w.view.parked.is_some() {
                        events.push(Event::RunUnparked);
                    }
                    events.push(Event::RunParked {
                        reason: reason.clone(),
                        recheck: true,
                    });
                }
                w.write(events, cmds.iter().map(|c| c.id).collect()).await?;
                // Released due again: during a rolling upgrade a newer worker takes it.
                self.park_wake.store(
                    sh.clock.now().plus(UNKNOWN_STEP_RECHECK).0,
                    std::sync::atomic::Ordering::SeqCst,
                );
                return Ok(RunExit::Parked(reason));
            }
            // Parked by an older binary that did not know some of its steps: this one
            // knows them all, so the run goes on (no operator needed).
            if w.view.parked.is_some() && w.view.parked_recheck {
                info!(%run_id, "a binary that knows every step of the run takes it over");
                w.write(vec![Event::RunUnparked], vec![]).await?;
            }
        }
        let sink: Arc<dyn CheckpointSink> = Arc::new(Sink(writer.clone()));
        let mut inflight: HashMap<usize, InFlight> = HashMap::new();
        let mut task_idx: HashMap<tokio::task::Id, usize> = HashMap::new();
        let mut tasks: JoinSet<AttemptDone> = JoinSet::new();
        let mut check_commands = true;
        // Outcomes staged for the next append, whose AfterWrite boundary fires after it.
        let mut written: Vec<(String, Phase, u32)> = Vec::new();
        loop {
            // Marked seen, so that `stop.changed()` below wakes only on the next change.
            let halt = *self.stop.borrow_and_update();
            if halt == Halt::Now {
                tasks.abort_all();
                return Err(Stop::Shutdown);
            }
            // Draining: nothing new starts; the outcomes of the attempts in flight are
            // journaled as they come, and the run stops once none is left (the next worker
            // plans what follows, exactly as after a crash at this point).
            let draining = halt == Halt::Drain;
            if draining && inflight.is_empty() {
                writer.lock().await.flush(vec![]).await?;
                for (name, phase, attempt) in written.drain(..) {
                    sh.hooks.boundary(&Boundary {
                        run_id,
                        node: &name,
                        phase,
                        attempt,
                        point: BoundaryPoint::AfterWrite,
                    });
                }
                return Err(Stop::Shutdown);
            }
            if check_commands && !draining {
                check_commands = false;
                self.apply_commands(&writer, &mut inflight, inbox.take())
                    .await?;
            }
            if let Some(reason) = writer.lock().await.view.parked.clone() {
                return Ok(RunExit::Parked(reason));
            }
            // Journal what can happen now (with any staged outcome), then start it; while
            // draining, only what is staged.
            loop {
                let mut w = writer.lock().await;
                let now = sh.clock.now();
                let (events, starts) = if draining {
                    (Vec::new(), Vec::new())
                } else {
                    plan(&w.view, &inflight, now)
                };
                if events.is_empty() && starts.is_empty() {
                    w.flush(vec![]).await?;
                    break;
                }
                w.write(events, vec![]).await?;
                for Start {
                    idx,
                    phase,
                    attempt,
                    quiet,
                } in starts
                {
                    let (h, id) = self
                        .spawn_attempt(&w.view, idx, phase, attempt, &labels, &sink, &mut tasks);
                    task_idx.insert(id, idx);
                    inflight.insert(
                        idx,
                        InFlight {
                            phase,
                            attempt,
                            quiet,
                            abort: h,
                        },
                    );
                }
            }
            for (name, phase, attempt) in written.drain(..) {
                sh.hooks.boundary(&Boundary {
                    run_id,
                    node: &name,
                    phase,
                    attempt,
                    point: BoundaryPoint::AfterWrite,
                });
            }
            let (state, next_timer) = {
                let mut w = writer.lock().await;
                // About to wait: whether or not it wrote, this run no longer holds others
                // back (see `engine::Resuming`).
                w.resuming = None;
                (w.view.state(), w.view.next_timer())
            };
            if state.is_terminal() {
                return Ok(RunExit::Finished(state));
            }
            let now = sh.clock.now();
            if inflight.is_empty() {
                if state == RunState::NeedsOperator {
                    // A paused run is never held, even with a near deadline: the lease is
                    // given back with the deadline as its wake-up (any worker unwinds it).
                    info!(%run_id, "the run needs an operator");
                    return Ok(match next_timer {
                        None => RunExit::NeedsOperator,
                        Some(t) => RunExit::Released(Some(t)),
                    });
                }
                match next_timer {
                    None => return Ok(RunExit::Released(None)),
                    Some(t) if t.duration_since(now) > sh.config.hold_threshold => {
                        return Ok(RunExit::Released(Some(t)));
                    }
                    Some(_) => {}
                }
            }
            let sleep_for = next_timer
                .map(|t| t.duration_since(now))
                .unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    let done = match done {
                        Ok((id, d)) => { task_idx.remove(&id); d }
                        Err(e) => {
                            let Some(idx) = task_idx.remove(&e.id()) else { continue };
                            if e.is_cancelled() { continue; }
                            let Some(f) = inflight.get(&idx) else { continue };
                            AttemptDone {
                                idx,
                                phase: f.phase,
                                attempt: f.attempt,
                                result: Err(StepError::retryable("panic", format!("the step panicked: {e}"))),
                            }
                        }
                    };
                    // Only the attempt in flight for this node counts. An action attempt a
                    // cancel aborted may still complete (an abort cannot stop a step that
                    // does not yield); by then the node's undo can hold its slot, and the
                    // late result must not be credited to it. Its outcome was journaled
                    // (`node_failed`) by the cancel.
                    match inflight.get(&done.idx) {
                        Some(f) if f.phase == done.phase && f.attempt == done.attempt => {}
                        _ => continue,
                    }
                    let Some(flight) = inflight.remove(&done.idx) else {
                        continue;
                    };
                    let mut w = writer.lock().await;
                    let name = w.view.dag.nodes[done.idx].name.clone();
                    let mut events = outcome_events(&w.view, &done, sh.clock.now());
                    // A checkpoint saved during the poll already re-entered `running`.
                    let still_quiet = flight.quiet
                        && reenter_quiet(&w.view, &name, done.phase).is_some();
                    if still_quiet {
                        if let Some(until) = unchanged_wait(&w.view, done.idx, &events) {
                            // A poll that changed nothing: no event, only the summary.
                            w.view.quiet_poll(done.idx, until);
                            w.touch().await?;
                            continue;
                        }
                        // News: the attempt re-enters `running` under its journaled intent,
                        // then its outcome follows.
                        let again = match done.phase {
                            Phase::Action => Event::NodeStarted { node: name.clone(), attempt: done.attempt },
                            Phase::Undo => Event::UndoStarted { node: name.clone(), attempt: done.attempt },
                        };
                        events.insert(0, again);
                    }
                    // Staged, not written: the plan at the top of the loop adds what this
                    // outcome unblocks and writes both in one append.
                    w.stage(events)?;
                    written.push((name, done.phase, done.attempt));
                }
                () = tokio::time::sleep(sleep_for), if next_timer.is_some() => {}
                () = self.notify.notified() => { check_commands = true; }
                _ = self.stop.changed() => {}
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn_attempt(
        &self,
        view: &RunView,
        idx: usize,
        phase: Phase,
        attempt: u32,
        labels: &Arc<BTreeMap<String, String>>,
        sink: &Arc<dyn CheckpointSink>,
        tasks: &mut JoinSet<AttemptDone>,
    ) -> (AbortHandle, tokio::task::Id) {
        let spec = &view.dag.nodes[idx];
        let st = &view.nodes[idx];
        let policy = match phase {
            Phase::Action => &spec.retry,
            Phase::Undo => &spec.undo_retry,
        };
        let timeout = policy.attempt_timeout();
        let ctx = StepContext {
            run_id: self.lease.run_id,
            node: spec.name.clone(),
            phase,
            attempt,
            outputs: Arc::new(view.outputs()),
            checkpoint: std::sync::Mutex::new(match phase {
                Phase::Action => st.checkpoint.clone(),
                Phase::Undo => st.undo_checkpoint.clone(),
            }),
            action_checkpoint: match phase {
                Phase::Action => None,
                Phase::Undo => st.checkpoint.clone(),
            },
            labels: labels.clone(),
            sink: sink.clone(),
            clock: self.sh.clock.clone(),
        };
        let action = self.sh.registry.get(&spec.action);
        let input = spec.input.clone();
        let output = st.output.clone();
        let hooks = self.sh.hooks.clone();
        let run_id = self.lease.run_id;
        let done = view
            .nodes
            .iter()
            .filter(|n| matches!(n.status, crate::journal::NodeStatus::Succeeded))
            .count();
        let info = crate::action::StepInfo {
            run_id,
            workflow: view.dag.workflow.clone(),
            node: spec.name.clone(),
            phase,
            progress: done as f32 / view.nodes.len().max(1) as f32,
        };
        let span = info_span!("step", node = %spec.name, ?phase, attempt);
        let h = tasks.spawn(
            async move {
                let b = |point| Boundary {
                    run_id,
                    node: &ctx.node,
                    phase,
                    attempt,
                    point,
                };
                hooks.boundary(&b(BoundaryPoint::BeforeEffect));
                let result = match action {
                    None => Err(StepError::permanent(kind::DEFINITION, "unknown action")),
                    Some(a) => {
                        let fut = async {
                            match phase {
                                Phase::Action => a.run(&ctx, input).await.map(AttemptOk::Action),
                                Phase::Undo => {
                                    a.undo(&ctx, input, output).await.map(AttemptOk::Undo)
                                }
                            }
                        };
                        match tokio::time::timeout(timeout, crate::action::in_step(info, fut)).await
                        {
                            Ok(r) => r,
                            Err(_) => Err(StepError::retryable(
                                kind::TIMEOUT,
                                format!("attempt exceeded its timeout of {timeout:?}"),
                            )),
                        }
                    }
                };
                let result = result.map_err(StepError::bounded);
                let result = match result {
                    Ok(AttemptOk::Action(crate::action::Outcome::Done(_))) => {
                        match hooks.inject_failure(&ctx.node, phase) {
                            Some(e) => Err(e),
                            None => result,
                        }
                    }
                    other => other,
                };
                hooks.boundary(&b(BoundaryPoint::AfterEffect));
                AttemptDone {
                    idx,
                    phase,
                    attempt,
                    result,
                }
            }
            .instrument(span),
        );
        let id = h.id();
        (h, id)
    }

    async fn apply_commands(
        &mut self,
        writer: &Arc<Mutex<Writer>>,
        inflight: &mut HashMap<usize, InFlight>,
        known: Option<Vec<CommandRecord>>,
    ) -> Result<(), Stop> {
        let run_id = self.lease.run_id;
        let cmds = match known {
            Some(cmds) => cmds,
            None => {
                persist(
                    &self.sh,
                    |s| async move { s.pending_commands(run_id).await },
                )
                .await?
            }
        };
        for c in cmds {
            let mut w = writer.lock().await;
            let events = command_events(&w.view, &c, inflight);
            w.write(events, vec![c.id]).await?;
        }
        Ok(())
    }

    async fn park_unreadable(&self, rec: &RunRecord, reason: String) -> Result<RunExit, Stop> {
        let reason = format!(
            "the journal cannot be read: {reason}; repair the row or resolve by hand (`hcp-workflow history {}`)",
            rec.summary.id
        );
        error!(run_id = %rec.summary.id, %reason, "parking run");
        let now = self.sh.clock.now();
        let applied: Vec<i64> = rec
            .commands
            .iter()
            .filter(|c| c.applied_at.is_none())
            .map(|c| c.id)
            .collect();
        let already = rec.summary.state == RunState::Failed
            && rec.summary.blocked_on == format!("parked: {reason}");
        let events = if already {
            vec![]
        } else {
            let ev = Event::RunParked {
                reason: reason.clone(),
                recheck: false,
            };
            let data = serde_json::to_string(&ev).map_err(|e| Stop::Broken(e.to_string()))?;
            vec![NewEvent {
                kind: ev.kind().into(),
                node: None,
                data,
                at: now,
            }]
        };
        let append = Append {
            events,
            patch: RunPatch {
                state: RunState::Failed,
                blocked_on: format!("parked: {reason}"),
                current_step: rec.summary.current_step.clone(),
                wake_at: None,
                updated_at: now,
            },
            applied_commands: applied,
            after_seq: None,
            summary_kept: false,
        };
        let lease = self.lease.clone();
        persist(&self.sh, |s| {
            let a = append.clone();
            let l = lease.clone();
            async move { s.append(&l, a).await.map(|_| ()) }
        })
        .await?;
        Ok(RunExit::Parked(reason))
    }
}

/// A driver that gives up on its run (the journal keeps refusing its writes) parks it,
/// if the journal takes that one write, so views say an operator is needed; and gives its
/// lease back either way: a lease kept by a driver that left is renewed with the worker's
/// others for ever, and no worker could take the run again.
async fn park_broken(sh: &Arc<Shared>, lease: &Lease, reason: &str) -> RunExit {
    let reason = crate::error::bound_text(
        &format!(
            "this worker gave up on the run: {reason}; fix the journal, then `hcp-workflow resume {}`",
            lease.run_id
        ),
        crate::error::MAX_MESSAGE_BYTES,
    );
    let now = sh.clock.now();
    let ev = Event::RunParked {
        reason: reason.clone(),
        recheck: false,
    };
    let parked = match serde_json::to_string(&ev) {
        Ok(data) => {
            let append = Append {
                events: vec![NewEvent {
                    kind: ev.kind().into(),
                    node: None,
                    data,
                    at: now,
                }],
                patch: RunPatch {
                    state: RunState::Failed,
                    blocked_on: format!("parked: {reason}"),
                    current_step: None,
                    wake_at: None,
                    updated_at: now,
                },
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            };
            match sh.store.append(lease, append).await {
                Ok(_) => true,
                Err(e) => {
                    warn!(run_id = %lease.run_id, error = %e, "parking the abandoned run failed");
                    false
                }
            }
        }
        Err(_) => false,
    };
    // Not parked: due again later (not at once, which would only repeat the failure).
    let wake = (!parked).then(|| now.plus(BROKEN_RETRY));
    if let Err(e) = sh.store.release(lease, wake).await {
        warn!(run_id = %lease.run_id, error = %e, "releasing the abandoned run's lease failed; it will expire");
    }
    if parked {
        RunExit::Parked(reason)
    } else {
        RunExit::Released(wake)
    }
}

/// When a run whose journal writes failed (and could not even be parked) is due again.
const BROKEN_RETRY: Duration = Duration::from_secs(300);

/// How often a run parked for steps this binary does not know is due again, so that a
/// worker whose binary knows them (a rolling upgrade) takes it over without an operator.
pub const UNKNOWN_STEP_RECHECK: Duration = Duration::from_secs(10);

/// The events that apply one operator command (always starting with the audit record).
fn command_events(
    view: &RunView,
    c: &CommandRecord,
    inflight: &mut HashMap<usize, InFlight>,
) -> Vec<Event> {
    let command: OperatorCommand = match serde_json::from_str(&c.command) {
        Ok(cmd) => cmd,
        Err(e) => {
            warn!(command = %c.command, error = %e, "ignoring an unreadable operator command");
            return vec![];
        }
    };
    let audit = |outcome: String| Event::Operator {
        command_id: c.id,
        command: command.clone(),
        by: c.requested_by.clone(),
        reason: c.reason.clone(),
        outcome,
    };
    if let Err(why) = check_command(view, &command) {
        return vec![audit(format!("refused: {why}"))];
    }
    let mut events = vec![audit(OPERATOR_APPLIED.to_string())];
    match &command {
        OperatorCommand::Cancel => {
            events.push(Event::UnwindStarted {
                cause: UnwindCause::Cancelled {
                    by: c.requested_by.clone(),
                    reason: c.reason.clone(),
                },
            });
            // Forward attempts in flight are interrupted: their nodes count as started and
            // will be undone. (Undos are never interrupted by a cancel.)
            let forward: Vec<usize> = inflight
                .iter()
                .filter(|(_, f)| f.phase == Phase::Action)
                .map(|(i, _)| *i)
                .collect();
            for idx in forward {
                if let Some(f) = inflight.remove(&idx) {
                    f.abort.abort();
                }
                events.push(Event::NodeFailed {
                    node: view.dag.nodes[idx].name.clone(),
                    error: StepError::permanent(kind::CANCELLED, "attempt interrupted by cancel"),
                    reason: format!("cancelled by {}", c.requested_by),
                });
            }
        }
        OperatorCommand::Resolve { step } => events.push(Event::UndoResolved {
            node: step.clone(),
            by: c.requested_by.clone(),
            note: c.reason.clone(),
        }),
        OperatorCommand::Resume => {
            if view.parked.is_some() {
                events.push(Event::RunUnparked);
            }
        }
        OperatorCommand::Retry { .. } => {}
    }
    events
}

/// An attempt [`plan`] starts.
struct Start {
    idx: usize,
    phase: Phase,
    attempt: u32,
    /// A poll of a waiting node: nothing journaled before it runs.
    quiet: bool,
}

/// The event that puts a node polled quietly (its status still `waiting`) back into
/// `running` under the same attempt; `None` when its attempt is journaled as running.
fn reenter_quiet(view: &RunView, node: &str, phase: Phase) -> Option<Event> {
    match (&view.node(node)?.status, phase) {
        (NodeStatus::Waiting { attempt, .. }, Phase::Action) => Some(Event::NodeStarted {
            node: node.to_string(),
            attempt: *attempt,
        }),
        (NodeStatus::UndoWaiting { attempt, .. }, Phase::Undo) => Some(Event::UndoStarted {
            node: node.to_string(),
            attempt: *attempt,
        }),
        _ => None,
    }
}

/// If `events` (the outcome of a quiet poll of node `idx`) only say it keeps waiting for
/// the same reason: when to look next.
fn unchanged_wait(view: &RunView, idx: usize, events: &[Event]) -> Option<Timestamp> {
    let status = &view.nodes.get(idx)?.status;
    match (status, events) {
        (NodeStatus::Waiting { reason: was, .. }, [Event::NodeWaiting { until, reason, .. }])
        | (
            NodeStatus::UndoWaiting { reason: was, .. },
            [Event::UndoWaiting { until, reason, .. }],
        ) if was == reason => Some(*until),
        _ => None,
    }
}

/// Decide, from the view alone, what to journal now and which attempts to start after.
fn plan(
    view: &RunView,
    inflight: &HashMap<usize, InFlight>,
    now: Timestamp,
) -> (Vec<Event>, Vec<Start>) {
    let mut events = Vec::new();
    let mut starts = Vec::new();
    if view.finished.is_some() || view.parked.is_some() {
        return (events, starts);
    }
    let exhausted = |max: u32, a: u32| max != 0 && a >= max;
    // A crash of our own process (or a lost lease) is not evidence against the step:
    // interrupted attempts do not use up the retry budget, but a crash loop still ends.
    let interrupted_exhausted = |max: u32, a: u32, interruptions: u32| {
        interruptions >= MAX_INTERRUPTIONS || exhausted(max, a.saturating_sub(interruptions))
    };
    match &view.unwinding {
        None => {
            if let Some(p) = &view.paused {
                // Nothing moves while paused; the deadline (a journaled timer) unwinds it.
                if let Some(deadline) = p.unwind_at
                    && deadline <= now
                {
                    events.push(Event::UnwindStarted {
                        cause: UnwindCause::PauseExpired {
                            node: p.step.clone(),
                            deadline,
                        },
                    });
                }
                return (events, starts);
            }
            if let Some(i) = view
                .nodes
                .iter()
                .position(|n| matches!(n.status, NodeStatus::Failed { .. }))
            {
                let step = view.dag.nodes[i].name.clone();
                // Past a pivot the run can never unwind: it pauses whatever its policy. So
                // does a pivot that failed once started: its effect may have happened and
                // cannot be undone ("when in doubt, stop for an operator"); a `cancel`
                // then undoes what can be.
                let failed_pivot = view.dag.nodes[i]
                    .pivot
                    .is_some()
                    .then_some(view.dag.nodes[i].name.as_str());
                let ev = match (view.passed_pivot().or(failed_pivot), view.dag.on_failure) {
                    (Some(pivot), _) => Event::RunPaused {
                        step,
                        cause: PauseCause::PastPivot {
                            pivot: pivot.to_string(),
                        },
                        unwind_at: None,
                    },
                    (None, FailurePolicy::Unwind) => Event::UnwindStarted {
                        cause: UnwindCause::NodeFailed { node: step },
                    },
                    (None, policy @ FailurePolicy::Pause { .. }) => Event::RunPaused {
                        step,
                        cause: PauseCause::Policy,
                        unwind_at: policy.deadline().map(|d| now.plus(d)),
                    },
                };
                events.push(ev);
                return (events, starts);
            }
            if view.nodes.iter().all(|n| n.status == NodeStatus::Succeeded) {
                events.push(Event::RunFinished {
                    state: RunState::Succeeded,
                });
                return (events, starts);
            }
            for (idx, (spec, st)) in view.dag.nodes.iter().zip(&view.nodes).enumerate() {
                if inflight.contains_key(&idx) {
                    continue;
                }
                let name = &spec.name;
                let next = match &st.status {
                    NodeStatus::Pending => {
                        let ready = spec.deps.iter().all(|d| {
                            view.node(d)
                                .is_some_and(|n| n.status == NodeStatus::Succeeded)
                        });
                        ready.then_some(1)
                    }
                    NodeStatus::Running { attempt } => {
                        // Interrupted by a crash or a lost lease.
                        if interrupted_exhausted(
                            spec.retry.max_attempts,
                            *attempt,
                            st.interruptions + 1,
                        ) {
                            events.push(Event::NodeFailed {
                                node: name.clone(),
                                error: StepError::permanent(
                                    kind::INTERRUPTED,
                                    format!(
                                        "attempt {attempt} was interrupted and no attempts are left"
                                    ),
                                ),
                                reason: "retries exhausted".into(),
                            });
                            continue;
                        }
                        Some(attempt + 1)
                    }
                    NodeStatus::Waiting { attempt, until, .. } => {
                        if *until <= now {
                            starts.push(Start {
                                idx,
                                phase: Phase::Action,
                                attempt: *attempt,
                                quiet: true,
                            });
                        }
                        None
                    }
                    NodeStatus::Stalled { attempt, .. } => st.retry_requested.then_some(*attempt),
                    NodeStatus::RetryScheduled {
                        attempt, next_at, ..
                    } => (*next_at <= now).then_some(attempt + 1),
                    _ => None,
                };
                if let Some(attempt) = next {
                    events.push(Event::NodeStarted {
                        node: name.clone(),
                        attempt,
                    });
                    starts.push(Start {
                        idx,
                        phase: Phase::Action,
                        attempt,
                        quiet: false,
                    });
                }
            }
        }
        Some(cause) => {
            let dependents = view.dag.dependents();
            let pivots = view.dag.has_pivots();
            let mut done = true;
            for (idx, (spec, st)) in view.dag.nodes.iter().zip(&view.nodes).enumerate() {
                if !matches!(
                    st.status,
                    NodeStatus::Pending | NodeStatus::Undone { .. } | NodeStatus::Kept { .. }
                ) {
                    done = false;
                }
                if inflight.contains_key(&idx) {
                    continue;
                }
                let name = &spec.name;
                let children_clear = || {
                    dependents.get(name.as_str()).is_none_or(|ds| {
                        ds.iter().all(|d| {
                            let di = view.index_of(d);
                            di.is_some_and(|di| {
                                !inflight.contains_key(&di)
                                    && matches!(
                                        view.nodes[di].status,
                                        NodeStatus::Pending
                                            | NodeStatus::Undone { .. }
                                            | NodeStatus::Kept { .. }
                                    )
                            })
                        })
                    })
                };
                let max = spec.undo_retry.max_attempts;
                let next = match &st.status {
                    s if s.unwind_entry() => {
                        if !children_clear() {
                            None
                        } else if let Some(reason) =
                            pivots.then(|| view.kept_by_pivot(idx)).flatten()
                        {
                            events.push(Event::NodeKept {
                                node: name.clone(),
                                reason,
                            });
                            None
                        } else if !spec.has_undo {
                            events.push(Event::NodeUndone {
                                node: name.clone(),
                                skipped: true,
                            });
                            None
                        } else {
                            Some(1)
                        }
                    }
                    NodeStatus::UndoRunning { attempt } => {
                        if interrupted_exhausted(max, *attempt, st.undo_interruptions + 1) {
                            events.push(Event::UndoFailed {
                                node: name.clone(),
                                error: StepError::permanent(kind::INTERRUPTED, format!("undo attempt {attempt} was interrupted and no attempts are left")),
                                reason: "retries exhausted".into(),
                            });
                            None
                        } else {
                            Some(attempt + 1)
                        }
                    }
                    NodeStatus::UndoWaiting { attempt, until, .. } => {
                        if *until <= now {
                            starts.push(Start {
                                idx,
                                phase: Phase::Undo,
                                attempt: *attempt,
                                quiet: true,
                            });
                        }
                        None
                    }
                    NodeStatus::UndoRetryScheduled {
                        attempt, next_at, ..
                    } => (*next_at <= now).then_some(attempt + 1),
                    NodeStatus::UndoFailed { .. } if st.retry_requested => Some(1),
                    _ => None,
                };
                if let Some(attempt) = next {
                    events.push(Event::UndoStarted {
                        node: name.clone(),
                        attempt,
                    });
                    starts.push(Start {
                        idx,
                        phase: Phase::Undo,
                        attempt,
                        quiet: false,
                    });
                }
            }
            if done && inflight.is_empty() && events.is_empty() && starts.is_empty() {
                let state = match cause {
                    UnwindCause::Cancelled { .. } => RunState::Cancelled,
                    UnwindCause::NodeFailed { .. } | UnwindCause::PauseExpired { .. } => {
                        RunState::RolledBack
                    }
                };
                events.push(Event::RunFinished { state });
            }
        }
    }
    (events, starts)
}

/// The events that record one attempt's outcome.
/// Interrupted attempts of one node after which it fails anyway (a crash loop).
const MAX_INTERRUPTIONS: u32 = 50;

fn outcome_events(view: &RunView, d: &AttemptDone, now: Timestamp) -> Vec<Event> {
    let spec = &view.dag.nodes[d.idx];
    let node = spec.name.clone();
    let unwinding = view.unwinding.is_some();
    match (&d.result, d.phase) {
        (Ok(AttemptOk::Action(crate::action::Outcome::Done(output))), _) => {
            vec![Event::NodeSucceeded {
                node,
                output: output.clone(),
            }]
        }
        (Ok(AttemptOk::Action(crate::action::Outcome::Wait { until, reason })), _) => {
            if unwinding {
                vec![Event::NodeFailed {
                    node,
                    error: StepError::permanent(
                        kind::CANCELLED,
                        format!("abandoned while waiting ({reason})"),
                    ),
                    reason: "the run is unwinding".into(),
                }]
            } else {
                let since = view.nodes[d.idx].wait_since.unwrap_or(now);
                let waited = now.duration_since(since);
                match spec.retry.wait_budget() {
                    Some(budget) if waited >= budget => vec![Event::NodeStalled {
                        node,
                        reason: format!(
                            "waited {} since {since}, past its budget of {}, for: {reason}",
                            human(waited),
                            human(budget)
                        ),
                    }],
                    _ => vec![Event::NodeWaiting {
                        node,
                        until: *until,
                        reason: reason.clone(),
                    }],
                }
            }
        }
        (Ok(AttemptOk::Undo(crate::action::UndoOutcome::Done)), _) => {
            vec![Event::NodeUndone {
                node,
                skipped: false,
            }]
        }
        (Ok(AttemptOk::Undo(crate::action::UndoOutcome::Wait { until, reason })), _) => {
            let since = view.nodes[d.idx].undo_wait_since.unwrap_or(now);
            let waited = now.duration_since(since);
            match spec.undo_retry.wait_budget() {
                Some(budget) if waited >= budget => vec![Event::UndoFailed {
                    node,
                    error: StepError::permanent(
                        kind::WAIT_BUDGET,
                        format!(
                            "the undo waited {} since {since}, past its budget of {}, for: {reason}",
                            human(waited),
                            human(budget)
                        ),
                    ),
                    reason: "wait budget spent".into(),
                }],
                _ => vec![Event::UndoWaiting {
                    node,
                    until: *until,
                    reason: reason.clone(),
                }],
            }
        }
        (Err(error), Phase::Action) => {
            if unwinding {
                return vec![Event::NodeFailed {
                    node,
                    error: error.clone(),
                    reason: "the run is unwinding; no further attempts".into(),
                }];
            }
            let st = &view.nodes[d.idx];
            let (hard, soft, soft_for) = counts(
                d.attempt,
                st.interruptions,
                st.soft_failures,
                st.soft_since,
                error,
                now,
            );
            match spec.retry.decide_counting(hard, soft, soft_for, error) {
                RetryDecision::RetryAfter(delay) => vec![Event::NodeRetryScheduled {
                    node,
                    attempt: d.attempt,
                    next_at: now.plus(jitter(delay, error)),
                    error: error.clone(),
                }],
                RetryDecision::GiveUp { reason } => {
                    vec![Event::NodeFailed {
                        node,
                        error: error.clone(),
                        reason,
                    }]
                }
            }
        }
        (Err(error), Phase::Undo) => {
            let decision = {
                let st = &view.nodes[d.idx];
                let (hard, soft, soft_for) = counts(
                    d.attempt,
                    st.undo_interruptions,
                    st.undo_soft_failures,
                    st.undo_soft_since,
                    error,
                    now,
                );
                spec.undo_retry.decide_counting(hard, soft, soft_for, error)
            };
            match decision {
                RetryDecision::RetryAfter(delay) => vec![Event::UndoRetryScheduled {
                    node,
                    attempt: d.attempt,
                    next_at: now.plus(jitter(delay, error)),
                    error: error.clone(),
                }],
                RetryDecision::GiveUp { reason } => {
                    vec![Event::UndoFailed {
                        node,
                        error: error.clone(),
                        reason,
                    }]
                }
            }
        }
    }
}

/// For attempt number `attempt` that failed with `error`: the attempts that failed for real
/// (interrupted and soft ones are not the step's fault), the soft failures, and how long the
/// phase has been answered "not now" — each including this attempt where it counts.
fn counts(
    attempt: u32,
    interruptions: u32,
    soft_failures: u32,
    soft_since: Option<Timestamp>,
    error: &StepError,
    now: Timestamp,
) -> (u32, u32, Duration) {
    let this_soft = crate::retry::is_soft(&error.kind);
    let hard = attempt
        .saturating_sub(interruptions)
        .saturating_sub(soft_failures);
    let soft = soft_failures + u32::from(this_soft);
    let soft_for = soft_since.map_or(Duration::ZERO, |t| now.duration_since(t));
    (hard, soft, soft_for)
}

/// The retry delay with full jitter ([`crate::retry::jittered`]), never before the
/// server's `Retry-After`. The result is journaled as `next_at`.
fn jitter(delay: Duration, error: &StepError) -> Duration {
    crate::retry::jittered(delay, error.retry_after(), rand::random::<f64>())
}

/// `1h 5m`, `12m 3s`, `4s`, `250ms`: durations for operators.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}
