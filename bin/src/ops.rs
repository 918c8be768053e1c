//! Worker, self-test and operator commands (the read-only views are in `crate::views`).

use crate::output::{self, Refused};
use crate::services::engine::engine_with;
use crate::services::identity::{audit_labels, who};
use crate::services::store::open_store_patiently;
use crate::services::{OutputFormat, open_store};
use crate::services::{clock, shutdown_signal};
use anyhow::{Context, Result};
use clap::Args;
use hcp_runtime::testkit::{self, World};
use hcp_runtime::{Engine, JournalStore, OperatorCommand, RunExit, RunId, RunState, StartOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Directory the self-test saga's side effects go to.
    #[arg(long, default_value = "./hcp-workflow-selftest")]
    world: PathBuf,
    /// Verify every cluster this worker serves once per DURATION (`10m`, `1h`; at least
    /// `1s`, though each verify reads every resource of a cluster: minutes suit a fleet),
    /// as `hcp-workflow verify` does, and record each report in the journal. The
    /// schedule is kept in the journal: a restart does not verify early, and of several
    /// workers exactly one runs each verify.
    #[arg(long, value_name = "DURATION", value_parser = parse_every)]
    verify_every: Option<Duration>,
    /// `--listen-health` (probes and metrics) and `--grace` (the drain on SIGTERM).
    #[command(flatten)]
    service: crate::health::WorkerServiceArgs,
    /// POST a JSON event to URL when a run needs an operator, stalls, is paused, fails,
    /// succeeds, or has had no worker for its target for over a minute (repeatable; a Slack
    /// incoming webhook works as is; docs/operations/notifications.md). Each transition is sent once
    /// across every worker on the journal.
    #[arg(
        long = "notify",
        value_name = "URL",
        env = "HCP_WORKFLOW_NOTIFY",
        value_delimiter = ',',
        hide_env_values = true,
        value_parser = crate::notify::Raw::parse
    )]
    notify: Vec<crate::notify::Raw>,
}

/// `--verify-every`'s value: a humantime duration of at least a second.
fn parse_every(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("{s:?} is not a duration ({e}); write it like 10m, 1h or 30s"))?;
    if d < Duration::from_secs(1) {
        return Err(format!(
            "{s:?} is too often: a verify reads every resource of a cluster; give at least 1s (minutes suit a fleet)"
        ));
    }
    Ok(d)
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
    /// What the run does when a step fails for good: `unwind` (default), `pause` (keep the
    /// work; `retry` or `cancel`), or `pause=DURATION` (unwind by itself after that).
    #[arg(long, value_name = "unwind|pause[=DURATION]")]
    on_failure: Option<String>,
    /// Run the sample with a pivot instead (`a → p → c → d`; `p` cannot be undone).
    #[arg(long)]
    pivot: bool,
}

