//! `privateLink.managedBy` end to end: the real binary against a
//! simulator process whose HyperShift operator runs with or without `--private-platform
//! Azure` (HyperShift 4.22's own private-link controllers, simulated).
//!
//! For topologies Private and PublicAndPrivate, in modes `hypershift` and `hcp-workflow`:
//! create succeeds; delete leaves only persistent resources; every private endpoint
//! connection, a foreign one (another subscription) included, is rejected and removed
//! before the PLS is deleted — and, in hypershift mode, before the HostedCluster is
//! deleted (HyperShift's own operator only rejects, and a rejected connection blocks the
//! PLS delete forever); a failed create's unwind does the same. A mode that contradicts
//! the operator's install exits 2 with nothing journaled.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, assert_connections_rejected_before_pls_delete, cluster_file};
use hcp_e2e_tests::{Proc, document, says_run};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const TS: f64 = 0.002;
const NET: &str = "api-version=2023-11-01";
const FOREIGN_SUB: &str = "22222222-3333-4444-5555-666666666666";

fn cr_path(name: &str) -> String {
    format!(
        "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters-{name}/azureprivatelinkservices/private-router"
    )
}

fn is_persistent(id: &str, name: &str) -> bool {
    id.contains(&format!("/resourceGroups/{name}-persistent"))
        || id.ends_with(&format!("/resourcegroups/{name}-persistent"))
        || id.contains("sa-token-issuer-key")
        || id.contains("federatedIdentityCredentials")
        || id.contains("userAssignedIdentities")
        || id.contains("storageAccounts")
}

fn foreign(id: &str) -> bool {
    id.contains(FOREIGN_SUB)
}

/// A private endpoint from another subscription (not auto-approved) on `pls` (id or
/// alias); returns the foreign PE id.
fn connect_foreign(env: &Env, pls: &str, tag: &str) -> String {
    let rg = format!("/subscriptions/{FOREIGN_SUB}/resourceGroups/intruder-{tag}");
    let (s, b) = env.sim.put(
        &format!("{rg}?api-version=2021-04-01"),
        &json!({"location": "eastus"}),
    );
    assert!(s < 300, "{b}");
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/v");
    let (s, b) = env.sim.put(
        &format!("{vnet}?{NET}"),
        &json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]},
            "subnets": [{"name": "s", "properties": {"addressPrefix": "10.9.0.0/24"}}]}}),
    );
    assert!(s < 300, "{b}");
    std::thread::sleep(Duration::from_millis(200));
    let pe = format!("{rg}/providers/Microsoft.Network/privateEndpoints/intruder-pe");
    let (s, b) = env.sim.put(
        &format!("{pe}?{NET}"),
        &json!({"location": "eastus", "properties": {"subnet": {"id": format!("{vnet}/subnets/s")},
            "manualPrivateLinkServiceConnections": [{"name": "c", "properties": {"privateLinkServiceId": pls}}]}}),
    );
    assert!(s < 300, "{b}");
    pe
}

