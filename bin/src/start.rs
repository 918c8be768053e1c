//! `start`: a cluster workflow from a cluster file, in the order its phases run: the input
//! is checked, the journal opened, the world reached, the workflow admits the start against
//! the cluster's state, the cluster is claimed, the DAG built and checked against the cloud
//! (credentials, private link, preflight), the operator confirms what deletes or replaces,
//! and the run is journaled and followed (or left to a worker). Every refusal before the
//! journal write leaves nothing behind (exit 2).

use crate::cluster::{
    Workflow, build, config_identity, failure_policy, infra_for, known_resources, load_config,
    no_cluster, preflight_command,
};
use crate::output::{self, Refused};
use crate::reach::{
    ReachArgs, SimHandle, cloud_name, reach_for, refuse_simulate_without_shared_state,
};
use crate::services::{OutputFormat, open_store};
use anyhow::Result;
use clap::Args;
use hcp_activities::steps::{Clients, Reach};
use hcp_runtime::{RunState, StartOptions};
use hcp_workflows::config::{self, ClusterConfig};
use hcp_workflows::delete_cluster::DeleteOptions;
use hcp_workflows::layout::Layout;
use hcp_workflows::{create_cluster, plan};
use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `start`.
#[derive(Args, Debug)]
pub struct StartArgs {
    /// The workflow (`hcp-workflow start --help` describes each).
    #[arg(value_enum)]
    workflow: Workflow,
    /// The cluster file (see examples/cluster.yaml).
    #[arg(long)]
    config: PathBuf,
    /// Only journal the run; a `worker` executes it.
    #[arg(long)]
    detach: bool,
    /// A second start with the same key resumes the first run instead of starting another.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// delete-cluster: also delete persistent resources (identities, federated
    /// credentials, OIDC issuer, the persistent resource group).
    #[arg(long)]
    purge_persistent: bool,
    /// delete-cluster: if a create of this cluster is unfinished, cancel it, wait for its
    /// unwind to finish, then delete (without it, the delete is refused).
    #[arg(long)]
    cancel_running: bool,
    /// Journal the run without first proving that an ARM token can be had and that the
    /// management cluster answers (the journal records that the check was skipped).
    #[arg(long)]
    skip_preflight: bool,
    /// delete-cluster: do not ask HyperShift to remove what the guest cluster created in
    /// Azure (annotation `hypershift.openshift.io/cleanup-cloud-resources`, which
    /// `hypershift destroy cluster` sets). The guest's load balancers, disks, registry
    /// storage, ingress DNS records and its rules in a bring-your-own NSG are then left.
    #[arg(long)]
    skip_cloud_cleanup: bool,
    /// Go ahead without asking: delete-cluster, and an update-cluster or repair-cluster that deletes, replaces or cannot undo something (its ⚑ pivots). Required when stdin is not a terminal (CI, pipes, cron): without it such a run is refused (exit 2).
    #[arg(long, short = 'y')]
    yes: bool,
    /// What the run does when a step fails for good: `unwind` undoes every started step
    /// (create-cluster's default); `pause` keeps the work and waits for `retry` or
    /// `cancel`; `pause=24h` unwinds by itself if nobody acted by then. Wins over the
    /// file's `onFailure:`. delete-cluster only goes forward: always `pause`.
    #[arg(long, value_name = "unwind|pause[=DURATION]")]
    on_failure: Option<String>,
    #[command(flatten)]
    follow: crate::follow::FollowArgs,
}

/// A destructive command with nobody to ask (stdin is not a terminal: a pipe, CI, cron)
/// runs only with `--yes`, as `az group delete` and `terraform destroy` refuse: a script
/// that forgot the flag must not delete a cluster because its output happened to be piped.
///
/// # Errors
/// [`Refused`] (exit 2), before anything is checked, journaled or deleted.
pub fn refuse_unconfirmed_delete(workflow: Workflow, yes: bool, purge: bool) -> Result<()> {
    if !workflow.def().destructive || yes || std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(Refused::input(format!(
        "--yes: delete-cluster{} deletes the cluster's resources and asks first, but stdin is not a terminal, so nobody can be asked; pass --yes to delete without asking\nnothing was journaled or deleted",
        if purge { " --purge-persistent" } else { "" }
    )))
}

/// `start`: every phase below may refuse, and a refusal journals nothing of this run; only
/// [`journal`] records it (before that, only `--cancel-running` writes: the cancel of the
/// create it supersedes). The order is the order of the refusals: what the command line
/// and the file alone can refuse, then the journal and the cloud, then the cluster's other
/// runs, then the checks against the cloud, then the person at the keyboard.
pub async fn start(
    db: &str,
    reach_args: &ReachArgs,
    out: OutputFormat,
    a: StartArgs,
) -> Result<u8> {
    // A refusal says "nothing was journaled or created": a SQLite journal that opening it
    // created (with its lock and simulator files) goes again when nothing was journaled.
    let input = check_input(db, reach_args, &a)?;
    let fresh = FreshJournal::before(db);
    let store = open_store(db).await?;
    let mut journaled = false;
    let result =
        start_journaled(db, reach_args, out, a, input, store.clone(), &mut journaled).await;
    if !journaled
        && let Some(f) = fresh
        && untouched(&store).await
    {
        drop(store);
        f.remove_created();
    }
    result
}

/// What [`check_input`] read from the command line and the cluster file.
pub(crate) struct Input {
    cfg: ClusterConfig,
    policy: hcp_runtime::FailurePolicy,
    /// The file's absolute path and the SHA-256 of its bytes, for the audit labels.
    config_path: PathBuf,
    config_digest: String,
}

