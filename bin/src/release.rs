//! Which release of hcp-workflow this binary is, as far as runs in flight care: the actions
//! its workers know and the steps its plans name.
//!
//! In a debug build only, `HCP_TEST_PREVIOUS_RELEASE=1` makes the binary act as the release
//! before this one: its workers do not know the actions [`ADDED_IN_THIS_RELEASE`] and its
//! plans do not name them. The rolling-upgrade test
//! (`tests/tests/e2e/team_service/rolling_upgrade.rs`) runs old and new workers side by side with it; a
//! release build ignores the variable.

use anyhow::{Context, Result};

/// Actions this release added (the wait for the guest's rollout, which `hypershift create
/// cluster --wait` does, came after create-cluster itself): an older binary's plans lack
/// them and its workers cannot run them.
pub const ADDED_IN_THIS_RELEASE: &[&str] = &["k8s.rollout.wait"];

/// Whether this binary acts as the previous release (debug builds, tests only).
pub fn previous() -> bool {
    cfg!(debug_assertions)
        && std::env::var("HCP_TEST_PREVIOUS_RELEASE").is_ok_and(|v| v.trim() == "1")
}

/// Register the cluster actions this release's workers run.
pub fn register(
    r: &mut hcp_runtime::Registry,
    clients: &std::sync::Arc<hcp_activities::steps::Clients>,
) -> Result<()> {
    hcp_workflows::register(r, clients).context("registering the cluster actions")?;
    if previous() {
        for a in ADDED_IN_THIS_RELEASE {
            r.remove(a);
        }
    }
    Ok(())
}

/// The plan as this release makes it.
pub fn plan(mut dag: hcp_runtime::SagaDag) -> hcp_runtime::SagaDag {
    if previous() {
        let gone: std::collections::HashSet<String> = dag
            .nodes
            .iter()
            .filter(|n| ADDED_IN_THIS_RELEASE.contains(&n.action.as_str()))
            .map(|n| n.name.clone())
            .collect();
        dag.nodes.retain(|n| !gone.contains(&n.name));
        for n in &mut dag.nodes {
            n.deps.retain(|d| !gone.contains(d));
        }
    }
    dag
}
