//! `hcp-workflow bench …`: the engine's own overhead, measured with no-op steps.
//!
//! Each subcommand prints one JSON line. Step latency is the time between consecutive
//! journaled step completions of one run (the engine's per-step cost: one durable append
//! that records a step's success and the next step's intent, plus scheduling).

use crate::services::open_store;
use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use hcp_runtime::benchkit;
use hcp_runtime::{Clock, Engine, EngineConfig, SystemClock};
use std::sync::Arc;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Throughput and per-step latency of no-op workflows.
    #[command(
        after_help = "Example:\n  hcp-workflow bench engine --database sqlite:///tmp/bench.db --runs 1000 --steps 10 --concurrency 1000"
    )]
    Engine(EngineArgs),
    /// How fast a starting worker resumes runs interrupted by a dead worker.
    #[command(
        after_help = "Example:\n  hcp-workflow bench recovery --database sqlite:///tmp/rec.db --runs 10000"
    )]
    Recovery(RecoveryArgs),
    /// create-cluster against the in-process simulator with its realistic latency model
    /// (scaled): wall time vs the DAG's critical path and vs the same steps one after
    /// another; ARM requests per create; N concurrent creates in one subscription.
    #[command(
        after_help = "Example:\n  hcp-workflow bench cluster --database sqlite:///tmp/cl.db --creates 20 --time-scale 0.02"
    )]
    Cluster(ClusterArgs),
}

#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// Concurrent creates (distinct clusters, one subscription).
    #[arg(long, default_value_t = 1)]
    creates: usize,
    /// Simulated Azure durations × this (1.0 = realistic minutes).
    #[arg(long, default_value_t = 0.02)]
    time_scale: f64,
    /// Engines (workers, each with its own id and leases) in this process sharing the
    /// journal; on Postgres they share one ARM budget through it, as separate processes do.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Also delete one cluster (created first, untimed) while the creates run: how long a
    /// teardown waits behind a storm of creates.
    #[arg(long)]
    with_delete: bool,
}

#[derive(Args, Debug)]
pub struct EngineArgs {
    /// Runs to execute.
    #[arg(long, default_value_t = 100)]
    runs: usize,
    /// No-op steps per run.
    #[arg(long, default_value_t = 10)]
    steps: u32,
    /// Runs executed at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
}

#[derive(Args, Debug)]
pub struct RecoveryArgs {
    /// Interrupted runs to resume.
    #[arg(long, default_value_t = 10_000)]
    runs: usize,
    /// Lease duration of the dead worker (Postgres waits for it to expire).
    #[arg(long, default_value_t = 2_000)]
    lease_ms: u64,
    /// Where the dead worker was when it died.
    #[arg(long, value_enum, default_value_t = Interrupted::MidStep)]
    interrupted: Interrupted,
    /// Runs the new worker leases per round trip (the engine's `acquire_batch`).
    #[arg(long, default_value_t = hcp_runtime::EngineConfig::default().acquire_batch)]
    acquire_batch: usize,
}

pub async fn run(db: &str, cmd: BenchCommand) -> Result<u8> {
    match cmd {
        BenchCommand::Engine(a) => engine(db, a).await,
        BenchCommand::Recovery(a) => recovery(db, a).await,
        BenchCommand::Cluster(a) => cluster(db, a).await,
    }
}

/// Rounds `bench engine` alternates the floor and the steps in.
const ENGINE_ROUNDS: usize = 10;
/// Single-row commits of the floor over all rounds.
const FLOOR_COMMITS: usize = 1_000;

