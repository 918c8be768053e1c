//! Day-2 changes HyperShift carries out beyond the NodePool spec: the pull secret and SSH key
//! the operator syncs into the control-plane namespace, a changed SSH key rolling the
//! machines to a new config (`UpdatingConfig`), the PublicAndPrivate ↔ Private topology
//! switch (the public `router` Service), and the HostedCluster's transition rules the API
//! server enforces.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::*;
use hcp_simulator::{DnsZoneSeed, ManagementPlatform, PrivatePlatform, SimConfig, Simulator};
use serde_json::{Value, json};

const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const SECRETS: &str = "/api/v1/namespaces/clusters/secrets";
const VM: &str = "Microsoft.Compute/virtualMachines";
const DNS: &str = "api-version=2018-05-01";
const CURRENT_CONFIG: &str = "hypershift.openshift.io/nodePoolCurrentConfig";

/// Model durations at 1/500 (a node joins 0.6 s after its VM).
fn fast(mut c: SimConfig) -> Simulator {
    c.time_scale = 0.002;
    Simulator::new(c).unwrap()
}

async fn merge_patch(sim: &Simulator, path: &str, patch: Value) -> Resp {
    call_with(
        sim,
        "PATCH",
        path,
        Some(patch),
        &[("content-type", "application/merge-patch+json")],
    )
    .await
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Creates or replaces Secret `clusters/<name>` with `data` (plain text, encoded here).
async fn secret(sim: &Simulator, name: &str, data: Value) {
    let data: serde_json::Map<String, Value> = data
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), json!(b64(v.as_str().unwrap()))))
        .collect();
    let r = apply(
        sim,
        &format!("{SECRETS}/{name}"),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "clusters"}, "data": data}),
    )
    .await;
    assert!(r.status == 200 || r.status == 201, "{r:?}");
}

fn subnet(name: &str) -> String {
    format!(
        "{}/providers/Microsoft.Network/virtualNetworks/{name}-vnet/subnets/default",
        rg_path(&format!("{name}-net"))
    )
}

/// A Public cluster with a LoadBalancer API server (nodes reach it without a private
/// endpoint), its pull secret and SSH key referenced.
fn public_cluster(name: &str) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": "clusters"},
        "spec": {
            "infraID": format!("{name}-infra"),
            "platform": {"type": "Azure", "azure": {
                "location": "eastus", "resourceGroup": format!("{name}-mrg"), "subscriptionID": SUB,
                "subnetID": subnet(name), "topology": "Public"}},
            "pullSecret": {"name": format!("{name}-pull-secret")},
            "sshKey": {"name": format!("{name}-ssh-key")},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"},
            "dns": {"baseDomain": "example.com"},
            "services": [{"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}}],
        }
    })
}

fn node_pool(cluster: &str, replicas: u64) -> Value {
    json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
    "metadata": {"name": "workers", "namespace": "clusters"},
    "spec": {
        "clusterName": cluster, "replicas": replicas,
        "management": {"autoRepair": false, "upgradeType": "Replace"},
        "platform": {"type": "Azure", "azure": {
            "vmSize": "Standard_D4s_v5",
            "image": {"type": "AzureMarketplace", "azureMarketplace": {
                "publisher": "azureopenshift", "offer": "aro4", "sku": "422-v2", "version": "422.6.20250701"}},
            "osDisk": {"sizeGiB": 128, "diskStorageAccountType": "Premium_LRS"},
            "subnetID": subnet(cluster)}},
        "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"},
    }})
}

/// Namespace, managed resource group and guest network of cluster `name`.
async fn cluster_infra(sim: &Simulator, name: &str) {
    ensure_ns(sim, "clusters").await;
    create_rg(sim, &format!("{name}-mrg")).await;
    create_rg(sim, &format!("{name}-net")).await;
    put_ok(
        sim,
        &format!(
            "{}/providers/Microsoft.Network/virtualNetworks/{name}-vnet?{NET}",
            rg_path(&format!("{name}-net"))
        ),
        json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}}),
    )
    .await;
}

