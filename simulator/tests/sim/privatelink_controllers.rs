//! HyperShift 4.22's own private-link controllers in the simulator
//! (`privatelink_controllers.rs`): the operator Deployment's args, the Route API, the CPO's
//! observer and reconciler, the HyperShift operator's PLS controller, and teardown.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::*;
use hcp_simulator::{ManagementPlatform, PrivatePlatform, SimConfig, Simulator};
use serde_json::{Value, json};

const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const CR: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters-pl/azureprivatelinkservices/private-router";
const FOREIGN: &str = "22222222-2222-2222-2222-222222222222";
const DNS: &str = "api-version=2024-06-01";

/// HyperShift `main` (4.23): its CPO removes the CR's finalizer itself on HCP deletion.
fn sim_with(pp: PrivatePlatform, mp: ManagementPlatform) -> Simulator {
    sim_at(pp, mp, "4.23")
}

fn sim_at(pp: PrivatePlatform, mp: ManagementPlatform, version: &str) -> Simulator {
    let mut c: SimConfig = config();
    c.private_platform = pp;
    c.management_platform = mp;
    c.hypershift_version = version.to_string();
    Simulator::new(c).unwrap()
}

/// On `release-4.22` the CPO's `reconcileHCPDeletion` cleans up its PE and
/// zones and removes the HCP's finalizer, but not the CR's own: once the CPO is gone the CR
/// keeps it, and with it the HostedCluster waits. Removing it (what hcp-workflow does once
/// ARM proves the PE and zones gone) lets the deletion finish.
#[tokio::test]
async fn on_4_22_the_cr_finalizer_outlives_the_cpo() {
    let sim = sim_at(
        PrivatePlatform::Azure,
        ManagementPlatform::OpenShift,
        "4.22",
    );
    setup(&sim).await;
    let cr = wait_for(&sim, CR, |r| {
        r.body["status"]["privateEndpointID"].is_string()
    })
    .await;
    let pe_id = cr.body["status"]["privateEndpointID"]
        .as_str()
        .unwrap()
        .to_string();
    call(&sim, "DELETE", &format!("{HC}/pl"), None).await;
    wait_for(&sim, &format!("{pe_id}?{NET}"), |r| r.status == 404).await;
    let held = wait_for(&sim, CR, |r| {
        r.body["metadata"]["deletionTimestamp"].is_string()
            && finalizers(&r.body)
                == vec!["hypershift.openshift.io/azure-private-link-service".to_string()]
    })
    .await;
    assert!(held.body["metadata"]["deletionTimestamp"].is_string());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        call(&sim, "GET", &format!("{HC}/pl"), None).await.status,
        200,
        "the HostedCluster waits for the CR"
    );
    call_with(
        &sim,
        "PATCH",
        CR,
        Some(json!({"metadata": {"finalizers": null}})),
        &[("content-type", "application/merge-patch+json")],
    )
    .await;
    wait_for(&sim, &format!("{HC}/pl"), |r| r.status == 404).await;
}

fn guest(p: &str) -> String {
    format!("{}{p}", rg_path("guest"))
}

async fn setup(sim: &Simulator) -> String {
    let c = sim.config().clone();
    let r = call(
        sim,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "clusters"}})),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    create_rg(sim, "guest").await;
    put_ok(sim, &format!("{}?{NET}", guest("/providers/Microsoft.Network/virtualNetworks/g")), json!({"location": "eastus", "properties": {
        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}, "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}})).await;
    let nat = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/pl-pls-nat",
        c.management_subscription, c.management_resource_group, c.management_vnet
    );
    put_ok(sim, &format!("{nat}?{NET}"), json!({"properties": {"addressPrefix": "10.225.0.0/24", "privateLinkServiceNetworkPolicies": "Disabled"}})).await;
    let hc = json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": "pl", "namespace": "clusters"},
        "spec": {
            "infraID": "pl-x1",
            "platform": {"type": "Azure", "azure": {
                "location": "eastus", "resourceGroup": "guest",
                "vnetID": guest("/providers/Microsoft.Network/virtualNetworks/g"),
                "subnetID": guest("/providers/Microsoft.Network/virtualNetworks/g/subnets/default"),
                "securityGroupID": "n", "subscriptionID": SUB, "tenantID": "t", "topology": "Private",
                "private": {"type": "PrivateLink", "privateLink": {"natSubnetID": nat}}}},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"},
            "dns": {"baseDomain": "example.com"},
        }
    });
    let r = call_with(
        sim,
        "PATCH",
        &format!("{HC}/pl?fieldManager=test"),
        Some(hc),
        &[("content-type", "application/apply-patch+yaml")],
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    nat
}

