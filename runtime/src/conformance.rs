//! The store conformance suite (duroxide's provider validation, for our contract).
//!
//! Every [`JournalStore`] implementation runs the same cases. A backend's test file does:
//!
//! ```ignore
//! struct H; // implements conformance::Harness
//! hcp_runtime::conformance_tests!(H);
//! ```
//!
//! which expands to one `#[tokio::test]` per case, so failures name the broken guarantee.

#![allow(clippy::unwrap_used, missing_docs)]

use crate::journal::RunState;
use crate::store::*;
use crate::time::Timestamp;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// What a backend provides to the suite.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A fresh, empty store.
    async fn fresh(&self) -> Arc<dyn JournalStore>;
    /// Overwrite the stored data of one event with `data` (simulating a corrupt row).
    async fn corrupt_event(&self, store: &Arc<dyn JournalStore>, run: RunId, seq: i64, data: &str);
    /// Let `by` pass on the store's own clock, for a store that decides lease expiry by it
    /// (Postgres: the database's `now()`). A store that goes by the caller's `now` needs
    /// nothing: the cases pass a later `now` too.
    async fn lapse(&self, store: &Arc<dyn JournalStore>, by: Duration) {
        let _ = (store, by);
    }
}

const T0: Timestamp = Timestamp(1_800_000_000_000);
const LEASE: Duration = Duration::from_secs(10);

fn new_run(key: Option<&str>, workflow: &str, cluster: &str, at: Timestamp) -> NewRun {
    NewRun {
        id: Uuid::new_v4(),
        workflow: workflow.into(),
        workflow_version: 3,
        labels: BTreeMap::from([("cluster".to_string(), cluster.to_string())]),
        idempotency_key: key.map(str::to_string),
        exclusive_key: None,
        target: None,
        dag: r#"{"workflow":"w","version":3,"stages":[],"nodes":[]}"#.into(),
        created_at: at,
    }
}

/// `n` new runs of workflow `w`, clusters `c0`, `c1`, …, created at `T0`: their ids.
async fn create_runs(s: &Arc<dyn JournalStore>, n: usize) -> Vec<RunId> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let r = new_run(None, "w", &format!("c{i}"), T0);
        ids.push(r.id);
        s.create_run(r).await.unwrap();
    }
    ids
}

fn ev(kind: &str, node: Option<&str>, data: &str, at: Timestamp) -> NewEvent {
    NewEvent {
        kind: kind.into(),
        node: node.map(str::to_string),
        data: data.into(),
        at,
    }
}

fn patch(state: RunState, wake_at: Option<Timestamp>, at: Timestamp) -> RunPatch {
    RunPatch {
        state,
        blocked_on: format!("state {state}"),
        current_step: Some("step".into()),
        wake_at,
        updated_at: at,
    }
}

fn cmd(at: Timestamp) -> NewCommand {
    NewCommand {
        command: r#"{"command":"cancel"}"#.into(),
        requested_by: "alice@host".into(),
        reason: "test".into(),
        requested_at: at,
    }
}

pub async fn create_and_load(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "create-cluster", "demo", T0);
    let id = r.id;
    assert_eq!(s.create_run(r).await.unwrap(), CreateOutcome::Created(id));
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.id, id);
    assert_eq!(rec.summary.workflow, "create-cluster");
    assert_eq!(rec.summary.workflow_version, 3);
    assert_eq!(
        rec.summary.labels.get("cluster").map(String::as_str),
        Some("demo")
    );
    assert_eq!(rec.summary.state, RunState::Pending);
    assert_eq!(rec.summary.wake_at, Some(T0));
    assert_eq!(rec.summary.lease_owner, None);
    assert!(rec.dag.contains("\"version\":3"));
    assert!(rec.events.is_empty());
    assert!(s.load_run(Uuid::new_v4()).await.unwrap().is_none());
}

pub async fn idempotent_create(h: &dyn Harness) {
    let s = h.fresh().await;
    let a = new_run(Some("key-1"), "w", "c", T0);
    let a_id = a.id;
    s.create_run(a).await.unwrap();
    let b = new_run(Some("key-1"), "w", "c", T0.plus(Duration::from_secs(1)));
    assert_eq!(
        s.create_run(b).await.unwrap(),
        CreateOutcome::Existing(a_id)
    );
    let c = new_run(Some("key-2"), "w", "c", T0);
    let c_id = c.id;
    assert_eq!(s.create_run(c).await.unwrap(), CreateOutcome::Created(c_id));
    assert_eq!(s.list_runs(&RunFilter::default()).await.unwrap().len(), 2);
}

fn exclusive_run(key: Option<&str>, workflow: &str, exclusive: &str, at: Timestamp) -> NewRun {
    NewRun {
        exclusive_key: Some(exclusive.to_string()),
        ..new_run(key, workflow, "c", at)
    }
}