/// What the later phases of a start need: the cluster, the journal, and how this process
/// reaches the cloud the run targets.
pub(crate) struct Prepared {
    /// The cluster file; [`prepare_dag`] settles its `privateLink.managedBy`.
    cfg: ClusterConfig,
    policy: hcp_runtime::FailurePolicy,
    config_path: PathBuf,
    config_digest: String,
    store: Arc<dyn hcp_runtime::JournalStore>,
    infra: String,
    /// The run talks to a simulator (`--simulate` or `--simulator`), not to Azure.
    simulated: bool,
    layout: Layout,
    clients: Arc<Clients>,
    /// The run's target (which cloud, which simulator), as workers match it.
    target: String,
    /// At most one unfinished run per key: this cluster in this subscription.
    exclusive: String,
    /// The cluster as its runs leave it, read once for the whole start.
    standing: crate::standing::Standing,
    /// The journal's URL (`--database`).
    db_url: String,
    /// The in-process simulator (`--simulate`), kept for as long as the run is followed.
    _sim: Option<SimHandle>,
}

impl Prepared {
    /// update-cluster: the cluster's last applied configuration, the DAG's starting point
    /// (and its preflight counts only the machines it adds). `None` for other workflows.
    fn update_base(
        &self,
        def: &hcp_workflows::workflow::WorkflowDef,
    ) -> Option<&serde_json::Value> {
        self.standing.applied.as_ref().filter(|_| def.updates)
    }
}

/// What [`prepare_dag`] settled: the DAG to journal, with the private-link mode it was
/// built with and what the preflight found (both recorded as labels).
pub(crate) struct Checked {
    dag: hcp_runtime::SagaDag,
    managed_by: config::PrivateLinkManager,
    preflight_label: String,
}

/// Everything that can be refused from the command line and the file alone: an invalid
/// file or failure policy, an unreadable file, a detached run nobody could ever execute,
/// a delete with nobody to ask, `--cancel-running` on a create. Exit 2, before the journal
/// is opened or the cloud is reached.
pub(crate) fn check_input(db: &str, reach_args: &ReachArgs, a: &StartArgs) -> Result<Input> {
    let cfg = load_config(&a.config)?;
    let policy = failure_policy(a.workflow, a.on_failure.as_deref(), &cfg)?;
    let (config_path, config_digest) = config_identity(&a.config)?;
    if a.detach {
        refuse_simulate_without_shared_state(reach_args, db, "a detached run")?;
    }
    refuse_unconfirmed_delete(a.workflow, a.yes, a.purge_persistent)?;
    if a.detach && db == "memory:" {
        // The in-memory journal dies with this process: a detached run would exist nowhere.
        return Err(Refused::input(
            "--detach: the journal `memory:` ends with this process, so no worker could ever run the detached run; use a SQLite file or Postgres (--database), or drop --detach\nnothing was journaled or created",
        ));
    }
    if a.cancel_running && !(a.workflow.def().follows_create && a.workflow.def().destructive) {
        return Err(Refused::input(
            "--cancel-running: only for delete-cluster\nnothing was journaled or created",
        ));
    }
    Ok(Input {
        cfg,
        policy,
        config_path,
        config_digest,
    })
}

/// Whether `store` holds no run and no other process executes it: a journal this start
/// created and nobody else has used since (two starts racing on a fresh file: the one
/// refused must not remove the journal the other wrote).
pub(crate) async fn untouched(store: &Arc<dyn hcp_runtime::JournalStore>) -> bool {
    let runs = store
        .list_runs(&hcp_runtime::RunFilter {
            limit: 1,
            ..Default::default()
        })
        .await;
    matches!(runs, Ok(r) if r.is_empty()) && matches!(store.executor_holder().await, Ok(None))
}

/// The files of a SQLite journal that did not exist before this process opened it: the
/// database and everything beside it named after it (`-wal`, `-shm`, the lock files, the
/// in-process simulator's `.sim.json`).
#[derive(Debug)]
pub(crate) struct FreshJournal {
    dir: PathBuf,
    name: String,
    before: std::collections::BTreeSet<std::ffi::OsString>,
}

impl FreshJournal {
    /// `Some` when `db` names a SQLite file that does not exist yet.
    fn before(db: &str) -> Option<Self> {
        let path = db
            .strip_prefix("sqlite://")
            .or_else(|| db.strip_prefix("sqlite:"))?;
        let path = Path::new(path.split_once('?').map_or(path, |(p, _)| p));
        if path.as_os_str().is_empty() || path.starts_with(":memory:") || path.exists() {
            return None;
        }
        let name = path.file_name()?.to_string_lossy().into_owned();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let before = Self::named_like(&dir, &name);
        Some(Self { dir, name, before })
    }

    fn named_like(dir: &Path, name: &str) -> std::collections::BTreeSet<std::ffi::OsString> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok().map(|e| e.file_name()))
                    .filter(|f| f.to_string_lossy().starts_with(name))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Remove what appeared since [`FreshJournal::before`]; a file that cannot be removed
    /// is named (the refusal itself stands).
    fn remove_created(self) {
        for f in Self::named_like(&self.dir, &self.name).difference(&self.before) {
            let p = self.dir.join(f);
            if let Err(e) = std::fs::remove_file(&p)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                eprintln!("warning: cannot remove {}: {e}", p.display());
            }
        }
    }
}

/// [`start`] on the journal `store`; `journaled` is set once the run is in it.
pub(crate) async fn start_journaled(
    db: &str,
    reach_args: &ReachArgs,
    out: OutputFormat,
    a: StartArgs,
    input: Input,
    store: Arc<dyn hcp_runtime::JournalStore>,
    journaled: &mut bool,
) -> Result<u8> {
    let mut p = connect(db, reach_args, &a, input, store).await?;
    // The file as written (before `auto` is resolved), secrets as hashes.
    let record = a
        .workflow
        .def()
        .applies_config
        .then(|| hcp_workflows::applied::document(&p.cfg));
    if let ControlFlow::Break(code) = admit(&p, &a, db, out, record.as_ref())? {
        return Ok(code);
    }
    let e = match claim_cluster(&p, reach_args, out, &a).await? {
        ControlFlow::Continue(e) => e,
        ControlFlow::Break(code) => return Ok(code),
    };
    let mut checked = prepare_dag(&mut p, &a, out).await?;
    checked.dag.record = record;
    if a.workflow.def().destructive
        && let ControlFlow::Break(code) = nothing_to_delete(&p, &checked.dag, out).await?
    {
        return Ok(code);
    }
    confirm(&p, &a, &checked.dag).await?;
    let run = journal(&p, &e, &a, out, checked).await?;
    *journaled = true;
    if a.detach {
        if out == OutputFormat::Text {
            match serving_worker(&p.store, &p.target).await {
                Some(w) => println!(
                    "journaled; {w} runs it (follow it with: {})",
                    crate::target::command(None, &format!("watch {run}"))
                ),
                None => println!(
                    "journaled only; run it with: {}",
                    crate::target::worker_command(Some(&p.target))
                ),
            }
        }
        return Ok(0);
    }
    crate::follow::drive(&e, run, Some(&p.target), out, a.follow).await
}

