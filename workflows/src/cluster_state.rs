//! What a cluster is now, read from its runs: the one rule every view and every admission
//! uses (`start`, `plan`, `verify`, `inventory --live`, `clusters`, `why cluster/…`, the UI).
//!
//! The runs of one cluster never overlap (they share its exclusive key), so creation order
//! is the order in which they acted. Walking them newest first, the first run that settled
//! what the cluster is decides:
//! - a succeeded run of a workflow that applies the configuration (create, update, repair):
//!   the cluster **exists**, as that run's configuration says;
//! - a succeeded run of a workflow that removes the cluster: **deleted**;
//! - a run that removes the cluster and has begun but not succeeded (paused for an
//!   operator, failed, cancelled, or still running): **partially deleted**, since some of
//!   it may be gone already;
//! - nothing decides: **partial** when its ledger records something (not kept on purpose)
//!   as still present, else **absent**.
//!
//! A run that did not succeed and does not remove the cluster (a create that unwound, an
//! update that failed) leaves the decision to the runs before it. Which workflow does what
//! is the [`WorkflowDef`]'s to say (`applies_config`, `removes_cluster`), never its name.

use crate::config::PrivateLinkManager;
use crate::workflow::{WorkflowDef, lookup};
use hcp_runtime::{JournalStore, RunFilter, RunId, RunState, RunSummary, StoreError};
use serde::Serialize;

/// What the cluster is now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A run that applies the configuration succeeded last.
    Exists,
    /// A delete began and did not finish: some of it may be gone.
    PartiallyDeleted,
    /// A delete succeeded last.
    Deleted,
    /// No run settled it, and its ledger records something as still present (a create that
    /// paused or failed and kept what it made).
    Partial,
    /// No run settled it, and nothing of it is recorded as present.
    Absent,
}

impl Status {
    /// The JSON and HTML token (`partially-deleted`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exists => "exists",
            Self::PartiallyDeleted => "partially-deleted",
            Self::Deleted => "deleted",
            Self::Partial => "partial",
            Self::Absent => "absent",
        }
    }

    /// The words a sentence uses (`partially deleted`).
    #[must_use]
    pub fn words(self) -> &'static str {
        match self {
            Self::PartiallyDeleted => "partially deleted",
            s => s.as_str(),
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// A cluster as its runs leave it.
#[derive(Clone, Debug)]
pub struct ClusterState {
    /// The cluster's name (its runs' `cluster` label).
    pub name: String,
    /// What it is now.
    pub status: Status,
    /// The run the status rests on: the create or update it exists by, the delete it was
    /// (or is being) deleted by. `None` for `partial` and `absent`.
    pub decided_by: Option<RunSummary>,
    /// The newest succeeded run that applied a configuration, even when a delete followed
    /// (what a partially deleted cluster was, and what a deleted one's leftovers are
    /// tagged with).
    pub applied_by: Option<RunSummary>,
    /// The unfinished run holding the cluster, if any, whatever its workflow (at most one:
    /// the exclusive key).
    pub active: Option<RunSummary>,
    /// The newest run of the cluster of a workflow this binary knows, whatever it did.
    pub last: Option<RunSummary>,
    /// The infra id the newest create run recorded (`infra-id` label).
    pub infra_id: Option<String>,
    /// Who made its private link, as the newest create run that resolved
    /// `privateLink.managedBy: auto` recorded it (`private-link` label).
    pub private_link: Option<PrivateLinkManager>,
}

impl ClusterState {
    /// The cluster's runs say it exists: the run it exists by.
    #[must_use]
    pub fn exists_by(&self) -> Option<&RunSummary> {
        (self.status == Status::Exists)
            .then_some(self.decided_by.as_ref())
            .flatten()
    }

    /// The configuration a run may be compared with: the applied run of a cluster that
    /// exists or is partially deleted (what is left of it was made by that run). `None` for
    /// a deleted or never created cluster.
    #[must_use]
    pub fn standing_applied(&self) -> Option<&RunSummary> {
        match self.status {
            Status::Exists | Status::PartiallyDeleted => self.applied_by.as_ref(),
            _ => None,
        }
    }
}

/// What finishes a delete that did not: the operator's next command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishDelete {
    /// The delete paused for an operator: retry its step (`retry <run>`).
    Retry(RunId),
    /// The delete was parked: resume it (`resume <run>`).
    Resume(RunId),
    /// The delete is still working: follow it (`watch <run>`).
    Watch(RunId),
    /// The delete ended without finishing (cancelled): start it again with its file.
    StartAgain {
        /// The cluster file its run recorded (`config` label), if it recorded one.
        config: Option<String>,
    },
}