#[derive(Args, Debug)]
pub struct CommandArgs {
    /// Run: its id, a unique prefix or suffix of it, or `cluster/<name>` (latest run).
    #[arg(add = crate::complete::runs())]
    pub run: String,
    /// Why (journaled with your user name).
    #[arg(long)]
    pub reason: Option<String>,
    /// Follow until the command's effect is known and say it: a retried step's next
    /// outcome (exit 0 if it moved on, 1 if it failed or stalled again), the end of the
    /// unwind for a cancel (exit 0 once cancelled). Ctrl-C stops following; the command
    /// stays queued, or applied, and the run goes on.
    #[arg(long)]
    pub wait: bool,
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
    /// Run: its id, a unique prefix or suffix of it, or `cluster/<name>`.
    #[arg(add = crate::complete::runs())]
    pub run: String,
    /// The step whose undo gave up.
    #[arg(long)]
    pub step: String,
    /// What you did by hand (journaled).
    #[arg(long)]
    pub note: String,
    /// Follow until the unwind that the resolved undo lets continue has ended (see
    /// `cancel --help`).
    #[arg(long)]
    pub wait: bool,
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

pub async fn worker(db: &str, reach_args: &crate::reach::ReachArgs, a: WorkerArgs) -> Result<u8> {
    crate::reach::refuse_simulate_without_shared_state(reach_args, db, "a worker")?;
    let hooks = crate::notify::parse(&a.notify)?;
    let store = open_store_patiently(db).await?;
    let w = world(&a.world, &[])?;
    // One worker runs every workflow: the self-test saga and the cluster sagas, but only
    // runs of the world it reaches (runs of other targets stay pending for their workers).
    let (reach, _sim) = crate::reach::reach(reach_args, db).await?;
    let clients_reach = reach.clone();
    let clients = hcp_activities::steps::Clients::new(reach);
    let mut registry = testkit::registry(&w);
    crate::release::register(&mut registry, &clients)?;
    let served = crate::target::served(reach_args);
    let e = engine_with(store, registry, Some(served.clone()));
    eprintln!(
        "worker {} executing runs from {} for {} (SIGTERM or Ctrl-C to stop)",
        e.worker_id(),
        crate::services::store::shown_url(db),
        served
            .iter()
            .map(|t| crate::target::describe(Some(t)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // One info line per run picked up and let go (finished, needs an operator, parked,
    // released), from the engine's `run` spans: see `telemetry::watch_runs`.
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let moves = crate::telemetry::watch_runs();
    let reporter = tokio::spawn(report_runs(
        e.store().clone(),
        e.worker_id().to_string(),
        moves,
        stopping.clone(),
    ));
    // Probes and metrics; bound before the worker starts, so a taken port is
    // refused at once (exit 2).
    let signal = shutdown_signal();
    let endpoints = crate::health::serve(&a.service, &e).await?;
    if let Some(ep) = &endpoints {
        eprintln!(
            "worker {} serves /healthz, /readyz and /metrics on http://{}/",
            e.worker_id(),
            ep.addr
        );
    }
    let grace = a.service.grace.grace;
    let draining = e.clone();
    let shutdown = async move {
        signal.await;
        stopping.store(true, std::sync::atomic::Ordering::SeqCst);
        crate::health::announce_drain(&draining, grace);
    };
    let verifier = a.verify_every.map(|every| {
        eprintln!(
            "worker {} verifies the clusters it serves every {}",
            e.worker_id(),
            humantime::format_duration(every)
        );
        tokio::spawn(crate::verify::verify_every(
            e.store().clone(),
            db.to_string(),
            clients_reach.clone(),
            served.clone(),
            every,
            e.worker_id().to_string(),
        ))
    });
    let budget_reporter = tokio::spawn(report_budget(e.store().clone(), e.worker_id().to_string()));
    let presence = tokio::spawn(crate::services::presence::keep_recording(
        e.store().clone(),
        e.worker_id().to_string(),
        served.clone(),
    ));
    let notifier = crate::notify::spawn(e.store().clone(), e.worker_id(), hooks)?;
    // On SIGTERM: drain for at most `--grace`.
    let worked = e.run_worker_draining(shutdown, grace).await;
    drop(endpoints);
    budget_reporter.abort();
    presence.abort();
    crate::services::presence::record(e.store(), e.worker_id(), &served, false).await;
    if let Some(n) = notifier {
        n.abort();
    }
    record_budget(e.store(), e.worker_id()).await;
    if let Some(v) = verifier {
        // Read-only: stopping it mid-verify leaves nothing half done.
        v.abort();
    }
    crate::telemetry::stop_watching_runs();
    // The last runs' release lines, unless the journal stopped answering.
    let _ = tokio::time::timeout(Duration::from_secs(5), reporter).await;
    worked?;
    eprintln!("worker {} stopped; its leases are released", e.worker_id());
    Ok(0)
}

/// Keep this process's ARM budget counters in the journal every 15 s, for `/metrics`
/// (tokens used and waited per budget, across every worker).
async fn report_budget(store: Arc<dyn JournalStore>, me: String) {
    loop {
        tokio::time::sleep(Duration::from_secs(15)).await;
        record_budget(&store, &me).await;
    }
}

async fn record_budget(store: &Arc<dyn JournalStore>, me: &str) {
    let stats = hcp_activities::azure::budget::global().stats();
    if stats.is_empty() {
        return;
    }
    let rows: Vec<serde_json::Value> = stats
        .iter()
        .map(|(k, s)| serde_json::json!({"subscription": k.subscription, "class": k.class, "stats": s}))
        .collect();
    let report = hcp_runtime::NewReport {
        kind: crate::services::reports::BUDGET.into(),
        subject: format!("worker/{me}"),
        at: clock().now(),
        ok: true,
        by: me.to_string(),
        data: serde_json::Value::Array(rows).to_string(),
        keep: 1,
    };
    if let Err(e) = store.record_report(report).await {
        tracing::debug!(error = %e, "cannot record the ARM budget counters");
    }
}

/// Log (at info, with `run_id`, `cluster`, `state`; target [`crate::services::RUN_LOG`], on by default) each
/// run this process's engine picks up or lets go, until the sender goes away.
async fn report_runs(
    store: Arc<dyn JournalStore>,
    me: String,
    mut moves: tokio::sync::mpsc::UnboundedReceiver<crate::telemetry::RunMove>,
    stopping: Arc<std::sync::atomic::AtomicBool>,
) {
    use crate::telemetry::RunMove;
    while let Some(m) = moves.recv().await {
        let (RunMove::PickedUp(id) | RunMove::Left(id)) = m;
        let summary = match store.load_run(id).await {
            Ok(Some(r)) => r.summary,
            Ok(None) => continue,
            Err(err) => {
                tracing::warn!(run_id = %id, error = %err, "cannot load the run to log it");
                continue;
            }
        };
        let cluster = summary.labels.get("cluster").map_or("-", String::as_str);
        let state = summary.state;
        let blocked_on = summary.blocked_on.as_str();
        match m {
            RunMove::PickedUp(_) => {
                tracing::info!(target: crate::services::RUN_LOG, run_id = %id, cluster, %state, workflow = %summary.workflow, "picked up run");
            }
            RunMove::Left(_) if state.is_terminal() => {
                tracing::info!(target: crate::services::RUN_LOG, run_id = %id, cluster, %state, "run finished");
            }
            RunMove::Left(_) if state == RunState::NeedsOperator => {
                tracing::info!(target: crate::services::RUN_LOG, run_id = %id, cluster, %state, blocked_on, "run needs an operator; released it");
            }
            RunMove::Left(_) if state == RunState::Failed => {
                tracing::info!(target: crate::services::RUN_LOG, run_id = %id, cluster, %state, blocked_on, "run parked; released it");
            }
            RunMove::Left(_) => {
                let why = if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                    "shutdown"
                } else if summary.lease_owner.as_deref().is_some_and(|o| o != me) {
                    "lease lost"
                } else {
                    "waiting"
                };
                tracing::info!(target: crate::services::RUN_LOG, run_id = %id, cluster, %state, reason = why, blocked_on, "released run");
            }
        }
    }
}

pub async fn selftest(db: &str, out: OutputFormat, a: SelftestArgs) -> Result<u8> {
    let nodes: &[&str] = if a.pivot {
        &testkit::PIVOT_NODES
    } else {
        &testkit::SAMPLE_NODES
    };
    for f in &a.fail {
        if !nodes.contains(&f.as_str()) {
            return Err(Refused::input(format!(
                "--fail {f}: no such step; the self-test steps are {}",
                nodes.join(", ")
            )));
        }
    }
    let policy = match &a.on_failure {
        None => hcp_runtime::FailurePolicy::Unwind,
        Some(p) => hcp_workflows::workflow::parse_on_failure(p)
            .map_err(|e| Refused::input(format!("--on-failure: {e}\nnothing was journaled")))?,
    };
    let store = open_store(db).await?;
    let w = world(&a.world, &a.fail)?;
    let e = engine(store, &w);
    let prefix = match (&a.prefix, &a.idempotency_key) {
        (Some(p), _) => p.clone(),
        (None, Some(_)) => String::new(),
        (None, None) => format!("{}-", &uuid::Uuid::new_v4().simple().to_string()[..6]),
    };
    let mut dag = if a.pivot {
        testkit::pivot_dag_for(&prefix)
    } else {
        testkit::sample_dag_for(&prefix)
    };
    dag.on_failure = policy;
    let started = e
        .start(
            &dag,
            StartOptions {
                idempotency_key: a.idempotency_key.clone(),
                labels: std::iter::once(("cluster".to_string(), "selftest".to_string()))
                    .chain(audit_labels())
                    .collect(),
                ..Default::default()
            },
        )
        .await?;
    let run = started.run_id;
    match out {
        OutputFormat::Json => output::event(
            "started",
            &serde_json::json!({
                "run_id": run, "short_id": crate::runref::short(&run.to_string()),
                "workflow": "sample", "existing": started.existing,
            }),
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
    // The same live progress as `start` (lines, bars on a terminal, NDJSON events).
    let created_at = e
        .store()
        .load_run(run)
        .await?
        .map(|r| r.summary.created_at)
        .unwrap_or_else(|| clock().now());
    let progress = crate::follow::Progress::new(out, run, created_at, false);
    let ticker = progress.tick(&e, run, Duration::from_millis(100));
    let exit = e.drive(run, shutdown_signal()).await?;
    ticker.abort();
    if let Ok(v) = e.view(run).await {
        progress.update(&v);
    }
    progress.finish();
    let state = e
        .view(run)
        .await
        .map(|v| v.state())
        .unwrap_or(RunState::Failed);
    let rec = e.store().load_run(run).await?;
    let failure = rec
        .as_ref()
        .and_then(|r| crate::views::model::detail(r, clock().now()).failure);
    let summary = rec.map(|r| r.summary);
    // This run's resources (the world directory holds other runs' files too).
    let ledger: Vec<crate::views::model::LedgerRow> = match e.view(run).await {
        Ok(v) => hcp_runtime::ledger::ledger_of(&v)
            .iter()
            .map(crate::views::model::LedgerRow::from)
            .collect(),
        Err(_) => Vec::new(),
    };
    match out {
        // Stopped following: no `finished` line (the run goes on).
        OutputFormat::Json if matches!(exit, RunExit::Shutdown) && !state.is_terminal() => {}
        OutputFormat::Json => output::event(
            "finished",
            &serde_json::json!({
                "run_id": run, "short_id": crate::runref::short(&run.to_string()),
                "state": state, "blocked_on": summary.map(|s| s.blocked_on),
                "failure": failure, "ledger": ledger,
            }),
        ),
        OutputFormat::Text => {
            println!("run {run} {}", crate::runref::state_phrase(state));
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
    Ok(match state {
        RunState::Succeeded => 0,
        // Stopped following: the run is fine and resumable.
        _ if matches!(exit, RunExit::Shutdown) && !state.is_terminal() => 130,
        _ => 1,
    })
}

pub async fn command(
    db: &str,
    out: OutputFormat,
    a: CommandArgs,
    cmd: OperatorCommand,
) -> Result<u8> {
    // No journal, no run to command: say so instead of creating an empty one.
    let store = crate::services::open_existing_store(db).await?;
    let run = crate::views::resolve(&store, &a.run, db).await?;
    // A step by its unique suffix (`pls.service`), or "did you mean".
    let cmd = match cmd {
        OperatorCommand::Retry { step: Some(given) } => OperatorCommand::Retry {
            step: Some(
                full_step(&store, run, &given)
                    .await?
                    .map_err(Refused::input)?,
            ),
        },
        OperatorCommand::Resolve { step: given } => OperatorCommand::Resolve {
            step: full_step(&store, run, &given)
                .await?
                .map_err(Refused::input)?,
        },
        other => other,
    };
    let e = Engine::new(store, hcp_runtime::Registry::new());
    let reason = a.reason.unwrap_or_default();
    let wait = a.wait;
    match e.submit(run, cmd.clone(), &who(), &reason).await {
        Ok(id) => {
            // A run that never started a step has nothing to undo; its cancel
            // is applied here and now rather than when (if ever) a worker of its target
            // shows up, so the cluster it holds is free at once.
            if cmd == OperatorCommand::Cancel
                && let Some(state) = e.cancel_unstarted(run).await?
            {
                if wait {
                    return wait_applied(&e, run, id, &cmd, out).await;
                }
                match out {
                    OutputFormat::Json => output::document(
                        "CommandApplied",
                        &serde_json::json!({
                            "run_id": run, "short_id": crate::runref::short(&run.to_string()),
                            "command_id": id, "command": cmd.to_string(), "by": who(),
                            "reason": reason, "state": state,
                            "outcome": "applied at once: the run had not started a step, so there was nothing to undo",
                        }),
                    ),
                    OutputFormat::Text => println!(
                        "applied `{cmd}` to run {run} at once (command #{id}): it had not started a step, so there was nothing to undo; the run is {state}"
                    ),
                }
                return Ok(0);
            }
            match out {
                // With --wait, the one document is the applied command's (below).
                OutputFormat::Json if wait => {}
                OutputFormat::Json => output::document(
                    "CommandQueued",
                    &serde_json::json!({
                        "run_id": run, "short_id": crate::runref::short(&run.to_string()),
                        "command_id": id, "command": cmd.to_string(), "by": who(),
                        "reason": reason,
                    }),
                ),
                OutputFormat::Text => {
                    println!(
                        "queued `{cmd}` for run {} (command #{id}); the worker holding the run applies it and journals who, when and why",
                        run
                    );
                    // Nobody to apply it? Say so, with the command that starts a worker.
                    if let Some(s) = e.store().load_run(run).await?.map(|r| r.summary) {
                        let now = clock().now();
                        // A SQLite journal names its executor: when it serves the run's
                        // target it picks the command up (no need to start another).
                        let serving = match e.store().executor_holder().await {
                            Ok(Some(h)) if s.target.as_deref().is_none_or(|t| h.serves(t)) => {
                                Some(h)
                            }
                            _ => None,
                        };
                        if let Some(h) = serving {
                            println!("the worker pid {} serving this journal picks it up", h.pid);
                        } else if !crate::views::model::lease_live(&s, now) {
                            println!(
                                "note: no worker holds run {} right now; it is applied when one picks the run up: {}",
                                run,
                                crate::target::worker_command(s.target.as_deref())
                            );
                        }
                    }
                }
            }
            if wait {
                return wait_applied(&e, run, id, &cmd, out).await;
            }
            Ok(0)
        }
        Err(hcp_runtime::EngineError::CommandRefused(why)) => Err(Refused::refused(format!(
            "`{cmd}` refused for run {run}: {why}"
        ))),
        Err(hcp_runtime::EngineError::NotFound(_)) => Err(Refused::refused(format!(
            "`{cmd}` refused: no run {run} in {} (hcp-workflow list shows the runs)",
            crate::services::store::shown_url(db)
        ))),
        Err(err) => Err(err.into()),
    }
}

/// The full name of `given` among the run's steps (see [`crate::runref::resolve_step`]).
async fn full_step(
    store: &std::sync::Arc<dyn hcp_runtime::JournalStore>,
    run: RunId,
    given: &str,
) -> Result<std::result::Result<String, String>> {
    let Some(rec) = store.load_run(run).await? else {
        return Ok(Ok(given.to_string()));
    };
    let names = crate::views::model::step_names(&rec.dag);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    Ok(crate::runref::resolve_step(given, &refs).map(str::to_string))
}

/// `--wait`: follow the journal until command `id` is applied, then say what it did.
/// 0 applied; 130 interrupted (the command stays queued).
async fn wait_applied(
    e: &Engine,
    run: RunId,
    id: i64,
    cmd: &OperatorCommand,
    out: OutputFormat,
) -> Result<u8> {
    let stop = shutdown_signal();
    tokio::pin!(stop);
    let mut wake = e.store().subscribe();
    loop {
        if let Some(rec) = e.store().load_run(run).await? {
            let now = clock().now();
            let d = crate::views::model::detail(&rec, now);
            if let Some(c) = d.commands.iter().find(|c| c.id == id)
                && let Some(at) = &c.applied_at
            {
                let outcome = c.outcome.clone().unwrap_or_else(|| "applied".into());
                // `--wait` follows to the effect, not only to the command.
                let took_effect = outcome.starts_with(hcp_runtime::journal::OPERATOR_APPLIED);
                if took_effect
                    && let Some(code) =
                        wait_effect(e, run, id, cmd, at, &outcome, out, &mut stop).await?
                {
                    return Ok(code);
                }
                match out {
                    OutputFormat::Json => output::document(
                        "CommandApplied",
                        &serde_json::json!({
                            "run_id": run, "short_id": d.short_id, "command_id": id,
                            "command": cmd.to_string(), "by": c.by, "reason": c.reason,
                            "requested_at": c.requested_at, "applied_at": at,
                            "outcome": outcome, "state": d.state, "blocked_on": d.blocked_on,
                        }),
                    ),
                    OutputFormat::Text => println!(
                        "applied `{cmd}` at {at}: {outcome}; run {run} {} ({})",
                        crate::runref::state_phrase(d.state),
                        d.blocked_on
                    ),
                }
                return Ok(0);
            }
        }
        tokio::select! {
            () = &mut stop => {
                eprintln!("stopped waiting; command #{id} stays queued for run {run}");
                return Ok(130);
            }
            _ = wake.changed() => {}
            () = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
        }
    }
}

/// What `--wait` follows after the command is applied, and when it is known: the retried
/// step's next outcome (succeeded, failed again, waiting, …) or the unwind's end (a cancel,
/// a resolved undo). `None` for commands whose effect is their application (`resume`).
/// Exit code: 0 when the effect is what was asked (the step moved on, the run was
/// cancelled or rolled back), 1 otherwise, 130 when interrupted.
#[allow(clippy::too_many_arguments)]
async fn wait_effect(
    e: &Engine,
    run: RunId,
    id: i64,
    cmd: &OperatorCommand,
    applied_at: &str,
    outcome: &str,
    out: OutputFormat,
    stop: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Result<Option<u8>> {
    use hcp_runtime::journal::Event;
    let step = match cmd {
        OperatorCommand::Retry { step } => Some(step.clone()),
        OperatorCommand::Cancel | OperatorCommand::Resolve { .. } => None,
        _ => return Ok(None),
    };
    if out == OutputFormat::Text {
        println!(
            "applied `{cmd}` at {applied_at}: {outcome}; following its effect (Ctrl-C stops following, the run goes on)"
        );
    }
    let mut wake = e.store().subscribe();
    loop {
        let Some(rec) = e.store().load_run(run).await? else {
            return Ok(None);
        };
        let now = clock().now();
        let d = crate::views::model::detail(&rec, now);
        let events: Vec<(i64, Event)> = rec
            .events
            .iter()
            .filter_map(|se| Some((se.seq, serde_json::from_str::<Event>(&se.data).ok()?)))
            .collect();
        let after = events
            .iter()
            .find(|(_, ev)| matches!(ev, Event::Operator { command_id, .. } if *command_id == id))
            .map_or(i64::MAX, |(seq, _)| *seq);
        let settled = matches!(
            d.state,
            RunState::Succeeded
                | RunState::RolledBack
                | RunState::Cancelled
                | RunState::NeedsOperator
                | RunState::Failed
        );
        let effect: Option<(String, bool)> = match &step {
            // A retry: the first outcome of the retried step (of any step, for a retry of
            // the run) journaled after the command.
            Some(which) => events
                .iter()
                .filter(|(seq, _)| *seq > after)
                .find_map(|(_, ev)| {
                    let node = ev.node()?;
                    if which.as_ref().is_some_and(|w| w != node) {
                        return None;
                    }
                    // A poll that keeps waiting is not a result yet: the wait goes on
                    // (within its budget) until it ends or stalls.
                    let good = match ev {
                        Event::NodeSucceeded { .. } | Event::NodeUndone { .. } => true,
                        Event::NodeFailed { .. }
                        | Event::NodeRetryScheduled { .. }
                        | Event::NodeStalled { .. }
                        | Event::UndoFailed { .. }
                        | Event::UndoRetryScheduled { .. } => false,
                        _ => return None,
                    };
                    Some((
                        format!("{node}: {}", crate::views::model::event_summary(ev)),
                        good,
                    ))
                })
                .or_else(|| {
                    settled.then(|| {
                        (
                            format!("run {}", crate::runref::state_phrase(d.state)),
                            d.state == RunState::Succeeded,
                        )
                    })
                }),
            // A cancel or a resolved undo: the unwind's end.
            None => settled.then(|| {
                (
                    format!("run {} {}", run, crate::runref::state_phrase(d.state)),
                    matches!(d.state, RunState::Cancelled | RunState::RolledBack),
                )
            }),
        };
        if let Some((what, good)) = effect {
            match out {
                OutputFormat::Json => output::document(
                    "CommandApplied",
                    &serde_json::json!({
                        "run_id": run, "short_id": d.short_id, "command_id": id,
                        "command": cmd.to_string(), "applied_at": applied_at,
                        "outcome": outcome, "effect": what, "effect_ok": good,
                        "state": d.state, "blocked_on": d.blocked_on,
                    }),
                ),
                OutputFormat::Text => {
                    println!("{what}");
                    if !good {
                        println!("blocked on: {}", d.blocked_on);
                    }
                }
            }
            return Ok(Some(if good { 0 } else { 1 }));
        }
        tokio::select! {
            () = &mut *stop => {
                eprintln!("stopped following; command #{id} was applied and run {run} goes on");
                return Ok(Some(130));
            }
            _ = wake.changed() => {}
            () = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
        }
    }
}