fn connections(env: &Env, pls_id: &str) -> Vec<Value> {
    env.sim
        .get(&format!("{pls_id}/privateEndpointConnections?{NET}"))["value"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

fn runs(env: &Env) -> Vec<Value> {
    env.run_list()
}

/// `show --output json` of the newest run.
fn show_newest(env: &Env) -> Value {
    let r = runs(env);
    let id = r[0]["run_id"].as_str().unwrap().to_string();
    let (code, out, err) = env.cli(&["--output", "json", "show", &id], &[]);
    assert_eq!(code, 0, "{err}");
    let v = document(&out, "Run");
    assert_eq!(v["run_id"], id.as_str(), "{out}");
    v
}

/// Position of the first request matching.
fn pos(reqs: &[Value], f: impl Fn(&str, &str, Option<&str>, u64) -> bool) -> Option<usize> {
    reqs.iter().position(|r| {
        f(
            r["method"].as_str().unwrap_or_default(),
            r["path"].as_str().unwrap_or_default(),
            r["actor"].as_str(),
            r["status"].as_u64().unwrap_or_default(),
        )
    })
}

fn hypershift_mode(topology: &str, tag: &str, managed_by: &str) {
    let env = Env::with_sim_args(tag, TS, &["--private-platform", "azure"]);
    let before = env.sim.ids();
    let name = tag.replace('-', "");
    let name = &name[..name.len().min(12)];
    let infra = format!("{name}-h5m0d");
    let cfg = cluster_file(
        &env.dir,
        name,
        &infra,
        topology,
        &format!("privateLink:\n  managedBy: {managed_by}\n"),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "create failed\nstdout:\n{out}\nstderr:\n{err}");
    let show = show_newest(&env);
    assert_eq!(
        show["labels"]["private-link"], "hypershift",
        "the resolved mode is recorded"
    );
    let cr = env.sim.get(&cr_path(name));
    let st = &cr["status"];
    let pls_id = st["privateLinkServiceID"].as_str().unwrap().to_string();
    let pls_name = pls_id.rsplit('/').next().unwrap().to_string();
    let pe_id = st["privateEndpointID"].as_str().unwrap().to_string();
    let zone_id = st["privateDNSZoneID"].as_str().unwrap().to_string();
    assert!(
        pe_id.ends_with("/privateEndpoints/private-router-pe"),
        "{pe_id}"
    );
    assert!(
        zone_id.ends_with(&format!("/privateDnsZones/{name}.hypershift.local")),
        "{zone_id}"
    );
    let ids = env.sim.ids();
    // HyperShift's resources, and none of ours of the same kinds.
    for id in [&pls_id, &pe_id, &zone_id] {
        assert!(ids.contains(id.as_str()), "{id} missing");
    }
    assert!(
        !ids.iter()
            .any(|i| i.ends_with(&format!("/privateLinkServices/pls-{infra}")))
    );
    assert!(
        !ids.iter()
            .any(|i| i.ends_with(&format!("/privateEndpoints/{name}-{infra}-pe")))
    );
    let reqs = env.sim.requests();
    assert!(
        pos(&reqs, |m, p, a, _| m == "PUT"
            && a.is_none()
            && (p.contains("/privateLinkServices/")
                || p.contains("/privateEndpoints/")))
        .is_none(),
        "hcp-workflow wrote a PLS or PE in hypershift mode"
    );
    // The ledger records them as HyperShift's.
    assert!(show.to_string().contains("managed by HyperShift"), "{show}");

    // Someone else connects; then delete-cluster.
    let fpe = connect_foreign(&env, &pls_id, name);
    wait_until("the foreign connection", Duration::from_secs(20), || {
        connections(&env, &pls_id).len() == 2
    });
    env.sim.clear_requests();
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "delete failed\nstdout:\n{out}\nstderr:\n{err}");
    let reqs = env.sim.requests();
    assert_connections_rejected_before_pls_delete(&reqs, &pls_name);
    let pn = pls_name.as_str();
    let fconn = |m: &'static str| {
        move |mm: &str, p: &str, a: Option<&str>, s: u64| {
            mm == m
                && a.is_none()
                && p.contains("/privateEndpointConnections/")
                && p.contains(pn)
                && s < 300
        }
    };
    let reject = pos(&reqs, fconn("PUT")).expect("the foreign connection rejected by hcp-workflow");
    let remove =
        pos(&reqs, fconn("DELETE")).expect("the foreign connection removed by hcp-workflow");
    let hc_delete = pos(&reqs, |m, p, _, _| {
        m == "DELETE" && p.contains(&format!("/hostedclusters/{name}"))
    })
    .expect("HostedCluster DELETE");
    let pe_delete = pos(&reqs, |m, p, a, s| {
        m == "DELETE"
            && p.starts_with(&format!("{pe_id}?"))
            && a == Some("control-plane-operator")
            && s < 300
    })
    .expect("HyperShift's CPO deletes its PE");
    let pls_delete = pos(&reqs, |m, p, a, s| {
        m == "DELETE"
            && p.starts_with(&format!("{pls_id}?"))
            && a == Some("hypershift-operator")
            && s < 300
    })
    .expect("HyperShift's operator deletes its PLS");
    assert!(
        reject < remove && remove < hc_delete,
        "reject {reject}, remove {remove}, HostedCluster delete {hc_delete}"
    );
    assert!(
        hc_delete < pe_delete && pe_delete < pls_delete,
        "pe {pe_delete}, pls {pls_delete}"
    );
    // HyperShift 4.22 (the simulator's default operator) leaves the CPO's
    // finalizer on the CR once its cleanup is done. hcp-workflow releases it, and only
    // after its own ARM GETs answered 404 for the PE and the zone the CR names.
    let gone = |id: &str| {
        pos(&reqs, |m, p, a, s| {
            m == "GET" && a.is_none() && p.starts_with(&format!("{id}?")) && s == 404
        })
    };
    let release = pos(&reqs, |m, p, a, s| {
        m == "PATCH"
            && a.is_none()
            && p.contains("/azureprivatelinkservices/private-router")
            && s < 300
    })
    .expect("hcp-workflow released the 4.22 CPO's CR finalizer");
    let pe_gone = gone(&pe_id).expect("a 404 GET of HyperShift's PE by hcp-workflow");
    let zone_gone = gone(&zone_id).expect("a 404 GET of HyperShift's zone by hcp-workflow");
    assert!(
        pe_delete < pe_gone && pe_gone < release && zone_gone < release,
        "PE delete {pe_delete}, PE 404 {pe_gone}, zone 404 {zone_gone}, release {release}"
    );
    // hcp-workflow deleted none of HyperShift's resources itself.
    assert!(
        pos(&reqs, |m, p, a, _| m == "DELETE"
            && a.is_none()
            && (p.starts_with(&format!("{pls_id}?"))
                || p.starts_with(&format!("{pe_id}?"))
                || p.contains(".hypershift.local")))
        .is_none()
    );
    // Verified gone; only persistent (and the foreign) resources are left.
    let after = env.sim.ids();
    for id in [&pls_id, &pe_id, &zone_id] {
        assert!(!after.contains(id.as_str()), "{id} left");
    }
    let left: BTreeSet<_> = after
        .difference(&before)
        .filter(|i| !foreign(i))
        .cloned()
        .collect();
    for id in &left {
        assert!(
            is_persistent(id, name),
            "non-persistent resource left: {id}"
        );
    }
    // The foreign endpoint is not ours: still there, its connection gone.
    assert!(after.contains(&fpe));
    env.sim.stop();
}

