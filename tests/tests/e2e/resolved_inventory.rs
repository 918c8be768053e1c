//! A resource whose stuck undo an operator resolved by hand stays visible in the
//! inventory and the run's resources as "resolved by <who>: <note>" — nobody here saw it
//! go, so an auditor can check it. Real processes: the self-test saga with a stuck undo,
//! a worker, `resolve --wait`, then `inventory` (text and JSON), `inventory --orphans` and
//! `show`.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::{Proc, bin, document, events, items, scratch};
use std::process::Command;
use std::time::Duration;

fn cli(db: &str, args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut c = Command::new(bin());
    c.arg("--database").arg(db).args(args);
    c.env_remove("HCP_SAMPLE_FAULTS");
    for (k, v) in envs {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_resolved_undo_keeps_its_resource_in_the_inventory_with_who_and_why() {
    let dir = scratch("resolved-inventory");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world = dir.join("world");
    let world = world.to_str().unwrap();
    // c fails for good; b1's undo gives up: the run needs an operator.
    let (code, out, err) = cli(
        &db,
        &[
            "--output", "json", "selftest", "--world", world, "--fail", "c",
        ],
        &[("HCP_SAMPLE_FAULTS", r#"{"stuck_undo":["b1"]}"#)],
    );
    assert_eq!(code, Some(1), "{out}\n{err}");
    let ev = events(&out);
    let run = ev[0]["run_id"].as_str().unwrap().to_string();
    let finished = ev.iter().find(|e| e["type"] == "finished").unwrap();
    assert_eq!(finished["state"], "needs-operator", "{out}");

    // Before: b1's file is created and not deleted.
    let (_, inv, _) = cli(&db, &["--output", "json", "inventory"], &[]);
    let before = items(&inv, "Inventory");
    let b1 = before
        .iter()
        .find(|r| r["node"] == "b1")
        .unwrap_or_else(|| panic!("b1's resource in the inventory: {inv}"))
        .clone();
    assert_eq!(b1["action"], "created", "{inv}");

    // An operator resolves the stuck undo while a worker holds the run.
    let mut worker = Proc::spawn(
        &dir,
        &["--database", &db, "worker", "--world", world],
        &[("HCP_POLL_MS", "100")],
    );
    let (code, out, err) = cli(
        &db,
        &[
            "--output",
            "json",
            "resolve",
            &run,
            "--step",
            "b1",
            "--note",
            "deleted in the portal",
            "--wait",
        ],
        &[("USER", "carol")],
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let applied = document(&out, "CommandApplied");
    assert_eq!(applied["outcome"], "applied", "{out}");
    // The worker finishes the unwind.
    let end = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, shown, _) = cli(&db, &["--output", "json", "show", &run], &[]);
        if document(&shown, "Run")["state"] == "rolled-back" {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "never rolled back: {shown}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    worker.kill();

    // After: still listed, as resolved, with who and why — never "deleted".
    let (_, inv, _) = cli(&db, &["--output", "json", "inventory"], &[]);
    let after = items(&inv, "Inventory");
    let row = after
        .iter()
        .find(|r| r["id"] == b1["id"])
        .unwrap_or_else(|| panic!("the resolved resource stays in the inventory: {inv}"));
    assert_eq!(row["action"], "resolved", "{inv}");
    assert_eq!(row["run_id"], run.as_str(), "{inv}");
    let note = row["note"].as_str().unwrap();
    assert!(
        note.starts_with("resolved by carol@") && note.ends_with(": deleted in the portal"),
        "{note}"
    );
    // Resources the unwind really deleted are gone from the inventory.
    assert!(
        after.iter().all(|r| r["node"] != "a" && r["node"] != "b2"),
        "{inv}"
    );
    let (_, text, _) = cli(&db, &["inventory"], &[]);
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("resolved") && l.contains("(resolved by carol@")),
        "{text}"
    );
    // An auditor's list of what failed runs may have left includes it.
    let (_, orphans, _) = cli(&db, &["--output", "json", "inventory", "--orphans"], &[]);
    assert!(
        items(&orphans, "Inventory")
            .iter()
            .any(|r| r["id"] == b1["id"] && r["action"] == "resolved"),
        "{orphans}"
    );
    // The rolled-back run does not claim every step was undone; it names the
    // undo resolved by hand, who resolved it and the note, and asks to check it.
    let (_, why, _) = cli(&db, &["why", &run], &[]);
    assert!(
        !why.contains("every step this run started was undone"),
        "{why}"
    );
    assert!(
        !why.contains("Every step this run started was undone"),
        "{why}"
    );
    assert!(why.contains("1 undo resolved by hand (`"), "{why}");
    assert!(why.contains("b1` by carol@"), "{why}");
    assert!(why.contains("deleted in the portal): check it"), "{why}");
    // The run's own resources say the same.
    let (_, shown, _) = cli(&db, &["show", &run], &[]);
    assert!(
        shown.contains("resolved by carol@") && shown.contains("(nobody here saw it go)"),
        "{shown}"
    );
}
