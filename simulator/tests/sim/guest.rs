//! Public DNS zones, the guest's ingress records and HyperShift's NodePool image defaulting
//! .
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::*;
use hcp_simulator::{DnsZoneSeed, Simulator};
use serde_json::{Value, json};

const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const DNS: &str = "api-version=2018-05-01";
const PDNS: &str = "api-version=2024-06-01";

fn seeded(zones: &[&str]) -> Simulator {
    let mut c = config();
    c.dns_zones = zones
        .iter()
        .map(|z| DnsZoneSeed {
            subscription: SUB.into(),
            resource_group: "dns".into(),
            domain: (*z).into(),
        })
        .collect();
    Simulator::new(c).unwrap()
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

fn zone_id(domain: &str) -> String {
    format!(
        "{}/providers/Microsoft.Network/dnszones/{domain}",
        rg_path("dns")
    )
}

#[tokio::test]
async fn public_dns_zones_are_seeded_listed_with_next_link_and_hold_a_records() {
    // Six zones with the default page size (5): the subscription list needs nextLink.
    let names = [
        "a.example.com",
        "b.example.com",
        "c.example.com",
        "d.example.com",
        "e.example.com",
        "hcp.example.com",
    ];
    let sim = seeded(&names);
    let list = call(
        &sim,
        "GET",
        &format!("/subscriptions/{SUB}/providers/Microsoft.Network/dnszones?{DNS}"),
        None,
    )
    .await;
    assert_eq!(list.status, 200, "{list:?}");
    assert_eq!(list.body["value"].as_array().unwrap().len(), 5);
    let next = list.body["nextLink"].as_str().unwrap();
    let page2 = call(&sim, "GET", &path_of(next), None).await;
    assert_eq!(page2.body["value"][0]["name"], "hcp.example.com");
    let z = &page2.body["value"][0];
    assert_eq!(z["type"], "Microsoft.Network/dnszones");
    assert_eq!(z["location"], "global");
    assert_eq!(z["properties"]["zoneType"], "Public");
    assert_eq!(z["id"], zone_id("hcp.example.com").as_str());
    // GET in its group; a missing zone is 404.
    let g = call(
        &sim,
        "GET",
        &format!("{}?{DNS}", zone_id("hcp.example.com")),
        None,
    )
    .await;
    assert_eq!(g.status, 200);
    let missing = call(
        &sim,
        "GET",
        &format!("{}?{DNS}", zone_id("nope.example.com")),
        None,
    )
    .await;
    assert_eq!(missing.status, 404);
    // A record sets: PUT, GET (name lower-cased, fqdn), DELETE.
    let rec = format!("{}/A/*.apps.Demo?{DNS}", zone_id("hcp.example.com"));
    let put = call(
        &sim,
        "PUT",
        &rec,
        Some(json!({"properties": {"TTL": 300, "ARecords": [{"ipv4Address": "20.0.0.1"}]}})),
    )
    .await;
    assert!(put.status == 200 || put.status == 201, "{put:?}");
    let got = call(&sim, "GET", &rec, None).await;
    assert_eq!(got.body["name"], "*.apps.demo");
    assert_eq!(
        got.body["properties"]["fqdn"],
        "*.apps.demo.hcp.example.com."
    );
    assert_eq!(
        got.body["properties"]["ARecords"][0]["ipv4Address"],
        "20.0.0.1"
    );
    let zone = call(
        &sim,
        "GET",
        &format!("{}?{DNS}", zone_id("hcp.example.com")),
        None,
    )
    .await;
    assert_eq!(zone.body["properties"]["numberOfRecordSets"], 3);
    let del = call(&sim, "DELETE", &rec, None).await;
    assert!(del.status == 200 || del.status == 204, "{del:?}");
    // Public zones live in `global` only.
    let bad = call(
        &sim,
        "PUT",
        &format!("{}?{DNS}", zone_id("x.example.com")),
        Some(json!({"location": "eastus"})),
    )
    .await;
    assert_eq!(bad.status, 400, "{bad:?}");
    // With no seeds there is no zone at all.
    let empty = Simulator::new(config()).unwrap();
    let list = call(
        &empty,
        "GET",
        &format!("/subscriptions/{SUB}/providers/Microsoft.Network/dnszones?{DNS}"),
        None,
    )
    .await;
    assert_eq!(list.body["value"], json!([]));
}

fn hosted_cluster(name: &str, public_zone: Option<&str>, private_zone: Option<&str>) -> Value {
    let mut dns = json!({"baseDomain": "hcp.example.com"});
    if let Some(z) = public_zone {
        dns["publicZoneID"] = json!(z);
    }
    if let Some(z) = private_zone {
        dns["privateZoneID"] = json!(z);
    }
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": "clusters"},
        "spec": {
            "platform": {"type": "Azure", "azure": {"topology": "Public", "subscriptionID": SUB}},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"},
            "dns": dns,
        }
    })
}