#[test]
fn hypershift_mode_private() {
    hypershift_mode("Private", "pl-hs-priv", "hypershift");
}

#[test]
fn hypershift_mode_public_and_private_resolved_by_auto() {
    hypershift_mode("PublicAndPrivate", "pl-hs-pap", "auto");
}

fn hcp_workflow_mode(topology: &str, tag: &str) {
    let env = Env::new(tag, TS);
    let before = env.sim.ids();
    let name = tag.replace('-', "");
    let name = &name[..name.len().min(12)];
    let infra = format!("{name}-w0rk1");
    let cfg = cluster_file(&env.dir, name, &infra, topology, "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "create failed\nstdout:\n{out}\nstderr:\n{err}");
    assert_eq!(show_newest(&env)["labels"]["private-link"], "hcp-workflow");
    // HyperShift's CPO made its CR and finalizer anyway; no alias ever came, and the
    // HostedCluster's PLS conditions stay Unknown without blocking availability.
    let cr = env.sim.get(&cr_path(name));
    assert_eq!(
        cr["metadata"]["finalizers"],
        json!(["hypershift.openshift.io/azure-private-link-service"])
    );
    assert!(cr["status"]["privateLinkServiceAlias"].is_null());
    let hc = env.sim.get(&format!(
        "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters/{name}"
    ));
    let cond = |t: &str| {
        hc["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .map(|c| c["status"].clone())
    };
    assert_eq!(cond("Available"), Some(json!("True")));
    assert_eq!(cond("AzurePLSCreated"), Some(json!("Unknown")));
    let pls_id = format!(
        "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-{infra}"
    );
    assert!(env.sim.ids().contains(&pls_id));
    connect_foreign(&env, &pls_id, name);
    wait_until("the foreign connection", Duration::from_secs(20), || {
        connections(&env, &pls_id).len() == 2
    });
    env.sim.clear_requests();
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(
        code, 0,
        "delete failed (a stuck CR finalizer?)\nstdout:\n{out}\nstderr:\n{err}"
    );
    let reqs = env.sim.requests();
    assert_connections_rejected_before_pls_delete(&reqs, &format!("pls-{infra}"));
    assert!(
        pos(&reqs, |m, p, _, s| m == "DELETE"
            && p.starts_with(&format!("{pls_id}?"))
            && s < 300)
        .is_some()
    );
    // The stuck finalizer (status names no Azure resource) was released by hcp-workflow.
    assert!(
        pos(&reqs, |m, p, a, _| m == "PATCH"
            && a.is_none()
            && p.contains("/azureprivatelinkservices/private-router"))
        .is_some(),
        "the CR's finalizer released"
    );
    let after = env.sim.ids();
    let left: BTreeSet<_> = after
        .difference(&before)
        .filter(|i| !foreign(i))
        .cloned()
        .collect();
    for id in &left {
        assert!(
            is_persistent(id, name),
            "non-persistent resource left: {id}"
        );
    }
    env.sim.stop();
}

#[test]
fn hcp_workflow_mode_private() {
    hcp_workflow_mode("Private", "pl-wf-priv");
}

#[test]
fn hcp_workflow_mode_public_and_private() {
    hcp_workflow_mode("PublicAndPrivate", "pl-wf-pap");
}

/// A create that fails after HyperShift made the private link unwinds: the foreign
/// connection is rejected and removed before the HostedCluster's delete, HyperShift's
/// finalizers remove PLS, PE and zone, and the unwind checks they are gone.
#[test]
fn hypershift_mode_unwind_releases_foreign_connections_first() {
    let env = Env::with_sim_args("pl-hs-unwind", TS, &["--private-platform", "azure"]);
    let before = env.sim.ids();
    let name = "unwind";
    let cfg = cluster_file(
        &env.dir,
        name,
        "unwind-u1n2d",
        "Private",
        "privateLink:\n  managedBy: hypershift\n",
    );
    // Slow node pools give the test time to connect a foreign endpoint; then the node
    // pool fails for good and the run unwinds.
    env.sim
        .fault(json!({"method": "PATCH", "path": "/nodepools/", "latency_ms": 3000}));
    let cfg_s = cfg.to_str().unwrap().to_string();
    let args = env.args(&["start", "create-cluster", "--config", &cfg_s]);
    let proc = Proc::spawn(
        &env.dir,
        &args,
        &[
            ("HCP_POLL_MS", "20"),
            ("HCP_INJECT_FAIL", "create-cluster.nodepools.workers"),
        ],
    );
    let mut pls_id = String::new();
    wait_until("HyperShift's private link", Duration::from_secs(60), || {
        let cr = env.sim.get(&cr_path(name));
        match (
            cr["status"]["privateLinkServiceID"].as_str(),
            cr["status"]["privateEndpointID"].as_str(),
        ) {
            (Some(p), Some(_)) => {
                pls_id = p.to_string();
                true
            }
            _ => false,
        }
    });
    connect_foreign(&env, &pls_id, name);
    let (code, lines, err) = proc.finish(Duration::from_secs(120));
    let out = lines.join("\n");
    assert_eq!(code, Some(1), "expected an unwind\n{out}\n{err}");
    assert!(says_run(&out, "rolled back"), "{out}\n{err}");
    let reqs = env.sim.requests();
    let pls_name = pls_id.rsplit('/').next().unwrap().to_string();
    assert_connections_rejected_before_pls_delete(&reqs, &pls_name);
    let remove = pos(&reqs, |m, p, a, s| {
        m == "DELETE"
            && a.is_none()
            && p.contains(&format!("{pls_name}/privateEndpointConnections/"))
            && s < 300
    })
    .expect("the foreign connection removed by the unwind");
    let hc_delete = pos(&reqs, |m, p, _, _| {
        m == "DELETE" && p.contains(&format!("/hostedclusters/{name}"))
    })
    .expect("HostedCluster DELETE");
    assert!(
        remove < hc_delete,
        "removed {remove} before the HostedCluster delete {hc_delete}"
    );
    let after = env.sim.ids();
    let left: Vec<_> = after
        .difference(&before)
        .filter(|i| !foreign(i))
        .cloned()
        .collect();
    assert!(left.is_empty(), "the unwind left {left:#?}");
    env.sim.stop();
}

/// `managedBy` against the operator's install: refused before journaling.
#[test]
fn a_mode_contradicting_the_operator_install_exits_2_with_nothing_journaled() {
    for (sim_args, mode, needle) in [
        (vec![], "hypershift", "without --private-platform Azure"),
        (
            vec!["--private-platform", "azure"],
            "hcp-workflow",
            "runs with --private-platform=Azure",
        ),
        (
            vec![
                "--private-platform",
                "azure",
                "--management-platform",
                "aks",
            ],
            "auto",
            "no Route API",
        ),
    ] {
        let env = Env::with_sim_args("pl-contradiction", TS, &sim_args);
        if sim_args.contains(&"aks") {
            // A bare AKS cluster: HyperShift's AKS setup not done, no Route API.
            let (code, body) = env.sim.put(
                "/_sim/scenario",
                &serde_json::json!({"aks": {"route_crd": false}}),
            );
            assert!(code < 300, "{code} {body}");
        }
        let before = env.sim.ids();
        let cfg = cluster_file(
            &env.dir,
            "gamma",
            "gamma-c0ntr",
            "Private",
            &format!("privateLink:\n  managedBy: {mode}\n"),
        );
        env.sim.clear_requests();
        let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
        assert_eq!(code, 2, "{mode}: expected exit 2\n{out}\n{err}");
        assert!(err.contains("privateLink.managedBy"), "{err}");
        assert!(err.contains(needle), "{mode}: {err}");
        assert!(err.contains("nothing was journaled"), "{err}");
        assert!(runs(&env).is_empty(), "{mode}: journaled");
        assert_eq!(env.sim.ids(), before, "{mode}: something was created");
        assert!(
            env.sim
                .requests()
                .iter()
                .all(|r| r["method"] == "GET" || r["method"] == "POST"),
            "{mode}: only reads (and the token) before refusing"
        );
        env.sim.stop();
    }
}
