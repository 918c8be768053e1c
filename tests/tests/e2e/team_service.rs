//! Running hcp-workflow as a team's service, with real processes:
//! - §5 drain: a worker SIGTERMed in the middle of a step finishes that step, journals it,
//!   releases the run and exits 0; the next worker goes on from the next step, and every
//!   step's side effect happened once. `ui` exits promptly (0) on SIGTERM;
//! - §3 the worker's `/healthz`, `/readyz` (which follows its lease renewals) and `/metrics`,
//!   and its one log line per run at the default log level;
//! - §8 `migrate` says from which schema version to which; every other command refuses a
//!   schema older or newer than it knows (exit 2, naming both and what to run); on Postgres
//!   only `migrate` creates the schema; `compat` lists the unfinished runs naming actions
//!   this binary does not know (exit 3).

#![allow(clippy::unwrap_used)]

// In this test binary (they run beside each other, not one after another): §8's rolling
// upgrade and §9's team defaults.
#[path = "team_service/rolling_upgrade.rs"]
mod rolling_upgrade;
#[path = "team_service/team_defaults.rs"]
mod team_defaults;

use hcp_e2e_tests::cluster::run;
use hcp_e2e_tests::http_get as get;
use hcp_e2e_tests::{Proc, document, postgres_url, scratch};
use hcp_runtime::testkit::read_lines;
use std::path::Path;
use std::time::{Duration, Instant};

