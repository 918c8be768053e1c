//! Kubernetes API subset and the simulated HyperShift operator.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use axum::body::Body;
use common::*;
use futures::StreamExt;
use hcp_simulator::{SimConfig, Simulator};
use serde_json::{Value, json};
use tower::ServiceExt;

const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";

fn sim_with_crds() -> Option<Simulator> {
    let dir = reference_dir()?;
    let mut cfg: SimConfig = config();
    cfg.crds_dir = Some(dir.join("hypershift"));
    Some(Simulator::new(cfg).unwrap())
}

async fn apply(sim: &Simulator, path: &str, obj: &Value) -> Resp {
    call_with(
        sim,
        "PATCH",
        &format!("{path}?fieldManager=test&force=true"),
        Some(obj.clone()),
        &[("content-type", "application/apply-patch+yaml")],
    )
    .await
}

pub fn hosted_cluster(name: &str, topology: &str) -> Value {
    // As hcp-workflow renders it: a LoadBalancer API server on a Public cluster, a Route
    // (behind the private router) on a Private one.
    let kas = if topology == "Public" {
        "LoadBalancer"
    } else {
        "Route"
    };
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": "clusters", "labels": {"team": "a"}},
        "spec": {
            "etcd": {"managementType": "Managed", "managed": {"storage": {"type": "PersistentVolume", "persistentVolume": {"size": "8Gi"}}}},
            "networking": {"networkType": "OVNKubernetes", "clusterNetwork": [{"cidr": "10.132.0.0/14"}], "serviceNetwork": [{"cidr": "172.31.0.0/16"}]},
            "platform": {"type": "Azure", "azure": {
                "location": "eastus", "resourceGroup": "rg", "vnetID": "v", "subnetID": "s", "securityGroupID": "n",
                "subscriptionID": SUB, "tenantID": "t", "topology": topology,
                "azureAuthenticationConfig": {"azureAuthenticationConfigType": "WorkloadIdentities"}}},
            "pullSecret": {"name": format!("{name}-pull-secret")},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64"},
            // A 4.22 operator cannot publish a Route API server without a hostname.
            "services": [{"service": "APIServer", "servicePublishingStrategy": if kas == "Route" {
                json!({"type": kas, "route": {"hostname": format!("api-{name}.example.com")}})
            } else {
                json!({"type": kas})
            }}],
            "dns": {"baseDomain": "example.com"},
        }
    })
}

async fn ensure_ns(sim: &Simulator, ns: &str) {
    let r = call(
        sim,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
    )
    .await;
    assert!(r.status == 201 || r.status == 409, "{r:?}");
}

