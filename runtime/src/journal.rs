//! The journal: events, the per-node state machine and the run view folded from them.
//!
//! A run's journal is an append-only sequence of [`Event`]s. Folding them through
//! [`RunView::apply`] gives every node's [`NodeStatus`] and the run's [`RunState`]. Each
//! node follows this machine (steno's `SagaNodeLoadStatus::next_status`, extended with
//! durable waits and journaled retries):
//!
//! ```text
//! Pending ─started(1)→ Running ─succeeded→ Succeeded
//!                        │ │ └─failed→ Failed
//!                        │ └─waiting→ Waiting ─started(same)→ Running
//!                        └─stalled (wait budget spent)→ Stalled ─started(same)→ Running
//!                                                        (operator retry: fresh budget)
//!                        └─retry scheduled(n)→ RetryScheduled ─started(n+1)→ Running
//! Running ─started(n+1)→ Running            (an attempt interrupted by a crash)
//! {Running, Waiting, RetryScheduled, Stalled, Succeeded, Failed} ─undo started(1)→ UndoRunning
//!       (or ─undone(skipped)→ Undone when the action has no undo)
//! UndoRunning ─undone→ Undone | ─undo failed→ UndoFailed | ─undo waiting→ UndoWaiting
//!             | ─undo retry scheduled(n)→ UndoRetryScheduled ─undo started(n+1)→ UndoRunning
//! UndoFailed ─undo started(1)→ UndoRunning  (operator retry)  | ─resolved→ Undone
//! ```
//!
//! A poll of a waiting node that finds nothing changed is not journaled: the node stays
//! `Waiting` under the intent its attempt journaled, and only a poll with news (done, a
//! new reason, an error, the budget spent) writes `started(same)` and its outcome. So a
//! wait costs O(1) journal events however long it lasts.
//!
//! Anything else is an [`IllegalTransition`]: the executor validates every event against
//! the in-memory view *before* writing it, and recovery re-validates on load, so a journal
//! that does not fold is reported instead of being acted upon.

use crate::dag::SagaDag;
use crate::error::StepError;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// Why a run unwinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum UnwindCause {
    /// A node failed permanently (or ran out of retries).
    NodeFailed {
        /// The failed node.
        node: String,
    },
    /// An operator cancelled the run.
    Cancelled {
        /// Who asked.
        by: String,
        /// Why.
        reason: String,
    },
    /// The run was paused by its failure policy after `node` failed, and nobody retried or
    /// cancelled it before the policy's deadline.
    PauseExpired {
        /// The failed node.
        node: String,
        /// The deadline that passed.
        deadline: Timestamp,
    },
}

/// Why a run stopped for an operator instead of unwinding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum PauseCause {
    /// The run's failure policy is `pause` (possibly with a deadline).
    Policy,
    /// A pivot has succeeded: the run can never unwind past it. Also a pivot that failed
    /// once started (then `pivot` is the failed step itself): its effect may have happened.
    PastPivot {
        /// The last pivot that succeeded, or the failed pivot.
        pivot: String,
    },
}

/// A paused run: a step failed for good and nothing was undone.
#[derive(Clone, Debug, PartialEq)]
pub struct Paused {
    /// The step whose failure paused the run.
    pub step: String,
    /// Why the run paused instead of unwinding.
    pub cause: PauseCause,
    /// When it unwinds by itself unless an operator acts first.
    pub unwind_at: Option<Timestamp>,
    /// When it paused.
    pub since: Timestamp,
}

impl Paused {
    /// `paused by policy: on-failure=pause=24h (unwinds at <t> unless retried)`: the line
    /// every view shows for a pause its policy asked for.
    pub fn policy_text(&self, policy: crate::dag::FailurePolicy) -> String {
        let when = match self.unwind_at {
            Some(t) => format!("unwinds at {t} unless retried"),
            None => "waits for an operator: retry or cancel".into(),
        };
        format!("paused by policy: on-failure={policy} ({when})")
    }
}

/// Operator commands, journaled with who, when and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum OperatorCommand {
    /// Unwind the run.
    Cancel,
    /// Run a waiting or backing-off step now, or retry a stuck undo with a fresh budget.
    /// Without a step: every such step of the run.
    Retry {
        /// The step, or all.
        step: Option<String>,
    },
    /// Mark a stuck undo as done by hand.
    Resolve {
        /// The step whose undo is stuck.
        step: String,
    },
    /// Un-park a failed run (e.g. after upgrading the binary) and retry stuck undos.
    Resume,
}

impl fmt::Display for OperatorCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cancel => f.write_str("cancel"),
            Self::Retry { step: None } => f.write_str("retry"),
            Self::Retry { step: Some(s) } => write!(f, "retry --step {s}"),
            Self::Resolve { step } => write!(f, "resolve --step {step}"),
            Self::Resume => f.write_str("resume"),
        }
    }
}

/// `outcome` of an [`Event::Operator`] whose command took effect.
pub const OPERATOR_APPLIED: &str = "applied";

/// One journal entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// Intent: attempt `attempt` of the action is about to run.
    NodeStarted { node: String, attempt: u32 },
    /// The action saved a mid-step checkpoint.
    NodeCheckpoint {
        node: String,
        data: serde_json::Value,
    },
    /// The action asked to be re-run at `until`.
    NodeWaiting {
        node: String,
        until: Timestamp,
        reason: String,
    },
    /// The action kept waiting past its wait budget: an operator must retry or cancel.
    NodeStalled { node: String, reason: String },
    /// Attempt `attempt` failed; the next one is due at `next_at`.
    NodeRetryScheduled {
        node: String,
        attempt: u32,
        next_at: Timestamp,
        error: StepError,
    },
    /// The action completed.
    NodeSucceeded {
        node: String,
        output: serde_json::Value,
    },
    /// The action failed for good.
    NodeFailed {
        node: String,
        error: StepError,
        reason: String,
    },
    /// The run starts unwinding.
    UnwindStarted { cause: UnwindCause },
    /// Intent: attempt `attempt` of the undo is about to run.
    UndoStarted { node: String, attempt: u32 },
    /// The undo saved a checkpoint.
    UndoCheckpoint {
        node: String,
        data: serde_json::Value,
    },
    /// The undo asked to be re-run at `until`.
    UndoWaiting {
        node: String,
        until: Timestamp,
        reason: String,
    },
    /// Undo attempt `attempt` failed; the next one is due at `next_at`.
    UndoRetryScheduled {
        node: String,
        attempt: u32,
        next_at: Timestamp,
        error: StepError,
    },
    /// The node's effects are gone (`skipped`: it has no undo).
    NodeUndone { node: String, skipped: bool },
    /// The undo gave up: the run needs an operator.
    UndoFailed {
        node: String,
        error: StepError,
        reason: String,
    },
    /// An operator declared a stuck undo done by hand.
    UndoResolved {
        node: String,
        by: String,
        note: String,
    },
    /// An operator command was applied (or refused, see `outcome`).
    Operator {
        command_id: i64,
        command: OperatorCommand,
        by: String,
        reason: String,
        outcome: String,
    },
    /// A step failed for good and the run stops for an operator, keeping every step's
    /// work (its failure policy, or a pivot behind it). `unwind_at`: the journaled timer
    /// at which it unwinds by itself.
    RunPaused {
        step: String,
        cause: PauseCause,
        unwind_at: Option<Timestamp>,
    },
    /// While unwinding: the node's effects stay, because it is a pivot or came before one
    /// that succeeded (it is never undone).
    NodeKept { node: String, reason: String },
    /// The run cannot be executed by this binary; it waits for an operator, or (`recheck`:
    /// its plan names steps this binary does not know) for a worker that knows them, which
    /// takes it over by itself (a rolling upgrade).
    RunParked {
        reason: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        recheck: bool,
    },
    /// A parked run is tried again.
    RunUnparked,
    /// The run is over.
    RunFinished { state: RunState },
}

