//! A workflow as one self-describing unit.
//!
//! `start`, `plan`, `preflight` and `drive` in `bin/` know no workflow by name: they look
//! its [`WorkflowDef`] up and use what it declares —
//! - its input: the cluster file, plus [`BuildOptions`] from flags;
//! - its exclusive key (one unfinished run per cluster) and whether it needs the infra id
//!   a create run recorded;
//! - its DAG, built stage by stage in its own file (`create_cluster.rs`,
//!   `delete_cluster.rs`), with its pivots marked on the nodes;
//! - its default failure policy and which policies it accepts;
//! - whether it is destructive (asks, or needs `--yes`);
//! - its preflight checks ([`PreflightKind`]);
//! - its admission ([`Admit`] → [`Admission`]): whether a start may proceed on the cluster
//!   as its runs leave it ([`crate::cluster_state`]), decided here and only printed by `bin/`.
//!
//! Adding a workflow: one file in `workflows/` with a `pub static DEF: WorkflowDef`, one
//! line in [`ALL`], and its new step actions in `activities/`.

use crate::cluster_state::ClusterState;
use crate::config::ClusterConfig;
use crate::layout::Layout;
use hcp_runtime::{DagError, FailurePolicy, RunId, SagaDag};
use std::time::Duration;

/// Flags and state that shape a workflow's DAG (each workflow reads the ones it knows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildOptions<'a> {
    /// delete-cluster `--purge-persistent`.
    pub purge_persistent: bool,
    /// delete-cluster `--skip-cloud-cleanup`.
    pub skip_cloud_cleanup: bool,
    /// update-cluster: the cluster's last applied configuration ([`crate::applied`]).
    pub applied: Option<&'a serde_json::Value>,
}

/// Which preflight checks a workflow runs before it is journaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreflightKind {
    /// Everything a create needs: quotas, names free, permissions to create.
    Create,
    /// What a delete needs: permissions to read and delete.
    Delete,
    /// What an update needs: the permissions of its steps, and for a new release the
    /// HyperShift operator's supported versions, no downgrade, and the node pools' skew.
    Update,
}

/// What a start is admitted on.
#[derive(Debug)]
pub struct Admit<'a> {
    /// The cluster file (validated).
    pub cfg: &'a ClusterConfig,
    /// The cluster as its runs leave it.
    pub state: &'a ClusterState,
    /// The configuration its standing applied run journaled
    /// ([`ClusterState::standing_applied`]), when it journaled one.
    pub applied: Option<&'a serde_json::Value>,
    /// The file as an applied-configuration document ([`crate::applied::document`]), for a
    /// workflow that applies one.
    pub file: Option<&'a serde_json::Value>,
}

/// The answer of a workflow's admission.
#[derive(Debug)]
pub enum Admission {
    /// Go on to the checks against the cloud.
    Proceed,
    /// The cluster is as the file says: nothing is journaled (exit 0).
    NothingToChange {
        /// The run that applied the configuration.
        applied_by: RunId,
    },
    /// The workflow works on a cluster that exists, and this one does not (its state says
    /// what it is: absent, deleted, partially deleted, or made before configurations were
    /// journaled).
    NoCluster,
    /// The file differs from the cluster, and this workflow would change none of it.
    Differs {
        /// The run that applied the configuration.
        applied_by: RunId,
        /// Every difference.
        changes: Vec<crate::applied::Change>,
        /// The workflow that makes such changes.
        fix_workflow: &'static str,
    },
    /// Changes that cannot be made in place: each field, why, and the fix.
    CannotChangeInPlace {
        /// The refused fields.
        refused: Vec<crate::update_cluster::Refusal>,
        /// How many differences the file has in all.
        changes: usize,
    },
    /// Release checks that need nothing but the two documents failed.
    ReleaseRefused {
        /// The failed rows.
        failed: Vec<hcp_activities::preflight::CheckResult>,
        /// How many release rows were checked.
        checked: usize,
    },
}

impl Admission {
    /// Proceed when `file` is as `applied` (applied by run `by`), else every difference,
    /// with update-cluster as the workflow that makes such changes.
    pub fn unless_differs(
        by: RunId,
        applied: &serde_json::Value,
        file: &serde_json::Value,
    ) -> Self {
        let changes = crate::applied::diff(applied, file);
        if changes.is_empty() {
            return Admission::Proceed;
        }
        Admission::Differs {
            applied_by: by,
            changes,
            fix_workflow: crate::update_cluster::WORKFLOW,
        }
    }
}