/// On the journal `store`: settle the infra id (a delete without one in the file needs the
/// create run's), reach the simulator or Azure, and refuse when another process executes
/// this journal but would never run a run of this target.
pub(crate) async fn connect(
    db: &str,
    reach_args: &ReachArgs,
    a: &StartArgs,
    input: Input,
    store: Arc<dyn hcp_runtime::JournalStore>,
) -> Result<Prepared> {
    let Input {
        cfg,
        policy,
        config_path,
        config_digest,
    } = input;
    let def = a.workflow.def();
    let standing = crate::standing::of_file(&store, &cfg, def).await?;
    let Some(infra) = infra_for(&cfg, def, &standing) else {
        return Err(Refused::input(format!(
            "infraID: not set in {} and no create-cluster run of `{}` in this journal; set infraID to the cluster's infra id\nnothing was journaled or created",
            a.config.display(),
            cfg.name
        )));
    };
    let (reach, sim) = reach_for(reach_args, db, Some(&cfg)).await?;
    let simulated = !matches!(reach, Reach::Direct);
    let layout = Layout::new(&cfg, &infra, simulated);
    // The DAG is built once, in `prepare_dag`, with the resolved private-link mode.
    let clients = Clients::new(reach.clone());
    let target = crate::target::of_run(reach_args, &reach, cloud_name(&cfg));
    refuse_foreign_executor(&store, &target, "nothing was journaled or created").await?;
    let exclusive = a.workflow.def().exclusive_key(&cfg);
    Ok(Prepared {
        cfg,
        policy,
        config_path,
        config_digest,
        store,
        infra,
        simulated,
        layout,
        clients,
        target,
        exclusive,
        standing,
        db_url: db.to_string(),
        _sim: sim,
    })
}

/// The workflow's admission of this start, printed: nothing to change (`Break(0)`,
/// nothing journaled) or a refusal (exit 2), each as the workflow decided it.
pub(crate) fn admit(
    p: &Prepared,
    a: &StartArgs,
    db: &str,
    out: OutputFormat,
    doc: Option<&serde_json::Value>,
) -> Result<ControlFlow<u8>> {
    use hcp_workflows::workflow::{Admission, Admit};
    let def = a.workflow.def();
    let answer = (def.admit)(&Admit {
        cfg: &p.cfg,
        state: &p.standing.state,
        applied: p.standing.applied.as_ref(),
        file: doc,
    });
    match answer {
        Admission::Proceed => Ok(ControlFlow::Continue(())),
        Admission::NothingToChange { applied_by } => {
            match out {
                OutputFormat::Json => output::event(
                    "nothing-to-change",
                    &serde_json::json!({"cluster": p.cfg.name, "applied_by_run": applied_by}),
                ),
                OutputFormat::Text => println!(
                    "Nothing to change: cluster {} is as {} says (applied by run {}). Nothing was journaled.",
                    p.cfg.name,
                    a.config.display(),
                    crate::runref::short(&applied_by.to_string())
                ),
            }
            Ok(ControlFlow::Break(0))
        }
        Admission::NoCluster => Err(no_cluster(&p.standing, &a.config, db, Some(&p.target), def)),
        Admission::Differs {
            applied_by,
            changes,
            fix_workflow,
        } => {
            let list: Vec<String> = changes.iter().map(|c| format!("  {c}")).collect();
            let status =
                match crate::standing::partially_deleted(&p.standing.state, Some(&p.target)) {
                    Some(sentence) => format!(
                        "{sentence}
What is left of it was made by run {}",
                        crate::runref::short(&applied_by.to_string())
                    ),
                    None => format!(
                        "cluster {} exists (made by run {})",
                        p.cfg.name,
                        crate::runref::short(&applied_by.to_string())
                    ),
                };
            Err(Refused::input(format!(
                "{}: {status} and differs from this file in {} place{}:\n{}\n{} over it would adopt what exists and change none of this. To change the cluster: {}\nnothing was journaled or created",
                a.config.display(),
                changes.len(),
                if changes.len() == 1 { "" } else { "s" },
                list.join("\n"),
                def.name,
                crate::target::command(
                    Some(&p.target),
                    &format!("start {fix_workflow} --config {}", a.config.display())
                ),
            )))
        }
        Admission::CannotChangeInPlace { refused, changes } => {
            let list: Vec<String> = refused
                .iter()
                .map(|r| format!("  {}: {}\n    fix: {}", r.path, r.why, r.fix))
                .collect();
            Err(Refused::input(format!(
                "{}: {} cannot make {} of the {} change{} to cluster {} in place:\n{}\nnothing was journaled or created",
                a.config.display(),
                def.name,
                refused.len(),
                changes,
                if changes == 1 { "" } else { "s" },
                p.cfg.name,
                list.join("\n")
            )))
        }
        Admission::ReleaseRefused { failed, checked } => {
            eprintln!(
                "error: preflight: {} of {checked} release checks failed:",
                failed.len(),
            );
            eprint!("{}", crate::preflight::table(failed.iter()));
            Err(Refused::input(format!(
                "preflight: the release change of cluster {} is refused (above)\nnothing was journaled or created",
                p.cfg.name
            )))
        }
    }
}

