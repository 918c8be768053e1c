//! Against `simulator serve`: update-cluster makes
//! a cluster that exists be what its file says now — node pools added, scaled, given
//! auto-repair and a drain timeout in place, autoscaled and removed (machines checked in
//! Azure after each step), a release upgrade (control
//! plane, then the pools in waves) that survives a SIGKILL in the middle of the pool waves
//! without re-sending its pivot, a failure after the pivot that pauses and `retry`
//! finishes, allowed subscriptions whose removed subscription's connection is rejected
//! then removed, every change it cannot make refused with nothing journaled, a downgrade,
//! an unsupported release and a skew refused by preflight, and delete-cluster afterwards
//! leaving only the persistent resources.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{
    Env, GUEST_SUB, cluster_file, edit_file, persistent_only, put_ready_at, request_lines,
};
use hcp_e2e_tests::crash::{crash_through, created_twice, targets};
use hcp_e2e_tests::{document, run_id, says_run};
use serde_json::{Value, json};
use std::path::Path;

const FAST: f64 = 0.002;
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";

/// The VMs of NodePool `<cluster>-<pool>` in the simulator's Azure (CAPZ machines).
fn machines(env: &Env, cluster: &str, pool: &str) -> usize {
    let prefix = format!("/virtualmachines/{cluster}-{pool}-");
    env.sim
        .ids()
        .iter()
        .filter(|id| id.to_ascii_lowercase().contains(&prefix))
        .count()
}

fn pool(env: &Env, cluster: &str, pool: &str) -> Value {
    env.sim.get(&format!("{NP}/{cluster}-{pool}"))
}

fn update(env: &Env, cfg: &Path, envs: &[(&str, &str)]) -> (i32, String, String) {
    env.start("update-cluster", cfg, &[], envs)
}

/// Requests that change something: not GETs, token requests or access reviews (the
/// read-only POSTs of the credential check and preflight).
fn writes(env: &Env) -> Vec<(String, String, u16)> {
    request_lines(&env.sim.requests())
        .into_iter()
        .filter(|(m, p, _)| {
            m != "GET"
                && !p.contains("/oauth2/v2.0/token")
                && !p.contains("/selfsubjectreviews")
                && !p.contains("/selfsubjectaccessreviews")
                && !p.contains("/providers/Microsoft.Authorization/permissions")
        })
        .collect()
}