impl ClusterState {
    /// For a partially deleted cluster, what finishes the delete.
    #[must_use]
    pub fn finish_delete(&self) -> Option<FinishDelete> {
        if self.status != Status::PartiallyDeleted {
            return None;
        }
        let r = self.decided_by.as_ref()?;
        Some(match r.state {
            RunState::NeedsOperator => FinishDelete::Retry(r.id),
            RunState::Failed => FinishDelete::Resume(r.id),
            s if !s.is_terminal() => FinishDelete::Watch(r.id),
            _ => FinishDelete::StartAgain {
                config: r.labels.get("config").cloned(),
            },
        })
    }
}

/// The state of cluster `name` from `runs` (its runs, in any order). Runs of workflows
/// this binary does not know decide nothing and are not its `last`, but one still holds
/// the cluster while unfinished (`active`). `ledger_present`: its ledger records something not kept on
/// purpose as present (only views fold ledgers; admission passes `false`).
#[must_use]
pub fn of_runs<'a>(
    name: &str,
    runs: impl IntoIterator<Item = &'a RunSummary>,
    ledger_present: bool,
) -> ClusterState {
    let mut all: Vec<&RunSummary> = runs.into_iter().collect();
    // Newest first; the id breaks ties of one millisecond the same way everywhere.
    all.sort_by_key(|r| std::cmp::Reverse((r.created_at.0, r.id)));
    let active = all
        .iter()
        .find(|r| !r.state.is_terminal())
        .map(|r| (*r).clone());
    let mine: Vec<(&RunSummary, &'static WorkflowDef)> = all
        .into_iter()
        .filter_map(|r| Some((r, lookup(&r.workflow)?)))
        .collect();
    let mut status = None;
    let mut decided_by = None;
    for (r, def) in &mine {
        let decided = match (def.removes_cluster, r.state) {
            (true, RunState::Succeeded) => Some(Status::Deleted),
            // Journaled but never picked up: nothing of it was deleted yet.
            (true, RunState::Pending) => None,
            (true, _) => Some(Status::PartiallyDeleted),
            (false, RunState::Succeeded) if def.applies_config => Some(Status::Exists),
            _ => None,
        };
        if let Some(s) = decided {
            status = Some(s);
            decided_by = Some((*r).clone());
            break;
        }
    }
    let status = status.unwrap_or(if ledger_present {
        Status::Partial
    } else {
        Status::Absent
    });
    let applied_by = mine
        .iter()
        .find(|(r, d)| r.state == RunState::Succeeded && d.applies_config)
        .map(|(r, _)| (*r).clone());
    let creates = || {
        mine.iter()
            .filter(|(_, d)| !d.follows_create && d.applies_config)
            .map(|(r, _)| r)
    };
    ClusterState {
        name: name.to_string(),
        status,
        decided_by,
        applied_by,
        active,
        last: mine.first().map(|(r, _)| (*r).clone()),
        infra_id: creates().find_map(|r| r.labels.get("infra-id").cloned()),
        private_link: creates().find_map(|r| private_link_label(&r.labels)),
    }
}

/// The `private-link` label a create run records (`hypershift` or `hcp-workflow`).
#[must_use]
pub fn private_link_label(
    labels: &std::collections::BTreeMap<String, String>,
) -> Option<PrivateLinkManager> {
    match labels.get("private-link")?.as_str() {
        "hypershift" => Some(PrivateLinkManager::Hypershift),
        "hcp-workflow" => Some(PrivateLinkManager::HcpWorkflow),
        _ => None,
    }
}

/// The state of cluster `name` in `store`. `exclusive_key`: only the runs holding this key
/// (a cluster file names its subscription too; two subscriptions may each have a cluster
/// of one name).
///
/// # Errors
/// The store's.
pub async fn load(
    store: &dyn JournalStore,
    name: &str,
    exclusive_key: Option<&str>,
) -> Result<ClusterState, StoreError> {
    let runs = store
        .list_runs(&RunFilter {
            label: Some(("cluster".to_string(), name.to_string())),
            ..Default::default()
        })
        .await?;
    let runs: Vec<RunSummary> = runs
        .into_iter()
        .filter(|r| exclusive_key.is_none_or(|k| r.exclusive_key.as_deref() == Some(k)))
        .collect();
    Ok(of_runs(name, &runs, false))
}

/// The configuration document run `run` applied (journaled with its DAG), `None` when the
/// run predates applied configurations or is gone.
///
/// # Errors
/// The store's.
pub async fn applied_document(
    store: &dyn JournalStore,
    run: RunId,
) -> Result<Option<serde_json::Value>, StoreError> {
    let Some(rec) = store.load_run(run).await? else {
        return Ok(None);
    };
    let dag: Option<hcp_runtime::SagaDag> = serde_json::from_str(&rec.dag).ok();
    Ok(dag.and_then(|d| d.record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_runtime::Timestamp;
    use std::collections::BTreeMap;

    fn run(n: u128, workflow: &str, state: RunState) -> RunSummary {
        let mut labels = BTreeMap::new();
        labels.insert("cluster".to_string(), "demo".to_string());
        if workflow == crate::create_cluster::WORKFLOW {
            labels.insert("infra-id".to_string(), format!("demo-{n}"));
        }
        RunSummary {
            id: uuid::Uuid::from_u128(n),
            workflow: workflow.into(),
            workflow_version: 1,
            labels,
            idempotency_key: None,
            exclusive_key: Some("cluster/sub/demo".into()),
            target: None,
            state,
            blocked_on: String::new(),
            current_step: None,
            created_at: Timestamp(n as i64 * 1000),
            updated_at: Timestamp(n as i64 * 1000 + 500),
            wake_at: None,
            lease_owner: None,
            lease_epoch: 0,
            lease_expires_at: None,
            commands_pending: false,
        }
    }

    const C: &str = crate::create_cluster::WORKFLOW;
    const U: &str = crate::update_cluster::WORKFLOW;
    const R: &str = crate::repair_cluster::WORKFLOW;
    const D: &str = crate::delete_cluster::WORKFLOW;

    fn state(runs: &[RunSummary]) -> ClusterState {
        of_runs("demo", runs, false)
    }

    fn decided(s: &ClusterState) -> Option<u128> {
        s.decided_by.as_ref().map(|r| r.id.as_u128())
    }

    #[test]
    fn no_runs_is_absent_and_a_kept_ledger_is_partial() {
        assert_eq!(state(&[]).status, Status::Absent);
        assert_eq!(of_runs("demo", &[], true).status, Status::Partial);
        // A create that unwound settles nothing.
        let s = of_runs("demo", &[run(1, C, RunState::RolledBack)], true);
        assert_eq!((s.status, decided(&s)), (Status::Partial, None));
        assert_eq!(s.infra_id.as_deref(), Some("demo-1"));
    }

    #[test]
    fn a_succeeded_create_update_or_repair_makes_it_exist() {
        let s = state(&[run(1, C, RunState::Succeeded)]);
        assert_eq!((s.status, decided(&s)), (Status::Exists, Some(1)));
        let s = state(&[
            run(1, C, RunState::Succeeded),
            run(2, U, RunState::Succeeded),
            run(3, R, RunState::Succeeded),
        ]);
        assert_eq!((s.status, decided(&s)), (Status::Exists, Some(3)));
        assert_eq!(s.exists_by().map(|r| r.id.as_u128()), Some(3));
        assert_eq!(s.applied_by.as_ref().map(|r| r.id.as_u128()), Some(3));
    }

    #[test]
    fn a_failed_update_leaves_the_cluster_as_the_run_before() {
        let s = state(&[
            run(1, C, RunState::Succeeded),
            run(2, U, RunState::RolledBack),
        ]);
        assert_eq!((s.status, decided(&s)), (Status::Exists, Some(1)));
        assert_eq!(s.last.as_ref().map(|r| r.id.as_u128()), Some(2));
        assert!(s.active.is_none());
    }

    #[test]
    fn a_succeeded_delete_deletes_and_a_later_create_brings_it_back() {
        let s = state(&[
            run(1, C, RunState::Succeeded),
            run(2, D, RunState::Succeeded),
        ]);
        assert_eq!((s.status, decided(&s)), (Status::Deleted, Some(2)));
        assert!(s.standing_applied().is_none());
        assert_eq!(s.applied_by.as_ref().map(|r| r.id.as_u128()), Some(1));
        let s = state(&[
            run(1, C, RunState::Succeeded),
            run(2, D, RunState::Succeeded),
            run(3, C, RunState::Succeeded),
        ]);
        assert_eq!((s.status, decided(&s)), (Status::Exists, Some(3)));
        assert_eq!(s.infra_id.as_deref(), Some("demo-3"));
    }

    #[test]
    fn a_delete_that_began_and_did_not_finish_is_partially_deleted() {
        for st in [
            RunState::NeedsOperator,
            RunState::Failed,
            RunState::Cancelled,
            RunState::Running,
            RunState::Waiting,
        ] {
            let s = state(&[run(1, C, RunState::Succeeded), run(2, D, st)]);
            assert_eq!(
                (s.status, decided(&s)),
                (Status::PartiallyDeleted, Some(2)),
                "{st:?}"
            );
            // What is left was made by the create.
            assert_eq!(s.standing_applied().map(|r| r.id.as_u128()), Some(1));
        }
        let s = state(&[
            run(1, C, RunState::Succeeded),
            run(2, D, RunState::NeedsOperator),
        ]);
        assert_eq!(s.active.as_ref().map(|r| r.id.as_u128()), Some(2));
    }

    #[test]
    fn a_partial_delete_names_what_finishes_it() {
        let finish = |st| {
            let mut d = run(2, D, st);
            d.labels.insert("config".into(), "/c/cluster.yaml".into());
            state(&[run(1, C, RunState::Succeeded), d]).finish_delete()
        };
        let id = uuid::Uuid::from_u128(2);
        assert_eq!(
            finish(RunState::NeedsOperator),
            Some(FinishDelete::Retry(id))
        );
        assert_eq!(finish(RunState::Failed), Some(FinishDelete::Resume(id)));
        assert_eq!(finish(RunState::Running), Some(FinishDelete::Watch(id)));
        assert_eq!(
            finish(RunState::Cancelled),
            Some(FinishDelete::StartAgain {
                config: Some("/c/cluster.yaml".into())
            })
        );
        // Nothing to finish for a cluster that exists or is gone.
        assert_eq!(finish(RunState::Succeeded), None);
        assert_eq!(
            state(&[run(1, C, RunState::Succeeded)]).finish_delete(),
            None
        );
    }

    #[test]
    fn a_delete_nobody_picked_up_yet_deleted_nothing() {
        let s = state(&[run(1, C, RunState::Succeeded), run(2, D, RunState::Pending)]);
        assert_eq!((s.status, decided(&s)), (Status::Exists, Some(1)));
        assert_eq!(s.active.as_ref().map(|r| r.id.as_u128()), Some(2));
    }

    #[test]
    fn a_create_after_a_partial_delete_decides_again() {
        let s = state(&[
            run(1, C, RunState::Succeeded),
            run(2, D, RunState::Cancelled),
            run(3, C, RunState::Succeeded),
        ]);
        assert_eq!((s.status, decided(&s)), (Status::Exists, Some(3)));
        // A create that unwound after it leaves it partially deleted.
        let s = state(&[
            run(1, C, RunState::Succeeded),
            run(2, D, RunState::Cancelled),
            run(3, C, RunState::RolledBack),
        ]);
        assert_eq!((s.status, decided(&s)), (Status::PartiallyDeleted, Some(2)));
    }

    #[test]
    fn runs_of_unknown_workflows_are_ignored_and_order_is_by_creation() {
        let mut late_finish = run(1, C, RunState::Succeeded);
        late_finish.updated_at = Timestamp(99_000);
        let s = state(&[
            late_finish,
            run(2, D, RunState::Succeeded),
            run(3, "sample", RunState::Succeeded),
        ]);
        assert_eq!((s.status, decided(&s)), (Status::Deleted, Some(2)));
        assert_eq!(s.last.as_ref().map(|r| r.id.as_u128()), Some(2));
    }

    #[test]
    fn the_private_link_mode_is_the_newest_creates_record() {
        let mut a = run(1, C, RunState::Succeeded);
        a.labels.insert("private-link".into(), "hypershift".into());
        let mut b = run(2, C, RunState::RolledBack);
        b.labels
            .insert("private-link".into(), "hcp-workflow".into());
        assert_eq!(
            state(&[a.clone()]).private_link,
            Some(PrivateLinkManager::Hypershift)
        );
        assert_eq!(
            state(&[a, b]).private_link,
            Some(PrivateLinkManager::HcpWorkflow)
        );
    }

    #[test]
    fn statuses_have_one_token_and_words() {
        assert_eq!(Status::PartiallyDeleted.as_str(), "partially-deleted");
        assert_eq!(Status::PartiallyDeleted.to_string(), "partially deleted");
        assert_eq!(
            serde_json::to_value(Status::PartiallyDeleted).ok(),
            Some(serde_json::json!("partially-deleted"))
        );
    }
}
