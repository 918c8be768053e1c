//! The inspector's CLI views on the real binary: golden files lock the human-readable
//! output of `list`, `show`, `history`, `why` and `inventory` over a deterministic journal
//! (fixed ids and timestamps, `--now` fixed); JSON output is checked field by field; `watch`
//! follows a run that a separate worker process executes.
#![allow(clippy::unwrap_used)]

mod views_support;

use views_support::{NOW, fixture, golden, run, run_id};

fn setup() -> (std::path::PathBuf, String) {
    let dir = hcp_runtime::testkit::scratch_dir("views");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = rt.block_on(fixture(&dir));
    (dir, url)
}

#[test]
fn golden_text_views() {
    let (_dir, db) = setup();
    let stuck = run_id(2).to_string();
    let waiting = run_id(3).to_string();
    let done = run_id(1).to_string();
    let paused = run_id(5).to_string();
    let stopped = run_id(6).to_string();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("list.txt", vec!["list"]),
        (
            "list_needs_operator.txt",
            vec!["list", "--state", "needs-operator"],
        ),
        ("list_cluster_alpha.txt", vec!["list", "--cluster", "alpha"]),
        ("list_since.txt", vec!["list", "--since", "20m"]),
        ("show_stuck.txt", vec!["show", &stuck]),
        ("show_waiting.txt", vec!["show", &waiting]),
        ("show_succeeded.txt", vec!["show", &done]),
        (
            "history_stuck_failed.txt",
            vec!["history", &stuck, "--failed"],
        ),
        (
            "history_stuck_step.txt",
            vec!["history", &stuck, "--step", "create-cluster.pls.ensure"],
        ),
        ("why_stuck.txt", vec!["why", &stuck]),
        ("why_waiting.txt", vec!["why", &waiting]),
        ("why_succeeded.txt", vec!["why", &done]),
        ("show_paused.txt", vec!["show", &paused]),
        ("why_paused.txt", vec!["why", &paused]),
        ("show_stopped_delete.txt", vec!["show", &stopped]),
        ("why_stopped_delete.txt", vec!["why", &stopped]),
        ("inventory.txt", vec!["inventory"]),
        ("inventory_orphans.txt", vec!["inventory", "--orphans"]),
    ];
    for (name, args) in cases {
        let mut full = args.clone();
        full.extend(["--database", &db]);
        // `history` and `inventory` print absolute times only; the rest take --now.
        if !matches!(args[0], "history" | "inventory") {
            full.extend(["--now", NOW]);
        }
        let (code, out) = run(&full);
        assert_eq!(code, 0, "{full:?}");
        golden(name, &out);
    }
}

