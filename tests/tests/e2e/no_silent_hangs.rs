//! And §6, end to end with real processes: nothing hangs silently.
//! - a `start` (or `drive`) beside a SQLite worker that serves another target is refused at
//!   once (exit 2, nothing journaled), naming the worker and what it serves, in text and JSON;
//! - a `cancel` of a run that never started a step is applied at once (nothing to undo), so
//!   the cluster is free without a worker of its target;
//! - a `cancel` of a finished run whose journal this binary cannot read is refused.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, run};
use hcp_e2e_tests::{Proc, document, items};
use serde_json::Value;
use std::time::{Duration, Instant};

const FAST: f64 = 0.002;

fn runs(env: &Env) -> Vec<Value> {
    let (code, out, err) = env.cli(&["--output", "json", "list"], &[]);
    assert_eq!(code, 0, "{err}");
    items(&out, "RunList")
}

use hcp_e2e_tests::run_id;

fn state(env: &Env, run: &str) -> String {
    let (_, out, _) = env.cli(&["--output", "json", "show", run], &[]);
    document(&out, "Run")["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A worker for real Azure (no simulator flags) on the env's SQLite journal, once it holds
/// the journal's executor lock.
fn azure_worker(env: &Env) -> Proc {
    let world = env.dir.join("world");
    let mut w = Proc::spawn(
        &env.dir,
        &[
            "--database",
            env.db.as_str(),
            "worker",
            "--world",
            world.to_str().unwrap(),
        ],
        &[("HCP_POLL_MS", "20")],
    );
    let lock = env.dir.join("journal.db.executor.lock");
    let end = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains("serves=")) {
        assert!(
            Instant::now() < end,
            "the worker never took the lock: {}",
            w.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = &mut w;
    w
}

#[test]
fn a_start_beside_a_worker_of_another_target_is_refused_at_once() {
    let env = Env::new("hang-foreign-worker", FAST);
    // A run journaled before the worker came (to `drive` below).
    let early = cluster_file(&env.dir, "early", "early-f0r3n", "Private", "");
    let (code, out, err) = env.start("create-cluster", &early, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let early_run = run_id(&out);

    let w = azure_worker(&env);
    let cfg = cluster_file(&env.dir, "omega", "omega-h4ng0", "Private", "");
    let t0 = Instant::now();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "refused at once, not followed"
    );
    assert!(err.contains("the worker pid"), "{err}");
    assert!(err.contains("serves only real Azure"), "{err}");
    assert!(
        err.contains(&format!("the simulator at {}", env.sim.base)),
        "{err}"
    );
    assert!(err.contains("nothing was journaled or created"), "{err}");
    assert!(
        !runs(&env).iter().any(|r| r["cluster"] == "omega"),
        "nothing journaled"
    );
    // The same in JSON: one Error document, exit 2 (was: nothing printed, for ever).
    let (code, out, err) = env.cli(
        &[
            "--output",
            "json",
            "start",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 2, "{out}{err}");
    let evs = hcp_e2e_tests::events(&out);
    assert_eq!(evs.len(), 1, "one event, the error: {out}");
    assert_eq!(evs[0]["type"], "error", "{out}");
    assert_eq!(evs[0]["error"]["reason"], "Refused", "{out}");
    assert!(
        evs[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the worker pid"),
        "{out}"
    );
    // `drive` of the run journaled earlier: refused the same way, and it stays pending.
    let (code, out, err) = env.cli(&["drive", &early_run], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("serves only real Azure"), "{err}");
    assert_eq!(state(&env, &early_run), "pending");
    w.signal("TERM");
    let _ = w.finish(Duration::from_secs(30));
    // With the worker gone, the same start runs.
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn a_cancel_of_a_run_that_never_started_is_applied_at_once() {
    let env = Env::new("hang-cancel-unstarted", FAST);
    let cfg = cluster_file(&env.dir, "kappa", "kappa-c4nc1", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let id = run_id(&out);
    // Its simulator goes away: no worker of its target will ever come.
    let Env { dir, db, sim } = env;
    sim.stop();
    let cli = |args: &[&str]| {
        let mut a = vec!["--database", db.as_str()];
        a.extend_from_slice(args);
        run(&dir, &a, &[])
    };
    let (code, out, err) = cli(&["cancel", &id, "--reason", "wrong subscription"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("at once"), "{out}");
    assert!(out.contains("nothing to undo"), "{out}");
    let (_, show, _) = cli(&["--output", "json", "show", &id]);
    let v = document(&show, "Run");
    assert_eq!(v["state"], "cancelled", "{show}");
    assert!(
        v["lease"].is_null() || v["lease"]["owner"].is_null(),
        "{show}"
    );
    // Who, when and why are journaled like a worker's.
    let (_, hist, _) = cli(&["--output", "json", "history", &id]);
    let evs = items(&hist, "RunHistory");
    assert!(
        evs.iter()
            .any(|e| e.to_string().contains("wrong subscription")),
        "{hist}"
    );
    assert!(
        !evs.iter().any(|e| e.to_string().contains("node_started")),
        "no step ran: {hist}"
    );
    // The cluster is free: a new create of it is journaled.
    let (code, out, err) = cli(&[
        "--simulate",
        "start",
        "create-cluster",
        "--config",
        cfg.to_str().unwrap(),
        "--detach",
        "--skip-preflight",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // A second cancel of the cancelled run is refused (it ended).
    let (code, _, err) = cli(&["cancel", &id]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_cancel_of_a_finished_run_with_an_unreadable_journal_is_refused() {
    let env = Env::new("hang-cancel-unreadable", FAST);
    let cfg = cluster_file(&env.dir, "lambda", "lambda-u9r34", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let id = run_id(&out);
    assert_eq!(state(&env, &id), "succeeded");
    // An event this binary cannot read (a newer binary's, or damage).
    let path = env.dir.join("journal.db");
    let st = std::process::Command::new("sqlite3")
        .arg(&path)
        .arg("UPDATE events SET data = '{\"type\":\"from_the_future\"}' WHERE seq = 2")
        .status()
        .unwrap();
    assert!(st.success());
    let (code, out, err) = env.cli(&["cancel", &id, "--reason", "x"], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("already ended"), "{err}");
    assert_eq!(state(&env, &id), "succeeded");
}

/// `cancel --wait` returns when the unwind has ended (not when the cancel was
/// applied), and `retry --wait` when the retried step has an outcome.
#[test]
fn wait_follows_a_command_to_its_effect() {
    // Slow enough that the NodePool is Ready only ~15 s after it is seen: a wait budget
    // of 1 s stalls the run, and a retry stalls it again.
    let env = Env::new("hang-wait-effect", 0.05);
    let cfg = cluster_file(
        &env.dir,
        "theta",
        "theta-w41t0",
        "Public",
        "waitBudgets:\n  nodePoolReady: 1s\n",
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let run = run_id(&out);
    let world = env.dir.join("world");
    let w = Proc::spawn(
        &env.dir,
        &[
            "--database",
            env.db.as_str(),
            "--simulator",
            env.sim.base.as_str(),
            "worker",
            "--world",
            world.to_str().unwrap(),
        ],
        &[("HCP_POLL_MS", "20")],
    );
    // The node pool's wait budget is 1 s: the run stalls for an operator.
    let end = Instant::now() + Duration::from_secs(120);
    while state(&env, &run) != "needs-operator" {
        assert!(Instant::now() < end, "never stalled: {}", state(&env, &run));
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, shown, _) = env.cli(&["--output", "json", "show", &run], &[]);
    let step = document(&shown, "Run")["step"]
        .as_str()
        .unwrap()
        .to_string();
    // retry --wait: applied, then the step's next outcome (it stalls again: exit 1).
    let (code, out, err) = env.cli(&["retry", &run, "--step", &step, "--wait"], &[]);
    assert!(out.contains("following its effect"), "{out}{err}");
    // The worker is there: no "no worker holds run" note.
    assert!(out.contains("serving this journal picks it up"), "{out}");
    assert!(!out.contains("no worker holds"), "{out}");
    let last = out.lines().last().unwrap_or_default().to_string();
    assert!(
        last.starts_with(&format!("{step}: ")) || last.starts_with("blocked on: "),
        "{out}"
    );
    assert!(out.contains(&format!("{step}: stalled")), "{out}");
    assert_eq!(code, 1, "{out}{err}");
    // cancel --wait: returns once the unwind has ended.
    let (code, out, err) = env.cli(&["cancel", &run, "--reason", "done testing", "--wait"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.lines().last(),
        Some(format!("run {run} was cancelled and unwound").as_str()),
        "{out}"
    );
    assert_eq!(state(&env, &run), "cancelled");
    w.signal("TERM");
    let _ = w.finish(Duration::from_secs(30));
}

/// On Postgres, a `--simulate` worker (and a detached `--simulate` run) would
/// work in an empty simulated cloud of its own (no DNS zone, nothing earlier processes
/// made) and roll every run back at step 1. Refused with the recipe that works (exit 2,
/// nothing journaled); a foreground `--simulate` start still runs.
#[test]
fn simulate_on_postgres_without_shared_state_is_refused_with_the_recipe() {
    let Some(base) = hcp_e2e_tests::postgres_url() else {
        return;
    };
    let db = hcp_e2e_tests::fresh_postgres_blocking(&base);
    let dir = hcp_e2e_tests::scratch("hang-simulate-postgres");
    let world = dir.join("world");
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "--simulate",
            "worker",
            "--world",
            world.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("--simulate: a worker needs a simulated cloud"),
        "{err}"
    );
    assert!(err.contains("hcp-workflow simulator serve"), "{err}");
    assert!(
        err.contains("--simulator http://127.0.0.1:8443 worker"),
        "{err}"
    );
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
    let start = |extra: &[&str]| {
        let mut a = vec![
            "--database",
            db.as_str(),
            "--simulate",
            "start",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        run(&dir, &a, &[])
    };
    let (code, out, err) = start(&["--detach"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--simulate: a detached run needs"), "{err}");
    // Nothing journaled (the database was migrated first: on Postgres only `migrate`
    // creates the schema).
    let (code, out, err) = run(&dir, &["--database", &db, "--output", "json", "list"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(hcp_e2e_tests::items(&out, "RunList").is_empty(), "{out}");
    // In the foreground the run's own process holds the simulated cloud: it runs.
    let (code, out, err) = start(&[]);
    assert_eq!(code, 0, "{out}{err}");
}
