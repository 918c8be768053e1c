//! The web UI in a real headless browser: a run stuck in unwinding (made by the real binary),
//! `hcp-workflow ui` and a `hcp-workflow worker` on the same SQLite journal, and
//! `bin/tests/browser/stuck_undo.mjs` (playwright-core driving Debian's Chromium) resolving
//! the stuck undo and following the run to its end. Screenshots go to
//! `target/ui-artifacts/`. The journal is checked afterwards: the resolve command recorded
//! with its note and operator, and the run rolled back.
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
    let _worker = Guard(
        bin()
            .args(["worker", "--database", &db, "--world", world])
            .env("HCP_POLL_MS", "100")
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    let shots = std::env::var("HCP_UI_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| manifest.join("../target/ui-artifacts"));
    let status = Command::new("node")
        .arg(browser_dir.join("stuck_undo.mjs"))
        .args([&url, &run, shots.to_str().unwrap()])
        .current_dir(&browser_dir)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the browser script failed; screenshots in {}",
        shots.display()
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
    assert!(
        h.as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "undo_resolved"
                && e["data"]["by"] == "browser-test"
                && e["data"]["note"] == "deleted b1 by hand in the browser test"),
        "{h}"
    );
    let shots_taken = std::fs::read_dir(&shots).map(|d| d.count()).unwrap_or(0);
    assert!(shots_taken >= 5, "screenshots saved in {}", shots.display());
}