async fn engine(db: &str, a: EngineArgs) -> Result<u8> {
    if a.runs == 0 || a.steps == 0 || a.concurrency == 0 {
        bail!("--runs, --steps and --concurrency must be at least 1");
    }
    let store = open_store(db).await?;
    // The floor and the steps alternate in rounds, side by side in one run: a machine whose
    // speed drifts (a busy neighbour, a checkpoint) shows in both, not in one of them only
    // . Each round: `FLOOR_COMMITS / rounds` single-row commits, then its share of
    // the runs.
    let floor_url = match db.strip_prefix("sqlite://") {
        Some(p) => Some(format!("sqlite://{p}.floor")),
        None if db == "memory:" => None,
        None => Some(db.to_string()),
    };
    let rounds = ENGINE_ROUNDS.min(a.runs);
    let mut floor = Vec::new();
    let mut deltas = Vec::new();
    let mut wall = Duration::ZERO;
    let mut per_round = Vec::new();
    for i in 0..rounds {
        let round_runs = a.runs / rounds + usize::from(i < a.runs % rounds);
        let f = match &floor_url {
            Some(u) => {
                let mut f = hcp_persistence::floor::commit_floor(u, FLOOR_COMMITS / rounds).await?;
                f.sort_unstable();
                f
            }
            None => Vec::new(),
        };
        let r = benchkit::noop_bench(store.clone(), round_runs, a.steps, a.concurrency).await?;
        if !f.is_empty() && !r.deltas.is_empty() {
            let step = benchkit::percentile(&r.deltas, 0.50).as_secs_f64();
            per_round.push(step / benchkit::percentile(&f, 0.50).as_secs_f64());
        }
        floor.extend(f);
        deltas.extend(r.deltas);
        wall += r.wall;
    }
    if let Some(p) = floor_url
        .as_deref()
        .and_then(|u| u.strip_prefix("sqlite://"))
    {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{p}{suffix}"));
        }
    }
    // `percentile` reads sorted samples.
    floor.sort_unstable();
    deltas.sort_unstable();
    per_round.sort_unstable_by(f64::total_cmp);
    let wall = wall.as_secs_f64();
    let ms = |p| benchkit::percentile(&deltas, p).as_secs_f64() * 1e3;
    let floor_ms =
        (!floor.is_empty()).then(|| benchkit::percentile(&floor, 0.50).as_secs_f64() * 1e3);
    let round_ratio =
        |q: f64| (!per_round.is_empty()).then(|| round(benchkit::percentile(&per_round, q)));
    let steps = a.runs as f64 * f64::from(a.steps);
    crate::output::compact(
        "BenchResult",
        &serde_json::json!({
            "bench": "engine", "backend": store.backend(), "runs": a.runs, "steps": a.steps,
            "concurrency": a.concurrency, "wall_s": round(wall),
            "steps_per_s": round(steps / wall),
            "p50_ms_per_step": round(ms(0.50)),
            "p99_ms_per_step": round(ms(0.99)),
            "floor_p50_ms_per_commit": floor_ms.map(round),
            "step_over_floor": floor_ms.map(|f| round(ms(0.50) / f)),
            "rounds": rounds,
            "step_over_floor_by_round": {
                "min": round_ratio(0.0), "median": round_ratio(0.5), "max": round_ratio(1.0),
            },
            "samples": deltas.len(),
        }),
    );
    Ok(0)
}

