//! Answers from outside that once wedged a run: an Azure error whose message
//! carries a NUL byte and runs to 100 KiB. Postgres refuses a NUL in `text`, so every
//! journal write of that run failed, the worker gave up on it but kept renewing its lease,
//! and the foreground `start` hung with `why` saying nothing was needed. Now the runtime
//! journals errors without control characters and cut to a few KiB: the run unwinds as
//! any permanent failure does, on SQLite and Postgres alike.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, run};
use hcp_e2e_tests::{document, postgres_url};
use serde_json::json;

fn nul_error_unwinds_cleanly(db: &str, env: &Env, name: &str) {
    let cfg = cluster_file(&env.dir, name, &format!("{name}-n0l1x"), "Private", "");
    let message = format!("bad\u{0}request {}", "x".repeat(100 * 1024));
    env.sim.fault(json!({
        "method": "PUT",
        "resource_type": "Microsoft.Network/virtualNetworks",
        "status": 400,
        "error_code": "InvalidRequestFormat",
        "message": message,
    }));
    let args = |rest: &[&str]| -> Vec<String> {
        let mut a = vec![
            "--database".to_string(),
            db.to_string(),
            "--simulator".into(),
            env.sim.base.clone(),
        ];
        a.extend(rest.iter().map(|s| s.to_string()));
        a
    };
    let start = args(&["start", "create-cluster", "--config", cfg.to_str().unwrap()]);
    let start: Vec<&str> = start.iter().map(String::as_str).collect();
    let (code, out, err) = run(&env.dir, &start, &[]);
    assert_eq!(
        code, 1,
        "a permanent failure rolls the run back\n{out}\n{err}"
    );
    assert!(out.contains("rolled back"), "{out}");
    env.sim.clear_faults();
    let show = args(&["--output", "json", "show", &format!("cluster/{name}")]);
    let show: Vec<&str> = show.iter().map(String::as_str).collect();
    let (code, out, err) = run(&env.dir, &show, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.len() < 1024 * 1024,
        "show -o json is {} bytes: the 100 KiB message was journaled whole",
        out.len()
    );
    assert!(!out.contains("\\u0000"), "a NUL reached the journal");
    let doc = document(&out, "Run");
    assert_eq!(doc["state"], "rolled-back", "{doc:#}");
    assert!(
        out.contains("more bytes cut"),
        "the cut message says it was cut"
    );
}

#[test]
fn an_error_with_a_nul_and_100_kib_unwinds_on_postgres() {
    let Some(base) = postgres_url() else { return };
    let db = hcp_e2e_tests::fresh_postgres_blocking(&base);
    let env = Env::new("nul-error-pg", 0.002);
    nul_error_unwinds_cleanly(&db, &env, "nulpg");
    env.sim.stop();
}

#[test]
fn an_error_with_a_nul_and_100_kib_unwinds_on_sqlite() {
    let env = Env::new("nul-error-sqlite", 0.002);
    let db = env.db.clone();
    nul_error_unwinds_cleanly(&db, &env, "nulsq");
    env.sim.stop();
}
