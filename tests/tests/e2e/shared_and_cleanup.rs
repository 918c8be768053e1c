//! With real processes:
//! - finding 11: one persistent resource group shared by many clusters (HyperShift's
//!   `os4-common`): a second cluster adopts it, a purge removes only that cluster's
//!   resources and the group only once nothing else is inside, and an unwinding create
//!   keeps a group another cluster moved into even though its own run created it;
//! - finding 9: delete-cluster sets `hypershift.openshift.io/cleanup-cloud-resources` on the
//!   HostedCluster before deleting it, so the guest removes the rules its cloud controller
//!   added to a bring-your-own NSG; `--skip-cloud-cleanup` leaves them (and says so in
//!   `--help`).
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, cluster_file};
use hcp_e2e_tests::{Proc, items};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

const FAST: f64 = 0.002;
const SHARED: &str = "os4-common";

/// A cluster file whose persistent group is the shared `os4-common`.
fn shared_cluster(env: &Env, name: &str, topology: &str) -> PathBuf {
    let p = cluster_file(&env.dir, name, &format!("{name}-x1y2z"), topology, "");
    let y = std::fs::read_to_string(&p).unwrap().replace(
        &format!("persistentResourceGroup: {name}-persistent"),
        &format!("persistentResourceGroup: {SHARED}"),
    );
    std::fs::write(&p, y).unwrap();
    p
}

fn shared_group_id() -> String {
    format!("/subscriptions/{GUEST_SUB}/resourceGroups/{SHARED}")
}

/// Inventory ids inside the shared group (the group itself excluded), lower-cased.
fn in_shared(env: &Env) -> Vec<String> {
    let prefix = format!("{}/", shared_group_id().to_ascii_lowercase());
    env.sim
        .ids()
        .into_iter()
        .map(|i| i.to_ascii_lowercase())
        .filter(|i| i.starts_with(&prefix))
        .collect()
}

fn group_exists(env: &Env) -> bool {
    env.sim
        .ids()
        .iter()
        .any(|i| i.eq_ignore_ascii_case(&shared_group_id()))
}

fn of_cluster(ids: &[String], name: &str) -> usize {
    ids.iter()
        .filter(|i| i.contains(&format!("/{name}-")))
        .count()
}

fn run_of(env: &Env, cluster: &str) -> String {
    let (code, out, err) = env.cli(&["--output", "json", "list"], &[]);
    assert_eq!(code, 0, "{err}");
    let runs = items(&out, "RunList");
    runs.iter()
        .find(|r| {
            r.to_string().contains(&format!("\"{cluster}\""))
                && r["workflow"].as_str() == Some("create-cluster")
        })
        .and_then(|r| r["run_id"].as_str())
        .unwrap_or_else(|| panic!("no create run of {cluster} in {out}"))
        .to_string()
}

