//! How HyperShift 4.22 really reports upgrades and pool changes, end to end with real
//! processes against `simulator serve`:
//! - the control plane runs the *digest* of a release given by tag, and its
//!   `status.version` says so (`v2/cvo/deployment.go` `discoverCVOReleaseImages`): an
//!   upgrade by tag still completes, pools included, and `verify` is clean after it;
//! - a minor upgrade the guest's cluster-version operator is not ready for
//!   (`ClusterVersionUpgradeable=False`) is refused by preflight and by the step before the
//!   release changes, quoting the condition; HyperShift itself only blocks it
//!   (`Progressing=False`, `Blocked`) once the spec has changed, and the force annotation
//!   lets it through (`hostedcluster_controller.go` `isUpgrading`);
//! - a machine-template change of an `InPlace` pool replaces no machine in HyperShift
//!   (`nodepool/capi.go` `reconcileMachineSet`): refused with the reason, nothing journaled;
//! - a pool change is done only once HyperShift has reconciled the pool's new generation
//!   (every NodePool condition carries `observedGeneration`), so when update-cluster says
//!   it is done, every machine runs the new VM size.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, edit_file};
use hcp_e2e_tests::run_id;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const FAST: f64 = 0.002;
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";

fn condition<'a>(obj: &'a Value, ctype: &str) -> &'a Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == ctype))
        .unwrap_or(&Value::Null)
}

