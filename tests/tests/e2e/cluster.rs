//! create-cluster and delete-cluster end to end: the real `hcp-workflow` binary against a
//! simulator running as its own process.
//!
//! - create then delete: only persistent resources remain; `--purge-persistent` removes
//!   those too;
//! - a permanent failure at every node of create-cluster unwinds to the inventory from
//!   before the run, for every topology × private-link mode (hcp-workflow: every private
//!   endpoint connection is rejected and removed before the PLS DELETE);
//! - a foreign private endpoint (another subscription) is rejected before teardown;
//! - throttling storms and transient faults: the run completes; a quota error is permanent
//!   and surfaces with its Azure code;
//! - delete-cluster on a half-created and on an already-deleted cluster;
//! - bad config: exit 2, nothing journaled, no request sent;
//! - secrets: the pull secret and the generated private key appear nowhere (journal file,
//!   logs, CLI output).

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{
    Env, assert_connections_rejected_before_pls_delete, cluster_file, fail_each_node,
};
use hcp_e2e_tests::{document, says_run};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Simulated Azure durations × this: a whole create takes a couple of seconds.
const TIME_SCALE: f64 = 0.002;

fn is_persistent(id: &str, name: &str) -> bool {
    id.contains(&format!("/resourceGroups/{name}-persistent"))
        || id.contains("sa-token-issuer-key")
        || id.ends_with(&format!("/resourcegroups/{name}-persistent"))
}

#[test]
fn create_then_delete_leaves_only_persistent_resources_and_purge_removes_them() {
    let env = Env::new("create-delete", TIME_SCALE);
    let before = env.sim.ids();
    let cfg = cluster_file(&env.dir, "alpha", "alpha-a1b2c", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "create failed\nstdout:\n{out}\nstderr:\n{err}");
    assert!(says_run(&out, "succeeded"), "{out}");
    let after_create = env.sim.ids();
    let created: BTreeSet<_> = after_create.difference(&before).cloned().collect();
    // Every stage left something: identities, OIDC, network, control plane, PLS, PE/DNS.
    for needle in [
        "userAssignedIdentities/alpha-disk-alpha-a1b2c",
        "federatedIdentityCredentials",
        "roleAssignments",
        "storageAccounts",
        "virtualNetworks/alpha-alpha-a1b2c",
        "privateLinkServices/pls-alpha-a1b2c",
        "privateEndpoints/alpha-alpha-a1b2c-pe",
        "privateDnsZones/alpha.hypershift.local/A/api",
        "hostedclusters/alpha",
        "nodepools/alpha-workers",
        "subnets/alpha-a1b2c-pls-nat",
    ] {
        assert!(
            created.iter().any(|i| i.contains(needle)),
            "no {needle} among created resources: {created:#?}"
        );
    }
    // No resource exists twice under different ids (deterministic names).
    assert_eq!(
        env.sim.inventory().len(),
        after_create.len(),
        "duplicate inventory ids"
    );

    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "delete failed\nstdout:\n{out}\nstderr:\n{err}");
    let after_delete = env.sim.ids();
    let left: BTreeSet<_> = after_delete.difference(&before).cloned().collect();
    for id in &left {
        assert!(
            is_persistent(id, "alpha")
                || id.contains("federatedIdentityCredentials")
                || id.contains("userAssignedIdentities")
                || id.contains("storageAccounts"),
            "non-persistent resource left after delete-cluster: {id}"
        );
    }
    assert!(
        left.iter().any(|i| i.contains("userAssignedIdentities")),
        "identities are persistent: {left:#?}"
    );
    assert_connections_rejected_before_pls_delete(&env.sim.requests(), "pls-alpha-a1b2c");

    let (code, out, err) = env.start("delete-cluster", &cfg, &["--purge-persistent"], &[]);
    assert_eq!(code, 0, "purge failed\nstdout:\n{out}\nstderr:\n{err}");
    assert_eq!(env.sim.ids(), before, "purge left resources behind");
    env.sim.stop();
}