#[tokio::test]
async fn core_objects_crud_selectors_and_errors() {
    let sim = sim();
    ensure_ns(&sim, "clusters").await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c1-pull-secret", "labels": {"app": "x"}}, "stringData": {".dockerconfigjson": "{}"}});
    let r = call(
        &sim,
        "POST",
        "/api/v1/namespaces/clusters/secrets",
        Some(secret.clone()),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["data"][".dockerconfigjson"], "e30=");
    assert_eq!(r.body["type"], "Opaque");
    let dup = call(
        &sim,
        "POST",
        "/api/v1/namespaces/clusters/secrets",
        Some(secret),
    )
    .await;
    assert_eq!(
        (dup.status, dup.body["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    call(
        &sim,
        "POST",
        "/api/v1/namespaces/clusters/secrets",
        Some(json!({"metadata": {"name": "other"}})),
    )
    .await;
    let l = call(
        &sim,
        "GET",
        "/api/v1/namespaces/clusters/secrets?fieldSelector=metadata.name%3Dc1-pull-secret",
        None,
    )
    .await;
    assert_eq!(l.body["kind"], "SecretList");
    assert_eq!(l.body["items"].as_array().unwrap().len(), 1);
    let l = call(&sim, "GET", "/api/v1/secrets?labelSelector=app%3Dx", None).await;
    assert_eq!(l.body["items"].as_array().unwrap().len(), 1);
    let missing = call(
        &sim,
        "GET",
        "/api/v1/namespaces/clusters/secrets/nope",
        None,
    )
    .await;
    assert_eq!(
        (
            missing.status,
            missing.body["reason"].as_str(),
            missing.body["kind"].as_str()
        ),
        (404, Some("NotFound"), Some("Status"))
    );
    // Stale resourceVersion on PUT conflicts.
    let cur = call(
        &sim,
        "GET",
        "/api/v1/namespaces/clusters/secrets/other",
        None,
    )
    .await
    .body;
    let mut stale = cur.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let c = call(
        &sim,
        "PUT",
        "/api/v1/namespaces/clusters/secrets/other",
        Some(stale),
    )
    .await;
    assert_eq!(
        (c.status, c.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let ok = call(
        &sim,
        "PUT",
        "/api/v1/namespaces/clusters/secrets/other",
        Some(cur),
    )
    .await;
    assert_eq!(ok.status, 200);
    // Unknown namespace.
    let r = call(
        &sim,
        "POST",
        "/api/v1/namespaces/nowhere/secrets",
        Some(json!({"metadata": {"name": "s"}})),
    )
    .await;
    assert_eq!(r.status, 404);
    // Discovery.
    assert_eq!(call(&sim, "GET", "/version", None).await.status, 200);
    let d = call(&sim, "GET", "/apis/hypershift.openshift.io/v1beta1", None).await;
    assert!(
        d.body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "hostedclusters")
    );
}

#[tokio::test]
async fn crd_validation_rejects_invalid_objects_with_422() {
    let Some(sim) = sim_with_crds() else { return };
    ensure_ns(&sim, "clusters").await;
    let mut bad = hosted_cluster("bad", "Public");
    bad["spec"].as_object_mut().unwrap().remove("release");
    let r = apply(&sim, &format!("{HC}/bad"), &bad).await;
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.body["reason"], "Invalid");
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("spec.release: Required value"),
        "{}",
        r.body["message"]
    );
    let mut wrong_enum = hosted_cluster("bad2", "Sideways");
    wrong_enum["metadata"]["name"] = json!("bad2");
    let r = apply(&sim, &format!("{HC}/bad2"), &wrong_enum).await;
    assert_eq!(r.status, 422);
    let mut wrong_type = hosted_cluster("bad3", "Public");
    wrong_type["spec"]["services"] = json!("not-a-list");
    let r = apply(&sim, &format!("{HC}/bad3"), &wrong_type).await;
    assert_eq!(r.status, 422);
    let good = apply(
        &sim,
        &format!("{HC}/good"),
        &hosted_cluster("good", "Public"),
    )
    .await;
    assert_eq!(good.status, 201, "{good:?}");
    // A nodepool missing spec.clusterName is refused.
    let np = json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool", "metadata": {"name": "np"},
        "spec": {"management": {"upgradeType": "Replace"}, "platform": {"type": "Azure"}, "release": {"image": "x"}}});
    assert_eq!(apply(&sim, &format!("{NP}/np"), &np).await.status, 422);
}

async fn read_events(body: Body, want: usize, timeout: Duration) -> Vec<Value> {
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    while out.len() < want {
        let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, stream.next()).await else {
            break;
        };
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
    }
    out
}

