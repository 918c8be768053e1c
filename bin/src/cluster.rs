//! `start` and `plan` for the cluster workflows, and how this process reaches Azure
//! (`--simulate`, `--simulator URL`, or the real thing).

use crate::{OutputFormat, open_store};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use hcp_activities::steps::{Clients, Reach};
use hcp_runtime::{NodeStatus, RunExit, RunState, RunView, StartOptions};
use hcp_workflows::config::{self, ClusterConfig};
use hcp_workflows::delete_cluster::DeleteOptions;
use hcp_workflows::layout::Layout;
use hcp_workflows::{create_cluster, delete_cluster, plan};
use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where Azure and the management cluster are.
#[derive(Args, Debug, Clone, Default)]
pub struct ReachArgs {
    /// Run against an in-process simulated Azure + management cluster (fast time scale; its
    /// state is kept beside a SQLite journal, `<db>.sim.json`, so a run can be resumed).
    #[arg(long, global = true, conflicts_with = "simulator")]
    pub simulate: bool,
    /// Run against a running `hcp-workflow simulator serve` at this URL.
    #[arg(long, global = true, value_name = "URL")]
    pub simulator: Option<String>,
}

/// A running in-process simulator (kept alive while the process needs it).
#[derive(Debug)]
pub struct SimHandle {
    _task: tokio::task::JoinHandle<()>,
}

fn sim_state_path(db: &str) -> Option<PathBuf> {
    let path = db.strip_prefix("sqlite://")?;
    let path = path.split('?').next().unwrap_or(path);
    Some(PathBuf::from(format!("{path}.sim.json")))
}

/// Decide how this process reaches the world; start the in-process simulator if asked.
pub async fn reach(args: &ReachArgs, db: &str) -> Result<(Reach, Option<SimHandle>)> {
    if let Some(url) = &args.simulator {
        return Ok((
            Reach::Simulator(url.trim_end_matches('/').to_string()),
            None,
        ));
    }
    if !args.simulate {
        return Ok((Reach::Direct, None));
    }
    let mut cfg = hcp_simulator::SimConfig {
        state_file: sim_state_path(db),
        ..Default::default()
    };
    if let Ok(v) = std::env::var("HCP_SIM_TIME_SCALE")
        && let Ok(f) = v.parse::<f64>()
    {
        cfg.time_scale = f;
    }
    let sim = hcp_simulator::Simulator::new(cfg).context("starting the in-process simulator")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the in-process simulator")?;
    let base = format!("http://{}", listener.local_addr()?);
    let task = tokio::spawn(async move {
        if let Err(e) = sim.serve(listener).await {
            tracing::error!(error = %e, "in-process simulator stopped");
        }
    });
    Ok((Reach::Simulator(base), Some(SimHandle { _task: task })))
}

/// Which cluster workflow.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workflow {
    /// Bring a cluster up.
    CreateCluster,
    /// Take it down.
    DeleteCluster,
}

/// `start`.
#[derive(Args, Debug)]
pub struct StartArgs {
    /// `create-cluster` or `delete-cluster`.
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
}

/// `plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// `create-cluster` or `delete-cluster`.
    #[arg(value_enum)]
    workflow: Workflow,
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// delete-cluster: include persistent resources.
    #[arg(long)]
    purge_persistent: bool,
}

/// Load and validate; print every problem and return `None` on failure (exit code 2).
fn load_config(path: &Path) -> Option<ClusterConfig> {
    match config::load(path) {
        Ok(c) => Some(c),
        Err(errs) => {
            eprintln!("error: {} is not a valid cluster file:", path.display());
            for e in errs.errors() {
                eprintln!("  {e}");
            }
            eprintln!("nothing was journaled or created");
            None
        }
    }
}

/// The infra id: configured, else (delete) the one the cluster's create run recorded, else
/// (create) a new one, recorded with the run.
async fn infra_id(
    cfg: &ClusterConfig,
    wf: Workflow,
    store: &Arc<dyn hcp_runtime::JournalStore>,
) -> Result<Option<String>> {
    if let Some(id) = &cfg.infra_id {
        return Ok(Some(id.clone()));
    }
    let runs = store
        .list_runs(&hcp_runtime::RunFilter {
            label: Some(("cluster".to_string(), cfg.name.clone())),
            workflow: Some(create_cluster::WORKFLOW.to_string()),
            ..Default::default()
        })
        .await?;
    let recorded = runs
        .iter()
        .filter_map(|r| r.labels.get("infra-id").cloned())
        .next(); // newest first
    Ok(match (wf, recorded) {
        (_, Some(r)) => Some(r),
        (Workflow::CreateCluster, None) => Some(cfg.infra_id_or_generate()),
        (Workflow::DeleteCluster, None) => None,
    })
}