#[test]
fn foreign_private_endpoint_is_rejected_and_removed_before_the_pls_is_deleted() {
    let env = Env::new("foreign-pe", TIME_SCALE);
    let cfg = cluster_file(&env.dir, "beta", "beta-f0r3n", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "create failed\nstdout:\n{out}\nstderr:\n{err}");
    // Someone in another subscription connects a private endpoint to our PLS.
    let pls = "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-beta-f0r3n";
    let foreign_sub = "22222222-3333-4444-5555-666666666666";
    let rg = format!("/subscriptions/{foreign_sub}/resourcegroups/intruder");
    let (s, _) = env.sim.put(
        &format!("{rg}?api-version=2021-04-01"),
        &json!({"location": "eastus"}),
    );
    assert!(s < 300);
    let rg = format!("/subscriptions/{foreign_sub}/resourceGroups/intruder");
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/v");
    let (s, b) = env.sim.put(
        &format!("{vnet}?api-version=2023-11-01"),
        &json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]},
            "subnets": [{"name": "s", "properties": {"addressPrefix": "10.9.0.0/24"}}]}}),
    );
    assert!(s < 300, "{b}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (s, b) = env.sim.put(
        &format!("{rg}/providers/Microsoft.Network/privateEndpoints/intruder-pe?api-version=2023-11-01"),
        &json!({"location": "eastus", "properties": {"subnet": {"id": format!("{vnet}/subnets/s")},
            "manualPrivateLinkServiceConnections": [{"name": "c", "properties": {"privateLinkServiceId": pls}}]}}),
    );
    assert!(s < 300, "{b}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let conns = env.sim.get(&format!(
        "{pls}/privateEndpointConnections?api-version=2023-11-01"
    ));
    let n = conns["value"].as_array().map(Vec::len).unwrap_or(0);
    assert_eq!(n, 2, "ours and the foreign connection: {conns}");
    env.sim.clear_requests();

    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "delete failed\nstdout:\n{out}\nstderr:\n{err}");
    let reqs = env.sim.requests();
    assert_connections_rejected_before_pls_delete(&reqs, "pls-beta-f0r3n");
    // Our own connection went away with our PE (deleted first); the foreign one is
    // rejected and removed by the PLS teardown.
    let on_connections = |method: &str| {
        reqs.iter()
            .filter(|r| {
                r["method"] == method
                    && r["path"]
                        .as_str()
                        .unwrap_or_default()
                        .contains("/privateEndpointConnections/")
            })
            .count()
    };
    assert_eq!(on_connections("PUT"), 1, "the foreign connection rejected");
    assert_eq!(
        on_connections("DELETE"),
        1,
        "the foreign connection removed"
    );
    // The foreign PE is not ours: it is still there, but shows Rejected.
    let pe = env.sim.get(&format!(
        "{rg}/providers/Microsoft.Network/privateEndpoints/intruder-pe?api-version=2023-11-01"
    ));
    assert!(
        pe.to_string().contains("Rejected") || pe.to_string().contains("Disconnected"),
        "{pe}"
    );
    assert!(
        env.sim
            .get(&format!("{pls}?api-version=2023-11-01"))
            .get("error")
            .is_some(),
        "PLS deleted"
    );
    env.sim.stop();
}

/// A permanent failure injected after each node of create-cluster, one cluster per node,
/// for one topology and private-link mode (`sim_args` set the simulated operator's install,
/// `extra` the cluster file's `privateLink`).
///
/// `all_stages: false` injects only at the nodes from the control-plane stage on: the
/// identities, OIDC and network stages are the same nodes with the same inputs in every
/// topology and mode (the Private/hcp-workflow case covers them), so the other cases
/// spend their time where topology and mode change what runs.
fn every_node_unwinds(tag: &str, topology: &str, sim_args: &[&str], extra: &str, all_stages: bool) {
    let env = Env::with_sim_args(tag, TIME_SCALE, sim_args);
    let cfg = cluster_file(&env.dir, "gamma", "gamma-u0w1n", topology, extra);
    let (code, plan, err) = env.cli(
        &[
            "--output",
            "json",
            "plan",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan: Value = document(&plan, "Plan");
    let nodes: Vec<String> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            all_stages
                || !matches!(
                    s["stage"].as_str(),
                    Some("preflight" | "identities" | "oidc" | "network")
                )
        })
        .map(|s| s["node"].as_str().unwrap().to_string())
        .collect();
    assert!(nodes.len() > if all_stages { 40 } else { 2 }, "{nodes:?}");
    // Each cluster below lives in its own subscription, which needs the public zone of
    // baseDomain (HyperShift requires it; it is not the cluster's, and stays).
    for k in 0..nodes.len() {
        env.sim.seed_public_zone(
            &format!("{k:08}-2222-3333-4444-555555555555"),
            "hcp.example.com",
        );
    }
    let before = env.sim.ids();
    // One cluster (own name, infra id, journal) per failing node; four at a time against
    // one simulator. Each must unwind to nothing of its own; together, to `before`.
    let failures = fail_each_node(&env.dir, &env.sim.base, &nodes, |k| {
        let name = format!("g{k}");
        let infra = format!("g{k}-u0w1n");
        let cfg = cluster_file(&env.dir, &name, &infra, topology, extra);
        // Each cluster in its own subscription: ARM throttles per subscription, and this
        // test is about unwinding, not about sharing the buckets.
        let yaml = std::fs::read_to_string(&cfg).unwrap().replace(
            "subscription: 11111111-2222-3333-4444-555555555555",
            &format!("subscription: {k:08}-2222-3333-4444-555555555555"),
        );
        std::fs::write(&cfg, yaml).unwrap();
        (cfg, name, infra)
    });
    assert!(
        failures.is_empty(),
        "{} nodes did not unwind cleanly:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert_eq!(
        env.sim.ids(),
        before,
        "inventory differs after all the unwinds"
    );
    // Our own PLS teardown (hcp-workflow mode) rejects and removes every connection first.
    if topology != "Public" && !extra.contains("hypershift") {
        let reqs = env.sim.requests();
        for k in 0..nodes.len() {
            assert_connections_rejected_before_pls_delete(&reqs, &format!("pls-g{k}-u0w1n"));
        }
    }
    env.sim.stop();
}