/// At most one run per cluster works at a time. An unfinished run holding the cluster
/// refuses the start, unless it is this very start again (same idempotency key: the
/// engine resumes it), or a delete with `--cancel-running` meets an unfinished create
/// (cancelled here, and its unwind followed to its end first). Refused now rather than
/// after the checks against the cloud (the store decides again when the run is created).
/// `Continue` with the engine that journals the run; `Break` with the exit code when the
/// create being cancelled did not finish unwinding.
pub(crate) async fn claim_cluster(
    p: &Prepared,
    reach_args: &ReachArgs,
    out: OutputFormat,
    a: &StartArgs,
) -> Result<ControlFlow<u8, hcp_runtime::Engine>> {
    let workflow_name = a.workflow.def().name;
    // Read with the cluster's state in `connect` (the runs holding this exclusive key).
    let holder = p.standing.state.active.clone();
    let e = crate::services::engine::cluster_engine(
        p.store.clone(),
        &p.clients,
        Some(vec![p.target.clone()]),
    )?;
    if let Some(h) = holder {
        let same_key = a.idempotency_key.is_some() && h.idempotency_key == a.idempotency_key;
        if same_key && h.workflow != workflow_name {
            // The store would refuse it too; refused here so no check request is sent.
            return Err(refuse_key_reused(&hcp_runtime::EngineError::KeyReused {
                key: a.idempotency_key.clone().unwrap_or_default(),
                run: h.id,
                workflow: h.workflow.clone(),
            }));
        }
        if !same_key {
            if a.cancel_running && h.workflow == create_cluster::WORKFLOW {
                if let Some(code) =
                    cancel_and_wait(&e, &h, &p.cfg, reach_args, out, a.follow).await?
                {
                    return Ok(ControlFlow::Break(code));
                }
            } else {
                return Err(refuse_busy(
                    h.id,
                    &h.workflow,
                    h.state,
                    &p.cfg,
                    h.target.as_deref(),
                ));
            }
        }
    }
    Ok(ControlFlow::Continue(e))
}

/// Say why a start is refused because its idempotency key belongs to another start.
pub(crate) fn refuse_key_reused(err: &hcp_runtime::EngineError) -> anyhow::Error {
    Refused::refused(format!(
        "--idempotency-key: {err}\nnothing was journaled or created"
    ))
}

/// Why a start is refused because `busy` is unfinished, with the commands that help.
pub(crate) fn refuse_busy(
    busy: hcp_runtime::RunId,
    workflow: &str,
    state: RunState,
    cfg: &ClusterConfig,
    target: Option<&str>,
) -> anyhow::Error {
    let db = crate::target::database_flag();
    let mut msg = format!(
        "run {busy} ({workflow}, {state}) of cluster {} is unfinished; at most one run per cluster works at a time\n  watch it:     hcp-workflow{db} watch {busy}\n  continue it:  {}\n  cancel it:    hcp-workflow{db} cancel {busy} --reason '…'",
        cfg.name,
        crate::target::command(target, &format!("drive {busy}"))
    );
    if workflow == create_cluster::WORKFLOW {
        msg.push_str(
            "\n  or delete the cluster, cancelling the create first: … start delete-cluster --cancel-running",
        );
    }
    msg.push_str("\nnothing was journaled or created");
    Refused::refused(msg)
}

