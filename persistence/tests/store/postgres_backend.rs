//! PostgreSQL-specific guarantees beyond the conformance suite: error classification with
//! real server errors, migrations, NOTIFY wake-ups across stores, `SKIP LOCKED` acquisition
//! by competing workers, exact timestamps, and the acquire plan on a large journal.
//!
//! Needs `HCP_TEST_POSTGRES_URL` (each test skips, printing why, without it; with
//! `HCP_REQUIRE_POSTGRES=1` a missing URL fails instead).

#![allow(clippy::unwrap_used)]

use crate::pg_support;

use hcp_persistence::PostgresStore;
use hcp_persistence::error::classify;
use hcp_runtime::store::{Append, NewCommand, NewRun, RunPatch};
use hcp_runtime::{JournalStore, RunFilter, RunState, StoreError, Timestamp};
use pg_support::PgTestDb;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, Executor};
use std::collections::{BTreeMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

const T0: Timestamp = Timestamp(1_800_000_000_123);

fn new_run(at: Timestamp) -> NewRun {
    NewRun {
        id: Uuid::new_v4(),
        workflow: "create-cluster".into(),
        workflow_version: u32::MAX,
        labels: BTreeMap::from([
            ("cluster".to_string(), "demo".to_string()),
            ("odd key \"'".to_string(), "ü".to_string()),
        ]),
        idempotency_key: None,
        exclusive_key: None,
        target: None,
        dag: "{ \"kept\" :  \"verbatim\" }".into(),
        created_at: at,
    }
}

fn patch(state: RunState, wake_at: Option<Timestamp>) -> RunPatch {
    RunPatch {
        state,
        blocked_on: "b".into(),
        current_step: None,
        wake_at,
        updated_at: T0,
    }
}

#[tokio::test]
async fn migrations_are_idempotent_and_recorded() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let schema = db.new_schema();
    let a = PostgresStore::connect_with_schema(db.url(), &schema)
        .await
        .unwrap();
    let latest = PostgresStore::latest_schema_version();
    assert_eq!(a.schema_version().await.unwrap(), latest);
    let id = a.create_run(new_run(T0)).await.unwrap().id();
    let b = PostgresStore::connect_with_schema(db.url(), &schema)
        .await
        .unwrap();
    assert_eq!(b.schema_version().await.unwrap(), latest);
    assert!(b.load_run(id).await.unwrap().is_some());
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(b.pool())
        .await
        .unwrap();
    assert_eq!(applied, latest);
}

/// The clock engines on several hosts keep: the server's current time, not
/// the start of a transaction; this test runs on the server's host, so the two agree.
#[tokio::test]
async fn the_server_clock_is_read_as_it_runs() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let store = PostgresStore::connect_with_schema(db.url(), &db.new_schema())
        .await
        .unwrap();
    let host = || hcp_runtime::Clock::now(&hcp_runtime::SystemClock).0;
    let first = store.server_now().await.unwrap().unwrap();
    assert!(
        (first.0 - host()).abs() < 2_000,
        "{first} vs this host's {}",
        host()
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = store.server_now().await.unwrap().unwrap();
    assert!(second.0 - first.0 >= 50, "{first} then {second}");
}

#[tokio::test]
async fn schema_names_are_validated() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    for bad in ["", "Public", "a-b", "x\"; DROP TABLE runs; --", "1abc"] {
        let err = PostgresStore::connect_with_schema(db.url(), bad)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Permanent(_)), "{bad}: {err}");
    }
}

