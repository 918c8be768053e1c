//! The outcome is true.
//! - a failed re-create over a live cluster keeps what it adopted and says "kept (adopted,
//!   not ours)" for it, live, in `show`'s undo stack and in the outcome line; it never says
//!   "undone" or "nothing it made is left" about a cluster that is up;
//! - `clusters`, `why cluster/<name>` and `inventory` speak about the cluster (up, created
//!   by which run), not only about its latest run;
//! - a rolled-back run whose stuck undo was resolved by hand says so;
//! - `inventory --orphans` during an unwind names the unfinished run and what it holds.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use hcp_e2e_tests::items;
use serde_json::json;

const FAST: f64 = 0.002;

use hcp_e2e_tests::run_id;

#[test]
fn a_failed_re_create_over_a_live_cluster_keeps_and_says_kept() {
    let env = Env::new("truth-recreate", FAST);
    let cfg = cluster_file(&env.dir, "demo", "demo-l1v3c", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let first = run_id(&out);
    let live = env.sim.ids();
    // The re-create adopts everything, then fails for good at the node pools.
    env.sim.fault(json!({"resource_type": "hypershift.openshift.io/nodepools",
        "method": "PATCH", "status": 400, "error_code": "BadRequest", "message": "injected: node pool refused"}));
    env.sim.fault(json!({"resource_type": "hypershift.openshift.io/nodepools",
        "method": "PUT", "status": 400, "error_code": "BadRequest", "message": "injected: node pool refused"}));
    env.sim.fault(json!({"resource_type": "hypershift.openshift.io/nodepools",
        "method": "POST", "status": 400, "error_code": "BadRequest", "message": "injected: node pool refused"}));
    let (code, out, err) = env.start("create-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    let second = run_id(&out);
    // Nothing of the live cluster was deleted.
    let after = env.sim.ids();
    assert!(
        live.iter().all(|id| after.contains(id)),
        "the re-create deleted parts of the live cluster: {:?}",
        live.difference(&after).collect::<Vec<_>>()
    );
    // Live output: adopted steps say kept, never plain "undone".
    for step in [
        "create-cluster.control-plane.hosted-cluster",
        "create-cluster.network.vnet ",
        "create-cluster.identities.control-plane-operator ",
    ] {
        let lines: Vec<&str> = out
            .lines()
            .filter(|l| l.contains(step) && (l.contains("undone") || l.contains("kept")))
            .collect();
        assert!(!lines.is_empty(), "no undo line for {step}:\n{out}");
        for l in lines {
            assert!(l.contains("kept (adopted, not ours)"), "{l}\n{out}");
        }
    }
    let outcome = out.lines().find(|l| l.contains("Creation failed")).unwrap();
    assert!(
        !outcome.contains("nothing it made is left;") || outcome.contains("kept"),
        "{outcome}"
    );
    assert!(
        outcome.contains("adopted resources (there before this run) kept"),
        "{outcome}"
    );
    // `show`: every undo of a step that only adopted says kept.
    let v = env.show(&second);
    let undo = v["undo"]["done"].as_array().unwrap();
    let adopted_steps: Vec<String> = v["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["phase"] == "action" && e["action"] == "adopted")
        .map(|e| e["node"].as_str().unwrap().to_string())
        .collect();
    assert!(!adopted_steps.is_empty(), "{v:#}");
    for item in undo {
        let step = item["step"].as_str().unwrap();
        let created = v["ledger"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["node"] == step && e["phase"] == "action" && e["action"] == "created");
        if adopted_steps.iter().any(|s| s == step) && !created {
            assert!(
                item["note"] == "kept (adopted, not ours)" || item["note"] == "nothing to undo",
                "{step}: {item}"
            );
            assert_ne!(item["note"], "undone", "{step}: {item}");
        }
    }
    // The node pools the live cluster has are still there (the re-create only relabels).
    let ledger = v["ledger"].as_array().unwrap();
    for e in ledger.iter().filter(|e| e["phase"] == "undo") {
        assert_ne!(
            e["action"], "deleted",
            "the re-create deleted something of the live cluster: {e}"
        );
    }
    // `clusters`: demo exists, by the first run; its latest run is the rolled-back one.
    let (code, out, err) = env.cli(&["--output", "json", "clusters"], &[]);
    assert_eq!(code, 0, "{err}");
    let rows = items(&out, "ClusterList");
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(rows[0]["status"], "exists", "{out}");
    assert_eq!(rows[0]["created_by"]["run_id"], first.as_str(), "{out}");
    assert_eq!(rows[0]["last_run"]["run_id"], second.as_str(), "{out}");
    assert_eq!(rows[0]["last_run"]["state"], "rolled-back", "{out}");
    let (_, text, _) = env.cli(&["clusters"], &[]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("demo") && l.contains("exists")),
        "{text}"
    );
    // `why cluster/demo` speaks about the cluster first, and never says nothing is left.
    let (code, why, err) = env.cli(&["why", "cluster/demo"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        why.starts_with("Cluster demo exists: created by run "),
        "{why}"
    );
    assert!(why.contains(&first[first.len() - 8..]), "{why}");
    assert!(!why.contains("nothing of it is left"), "{why}");
    // `inventory`: the live resources stay attributed to the run that created them.
    let (code, out, err) = env.cli(&["--output", "json", "inventory", "--cluster", "demo"], &[]);
    assert_eq!(code, 0, "{err}");
    let inv = items(&out, "Inventory");
    let vnet = inv
        .iter()
        .find(|r| r["type"] == "Microsoft.Network/virtualNetworks")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(vnet["run_id"], first.as_str(), "{vnet}");
    assert_eq!(vnet["action"], "created", "{vnet}");
    assert_eq!(vnet["last_run_id"], second.as_str(), "{vnet}");
    assert_eq!(vnet["last_action"], "kept", "{vnet}");
    // The re-create created nothing: only what nobody here created (the DNS zone it
    // found, like the first run did) can name it as the last run that touched it.
    for r in inv.iter().filter(|r| r["run_id"] == second.as_str()) {
        assert_ne!(r["action"], "created", "{r}");
        assert!(r["last_run_id"].is_null(), "{r}");
    }
    let by_first = inv.iter().filter(|r| r["run_id"] == first.as_str()).count();
    assert!(by_first > 40, "{by_first} rows by the creating run: {out}");
}

/// `inventory --orphans` while a run is still unwinding: not "every resource … was
/// deleted", but which unfinished run holds how many resources; once the unwind ends,
/// nothing is orphaned.
#[test]
fn orphans_during_an_unwind_name_the_unfinished_run() {
    let env = Env::new("truth-orphans-unwind", FAST);
    env.sim.fault(
        json!({"method": "PUT", "resource_type": "Microsoft.Network/publicIPAddresses",
        "status": 409, "error_code": "PublicIPCountLimitReached", "message": "quota"}),
    );
    env.sim.fault(json!({"method": "DELETE",
        "resource_type": "Microsoft.ManagedIdentity/userAssignedIdentities", "latency_ms": 6000}));
    let cfg = cluster_file(&env.dir, "omicron", "omicron-0rph4", "Public", "");
    let a = [
        "--database",
        env.db.as_str(),
        "--simulator",
        env.sim.base.as_str(),
        "start",
        "create-cluster",
        "--config",
        cfg.to_str().unwrap(),
    ];
    let mut p = hcp_e2e_tests::Proc::spawn(&env.dir, &a, &[("HCP_POLL_MS", "20")]);
    assert!(
        p.wait_line("✗ ", std::time::Duration::from_secs(60))
            .is_some(),
        "the unwind never started"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (code, text, err) = env.cli(&["inventory", "--orphans"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !text.contains("every resource created by a run that did not succeed was deleted"),
        "{text}"
    );
    assert!(text.contains("not finished yet"), "{text}");
    assert!(text.contains("(unwinding) still holds "), "{text}");
    let (_, out, _) = env.cli(&["--output", "json", "inventory", "--orphans"], &[]);
    let rows = items(&out, "Inventory");
    assert!(!rows.is_empty(), "{out}");
    assert!(
        rows.iter()
            .all(|r| r["unfinished"] == true && r["run_state"] == "unwinding"),
        "{out}"
    );
    let (code, _, err) = p.finish(std::time::Duration::from_secs(120));
    assert_eq!(code, Some(1), "{err}");
    let (_, text, _) = env.cli(&["inventory", "--orphans"], &[]);
    assert!(
        text.contains("no orphaned resources: every resource created by a run that did not succeed was deleted"),
        "{text}"
    );
}

/// `hcp-workflow start create-cluster --config F` that fails and whose unwind gets stuck:
/// Azure refuses to delete the network security group (a 400 to a DELETE, which no change
/// to the cluster file can fix). The outcome and `why RUN` name the resource Azure refused
/// to delete and what to do about it — never "fix the value Azure rejected in the cluster
/// configuration".
#[test]
fn a_stuck_undo_names_the_resource_and_what_to_do_about_it() {
    let env = Env::new("truth-stuck-undo", FAST);
    let cfg = cluster_file(&env.dir, "stuck", "stuck-u4d0x", "Public", "");
    env.sim.fault(
        json!({"resource_type": "Microsoft.Network/networkSecurityGroups",
        "method": "DELETE", "status": 400, "error_code": "InvalidRequest",
        "message": "injected: the network security group is locked"}),
    );
    let inject = [("HCP_INJECT_FAIL", "create-cluster.nodepools.workers")];
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &inject);
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    let v = env.show(&run);
    assert_eq!(v["state"], "needs-operator", "{v}");
    let (code, why, err) = env.cli(&["why", &run], &[]);
    assert_eq!(code, 0, "{err}");
    let all = format!("{out}{err}{why}");
    assert!(
        !all.contains("fix the value Azure rejected in the cluster configuration"),
        "{all}"
    );
    let refused = why
        .lines()
        .find(|l| l.contains("undo of") && l.contains("gave up"))
        .unwrap_or_else(|| panic!("no stuck undo in: {why}"));
    assert!(
        refused.contains("Azure refused to delete /subscriptions/")
            && refused.contains("/providers/Microsoft.Network/networkSecurityGroups/")
            && refused.contains("(InvalidRequest)")
            && refused.contains("remove what blocks the deletion")
            && refused.contains("then retry the step"),
        "{refused}"
    );
}