fn assert_nothing_to_change(env: &Env, cfg: &Path) {
    let before = env.run_count();
    let (code, out, err) = update(env, cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Nothing to change"), "{out}");
    assert_eq!(env.run_count(), before, "nothing journaled");
}

#[test]
fn node_pools_are_added_scaled_autoscaled_and_removed_with_machines_checked_each_time() {
    let env = Env::new("update-pools", FAST);
    let before = env.sim.ids();
    let name = "pools";
    let cfg = cluster_file(&env.dir, name, "pools-p00l5", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // How to reach the cluster is the last thing a create says, and `show` has it too.
    assert!(out.contains("How to reach the cluster:"), "{out}");
    assert!(
        out.contains(&format!("Secret clusters/{name}-admin-kubeconfig")),
        "{out}"
    );
    assert!(
        out.contains(&format!("kubectl get secret -n clusters {name}-admin-kubeconfig -o jsonpath='{{.data.kubeconfig}}' | base64 -d > {name}.kubeconfig")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "https://console-openshift-console.apps.{name}.hcp.example.com"
        )),
        "{out}"
    );
    let v = env.show(&run_id(&out));
    assert!(
        v["access"]["api_server"]
            .as_str()
            .unwrap()
            .starts_with("https://"),
        "{}",
        v["access"]
    );
    assert_eq!(
        (
            machines(&env, name, "workers"),
            machines(&env, name, "infra")
        ),
        (2, 1)
    );
    assert_nothing_to_change(&env, &cfg);

    // Add a pool.
    edit_file(
        &cfg,
        "  - name: infra\n    replicas: 1\n",
        "  - name: infra\n    replicas: 1\n  - name: gpu\n    replicas: 1\n    vmSize: Standard_D8s_v5\n",
    );
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");
    assert!(out.contains("How to reach the cluster:"), "{out}");
    assert_eq!(machines(&env, name, "gpu"), 1);
    assert_eq!(
        pool(&env, name, "gpu")["spec"]["platform"]["azure"]["vmSize"],
        "Standard_D8s_v5"
    );
    let upd = env.show(&run_id(&out));
    assert!(
        upd["ledger"].as_array().unwrap().iter().any(|r| r["action"] == "created" && r["id"] == format!("clusters/{name}-gpu").as_str()),
        "{}",
        upd["ledger"]
    );
    assert_nothing_to_change(&env, &cfg);

    // Scale a pool.
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 2\n",
        "  - name: workers\n    replicas: 4\n",
    );
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(machines(&env, name, "workers"), 4);
    assert_eq!(pool(&env, name, "workers")["spec"]["replicas"], 4);
    assert_eq!(pool(&env, name, "workers")["status"]["replicas"], 4);
    assert_nothing_to_change(&env, &cfg);

    // Auto-repair on and a drain timeout: changed in place, on the same machines, and done
    // once HyperShift reports the health check (`AutorepairEnabled`).
    let vms = |env: &Env| -> Vec<String> {
        let prefix = format!("/virtualmachines/{name}-workers-");
        let mut v: Vec<String> = env
            .sim
            .ids()
            .into_iter()
            .filter(|id| id.to_ascii_lowercase().contains(&prefix))
            .collect();
        v.sort();
        v
    };
    let autorepair = |p: &Value| -> Value {
        p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "AutorepairEnabled")
            .map(|c| c["status"].clone())
            .unwrap_or(Value::Null)
    };
    let running = vms(&env);
    assert_eq!(running.len(), 4);
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 4\n",
        "  - name: workers\n    replicas: 4\n    autoRepair: true\n    nodeDrainTimeout: 20m\n",
    );
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let p = pool(&env, name, "workers");
    // `replace` is the CRD's default, which the API server fills in.
    assert_eq!(
        p["spec"]["management"],
        json!({"autoRepair": true, "upgradeType": "Replace",
            "replace": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}, "strategy": "RollingUpdate"}}),
        "{p}"
    );
    assert_eq!(p["spec"]["nodeDrainTimeout"], "1200s");
    assert_eq!(autorepair(&p), "True", "{p}");
    assert_eq!(vms(&env), running, "no machine replaced");
    assert_nothing_to_change(&env, &cfg);
    // And off again: the timeout removed, the health check gone, the same machines.
    edit_file(
        &cfg,
        "    autoRepair: true\n    nodeDrainTimeout: 20m\n",
        "",
    );
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let p = pool(&env, name, "workers");
    assert_eq!(p["spec"]["management"]["autoRepair"], false);
    assert!(p["spec"].get("nodeDrainTimeout").is_none(), "{p}");
    assert_eq!(autorepair(&p), "False", "{p}");
    assert_eq!(vms(&env), running, "no machine replaced");
    assert_nothing_to_change(&env, &cfg);

    // Autoscale it: HyperShift's spec.autoScaling, no replicas; the pool runs its minimum.
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 4\n",
        "  - name: workers\n    autoScaling: {min: 1, max: 3}\n",
    );
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let p = pool(&env, name, "workers");
    assert_eq!(p["spec"]["autoScaling"], json!({"min": 1, "max": 3}));
    assert!(p["spec"].get("replicas").is_none_or(Value::is_null), "{p}");
    // Done once the pool runs within its bounds; the autoscaler then removes the nodes it
    // does not need (after its scale-down-unneeded time) down to the minimum.
    let n = machines(&env, name, "workers");
    assert!((1..=3).contains(&n), "{n} machines");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while machines(&env, name, "workers") != 1 {
        assert!(
            std::time::Instant::now() < until,
            "the autoscaler never scaled down to min"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_nothing_to_change(&env, &cfg);

    // Remove the added pool: deleted, and its machines are gone when the step says done.
    edit_file(
        &cfg,
        "  - name: gpu\n    replicas: 1\n    vmSize: Standard_D8s_v5\n",
        "",
    );
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        pool(&env, name, "gpu").get("spec").is_none(),
        "the NodePool is gone"
    );
    assert_eq!(machines(&env, name, "gpu"), 0);
    let rm = env.show(&run_id(&out));
    assert!(
        rm["ledger"].as_array().unwrap().iter().any(|r| r["action"] == "deleted" && r["id"] == format!("clusters/{name}-gpu").as_str()),
        "{}",
        rm["ledger"]
    );
    assert_nothing_to_change(&env, &cfg);

    // delete-cluster after all of it leaves only the persistent resources.
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let left = persistent_only(&env.sim.ids(), &before, name);
    assert_eq!(
        left,
        Vec::<String>::new(),
        "only the persistent resources are left"
    );
}

