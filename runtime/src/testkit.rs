//! A sample saga with observable side effects, for the engine's own tests, the store
//! conformance suite, the crash tests (which SIGKILL a real process running it) and the
//! engine benchmark.
//!
//! Side effects are files in a directory, so they survive the process: creating node `n`
//! creates `<dir>/res/<n>` (if absent) and appends to `<dir>/effects.log`; undoing removes
//! it. Because the effect log says whether a create found the file already there, a test
//! can check that each resource was created exactly once however often the action ran.

#![allow(missing_docs)]

use crate::action::{Action, Outcome, Registry, StepContext, UndoOutcome};
use crate::dag::{NodeOptions, Ref, SagaBuilder, SagaDag};
use crate::error::StepError;
use crate::retry::RetryPolicy;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Injected behaviour, shared by every node of the sample saga. Child processes read it
/// from `HCP_SAMPLE_FAULTS` (JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// Nodes whose action fails permanently (after its side effect, to prove undo runs).
    pub fail: HashSet<String>,
    /// Nodes whose action fails retryably this many times first.
    pub flaky: HashMap<String, u32>,
    /// Nodes whose undo fails (retryably) until removed from this set.
    pub stuck_undo: HashSet<String>,
    /// Nodes whose undo fails retryably once *after* removing the resource (so the undo
    /// runs twice: unwinding twice must be harmless).
    pub undo_twice: HashSet<String>,
    /// Nodes whose action returns `Wait` this many times before completing.
    pub waits: HashMap<String, u32>,
    /// How long each `Wait` lasts (default 600 s).
    pub wait_ms: Option<u64>,
    /// Nodes whose action takes this long (ms) after its side effect, before it returns:
    /// a step a worker is stopped in the middle of (a worker's drain).
    pub slow_ms: HashMap<String, u64>,
    /// Calls so far, by "do:<node>" / "undo:<node>".
    #[serde(skip)]
    pub calls: HashMap<String, u32>,
}

/// The world the sample actions act on.
#[derive(Debug)]
pub struct World {
    pub dir: PathBuf,
    pub faults: Mutex<Faults>,
}

impl World {
    pub fn new(dir: impl Into<PathBuf>) -> Arc<Self> {
        // The directory is made by the first side effect, not here: every `worker` builds
        // a world for the self-test saga and most never run one (a stray
        // `./hcp-workflow-selftest/` appeared wherever a worker was started).
        let dir = dir.into();
        Arc::new(Self {
            dir,
            faults: Mutex::new(Faults::default()),
        })
    }

    pub fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn log(&self, line: &str) -> Result<(), StepError> {
        std::fs::create_dir_all(self.dir.join("res")).map_err(io)?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("effects.log"))
            .map_err(io)?;
        // One write(2) per line: with O_APPEND it cannot interleave with parallel steps.
        f.write_all(format!("{line}\n").as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)
    }

    /// The effect log, line by line.
    pub fn effects(&self) -> Vec<String> {
        read_lines(&self.dir.join("effects.log"))
    }

    /// Resources that exist now, sorted.
    pub fn resources(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir.join("res"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    fn bump(&self, key: String) -> u32 {
        let mut f = self.faults();
        let c = f.calls.entry(key).or_default();
        *c += 1;
        *c
    }
}

/// A fresh directory under the system temp dir, named `hcp-<tag>-<uuid>`.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hcp-{tag}-{}", uuid::Uuid::new_v4()));
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("cannot create scratch dir {}: {e}", d.display());
    }
    d
}

pub fn read_lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

