//! Crash tests of the cluster workflows: a real `hcp-workflow worker` process is SIGKILLed
//! at every journal boundary of create-cluster (and of its unwind), restarted each time,
//! while the simulator runs as its own process with `--state` (it survives the kills).
//!
//! The kill schedule cycles the crash point through the 1st, 2nd and 3rd boundary of each
//! fresh process: before the effect of the next attempt, after its effect but before its
//! journal write, and after the write. A process that resumes from the journal always
//! starts with the next attempt's "before effect", so three restarts kill one attempt at
//! each of its boundaries, then move on.
//!
//! Afterwards: the same end state as an uninterrupted run; no duplicate resources; no
//! resource created twice (at most one `201 Created` per resource in the request log; a
//! repeated PUT of the interrupted step answers 200).

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{
    Sim, assert_connections_rejected_before_pls_delete, cluster_file, run,
};
use hcp_e2e_tests::{Proc, scratch};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn state(dir: &Path, db: &str, sim: &str) -> (String, Value) {
    let (_, out, _) = run(
        dir,
        &[
            "--database",
            db,
            "--simulator",
            sim,
            "--output",
            "json",
            "list",
        ],
        &[],
    );
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let run = v
        .as_array()
        .and_then(|a| a.first())
        .cloned()
        .unwrap_or(Value::Null);
    (run["state"].as_str().unwrap_or("?").to_string(), run)
}

/// Restart a worker until the run ends, killing each one at boundary 1, 2 or 3 in turn.
fn crash_until_done(
    dir: &Path,
    db: &str,
    sim: &Sim,
    extra_env: &[(&str, &str)],
) -> (String, usize) {
    let world = dir.join("world");
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut kills = 0;
    for i in 0.. {
        assert!(
            Instant::now() < deadline,
            "no convergence after {kills} kills"
        );
        let (st, _) = state(dir, db, &sim.base);
        if matches!(
            st.as_str(),
            "succeeded" | "rolled-back" | "failed" | "needs-operator" | "cancelled"
        ) {
            return (st, kills);
        }
        let k = (i % 3 + 1).to_string();
        let mut env = vec![
            ("HCP_CRASH_AT", k.as_str()),
            ("HCP_LEASE_TTL_MS", "300"),
            ("HCP_POLL_MS", "20"),
            ("RUST_LOG", "warn"),
        ];
        env.extend_from_slice(extra_env);
        let mut w = Proc::spawn(
            dir,
            &[
                "--database",
                db,
                "--simulator",
                &sim.base,
                "worker",
                "--world",
                world.to_str().unwrap(),
            ],
            &env,
        );
        if w.wait_line("HCP_CRASHPOINT", Duration::from_secs(20))
            .is_some()
        {
            kills += 1;
        }
        w.kill();
    }
    unreachable!()
}

fn created_twice(reqs: &[Value]) -> Vec<String> {
    let mut created: BTreeMap<String, usize> = BTreeMap::new();
    for r in reqs {
        if r["method"] == "PUT" && r["status"] == 201 {
            let p = r["path"]
                .as_str()
                .unwrap_or_default()
                .split('?')
                .next()
                .unwrap_or_default()
                .to_lowercase();
            *created.entry(p).or_default() += 1;
        }
    }
    created
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(p, _)| p)
        .collect()
}

#[test]
fn create_cluster_survives_sigkill_at_every_boundary() {
    let dir = scratch("cluster-crash");
    let sim = Sim::start(&dir, 0.002);
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    let cfg = cluster_file(&dir, "kappa", "kappa-cr4sh", "Private", "");
    let before = sim.ids();
    let (code, _, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "--simulator",
            &sim.base,
            "start",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
            "--detach",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let (end, kills) = crash_until_done(&dir, &db, &sim, &[]);
    assert_eq!(end, "succeeded");
    assert!(kills > 30, "only {kills} kills");
    let after = sim.ids();
    assert_eq!(sim.inventory().len(), after.len(), "duplicate resources");
    assert!(after.len() > before.len() + 40, "the cluster exists");
    let twice = created_twice(&sim.requests());
    assert!(twice.is_empty(), "created more than once: {twice:#?}");
    sim.stop();
}

#[test]
fn create_cluster_unwind_survives_sigkill_at_every_boundary() {
    let dir = scratch("cluster-crash-unwind");
    let sim = Sim::start(&dir, 0.002);
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    let cfg = cluster_file(&dir, "lambda", "lambda-unw1d", "Private", "");
    let before = sim.ids();
    // Run forward uninterrupted up to the failing last step, then crash through the unwind.
    let (code, _, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "--simulator",
            &sim.base,
            "start",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
            "--detach",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let (end, kills) = crash_until_done(
        &dir,
        &db,
        &sim,
        &[("HCP_INJECT_FAIL", "create-cluster.nodepools.infra")],
    );
    assert_eq!(end, "rolled-back");
    assert!(kills > 30, "only {kills} kills");
    assert_eq!(sim.ids(), before, "unwinding left resources behind");
    assert_connections_rejected_before_pls_delete(&sim.requests(), "pls-lambda-unw1d");
    let twice = created_twice(&sim.requests());
    assert!(twice.is_empty(), "created more than once: {twice:#?}");
    sim.stop();
}
