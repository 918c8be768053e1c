//! Bounded waits (paused tokio time, in-memory store): a poll that changes nothing writes no
//! event, "since" is the start of the wait, a wait past its budget stalls the run for an
//! operator (never unwinding on its own), `retry` gives a fresh budget, `cancel` unwinds,
//! and an undo past its budget needs an operator like an undo out of retries.
#![allow(clippy::unwrap_used)]

use hcp_runtime::conformance_engine::test_config;
use hcp_runtime::journal::{Event, NodeStatus};
use hcp_runtime::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Polls every 10 s; done once `ready_after` polls have happened (0: never). Its undo
/// waits the same way when `undo_polls` is set (0: never done).
#[derive(Clone, Default)]
struct Knobs {
    polls: Arc<AtomicU32>,
    ready_after: Arc<AtomicU32>,
    undo_polls: Arc<AtomicU32>,
    undo_ready_after: Arc<AtomicU32>,
    /// The wait's reason changes on every poll (news each time).
    chatty: Arc<std::sync::atomic::AtomicBool>,
    /// On this poll (0: never) the step saves a checkpoint (an LRO's URL, say) and keeps
    /// waiting, as `pls.service` and `control-plane.nat-subnet` do.
    checkpoint_on: Arc<AtomicU32>,
    /// What each save returned ("ok" or the error).
    saves: Arc<std::sync::Mutex<Vec<String>>>,
}

struct Poller(Knobs);
impl Action for Poller {
    const NAME: &'static str = "test.poller";
    type Input = ();
    type Output = u32;
    fn retry_policy() -> RetryPolicy {
        RetryPolicy::default().with_wait_budget(Duration::from_secs(600))
    }
    fn undo_retry_policy() -> RetryPolicy {
        RetryPolicy::default().with_wait_budget(Duration::from_secs(300))
    }
    async fn run(&self, ctx: &StepContext, _: ()) -> Result<Outcome<u32>, StepError> {
        let n = self.0.polls.fetch_add(1, Ordering::SeqCst) + 1;
        let after = self.0.ready_after.load(Ordering::SeqCst);
        if after != 0 && n >= after {
            let seen: Option<u32> = ctx.checkpoint()?;
            return Ok(Outcome::Done(seen.unwrap_or(n)));
        }
        if self.0.checkpoint_on.load(Ordering::SeqCst) == n {
            let r = ctx.save_checkpoint(&(n * 100)).await;
            self.0.saves.lock().unwrap().push(match &r {
                Ok(()) => "ok".to_string(),
                Err(e) => e.to_string(),
            });
            r?;
        }
        let reason = if self.0.chatty.load(Ordering::SeqCst) {
            format!("{n} of many replicas ready")
        } else {
            "waiting for the control plane to become Available".to_string()
        };
        Ok(ctx.wait(Duration::from_secs(10), reason))
    }
    async fn undo(
        &self,
        ctx: &StepContext,
        _: (),
        _: Option<u32>,
    ) -> Result<UndoOutcome, StepError> {
        let n = self.0.undo_polls.fetch_add(1, Ordering::SeqCst) + 1;
        let after = self.0.undo_ready_after.load(Ordering::SeqCst);
        if after != 0 && n >= after {
            return Ok(UndoOutcome::Done);
        }
        Ok(ctx.undo_wait(
            Duration::from_secs(10),
            "waiting for the finalizers to clear",
        ))
    }
}