impl Event {
    /// The node this event is about, if any.
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::NodeStarted { node, .. }
            | Self::NodeCheckpoint { node, .. }
            | Self::NodeWaiting { node, .. }
            | Self::NodeStalled { node, .. }
            | Self::NodeRetryScheduled { node, .. }
            | Self::NodeSucceeded { node, .. }
            | Self::NodeFailed { node, .. }
            | Self::UndoStarted { node, .. }
            | Self::UndoCheckpoint { node, .. }
            | Self::UndoWaiting { node, .. }
            | Self::UndoRetryScheduled { node, .. }
            | Self::NodeUndone { node, .. }
            | Self::UndoFailed { node, .. }
            | Self::UndoResolved { node, .. }
            | Self::NodeKept { node, .. } => Some(node),
            _ => None,
        }
    }

    /// Short type name (`node_started`, …) as stored in the `kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NodeStarted { .. } => "node_started",
            Self::NodeCheckpoint { .. } => "node_checkpoint",
            Self::NodeWaiting { .. } => "node_waiting",
            Self::NodeStalled { .. } => "node_stalled",
            Self::NodeRetryScheduled { .. } => "node_retry_scheduled",
            Self::NodeSucceeded { .. } => "node_succeeded",
            Self::NodeFailed { .. } => "node_failed",
            Self::UnwindStarted { .. } => "unwind_started",
            Self::UndoStarted { .. } => "undo_started",
            Self::UndoCheckpoint { .. } => "undo_checkpoint",
            Self::UndoWaiting { .. } => "undo_waiting",
            Self::UndoRetryScheduled { .. } => "undo_retry_scheduled",
            Self::NodeUndone { .. } => "node_undone",
            Self::UndoFailed { .. } => "undo_failed",
            Self::UndoResolved { .. } => "undo_resolved",
            Self::Operator { .. } => "operator",
            Self::RunPaused { .. } => "run_paused",
            Self::NodeKept { .. } => "node_kept",
            Self::RunParked { .. } => "run_parked",
            Self::RunUnparked => "run_unparked",
            Self::RunFinished { .. } => "run_finished",
        }
    }
}

/// The state of a run, as users see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    /// Journaled, not picked up yet.
    Pending,
    /// A step is executing.
    Running,
    /// Every in-flight step waits on a durable timer (poll or retry).
    Waiting,
    /// Compensations are running.
    Unwinding,
    /// Every step succeeded.
    Succeeded,
    /// A step failed and every started step was undone.
    RolledBack,
    /// An undo gave up, or a step waited past its budget: an operator must retry, resolve
    /// or cancel.
    NeedsOperator,
    /// The run was parked (unknown step, undecodable journal): nothing runs until an
    /// operator resumes it.
    Failed,
    /// An operator cancelled and every started step was undone.
    Cancelled,
}

impl RunState {
    /// All states, for filters and metrics.
    pub const ALL: [RunState; 9] = [
        Self::Pending,
        Self::Running,
        Self::Waiting,
        Self::Unwinding,
        Self::Succeeded,
        Self::RolledBack,
        Self::NeedsOperator,
        Self::Failed,
        Self::Cancelled,
    ];

    /// Finished for good: no worker will touch it again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::RolledBack | Self::Cancelled)
    }

    /// The kebab-case name (`needs-operator`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Unwinding => "unwinding",
            Self::Succeeded => "succeeded",
            Self::RolledBack => "rolled-back",
            Self::NeedsOperator => "needs-operator",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parse the kebab-case name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's place in its state machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum NodeStatus {
    /// Never started.
    Pending,
    /// Attempt `attempt` was journaled as started (in flight, or interrupted by a crash).
    Running { attempt: u32 },
    /// Durable poll: re-run at `until`.
    Waiting {
        attempt: u32,
        until: Timestamp,
        reason: String,
    },
    /// Attempt `attempt` failed; next attempt at `next_at`.
    RetryScheduled {
        attempt: u32,
        next_at: Timestamp,
        error: StepError,
    },
    /// Waited past its budget: nothing runs until an operator retries or cancels.
    Stalled { attempt: u32, reason: String },
    /// Done.
    Succeeded,
    /// Failed for good.
    Failed { error: StepError },
    /// Undo attempt in flight (or interrupted).
    UndoRunning { attempt: u32 },
    /// Undo polling.
    UndoWaiting {
        attempt: u32,
        until: Timestamp,
        reason: String,
    },
    /// Undo attempt failed; next at `next_at`.
    UndoRetryScheduled {
        attempt: u32,
        next_at: Timestamp,
        error: StepError,
    },
    /// Effects removed (`skipped`: no undo; `resolved`: by an operator).
    Undone { skipped: bool, resolved: bool },
    /// Undo gave up.
    UndoFailed { error: StepError },
    /// Never undone: a pivot, or a step at or before a pivot that succeeded. `reason` says
    /// which.
    Kept { reason: String },
}

impl NodeStatus {
    /// Short name for display.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running { .. } => "started",
            Self::Waiting { .. } => "waiting",
            Self::RetryScheduled { .. } => "retry-scheduled",
            Self::Stalled { .. } => "stalled",
            Self::Succeeded => "succeeded",
            Self::Failed { .. } => "failed",
            Self::UndoRunning { .. } => "undo-started",
            Self::UndoWaiting { .. } => "undo-waiting",
            Self::UndoRetryScheduled { .. } => "undo-retry-scheduled",
            Self::Undone { .. } => "undone",
            Self::UndoFailed { .. } => "undo-failed",
            Self::Kept { .. } => "kept",
        }
    }

    /// Whether the forward action ever started (so unwinding must undo it).
    pub fn started(&self) -> bool {
        !matches!(self, Self::Pending)
    }

    /// A forward status an unwind acts on (undoes, skips or keeps): started, and neither
    /// undone nor kept yet, nor in its undo.
    pub fn unwind_entry(&self) -> bool {
        matches!(
            self,
            Self::Running { .. }
                | Self::Waiting { .. }
                | Self::RetryScheduled { .. }
                | Self::Stalled { .. }
                | Self::Succeeded
                | Self::Failed { .. }
        )
    }

    /// The forward half is in progress (not finished).
    pub fn forward_active(&self) -> bool {
        matches!(
            self,
            Self::Running { .. } | Self::Waiting { .. } | Self::RetryScheduled { .. }
        )
    }
}