fn io(e: std::io::Error) -> StepError {
    StepError::retryable("transient", format!("test world I/O: {e}"))
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepInput {
    pub key: String,
    #[serde(default)]
    pub needs: Vec<Ref<StepOutput>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepOutput {
    pub key: String,
    /// Concatenation of the keys this step read from its ancestors' outputs.
    pub seen: Vec<String>,
    /// What the step did to its file (the resource ledger convention, see [`crate::ledger`]).
    #[serde(default)]
    pub ledger: Vec<crate::ledger::LedgerRecord>,
}

/// Creates resource `key`; undo deletes it.
#[derive(Debug, Clone)]
pub struct TestStep(pub Arc<World>);

impl Action for TestStep {
    const NAME: &'static str = "test.step";
    type Input = StepInput;
    type Output = StepOutput;

    fn retry_policy() -> RetryPolicy {
        RetryPolicy::default()
            .with_backoff(Duration::from_millis(10), 2.0, Duration::from_millis(100))
            .with_max_attempts(5)
    }

    fn undo_retry_policy() -> RetryPolicy {
        RetryPolicy::default()
            .with_backoff(Duration::from_millis(10), 2.0, Duration::from_millis(50))
            .with_max_attempts(3)
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: StepInput,
    ) -> Result<Outcome<StepOutput>, StepError> {
        let w = &self.0;
        let n = w.bump(format!("do:{}", input.key));
        let mut seen = Vec::new();
        for r in &input.needs {
            seen.push(ctx.output(r)?.key);
        }
        let (flaky, waits) = {
            let f = w.faults();
            (
                f.flaky.get(ctx.node()).copied().unwrap_or(0),
                f.waits.get(ctx.node()).copied().unwrap_or(0),
            )
        };
        if n <= flaky {
            return Err(
                StepError::retryable("throttled", format!("flaky {n}/{flaky}"))
                    .with_code("TooManyRequests"),
            );
        }
        std::fs::create_dir_all(w.dir.join("res")).map_err(io)?;
        let path = w.dir.join("res").join(&input.key);
        if path.exists() {
            w.log(&format!("effect {} exists", input.key))?;
        } else {
            std::fs::write(&path, ctx.run_id().to_string()).map_err(io)?;
            w.log(&format!("effect {} create", input.key))?;
        }
        // Created by this run (possibly by an attempt that crashed before journaling), or
        // adopted from elsewhere: the file's content says which run wrote it.
        let owner = std::fs::read_to_string(&path).unwrap_or_default();
        let action = if owner == ctx.run_id().to_string() {
            crate::ledger::LedgerAction::Created
        } else {
            crate::ledger::LedgerAction::Adopted
        };
        let ledger = vec![crate::ledger::LedgerRecord {
            kind: "file".into(),
            resource_type: "selftest/file".into(),
            id: path.display().to_string(),
            action,
            persistent: false,
            note: None,
        }];
        let slow = w.faults().slow_ms.get(ctx.node()).copied().unwrap_or(0);
        if slow > 0 {
            tokio::time::sleep(Duration::from_millis(slow)).await;
        }
        if n <= flaky + waits {
            return Ok(ctx.wait(
                Duration::from_millis(w.faults().wait_ms.unwrap_or(600_000)),
                format!("waiting for {} to settle", input.key),
            ));
        }
        if w.faults().fail.contains(ctx.node()) {
            return Err(StepError::permanent(
                "validation",
                format!("injected failure at {}", input.key),
            )
            .with_code("InvalidParameter"));
        }
        Ok(Outcome::Done(StepOutput {
            key: input.key,
            seen,
            ledger,
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: StepInput,
        _out: Option<StepOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let w = &self.0;
        let n = w.bump(format!("undo:{}", input.key));
        if w.faults().stuck_undo.contains(ctx.node()) {
            return Err(StepError::retryable(
                "conflict",
                format!("injected stuck undo at {}", input.key),
            )
            .with_code("AnotherOperationInProgress"));
        }
        let path = w.dir.join("res").join(&input.key);
        if path.exists() {
            std::fs::remove_file(&path).map_err(io)?;
            w.log(&format!("undo {} delete", input.key))?;
        } else {
            w.log(&format!("undo {} absent", input.key))?;
        }
        if n == 1 && w.faults().undo_twice.contains(ctx.node()) {
            return Err(StepError::retryable(
                "transient",
                "injected failure after the undo's effect",
            ));
        }
        Ok(UndoOutcome::Done)
    }
}

/// Creates resource `key` like [`TestStep`], but has no undo: a pivot (the point of no
/// return, like a control plane upgrade).
#[derive(Debug, Clone)]
pub struct PivotStep(pub Arc<World>);

impl Action for PivotStep {
    const NAME: &'static str = "test.pivot";
    const HAS_UNDO: bool = false;
    type Input = StepInput;
    type Output = StepOutput;

    fn retry_policy() -> RetryPolicy {
        TestStep::retry_policy()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: StepInput,
    ) -> Result<Outcome<StepOutput>, StepError> {
        TestStep(self.0.clone()).run(ctx, input).await
    }
}

/// A no-op step (engine overhead benchmarks).
#[derive(Debug, Clone, Copy)]
pub struct NoOp;

impl Action for NoOp {
    const NAME: &'static str = "bench.noop";
    const HAS_UNDO: bool = false;
    type Input = u32;
    type Output = u32;

    async fn run(&self, _ctx: &StepContext, input: u32) -> Result<Outcome<u32>, StepError> {
        Ok(Outcome::Done(input))
    }
}

/// A registry with the sample actions.
pub fn registry(world: &Arc<World>) -> Registry {
    let mut r = Registry::new();
    let _ = r.register(TestStep(world.clone()));
    let _ = r.register(PivotStep(world.clone()));
    let _ = r.register(NoOp);
    r
}

/// Node names of [`sample_dag`], in a valid topological order.
pub const SAMPLE_NODES: [&str; 5] = ["a", "b1", "b2", "c", "d"];

/// `a → {b1 ∥ b2} → c (reads a and b2) → d`.
pub fn sample_dag() -> SagaDag {
    sample_dag_for("")
}

/// [`sample_dag`] whose resources are named `<prefix><node>` (several runs in one world).
pub fn sample_dag_for(prefix: &str) -> SagaDag {
    let mut b = SagaBuilder::new("sample", 1);
    let step = |key: &str, needs: Vec<Ref<StepOutput>>| StepInput {
        key: format!("{prefix}{key}"),
        needs,
    };
    b.stage("first");
    let a = b.add::<TestStep>("a", &step("a", vec![]), NodeOptions::default());
    b.stage("parallel");
    let _b1 = b.add::<TestStep>("b1", &step("b1", vec![]), NodeOptions::default());
    let b2 = b.add::<TestStep>("b2", &step("b2", vec![]), NodeOptions::default());
    b.stage("last");
    let c = match (a, b2) {
        (Ok(a), Ok(b2)) => b.add::<TestStep>("c", &step("c", vec![a, b2]), NodeOptions::default()),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let _ = c.map(|c| b.add::<TestStep>("d", &step("d", vec![]), NodeOptions::default().after(&c)));
    b.build()
        .unwrap_or_else(|e| panic!("sample DAG is valid: {e}"))
}

/// Node names of [`pivot_dag`], in order.
pub const PIVOT_NODES: [&str; 4] = ["a", "p", "c", "d"];

/// `a → p (pivot) → c → d`: a workflow with a point of no return.
pub fn pivot_dag() -> SagaDag {
    pivot_dag_for("")
}

/// [`pivot_dag`] whose resources are named `<prefix><node>`.
pub fn pivot_dag_for(prefix: &str) -> SagaDag {
    let mut b = SagaBuilder::new("sample-pivot", 1);
    let step = |key: &str| StepInput {
        key: format!("{prefix}{key}"),
        needs: vec![],
    };
    let built = (|| {
        b.stage("before");
        b.add::<TestStep>("a", &step("a"), NodeOptions::default())?;
        b.stage("pivot");
        b.add::<PivotStep>(
            "p",
            &step("p"),
            NodeOptions::default().pivot("the sample's point of no return"),
        )?;
        b.stage("after");
        b.add::<TestStep>("c", &step("c"), NodeOptions::default())?;
        b.stage("last");
        b.add::<TestStep>("d", &step("d"), NodeOptions::default())
    })();
    if let Err(e) = built {
        panic!("pivot DAG is valid: {e}");
    }
    b.build()
        .unwrap_or_else(|e| panic!("pivot DAG is valid: {e}"))
}

/// `steps` no-op nodes in sequence.
pub fn noop_dag(steps: u32) -> SagaDag {
    let mut b = SagaBuilder::new("bench-noop", 1);
    for i in 0..steps {
        b.stage(format!("s{i}"));
        let _ = b.add::<NoOp>(format!("bench.noop.{i}"), &i, NodeOptions::default());
    }
    b.build()
        .unwrap_or_else(|e| panic!("noop DAG is valid: {e}"))
}

/// Engine hooks for crash tests, configured by environment:
/// - `HCP_TRACE_BOUNDARIES=1` prints `HCP_BOUNDARY <n> <point> <phase> <node> <attempt>`
///   to stdout at every boundary;
/// - `HCP_CRASH_AT=<n>` (the n-th boundary of this process, 1-based) or
///   `HCP_CRASH_AT=<point>:<phase>:<node>` prints `HCP_CRASHPOINT …` and then blocks the
///   process forever, so the test can SIGKILL it at exactly that instant.
#[derive(Debug, Default)]
pub struct CrashHooks {
    trace: bool,
    at: Option<String>,
    count: std::sync::atomic::AtomicU64,
    inject: Vec<String>,
}

impl CrashHooks {
    /// From the environment; `None` when neither variable is set.
    pub fn from_env() -> Option<Self> {
        let trace = std::env::var("HCP_TRACE_BOUNDARIES").is_ok_and(|v| v == "1");
        let at = std::env::var("HCP_CRASH_AT").ok().filter(|s| !s.is_empty());
        // `HCP_INJECT_FAIL=node[,node]`: a permanent failure reported after the node's
        // action completed (its side effect happened; its undo must still clean up).
        let inject: Vec<String> = std::env::var("HCP_INJECT_FAIL")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        (trace || at.is_some() || !inject.is_empty()).then(|| Self {
            trace,
            at,
            count: Default::default(),
            inject,
        })
    }
}

impl crate::engine::EngineHooks for CrashHooks {
    fn inject_failure(&self, node: &str, phase: crate::action::Phase) -> Option<StepError> {
        (phase == crate::action::Phase::Action && self.inject.iter().any(|n| n == node)).then(
            || {
                StepError::permanent(
                    "validation",
                    format!("injected permanent failure after {node} completed (HCP_INJECT_FAIL)"),
                )
                .with_code("InjectedFailure")
            },
        )
    }

    fn boundary(&self, b: &crate::engine::Boundary<'_>) {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let phase = match b.phase {
            crate::action::Phase::Action => "action",
            crate::action::Phase::Undo => "undo",
        };
        let desc = format!("{n} {} {phase} {} {}", b.point.as_str(), b.node, b.attempt);
        if self.trace {
            println!("HCP_BOUNDARY {desc}");
        }
        // `HCP_CRASH_AT` is a boundary number, or one or more `point:phase:node`
        // (comma-separated: the first one reached).
        let here = format!("{}:{phase}:{}", b.point.as_str(), b.node);
        let hit = self
            .at
            .as_deref()
            .is_some_and(|at| at == n.to_string() || at.split(',').any(|p| p == here));
        if hit {
            println!("HCP_CRASHPOINT {desc}");
            let _ = std::io::Write::flush(&mut std::io::stdout());
            // Wait for the test's SIGKILL. Blocking this thread is the point: nothing after
            // this boundary may happen.
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    }
}
