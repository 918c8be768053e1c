//! Actions: a node's side effect and its undo, declared together.
//!
//! An [`Action`] is typed (serde input and output); the [`Registry`] erases the types so
//! the executor can run any persisted node by its action name. Steps share state only
//! through journaled outputs of their ancestors ([`StepContext::output`]) and their own
//! mid-step checkpoint ([`StepContext::checkpoint`]).
//!
//! # Contract for implementors
//! - `run` must be idempotent: it may be re-run after a crash at any point, including after
//!   its side effect happened but before the engine journaled the outcome.
//! - `undo` must tolerate "never happened": it runs for every node that *started*, and the
//!   action may have failed (or crashed) before doing anything.
//! - Long waits are not slept in memory: return [`Outcome::Wait`] and the engine re-runs the
//!   action after a durable timer.

use crate::dag::{Ref, decode};
use crate::error::{StepError, kind};
use crate::retry::RetryPolicy;
use crate::time::{Clock, Timestamp};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Boxed future used by the type-erased layer.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an action attempt produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// The step is complete; its output is journaled.
    Done(T),
    /// Not yet: run the action again at `until` (durable polling).
    Wait {
        /// When to look again.
        until: Timestamp,
        /// What we are waiting for, shown to operators.
        reason: String,
    },
}

/// What an undo attempt produced.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoOutcome {
    /// The node's effects are gone.
    Done,
    /// Not yet: run the undo again at `until`.
    Wait {
        /// When to look again.
        until: Timestamp,
        /// What we are waiting for.
        reason: String,
    },
}

/// A saga step: action and undo side by side.
pub trait Action: Send + Sync + 'static {
    /// Stable registered name, e.g. `create-cluster.pls.ensure`. Persisted: renaming it
    /// breaks runs in flight.
    const NAME: &'static str;
    /// Whether [`Action::undo`] does something. Nodes without an undo are simply marked
    /// undone when unwinding.
    const HAS_UNDO: bool = true;
    /// Typed input, fixed when the DAG is built.
    type Input: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// Typed output, journaled on success.
    type Output: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Default retry policy of the action (a node may override it).
    fn retry_policy() -> RetryPolicy {
        RetryPolicy::default()
    }

    /// Default retry policy of the undo. Undos try harder than actions: giving up means
    /// paging a human.
    fn undo_retry_policy() -> RetryPolicy {
        RetryPolicy::default().with_max_attempts(20)
    }

    /// Perform (or continue) the step.
    fn run(
        &self,
        ctx: &StepContext,
        input: Self::Input,
    ) -> impl Future<Output = Result<Outcome<Self::Output>, StepError>> + Send;

    /// Reverse the step. `output` is present when the action had succeeded.
    fn undo(
        &self,
        ctx: &StepContext,
        input: Self::Input,
        output: Option<Self::Output>,
    ) -> impl Future<Output = Result<UndoOutcome, StepError>> + Send {
        let _ = (ctx, input, output);
        async { Ok(UndoOutcome::Done) }
    }
}

/// Which half of a node is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The forward action.
    Action,
    /// The compensation.
    Undo,
}

/// Durable checkpoint writes go through the run's single journal writer.
pub(crate) trait CheckpointSink: Send + Sync {
    fn save<'a>(
        &'a self,
        node: &'a str,
        phase: Phase,
        data: serde_json::Value,
    ) -> BoxFuture<'a, Result<(), StepError>>;
}

tokio::task_local! {
    static CURRENT_STEP: StepInfo;
}

/// Which step the current task runs, for code far below the step that has no
/// [`StepContext`] (an HTTP client deciding whose request goes first). Set by the engine
/// around every attempt; read with [`current_step`].
#[derive(Clone, Debug, PartialEq)]
pub struct StepInfo {
    /// The run.
    pub run_id: Uuid,
    /// Its workflow (the DAG's name).
    pub workflow: String,
    /// The node.
    pub node: String,
    /// Action or undo.
    pub phase: Phase,
    /// How far the run is: its succeeded nodes over all its nodes (0 to 1) when the
    /// attempt began.
    pub progress: f32,
}

/// The step the current task is running an attempt of, if any.
pub fn current_step() -> Option<StepInfo> {
    CURRENT_STEP.try_with(Clone::clone).ok()
}

/// Run `f` as an attempt of `info` ([`current_step`] inside it says so).
pub async fn in_step<F: std::future::Future>(info: StepInfo, f: F) -> F::Output {
    CURRENT_STEP.scope(info, f).await
}

