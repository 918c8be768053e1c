//! Several `hcp-workflow worker` processes share one Postgres journal. One is frozen
//! (SIGSTOP) holding leases, one is SIGKILLed mid-run; the survivors take the runs over
//! after lease expiry and finish them; the frozen worker, thawed, finds its writes refused
//! (fenced) and nothing it does lands in the journal.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::{Proc, fresh_postgres, postgres_url, scratch};
use hcp_runtime::testkit::read_lines;
use hcp_runtime::{Engine, Registry, RunFilter, RunState};
use std::time::{Duration, Instant};

const RUNS: usize = 6;

#[tokio::test(flavor = "multi_thread")]
async fn workers_take_over_expired_leases_and_stale_writes_are_refused() {
    let Some(base) = postgres_url() else { return };
    let db = fresh_postgres(&base).await;
    let dir = scratch("multi");
    let world = dir.join("world");
    let world_s = world.to_str().unwrap().to_string();
    let waits: serde_json::Map<String, serde_json::Value> =
        [("b1".to_string(), serde_json::json!(2))]
            .into_iter()
            .collect();
    let faults = serde_json::json!({ "waits": waits, "wait_ms": 1500 }).to_string();
    let env = [
        ("HCP_LEASE_TTL_MS", "1500"),
        ("HCP_POLL_MS", "50"),
        ("HCP_HOLD_MS", "4000"),
        ("HCP_SAMPLE_FAULTS", faults.as_str()),
        ("RUST_LOG", "warn"),
    ];
    for i in 0..RUNS {
        let prefix = format!("r{i}.");
        let p = Proc::spawn(
            &dir,
            &[
                "selftest",
                "--detach",
                "--database",
                &db,
                "--world",
                &world_s,
                "--prefix",
                &prefix,
            ],
            &env,
        );
        let (code, out, err) = p.finish(Duration::from_secs(30));
        assert_eq!(code, Some(0), "{out:?} {err}");
    }
    let store = hcp_persistence::open(&db).await.unwrap();
    let owners = || async { store.list_runs(&RunFilter::default()).await.unwrap() };

    // W1 leases everything, then freezes while holding the leases.
    let w1 = Proc::spawn(
        &dir,
        &["worker", "--database", &db, "--world", &world_s],
        &env,
    );
    let w1_tag = format!("-{}-", w1.child.id());
    wait_until(
        "W1 holds every run while it waits",
        Duration::from_secs(30),
        || async {
            let runs = owners().await;
            runs.iter().all(|r| {
                r.lease_owner
                    .as_deref()
                    .is_some_and(|o| o.contains(&w1_tag))
                    && r.state == RunState::Waiting
            })
        },
    )
    .await;
    w1.signal("STOP");

    // W2 takes over after expiry and is killed while it holds runs.
    let mut w2 = Proc::spawn(
        &dir,
        &["worker", "--database", &db, "--world", &world_s],
        &env,
    );
    let w2_tag = format!("-{}-", w2.child.id());
    wait_until("W2 takes a run over", Duration::from_secs(30), || async {
        owners().await.iter().any(|r| {
            r.lease_owner
                .as_deref()
                .is_some_and(|o| o.contains(&w2_tag))
        })
    })
    .await;
    w2.kill();

    // W3 takes over W2's runs after expiry and finishes everything.
    let w3 = Proc::spawn(
        &dir,
        &["worker", "--database", &db, "--world", &world_s],
        &env,
    );
    wait_until("every run succeeds", Duration::from_secs(60), || async {
        owners()
            .await
            .iter()
            .all(|r| r.state == RunState::Succeeded)
    })
    .await;

    // Thaw W1: its leases were taken over, so its writes are refused.
    let before: Vec<usize> = {
        let mut v = Vec::new();
        for r in owners().await {
            v.push(store.load_run(r.id).await.unwrap().unwrap().events.len());
        }
        v
    };
    w1.signal("CONT");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let err1 = w1.stderr();
    assert!(
        err1.contains("journal write refused") || err1.contains("lease lost"),
        "the thawed worker noticed it lost its leases: {err1}"
    );
    let mut after = Vec::new();
    for r in owners().await {
        after.push(store.load_run(r.id).await.unwrap().unwrap().events.len());
    }
    assert_eq!(
        before, after,
        "nothing the stale worker did landed in the journal"
    );
    w1.signal("TERM");
    let (code, _, _) = w1.finish(Duration::from_secs(20));
    assert_eq!(code, Some(0), "W1 shuts down cleanly on SIGTERM");
    w3.signal("TERM");
    let (code, _, err3) = w3.finish(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err3}");

    // Convergence: every run folds, succeeded, every resource created exactly once.
    let e = Engine::new(store.clone(), Registry::new());
    for r in owners().await {
        let v = e.view(r.id).await.unwrap();
        assert_eq!(v.state(), RunState::Succeeded);
        assert!(
            r.lease_epoch >= 2,
            "run {} was taken over at least once (epoch {})",
            r.id,
            r.lease_epoch
        );
    }
    let fx = read_lines(&world.join("effects.log"));
    for i in 0..RUNS {
        for n in ["a", "b1", "b2", "c", "d"] {
            let line = format!("effect r{i}.{n} create");
            assert_eq!(
                fx.iter().filter(|l| **l == line).count(),
                1,
                "{line}: {fx:?}"
            );
        }
    }
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("condition not reached within {timeout:?}: {what}");
}
