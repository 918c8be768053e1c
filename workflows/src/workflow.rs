//! A workflow as one self-describing unit (issue 23 §3).
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
//! - its preflight checks ([`PreflightKind`]).
//!
//! Adding a workflow: one file in `workflows/` with a `pub static DEF: WorkflowDef`, one
//! line in [`ALL`], and its new step actions in `activities/`.

use crate::config::ClusterConfig;
use crate::layout::Layout;
use hcp_runtime::{DagError, FailurePolicy, SagaDag};
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
    /// Its preflight checks.
    pub preflight: PreflightKind,
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

    /// It needs the cluster's last applied configuration in the journal (update-cluster,
    /// repair-cluster): without one, a start is refused (exit 2).
    pub fn requires_applied(&self) -> bool {
        self.updates || (self.follows_create && self.applies_config)
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