fn with_two_pools_at(
    env: &Env,
    name: &str,
    infra: &str,
    release: &str,
    extra: &str,
) -> std::path::PathBuf {
    let cfg = cluster_file(&env.dir, name, infra, "Public", extra);
    edit_file(
        &cfg,
        "ocp-release:4.22.0-multi",
        &format!("ocp-release:{release}-multi"),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    cfg
}

fn patches_of(env: &Env, path: &str) -> usize {
    request_lines(&env.sim.requests())
        .iter()
        .filter(|(m, p, s)| m == "PATCH" && p.split('?').next() == Some(path) && *s < 300)
        .count()
}

#[test]
fn an_upgrade_survives_sigkill_in_the_pool_waves_without_resending_the_pivot() {
    let env = Env::new("update-upgrade", FAST);
    let name = "upg";
    let cfg = with_two_pools_at(&env, name, "upg-upgr4", "4.22.0", "");
    edit_file(&cfg, "ocp-release:4.22.0-multi", "ocp-release:4.22.3-multi");
    // The plan shows the pivot and the waves.
    let c = cfg.to_string_lossy().to_string();
    let (code, out, err) = env.cli(&["plan", "update-cluster", "--config", &c], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("update-cluster.release.control-plane  (k8s.hosted-cluster.release)  ⚑ pivot"),
        "{out}"
    );
    env.sim.clear_requests();
    let (code, out, err) = env.start("update-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // SIGKILL a worker at every boundary of the second wave (the first pool is done,
    // the control plane long since).
    let all = targets(
        &env.dir,
        &env.db,
        &env.sim,
        &cfg,
        "update-cluster",
        "action",
    );
    let points: Vec<String> = all
        .iter()
        .filter(|p| p.ends_with("update-cluster.release-nodepools.workers"))
        .cloned()
        .collect();
    assert_eq!(points.len(), 3, "{all:?}");
    let (end, kills) = crash_through(&env.dir, &env.db, &env.sim, &points, &[]);
    assert_eq!(end, "succeeded");
    assert!(kills >= 2, "only {kills} kills");
    // The pivot was sent once; each pool's release once; never a pool before the control
    // plane; everything on 4.22.3.
    let hc = format!("{HC}/{name}");
    let release_patches: Vec<usize> = request_lines(&env.sim.requests())
        .iter()
        .enumerate()
        .filter(|(_, (m, _, _))| m == "PATCH")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        patches_of(&env, &hc),
        1,
        "the control plane's release was PATCHed once"
    );
    for p in ["workers", "infra"] {
        assert_eq!(patches_of(&env, &format!("{NP}/{name}-{p}")), 1, "{p}");
        assert_eq!(pool(&env, name, p)["status"]["version"], "4.22.3");
    }
    let lines = request_lines(&env.sim.requests());
    let first = release_patches.first().copied().unwrap();
    assert!(
        lines[first].1.contains("/hostedclusters/"),
        "the control plane first: {:?}",
        lines[first]
    );
    let hcv = env.sim.get(&hc);
    assert_eq!(hcv["status"]["version"]["history"][0]["version"], "4.22.3");
    assert_eq!(hcv["status"]["version"]["history"][0]["state"], "Completed");
    assert!(created_twice(&env.sim.requests()).is_empty());
}

#[test]
fn a_failure_after_the_pivot_pauses_and_retry_completes_it() {
    let env = Env::new("update-pause", FAST);
    let name = "piv";
    let cfg = with_two_pools_at(&env, name, "piv-p1v0t", "4.22.0", "");
    edit_file(&cfg, "ocp-release:4.22.0-multi", "ocp-release:4.22.3-multi");
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 2\n",
        "  - name: workers\n    replicas: 3\n",
    );
    env.sim.clear_requests();
    let inject = [("HCP_INJECT_FAIL", "update-cluster.release-nodepools.infra")];
    let (code, out, err) = update(&env, &cfg, &inject);
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    assert!(out.contains("‖ Update paused after"), "{out}");
    assert!(!out.contains("rolled back"), "{out}");
    let v = env.show(&run);
    assert_eq!(v["state"], "needs-operator");
    assert_eq!(v["paused"]["cause"], "past-pivot", "{}", v["paused"]);
    // Nothing was undone: the scaled pool keeps 3, the control plane its new release.
    assert_eq!(pool(&env, name, "workers")["spec"]["replicas"], 3);
    assert_eq!(
        env.sim.get(&format!("{HC}/{name}"))["spec"]["release"]["image"],
        "quay.io/openshift-release-dev/ocp-release:4.22.3-multi"
    );
    // Another update of this cluster is refused while this one is unfinished.
    let (code, _, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most one run per cluster"), "{err}");
    let (code, out, err) = env.cli(&["retry", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");
    assert_eq!(
        patches_of(&env, &format!("{HC}/{name}")),
        1,
        "the pivot was not re-sent"
    );
    assert_eq!(pool(&env, name, "infra")["status"]["version"], "4.22.3");
    assert_nothing_to_change(&env, &cfg);
}

#[test]
fn a_failure_before_the_pivot_unwinds_to_the_cluster_as_it_was() {
    let env = Env::new("update-unwind", FAST);
    let name = "unw";
    let cfg = with_two_pools_at(&env, name, "unw-unw1d", "4.22.0", "");
    let pools_before = (
        pool(&env, name, "workers")["spec"].clone(),
        machines(&env, name, "workers"),
    );
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 2\n",
        "  - name: workers\n    replicas: 3\n    vmSize: Standard_D8s_v5\n",
    );
    edit_file(
        &cfg,
        "  - name: infra\n    replicas: 1\n",
        "  - name: infra\n    replicas: 1\n  - name: extra\n    replicas: 1\n",
    );
    edit_file(&cfg, "ocp-release:4.22.0-multi", "ocp-release:4.22.3-multi");
    // The control plane's release is the first pivot: fail it (after its effect? no —
    // fail the last step before it, the pool changes, so nothing of the pivot happened).
    let inject = [("HCP_INJECT_FAIL", "update-cluster.nodepools.workers")];
    let (code, out, err) = update(&env, &cfg, &inject);
    assert_eq!(code, 1, "{out}{err}");
    assert!(says_run(&out, "rolled back"), "{out}");
    // The scaled pool has its previous size and template back; the release never moved.
    let after = pool(&env, name, "workers");
    assert_eq!(after["spec"]["replicas"], pools_before.0["replicas"]);
    assert_eq!(
        after["spec"]["platform"]["azure"]["vmSize"],
        pools_before.0["platform"]["azure"]["vmSize"]
    );
    assert_eq!(machines(&env, name, "workers"), pools_before.1);
    assert_eq!(
        env.sim.get(&format!("{HC}/{name}"))["spec"]["release"]["image"],
        "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"
    );
    // The applied configuration is still the create's: the same file is still a change.
    let c = cfg.to_string_lossy().to_string();
    let (code, out, _) = env.cli(&["plan", "update-cluster", "--config", &c], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("nodePools[workers].replicas: 2 → 3"), "{out}");
}

/// The private endpoints (lower-cased ids) with a connection to `pls`.
fn connected_endpoints(env: &Env, pls: &str) -> Vec<String> {
    let conns = env.sim.get(&format!(
        "{pls}/privateEndpointConnections?api-version=2023-11-01"
    ));
    conns["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            c["properties"]["privateEndpoint"]["id"]
                .as_str()
                .map(str::to_lowercase)
        })
        .collect()
}

/// A private endpoint in subscription `sub` (group, VNet and subnet `tag`) connected to
/// the Private Link Service `pls`, as another team would make one; its id.
fn private_endpoint(env: &Env, sub: &str, tag: &str, pls: &str) -> String {
    let rg = format!("/subscriptions/{sub}/resourceGroups/{tag}");
    put_ready_at(env, &rg, "2021-04-01", json!({"location": "eastus"}));
    let vnet = put_ready_at(
        env,
        &format!("{rg}/providers/Microsoft.Network/virtualNetworks/{tag}-vnet"),
        "2023-11-01",
        json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]},
            "subnets": [{"name": "pe", "properties": {"addressPrefix": "10.9.0.0/24"}}]}}),
    );
    let subnet = format!("{}/subnets/pe", vnet["id"].as_str().unwrap());
    let pe = format!("{rg}/providers/Microsoft.Network/privateEndpoints/{tag}-pe");
    put_ready_at(
        env,
        &pe,
        "2023-11-01",
        json!({"location": "eastus", "properties": {"subnet": {"id": subnet},
            "privateLinkServiceConnections": [{"name": tag, "properties": {"privateLinkServiceId": pls}}]}}),
    );
    pe
}