/// On SQLite one process executes a journal. When another process (a
/// worker) holds it and does not serve `target`, a run of `target` would be journaled and
/// then followed for ever (the worker never leases it, and this process may not execute
/// beside it): refuse at once instead.
pub(crate) async fn refuse_foreign_executor(
    store: &Arc<dyn hcp_runtime::JournalStore>,
    target: &str,
    nothing: &str,
) -> Result<()> {
    let Some(h) = store.executor_holder().await? else {
        return Ok(());
    };
    if h.serves(target) {
        return Ok(());
    }
    let serves = h.serves.unwrap_or_default();
    let flags: Vec<String> = serves
        .iter()
        .map(|t| {
            let f = crate::target::flags(Some(t));
            if f.is_empty() {
                "real Azure".to_string()
            } else {
                f.trim().to_string()
            }
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    Err(Refused::refused(format!(
        "the worker pid {} ({}) holds this journal and serves only {}, so it would never run a run of {}, and this process may not execute beside it (one executor per SQLite journal)
  stop that worker, or use another --database (or Postgres, where workers of different targets share one journal)
{nothing}",
        h.pid,
        h.worker,
        flags.join(", "),
        crate::target::describe(Some(target)),
    )))
}

/// Everything checked against the cloud before anything is journaled: credentials and the
/// management cluster, the private-link mode (settled into `p.cfg`, so the DAG is built
/// with it and a resumed run never resolves it again), the DAG with its failure policy,
/// and the full preflight of this very DAG.
pub(crate) async fn prepare_dag(
    p: &mut Prepared,
    a: &StartArgs,
    out: OutputFormat,
) -> Result<Checked> {
    if !a.skip_preflight {
        check_credentials(p, a).await?;
        warn_if_another_journal(p).await;
    }
    let managed_by = private_link_mode(p, a).await?;
    p.cfg.private_link.managed_by = managed_by;
    let mut dag = build(
        a.workflow,
        &p.cfg,
        &p.layout,
        DeleteOptions {
            purge_persistent: a.purge_persistent,
            skip_cloud_cleanup: a.skip_cloud_cleanup,
        },
        p.update_base(a.workflow.def()),
    )?;
    dag.on_failure = p.policy;
    let preflight_label = if a.skip_preflight {
        "skipped".to_string()
    } else {
        preflight_report(p, a, out, &dag, managed_by).await?
    };
    Ok(Checked {
        dag,
        managed_by,
        preflight_label,
    })
}

/// The HostedCluster names the run that last handled it (its
/// `hcp-workflow.io/run` label, which every run that creates or adopts it writes). When
/// that run is not in this journal, the cluster's history is in another one (a start from
/// another directory opened another `./hcp-workflow.db`, or another database): say so,
/// loudly when this journal is new and empty. A warning, not a refusal: the label may name
/// a run of a journal since retired. Never fails the start (a read error says nothing).
pub(crate) async fn warn_if_another_journal(p: &Prepared) {
    let Ok(mgmt) = p.clients.mgmt(&p.layout.mgmt).await else {
        return;
    };
    let read = mgmt.labels(
        hcp_activities::kube::mgmt::Kind::HostedCluster,
        hcp_workflows::layout::CLUSTERS_NAMESPACE,
        &p.cfg.name,
    );
    let Ok(Ok(Some(labels))) = tokio::time::timeout(Duration::from_secs(10), read).await else {
        return;
    };
    let Some(run) = labels.get(hcp_activities::kube::LABEL_RUN) else {
        return;
    };
    let Ok(id) = run.parse::<hcp_runtime::RunId>() else {
        return;
    };
    if !matches!(p.store.load_run(id).await, Ok(None)) {
        return;
    }
    let empty = p
        .store
        .list_runs(&hcp_runtime::RunFilter {
            limit: 1,
            ..Default::default()
        })
        .await
        .is_ok_and(|r| r.is_empty());
    eprintln!(
        "warning: HostedCluster {}/{} on the management cluster was last handled by run {run} (label {}), which is not in {} journal {}: this cluster's runs are in another journal. Point --database (or HCP_WORKFLOW_DATABASE_URL, or `database:` in {}) at it, or two journals will work on one cluster.",
        hcp_workflows::layout::CLUSTERS_NAMESPACE,
        p.cfg.name,
        hcp_activities::kube::LABEL_RUN,
        if empty { "this new, empty" } else { "this" },
        crate::services::store::shown_url(&p.db_url),
        crate::defaults::path_hint(),
    );
}

/// The run's first calls must be possible: an ARM token and an answering management
/// cluster, else refused naming what was tried and where to fix it.
pub(crate) async fn check_credentials(p: &Prepared, a: &StartArgs) -> Result<()> {
    let Err(why) = preflight(&p.clients, &p.layout).await else {
        return Ok(());
    };
    let cfg = &p.cfg;
    Err(Refused::refused(format!(
        "{why}\nchecked before journaling: an ARM token ({} auth) and the management cluster ({}); fix the credentials or the kubeconfig/context in {}, or pass --skip-preflight\nnothing was journaled or created",
        p.layout.azure.auth.as_str(),
        if p.simulated {
            "simulator".to_string()
        } else {
            format!(
                "kubeconfig {} context {}",
                cfg.management_cluster
                    .kubeconfig
                    .as_ref()
                    .map(|path| path.display().to_string())
                    .unwrap_or_else(|| "$KUBECONFIG or ~/.kube/config".into()),
                cfg.management_cluster
                    .context
                    .as_deref()
                    .unwrap_or("(current)")
            )
        },
        a.config.display()
    )))
}

/// `privateLink.managedBy`: resolved (and checked against the operator's install) before
/// anything is journaled. A delete tears down what the create made: with `auto`, the mode
/// the create run recorded wins over today's install (the operator may have been
/// reinstalled since).
pub(crate) async fn private_link_mode(
    p: &Prepared,
    a: &StartArgs,
) -> Result<config::PrivateLinkManager> {
    let recorded = if a.workflow.def().follows_create
        && p.cfg.private_link.managed_by == config::PrivateLinkManager::Auto
    {
        p.standing.state.private_link
    } else {
        None
    };
    Ok(match recorded {
        Some(m) => m,
        None => match resolve_private_link(&p.cfg, &p.clients, &p.layout, a.skip_preflight).await {
            Ok(m) => m,
            Err(why) => {
                return Err(Refused::input(format!(
                    "privateLink.managedBy: {why}\nnothing was journaled or created"
                )));
            }
        },
    })
}

/// The concrete `privateLink.managedBy` of a run: `auto` read from the HyperShift
/// operator Deployment `hypershift/operator` (`--private-platform=Azure` or
/// `--private-platform Azure` → `hypershift`, else `hcp-workflow`); an explicit mode that
/// contradicts the operator's install is refused, with the fix. With `--skip-preflight` an
/// explicit mode is taken as given, and an `auto` that cannot read the install becomes
/// `hcp-workflow` with a warning. `Err` is the reason (exit 2, nothing journaled).
pub(crate) async fn resolve_private_link(
    cfg: &ClusterConfig,
    clients: &Clients,
    layout: &Layout,
    skip_preflight: bool,
) -> std::result::Result<config::PrivateLinkManager, String> {
    use config::PrivateLinkManager as M;
    let asked = cfg.private_link.managed_by;
    if !cfg.topology.uses_private_link() {
        // Nothing to make: recorded as today's mode.
        return Ok(if asked == M::Auto {
            M::HcpWorkflow
        } else {
            asked
        });
    }
    if skip_preflight && asked != M::Auto {
        return Ok(asked);
    }
    let install = async {
        let m = clients.mgmt(&layout.mgmt).await.map_err(|e| e.message)?;
        hcp_activities::steps::hypershift_link::operator_install(&m)
            .await
            .map_err(|e| e.to_string())
    };
    let install = match tokio::time::timeout(Duration::from_secs(20), install).await {
        Ok(Ok(i)) => i,
        // Checks skipped on purpose (the run records it): an unreadable install leaves
        // `auto` at today's mode, said plainly.
        Ok(Err(e)) if skip_preflight => {
            eprintln!(
                "warning: --skip-preflight: Deployment hypershift/operator could not be read ({e}); privateLink.managedBy: auto is taken as hcp-workflow — set it to hypershift if the operator runs with --private-platform Azure"
            );
            return Ok(M::HcpWorkflow);
        }
        Err(_) if skip_preflight => {
            eprintln!(
                "warning: --skip-preflight: the management cluster did not answer; privateLink.managedBy: auto is taken as hcp-workflow — set it to hypershift if the operator runs with --private-platform Azure"
            );
            return Ok(M::HcpWorkflow);
        }
        Ok(Err(e)) => {
            return Err(format!(
                "`{}` needs the HyperShift operator's install, which could not be read: {e}; set privateLink.managedBy to hypershift or hcp-workflow{}",
                asked.as_str(),
                if asked == M::Auto {
                    ""
                } else {
                    " and pass --skip-preflight"
                }
            ));
        }
        Err(_) => {
            return Err("the management cluster's API server did not answer within 20 s while reading Deployment hypershift/operator".into());
        }
    };
    if !install.found && asked == M::Auto {
        return Err("`auto` reads the args of Deployment hypershift/operator, which does not exist on the management cluster; install HyperShift, or set privateLink.managedBy to hypershift or hcp-workflow".into());
    }
    let flag = install.private_platform_azure;
    let resolved = match (asked, flag) {
        (M::Auto, true) => M::Hypershift,
        (M::Auto, false) => M::HcpWorkflow,
        (M::HcpWorkflow, true) => {
            return Err("`hcp-workflow` contradicts the HyperShift operator's install: Deployment hypershift/operator runs with --private-platform=Azure, so HyperShift's own controllers create a private link service for this cluster too. Fix: set privateLink.managedBy: hypershift (or auto), or reinstall the operator without --private-platform".into());
        }
        (M::Hypershift, false) if install.found => {
            return Err("`hypershift` contradicts the HyperShift operator's install: Deployment hypershift/operator runs without --private-platform Azure, so nothing would create the private link service. Fix: set privateLink.managedBy: hcp-workflow (or auto), or reinstall the operator with --private-platform Azure".into());
        }
        (m, _) => m,
    };
    if resolved == M::Hypershift && !install.route_api {
        return Err("`hypershift`: the management cluster serves no Route API (route.openshift.io), so HyperShift's control-plane operator never starts its private-link controllers (control-plane-operator/main.go setupPrivatePlatformControllers); self-managed private clusters need an OpenShift management cluster".into());
    }
    Ok(resolved)
}

/// Every check that applies to this workflow (the permissions derived from this
/// very DAG), read-only, before anything is journaled. A failure prints the failed rows
/// and refuses; warnings do not stop a start, but are not hidden either.
/// The `preflight` label of the run.
pub(crate) async fn preflight_report(
    p: &Prepared,
    a: &StartArgs,
    out: OutputFormat,
    dag: &hcp_runtime::SagaDag,
    managed_by: config::PrivateLinkManager,
) -> Result<String> {
    let report = crate::preflight::run_for(
        &p.cfg,
        &p.layout,
        dag,
        &p.clients,
        a.workflow,
        managed_by,
        crate::preflight::START_TIMEOUT,
        p.update_base(a.workflow.def()),
    )
    .await;
    if report.failed() {
        let failed: Vec<_> = report.failures().collect();
        eprintln!(
            "error: preflight: {} of {} checks failed:",
            failed.len(),
            report.rows.len()
        );
        eprint!("{}", crate::preflight::table(failed.into_iter()));
        eprintln!(
            "full report: {}; or pass --skip-preflight",
            preflight_command(&p.target, &a.config, a.workflow)
        );
        return Err(Refused::refused_with(
            format!(
                "preflight: {} of {} checks failed (above)\nnothing was journaled or created",
                report.failures().count(),
                report.rows.len()
            ),
            crate::preflight::report_json(&report, &p.cfg.name),
        ));
    }
    let (pass, w, _) = report.counts();
    if out == OutputFormat::Text && w > 0 {
        eprintln!(
            "preflight: {pass} pass, {w} warn (`{}` for details)",
            preflight_command(&p.target, &a.config, a.workflow)
        );
    }
    Ok(format!("passed ({pass} pass, {w} warn)"))
}

/// Prove, before anything is journaled, that this process can do the run's first calls: an
/// ARM token for the run's cloud and tenant (every credential mode it tries is named on
/// failure), and an answer from the management cluster's API server.
pub(crate) async fn preflight(
    clients: &Clients,
    layout: &Layout,
) -> std::result::Result<(), String> {
    if let Err(e) = clients.arm(&layout.azure).await {
        return Err(format!(
            "no ARM token for tenant {} ({:?} cloud, auth {}): {}",
            layout.azure.tenant_id,
            layout.azure.cloud,
            layout.azure.auth.as_str(),
            e.message
        ));
    }
    let mgmt = clients
        .mgmt(&layout.mgmt)
        .await
        .map_err(|e| format!("the management cluster: {}", e.message))?;
    match tokio::time::timeout(Duration::from_secs(20), mgmt.client().apiserver_version()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "the management cluster's API server did not answer: {e}"
        )),
        Err(_) => Err("the management cluster's API server did not answer within 20 s".into()),
    }
}

