//! Three workers on one Postgres journal create
//! three clusters in one subscription against `simulator serve` (ARM's documented
//! per-principal buckets). They share one ARM budget through the journal: together they
//! never send more than the budget's share allows at any moment (its burst plus its refill
//! since the first request), and ARM never answers 429.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use hcp_e2e_tests::{Proc, items, postgres_url};
use serde_json::Value;
use std::time::{Duration, Instant};

const FAST: f64 = 0.002;

#[test]
fn three_workers_share_one_arm_budget_and_arm_never_throttles() {
    let Some(base) = postgres_url() else { return };
    let mut env = Env::new("budget3", FAST);
    env.db = hcp_e2e_tests::fresh_postgres_blocking(&base);
    for (name, infra) in [
        ("bga", "bga-b1d9e"),
        ("bgb", "bgb-b2d9e"),
        ("bgc", "bgc-b3d9e"),
    ] {
        let cfg = cluster_file(&env.dir, name, infra, "PublicAndPrivate", "");
        let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
        assert_eq!(code, 0, "{out}{err}");
    }
    env.sim.clear_requests();
    let share = 0.5;
    let workers: Vec<Proc> = (0..3)
        .map(|_| {
            Proc::spawn(
                &env.dir,
                &env.args(&["--arm-share", "0.5", "worker"]),
                &[("RUST_LOG", "warn")],
            )
        })
        .collect();
    let until = Instant::now() + Duration::from_secs(240);
    loop {
        let (code, out, _) = env.cli(&["--output", "json", "list"], &[]);
        assert_eq!(code, 0);
        let runs = items(&out, "RunList");
        if runs.iter().all(|r| r["state"] == "succeeded") {
            break;
        }
        assert!(
            runs.iter()
                .all(|r| r["state"] != "failed" && r["state"] != "rolled-back"),
            "{runs:?}"
        );
        assert!(Instant::now() < until, "not done in 240 s: {runs:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(workers);

    let reqs: Vec<Value> = env
        .sim
        .requests()
        .into_iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap_or("")
                .starts_with("/subscriptions/")
        })
        .filter(|r| r.get("actor").is_none_or(Value::is_null))
        .collect();
    assert_eq!(
        reqs.iter().filter(|r| r["status"] == 429).count(),
        0,
        "ARM never had to throttle"
    );
    // Per operation type: sent by any moment ≤ the share of ARM's bucket + its refill since
    // the first request (+2 for clock granularity).
    for (class, methods, cap, rate) in [
        ("read", &["GET", "HEAD"][..], 250.0, 25.0),
        ("write", &["PUT", "PATCH", "POST"][..], 200.0, 10.0),
        ("delete", &["DELETE"][..], 200.0, 10.0),
    ] {
        let mut at: Vec<u64> = reqs
            .iter()
            .filter(|r| methods.contains(&r["method"].as_str().unwrap_or("")))
            .map(|r| r["at_ms"].as_u64().unwrap())
            .collect();
        at.sort_unstable();
        let Some(t0) = at.first().copied() else {
            continue;
        };
        for (i, t) in at.iter().enumerate() {
            let allowed = cap * share + rate * share * (t - t0) as f64 / 1000.0 + 2.0;
            assert!(
                (i + 1) as f64 <= allowed,
                "{class}: {} requests by {} ms, more than one shared budget allows ({allowed:.0})",
                i + 1,
                t - t0
            );
        }
        eprintln!(
            "{class}: {} requests over {} ms",
            at.len(),
            at.last().unwrap() - t0
        );
    }
}

/// One create alone, as an operator runs it (`start create-cluster`, its
/// preflight included), sends at most 145 ARM requests (120 before a Private cluster's API
/// and OAuth names got a private zone each, with its link and record, and the private
/// endpoint is read for its address), writes each resource once, and is
/// never throttled. The count is ARM's (paths under `/subscriptions` or `/providers`),
/// from the simulator's request log.
#[test]
fn one_create_with_its_preflight_sends_at_most_145_arm_requests() {
    let env = Env::new("reqcount", 0.02);
    let cfg = cluster_file(&env.dir, "rqc", "rqc-r1q2c", "Private", "");
    env.sim.clear_requests();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let arm: Vec<(String, String, u64)> = env
        .sim
        .requests()
        .iter()
        .filter_map(|r| {
            let path = r["path"].as_str()?.split('?').next()?.to_string();
            (path.starts_with("/subscriptions") || path.starts_with("/providers")).then(|| {
                (
                    r["method"].as_str().unwrap_or_default().to_string(),
                    path,
                    r["status"].as_u64().unwrap_or_default(),
                )
            })
        })
        .collect();
    let listing = arm
        .iter()
        .map(|(m, p, s)| format!("{m} {s} {p}"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        arm.len() <= 145,
        "{} ARM requests for one create (target 145):\n{listing}",
        arm.len()
    );
    assert!(
        arm.iter().all(|(_, _, s)| *s != 429),
        "throttled alone:\n{listing}"
    );
    let mut puts: Vec<&str> = arm
        .iter()
        .filter(|(m, _, _)| m == "PUT")
        .map(|(_, p, _)| p.as_str())
        .collect();
    let n = puts.len();
    puts.sort_unstable();
    puts.dedup();
    assert_eq!(puts.len(), n, "a resource written twice:\n{listing}");
}