/// Everything a step may know about its run.
pub struct StepContext {
    pub(crate) run_id: Uuid,
    pub(crate) node: String,
    pub(crate) phase: Phase,
    pub(crate) attempt: u32,
    pub(crate) outputs: Arc<HashMap<String, serde_json::Value>>,
    pub(crate) checkpoint: std::sync::Mutex<Option<serde_json::Value>>,
    /// For an undo: the action's last checkpoint (what the forward half recorded, e.g. the
    /// children it was about to create). `None` for an action.
    pub(crate) action_checkpoint: Option<serde_json::Value>,
    pub(crate) labels: Arc<std::collections::BTreeMap<String, String>>,
    pub(crate) sink: Arc<dyn CheckpointSink>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl fmt::Debug for StepContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepContext")
            .field("run_id", &self.run_id)
            .field("node", &self.node)
            .field("phase", &self.phase)
            .field("attempt", &self.attempt)
            .finish()
    }
}

impl StepContext {
    /// The run.
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Action or undo.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// 1-based attempt number of this phase.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The run's labels (e.g. `cluster`).
    pub fn labels(&self) -> &std::collections::BTreeMap<String, String> {
        &self.labels
    }

    /// Journal time now.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// `Outcome::Wait` helper: look again after `d`.
    pub fn wait<T>(&self, d: Duration, reason: impl Into<String>) -> Outcome<T> {
        Outcome::Wait {
            until: self.now().plus(d),
            reason: reason.into(),
        }
    }

    /// `UndoOutcome::Wait` helper.
    pub fn undo_wait(&self, d: Duration, reason: impl Into<String>) -> UndoOutcome {
        UndoOutcome::Wait {
            until: self.now().plus(d),
            reason: reason.into(),
        }
    }

    /// The journaled output of an ancestor.
    ///
    /// # Errors
    /// A permanent `definition` error if the node has no output (it is not an ancestor, or
    /// the persisted output no longer decodes into `T`).
    pub fn output<T: DeserializeOwned>(&self, r: &Ref<T>) -> Result<T, StepError> {
        let v = self.outputs.get(r.node()).cloned().ok_or_else(|| {
            StepError::permanent(
                kind::DEFINITION,
                format!("node `{}` has no output from `{}`", self.node, r.node()),
            )
        })?;
        decode(&format!("output of `{}`", r.node()), v)
    }

    /// This node's last saved checkpoint (from this or an earlier attempt or process).
    ///
    /// # Errors
    /// A permanent `definition` error if the saved checkpoint does not decode into `T`.
    pub fn checkpoint<T: DeserializeOwned>(&self) -> Result<Option<T>, StepError> {
        let v = self
            .checkpoint
            .lock()
            .map_err(|_| StepError::retryable(kind::TRANSIENT, "checkpoint lock poisoned"))?
            .clone();
        match v {
            None => Ok(None),
            Some(v) => decode("checkpoint", v).map(Some),
        }
    }

    /// For an undo: the forward action's last checkpoint, whether or not the action
    /// succeeded. Steps that create untagged children (federated credentials, record sets)
    /// journal each child's name there *before* creating it, so the undo can delete exactly
    /// what this run created and nothing that existed before. `None` in an action, or when
    /// the action saved none.
    ///
    /// # Errors
    /// A permanent `definition` error if the checkpoint does not decode into `T`.
    pub fn action_checkpoint<T: DeserializeOwned>(&self) -> Result<Option<T>, StepError> {
        match &self.action_checkpoint {
            None => Ok(None),
            Some(v) => decode("action checkpoint", v.clone()).map(Some),
        }
    }

    /// Durably save a checkpoint before going on (e.g. an Azure operation URL right after
    /// the PUT was accepted). A resumed attempt reads it back with [`Self::checkpoint`].
    ///
    /// # Errors
    /// A retryable error if the journal write could not be made (lease lost).
    pub async fn save_checkpoint<T: Serialize>(&self, value: &T) -> Result<(), StepError> {
        let v = serde_json::to_value(value).map_err(|e| {
            StepError::permanent(
                kind::DEFINITION,
                format!("checkpoint not serializable: {e}"),
            )
        })?;
        self.sink.save(&self.node, self.phase, v.clone()).await?;
        if let Ok(mut g) = self.checkpoint.lock() {
            *g = Some(v);
        }
        Ok(())
    }
}

/// Checkpoints saved by a [`StepContext::detached`] context.
pub type CheckpointCell = Arc<std::sync::Mutex<Vec<serde_json::Value>>>;

struct CellSink(CheckpointCell);

impl CheckpointSink for CellSink {
    fn save<'a>(
        &'a self,
        _node: &'a str,
        _phase: Phase,
        data: serde_json::Value,
    ) -> BoxFuture<'a, Result<(), StepError>> {
        Box::pin(async move {
            self.0
                .lock()
                .map_err(|_| StepError::retryable(kind::TRANSIENT, "checkpoint cell poisoned"))?
                .push(data);
            Ok(())
        })
    }
}

