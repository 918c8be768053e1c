//! Every `verify` is recorded in the journal
//! (`clusters`, `history` and the UI show the newest, `/metrics` exports it), and
//! `worker --verify-every` verifies the clusters it serves on a schedule kept in the
//! journal: several workers on one Postgres journal, restarted mid-way, verify each cluster
//! once per period (one verifier per slot, never early after a restart).
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, cluster_file};
use hcp_e2e_tests::{Proc, items, postgres_url};
use hcp_runtime::ReportFilter;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const FAST: f64 = 0.002;

/// `clusters --output json`: the row of `name`.
fn cluster_row(env: &Env, name: &str) -> Value {
    let (code, out, err) = env.cli(&["--output", "json", "clusters"], &[]);
    assert_eq!(code, 0, "{err}");
    items(&out, "ClusterList")
        .into_iter()
        .find(|r| r["cluster"] == name)
        .unwrap()
}

/// Clear the tags of the cluster's own resource group, as someone in the portal would (a
/// throttled answer is tried again).
fn strip_tags(env: &Env, name: &str, infra: &str) {
    let path =
        format!("/subscriptions/{GUEST_SUB}/resourceGroups/{name}-{infra}?api-version=2021-04-01");
    for _ in 0..100 {
        let (s, b) = env
            .sim
            .put(&path, &json!({"location": "eastus", "tags": {}}));
        if s == 429 {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        assert!((200..300).contains(&s), "PUT {path}: {s} {b}");
        return;
    }
    panic!("PUT {path}: throttled for 20 s");
}

#[test]
fn each_verify_is_recorded_and_clusters_history_show_the_newest() {
    let env = Env::new("vrec", FAST);
    let (name, infra) = ("rec", "rec-r3c0d");
    let cfg = cluster_file(&env.dir, name, infra, "PublicAndPrivate", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        cluster_row(&env, name)["verified"],
        Value::Null,
        "never verified yet"
    );
    let (code, out, _) = env.cli(&["clusters"], &[]);
    assert_eq!(code, 0);
    assert!(out.lines().next().unwrap().ends_with("VERIFIED"), "{out}");

    let (code, out, err) = env.cli(&["verify", &format!("cluster/{name}")], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let v = cluster_row(&env, name)["verified"].clone();
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["by"].as_str().unwrap().contains('@'), "who verified: {v}");
    assert_eq!(v["drift"], json!([]));
    let (_, out, _) = env.cli(&["history", &format!("cluster/{name}")], &[]);
    assert!(
        out.contains(&format!("Cluster {name} was last verified at "))
            && out.contains("everything was as the journal says"),
        "{out}"
    );

    // Drift, verified again: the newest report is the one shown, with exactly that row.
    strip_tags(&env, name, infra);
    let (code, out, err) = env.cli(&["verify", &format!("cluster/{name}")], &[]);
    assert_eq!(code, 3, "{out}{err}");
    let v = cluster_row(&env, name)["verified"].clone();
    assert_eq!(v["ok"], false, "{v}");
    let drift = v["drift"].as_array().unwrap();
    assert_eq!(drift.len(), 1, "{v}");
    assert_eq!(drift[0]["check"], "tags");
    assert!(
        drift[0]["resource"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/resourceGroups/{name}-{infra}"))
    );
    let (_, out, _) = env.cli(
        &["--output", "json", "history", &format!("cluster/{name}")],
        &[],
    );
    let doc = hcp_e2e_tests::document(&out, "RunHistory");
    assert_eq!(doc["cluster_verified"]["ok"], false, "{doc}");
    let (_, out, _) = env.cli(&["history", &format!("cluster/{name}")], &[]);
    assert!(
        out.contains("1 check(s) not ok") && out.contains("tags"),
        "{out}"
    );
    let (_, out, _) = env.cli(&["clusters"], &[]);
    assert!(out.contains("1 not ok at "), "{out}");

    // A bad period is refused before anything starts, naming the flag.
    let (code, _, err) = env.cli(&["worker", "--verify-every", "0s"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--verify-every") && err.contains("at least 1s"),
        "{err}"
    );
    let (code, _, err) = env.cli(&["worker", "--verify-every", "often"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("10m"), "{err}");
}

#[test]
fn workers_verify_each_cluster_once_per_period_across_restarts() {
    let Some(base) = postgres_url() else { return };
    let mut env = Env::new("vsched", FAST);
    env.db = hcp_e2e_tests::fresh_postgres_blocking(&base);
    let (name, infra) = ("sched", "sched-s4h3d");
    let cfg = cluster_file(&env.dir, name, infra, "PublicAndPrivate", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");

    let period = Duration::from_secs(2);
    let worker = || {
        Proc::spawn(
            &env.dir,
            // The schedule is under test, not the ARM budget (a verify reads every
            // resource: at the default share, back-to-back verifies wait for it).
            &env.args(&["--arm-share", "off", "worker", "--verify-every", "2s"]),
            &[("RUST_LOG", "info")],
        )
    };
    let started = Instant::now();
    let (mut a, mut b) = (worker(), worker());
    std::thread::sleep(Duration::from_secs(5));
    // One is killed outright and a new one starts: the schedule is in the journal.
    a.kill();
    let c = worker();
    std::thread::sleep(Duration::from_secs(5));
    b.kill();
    drop(c);
    let elapsed = started.elapsed();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let reports = rt.block_on(async {
        let store = hcp_persistence::open(&env.db).await.unwrap();
        store
            .list_reports(&ReportFilter {
                kind: "verify".into(),
                subject: Some(format!("cluster/{name}")),
                latest_only: false,
                limit: 0,
            })
            .await
            .unwrap()
    });
    let mut at: Vec<i64> = reports.iter().map(|r| r.at.0).collect();
    at.sort_unstable();
    // One verify per period: never two in one slot (a gap of a period, less the time one
    // verify takes), and none skipped for long.
    let gaps: Vec<i64> = at.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|g| *g >= 1_000),
        "two verifies in one period: gaps {gaps:?} ms"
    );
    let most = (elapsed.as_millis() / period.as_millis()) as usize + 1;
    assert!(
        (3..=most).contains(&at.len()),
        "{} verifies in {elapsed:?} with a period of {period:?}: gaps {gaps:?}",
        at.len()
    );
    eprintln!(
        "verifies at gaps {gaps:?} ms by {:?}",
        reports.iter().map(|r| r.by.as_str()).collect::<Vec<_>>()
    );
    assert!(reports.iter().all(|r| r.ok), "nothing drifted: {reports:?}");
    let workers: std::collections::BTreeSet<&str> = reports.iter().map(|r| r.by.as_str()).collect();
    assert!(workers.iter().all(|w| !w.is_empty()), "{workers:?}");
}
