//! A cluster as its runs leave it ([`hcp_workflows::cluster_state`]), read once for a
//! command with the configuration it stands on, and the sentences every command says
//! about a cluster that is not there: no view or command decides that on its own.

use anyhow::Result;
use hcp_runtime::{JournalStore, RunId};
use hcp_workflows::cluster_state::{self, ClusterState, FinishDelete};
use hcp_workflows::config::ClusterConfig;
use serde_json::Value;
use std::sync::Arc;

/// The cluster's state and the configuration its standing applied run journaled.
#[derive(Debug)]
pub(crate) struct Standing {
    pub(crate) state: ClusterState,
    /// The document of [`ClusterState::standing_applied`], when that run journaled one.
    pub(crate) applied: Option<Value>,
}

impl Standing {
    /// The cluster of no runs at all (no journal yet).
    pub(crate) fn absent(name: &str) -> Self {
        Standing {
            state: cluster_state::of_runs(name, &[], false),
            applied: None,
        }
    }

    /// The run and configuration a file is compared with (the cluster exists or is
    /// partially deleted, and that run journaled its configuration).
    pub(crate) fn applied_run(&self) -> Option<(RunId, &Value)> {
        Some((self.state.standing_applied()?.id, self.applied.as_ref()?))
    }
}

/// Cluster `name` in `store`; `key`: only the runs holding this exclusive key (a start
/// passes its file's, since two subscriptions may each have a cluster of one name).
pub(crate) async fn load(
    store: &Arc<dyn JournalStore>,
    name: &str,
    key: Option<&str>,
) -> Result<Standing> {
    let state = cluster_state::load(store.as_ref(), name, key).await?;
    let applied = match state.standing_applied() {
        Some(r) => cluster_state::applied_document(store.as_ref(), r.id).await?,
        None => None,
    };
    Ok(Standing { state, applied })
}

/// The cluster of file `cfg` as a start of `def` sees it.
pub(crate) async fn of_file(
    store: &Arc<dyn JournalStore>,
    cfg: &ClusterConfig,
    def: &hcp_workflows::workflow::WorkflowDef,
) -> Result<Standing> {
    load(store, &cfg.name, Some(&def.exclusive_key(cfg))).await
}

/// The command that finishes the delete of a partially deleted cluster, with `target`'s
/// flags.
pub(crate) fn finish_command(state: &ClusterState, target: Option<&str>) -> Option<String> {
    let (verb, id) = match state.finish_delete()? {
        FinishDelete::Retry(id) => ("retry", id),
        FinishDelete::Resume(id) => ("resume", id),
        FinishDelete::Watch(id) => ("watch", id),
        FinishDelete::StartAgain { config } => {
            return Some(crate::target::command(
                target,
                &format!(
                    "start {} --config {}",
                    hcp_workflows::delete_cluster::WORKFLOW,
                    config.as_deref().unwrap_or("<cluster file>")
                ),
            ));
        }
    };
    let short = crate::runref::short(&id.to_string()).to_string();
    Some(crate::target::command(None, &format!("{verb} {short}")))
}

/// "cluster demo is partially deleted: run 1a2b3c4d (delete-cluster) needs an operator;
/// some of it may be gone. Finish the delete: …" — `None` unless it is partially deleted.
pub(crate) fn partially_deleted(state: &ClusterState, target: Option<&str>) -> Option<String> {
    let r = state.decided_by.as_ref()?;
    let cmd = finish_command(state, target)?;
    Some(format!(
        "cluster {} is partially deleted: run {} ({}) began deleting it and {}; some of it may be gone. Finish the delete: {cmd}",
        state.name,
        crate::runref::short(&r.id.to_string()),
        r.workflow,
        crate::runref::state_phrase(r.state),
    ))
}