fn node_pool(name: &str, cluster: &str, release: &str, image: Value) -> Value {
    json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": name, "namespace": "clusters"},
        "spec": {"clusterName": cluster, "replicas": 1, "management": {"upgradeType": "Replace"},
                 "platform": {"type": "Azure", "azure": {"vmSize": "Standard_D4s_v5", "image": image,
                    "osDisk": {"sizeGiB": 128}, "subnetID": "s"}},
                 "release": {"image": format!("quay.io/openshift-release-dev/ocp-release:{release}")}}})
}

fn record_ids(sim: &Simulator) -> Vec<String> {
    sim.inventory()
        .into_iter()
        .filter(|i| i.rtype.ends_with("/A"))
        .map(|i| i.id.to_ascii_lowercase())
        .collect()
}

#[tokio::test]
async fn ingress_writes_apps_records_into_the_named_zones_and_cleanup_removes_them() {
    let sim = seeded(&["hcp.example.com"]);
    ensure_ns(&sim, "clusters").await;
    create_rg(&sim, "demo-infra").await;
    let private = format!(
        "{}/providers/Microsoft.Network/privateDnsZones/demo.hcp.example.com",
        rg_path("demo-infra")
    );
    put_ok(
        &sim,
        &format!("{private}?{PDNS}"),
        json!({"location": "global"}),
    )
    .await;
    let public = zone_id("hcp.example.com");
    let hc = hosted_cluster("demo", Some(&public), Some(&private));
    assert_eq!(apply(&sim, &format!("{HC}/demo"), &hc).await.status, 201);
    let np = node_pool(
        "demo-workers",
        "demo",
        "4.22.0-multi",
        json!({"type": "AzureMarketplace", "azureMarketplace": {"imageGeneration": "Gen2"}}),
    );
    assert_eq!(
        apply(&sim, &format!("{NP}/demo-workers"), &np).await.status,
        201
    );
    wait_for(&sim, &format!("{NP}/demo-workers"), |r| {
        status(r, "Ready").as_deref() == Some("True")
    })
    .await;
    let public_rec = format!("{public}/A/*.apps.demo").to_ascii_lowercase();
    let private_rec = format!("{private}/A/*.apps").to_ascii_lowercase();
    for _ in 0..200 {
        if record_ids(&sim).len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recs = record_ids(&sim);
    assert!(recs.contains(&public_rec), "{recs:?}");
    assert!(recs.contains(&private_rec), "{recs:?}");
    let got = call(&sim, "GET", &format!("{public}/A/*.apps.demo?{DNS}"), None).await;
    let ip = got.body["properties"]["ARecords"][0]["ipv4Address"].clone();
    let got = call(&sim, "GET", &format!("{private}/A/*.apps?{PDNS}"), None).await;
    assert_eq!(got.body["properties"]["aRecords"][0]["ipv4Address"], ip);
    let hc_now = call(&sim, "GET", &format!("{HC}/demo"), None).await;
    assert!(
        condition(&hc_now, "ClusterVersionSucceeding").is_none(),
        "not degraded"
    );
    // Deleted with HyperShift's cleanup annotation: the ingress controllers and their
    // records go.
    let annotate = json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": "demo", "namespace": "clusters",
                     "annotations": {"hypershift.openshift.io/cleanup-cloud-resources": "true"}}});
    assert!(apply(&sim, &format!("{HC}/demo"), &annotate).await.status < 300);
    call(&sim, "DELETE", &format!("{NP}/demo-workers"), None).await;
    call(&sim, "DELETE", &format!("{HC}/demo"), None).await;
    wait_for(&sim, &format!("{HC}/demo"), |r| r.status == 404).await;
    assert!(record_ids(&sim).is_empty(), "{:?}", record_ids(&sim));
}

