//! repair-cluster: put back what the journal says hcp-workflow made, when
//! `hcp-workflow verify` finds it missing or drifted.
//!
//! Repair is never automatic, and it is create-cluster's DAG run forward again (the same
//! steps, named `create-cluster.*`, over the cluster's unchanged file) with the run's
//! failure policy at `pause` by default:
//! - every ensure step recreates what is missing, under the same deterministic name, and
//!   adopts what exists;
//! - the untagged children of our own parents that drifted (the private zone's A records,
//!   the federated credentials) are written again ([`hcp_activities::steps::arm::ensure_children`]);
//! - a role assignment whose principal is stale (its identity was recreated) is replaced
//!   (`azure.role-assignment.ensure`);
//! - NodePools and the HostedCluster are applied again (server-side apply);
//! - the Private Link Service (hcp-workflow's own, or HyperShift's) gets its visibility and
//!   auto-approval back, and every connection from a subscription that is not allowed is
//!   rejected, then removed (stage `access`, [`access`]).
//!
//! What it never does: adopt or re-tag a resource that does not carry this cluster's tags
//! (it stops for an operator: the resource may be someone else's), delete anything it did
//! not create, or run over a file that differs from the applied configuration (that is
//! update-cluster's work: refused, exit 2).

use crate::config::ClusterConfig;
use crate::layout::Layout;
use crate::workflow::{Admission, Admit, BuildOptions, PreflightKind, WorkflowDef};
use hcp_activities::steps::pls_access::{
    PlsAccessInput, PlsRef, PruneConnections, SetPlsVisibility,
};
use hcp_runtime::{DagError, FailurePolicy, NodeOptions, SagaBuilder, SagaDag};

/// Workflow name.
pub const WORKFLOW: &str = "repair-cluster";

/// repair-cluster as `start`, `plan`, `preflight` and `drive` see it.
pub static DEF: WorkflowDef = WorkflowDef {
    name: WORKFLOW,
    noun: "Repair",
    default_on_failure: FailurePolicy::Pause {
        deadline_secs: None,
    },
    forward_only: false,
    destructive: false,
    follows_create: true,
    applies_config: true,
    updates: false,
    removes_cluster: false,
    preflight: PreflightKind::Update,
    summary: "Put back what the journal says the cluster's runs made, when `verify` finds it missing or drifted: the create steps run forward again over the unchanged file, plus the private link's access (pauses on failure).",
    admit,
    on_existing: Some(crate::workflow::OnExisting {
        same: "a repair reads every resource above, adopts what is as it should be, and puts back what is missing or drifted (`hcp-workflow verify` lists what that is now)",
        refuses: "a repair puts the cluster back as it was last applied, not as a changed file says",
    }),
    build,
};

/// Repair brings a cluster that exists back to its applied configuration: without one
/// (never made here, deleted, partially deleted, or made before configurations were
/// journaled) there is nothing to repair to, and a file that differs from it would be
/// adopted unchanged, so both are refused.
fn admit(a: &Admit<'_>) -> Admission {
    match (a.state.exists_by(), a.applied, a.file) {
        (Some(by), Some(applied), Some(file)) => Admission::unless_differs(by.id, applied, file),
        _ => Admission::NoCluster,
    }
}

/// The create DAG with the access stage, under this workflow's name.
///
/// # Errors
/// A definition error (a bug).
pub fn build(cfg: &ClusterConfig, l: &Layout, _: BuildOptions<'_>) -> Result<SagaDag, DagError> {
    let mut dag = crate::create_cluster::build_with(cfg, l, true)?;
    dag.workflow = WORKFLOW.to_string();
    dag.on_failure = DEF.default_on_failure;
    Ok(dag)
}

/// Stage `access`: the Private Link Service's visibility and auto-approval back to the
/// allowed subscriptions, then every connection from another subscription rejected and
/// removed; hcp-workflow's own PLS, or HyperShift's.
///
/// # Errors
/// A definition error (a bug).
pub(crate) fn access(b: &mut SagaBuilder, cfg: &ClusterConfig, l: &Layout) -> Result<(), DagError> {
    let allowed = crate::create_cluster::pls_subscriptions(cfg, l);
    // HyperShift's own Private Link Service (`privateLink.managedBy: hypershift`): its
    // operator restores the visibility it computes, but rejects connections only when its
    // `AzurePrivateLinkService` goes, so a connection from a subscription that is not
    // allowed stays until someone removes it: repair does (the id from the CR's status).
    let pls = if cfg.private_link.managed_by == crate::config::PrivateLinkManager::Hypershift {
        PlsRef::HyperShift {
            mgmt: l.mgmt.clone(),
            namespace: crate::layout::CLUSTERS_NAMESPACE.into(),
            name: l.name.clone(),
        }
    } else {
        PlsRef::Ours {
            id: l.pls_id.clone(),
        }
    };
    let input = PlsAccessInput {
        azure: l.mgmt_azure.clone(),
        owner: l.owner.clone(),
        pls,
        subscriptions: allowed,
    };
    let vis = b.add::<SetPlsVisibility>(
        "create-cluster.access.pls-visibility",
        &input,
        NodeOptions::default(),
    )?;
    b.add::<PruneConnections>(
        "create-cluster.access.connections",
        &input,
        NodeOptions::default().after(&vis).pivot(
            "a rejected private endpoint connection cannot be approved back by hcp-workflow: its owner must create it again",
        ),
    )?;
    Ok(())
}
