//! A worker's drain on shutdown, over the in-memory store with paused time:
//! it starts nothing new, lets the step in flight end and journals it, keeps its lease
//! meanwhile, then releases the run for another worker, which goes on from the next step;
//! a step longer than the grace period is dropped and runs again elsewhere.
#![allow(clippy::unwrap_used)]

use hcp_runtime::conformance_engine::test_config;
use hcp_runtime::journal::Event;
use hcp_runtime::testkit::{self, World};
use hcp_runtime::*;
use std::sync::Arc;
use std::time::Duration;

fn engine(store: &Arc<MemoryStore>, world: &Arc<World>, name: &str) -> Engine {
    Engine::with(
        store.clone(),
        testkit::registry(world),
        Arc::new(TokioClock::new()),
        Arc::new(engine::NoHooks),
        EngineConfig {
            worker_id: name.to_string(),
            ..test_config()
        },
    )
}

async fn events(store: &MemoryStore, run: RunId) -> Vec<Event> {
    store
        .load_run(run)
        .await
        .unwrap()
        .unwrap()
        .events
        .iter()
        .map(|ev| serde_json::from_str(&ev.data).unwrap())
        .collect()
}

/// Start a sample run whose `b1` takes `slow` after its effect, and a draining worker
/// `w1` on it; return once `b1`'s effect happened (the step is in flight).
async fn worker_mid_step(
    slow: Duration,
    grace: Duration,
) -> (
    Arc<MemoryStore>,
    Arc<World>,
    RunId,
    Engine,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), EngineError>>,
) {
    let store = Arc::new(MemoryStore::new());
    let world = World::new(testkit::scratch_dir("drain"));
    world
        .faults()
        .slow_ms
        .insert("b1".into(), u64::try_from(slow.as_millis()).unwrap());
    let w1 = engine(&store, &world, "w1");
    let run = w1
        .start(&testkit::sample_dag(), StartOptions::default())
        .await
        .unwrap()
        .run_id;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = {
        let w1 = w1.clone();
        tokio::spawn(async move {
            w1.run_worker_draining(
                async {
                    let _ = stopped.await;
                },
                grace,
            )
            .await
        })
    };
    for _ in 0..1000 {
        if world.effects().iter().any(|l| l == "effect b1 create") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(world.effects().iter().any(|l| l == "effect b1 create"));
    assert_eq!(w1.health().held_runs, 1);
    assert!(w1.health().working);
    (store, world, run, w1, stop, worker)
}

#[tokio::test(start_paused = true)]
async fn a_draining_worker_finishes_the_step_in_flight_and_another_goes_on() {
    let slow = Duration::from_secs(8); // more than two lease TTLs (3 s)
    let (store, world, run, w1, stop, worker) =
        worker_mid_step(slow, Duration::from_secs(30)).await;
    let _ = stop.send(());
    // Another worker meanwhile: it must not take the run while w1 drains (w1 renews).
    let w2 = engine(&store, &world, "w2");
    let (stop2, stopped2) = tokio::sync::oneshot::channel::<()>();
    let second = {
        let w2 = w2.clone();
        tokio::spawn(async move {
            w2.run_worker(async {
                let _ = stopped2.await;
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(w1.health().draining);
    worker.await.unwrap().unwrap();
    let h = w1.health();
    assert_eq!(h.cut_short, 0, "{h:?}");
    assert!(!h.working && h.held_runs == 0, "{h:?}");
    // w1 journaled b1's outcome, and started nothing after it.
    let evs = events(&store, run).await;
    assert!(
        evs.iter()
            .any(|e| matches!(e, Event::NodeSucceeded { node, .. } if node == "b1")),
        "{evs:?}"
    );
    for _ in 0..1000 {
        if store.load_run(run).await.unwrap().unwrap().summary.state == RunState::Succeeded {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop2.send(());
    second.await.unwrap().unwrap();
    let rec = store.load_run(run).await.unwrap().unwrap();
    assert_eq!(rec.summary.state, RunState::Succeeded);
    assert_eq!(
        rec.summary.lease_epoch, 2,
        "w1 held it once, then w2: no takeover"
    );
    // Every action ran exactly once: no `exists` line (a second run of a step).
    let fx = world.effects();
    for n in testkit::SAMPLE_NODES {
        let line = format!("effect {n} create");
        assert_eq!(fx.iter().filter(|l| **l == line).count(), 1, "{fx:?}");
    }
    assert!(!fx.iter().any(|l| l.ends_with(" exists")), "{fx:?}");
}

#[tokio::test(start_paused = true)]
async fn a_step_longer_than_the_grace_period_is_dropped_and_runs_again_elsewhere() {
    let (store, world, run, w1, stop, worker) =
        worker_mid_step(Duration::from_secs(60), Duration::from_secs(1)).await;
    let _ = stop.send(());
    let t0 = tokio::time::Instant::now();
    worker.await.unwrap().unwrap();
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "stopped within the grace period: {took:?}"
    );
    assert_eq!(w1.health().cut_short, 1);
    let rec = store.load_run(run).await.unwrap().unwrap();
    assert!(rec.summary.lease_owner.is_none(), "released");
    // The dropped attempt runs again on the next worker, which finds its effect done.
    world.faults().slow_ms.clear();
    let w2 = engine(&store, &world, "w2");
    assert_eq!(
        w2.drive(run, std::future::pending()).await.unwrap(),
        RunExit::Finished(RunState::Succeeded)
    );
    let fx = world.effects();
    assert_eq!(
        fx.iter().filter(|l| *l == "effect b1 exists").count(),
        1,
        "{fx:?}"
    );
}