#[tokio::test]
async fn times_labels_and_text_round_trip_exactly() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let (s, _) = db.fresh_store().await;
    for at in [
        T0,
        Timestamp(0),
        Timestamp(-1),
        Timestamp(1),
        Timestamp(4_102_444_800_999),
        Timestamp(253_402_300_799_999), // 9999-12-31T23:59:59.999Z
        Timestamp(i64::MAX),            // "never", as a saturating add produces
        Timestamp(i64::MIN),
    ] {
        let r = new_run(at);
        let id = r.id;
        s.create_run(r).await.unwrap();
        let rec = s.load_run(id).await.unwrap().unwrap();
        assert_eq!(rec.summary.created_at, at);
        assert_eq!(rec.summary.wake_at, Some(at));
        assert_eq!(rec.summary.workflow_version, u32::MAX);
        assert_eq!(rec.summary.labels.get("odd key \"'").unwrap(), "ü");
        assert_eq!(rec.dag, "{ \"kept\" :  \"verbatim\" }");
    }
    let f = RunFilter {
        label: Some(("odd key \"'".into(), "ü".into())),
        since: Some(T0),
        ..Default::default()
    };
    assert_eq!(s.list_runs(&f).await.unwrap().len(), 4);
    // Beyond +/-10^15 ms a time is "never": stored as infinity, read back saturated.
    let r = new_run(Timestamp(1_000_000_000_000_001));
    let id = r.id;
    s.create_run(r).await.unwrap();
    let rec = s.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.created_at, Timestamp(i64::MAX));
    // and such a run is not due at any real time
    assert!(
        s.acquire(
            "w",
            Timestamp(253_402_300_799_999),
            Duration::from_secs(1),
            100,
            Some(id)
        )
        .await
        .unwrap()
        .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_wakes_other_stores() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let schema = db.new_schema();
    let watcher = PostgresStore::connect_with_schema(db.url(), &schema)
        .await
        .unwrap();
    let writer = PostgresStore::connect_with_schema(db.url(), &schema)
        .await
        .unwrap();
    let mut rx = watcher.subscribe();
    rx.borrow_and_update();
    let id = writer.create_run(new_run(T0)).await.unwrap().id();
    tokio::time::timeout(Duration::from_secs(5), rx.changed())
        .await
        .expect("create_run in another store wakes this one")
        .unwrap();
    rx.borrow_and_update();
    let cmd = NewCommand {
        command: "{}".into(),
        requested_by: "op".into(),
        reason: "r".into(),
        requested_at: T0,
    };
    writer.submit_command(id, cmd).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), rx.changed())
        .await
        .expect("submit_command in another store wakes this one")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn competing_workers_never_share_a_run() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let schema = db.new_schema();
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(Arc::new(
            PostgresStore::connect_with_schema(db.url(), &schema)
                .await
                .unwrap(),
        ));
    }
    for _ in 0..200 {
        stores[0].create_run(new_run(T0)).await.unwrap();
    }
    // 4 stores x 4 workers, each acquiring 7 at a time until nothing is left.
    let mut tasks = tokio::task::JoinSet::new();
    for (i, s) in stores.iter().enumerate() {
        for w in 0..4 {
            let s = s.clone();
            tasks.spawn(async move {
                let owner = format!("w{i}-{w}");
                let mut got = Vec::new();
                loop {
                    let l = s
                        .acquire(&owner, T0, Duration::from_secs(60), 7, None)
                        .await
                        .unwrap();
                    if l.is_empty() {
                        break;
                    }
                    got.extend(l);
                }
                got
            });
        }
    }
    let mut all = Vec::new();
    while let Some(r) = tasks.join_next().await {
        all.extend(r.unwrap());
    }
    let ids: HashSet<_> = all.iter().map(|l| l.run_id).collect();
    assert_eq!(all.len(), 200, "each run leased exactly once");
    assert_eq!(ids.len(), 200);
    // every lease is usable by its owner
    for l in all.iter().take(20) {
        stores[1]
            .append(
                l,
                Append {
                    events: vec![],
                    patch: patch(RunState::Running, None),
                    applied_commands: vec![],
                    after_seq: None,
                    summary_kept: false,
                },
            )
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_classified_by_sqlstate() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let (s, schema) = db.fresh_store().await;
    let id = s.create_run(new_run(T0)).await.unwrap().id();

    // 23505 unique violation: permanent.
    let mut again = new_run(T0);
    again.id = id;
    assert!(matches!(
        s.create_run(again).await.unwrap_err(),
        StoreError::Permanent(_)
    ));

    // 40P01 deadlock: transient. Two transactions lock two rows in opposite orders.
    let other = s.create_run(new_run(T0)).await.unwrap().id();
    let opts = PgConnectOptions::from_str(db.url())
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let mut c1 = sqlx::PgConnection::connect_with(&opts).await.unwrap();
    let mut c2 = sqlx::PgConnection::connect_with(&opts).await.unwrap();
    let lock = "UPDATE runs SET blocked_on = 'x' WHERE id = $1";
    c1.execute("BEGIN").await.unwrap();
    c2.execute("BEGIN").await.unwrap();
    sqlx::query(lock).bind(id).execute(&mut c1).await.unwrap();
    sqlx::query(lock)
        .bind(other)
        .execute(&mut c2)
        .await
        .unwrap();
    let t1 = tokio::spawn(async move {
        let r = sqlx::query(lock).bind(other).execute(&mut c1).await;
        (r, c1)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r2 = sqlx::query(lock).bind(id).execute(&mut c2).await;
    let (r1, _c1) = t1.await.unwrap();
    let err = r1
        .err()
        .or(r2.err())
        .expect("one of them is the deadlock victim");
    assert_eq!(
        err.as_database_error().and_then(|e| e.code()).as_deref(),
        Some("40P01")
    );
    assert!(matches!(classify(err), StoreError::Transient(_)));

    // 57P01 admin shutdown (a server restart or a DBA killing the session): transient.
    let mut victim = sqlx::PgConnection::connect_with(&opts).await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut victim)
        .await
        .unwrap();
    let mut killer = sqlx::PgConnection::connect_with(&opts).await.unwrap();
    let _: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&mut killer)
        .await
        .unwrap();
    let err = sqlx::query("SELECT 1")
        .execute(&mut victim)
        .await
        .unwrap_err();
    assert!(matches!(classify(err), StoreError::Transient(_)));

    // Pool exhausted: transient.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(200))
        .connect_with(opts.clone())
        .await
        .unwrap();
    let _held = pool.acquire().await.unwrap();
    let err = pool.acquire().await.unwrap_err();
    assert!(matches!(classify(err), StoreError::Transient(_)));

    // Nothing listening: a connection error, transient.
    let err = sqlx::PgConnection::connect("postgres://postgres@127.0.0.1:1/x")
        .await
        .unwrap_err();
    assert!(matches!(classify(err), StoreError::Transient(_)));

    // 42P01 undefined table (schema mismatch): permanent.
    let err = sqlx::query("SELECT * FROM no_such_table")
        .execute(&mut killer)
        .await
        .unwrap_err();
    assert!(matches!(classify(err), StoreError::Permanent(_)));
}