fn setup(k: &Knobs) -> (Engine, Arc<MemoryStore>, SagaDag) {
    let mut r = Registry::new();
    r.register(Poller(k.clone())).unwrap();
    let store = Arc::new(MemoryStore::new());
    let e = Engine::with(
        store.clone(),
        r,
        Arc::new(TokioClock::new()),
        Arc::new(engine::NoHooks),
        test_config(),
    );
    let mut b = SagaBuilder::new("waits", 1);
    b.stage("only");
    b.add::<Poller>("available", &(), NodeOptions::default())
        .unwrap();
    (e, store, b.build().unwrap())
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

#[tokio::test(start_paused = true)]
async fn a_long_wait_journals_a_constant_number_of_events() {
    let k = Knobs::default();
    k.ready_after.store(50, Ordering::SeqCst); // ~490 s of polling, within the budget
    let (e, store, dag) = setup(&k);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    let t0 = tokio::time::Instant::now();
    let bg = {
        let e = e.clone();
        tokio::spawn(async move { e.drive(run, std::future::pending()).await })
    };
    // Halfway: the summary shows when the wait began and how many polls changed nothing.
    tokio::time::sleep(Duration::from_secs(255)).await;
    let s = store.load_run(run).await.unwrap().unwrap().summary;
    assert_eq!(s.state, RunState::Waiting);
    assert!(s.blocked_on.contains("waiting since"), "{}", s.blocked_on);
    assert!(
        s.blocked_on.contains("polls without change"),
        "{}",
        s.blocked_on
    );
    let view = e.view(run).await.unwrap();
    let since = view.node("available").unwrap().wait_since.unwrap();
    assert!(since.0 > 0);
    assert_eq!(
        bg.await.unwrap().unwrap(),
        RunExit::Finished(RunState::Succeeded)
    );
    assert!(t0.elapsed() >= Duration::from_secs(490));
    assert_eq!(k.polls.load(Ordering::SeqCst), 50);
    let evs = events(&store, run).await;
    // started, waiting (the first), started (the poll with news), succeeded, finished.
    assert!(evs.len() <= 6, "{} events for 50 polls: {evs:?}", evs.len());
    let waits = evs
        .iter()
        .filter(|e| matches!(e, Event::NodeWaiting { .. }))
        .count();
    assert_eq!(waits, 1, "{evs:?}");
}

/// A step that saves a checkpoint during a poll of its wait (nothing journaled
/// before a poll runs) was told "checkpoint could not be journaled (lease lost)": the
/// journal refused a checkpoint for a node that was `waiting`, not `running`. No lease was
/// ever lost; the attempt failed for nothing and was retried.
#[tokio::test(start_paused = true)]
async fn a_checkpoint_saved_during_a_poll_is_journaled_and_costs_no_attempt() {
    let k = Knobs::default();
    k.checkpoint_on.store(3, Ordering::SeqCst);
    k.ready_after.store(6, Ordering::SeqCst);
    let (e, store, dag) = setup(&k);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    let exit = e.drive(run, std::future::pending()).await.unwrap();
    assert_eq!(exit, RunExit::Finished(RunState::Succeeded));
    assert_eq!(*k.saves.lock().unwrap(), vec!["ok".to_string()]);
    let evs = events(&store, run).await;
    assert!(
        !evs.iter().any(|e| matches!(
            e,
            Event::NodeRetryScheduled { .. } | Event::NodeFailed { .. }
        )),
        "{evs:#?}"
    );
    // The checkpoint is durable and read back by the poll that finishes.
    let view = e.view(run).await.unwrap();
    let out = view.outputs();
    assert_eq!(
        out.get("available"),
        Some(&serde_json::json!(300)),
        "{evs:#?}"
    );
    // One attempt throughout: every `started` names attempt 1.
    assert!(
        evs.iter()
            .all(|e| !matches!(e, Event::NodeStarted { attempt, .. } if *attempt != 1)),
        "{evs:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_whose_reason_changes_is_journaled_each_time_it_changes() {
    let k = Knobs::default();
    k.ready_after.store(5, Ordering::SeqCst);
    k.chatty.store(true, Ordering::SeqCst);
    let (e, store, dag) = setup(&k);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::Finished(RunState::Succeeded)
    );
    let evs = events(&store, run).await;
    let reasons: Vec<&str> = evs
        .iter()
        .filter_map(|e| match e {
            Event::NodeWaiting { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 4, "{evs:?}");
    // "since" is the first wait, not the latest poll.
    let view = e.view(run).await.unwrap();
    assert_eq!(view.node("available").unwrap().wait_since, None);
}

#[tokio::test(start_paused = true)]
async fn a_wait_past_its_budget_needs_an_operator_and_never_unwinds_by_itself() {
    let k = Knobs::default(); // never ready
    let (e, store, dag) = setup(&k);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    let t0 = tokio::time::Instant::now();
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::NeedsOperator
    );
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(600) && waited < Duration::from_secs(620),
        "{waited:?}"
    );
    let s = store.load_run(run).await.unwrap().unwrap().summary;
    assert_eq!(s.state, RunState::NeedsOperator);
    assert_eq!(s.wake_at, None, "nobody polls a stalled run");
    assert!(
        s.blocked_on.contains("available stalled"),
        "{}",
        s.blocked_on
    );
    assert!(
        s.blocked_on.contains("budget of 10m 0s"),
        "{}",
        s.blocked_on
    );
    let view = e.view(run).await.unwrap();
    assert!(matches!(
        view.node("available").unwrap().status,
        NodeStatus::Stalled { .. }
    ));
    assert!(view.unwinding.is_none());
    // Much later, still stalled, still not unwound, nothing more journaled.
    let n = events(&store, run).await.len();
    tokio::time::sleep(Duration::from_secs(7200)).await;
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::NeedsOperator
    );
    assert_eq!(events(&store, run).await.len(), n);
    assert!(e.view(run).await.unwrap().unwinding.is_none());

    // Retry: a fresh budget; this time it becomes ready.
    let polls = k.polls.load(Ordering::SeqCst);
    k.ready_after.store(polls + 3, Ordering::SeqCst);
    e.submit(
        run,
        OperatorCommand::Retry {
            step: Some("available".into()),
        },
        "olga",
        "the control plane was restarted",
    )
    .await
    .unwrap();
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::Finished(RunState::Succeeded)
    );
}

