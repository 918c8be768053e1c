//! CLI contract tests on the real binary (this file also makes `cargo test` build the
//! binary that the end-to-end tests in `tests/` drive).
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hcp-workflow"))
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in [
        "worker", "selftest", "list", "show", "history", "cancel", "retry", "resolve", "resume",
    ] {
        let out = bin().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success(), "{cmd} --help");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Example"),
            "{cmd} --help has an example:\n{text}"
        );
    }
}

#[test]
fn bad_input_exits_2_and_names_the_problem() {
    let dir = hcp_runtime::testkit::scratch_dir("cli");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let out = bin()
        .args(["list", "--database", &db, "--state", "exploded"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--state exploded") && err.contains("needs-operator"),
        "{err}"
    );
    let out = bin()
        .args(["selftest", "--database", &db, "--fail", "zz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fail zz: no such step"));
    let out = bin()
        .args(["list", "--database", "mysql://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mysql"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn selftest_runs_and_operators_see_it() {
    let dir = hcp_runtime::testkit::scratch_dir("cli");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world = dir.join("w");
    let out = bin()
        .args([
            "selftest",
            "--database",
            &db,
            "--world",
            world.to_str().unwrap(),
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.last().unwrap()["state"], "succeeded");
    let run = lines[0]["run_id"].as_str().unwrap().to_string();
    let out = bin()
        .args(["list", "--database", &db, "--output", "json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["id"], run.as_str());
    assert_eq!(list[0]["workflow"], "sample");
    assert_eq!(list[0]["state"], "succeeded");
    let out = bin()
        .args(["show", &run, "--database", &db])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("state      succeeded") && text.contains("b2"),
        "{text}"
    );
    // A command on a finished run is refused with an explanation, exit 2.
    let out = bin()
        .args(["cancel", &run, "--database", &db])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already succeeded"));
}
