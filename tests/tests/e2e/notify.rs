//! `worker --notify URL`: two workers on one Postgres journal, each with the
//! same webhook, and runs that succeed, fail, pause, stall, give up an undo, and wait for a
//! worker nobody runs. A local HTTP receiver gets each transition exactly once, the first
//! POST answered 503 is retried, and the webhook's token never reaches a log or the journal.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::webhook::{Received, receiver};
use hcp_e2e_tests::{Proc, fresh_postgres, postgres_url, scratch};
use hcp_runtime::testkit::{self, World};
use hcp_runtime::{
    Engine, EngineConfig, FailurePolicy, NoHooks, ReportFilter, RunExit, RunId, SagaDag,
    StartOptions, SystemClock,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The path part of the webhook URL: a token, as Slack's are.
const TOKEN: &str = "T000/B000/s3cr3tT0ken";
const TARGET: &str = "test/notify";

fn engine(store: Arc<dyn hcp_runtime::JournalStore>, world: &Arc<World>) -> Engine {
    let config = EngineConfig {
        targets: Some(vec![TARGET.to_string()]),
        poll_interval: Duration::from_millis(50),
        ..Default::default()
    };
    Engine::with(
        store,
        testkit::registry(world),
        Arc::new(SystemClock),
        Arc::new(NoHooks),
        config,
    )
}

/// Start `dag` for target `target` and, with `world`, drive it until it leaves the engine.
async fn drive(
    store: &Arc<dyn hcp_runtime::JournalStore>,
    dir: &std::path::Path,
    name: &str,
    dag: SagaDag,
    faults: serde_json::Value,
) -> (RunId, RunExit) {
    let world = World::new(dir.join(name));
    *world.faults() = serde_json::from_value(faults).unwrap();
    let e = engine(store.clone(), &world);
    let run = e
        .start(
            &dag,
            StartOptions {
                labels: BTreeMap::from([("cluster".to_string(), name.to_string())]),
                target: Some(TARGET.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .run_id;
    let exit = tokio::time::timeout(
        Duration::from_secs(20),
        e.drive(run, std::future::pending()),
    )
    .await
    .unwrap()
    .unwrap();
    (run, exit)
}

#[tokio::test(flavor = "multi_thread")]
async fn each_transition_is_sent_once_by_two_workers() {
    let t0 = Instant::now();
    let Some(base) = postgres_url() else { return };
    let db = fresh_postgres(&base).await;
    let dir = scratch("notify");
    let store = hcp_persistence::open(&db).await.unwrap();
    let (url, got) = receiver(&format!("/services/{TOKEN}"), true);
    let world = dir.join("world");
    let env = [
        ("HCP_NOTIFY_POLL_MS", "200"),
        ("HCP_NOTIFY_BACKOFF_MS", "100"),
        ("HCP_NO_WORKER_AFTER_MS", "1000"),
        ("HCP_POLL_MS", "100"),
        ("RUST_LOG", "info"),
    ];
    let args = [
        "worker",
        "--database",
        &db,
        "--world",
        world.to_str().unwrap(),
        "--notify",
        &url,
    ];
    let workers = [
        Proc::spawn(&dir, &args, &env),
        Proc::spawn(&dir, &args, &env),
    ];

    // The runs, executed here (target `test/notify`, which the workers do not serve): the
    // workers only watch the journal.
    let mut expected: Vec<(RunId, &str)> = Vec::new();
    let (ok, exit) = drive(
        &store,
        &dir,
        "ok",
        testkit::sample_dag_for("ok."),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(exit, RunExit::Finished(hcp_runtime::RunState::Succeeded));
    expected.push((ok, "succeeded"));

    let fail_c = serde_json::json!({"fail": ["c"]});
    let (rb, exit) = drive(
        &store,
        &dir,
        "rb",
        testkit::sample_dag_for("rb."),
        fail_c.clone(),
    )
    .await;
    assert_eq!(exit, RunExit::Finished(hcp_runtime::RunState::RolledBack));
    expected.push((rb, "failed"));

    let mut dag = testkit::sample_dag_for("pa.");
    dag.on_failure = FailurePolicy::Pause {
        deadline_secs: None,
    };
    let (pa, exit) = drive(&store, &dir, "pa", dag, fail_c).await;
    assert_eq!(exit, RunExit::NeedsOperator);
    expected.push((pa, "paused"));

    // c polls every 50 ms, past a 300 ms wait budget: stalled.
    let mut dag = testkit::sample_dag_for("st.");
    for n in dag.nodes.iter_mut().filter(|n| n.name == "c") {
        n.retry.wait_budget_ms = 300;
    }
    let (st, exit) = drive(
        &store,
        &dir,
        "st",
        dag,
        serde_json::json!({"waits": {"c": 1000}, "wait_ms": 50}),
    )
    .await;
    assert_eq!(exit, RunExit::NeedsOperator);
    expected.push((st, "stalled"));

    // d fails, and c's undo fails until its two attempts are used up: an operator must act.
    let mut dag = testkit::sample_dag_for("un.");
    for n in dag.nodes.iter_mut().filter(|n| n.name == "c") {
        n.undo_retry.max_attempts = 2;
        n.undo_retry.initial_interval_ms = 20;
    }
    let (un, exit) = drive(
        &store,
        &dir,
        "un",
        dag,
        serde_json::json!({"fail": ["d"], "stuck_undo": ["c"]}),
    )
    .await;
    assert_eq!(exit, RunExit::NeedsOperator);
    expected.push((un, "needs-operator"));

    // A run for a target no worker serves: after a second (HCP_NO_WORKER_AFTER_MS), no-worker.
    let nobody = World::new(dir.join("nobody"));
    let e = Engine::with(
        store.clone(),
        testkit::registry(&nobody),
        Arc::new(SystemClock),
        Arc::new(NoHooks),
        EngineConfig::default(),
    );
    let nw = e
        .start(
            &testkit::sample_dag_for("nw."),
            StartOptions {
                labels: BTreeMap::from([("cluster".to_string(), "nw".to_string())]),
                target: Some("test/nobody".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .run_id;
    expected.push((nw, "no-worker"));

    let seen = |got: &Arc<Mutex<Received>>| -> Vec<(String, String)> {
        got.lock()
            .unwrap()
            .bodies
            .iter()
            .map(|b| {
                (
                    b["run_id"].as_str().unwrap_or_default().to_string(),
                    b["event"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(12);
    while seen(&got).len() < expected.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A few more polls of both workers: nothing is sent twice.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|(r, e)| (r.to_string(), (*e).to_string()))
        .collect();
    want.sort();
    let mut have = seen(&got);
    have.sort();
    let stderr: String = workers.iter().map(Proc::stderr).collect();
    assert_eq!(have, want, "workers' stderr:\n{stderr}");
    // The 503 was retried: one more request than bodies.
    assert_eq!(got.lock().unwrap().requests, expected.len() + 1);

    // The payload: run, cluster, state, reason, the `why` paragraph, and Slack's `text`.
    let bodies = got.lock().unwrap().bodies.clone();
    let paused = bodies.iter().find(|b| b["event"] == "paused").unwrap();
    assert_eq!(paused["kind"], "Notification");
    assert_eq!(paused["cluster"], "pa");
    assert_eq!(paused["state"], "needs-operator");
    assert!(
        paused["reason"].as_str().unwrap().contains("step c failed"),
        "{paused}"
    );
    assert!(!paused["why"].as_str().unwrap().is_empty());
    assert!(
        paused["text"]
            .as_str()
            .unwrap()
            .starts_with("hcp-workflow: sample of pa (run "),
        "{paused}"
    );
    let nwb = bodies.iter().find(|b| b["event"] == "no-worker").unwrap();
    assert!(
        nwb["reason"].as_str().unwrap().starts_with("no worker"),
        "{nwb}"
    );

    // What was sent is journaled, once per transition; the token is in no log or report.
    let mut keys = Vec::new();
    let mut by = BTreeMap::<String, usize>::new();
    for (run, _) in &expected {
        for r in store
            .list_reports(&ReportFilter {
                kind: "notification".into(),
                subject: Some(format!("run/{run}")),
                ..Default::default()
            })
            .await
            .unwrap()
        {
            assert!(!r.data.contains("s3cr3t"), "{}", r.data);
            *by.entry(r.by).or_default() += 1;
            keys.push(r.data);
        }
    }
    assert_eq!(keys.len(), expected.len());
    assert!(stderr.contains("notification sent"), "{stderr}");
    assert!(!stderr.contains("s3cr3t"), "{stderr}");
    for w in &workers {
        w.signal("TERM");
    }
    eprintln!("sent by {by:?}; notify test: {:?}", t0.elapsed());
}