#[test]
fn a_removed_subscription_s_connection_is_rejected_and_removed_and_allowed_ones_stay() {
    let env = Env::new("update-subs", FAST);
    let name = "subs";
    let infra = "subs-5ub5x";
    let (a, b) = (
        "22222222-3333-4444-5555-666666666666",
        "33333333-4444-5555-6666-777777777777",
    );
    let cfg = cluster_file(
        &env.dir,
        name,
        infra,
        "Private",
        &format!(
            "allowedSubscriptions:\n  - {a}\n  - {b}\nprivateLink:\n  managedBy: hcp-workflow\n"
        ),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let pls = format!(
        "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-{infra}"
    );
    // A private endpoint from each allowed subscription (auto-approved).
    let endpoints = [
        private_endpoint(&env, a, "alpha", &pls),
        private_endpoint(&env, b, "beta", &pls),
    ];
    let conns = env.sim.get(&format!(
        "{pls}/privateEndpointConnections?api-version=2023-11-01"
    ));
    let status = |pe: &str| {
        conns["value"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["properties"]["privateEndpoint"]["id"]
                    .as_str()
                    .is_some_and(|i| i.eq_ignore_ascii_case(pe))
            })
            .map(|c| c["properties"]["privateLinkServiceConnectionState"]["status"].clone())
    };
    assert_eq!(status(&endpoints[0]), Some(json!("Approved")));
    assert_eq!(status(&endpoints[1]), Some(json!("Approved")));
    // Drop subscription b.
    edit_file(&cfg, &format!("  - {b}\n"), "");
    env.sim.clear_requests();
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let v = env.sim.get(&format!("{pls}?api-version=2023-11-01"));
    let vis: Vec<&str> = v["properties"]["visibility"]["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(vis, vec![GUEST_SUB, a]);
    let auto: Vec<&str> = v["properties"]["autoApproval"]["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(auto, vec![GUEST_SUB, a]);
    // b's connection: rejected (PUT), then removed (DELETE), in that order; nobody else's
    // connection was written.
    let lines = writes(&env);
    let on_conn = |m: &str| {
        lines
            .iter()
            .filter(|(mm, p, _)| mm == m && p.contains("/privateEndpointConnections/"))
            .map(|(_, p, _)| p.split('?').next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let (puts, dels) = (on_conn("PUT"), on_conn("DELETE"));
    assert_eq!(puts.len(), 1, "{lines:?}");
    assert_eq!(puts, dels, "the rejected connection is the removed one");
    let reject_at = lines
        .iter()
        .position(|(m, p, _)| m == "PUT" && p.contains("/privateEndpointConnections/"))
        .unwrap();
    let delete_at = lines
        .iter()
        .position(|(m, p, _)| m == "DELETE" && p.contains("/privateEndpointConnections/"))
        .unwrap();
    assert!(reject_at < delete_at, "rejected before removed");
    let left = connected_endpoints(&env, &pls);
    assert!(
        left.contains(&endpoints[0].to_lowercase()),
        "a's connection stays: {left:?}"
    );
    assert!(
        !left.contains(&endpoints[1].to_lowercase()),
        "b's connection is gone: {left:?}"
    );
    assert_eq!(left.len(), 2, "ours and a's: {left:?}");
    // The HostedCluster says the same as the file.
    assert_eq!(
        env.sim.get(&format!("{HC}/{name}"))["spec"]["platform"]["azure"]["private"]["privateLink"]
            ["additionalAllowedSubscriptions"],
        json!([a])
    );
    let run = run_id(&out);
    let v = env.show(&run);
    assert!(
        v["ledger"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["action"] == "deleted"
                && r["type"] == "Microsoft.Network/privateLinkServices/privateEndpointConnections"),
        "{}",
        v["ledger"]
    );
    assert_nothing_to_change(&env, &cfg);
}

#[test]
fn every_change_update_cannot_make_is_refused_with_nothing_journaled() {
    let env = Env::new("update-refused", FAST);
    let name = "imm";
    let cfg = with_two_pools_at(&env, name, "imm-1mmut", "4.22.0", "");
    let original = std::fs::read_to_string(&cfg).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("location: eastus", "location: westus2", "location"),
        (
            "baseDomain: hcp.example.com",
            "baseDomain: other.example.com",
            "baseDomain",
        ),
        ("topology: Public", "topology: Private", "topology"),
        (
            "network:\n  create: {}",
            "network:\n  create: {vnetCidr: 10.0.0.0/15}",
            "network.create.vnetCidr",
        ),
        (
            "persistentResourceGroup: imm-persistent",
            "persistentResourceGroup: elsewhere",
            "persistentResourceGroup",
        ),
        (
            "  - name: workers\n    replicas: 2\n",
            "  - name: workers\n    replicas: 2\n    arch: arm64\n    vmSize: Standard_D4ps_v5\n",
            "nodePools[workers].arch",
        ),
        (
            "  - name: workers\n    replicas: 2\n",
            "  - name: workers\n    replicas: 2\n    zone: \"2\"\n",
            "nodePools[workers].zone",
        ),
    ];
    let before = env.run_count();
    for (from, to, field) in cases {
        std::fs::write(&cfg, &original).unwrap();
        edit_file(&cfg, from, to);
        env.sim.clear_requests();
        let (code, out, err) = update(&env, &cfg, &[]);
        assert_eq!(code, 2, "{field}: {out}{err}");
        assert!(err.contains(&format!("  {field}: ")), "{field}: {err}");
        assert!(err.contains("fix: "), "{field}: {err}");
        assert!(
            err.contains("nothing was journaled or created"),
            "{field}: {err}"
        );
        assert_eq!(env.run_count(), before, "{field}: nothing journaled");
        assert_eq!(writes(&env), vec![], "{field}: nothing written");
        // `plan update-cluster` says the same, with ✗.
        let c = cfg.to_string_lossy().to_string();
        let (code, out, _) = env.cli(&["plan", "update-cluster", "--config", &c], &[]);
        assert_eq!(code, 0);
        assert!(out.contains(&format!("✗ {field}")), "{field}: {out}");
    }
    std::fs::write(&cfg, &original).unwrap();
    // A cluster nobody created: nothing to update.
    let other = cluster_file(&env.dir, "nobody", "nobody-n0b0d", "Public", "");
    let (code, _, err) = update(&env, &other, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no applied configuration"), "{err}");
    assert!(err.contains("start create-cluster"), "{err}");
}

#[test]
fn a_downgrade_and_an_unsupported_release_are_refused_by_preflight() {
    // The simulated operator supports up to 4.23: 4.24 is not supported.
    let env = Env::with_sim_args("update-versions", FAST, &["--hypershift-version", "4.23"]);
    let name = "ver";
    let cfg = with_two_pools_at(&env, name, "ver-v3r5n", "4.22.0", "");
    let before = env.run_count();
    let refused = |to: &str, row: &str, says: &str| {
        let text = std::fs::read_to_string(&cfg).unwrap();
        let cur = text
            .lines()
            .find(|l| l.starts_with("releaseImage:"))
            .unwrap()
            .to_string();
        edit_file(
            &cfg,
            &cur,
            &format!("releaseImage: quay.io/openshift-release-dev/ocp-release:{to}-multi"),
        );
        env.sim.clear_requests();
        let (code, out, err) = update(&env, &cfg, &[]);
        assert_eq!(code, 2, "{to}: {out}{err}");
        assert!(err.contains(row) && err.contains(says), "{to}: {err}");
        assert_eq!(env.run_count(), before, "{to}: nothing journaled");
        assert_eq!(writes(&env), vec![], "{to}: nothing written");
    };
    refused(
        "4.21.5",
        "update.release.downgrade",
        "y-stream downgrade from \"4.22.0\" to \"4.21.5\" is not supported",
    );
    refused("4.24.0", "k8s.supported-versions", "not the release's 4.24");
    // The JSON plan names the refusal too.
    edit_file(&cfg, "ocp-release:4.24.0-multi", "ocp-release:4.22.0-multi");
    let c = cfg.to_string_lossy().to_string();
    let (code, out, _) = env.cli(
        &["--output", "json", "plan", "update-cluster", "--config", &c],
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(document(&out, "Plan")["nothing_to_change"], true);
}

#[test]
fn a_pool_skew_beyond_three_minors_is_refused_by_preflight() {
    // An operator that supports 4.24: 4.20 → 4.24 is supported, but the pools would be
    // four minors behind the control plane until their wave.
    let env = Env::with_sim_args("update-skew", FAST, &["--hypershift-version", "4.24"]);
    let name = "skw";
    let cfg = with_two_pools_at(&env, name, "skw-5k3w0", "4.20.0", "");
    let before = env.run_count();
    edit_file(&cfg, "ocp-release:4.20.0-multi", "ocp-release:4.24.0-multi");
    env.sim.clear_requests();
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("update.release.skew"), "{err}");
    assert!(
        err.contains("NodePool minor version 4.20 is less than 4.21, which is the minimum NodePool version compatible with the 4.24 HostedCluster"),
        "{err}"
    );
    assert_eq!(env.run_count(), before);
    assert_eq!(writes(&env), vec![], "nothing written");
    // Three minors is within HyperShift's skew: the upgrade runs, pools after the control
    // plane.
    edit_file(&cfg, "ocp-release:4.24.0-multi", "ocp-release:4.23.0-multi");
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    for p in ["workers", "infra"] {
        assert_eq!(pool(&env, name, p)["status"]["version"], "4.23.0");
    }
}

#[test]
fn with_hypershift_s_private_link_its_controller_applies_the_subscriptions_and_we_prune() {
    let env = Env::with_sim_args("update-subs-hs", FAST, &["--private-platform", "azure"]);
    let name = "hsubs";
    let (a, b) = (
        "22222222-3333-4444-5555-666666666666",
        "33333333-4444-5555-6666-777777777777",
    );
    let cfg = cluster_file(
        &env.dir,
        name,
        "hsubs-h5ub5",
        "Private",
        &format!(
            "allowedSubscriptions:\n  - {a}\n  - {b}\nprivateLink:\n  managedBy: hypershift\n"
        ),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let hc = env.sim.get(&format!("{HC}/{name}"));
    let cluster_id = hc["spec"]["clusterID"].as_str().unwrap().to_string();
    let pls = format!(
        "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-{cluster_id}"
    );
    // A private endpoint from b, auto-approved by HyperShift's PLS.
    let pe = private_endpoint(&env, b, "beta", &pls);
    edit_file(&cfg, &format!("  - {b}\n"), "");
    env.sim.clear_requests();
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 0, "{out}{err}");
    // The field HyperShift reads changed, and HyperShift (not hcp-workflow) updated its PLS.
    assert_eq!(
        env.sim.get(&format!("{HC}/{name}"))["spec"]["platform"]["azure"]["private"]["privateLink"]
            ["additionalAllowedSubscriptions"],
        json!([a])
    );
    let v = env.sim.get(&format!("{pls}?api-version=2023-11-01"));
    assert_eq!(
        v["properties"]["visibility"]["subscriptions"],
        json!([GUEST_SUB, a])
    );
    // HyperShift's observer watches only the `private-router` Service: hcp-workflow made
    // it look again by annotating that Service (nothing else of it is touched).
    let svc = env.sim.get(&format!(
        "/api/v1/namespaces/clusters-{name}/services/private-router"
    ));
    let nudge = svc["metadata"]["annotations"]["hcp-workflow.io/allowed-subscriptions"]
        .as_str()
        .unwrap_or_default();
    assert!(nudge.starts_with(a), "{svc}");
    // Who wrote the PLS: HyperShift's operator (its calls are logged with their actor),
    // never hcp-workflow.
    let pls_puts: Vec<Value> = env
        .sim
        .requests()
        .into_iter()
        .filter(|r| {
            r["method"] == "PUT"
                && r["path"].as_str().and_then(|p| p.split('?').next()) == Some(pls.as_str())
        })
        .collect();
    assert!(!pls_puts.is_empty(), "HyperShift updated its PLS");
    assert!(
        pls_puts.iter().all(|r| r["actor"] == "hypershift-operator"),
        "hcp-workflow does not write HyperShift's PLS: {pls_puts:?}"
    );
    // b's connection: rejected then removed by hcp-workflow (HyperShift leaves connections).
    let left = connected_endpoints(&env, &pls);
    assert!(!left.contains(&pe.to_lowercase()), "{left:?}");
    let on_conn = |m: &str| {
        writes(&env)
            .iter()
            .filter(|(mm, p, _)| mm == m && p.contains("/privateEndpointConnections/"))
            .count()
    };
    assert_eq!((on_conn("PUT"), on_conn("DELETE")), (1, 1));
    assert_nothing_to_change(&env, &cfg);
}

#[test]
fn a_scale_up_refused_for_quota_stalls_naming_the_machines_and_retry_finishes_it() {
    let env = Env::new("update-quota", FAST);
    let name = "quo";
    let cfg = with_two_pools_at(
        &env,
        name,
        "quo-qu0t4",
        "4.22.0",
        "waitBudgets:\n  nodePoolReady: 10s\n",
    );
    // 3 × Standard_D4s_v5 run (12 vCPUs); the subscription's regional quota is now 16.
    let (s, b) = env.sim.put("/_sim/scenario", &json!({"vm_core_quota": 16}));
    assert!((200..300).contains(&s), "{s} {b}");
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 2\n",
        "  - name: workers\n    replicas: 4\n",
    );
    // Preflight reads the usages: 12 of 16 used, the update adds 8.
    let before = env.run_count();
    let (code, out, err) = update(&env, &cfg, &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("azure.quota")
            && err.contains("total regional vCPUs: 12 of 16 used, the run needs 8 more"),
        "{err}"
    );
    assert_eq!(env.run_count(), before, "nothing journaled");
    // Past the preflight (the quota was taken between the check and the run, here by
    // skipping it), Azure refuses the machine and the pool's wait stalls at its budget.
    let (code, out, err) = env.start("update-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_eq!(code, 1, "{out}{err}");
    let run = run_id(&out);
    let v = env.show(&run);
    assert_eq!(v["state"], "needs-operator", "{}", v["blocked_on"]);
    // The step's wait names the pool, the machines that run and HyperShift's summary of
    // the refused one; Azure refused the VM with its real code.
    let blocked = v["blocked_on"].as_str().unwrap();
    assert!(
        blocked.contains("update-cluster.nodepools.workers"),
        "{blocked}"
    );
    let (_, why, _) = env.cli(&["why", &run], &[]);
    assert!(
        why.contains("3 machine(s) running, want 4 replicas"),
        "{why}"
    );
    assert!(why.contains("AllMachinesReady=False"), "{why}");
    let refused: Vec<Value> = env
        .sim
        .requests()
        .into_iter()
        .filter(|r| r["error_code"] == "OperationNotAllowed")
        .collect();
    assert!(!refused.is_empty(), "Azure refused a VM for quota");
    assert!(
        refused[0]["error_message"]
            .as_str()
            .unwrap()
            .contains("exceeding approved Total Regional Cores quota"),
        "{}",
        refused[0]
    );
    assert_eq!(
        machines(&env, name, "workers"),
        3,
        "nothing beyond the quota"
    );
    // More quota, then `retry`: the wait gets a fresh budget and the pool reaches 4.
    let (s, _) = env.sim.put("/_sim/scenario", &json!({}));
    assert!((200..300).contains(&s));
    let (code, out, err) = env.cli(&["retry", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");
    assert_eq!(machines(&env, name, "workers"), 4);
}