/// An event that does not fit the state machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition for `{subject}`: `{event}` in state `{from}`")]
pub struct IllegalTransition {
    /// Node name, or `run`.
    pub subject: String,
    /// The current state.
    pub from: String,
    /// The refused event kind.
    pub event: String,
}

/// What the journal says about one node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeState {
    /// State machine position.
    pub status: NodeStatus,
    /// Output once succeeded.
    pub output: Option<serde_json::Value>,
    /// Latest action checkpoint.
    pub checkpoint: Option<serde_json::Value>,
    /// Latest undo checkpoint.
    pub undo_checkpoint: Option<serde_json::Value>,
    /// Action attempts journaled so far.
    pub attempts: u32,
    /// Undo attempts journaled so far (reset by an operator retry).
    pub undo_attempts: u32,
    /// Most recent error (action or undo).
    pub last_error: Option<StepError>,
    /// First start.
    pub started_at: Option<Timestamp>,
    /// Forward completion (succeeded or failed).
    pub finished_at: Option<Timestamp>,
    /// First undo start.
    pub undo_started_at: Option<Timestamp>,
    /// Undo completion.
    pub undone_at: Option<Timestamp>,
    /// An operator asked to retry this node's stuck undo.
    pub retry_requested: bool,
    /// Action attempts interrupted by a crash or a lost lease (started again without an
    /// outcome). Not the step's fault: they do not use up its retry budget.
    pub interruptions: u32,
    /// When the action's current wait began (its first `waiting` since it started or an
    /// operator gave it a fresh budget); the wait budget counts from here.
    pub wait_since: Option<Timestamp>,
    /// When the undo's current wait began.
    pub undo_wait_since: Option<Timestamp>,
    /// Polls of the current wait that changed nothing (not journaled: known only to the
    /// driver holding the run, which shows it in the run's one-line summary).
    #[serde(skip)]
    pub quiet_polls: u32,
    /// Undo attempts interrupted likewise.
    pub undo_interruptions: u32,
    /// Failed action attempts that were only "not now" answers (throttled, transient:
    /// [`crate::retry::is_soft`]). They do not use up the attempts meant for real
    /// failures; the time since `soft_since` is their budget instead.
    #[serde(default)]
    pub soft_failures: u32,
    /// When the action's first soft failure was journaled.
    #[serde(default)]
    pub soft_since: Option<Timestamp>,
    /// Soft failures of the undo (reset by an operator retry).
    #[serde(default)]
    pub undo_soft_failures: u32,
    /// When the undo's first soft failure was journaled.
    #[serde(default)]
    pub undo_soft_since: Option<Timestamp>,
    /// Who declared the stuck undo done by hand, and their note (`alice@host: deleted in
    /// the portal`); the ledger keeps the node's resources visible as resolved, not
    /// deleted, because nobody here saw them go.
    pub resolved_by: Option<String>,
    /// How often an operator re-ran this step after it failed for good in a paused run
    /// (each redrive starts a fresh retry budget).
    #[serde(default)]
    pub redrives: u32,
}

impl NodeState {
    fn new() -> Self {
        Self {
            status: NodeStatus::Pending,
            output: None,
            checkpoint: None,
            undo_checkpoint: None,
            attempts: 0,
            undo_attempts: 0,
            last_error: None,
            started_at: None,
            finished_at: None,
            undo_started_at: None,
            undone_at: None,
            retry_requested: false,
            interruptions: 0,
            undo_interruptions: 0,
            soft_failures: 0,
            soft_since: None,
            undo_soft_failures: 0,
            undo_soft_since: None,
            wait_since: None,
            undo_wait_since: None,
            quiet_polls: 0,
            resolved_by: None,
            redrives: 0,
        }
    }

    /// An operator's `retry` of a step that failed for good in a paused run: it is
    /// scheduled to run again at once, with a fresh retry and wait budget. It stays
    /// "started" (its failed attempt may have left effects its undo must clean up).
    fn redrive(&mut self, at: Timestamp) {
        if let NodeStatus::Failed { error } = &self.status {
            self.status = NodeStatus::RetryScheduled {
                attempt: 0,
                next_at: at,
                error: error.clone(),
            };
            self.redrives += 1;
            self.attempts = 0;
            self.interruptions = 0;
            self.soft_failures = 0;
            self.soft_since = None;
            self.wait_since = None;
            self.quiet_polls = 0;
            self.finished_at = None;
        }
    }