/// An idempotency key names one start of one workflow for one exclusive key: reused for
/// another workflow or key, it is refused (and nothing is written), even after its run
/// finished.
pub async fn idempotency_key_is_bound_to_workflow_and_key(h: &dyn Harness) {
    let s = h.fresh().await;
    let a = exclusive_run(Some("k"), "create-cluster", "cluster/s/demo/x", T0);
    let a_id = a.id;
    s.create_run(a).await.unwrap();
    let other_workflow = exclusive_run(Some("k"), "delete-cluster", "cluster/s/demo/x", T0);
    assert_eq!(
        s.create_run(other_workflow).await.unwrap(),
        CreateOutcome::KeyReused(a_id)
    );
    let other_cluster = exclusive_run(Some("k"), "create-cluster", "cluster/s/other/y", T0);
    assert_eq!(
        s.create_run(other_cluster).await.unwrap(),
        CreateOutcome::KeyReused(a_id)
    );
    let same = exclusive_run(Some("k"), "create-cluster", "cluster/s/demo/x", T0);
    assert_eq!(
        s.create_run(same).await.unwrap(),
        CreateOutcome::Existing(a_id)
    );
    assert_eq!(s.list_runs(&RunFilter::default()).await.unwrap().len(), 1);
    let rec = s.load_run(a_id).await.unwrap().unwrap();
    assert_eq!(
        rec.summary.exclusive_key.as_deref(),
        Some("cluster/s/demo/x")
    );
}