#[tokio::test]
async fn acquire_uses_the_partial_indexes_on_a_large_journal() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let (s, _) = db.fresh_store().await;
    // 10,000 finished runs and a handful of live ones, inserted in bulk.
    sqlx::query(
        "INSERT INTO runs (id, workflow, workflow_version, state, blocked_on, created_at, \
                           updated_at, wake_at) \
         SELECT gen_random_uuid(), 'w', 1, CASE WHEN i % 1000 = 0 THEN 'waiting' \
                ELSE 'succeeded' END, '', now(), now(), now() \
         FROM generate_series(1, 10000) AS i",
    )
    .execute(s.pool())
    .await
    .unwrap();
    sqlx::query("ANALYZE runs").execute(s.pool()).await.unwrap();
    let now = Timestamp(i64::MAX / 1_000_000);
    let got = s
        .acquire("w", now, Duration::from_secs(10), 100, None)
        .await
        .unwrap();
    assert_eq!(got.len(), 10);
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN SELECT id FROM runs \
         WHERE state NOT IN ('succeeded', 'rolled-back', 'cancelled') \
           AND (wake_at <= hcp_ts($1) OR commands_pending) \
         ORDER BY coalesce(wake_at, hcp_ts($1)), id LIMIT 100 FOR UPDATE SKIP LOCKED",
    )
    .bind(now.0)
    .fetch_all(s.pool())
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("runs_due"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

/// A lone append goes over one kept connection (no pool ping, one warm
/// backend). When the server drops that connection, at most the next append fails, and
/// transiently (nothing written: the engine retries it); the one after connects afresh,
/// and the run's journal stays contiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_append_survives_its_connection_being_dropped() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let schema = db.new_schema();
    let app = format!("lone_{}", Uuid::new_v4().simple());
    let sep = if db.url().contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}application_name={app}", db.url());
    let store = PostgresStore::connect_with_schema(&url, &schema)
        .await
        .unwrap();
    store.create_run(new_run(T0)).await.unwrap();
    let lease = store
        .acquire("w", T0, Duration::from_secs(60), 1, None)
        .await
        .unwrap()
        .remove(0);
    let step = |n: u32| Append {
        events: vec![hcp_runtime::store::NewEvent {
            kind: "node_started".into(),
            node: Some(format!("n{n}")),
            data: format!("{{\"type\":\"node_started\",\"node\":\"n{n}\",\"attempt\":1}}"),
            at: T0,
        }],
        patch: patch(RunState::Running, None),
        applied_commands: vec![],
        after_seq: None,
        summary_kept: false,
    };
    let first = store.append(&lease, step(1)).await.unwrap();

    let mut killer = db.connect().await;
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE application_name = $1 AND query LIKE 'WITH r AS%'",
    )
    .bind(&app)
    .fetch_all(&mut killer)
    .await
    .unwrap();
    assert_eq!(killed, vec![true], "the lone append's one connection");
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut seq = first;
    match store.append(&lease, step(2)).await {
        Ok(s) => seq = s,
        Err(e) => assert!(matches!(e, StoreError::Transient(_)), "{e:?}"),
    }
    let after = store.append(&lease, step(3)).await.unwrap();
    assert_eq!(after, seq + 1, "no event lost or doubled");
    let events = store.load_run(lease.run_id).await.unwrap().unwrap().events;
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=after).collect::<Vec<_>>());
}