fn build(
    wf: Workflow,
    cfg: &ClusterConfig,
    layout: &Layout,
    purge: bool,
) -> Result<hcp_runtime::SagaDag> {
    Ok(match wf {
        Workflow::CreateCluster => create_cluster::build(cfg, layout)?,
        Workflow::DeleteCluster => delete_cluster::build(
            cfg,
            layout,
            DeleteOptions {
                purge_persistent: purge,
            },
        )?,
    })
}

/// `plan`: print the steps and the undo plan; touches nothing (not even the journal,
/// unless a delete needs the infra id a create run recorded).
pub async fn plan(db: &str, reach_args: &ReachArgs, out: OutputFormat, a: PlanArgs) -> Result<u8> {
    let Some(cfg) = load_config(&a.config) else {
        return Ok(2);
    };
    let infra = match &cfg.infra_id {
        Some(i) => i.clone(),
        None => match a.workflow {
            Workflow::CreateCluster => format!("{}-<generated>", cfg.name),
            Workflow::DeleteCluster => {
                let store = open_store(db).await?;
                match infra_id(&cfg, a.workflow, &store).await? {
                    Some(i) => i,
                    None => {
                        eprintln!(
                            "error: infraID: not set in {} and no create-cluster run of `{}` in the journal; set infraID",
                            a.config.display(),
                            cfg.name
                        );
                        return Ok(2);
                    }
                }
            }
        },
    };
    let simulated = reach_args.simulate || reach_args.simulator.is_some();
    let layout = Layout::new(&cfg, &infra, simulated);
    let dag = build(a.workflow, &cfg, &layout, a.purge_persistent)?;
    let p = plan::plan(&dag);
    match out {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&p)?),
        OutputFormat::Text => print!("{}", p.render()),
    }
    Ok(0)
}

/// `start`.
pub async fn start(
    db: &str,
    reach_args: &ReachArgs,
    out: OutputFormat,
    a: StartArgs,
) -> Result<u8> {
    let Some(cfg) = load_config(&a.config) else {
        return Ok(2);
    };
    let store = open_store(db).await?;
    let Some(infra) = infra_id(&cfg, a.workflow, &store).await? else {
        eprintln!(
            "error: infraID: not set in {} and no create-cluster run of `{}` in this journal; set infraID to the cluster's infra id\nnothing was journaled or created",
            a.config.display(),
            cfg.name
        );
        return Ok(2);
    };
    let (reach, _sim) = reach(reach_args, db).await?;
    let simulated = !matches!(reach, Reach::Direct);
    let layout = Layout::new(&cfg, &infra, simulated);
    let dag = build(a.workflow, &cfg, &layout, a.purge_persistent)?;
    let clients = Clients::new(reach.clone());
    let e = crate::ops::cluster_engine(store, &clients)?;
    let labels: BTreeMap<String, String> = [
        ("cluster".to_string(), cfg.name.clone()),
        ("infra-id".to_string(), infra.clone()),
        (
            "target".to_string(),
            if simulated { "simulator" } else { "azure" }.to_string(),
        ),
        ("config".to_string(), a.config.display().to_string()),
    ]
    .into();
    let started = e
        .start(
            &dag,
            StartOptions {
                idempotency_key: a.idempotency_key.clone(),
                labels,
            },
        )
        .await?;
    let run = started.run_id;
    match out {
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({"run_id": run, "existing": started.existing, "infra_id": infra})
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
    if a.detach {
        if out == OutputFormat::Text {
            println!(
                "journaled only; run it with: hcp-workflow{} worker",
                flag_hint(reach_args)
            );
        }
        return Ok(0);
    }
    let progress = Progress::new(out);
    let ticker = {
        let (e, p) = (e.clone(), progress.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(v) = e.view(run).await {
                    p.update(&v);
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        })
    };
    let exit = e.drive(run, crate::ops::shutdown_signal()).await?;
    ticker.abort();
    let view = e.view(run).await?;
    progress.update(&view);
    progress.finish();
    let state = view.state();
    let ledger = hcp_runtime::ledger::ledger_of(&view);
    match out {
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({"run_id": run, "state": state, "blocked_on": view.blocked_on(), "ledger": ledger})
        ),
        OutputFormat::Text => {
            println!("run {run} is {state}");
            if let RunExit::Shutdown = exit {
                println!(
                    "stopped following; the run is safely resumable: hcp-workflow{} worker (or start again with the same --idempotency-key)",
                    flag_hint(reach_args)
                );
            } else if state != RunState::Succeeded {
                match &view.unwinding {
                    Some(hcp_runtime::UnwindCause::NodeFailed { node }) => {
                        let err = view
                            .node(node)
                            .and_then(|n| n.last_error.as_ref())
                            .map(ToString::to_string)
                            .unwrap_or_default();
                        println!("unwound because {node} failed: {err}");
                    }
                    Some(hcp_runtime::UnwindCause::Cancelled { by, reason }) => {
                        println!("unwound because {by} cancelled it: {reason}");
                    }
                    None => {}
                }
                println!("blocked on: {}", view.blocked_on());
                println!("details: hcp-workflow show {run}");
            } else {
                let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                for e in &ledger {
                    *counts.entry(e.record.action.as_str()).or_default() += 1;
                }
                let summary: Vec<String> = counts.iter().map(|(a, n)| format!("{n} {a}")).collect();
                println!(
                    "resource ledger: {} (hcp-workflow show {run})",
                    if summary.is_empty() {
                        "empty".to_string()
                    } else {
                        summary.join(", ")
                    }
                );
            }
        }
    }
    Ok(if state == RunState::Succeeded { 0 } else { 1 })
}

