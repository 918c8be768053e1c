//! Micro-benchmarks of the SQLite store (ignored; run them in release):
//!
//! ```text
//! CARGO_TARGET_DIR=target-persist cargo test -p hcp-persistence --release \
//!     --test store -- sqlite_bench:: --ignored --nocapture --test-threads 1
//! ```
//!
//! - `store_*`: the store alone, with appends shaped like the engine's (one append of 1–2
//!   events per step);
//! - `engine_*`: the real engine running no-op workflows over the store, timed like
//!   `hcp-workflow bench engine` (time between consecutive journaled step boundaries of a
//!   run).
//!
//! Journals live under cargo's target tmp dir, i.e. on the disk the build runs on, so the
//! fsync cost is real (a tmpfs would flatter every number).

#![allow(clippy::unwrap_used, clippy::cast_precision_loss)]

use hcp_persistence::SqliteStore;
use hcp_runtime::store::{Append, NewEvent, NewRun, RunPatch};
use hcp_runtime::{Clock, JournalStore, RunState, SystemClock, Timestamp};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

async fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let s = SqliteStore::open(dir.path().join("bench.db"))
        .await
        .unwrap();
    (dir, Arc::new(s))
}

use hcp_runtime::benchkit::{self, percentile as pct};

fn run(at: Timestamp) -> NewRun {
    NewRun {
        id: Uuid::new_v4(),
        workflow: "bench".into(),
        workflow_version: 1,
        labels: BTreeMap::from([("cluster".into(), "bench".into())]),
        idempotency_key: None,
        exclusive_key: None,
        target: None,
        dag: "{}".into(),
        created_at: at,
    }
}

fn step(i: usize, at: Timestamp) -> Append {
    // Like the engine: a step's success and the next step's intent, 1–2 events.
    let events = (0..1 + i % 2)
        .map(|k| NewEvent {
            kind: if k == 0 {
                "node_succeeded"
            } else {
                "node_started"
            }
            .into(),
            node: Some(format!("bench.noop.{i}")),
            data: format!(r#"{{"type":"node_succeeded","node":"bench.noop.{i}","output":{i}}}"#),
            at,
        })
        .collect();
    Append {
        events,
        patch: RunPatch {
            state: RunState::Running,
            blocked_on: format!("running bench.noop.{i}"),
            current_step: Some(format!("bench.noop.{i}")),
            wake_at: Some(at),
            updated_at: at,
        },
        applied_commands: vec![],
        after_seq: None,
        summary_kept: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn store_append_latency_one_run() {
    let (_dir, s) = store().await;
    let now = SystemClock.now();
    s.create_run(run(now)).await.unwrap();
    let lease = s
        .acquire("w", now, Duration::from_secs(60), 1, None)
        .await
        .unwrap()
        .remove(0);
    let n = 2_000;
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        s.append(&lease, step(i, now)).await.unwrap();
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "store_append_latency_one_run: {n} appends, p50 {:?} p90 {:?} p99 {:?}",
        pct(&lat, 0.5),
        pct(&lat, 0.9),
        pct(&lat, 0.99)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn store_append_throughput_1000_runs_x_10_steps() {
    let (_dir, s) = store().await;
    let now = SystemClock.now();
    let runs = 1_000;
    let steps = 10;
    let mut creates = tokio::task::JoinSet::new();
    for _ in 0..runs {
        let s = s.clone();
        creates.spawn(async move { s.create_run(run(now)).await.unwrap() });
    }
    while let Some(r) = creates.join_next().await {
        r.unwrap();
    }
    let leases = s
        .acquire("w", now, Duration::from_secs(600), runs, None)
        .await
        .unwrap();
    assert_eq!(leases.len(), runs);
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for lease in leases {
        let s = s.clone();
        tasks.spawn(async move {
            for i in 0..steps {
                s.append(&lease, step(i, now)).await.unwrap();
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let wall = t0.elapsed();
    let stats = s.writer_stats();
    println!(
        "store_append_throughput: {} appends in {wall:?} = {:.0} appends/s; {} transactions \
         (mean {:.1} requests each)",
        runs * steps,
        (runs * steps) as f64 / wall.as_secs_f64(),
        stats.transactions,
        stats.requests as f64 / stats.transactions.max(1) as f64,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn store_acquire_with_10000_finished_runs() {
    let (_dir, s) = store().await;
    let now = SystemClock.now();
    let finished = 10_000;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..finished {
        let s = s.clone();
        tasks.spawn(async move {
            s.create_run(run(now)).await.unwrap();
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let leases = s
        .acquire("w", now, Duration::from_secs(600), finished, None)
        .await
        .unwrap();
    assert_eq!(leases.len(), finished);
    for lease in leases {
        let s = s.clone();
        tasks.spawn(async move {
            let mut a = step(0, now);
            a.patch.state = RunState::Succeeded;
            a.patch.wake_at = None;
            s.append(&lease, a).await.unwrap();
            s.release(&lease, None).await.unwrap();
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    for _ in 0..10 {
        s.create_run(run(now)).await.unwrap();
    }
    // Acquire the 10 due runs, release them, again: the finished ones must cost nothing.
    let mut lat = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let got = s
            .acquire("w", now, Duration::from_secs(600), 1_000, None)
            .await
            .unwrap();
        lat.push(t.elapsed());
        assert_eq!(got.len(), 10);
        for l in got {
            s.release(&l, Some(now)).await.unwrap();
        }
    }
    lat.sort();
    println!(
        "store_acquire_with_10000_finished_runs: acquire of 10 due among 10,010 runs: p50 {:?} \
         p99 {:?}",
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );
}

async fn engine_bench(runs: usize, steps: u32, concurrency: usize) {
    let (_dir, s) = store().await;
    let store: Arc<dyn JournalStore> = s.clone();
    let before = s.writer_stats();
    // Run creation is included in the writer stats, not in the timing.
    let r = benchkit::noop_bench(store, runs, steps, concurrency)
        .await
        .unwrap();
    let after = s.writer_stats();
    let total = runs as f64 * f64::from(steps);
    let tx_count = after.transactions - before.transactions;
    let req_count = after.requests - before.requests;
    println!(
        "engine runs={runs} steps={steps} concurrency={concurrency}: {:?}, {:.0} steps/s, \
         p50 {:?} p99 {:?} per step; {req_count} store writes in {tx_count} transactions",
        r.wall,
        total / r.wall.as_secs_f64(),
        pct(&r.deltas, 0.5),
        pct(&r.deltas, 0.99),
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark"]
async fn engine_1000_runs_x_10_steps_concurrency_1000() {
    engine_bench(1_000, 10, 1_000).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark"]
async fn engine_100_runs_x_10_steps_concurrency_1() {
    engine_bench(100, 10, 1).await;
}
