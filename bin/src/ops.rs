//! Worker, self-test and operator commands (the read-only views are in `crate::views`).

use crate::{OutputFormat, open_store};
use anyhow::{Context, Result};
use clap::Args;
use hcp_runtime::testkit::{self, CrashHooks, World};
use hcp_runtime::{
    Engine, EngineConfig, EngineHooks, JournalStore, NoHooks, OperatorCommand, RunExit, RunId,
    RunState, StartOptions, SystemClock,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Directory the self-test saga's side effects go to.
    #[arg(long, default_value = "./hcp-workflow-selftest")]
    world: PathBuf,
}

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// Directory the self-test saga's side effects go to.
    #[arg(long, default_value = "./hcp-workflow-selftest")]
    world: PathBuf,
    /// Make this step fail permanently (a, b1, b2, c or d) to watch the saga unwind.
    #[arg(long)]
    fail: Vec<String>,
    /// A second start with the same key resumes the first run instead of starting another.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Prefix for the resource names (default: a fresh random one, or none with
    /// `--idempotency-key`, so a resumed run finds its own resources).
    #[arg(long)]
    prefix: Option<String>,
    /// Only journal the run; a `worker` executes it.
    #[arg(long)]
    detach: bool,
}

#[derive(Args, Debug)]
pub struct CommandArgs {
    /// Run id.
    pub run: RunId,
    /// Why (journaled with your user name).
    #[arg(long)]
    pub reason: Option<String>,
}

#[derive(Args, Debug)]
pub struct RetryArgs {
    #[command(flatten)]
    pub common: CommandArgs,
    /// The step to retry (default: every waiting, backing-off or stuck step).
    #[arg(long)]
    pub step: Option<String>,
}

#[derive(Args, Debug)]
pub struct ResolveArgs {
    /// Run id.
    pub run: RunId,
    /// The step whose undo gave up.
    #[arg(long)]
    pub step: String,
    /// What you did by hand (journaled).
    #[arg(long)]
    pub note: String,
}

/// Engine tunables, overridable by environment for tests and operations.
fn config() -> EngineConfig {
    let mut c = EngineConfig::default();
    let ms = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis)
    };
    if let Some(d) = ms("HCP_LEASE_TTL_MS") {
        c.lease_ttl = d;
    }
    if let Some(d) = ms("HCP_POLL_MS") {
        c.poll_interval = d;
    }
    if let Some(d) = ms("HCP_HOLD_MS") {
        c.hold_threshold = d;
    }
    c
}

fn world(dir: &PathBuf, extra_fail: &[String]) -> Result<Arc<World>> {
    let w = World::new(dir);
    if let Ok(json) = std::env::var("HCP_SAMPLE_FAULTS") {
        let f: testkit::Faults =
            serde_json::from_str(&json).context("HCP_SAMPLE_FAULTS is not valid JSON faults")?;
        *w.faults() = f;
    }
    w.faults().fail.extend(extra_fail.iter().cloned());
    Ok(w)
}

fn engine(store: Arc<dyn JournalStore>, w: &Arc<World>) -> Engine {
    engine_with(store, testkit::registry(w), None)
}

fn engine_with(
    store: Arc<dyn JournalStore>,
    registry: hcp_runtime::Registry,
    targets: Option<Vec<String>>,
) -> Engine {
    let hooks: Arc<dyn EngineHooks> = match CrashHooks::from_env() {
        Some(h) => Arc::new(h),
        None => Arc::new(NoHooks),
    };
    let mut c = config();
    c.targets = targets;
    Engine::with(store, registry, Arc::new(SystemClock), hooks, c)
}

/// An engine knowing the cluster actions (reaching the world through `clients`), leasing
/// only runs of `targets` (and runs without a target).
pub fn cluster_engine(
    store: Arc<dyn JournalStore>,
    clients: &Arc<hcp_activities::steps::Clients>,
    targets: Option<Vec<String>>,
) -> Result<Engine> {
    let mut r = hcp_runtime::Registry::new();
    hcp_workflows::register(&mut r, clients)?;
    Ok(engine_with(store, r, targets))
}

pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

pub async fn worker(db: &str, reach_args: &crate::cluster::ReachArgs, a: WorkerArgs) -> Result<u8> {
    let store = open_store(db).await?;
    let w = world(&a.world, &[])?;
    // One worker runs every workflow: the self-test saga and the cluster sagas, but only
    // runs of the world it reaches (runs of other targets stay pending for their workers).
    let (reach, _sim) = crate::cluster::reach(reach_args, db).await?;
    let clients = hcp_activities::steps::Clients::new(reach);
    let mut registry = testkit::registry(&w);
    hcp_workflows::register(&mut registry, &clients)?;
    let served = crate::target::served(reach_args);
    let e = engine_with(store, registry, Some(served.clone()));
    eprintln!(
        "worker {} executing runs from {db} for {} (SIGTERM or Ctrl-C to stop)",
        e.worker_id(),
        served
            .iter()
            .map(|t| crate::target::describe(Some(t)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    e.run_worker(shutdown_signal()).await?;
    eprintln!("worker {} stopped; its leases are released", e.worker_id());
    Ok(0)
}

/// The operator's identity for the journal: `$USER`, `$LOGNAME`, else `uid-<n>`, at the
/// host name.
pub fn who() -> String {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| {
            std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Uid:"))
                        .and_then(|l| l.split_whitespace().next().map(|u| format!("uid-{u}")))
                })
                .unwrap_or_else(|| "unknown".into())
        });
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "localhost".into());
    format!("{user}@{host}")
}