fn flag_hint(r: &ReachArgs) -> String {
    match (&r.simulator, r.simulate) {
        (Some(u), _) => format!(" --simulator {u}"),
        (None, true) => " --simulate".into(),
        _ => String::new(),
    }
}

/// Live progress: a bar per stage, the current step, waits with their reasons and retries
/// with the Azure error. On a terminal it draws bars; otherwise it prints one line per step
/// transition (logs, CI).
#[derive(Clone)]
struct Progress {
    inner: Arc<std::sync::Mutex<ProgressInner>>,
}

struct ProgressInner {
    out: OutputFormat,
    multi: Option<indicatif::MultiProgress>,
    bars: HashMap<String, indicatif::ProgressBar>,
    status: Option<indicatif::ProgressBar>,
    seen: HashMap<String, String>,
}

impl Progress {
    fn new(out: OutputFormat) -> Self {
        let tty = std::io::stderr().is_terminal() && out == OutputFormat::Text;
        Self {
            inner: Arc::new(std::sync::Mutex::new(ProgressInner {
                out,
                multi: tty.then(indicatif::MultiProgress::new),
                bars: HashMap::new(),
                status: None,
                seen: HashMap::new(),
            })),
        }
    }

    fn update(&self, v: &RunView) {
        let Ok(mut p) = self.inner.lock() else { return };
        if p.out == OutputFormat::Json {
            return;
        }
        if let Some(multi) = p.multi.clone()
            && p.bars.is_empty()
        {
            let style = indicatif::ProgressStyle::with_template(
                "{prefix:>14} [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            for stage in &v.dag.stages {
                let total = v.dag.nodes.iter().filter(|n| &n.stage == stage).count();
                let bar = multi.add(indicatif::ProgressBar::new(total as u64));
                bar.set_style(style.clone());
                bar.set_prefix(stage.clone());
                p.bars.insert(stage.clone(), bar);
            }
            let status = multi.add(indicatif::ProgressBar::new_spinner());
            status.enable_steady_tick(Duration::from_millis(120));
            p.status = Some(status);
        }
        // Stage bars.
        for stage in &v.dag.stages {
            let (done, undone) = v
                .dag
                .nodes
                .iter()
                .zip(&v.nodes)
                .filter(|(n, _)| &n.stage == stage)
                .fold((0u64, 0u64), |(d, u), (_, s)| match s.status {
                    NodeStatus::Succeeded => (d + 1, u),
                    NodeStatus::Undone { .. } => (d, u + 1),
                    _ => (d, u),
                });
            if let Some(bar) = p.bars.get(stage) {
                bar.set_position(done + undone);
                bar.set_message(if undone > 0 {
                    format!("({undone} undone)")
                } else {
                    String::new()
                });
            }
        }
        if let Some(s) = &p.status {
            s.set_message(format!("{} — {}", v.state(), v.blocked_on()));
        }
        // Transition lines.
        let mut lines = Vec::new();
        for (spec, st) in v.dag.nodes.iter().zip(&v.nodes) {
            let s = st.status.name().to_string();
            let detail = status_detail(&st.status);
            let key = format!("{s}{detail}");
            if p.seen.get(&spec.name) != Some(&key) && s != "pending" {
                lines.push(format!(
                    "  {:<14} {:<55} {s}{detail}",
                    spec.stage, spec.name
                ));
                p.seen.insert(spec.name.clone(), key);
            }
        }
        for l in lines {
            match &p.multi {
                Some(m) => {
                    let _ = m.println(l);
                }
                None => println!("{l}"),
            }
        }
    }

    fn finish(&self) {
        if let Ok(p) = self.inner.lock() {
            for b in p.bars.values() {
                b.abandon();
            }
            if let Some(s) = &p.status {
                s.finish_and_clear();
            }
        }
    }
}

/// What a step's status adds to its progress line: the retry and its error, the failure,
/// or what it waits for (empty otherwise).
pub(crate) fn status_detail(status: &NodeStatus) -> String {
    match status {
        NodeStatus::RetryScheduled { error, next_at, .. }
        | NodeStatus::UndoRetryScheduled { error, next_at, .. } => {
            format!(" — retry at {next_at}: {error}")
        }
        NodeStatus::Failed { error } | NodeStatus::UndoFailed { error } => format!(" — {error}"),
        NodeStatus::Waiting { reason, .. } | NodeStatus::UndoWaiting { reason, .. } => {
            format!(" — {reason}")
        }
        _ => String::new(),
    }
}