/// Admission for a workflow that needs nothing of the cluster's past.
pub fn admit_any(_: &Admit<'_>) -> Admission {
    Admission::Proceed
}

/// What `plan` says of a cluster that exists, for a workflow that compares the file with
/// it.
#[derive(Debug)]
pub struct OnExisting {
    /// The file is as applied: what a start does then.
    pub same: &'static str,
    /// The file differs: why a start refuses.
    pub refuses: &'static str,
}

/// Everything `bin/` needs to know about one workflow.
#[derive(Debug)]
pub struct WorkflowDef {
    /// Its name (`create-cluster`), persisted with each run.
    pub name: &'static str,
    /// The noun of its outcome line (`Creation complete after 8s`).
    pub noun: &'static str,
    /// The failure policy a run gets when neither `--on-failure` nor `onFailure:` says.
    pub default_on_failure: FailurePolicy,
    /// Every step is a pivot: it only goes forward, and only `pause` is accepted.
    pub forward_only: bool,
    /// It deletes: it asks first, and needs `--yes` without a terminal.
    pub destructive: bool,
    /// It tears down what a create made: without `infraID` in the file it takes the infra
    /// id (and, with `privateLink.managedBy: auto`, the private-link mode) the newest create
    /// run recorded, and it may cancel an unfinished create (`--cancel-running`). `false`:
    /// it generates an infra id when the file has none.
    pub follows_create: bool,
    /// It makes the cluster be what the file says: its runs journal the applied
    /// configuration ([`crate::applied`]), and a start on a cluster whose last applied
    /// configuration differs from the file is refused (it would change nothing).
    pub applies_config: bool,
    /// It changes a cluster that exists into what the file says: it needs the cluster's
    /// last applied configuration, an unchanged file is "nothing to change" (nothing
    /// journaled), and a change it cannot make in place is refused.
    pub updates: bool,
    /// It removes the cluster: once one of its runs has begun, the cluster is partially
    /// deleted until one succeeds ([`crate::cluster_state`]).
    pub removes_cluster: bool,
    /// Its preflight checks.
    pub preflight: PreflightKind,
    /// Whether a start may proceed on this cluster as its runs leave it, with this file
    /// (every refusal before anything is journaled or asked of the cloud).
    pub admit: fn(&Admit<'_>) -> Admission,
    /// One line of what it does (the CLI's help for its name).
    pub summary: &'static str,
    /// What `plan` says of a cluster that exists (`None`: it says nothing, or, for an
    /// update, lists the changes itself).
    pub on_existing: Option<OnExisting>,
    /// Build its DAG for a validated config (pivots marked, default policy set).
    pub build: for<'a> fn(&ClusterConfig, &Layout, BuildOptions<'a>) -> Result<SagaDag, DagError>,
}

impl WorkflowDef {
    /// The exclusive key of a run of this workflow on `cfg`: one unfinished run per
    /// cluster, whatever the workflow (a create and a delete never run at once).
    /// Subscription and name, not the infra id: the management cluster's objects (the
    /// HostedCluster, its namespace and Secrets) are named by the cluster name alone, so
    /// two runs for one name must never overlap even with different infra ids.
    pub fn exclusive_key(&self, cfg: &ClusterConfig) -> String {
        format!("cluster/{}/{}", cfg.subscription, cfg.name)
    }

    /// The failure policy of a run: the flag wins over the file, the file over the
    /// workflow's default. `Err((field, message))` names what is wrong and how to fix it.
    pub fn failure_policy(
        &self,
        flag: Option<&str>,
        file: Option<&str>,
    ) -> Result<FailurePolicy, (&'static str, String)> {
        let (field, text) = match (flag, file) {
            (Some(f), _) => ("--on-failure", f),
            (None, Some(f)) => ("onFailure", f),
            (None, None) => return Ok(self.default_on_failure),
        };
        let policy = parse_on_failure(text).map_err(|e| (field, e))?;
        if self.forward_only && policy != FailurePolicy::pause(None) {
            return Err((
                field,
                format!(
                    "{} only goes forward: every deletion is a pivot and cannot be undone, so it cannot unwind (got `{text}`); a failed delete always pauses for `retry`: drop {field} or set it to `pause`",
                    self.name
                ),
            ));
        }
        Ok(policy)
    }