/// A delete of a cluster no run of this journal created, of which nothing exists in Azure
/// or on the management cluster (every target of the delete's DAG is gone): said so, exit
/// 0 with nothing journaled, as an unchanged update's "Nothing to change". Without this, the
/// delete would ask about resources that are not there, journal a run that finds each one
/// gone, and list the cluster as deleted. Anything found, or that cannot be checked, lets
/// the delete go on as usual.
pub(crate) async fn nothing_to_delete(
    p: &Prepared,
    dag: &hcp_runtime::SagaDag,
    out: OutputFormat,
) -> Result<ControlFlow<u8>> {
    let created = p
        .store
        .list_runs(&hcp_runtime::RunFilter {
            label: Some(("cluster".to_string(), p.cfg.name.clone())),
            ..Default::default()
        })
        .await?
        .iter()
        .any(|r| r.workflow == create_cluster::WORKFLOW);
    if created {
        return Ok(ControlFlow::Continue(()));
    }
    match crate::absent::look(dag, &p.clients).await {
        crate::absent::Live::Maybe(found) => {
            tracing::debug!("delete of a cluster this journal never created: {found}");
            Ok(ControlFlow::Continue(()))
        }
        crate::absent::Live::Nothing => {
            match out {
                OutputFormat::Json => output::event(
                    "nothing-to-delete",
                    &serde_json::json!({"cluster": p.cfg.name, "infra_id": p.infra}),
                ),
                OutputFormat::Text => println!(
                    "nothing exists for cluster/{}: nothing to delete (no run of journal {} created it, and none of what delete-cluster removes exists in Azure or on the management cluster). Nothing was journaled.",
                    p.cfg.name,
                    crate::services::store::shown_url(&p.db_url),
                ),
            }
            Ok(ControlFlow::Break(0))
        }
    }
}