async fn recovery(db: &str, a: RecoveryArgs) -> Result<u8> {
    let lease = Duration::from_millis(a.lease_ms);
    let config = |max_runs: usize| EngineConfig {
        acquire_batch: a.acquire_batch,
        poll_interval: Duration::from_millis(20),
        lease_ttl: lease,
        ..benchkit::bench_config(max_runs.max(1))
    };
    // The worker that dies.
    let first = open_store(db).await?;
    let ids = match a.interrupted {
        Interrupted::MidStep => {
            // It starts every run and is killed while all of them are inside their first
            // step: intents journaled, no outcomes, leases held.
            let started = benchkit::StartCounter::new(a.runs);
            let dead = Engine::with(
                first.clone(),
                benchkit::hanging_registry(),
                Arc::new(SystemClock),
                started.clone(),
                config(a.runs),
            );
            let ids = benchkit::start_noop_runs(&dead, a.runs, 2).await?;
            let worker = {
                let dead = dead.clone();
                tokio::spawn(async move { dead.run_worker(std::future::pending()).await })
            };
            if !ids.is_empty() {
                started.wait().await;
            }
            // Abort, not shut down: nothing is released, as with SIGKILL.
            worker.abort();
            let _ = worker.await;
            ids
        }
        Interrupted::Leased => {
            // It leases every run and dies before journaling anything.
            let e = Engine::with(
                first.clone(),
                benchkit::noop_registry(),
                Arc::new(SystemClock),
                Arc::new(hcp_runtime::NoHooks),
                config(a.runs),
            );
            let ids = benchkit::start_noop_runs(&e, a.runs, 2).await?;
            let now = SystemClock.now();
            let mut leased = 0;
            while leased < ids.len() {
                let got = first
                    .acquire("dead-worker", now, lease, 5_000, None)
                    .await?;
                if got.is_empty() {
                    break;
                }
                leased += got.len();
            }
            ids
        }
    };
    // The leases it left behind, and when they lapse (it renewed them until it died).
    let runs = first.list_runs(&hcp_runtime::RunFilter::default()).await?;
    let held = runs.iter().filter(|r| r.lease_owner.is_some()).count();
    let expiry = runs
        .iter()
        .filter_map(|r| r.lease_expires_at)
        .max()
        .unwrap_or_else(|| SystemClock.now());
    // A new process: a store of its own (SQLite: the dead process's executor lock is gone).
    let store = if first.backend() == "memory" {
        first
    } else {
        drop(first);
        open_store(db).await?
    };
    let timer = benchkit::StepTimer::new(2, ids.len());
    let e = Engine::with(
        store.clone(),
        benchkit::noop_registry(),
        Arc::new(SystemClock),
        timer.clone(),
        config(ids.len()),
    );
    let wait_for_expiry = if store.backend() == "sqlite" {
        0.0 // the executor lock proves the dead worker is dead: its leases are freed at once
    } else {
        expiry.duration_since(SystemClock.now()).as_secs_f64() * 1e3
    };
    let w = benchkit::run_worker_until_done(&e, &timer).await?;
    let total_ms = w.wall.as_secs_f64() * 1e3;
    let resumed_ms = w.all_resumed.map_or(total_ms, |d| d.as_secs_f64() * 1e3);
    crate::output::compact(
        "BenchResult",
        &serde_json::json!({
            "bench": "recovery", "backend": store.backend(), "runs": ids.len(),
            "interrupted": a.interrupted.as_str(), "leases_held_by_dead_worker": held,
            "acquire_batch": a.acquire_batch,
            "lease_expiry_wait_ms": round(wait_for_expiry),
            "all_resumed_ms": round(resumed_ms),
            "all_resumed_after_expiry_ms": round(resumed_ms - wait_for_expiry),
            "all_finished_ms": round(total_ms),
        }),
    );
    Ok(0)
}

/// Where the dead worker was when it died (`bench recovery --interrupted`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Interrupted {
    /// Inside every run's first step (intent journaled, no outcome): a crash mid-run.
    MidStep,
    /// Right after leasing the runs, before journaling anything.
    Leased,
}

impl Interrupted {
    fn as_str(self) -> &'static str {
        match self {
            Self::MidStep => "mid-step",
            Self::Leased => "leased",
        }
    }
}