    /// Apply a node event at time `at`.
    ///
    /// # Errors
    /// [`IllegalTransition`] when the event does not follow from the current status.
    pub fn apply(
        &mut self,
        name: &str,
        ev: &Event,
        at: Timestamp,
    ) -> Result<(), IllegalTransition> {
        use NodeStatus as S;
        let illegal = |from: &S| IllegalTransition {
            subject: name.to_string(),
            from: from.name().to_string(),
            event: ev.kind().to_string(),
        };
        let next = match (&self.status, ev) {
            (S::Pending, Event::NodeStarted { attempt: 1, .. }) => {
                self.started_at = Some(at);
                S::Running { attempt: 1 }
            }
            (S::Waiting { attempt: a, .. }, Event::NodeStarted { attempt, .. }) if attempt == a => {
                S::Running { attempt: *attempt }
            }
            (S::RetryScheduled { attempt: a, .. }, Event::NodeStarted { attempt, .. })
                if *attempt == a + 1 =>
            {
                S::Running { attempt: *attempt }
            }
            (S::Running { attempt: a }, Event::NodeStarted { attempt, .. })
                if *attempt == a + 1 =>
            {
                self.interruptions += 1;
                S::Running { attempt: *attempt }
            }
            (S::Running { .. }, Event::NodeCheckpoint { data, .. }) => {
                self.checkpoint = Some(data.clone());
                self.status.clone()
            }
            (S::Running { attempt }, Event::NodeWaiting { until, reason, .. }) => {
                self.wait_since.get_or_insert(at);
                S::Waiting {
                    attempt: *attempt,
                    until: *until,
                    reason: reason.clone(),
                }
            }
            (S::Running { attempt }, Event::NodeStalled { reason, .. }) => S::Stalled {
                attempt: *attempt,
                reason: reason.clone(),
            },
            (S::Stalled { attempt: a, .. }, Event::NodeStarted { attempt, .. }) if attempt == a => {
                S::Running { attempt: *attempt }
            }
            (
                S::Running { attempt: a },
                Event::NodeRetryScheduled {
                    attempt,
                    next_at,
                    error,
                    ..
                },
            ) if attempt == a => {
                self.last_error = Some(error.clone());
                if crate::retry::is_soft(&error.kind) {
                    self.soft_failures += 1;
                    self.soft_since.get_or_insert(at);
                }
                S::RetryScheduled {
                    attempt: *attempt,
                    next_at: *next_at,
                    error: error.clone(),
                }
            }
            (S::Running { .. }, Event::NodeSucceeded { output, .. }) => {
                self.output = Some(output.clone());
                self.finished_at = Some(at);
                self.wait_since = None;
                S::Succeeded
            }
            (
                S::Running { .. }
                | S::Waiting { .. }
                | S::RetryScheduled { .. }
                | S::Stalled { .. },
                Event::NodeFailed { error, .. },
            ) => {
                self.wait_since = None;
                self.last_error = Some(error.clone());
                self.finished_at = Some(at);
                S::Failed {
                    error: error.clone(),
                }
            }
            (from, Event::UndoStarted { attempt: 1, .. }) if from.unwind_entry() => {
                self.undo_started_at = Some(at);
                self.undo_attempts = 1;
                S::UndoRunning { attempt: 1 }
            }
            (S::UndoFailed { .. }, Event::UndoStarted { attempt: 1, .. }) => {
                // An operator's retry: a fresh attempt and wait budget.
                self.undo_attempts = 1;
                self.undo_wait_since = None;
                self.undo_soft_failures = 0;
                self.undo_soft_since = None;
                S::UndoRunning { attempt: 1 }
            }
            (S::UndoWaiting { attempt: a, .. }, Event::UndoStarted { attempt, .. })
                if attempt == a =>
            {
                S::UndoRunning { attempt: *attempt }
            }
            (S::UndoRetryScheduled { attempt: a, .. }, Event::UndoStarted { attempt, .. })
                if *attempt == a + 1 =>
            {
                self.undo_attempts = *attempt;
                S::UndoRunning { attempt: *attempt }
            }
            (S::UndoRunning { attempt: a }, Event::UndoStarted { attempt, .. })
                if *attempt == a + 1 =>
            {
                self.undo_attempts = *attempt;
                self.undo_interruptions += 1;
                S::UndoRunning { attempt: *attempt }
            }
            (S::UndoRunning { .. }, Event::UndoCheckpoint { data, .. }) => {
                self.undo_checkpoint = Some(data.clone());
                self.status.clone()
            }
            (S::UndoRunning { attempt }, Event::UndoWaiting { until, reason, .. }) => {
                self.undo_wait_since.get_or_insert(at);
                S::UndoWaiting {
                    attempt: *attempt,
                    until: *until,
                    reason: reason.clone(),
                }
            }
            (
                S::UndoRunning { attempt: a },
                Event::UndoRetryScheduled {
                    attempt,
                    next_at,
                    error,
                    ..
                },
            ) if attempt == a => {
                self.last_error = Some(error.clone());
                if crate::retry::is_soft(&error.kind) {
                    self.undo_soft_failures += 1;
                    self.undo_soft_since.get_or_insert(at);
                }
                S::UndoRetryScheduled {
                    attempt: *attempt,
                    next_at: *next_at,
                    error: error.clone(),
                }
            }
            (S::UndoRunning { .. }, Event::NodeUndone { skipped: false, .. }) => {
                self.undone_at = Some(at);
                S::Undone {
                    skipped: false,
                    resolved: false,
                }
            }
            (from, Event::NodeUndone { skipped: true, .. }) if from.unwind_entry() => {
                self.undone_at = Some(at);
                S::Undone {
                    skipped: true,
                    resolved: false,
                }
            }
            (
                S::UndoRunning { .. } | S::UndoWaiting { .. } | S::UndoRetryScheduled { .. },
                Event::UndoFailed { error, .. },
            ) => {
                self.last_error = Some(error.clone());
                S::UndoFailed {
                    error: error.clone(),
                }
            }
            (S::UndoFailed { .. }, Event::UndoResolved { by, note, .. }) => {
                self.undone_at = Some(at);
                self.resolved_by = Some(if note.is_empty() {
                    by.clone()
                } else {
                    format!("{by}: {note}")
                });
                S::Undone {
                    skipped: false,
                    resolved: true,
                }
            }
            (from, Event::NodeKept { reason, .. }) if from.unwind_entry() => S::Kept {
                reason: reason.clone(),
            },
            (from, _) => return Err(illegal(from)),
        };
        if let Event::NodeStarted { attempt, .. } = ev {
            self.attempts = *attempt;
        }
        if let Event::UndoStarted { .. } = ev {
            self.retry_requested = false;
        }
        if matches!(self.status, S::Stalled { .. }) && matches!(ev, Event::NodeStarted { .. }) {
            self.retry_requested = false;
        }
        if !matches!(next, S::Waiting { .. } | S::UndoWaiting { .. }) {
            self.quiet_polls = 0;
        }
        self.status = next;
        Ok(())
    }
}

/// A run folded from its DAG and journal.
#[derive(Clone, Debug)]
pub struct RunView {
    /// The persisted DAG.
    pub dag: SagaDag,
    /// Node states, in DAG order.
    pub nodes: Vec<NodeState>,
    index: HashMap<String, usize>,
    /// Set once unwinding started.
    pub unwinding: Option<UnwindCause>,
    /// The error of the forward failure that started the unwind (`None` for a cancel).
    pub unwind_error: Option<StepError>,
    /// Set while parked.
    pub parked: Option<String>,
    /// Parked for steps this binary does not know: any worker that knows them takes the
    /// run over (it stays due every [`crate::UNKNOWN_STEP_RECHECK`]).
    pub parked_recheck: bool,
    /// Set while paused after a step failed for good (its failure policy, or a pivot).
    pub paused: Option<Paused>,
    /// Set once finished.
    pub finished: Option<RunState>,
    /// Number of events applied.
    pub events: u64,
}

impl RunView {
    /// An empty view of `dag`.
    pub fn new(dag: SagaDag) -> Self {
        let index = dag
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let nodes = dag.nodes.iter().map(|_| NodeState::new()).collect();
        Self {
            dag,
            nodes,
            index,
            unwinding: None,
            unwind_error: None,
            parked: None,
            parked_recheck: false,
            paused: None,
            finished: None,
            events: 0,
        }
    }

    /// Index of a node by name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// State of a node by name.
    pub fn node(&self, name: &str) -> Option<&NodeState> {
        self.index_of(name).map(|i| &self.nodes[i])
    }

