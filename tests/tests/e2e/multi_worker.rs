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

/// Lease expiry is decided by the database's clock. A worker whose host clock
/// runs an hour ahead sees every lease as long expired by its own reckoning; it must still
/// never take a live run over (on Postgres), and only takes it once the holder is really
/// gone. Then it resumes the holder's wait: its engine keeps the database's time, so the
/// wait is seconds old to it, not an hour (twice the step's 30-minute wait budget, which
/// stalled the run as `needs-operator` while the engine used the host's clock), and nothing
/// it journals is stamped an hour ahead.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_whose_clock_runs_ahead_never_takes_a_live_run_over() {
    let Some(base) = postgres_url() else { return };
    let db = fresh_postgres(&base).await;
    let dir = scratch("clock-ahead");
    let world_s = dir.join("world").to_str().unwrap().to_string();
    // `b1` keeps polling for longer than W2 is watched below (12 polls a second apart
    // against 6 s), so W1 always dies mid-wait and W2 always resumes the wait: with a wait
    // as long as the watch, the run often ended under W1 and the takeover went untested.
    let waits: serde_json::Map<String, serde_json::Value> =
        [("b1".to_string(), serde_json::json!(12))]
            .into_iter()
            .collect();
    let faults = serde_json::json!({ "waits": waits, "wait_ms": 1000 }).to_string();
    let env = [
        ("HCP_LEASE_TTL_MS", "1500"),
        ("HCP_POLL_MS", "50"),
        ("HCP_HOLD_MS", "60000"),
        ("HCP_SAMPLE_FAULTS", faults.as_str()),
        ("RUST_LOG", "warn"),
    ];
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
            "c.",
        ],
        &env,
    );
    let (code, out, err) = p.finish(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{out:?} {err}");
    let store = hcp_persistence::open(&db).await.unwrap();
    let run = || async {
        store
            .list_runs(&RunFilter::default())
            .await
            .unwrap()
            .remove(0)
    };

    let mut w1 = Proc::spawn(
        &dir,
        &["worker", "--database", &db, "--world", &world_s],
        &env,
    );
    let w1_tag = format!("-{}-", w1.child.id());
    wait_until("W1 holds the run", Duration::from_secs(30), || async {
        run()
            .await
            .lease_owner
            .as_deref()
            .is_some_and(|o| o.contains(&w1_tag))
    })
    .await;
    let epoch = run().await.lease_epoch;

    // W2's host clock runs an hour ahead: for four lease lifetimes, it never takes the run.
    let mut ahead = env.to_vec();
    ahead.push(("HCP_CLOCK_OFFSET_MS", "3600000"));
    let w2 = Proc::spawn(
        &dir,
        &["worker", "--database", &db, "--world", &world_s],
        &ahead,
    );
    let w2_tag = format!("-{}-", w2.child.id());
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        let r = run().await;
        assert!(
            r.lease_owner
                .as_deref()
                .is_some_and(|o| o.contains(&w1_tag))
                || r.state.is_terminal(),
            "the run left its live holder: {:?} (epoch {} → {})",
            r.lease_owner,
            epoch,
            r.lease_epoch
        );
        assert_eq!(r.lease_epoch, epoch, "no takeover of a live lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The holder dies: W2 takes over once the lease lapses by the database's clock.
    w1.kill();
    wait_until("W2 takes the run over", Duration::from_secs(20), || async {
        run()
            .await
            .lease_owner
            .as_deref()
            .is_some_and(|o| o.contains(&w2_tag))
            || run().await.state == RunState::Succeeded
    })
    .await;
    wait_until("the run succeeds", Duration::from_secs(30), || async {
        let r = run().await;
        assert_ne!(r.state, RunState::NeedsOperator, "{r:?}");
        r.state == RunState::Succeeded
    })
    .await;
    let stamped_by_now = hcp_runtime::Clock::now(&hcp_runtime::SystemClock).0 + 60_000;
    let rec = store.load_run(run().await.id).await.unwrap().unwrap();
    let late = rec
        .events
        .iter()
        .filter(|e| e.at.0 > stamped_by_now)
        .count();
    assert_eq!(late, 0, "events stamped in the future: {:?}", rec.events);
    let w2_log = w2.stderr();
    assert!(
        w2_log.contains("ahead of the journal database"),
        "W2 says its host clock is off: {w2_log}"
    );
    drop(w2);
}

/// On SQLite: two processes could share the file, but only one executes (the
/// file's executor lock); a second worker whose clock runs an hour ahead is refused outright
/// and the holder keeps the run.
#[tokio::test(flavor = "multi_thread")]
async fn on_sqlite_a_worker_whose_clock_runs_ahead_cannot_execute_beside_the_holder() {
    let dir = scratch("clock-ahead-sqlite");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world_s = dir.join("world").to_str().unwrap().to_string();
    let faults = serde_json::json!({ "waits": {"b1": 6}, "wait_ms": 1000 }).to_string();
    let env = [
        ("HCP_LEASE_TTL_MS", "1500"),
        ("HCP_HOLD_MS", "60000"),
        ("HCP_SAMPLE_FAULTS", faults.as_str()),
        ("RUST_LOG", "warn"),
    ];
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
            "s.",
        ],
        &env,
    );
    assert_eq!(p.finish(Duration::from_secs(30)).0, Some(0));
    let store = hcp_persistence::open(&db).await.unwrap();
    let run = || async {
        store
            .list_runs(&RunFilter::default())
            .await
            .unwrap()
            .remove(0)
    };
    let w1 = Proc::spawn(
        &dir,
        &["worker", "--database", &db, "--world", &world_s],
        &env,
    );
    let w1_tag = format!("-{}-", w1.child.id());
    wait_until("W1 holds the run", Duration::from_secs(30), || async {
        run()
            .await
            .lease_owner
            .as_deref()
            .is_some_and(|o| o.contains(&w1_tag))
    })
    .await;
    let epoch = run().await.lease_epoch;
    let mut ahead = env.to_vec();
    ahead.push(("HCP_CLOCK_OFFSET_MS", "3600000"));
    let w2 = Proc::spawn(
        &dir,
        &["worker", "--database", &db, "--world", &world_s],
        &ahead,
    );
    let (code, _, err) = w2.finish(Duration::from_secs(20));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("is being executed by another hcp-workflow process"),
        "{err}"
    );
    let r = run().await;
    assert!(
        r.lease_owner
            .as_deref()
            .is_some_and(|o| o.contains(&w1_tag)),
        "{r:?}"
    );
    assert_eq!(r.lease_epoch, epoch);
    drop(w1);
}