#[tokio::test(start_paused = true)]
async fn retry_of_a_stalled_wait_gives_a_whole_fresh_budget() {
    let k = Knobs::default();
    let (e, _store, dag) = setup(&k);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::NeedsOperator
    );
    e.submit(run, OperatorCommand::Retry { step: None }, "olga", "again")
        .await
        .unwrap();
    let t1 = tokio::time::Instant::now();
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::NeedsOperator
    );
    assert!(
        t1.elapsed() >= Duration::from_secs(600),
        "{:?}",
        t1.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn cancel_of_a_stalled_run_unwinds_it() {
    let k = Knobs::default();
    k.undo_ready_after.store(1, Ordering::SeqCst);
    let (e, _store, dag) = setup(&k);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::NeedsOperator
    );
    e.submit(run, OperatorCommand::Cancel, "olga", "give up")
        .await
        .unwrap();
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::Finished(RunState::Cancelled)
    );
    assert_eq!(k.undo_polls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn an_undo_past_its_wait_budget_needs_an_operator() {
    let k = Knobs::default(); // the action never finishes, the undo never either
    let (e, store, dag) = setup(&k);
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    let bg = {
        let e = e.clone();
        tokio::spawn(async move { e.drive(run, std::future::pending()).await })
    };
    tokio::time::sleep(Duration::from_secs(35)).await;
    e.submit(run, OperatorCommand::Cancel, "olga", "wrong region")
        .await
        .unwrap();
    assert_eq!(bg.await.unwrap().unwrap(), RunExit::NeedsOperator);
    let view = e.view(run).await.unwrap();
    match &view.node("available").unwrap().status {
        NodeStatus::UndoFailed { error } => {
            assert_eq!(error.kind, "wait_budget_exceeded");
            assert!(
                error.message.contains("budget of 5m 0s"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
    // ~30 polls of the undo: a handful of events.
    let evs = events(&store, run).await;
    assert!(k.undo_polls.load(Ordering::SeqCst) >= 30);
    assert!(evs.len() <= 10, "{} events: {evs:?}", evs.len());
    // Retry gives the undo a fresh budget; this time it finishes.
    let polls = k.undo_polls.load(Ordering::SeqCst);
    k.undo_ready_after.store(polls + 2, Ordering::SeqCst);
    e.submit(
        run,
        OperatorCommand::Retry { step: None },
        "olga",
        "finalizer removed",
    )
    .await
    .unwrap();
    assert_eq!(
        e.drive(run, std::future::pending()).await.unwrap(),
        RunExit::Finished(RunState::Cancelled)
    );
}

/// An action that finishes just as a cancel arrives: the aborted attempt's late result must
/// not be credited to the undo that took its place (it used to stage `node_succeeded`
/// after `undo_started`, an illegal transition that abandoned the run).
#[derive(Clone, Default)]
struct Finisher {
    blocked: Arc<std::sync::atomic::AtomicBool>,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
}
impl Action for Finisher {
    const NAME: &'static str = "test.finisher";
    type Input = ();
    type Output = ();
    async fn run(&self, _: &StepContext, _: ()) -> Result<Outcome<()>, StepError> {
        // Blocking (no await): an abort cannot stop it, so it completes after the driver
        // applied the cancel that arrived meanwhile.
        self.blocked.store(true, Ordering::SeqCst);
        while !self.cancelled.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(300));
        Ok(Outcome::Done(()))
    }
    async fn undo(&self, _: &StepContext, _: (), _: Option<()>) -> Result<UndoOutcome, StepError> {
        // Still busy when the aborted action's result arrives.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(UndoOutcome::Done)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_cancel_racing_a_finishing_attempt_still_unwinds() {
    let f = Finisher::default();
    let mut r = Registry::new();
    r.register(f.clone()).unwrap();
    let store = Arc::new(MemoryStore::new());
    let e = Engine::with(
        store.clone(),
        r,
        Arc::new(SystemClock),
        Arc::new(engine::NoHooks),
        test_config(),
    );
    let mut b = SagaBuilder::new("race", 1);
    b.stage("only");
    b.add::<Finisher>("f", &(), NodeOptions::default()).unwrap();
    let dag = b.build().unwrap();
    let run = e.start(&dag, StartOptions::default()).await.unwrap().run_id;
    let bg = {
        let e = e.clone();
        tokio::spawn(async move { e.drive(run, std::future::pending()).await })
    };
    while !f.blocked.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    e.submit(run, OperatorCommand::Cancel, "olga", "race")
        .await
        .unwrap();
    // Let the driver apply the cancel (abort, node failed, undo started) first.
    tokio::time::sleep(Duration::from_millis(100)).await;
    f.cancelled.store(true, Ordering::SeqCst);
    let exit = tokio::time::timeout(Duration::from_secs(20), bg)
        .await
        .expect("the run was abandoned instead of unwinding")
        .unwrap()
        .unwrap();
    assert_eq!(exit, RunExit::Finished(RunState::Cancelled));
}
