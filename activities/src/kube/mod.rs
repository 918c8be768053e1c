//! The management cluster: where the HostedCluster, its NodePools and Secrets live.
//!
//! Everything the workflows do on the management cluster goes through this module, on top
//! of kube-rs:
//! - [`target`]: which cluster ([`KubeTarget`]: a kubeconfig, in-cluster, or a bare
//!   endpoint such as the simulator) and [`client()`] to build a `kube::Client` for it;
//! - [`mgmt`]: [`Mgmt`], the handful of operations the steps need — server-side apply of
//!   namespaces, Secrets, HostedClusters and NodePools, condition and load-balancer reads,
//!   and a non-blocking delete that reports progress instead of waiting;
//! - [`render`]: the HostedCluster and NodePool objects, rendered from typed inputs the
//!   way HyperShift's own CLI renders them, checked against the real CRD schemas in tests;
//! - [`error`]: [`KubeError`], classified retryable or permanent, convertible into the
//!   engine's journaled `StepError`.
//!
//! **Architecture invariant:** no operation here sleeps or loops waiting for the cluster
//! to change. A step calls again (the engine schedules the next look durably); the only
//! waiting helper, [`Mgmt::wait_deleted`], is for tests and tools and always has an
//! explicit timeout.
//!
//! # Ownership
//! Every object we create carries the labels [`LABEL_CLUSTER`], [`LABEL_INFRA_ID`] and
//! [`LABEL_RUN`] (DOMAIN.md §1). [`Mgmt::delete`] refuses objects without the first two
//! ([`is_ours`]); the apply operations refuse to take over an object that another owner
//! created, and never relabel a namespace that already exists. A later run of the same
//! cluster that adopts an object moves its [`LABEL_RUN`] to itself with
//! [`Mgmt::relabel_run`], so an earlier run's undo no longer takes it.

pub mod error;
pub mod mgmt;
pub mod render;
pub mod target;

use std::collections::BTreeMap;

pub use error::{ErrorClass, KubeError};
pub use mgmt::{Applied, Condition, DeleteProgress, FIELD_MANAGER, Kind, Mgmt};
pub use target::{KubeTarget, client, config};

/// Label naming the cluster an object belongs to.
pub const LABEL_CLUSTER: &str = "hcp-workflow.io/cluster";
/// Label naming the cluster's infra id.
pub const LABEL_INFRA_ID: &str = "hcp-workflow.io/infra-id";
/// Label naming the run that owns the object: the run that created it, until a later run
/// adopts it ([`Mgmt::relabel_run`]; an apply alone keeps it as is).
pub const LABEL_RUN: &str = "hcp-workflow.io/run";
/// Label naming the run that created the object, set when it is created and never moved
/// (a relabel moves [`LABEL_RUN`] only): a run whose own journal of created objects was
/// lost (a deleted WAL, a restored backup) still knows what it made, so its unwind deletes
/// it instead of keeping it as adopted.
pub const LABEL_CREATED_BY: &str = "hcp-workflow.io/created-by-run";

/// Name of the HyperShift Service whose internal load balancer fronts the control plane.
pub const PRIVATE_ROUTER: &str = "private-router";

/// Whether `labels` mark an object as created by hcp-workflow: both
/// [`LABEL_CLUSTER`] and [`LABEL_INFRA_ID`] are present and non-empty.
///
/// This is the floor every delete checks; callers that know the cluster should also
/// compare the values (an object of *another* hcp-workflow cluster is ours too by this
/// test).
pub fn is_ours(labels: &BTreeMap<String, String>) -> bool {
    let present = |k: &str| labels.get(k).is_some_and(|v| !v.is_empty());
    present(LABEL_CLUSTER) && present(LABEL_INFRA_ID)
}

/// Whether two label sets name the same owner (same cluster and infra id, both present).
pub fn same_owner(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> bool {
    is_ours(a)
        && is_ours(b)
        && a.get(LABEL_CLUSTER) == b.get(LABEL_CLUSTER)
        && a.get(LABEL_INFRA_ID) == b.get(LABEL_INFRA_ID)
}

/// The namespace HyperShift runs a HostedCluster's control plane in: `<ns>-<name>`.
pub fn control_plane_namespace(namespace: &str, name: &str) -> String {
    format!("{namespace}-{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn ownership_needs_both_labels() {
        assert!(is_ours(&labels(&[
            (LABEL_CLUSTER, "a"),
            (LABEL_INFRA_ID, "a-x1")
        ])));
        assert!(!is_ours(&labels(&[(LABEL_CLUSTER, "a")])));
        assert!(!is_ours(&labels(&[
            (LABEL_CLUSTER, "a"),
            (LABEL_INFRA_ID, "")
        ])));
        assert!(!is_ours(&BTreeMap::new()));
        let mine = labels(&[(LABEL_CLUSTER, "a"), (LABEL_INFRA_ID, "a-x1")]);
        let other = labels(&[(LABEL_CLUSTER, "a"), (LABEL_INFRA_ID, "a-x2")]);
        assert!(same_owner(&mine, &mine));
        assert!(!same_owner(&mine, &other));
        assert!(!same_owner(&mine, &BTreeMap::new()));
    }
}
