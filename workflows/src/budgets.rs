//! Wait budgets per step: how long each step's durable polling may go on before the run
//! stops for an operator (see `runtime::RetryPolicy::wait_budget_ms`).
//!
//! | Step (action)                                   | Action budget          | Undo budget           |
//! |-------------------------------------------------|------------------------|-----------------------|
//! | `k8s.condition.wait` (HostedCluster Available)  | hostedClusterAvailable | —                     |
//! | `k8s.rollout.wait` (the guest's rollout)        | clusterRollout         | —                     |
//! | `k8s.node-pool.apply` (NodePool Ready)          | nodePoolReady          | kubernetesDeletion    |
//! | `k8s.hosted-cluster.apply`                      | armOperation           | kubernetesDeletion    |
//! | `k8s.node-pool.update` (scale, new template)    | nodePoolReady          | nodePoolReady         |
//! | `k8s.node-pool.release` (a pool's upgrade)      | nodePoolReady          | —                     |
//! | `k8s.hosted-cluster.release` (control plane)    | clusterRollout         | —                     |
//! | `k8s.object.delete` (delete-cluster)            | kubernetesDeletion     | —                     |
//! | `azure.private-link-service.ensure`             | armOperation           | privateLinkTeardown   |
//! | `azure.private-link-service.delete`             | privateLinkTeardown    | —                     |
//! | `hypershift.private-link-service.wait`          | hostedClusterAvailable | —                     |
//! | `hypershift.private-endpoint.wait`              | hostedClusterAvailable | —                     |
//! | `hypershift.private-link.release`               | privateLinkTeardown    | —                     |
//! | `hypershift.private-link.verify-gone`           | privateLinkTeardown    | —                     |
//! | every other Azure step (one resource's LRO)     | armOperation           | armOperation          |
//!
//! Defaults and the config keys are in [`crate::config::WaitBudgets`]. The budgets are
//! journaled with the DAG, so a running run keeps the budgets it started with.

use crate::config::WaitBudgets;
use hcp_runtime::SagaDag;

/// Set every node's action and undo wait budget from `b` (by the table above).
pub fn apply(dag: &mut SagaDag, b: &WaitBudgets) {
    let arm = b.get("armOperation");
    for n in &mut dag.nodes {
        let (action, undo) = match n.action.as_str() {
            "k8s.condition.wait" => (b.get("hostedClusterAvailable"), arm),
            "k8s.rollout.wait" => (b.get("clusterRollout"), arm),
            "k8s.node-pool.apply" => (b.get("nodePoolReady"), b.get("kubernetesDeletion")),
            "k8s.hosted-cluster.apply" => (arm, b.get("kubernetesDeletion")),
            "k8s.node-pool.update" => (b.get("nodePoolReady"), b.get("nodePoolReady")),
            "k8s.node-pool.release" => (b.get("nodePoolReady"), arm),
            "k8s.hosted-cluster.release" => (b.get("clusterRollout"), arm),
            "k8s.object.delete" => (b.get("kubernetesDeletion"), arm),
            "azure.private-link-service.ensure" => (arm, b.get("privateLinkTeardown")),
            "azure.private-link-service.delete" => (b.get("privateLinkTeardown"), arm),
            // HyperShift's controllers make the private link while the control plane comes
            // up; the teardown steps wait on its finalizers.
            "hypershift.private-link-service.wait" | "hypershift.private-endpoint.wait" => {
                (b.get("hostedClusterAvailable"), arm)
            }
            "hypershift.private-link.release" | "hypershift.private-link.verify-gone" => {
                (b.get("privateLinkTeardown"), arm)
            }
            _ => (arm, arm),
        };
        n.retry = n.retry.clone().with_wait_budget(action);
        n.undo_retry = n.undo_retry.clone().with_wait_budget(undo);
    }
}
