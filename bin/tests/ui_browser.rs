//! The web UI in a real headless browser: a run stuck in unwinding, a succeeded run, a
//! rolled-back run and a waiting run (made by the real binary), `hcp-workflow ui` and a
//! `hcp-workflow worker` on the same SQLite journal, and `bin/tests/browser/stuck_undo.mjs`
//! (playwright-core driving Debian's Chromium) checking the list (state counts, search, short
//! ids), each run page (timeline, resources, colours) at 1400 and 420 px (no sideways scroll),
//! then resolving the stuck undo and following the run to its end. Screenshots of every
//! state at both widths go to `target/ui-artifacts/` (kept as artifacts; their paths are
//! printed). The journal is checked afterwards: the resolve command recorded with its note
//! and operator, and the run rolled back.
//!
//! Without Chromium, Node or `npm ci` in `bin/tests/browser`, the test prints
//! `skipped: …` and passes, unless `HCP_REQUIRE_BROWSER=1` (set by `.ci/run`).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hcp-workflow"))
}

/// Kills the child when the test ends, however it ends.
struct Guard(Child);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn state_of_run(db: &str, run: &str) -> String {
    let out = bin()
        .args(["show", run, "--database", db, "--output", "json"])
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .map(|d| d["state"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

fn missing_prerequisite(browser_dir: &Path) -> Option<String> {
    if !Path::new("/usr/bin/chromium").exists() {
        return Some("/usr/bin/chromium is missing (apt-get install chromium)".into());
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Some("node is missing".into());
    }
    if !browser_dir.join("node_modules/playwright-core").exists() {
        return Some(format!(
            "playwright-core is not installed (npm ci in {})",
            browser_dir.display()
        ));
    }
    None
}

#[test]
fn resolve_a_stuck_undo_in_the_browser() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let browser_dir = manifest.join("tests/browser");
    if let Some(why) = missing_prerequisite(&browser_dir) {
        if std::env::var("HCP_REQUIRE_BROWSER").is_ok_and(|v| v == "1") {
            panic!("HCP_REQUIRE_BROWSER=1 but {why}");
        }
        println!("skipped: {why}");
        return;
    }
    let dir = hcp_runtime::testkit::scratch_dir("ui-browser");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world = dir.join("w");
    let world = world.to_str().unwrap();

    // A run stuck in unwinding: step c fails, the undo of b1 gives up.
    let out = bin()
        .args([
            "selftest",
            "--database",
            &db,
            "--world",
            world,
            "--fail",
            "c",
            "--output",
            "json",
        ])
        .env("HCP_SAMPLE_FAULTS", r#"{"stuck_undo":["b1"]}"#)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    let run = first["run_id"].as_str().unwrap().to_string();

    // A run in each other state: succeeded, rolled back (step d failed), and waiting (b2
    // waits ten minutes; the selftest process keeps driving it, so it stays waiting).
    let selftest = |fail: Option<&str>| {
        let mut c = bin();
        c.args([
            "selftest",
            "--database",
            &db,
            "--world",
            world,
            "--output",
            "json",
        ]);
        if let Some(step) = fail {
            c.args(["--fail", step]);
        }
        c
    };
    let first_run_id = |stdout: &[u8]| -> String {
        let text = String::from_utf8_lossy(stdout);
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        v["run_id"].as_str().unwrap().to_string()
    };
    let out = selftest(None).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let succeeded = first_run_id(&out.stdout);
    let out = selftest(Some("d")).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rolled_back = first_run_id(&out.stdout);
    // Paused past a pivot: `a → p (pivot) → c → d`, d fails for good.
    let out = selftest(Some("d")).arg("--pivot").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let paused = first_run_id(&out.stdout);
    assert_eq!(state_of_run(&db, &paused), "needs-operator");
    // Its output goes to a file: a pipe nobody reads would kill it on its next line.
    let waiter_out = dir.join("waiting.out");
    let waiter_err = dir.join("waiting.err");
    let mut waiter = Guard(
        selftest(None)
            .env(
                "HCP_SAMPLE_FAULTS",
                r#"{"waits":{"b2":1},"wait_ms":600000}"#,
            )
            .stdout(std::fs::File::create(&waiter_out).unwrap())
            .stderr(std::fs::File::create(&waiter_err).unwrap())
            .spawn()
            .unwrap(),
    );
    let state_of = |run: &str| state_of_run(&db, run);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut waiting = String::new();
    loop {
        let out = std::fs::read_to_string(&waiter_out).unwrap_or_default();
        if waiting.is_empty() && out.contains('\n') {
            waiting = first_run_id(out.as_bytes());
        }
        if !waiting.is_empty() && state_of(&waiting) == "waiting" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the waiting run ({waiting:?}) never reached waiting: {out}\n{}",
            std::fs::read_to_string(&waiter_err).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Stop following it (SIGTERM, as Ctrl-C): one process executes a SQLite journal at a
    // time, and the worker below needs it. The run stays waiting (its timer is ten minutes
    // out, so the worker leaves it alone).
    let _ = Command::new("kill")
        .args(["-TERM", &waiter.0.id().to_string()])
        .status();
    let _ = waiter.0.wait();
    assert_eq!(state_of(&waiting), "waiting");

    // The UI (actions allowed on loopback, an operator name journaled) and a worker.
    let mut ui = bin()
        .args([
            "ui",
            "--database",
            &db,
            "--listen",
            "127.0.0.1:0",
            "--allow-actions-without-token",
            "--operator",
            "browser-test",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(ui.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ui = Guard(ui);
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches('/')
        .to_string();
    // Its log is kept beside the journal (printed when the browser script fails).
    let worker_log = dir.join("worker.log");
    let _worker = Guard(
        bin()
            .args(["worker", "--database", &db, "--world", world])
            .env("HCP_POLL_MS", "100")
            .stdout(std::fs::File::create(dir.join("worker.out")).unwrap())
            .stderr(std::fs::File::create(&worker_log).unwrap())
            .spawn()
            .unwrap(),
    );

    let shots = std::env::var("HCP_UI_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("../target/ui-artifacts"));
    // This test's screenshots only (earlier runs' files would hide a missing one).
    if let Ok(dir) = std::fs::read_dir(&shots) {
        for f in dir.flatten() {
            if f.path().extension().is_some_and(|e| e == "png") {
                let _ = std::fs::remove_file(f.path());
            }
        }
    }
    let others = serde_json::json!({
        "succeeded": succeeded,
        "rolledBack": rolled_back,
        "waiting": waiting,
        "paused": paused,
    })
    .to_string();
    let status = Command::new("node")
        .arg(browser_dir.join("stuck_undo.mjs"))
        .args([&url, &run, shots.to_str().unwrap(), &others])
        .current_dir(&browser_dir)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the browser script failed; screenshots in {}; the worker's log:\n{}",
        shots.display(),
        std::fs::read_to_string(&worker_log).unwrap_or_default()
    );

    // The journal says what happened, who did it and why.
    let out = bin()
        .args(["show", &run, "--database", &db, "--output", "json"])
        .output()
        .unwrap();
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["state"], "rolled-back");
    let cmds = d["commands"].as_array().unwrap();
    let resolve = cmds
        .iter()
        .find(|c| c["command"] == "resolve --step b1")
        .unwrap_or_else(|| panic!("no resolve command in {cmds:?}"));
    assert_eq!(resolve["by"], "browser-test");
    assert_eq!(resolve["reason"], "deleted b1 by hand in the browser test");
    assert_eq!(resolve["outcome"], "applied");
    let out = bin()
        .args([
            "history",
            &run,
            "--database",
            &db,
            "--step",
            "b1",
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    let h: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // One document per command: the events are its `items` (a bare array before).
    let events = h.get("items").unwrap_or(&h);
    assert!(
        events
            .as_array()
            .unwrap_or_else(|| panic!("no events in {h}"))
            .iter()
            .any(|e| e["kind"] == "undo_resolved"
                && e["data"]["by"] == "browser-test"
                && e["data"]["note"] == "deleted b1 by hand in the browser test"),
        "{h}"
    );
    // Every state at both widths, kept as artifacts.
    let taken: Vec<String> = std::fs::read_dir(&shots)
        .unwrap()
        .flatten()
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect();
    for state in [
        "list",
        "run-waiting",
        "run-succeeded",
        "run-rolled-back",
        "run-needs-operator",
        "confirm",
        "resolved-rolled-back",
    ] {
        for width in ["1400", "420"] {
            let want = format!("-{state}-{width}.png");
            let found = taken.iter().find(|f| f.ends_with(&want));
            assert!(
                found.is_some(),
                "no screenshot *{want} in {}: {taken:?}",
                shots.display()
            );
        }
    }
    let mut taken = taken;
    taken.sort();
    let dir = shots.canonicalize().unwrap_or_else(|_| shots.clone());
    for f in &taken {
        println!("screenshot: {}", dir.join(f).display());
    }
}