pub async fn selftest(db: &str, out: OutputFormat, a: SelftestArgs) -> Result<u8> {
    for f in &a.fail {
        if !testkit::SAMPLE_NODES.contains(&f.as_str()) {
            eprintln!(
                "error: --fail {f}: no such step; the self-test steps are {}",
                testkit::SAMPLE_NODES.join(", ")
            );
            return Ok(2);
        }
    }
    let store = open_store(db).await?;
    let w = world(&a.world, &a.fail)?;
    let e = engine(store, &w);
    let prefix = match (&a.prefix, &a.idempotency_key) {
        (Some(p), _) => p.clone(),
        (None, Some(_)) => String::new(),
        (None, None) => format!("{}-", &uuid::Uuid::new_v4().simple().to_string()[..6]),
    };
    let started = e
        .start(
            &testkit::sample_dag_for(&prefix),
            StartOptions {
                idempotency_key: a.idempotency_key.clone(),
                labels: [("cluster".to_string(), "selftest".to_string())].into(),
                ..Default::default()
            },
        )
        .await?;
    let run = started.run_id;
    match out {
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({"run_id": run, "existing": started.existing})
        ),
        OutputFormat::Text => println!(
            "run {run}{}",
            if started.existing {
                " (existing run for this idempotency key)"
            } else {
                ""
            }
        ),
    }
    if a.detach {
        return Ok(0);
    }
    let seen = Arc::new(std::sync::Mutex::new(HashMap::new()));
    let progress = {
        let (e, seen) = (e.clone(), seen.clone());
        tokio::spawn(async move {
            loop {
                print_transitions(&e, run, out, &seen).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let exit = e.drive(run, shutdown_signal()).await?;
    progress.abort();
    print_transitions(&e, run, out, &seen).await;
    let state = e
        .view(run)
        .await
        .map(|v| v.state())
        .unwrap_or(RunState::Failed);
    let summary = e.store().load_run(run).await?.map(|r| r.summary);
    match out {
        OutputFormat::Json => println!(
            "{}",
            serde_json::json!({"run_id": run, "state": state, "blocked_on": summary.map(|s| s.blocked_on), "resources": w.resources()})
        ),
        OutputFormat::Text => {
            println!("run {run} is {state}");
            if let RunExit::Shutdown = exit {
                println!(
                    "stopped following; the run is safely resumable: hcp-workflow worker (or rerun with the same --idempotency-key)"
                );
            } else if state != RunState::Succeeded {
                println!(
                    "blocked on: {}",
                    summary.map(|s| s.blocked_on).unwrap_or_default()
                );
            }
        }
    }
    Ok(if state == RunState::Succeeded { 0 } else { 1 })
}

/// Print each step's transitions since the last call (text only).
async fn print_transitions(
    e: &Engine,
    run: RunId,
    out: OutputFormat,
    seen: &std::sync::Mutex<HashMap<String, String>>,
) {
    if out == OutputFormat::Json {
        return;
    }
    let Ok(v) = e.view(run).await else { return };
    let Ok(mut last) = seen.lock() else { return };
    for (spec, st) in v.dag.nodes.iter().zip(&v.nodes) {
        let s = st.status.name().to_string();
        if last.get(&spec.name) != Some(&s) && s != "pending" {
            let extra = crate::cluster::status_detail(&st.status);
            println!("  [{:>8}] {:<6} {s}{extra}", spec.stage, spec.name);
            last.insert(spec.name.clone(), s);
        }
    }
}

pub async fn command(
    db: &str,
    out: OutputFormat,
    a: CommandArgs,
    cmd: OperatorCommand,
) -> Result<u8> {
    let store = open_store(db).await?;
    let e = Engine::new(store, hcp_runtime::Registry::new());
    let reason = a.reason.unwrap_or_default();
    match e.submit(a.run, cmd.clone(), &who(), &reason).await {
        Ok(id) => {
            match out {
                OutputFormat::Json => println!(
                    "{}",
                    serde_json::json!({"run_id": a.run, "command_id": id, "command": cmd.to_string()})
                ),
                OutputFormat::Text => {
                    println!(
                        "queued `{cmd}` for run {} (command #{id}); the worker holding the run applies it and journals who, when and why",
                        a.run
                    );
                    // Nobody to apply it? Say so, with the command that starts a worker.
                    if let Some(s) = e.store().load_run(a.run).await?.map(|r| r.summary) {
                        let now = hcp_runtime::Clock::now(&SystemClock);
                        if !crate::views::model::lease_live(&s, now) {
                            println!(
                                "note: no worker holds run {} right now; it is applied when one picks the run up: {}",
                                a.run,
                                crate::target::worker_command(s.target.as_deref())
                            );
                        }
                    }
                }
            }
            Ok(0)
        }
        Err(hcp_runtime::EngineError::CommandRefused(why)) => {
            eprintln!("error: `{cmd}` refused for run {}: {why}", a.run);
            Ok(2)
        }
        Err(err) => Err(err.into()),
    }
}
