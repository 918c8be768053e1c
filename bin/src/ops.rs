//! Worker, self-test and operator commands.

use crate::{OutputFormat, open_store};
use anyhow::{Context, Result, bail};
use clap::Args;
use hcp_runtime::NodeStatus;
use hcp_runtime::testkit::{self, CrashHooks, World};
use hcp_runtime::{
    Engine, EngineConfig, EngineHooks, JournalStore, NoHooks, OperatorCommand, RunExit, RunFilter,
    RunId, RunState, StartOptions, SystemClock, Timestamp,
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
pub struct ListArgs {
    /// Only runs in these states (e.g. `needs-operator`).
    #[arg(long)]
    state: Vec<String>,
    /// Only this workflow.
    #[arg(long)]
    workflow: Option<String>,
    /// Only this cluster.
    #[arg(long)]
    cluster: Option<String>,
}

#[derive(Args, Debug)]
pub struct RunArg {
    /// Run id.
    run: RunId,
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
    let hooks: Arc<dyn EngineHooks> = match CrashHooks::from_env() {
        Some(h) => Arc::new(h),
        None => Arc::new(NoHooks),
    };
    Engine::with(
        store,
        testkit::registry(w),
        Arc::new(SystemClock),
        hooks,
        config(),
    )
}

async fn shutdown_signal() {
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

pub async fn worker(db: &str, a: WorkerArgs) -> Result<u8> {
    let store = open_store(db).await?;
    let w = world(&a.world, &[])?;
    let e = engine(store, &w);
    eprintln!(
        "worker {} executing runs from {db} (SIGTERM or Ctrl-C to stop)",
        e.worker_id()
    );
    e.run_worker(shutdown_signal()).await?;
    eprintln!("worker {} stopped; its leases are released", e.worker_id());
    Ok(0)
}

fn who() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into());
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
            let extra = match &st.status {
                NodeStatus::RetryScheduled { error, next_at, .. } => {
                    format!(" — retry at {next_at} after {error}")
                }
                NodeStatus::Failed { error } | NodeStatus::UndoFailed { error } => {
                    format!(" — {error}")
                }
                NodeStatus::Waiting { reason, .. } => format!(" — {reason}"),
                _ => String::new(),
            };
            println!("  [{:>8}] {:<6} {s}{extra}", spec.stage, spec.name);
            last.insert(spec.name.clone(), s);
        }
    }
}

