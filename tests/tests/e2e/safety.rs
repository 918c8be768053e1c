//! Safety on a shared journal, end to end with real processes: one unfinished
//! run per cluster (also when two processes race), idempotency keys bound to workflow and
//! cluster, target-aware workers, checks before journaling, a foreground `start` beside a
//! worker, bounded waits that journal O(1) events, and "no worker" visibility.
//!
//! Scenario 2 (an unwind deleting untagged children that existed before the run) is in
//! `ownership.rs`.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, Sim, cluster_file, run};
use hcp_e2e_tests::{Proc, document, fresh_postgres, items, postgres_url, says_run, scratch};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The default e2e time scale (fast).
const FAST: f64 = 0.002;

/// Issue-11 helpers on top of the shared harness.
trait SafetyEnv {
    fn real(&self, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String);
    fn runs(&self) -> Vec<Value>;
    fn worker(&self, extra_env: &[(&str, &str)], simulated: bool) -> Proc;
}

impl SafetyEnv for Env {
    /// `hcp-workflow --database … args…` (no simulator: real Azure).
    fn real(&self, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
        let mut a = vec!["--database", self.db.as_str()];
        a.extend_from_slice(args);
        run(&self.dir, &a, envs)
    }

    fn runs(&self) -> Vec<Value> {
        self.run_list()
    }

    fn worker(&self, extra_env: &[(&str, &str)], simulated: bool) -> Proc {
        let world = self.dir.join("world");
        let mut a = vec!["--database", self.db.as_str()];
        if simulated {
            a.extend(["--simulator", self.sim.base.as_str()]);
        }
        a.extend(["worker", "--world", world.to_str().unwrap()]);
        let mut env = vec![("HCP_POLL_MS", "20")];
        env.extend_from_slice(extra_env);
        Proc::spawn(&self.dir, &a, &env)
    }
}

use hcp_e2e_tests::run_id;

