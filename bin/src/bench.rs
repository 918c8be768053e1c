//! `hcp-workflow bench …`: the engine's own overhead, measured with no-op steps.
//!
//! Each subcommand prints one JSON line. Step latency is the time between consecutive
//! journaled step completions of one run (the engine's per-step cost: one durable append
//! that records a step's success and the next step's intent, plus scheduling).

use crate::open_store;
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

pub async fn run(db: &str, cmd: BenchCommand) -> Result<u8> {
    match cmd {
        BenchCommand::Engine(a) => engine(db, a).await,
        BenchCommand::Recovery(a) => recovery(db, a).await,
    }
}

async fn engine(db: &str, a: EngineArgs) -> Result<u8> {
    if a.runs == 0 || a.steps == 0 || a.concurrency == 0 {
        bail!("--runs, --steps and --concurrency must be at least 1");
    }
    let store = open_store(db).await?;
    let r = benchkit::noop_bench(store.clone(), a.runs, a.steps, a.concurrency).await?;
    let wall = r.wall.as_secs_f64();
    let ms = |p| benchkit::percentile(&r.deltas, p).as_secs_f64() * 1e3;
    let steps = a.runs as f64 * f64::from(a.steps);
    println!(
        "{}",
        serde_json::json!({
            "bench": "engine", "backend": store.backend(), "runs": a.runs, "steps": a.steps,
            "concurrency": a.concurrency, "wall_s": round(wall),
            "steps_per_s": round(steps / wall),
            "p50_ms_per_step": round(ms(0.50)),
            "p99_ms_per_step": round(ms(0.99)),
            "samples": r.deltas.len(),
        })
    );
    Ok(0)
}

async fn recovery(db: &str, a: RecoveryArgs) -> Result<u8> {
    let store = open_store(db).await?;
    let timer = benchkit::StepTimer::new(2, a.runs);
    let config = EngineConfig {
        acquire_batch: 2_000,
        poll_interval: Duration::from_millis(20),
        ..benchkit::bench_config(a.runs.max(1))
    };
    let e = Engine::with(
        store.clone(),
        benchkit::noop_registry(),
        Arc::new(SystemClock),
        timer.clone(),
        config,
    );
    let ids = benchkit::start_noop_runs(&e, a.runs, 2).await?;
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
    let wait_for_expiry = if store.backend() == "sqlite" {
        0.0 // the executor lock proves the dead worker is dead: its leases are freed at once
    } else {
        expiry.duration_since(SystemClock.now()).as_secs_f64() * 1e3
    };
    let w = benchkit::run_worker_until_done(&e, &timer).await?;
    let total_ms = w.wall.as_secs_f64() * 1e3;
    let resumed_ms = w.all_resumed.map_or(total_ms, |d| d.as_secs_f64() * 1e3);
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