/// At most one unfinished run per exclusive key; once it is terminal, the key is free.
/// `failed` (parked) and `needs-operator` runs still hold it.
pub async fn one_unfinished_run_per_exclusive_key(h: &dyn Harness) {
    let s = h.fresh().await;
    let key = "cluster/s/demo/x";
    let a = exclusive_run(None, "create-cluster", key, T0);
    let a_id = a.id;
    assert_eq!(s.create_run(a).await.unwrap(), CreateOutcome::Created(a_id));
    // Any workflow, with or without an idempotency key.
    let b = exclusive_run(None, "delete-cluster", key, T0);
    assert_eq!(s.create_run(b).await.unwrap(), CreateOutcome::Busy(a_id));
    let b = exclusive_run(Some("fresh"), "create-cluster", key, T0);
    assert_eq!(s.create_run(b).await.unwrap(), CreateOutcome::Busy(a_id));
    // Another key, or none, is not in the way.
    let c = exclusive_run(None, "create-cluster", "cluster/s/other/y", T0);
    assert!(matches!(
        s.create_run(c).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    assert!(matches!(
        s.create_run(new_run(None, "w", "c", T0)).await.unwrap(),
        CreateOutcome::Created(_)
    ));
    // Still unfinished while stuck or parked.
    let lease = s
        .acquire("A", T0, LEASE, 10, Some(a_id))
        .await
        .unwrap()
        .remove(0);
    for st in [
        RunState::NeedsOperator,
        RunState::Failed,
        RunState::Unwinding,
    ] {
        s.append(
            &lease,
            Append {
                events: vec![],
                patch: patch(st, None, T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            },
        )
        .await
        .unwrap();
        let d = exclusive_run(None, "create-cluster", key, T0);
        assert_eq!(
            s.create_run(d).await.unwrap(),
            CreateOutcome::Busy(a_id),
            "{st}"
        );
    }
    s.append(
        &lease,
        Append {
            events: vec![],
            patch: patch(RunState::RolledBack, None, T0),
            applied_commands: vec![],
            after_seq: None,
            summary_kept: false,
        },
    )
    .await
    .unwrap();
    let e = exclusive_run(None, "delete-cluster", key, T0);
    let e_id = e.id;
    assert_eq!(s.create_run(e).await.unwrap(), CreateOutcome::Created(e_id));
    let runs = s.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(
        runs.iter()
            .filter(|r| r.exclusive_key.as_deref() == Some(key))
            .count(),
        2
    );
}

/// Many concurrent creates of one exclusive key (different idempotency keys): exactly one
/// is created, every other names it.
pub async fn racing_creates_of_one_exclusive_key_have_one_winner(h: &dyn Harness) {
    let s = h.fresh().await;
    let key = "cluster/s/race/x";
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let s = s.clone();
        tasks.spawn(async move {
            let r = exclusive_run(Some(&format!("k{i}")), "create-cluster", key, T0);
            s.create_run(r).await.unwrap()
        });
    }
    let mut outs = Vec::new();
    while let Some(o) = tasks.join_next().await {
        outs.push(o.unwrap());
    }
    let created: Vec<RunId> = outs
        .iter()
        .filter_map(|o| match o {
            CreateOutcome::Created(id) => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 1, "{outs:?}");
    assert!(outs.iter().all(|o| o.id() == created[0]), "{outs:?}");
    assert_eq!(s.list_runs(&RunFilter::default()).await.unwrap().len(), 1);
}

/// A worker leases runs of its own targets and runs without a target; never another
/// target's runs, which stay pending for the right worker.
pub async fn workers_lease_only_their_targets(h: &dyn Harness) {
    let s = h.fresh().await;
    let mk = |t: Option<&str>| NewRun {
        target: t.map(str::to_string),
        ..new_run(None, "w", "c", T0)
    };
    let sim = mk(Some("simulator/in-process"));
    let sim_id = sim.id;
    let azure = mk(Some("azure/public"));
    let azure_id = azure.id;
    let any = mk(None);
    let any_id = any.id;
    for r in [sim, azure, any] {
        s.create_run(r).await.unwrap();
    }
    let azure_worker = vec!["azure/public".to_string(), "azure/china".to_string()];
    let got = s
        .acquire_targeted("A", T0, LEASE, 10, None, Some(&azure_worker))
        .await
        .unwrap();
    let mut ids: Vec<RunId> = got.iter().map(|l| l.run_id).collect();
    ids.sort();
    let mut want = vec![azure_id, any_id];
    want.sort();
    assert_eq!(ids, want);
    // Not even when asked for by id.
    assert!(
        s.acquire_targeted("A", T0, LEASE, 10, Some(sim_id), Some(&azure_worker))
            .await
            .unwrap()
            .is_empty()
    );
    let rec = s.load_run(sim_id).await.unwrap().unwrap();
    assert_eq!(rec.summary.lease_owner, None);
    assert_eq!(rec.summary.target.as_deref(), Some("simulator/in-process"));
    let sim_worker = vec!["simulator/in-process".to_string()];
    let got = s
        .acquire_targeted("B", T0, LEASE, 10, None, Some(&sim_worker))
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|l| l.run_id).collect::<Vec<_>>(),
        vec![sim_id]
    );
}

pub async fn atomic_append_in_order(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    let l = s.acquire("w1", T0, LEASE, 10, None).await.unwrap();
    assert_eq!(l.len(), 1);
    let l = &l[0];
    let seq = s
        .append(
            l,
            Append {
                events: vec![
                    ev("a", Some("n1"), r#"{"x":1}"#, T0),
                    ev("b", None, r#"{"x":2}"#, T0),
                    ev("c", Some("n2"), r#"{"x":"é ✓"}"#, T0),
                ],
                patch: patch(RunState::Running, None, T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(seq, 3);
    let seq = s
        .append(
            l,
            Append {
                events: vec![ev("d", Some("n1"), "{}", T0)],
                patch: patch(RunState::Waiting, Some(T0.plus(LEASE)), T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            },
        )
        .await
        .unwrap();
    assert_eq!(seq, 4);
    let rec = s.load_run(id).await.unwrap().unwrap();
    let kinds: Vec<_> = rec
        .events
        .iter()
        .map(|e| (e.seq, e.kind.as_str()))
        .collect();
    assert_eq!(kinds, vec![(1, "a"), (2, "b"), (3, "c"), (4, "d")]);
    assert_eq!(rec.events[2].data, r#"{"x":"é ✓"}"#);
    assert_eq!(rec.events[1].node, None);
    assert_eq!(rec.events[0].node.as_deref(), Some("n1"));
    assert_eq!(rec.summary.state, RunState::Waiting);
    assert_eq!(rec.summary.blocked_on, "state waiting");
    assert_eq!(rec.summary.current_step.as_deref(), Some("step"));
}

/// The append of step `n` of a running run at `base` + `n` ms: `events` events after seq
/// `after`, the run due at the append's time, "blocked on" `running n{n}` and current step
/// `n{n}`, saying the summary is `kept` ([`Append::summary_kept`]).
pub fn step_keeping_the_summary(
    base: Timestamp,
    n: i64,
    after: i64,
    kept: bool,
    events: usize,
) -> Append {
    Append {
        events: (0..events)
            .map(|k| {
                ev(
                    "node_started",
                    Some("n"),
                    &format!("{{\"n\":{n},\"k\":{k}}}"),
                    Timestamp(base.0 + n),
                )
            })
            .collect(),
        patch: RunPatch {
            state: RunState::Running,
            blocked_on: format!("running n{n}"),
            current_step: Some(format!("n{n}")),
            wake_at: Some(Timestamp(base.0 + n)),
            updated_at: Timestamp(base.0 + n),
        },
        applied_commands: vec![],
        after_seq: Some(after),
        summary_kept: kept,
    }
}

/// A step whose run keeps its state and stays due ([`Append::summary_kept`], numbered with
/// [`Append::after_seq`]) may be written without touching the run's row (Postgres, schema
/// v8): every view still shows its summary, and an append that writes the row afterwards
/// (here one with no events) wins again.
pub async fn a_kept_summary_is_shown_as_written(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    let l = s
        .acquire("w1", T0, LEASE, 10, None)
        .await
        .unwrap()
        .remove(0);
    let step = |n, after, kept, events| step_keeping_the_summary(T0, n, after, kept, events);
    assert_eq!(s.append(&l, step(1, 0, false, 2)).await.unwrap(), 2);
    assert_eq!(s.append(&l, step(2, 2, true, 1)).await.unwrap(), 3);
    assert_eq!(s.append(&l, step(3, 3, true, 2)).await.unwrap(), 5);
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert_eq!(
        (
            rec.summary.blocked_on.as_str(),
            rec.summary.current_step.as_deref()
        ),
        ("running n3", Some("n3"))
    );
    assert_eq!(rec.summary.updated_at, Timestamp(T0.0 + 3));
    assert_eq!(rec.summary.state, RunState::Running);
    let listed = s.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(listed[0].blocked_on, "running n3");
    assert_eq!(listed[0].updated_at, Timestamp(T0.0 + 3));
    assert_eq!(s.append(&l, step(4, 5, false, 0)).await.unwrap(), 5);
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.blocked_on, "running n4");
    assert_eq!(rec.summary.current_step.as_deref(), Some("n4"));
    assert_eq!(
        rec.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    // A longer step.
    assert_eq!(s.append(&l, step(5, 5, true, 6)).await.unwrap(), 11);
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.blocked_on, "running n5");
    assert_eq!(rec.summary.updated_at, Timestamp(T0.0 + 5));
    assert_eq!(
        rec.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=11).collect::<Vec<_>>()
    );
    assert_eq!(rec.events[10].data, "{\"n\":5,\"k\":5}");
    assert_eq!(rec.events[5].data, "{\"n\":5,\"k\":0}");
}

/// An append numbered after a seq the journal has moved past ([`Append::after_seq`]) is
/// refused as `Fenced` with nothing written, alone or beside other runs' appends (SQLite
/// groups those into one query): a step's append sent again after its commit's answer was
/// lost is journaled once. The lease stays the writer's, and the next append in the right
/// place is written.
pub async fn an_append_numbered_behind_the_journal_is_refused(h: &dyn Harness) {
    let s = h.fresh().await;
    let ids = create_runs(&s, 4).await;
    let leases = s.acquire("w1", T0, LEASE, 10, None).await.unwrap();
    assert_eq!(leases.len(), 4);
    let step = |n, after, events| step_keeping_the_summary(T0, n, after, false, events);
    for l in &leases {
        assert_eq!(s.append(l, step(1, 0, 2)).await.unwrap(), 2);
    }
    // Alone: the same append again, and another one numbered from the same place.
    let l0 = &leases[0];
    for again in [step(1, 0, 2), step(9, 0, 1), step(9, 1, 3), step(9, 1, 0)] {
        match s.append(l0, again).await {
            Err(StoreError::Fenced { .. }) => {}
            other => panic!("an append behind the journal: {other:?}"),
        }
    }
    // Beside each other: every run's repeat at once, then every run's next step at once.
    let all = |n: i64, after: i64, events: usize| {
        let tasks: Vec<_> = leases
            .iter()
            .map(|l| {
                let (s, l) = (s.clone(), l.clone());
                let a = step(n, after, events);
                tokio::spawn(async move { s.append(&l, a).await })
            })
            .collect();
        async move {
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        }
    };
    // With events and without (a stale summary alone must not be written either).
    for events in [1, 0] {
        for r in all(1, 0, events).await {
            assert!(matches!(r, Err(StoreError::Fenced { .. })), "{r:?}");
        }
    }
    for r in all(2, 2, 1).await {
        assert_eq!(r.unwrap(), 3);
    }
    for id in ids {
        let rec = s.load_run(id).await.unwrap().unwrap();
        assert_eq!(
            rec.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![1, 2, 3],
            "each append written once"
        );
        assert_eq!(rec.summary.blocked_on, "running n2");
    }
}

pub async fn concurrent_appends_serialize(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    let l = s.acquire("w1", T0, LEASE, 1, None).await.unwrap().remove(0);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = s.clone();
        let l = l.clone();
        tasks.push(tokio::spawn(async move {
            s.append(
                &l,
                Append {
                    events: vec![
                        ev("x", Some(&format!("n{i}")), "{}", T0),
                        ev("y", None, "{}", T0),
                    ],
                    patch: patch(RunState::Running, None, T0),
                    applied_commands: vec![],
                    after_seq: None,
                    summary_kept: false,
                },
            )
            .await
            .unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rec = s.load_run(id).await.unwrap().unwrap();
    let seqs: Vec<i64> = rec.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=32).collect::<Vec<_>>());
    // each append's two events are adjacent (atomic)
    for pair in rec.events.chunks(2) {
        assert_eq!((pair[0].kind.as_str(), pair[1].kind.as_str()), ("x", "y"));
    }
}

pub async fn lease_exclusive_until_expiry(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    let a = s.acquire("A", T0, LEASE, 10, None).await.unwrap();
    assert_eq!(a.len(), 1);
    assert!(
        s.acquire("B", T0.plus(Duration::from_secs(5)), LEASE, 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    h.lapse(&s, Duration::from_secs(11)).await;
    let b = s
        .acquire("B", T0.plus(Duration::from_secs(11)), LEASE, 10, None)
        .await
        .unwrap();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].run_id, id);
    assert!(b[0].epoch > a[0].epoch, "takeover bumps the epoch");
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.lease_owner.as_deref(), Some("B"));
}

pub async fn stale_writer_is_fenced(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    let a = s.acquire("A", T0, LEASE, 10, None).await.unwrap().remove(0);
    h.lapse(&s, LEASE * 2).await;
    let b = s
        .acquire("B", T0.plus(LEASE * 2), LEASE, 10, None)
        .await
        .unwrap()
        .remove(0);
    let stale = s
        .append(
            &a,
            Append {
                events: vec![ev("stale", None, "{}", T0)],
                patch: patch(RunState::Running, None, T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            },
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert!(matches!(
        s.release(&a, None).await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(
        !s.renew("A", T0.plus(LEASE * 5))
            .await
            .unwrap()
            .contains(&id)
    );
    s.append(
        &b,
        Append {
            events: vec![ev("fresh", None, "{}", T0)],
            patch: patch(RunState::Running, None, T0),
            applied_commands: vec![],
            after_seq: None,
            summary_kept: false,
        },
    )
    .await
    .unwrap();
    let rec = s.load_run(id).await.unwrap().unwrap();
    let kinds: Vec<_> = rec.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, vec!["fresh"], "the stale write left no trace");
    // a lease of the same owner at an older epoch is fenced too
    let mut old = b.clone();
    old.epoch -= 1;
    assert!(matches!(
        s.append(
            &old,
            Append {
                events: vec![],
                patch: patch(RunState::Running, None, T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            }
        )
        .await,
        Err(StoreError::Fenced { .. })
    ));
}

pub async fn renew_extends_and_release_frees(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    let a = s
        .acquire("A", T0, Duration::from_secs(1), 10, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        s.renew("A", T0.plus(Duration::from_secs(3600)))
            .await
            .unwrap(),
        vec![id]
    );
    assert!(
        s.acquire("B", T0.plus(Duration::from_secs(60)), LEASE, 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    s.release(&a, Some(T0)).await.unwrap();
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.lease_owner, None);
    assert_eq!(s.acquire("B", T0, LEASE, 10, None).await.unwrap().len(), 1);
    assert!(s.renew("A", T0).await.unwrap().is_empty());
}

pub async fn only_due_runs_are_acquired(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    // not due before its creation time
    assert!(
        s.acquire("A", Timestamp(T0.0 - 1), LEASE, 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    let a = s.acquire("A", T0, LEASE, 10, None).await.unwrap().remove(0);
    let later = T0.plus(Duration::from_secs(100));
    s.release(&a, Some(later)).await.unwrap();
    assert!(
        s.acquire("A", T0.plus(Duration::from_secs(50)), LEASE, 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    let b = s
        .acquire("A", later, LEASE, 10, None)
        .await
        .unwrap()
        .remove(0);
    // parked: no timer, only a command wakes it
    s.release(&b, None).await.unwrap();
    let far = T0.plus(Duration::from_secs(1_000_000));
    assert!(
        s.acquire("A", far, LEASE, 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    s.submit_command(id, cmd(far)).await.unwrap();
    assert_eq!(s.acquire("A", far, LEASE, 10, None).await.unwrap().len(), 1);
}

pub async fn terminal_runs_are_never_acquired(h: &dyn Harness) {
    let s = h.fresh().await;
    for state in [
        RunState::Succeeded,
        RunState::RolledBack,
        RunState::Cancelled,
    ] {
        let r = new_run(None, "w", "c", T0);
        s.create_run(r).await.unwrap();
        let l = s.acquire("A", T0, LEASE, 10, None).await.unwrap().remove(0);
        s.append(
            &l,
            Append {
                events: vec![ev("fin", None, "{}", T0)],
                patch: patch(state, Some(T0), T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            },
        )
        .await
        .unwrap();
        s.release(&l, Some(T0)).await.unwrap();
        assert!(
            s.acquire("B", T0.plus(LEASE * 3), LEASE, 10, None)
                .await
                .unwrap()
                .is_empty(),
            "{state}"
        );
    }
}

pub async fn commands_need_no_lease_and_are_acknowledged(h: &dyn Harness) {
    let s = h.fresh().await;
    let r = new_run(None, "w", "c", T0);
    let id = r.id;
    s.create_run(r).await.unwrap();
    let l = s.acquire("A", T0, LEASE, 10, None).await.unwrap().remove(0);
    // an operator writes while A holds the lease
    let c1 = s.submit_command(id, cmd(T0)).await.unwrap();
    let c2 = s.submit_command(id, cmd(T0)).await.unwrap();
    assert!(c2 > c1);
    let p = s.pending_commands(id).await.unwrap();
    assert_eq!(p.iter().map(|c| c.id).collect::<Vec<_>>(), vec![c1, c2]);
    assert_eq!(p[0].requested_by, "alice@host");
    assert!(
        s.load_run(id)
            .await
            .unwrap()
            .unwrap()
            .summary
            .commands_pending
    );
    s.append(
        &l,
        Append {
            events: vec![ev("op", None, "{}", T0)],
            patch: patch(RunState::Unwinding, None, T0),
            applied_commands: vec![c1],
            after_seq: None,
            summary_kept: false,
        },
    )
    .await
    .unwrap();
    assert_eq!(s.pending_commands(id).await.unwrap().len(), 1);
    assert!(
        s.load_run(id)
            .await
            .unwrap()
            .unwrap()
            .summary
            .commands_pending
    );
    s.append(
        &l,
        Append {
            events: vec![],
            patch: patch(RunState::Unwinding, None, T0),
            applied_commands: vec![c2],
            after_seq: None,
            summary_kept: false,
        },
    )
    .await
    .unwrap();
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert!(!rec.summary.commands_pending);
    assert!(rec.commands.iter().all(|c| c.applied_at.is_some()));
    assert!(matches!(
        s.submit_command(Uuid::new_v4(), cmd(T0)).await,
        Err(StoreError::NotFound(_))
    ));
}

pub async fn list_filters_newest_first(h: &dyn Harness) {
    let s = h.fresh().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let r = new_run(
            None,
            if i % 2 == 0 {
                "create-cluster"
            } else {
                "delete-cluster"
            },
            &format!("c{}", i % 3),
            T0.plus(Duration::from_secs(i)),
        );
        ids.push(r.id);
        s.create_run(r).await.unwrap();
    }
    let all = s.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(
        all.iter().map(|r| r.id).collect::<Vec<_>>(),
        ids.iter().rev().cloned().collect::<Vec<_>>()
    );
    let f = RunFilter {
        workflow: Some("create-cluster".into()),
        ..Default::default()
    };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 3);
    let f = RunFilter {
        label: Some(("cluster".into(), "c1".into())),
        ..Default::default()
    };
    assert_eq!(
        s.list_runs(&f)
            .await
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect::<Vec<_>>(),
        vec![ids[4], ids[1]]
    );
    let f = RunFilter {
        since: Some(T0.plus(Duration::from_secs(3))),
        ..Default::default()
    };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 2);
    let f = RunFilter {
        limit: 2,
        ..Default::default()
    };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 2);
    let f = RunFilter {
        states: vec![RunState::Running],
        ..Default::default()
    };
    assert!(s.list_runs(&f).await.unwrap().is_empty());
    let f = RunFilter {
        states: vec![RunState::Pending],
        ..Default::default()
    };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 5);
}

pub async fn recovery_takes_over_every_expired_lease(h: &dyn Harness) {
    let s = h.fresh().await;
    let mut ids = Vec::new();
    for _ in 0..50 {
        let r = new_run(None, "w", "c", T0);
        ids.push(r.id);
        s.create_run(r).await.unwrap();
    }
    let a = s.acquire("A", T0, LEASE, 1000, None).await.unwrap();
    assert_eq!(a.len(), 50);
    assert!(
        s.acquire("B", T0, LEASE, 1000, None)
            .await
            .unwrap()
            .is_empty()
    );
    h.lapse(&s, LEASE * 2).await;
    let b = s
        .acquire("B", T0.plus(LEASE * 2), LEASE, 1000, None)
        .await
        .unwrap();
    let mut got: Vec<_> = b.iter().map(|l| l.run_id).collect();
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    // limit is honoured
    h.lapse(&s, LEASE * 3).await;
    let c = s
        .acquire("C", T0.plus(LEASE * 5), LEASE, 7, None)
        .await
        .unwrap();
    assert_eq!(c.len(), 7);
    // `only` restricts to one run
    h.lapse(&s, LEASE * 5).await;
    let d = s
        .acquire("D", T0.plus(LEASE * 10), LEASE, 1000, Some(ids[3]))
        .await
        .unwrap();
    assert_eq!(d.iter().map(|l| l.run_id).collect::<Vec<_>>(), vec![ids[3]]);
}

pub async fn corrupt_row_is_returned_raw(h: &dyn Harness) {
    let s = h.fresh().await;
    let r1 = new_run(None, "w", "c", T0);
    let r2 = new_run(None, "w", "c", T0);
    let (id1, id2) = (r1.id, r2.id);
    s.create_run(r1).await.unwrap();
    s.create_run(r2).await.unwrap();
    for l in s.acquire("A", T0, LEASE, 10, None).await.unwrap() {
        s.append(
            &l,
            Append {
                events: vec![ev("e", None, r#"{"ok":true}"#, T0)],
                patch: patch(RunState::Running, None, T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            },
        )
        .await
        .unwrap();
    }
    h.corrupt_event(&s, id1, 1, "{not json").await;
    let rec1 = s.load_run(id1).await.unwrap().unwrap();
    assert_eq!(
        rec1.events[0].data, "{not json",
        "the store hands corrupt data back instead of failing"
    );
    let rec2 = s.load_run(id2).await.unwrap().unwrap();
    assert_eq!(rec2.events[0].data, r#"{"ok":true}"#);
    assert_eq!(s.list_runs(&RunFilter::default()).await.unwrap().len(), 2);
}

pub async fn load_runs_returns_each_run_whole(h: &dyn Harness) {
    let s = h.fresh().await;
    let ids = create_runs(&s, 300).await;
    let leases = s.acquire("A", T0, LEASE, 1000, None).await.unwrap();
    for (k, l) in leases.iter().enumerate() {
        let events: Vec<NewEvent> = (0..(k % 3 + 1))
            .map(|j| ev("e", Some("n"), &format!(r#"{{"k":{k},"j":{j}}}"#), T0))
            .collect();
        s.append(
            l,
            Append {
                events,
                patch: patch(RunState::Running, Some(T0), T0),
                applied_commands: vec![],
                after_seq: None,
                summary_kept: false,
            },
        )
        .await
        .unwrap();
    }
    s.submit_command(ids[7], cmd(T0)).await.unwrap();
    let missing = Uuid::new_v4();
    let mut ask = ids.clone();
    ask.push(missing);
    let got = s.load_runs(&ask).await.unwrap();
    assert_eq!(
        got.len(),
        ids.len(),
        "every existing run, and no missing one"
    );
    for rec in &got {
        let one = s.load_run(rec.summary.id).await.unwrap().unwrap();
        assert_eq!(rec, &one, "a batched load equals the single load");
        let seqs: Vec<i64> = rec.events.iter().map(|e| e.seq).collect();
        let want: Vec<i64> = (1..=i64::try_from(seqs.len()).unwrap()).collect();
        assert_eq!(seqs, want, "events in order");
    }
    let seven = got.iter().find(|r| r.summary.id == ids[7]).unwrap();
    assert_eq!(seven.commands.len(), 1);
    assert!(s.load_runs(&[]).await.unwrap().is_empty());
    assert!(s.load_runs(&[missing]).await.unwrap().is_empty());
}

/// Many appends in flight at once (stores group them into shared transactions): each one
/// succeeds or is fenced on its own, and a fenced one leaves no trace.
pub async fn concurrent_appends_are_fenced_one_by_one(h: &dyn Harness) {
    let s = h.fresh().await;
    create_runs(&s, 120).await;
    let a = s.acquire("A", T0, LEASE, 1000, None).await.unwrap();
    assert_eq!(a.len(), 120);
    // B takes every third run over after A's leases lapse; A renews none.
    let later = T0.plus(LEASE * 2);
    h.lapse(&s, LEASE * 2).await;
    let mut taken = std::collections::HashSet::new();
    for l in a.iter().step_by(3) {
        let b = s
            .acquire("B", later, LEASE, 1, Some(l.run_id))
            .await
            .unwrap();
        assert_eq!(b.len(), 1);
        taken.insert(l.run_id);
    }
    let writes = a.iter().map(|l| {
        let s = s.clone();
        let l = l.clone();
        async move {
            let r = s
                .append(
                    &l,
                    Append {
                        events: vec![ev("e", None, "{}", later), ev("f", None, "{}", later)],
                        patch: patch(RunState::Running, None, later),
                        applied_commands: vec![],
                        after_seq: None,
                        summary_kept: false,
                    },
                )
                .await;
            (l.run_id, r)
        }
    });
    for (id, r) in futures::future::join_all(writes).await {
        let rec = s.load_run(id).await.unwrap().unwrap();
        if taken.contains(&id) {
            assert!(
                matches!(r, Err(StoreError::Fenced { .. })),
                "{id}: taken over, so fenced: {r:?}"
            );
            assert!(rec.events.is_empty(), "a fenced append leaves no trace");
        } else {
            assert_eq!(r.unwrap(), 2);
            assert_eq!(rec.events.len(), 2);
            assert_eq!(rec.summary.state, RunState::Running);
        }
    }
}

pub async fn claim_executor_is_reentrant(h: &dyn Harness) {
    let s = h.fresh().await;
    s.claim_executor("A", None).await.unwrap();
    s.claim_executor("A", None).await.unwrap();
}

fn report(subject: &str, at: Timestamp, ok: bool, keep: usize) -> NewReport {
    NewReport {
        kind: "verify".into(),
        subject: subject.into(),
        at,
        ok,
        by: "worker-a".into(),
        data: format!(r#"{{"at":{}}}"#, at.0),
        keep,
    }
}

pub async fn reports_are_kept_newest_first_and_pruned(h: &dyn Harness) {
    let s = h.fresh().await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(
            s.record_report(report(
                "cluster/a",
                T0.plus(Duration::from_secs(i)),
                i % 2 == 0,
                3,
            ))
            .await
            .unwrap(),
        );
    }
    s.record_report(report("cluster/b", T0, false, 3))
        .await
        .unwrap();
    let mut other = report("cluster/a", T0, true, 0);
    other.kind = "other".into();
    s.record_report(other).await.unwrap();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");

    let filter = |subject: Option<&str>, latest_only: bool, limit: usize| ReportFilter {
        kind: "verify".into(),
        subject: subject.map(str::to_string),
        latest_only,
        limit,
    };
    let a = s
        .list_reports(&filter(Some("cluster/a"), false, 0))
        .await
        .unwrap();
    // keep = 3: the oldest of four went.
    assert_eq!(
        a.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![ids[3], ids[2], ids[1]]
    );
    assert_eq!(a[0].at, T0.plus(Duration::from_secs(3)));
    assert!(!a[0].ok && a[1].ok);
    assert_eq!(
        a[0].data,
        format!(r#"{{"at":{}}}"#, a[0].at.0),
        "data byte for byte"
    );
    assert_eq!(a[0].by, "worker-a");
    let latest = s.list_reports(&filter(None, true, 0)).await.unwrap();
    assert_eq!(
        latest
            .iter()
            .map(|r| r.subject.as_str())
            .collect::<Vec<_>>(),
        vec!["cluster/b", "cluster/a"]
    );
    assert_eq!(latest[1].id, ids[3]);
    assert_eq!(
        s.list_reports(&filter(None, false, 2)).await.unwrap().len(),
        2
    );
    let none = s
        .list_reports(&filter(Some("cluster/zz"), false, 0))
        .await
        .unwrap();
    assert!(none.is_empty());
}

pub async fn a_due_schedule_slot_has_exactly_one_claimant(h: &dyn Harness) {
    let s = h.fresh().await;
    let next = T0.plus(Duration::from_secs(600));
    // A new slot is due.
    assert!(s.claim_schedule("verify/a", "w1", T0, next).await.unwrap());
    // Not due again before `next`.
    assert!(
        !s.claim_schedule("verify/a", "w2", T0.plus(Duration::from_secs(599)), next)
            .await
            .unwrap()
    );
    // Another key is its own slot.
    assert!(s.claim_schedule("verify/b", "w2", T0, next).await.unwrap());
    // Due at `next`: of many claimants at once, exactly one wins.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.claim_schedule(
                "verify/a",
                &format!("w{i}"),
                next,
                next.plus(Duration::from_secs(600)),
            )
            .await
            .unwrap()
        }));
    }
    let mut won = 0;
    for t in tasks {
        if t.await.unwrap() {
            won += 1;
        }
    }
    assert_eq!(won, 1, "exactly one claimant of a due slot");
}

pub async fn shared_token_buckets_never_grant_more_than_capacity_plus_refill(h: &dyn Harness) {
    let s = h.fresh().await;
    // New: full. Whole tokens only, up to what was asked.
    let g = s
        .take_tokens("arm/s/write", 4, 10.0, 0.0, T0)
        .await
        .unwrap();
    assert_eq!((g.granted, g.left), (4, 6.0));
    // Many takers at once: together never more than what is left (no refill).
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.take_tokens("arm/s/write", 2, 10.0, 0.0, T0)
                .await
                .unwrap()
                .granted
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 6, "granted exactly what was left");
    let g = s
        .take_tokens("arm/s/write", 1, 10.0, 0.0, T0)
        .await
        .unwrap();
    assert_eq!(g.granted, 0);
    assert!(
        g.next_token_in() >= Duration::from_secs(3600),
        "no refill: never"
    );
    // Another key is another bucket.
    let g = s.take_tokens("arm/s/read", 3, 5.0, 1.0, T0).await.unwrap();
    assert_eq!(g.granted, 3);
}

/// Expand to one `#[tokio::test]` per conformance case for harness expression `$h`.
#[macro_export]
macro_rules! conformance_tests {
    ($h:expr) => {
        $crate::conformance_tests!(@each $h;
            create_and_load, idempotent_create, atomic_append_in_order,
            idempotency_key_is_bound_to_workflow_and_key, one_unfinished_run_per_exclusive_key,
            racing_creates_of_one_exclusive_key_have_one_winner, workers_lease_only_their_targets,
            concurrent_appends_serialize, lease_exclusive_until_expiry, stale_writer_is_fenced,
            a_kept_summary_is_shown_as_written, an_append_numbered_behind_the_journal_is_refused,
            renew_extends_and_release_frees, only_due_runs_are_acquired,
            terminal_runs_are_never_acquired, commands_need_no_lease_and_are_acknowledged,
            list_filters_newest_first, recovery_takes_over_every_expired_lease,
            corrupt_row_is_returned_raw, claim_executor_is_reentrant,
            reports_are_kept_newest_first_and_pruned,
            a_due_schedule_slot_has_exactly_one_claimant,
            shared_token_buckets_never_grant_more_than_capacity_plus_refill,
            load_runs_returns_each_run_whole, concurrent_appends_are_fenced_one_by_one,
            engine_runs_saga_to_completion,
            engine_parks_corrupt_run_and_others_go_on, engine_unwinds_in_reverse,
            engine_pauses_instead_of_unwinding, engine_retry_redrives_a_paused_step,
            engine_cancel_unwinds_a_paused_run, engine_pause_deadline_unwinds_across_a_restart,
            engine_pivot_then_failure_pauses_and_cancel_keeps_the_pivot,
            engine_failure_at_the_pivot_pauses_and_cancel_undoes_what_can_be,
            engine_cancel_of_a_forward_only_run_undoes_nothing
        );
    };
    (@each $h:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let h = $h;
                if let Some(h) = $crate::conformance::Skip::check(h) {
                    $crate::conformance::$name(&h).await;
                }
            }
        )*
    };
}

/// Lets a harness opt out (e.g. Postgres not configured on a laptop).
pub trait Skip: Sized {
    /// `None` to skip (the harness prints why).
    fn check(self) -> Option<Self>;
}

pub use crate::conformance_engine::{
    engine_cancel_of_a_forward_only_run_undoes_nothing, engine_cancel_unwinds_a_paused_run,
    engine_failure_at_the_pivot_pauses_and_cancel_undoes_what_can_be,
    engine_parks_corrupt_run_and_others_go_on, engine_pause_deadline_unwinds_across_a_restart,
    engine_pauses_instead_of_unwinding,
    engine_pivot_then_failure_pauses_and_cancel_keeps_the_pivot,
    engine_retry_redrives_a_paused_step, engine_runs_saga_to_completion, engine_unwinds_in_reverse,
};