/// `terraform destroy` / `az group delete`: a delete lists what goes and what stays, and
/// asks whenever stdin is a terminal (whatever stdout/stderr are piped to); with no
/// terminal to ask on it was refused in [`check_input`] unless `--yes`.
pub(crate) async fn confirm(p: &Prepared, a: &StartArgs, dag: &hcp_runtime::SagaDag) -> Result<()> {
    if !a.workflow.def().destructive {
        return confirm_change(p, a, dag);
    }
    if !a.yes && std::io::stdin().is_terminal() {
        let known = known_resources(&p.store, &p.cfg.name)
            .await
            .unwrap_or_default();
        if !confirm_delete(&p.cfg, &p.infra, dag, &known, a.purge_persistent)? {
            return Err(Refused::refused(
                "not confirmed: nothing was journaled or deleted",
            ));
        }
    }
    Ok(())
}

/// Lists what a delete removes and what it keeps, and asks; `true` on `yes`.
pub(crate) fn confirm_delete(
    cfg: &ClusterConfig,
    infra: &str,
    dag: &hcp_runtime::SagaDag,
    known: &HashMap<String, String>,
    purge_persistent: bool,
) -> Result<bool> {
    use std::io::Write as _;
    let mut err = prompt_stream();
    let p = plan::plan(dag);
    let mut deleted: Vec<String> = p
        .steps
        .iter()
        .flat_map(|s| s.resources.iter().cloned())
        .filter(|r| !r.starts_with("wait for "))
        .collect();
    deleted.dedup();
    writeln!(
        err,
        "delete-cluster will delete cluster {} (infra id {infra}) — {} resources:",
        cfg.name,
        deleted.len()
    )?;
    for r in &deleted {
        let mark = if known.contains_key(&r.to_ascii_lowercase()) {
            ""
        } else {
            "  (if present)"
        };
        writeln!(err, "  - {r}{mark}")?;
    }
    writeln!(err, "and keep:")?;
    if !purge_persistent {
        writeln!(
            err,
            "  - the persistent resources in {} (identities, federated credentials, OIDC issuer): --purge-persistent deletes them",
            cfg.persistent_resource_group
        )?;
    }
    writeln!(
        err,
        "  - anything the file brings (existing network, identities, OIDC issuer), the public DNS zone {}, and other clusters' resources",
        cfg.base_domain
    )?;
    write!(err, "Delete cluster {}? Only 'yes' is accepted: ", cfg.name)?;
    err.flush()?;
    drop(err);
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

/// An update or repair that deletes, replaces or cannot undo something is shown first
/// (what goes, the ⚑ pivots, a pool that looks renamed, terraform's summary line), then
/// asked on a terminal ("only yes"); with nobody to ask it needs `--yes` (exit 2, nothing
/// journaled), as a delete does: removing a pool from the file must not silently delete
/// its machines because a script ran the command.
pub(crate) fn confirm_change(
    p: &Prepared,
    a: &StartArgs,
    dag: &hcp_runtime::SagaDag,
) -> Result<()> {
    use std::io::Write as _;
    let def = a.workflow.def();
    let c = match (p.update_base(def), &dag.record) {
        (Some(applied), Some(doc)) if def.updates => {
            hcp_workflows::update_cluster::classify(applied, doc).consequences(&p.cfg.name, dag)
        }
        _ if def.applies_config && def.follows_create => {
            hcp_workflows::update_cluster::Consequences::of_dag(dag)
        }
        _ => return Ok(()),
    };
    if c.harmless() {
        return Ok(());
    }
    let head = format!(
        "{} of cluster {} deletes, replaces or cannot undo:\n{}",
        def.name,
        p.cfg.name,
        c.render()
    );
    if a.yes {
        eprintln!("{head}\n(--yes: not asked)");
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Refused::input(format!(
            "{head}\n--yes: stdin is not a terminal, so nobody can be asked; read the plan (`{}`), then pass --yes to go ahead\nnothing was journaled or created",
            crate::target::command(
                Some(&p.target),
                &format!("plan {} --config {}", def.name, a.config.display())
            )
        )));
    }
    let mut err = prompt_stream();
    writeln!(err, "{head}")?;
    write!(
        err,
        "Go ahead with {} of cluster {}? Only 'yes' is accepted: ",
        def.name, p.cfg.name
    )?;
    err.flush()?;
    drop(err);
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    if answer.trim() != "yes" {
        return Err(Refused::refused(
            "not confirmed: nothing was journaled or changed",
        ));
    }
    Ok(())
}

/// Where a question goes: stderr when that is the terminal, else the terminal itself
/// (`… 2>&1 | tee run.log` must still ask).
pub(crate) fn prompt_stream() -> Box<dyn std::io::Write> {
    if std::io::stderr().is_terminal() {
        Box::new(std::io::stderr().lock())
    } else {
        match std::fs::OpenOptions::new().write(true).open("/dev/tty") {
            Ok(tty) => Box::new(tty),
            Err(_) => Box::new(std::io::stderr().lock()),
        }
    }
}