#[tokio::test]
async fn watch_streams_events_and_resumes() {
    let sim = sim();
    ensure_ns(&sim, "w").await;
    let created = call(
        &sim,
        "POST",
        "/api/v1/namespaces/w/configmaps",
        Some(json!({"metadata": {"name": "a"}, "data": {"k": "1"}})),
    )
    .await;
    let rv = created.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let req = axum::http::Request::builder()
        .uri("/api/v1/namespaces/w/configmaps?watch=true&timeoutSeconds=5")
        .body(Body::empty())
        .unwrap();
    let resp = sim.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let s2 = sim.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let p = call_with(
            &s2,
            "PATCH",
            "/api/v1/namespaces/w/configmaps/a",
            Some(json!({"data": {"k": "2"}})),
            &[("content-type", "application/merge-patch+json")],
        )
        .await;
        assert_eq!(p.status, 200);
        call(&s2, "DELETE", "/api/v1/namespaces/w/configmaps/a", None).await;
    });
    let evs = read_events(resp.into_body(), 3, Duration::from_secs(5)).await;
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
    assert_eq!(evs[1]["object"]["data"]["k"], "2");
    // Resuming from the creation's resourceVersion replays what followed.
    let req = axum::http::Request::builder()
        .uri(format!(
            "/api/v1/namespaces/w/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .body(Body::empty())
        .unwrap();
    let resp = sim.router().oneshot(req).await.unwrap();
    let evs = read_events(resp.into_body(), 2, Duration::from_secs(3)).await;
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn delete_with_finalizer_sets_deletion_timestamp() {
    let sim = sim();
    ensure_ns(&sim, "f").await;
    call(
        &sim,
        "POST",
        "/api/v1/namespaces/f/configmaps",
        Some(json!({"metadata": {"name": "a", "finalizers": ["example.com/keep"]}})),
    )
    .await;
    let d = call(&sim, "DELETE", "/api/v1/namespaces/f/configmaps/a", None).await;
    assert_eq!(d.status, 200);
    assert!(d.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        call(&sim, "GET", "/api/v1/namespaces/f/configmaps/a", None)
            .await
            .status,
        200
    );
    // Removing the finalizer (JSON patch, as kube-rs' finalizer helper does) deletes it.
    let p = call_with(
        &sim,
        "PATCH",
        "/api/v1/namespaces/f/configmaps/a",
        Some(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/keep"},
        {"op": "remove", "path": "/metadata/finalizers/0"}])),
        &[("content-type", "application/json-patch+json")],
    )
    .await;
    assert_eq!(p.status, 200, "{p:?}");
    assert_eq!(
        call(&sim, "GET", "/api/v1/namespaces/f/configmaps/a", None)
            .await
            .status,
        404
    );
    // Namespace deletion removes contents, then the namespace.
    call(
        &sim,
        "POST",
        "/api/v1/namespaces/f/secrets",
        Some(json!({"metadata": {"name": "s"}})),
    )
    .await;
    assert_eq!(
        call(&sim, "DELETE", "/api/v1/namespaces/f", None)
            .await
            .body["status"]["phase"],
        "Terminating"
    );
    for _ in 0..100 {
        if call(&sim, "GET", "/api/v1/namespaces/f", None).await.status == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("namespace never went away");
}

async fn wait_for(sim: &Simulator, path: &str, pred: impl Fn(&Resp) -> bool) -> Resp {
    for _ in 0..500 {
        let r = call(sim, "GET", path, None).await;
        if pred(&r) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition on {path} never held");
}

fn condition(r: &Resp, t: &str) -> Option<String> {
    r.body["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .and_then(|c| c["status"].as_str())
        .map(str::to_string)
}

#[tokio::test]
async fn operator_public_cluster_and_nodepool() {
    let sim = sim();
    ensure_ns(&sim, "clusters").await;
    assert_eq!(
        apply(&sim, &format!("{HC}/pub"), &hosted_cluster("pub", "Public"))
            .await
            .status,
        201
    );
    let hc = wait_for(&sim, &format!("{HC}/pub"), |r| {
        condition(r, "Available").as_deref() == Some("True")
    })
    .await;
    assert!(
        hc.body["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == hcp_simulator::FINALIZER)
    );
    // A Public cluster's LoadBalancer API server; no private router.
    let svc = call(
        &sim,
        "GET",
        "/api/v1/namespaces/clusters-pub/services/kube-apiserverlb",
        None,
    )
    .await;
    assert!(svc.body["status"]["loadBalancer"]["ingress"][0]["ip"].is_string());
    let none = call(
        &sim,
        "GET",
        "/api/v1/namespaces/clusters-pub/services/private-router",
        None,
    )
    .await;
    assert_eq!(none.status, 404);
    let np = json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool", "metadata": {"name": "pub-1"},
        "spec": {"clusterName": "pub", "replicas": 2, "management": {"upgradeType": "Replace"}, "platform": {"type": "Azure"}, "release": {"image": "x"}}});
    assert_eq!(apply(&sim, &format!("{NP}/pub-1"), &np).await.status, 201);
    wait_for(&sim, &format!("{NP}/pub-1"), |r| {
        condition(r, "Ready").as_deref() == Some("True")
    })
    .await;
    // Delete: finalizers go after a delay, then the objects are gone with their LB.
    call(&sim, "DELETE", &format!("{NP}/pub-1"), None).await;
    call(&sim, "DELETE", &format!("{HC}/pub"), None).await;
    wait_for(&sim, &format!("{HC}/pub"), |r| r.status == 404).await;
    wait_for(&sim, &format!("{NP}/pub-1"), |r| r.status == 404).await;
    assert!(
        sim.inventory()
            .iter()
            .all(|i| !i.id.contains("kubernetes-internal-clusters-pub"))
    );
}

#[tokio::test]
async fn operator_private_cluster_nodes_wait_for_pe_and_dns_and_lb_blocks_delete() {
    let sim = sim();
    let c = sim.config().clone();
    ensure_ns(&sim, "clusters").await;
    apply(
        &sim,
        &format!("{HC}/priv"),
        &hosted_cluster("priv", "Private"),
    )
    .await;
    let svc = wait_for(
        &sim,
        "/api/v1/namespaces/clusters-priv/services/private-router",
        |r| r.body["status"]["loadBalancer"]["ingress"][0]["ip"].is_string(),
    )
    .await;
    let ip = svc.body["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .unwrap()
        .to_string();
    // Find the internal LB in the management group whose frontend has that IP.
    let msub = &c.management_subscription;
    let mrg = format!(
        "/subscriptions/{msub}/resourceGroups/{}",
        c.management_resource_group
    );
    let lbs = call(
        &sim,
        "GET",
        &format!("{mrg}/providers/Microsoft.Network/loadBalancers?{NET}"),
        None,
    )
    .await;
    let fe = lbs.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|lb| {
            lb["properties"]["frontendIPConfigurations"]
                .as_array()
                .unwrap()
                .clone()
        })
        .find(|f| f["properties"]["privateIPAddress"] == ip.as_str())
        .unwrap();
    let fe_id = fe["id"].as_str().unwrap().to_string();
    // NAT subnet in the management VNet, then the PLS.
    let nat = format!(
        "{mrg}/providers/Microsoft.Network/virtualNetworks/{}/subnets/priv-pls-nat",
        c.management_vnet
    );
    put_ok(&sim, &format!("{nat}?{NET}"), json!({"properties": {"addressPrefix": "10.225.0.0/24", "privateLinkServiceNetworkPolicies": "Disabled"}})).await;
    let pls = format!("{mrg}/providers/Microsoft.Network/privateLinkServices/pls-priv");
    let pls_body = put_ok(
        &sim,
        &format!("{pls}?{NET}"),
        json!({"location": c.management_location, "properties": {
        "loadBalancerFrontendIpConfigurations": [{"id": fe_id}],
        "ipConfigurations": [{"name": "nat", "properties": {"subnet": {"id": nat}}}],
        "visibility": {"subscriptions": [SUB]}, "autoApproval": {"subscriptions": [SUB]}}}),
    )
    .await;
    let alias = pls_body["properties"]["alias"]
        .as_str()
        .unwrap()
        .to_string();
    // Guest network + PE by alias.
    create_rg(&sim, "guest").await;
    put_ok(&sim, &format!("{}/providers/Microsoft.Network/virtualNetworks/g?{NET}", rg_path("guest")), json!({"location": "eastus", "properties": {
        "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}, "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}})).await;
    let pe = format!(
        "{}/providers/Microsoft.Network/privateEndpoints/priv-pe",
        rg_path("guest")
    );
    put_ok(&sim, &format!("{pe}?{NET}"), json!({"location": "eastus", "properties": {
        "subnet": {"id": format!("{}/providers/Microsoft.Network/virtualNetworks/g/subnets/default", rg_path("guest"))},
        "manualPrivateLinkServiceConnections": [{"name": "c", "properties": {"privateLinkServiceId": alias, "requestMessage": "hcp"}}]}})).await;
    let pe_x = call(
        &sim,
        "GET",
        &format!("{pe}?{NET}&$expand=networkInterfaces"),
        None,
    )
    .await;
    let pe_ip = pe_x.body["properties"]["networkInterfaces"][0]["properties"]["ipConfigurations"]
        [0]["properties"]["privateIPAddress"]
        .as_str()
        .unwrap()
        .to_string();
    // The control plane is Available (HyperShift's `Available` follows the HCP only), but
    // without the `api` record no node reaches the API server: the pool is not Ready.
    let np = json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool", "metadata": {"name": "priv-1"},
        "spec": {"clusterName": "priv", "replicas": 1, "management": {"upgradeType": "Replace"}, "platform": {"type": "Azure"}, "release": {"image": "x"}}});
    assert_eq!(apply(&sim, &format!("{NP}/priv-1"), &np).await.status, 201);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let hc = call(&sim, "GET", &format!("{HC}/priv"), None).await;
    assert_eq!(condition(&hc, "Available").as_deref(), Some("True"));
    let pool = wait_for(&sim, &format!("{NP}/priv-1"), |r| {
        condition(r, "AllNodesHealthy").as_deref() == Some("False")
    })
    .await;
    assert_eq!(condition(&pool, "Ready").as_deref(), Some("False"));
    let zone = format!(
        "{}/providers/Microsoft.Network/privateDnsZones/priv.hypershift.local",
        rg_path("guest")
    );
    put_ok(
        &sim,
        &format!("{zone}?api-version=2024-06-01"),
        json!({"location": "global"}),
    )
    .await;
    // Linked to the guest VNet the HostedCluster names (`vnetID`): only a linked zone
    // answers the nodes' lookups.
    put_ok(
        &sim,
        &format!("{zone}/virtualNetworkLinks/l?api-version=2024-06-01"),
        json!({"location": "global", "properties": {"virtualNetwork": {"id": "v"}, "registrationEnabled": false}}),
    )
    .await;
    put_ok(
        &sim,
        &format!("{zone}/A/api?api-version=2024-06-01"),
        json!({"properties": {"ttl": 300, "aRecords": [{"ipv4Address": pe_ip}]}}),
    )
    .await;
    wait_for(&sim, &format!("{NP}/priv-1"), |r| {
        condition(r, "Ready").as_deref() == Some("True")
    })
    .await;
    // Deleting the HostedCluster waits while the PLS still references its LB.
    call(&sim, "DELETE", &format!("{HC}/priv"), None).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        call(&sim, "GET", &format!("{HC}/priv"), None).await.status,
        200
    );
    delete_wait(&sim, &format!("{pe}?{NET}")).await;
    delete_wait(&sim, &format!("{pls}?{NET}")).await;
    // HyperShift's CPO made its AzurePrivateLinkService CR and finalizer; without
    // `--private-platform Azure` no alias ever came, and the finalizer outlives the CPO
    // (privatelink_controllers.rs): released here as hcp-workflow does.
    let cr = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters-priv/azureprivatelinkservices/private-router";
    wait_for(&sim, cr, |r| {
        r.body["metadata"]["deletionTimestamp"].is_string()
    })
    .await;
    call_with(
        &sim,
        "PATCH",
        cr,
        Some(json!({"metadata": {"finalizers": null}})),
        &[("content-type", "application/merge-patch+json")],
    )
    .await;
    wait_for(&sim, &format!("{HC}/priv"), |r| r.status == 404).await;
    let lb_id = fe_id
        .split("/frontendIPConfigurations/")
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        call(&sim, "GET", &format!("{lb_id}?{NET}"), None)
            .await
            .status,
        404
    );
}

