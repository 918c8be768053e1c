//! # hcp-runtime: the durable saga engine
//!
//! A workflow is a DAG of nodes; each node declares an action and its undo side by side
//! ([`Action`]). The DAG is built once from the workflow's input ([`SagaBuilder`]) and
//! persisted with the run, so recovery never depends on today's code's idea of it. Every
//! transition is journaled through a [`JournalStore`] before the side effect it announces,
//! retries and waits are durable timers computed by the engine, and a failure or a
//! cancellation unwinds the saga by undoing every started node in reverse dependency order.
//!
//! Module map:
//! - [`dag`]: definitions and the builder; [`action`]: the `Action` trait, contexts, registry.
//! - [`journal`]: events, the per-node state machine, the folded [`RunView`].
//! - [`store`]: the storage contract; [`memory`]: the in-memory implementation.
//! - [`engine`]: starting runs, operator commands, workers; `driver`: one run's executor;
//!   [`health`]: what a worker knows of its own health (probes, metrics).
//! - [`retry`]: policies and delays; [`time`]: journal time; [`error`]: step errors.
//!
//! # Architecture invariant
//! This crate knows nothing of sqlx, azure_core, kube or clap: storage, cloud calls and the
//! command line are other crates' business.

pub mod action;
pub mod benchkit;
pub mod conformance;
#[doc(hidden)]
pub mod conformance_engine;
pub mod dag;
mod driver;
pub mod engine;
pub mod error;
pub mod health;
pub mod journal;
pub mod ledger;
pub mod memory;
pub mod retry;
pub mod store;
pub mod testkit;
pub mod time;

pub use action::{
    Action, CheckpointCell, Outcome, Phase, Registry, RegistryError, StepContext, StepInfo,
    UndoOutcome, current_step, in_step,
};
pub use dag::{DagError, FailurePolicy, NodeOptions, NodeSpec, Ref, SagaBuilder, SagaDag};
pub use driver::UNKNOWN_STEP_RECHECK;
pub use engine::{
    Boundary, BoundaryPoint, Engine, EngineConfig, EngineError, EngineHooks, NoHooks, RunExit,
    StartOptions, Started,
};
pub use error::StepError;
pub use health::WorkerHealth;
pub use journal::{
    Event, NodeState, NodeStatus, OperatorCommand, PauseCause, Paused, RunState, RunView,
    UnwindCause,
};
pub use memory::MemoryStore;
pub use retry::RetryPolicy;
pub use store::{
    ExecutorHolder, JournalStore, NewReport, ReportFilter, ReportRecord, RunFilter, RunId,
    RunSummary, StoreError, TokenGrant,
};
pub use time::{AlignedClock, Alignment, Clock, SystemClock, Timestamp, TokioClock};
