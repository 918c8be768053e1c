//! Helpers for the end-to-end tests: locating the real `hcp-workflow` binary, fresh
//! journals (SQLite files, Postgres databases), and child processes that can be killed at
//! an exact journal boundary.
//!
//! The binary is built by the same `cargo test` invocation (the `hcp-workflow` package has
//! integration tests of its own, so cargo builds its binary before running any test).

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

pub mod cluster;
pub mod crash;
pub mod terminal;
pub mod webhook;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// No team defaults from the machine the tests run on: no journal URL from the
/// environment and no config file (`~/.config/hcp-workflow/config.yaml`); a test that
/// wants them sets them itself.
pub fn hermetic(cmd: &mut Command) {
    cmd.env_remove("HCP_WORKFLOW_DATABASE_URL")
        .env_remove("HCP_WORKFLOW_CONFIG")
        .env_remove("HCP_WORKFLOW_NOTIFY")
        .env("XDG_CONFIG_HOME", "/nonexistent/hcp-workflow-tests");
}

/// Poll `f` every `every` until it holds; panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, every: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < end, "not within {timeout:?}: {what}");
        std::thread::sleep(every);
    }
}

/// `GET url` (10 s timeout): the status (0 when nothing answered) and the body (or the
/// transport error).
pub fn http_get(url: &str) -> (u16, String) {
    let c = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    match c.get(url).send() {
        Ok(r) => (r.status().as_u16(), r.text().unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// Path of the `hcp-workflow` binary next to the test executable.
pub fn bin() -> PathBuf {
    if let Ok(p) = std::env::var("HCP_WORKFLOW_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test>-<hash> → target/<profile>/hcp-workflow
    let p = exe.parent().unwrap().parent().unwrap().join("hcp-workflow");
    assert!(
        p.exists(),
        "{} not found: run the tests with `cargo test --workspace` (it builds the binary) or set HCP_WORKFLOW_BIN",
        p.display()
    );
    p
}

/// The `apiVersion` of every JSON document `hcp-workflow --output json` prints.
pub const API_VERSION: &str = "hcp-workflow/v1";

/// Parse `out` as the one JSON document of a one-shot command (`--output json`), checking
/// its `apiVersion` and that its `kind` is `kind`.
pub fn document(out: &str, kind: &str) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(out).unwrap_or_else(|e| panic!("not one JSON document ({e}): {out}"));
    assert_eq!(doc["apiVersion"], API_VERSION, "{out}");
    assert_eq!(doc["kind"], kind, "{out}");
    doc
}

/// The rows (`items`) of a collection document of `kind` (`RunList`, `Inventory`,
/// `RunHistory`, `PreflightReport`) printed by `--output json`.
pub fn items(out: &str, kind: &str) -> Vec<serde_json::Value> {
    document(out, kind)["items"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("a {kind} document carries its rows in `items`: {out}"))
}

/// The NDJSON event lines a follower (`start`, `drive`, `selftest`, `watch`) printed with
/// `--output json`, each checked to be a `kind: Event` document.
pub fn events(lines: &str) -> Vec<serde_json::Value> {
    lines
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not an NDJSON event line ({e}): {l}\n{lines}"));
            assert_eq!(v["apiVersion"], API_VERSION, "{l}");
            assert_eq!(v["kind"], "Event", "{l}");
            v
        })
        .collect()
}

/// Whether a follower's text output says how the run ended with the line `run <id>
/// <phrase>`: `succeeded`, `rolled back`, `needs an operator`, `was cancelled and
/// unwound`, `is running`, ….
pub fn says_run(out: &str, phrase: &str) -> bool {
    out.lines().any(|l| {
        l.strip_prefix("run ")
            .and_then(|r| r.split_once(' '))
            .is_some_and(|(id, rest)| uuid::Uuid::parse_str(id).is_ok() && rest == phrase)
    })
}

/// The run id a follower's text output names on its first `run <id> …` line.
///
/// # Panics
/// When there is none (the test fails with the output).
pub fn run_id(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run id in {out}"))
        .to_string()
}

/// A fresh scratch directory.
pub fn scratch(tag: &str) -> PathBuf {
    hcp_runtime::testkit::scratch_dir(&format!("e2e-{tag}"))
}

/// The Postgres server for tests, from `HCP_TEST_POSTGRES_URL`. `None` (with a note on
/// stderr) when unset — unless `HCP_REQUIRE_POSTGRES=1`, in which case this panics.
pub fn postgres_url() -> Option<String> {
    match std::env::var("HCP_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            if std::env::var("HCP_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                panic!("HCP_REQUIRE_POSTGRES=1 but HCP_TEST_POSTGRES_URL is not set");
            }
            eprintln!("skipped: HCP_TEST_POSTGRES_URL not set (Postgres tests need a server)");
            None
        }
    }
}

