//! Against `simulator serve`: a failure pauses
//! instead of destroying the work, a pause with a deadline unwinds by itself, a delete only
//! goes forward, and bad policies are refused before anything is journaled.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, request_lines};
use hcp_e2e_tests::{Proc, items, run_id};
use serde_json::Value;
use std::time::{Duration, Instant};

const FAST: f64 = 0.002;

fn nodepools(env: &Env) -> Vec<String> {
    env.sim
        .ids()
        .into_iter()
        .filter(|id| id.to_ascii_lowercase().contains("/nodepools/"))
        .collect()
}

fn deletes(env: &Env) -> Vec<(String, String, u16)> {
    request_lines(&env.sim.requests())
        .into_iter()
        .filter(|(m, _, _)| m == "DELETE")
        .collect()
}

#[test]
fn a_failure_at_the_node_pools_pauses_and_retry_finishes_with_one_node_pool() {
    let env = Env::new("policy-pause", FAST);
    let cfg = cluster_file(&env.dir, "paused", "paused-p4u5e", "Public", "");
    env.sim.clear_requests();
    let inject = [("HCP_INJECT_FAIL", "create-cluster.nodepools.workers")];
    let (code, out, err) = env.start("create-cluster", &cfg, &["--on-failure", "pause"], &inject);
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    // The outcome says what happened, and nothing was undone: not one DELETE.
    assert!(
        out.contains("‖ create-cluster.nodepools.workers failed")
            && out.contains("paused (on-failure=pause): nothing was undone"),
        "{out}"
    );
    assert!(out.contains("‖ Creation paused after"), "{out}");
    assert!(
        !out.contains("rolled back") && !out.contains("undone:"),
        "{out}"
    );
    assert!(out.contains(&format!("retry {run}")), "{out}");
    assert!(out.contains(&format!("cancel {run}")), "{out}");
    assert_eq!(deletes(&env), vec![], "nothing deleted while paused");
    let before_retry = env.sim.ids();
    let v = env.show(&run);
    assert_eq!(v["state"], "needs-operator");
    assert_eq!(v["on_failure"], "pause");
    assert_eq!(v["paused"]["step"], "create-cluster.nodepools.workers");
    assert_eq!(v["paused"]["cause"], "policy");
    assert!(
        v["blocked_on"]
            .as_str()
            .unwrap()
            .starts_with("paused by policy: on-failure=pause (waits for an operator"),
        "{}",
        v["blocked_on"]
    );
    assert!(
        v["failure"]["hint"]
            .as_str()
            .unwrap()
            .contains("nothing was undone"),
        "{}",
        v["failure"]
    );
    // `list` and `why` say the same, and `why` names the exact commands.
    let (_, out, _) = env.cli(&["--output", "json", "list"], &[]);
    let row = items(&out, "RunList")
        .into_iter()
        .find(|r| r["run_id"] == run.as_str())
        .unwrap();
    assert!(
        row["blocked_on"]
            .as_str()
            .unwrap()
            .starts_with("paused by policy"),
        "{row}"
    );
    let (code, why, _) = env.cli(&["why", &run], &[]);
    assert_eq!(code, 0);
    assert!(why.contains("paused by policy: on-failure=pause"), "{why}");
    assert!(why.contains(&format!("hcp-workflow retry {run}")), "{why}");
    assert!(why.contains(&format!("cancel {run}")), "{why}");
    // Redrive with the fault gone: the failed step runs again and the run goes on.
    let (code, out, err) = env.cli(&["retry", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Creation complete"), "{out}");
    let mut pools = nodepools(&env);
    pools.sort();
    assert_eq!(
        pools.iter().filter(|p| p.ends_with("workers")).count(),
        1,
        "exactly one workers NodePool: {pools:?}"
    );
    assert_eq!(pools.len(), 2, "{pools:?}");
    assert_eq!(deletes(&env), vec![], "the redrive deleted nothing");
    assert!(
        before_retry.iter().all(|id| env.sim.ids().contains(id)),
        "everything kept while paused is still there"
    );
    let v = env.show(&run);
    assert_eq!(v["state"], "succeeded");
}

#[test]
fn a_pause_with_a_deadline_unwinds_by_itself_to_the_inventory_from_before() {
    let env = Env::new("policy-deadline", FAST);
    let before = env.sim.ids();
    let cfg = cluster_file(&env.dir, "deadline", "deadline-d3adl", "Public", "");
    let inject = [("HCP_INJECT_FAIL", "create-cluster.nodepools.workers")];
    let (code, out, err) = env.start(
        "create-cluster",
        &cfg,
        &["--on-failure", "pause=3s"],
        &inject,
    );
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    assert!(out.contains("it unwinds by itself at"), "{out}");
    assert!(
        env.sim.ids().len() > before.len(),
        "the work is there while paused"
    );
    let v = env.show(&run);
    assert_eq!(v["state"], "needs-operator");
    let unwinds_at = v["paused"]["unwinds_at"].as_str().unwrap().to_string();
    assert!(
        v["blocked_on"]
            .as_str()
            .unwrap()
            .contains(&format!("unwinds at {unwinds_at} unless retried")),
        "{}",
        v["blocked_on"]
    );
    // Nobody acts; a worker is running. At the deadline it unwinds the run.
    let args = env.args(&["worker"]);
    let mut worker = Proc::spawn(&env.dir, &args, &[("HCP_POLL_MS", "50")]);
    let until = Instant::now() + Duration::from_secs(90);
    let state = loop {
        let v = env.show(&run);
        let s = v["state"].as_str().unwrap().to_string();
        if s == "rolled-back" || Instant::now() > until {
            break s;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    worker.kill();
    assert_eq!(state, "rolled-back");
    assert_eq!(
        env.sim.ids(),
        before,
        "back to the inventory from before the run"
    );
    let v = env.show(&run);
    assert!(
        v["blocked_on"]
            .as_str()
            .unwrap()
            .contains("nobody retried it"),
        "{}",
        v["blocked_on"]
    );
}

#[test]
fn a_failed_delete_pauses_partially_deleted_and_never_says_undone() {
    let env = Env::new("policy-delete", FAST);
    let cfg = cluster_file(&env.dir, "gone", "gone-g0n3x", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let inject = [("HCP_INJECT_FAIL", "delete-cluster.network.vnet")];
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &inject);
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    let outcome = out
        .lines()
        .find(|l| l.contains("Deletion stopped"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        outcome.contains("partially deleted:")
            && outcome.contains(
                "deletions done; the cluster is no longer usable; `retry` continues the delete"
            ),
        "{outcome}"
    );
    assert!(!out.contains("rolled back"), "{out}");
    assert!(
        !out.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .any(|w| w.len() > 3
                && w[2].starts_with("delete-cluster.")
                && w[3].starts_with("undone")),
        "no deletion step reads undone: {out}"
    );
    let v = env.show(&run);
    assert_eq!(v["state"], "needs-operator");
    assert_eq!(v["forward_only"], true);
    let steps: Vec<&Value> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["steps"].as_array().unwrap())
        .collect();
    assert!(
        steps.iter().all(|s| s["pivot"].is_string()),
        "every deletion is a pivot"
    );
    assert!(
        steps.iter().all(|s| s["state"] != "undone"),
        "nothing undone"
    );
    assert_eq!(v["undo"]["done"].as_array().unwrap().len(), 0);
    let (_, text, _) = env.cli(&["show", &run], &[]);
    assert!(
        !text.contains("rolled back") && !text.contains(" undone "),
        "{text}"
    );
    let (_, why, _) = env.cli(&["why", &run], &[]);
    assert!(!why.contains("rolled back"), "{why}");
    assert!(why.contains(&format!("retry {run}")), "{why}");
    // `retry` continues the delete to the end.
    let (code, _, err) = env.cli(&["retry", &run], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Deletion complete"), "{out}");
}

#[test]
fn bad_failure_policies_are_refused_before_anything_is_journaled() {
    let env = Env::new("policy-bad", FAST);
    let before = env.sim.ids();
    let cfg = cluster_file(&env.dir, "bad", "bad-b4dp0", "Public", "");
    let journal = env.dir.join("journal.db");
    for (wf, flag, field) in [
        ("create-cluster", "rollback", "--on-failure"),
        ("create-cluster", "pause=soon", "--on-failure"),
        ("delete-cluster", "unwind", "--on-failure"),
        ("delete-cluster", "pause=1h", "--on-failure"),
    ] {
        let (code, out, err) = env.start(wf, &cfg, &["--on-failure", flag], &[]);
        assert_eq!(code, 2, "{wf} --on-failure {flag}: {out}{err}");
        assert!(
            err.contains(field) && err.contains("nothing was journaled"),
            "{err}"
        );
        assert!(!journal.exists(), "{wf} {flag}: nothing journaled");
    }
    let cfg = cluster_file(
        &env.dir,
        "bad2",
        "bad2-b4dp0",
        "Public",
        "onFailure: later\n",
    );
    let (code, _, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("onFailure") && err.contains("pause=24h"),
        "{err}"
    );
    assert!(!journal.exists());
    assert_eq!(env.sim.ids(), before, "nothing created");
}

#[test]
fn plan_marks_pivots_and_the_policy() {
    let env = Env::new("policy-plan", FAST);
    let cfg = cluster_file(&env.dir, "planned", "planned-p1an0", "Public", "");
    let cfg_s = cfg.to_string_lossy().to_string();
    let (code, out, err) = env.cli(&["plan", "delete-cluster", "--config", &cfg_s], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("⚑ pivot: a deletion cannot be undone"),
        "{out}"
    );
    assert!(out.contains("only goes forward"), "{out}");
    let (code, out, err) = env.cli(
        &[
            "plan",
            "create-cluster",
            "--config",
            &cfg_s,
            "--on-failure",
            "pause=24h",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("⚑"), "create-cluster has no pivots: {out}");
    assert!(out.contains("on-failure=pause=24h"), "{out}");
}

/// A delete that stopped halfway leaves a cluster whose HostedCluster and network may be
/// gone: `clusters`, `why cluster/…`, JSON, the UI, and every command that needs a whole
/// cluster say "partially deleted" and give the command that finishes the delete.
#[test]
fn a_half_deleted_cluster_reads_partially_deleted_everywhere() {
    let env = Env::new("policy-half", FAST);
    let cfg = cluster_file(&env.dir, "half", "half-h4lfx", "Public", "");
    let cfg_s = cfg.display().to_string();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let inject = [("HCP_INJECT_FAIL", "delete-cluster.network.vnet")];
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &inject);
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    let short = &run[run.len() - 8..];
    let finish = format!("retry {short}");

    let (code, text, err) = env.cli(&["clusters"], &[]);
    assert_eq!(code, 0, "{err}");
    let row = text
        .lines()
        .find(|l| l.starts_with("half "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("partially deleted"), "{text}");
    assert!(row.contains(short), "the delete it rests on: {text}");
    let (_, json, _) = env.cli(&["--output", "json", "clusters"], &[]);
    let rows = items(&json, "ClusterList");
    let half = rows.iter().find(|r| r["cluster"] == "half").unwrap();
    assert_eq!(half["status"], "partially-deleted", "{half}");
    assert_eq!(half["deleted_by"]["run_id"], run.as_str(), "{half}");
    assert!(half["created_by"].is_null(), "{half}");
    assert!(half["finish"].as_str().unwrap().contains(&finish), "{half}");

    let (_, why, _) = env.cli(&["why", "cluster/half"], &[]);
    assert!(why.contains("Cluster half is partially deleted"), "{why}");
    assert!(why.contains(&finish), "{why}");
    assert!(!why.contains("exists"), "{why}");

    // Commands that need a whole cluster refuse and say how to finish (exit 2).
    let (code, _, err) = env.cli(&["start", "update-cluster", "--config", &cfg_s], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cluster half is partially deleted") && err.contains(&finish),
        "{err}"
    );
    let (code, _, err) = env.cli(&["verify", "cluster/half"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("partially deleted") && err.contains(&finish),
        "{err}"
    );
    let (code, _, err) = env.cli(&["verify", "--all"], &[]);
    assert_eq!(code, 0, "nothing whole to verify: {err}");

    // The UI says the same.
    let mut ui = hcp_e2e_tests::Proc::spawn(
        &env.dir,
        &["--database", &env.db, "ui", "--listen", "127.0.0.1:0"],
        &[],
    );
    let url = ui.ui_url();
    let (status, html) = hcp_e2e_tests::http_get(&format!("{url}/clusters"));
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains(r#"data-status="partially-deleted""#),
        "{html}"
    );
    assert!(html.contains("partially deleted</span>"), "{html}");
    assert!(html.contains("Finish the delete:"), "{html}");
    ui.kill();

    // Finishing it makes it deleted everywhere.
    let (code, _, err) = env.cli(&["retry", &run], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, json, _) = env.cli(&["--output", "json", "clusters"], &[]);
    let rows = items(&json, "ClusterList");
    let half = rows.iter().find(|r| r["cluster"] == "half").unwrap();
    assert_eq!(half["status"], "deleted", "{half}");
    assert!(half.get("finish").is_none(), "{half}");
}
