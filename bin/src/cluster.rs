//! What `start` and `plan` share about the cluster workflows: the workflow as a CLI value
//! (derived from `workflow::ALL`), loading a cluster file, the infra id, building a DAG,
//! and what the journal's ledgers say exists.

use crate::output::Refused;
use anyhow::Result;
use clap::ValueEnum;
use hcp_workflows::config::{self, ClusterConfig};
use hcp_workflows::create_cluster;
use hcp_workflows::delete_cluster::DeleteOptions;
use hcp_workflows::layout::Layout;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which cluster workflow: one value per entry of [`hcp_workflows::workflow::ALL`], named
/// and described by its [`WorkflowDef`](hcp_workflows::workflow::WorkflowDef), so a new
/// workflow needs no line here.
#[derive(Copy, Clone, Debug)]
pub struct Workflow(&'static hcp_workflows::workflow::WorkflowDef);

impl PartialEq for Workflow {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Workflow {}

impl Workflow {
    /// The workflow `def` declares.
    pub fn of(def: &'static hcp_workflows::workflow::WorkflowDef) -> Self {
        Workflow(def)
    }

    /// What the workflow declares about itself.
    pub fn def(self) -> &'static hcp_workflows::workflow::WorkflowDef {
        self.0
    }
}

impl ValueEnum for Workflow {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<Vec<Workflow>> = std::sync::LazyLock::new(|| {
            hcp_workflows::workflow::ALL
                .iter()
                .map(|d| Workflow(d))
                .collect()
        });
        ALL.as_slice()
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name).help(self.0.summary))
    }
}

/// The run's failure policy from `--on-failure` and the file's `onFailure:` (the flag
/// wins); a bad one is refused naming the field (exit 2, nothing journaled).
pub(crate) fn failure_policy(
    wf: Workflow,
    flag: Option<&str>,
    cfg: &ClusterConfig,
) -> Result<hcp_runtime::FailurePolicy> {
    wf.def()
        .failure_policy(flag, cfg.on_failure.as_deref())
        .map_err(|(field, why)| {
            Refused::input(format!("{field}: {why}\nnothing was journaled or created"))
        })
}

/// Load and validate; print every problem and return `None` on failure (exit code 2).
/// The cluster file at `path`; invalid: a [`Refused`] naming every field and its fix.
pub(crate) fn load_config(path: &Path) -> Result<ClusterConfig> {
    config::load(path).map_err(|errs| {
        let mut msg = format!("{} is not a valid cluster file:", path.display());
        for e in errs.errors() {
            msg.push_str(&format!("\n  {e}"));
        }
        msg.push_str("\nnothing was journaled or created");
        Refused::input(msg)
    })
}

/// The `preflight` command for this start, with the run's target flags (a hint that drops
/// `--simulator URL` would check real Azure when copied).
pub(crate) fn preflight_command(target: &str, config: &Path, wf: Workflow) -> String {
    crate::target::command(
        Some(target),
        &format!(
            "preflight --config {}{}",
            config.display(),
            if wf == Workflow::of(&create_cluster::DEF) {
                String::new()
            } else {
                format!(" --workflow {}", wf.def().name)
            }
        ),
    )
}

/// The cluster file's absolute path and the SHA-256 of its bytes, for the audit labels.
pub(crate) fn config_identity(path: &Path) -> Result<(PathBuf, String)> {
    use sha2::Digest;
    let bytes = hcp_activities::files::read_regular(path, hcp_activities::files::MAX_INPUT_FILE)
        .map_err(|e| {
            Refused::input(format!(
                "--config {}: {e}\nnothing was journaled or created",
                path.display()
            ))
        })?;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let digest = sha2::Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    Ok((abs, hex))
}

/// The infra id: configured, else the one the cluster's newest create recorded, else (a
/// create) a new one, recorded with the run. `None`: a workflow that follows a create
/// finds none.
pub(crate) fn infra_for(
    cfg: &ClusterConfig,
    def: &hcp_workflows::workflow::WorkflowDef,
    standing: &crate::standing::Standing,
) -> Option<String> {
    if let Some(id) = &cfg.infra_id {
        return Some(id.clone());
    }
    match &standing.state.infra_id {
        Some(r) => Some(r.clone()),
        None if def.follows_create => None,
        None => Some(cfg.infra_id_or_generate()),
    }
}

pub(crate) fn build(
    wf: Workflow,
    cfg: &ClusterConfig,
    layout: &Layout,
    opts: DeleteOptions,
    applied: Option<&serde_json::Value>,
) -> Result<hcp_runtime::SagaDag> {
    let def = wf.def();
    Ok(crate::release::plan(def.dag(
        cfg,
        layout,
        hcp_workflows::workflow::BuildOptions {
            purge_persistent: opts.purge_persistent,
            skip_cloud_cleanup: opts.skip_cloud_cleanup,
            applied,
        },
        def.default_on_failure,
    )?))
}

/// The DAG of `wf` for `cfg` (for `preflight`, which derives permissions from it).
pub fn build_dag(
    wf: Workflow,
    cfg: &ClusterConfig,
    layout: &Layout,
    opts: DeleteOptions,
) -> Result<hcp_runtime::SagaDag> {
    build(wf, cfg, layout, opts, None)
}

/// A workflow that works on a cluster that exists (update, repair) without one: a
/// partially deleted cluster names the command that finishes its delete; otherwise no
/// create or update of it succeeded in this journal.
pub(crate) fn no_cluster(
    standing: &crate::standing::Standing,
    file: &Path,
    db: &str,
    target: Option<&str>,
    def: &hcp_workflows::workflow::WorkflowDef,
) -> anyhow::Error {
    // The create must reach the same world as this start would have.
    let create = crate::target::command(
        target,
        &format!(
            "start {} --config {}",
            hcp_workflows::create_cluster::WORKFLOW,
            file.display()
        ),
    );
    if let Some(sentence) = crate::standing::partially_deleted(&standing.state, target) {
        return Refused::input(format!(
            "{}: {sentence}\n{} works on a cluster that exists; to keep the cluster instead, create it again as it was applied: {create}\nnothing was journaled or created",
            file.display(),
            def.name,
        ));
    }
    Refused::input(format!(
        "{}: cluster {} has no applied configuration in journal {}: no create-cluster or update-cluster of it succeeded there (or a delete-cluster did since); update-cluster and repair-cluster work on a cluster this journal made. Create it first: {create}\nnothing was journaled or created",
        file.display(),
        standing.state.name,
        crate::services::store::shown_url(db),
    ))
}

/// The cluster's live resources by lower-cased id, from every run's ledger in the journal:
/// id → `exists: <action> by run <short id>`.
pub(crate) async fn known_resources(
    store: &Arc<dyn hcp_runtime::JournalStore>,
    cluster: &str,
) -> Result<HashMap<String, String>> {
    let filter = hcp_runtime::RunFilter {
        label: Some(("cluster".to_string(), cluster.to_string())),
        ..Default::default()
    };
    let mut summaries = store.list_runs(&filter).await?;
    summaries.reverse();
    let mut runs = Vec::new();
    for s in summaries {
        if let Some(rec) = store.load_run(s.id).await?
            && let Ok(f) = crate::views::model::fold(&rec)
        {
            runs.push((rec.summary, f));
        }
    }
    Ok(crate::views::model::inventory(&runs, false)
        .into_iter()
        .map(|r| {
            (
                r.id.to_ascii_lowercase(),
                format!(
                    "exists: {} by run {}",
                    r.action,
                    crate::runref::short(&r.run)
                ),
            )
        })
        .collect())
}