/// Finding 11: two clusters in one persistent group; purges keep each other's resources;
/// the group goes with the last. (Before: the second create refused the group at step 1 —
/// "tag it or remove it" — and rolled back.)
#[test]
fn two_clusters_share_one_persistent_group() {
    let env = Env::new("shared-rg", FAST);
    let a = shared_cluster(&env, "alpha", "Public");
    let b = shared_cluster(&env, "bravo", "Public");
    let (code, out, err) = env.start("create-cluster", &a, &[], &[]);
    assert_eq!(code, 0, "alpha:\n{out}\n{err}");
    let (code, out, err) = env.start("create-cluster", &b, &[], &[]);
    assert_eq!(
        code, 0,
        "bravo could not use the shared group:\n{out}\n{err}"
    );
    let inside = in_shared(&env);
    assert_eq!(of_cluster(&inside, "alpha"), of_cluster(&inside, "bravo"));
    assert!(of_cluster(&inside, "alpha") >= 8, "{inside:#?}");

    // bravo is purged: its persistent resources go, alpha's and the group stay.
    let (code, out, err) = env.start("delete-cluster", &b, &["--purge-persistent"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let inside = in_shared(&env);
    assert!(group_exists(&env), "bravo's purge deleted the shared group");
    assert_eq!(of_cluster(&inside, "bravo"), 0, "{inside:#?}");
    assert!(
        of_cluster(&inside, "alpha") >= 8,
        "bravo's purge touched alpha: {inside:#?}"
    );
    let (_, show, _) = env.cli(&["show", &run_of_delete(&env, "bravo")], &[]);
    assert!(
        show.contains("kept because: shared persistent group still holds"),
        "the kept group is not explained:\n{show}"
    );

    // alpha is purged last: the group, now empty, goes too.
    let (code, out, err) = env.start("delete-cluster", &a, &["--purge-persistent"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!group_exists(&env), "the empty shared group was left");
    assert!(in_shared(&env).is_empty());
}

fn run_of_delete(env: &Env, cluster: &str) -> String {
    let (_, out, _) = env.cli(&["--output", "json", "list"], &[]);
    let runs = items(&out, "RunList");
    runs.iter()
        .find(|r| {
            r.to_string().contains(&format!("\"{cluster}\""))
                && r["workflow"].as_str() == Some("delete-cluster")
        })
        .and_then(|r| r["run_id"].as_str())
        .unwrap_or_else(|| panic!("no delete run of {cluster} in {out}"))
        .to_string()
}

/// Finding 11: bravo's run creates the shared group and is killed; alpha moves in; bravo's
/// run then fails and unwinds. Its undo deletes its own identities but keeps the group it
/// created, because alpha's resources are inside.
#[test]
fn an_unwinding_create_keeps_a_shared_group_another_cluster_moved_into() {
    let env = Env::new("shared-rg-unwind", FAST);
    let a = shared_cluster(&env, "alpha", "Public");
    let b = shared_cluster(&env, "bravo", "Public");
    let bs = b.to_string_lossy().to_string();
    let mut p = Proc::spawn(
        &env.dir,
        &env.args(&["start", "create-cluster", "--config", &bs]),
        &[
            ("HCP_POLL_MS", "20"),
            (
                "HCP_CRASH_AT",
                "after-write:action:create-cluster.identities.persistent-rg",
            ),
        ],
    );
    assert!(
        p.wait_line("HCP_CRASHPOINT", Duration::from_secs(60))
            .is_some(),
        "{}",
        p.stderr()
    );
    p.kill();
    assert!(group_exists(&env), "bravo's run did not create the group");
    let bravo = run_of(&env, "bravo");

    let (code, out, err) = env.start("create-cluster", &a, &[], &[]);
    assert_eq!(code, 0, "alpha:\n{out}\n{err}");
    let alpha_inside = of_cluster(&in_shared(&env), "alpha");
    assert!(alpha_inside >= 8);

    let (code, out, err) = env.cli(
        &["drive", &bravo],
        &[("HCP_INJECT_FAIL", "create-cluster.identities.disk")],
    );
    assert_eq!(
        code, 1,
        "bravo should have failed and unwound:\n{out}\n{err}"
    );
    assert!(
        group_exists(&env),
        "bravo's unwind deleted a group holding alpha's identities"
    );
    let inside = in_shared(&env);
    assert_eq!(of_cluster(&inside, "bravo"), 0, "{inside:#?}");
    assert_eq!(of_cluster(&inside, "alpha"), alpha_inside, "{inside:#?}");
}

/// A bring-your-own network (RG, NSG, VNet with subnet) the user made.
fn byo_network(env: &Env) -> String {
    let rg = format!("/subscriptions/{GUEST_SUB}/resourceGroups/byo-net");
    let nsg = format!("{rg}/providers/Microsoft.Network/networkSecurityGroups/byo-nsg");
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/byo-vnet");
    for (path, body) in [
        (
            format!("{rg}?api-version=2021-04-01"),
            json!({"location": "eastus"}),
        ),
        (
            format!("{nsg}?api-version=2023-11-01"),
            json!({"location": "eastus"}),
        ),
        (
            format!("{vnet}?api-version=2023-11-01"),
            json!({"location": "eastus", "properties": {
                "addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
                "subnets": [{"name": "nodes", "properties": {
                    "addressPrefix": "10.1.0.0/24",
                    "networkSecurityGroup": {"id": nsg},
                }}],
            }}),
        ),
    ] {
        let (s, v) = env.sim.put(&path, &body);
        assert!(s < 300, "{path}: {s} {v}");
    }
    // Let the simulated LROs finish.
    std::thread::sleep(Duration::from_millis(500));
    format!(
        "network:\n  existing:\n    vnetId: {vnet}\n    subnetId: {vnet}/subnets/nodes\n    nsgId: {nsg}\n"
    )
}

fn byo_cluster(env: &Env, name: &str) -> (PathBuf, String) {
    let net = byo_network(env);
    let p = cluster_file(&env.dir, name, &format!("{name}-x1y2z"), "Public", "");
    let y = std::fs::read_to_string(&p)
        .unwrap()
        .replace("network:\n  create: {}\n", &net);
    std::fs::write(&p, y).unwrap();
    let nsg = format!(
        "/subscriptions/{GUEST_SUB}/resourceGroups/byo-net/providers/Microsoft.Network/networkSecurityGroups/byo-nsg"
    );
    (p, nsg)
}

fn guest_rules(env: &Env, nsg: &str) -> Vec<String> {
    let v = env.sim.get(&format!("{nsg}?api-version=2023-11-01"));
    v.pointer("/properties/securityRules")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter_map(|r| r["name"].as_str())
                .filter(|n| n.starts_with("k8s-azure-lb_"))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn hc_annotations_in_log(env: &Env) -> Vec<String> {
    env.sim
        .requests()
        .iter()
        .filter(|r| {
            r["method"].as_str() == Some("PATCH")
                && r["path"]
                    .as_str()
                    .is_some_and(|p| p.contains("/hostedclusters/"))
        })
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .collect()
}

/// Finding 9: the guest's cloud controller opened the ingress ports in the user's NSG; a
/// delete asks HyperShift to clean the guest's cloud resources up (the annotation set
/// before the DELETE), so the rules are gone afterwards, and the user's NSG is kept.
#[test]
fn delete_cleans_up_what_the_guest_made_in_a_byo_nsg() {
    let env = Env::new("cloud-cleanup", FAST);
    let (cfg, nsg) = byo_cluster(&env, "charlie");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        guest_rules(&env, &nsg).len(),
        1,
        "the guest opened no ports"
    );
    env.sim.clear_requests();
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        guest_rules(&env, &nsg).is_empty(),
        "the guest's rules stayed in the user's NSG"
    );
    assert!(
        env.sim.ids().iter().any(|i| i.eq_ignore_ascii_case(&nsg)),
        "the BYO NSG was deleted"
    );
    // The annotation was written before the HostedCluster's DELETE.
    let reqs = env.sim.requests();
    let patch = reqs.iter().position(|r| {
        r["method"].as_str() == Some("PATCH")
            && r["path"]
                .as_str()
                .is_some_and(|p| p.contains("/hostedclusters/charlie"))
    });
    let delete = reqs.iter().position(|r| {
        r["method"].as_str() == Some("DELETE")
            && r["path"]
                .as_str()
                .is_some_and(|p| p.contains("/hostedclusters/charlie"))
    });
    assert!(
        matches!((patch, delete), (Some(p), Some(d)) if p < d),
        "annotation PATCH {patch:?} must precede DELETE {delete:?}"
    );
}

/// Finding 9's opt-out: `--skip-cloud-cleanup` never sets the annotation, and the guest's
/// rules stay in the user's NSG (which is what the flag's help warns about).
#[test]
fn skip_cloud_cleanup_leaves_the_guests_rules() {
    let env = Env::new("cloud-cleanup-skip", FAST);
    let (cfg, nsg) = byo_cluster(&env, "delta");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    env.sim.clear_requests();
    let (code, out, err) = env.start("delete-cluster", &cfg, &["--skip-cloud-cleanup"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(hc_annotations_in_log(&env).is_empty(), "annotated anyway");
    assert_eq!(guest_rules(&env, &nsg).len(), 1);
    let (_, help, _) = env.cli(&["start", "--help"], &[]);
    assert!(help.contains("--skip-cloud-cleanup"), "{help}");
    assert!(help.contains("NSG"), "{help}");
}
