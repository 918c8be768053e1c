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
                after_seq: None,
                summary_kept: false,
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

/// A run of `dag` started on a fresh store of `h`, in a fresh world where step `fail`
/// fails for good (after its side effect).
async fn started(
    h: &dyn Harness,
    fail: &str,
    dag: crate::SagaDag,
) -> (Arc<World>, Arc<dyn JournalStore>, Engine, crate::RunId) {
    let world = World::new(tempdir());
    world.faults().fail.insert(fail.into());
    let store = h.fresh().await;
    let e = engine(store.clone(), &world);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    (world, store, e, run)
}

fn with_policy(mut dag: crate::SagaDag, p: crate::FailurePolicy) -> crate::SagaDag {
    dag.on_failure = p;
    dag
}

fn undo_lines(world: &World) -> Vec<String> {
    world
        .effects()
        .into_iter()
        .filter(|l| l.starts_with("undo"))
        .collect()
}

async fn operator(e: &Engine, run: crate::RunId, cmd: crate::OperatorCommand) {
    e.submit(run, cmd, "alice@host", "test").await.unwrap();
}

/// `on-failure=pause`: a step that fails for good stops the run in `needs-operator` with
/// that step's failure; nothing is undone.
pub async fn engine_pauses_instead_of_unwinding(h: &dyn Harness) {
    let dag = with_policy(testkit::sample_dag(), crate::FailurePolicy::pause(None));
    let (world, _, e, run) = started(h, "c", dag).await;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    assert_eq!(
        world.resources(),
        vec!["a", "b1", "b2", "c"],
        "the work is kept"
    );
    assert!(
        undo_lines(&world).is_empty(),
        "nothing undone: {:?}",
        world.effects()
    );
    let view = e.view(run).await.unwrap();
    assert_eq!(view.state(), RunState::NeedsOperator);
    let p = view.paused.clone().expect("paused");
    assert_eq!((p.step.as_str(), p.unwind_at), ("c", None));
    assert!(view.unwinding.is_none());
    let s = e.store().load_run(run).await.unwrap().unwrap().summary;
    assert_eq!(s.state, RunState::NeedsOperator);
    assert_eq!(
        s.wake_at, None,
        "no deadline: nobody wakes it but an operator"
    );
    assert!(
        s.blocked_on
            .starts_with("paused by policy: on-failure=pause (waits for an operator"),
        "{}",
        s.blocked_on
    );
    assert!(
        s.blocked_on.contains("InvalidParameter"),
        "{}",
        s.blocked_on
    );
    assert_eq!(s.current_step.as_deref(), Some("c"));
    // Driving it again changes nothing (a worker restart while paused).
    let events = view.events;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    assert_eq!(e.view(run).await.unwrap().events, events);
}

/// `retry` on a paused run re-runs the failed step with a fresh retry budget and goes on.
pub async fn engine_retry_redrives_a_paused_step(h: &dyn Harness) {
    let dag = with_policy(testkit::sample_dag(), crate::FailurePolicy::pause(None));
    let (world, _, e, run) = started(h, "c", dag).await;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    // Only the failed step can be retried while paused; resume is pointed at retry.
    let refused = e
        .submit(
            run,
            crate::OperatorCommand::Retry {
                step: Some("a".into()),
            },
            "bob",
            "",
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("only its failed step can be retried: c"),
        "{refused}"
    );
    let refused = e
        .submit(run, crate::OperatorCommand::Resume, "bob", "")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("`retry` re-runs the failed step"),
        "{refused}"
    );
    world.faults().fail.clear();
    operator(&e, run, crate::OperatorCommand::Retry { step: None }).await;
    assert_eq!(drive(&e, run).await, RunExit::Finished(RunState::Succeeded));
    assert_eq!(world.resources(), vec!["a", "b1", "b2", "c", "d"]);
    let fx = world.effects();
    for n in ["a", "b1", "b2", "c", "d"] {
        let creates = fx
            .iter()
            .filter(|l| **l == format!("effect {n} create"))
            .count();
        assert_eq!(creates, 1, "{n} created once: {fx:?}");
    }
    assert!(
        fx.contains(&"effect c exists".to_string()),
        "c re-ran and found its file: {fx:?}"
    );
    assert!(undo_lines(&world).is_empty(), "{fx:?}");
    let c = e.view(run).await.unwrap();
    let c = c.node("c").unwrap();
    assert_eq!(
        (c.redrives, c.attempts),
        (1, 1),
        "a fresh budget: attempt 1 again"
    );
}

