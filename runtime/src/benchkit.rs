//! Measuring the engine's own overhead with no-op workflows: shared by
//! `hcp-workflow bench` and the stores' micro-benchmarks, so every figure is taken the
//! same way. A step's latency is the time between two consecutive journaled step
//! completions (`AfterWrite` boundaries) of one run.

use crate::engine::{
    Boundary, BoundaryPoint, Engine, EngineConfig, EngineError, EngineHooks, StartOptions,
};
use crate::store::{JournalStore, RunId};
use crate::testkit::{self, NoOp};
use crate::{Registry, SystemClock};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Timing {
    last: HashMap<RunId, Instant>,
    deltas: Vec<Duration>,
    finished: usize,
    resumed: HashSet<RunId>,
    all_resumed_at: Option<Instant>,
}

/// Engine hooks that time no-op runs and signal when `target` runs have finished.
#[derive(Debug)]
pub struct StepTimer {
    last_node: String,
    target: usize,
    t: Mutex<Timing>,
    done: tokio::sync::Notify,
}

impl StepTimer {
    /// Times runs of [`testkit::noop_dag`]`(steps)`; done after `target` of them finish.
    pub fn new(steps: u32, target: usize) -> Arc<Self> {
        Arc::new(Self {
            last_node: format!("bench.noop.{}", steps.saturating_sub(1)),
            target,
            t: Mutex::new(Timing::default()),
            done: tokio::sync::Notify::new(),
        })
    }

    fn timing(&self) -> std::sync::MutexGuard<'_, Timing> {
        self.t.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Per-step latencies so far, sorted.
    pub fn deltas(&self) -> Vec<Duration> {
        let mut d = self.timing().deltas.clone();
        d.sort();
        d
    }
}

impl EngineHooks for StepTimer {
    fn boundary(&self, b: &Boundary<'_>) {
        let now = Instant::now();
        let mut t = self.timing();
        match b.point {
            BoundaryPoint::BeforeEffect => {
                if t.resumed.insert(b.run_id) && t.resumed.len() == self.target {
                    t.all_resumed_at = Some(now);
                }
            }
            BoundaryPoint::AfterWrite => {
                if let Some(prev) = t.last.insert(b.run_id, now) {
                    t.deltas.push(now - prev);
                }
                if b.node == self.last_node {
                    t.finished += 1;
                    t.last.remove(&b.run_id);
                    if t.finished >= self.target {
                        self.done.notify_one();
                    }
                }
            }
            BoundaryPoint::AfterEffect => {}
        }
    }
}

/// [`NoOp`]'s stand-in for a worker about to die: the step starts (its intent is
/// journaled) and never finishes, as if the process were killed in the middle of it.
#[derive(Debug, Clone, Copy)]
pub struct Hang;

impl crate::Action for Hang {
    const NAME: &'static str = <NoOp as crate::Action>::NAME;
    const HAS_UNDO: bool = false;
    type Input = u32;
    type Output = u32;

    async fn run(
        &self,
        _ctx: &crate::StepContext,
        _input: u32,
    ) -> Result<crate::Outcome<u32>, crate::StepError> {
        std::future::pending().await
    }
}

/// A registry whose no-op steps hang (see [`Hang`]).
pub fn hanging_registry() -> Registry {
    let mut r = Registry::new();
    let _ = r.register(Hang);
    r
}

/// Engine hooks that signal once `target` runs have each started an attempt (the intent
/// is durable: `BeforeEffect`).
#[derive(Debug)]
pub struct StartCounter {
    target: usize,
    started: Mutex<HashSet<RunId>>,
    done: tokio::sync::Notify,
}

impl StartCounter {
    /// Signals after `target` distinct runs started an attempt.
    pub fn new(target: usize) -> Arc<Self> {
        Arc::new(Self {
            target,
            started: Mutex::new(HashSet::new()),
            done: tokio::sync::Notify::new(),
        })
    }

