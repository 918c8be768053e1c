//! A rolling upgrade of the workers with runs
//! in flight, on one Postgres journal, against `simulator serve`.
//!
//! The previous release is this binary with `HCP_TEST_PREVIOUS_RELEASE=1` (debug builds
//! only, `bin/src/release.rs`): its workers do not know the actions this release added (the
//! wait for the guest's rollout) and its plans do not name them. A real older binary would
//! take a second build of the workspace here (about 25 minutes on this machine).
//!
//! 1. Three workers of the previous release execute three creates started by the previous
//!    release's CLI.
//! 2. A fourth create is started by this release's CLI while only old workers run: its plan
//!    names a step they do not know, so the first old worker to lease it parks it (due
//!    again every few seconds, never run).
//! 3. The workers are replaced one by one: a new worker starts, then an old one goes
//!    (SIGTERM and drain for the first two, SIGKILL for the last).
//! 4. Every run succeeds once, with no operator command: the old runs keep their old plans
//!    (no rollout step), the new one is taken over by a new worker and runs its rollout
//!    step; no resource is created twice, and the simulator's inventory is what existed
//!    before plus exactly what the runs' ledgers say they created.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, assert_inventory_is_the_ledgers, cluster_file, steps_of};
use hcp_e2e_tests::crash::created_twice;
use hcp_e2e_tests::{Proc, items, postgres_url, run_id};
use serde_json::Value;
use std::time::Duration;

const TIME_SCALE: f64 = 0.01;
const OLD: (&str, &str) = ("HCP_TEST_PREVIOUS_RELEASE", "1");
const ROLLOUT: &str = "k8s.rollout.wait";

fn list(env: &Env) -> Vec<Value> {
    let (code, out, err) = env.cli(&["--output", "json", "list"], &[]);
    assert_eq!(code, 0, "{err}");
    items(&out, "RunList")
}

fn wait_until(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    hcp_e2e_tests::wait_until(what, timeout, Duration::from_millis(300), f);
}

/// Steps of `run` that succeeded (from `show`).
fn succeeded_steps(env: &Env, run: &str) -> usize {
    steps_of(&env.show(run))
        .iter()
        .filter(|s| s["state"] == "succeeded")
        .count()
}

fn worker(env: &Env, old: bool) -> Proc {
    let mut envs = vec![
        ("HCP_LEASE_TTL_MS", "3000"),
        ("HCP_POLL_MS", "200"),
        ("RUST_LOG", "info"),
    ];
    if old {
        envs.push(OLD);
    }
    Proc::spawn(&env.dir, &env.args(&["worker", "--grace", "20s"]), &envs)
}

#[test]
fn workers_replaced_one_by_one_with_runs_in_flight_finish_every_run_once() {
    let Some(base) = postgres_url() else { return };
    let mut env = Env::new("rolling", TIME_SCALE);
    env.db = hcp_e2e_tests::fresh_postgres_blocking(&base);
    let before = env.sim.ids();

    // 1. The previous release starts three creates and runs them on three workers.
    let mut old_runs = Vec::new();
    for (name, infra) in [
        ("rua", "rua-r1u9e"),
        ("rub", "rub-r2u9e"),
        ("ruc", "ruc-r3u9e"),
    ] {
        let cfg = cluster_file(&env.dir, name, infra, "PublicAndPrivate", "");
        let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[OLD]);
        assert_eq!(code, 0, "{out}{err}");
        old_runs.push(run_id(&out));
    }
    let mut old_workers: Vec<Proc> = (0..3).map(|_| worker(&env, true)).collect();
    wait_until(
        "every old run is under way",
        Duration::from_secs(60),
        || old_runs.iter().all(|r| succeeded_steps(&env, r) >= 3),
    );

    // 2. This release's CLI starts a fourth: only old workers can lease it; they park it.
    let cfg = cluster_file(&env.dir, "rud", "rud-r4u9e", "PublicAndPrivate", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let new_run = run_id(&out);
    wait_until(
        "an old worker parks the new run",
        Duration::from_secs(30),
        || {
            let s = env.show(&new_run);
            s["state"] == "failed"
                && s["blocked_on"]
                    .as_str()
                    .is_some_and(|b| b.contains("does not know step(s)") && b.contains(ROLLOUT))
        },
    );
    assert_eq!(
        succeeded_steps(&env, &new_run),
        0,
        "an old worker ran none of it"
    );
    for r in &old_runs {
        assert!(
            !list(&env)
                .iter()
                .any(|x| x["id"] == r.as_str() && x["state"] == "succeeded"),
            "run {r} finished before the upgrade began: the test would prove nothing"
        );
    }

    // 3. Replace the workers one by one: a new one up, then an old one goes.
    let mut new_workers = Vec::new();
    for i in 0..3 {
        new_workers.push(worker(&env, false));
        std::thread::sleep(Duration::from_secs(2));
        let old = old_workers.remove(0);
        if i < 2 {
            old.signal("TERM");
            let (code, _, err) = old.finish(Duration::from_secs(30));
            assert_eq!(code, Some(0), "an old worker drains and exits 0: {err}");
        } else {
            let mut old = old;
            old.kill();
        }
    }

    // 4. Every run converges, with no operator.
    wait_until("every run succeeds", Duration::from_secs(300), || {
        let runs = list(&env);
        assert!(
            runs.iter()
                .all(|r| r["state"] != "rolled-back" && r["state"] != "needs-operator"),
            "{runs:?}"
        );
        runs.len() == 4 && runs.iter().all(|r| r["state"] == "succeeded")
    });
    drop(new_workers);

    for r in &old_runs {
        let steps = steps_of(&env.show(r));
        assert!(
            !steps.iter().any(|st| st["action"] == ROLLOUT),
            "an old run keeps the plan it was started with: {steps:?}"
        );
    }
    let steps = steps_of(&env.show(&new_run));
    assert!(
        steps
            .iter()
            .any(|st| st["action"] == ROLLOUT && st["state"] == "succeeded"),
        "the new run's own step ran, on a new worker: {steps:?}"
    );
    let (code, out, err) = env.cli(&["--output", "json", "history", &new_run], &[]);
    assert_eq!(code, 0, "{err}");
    let history = items(&out, "RunHistory");
    let kinds: Vec<&str> = history.iter().filter_map(|e| e["kind"].as_str()).collect();
    let count = |k: &str| kinds.iter().filter(|x| **x == k).count();
    assert_eq!(count("run_parked"), 1, "parked once: {kinds:?}");
    assert_eq!(count("run_unparked"), 1, "taken over once: {kinds:?}");
    assert_eq!(
        count("operator"),
        0,
        "no operator command was needed: {kinds:?}"
    );

    // No duplicate side effect, and the inventory is what the ledgers say.
    let twice = created_twice(&env.sim.requests());
    assert!(twice.is_empty(), "created twice: {twice:?}");
    let ledgers: Vec<Value> = old_runs
        .iter()
        .chain([&new_run])
        .map(|r| env.show(r))
        .collect();
    assert_inventory_is_the_ledgers(&before, &env.sim.ids(), &ledgers);
}