async fn wait_for(sim: &Simulator, path: &str, pred: impl Fn(&Resp) -> bool) -> Resp {
    for _ in 0..600 {
        let r = call(sim, "GET", path, None).await;
        if pred(&r) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = call(sim, "GET", path, None).await;
    panic!("condition on {path} never held: {}", r.text);
}

fn cond(v: &Value, t: &str) -> Option<String> {
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

fn finalizers(v: &Value) -> Vec<String> {
    v["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_operator_deployment_carries_the_private_platform_flag() {
    for (pp, want) in [
        (PrivatePlatform::Azure, true),
        (PrivatePlatform::None, false),
    ] {
        let sim = sim_with(pp, ManagementPlatform::OpenShift);
        let d = call(
            &sim,
            "GET",
            "/apis/apps/v1/namespaces/hypershift/deployments/operator",
            None,
        )
        .await;
        assert_eq!(d.status, 200, "{d:?}");
        let args = d.body["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(
            args.iter().any(|a| a == "--private-platform=Azure"),
            want,
            "{args:?}"
        );
    }
}

/// A bare AKS cluster (the Route CRD not applied) serves no Route API; and on AKS (ARO HCP)
/// the CPO's private-link controllers do not run, so it makes no AzurePrivateLinkService.
#[tokio::test]
async fn a_bare_aks_serves_no_route_api_and_the_cpo_makes_no_cr() {
    let mut c: SimConfig = config();
    c.private_platform = PrivatePlatform::Azure;
    c.management_platform = ManagementPlatform::Aks;
    c.hypershift_version = "4.23".into();
    c.scenario.aks.route_crd = false;
    let aks = Simulator::new(c).unwrap();
    let apis = call(&aks, "GET", "/apis", None).await;
    assert!(!apis.text.contains("route.openshift.io"), "{}", apis.text);
    assert!(apis.text.contains("\"apps\""), "{}", apis.text);
    assert_eq!(
        call(&aks, "GET", "/apis/route.openshift.io/v1", None)
            .await
            .status,
        404
    );
    // AKS as HyperShift's AKS setup leaves it (the default): the Route CRD is applied.
    let set_up = sim_with(PrivatePlatform::Azure, ManagementPlatform::Aks);
    assert_eq!(
        call(&set_up, "GET", "/apis/route.openshift.io/v1", None)
            .await
            .status,
        200
    );
    let ocp = sim_with(PrivatePlatform::None, ManagementPlatform::OpenShift);
    assert_eq!(
        call(&ocp, "GET", "/apis/route.openshift.io/v1", None)
            .await
            .status,
        200
    );
    setup(&aks).await;
    wait_for(
        &aks,
        "/api/v1/namespaces/clusters-pl/services/private-router",
        |r| r.status == 200,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(call(&aks, "GET", CR, None).await.status, 404);
}

/// Without `--private-platform Azure`: the CPO's observer makes the CR and adds its
/// finalizer, no alias ever comes, the HostedCluster's PLS conditions are Unknown — and on
/// deletion the CR's finalizer is left behind (the CPO goes with its HCP), holding the
/// HostedCluster until someone removes it.
#[tokio::test]
async fn without_the_flag_the_cr_waits_forever_and_its_finalizer_is_stuck_on_delete() {
    let sim = sim_with(PrivatePlatform::None, ManagementPlatform::OpenShift);
    setup(&sim).await;
    let cr = wait_for(&sim, CR, |r| finalizers(&r.body).len() == 1).await;
    assert_eq!(
        finalizers(&cr.body),
        vec!["hypershift.openshift.io/azure-private-link-service"]
    );
    assert_eq!(cr.body["spec"]["resourceGroupName"], "guest");
    assert!(
        cr.body["spec"]["natSubnetID"]
            .as_str()
            .unwrap()
            .ends_with("/pl-pls-nat")
    );
    let hc = wait_for(&sim, &format!("{HC}/pl"), |r| {
        cond(&r.body, "AzurePLSCreated").is_some()
    })
    .await;
    assert_eq!(
        cond(&hc.body, "AzurePLSCreated").as_deref(),
        Some("Unknown")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cr = call(&sim, "GET", CR, None).await;
    assert!(cr.body["status"]["privateLinkServiceAlias"].is_null());
    assert!(
        sim.inventory()
            .iter()
            .all(|i| i.rtype != "Microsoft.Network/privateLinkServices")
    );
    call(&sim, "DELETE", &format!("{HC}/pl"), None).await;
    let cr = wait_for(&sim, CR, |r| {
        r.body["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    assert_eq!(
        finalizers(&cr.body),
        vec!["hypershift.openshift.io/azure-private-link-service"]
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        call(&sim, "GET", &format!("{HC}/pl"), None).await.status,
        200,
        "held by the CR"
    );
    let r = call_with(
        &sim,
        "PATCH",
        CR,
        Some(json!({"metadata": {"finalizers": null}})),
        &[("content-type", "application/merge-patch+json")],
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    wait_for(&sim, &format!("{HC}/pl"), |r| r.status == 404).await;
}

/// With `--private-platform Azure`: the HO makes `pls-<clusterID>`, the CPO the PE, the
/// zones and records; a foreign, unapproved endpoint shows up; on deletion the CPO cleans
/// its side, the HO rejects the foreign connection but cannot delete the PLS while the
/// rejected connection remains — until it is removed.
#[tokio::test]
async fn with_the_flag_hypershift_makes_the_private_link_and_tears_it_down() {
    let sim = sim_with(PrivatePlatform::Azure, ManagementPlatform::OpenShift);
    let nat = setup(&sim).await;
    let cr = wait_for(&sim, CR, |r| {
        cond(&r.body, "AzurePrivateLinkServiceAvailable").as_deref() == Some("True")
            && r.body["status"]["baseDomainDNSZoneID"].is_string()
    })
    .await;
    let f = finalizers(&cr.body);
    assert!(
        f.contains(&"hypershift.openshift.io/azure-pls-cleanup".to_string()),
        "{f:?}"
    );
    assert!(
        f.contains(&"hypershift.openshift.io/azure-private-link-service".to_string()),
        "{f:?}"
    );
    let s = &cr.body["status"];
    let hc = call(&sim, "GET", &format!("{HC}/pl"), None).await;
    let cluster_id = hc.body["spec"]["clusterID"].as_str().unwrap().to_string();
    let pls_id = s["privateLinkServiceID"].as_str().unwrap().to_string();
    assert!(
        pls_id.ends_with(&format!("/privateLinkServices/pls-{cluster_id}")),
        "{pls_id}"
    );
    let pls = call(&sim, "GET", &format!("{pls_id}?{NET}"), None).await;
    assert_eq!(
        pls.body["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"],
        nat.as_str()
    );
    assert_eq!(
        pls.body["properties"]["autoApproval"]["subscriptions"],
        json!([SUB])
    );
    let pe_id = s["privateEndpointID"].as_str().unwrap().to_string();
    assert_eq!(
        pe_id,
        guest("/providers/Microsoft.Network/privateEndpoints/private-router-pe")
    );
    let pe = call(&sim, "GET", &format!("{pe_id}?{NET}"), None).await;
    assert_eq!(
        pe.body["properties"]["subnet"]["id"],
        guest("/providers/Microsoft.Network/virtualNetworks/g/subnets/default").as_str()
    );
    let zone = s["privateDNSZoneID"].as_str().unwrap().to_string();
    assert!(
        zone.ends_with("/privateDnsZones/pl.hypershift.local"),
        "{zone}"
    );
    let ip = s["privateEndpointIP"].as_str().unwrap();
    for r in ["api", "*.apps"] {
        let rec = call(&sim, "GET", &format!("{zone}/A/{r}?{DNS}"), None).await;
        assert_eq!(
            rec.body["properties"]["aRecords"][0]["ipv4Address"], ip,
            "{r}"
        );
    }
    let link = call(
        &sim,
        "GET",
        &format!("{zone}/virtualNetworkLinks/private-router-vnet-link?{DNS}"),
        None,
    )
    .await;
    assert_eq!(link.status, 200);
    let bd = s["baseDomainDNSZoneID"].as_str().unwrap().to_string();
    assert!(bd.ends_with("/privateDnsZones/example.com"));
    assert_eq!(
        call(&sim, "GET", &format!("{bd}/A/api-pl?{DNS}"), None)
            .await
            .status,
        200
    );
    // The writes were the controllers' own, logged with their names.
    let log = sim.requests();
    let by = |m: &str, frag: &str| {
        log.iter()
            .find(|r| r.method == m && r.path.contains(frag))
            .and_then(|r| r.actor.clone())
    };
    assert_eq!(
        by("PUT", "/privateLinkServices/pls-").as_deref(),
        Some("hypershift-operator")
    );
    assert_eq!(
        by("PUT", "/privateEndpoints/private-router-pe").as_deref(),
        Some("control-plane-operator")
    );
    // HostedCluster: the CR's conditions copied; Available (the private path works).
    wait_for(&sim, &format!("{HC}/pl"), |r| {
        cond(&r.body, "Available").as_deref() == Some("True")
            && cond(&r.body, "AzurePLSCreated").as_deref() == Some("True")
    })
    .await;

    // A foreign endpoint (another subscription, not auto-approved): Pending.
    let fsub = format!("/subscriptions/{FOREIGN}/resourceGroups/other");
    put_ok(
        &sim,
        &format!("{fsub}?api-version=2021-04-01"),
        json!({"location": "eastus"}),
    )
    .await;
    put_ok(&sim, &format!("{fsub}/providers/Microsoft.Network/virtualNetworks/o?{NET}"), json!({"location": "eastus", "properties": {
        "addressSpace": {"addressPrefixes": ["10.9.0.0/16"]}, "subnets": [{"name": "s", "properties": {"addressPrefix": "10.9.0.0/24"}}]}})).await;
    let alias = s["privateLinkServiceAlias"].as_str().unwrap();
    put_ok(&sim, &format!("{fsub}/providers/Microsoft.Network/privateEndpoints/foreign?{NET}"), json!({"location": "eastus", "properties": {
        "subnet": {"id": format!("{fsub}/providers/Microsoft.Network/virtualNetworks/o/subnets/s")},
        "manualPrivateLinkServiceConnections": [{"name": "f", "properties": {"privateLinkServiceId": alias}}]}})).await;
    let conns = call(
        &sim,
        "GET",
        &format!("{pls_id}/privateEndpointConnections?{NET}"),
        None,
    )
    .await;
    let foreign = conns.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["properties"]["privateEndpoint"]["id"]
                .as_str()
                .unwrap()
                .contains(FOREIGN)
        })
        .unwrap()
        .clone();
    assert_eq!(
        foreign["properties"]["privateLinkServiceConnectionState"]["status"],
        "Pending"
    );

    sim.clear_faults();
    call(&sim, "DELETE", &format!("{HC}/pl"), None).await;
    // The CPO removes its PE and DNS; the HO rejects the foreign connection, then fails
    // to delete the PLS while the rejected connection remains.
    wait_for(&sim, &format!("{pe_id}?{NET}"), |r| r.status == 404).await;
    wait_for(&sim, &format!("{zone}?{DNS}"), |r| r.status == 404).await;
    wait_for(&sim, &format!("{bd}?{DNS}"), |r| r.status == 404).await;
    let fid = foreign["id"].as_str().unwrap().to_string();
    wait_for(&sim, &format!("{fid}?{NET}"), |r| {
        r.body["properties"]["privateLinkServiceConnectionState"]["status"] == "Rejected"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let log = sim.requests();
    assert!(log.iter().any(|r| r.method == "PUT"
        && r.path.starts_with(&fid)
        && r.actor.as_deref() == Some("hypershift-operator")));
    assert!(
        log.iter().any(|r| r.method == "DELETE"
            && r.path.starts_with(&format!("{pls_id}?"))
            && r.error_code.as_deref()
                == Some("PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted")),
        "the HO's PLS delete is refused"
    );
    assert_eq!(
        call(&sim, "GET", &format!("{HC}/pl"), None).await.status,
        200,
        "held by the HO's finalizer"
    );
    // Removing the rejected connection (what hcp-workflow does first) unblocks it all.
    delete_wait(&sim, &format!("{fid}?{NET}")).await;
    wait_for(&sim, &format!("{HC}/pl"), |r| r.status == 404).await;
    assert_eq!(
        call(&sim, "GET", &format!("{pls_id}?{NET}"), None)
            .await
            .status,
        404
    );
    assert_eq!(call(&sim, "GET", CR, None).await.status, 404);
}

/// A HostedCluster deleted while the HyperShift operator's PLS is still provisioning (its
/// PUT sent, `status.privateLinkServiceID` not yet written): the real controller's create
/// reconcile writes the status before the delete reconcile runs, so the PLS is deleted.
/// Before the fix the simulator's delete saw no status and leaked the PLS; a leaked PLS
/// pins the internal load balancer and with it the HostedCluster's finalizer for ever
/// (seen as an unwind of `tests/cluster.rs` hung on the HostedCluster's deletion).
#[tokio::test]
async fn a_hosted_cluster_deleted_while_its_pls_provisions_takes_the_pls_with_it() {
    let sim = sim_with(PrivatePlatform::Azure, ManagementPlatform::OpenShift);
    setup(&sim).await;
    let mut pls_put = None;
    for _ in 0..600 {
        pls_put = sim
            .requests()
            .into_iter()
            .find(|r| r.method == "PUT" && r.path.contains("/privateLinkServices/pls-"));
        if pls_put.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let pls_path = pls_put.expect("the operator never sent its PLS PUT").path;
    let pls_path = pls_path.split('?').next().unwrap().to_string();
    let r = call(&sim, "DELETE", &format!("{HC}/pl"), None).await;
    assert!(r.status == 200 || r.status == 202, "{r:?}");
    let cr = call(&sim, "GET", CR, None).await;
    assert!(
        cr.body["status"]["privateLinkServiceID"].is_null(),
        "the window under test: the delete came before the status was written: {}",
        cr.text
    );
    wait_for(&sim, &format!("{pls_path}?{NET}"), |r| r.status == 404).await;
}