fn events(env: &Env, run: &str) -> Vec<Value> {
    let (code, out, err) = env.cli(&["--output", "json", "history", run], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(document(&out, "RunHistory")["run_id"], run, "{out}");
    let mut rows = items(&out, "RunHistory");
    // The history opens with who created the run; the journal's events follow.
    assert_eq!(
        rows.first().map(|r| &r["kind"]),
        Some(&Value::from("run_created")),
        "{out}"
    );
    rows.remove(0);
    rows
}

fn state(env: &Env, run: &str) -> String {
    let (_, out, _) = env.cli(&["--output", "json", "show", run], &[]);
    let v = document(&out, "Run");
    v["state"].as_str().unwrap_or_default().to_string()
}

/// Scenario 1 and 4: a second start of a cluster that has an unfinished run, of either
/// workflow, is refused (exit 2, nothing journaled or sent), naming the run and the
/// commands; a reused idempotency key for another workflow is refused too. When the
/// unfinished create then fails and unwinds, nothing of another run is touched, and a new
/// create afterwards succeeds.
#[test]
fn a_cluster_with_an_unfinished_run_refuses_every_other_start() {
    let env = Env::new("safety-one-run", FAST);
    let cfg = cluster_file(&env.dir, "omega", "omega-0n3rn", "Private", "");
    let (code, out, err) = env.start(
        "create-cluster",
        &cfg,
        &["--detach", "--idempotency-key", "k1"],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let first = run_id(&out);
    env.sim.clear_requests();
    for (wf, extra) in [
        ("create-cluster", vec![]),
        ("delete-cluster", vec![]),
        ("create-cluster", vec!["--idempotency-key", "other"]),
    ] {
        let (code, out, err) = env.start(wf, &cfg, &extra, &[]);
        assert_eq!(code, 2, "{wf}: {out}{err}");
        assert!(err.contains(&first), "{wf}: names the run: {err}");
        assert!(err.contains("is unfinished"), "{err}");
        assert!(err.contains(&format!("watch {first}")), "{err}");
        assert!(err.contains(&format!("drive {first}")), "{err}");
        assert!(err.contains(&format!("cancel {first}")), "{err}");
        assert!(err.contains("nothing was journaled or created"), "{err}");
    }
    // Scenario 4: the create's key reused for a delete.
    let (code, out, err) = env.start("delete-cluster", &cfg, &["--idempotency-key", "k1"], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("--idempotency-key: key \"k1\" already belongs to run"),
        "{err}"
    );
    assert!(!out.contains("delete-cluster of cluster"), "{out}");
    assert!(
        env.sim.requests().is_empty(),
        "refused starts sent nothing: {:?}",
        env.sim.requests()
    );
    // The same key for the same workflow is the same run (idempotent), not a refusal.
    let (code, out, _) = env.start(
        "create-cluster",
        &cfg,
        &["--detach", "--idempotency-key", "k1"],
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(run_id(&out), first);
    assert_eq!(env.runs().len(), 1, "nothing else was journaled");

    // The unfinished create fails late and unwinds: only its own resources go.
    let before_any = env.sim.ids();
    let w = env.worker(
        &[("HCP_INJECT_FAIL", "create-cluster.nodepools.workers")],
        true,
    );
    let end = Instant::now() + Duration::from_secs(180);
    while state(&env, &first) != "rolled-back" {
        assert!(Instant::now() < end, "the create did not roll back");
        std::thread::sleep(Duration::from_millis(300));
    }
    w.signal("TERM");
    let _ = w.finish(Duration::from_secs(30));
    assert_eq!(
        env.sim.ids(),
        before_any,
        "the unwind removed exactly what its run made"
    );
    // Now the cluster is free: a new create succeeds.
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(says_run(&out, "succeeded"), "{out}");
}

/// Ctrl-C on a foreground start: exit 130, the run is untouched and resumable, and the
/// hint says how to continue *that* run — never to start again; `drive` finishes it.
#[test]
fn ctrl_c_leaves_the_run_resumable_and_says_how_to_continue_it() {
    // Slower scale, so the create is still running when it is interrupted.
    let env = Env::new("safety-ctrl-c", 0.02);
    let cfg = cluster_file(&env.dir, "psi", "psi-ctr1c", "Private", "");
    let a = [
        "--database",
        env.db.as_str(),
        "--simulator",
        env.sim.base.as_str(),
        "start",
        "create-cluster",
        "--config",
        cfg.to_str().unwrap(),
    ];
    let mut p = Proc::spawn(&env.dir, &a, &[("HCP_POLL_MS", "20")]);
    // Wait until it has journaled the run and is working, then SIGINT (Ctrl-C).
    let _ = p.wait_line("run ", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(2000));
    p.signal("INT");
    let (code, out, err) = p.finish(Duration::from_secs(60));
    let out = out.join("\n");
    assert_eq!(code, Some(130), "{out}\n{err}");
    let run = run_id(&out);
    assert!(out.contains("safely resumable"), "{out}");
    assert!(out.contains(&format!("drive {run}")), "{out}");
    assert!(!out.contains("start again"), "{out}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(says_run(&out, "succeeded"), "{out}");
}

/// Ctrl-C during an unwind says the run was unwinding and how far it got (it
/// said "nothing was undone" after 30 undos); `drive` finishes the unwind.
#[test]
fn ctrl_c_during_an_unwind_says_how_far_the_unwind_got() {
    let env = Env::new("safety-ctrl-c-unwind", FAST);
    env.sim.fault(
        serde_json::json!({"method": "PUT", "resource_type": "Microsoft.Network/publicIPAddresses",
        "status": 409, "error_code": "PublicIPCountLimitReached", "message": "quota"}),
    );
    // Every identity delete takes 6 s (they run side by side): the unwind is still going
    // when it is interrupted, after the network's undos are done.
    env.sim.fault(serde_json::json!({"method": "DELETE",
        "resource_type": "Microsoft.ManagedIdentity/userAssignedIdentities", "latency_ms": 6000}));
    let cfg = cluster_file(&env.dir, "upsilon", "upsilon-unw1d", "Public", "");
    let a = [
        "--database",
        env.db.as_str(),
        "--simulator",
        env.sim.base.as_str(),
        "start",
        "create-cluster",
        "--config",
        cfg.to_str().unwrap(),
    ];
    let mut p = Proc::spawn(&env.dir, &a, &[("HCP_POLL_MS", "20")]);
    assert!(
        p.wait_line("✗ ", Duration::from_secs(60)).is_some(),
        "the unwind never started"
    );
    std::thread::sleep(Duration::from_millis(2000));
    p.signal("INT");
    let (code, out, err) = p.finish(Duration::from_secs(60));
    let out = out.join("\n");
    assert_eq!(code, Some(130), "{out}\n{err}");
    let run = run_id(&out);
    assert!(!out.contains("nothing was undone"), "{out}");
    assert!(out.contains("it was unwinding ("), "{out}");
    assert!(out.contains("steps undone so far"), "{out}");
    assert!(out.contains(&format!("drive {run}")), "{out}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(says_run(&out, "rolled back"), "{out}");
}

/// Scenario 3: a worker for another target never leases the run (either direction): the
/// run stays pending with an empty journal, and `why` names the target and the exact
/// worker command.
#[test]
fn a_worker_for_another_target_leaves_the_run_pending() {
    let env = Env::new("safety-target", FAST);
    let cfg = cluster_file(&env.dir, "sigma", "sigma-t4rgt", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let sim_run = run_id(&out);
    assert!(
        out.contains(&format!("--simulator {} worker", env.sim.base)),
        "{out}"
    );
    // A real-Azure worker (no simulator flags).
    let w = env.worker(&[], false);
    std::thread::sleep(Duration::from_secs(3));
    w.signal("TERM");
    let _ = w.finish(Duration::from_secs(30));
    assert!(
        events(&env, &sim_run).is_empty(),
        "not leased, nothing journaled"
    );
    assert_eq!(state(&env, &sim_run), "pending");
    let (_, why, _) = env.cli(&["why", &sim_run], &[]);
    assert!(
        why.contains(&format!("the simulator at {}", env.sim.base)),
        "{why}"
    );
    assert!(
        why.contains(&format!("--simulator {} worker", env.sim.base)),
        "{why}"
    );
    // The reverse: a run for real Azure (journaled with --skip-preflight: no credentials
    // here) and a simulator worker.
    let other = cluster_file(&env.dir, "tau", "tau-r34l0", "Private", "");
    let (code, out, err) = env.real(
        &[
            "start",
            "create-cluster",
            "--config",
            other.to_str().unwrap(),
            "--detach",
            "--skip-preflight",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let real_run = run_id(&out);
    let w = env.worker(&[], true);
    // The simulator worker does run the simulator run...
    let end = Instant::now() + Duration::from_secs(120);
    while state(&env, &sim_run) != "succeeded" {
        assert!(Instant::now() < end, "the simulator run did not finish");
        std::thread::sleep(Duration::from_millis(300));
    }
    w.signal("TERM");
    let _ = w.finish(Duration::from_secs(30));
    // ...and leaves the real-Azure run alone.
    assert!(events(&env, &real_run).is_empty());
    assert_eq!(state(&env, &real_run), "pending");
    let (_, why, _) = env.cli(&["why", &real_run], &[]);
    assert!(why.contains("real Azure (public cloud)"), "{why}");
    let (_, show, _) = env.cli(&["--output", "json", "show", &real_run], &[]);
    let v = document(&show, "Run");
    assert_eq!(
        v["labels"]["preflight"], "skipped",
        "the journal records the skipped check"
    );
}

/// Scenario 5: with no usable Azure credentials, `start` fails before journaling: exit 2,
/// what was tried, nothing in the journal.
#[test]
fn credentials_are_checked_before_anything_is_journaled() {
    let env = Env::new("safety-creds", FAST);
    let cfg = cluster_file(
        &env.dir,
        "chi",
        "chi-cr3d5",
        "Private",
        "auth: client-secret\n",
    );
    let (code, out, err) = env.real(
        &["start", "create-cluster", "--config", cfg.to_str().unwrap()],
        &[("AZURE_CLIENT_ID", ""), ("AZURE_CLIENT_SECRET", "")],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no ARM token"), "{err}");
    assert!(err.contains("client-secret"), "{err}");
    assert!(err.contains("nothing was journaled or created"), "{err}");
    assert!(env.runs().is_empty());
}

/// Scenario 6: a foreground `start` while a worker holds the SQLite journal journals the
/// run, follows it while the worker runs it, and exits with the run's result.
#[test]
fn a_foreground_start_beside_a_worker_follows_the_run() {
    let env = Env::new("safety-beside", FAST);
    let w = env.worker(&[], true);
    std::thread::sleep(Duration::from_secs(1));
    let cfg = cluster_file(&env.dir, "phi", "phi-b3s1d", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    w.signal("TERM");
    let _ = w.finish(Duration::from_secs(30));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("another process executes this journal"),
        "{err}"
    );
    assert!(says_run(&out, "succeeded"), "{out}");
    assert!(!err.contains("error:"), "{err}");
}

/// Scenario 7: a long wait journals a handful of events however many polls it takes, and
/// a wait past its budget stops the run for an operator (never unwinding by itself);
/// `retry` gives it a fresh budget and the run completes.
#[test]
fn waits_are_bounded_and_journal_a_constant_number_of_events() {
    // Slower scale: the NodePool becomes Ready ~6 s after it is seen (~24 polls).
    let env = Env::new("safety-waits", 0.02);
    let cfg = cluster_file(&env.dir, "nu", "nu-w41ts", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let run = run_id(&out);
    let evs = events(&env, &run);
    let pool: Vec<&Value> = evs
        .iter()
        .filter(|e| e["node"] == "create-cluster.nodepools.workers")
        .collect();
    assert!(
        pool.len() <= 5,
        "{} events for one wait: {pool:?}",
        pool.len()
    );
    assert_eq!(
        pool.iter().filter(|e| e["kind"] == "node_waiting").count(),
        1,
        "{pool:?}"
    );

    // Budget of 1 s for the NodePool: the run stalls in needs-operator.
    let cfg = cluster_file(
        &env.dir,
        "mu",
        "mu-bdg3t",
        "Public",
        "waitBudgets:\n  nodePoolReady: 1s\n",
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    assert!(says_run(&out, "needs an operator"), "{out}");
    assert!(out.contains("stalled"), "{out}");
    assert!(out.contains("budget of 1s"), "{out}");
    let v = document(&env.cli(&["--output", "json", "show", &run], &[]).1, "Run");
    assert_eq!(
        v["undo"]["unwinding"], false,
        "a stalled wait never unwinds by itself"
    );
    let (_, why, _) = env.cli(&["why", &run], &[]);
    assert!(why.contains("needs an operator"), "{why}");
    assert!(why.contains("waited past its budget"), "{why}");
    assert!(
        why.contains(&format!(
            "retry {run} --step create-cluster.nodepools.workers"
        )),
        "{why}"
    );
    assert!(why.contains(&format!("cancel {run}")), "{why}");
    std::thread::sleep(Duration::from_secs(7));
    let (code, _, err) = env.cli(&["retry", &run], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(says_run(&out, "succeeded"), "{out}");
}

/// Scenario 8: a run due with no worker says so in `list`, `why` and when an operator
/// command is queued, with the command that starts a worker for its target.
#[test]
fn a_run_without_a_worker_says_so() {
    let env = Env::new("safety-no-worker", FAST);
    let cfg = cluster_file(&env.dir, "rho", "rho-n0wkr", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let run = run_id(&out);
    std::thread::sleep(Duration::from_millis(1500));
    let fast = [("HCP_NO_WORKER_AFTER_MS", "1000")];
    let worker_cmd = format!("--simulator {} worker", env.sim.base);
    let (_, list, _) = env.cli(&["list"], &fast);
    assert!(list.contains("no worker"), "{list}");
    assert!(list.contains(&worker_cmd), "{list}");
    let (_, why, _) = env.cli(&["why", &run], &fast);
    assert!(why.contains(&worker_cmd), "{why}");
    // It never started, so its cancel needs no worker: applied at once.
    let (code, out, _) = env.cli(&["cancel", &run, "--reason", "test"], &fast);
    assert_eq!(code, 0);
    assert!(out.contains("at once"), "{out}");
    assert_eq!(state(&env, &run), "cancelled");
    // Not said of a run that is not due for long.
    let (_, list, _) = env.cli(&["list"], &[]);
    assert!(!list.contains("no worker"), "{list}");
}

/// Two `start`s of one cluster from two processes at once: exactly one wins.
fn race(env_dir: &Path, db: &str, sim: &Sim) {
    let cfg = cluster_file(env_dir, "eps", "eps-r4c3s", "Private", "");
    let cfg = cfg.to_str().unwrap().to_string();
    let spawn = |key: &str| {
        Proc::spawn(
            env_dir,
            &[
                "--database",
                db,
                "--simulator",
                sim.base.as_str(),
                "start",
                "create-cluster",
                "--config",
                &cfg,
                "--detach",
                "--idempotency-key",
                key,
            ],
            &[],
        )
    };
    for round in 0..3 {
        let a = spawn(&format!("a{round}"));
        let b = spawn(&format!("b{round}"));
        let (ca, _, ea) = a.finish(Duration::from_secs(60));
        let (cb, _, eb) = b.finish(Duration::from_secs(60));
        let mut codes = [ca, cb];
        codes.sort();
        if round == 0 {
            assert_eq!(codes, [Some(0), Some(2)], "{ea}\n{eb}");
        } else {
            // The first round's winner is still unfinished: both lose.
            assert_eq!(codes, [Some(2), Some(2)], "{ea}\n{eb}");
        }
    }
    let (code, out, err) = run(
        env_dir,
        &["--database", db, "--output", "json", "list"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let runs = items(&out, "RunList");
    assert_eq!(runs.len(), 1, "{runs:?}");
}

#[test]
fn racing_starts_of_one_cluster_have_one_winner_on_sqlite() {
    let dir = scratch("safety-race-sqlite");
    let sim = Sim::start(&dir, FAST);
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    race(&dir, &db, &sim);
}

#[test]
fn racing_starts_of_one_cluster_have_one_winner_on_postgres() {
    let Some(base) = postgres_url() else { return };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let db = rt.block_on(fresh_postgres(&base));
    let dir = scratch("safety-race-pg");
    let sim = Sim::start(&dir, FAST);
    race(&dir, &db, &sim);
}