/// Every topology × every private-link mode that applies.
#[test]
fn every_node_of_create_unwinds_private_hcp_workflow_mode() {
    every_node_unwinds(
        "unwind-each",
        "Private",
        &[],
        "privateLink:\n  managedBy: hcp-workflow\n",
        true,
    );
}

#[test]
fn every_node_of_create_unwinds_public() {
    every_node_unwinds("unwind-each-public", "Public", &[], "", false);
}

#[test]
fn every_node_of_create_unwinds_public_and_private_hcp_workflow_mode() {
    every_node_unwinds(
        "unwind-each-pap",
        "PublicAndPrivate",
        &[],
        "privateLink:\n  managedBy: hcp-workflow\n",
        false,
    );
}

#[test]
fn every_node_of_create_unwinds_private_hypershift_mode() {
    every_node_unwinds(
        "unwind-each-hs",
        "Private",
        &["--private-platform", "azure"],
        "privateLink:\n  managedBy: hypershift\n",
        false,
    );
}

#[test]
fn every_node_of_create_unwinds_public_and_private_hypershift_mode() {
    every_node_unwinds(
        "unwind-each-pap-hs",
        "PublicAndPrivate",
        &["--private-platform", "azure"],
        "privateLink:\n  managedBy: hypershift\n",
        false,
    );
}

/// Every 429 used up one of a step's attempts, so a step throttled 14 times in a
/// row (max 12 attempts) gave up and the create rolled back; with 20% Kubernetes 5xx a
/// create rolled back after 12 attempts classified transient. "Not now" answers now spend
/// the step's transient budget (time), not its attempts, and wait exactly the
/// Retry-After (1 s here, not up to 60 s).
#[test]
fn soft_faults_spend_time_not_attempts_and_do_not_unwind() {
    let env = Env::new("soft-faults", TIME_SCALE);
    let cfg = cluster_file(&env.dir, "eta", "eta-st0rm", "Public", "");
    for rule in [
        // The first Kubernetes read of create-cluster.control-plane.secrets, 14 times.
        json!({"method": "GET", "path": "/api/v1/namespaces/clusters", "nth": 1, "times": 14,
            "status": 429, "error_code": "TooManyRequests", "retry_after": 1}),
        json!({"probability": 0.10, "status": 503, "path": "/apis/"}),
        json!({"probability": 0.10, "status": 429, "error_code": "TooManyRequests", "retry_after": 1, "path": "/subscriptions/"}),
        json!({"probability": 0.05, "drop_connection": true, "path": "/subscriptions/"}),
    ] {
        env.sim.fault(rule);
    }
    // The steps are under test here, not the read-only checks before journaling.
    let (code, out, err) = env.start("create-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_eq!(
        code, 0,
        "storm: create failed\nstdout:\n{out}\nstderr:\n{err}"
    );
    let reqs = env.sim.requests();
    let throttled = reqs
        .iter()
        .filter(|r| {
            r["status"] == 429
                && r["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/api/v1/namespaces/clusters"))
        })
        .count();
    assert_eq!(
        throttled, 14,
        "the Kubernetes throttle fired {throttled} times"
    );
    env.sim.stop();
}