#[test]
fn json_views_carry_the_fields_scripts_need() {
    let (_dir, db) = setup();
    let (_, out) = run(&["list", "--database", &db, "--now", NOW, "--output", "json"]);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["apiVersion"], "hcp-workflow/v1", "{list}");
    assert_eq!(list["kind"], "RunList", "{list}");
    let rows = list["items"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    let stuck = rows
        .iter()
        .find(|r| r["run_id"] == run_id(2).to_string().as_str())
        .unwrap();
    for k in [
        "run_id",
        "short_id",
        "workflow",
        "cluster",
        "state",
        "stage",
        "step",
        "created_at",
        "blocked_on",
    ] {
        assert!(stuck.get(k).is_some(), "list JSON has {k}: {stuck}");
    }
    assert_eq!(stuck["cluster"], "beta");
    assert_eq!(stuck["state"], "needs-operator");
    assert_eq!(stuck["stage"], "control-plane");
    assert_eq!(stuck["step"], "create-cluster.hostedcluster.apply");
    assert_eq!(stuck["created_at"], "2025-06-01T12:05:00.000Z");
    assert_eq!(stuck["short_id"], "00000002");

    let (_, out) = run(&[
        "show",
        &run_id(3).to_string(),
        "--database",
        &db,
        "--now",
        NOW,
        "--output",
        "json",
    ]);
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["apiVersion"], "hcp-workflow/v1", "{d}");
    assert_eq!(d["kind"], "Run", "{d}");
    assert_eq!(d["run_id"], run_id(3).to_string().as_str());
    assert_eq!(d["short_id"], "00000003");
    let p = &d["pending"];
    assert_eq!(p["step"], "create-cluster.vnet.ensure");
    assert_eq!(
        p["attempt_text"], "3/5",
        "the next attempt of a 5-attempt policy"
    );
    assert_eq!(p["last_error"]["code"], "TooManyRequests");
    assert_eq!(p["next_retry_at"], "2025-06-01T12:31:00.000Z");
    assert_eq!(p["lease_owner"], "worker-1");
    assert_eq!(d["undo"]["unwinding"], false);
    let next: Vec<&str> = d["undo"]["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        next,
        [
            "create-cluster.dns.ensure",
            "create-cluster.vnet.ensure",
            "create-cluster.identity.ensure"
        ],
        "a cancel would undo in reverse dependency order"
    );

    let (_, out) = run(&[
        "why",
        &run_id(2).to_string(),
        "--database",
        &db,
        "--now",
        NOW,
        "--output",
        "json",
    ]);
    let w: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(w["apiVersion"], "hcp-workflow/v1", "{w}");
    assert_eq!(w["kind"], "Why", "{w}");
    assert_eq!(w["run_id"], run_id(2).to_string().as_str());
    assert_eq!(w["state"], "needs-operator");
    let cmds: Vec<&str> = w["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["command"].as_str().unwrap())
        .collect();
    assert!(
        cmds.contains(
            &format!(
                "hcp-workflow resolve {} --step create-cluster.hostedcluster.apply --note '…'",
                run_id(2)
            )
            .as_str()
        ),
        "{cmds:?}"
    );

    let (_, out) = run(&[
        "inventory",
        "--orphans",
        "--database",
        &db,
        "--output",
        "json",
    ]);
    let inv: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(inv["apiVersion"], "hcp-workflow/v1", "{inv}");
    assert_eq!(inv["kind"], "Inventory", "{inv}");
    let all = inv["items"].as_array().unwrap();
    // What the still-running run 3 holds is listed apart, marked unfinished (issue 21 §2).
    let (held, items): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        all.iter().partition(|r| r["unfinished"] == true);
    assert!(
        held.iter()
            .all(|r| r["run_id"] == run_id(3).to_string().as_str()),
        "{inv}"
    );
    assert_eq!(held.len(), 1, "{inv}");
    assert!(
        items
            .iter()
            .all(|r| r["run_id"] == run_id(2).to_string().as_str()
                || r["run_id"] == run_id(5).to_string().as_str()),
        "only the stuck run and the paused one (it kept its work for an operator) hold \
         what no finished run owns, each row names its run: {inv}"
    );
    assert!(
        items
            .iter()
            .any(|r| r["run_id"] == run_id(5).to_string().as_str()
                && r["run_state"] == "needs-operator"),
        "the paused run's kept VNet is listed with its run: {inv}"
    );
    let ids: Vec<&str> = items.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&"clusters/beta"),
        "the stuck run's HostedCluster is an orphan: {ids:?}"
    );
    assert!(
        !ids.iter().any(|i| i.contains("beta-cp")),
        "an adopted identity is not an orphan: {ids:?}"
    );
    assert!(
        !ids.iter().any(|i| i.contains("alpha")),
        "alpha succeeded: {ids:?}"
    );
}

#[test]
fn bad_filters_exit_2() {
    let (_dir, db) = setup();
    let out = views_support::bin()
        .args(["list", "--database", &db, "--since", "yesterday-ish"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since yesterday-ish"));
    // A state spelled with `_` gets "did you mean" (issue 21 §5).
    let out = views_support::bin()
        .args(["list", "--database", &db, "--state", "needs_operator"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--state needs_operator: unknown state; did you mean needs-operator?"),
        "{err}"
    );
}

#[test]
fn watch_exit_code_follows_the_end_state() {
    let (_dir, db) = setup();
    let (code, out) = run(&["watch", &run_id(1).to_string(), "--database", &db]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .last()
            .is_some_and(|l| l == format!("run {} succeeded", run_id(1))),
        "{out}"
    );
}

#[test]
fn watch_follows_a_run_executed_by_another_process() {
    let dir = hcp_runtime::testkit::scratch_dir("views-watch");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world = dir.join("w");
    let (code, out) = run(&[
        "selftest",
        "--database",
        &db,
        "--world",
        world.to_str().unwrap(),
        "--detach",
        "--fail",
        "c",
    ]);
    assert_eq!(code, 0, "{out}");
    let id = out.trim().strip_prefix("run ").unwrap().to_string();
    let watch = views_support::bin()
        .args(["watch", &id, "--database", &db, "--interval-ms", "100"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut worker = views_support::bin()
        .args([
            "worker",
            "--database",
            &db,
            "--world",
            world.to_str().unwrap(),
        ])
        .env("HCP_POLL_MS", "50")
        // Faults live in the executing process: the worker makes step c fail.
        .env("HCP_SAMPLE_FAULTS", r#"{"fail":["c"]}"#)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = watch.wait_with_output().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a rolled-back run exits 1:\n{text}"
    );
    // `  +130ms  last           c  undone`: elapsed, stage, step, state.
    assert!(
        text.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 4 && w[0].starts_with('+') && w[1] == "last" && w[2] == "c"
        }),
        "every step that moved is reported: {text}"
    );
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l == format!("run {id} rolled back")),
        "{text}"
    );
}

#[test]
fn ui_refuses_a_non_loopback_address_without_a_token() {
    let (_dir, db) = setup();
    let out = views_support::bin()
        .args(["ui", "--database", &db, "--listen", "0.0.0.0:0"])
        .env_remove("HCP_WORKFLOW_UI_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to serve on 0.0.0.0:0 without a token") && err.contains("--token"),
        "{err}"
    );
}