/// [`fresh_postgres`] from a synchronous test.
pub fn fresh_postgres_blocking(base: &str) -> String {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(fresh_postgres(base))
}

/// A new Postgres database holding an empty journal (migrated as `hcp-workflow migrate`
/// does: on Postgres only `migrate` creates the schema); returns its URL.
pub async fn fresh_postgres(base: &str) -> String {
    let url = fresh_postgres_unmigrated(base).await;
    let store = hcp_persistence::open(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot migrate the fresh test database: {e}"));
    drop(store);
    url
}

/// [`fresh_postgres_unmigrated`] from a synchronous test.
pub fn fresh_postgres_unmigrated_blocking(base: &str) -> String {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(fresh_postgres_unmigrated(base))
}

/// A new, empty Postgres database (no schema at all); returns its URL.
pub async fn fresh_postgres_unmigrated(base: &str) -> String {
    use sqlx::Connection;
    let name = format!("hcp_e2e_{}", uuid::Uuid::new_v4().simple());
    let mut c = sqlx::PgConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("cannot reach the test Postgres at {base}: {e}"));
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .unwrap();
    let (prefix, _) = base.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}

/// A child process whose stdout lines are collected as they come. Dropping it kills the
/// process (a test that fails or returns early leaves no simulator or worker behind).
#[derive(Debug)]
pub struct Proc {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
    stderr_path: PathBuf,
}

impl Proc {
    /// Spawn `hcp-workflow args…` with `envs`; stderr goes to a file in `dir`.
    pub fn spawn(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Proc {
        Self::spawn_without(dir, args, envs, &[])
    }

    /// [`Proc::spawn`] with the variables `unset` removed from the environment (`RUST_LOG`,
    /// to see what a process logs by default).
    pub fn spawn_without(dir: &Path, args: &[&str], envs: &[(&str, &str)], unset: &[&str]) -> Proc {
        let stderr_path = dir.join(format!("stderr-{}.log", uuid::Uuid::new_v4().simple()));
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .stdin(Stdio::null());
        cmd.env_remove("HCP_CRASH_AT")
            .env_remove("HCP_TRACE_BOUNDARIES")
            .env_remove("HCP_SAMPLE_FAULTS");
        hermetic(&mut cmd);
        for k in unset {
            cmd.env_remove(k);
        }
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            child,
            lines: rx,
            seen: Vec::new(),
            stderr_path,
        }
    }

    /// For a `ui` process: its base URL (`http://127.0.0.1:PORT`, no trailing slash), from
    /// the line it prints once it listens (panics if it does not within 30 s).
    pub fn ui_url(&mut self) -> String {
        const LINE: &str = "serving the hcp-workflow UI on ";
        let line = self
            .wait_line(LINE, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("ui did not start: {}", self.stderr()));
        line.trim_start_matches(LINE)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_string()
    }

    /// Wait for a stdout line starting with `prefix`.
    pub fn wait_line(&mut self, prefix: &str, timeout: Duration) -> Option<String> {
        let end = Instant::now() + timeout;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.starts_with(prefix) {
                        return Some(l);
                    }
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Wait for exit (killing after `timeout`); returns the exit code and all stdout.
    pub fn finish(mut self, timeout: Duration) -> (Option<i32>, Vec<String>, String) {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.seen.push(l);
                }
                let err = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
                return (st.code(), std::mem::take(&mut self.seen), err);
            }
            if Instant::now() > end {
                self.kill();
                let err = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
                panic!(
                    "process did not finish within {timeout:?}; stdout: {:?}; stderr: {err}",
                    self.seen
                );
            }
            while let Ok(l) = self.lines.try_recv() {
                self.seen.push(l);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Send a signal by name (`STOP`, `CONT`, `TERM`) with kill(1).
    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success(), "kill -{sig} failed");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