/// The VM sizes of NodePool `<cluster>-<pool>`'s running machines (the simulator's CAPI
/// Machines: Microsoft.Compute is no ARM surface there).
fn vm_sizes(env: &Env, cluster: &str, pool: &str) -> Vec<String> {
    let key = format!("clusters/{cluster}-{pool}");
    env.sim
        .get("/_sim/machines")
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["nodePool"] == key.as_str() && m["deleting"] == false)
        .map(|m| m["size"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("timed out waiting for {what}");
}

fn create_at(
    env: &Env,
    name: &str,
    infra: &str,
    release: &str,
    pools: Option<&str>,
) -> std::path::PathBuf {
    let cfg = cluster_file(&env.dir, name, infra, "Public", "");
    edit_file(
        &cfg,
        "ocp-release:4.22.0-multi",
        &format!("ocp-release:{release}-multi"),
    );
    if let Some(p) = pools {
        edit_file(
            &cfg,
            "  - name: workers\n    replicas: 2\n  - name: infra\n    replicas: 1\n",
            p,
        );
    }
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    cfg
}

#[test]
fn an_upgrade_by_tag_completes_though_the_control_plane_reports_its_digest() {
    let env = Env::new("r422-digest", FAST);
    let name = "dig";
    let cfg = create_at(&env, name, "dig-d1g3s", "4.22.0", None);
    let hc = env.sim.get(&format!("{HC}/{name}"));
    // What the CVO runs is the tag's digest, never the tag.
    let created = hc["status"]["version"]["history"][0]["image"]
        .as_str()
        .unwrap();
    assert!(
        created.starts_with("quay.io/openshift-release-dev/ocp-release@sha256:"),
        "{hc}"
    );
    edit_file(&cfg, "ocp-release:4.22.0-multi", "ocp-release:4.22.3-multi");
    let (code, out, err) = env.start("update-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");
    let hc = env.sim.get(&format!("{HC}/{name}"));
    let latest = &hc["status"]["version"]["history"][0];
    assert_eq!(latest["version"], "4.22.3", "{hc}");
    assert_eq!(latest["state"], "Completed", "{hc}");
    assert_ne!(
        latest["image"], hc["spec"]["release"]["image"],
        "the history holds the digest, not the spec's tag"
    );
    assert!(latest["image"].as_str().unwrap().contains("@sha256:"));
    assert_eq!(
        condition(&hc, "Progressing")["reason"],
        "AsExpected",
        "{hc}"
    );
    for p in ["workers", "infra"] {
        let np = env.sim.get(&format!("{NP}/{name}-{p}"));
        assert_eq!(np["status"]["version"], "4.22.3", "{p}: {np}");
    }
    // Nothing is left to change, and the cluster verifies clean.
    let (code, out, err) = env.start("update-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Nothing to change"), "{out}");
    let (code, out, err) = env.cli(&["verify", &format!("cluster/{name}")], &[]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn a_minor_upgrade_the_guest_is_not_ready_for_is_refused_before_the_release_changes() {
    let env = Env::new("r422-blocked", FAST);
    let name = "blk";
    let cfg = create_at(&env, name, "blk-b10ck", "4.21.4", None);
    let why = "Kubernetes 1.35 removes several APIs which require admin consideration";
    let (s, b) = env
        .sim
        .put("/_sim/scenario", &json!({"not_upgradeable": why}));
    assert!((200..300).contains(&s), "{s} {b}");
    wait_for("ClusterVersionUpgradeable=False", || {
        let hc = env.sim.get(&format!("{HC}/{name}"));
        (condition(&hc, "ClusterVersionUpgradeable")["status"] == "False").then_some(())
    });
    edit_file(&cfg, "ocp-release:4.21.4-multi", "ocp-release:4.22.3-multi");
    let spec = "quay.io/openshift-release-dev/ocp-release:4.21.4-multi";

    // Preflight names the condition: exit 2, nothing journaled, nothing changed.
    let before = env.run_count();
    let (code, out, err) = env.start("update-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("k8s.hosted-cluster.upgradeable"), "{err}");
    assert!(
        err.contains(why) && err.contains("AdminAckRequired"),
        "{err}"
    );
    assert_eq!(env.run_count(), before, "nothing journaled");
    assert_eq!(
        env.sim.get(&format!("{HC}/{name}"))["spec"]["release"]["image"],
        spec
    );

    // Past preflight (the condition appeared after it): the step refuses before it changes
    // the release, so nothing is left half-upgraded.
    let (code, out, err) = env.start("update-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_ne!(code, 0, "{out}{err}");
    let run = run_id(&out);
    assert_eq!(
        env.sim.get(&format!("{HC}/{name}"))["spec"]["release"]["image"],
        spec
    );
    let (_, why_out, _) = env.cli(&["why", &run], &[]);
    assert!(
        why_out.contains("ClusterVersionUpgradeable=False (AdminAckRequired)")
            && why_out.contains(why),
        "{why_out}"
    );

    // HyperShift's own guard, when someone else changes the spec: Progressing=False,
    // Blocked, and the control plane stays where it was.
    let mut hc = env.sim.get(&format!("{HC}/{name}"));
    hc["spec"]["release"]["image"] =
        json!("quay.io/openshift-release-dev/ocp-release:4.22.3-multi");
    hc.as_object_mut().unwrap().remove("status");
    let (s, b) = env.sim.put(&format!("{HC}/{name}"), &hc);
    assert!((200..300).contains(&s), "{s} {b}");
    let hc = wait_for("Progressing=False, Blocked", || {
        let hc = env.sim.get(&format!("{HC}/{name}"));
        (condition(&hc, "Progressing")["reason"] == "Blocked").then_some(hc)
    });
    assert_eq!(
        condition(&hc, "Progressing")["message"],
        "ClusterVersionUpgradeable condition is false: cluster version is not upgradeable"
    );
    assert_eq!(
        hc["status"]["version"]["desired"]["version"], "4.21.4",
        "{hc}"
    );
    // The force annotation (an operator's decision) lets it through.
    let mut hc = hc;
    hc["metadata"]["annotations"]["hypershift.openshift.io/force-upgrade-to"] =
        json!("quay.io/openshift-release-dev/ocp-release:4.22.3-multi");
    hc.as_object_mut().unwrap().remove("status");
    let (s, b) = env.sim.put(&format!("{HC}/{name}"), &hc);
    assert!((200..300).contains(&s), "{s} {b}");
    wait_for("the forced upgrade to start", || {
        let hc = env.sim.get(&format!("{HC}/{name}"));
        (hc["status"]["version"]["desired"]["version"] == "4.22.3").then_some(())
    });
}

#[test]
fn an_in_place_pool_s_machine_template_change_is_refused_and_replaces_nothing() {
    let env = Env::new("r422-inplace", FAST);
    let name = "inp";
    let cfg = create_at(
        &env,
        name,
        "inp-1npl4",
        "4.22.0",
        Some("  - name: workers\n    replicas: 2\n    upgradeType: InPlace\n"),
    );
    edit_file(
        &cfg,
        "    upgradeType: InPlace\n",
        "    upgradeType: InPlace\n    vmSize: Standard_D8s_v5\n",
    );
    let before = env.run_count();
    let (code, out, err) = env.start("update-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{out}{err}");
    let all = format!("{out}{err}");
    assert!(all.contains("nodePools[workers].vmSize"), "{all}");
    assert!(all.contains("upgradeType InPlace"), "{all}");
    assert_eq!(env.run_count(), before, "nothing journaled");
    let c = cfg.to_string_lossy().to_string();
    let (_, plan, perr) = env.cli(&["plan", "update-cluster", "--config", &c], &[]);
    assert!(
        format!("{plan}{perr}").contains("upgradeType InPlace"),
        "{plan}{perr}"
    );

    // Why: in HyperShift such a change replaces no running machine, though the pool
    // settles as if it were done.
    let mut np = env.sim.get(&format!("{NP}/{name}-workers"));
    np["spec"]["platform"]["azure"]["vmSize"] = json!("Standard_D8s_v5");
    np.as_object_mut().unwrap().remove("status");
    let (s, b) = env.sim.put(&format!("{NP}/{name}-workers"), &np);
    assert!((200..300).contains(&s), "{s} {b}");
    let generation = env.sim.get(&format!("{NP}/{name}-workers"))["metadata"]["generation"].clone();
    wait_for("the pool to settle on the new generation", || {
        let np = env.sim.get(&format!("{NP}/{name}-workers"));
        let t = condition(&np, "UpdatingPlatformMachineTemplate");
        (t["observedGeneration"] == generation && t["status"] == "False").then_some(())
    });
    let sizes = vm_sizes(&env, name, "workers");
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    assert!(sizes.iter().all(|s| s == "Standard_D4s_v5"), "{sizes:?}");
}

#[test]
fn a_pool_change_is_done_only_once_hyper_shift_reconciled_its_generation() {
    let env = Env::new("r422-generation", FAST);
    let name = "gen";
    let cfg = create_at(
        &env,
        name,
        "gen-g3n3r",
        "4.22.0",
        Some("  - name: workers\n    replicas: 2\n"),
    );
    assert!(
        vm_sizes(&env, name, "workers")
            .iter()
            .all(|s| s == "Standard_D4s_v5")
    );
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 2\n",
        "  - name: workers\n    replicas: 2\n    vmSize: Standard_D8s_v5\n",
    );
    let (code, out, err) = env.start("update-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");
    // Done means done: every machine runs the new size, and the pool's conditions are of
    // the generation the update wrote.
    let sizes = vm_sizes(&env, name, "workers");
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    assert!(sizes.iter().all(|s| s == "Standard_D8s_v5"), "{sizes:?}");
    let np = env.sim.get(&format!("{NP}/{name}-workers"));
    assert_eq!(
        condition(&np, "Ready")["observedGeneration"],
        np["metadata"]["generation"],
        "{np}"
    );
}