    /// Validate and apply one event.
    ///
    /// # Errors
    /// [`IllegalTransition`] when the event does not follow (unknown node, wrong status,
    /// a second unwind, anything after the run finished).
    pub fn apply(&mut self, ev: &Event, at: Timestamp) -> Result<(), IllegalTransition> {
        let run_illegal = |from: &str| IllegalTransition {
            subject: "run".into(),
            from: from.into(),
            event: ev.kind().into(),
        };
        if let Some(s) = self.finished {
            return Err(run_illegal(s.as_str()));
        }
        match ev {
            Event::UnwindStarted { cause } => {
                if self.unwinding.is_some() {
                    return Err(run_illegal("unwinding"));
                }
                self.unwinding = Some(cause.clone());
                self.paused = None;
                if let UnwindCause::NodeFailed { node } | UnwindCause::PauseExpired { node, .. } =
                    cause
                {
                    self.unwind_error = self.node(node).and_then(|n| n.last_error.clone());
                }
            }
            Event::RunPaused {
                step,
                cause,
                unwind_at,
            } => {
                if self.unwinding.is_some() {
                    return Err(run_illegal("unwinding"));
                }
                if self.paused.is_some() {
                    return Err(run_illegal("paused"));
                }
                if !self
                    .node(step)
                    .is_some_and(|n| matches!(n.status, NodeStatus::Failed { .. }))
                {
                    return Err(IllegalTransition {
                        subject: step.clone(),
                        from: self
                            .node(step)
                            .map_or("unknown-node", |n| n.status.name())
                            .into(),
                        event: ev.kind().into(),
                    });
                }
                self.paused = Some(Paused {
                    step: step.clone(),
                    cause: cause.clone(),
                    unwind_at: *unwind_at,
                    since: at,
                });
            }
            Event::RunParked { reason, recheck } => {
                self.parked = Some(reason.clone());
                self.parked_recheck = *recheck;
            }
            Event::RunUnparked => {
                self.parked_recheck = false;
                if self.parked.take().is_none() {
                    return Err(run_illegal("not-parked"));
                }
            }
            Event::RunFinished { state } => {
                let ok = match state {
                    RunState::Succeeded => {
                        self.unwinding.is_none()
                            && self.nodes.iter().all(|n| n.status == NodeStatus::Succeeded)
                    }
                    RunState::RolledBack | RunState::Cancelled => {
                        self.unwinding.is_some()
                            && self.nodes.iter().all(|n| {
                                matches!(
                                    n.status,
                                    NodeStatus::Pending
                                        | NodeStatus::Undone { .. }
                                        | NodeStatus::Kept { .. }
                                )
                            })
                    }
                    _ => false,
                };
                if !ok {
                    return Err(run_illegal(self.state().as_str()));
                }
                self.finished = Some(*state);
            }
            Event::Operator {
                command, outcome, ..
            } => {
                if outcome == OPERATOR_APPLIED {
                    self.apply_operator(command, at);
                }
            }
            other => {
                let Some(name) = other.node() else {
                    return Err(run_illegal("?"));
                };
                let Some(i) = self.index_of(name) else {
                    return Err(IllegalTransition {
                        subject: name.to_string(),
                        from: "unknown-node".into(),
                        event: ev.kind().into(),
                    });
                };
                // Forward progress after unwinding started is refused: the saga only goes
                // backwards from there (an in-flight attempt may still report its result).
                // Re-entering a waiting attempt (a quiet poll with news) continues an
                // attempt already journaled: not new progress.
                if (self.unwinding.is_some() || self.paused.is_some())
                    && let Event::NodeStarted { attempt, .. } = ev
                    && !matches!(self.nodes[i].status, NodeStatus::Waiting { attempt: a, .. } if a == *attempt)
                {
                    return Err(run_illegal(if self.unwinding.is_some() {
                        "unwinding"
                    } else {
                        "paused"
                    }));
                }
                self.nodes[i].apply(name, ev, at)?;
            }
        }
        self.events += 1;
        Ok(())
    }

    fn apply_operator(&mut self, command: &OperatorCommand, at: Timestamp) {
        let (step, stuck_only) = match command {
            OperatorCommand::Retry { step } => (step.as_deref(), false),
            OperatorCommand::Resume => (None, true),
            _ => return,
        };
        if self.paused.is_some() && !stuck_only {
            // Redrive: the failed step(s) run again with a fresh budget, then the run goes
            // on forward. Work that succeeded is kept.
            for (spec, st) in self.dag.nodes.iter().zip(self.nodes.iter_mut()) {
                if step.is_none_or(|s| s == spec.name) {
                    st.redrive(at);
                }
            }
            // Paused on until every failed step was retried (a sibling may have failed too
            // while the first failure's pause was being journaled); the pause then names
            // one that is still failed.
            let still_failed = self
                .dag
                .nodes
                .iter()
                .zip(&self.nodes)
                .find(|(_, n)| matches!(n.status, NodeStatus::Failed { .. }))
                .map(|(spec, _)| spec.name.clone());
            match (still_failed, self.paused.as_mut()) {
                (None, _) => self.paused = None,
                (Some(step), Some(p)) => p.step = step,
                (Some(_), None) => {}
            }
        }
        for (spec, st) in self.dag.nodes.iter().zip(self.nodes.iter_mut()) {
            if step.is_some_and(|s| s != spec.name) {
                continue;
            }
            match &mut st.status {
                NodeStatus::UndoFailed { .. } => st.retry_requested = true,
                NodeStatus::Stalled { .. } => {
                    // A fresh wait budget, counted from the retried attempt's first wait.
                    st.retry_requested = true;
                    st.wait_since = None;
                }
                _ if stuck_only => {}
                NodeStatus::Waiting { until, .. } | NodeStatus::UndoWaiting { until, .. } => {
                    *until = (*until).min(at)
                }
                NodeStatus::RetryScheduled { next_at, .. }
                | NodeStatus::UndoRetryScheduled { next_at, .. } => *next_at = (*next_at).min(at),
                _ => {}
            }
        }
    }

    /// The run's user-facing state.
    pub fn state(&self) -> RunState {
        if let Some(s) = self.finished {
            return s;
        }
        if self.parked.is_some() {
            return RunState::Failed;
        }
        if self.unwinding.is_some() {
            if self
                .nodes
                .iter()
                .any(|n| matches!(n.status, NodeStatus::UndoFailed { .. }))
            {
                return RunState::NeedsOperator;
            }
            return RunState::Unwinding;
        }
        if self.paused.is_some() {
            return RunState::NeedsOperator;
        }
        if self.nodes.iter().all(|n| n.status == NodeStatus::Pending) {
            return RunState::Pending;
        }
        // A stalled step stops the run once nothing else can move on its own (a stalled
        // step that was just retried is about to run again).
        if self
            .nodes
            .iter()
            .any(|n| matches!(n.status, NodeStatus::Stalled { .. }) && !n.retry_requested)
            && !self.nodes.iter().any(|n| n.status.forward_active())
        {
            return RunState::NeedsOperator;
        }
        let running = self
            .nodes
            .iter()
            .any(|n| matches!(n.status, NodeStatus::Running { .. }));
        let waiting = self.nodes.iter().any(|n| {
            matches!(
                n.status,
                NodeStatus::Waiting { .. } | NodeStatus::RetryScheduled { .. }
            )
        });
        if !running && waiting {
            RunState::Waiting
        } else {
            RunState::Running
        }
    }

