//! Wait budgets per step: how long each step's durable polling may go on before the run
//! stops for an operator (see `runtime::RetryPolicy::wait_budget_ms`).
//!
//! Each step declares the class of its action's and its undo's waits beside its retry
//! policy (`hcp_activities::steps::facts::Facts::WAIT`, `UNDO_WAIT`): HostedCluster
//! `Available` and what HyperShift makes while it comes up, a release's rollout, a pool's
//! machines, a Kubernetes object's finalizers, the private-link teardown, or (every other
//! Azure step) one resource's long-running operation.
//!
//! Defaults and the config keys are in [`crate::config::WaitBudgets`]. The budgets are
//! journaled with the DAG, so a running run keeps the budgets it started with.

use crate::config::WaitBudgets;
use hcp_runtime::SagaDag;

/// Set every node's action and undo wait budget from `b`, by the classes its step
/// declares (`armOperation` for an action no registered step has).
pub fn apply(dag: &mut SagaDag, b: &WaitBudgets) {
    use hcp_activities::steps::{WaitClass, facts_of};
    for n in &mut dag.nodes {
        let (action, undo) = facts_of(&n.action)
            .map_or((WaitClass::ArmOperation, WaitClass::ArmOperation), |f| {
                (f.wait, f.undo_wait)
            });
        n.retry = n.retry.clone().with_wait_budget(b.get(action.key()));
        n.undo_retry = n.undo_retry.clone().with_wait_budget(b.get(undo.key()));
    }
}