#[test]
fn throttling_storm_and_transient_faults_complete_quota_is_permanent() {
    let env = Env::new("faults", TIME_SCALE);
    let cfg = cluster_file(&env.dir, "delta", "delta-f4u1t", "Public", "");
    for rule in [
        json!({"probability": 0.15, "status": 429, "error_code": "TooManyRequests", "retry_after": 1, "path": "/subscriptions/"}),
        json!({"probability": 0.05, "status": 503, "path": "/subscriptions/"}),
        json!({"method": "PUT", "resource_type": "Microsoft.Network/virtualNetworks", "nth": 1, "status": 409, "error_code": "AnotherOperationInProgress"}),
    ] {
        env.sim.fault(rule);
    }
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(
        code, 0,
        "storm: create failed\nstdout:\n{out}\nstderr:\n{err}"
    );
    let throttled = env
        .sim
        .requests()
        .iter()
        .filter(|r| r["status"] == 429)
        .count();
    assert!(throttled > 0, "the storm throttled nothing");
    env.sim.clear_faults();
    env.sim.clear_requests();

    let cfg = cluster_file(&env.dir, "epsilon", "epsilon-q0ta1", "Public", "");
    env.sim.fault(json!({"method": "PUT", "resource_type": "Microsoft.Network/publicIPAddresses",
        "status": 409, "error_code": "PublicIPCountLimitReached", "message": "Cannot create more than 10 public IP addresses"}));
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(
        code, 1,
        "quota: expected failure\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert!(
        out.contains("PublicIPCountLimitReached"),
        "the Azure code is shown: {out}"
    );
    let puts = env
        .sim
        .requests()
        .iter()
        .filter(|r| {
            r["method"] == "PUT"
                && r["path"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("publicIPAddresses")
        })
        .count();
    assert_eq!(puts, 1, "a quota error is not retried");
    env.sim.stop();
}

#[test]
fn delete_cluster_succeeds_on_half_created_and_already_deleted_clusters() {
    let env = Env::new("half", TIME_SCALE);
    let cfg = cluster_file(&env.dir, "zeta", "zeta-h4lf0", "Private", "");
    let before = env.sim.ids();
    // Half-created: the create stops for good in the network stage and is cancelled only
    // after its work there (no unwind yet): start detached, run a worker that dies.
    let (code, _, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{err}");
    let mut a = vec![
        "--database",
        env.db.as_str(),
        "--simulator",
        env.sim.base.as_str(),
        "worker",
    ];
    let world = env.dir.join("world");
    a.extend(["--world", world.to_str().unwrap()]);
    let mut w = hcp_e2e_tests::Proc::spawn(
        &env.dir,
        &a,
        &[(
            "HCP_CRASH_AT",
            "before-effect:action:create-cluster.network.vnet",
        )],
    );
    let _ = w.wait_line("HCP_CRASHPOINT", std::time::Duration::from_secs(60));
    w.kill();
    assert!(env.sim.ids().len() > before.len(), "something was created");
    // The create is unfinished: a plain delete is refused (exit 2, nothing journaled)...
    // What the journal holds (not `age`, which moves with the clock between two lists).
    let journal = || {
        hcp_e2e_tests::items(&env.cli(&["--output", "json", "list"], &[]).1, "RunList")
            .iter()
            .map(|r| {
                (
                    r["run_id"].to_string(),
                    r["state"].to_string(),
                    r["updated_at"].to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let runs_before = journal();
    let (code, out, err) = env.start("delete-cluster", &cfg, &["--purge-persistent"], &[]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("is unfinished"), "{err}");
    assert!(err.contains("--cancel-running"), "{err}");
    assert!(err.contains("nothing was journaled or created"), "{err}");
    assert_eq!(journal(), runs_before);
    // ...and with --cancel-running the create is cancelled and unwound first.
    let (code, out, err) = env.start(
        "delete-cluster",
        &cfg,
        &["--purge-persistent", "--cancel-running"],
        &[],
    );
    assert_eq!(
        code, 0,
        "delete of a half-created cluster\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert!(err.contains("cancelling run"), "{err}");
    assert_eq!(env.sim.ids(), before, "all gone");
    let (code, out, err) = env.start(
        "delete-cluster",
        &cfg,
        &["--purge-persistent", "--idempotency-key", "again"],
        &[],
    );
    assert_eq!(
        code, 0,
        "delete of an already-deleted cluster\nstdout:\n{out}\nstderr:\n{err}"
    );
    env.sim.stop();
}

#[test]
fn bad_config_exits_2_and_creates_nothing() {
    let env = Env::new("bad-config", TIME_SCALE);
    let cfg = cluster_file(&env.dir, "eta", "eta-b4d00", "Private", "bogusKey: 1\n");
    env.sim.clear_requests();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("bogusKey"), "{err}");
    assert!(err.contains("nothing was journaled or created"), "{err}");
    assert!(
        env.sim.requests().is_empty(),
        "no request reached the simulator"
    );
    // Nothing journaled: not even a journal to list.
    let (code, list, _) = env.cli(&["--output", "json", "list"], &[]);
    assert_eq!(code, 2, "nothing journaled: {list}");
    let doc = document(&list, "Error");
    assert_eq!(
        doc["error"]["reason"], "NoJournal",
        "nothing journaled: {list}"
    );
}

#[test]
fn secrets_never_reach_the_journal_logs_or_output() {
    let env = Env::new("secrets", TIME_SCALE);
    let marker = format!("SEEDED-PULL-SECRET-{}", uuid::Uuid::new_v4().simple());
    std::fs::write(
        env.dir.join("pull-secret.json"),
        format!("{{\"auths\":{{\"quay.io\":{{\"auth\":\"{marker}\"}}}}}}"),
    )
    .unwrap();
    let cfg = cluster_file(&env.dir, "theta", "theta-s3cr3", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[("RUST_LOG", "debug")]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let (_, show, _) = env.cli(
        &[
            "--output",
            "json",
            "show",
            out.split_whitespace().nth(1).unwrap(),
        ],
        &[],
    );
    // The generated issuer key, as the management cluster holds it.
    let secret = env
        .sim
        .get("/api/v1/namespaces/clusters/secrets/theta-sa-token-issuer-key");
    let pem_b64 = secret["data"]["key"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!pem_b64.is_empty(), "issuer key Secret: {secret}");
    use base64::Engine as _;
    let pem = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(&pem_b64)
            .unwrap(),
    )
    .unwrap();
    // A line inside the private exponent (DER bytes 672..720 of the PKCS#1 key): the early
    // lines hold the public modulus, which the JWKS publishes on purpose.
    let key_line = pem.lines().nth(15).unwrap().to_string();
    let mut journal = Vec::new();
    for f in std::fs::read_dir(&env.dir).unwrap() {
        let p = f.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("journal.db")
        {
            journal.extend(std::fs::read(&p).unwrap());
        }
    }
    let journal = String::from_utf8_lossy(&journal);
    for (what, hay) in [
        ("journal", journal.as_ref()),
        ("stdout", out.as_str()),
        ("stderr/logs", err.as_str()),
        ("show", show.as_str()),
    ] {
        assert!(!hay.contains(&marker), "pull secret found in {what}");
        assert!(!hay.contains(&key_line), "private key found in {what}");
        assert!(
            !hay.contains("PRIVATE KEY"),
            "a private key header in {what}"
        );
    }
    env.sim.stop();
}

/// `hcp-workflow start delete-cluster --config F --yes` for a cluster file never created:
/// nothing of it exists, so there is nothing to delete — it says so, exits 0, sends no
/// write and journals nothing (no run, and `clusters` does not list it as deleted).
#[test]
fn start_delete_cluster_of_a_cluster_never_created_says_nothing_exists() {
    let env = Env::new("delete-never-created", TIME_SCALE);
    let cfg = cluster_file(&env.dir, "ghost", "ghost-n0n3x", "Private", "");
    env.sim.clear_requests();
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("nothing exists for cluster/ghost: nothing to delete"),
        "{out}{err}"
    );
    assert!(!out.contains("Deletion complete"), "{out}");
    assert!(!err.contains("will delete"), "{err}");
    assert_eq!(env.run_count(), 0, "nothing journaled");
    // No journal was left behind (or, beside other runs, it lists no such cluster).
    let (code, clusters, err) = env.cli(&["clusters"], &[]);
    assert!(
        code == 0 || (code == 2 && err.contains("no journal at")),
        "{err}"
    );
    assert!(!clusters.contains("ghost"), "{clusters}");
    let writes: Vec<String> = env
        .sim
        .requests()
        .iter()
        .filter(|r| matches!(r["method"].as_str(), Some("PUT" | "PATCH" | "DELETE")))
        .map(|r| format!("{} {}", r["method"], r["path"]))
        .collect();
    assert_eq!(writes, Vec::<String>::new(), "no write");

    // Once it exists, the same command deletes it as usual.
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Deletion complete"), "{out}");
}