/// Schema v8: a step whose run keeps its state and stays due is written by
/// inserting its events alone. Views still show its summary; a writer whose view is behind
/// the journal (an append already written, its answer lost) or whose lease was taken over
/// writes nothing and hears `Fenced`; and the previous binary, which allocates seqs from
/// `runs.last_seq`, continues such a journal without a gap or a clash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_keeps_the_summary_only_inserts_and_stays_fenced() {
    let Some(db) = PgTestDb::from_env() else {
        return;
    };
    let schema = db.new_schema();
    let store = PostgresStore::connect_with_schema(db.url(), &schema)
        .await
        .unwrap();
    let id = store.create_run(new_run(T0)).await.unwrap().id();
    let lease = store
        .acquire("w1", T0, Duration::from_millis(50), 1, None)
        .await
        .unwrap()
        .remove(0);
    let step = |n: i64, after: i64, kept: bool| {
        hcp_runtime::conformance::step_keeping_the_summary(T0, n, after, kept, 2)
    };
    let row = |store: &PostgresStore| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_as::<_, (String, Option<String>, i64)>(
                "SELECT blocked_on, current_step, hcp_ms(updated_at) FROM runs WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    // The first append after an acquisition writes the row.
    assert_eq!(store.append(&lease, step(1, 0, false)).await.unwrap(), 2);
    assert_eq!(
        row(&store).await,
        ("running n1".into(), Some("n1".into()), T0.0 + 1)
    );
    // The next ones only insert: the row is untouched, the views show the new summary.
    assert_eq!(store.append(&lease, step(2, 2, true)).await.unwrap(), 4);
    assert_eq!(store.append(&lease, step(3, 4, true)).await.unwrap(), 6);
    assert_eq!(
        row(&store).await,
        ("running n1".into(), Some("n1".into()), T0.0 + 1)
    );
    let rec = store.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.blocked_on, "running n3");
    assert_eq!(rec.summary.current_step.as_deref(), Some("n3"));
    assert_eq!(rec.summary.updated_at, Timestamp(T0.0 + 3));
    let listed = store.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(listed[0].blocked_on, "running n3");
    assert_eq!(
        rec.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=6).collect::<Vec<_>>()
    );

    // The same append again (its answer lost): refused, nothing doubled.
    for kept in [true, false] {
        let again = store.append(&lease, step(3, 4, kept)).await;
        assert!(matches!(again, Err(StoreError::Fenced { .. })), "{again:?}");
    }
    // A summary-only append (no events) makes the row current again.
    let mut only = step(4, 6, false);
    only.events.clear();
    assert_eq!(store.append(&lease, only).await.unwrap(), 6);
    let rec = store.load_run(id).await.unwrap().unwrap();
    assert_eq!(rec.summary.blocked_on, "running n4");
    assert_eq!(rec.events.len(), 6);

    // Taken over: the old holder's insert-only step is fenced by the lease, not by a seq.
    tokio::time::sleep(Duration::from_millis(80)).await;
    let taken = store
        .acquire(
            "w2",
            Timestamp(T0.0 + 10),
            Duration::from_secs(60),
            1,
            Some(id),
        )
        .await
        .unwrap()
        .remove(0);
    let stale = store.append(&lease, step(5, 6, true)).await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert_eq!(store.load_run(id).await.unwrap().unwrap().events.len(), 6);
    assert_eq!(store.append(&taken, step(5, 6, false)).await.unwrap(), 8);
    assert_eq!(store.append(&taken, step(6, 8, true)).await.unwrap(), 10);

    // The previous binary's append (schema v7's statement, `last_seq = last_seq + n`)
    // continues after the events this binary numbered itself.
    let old: i64 = sqlx::query_scalar(
        "WITH r AS (UPDATE runs SET blocked_on = 'old binary', last_seq = last_seq + 1 \
                    WHERE id = $1 AND lease_owner = 'w2' RETURNING last_seq), \
              ins AS (INSERT INTO events (run_id, seq, kind, node, data, at) \
                      SELECT $1, r.last_seq, 'node_started', 'old', '{}', now() FROM r) \
         SELECT last_seq FROM r",
    )
    .bind(id)
    .fetch_one(store.pool())
    .await
    .unwrap();
    assert_eq!(old, 11);
    let rec = store.load_run(id).await.unwrap().unwrap();
    assert_eq!(
        rec.summary.blocked_on, "old binary",
        "its row wins over older steps"
    );
    assert_eq!(
        rec.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=11).collect::<Vec<_>>()
    );
}