#[tokio::test]
async fn a_missing_public_zone_id_leaves_apps_unresolvable_and_degrades_the_console() {
    let sim = seeded(&["hcp.example.com"]);
    ensure_ns(&sim, "clusters").await;
    // No zone ids at all (what hcp-workflow rendered before it set zone ids).
    let hc = hosted_cluster("bare", None, None);
    assert_eq!(apply(&sim, &format!("{HC}/bare"), &hc).await.status, 201);
    let np = node_pool(
        "bare-workers",
        "bare",
        "4.22.0-multi",
        json!({"type": "ImageID", "imageID": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/rhcos"}),
    );
    assert_eq!(
        apply(&sim, &format!("{NP}/bare-workers"), &np).await.status,
        201
    );
    let r = wait_for(&sim, &format!("{HC}/bare"), |r| {
        status(r, "ClusterVersionSucceeding").as_deref() == Some("False")
    })
    .await;
    let c = condition(&r, "ClusterVersionSucceeding").unwrap();
    assert_eq!(c["reason"], "ClusterOperatorDegraded");
    assert_eq!(c["message"], "Cluster operator console is degraded");
    assert!(record_ids(&sim).is_empty());
}

#[tokio::test]
async fn node_pool_image_defaulted_from_4_20_and_refused_before() {
    let sim = seeded(&[]);
    ensure_ns(&sim, "clusters").await;
    let hc = hosted_cluster("img", None, None);
    assert_eq!(apply(&sim, &format!("{HC}/img"), &hc).await.status, 201);
    // 4.22, Gen1 asked, nothing else: HyperShift fills the payload's Gen1 image.
    let gen1 = node_pool(
        "img-gen1",
        "img",
        "4.22.0-multi",
        json!({"type": "AzureMarketplace", "azureMarketplace": {"imageGeneration": "Gen1"}}),
    );
    assert_eq!(
        apply(&sim, &format!("{NP}/img-gen1"), &gen1).await.status,
        201
    );
    let r = wait_for(&sim, &format!("{NP}/img-gen1"), |r| {
        status(r, "Ready").as_deref() == Some("True")
    })
    .await;
    let m = &r.body["spec"]["platform"]["azure"]["image"]["azureMarketplace"];
    assert_eq!(m["publisher"], "azureopenshift");
    assert_eq!(m["offer"], "aro4");
    assert_eq!(m["sku"], "aro_422");
    assert_eq!(m["imageGeneration"], "Gen1");
    // 4.22, no generation: Gen2 (`4NN-v2`).
    let gen2 = node_pool(
        "img-gen2",
        "img",
        "4.22.0-multi",
        json!({"type": "AzureMarketplace"}),
    );
    assert_eq!(
        apply(&sim, &format!("{NP}/img-gen2"), &gen2).await.status,
        201
    );
    let r = wait_for(&sim, &format!("{NP}/img-gen2"), |r| {
        status(r, "Ready").as_deref() == Some("True")
    })
    .await;
    assert_eq!(
        r.body["spec"]["platform"]["azure"]["image"]["azureMarketplace"]["sku"],
        "422-v2"
    );
    // An explicit image is left alone.
    let explicit = node_pool(
        "img-explicit",
        "img",
        "4.19.3-multi",
        json!({"type": "AzureMarketplace",
        "azureMarketplace": {"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_419", "version": "419.6.20250523"}}),
    );
    assert_eq!(
        apply(&sim, &format!("{NP}/img-explicit"), &explicit)
            .await
            .status,
        201
    );
    let r = wait_for(&sim, &format!("{NP}/img-explicit"), |r| {
        status(r, "Ready").as_deref() == Some("True")
    })
    .await;
    assert_eq!(
        r.body["spec"]["platform"]["azure"]["image"]["azureMarketplace"]["version"],
        "419.6.20250523"
    );
    // 4.19 without an image: HyperShift's error, never Ready.
    let old = node_pool(
        "img-old",
        "img",
        "4.19.3-multi",
        json!({"type": "AzureMarketplace", "azureMarketplace": {"imageGeneration": "Gen2"}}),
    );
    assert_eq!(
        apply(&sim, &format!("{NP}/img-old"), &old).await.status,
        201
    );
    let r = wait_for(&sim, &format!("{NP}/img-old"), |r| {
        condition(r, "Ready").is_some_and(|c| c["reason"] == "ReconcileError")
    })
    .await;
    let c = condition(&r, "Ready").unwrap();
    assert_eq!(c["status"], "False");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .contains("no Azure VM image configured"),
        "{c}"
    );
    // Well past the nodepool latency: still not Ready.
    tokio::time::sleep(Duration::from_millis(300 * 10)).await;
    let r = call(&sim, "GET", &format!("{NP}/img-old"), None).await;
    assert_eq!(status(&r, "Ready").as_deref(), Some("False"));
}