/// `cancel` on a paused run unwinds as today.
pub async fn engine_cancel_unwinds_a_paused_run(h: &dyn Harness) {
    let dag = with_policy(testkit::sample_dag(), crate::FailurePolicy::pause(None));
    let (world, _, e, run) = started(h, "c", dag).await;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    operator(&e, run, crate::OperatorCommand::Cancel).await;
    assert_eq!(drive(&e, run).await, RunExit::Finished(RunState::Cancelled));
    assert!(world.resources().is_empty(), "{:?}", world.resources());
    let undos = undo_lines(&world);
    assert_eq!(
        undos.len(),
        4,
        "a, b1, b2 and c undone once each: {undos:?}"
    );
}

/// `pause=DURATION`: nobody acts, and the run unwinds by itself at the deadline, which is
/// a journaled timer: an engine restarted before it keeps waiting, one after it unwinds.
pub async fn engine_pause_deadline_unwinds_across_a_restart(h: &dyn Harness) {
    let dag = with_policy(
        testkit::sample_dag(),
        crate::FailurePolicy::pause(Some(Duration::from_secs(2))),
    );
    let (world, store, e, run) = started(h, "c", dag).await;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    let s = store.load_run(run).await.unwrap().unwrap().summary;
    let deadline = e
        .view(run)
        .await
        .unwrap()
        .paused
        .unwrap()
        .unwind_at
        .unwrap();
    assert_eq!(
        s.wake_at,
        Some(deadline),
        "the deadline is the run's wake-up"
    );
    assert!(
        s.blocked_on
            .contains(&format!("unwinds at {deadline} unless retried")),
        "{}",
        s.blocked_on
    );
    drop(e);
    // A restarted engine, before the deadline: nothing happens.
    let e = engine(store.clone(), &world);
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    assert!(undo_lines(&world).is_empty());
    drop(e);
    let wait = deadline.duration_since(SystemClock.now()) + Duration::from_millis(100);
    tokio::time::sleep(wait).await;
    // Restarted after it: unwinds at once.
    let e = engine(store.clone(), &world);
    assert_eq!(
        drive(&e, run).await,
        RunExit::Finished(RunState::RolledBack)
    );
    assert!(world.resources().is_empty(), "{:?}", world.resources());
    let s = store.load_run(run).await.unwrap().unwrap().summary;
    assert!(
        s.blocked_on.contains("nobody retried it"),
        "{}",
        s.blocked_on
    );
}

/// A failure after a pivot pauses whatever the policy; `cancel` then undoes only what came
/// after the pivot and keeps the pivot and everything before it.
pub async fn engine_pivot_then_failure_pauses_and_cancel_keeps_the_pivot(h: &dyn Harness) {
    // The default policy (unwind) does not apply past the pivot.
    let (world, _, e, run) = started(h, "d", testkit::pivot_dag()).await;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    let view = e.view(run).await.unwrap();
    assert_eq!(
        view.paused.as_ref().map(|p| &p.cause),
        Some(&crate::PauseCause::PastPivot { pivot: "p".into() })
    );
    assert!(
        view.blocked_on().contains("past the pivot p"),
        "{}",
        view.blocked_on()
    );
    assert!(undo_lines(&world).is_empty());
    operator(&e, run, crate::OperatorCommand::Cancel).await;
    assert_eq!(drive(&e, run).await, RunExit::Finished(RunState::Cancelled));
    assert_eq!(
        world.resources(),
        vec!["a", "p"],
        "the pivot and what came before stay"
    );
    let undos = undo_lines(&world);
    assert_eq!(
        undos,
        vec!["undo d delete", "undo c delete"],
        "only what came after, in reverse"
    );
    let view = e.view(run).await.unwrap();
    for n in ["a", "p"] {
        assert!(
            matches!(view.node(n).unwrap().status, crate::NodeStatus::Kept { .. }),
            "{n}: {:?}",
            view.node(n).unwrap().status
        );
    }
    assert!(
        view.blocked_on().contains("2 steps kept"),
        "{}",
        view.blocked_on()
    );
}