    /// The step operators should look at first: a stuck undo, an active undo, a waiting or
    /// running step, in that order.
    pub fn current_step(&self) -> Option<&str> {
        if let Some(p) = &self.paused {
            return Some(&p.step);
        }
        let pick = |f: &dyn Fn(&NodeStatus) -> bool| {
            self.dag
                .nodes
                .iter()
                .zip(&self.nodes)
                .find(|(_, s)| f(&s.status))
                .map(|(n, _)| n.name.as_str())
        };
        pick(&|s| {
            matches!(
                s,
                NodeStatus::UndoFailed { .. } | NodeStatus::Stalled { .. }
            )
        })
        .or_else(|| {
            pick(&|s| {
                matches!(
                    s,
                    NodeStatus::UndoRunning { .. }
                        | NodeStatus::UndoWaiting { .. }
                        | NodeStatus::UndoRetryScheduled { .. }
                )
            })
        })
        .or_else(|| pick(&|s| matches!(s, NodeStatus::RetryScheduled { .. })))
        .or_else(|| pick(&|s| s.forward_active()))
    }

    /// One line: what the run waits for, and until when.
    pub fn blocked_on(&self) -> String {
        match self.state() {
            RunState::Succeeded => return "nothing: every step succeeded".into(),
            // The cause stays in the line (and so in every list and search) after the run
            // ended: which step failed with which code, or who cancelled.
            RunState::RolledBack => {
                return match (&self.unwinding, &self.unwind_error) {
                    (Some(UnwindCause::NodeFailed { node }), Some(e)) => format!(
                        "nothing: rolled back after {node} failed: {}",
                        e.code.as_deref().unwrap_or(&e.kind)
                    ),
                    (Some(UnwindCause::NodeFailed { node }), None) => {
                        format!("nothing: rolled back after {node} failed")
                    }
                    (Some(UnwindCause::PauseExpired { node, deadline }), e) => format!(
                        "nothing: rolled back after {node} failed{}; it was paused until {deadline} and nobody retried it",
                        e.as_ref()
                            .map(|e| format!(": {}", e.code.as_deref().unwrap_or(&e.kind)))
                            .unwrap_or_default()
                    ),
                    _ => "nothing: rolled back".into(),
                };
            }
            RunState::Cancelled => {
                let kept = self.kept_count();
                return match (&self.unwinding, kept) {
                    (Some(UnwindCause::Cancelled { by, .. }), k) if self.dag.forward_only() => {
                        format!(
                            "nothing: cancelled by {by}; a forward-only run undoes nothing: {k} step{} done stay done",
                            if k == 1 { "" } else { "s" }
                        )
                    }
                    (Some(UnwindCause::Cancelled { by, .. }), 0) => {
                        format!("nothing: cancelled by {by} and unwound")
                    }
                    (Some(UnwindCause::Cancelled { by, .. }), k) => format!(
                        "nothing: cancelled by {by}; unwound back to the pivot, {k} step{} kept (cannot be undone)",
                        if k == 1 { "" } else { "s" }
                    ),
                    _ => "nothing: cancelled and unwound".into(),
                };
            }
            RunState::Pending => return "waiting for a worker to pick the run up".into(),
            RunState::Failed => {
                return format!(
                    "parked: {}",
                    self.parked.as_deref().unwrap_or("unknown reason")
                );
            }
            _ => {}
        }
        if let Some(p) = &self.paused {
            return self.paused_line(p);
        }
        let Some(step) = self.current_step() else {
            return "between steps".into();
        };
        let Some(n) = self.node(step) else {
            return "between steps".into();
        };
        let max = |undo: bool| {
            self.dag
                .node(step)
                .map(|s| {
                    if undo {
                        s.undo_retry.max_attempts
                    } else {
                        s.retry.max_attempts
                    }
                })
                .unwrap_or(0)
        };
        let of = |m: u32| {
            if m == 0 {
                "∞".to_string()
            } else {
                m.to_string()
            }
        };
        match &n.status {
            NodeStatus::UndoFailed { error } => format!(
                "undo of {step} gave up after {} attempt{}: {error}",
                n.undo_attempts,
                if n.undo_attempts == 1 { "" } else { "s" }
            ),
            NodeStatus::UndoRunning { attempt } => {
                format!("undoing {step} (attempt {attempt}/{})", of(max(true)))
            }
            NodeStatus::UndoWaiting { until, reason, .. } => {
                let since = n
                    .undo_wait_since
                    .map(|t| format!(" (waiting since {t})"))
                    .unwrap_or_default();
                format!("undo of {step} waits until {until}: {reason}{since}")
            }
            NodeStatus::UndoRetryScheduled {
                attempt,
                next_at,
                error,
            } => format!(
                "undo of {step} retries at {next_at} (attempt {}/{}{}) after: {error}",
                attempt + 1,
                of(max(true)),
                soft_note(n.undo_soft_failures)
            ),
            NodeStatus::Running { attempt } => {
                format!("running {step} (attempt {attempt}/{})", of(max(false)))
            }
            NodeStatus::Waiting { until, reason, .. } => {
                let mut line = format!("{step} waits until {until}: {reason}");
                if let Some(t) = n.wait_since {
                    line.push_str(&format!(" (waiting since {t}"));
                    if n.quiet_polls > 0 {
                        let s = if n.quiet_polls == 1 { "" } else { "s" };
                        line.push_str(&format!(
                            "{QUIET_POLLS_PREFIX}{} poll{s} without change",
                            n.quiet_polls
                        ));
                    }
                    line.push(')');
                }
                line
            }
            NodeStatus::Stalled { reason, .. } => {
                format!("{step} stalled: {reason}")
            }
            NodeStatus::RetryScheduled {
                attempt,
                next_at,
                error,
            } => format!(
                "{step} retries at {next_at} (attempt {}/{}{}) after: {error}",
                attempt + 1,
                of(max(false)),
                soft_note(n.soft_failures)
            ),
            other => format!("{step}: {}", other.name()),
        }
    }

    /// The one-line reason of a paused run: why it paused, the failed step and its error,
    /// and when (if ever) it unwinds by itself.
    fn paused_line(&self, p: &Paused) -> String {
        let error = self
            .node(&p.step)
            .and_then(|n| n.last_error.as_ref())
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        match &p.cause {
            PauseCause::Policy => format!(
                "{}; {} failed{error}",
                p.policy_text(self.dag.on_failure),
                p.step
            ),
            PauseCause::PastPivot { .. } if self.dag.forward_only() => {
                let done = self
                    .nodes
                    .iter()
                    .filter(|n| n.status == NodeStatus::Succeeded)
                    .count();
                format!(
                    "stopped partway (forward-only): {done} of {} steps done, none can be undone; {} failed{error}; `retry` continues",
                    self.nodes.len(),
                    p.step
                )
            }
            PauseCause::PastPivot { pivot } if *pivot == p.step => format!(
                "paused at the pivot {pivot}: it failed after it started, so its effect may have happened and cannot be undone; retry, or cancel to undo what can be; {} failed{error}",
                p.step
            ),
            PauseCause::PastPivot { pivot } => format!(
                "paused past the pivot {pivot} (it cannot be undone): retry, or cancel to undo only what came after it; {} failed{error}",
                p.step
            ),
        }
    }