fn age(now: Timestamp, t: Timestamp) -> String {
    let s = now.0.saturating_sub(t.0) / 1000;
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

pub async fn list(db: &str, out: OutputFormat, a: ListArgs) -> Result<u8> {
    let mut states = Vec::new();
    for s in &a.state {
        match RunState::parse(s) {
            Some(x) => states.push(x),
            None => {
                let all: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
                eprintln!(
                    "error: --state {s}: unknown state; use one of {}",
                    all.join(", ")
                );
                return Ok(2);
            }
        }
    }
    let store = open_store(db).await?;
    let filter = RunFilter {
        states,
        workflow: a.workflow,
        label: a.cluster.map(|c| ("cluster".to_string(), c)),
        ..Default::default()
    };
    let runs = store.list_runs(&filter).await?;
    match out {
        OutputFormat::Json => {
            let v: Vec<_> = runs
                .iter()
                .map(|r| serde_json::json!({
                    "id": r.id, "workflow": r.workflow, "cluster": r.labels.get("cluster"),
                    "state": r.state, "current_step": r.current_step, "blocked_on": r.blocked_on,
                    "created_at": r.created_at.to_rfc3339(), "updated_at": r.updated_at.to_rfc3339(),
                    "lease_owner": r.lease_owner,
                }))
                .collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        OutputFormat::Text => {
            let now = hcp_runtime::Clock::now(&SystemClock);
            println!(
                "{:<36}  {:<15} {:<12} {:<14} {:>5}  BLOCKED ON",
                "RUN", "WORKFLOW", "CLUSTER", "STATE", "AGE"
            );
            for r in &runs {
                println!(
                    "{:<36}  {:<15} {:<12} {:<14} {:>5}  {}",
                    r.id,
                    r.workflow,
                    r.labels.get("cluster").map(String::as_str).unwrap_or("-"),
                    r.state.as_str(),
                    age(now, r.created_at),
                    r.blocked_on
                );
            }
        }
    }
    Ok(0)
}

pub async fn show(db: &str, out: OutputFormat, a: RunArg) -> Result<u8> {
    let store = open_store(db).await?;
    let e = Engine::new(store.clone(), hcp_runtime::Registry::new());
    let Some(rec) = store.load_run(a.run).await? else {
        bail!("run {} not found in {db}", a.run);
    };
    let view = e.view(a.run).await;
    match out {
        OutputFormat::Json => {
            let steps = view.as_ref().ok().map(|v| {
                v.dag.nodes.iter().zip(&v.nodes).map(|(spec, st)| serde_json::json!({
                    "name": spec.name, "stage": spec.stage, "action": spec.action, "state": st.status,
                    "attempts": st.attempts, "undo_attempts": st.undo_attempts, "last_error": st.last_error,
                    "max_attempts": spec.retry.max_attempts,
                })).collect::<Vec<_>>()
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "id": rec.summary.id, "workflow": rec.summary.workflow, "version": rec.summary.workflow_version,
                    "state": rec.summary.state, "blocked_on": rec.summary.blocked_on, "labels": rec.summary.labels,
                    "lease_owner": rec.summary.lease_owner, "lease_epoch": rec.summary.lease_epoch,
                    "lease_expires_at": rec.summary.lease_expires_at.map(|t| t.to_rfc3339()),
                    "steps": steps, "commands": rec.commands,
                }))?
            );
        }
        OutputFormat::Text => {
            let s = &rec.summary;
            println!("run        {}", s.id);
            println!("workflow   {} v{}", s.workflow, s.workflow_version);
            println!("state      {}", s.state);
            println!("blocked on {}", s.blocked_on);
            if let Some(o) = &s.lease_owner {
                println!(
                    "lease      {o} (epoch {}, expires {})",
                    s.lease_epoch,
                    s.lease_expires_at
                        .map(|t| t.to_rfc3339())
                        .unwrap_or_default()
                );
            }
            match &view {
                Ok(v) => {
                    println!(
                        "\n{:<12} {:<36} {:<20} {:>8}  LAST ERROR",
                        "STAGE", "STEP", "STATE", "ATTEMPTS"
                    );
                    for (spec, st) in v.dag.nodes.iter().zip(&v.nodes) {
                        let max = if spec.retry.max_attempts == 0 {
                            "∞".to_string()
                        } else {
                            spec.retry.max_attempts.to_string()
                        };
                        println!(
                            "{:<12} {:<36} {:<20} {:>8}  {}",
                            spec.stage,
                            spec.name,
                            st.status.name(),
                            format!("{}/{max}", st.attempts),
                            st.last_error
                                .as_ref()
                                .map(|e| e.to_string())
                                .unwrap_or_default()
                        );
                    }
                }
                Err(err) => println!("\nthe journal cannot be folded: {err}"),
            }
        }
    }
    Ok(0)
}

pub async fn history(db: &str, out: OutputFormat, a: RunArg) -> Result<u8> {
    let store = open_store(db).await?;
    let Some(rec) = store.load_run(a.run).await? else {
        bail!("run {} not found in {db}", a.run);
    };
    match out {
        OutputFormat::Json => {
            let v: Vec<_> = rec
                .events
                .iter()
                .map(|e| {
                    let data: serde_json::Value = serde_json::from_str(&e.data).unwrap_or_else(|_| serde_json::Value::String(e.data.clone()));
                    serde_json::json!({"seq": e.seq, "at": e.at.to_rfc3339(), "kind": e.kind, "node": e.node, "data": data})
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        OutputFormat::Text => {
            for e in &rec.events {
                println!(
                    "{:>4} {} {:<22} {:<28} {}",
                    e.seq,
                    e.at,
                    e.kind,
                    e.node.as_deref().unwrap_or("-"),
                    e.data
                );
            }
        }
    }
    Ok(0)
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
                OutputFormat::Text => println!(
                    "queued `{cmd}` for run {} (command #{id}); the worker holding the run applies it and journals who, when and why",
                    a.run
                ),
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