/// Names of the VMs in resource group `rg`, sorted.
fn vms(sim: &Simulator, rg: &str) -> Vec<String> {
    let rg = format!("/resourcegroups/{rg}/").to_ascii_lowercase();
    let mut v: Vec<String> = sim
        .inventory()
        .into_iter()
        .filter(|i| i.rtype == VM && i.id.to_ascii_lowercase().contains(&rg))
        .map(|i| i.name)
        .collect();
    v.sort();
    v
}

fn annotation(r: &Resp) -> Option<String> {
    r.body["metadata"]["annotations"][CURRENT_CONFIG]
        .as_str()
        .map(str::to_string)
}

/// The pool Ready with `replicas` nodes, its config rolled out (annotation set,
/// `UpdatingConfig` False).
async fn settled(sim: &Simulator, replicas: u64) -> Resp {
    wait_until(sim, &format!("{NP}/workers"), "settled", |r| {
        status(r, "Ready").as_deref() == Some("True")
            && r.body["status"]["replicas"] == replicas
            && status(r, "UpdatingConfig").as_deref() == Some("False")
            && annotation(r).is_some()
    })
    .await
}

#[tokio::test]
async fn the_operator_syncs_the_pull_secret_and_ssh_key_into_the_control_plane_namespace() {
    let sim = fast(config());
    cluster_infra(&sim, "sync").await;
    secret(
        &sim,
        "sync-pull-secret",
        json!({".dockerconfigjson": "{\"auths\":{}}"}),
    )
    .await;
    secret(
        &sim,
        "sync-ssh-key",
        json!({"id_rsa.pub": "ssh-ed25519 AAAA one"}),
    )
    .await;
    assert_eq!(
        apply(&sim, &format!("{HC}/sync"), &public_cluster("sync"))
            .await
            .status,
        201
    );
    let cp = "/api/v1/namespaces/clusters-sync/secrets";
    let pull = wait_until(
        &sim,
        &format!("{cp}/pull-secret"),
        "pull secret copied",
        |r| r.status == 200,
    )
    .await;
    assert_eq!(pull.body["type"], "kubernetes.io/dockerconfigjson");
    assert_eq!(
        pull.body["data"][".dockerconfigjson"],
        b64("{\"auths\":{}}").as_str()
    );
    let ssh = wait_until(&sim, &format!("{cp}/ssh-key"), "SSH key copied", |r| {
        r.status == 200
    })
    .await;
    assert_eq!(ssh.body["type"], "Opaque");
    assert_eq!(
        ssh.body["data"]["id_rsa.pub"],
        b64("ssh-ed25519 AAAA one").as_str()
    );
    let ns = call(&sim, "GET", "/api/v1/namespaces/clusters-sync", None).await;
    assert_eq!(
        ns.body["metadata"]["labels"]["hypershift.openshift.io/hosted-control-plane"],
        "true"
    );
    // Unchanged data is not rewritten on every reconcile.
    let rv = ssh.body["metadata"]["resourceVersion"].clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = call(&sim, "GET", &format!("{cp}/ssh-key"), None).await;
    assert_eq!(again.body["metadata"]["resourceVersion"], rv);
    // A changed source is copied.
    secret(
        &sim,
        "sync-ssh-key",
        json!({"id_rsa.pub": "ssh-ed25519 BBBB two"}),
    )
    .await;
    wait_until(&sim, &format!("{cp}/ssh-key"), "new SSH key copied", |r| {
        r.body["data"]["id_rsa.pub"] == b64("ssh-ed25519 BBBB two").as_str()
    })
    .await;
    // A source without its key is not copied (HyperShift's reconcile fails on it).
    secret(&sim, "sync-pull-secret", json!({"other": "x"})).await;
    secret(
        &sim,
        "sync-ssh-key",
        json!({"id_rsa.pub": "ssh-ed25519 CCCC three"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pull = call(&sim, "GET", &format!("{cp}/pull-secret"), None).await;
    assert_eq!(
        pull.body["data"][".dockerconfigjson"],
        b64("{\"auths\":{}}").as_str()
    );
    let ssh = call(&sim, "GET", &format!("{cp}/ssh-key"), None).await;
    assert_eq!(
        ssh.body["data"]["id_rsa.pub"],
        b64("ssh-ed25519 BBBB two").as_str(),
        "the SSH key waits behind the failed pull secret"
    );
    // The copies go with the HostedCluster.
    call(&sim, "DELETE", &format!("{HC}/sync"), None).await;
    wait_until(&sim, &format!("{HC}/sync"), "deleted", |r| r.status == 404).await;
    wait_until(&sim, &format!("{cp}/ssh-key"), "copy deleted", |r| {
        r.status == 404
    })
    .await;
}

#[tokio::test]
async fn a_changed_ssh_key_rolls_the_machines_and_a_pull_secret_content_change_does_not() {
    let sim = fast(config());
    cluster_infra(&sim, "cfg").await;
    secret(
        &sim,
        "cfg-pull-secret",
        json!({".dockerconfigjson": "{\"auths\":{}}"}),
    )
    .await;
    secret(
        &sim,
        "cfg-ssh-key",
        json!({"id_rsa.pub": "ssh-ed25519 AAAA one"}),
    )
    .await;
    apply(&sim, &format!("{HC}/cfg"), &public_cluster("cfg")).await;
    assert_eq!(
        apply(&sim, &format!("{NP}/workers"), &node_pool("cfg", 2))
            .await
            .status,
        201
    );
    let r = settled(&sim, 2).await;
    let first = annotation(&r).unwrap();
    assert!(
        first.len() == 8 && first.chars().all(|c| c.is_ascii_hexdigit()),
        "{first}"
    );
    let c = condition(&r, "UpdatingConfig").unwrap();
    assert_eq!(c["reason"], "AsExpected");
    assert_eq!(c["message"], "");
    let before = vms(&sim, "cfg-mrg");
    assert_eq!(before.len(), 2);

    // The pull secret's content is not part of the config: nothing rolls.
    secret(
        &sim,
        "cfg-pull-secret",
        json!({".dockerconfigjson": "{\"auths\":{\"quay.io\":{}}}"}),
    )
    .await;
    wait_until(
        &sim,
        "/api/v1/namespaces/clusters-cfg/secrets/pull-secret",
        "new pull secret copied",
        |r| r.body["data"][".dockerconfigjson"] == b64("{\"auths\":{\"quay.io\":{}}}").as_str(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = call(&sim, "GET", &format!("{NP}/workers"), None).await;
    assert_eq!(status(&r, "UpdatingConfig").as_deref(), Some("False"));
    assert_eq!(annotation(&r).as_deref(), Some(first.as_str()));
    assert_eq!(vms(&sim, "cfg-mrg"), before);

    // A new SSH key is a new config: the machines are replaced, surge 1 / unavailable 0.
    secret(
        &sim,
        "cfg-ssh-key",
        json!({"id_rsa.pub": "ssh-ed25519 BBBB two"}),
    )
    .await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "rolling", |r| {
        status(r, "UpdatingConfig").as_deref() == Some("True")
    })
    .await;
    let c = condition(&r, "UpdatingConfig").unwrap();
    assert_eq!(c["reason"], "AsExpected");
    let target = message(&r, "UpdatingConfig")
        .strip_prefix("Updating config in progress. Target config: ")
        .unwrap_or_else(|| panic!("{}", message(&r, "UpdatingConfig")))
        .to_string();
    assert_ne!(target, first);
    assert_eq!(annotation(&r).as_deref(), Some(first.as_str()));
    assert!(r.body["status"]["replicas"].as_u64().unwrap() >= 2);
    assert_eq!(status(&r, "Ready").as_deref(), Some("True"));
    // Other rollouts are not in progress.
    assert_eq!(status(&r, "UpdatingVersion").as_deref(), Some("False"));
    assert_eq!(
        status(&r, "UpdatingPlatformMachineTemplate").as_deref(),
        Some("False")
    );

    let r = wait_until(&sim, &format!("{NP}/workers"), "rolled", |r| {
        status(r, "UpdatingConfig").as_deref() == Some("False")
    })
    .await;
    assert_eq!(annotation(&r).as_deref(), Some(target.as_str()));
    assert_eq!(message(&r, "UpdatingConfig"), "");
    assert_eq!(status(&r, "Ready").as_deref(), Some("True"));
    assert_eq!(r.body["status"]["replicas"], 2);
    for _ in 0..200 {
        if vms(&sim, "cfg-mrg").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = vms(&sim, "cfg-mrg");
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(
        after.iter().all(|n| !before.contains(n)),
        "new machines: {before:?} → {after:?}"
    );
    // Settled: no further rollout.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(vms(&sim, "cfg-mrg"), after);
}

#[tokio::test]
async fn machines_wait_for_the_ssh_key_and_do_not_roll_when_it_appears() {
    let sim = fast(config());
    cluster_infra(&sim, "late").await;
    secret(&sim, "late-pull-secret", json!({".dockerconfigjson": "{}"})).await;
    // The SSH key Secret does not exist yet.
    apply(&sim, &format!("{HC}/late"), &public_cluster("late")).await;
    apply(&sim, &format!("{NP}/workers"), &node_pool("late", 1)).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(vms(&sim, "late-mrg").is_empty());
    let r = call(&sim, "GET", &format!("{NP}/workers"), None).await;
    assert_eq!(condition(&r, "UpdatingConfig"), None);
    assert_eq!(annotation(&r), None);

    secret(
        &sim,
        "late-ssh-key",
        json!({"id_rsa.pub": "ssh-ed25519 AAAA late"}),
    )
    .await;
    let r = settled(&sim, 1).await;
    let hash = annotation(&r).unwrap();
    let machines = vms(&sim, "late-mrg");
    assert_eq!(machines.len(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = call(&sim, "GET", &format!("{NP}/workers"), None).await;
    assert_eq!(annotation(&r), Some(hash));
    assert_eq!(status(&r, "UpdatingConfig").as_deref(), Some("False"));
    assert_eq!(vms(&sim, "late-mrg"), machines);
}

/// A PublicAndPrivate cluster with HyperShift's own private link (so nodes reach the API
/// server through the private endpoint), its API server a Route with a public hostname in
/// a seeded public zone.
async fn public_and_private(sim: &Simulator) {
    let c = sim.config().clone();
    ensure_ns(sim, "clusters").await;
    create_rg(sim, "guest").await;
    let g = |p: &str| format!("{}{p}", rg_path("guest"));
    put_ok(sim, &format!("{}?{NET}", g("/providers/Microsoft.Network/virtualNetworks/g")), json!({"location": "eastus", "properties": {
        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}, "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}})).await;
    let nat = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/pl-pls-nat",
        c.management_subscription, c.management_resource_group, c.management_vnet
    );
    put_ok(sim, &format!("{nat}?{NET}"), json!({"properties": {"addressPrefix": "10.225.0.0/24", "privateLinkServiceNetworkPolicies": "Disabled"}})).await;
    let route = |svc: &str, host: Option<&str>| {
        let mut s = json!({"service": svc, "servicePublishingStrategy": {"type": "Route"}});
        if let Some(h) = host {
            s["servicePublishingStrategy"]["route"] = json!({"hostname": h});
        }
        s
    };
    let hc = json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": "pl", "namespace": "clusters"},
        "spec": {
            "infraID": "pl-x1",
            "platform": {"type": "Azure", "azure": {
                "location": "eastus", "resourceGroup": "guest",
                "vnetID": g("/providers/Microsoft.Network/virtualNetworks/g"),
                "subnetID": g("/providers/Microsoft.Network/virtualNetworks/g/subnets/default"),
                "securityGroupID": "n", "subscriptionID": SUB, "tenantID": "t", "topology": "PublicAndPrivate",
                "private": {"type": "PrivateLink", "privateLink": {"natSubnetID": nat}}}},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"},
            "dns": {"baseDomain": "example.com"},
            "services": [
                route("APIServer", Some("api-pl.hcp.example.com")),
                route("Ignition", None), route("Konnectivity", None),
                route("OAuthServer", Some("oauth-pl.hcp.example.com")),
            ],
        }
    });
    assert_eq!(apply(sim, &format!("{HC}/pl"), &hc).await.status, 201);
    let mut np = node_pool("pl", 1);
    np["spec"]["platform"]["azure"]["subnetID"] = json!(g(
        "/providers/Microsoft.Network/virtualNetworks/g/subnets/default"
    ));
    assert_eq!(apply(sim, &format!("{NP}/workers"), &np).await.status, 201);
}

#[tokio::test]
async fn public_and_private_to_private_and_back_removes_and_recreates_the_public_router() {
    let mut c = config();
    c.private_platform = PrivatePlatform::Azure;
    c.management_platform = ManagementPlatform::OpenShift;
    c.hypershift_version = "4.22".into();
    c.dns_zones = vec![DnsZoneSeed {
        subscription: SUB.into(),
        resource_group: "dns".into(),
        domain: "hcp.example.com".into(),
    }];
    let sim = fast(c);
    public_and_private(&sim).await;
    let router = "/api/v1/namespaces/clusters-pl/services/router";
    let private_router = "/api/v1/namespaces/clusters-pl/services/private-router";
    let svc = wait_until(&sim, router, "public router", |r| r.status == 200).await;
    let ip = svc.body["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .unwrap()
        .to_string();
    // The API server's public name resolves to the router (what external-dns writes).
    let rec = format!(
        "{}/providers/Microsoft.Network/dnszones/hcp.example.com/A/api-pl?{DNS}",
        rg_path("dns")
    );
    put_ok(
        &sim,
        &rec,
        json!({"properties": {"TTL": 60, "ARecords": [{"ipv4Address": ip}]}}),
    )
    .await;
    let hc = wait_until(&sim, &format!("{HC}/pl"), "Available, DNS reachable", |r| {
        status(r, "Available").as_deref() == Some("True")
            && status(r, "ExternalDNSReachable").as_deref() == Some("True")
    })
    .await;
    let endpoint = hc.body["status"]["controlPlaneEndpoint"].clone();
    assert_eq!(
        endpoint,
        json!({"host": "api-pl.hcp.example.com", "port": 443})
    );
    wait_until(&sim, &format!("{NP}/workers"), "pool Ready", |r| {
        status(r, "Ready").as_deref() == Some("True")
    })
    .await;
    let private_ip = call(&sim, "GET", private_router, None).await.body["status"].clone();

    // PublicAndPrivate → Private: the public router goes; the private one stays.
    let r = merge_patch(
        &sim,
        &format!("{HC}/pl"),
        json!({"spec": {"platform": {"azure": {"topology": "Private"}}}}),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    wait_until(&sim, router, "public router deleted", |r| r.status == 404).await;
    let hc = wait_until(&sim, &format!("{HC}/pl"), "DNS unknown", |r| {
        status(r, "ExternalDNSReachable").as_deref() == Some("Unknown")
    })
    .await;
    assert_eq!(
        message(&hc, "ExternalDNSReachable"),
        "External DNS is not configured"
    );
    assert_eq!(
        condition(&hc, "ExternalDNSReachable").unwrap()["reason"],
        "StatusUnknown"
    );
    assert_eq!(status(&hc, "Available").as_deref(), Some("True"));
    assert_eq!(hc.body["status"]["controlPlaneEndpoint"], endpoint);
    let pr = call(&sim, "GET", private_router, None).await;
    assert_eq!(pr.status, 200);
    assert_eq!(pr.body["status"], private_ip);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let np = call(&sim, "GET", &format!("{NP}/workers"), None).await;
    assert_eq!(status(&np, "Ready").as_deref(), Some("True"));
    assert_eq!(call(&sim, "GET", router, None).await.status, 404);

    // Private → PublicAndPrivate: the public router is back, at the same address.
    let r = merge_patch(
        &sim,
        &format!("{HC}/pl"),
        json!({"spec": {"platform": {"azure": {"topology": "PublicAndPrivate"}}}}),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let svc = wait_until(&sim, router, "public router recreated", |r| r.status == 200).await;
    assert_eq!(
        svc.body["status"]["loadBalancer"]["ingress"][0]["ip"],
        ip.as_str()
    );
    let hc = wait_until(&sim, &format!("{HC}/pl"), "DNS reachable again", |r| {
        status(r, "ExternalDNSReachable").as_deref() == Some("True")
    })
    .await;
    assert_eq!(status(&hc, "Available").as_deref(), Some("True"));
    let np = call(&sim, "GET", &format!("{NP}/workers"), None).await;
    assert_eq!(status(&np, "Ready").as_deref(), Some("True"));

    // To Public: refused by the API server, as HyperShift's CRD refuses it.
    let r = merge_patch(
        &sim,
        &format!("{HC}/pl"),
        json!({"spec": {"platform": {"azure": {"topology": "Public"}}}}),
    )
    .await;
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(
        r.body["message"],
        "HostedCluster.hypershift.openshift.io \"pl\" is invalid: spec.platform.azure: Invalid value: \"object\": transitions between Public and non-Public topology are not supported"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["field"],
        "spec.platform.azure"
    );
    // Services are immutable.
    let r = merge_patch(
        &sim,
        &format!("{HC}/pl"),
        json!({"spec": {"services": [{"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}}]}}),
    )
    .await;
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(
        r.body["message"],
        "HostedCluster.hypershift.openshift.io \"pl\" is invalid: spec: Invalid value: \"object\": Services is immutable. Changes might result in unpredictable and disruptive behavior."
    );
    // `private` cannot go.
    let r = merge_patch(
        &sim,
        &format!("{HC}/pl"),
        json!({"spec": {"platform": {"azure": {"private": null}}}}),
    )
    .await;
    assert_eq!(r.status, 422, "{r:?}");
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .ends_with("private cannot be added or removed after cluster creation"),
        "{}",
        r.body["message"]
    );
}

/// State written before configs were modelled (machines and MachineDeployment without a
/// config, the pool without the annotation): the pool gets the annotation and
/// `UpdatingConfig=False`, and its machines are not rolled.
#[tokio::test]
async fn a_pool_from_older_state_is_at_its_config_without_a_rollout() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sim.json");
    let mut c = config();
    c.state_file = Some(file.clone());
    let machines = {
        let sim = fast(c.clone());
        cluster_infra(&sim, "old").await;
        secret(&sim, "old-pull-secret", json!({".dockerconfigjson": "{}"})).await;
        secret(
            &sim,
            "old-ssh-key",
            json!({"id_rsa.pub": "ssh-ed25519 AAAA old"}),
        )
        .await;
        apply(&sim, &format!("{HC}/old"), &public_cluster("old")).await;
        apply(&sim, &format!("{NP}/workers"), &node_pool("old", 2)).await;
        settled(&sim, 2).await;
        vms(&sim, "old-mrg")
    };
    assert_eq!(machines.len(), 2);
    // Rewrite the state as an older simulator wrote it.
    let mut state: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    for ms in state["machines"].as_object_mut().unwrap().values_mut() {
        for m in ms.as_array_mut().unwrap() {
            m.as_object_mut().unwrap().remove("config");
        }
    }
    for np in state["nps"].as_object_mut().unwrap().values_mut() {
        np["md"].as_object_mut().unwrap().remove("config");
    }
    let key = "hypershift.openshift.io/nodepools|clusters|workers";
    let np = &mut state["kube"][key]["object"];
    np["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(CURRENT_CONFIG);
    np["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .retain(|c| c["type"] != "UpdatingConfig");
    std::fs::write(&file, serde_json::to_vec(&state).unwrap()).unwrap();

    let sim = fast(c);
    for _ in 0..40 {
        let r = call(&sim, "GET", &format!("{NP}/workers"), None).await;
        assert_ne!(
            status(&r, "UpdatingConfig").as_deref(),
            Some("True"),
            "{:#}",
            r.body
        );
        assert_eq!(vms(&sim, "old-mrg"), machines);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = settled(&sim, 2).await;
    assert!(annotation(&r).is_some());
    assert_eq!(vms(&sim, "old-mrg"), machines);
}