async fn cluster(db: &str, a: ClusterArgs) -> Result<u8> {
    use hcp_activities::steps::{Clients, Reach};
    use hcp_runtime::{RunState, StartOptions};
    use hcp_workflows::{config, create_cluster, layout::Layout};
    if a.creates == 0 {
        bail!("--creates must be at least 1");
    }
    let store = open_store(db).await?;
    let example = std::path::Path::new("examples/cluster.yaml");
    let cfg = config::load(example).map_err(|e| anyhow::anyhow!("examples/cluster.yaml: {e}"))?;
    let sim_cfg = hcp_simulator::SimConfig {
        time_scale: a.time_scale,
        // The public zone of baseDomain exists before a create (the zone lookup).
        dns_zones: vec![crate::reach::dns_zone_seed(&cfg)],
        ..hcp_simulator::SimConfig::realistic()
    };
    let sim = hcp_simulator::Simulator::new(sim_cfg)?;
    let requests = sim.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = sim.serve(listener).await;
    });
    let clients = Clients::new(Reach::Simulator(base));
    let engines: Vec<Engine> = (0..a.workers.max(1))
        .map(|_| crate::services::engine::cluster_engine(store.clone(), &clients, None))
        .collect::<Result<_>>()?;
    let e = engines[0].clone();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    let spawn_workers = |workers: &mut Vec<tokio::task::JoinHandle<()>>| {
        for e in &engines {
            let e = e.clone();
            let mut rx = rx.clone();
            workers.push(tokio::spawn(async move {
                let _ = e
                    .run_worker(async move {
                        let _ = rx.changed().await;
                    })
                    .await;
            }));
        }
    };
    let bench_cfg = |i: &str| -> Result<(config::ClusterConfig, String)> {
        let mut c = cfg.clone();
        c.name = format!("bench{i}");
        let infra = format!(
            "bench{i}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..5]
        );
        c.persistent_resource_group = format!("bench{i}-persistent");
        if let config::OidcIssuer::Create(o) = &mut c.oidc_issuer {
            o.storage_account = None;
        }
        Ok((c, infra))
    };
    // The cluster to delete amid the creates, made first (untimed).
    let victim = if a.with_delete {
        let (c, infra) = bench_cfg("victim")?;
        let dag = create_cluster::build(&c, &Layout::new(&c, &infra, true))?;
        let id = e.start(&dag, StartOptions::default()).await?.run_id;
        let drive = e.clone();
        drive.drive(id, std::future::pending()).await?;
        if e.view(id).await?.state() != RunState::Succeeded {
            bail!("the cluster to delete could not be created");
        }
        Some((c, infra))
    } else {
        None
    };
    // Count only what the timed part sends.
    let before = requests.requests().iter().map(|r| r.seq).max().unwrap_or(0);
    hcp_activities::azure::budget::global().reset();
    let mut runs = Vec::new();
    let t0 = std::time::Instant::now();
    let t0_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    for i in 0..a.creates {
        let (c, infra) = bench_cfg(&i.to_string())?;
        let dag = create_cluster::build(&c, &Layout::new(&c, &infra, true))?;
        let started = e.start(&dag, StartOptions::default()).await?;
        runs.push(started.run_id);
    }
    let mut delete_run = None;
    if let Some((c, infra)) = &victim {
        let dag = hcp_workflows::delete_cluster::build(
            c,
            &Layout::new(c, infra, true),
            hcp_workflows::delete_cluster::DeleteOptions::default(),
        )?;
        delete_run = Some(e.start(&dag, StartOptions::default()).await?.run_id);
    }
    spawn_workers(&mut workers);
    let mut delete_wall = None;
    // One summary query per look (a view would read each run's whole journal: the bench
    // must not take the CPU it measures).
    loop {
        let terminal: std::collections::HashSet<_> = store
            .list_runs(&hcp_runtime::store::RunFilter::default())
            .await?
            .into_iter()
            .filter(|s| s.state.is_terminal())
            .map(|s| s.id)
            .collect();
        let done = runs.iter().filter(|r| terminal.contains(r)).count();
        if let Some(d) = delete_run
            && delete_wall.is_none()
            && terminal.contains(&d)
        {
            delete_wall = Some(t0.elapsed().as_secs_f64());
        }
        if done == runs.len() && (delete_run.is_none() || delete_wall.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let wall_all = t0.elapsed().as_secs_f64();
    let _ = tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    // How long the delete waited for the budget: its deferred (journaled) turns.
    let delete_deferrals = match delete_run {
        Some(d) => {
            let v = e.view(d).await?;
            let rec = store.load_run(d).await?;
            let n = rec.map_or(0, |r| {
                r.events
                    .iter()
                    .filter(|ev| ev.data.contains("ArmBudgetWait"))
                    .count()
            });
            Some((n, v.state() == RunState::Succeeded))
        }
        None => None,
    };
    let mut per_run = Vec::new();
    let mut failed = 0;
    for r in &runs {
        let v = e.view(*r).await?;
        if v.state() != RunState::Succeeded {
            failed += 1;
            continue;
        }
        per_run.push(critical_path(&v));
    }
    let all: Vec<_> = requests
        .requests()
        .into_iter()
        .filter(|r| r.seq > before)
        .collect();
    // The simulated HyperShift controllers' own Azure calls (`actor`) are not hcp-workflow's.
    let with_controllers = all
        .iter()
        .filter(|r| r.path.starts_with("/subscriptions/"))
        .count();
    let log: Vec<_> = all.into_iter().filter(|r| r.actor.is_none()).collect();
    let arm = log
        .iter()
        .filter(|r| r.path.starts_with("/subscriptions/"))
        .count();
    let throttled = log.iter().filter(|r| r.status == 429).count();
    // The floor the budget allows: each budget's (subscription and operation
    // type) requests beyond its burst, over its refill rate; the slowest budget bounds the
    // wall time.
    let budget = hcp_activities::azure::budget::global();
    let stats = budget.stats();
    let share = budget.share_of_default();
    let wall_ms = (wall_all * 1e3) as u64;
    let budgets = budget_replay(&log, t0_unix_ms, t0_unix_ms + wall_ms, share);
    let floor = budgets
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|b| b["floor_s"].as_f64())
        .fold(0.0f64, f64::max);
    let mut classes = serde_json::Map::new();
    for class in [
        hcp_activities::azure::budget::Class::Read,
        hcp_activities::azure::budget::Class::Write,
        hcp_activities::azure::budget::Class::Delete,
    ] {
        let sent = log
            .iter()
            .filter(|r| r.path.starts_with("/subscriptions/") && r.status != 429)
            .filter(|r| hcp_activities::azure::budget::Class::of_name(&r.method) == class)
            .count() as f64;
        let (used, waited, deferred) = stats
            .iter()
            .filter(|(k, _)| k.class == class)
            .fold((0, 0, 0), |(u, w, d), (_, st)| {
                (u + st.used, w + st.waited_ms, d + st.deferred)
            });
        classes.insert(
            class.as_str().into(),
            serde_json::json!({"sent": sent, "budget_used": used, "budget_waited_s": round(waited as f64 / 1e3), "deferred": deferred}),
        );
    }
    let mean = |f: fn(&(f64, f64, f64)) -> f64| {
        per_run.iter().map(f).sum::<f64>() / per_run.len().max(1) as f64
    };
    let (wall, crit, seq) = (mean(|x| x.0), mean(|x| x.1), mean(|x| x.2));
    crate::output::compact(
        "BenchResult",
        &serde_json::json!({
            "bench": "cluster", "backend": store.backend(), "creates": a.creates,
            "time_scale": a.time_scale, "failed_runs": failed,
            "wall_all_s": round(wall_all),
            "mean_run_wall_s": round(wall), "mean_critical_path_s": round(crit),
            "wall_over_critical_path": round(wall / crit),
            "mean_sequential_sum_s": round(seq), "sequential_over_wall": round(seq / wall),
            "arm_requests_per_create": round(arm as f64 / a.creates as f64),
            "arm_requests_per_create_with_simulated_controllers": round(with_controllers as f64 / a.creates as f64),
            "throttled_responses": throttled,
            "workers": a.workers.max(1),
            "delete_wall_s": delete_wall.map(round),
            "delete_budget_deferrals": delete_deferrals.map(|d| d.0),
            "delete_succeeded": delete_deferrals.map(|d| d.1),
            "arm_share": share,
            "budget_floor_s": round(floor),
            "wall_over_budget_floor": if floor > 0.0 { serde_json::json!(round(wall_all / floor)) } else { serde_json::Value::Null },
            "by_class": classes,
            "by_budget": budgets,
            "steps_per_create": e.view(runs[0]).await?.dag.nodes.len(),
        }),
    );
    Ok(if failed == 0 { 0 } else { 1 })
}