    /// Wait until `target` runs have started an attempt.
    pub async fn wait(&self) {
        self.done.notified().await;
    }
}

impl EngineHooks for StartCounter {
    fn boundary(&self, b: &Boundary<'_>) {
        if b.point == BoundaryPoint::BeforeEffect {
            let mut s = self.started.lock().unwrap_or_else(|p| p.into_inner());
            if s.insert(b.run_id) && s.len() == self.target {
                self.done.notify_one();
            }
        }
    }
}

/// A registry with the no-op action.
pub fn noop_registry() -> Registry {
    let mut r = Registry::new();
    let _ = r.register(NoOp);
    r
}

/// Start `n` no-op runs of `steps` steps, concurrently so the store can batch them.
///
/// # Errors
/// Store errors.
pub async fn start_noop_runs(e: &Engine, n: usize, steps: u32) -> Result<Vec<RunId>, EngineError> {
    let dag = testkit::noop_dag(steps);
    let mut ids = Vec::with_capacity(n);
    let mut left = n;
    while left > 0 {
        let k = left.min(200);
        let futs = (0..k).map(|_| e.start(&dag, StartOptions::default()));
        for r in futures::future::join_all(futs).await {
            ids.push(r?.run_id);
        }
        left -= k;
    }
    Ok(ids)
}

/// What one worker did until the timer's target was reached.
#[derive(Debug, Clone)]
pub struct WorkerRun {
    /// From worker start until every target run finished.
    pub wall: Duration,
    /// From worker start until every target run had started an attempt in this worker.
    pub all_resumed: Option<Duration>,
}

/// Run a worker of `e` (whose hooks are `timer`) until `timer` says done, then stop it.
///
/// # Errors
/// The worker's errors.
pub async fn run_worker_until_done(
    e: &Engine,
    timer: &StepTimer,
) -> Result<WorkerRun, EngineError> {
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
    timer.done.notified().await;
    let wall = t0.elapsed();
    let all_resumed = timer
        .timing()
        .all_resumed_at
        .map(|at| at.duration_since(t0));
    let _ = tx.send(());
    match worker.await {
        Ok(r) => r?,
        Err(e) => {
            return Err(EngineError::CommandRefused(format!(
                "worker task failed: {e}"
            )));
        }
    }
    Ok(WorkerRun { wall, all_resumed })
}

/// Engine settings for benchmarks: `max_runs` at once, a short idle poll.
pub fn bench_config(max_runs: usize) -> EngineConfig {
    EngineConfig {
        max_runs,
        poll_interval: Duration::from_millis(5),
        ..EngineConfig::default()
    }
}

/// Result of [`noop_bench`].
#[derive(Debug, Clone)]
pub struct NoopBench {
    /// Wall time of the worker (runs are created before the clock starts).
    pub wall: Duration,
    /// Per-step latencies, sorted.
    pub deltas: Vec<Duration>,
}

/// `runs` no-op workflows of `steps` steps, `concurrency` at a time, over `store`.
///
/// # Errors
/// Store and worker errors.
pub async fn noop_bench(
    store: Arc<dyn JournalStore>,
    runs: usize,
    steps: u32,
    concurrency: usize,
) -> Result<NoopBench, EngineError> {
    let timer = StepTimer::new(steps, runs);
    let e = Engine::with(
        store,
        noop_registry(),
        Arc::new(SystemClock),
        timer.clone(),
        bench_config(concurrency),
    );
    start_noop_runs(&e, runs, steps).await?;
    let w = run_worker_until_done(&e, &timer).await?;
    Ok(NoopBench {
        wall: w.wall,
        deltas: timer.deltas(),
    })
}

/// The `p` quantile (0..=1) of sorted samples (durations, ratios); zero (`Default`) when
/// empty.
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let i = ((sorted.len() as f64 - 1.0) * p.clamp(0.0, 1.0)).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
