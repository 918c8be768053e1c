//! `hcp-workflow bench …`: the engine's own overhead, measured with no-op steps.
//!
//! Each subcommand prints one JSON line. Step latency is the time between consecutive
//! journaled step completions of one run (the engine's per-step cost: one durable append
//! that records a step's success and the next step's intent, plus scheduling).

use crate::open_store;
use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use hcp_runtime::engine::{Boundary, BoundaryPoint};
use hcp_runtime::testkit::{self, NoOp};
use hcp_runtime::{
    Clock, Engine, EngineConfig, EngineHooks, Registry, RunId, StartOptions, SystemClock,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
}

#[derive(Debug, Default)]
struct Timing {
    last: HashMap<RunId, Instant>,
    deltas_ms: Vec<f64>,
    finished: usize,
    /// Runs whose first attempt in this process started (intent journaled).
    resumed: std::collections::HashSet<RunId>,
    all_resumed_at: Option<Instant>,
}

#[derive(Debug)]
struct BenchHooks {
    last_node: String,
    t: Mutex<Timing>,
    done: tokio::sync::Notify,
    target: usize,
}

impl EngineHooks for BenchHooks {
    fn boundary(&self, b: &Boundary<'_>) {
        let now = Instant::now();
        let Ok(mut t) = self.t.lock() else { return };
        if b.point == BoundaryPoint::BeforeEffect {
            if t.resumed.insert(b.run_id) && t.resumed.len() == self.target {
                t.all_resumed_at = Some(now);
            }
            return;
        }
        if b.point != BoundaryPoint::AfterWrite {
            return;
        }
        if let Some(prev) = t.last.insert(b.run_id, now) {
            let d = now.duration_since(prev).as_secs_f64() * 1e3;
            t.deltas_ms.push(d);
        }
        if b.node == self.last_node {
            t.finished += 1;
            t.last.remove(&b.run_id);
            if t.finished >= self.target {
                self.done.notify_one();
            }
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn registry() -> Registry {
    let mut r = Registry::new();
    let _ = r.register(NoOp);
    r
}

pub async fn run(db: &str, cmd: BenchCommand) -> Result<u8> {
    match cmd {
        BenchCommand::Engine(a) => engine(db, a).await,
        BenchCommand::Recovery(a) => recovery(db, a).await,
    }
}

async fn create_runs(e: &Engine, n: usize, steps: u32) -> Result<Vec<RunId>> {
    let dag = testkit::noop_dag(steps);
    let mut ids = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        // Concurrent creates let the store batch them into few commits.
        let k = left.min(200);
        let futs = (0..k).map(|_| e.start(&dag, StartOptions::default()));
        for r in futures::future::join_all(futs).await {
            ids.push(r?.run_id);
        }
        left -= k;
    }
    Ok(ids)
}

async fn engine(db: &str, a: EngineArgs) -> Result<u8> {
    if a.runs == 0 || a.steps == 0 || a.concurrency == 0 {
        bail!("--runs, --steps and --concurrency must be at least 1");
    }
    let store = open_store(db).await?;
    let hooks = Arc::new(BenchHooks {
        last_node: format!("bench.noop.{}", a.steps - 1),
        t: Mutex::new(Timing::default()),
        done: tokio::sync::Notify::new(),
        target: a.runs,
    });
    let config = EngineConfig {
        max_runs: a.concurrency,
        poll_interval: Duration::from_millis(5),
        ..EngineConfig::default()
    };
    let e = Engine::with(
        store.clone(),
        registry(),
        Arc::new(SystemClock),
        hooks.clone(),
        config,
    );
    create_runs(&e, a.runs, a.steps).await?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let t0 = Instant::now();
    let worker = {
        let e = e.clone();
        tokio::spawn(async move {
            e.run_worker(async {
                let _ = rx.await;
            })
            .await
        })
    };
    hooks.done.notified().await;
    let wall = t0.elapsed().as_secs_f64();
    let _ = tx.send(());
    worker.await??;
    let mut d = hooks
        .t
        .lock()
        .map(|t| t.deltas_ms.clone())
        .unwrap_or_default();
    d.sort_by(f64::total_cmp);
    let steps = a.runs as f64 * f64::from(a.steps);
    println!(
        "{}",
        serde_json::json!({
            "bench": "engine", "backend": store.backend(), "runs": a.runs, "steps": a.steps,
            "concurrency": a.concurrency, "wall_s": round(wall),
            "steps_per_s": round(steps / wall),
            "p50_ms_per_step": round(percentile(&d, 0.50)),
            "p99_ms_per_step": round(percentile(&d, 0.99)),
            "samples": d.len(),
        })
    );
    Ok(0)
}

async fn recovery(db: &str, a: RecoveryArgs) -> Result<u8> {
    let store = open_store(db).await?;
    let hooks = Arc::new(BenchHooks {
        last_node: "bench.noop.1".into(),
        t: Mutex::new(Timing::default()),
        done: tokio::sync::Notify::new(),
        target: a.runs,
    });
    let config = EngineConfig {
        max_runs: a.runs.max(1),
        acquire_batch: 2_000,
        poll_interval: Duration::from_millis(20),
        ..EngineConfig::default()
    };
    let e = Engine::with(
        store.clone(),
        registry(),
        Arc::new(SystemClock),
        hooks.clone(),
        config,
    );
    let ids = create_runs(&e, a.runs, 2).await?;
    // A worker that dies right after leasing everything: leases held, nothing released.
    let lease = Duration::from_millis(a.lease_ms);
    let now = SystemClock.now();
    let mut leased = 0;
    while leased < ids.len() {
        let got = store
            .acquire("dead-worker", now, lease, 5_000, None)
            .await?;
        if got.is_empty() {
            break;
        }
        leased += got.len();
    }
    let expiry = now.plus(lease);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let t0 = Instant::now();
    let wait_for_expiry = if store.backend() == "sqlite" {
        0.0 // the executor lock proves the dead worker is dead: its leases are freed at once
    } else {
        expiry.duration_since(SystemClock.now()).as_secs_f64() * 1e3
    };
    let worker = {
        let e = e.clone();
        tokio::spawn(async move {
            e.run_worker(async {
                let _ = rx.await;
            })
            .await
        })
    };
    hooks.done.notified().await;
    let total_ms = t0.elapsed().as_secs_f64() * 1e3;
    let resumed_ms = hooks
        .t
        .lock()
        .ok()
        .and_then(|t| t.all_resumed_at)
        .map(|at| at.duration_since(t0).as_secs_f64() * 1e3)
        .unwrap_or(total_ms);
    let _ = tx.send(());
    worker.await??;
    println!(
        "{}",
        serde_json::json!({
            "bench": "recovery", "backend": store.backend(), "runs": leased,
            "lease_expiry_wait_ms": round(wait_for_expiry),
            "all_resumed_ms": round(resumed_ms),
            "all_resumed_after_expiry_ms": round(resumed_ms - wait_for_expiry),
            "all_finished_ms": round(total_ms),
        })
    );
    Ok(0)
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