/// Where each budget (subscription, operation type) idled: hcp-workflow's own requests
/// replayed through a bucket of the share's size, full at the start. A token that would
/// refill a full bucket is lost; `idle_s` is the lost refill in seconds of refill, by
/// minute in `idle_s_by_minute`; `floor_s` is this budget's own floor (requests beyond the
/// burst over the refill rate) and `last_request_s` when its last request was answered.
fn budget_replay(
    log: &[hcp_simulator::RequestRecord],
    start_ms: u64,
    end_ms: u64,
    share: Option<f64>,
) -> serde_json::Value {
    use hcp_activities::azure::budget::{Class, Key};
    let Some(share) = share else {
        return serde_json::Value::Null;
    };
    let mut by_key: std::collections::BTreeMap<Key, Vec<u64>> = Default::default();
    for r in log.iter().filter(|r| r.status != 429) {
        let path = r.path.split('?').next().unwrap_or_default();
        if let Some(k) = Key::of("arm", path, Class::of_name(&r.method)) {
            by_key.entry(k).or_default().push(r.at_ms.max(start_ms));
        }
    }
    let mut out = serde_json::Map::new();
    for (k, mut times) in by_key {
        times.sort_unstable();
        let (cap, rate) = k.class.documented();
        let (cap, rate) = (cap * share, rate * share);
        let (mut tokens, mut last, mut lost) = (cap, start_ms, 0.0f64);
        let mut by_minute = vec![0.0f64; ((end_ms.saturating_sub(start_ms)) / 60_000 + 1) as usize];
        let mut refill = |tokens: &mut f64, last: &mut u64, to: u64, lost: &mut f64| {
            let added = to.saturating_sub(*last) as f64 / 1e3 * rate;
            let over = (*tokens + added - cap).max(0.0);
            *tokens = (*tokens + added).min(cap);
            *lost += over;
            if let Some(m) = by_minute.get_mut((to.saturating_sub(start_ms) / 60_000) as usize) {
                *m += over / rate;
            }
            *last = to;
        };
        for &t in &times {
            refill(&mut tokens, &mut last, t, &mut lost);
            tokens -= 1.0;
        }
        let last_request = last;
        refill(&mut tokens, &mut last, end_ms.max(last_request), &mut lost);
        let sent = times.len() as f64;
        out.insert(
            format!("{}/{}", k.subscription, k.class.as_str()),
            serde_json::json!({
                "sent": sent,
                "floor_s": round(((sent - cap).max(0.0)) / rate),
                "idle_s": round(lost / rate),
                "idle_s_by_minute": by_minute.iter().map(|x| round(*x)).collect::<Vec<_>>(),
                "last_request_s": round(last_request.saturating_sub(start_ms) as f64 / 1e3),
            }),
        );
    }
    serde_json::Value::Object(out)
}