/// Journal the run with its labels and print the `started` line. A run that took the
/// cluster (or the idempotency key) since [`claim_cluster`] looked is refused as it would
/// have been there.
pub(crate) async fn journal(
    p: &Prepared,
    e: &hcp_runtime::Engine,
    a: &StartArgs,
    out: OutputFormat,
    checked: Checked,
) -> Result<hcp_runtime::RunId> {
    let Checked {
        dag,
        managed_by,
        preflight_label,
    } = checked;
    let cfg = &p.cfg;
    let infra = &p.infra;
    let labels = run_labels(p, preflight_label, managed_by);
    let started = match e
        .start(
            &dag,
            StartOptions {
                idempotency_key: a.idempotency_key.clone(),
                labels,
                exclusive_key: Some(p.exclusive.clone()),
                target: Some(p.target.clone()),
            },
        )
        .await
    {
        Ok(s) => s,
        Err(hcp_runtime::EngineError::Busy {
            run,
            workflow,
            state,
            ..
        }) => {
            let t = e
                .store()
                .load_run(run)
                .await?
                .and_then(|r| r.summary.target);
            return Err(refuse_busy(run, &workflow, state, cfg, t.as_deref()));
        }
        Err(err @ hcp_runtime::EngineError::KeyReused { .. }) => {
            return Err(refuse_key_reused(&err));
        }
        Err(err) => return Err(err.into()),
    };
    let run = started.run_id;
    match out {
        OutputFormat::Json => output::event(
            "started",
            &serde_json::json!({
                "run_id": run, "short_id": crate::runref::short(&run.to_string()),
                "workflow": dag.workflow, "cluster": cfg.name, "infra_id": infra,
                "target": p.target, "existing": started.existing, "detached": a.detach,
            }),
        ),
        OutputFormat::Text => println!(
            "run {run}{} — {} of cluster {} (infra id {infra})",
            if started.existing {
                " (existing run for this idempotency key)"
            } else {
                ""
            },
            dag.workflow,
            cfg.name
        ),
    }
    Ok(run)
}

/// The run's labels: which cluster, which file (and what was in it), which tenant, what
/// the preflight found, who started it, and the private-link mode the DAG was built with.
pub(crate) fn run_labels(
    p: &Prepared,
    preflight_label: String,
    managed_by: config::PrivateLinkManager,
) -> BTreeMap<String, String> {
    let cfg = &p.cfg;
    let mut labels: BTreeMap<String, String> = [
        ("cluster".to_string(), cfg.name.clone()),
        ("infra-id".to_string(), p.infra.clone()),
        (
            "target".to_string(),
            if p.simulated { "simulator" } else { "azure" }.to_string(),
        ),
        // The absolute path and the file's digest: which file, with what in it (secrets
        // are paths in it, so the file itself holds none).
        ("config".to_string(), p.config_path.display().to_string()),
        ("config-sha256".to_string(), p.config_digest.clone()),
        // The Entra tenant (not a secret): the UI links resources into its Azure portal.
        ("tenant".to_string(), cfg.tenant.clone()),
    ]
    .into();
    labels.insert("preflight".to_string(), preflight_label);
    labels.extend(crate::services::identity::audit_labels());
    if cfg.topology.uses_private_link() {
        labels.insert("private-link".to_string(), managed_by.as_str().to_string());
    }
    labels
}

/// A live worker that will pick up a run of `target` without anyone starting one, in
/// words ("the worker pid 42 (w-1) serving this journal"): on SQLite the process holding
/// the journal's executor lock when it serves `target`; on any store, a worker holding a
/// live lease on another run of `target` (it polls for due runs of the targets it serves).
/// `None` when the journal knows of none: an idle Postgres worker holds nothing to show.
pub(crate) async fn serving_worker(
    store: &Arc<dyn hcp_runtime::JournalStore>,
    target: &str,
) -> Option<String> {
    if let Ok(Some(h)) = store.executor_holder().await
        && h.serves(target)
    {
        return Some(format!(
            "the worker pid {} ({}) serving this journal",
            h.pid, h.worker
        ));
    }
    let now = crate::services::clock().now();
    let runs = store
        .list_runs(&hcp_runtime::RunFilter {
            states: vec![RunState::Running, RunState::Waiting, RunState::Unwinding],
            ..Default::default()
        })
        .await
        .ok()?;
    if let Some(o) = runs
        .iter()
        .find(|r| r.target.as_deref() == Some(target) && crate::views::model::lease_live(r, now))
        .and_then(|r| r.lease_owner.as_ref())
    {
        return Some(format!(
            "the worker {o}, which holds runs of the same target,"
        ));
    }
    // An idle worker on Postgres holds nothing: its word in the journal says it is up.
    crate::services::presence::serving(store, target)
        .await
        .map(|w| format!("the worker {w}, which serves this target,"))
}

/// Cancel the unfinished create `h` and wait until its unwind ends. `Some(code)`: stop
/// with that exit code (the unwind could not finish, or the operator interrupted).
pub(crate) async fn cancel_and_wait(
    e: &hcp_runtime::Engine,
    h: &hcp_runtime::RunSummary,
    cfg: &ClusterConfig,
    reach_args: &ReachArgs,
    out: OutputFormat,
    f: crate::follow::FollowArgs,
) -> Result<Option<u8>> {
    let served = crate::target::served(reach_args);
    if let Some(t) = &h.target
        && !served.contains(t)
    {
        return Err(Refused::refused(format!(
            "the unfinished create {} targets {}; run the delete from a process that reaches it",
            h.id,
            crate::target::describe(Some(t))
        )));
    }
    if h.state != RunState::Unwinding {
        match e
            .submit(
                h.id,
                hcp_runtime::OperatorCommand::Cancel,
                &crate::services::identity::who(),
                "superseded by start delete-cluster --cancel-running",
            )
            .await
        {
            Ok(_) => eprintln!(
                "cancelling run {} (create-cluster of {}) before the delete",
                h.id, cfg.name
            ),
            Err(hcp_runtime::EngineError::CommandRefused(why)) => {
                return Err(Refused::refused(format!(
                    "cannot cancel run {}: {why}\nnothing was journaled or created; see: hcp-workflow{} why {}",
                    h.id,
                    crate::target::database_flag(),
                    h.id
                )));
            }
            Err(err) => return Err(err.into()),
        }
    }
    let code = crate::follow::drive(e, h.id, h.target.as_deref(), out, f).await?;
    let state = e.view(h.id).await?.state();
    if state.is_terminal() {
        return Ok(None);
    }
    eprintln!(
        "error: run {} did not finish unwinding ({state}); nothing was journaled for the delete",
        h.id
    );
    Ok(Some(if code == 0 { 2 } else { code }))
}
