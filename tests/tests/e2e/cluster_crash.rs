//! Crash tests of the cluster workflows, on SQLite and on Postgres: a real
//! `hcp-workflow worker` process is SIGKILLed at journal boundaries of create-cluster (and
//! of its unwind), restarted each time, while the simulator runs as its own process with
//! `--state` (it survives the kills).
//!
//! The crash points are every boundary of every node, in DAG order: before its effect,
//! after its effect but before its journal write, and after the write
//! (`HCP_CRASH_AT=point:phase:node,…`). Each worker process is handed every point not
//! passed yet, resumes the run from the journal and is SIGKILLed at the first one it
//! reaches; a last process finishes the run. Inside a parallel stage the first branch to
//! reach its point wins, so the points its siblings passed in that process are not killed
//! at: about 50 of the ~175 points per run are (each test prints the count), spread over
//! every stage. Killing at all of them would interrupt the 18 parallel role assignments
//! more than 50 times each, which the engine's crash-loop guard (`MAX_INTERRUPTIONS`)
//! turns into a permanent failure, as it should.
//!
//! Afterwards: the same end state as an uninterrupted run; no duplicate resources; no
//! resource created twice (at most one `201 Created` per resource in the request log; a
//! repeated PUT of the interrupted step answers 200).

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{
    Sim, assert_connections_rejected_before_pls_delete, cluster_file, run,
};
use hcp_e2e_tests::crash::{crash_through, created_twice, targets};
use hcp_e2e_tests::{fresh_postgres, postgres_url, scratch};
use std::path::Path;

/// Journal a create-cluster run of `cfg` without driving it (the crash workers will).
fn start_detached(dir: &Path, db: &str, sim: &Sim, cfg: &Path) {
    let (code, _, err) = run(
        dir,
        &[
            "--database",
            db,
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
}

/// Kill a worker at every boundary of a create-cluster run journaled in `db`.
fn create_crash(dir: &Path, db: &str, name: &str, infra: &str) {
    let sim = Sim::start(dir, 0.002);
    let cfg = cluster_file(dir, name, infra, "Private", "");
    let before = sim.ids();
    start_detached(dir, db, &sim, &cfg);
    let points = targets(dir, db, &sim, &cfg, "create-cluster", "action");
    let (end, kills) = crash_through(dir, db, &sim, &points, &[]);
    eprintln!(
        "{db}: {kills} workers killed across {} crash points",
        points.len()
    );
    assert_eq!(end, "succeeded");
    assert!(kills > 30, "only {kills} kills");
    let after = sim.ids();
    assert_eq!(sim.inventory().len(), after.len(), "duplicate resources");
    assert!(after.len() > before.len() + 40, "the cluster exists");
    let twice = created_twice(&sim.requests());
    assert!(twice.is_empty(), "created more than once: {twice:#?}");
    sim.stop();
}

/// Run create-cluster forward uninterrupted up to its failing last step, then kill a
/// worker at every boundary of the unwind.
fn unwind_crash(dir: &Path, db: &str, name: &str, infra: &str) {
    let sim = Sim::start(dir, 0.002);
    let cfg = cluster_file(dir, name, infra, "Private", "");
    let before = sim.ids();
    start_detached(dir, db, &sim, &cfg);
    let points = targets(dir, db, &sim, &cfg, "create-cluster", "undo");
    let (end, kills) = crash_through(
        dir,
        db,
        &sim,
        &points,
        &[("HCP_INJECT_FAIL", "create-cluster.nodepools.infra")],
    );
    eprintln!(
        "{db}: {kills} workers killed across {} crash points",
        points.len()
    );
    assert_eq!(end, "rolled-back");
    assert!(kills > 30, "only {kills} kills");
    assert_eq!(sim.ids(), before, "unwinding left resources behind");
    assert_connections_rejected_before_pls_delete(&sim.requests(), &format!("pls-{infra}"));
    let twice = created_twice(&sim.requests());
    assert!(twice.is_empty(), "created more than once: {twice:#?}");
    sim.stop();
}

fn sqlite_db(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("journal.db").display())
}

/// A fresh database on the test Postgres server (`None`: not configured, skipped).
fn postgres_db() -> Option<String> {
    let base = postgres_url()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    Some(rt.block_on(fresh_postgres(&base)))
}

#[test]
fn create_cluster_survives_sigkill_at_every_boundary() {
    let dir = scratch("cluster-crash");
    create_crash(&dir, &sqlite_db(&dir), "kappa", "kappa-cr4sh");
}

#[test]
fn create_cluster_unwind_survives_sigkill_at_every_boundary() {
    let dir = scratch("cluster-crash-unwind");
    unwind_crash(&dir, &sqlite_db(&dir), "lambda", "lambda-unw1d");
}

/// The same on Postgres: every restart waits for the killed worker's lease to lapse
/// (300 ms here), since nothing tells a Postgres worker that another one died.
#[test]
fn postgres_create_cluster_survives_sigkill_at_every_boundary() {
    let Some(db) = postgres_db() else { return };
    let dir = scratch("cluster-crash-pg");
    create_crash(&dir, &db, "mu", "mu-cr4sh");
}

#[test]
fn postgres_create_cluster_unwind_survives_sigkill_at_every_boundary() {
    let Some(db) = postgres_db() else { return };
    let dir = scratch("cluster-crash-unwind-pg");
    unwind_crash(&dir, &db, "nu", "nu-unw1d");
}