/// (run wall, critical path, sum of step durations) in seconds, from journal timestamps.
/// A step's duration is its first start to its completion (retries and waits included);
/// the critical path is the longest chain of step durations through the DAG.
fn critical_path(v: &hcp_runtime::RunView) -> (f64, f64, f64) {
    let dur: Vec<f64> = v
        .nodes
        .iter()
        .map(|n| match (n.started_at, n.finished_at) {
            (Some(s), Some(f)) => (f.0 - s.0) as f64 / 1e3,
            _ => 0.0,
        })
        .collect();
    let mut longest = vec![0.0f64; dur.len()];
    for (i, spec) in v.dag.nodes.iter().enumerate() {
        let before = spec
            .deps
            .iter()
            .filter_map(|d| v.index_of(d))
            .map(|j| longest[j])
            .fold(0.0, f64::max);
        longest[i] = before + dur[i];
    }
    let start = v
        .nodes
        .iter()
        .filter_map(|n| n.started_at)
        .map(|t| t.0)
        .min()
        .unwrap_or(0);
    let end = v
        .nodes
        .iter()
        .filter_map(|n| n.finished_at)
        .map(|t| t.0)
        .max()
        .unwrap_or(0);
    (
        (end - start) as f64 / 1e3,
        longest.iter().copied().fold(0.0, f64::max),
        dur.iter().sum(),
    )
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::budget_replay;

    fn req(at_ms: u64, method: &str, sub: &str) -> hcp_simulator::RequestRecord {
        hcp_simulator::RequestRecord {
            seq: 0,
            method: method.into(),
            path: format!("/subscriptions/{sub}/resourceGroups/g?api-version=2021-04-01"),
            status: 200,
            error_code: None,
            actor: None,
            error_message: None,
            at_ms,
        }
    }

    #[test]
    fn the_replay_finds_where_a_budget_idled_and_each_subscriptions_floor() {
        // Half of ARM's write bucket: 100 tokens, 5 per second. 100 writes at once empty
        // it; 30 s without a write refill it in 20 s, so 10 s of refill (50 tokens) is lost.
        let mut log: Vec<_> = (0..100).map(|_| req(1_000, "PUT", "s1")).collect();
        // Another subscription has its own bucket: 150 writes, 50 beyond the burst.
        log.extend((0..150).map(|i| req(1_000 + i * 100, "PUT", "s2")));
        // A throttled answer spent no token.
        let mut throttled = req(1_000, "PUT", "s1");
        throttled.status = 429;
        log.push(throttled);
        log.push(req(2_000, "GET", "s1"));
        let out = budget_replay(&log, 1_000, 31_000, Some(0.5));
        let s1 = &out["s1/write"];
        assert_eq!(s1["sent"], 100.0);
        assert_eq!(s1["floor_s"], 0.0);
        assert_eq!(s1["idle_s"], 10.0);
        assert_eq!(s1["idle_s_by_minute"], serde_json::json!([10.0]));
        assert_eq!(s1["last_request_s"], 0.0);
        let s2 = &out["s2/write"];
        assert_eq!(s2["sent"], 150.0);
        assert_eq!(s2["floor_s"], 10.0);
        // Reads have their own, larger bucket (125 tokens at 12.5/s): one read loses
        // nothing until its bucket is full again.
        assert_eq!(out["s1/read"]["sent"], 1.0);
        assert!(budget_replay(&log, 1_000, 31_000, None).is_null());
    }
}