/// The simulated operator applies HyperShift's release rules
/// and the control-plane operator's refusal of an API-server Route without a hostname.
#[tokio::test(start_paused = true)]
async fn operator_applies_hypershifts_release_and_route_rules() {
    let sim = common::sim();
    ensure_ns(&sim, "clusters").await;
    let hc_path = |n: &str| format!("{HC}/{n}");

    // A release newer than the operator: ValidReleaseImage=False, message verbatim from
    // support/supportedversion/version.go.
    let mut newer = hosted_cluster("newer", "Public");
    newer["spec"]["release"]["image"] =
        json!("quay.io/openshift-release-dev/ocp-release:4.23.1-multi");
    assert_eq!(apply(&sim, &hc_path("newer"), &newer).await.status, 201);

    // PublicAndPrivate publishing the API server as a Route without a hostname.
    let mut route = hosted_cluster("route", "PublicAndPrivate");
    route["spec"]["services"] =
        json!([{"service": "APIServer", "servicePublishingStrategy": {"type": "Route"}}]);
    assert_eq!(apply(&sim, &hc_path("route"), &route).await.status, 201);

    // A private topology on a release before 4.22: the router never gets its internal LB.
    let mut old_private = hosted_cluster("oldprivate", "Private");
    old_private["spec"]["release"]["image"] =
        json!("quay.io/openshift-release-dev/ocp-release:4.21.3-multi");
    old_private["spec"]["services"] = json!([{"service": "APIServer",
        "servicePublishingStrategy": {"type": "Route", "route": {"hostname": "api.oldprivate.hypershift.local"}}}]);
    assert_eq!(
        apply(&sim, &hc_path("oldprivate"), &old_private)
            .await
            .status,
        201
    );

    let r = wait_for(&sim, &hc_path("newer"), |r| {
        condition(r, "ValidReleaseImage").is_some()
    })
    .await;
    let c = r.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ValidReleaseImage")
        .unwrap()
        .clone();
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "InvalidImage");
    assert_eq!(
        c["message"],
        // release-4.22 prints the semver (`"4.22.0"`, not main's `"4.22"`).
        "the latest version supported is: \"4.22.0\". Attempting to use: \"4.23.1\""
    );

    let r = wait_for(&sim, &hc_path("route"), |r| {
        condition(r, "Degraded").is_some()
    })
    .await;
    let msg = r.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Degraded")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("route hostname is required for service APIServer"),
        "{msg}"
    );

    // Long after the router would have come: no private-router Service for the old release,
    // and none of the three is Available.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let svc = call(
        &sim,
        "GET",
        "/api/v1/namespaces/clusters-oldprivate/services/private-router",
        None,
    )
    .await;
    assert_eq!(svc.status, 404, "{svc:?}");
    for n in ["newer", "route", "oldprivate"] {
        let r = call(&sim, "GET", &hc_path(n), None).await;
        assert_ne!(condition(&r, "Available").as_deref(), Some("True"), "{n}");
    }
}

