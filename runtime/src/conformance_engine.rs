//! Engine-level conformance cases: the real engine driving the sample saga over the store
//! under test (real time, real I/O).

#![allow(clippy::unwrap_used, missing_docs)]

use crate::conformance::Harness;
use crate::engine::{Engine, EngineConfig, NoHooks, RunExit, StartOptions};
use crate::journal::RunState;
use crate::store::{Append, JournalStore, NewEvent, RunPatch};
use crate::testkit::{self, World};
use crate::time::{Clock, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// Engine settings for tests: short leases and polls.
pub fn test_config() -> EngineConfig {
    EngineConfig {
        lease_ttl: Duration::from_secs(3),
        poll_interval: Duration::from_millis(20),
        hold_threshold: Duration::from_secs(2),
        ..EngineConfig::default()
    }
}

fn engine(store: Arc<dyn JournalStore>, world: &Arc<World>) -> Engine {
    Engine::with(
        store,
        testkit::registry(world),
        Arc::new(SystemClock),
        Arc::new(NoHooks),
        test_config(),
    )
}

async fn drive(e: &Engine, run: crate::RunId) -> RunExit {
    tokio::time::timeout(
        Duration::from_secs(30),
        e.drive(run, std::future::pending()),
    )
    .await
    .expect("run finished within 30 s")
    .unwrap()
}

pub async fn engine_runs_saga_to_completion(h: &dyn Harness) {
    let dir = tempdir();
    let world = World::new(&dir);
    let e = engine(h.fresh().await, &world);
    let run = e
        .start(&testkit::sample_dag(), StartOptions::default())
        .await
        .unwrap()
        .run_id;
    assert_eq!(drive(&e, run).await, RunExit::Finished(RunState::Succeeded));
    assert_eq!(world.resources(), vec!["a", "b1", "b2", "c", "d"]);
    let creates = world
        .effects()
        .iter()
        .filter(|l| l.ends_with(" create"))
        .count();
    assert_eq!(creates, 5, "each resource created exactly once");
    let view = e.view(run).await.unwrap();
    assert_eq!(view.state(), RunState::Succeeded);
    let c: testkit::StepOutput =
        serde_json::from_value(view.node("c").unwrap().output.clone().unwrap()).unwrap();
    assert_eq!(
        c.seen,
        vec!["a", "b2"],
        "c read its ancestors' journaled outputs"
    );
    let summary = e.store().load_run(run).await.unwrap().unwrap().summary;
    assert_eq!(summary.state, RunState::Succeeded);
    assert_eq!(summary.lease_owner, None, "lease released");
}

pub async fn engine_unwinds_in_reverse(h: &dyn Harness) {
    let dir = tempdir();
    let world = World::new(&dir);
    world.faults().fail.insert("c".into());
    let e = engine(h.fresh().await, &world);
    let run = e
        .start(&testkit::sample_dag(), StartOptions::default())
        .await
        .unwrap()
        .run_id;
    assert_eq!(
        drive(&e, run).await,
        RunExit::Finished(RunState::RolledBack)
    );
    assert!(
        world.resources().is_empty(),
        "everything undone: {:?}",
        world.resources()
    );
    let fx = world.effects();
    let pos = |s: &str| {
        fx.iter()
            .position(|l| l == s)
            .unwrap_or_else(|| panic!("{s} in {fx:?}"))
    };
    assert!(pos("undo c delete") < pos("undo b2 delete"));
    assert!(pos("undo c delete") < pos("undo b1 delete"));
    assert!(pos("undo b1 delete") < pos("undo a delete"));
    assert!(pos("undo b2 delete") < pos("undo a delete"));
    assert!(
        !fx.iter().any(|l| l.contains(" d ")),
        "d never started, so it is never undone: {fx:?}"
    );
}

pub async fn engine_parks_corrupt_run_and_others_go_on(h: &dyn Harness) {
    let dir = tempdir();
    let world = World::new(&dir);
    let store = h.fresh().await;
    let e = engine(store.clone(), &world);
    let bad = e
        .start(&testkit::noop_dag(3), StartOptions::default())
        .await
        .unwrap()
        .run_id;
    let good = e
        .start(&testkit::noop_dag(3), StartOptions::default())
        .await
        .unwrap()
        .run_id;
    // Give `bad` one journaled event, then corrupt it.
    let now = SystemClock.now();
    let lease = store
        .acquire("seeder", now, Duration::from_millis(1), 1, Some(bad))
        .await
        .unwrap()
        .remove(0);
    store
        .append(
            &lease,
            Append {
                events: vec![NewEvent {
                    kind: "node_started".into(),
                    node: Some("bench.noop.0".into()),
                    data: r#"{"type":"node_started","node":"bench.noop.0","attempt":1}"#.into(),
                    at: now,
                }],
                patch: RunPatch {
                    state: RunState::Running,
                    blocked_on: "x".into(),
                    current_step: None,
                    wake_at: Some(now),
                    updated_at: now,
                },
                applied_commands: vec![],
            },
        )
        .await
        .unwrap();
    store.release(&lease, Some(now)).await.unwrap();
    h.corrupt_event(&store, bad, 1, r#"{"type":"no_such_event"}"#)
        .await;
    let exit = drive(&e, bad).await;
    assert!(
        matches!(exit, RunExit::Parked(ref r) if r.contains("journal event #1")),
        "{exit:?}"
    );
    let s = store.load_run(bad).await.unwrap().unwrap().summary;
    assert_eq!(s.state, RunState::Failed);
    assert!(s.blocked_on.contains("cannot be read"), "{}", s.blocked_on);
    assert_eq!(
        drive(&e, good).await,
        RunExit::Finished(RunState::Succeeded)
    );
}

fn tempdir() -> std::path::PathBuf {
    testkit::scratch_dir("conformance")
}