impl StepContext {
    /// [`Self::detached`] for an undo whose action saved `action_checkpoint`.
    #[allow(clippy::too_many_arguments)]
    pub fn detached_undo(
        run_id: Uuid,
        node: &str,
        attempt: u32,
        checkpoint: Option<serde_json::Value>,
        action_checkpoint: Option<serde_json::Value>,
        outputs: HashMap<String, serde_json::Value>,
        labels: std::collections::BTreeMap<String, String>,
    ) -> (Self, CheckpointCell) {
        let (mut ctx, cell) = Self::detached(
            run_id,
            node,
            Phase::Undo,
            attempt,
            checkpoint,
            outputs,
            labels,
        );
        ctx.action_checkpoint = action_checkpoint;
        (ctx, cell)
    }

    /// A context outside any engine, for testing activities on their own (and for
    /// dry runs): checkpoints saved go to the returned cell, `checkpoint` starts as given,
    /// ancestor outputs come from `outputs`, time is the system clock.
    pub fn detached(
        run_id: Uuid,
        node: &str,
        phase: Phase,
        attempt: u32,
        checkpoint: Option<serde_json::Value>,
        outputs: HashMap<String, serde_json::Value>,
        labels: std::collections::BTreeMap<String, String>,
    ) -> (Self, CheckpointCell) {
        let cell: CheckpointCell = Arc::default();
        let ctx = StepContext {
            run_id,
            node: node.to_string(),
            phase,
            attempt,
            outputs: Arc::new(outputs),
            checkpoint: std::sync::Mutex::new(checkpoint),
            action_checkpoint: None,
            labels: Arc::new(labels),
            sink: Arc::new(CellSink(cell.clone())),
            clock: Arc::new(crate::time::SystemClock),
        };
        (ctx, cell)
    }
}

/// Type-erased outcome.
pub(crate) type RawOutcome = Outcome<serde_json::Value>;

pub(crate) trait ErasedAction: Send + Sync {
    fn run<'a>(
        &'a self,
        ctx: &'a StepContext,
        input: serde_json::Value,
    ) -> BoxFuture<'a, Result<RawOutcome, StepError>>;
    fn undo<'a>(
        &'a self,
        ctx: &'a StepContext,
        input: serde_json::Value,
        output: Option<serde_json::Value>,
    ) -> BoxFuture<'a, Result<UndoOutcome, StepError>>;
}

struct Erased<A>(A);

impl<A: Action> ErasedAction for Erased<A> {
    fn run<'a>(
        &'a self,
        ctx: &'a StepContext,
        input: serde_json::Value,
    ) -> BoxFuture<'a, Result<RawOutcome, StepError>> {
        Box::pin(async move {
            let input: A::Input = decode("input", input)?;
            match self.0.run(ctx, input).await? {
                Outcome::Done(out) => {
                    let v = serde_json::to_value(out).map_err(|e| {
                        StepError::permanent(
                            kind::DEFINITION,
                            format!("output not serializable: {e}"),
                        )
                    })?;
                    Ok(Outcome::Done(v))
                }
                Outcome::Wait { until, reason } => Ok(Outcome::Wait { until, reason }),
            }
        })
    }

    fn undo<'a>(
        &'a self,
        ctx: &'a StepContext,
        input: serde_json::Value,
        output: Option<serde_json::Value>,
    ) -> BoxFuture<'a, Result<UndoOutcome, StepError>> {
        Box::pin(async move {
            let input: A::Input = decode("input", input)?;
            let output: Option<A::Output> = match output {
                None => None,
                Some(v) => Some(decode("output", v)?),
            };
            self.0.undo(ctx, input, output).await
        })
    }
}

/// Errors registering actions.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    /// Two actions share a name.
    #[error("action `{0}` registered twice")]
    Duplicate(String),
}

/// The actions this binary knows, by name.
#[derive(Clone, Default)]
pub struct Registry {
    actions: HashMap<&'static str, Arc<dyn ErasedAction>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.actions.keys().collect();
        names.sort();
        f.debug_struct("Registry").field("actions", &names).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register `action` under `A::NAME`.
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] if the name is taken.
    pub fn register<A: Action>(&mut self, action: A) -> Result<&mut Self, RegistryError> {
        if self.actions.contains_key(A::NAME) {
            return Err(RegistryError::Duplicate(A::NAME.to_string()));
        }
        self.actions.insert(A::NAME, Arc::new(Erased(action)));
        Ok(self)
    }

    /// Forget the action `name` (a binary that predates it, in tests of rolling upgrades).
    /// Whether it was known.
    pub fn remove(&mut self, name: &str) -> bool {
        self.actions.remove(name).is_some()
    }

    /// Whether an action of that name is known.
    pub fn contains(&self, name: &str) -> bool {
        self.actions.contains_key(name)
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn ErasedAction>> {
        self.actions.get(name).cloned()
    }
}