/// The simulated operator applies HyperShift's network overlap check
/// (`hostedcluster_controller.go` `validateSliceNetworkCIDRs`): overlapping machine, service
/// or cluster networks give `ValidConfiguration=False` with HyperShift's message, and the
/// cluster never becomes Available.
#[tokio::test(start_paused = true)]
async fn operator_refuses_overlapping_networks_like_hypershift() {
    let sim = common::sim();
    ensure_ns(&sim, "clusters").await;
    let path = format!("{HC}/overlap");
    let mut hc = hosted_cluster("overlap", "Public");
    hc["spec"]["networking"] = json!({
        "networkType": "OVNKubernetes",
        "machineNetwork": [{"cidr": "10.0.0.0/16"}],
        "serviceNetwork": [{"cidr": "172.31.0.0/16"}],
        "clusterNetwork": [{"cidr": "10.0.0.0/14"}],
    });
    assert_eq!(apply(&sim, &path, &hc).await.status, 201);
    let r = wait_for(&sim, &path, |r| {
        condition(r, "ValidConfiguration").is_some()
    })
    .await;
    let c = r.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ValidConfiguration")
        .unwrap()
        .clone();
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "InvalidConfiguration");
    assert_eq!(
        c["message"],
        "spec.networking.MachineNetwork: Invalid value: \"10.0.0.0/16\": spec.networking.MachineNetwork and spec.networking.ClusterNetwork overlap: 10.0.0.0/16 and 10.0.0.0/14"
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    let r = call(&sim, "GET", &path, None).await;
    assert_ne!(
        condition(&r, "Available").as_deref(),
        Some("True"),
        "{}",
        r.body
    );
}