fn sqlite(p: &Path) -> String {
    format!("sqlite://{}", p.display())
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn wait_for(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    hcp_e2e_tests::wait_until(what, timeout, Duration::from_millis(50), f);
}

/// The run id of `selftest`'s first line (`run <id>`).
fn run_of(out: &str) -> String {
    hcp_e2e_tests::run_id(out)
}

// ---------------------------------------------------------------------------------------
// §5 Drain
// ---------------------------------------------------------------------------------------

#[test]
fn a_worker_sigtermed_mid_step_finishes_it_and_the_next_worker_goes_on() {
    let dir = scratch("drain");
    let db = sqlite(&dir.join("j.db"));
    let world = dir.join("world");
    let world_s = world.to_str().unwrap();
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "selftest",
            "--detach",
            "--world",
            world_s,
            "--prefix",
            "d.",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let id = run_of(&out);
    // `b1` takes 3 s after its side effect: SIGTERM lands in the middle of it.
    let faults = r#"{"slow_ms": {"b1": 3000}}"#;
    let worker = [
        "--database",
        &db,
        "worker",
        "--world",
        world_s,
        "--grace",
        "10s",
    ];
    let w1 = Proc::spawn_without(
        &dir,
        &worker,
        &[("HCP_SAMPLE_FAULTS", faults), ("HCP_POLL_MS", "50")],
        &["RUST_LOG"],
    );
    let effects = world.join("effects.log");
    wait_for("b1's side effect", Duration::from_secs(20), || {
        read_lines(&effects)
            .iter()
            .any(|l| l == "effect d.b1 create")
    });
    let t0 = Instant::now();
    w1.signal("TERM");
    let (code, _, err) = w1.finish(Duration::from_secs(20));
    let took = t0.elapsed();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(9),
        "it waited for the step in flight (about 3 s), within the grace period: {took:?}\n{err}"
    );
    assert!(err.contains("draining for at most 10s"), "{err}");
    // The default log level (RUST_LOG unset) says which run it picked up and released.
    assert!(
        err.contains("picked up run") && err.contains(&id),
        "one line per run picked up at the default log level: {err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("released run") && l.contains("shutdown")),
        "{err}"
    );
    // The step's outcome is journaled, nothing after it started, and the run is free.
    let fx = read_lines(&effects);
    assert!(!fx.iter().any(|l| l.starts_with("effect d.c ")), "{fx:?}");
    let rt = rt();
    let store = rt.block_on(hcp_persistence::open(&db)).unwrap();
    let run_id: hcp_runtime::RunId = id.parse().unwrap();
    let rec = rt.block_on(store.load_run(run_id)).unwrap().unwrap();
    assert!(
        rec.events
            .iter()
            .any(|e| e.kind == "node_succeeded" && e.node.as_deref() == Some("b1")),
        "b1's outcome was journaled by the draining worker"
    );
    assert!(rec.summary.lease_owner.is_none(), "released");
    assert!(!rec.summary.state.is_terminal());

    // The next worker goes on from the next step.
    let w2 = Proc::spawn(&dir, &worker, &[("HCP_POLL_MS", "50")]);
    wait_for("the run succeeds", Duration::from_secs(20), || {
        rt.block_on(store.load_run(run_id))
            .unwrap()
            .is_some_and(|r| r.summary.state == hcp_runtime::RunState::Succeeded)
    });
    w2.signal("TERM");
    let (code, _, err) = w2.finish(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    let fx = read_lines(&effects);
    for n in hcp_runtime::testkit::SAMPLE_NODES {
        let line = format!("effect d.{n} create");
        assert_eq!(fx.iter().filter(|l| **l == line).count(), 1, "{fx:?}");
    }
    assert!(
        !fx.iter().any(|l| l.ends_with(" exists")),
        "no step ran twice: {fx:?}"
    );
}

#[test]
fn ui_exits_promptly_on_sigterm() {
    use std::io::{Read, Write};
    let dir = scratch("ui-term");
    let db = sqlite(&dir.join("j.db"));
    let (code, _, err) = run(&dir, &["--database", &db, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");
    let mut ui = Proc::spawn(
        &dir,
        &["--database", &db, "ui", "--listen", "127.0.0.1:0"],
        &[],
    );
    let addr = ui.ui_url().trim_start_matches("http://").to_string();
    // A browser's keep-alive connection, idle after one request, must not hold the exit.
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 512];
    let n = conn.read(&mut buf).unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    let t0 = Instant::now();
    ui.signal("TERM");
    let (code, _, err) = ui.finish(Duration::from_secs(15));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "exits promptly: {:?}",
        t0.elapsed()
    );
    assert!(err.contains("ui stopped"), "{err}");
}

// ---------------------------------------------------------------------------------------
// §3 Worker endpoints
// ---------------------------------------------------------------------------------------

#[test]
fn worker_endpoints_answer_and_readiness_follows_lease_renewals() {
    let dir = scratch("endpoints");
    let path = dir.join("j.db");
    let db = sqlite(&path);
    let world = dir.join("world");
    let world_s = world.to_str().unwrap();
    let w = Proc::spawn(
        &dir,
        &[
            "--database",
            &db,
            "worker",
            "--world",
            world_s,
            "--listen-health",
            "127.0.0.1:0",
        ],
        &[("HCP_LEASE_TTL_MS", "1500"), ("HCP_POLL_MS", "50")],
    );
    let mut base = String::new();
    wait_for("the endpoints' address", Duration::from_secs(20), || {
        let err = w.stderr();
        if let Some(l) = err.lines().find_map(|l| {
            l.split_once("serves /healthz, /readyz and /metrics on ")
                .map(|(_, u)| u)
        }) {
            base = l.trim_end_matches('/').to_string();
            true
        } else {
            false
        }
    });
    assert_eq!(get(&format!("{base}/healthz")), (200, "ok\n".into()));
    wait_for("ready", Duration::from_secs(10), || {
        get(&format!("{base}/readyz")).0 == 200
    });
    let (_, body) = get(&format!("{base}/readyz"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["ready"], true, "{v}");
    assert_eq!(v["checks"]["journal"]["ok"], true, "{v}");
    assert_eq!(v["checks"]["leases"]["ok"], true, "{v}");

    // A run through this worker shows in its metrics: the journal's and its own.
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "selftest",
            "--detach",
            "--world",
            world_s,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let mut metrics = String::new();
    wait_for("the run in the metrics", Duration::from_secs(20), || {
        metrics = get(&format!("{base}/metrics")).1;
        metrics.contains("hcp_workflow_runs{state=\"succeeded\"} 1")
    });
    for series in [
        "hcp_workflow_worker_info{",
        "hcp_workflow_worker_runs_leased_total 1",
        "hcp_workflow_worker_leases_renew 1",
        "hcp_workflow_worker_held_runs 0",
        "hcp_workflow_worker_draining 0",
        "hcp_workflow_step_duration_seconds_count{phase=\"action\"} 5",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    ] {
        assert!(metrics.contains(series), "{series} in:\n{metrics}");
    }

    // The journal takes no write of this worker (another process holds its write lock):
    // its leases stop renewing and it is not ready; once the lock goes, it is ready again.
    let rt = rt();
    let mut lock = rt.block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&db).await.unwrap();
        sqlx::query("BEGIN EXCLUSIVE")
            .execute(&mut c)
            .await
            .unwrap();
        c
    });
    wait_for(
        "not ready while renewals fail",
        Duration::from_secs(8),
        || get(&format!("{base}/readyz")).0 == 503,
    );
    let (_, body) = get(&format!("{base}/readyz"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["checks"]["leases"]["ok"], false, "{v}");
    assert!(
        v["checks"]["leases"]["detail"]
            .as_str()
            .unwrap()
            .contains("no lease renewal succeeded"),
        "{v}"
    );
    rt.block_on(async {
        sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
    });
    drop(lock);
    wait_for("ready again", Duration::from_secs(15), || {
        get(&format!("{base}/readyz")).0 == 200
    });
    w.signal("TERM");
    let (code, _, err) = w.finish(Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_taken_health_port_is_refused_before_the_worker_starts() {
    let dir = scratch("endpoints-taken");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let db = sqlite(&dir.join("j.db"));
    let (code, out, err) = run(
        &dir,
        &["--database", &db, "worker", "--listen-health", &addr],
        &[],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!("--listen-health {addr}: cannot listen there")),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// §8 Schema and code compatibility
// ---------------------------------------------------------------------------------------

/// A SQLite journal migrated by every migration of this tree but the last (as an older
/// binary left it); returns that older version.
fn older_sqlite_journal(path: &Path) -> i64 {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../persistence/migrations/sqlite");
    let mut files: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    files.pop();
    let older = path.with_extension("migrations");
    std::fs::create_dir_all(&older).unwrap();
    for f in &files {
        std::fs::copy(f, older.join(f.file_name().unwrap())).unwrap();
    }
    let version: i64 = files
        .last()
        .and_then(|f| f.file_name()?.to_str()?.split('_').next()?.parse().ok())
        .unwrap();
    rt().block_on(async {
        let m = sqlx::migrate::Migrator::new(older.as_path()).await.unwrap();
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true);
        let pool = sqlx::SqlitePool::connect_with(opts).await.unwrap();
        m.run(&pool).await.unwrap();
        pool.close().await;
    });
    version
}

#[test]
fn migrate_says_from_which_version_to_which_and_other_schemas_are_refused() {
    let dir = scratch("schema");
    let latest = hcp_persistence::SqliteStore::latest_schema_version();

    // A fresh file: created.
    let fresh = sqlite(&dir.join("fresh.db"));
    let (code, out, err) = run(&dir, &["--database", &fresh, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "created the journal at {fresh}: schema version {latest}"
        )),
        "{out}"
    );
    let (code, out, err) = run(
        &dir,
        &["--database", &fresh, "migrate", "--output", "json"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let doc = document(&out, "Migration");
    assert_eq!(doc["from"], latest, "{doc}");
    assert_eq!(doc["to"], latest, "{doc}");
    assert_eq!(doc["changed"], false, "{doc}");

    // An older journal: every command but `migrate` refuses it, saying what to run.
    let older_path = dir.join("older.db");
    let older_version = older_sqlite_journal(&older_path);
    let older = sqlite(&older_path);
    for cmd in [
        &["worker"][..],
        &["list"][..],
        &["selftest", "--detach"][..],
    ] {
        let mut a = vec!["--database", older.as_str()];
        a.extend_from_slice(cmd);
        let (code, out, err) = run(&dir, &a, &[]);
        assert_eq!(code, 2, "{cmd:?}: {out}{err}");
        assert!(
            err.contains(&format!(
                "has schema version {older_version}, older than this binary's {latest}"
            )) && err.contains(&format!("hcp-workflow --database '{older}' migrate")),
            "{cmd:?}: {err}"
        );
    }
    let (code, out, err) = run(
        &dir,
        &["--database", &older, "--output", "json", "worker"],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    let doc = document(&out, "Error");
    assert_eq!(doc["error"]["reason"], "SchemaMismatch", "{doc}");
    assert_eq!(
        doc["error"]["details"]["journal_schema"], older_version,
        "{doc}"
    );
    let (code, out, err) = run(&dir, &["--database", &older, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "migrated the journal at {older} from schema version {older_version} to {latest}"
        )),
        "{out}"
    );
    let (code, _, err) = run(&dir, &["--database", &older, "list"], &[]);
    assert_eq!(code, 0, "{err}");

    // A newer journal (a newer binary migrated it): refused, `migrate` included.
    let newer_path = dir.join("newer.db");
    let newer = sqlite(&newer_path);
    let (code, _, err) = run(&dir, &["--database", &newer, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");
    rt().block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&newer).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (9999, 'from the future', 1, x'00', 0)",
        )
        .execute(&mut c)
        .await
        .unwrap();
    });
    for cmd in [&["worker"][..], &["list"][..], &["migrate"][..]] {
        let mut a = vec!["--database", newer.as_str()];
        a.extend_from_slice(cmd);
        let (code, out, err) = run(&dir, &a, &[]);
        assert_eq!(code, 2, "{cmd:?}: {out}{err}");
        assert!(
            err.contains(&format!(
                "has schema version 9999, newer than this binary knows ({latest})"
            )),
            "{cmd:?}: {err}"
        );
    }
}

#[test]
fn on_postgres_only_migrate_creates_the_schema() {
    let Some(base) = postgres_url() else { return };
    let db = hcp_e2e_tests::fresh_postgres_unmigrated_blocking(&base);
    let dir = scratch("schema-pg");
    for cmd in [&["worker"][..], &["selftest", "--detach"][..]] {
        let mut a = vec!["--database", db.as_str()];
        a.extend_from_slice(cmd);
        let (code, out, err) = run(&dir, &a, &[]);
        assert_eq!(code, 2, "{cmd:?}: {out}{err}");
        assert!(
            err.contains("holds no hcp-workflow journal yet") && err.contains("migrate"),
            "{cmd:?}: {err}"
        );
    }
    let latest = hcp_persistence::PostgresStore::latest_schema_version();
    let (code, out, err) = run(&dir, &["--database", &db, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("schema version {latest}")) && out.starts_with("created"),
        "{out}"
    );
    let world = dir.join("world");
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "selftest",
            "--detach",
            "--world",
            world.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn compat_lists_the_unfinished_runs_naming_unknown_actions() {
    let dir = scratch("compat");
    let db = sqlite(&dir.join("j.db"));
    let world = dir.join("world");
    let world_s = world.to_str().unwrap();
    // One finished run, one not started yet.
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "selftest",
            "--world",
            world_s,
            "--prefix",
            "f.",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "selftest",
            "--detach",
            "--world",
            world_s,
            "--prefix",
            "p.",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let pending = run_of(&out);
    let (code, out, err) = run(&dir, &["--database", &db, "compat"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("compatible: ") && out.contains("all 1 unfinished run(s)"),
        "{out}"
    );

    // Both runs' DAGs name an action this binary does not know (as if a newer binary had
    // started them): only the unfinished one matters.
    rt().block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::SqliteConnection::connect(&db).await.unwrap();
        sqlx::query("UPDATE run_dags SET dag = replace(dag, '\"test.step\"', '\"test.renamed\"')")
            .execute(&mut c)
            .await
            .unwrap();
    });
    let (code, out, err) = run(&dir, &["--database", &db, "compat"], &[]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        out.contains("not compatible: 1 of 1 unfinished run(s)"),
        "{out}"
    );
    assert!(out.contains("c (action test.renamed)"), "{out}");
    let (code, out, err) = run(
        &dir,
        &["--database", &db, "compat", "--output", "json"],
        &[],
    );
    assert_eq!(code, 3, "{err}");
    let doc = document(&out, "CompatReport");
    assert_eq!(doc["compatible"], false, "{doc}");
    assert_eq!(doc["unfinished_runs"], 1, "{doc}");
    let items = doc["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{doc}");
    assert_eq!(items[0]["run_id"], pending.as_str(), "{doc}");
    assert_eq!(
        items[0]["unknown_steps"].as_array().unwrap().len(),
        5,
        "{doc}"
    );
    assert_eq!(
        items[0]["unknown_steps"][0]["action"], "test.renamed",
        "{doc}"
    );

    // No journal: nothing to check (exit 2), and nothing is created.
    let missing = dir.join("missing.db");
    let (code, _, err) = run(&dir, &["--database", &sqlite(&missing), "compat"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(!missing.exists());
}

// ---------------------------------------------------------------------------------------
// §7 Pooled Postgres
// ---------------------------------------------------------------------------------------

/// The pooler's URL (`HCP_TEST_PGBOUNCER_URL`, PgBouncer in transaction mode: `.ci/pgbouncer.sh`
/// starts one), or `None` with a note (a panic under `HCP_REQUIRE_PGBOUNCER=1`).
fn pgbouncer_url() -> Option<String> {
    match std::env::var("HCP_TEST_PGBOUNCER_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var("HCP_REQUIRE_PGBOUNCER").as_deref() != Ok("1"),
                "HCP_REQUIRE_PGBOUNCER=1 but HCP_TEST_PGBOUNCER_URL is not set"
            );
            eprintln!("skipped: HCP_TEST_PGBOUNCER_URL not set (run .ci/pgbouncer.sh)");
            None
        }
    }
}

/// A worker, the CLI and the UI all reach the journal through PgBouncer in
/// transaction mode; only `migrate` goes to the server itself (through the pooler it is
/// refused, exit 2). The worker says at startup that it polls (no LISTEN through a pooler).
#[test]
fn the_worker_the_cli_and_the_ui_work_through_pgbouncer_in_transaction_mode() {
    let Some(server) = postgres_url() else { return };
    let Some(pooler) = pgbouncer_url() else {
        return;
    };
    let direct = hcp_e2e_tests::fresh_postgres_unmigrated_blocking(&server);
    let name = direct.rsplit_once('/').unwrap().1.to_string();
    let pooled = format!(
        "{}/{name}?pooler=transaction",
        pooler.rsplit_once('/').unwrap().0
    );
    let dir = scratch("pgbouncer");
    // Migrations never go through the pooler.
    let (code, out, err) = run(&dir, &["--database", &pooled, "migrate"], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("never through a transaction pooler"), "{err}");
    let (code, _, err) = run(&dir, &["--database", &direct, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");

    let world = dir.join("world");
    let world_s = world.to_str().unwrap();
    let mut runs = Vec::new();
    for i in 0..3 {
        let prefix = format!("p{i}.");
        let (code, out, err) = run(
            &dir,
            &[
                "--database",
                &pooled,
                "selftest",
                "--detach",
                "--world",
                world_s,
                "--prefix",
                &prefix,
            ],
            &[],
        );
        assert_eq!(code, 0, "{out}{err}");
        runs.push(run_of(&out));
    }
    let mut workers: Vec<Proc> = (0..2)
        .map(|_| {
            Proc::spawn(
                &dir,
                &["--database", &pooled, "worker", "--world", world_s],
                &[("HCP_POLL_MS", "100"), ("RUST_LOG", "info")],
            )
        })
        .collect();
    let mut ui = Proc::spawn(
        &dir,
        &["--database", &pooled, "ui", "--listen", "127.0.0.1:0"],
        &[],
    );
    let base = ui.ui_url();
    wait_for("every run succeeds", Duration::from_secs(60), || {
        let (code, out, _) = run(
            &dir,
            &["--database", &pooled, "--output", "json", "list"],
            &[],
        );
        code == 0
            && hcp_e2e_tests::items(&out, "RunList")
                .iter()
                .filter(|r| r["state"] == "succeeded")
                .count()
                == 3
    });
    // Reads and operator views through the pooler.
    for r in &runs {
        let (code, out, err) = run(
            &dir,
            &["--database", &pooled, "--output", "json", "show", r],
            &[],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(document(&out, "Run")["state"], "succeeded");
        let (code, out, err) = run(&dir, &["--database", &pooled, "why", r], &[]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let (code, page) = get(&format!("{base}/"));
    assert_eq!(code, 200, "{page}");
    for r in &runs {
        assert!(
            page.contains(&r[..8]) || page.contains(r.as_str()),
            "the UI lists {r}"
        );
    }
    let (code, metrics) = get(&format!("{base}/metrics"));
    assert_eq!(code, 200, "{metrics}");
    // Each step's side effect happened once, whichever worker ran it.
    let fx = read_lines(&world.join("effects.log"));
    for i in 0..3 {
        for n in hcp_runtime::testkit::SAMPLE_NODES {
            let line = format!("effect p{i}.{n} create");
            assert_eq!(fx.iter().filter(|l| **l == line).count(), 1, "{fx:?}");
        }
    }
    for w in workers.drain(..) {
        w.signal("TERM");
        let (code, _, err) = w.finish(Duration::from_secs(20));
        assert_eq!(code, Some(0), "{err}");
        assert!(
            err.contains("transaction pooler") && err.contains("poll"),
            "the worker says it polls: {err}"
        );
    }
    ui.signal("TERM");
    let (code, _, err) = ui.finish(Duration::from_secs(15));
    assert_eq!(code, Some(0), "{err}");
}