/// A pivot that fails once started may have taken effect, which cannot be undone: the run
/// pauses whatever its policy ("when in doubt, stop for an operator"), naming the pivot;
/// nothing is undone until an operator cancels, and then the pivot is kept while what came
/// before it (which has undos) is undone.
pub async fn engine_failure_at_the_pivot_pauses_and_cancel_undoes_what_can_be(h: &dyn Harness) {
    let (world, _, e, run) = started(h, "p", testkit::pivot_dag()).await;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    let view = e.view(run).await.unwrap();
    assert_eq!(
        view.paused.as_ref().map(|p| &p.cause),
        Some(&crate::PauseCause::PastPivot { pivot: "p".into() })
    );
    assert!(
        view.blocked_on().contains("paused at the pivot p"),
        "{}",
        view.blocked_on()
    );
    assert!(undo_lines(&world).is_empty(), "nothing undone while paused");
    assert_eq!(world.resources(), vec!["a", "p"]);
    operator(&e, run, crate::OperatorCommand::Cancel).await;
    assert_eq!(drive(&e, run).await, RunExit::Finished(RunState::Cancelled));
    assert_eq!(
        world.resources(),
        vec!["p"],
        "a undone, the pivot's effect kept"
    );
    let view = e.view(run).await.unwrap();
    assert!(matches!(
        view.node("p").unwrap().status,
        crate::NodeStatus::Kept { .. }
    ));
    assert!(matches!(
        view.node("a").unwrap().status,
        crate::NodeStatus::Undone { .. }
    ));
}

/// A forward-only run (every step a pivot, like delete-cluster) pauses on a failure; a
/// cancel then ends it without undoing anything and says so.
pub async fn engine_cancel_of_a_forward_only_run_undoes_nothing(h: &dyn Harness) {
    let mut b = crate::SagaBuilder::new("forward-only", 1);
    b.on_failure(crate::FailurePolicy::pause(None));
    for (i, n) in ["x", "y", "z"].into_iter().enumerate() {
        b.stage(format!("s{i}"));
        let input = testkit::StepInput {
            key: n.into(),
            needs: vec![],
        };
        b.add::<testkit::PivotStep>(
            n,
            &input,
            crate::NodeOptions::default().pivot("gone for good"),
        )
        .unwrap();
    }
    let dag = b.build().unwrap();
    assert!(dag.forward_only());
    let (world, _, e, run) = started(h, "y", dag).await;
    assert_eq!(drive(&e, run).await, RunExit::NeedsOperator);
    let view = e.view(run).await.unwrap();
    assert!(
        view.blocked_on()
            .starts_with("stopped partway (forward-only): 1 of 3 steps done"),
        "{}",
        view.blocked_on()
    );
    operator(&e, run, crate::OperatorCommand::Cancel).await;
    assert_eq!(drive(&e, run).await, RunExit::Finished(RunState::Cancelled));
    assert_eq!(world.resources(), vec!["x", "y"], "nothing undone");
    assert!(undo_lines(&world).is_empty(), "{:?}", world.effects());
    let view = e.view(run).await.unwrap();
    assert!(
        view.blocked_on()
            .contains("a forward-only run undoes nothing"),
        "{}",
        view.blocked_on()
    );
    assert!(
        view.nodes
            .iter()
            .all(|n| !matches!(n.status, crate::NodeStatus::Undone { .. }))
    );
    let sentence = crate::ledger::UnwindSummary::of(&view).sentence();
    assert!(sentence.starts_with("nothing was undone"), "{sentence}");
}

fn tempdir() -> std::path::PathBuf {
    testkit::scratch_dir("conformance")
}
