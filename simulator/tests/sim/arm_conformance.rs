//! The simulator answers as Azure does where official clients found
//! gaps — PATCH tags, current api-versions, spec validation of bodies, `If-Match`, Private
//! DNS zones with links. The same rows run with the Azure SDK for Python in
//! `tests/official/test_arm.py`.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use serde_json::json;

fn vnet_path(rg: &str) -> String {
    format!(
        "{}/providers/Microsoft.Network/virtualNetworks/v",
        rg_path(rg)
    )
}

fn vnet_body() -> serde_json::Value {
    json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}})
}

#[tokio::test]
async fn patch_replaces_tags_of_groups_and_network_resources() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let r = call(
        &sim,
        "PATCH",
        &format!("{}?api-version=2025-04-01", rg_path("rg")),
        Some(json!({"tags": {"a": "1"}})),
    )
    .await;
    assert_eq!(
        (r.status, &r.body["tags"]),
        (200, &json!({"a": "1"})),
        "{r:?}"
    );
    put_ok(&sim, &format!("{}?{NET}", vnet_path("rg")), vnet_body()).await;
    let r = call(
        &sim,
        "PATCH",
        &format!("{}?api-version=2026-03-01", vnet_path("rg")),
        Some(json!({"tags": {"b": "2"}})),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["tags"], json!({"b": "2"}));
    assert_eq!(
        r.body["properties"]["addressSpace"]["addressPrefixes"],
        json!(["10.0.0.0/16"])
    );
}

#[tokio::test]
async fn stale_if_match_is_412() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let v = put_ok(&sim, &format!("{}?{NET}", vnet_path("rg")), vnet_body()).await;
    let old = v["etag"].as_str().unwrap().to_string();
    put_ok(&sim, &format!("{}?{NET}", vnet_path("rg")), vnet_body()).await;
    let path = format!("{}?{NET}", vnet_path("rg"));
    let r = call_with(&sim, "PUT", &path, Some(vnet_body()), &[("if-match", &old)]).await;
    assert_eq!(
        (r.status, r.code().as_deref()),
        (412, Some("PreconditionFailed"))
    );
    let r = call_with(&sim, "DELETE", &path, None, &[("if-match", &old)]).await;
    assert_eq!(r.status, 412);
    let cur = call(&sim, "GET", &path, None).await.body["etag"]
        .as_str()
        .unwrap()
        .to_string();
    let r = call_with(&sim, "DELETE", &path, None, &[("if-match", &cur)]).await;
    assert_eq!(r.status, 202, "{r:?}");
}

#[tokio::test]
async fn private_dns_zone_with_links_is_not_deleted() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let v = put_ok(&sim, &format!("{}?{NET}", vnet_path("rg")), vnet_body()).await;
    let zone = format!(
        "{}/providers/Microsoft.Network/privateDnsZones/z.local",
        rg_path("rg")
    );
    put_ok(
        &sim,
        &format!("{zone}?api-version=2024-06-01"),
        json!({"location": "global"}),
    )
    .await;
    put_ok(
        &sim,
        &format!("{zone}/virtualNetworkLinks/l?api-version=2024-06-01"),
        json!({"location": "global", "properties": {"virtualNetwork": {"id": v["id"]}}}),
    )
    .await;
    let r = call(
        &sim,
        "DELETE",
        &format!("{zone}?api-version=2024-06-01"),
        None,
    )
    .await;
    assert_eq!(
        (r.status, r.code().as_deref()),
        (409, Some("CannotDeleteResource"))
    );
    delete_wait(
        &sim,
        &format!("{zone}/virtualNetworkLinks/l?api-version=2024-06-01"),
    )
    .await;
    let r = delete_wait(&sim, &format!("{zone}?api-version=2024-06-01")).await;
    assert_eq!(r.status, 202, "{r:?}");
}

fn nsg_without_access() -> serde_json::Value {
    json!({"location": "eastus", "properties": {"securityRules": [
        {"name": "r", "properties": {"protocol": "Tcp", "sourcePortRange": "*"}}
    ]}})
}

#[tokio::test]
async fn nsg_rule_without_required_properties_is_400_without_specs() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let r = call(
        &sim,
        "PUT",
        &format!(
            "{}/providers/Microsoft.Network/networkSecurityGroups/n?{NET}",
            rg_path("rg")
        ),
        Some(nsg_without_access()),
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.code().as_deref(), Some("InvalidRequestContent"));
    assert!(r.text.contains("securityRules[0].properties"), "{}", r.text);
}

#[tokio::test]
async fn bodies_are_validated_against_the_specs() {
    let specs = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/spec-conformance/specs");
    if !specs.is_dir() {
        eprintln!("skipped: no {}", specs.display());
        return;
    }
    let mut cfg = config();
    cfg.specs_dir = Some(specs);
    let sim = hcp_simulator::Simulator::new(cfg).unwrap();
    create_rg(&sim, "rg").await;
    let nsg = format!(
        "{}/providers/Microsoft.Network/networkSecurityGroups/n?{NET}",
        rg_path("rg")
    );
    let r = call(&sim, "PUT", &nsg, Some(nsg_without_access())).await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text.contains("'access'"), "{}", r.text);
    // Wrong type, named by path.
    let r = call(
        &sim,
        "PUT",
        &format!("{}?{NET}", vnet_path("rg")),
        Some(json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": "10.0.0.0/16"}}})),
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(
        r.text.contains("addressSpace.addressPrefixes"),
        "{}",
        r.text
    );
    // Read-only properties in a request are ignored; a valid body passes.
    let mut ok = vnet_body();
    ok["properties"]["provisioningState"] = json!("Succeeded");
    put_ok(&sim, &format!("{}?{NET}", vnet_path("rg")), ok).await;
    // Role assignments (`{scope}` template): principalId is required.
    let r = call(
        &sim,
        "PUT",
        &format!(
            "{}/providers/Microsoft.Authorization/roleAssignments/{}?api-version=2022-04-01",
            rg_path("rg"),
            uuid::Uuid::new_v4()
        ),
        Some(json!({"properties": {"roleDefinitionId": "x"}})),
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text.contains("'principalId'"), "{}", r.text);
}