    /// Nodes kept (never undone) by the unwind: pivots and what came before them.
    pub fn kept_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.status, NodeStatus::Kept { .. }))
            .count()
    }

    /// The last pivot (in DAG order) that has succeeded: the run's point of no return.
    pub fn passed_pivot(&self) -> Option<&str> {
        self.dag
            .nodes
            .iter()
            .zip(&self.nodes)
            .filter(|(spec, st)| spec.pivot.is_some() && st.status == NodeStatus::Succeeded)
            .map(|(spec, _)| spec.name.as_str())
            .next_back()
    }

    /// Whether an unwind must keep node `idx` (never undo it): it is a pivot, or it is not
    /// a strict descendant of every pivot that succeeded (so it came at or before one).
    pub fn kept_by_pivot(&self, idx: usize) -> Option<String> {
        let spec = self.dag.nodes.get(idx)?;
        if let Some(why) = &spec.pivot {
            return Some(format!("pivot: {why}"));
        }
        self.dag
            .nodes
            .iter()
            .enumerate()
            .zip(&self.nodes)
            // Succeeded (its output is journaled), even if already marked kept.
            .filter(|((_, p), st)| p.pivot.is_some() && st.output.is_some())
            .find(|((pi, _), _)| !self.dag.descends_from(idx, *pi))
            .map(|((_, p), _)| format!("at or before the pivot {}", p.name))
    }

    /// The earliest durable timer among nodes that are waiting (poll or retry); while
    /// paused, only the pause's deadline (nothing else moves).
    pub fn next_timer(&self) -> Option<Timestamp> {
        if let Some(p) = &self.paused {
            return p.unwind_at;
        }
        self.nodes
            .iter()
            .filter_map(|n| match &n.status {
                NodeStatus::Waiting { until, .. } | NodeStatus::UndoWaiting { until, .. } => {
                    Some(*until)
                }
                NodeStatus::RetryScheduled { next_at, .. }
                | NodeStatus::UndoRetryScheduled { next_at, .. } => Some(*next_at),
                _ => None,
            })
            .min()
    }

    /// Outputs of succeeded nodes, by name.
    pub fn outputs(&self) -> HashMap<String, serde_json::Value> {
        self.dag
            .nodes
            .iter()
            .zip(&self.nodes)
            .filter_map(|(spec, st)| st.output.clone().map(|o| (spec.name.clone(), o)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dag::NodeSpec;
    use crate::retry::RetryPolicy;

    fn dag() -> SagaDag {
        let n = |name: &str, deps: &[&str]| NodeSpec {
            name: name.into(),
            action: "a".into(),
            stage: "s".into(),
            input: serde_json::Value::Null,
            deps: deps.iter().map(|s| s.to_string()).collect(),
            retry: RetryPolicy::default(),
            undo_retry: RetryPolicy::default(),
            has_undo: true,
            pivot: None,
        };
        SagaDag {
            workflow: "w".into(),
            version: 1,
            stages: vec!["s".into()],
            nodes: vec![n("a", &[]), n("b", &["a"])],
            on_failure: Default::default(),
            record: None,
        }
    }

    fn started(n: &str, a: u32) -> Event {
        Event::NodeStarted {
            node: n.into(),
            attempt: a,
        }
    }

    /// Two siblings failed (the second while the first's pause was journaled): the run
    /// stays paused until both are retried, and the pause always names a failed one.
    #[test]
    fn a_pause_lasts_until_every_failed_step_was_retried() {
        let mut d = dag();
        let mut c = d.nodes[1].clone();
        c.name = "c".into();
        d.nodes.push(c);
        d.on_failure = crate::FailurePolicy::pause(None);
        let mut v = RunView::new(d);
        let t = Timestamp(1);
        let failed = |n: &str| Event::NodeFailed {
            node: n.into(),
            error: StepError::permanent("validation", "x"),
            reason: "permanent".into(),
        };
        let retry = |step: &str| Event::Operator {
            command_id: 1,
            command: OperatorCommand::Retry {
                step: Some(step.into()),
            },
            by: "alice".into(),
            reason: String::new(),
            outcome: OPERATOR_APPLIED.into(),
        };
        v.apply(&started("a", 1), t).unwrap();
        v.apply(
            &Event::NodeSucceeded {
                node: "a".into(),
                output: serde_json::json!({}),
            },
            t,
        )
        .unwrap();
        v.apply(&started("b", 1), t).unwrap();
        v.apply(&started("c", 1), t).unwrap();
        v.apply(&failed("b"), t).unwrap();
        v.apply(
            &Event::RunPaused {
                step: "b".into(),
                cause: PauseCause::Policy,
                unwind_at: None,
            },
            t,
        )
        .unwrap();
        v.apply(&failed("c"), t).unwrap();
        assert_eq!(v.state(), RunState::NeedsOperator);
        // Nothing starts while paused.
        assert!(v.apply(&started("b", 2), t).is_err());
        v.apply(&retry("b"), t).unwrap();
        assert_eq!(v.paused.as_ref().map(|p| p.step.as_str()), Some("c"));
        assert!(matches!(
            v.node("b").unwrap().status,
            NodeStatus::RetryScheduled { attempt: 0, .. }
        ));
        v.apply(&retry("c"), t).unwrap();
        assert!(v.paused.is_none());
        assert_ne!(v.state(), RunState::NeedsOperator);
        v.apply(&started("b", 1), t).unwrap();
        assert_eq!(v.node("b").unwrap().redrives, 1);
    }

    #[test]
    fn attempts_restarted_without_an_outcome_count_as_interruptions() {
        let mut v = RunView::new(dag());
        let t = Timestamp(1);
        v.apply(&started("a", 1), t).unwrap();
        // The process died: the next process starts attempt 2 from `Running`.
        v.apply(&started("a", 2), t).unwrap();
        v.apply(&started("a", 3), t).unwrap();
        assert_eq!(v.node("a").unwrap().interruptions, 2);
        // A failed attempt followed by a scheduled retry is not an interruption.
        v.apply(
            &Event::NodeRetryScheduled {
                node: "a".into(),
                attempt: 3,
                next_at: t,
                error: StepError::retryable("transient", "x"),
            },
            t,
        )
        .unwrap();
        v.apply(&started("a", 4), t).unwrap();
        assert_eq!(v.node("a").unwrap().interruptions, 2);
    }

    #[test]
    fn happy_path_and_finish() {
        let mut v = RunView::new(dag());
        let t = Timestamp(1);
        assert_eq!(v.state(), RunState::Pending);
        v.apply(&started("a", 1), t).unwrap();
        assert_eq!(v.state(), RunState::Running);
        v.apply(
            &Event::NodeSucceeded {
                node: "a".into(),
                output: 1.into(),
            },
            t,
        )
        .unwrap();
        v.apply(&started("b", 1), t).unwrap();
        let err = StepError::retryable("throttled", "429");
        v.apply(
            &Event::NodeRetryScheduled {
                node: "b".into(),
                attempt: 1,
                next_at: Timestamp(9),
                error: err,
            },
            t,
        )
        .unwrap();
        assert_eq!(v.state(), RunState::Waiting);
        assert_eq!(v.next_timer(), Some(Timestamp(9)));
        assert!(
            v.blocked_on().contains("attempt 2/10"),
            "{}",
            v.blocked_on()
        );
        v.apply(&started("b", 2), t).unwrap();
        v.apply(
            &Event::NodeSucceeded {
                node: "b".into(),
                output: 2.into(),
            },
            t,
        )
        .unwrap();
        v.apply(
            &Event::RunFinished {
                state: RunState::Succeeded,
            },
            t,
        )
        .unwrap();
        assert_eq!(v.state(), RunState::Succeeded);
        assert!(
            v.apply(&started("a", 2), t).is_err(),
            "nothing after finish"
        );
    }

    #[test]
    fn illegal_transitions_are_refused() {
        let mut v = RunView::new(dag());
        let t = Timestamp(1);
        assert!(
            v.apply(&started("a", 2), t).is_err(),
            "first attempt must be 1"
        );
        assert!(
            v.apply(
                &Event::NodeSucceeded {
                    node: "a".into(),
                    output: 1.into()
                },
                t
            )
            .is_err()
        );
        assert!(v.apply(&started("zzz", 1), t).is_err(), "unknown node");
        assert!(
            v.apply(
                &Event::UndoStarted {
                    node: "a".into(),
                    attempt: 1
                },
                t
            )
            .is_err(),
            "never started"
        );
        assert!(
            v.apply(
                &Event::RunFinished {
                    state: RunState::Succeeded
                },
                t
            )
            .is_err()
        );
        v.apply(&started("a", 1), t).unwrap();
        assert!(
            v.apply(&started("a", 3), t).is_err(),
            "attempts go one by one"
        );
        v.apply(
            &Event::UnwindStarted {
                cause: UnwindCause::NodeFailed { node: "a".into() },
            },
            t,
        )
        .unwrap();
        assert!(
            v.apply(&started("b", 1), t).is_err(),
            "no forward progress while unwinding"
        );
        assert!(
            v.apply(
                &Event::UnwindStarted {
                    cause: UnwindCause::NodeFailed { node: "a".into() }
                },
                t
            )
            .is_err()
        );
    }

    #[test]
    fn stuck_undo_needs_operator_then_resolves() {
        let mut v = RunView::new(dag());
        let t = Timestamp(1);
        v.apply(&started("a", 1), t).unwrap();
        let e = StepError::permanent("validation", "boom");
        v.apply(
            &Event::NodeFailed {
                node: "a".into(),
                error: e.clone(),
                reason: "x".into(),
            },
            t,
        )
        .unwrap();
        v.apply(
            &Event::UnwindStarted {
                cause: UnwindCause::NodeFailed { node: "a".into() },
            },
            t,
        )
        .unwrap();
        v.apply(
            &Event::UndoStarted {
                node: "a".into(),
                attempt: 1,
            },
            t,
        )
        .unwrap();
        v.apply(
            &Event::UndoFailed {
                node: "a".into(),
                error: e,
                reason: "x".into(),
            },
            t,
        )
        .unwrap();
        assert_eq!(v.state(), RunState::NeedsOperator);
        assert!(
            v.apply(
                &Event::RunFinished {
                    state: RunState::RolledBack
                },
                t
            )
            .is_err()
        );
        assert!(
            v.blocked_on().contains("gave up after 1 attempt: "),
            "{}",
            v.blocked_on()
        );
        v.apply(
            &Event::UndoResolved {
                node: "a".into(),
                by: "op".into(),
                note: "gone".into(),
            },
            t,
        )
        .unwrap();
        v.apply(
            &Event::RunFinished {
                state: RunState::RolledBack,
            },
            t,
        )
        .unwrap();
        assert_eq!(v.state(), RunState::RolledBack);
        assert_eq!(
            v.node("a").unwrap().resolved_by.as_deref(),
            Some("op: gone")
        );
        // The cause stays in the finished run's line (lists, searches).
        assert_eq!(
            v.blocked_on(),
            "nothing: rolled back after a failed: validation"
        );
    }
}

/// How [`RunView::blocked_on`] introduces the quiet-poll count (parsed back by
/// [`quiet_polls_in`]).
const QUIET_POLLS_PREFIX: &str = ", ";

/// The quiet-poll count a summary line written by [`RunView::blocked_on`] shows. Quiet
/// polls are not journaled, so a driver that takes the run over continues the count the
/// previous holder last wrote into the run's summary instead of starting again at zero.
pub fn quiet_polls_in(blocked_on: &str) -> u32 {
    blocked_on
        .split_once(" without change)")
        .and_then(|(head, _)| head.rsplit_once(QUIET_POLLS_PREFIX))
        .and_then(|(_, count)| count.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl RunView {
    /// Seed the quiet-poll count of the waiting node `step` (see [`quiet_polls_in`]).
    pub(crate) fn seed_quiet_polls(&mut self, step: &str, polls: u32) {
        if let Some(i) = self.index_of(step) {
            let n = &mut self.nodes[i];
            if matches!(
                n.status,
                NodeStatus::Waiting { .. } | NodeStatus::UndoWaiting { .. }
            ) {
                n.quiet_polls = polls;
            }
        }
    }

    /// Record a poll of a waiting node (action or undo) that changed nothing: the next look
    /// is at `until`. Not an event: such polls are not journaled (see the module docs), so
    /// only the driver holding the run calls this, and the next event about the node
    /// (`started(same)`) is valid from the state it leaves.
    pub(crate) fn quiet_poll(&mut self, idx: usize, next: Timestamp) {
        if let Some(n) = self.nodes.get_mut(idx) {
            match &mut n.status {
                NodeStatus::Waiting { until, .. } | NodeStatus::UndoWaiting { until, .. } => {
                    *until = next;
                    n.quiet_polls += 1;
                }
                _ => {}
            }
        }
    }
}

/// ", 16 throttled/transient not counted": why an attempt number may pass the maximum
/// (soft answers spend the transient budget, not attempts; see `retry::is_soft`).
fn soft_note(soft: u32) -> String {
    if soft == 0 {
        String::new()
    } else {
        format!(", {soft} throttled/transient not counted")
    }
}

#[cfg(test)]
mod quiet_poll_tests {
    use super::quiet_polls_in;

    #[test]
    fn the_count_is_read_back_from_the_summary_line() {
        assert_eq!(
            quiet_polls_in("a waits until T: x (waiting since S, 17 polls without change)"),
            17
        );
        assert_eq!(
            quiet_polls_in("a waits until T: x, y (waiting since S, 1 poll without change)"),
            1
        );
        assert_eq!(quiet_polls_in("a waits until T: x (waiting since S)"), 0);
        assert_eq!(quiet_polls_in("running a (attempt 1/10)"), 0);
    }
}