    /// Build the DAG with the run's failure policy.
    ///
    /// # Errors
    /// A definition error of the DAG.
    pub fn dag(
        &self,
        cfg: &ClusterConfig,
        layout: &Layout,
        opts: BuildOptions<'_>,
        policy: FailurePolicy,
    ) -> Result<SagaDag, DagError> {
        let mut dag = (self.build)(cfg, layout, opts)?;
        dag.on_failure = policy;
        Ok(dag)
    }
}

/// Every workflow this binary can start (and so run and recover).
pub static ALL: [&WorkflowDef; 4] = [
    &crate::create_cluster::DEF,
    &crate::update_cluster::DEF,
    &crate::repair_cluster::DEF,
    &crate::delete_cluster::DEF,
];

/// The workflow named `name`.
pub fn lookup(name: &str) -> Option<&'static WorkflowDef> {
    ALL.iter().copied().find(|w| w.name == name)
}

/// Parse `unwind`, `pause` or `pause=DURATION` (`pause=24h`, `pause=90m`, `pause=1h30m`).
///
/// # Errors
/// A message that names the accepted forms.
pub fn parse_on_failure(s: &str) -> Result<FailurePolicy, String> {
    let t = s.trim();
    match t {
        "unwind" => return Ok(FailurePolicy::Unwind),
        "pause" => return Ok(FailurePolicy::pause(None)),
        _ => {}
    }
    let Some(d) = t.strip_prefix("pause=") else {
        return Err(format!(
            "{s:?} is not a failure policy; write `unwind` (undo every started step), `pause` (keep the work and wait for an operator) or `pause=DURATION` such as pause=24h (unwind by itself if nobody acts by then)"
        ));
    };
    match humantime::parse_duration(d) {
        Ok(d) if d < Duration::from_secs(1) => Err(format!(
            "pause={d:?}: the deadline must be at least 1s (e.g. pause=24h), or plain `pause` to wait for an operator forever"
        )),
        Ok(d) if d > Duration::from_secs(366 * 86_400) => Err(format!(
            "pause={}: a deadline over a year is not a deadline; write one like pause=24h, or plain `pause` to wait for an operator forever",
            humantime::format_duration(d)
        )),
        Ok(d) => Ok(FailurePolicy::pause(Some(d))),
        Err(e) => Err(format!(
            "pause={d}: {e}; write the deadline like pause=24h, pause=90m or pause=1h30m"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print_back() {
        for (text, want) in [
            ("unwind", "unwind"),
            ("pause", "pause"),
            ("pause=24h", "pause=24h"),
            ("pause=2d", "pause=48h"),
            ("pause=90m", "pause=90m"),
            ("pause=3s", "pause=3s"),
            ("pause=1h30m", "pause=90m"),
        ] {
            let p = parse_on_failure(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(p.to_string(), want, "{text}");
            assert_eq!(
                parse_on_failure(&p.to_string()),
                Ok(p),
                "{text} round-trips"
            );
        }
    }

    #[test]
    fn bad_policies_name_the_accepted_forms() {
        for bad in [
            "rollback",
            "pause=",
            "pause=soon",
            "pause=0s",
            "pause=400d",
            "",
        ] {
            let e = parse_on_failure(bad).expect_err(bad);
            assert!(
                e.contains("pause") && (e.contains("24h") || e.contains("1s")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn a_forward_only_workflow_refuses_unwind_and_deadlines() {
        let del = &crate::delete_cluster::DEF;
        assert_eq!(
            del.failure_policy(None, None),
            Ok(FailurePolicy::pause(None))
        );
        assert_eq!(
            del.failure_policy(Some("pause"), None),
            Ok(FailurePolicy::pause(None))
        );
        for bad in ["unwind", "pause=1h"] {
            let (field, msg) = del.failure_policy(Some(bad), None).expect_err(bad);
            assert_eq!(field, "--on-failure");
            assert!(msg.contains("only goes forward"), "{msg}");
        }
        let create = &crate::create_cluster::DEF;
        assert_eq!(create.failure_policy(None, None), Ok(FailurePolicy::Unwind));
        assert_eq!(
            create.failure_policy(Some("pause=3s"), Some("unwind")),
            Ok(FailurePolicy::pause(Some(Duration::from_secs(3)))),
            "the flag wins over the file"
        );
        assert_eq!(
            create.failure_policy(None, Some("pause")),
            Ok(FailurePolicy::pause(None))
        );
        assert_eq!(
            create.failure_policy(None, Some("later")).map_err(|e| e.0),
            Err("onFailure")
        );
    }
}
