//! ARM protocol behaviours: api-version, LROs, paging, create-or-replace, cascades, and the
//! Azure quirks the workflows must survive.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;

#[tokio::test]
async fn api_version_missing_or_unknown_is_400() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let base = format!(
        "{}/providers/Microsoft.Network/virtualNetworks/v",
        rg_path("rg")
    );
    let r = call(&sim, "GET", &base, None).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.code().as_deref(), Some("MissingApiVersionParameter"));
    assert_eq!(r.body["error"]["code"], "MissingApiVersionParameter");
    let r = call(&sim, "GET", &format!("{base}?api-version=2099-01-01"), None).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.code().as_deref(), Some("NoRegisteredProviderFound"));
    let r = call(
        &sim,
        "GET",
        &format!("{}?api-version=1999-01-01", rg_path("rg")),
        None,
    )
    .await;
    assert_eq!(r.code().as_deref(), Some("InvalidApiVersionParameter"));
    // Lower-case `resourcegroups` is the same group.
    let r = call(
        &sim,
        "GET",
        &format!("/subscriptions/{SUB}/resourcegroups/RG?api-version=2021-04-01"),
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body["id"],
        format!("/subscriptions/{SUB}/resourceGroups/rg")
    );
}

#[tokio::test]
async fn missing_bearer_token_is_401() {
    let sim = sim();
    let r = call_with(
        &sim,
        "GET",
        &format!("{}?api-version=2021-04-01", rg_path("x")),
        None,
        &[("authorization", "Basic x")],
    )
    .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn network_put_is_lro_with_async_operation() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let path = format!(
        "{}/providers/Microsoft.Network/virtualNetworks/vnet?{NET}",
        rg_path("rg")
    );
    let body = json!({"location": "eastus", "tags": {"a": "b"}, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
        "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}});
    let r = call(&sim, "PUT", &path, Some(body.clone())).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["properties"]["provisioningState"], "Updating");
    assert!(r.header("retry-after").is_some());
    assert!(r.body["etag"].as_str().unwrap().starts_with("W/\""));
    let op = r.header("azure-asyncoperation").unwrap();
    assert!(
        op.starts_with("https://management.azure.com/subscriptions/"),
        "{op}"
    );
    assert!(
        op.contains("/providers/Microsoft.Network/locations/eastus/operations/"),
        "{op}"
    );
    let first = call(&sim, "GET", &path_of(&op), None).await;
    assert_eq!(first.body["status"], "InProgress");
    assert_eq!(wait_op(&sim, &op).await, "Succeeded");
    let g = call(&sim, "GET", &path, None).await;
    assert_eq!(g.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(g.body["tags"]["a"], "b");
    assert_eq!(g.body["properties"]["subnets"][0]["name"], "default");
    assert_eq!(
        g.body["properties"]["subnets"][0]["id"],
        format!(
            "/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/default"
        )
    );
    // Replacing answers 200.
    let r = call(&sim, "PUT", &path, Some(body)).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn fail_async_fault_makes_the_operation_fail() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    sim.add_fault(hcp_simulator::FaultRule {
        method: Some("PUT".into()),
        resource_type: Some("Microsoft.Network/publicIPAddresses".into()),
        fail_async: true,
        error_code: Some("PublicIPCountLimitReached".into()),
        ..Default::default()
    })
    .unwrap();
    let path = format!(
        "{}/providers/Microsoft.Network/publicIPAddresses/ip?{NET}",
        rg_path("rg")
    );
    let r = call(&sim, "PUT", &path, Some(json!({"location": "eastus"}))).await;
    assert_eq!(r.status, 201);
    let op = r.header("azure-asyncoperation").unwrap();
    assert_eq!(wait_op(&sim, &op).await, "Failed");
    let s = call(&sim, "GET", &path_of(&op), None).await;
    assert_eq!(s.body["error"]["code"], "PublicIPCountLimitReached");
    let g = call(&sim, "GET", &path, None).await;
    assert_eq!(g.body["properties"]["provisioningState"], "Failed");
}

#[tokio::test]
async fn list_pages_with_next_link() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    for i in 0..12 {
        let p = format!(
            "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id{i}?api-version=2024-11-30",
            rg_path("rg")
        );
        let r = call(&sim, "PUT", &p, Some(json!({"location": "eastus"}))).await;
        assert_eq!(r.status, 201);
    }
    let mut next = Some(format!(
        "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities?api-version=2024-11-30",
        rg_path("rg")
    ));
    let mut names = Vec::new();
    let mut pages = 0;
    while let Some(p) = next {
        let r = call(&sim, "GET", &p, None).await;
        assert_eq!(r.status, 200, "{r:?}");
        pages += 1;
        for v in r.body["value"].as_array().unwrap() {
            names.push(v["name"].as_str().unwrap().to_string());
        }
        next = r.body["nextLink"].as_str().map(|u| {
            assert!(u.starts_with("https://management.azure.com/"));
            path_of(u)
        });
    }
    assert_eq!(pages, 3);
    assert_eq!(names.len(), 12);
    // Subscription-wide list sees them too.
    let r = call(
        &sim,
        "GET",
        &sub_path(
            "/providers/Microsoft.ManagedIdentity/userAssignedIdentities?api-version=2024-11-30",
        ),
        None,
    )
    .await;
    assert_eq!(r.body["value"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn vnet_put_that_drops_a_used_subnet_fails() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let vnet = format!(
        "{}/providers/Microsoft.Network/virtualNetworks/vnet?{NET}",
        rg_path("rg")
    );
    let two = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}, "subnets": [
        {"name": "a", "properties": {"addressPrefix": "10.0.0.0/24"}},
        {"name": "b", "properties": {"addressPrefix": "10.0.1.0/24", "privateLinkServiceNetworkPolicies": "Disabled"}}]}});
    put_ok(&sim, &vnet, two).await;
    // A load balancer frontend in subnet b uses it.
    let subnet_b = format!(
        "{}/providers/Microsoft.Network/virtualNetworks/vnet/subnets/b",
        rg_path("rg")
    );
    let lb = format!(
        "{}/providers/Microsoft.Network/loadBalancers/lb?{NET}",
        rg_path("rg")
    );
    let got = put_ok(&sim, &lb, json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"frontendIPConfigurations": [
        {"name": "fe", "properties": {"subnet": {"id": subnet_b}}}]}})).await;
    assert_eq!(
        got["properties"]["frontendIPConfigurations"][0]["properties"]["privateIPAddress"],
        "10.0.1.4"
    );
    let only_a = json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}, "subnets": [
        {"name": "a", "properties": {"addressPrefix": "10.0.0.0/24"}}]}});
    let r = call(&sim, "PUT", &vnet, Some(only_a.clone())).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.code().as_deref(), Some("InUseSubnetCannotBeDeleted"));
    // Deleting the subnet directly fails the same way; the subnet lists the LB frontend.
    let r = call(&sim, "DELETE", &format!("{subnet_b}?{NET}"), None).await;
    assert_eq!(r.code().as_deref(), Some("InUseSubnetCannotBeDeleted"));
    let s = call(&sim, "GET", &format!("{subnet_b}?{NET}"), None).await;
    assert!(
        s.body["properties"]["ipConfigurations"][0]["id"]
            .as_str()
            .unwrap()
            .ends_with("/frontendIPConfigurations/fe")
    );
    // Once the LB is gone the replace succeeds and drops subnet b.
    delete_wait(&sim, &lb).await;
    let got = put_ok(&sim, &vnet, only_a).await;
    assert_eq!(got["properties"]["subnets"].as_array().unwrap().len(), 1);
    let s = call(&sim, "GET", &format!("{subnet_b}?{NET}"), None).await;
    assert_eq!(s.status, 404);
}

#[tokio::test]
async fn resource_group_delete_cascades_as_lro() {
    let sim = sim();
    create_rg(&sim, "doomed").await;
    let id = format!(
        "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/i?api-version=2024-11-30",
        rg_path("doomed")
    );
    call(&sim, "PUT", &id, Some(json!({"location": "eastus"}))).await;
    let fic = format!(
        "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/i/federatedIdentityCredentials/fic1?api-version=2024-11-30",
        rg_path("doomed")
    );
    let r = call(&sim, "PUT", &fic, Some(json!({"properties": {"issuer": "https://x.blob.core.windows.net/c", "subject": "system:serviceaccount:a:b", "audiences": ["openshift"]}}))).await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = call(
        &sim,
        "DELETE",
        &format!("{}?api-version=2021-04-01", rg_path("doomed")),
        None,
    )
    .await;
    assert_eq!(r.status, 202);
    // Resource groups answer with Location only.
    assert!(r.header("azure-asyncoperation").is_none());
    let loc = r.header("location").unwrap();
    let g = call(
        &sim,
        "GET",
        &format!("{}?api-version=2021-04-01", rg_path("doomed")),
        None,
    )
    .await;
    assert_eq!(g.body["properties"]["provisioningState"], "Deleting");
    // Writes into a group being deleted are refused.
    let w = call(&sim, "PUT", &id, Some(json!({"location": "eastus"}))).await;
    assert_eq!(w.code().as_deref(), Some("ResourceGroupBeingDeleted"));
    let done = wait_location(&sim, &loc).await;
    assert_eq!(done.status, 200);
    assert_eq!(
        call(
            &sim,
            "GET",
            &format!("{}?api-version=2021-04-01", rg_path("doomed")),
            None
        )
        .await
        .status,
        404
    );
    assert!(
        sim.inventory()
            .iter()
            .all(|i| !i.id.contains("/resourceGroups/doomed"))
    );
    // Missing group: DELETE answers 404, a resource inside it 404 ResourceGroupNotFound.
    let r = call(
        &sim,
        "DELETE",
        &format!("{}?api-version=2021-04-01", rg_path("doomed")),
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    let r = call(&sim, "DELETE", &id, None).await;
    assert_eq!(r.code().as_deref(), Some("ResourceGroupNotFound"));
}

#[tokio::test]
async fn missing_resource_delete_is_204() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    for p in [
        format!(
            "{}/providers/Microsoft.Network/virtualNetworks/nope?{NET}",
            rg_path("rg")
        ),
        format!(
            "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/nope?api-version=2024-11-30",
            rg_path("rg")
        ),
        format!(
            "{}/providers/Microsoft.Authorization/roleAssignments/{}?api-version=2022-04-01",
            rg_path("rg"),
            uuid::Uuid::nil()
        ),
    ] {
        assert_eq!(call(&sim, "DELETE", &p, None).await.status, 204, "{p}");
    }
    let r = call(
        &sim,
        "GET",
        &format!(
            "{}/providers/Microsoft.Network/virtualNetworks/nope?{NET}",
            rg_path("rg")
        ),
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.code().as_deref(), Some("ResourceNotFound"));
}

#[tokio::test]
async fn role_assignment_principal_not_found_then_ok() {
    let mut cfg = config();
    cfg.principal_not_found_for = Duration::from_secs(20); // 200 ms at scale 0.01
    let sim = hcp_simulator::Simulator::new(cfg).unwrap();
    create_rg(&sim, "rg").await;
    let ident = call(&sim, "PUT", &format!("{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/i?api-version=2024-11-30", rg_path("rg")), Some(json!({"location": "eastus"}))).await;
    let principal = ident.body["properties"]["principalId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ident.body["properties"]["clientId"].is_string());
    let ra = format!(
        "{}/providers/Microsoft.Authorization/roleAssignments/{}?api-version=2022-04-01",
        rg_path("rg"),
        uuid::Uuid::new_v4()
    );
    let untyped = json!({"properties": {"roleDefinitionId": format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c"), "principalId": principal}});
    let r = call(&sim, "PUT", &ra, Some(untyped.clone())).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.code().as_deref(), Some("PrincipalNotFound"));
    // With `principalType` Azure skips the directory lookup: no PrincipalNotFound even
    // inside the replication window (role-assignments-template#new-service-principal).
    let body = json!({"properties": {"roleDefinitionId": format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c"), "principalId": principal, "principalType": "ServicePrincipal"}});
    let r = call(&sim, "PUT", &ra, Some(body.clone())).await;
    assert_eq!(r.status, 201, "{r:?}");
    tokio::time::sleep(Duration::from_millis(250)).await;
    let r = call(&sim, "PUT", &ra, Some(untyped)).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["properties"]["scope"], rg_path("rg"));
    // Same assignment under another name: RoleAssignmentExists.
    let other = format!(
        "{}/providers/Microsoft.Authorization/roleAssignments/{}?api-version=2022-04-01",
        rg_path("rg"),
        uuid::Uuid::new_v4()
    );
    let r = call(&sim, "PUT", &other, Some(body)).await;
    assert_eq!(
        (r.status, r.code().as_deref()),
        (409, Some("RoleAssignmentExists"))
    );
    // Listing at the group with a principal filter finds it.
    let l = call(&sim, "GET", &format!("{}/providers/Microsoft.Authorization/roleAssignments?api-version=2022-04-01&$filter=principalId%20eq%20'{principal}'", rg_path("rg")), None).await;
    assert_eq!(l.body["value"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn concurrent_federated_credential_writes_conflict() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let ident = format!(
        "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/i",
        rg_path("rg")
    );
    call(
        &sim,
        "PUT",
        &format!("{ident}?api-version=2024-11-30"),
        Some(json!({"location": "eastus"})),
    )
    .await;
    let body = |s: &str| json!({"properties": {"issuer": "https://acct.blob.core.windows.net/oidc", "subject": format!("system:serviceaccount:ns:{s}"), "audiences": ["openshift"]}});
    let p = |n: &str| format!("{ident}/federatedIdentityCredentials/{n}?api-version=2024-11-30");
    let (pa, pb) = (p("fic-a"), p("fic-b"));
    let (a, b) = tokio::join!(
        call(&sim, "PUT", &pa, Some(body("a"))),
        call(&sim, "PUT", &pb, Some(body("b")))
    );
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [201, 409]);
    let loser = if a.status == 409 { a } else { b };
    assert_eq!(
        loser.code().as_deref(),
        Some("ConcurrentFederatedIdentityCredentialsWritesForSingleManagedIdentity")
    );
    // Sequential writes are fine.
    assert_eq!(
        call(&sim, "PUT", &p("fic-c"), Some(body("c"))).await.status,
        201
    );
    assert_eq!(
        call(&sim, "PUT", &p("fic-d"), Some(body("d"))).await.status,
        201
    );
    // Bad names are refused.
    assert_eq!(
        call(&sim, "PUT", &p("-x"), Some(body("e"))).await.status,
        400
    );
}

async fn network_with_pls(
    sim: &hcp_simulator::Simulator,
    auto_approve: &[&str],
) -> (String, String) {
    create_rg(sim, "svc").await;
    let vnet = format!(
        "{}/providers/Microsoft.Network/virtualNetworks/v?{NET}",
        rg_path("svc")
    );
    put_ok(sim, &vnet, json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.1.0.0/16"]}, "subnets": [
        {"name": "lb", "properties": {"addressPrefix": "10.1.0.0/24"}},
        {"name": "nat", "properties": {"addressPrefix": "10.1.1.0/24", "privateLinkServiceNetworkPolicies": "Disabled"}}]}})).await;
    let subnet = |n: &str| {
        format!(
            "{}/providers/Microsoft.Network/virtualNetworks/v/subnets/{n}",
            rg_path("svc")
        )
    };
    let lb = format!(
        "{}/providers/Microsoft.Network/loadBalancers/ilb",
        rg_path("svc")
    );
    put_ok(sim, &format!("{lb}?{NET}"), json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"frontendIPConfigurations": [
        {"name": "fe", "properties": {"subnet": {"id": subnet("lb")}}}]}})).await;
    let pls = format!(
        "{}/providers/Microsoft.Network/privateLinkServices/pls",
        rg_path("svc")
    );
    let got = put_ok(sim, &format!("{pls}?{NET}"), json!({"location": "eastus", "properties": {
        "loadBalancerFrontendIpConfigurations": [{"id": format!("{lb}/frontendIPConfigurations/fe")}],
        "ipConfigurations": [{"name": "nat", "properties": {"subnet": {"id": subnet("nat")}}}],
        "visibility": {"subscriptions": ["*"]},
        "autoApproval": {"subscriptions": auto_approve},
    }})).await;
    let alias = got["properties"]["alias"].as_str().unwrap().to_string();
    assert!(
        alias.starts_with("pls.") && alias.ends_with(".eastus.azure.privatelinkservice"),
        "{alias}"
    );
    (pls, alias)
}

async fn private_endpoint(sim: &hcp_simulator::Simulator, target: &str, manual: bool) -> String {
    create_rg(sim, "guest").await;
    let vnet = format!(
        "{}/providers/Microsoft.Network/virtualNetworks/g?{NET}",
        rg_path("guest")
    );
    put_ok(sim, &vnet, json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.2.0.0/16"]}, "subnets": [
        {"name": "default", "properties": {"addressPrefix": "10.2.0.0/24"}}]}})).await;
    let pe = format!(
        "{}/providers/Microsoft.Network/privateEndpoints/pe",
        rg_path("guest")
    );
    let list = if manual {
        "manualPrivateLinkServiceConnections"
    } else {
        "privateLinkServiceConnections"
    };
    put_ok(sim, &format!("{pe}?{NET}"), json!({"location": "eastus", "properties": {
        "subnet": {"id": format!("{}/providers/Microsoft.Network/virtualNetworks/g/subnets/default", rg_path("guest"))},
        list: [{"name": "conn", "properties": {"privateLinkServiceId": target, "requestMessage": "please"}}]}})).await;
    pe
}

#[tokio::test]
async fn pe_against_auto_approved_pls_is_approved() {
    let sim = sim();
    let (pls, _) = network_with_pls(&sim, &[SUB]).await;
    let pe = private_endpoint(&sim, &pls, false).await;
    let g = call(&sim, "GET", &format!("{pe}?{NET}"), None).await;
    let state = &g.body["properties"]["privateLinkServiceConnections"][0]["properties"]["privateLinkServiceConnectionState"];
    assert_eq!(state["status"], "Approved");
    assert_eq!(
        g.body["properties"]["manualPrivateLinkServiceConnections"],
        json!([])
    );
    // The NIC carries the IP (first usable address of the subnet).
    let x = call(
        &sim,
        "GET",
        &format!("{pe}?{NET}&$expand=networkInterfaces"),
        None,
    )
    .await;
    assert_eq!(
        x.body["properties"]["networkInterfaces"][0]["properties"]["ipConfigurations"][0]["properties"]
            ["privateIPAddress"],
        "10.2.0.4"
    );
    let nic = g.body["properties"]["networkInterfaces"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        call(&sim, "GET", &format!("{nic}?{NET}"), None)
            .await
            .status,
        200
    );
    let p = call(&sim, "GET", &format!("{pls}?{NET}"), None).await;
    let conns = p.body["properties"]["privateEndpointConnections"]
        .as_array()
        .unwrap();
    assert_eq!(conns.len(), 1);
    assert_eq!(
        conns[0]["properties"]["privateEndpoint"]["id"],
        format!(
            "/subscriptions/{SUB}/resourceGroups/guest/providers/Microsoft.Network/privateEndpoints/pe"
        )
    );
}

#[tokio::test]
async fn pe_by_alias_without_auto_approval_is_pending_and_rejection_shows_on_pe() {
    let sim = sim();
    let (pls, alias) = network_with_pls(&sim, &[]).await;
    let pe = private_endpoint(&sim, &alias, true).await;
    let g = call(&sim, "GET", &format!("{pe}?{NET}"), None).await;
    let state = |b: &serde_json::Value| {
        b["properties"]["manualPrivateLinkServiceConnections"][0]["properties"]["privateLinkServiceConnectionState"]["status"].clone()
    };
    assert_eq!(state(&g.body), "Pending");
    // Reject from the PLS side.
    let conns = call(
        &sim,
        "GET",
        &format!("{pls}/privateEndpointConnections?{NET}"),
        None,
    )
    .await;
    let name = conns.body["value"][0]["name"].as_str().unwrap().to_string();
    let conn = format!("{pls}/privateEndpointConnections/{name}?{NET}");
    let r = call(&sim, "PUT", &conn, Some(json!({"name": name, "properties": {"privateLinkServiceConnectionState": {"status": "Rejected", "description": "no"}}}))).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body["properties"]["privateLinkServiceConnectionState"]["status"],
        "Rejected"
    );
    let g = call(&sim, "GET", &format!("{pe}?{NET}"), None).await;
    assert_eq!(state(&g.body), "Rejected");
    // PLS deletion is blocked while the (rejected) connection exists (default config).
    let d = call(&sim, "DELETE", &format!("{pls}?{NET}"), None).await;
    assert_eq!(
        d.code().as_deref(),
        Some("PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted")
    );
    // The load balancer behind it cannot be deleted either.
    let lb = format!(
        "{}/providers/Microsoft.Network/loadBalancers/ilb?{NET}",
        rg_path("svc")
    );
    let d = call(&sim, "DELETE", &lb, None).await;
    assert_eq!(
        d.code().as_deref(),
        Some("CannotDeleteLoadBalancerWithPrivateLinkService")
    );
    // Delete the connection (LRO); the PE shows Disconnected and the PLS can go.
    let r = delete_wait(&sim, &conn).await;
    assert_eq!(r.status, 202);
    let g = call(&sim, "GET", &format!("{pe}?{NET}"), None).await;
    assert_eq!(state(&g.body), "Disconnected");
    let r = delete_wait(&sim, &format!("{pls}?{NET}")).await;
    assert_eq!(r.status, 202);
    assert_eq!(delete_wait(&sim, &lb).await.status, 202);
    assert_eq!(call(&sim, "GET", &lb, None).await.status, 404);
}

#[tokio::test]
async fn rejected_connection_need_not_block_when_configured() {
    let mut cfg = config();
    cfg.rejected_connection_blocks_pls_delete = false;
    let sim = hcp_simulator::Simulator::new(cfg).unwrap();
    let (pls, _) = network_with_pls(&sim, &[]).await;
    private_endpoint(&sim, &pls, true).await;
    let conns = call(
        &sim,
        "GET",
        &format!("{pls}/privateEndpointConnections?{NET}"),
        None,
    )
    .await;
    let name = conns.body["value"][0]["name"].as_str().unwrap().to_string();
    // Pending blocks.
    assert_eq!(
        call(&sim, "DELETE", &format!("{pls}?{NET}"), None)
            .await
            .status,
        400
    );
    call(
        &sim,
        "PUT",
        &format!("{pls}/privateEndpointConnections/{name}?{NET}"),
        Some(json!({"properties": {"privateLinkServiceConnectionState": {"status": "Rejected"}}})),
    )
    .await;
    assert_eq!(
        call(&sim, "DELETE", &format!("{pls}?{NET}"), None)
            .await
            .status,
        202
    );
}

#[tokio::test]
async fn deleting_the_pe_removes_its_connection() {
    let sim = sim();
    let (pls, _) = network_with_pls(&sim, &[SUB]).await;
    let pe = private_endpoint(&sim, &pls, false).await;
    delete_wait(&sim, &format!("{pe}?{NET}")).await;
    let p = call(&sim, "GET", &format!("{pls}?{NET}"), None).await;
    assert_eq!(
        p.body["properties"]["privateEndpointConnections"],
        json!([])
    );
    assert_eq!(delete_wait(&sim, &format!("{pls}?{NET}")).await.status, 202);
}

#[tokio::test]
async fn storage_account_location_lro_keys_and_blobs() {
    let sim = sim();
    create_rg(&sim, "oidc").await;
    let acct = format!(
        "{}/providers/Microsoft.Storage/storageAccounts/oidcissuer1?api-version=2024-01-01",
        rg_path("oidc")
    );
    let r = call(&sim, "PUT", &acct, Some(json!({"location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"}, "properties": {"allowBlobPublicAccess": true}}))).await;
    assert_eq!(r.status, 202);
    assert!(r.header("azure-asyncoperation").is_none());
    let done = wait_location(&sim, &r.header("location").unwrap()).await;
    assert_eq!(done.status, 200);
    assert_eq!(
        done.body["properties"]["primaryEndpoints"]["blob"],
        "https://oidcissuer1.blob.core.windows.net/"
    );
    // Name is global.
    create_rg(&sim, "other").await;
    let dup = call(
        &sim,
        "PUT",
        &format!(
            "{}/providers/Microsoft.Storage/storageAccounts/oidcissuer1?api-version=2024-01-01",
            rg_path("other")
        ),
        Some(json!({"location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"}})),
    )
    .await;
    assert_eq!(dup.code().as_deref(), Some("StorageAccountAlreadyTaken"));
    let keys = call(&sim, "POST", &format!("{}/providers/Microsoft.Storage/storageAccounts/oidcissuer1/listKeys?api-version=2024-01-01", rg_path("oidc")), None).await;
    assert_eq!(keys.status, 200);
    assert_eq!(keys.body["keys"].as_array().unwrap().len(), 2);
    let container = format!(
        "{}/providers/Microsoft.Storage/storageAccounts/oidcissuer1/blobServices/default/containers/oidc?api-version=2024-01-01",
        rg_path("oidc")
    );
    let c = call(
        &sim,
        "PUT",
        &container,
        Some(json!({"properties": {"publicAccess": "Container"}})),
    )
    .await;
    assert_eq!(c.status, 201, "{c:?}");
    // Blob data plane, by host and by path.
    let doc = json!({"issuer": "https://oidcissuer1.blob.core.windows.net/oidc"});
    let put = call_with(
        &sim,
        "PUT",
        "/oidc/.well-known/openid-configuration",
        Some(doc.clone()),
        &[
            ("host", "oidcissuer1.blob.core.windows.net"),
            ("x-ms-blob-type", "BlockBlob"),
        ],
    )
    .await;
    assert_eq!(put.status, 201, "{put:?}");
    let get = call_with(
        &sim,
        "GET",
        "/_blob/oidcissuer1/oidc/.well-known/openid-configuration",
        None,
        &[("authorization", "")],
    )
    .await;
    assert_eq!(get.status, 200);
    assert_eq!(get.body, doc);
    let missing = call(&sim, "GET", "/_blob/oidcissuer1/nope/x", None).await;
    assert_eq!(
        (missing.status, missing.code().as_deref()),
        (404, Some("ContainerNotFound"))
    );
    // Deleting the account removes its blobs.
    assert_eq!(call(&sim, "DELETE", &acct, None).await.status, 200);
    assert_eq!(
        call(
            &sim,
            "GET",
            "/_blob/oidcissuer1/oidc/.well-known/openid-configuration",
            None
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn container_public_access_needs_account_permission() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let acct = format!(
        "{}/providers/Microsoft.Storage/storageAccounts/private1?api-version=2024-01-01",
        rg_path("rg")
    );
    let r = call(
        &sim,
        "PUT",
        &acct,
        Some(json!({"location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"}})),
    )
    .await;
    wait_location(&sim, &r.header("location").unwrap()).await;
    let container = format!(
        "{}/providers/Microsoft.Storage/storageAccounts/private1/blobServices/default/containers/c?api-version=2024-01-01",
        rg_path("rg")
    );
    let c = call(
        &sim,
        "PUT",
        &container,
        Some(json!({"properties": {"publicAccess": "Container"}})),
    )
    .await;
    assert_eq!(c.code().as_deref(), Some("PublicAccessNotPermitted"));
}

#[tokio::test]
async fn entra_token_endpoint() {
    let sim = sim();
    let form = "grant_type=client_credentials&client_id=abc&client_secret=s&scope=https%3A%2F%2Fmanagement.azure.com%2F.default";
    let req = axum::http::Request::builder()
        .method("POST")
        .uri("/tenant-1/oauth2/v2.0/token")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(axum::body::Body::from(form))
        .unwrap();
    use tower::ServiceExt;
    let resp = sim.router().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = serde_json::from_slice(
        &axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["access_token"].as_str().unwrap().split('.').count(), 3);
    let bad = axum::http::Request::builder()
        .method("POST")
        .uri("/tenant-1/oauth2/v2.0/token")
        .body(axum::body::Body::from(
            "grant_type=client_credentials&client_id=abc&scope=x%2F.default",
        ))
        .unwrap();
    let resp = sim.router().oneshot(bad).await.unwrap();
    assert_eq!(resp.status(), 401);
    // Client assertion (workload identity / federated credentials).
    let assertion = axum::http::Request::builder()
        .method("POST")
        .uri("/tenant-1/oauth2/v2.0/token")
        .body(axum::body::Body::from(
            "grant_type=client_credentials&client_id=abc&scope=https%3A%2F%2Fmanagement.azure.com%2F.default\
             &client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=eyJ.x.y",
        ))
        .unwrap();
    assert_eq!(sim.router().oneshot(assertion).await.unwrap().status(), 200);
    // A scope without /.default is refused like Entra does.
    let scope = axum::http::Request::builder()
        .method("POST")
        .uri("/tenant-1/oauth2/v2.0/token")
        .body(axum::body::Body::from("grant_type=client_credentials&client_id=abc&client_secret=s&scope=https%3A%2F%2Fmanagement.azure.com"))
        .unwrap();
    assert_eq!(sim.router().oneshot(scope).await.unwrap().status(), 400);
}

#[tokio::test]
async fn serve_banner_names_endpoints_and_settings() {
    let sim = sim();
    let text = hcp_simulator::banner(&sim, "127.0.0.1:4567".parse().unwrap());
    assert!(text.contains("--simulator http://127.0.0.1:4567"), "{text}");
    assert!(
        text.contains("/oauth2/v2.0/token")
            && text.contains("/_sim/inventory")
            && text.contains("time scale: 0.01")
    );
}

#[tokio::test]
async fn private_dns_zone_link_and_records() {
    let sim = sim();
    create_rg(&sim, "dns").await;
    let zone = format!(
        "{}/providers/Microsoft.Network/privateDnsZones/c1.hypershift.local",
        rg_path("dns")
    );
    let r = call(
        &sim,
        "PUT",
        &format!("{zone}?api-version=2024-06-01"),
        Some(json!({"location": "global"})),
    )
    .await;
    assert_eq!(r.status, 202);
    assert!(r.header("azure-asyncoperation").is_some() && r.header("location").is_some());
    wait_op(&sim, &r.header("azure-asyncoperation").unwrap()).await;
    let rec = call(
        &sim,
        "PUT",
        &format!("{zone}/A/*.apps?api-version=2024-06-01"),
        Some(json!({"properties": {"ttl": 300, "aRecords": [{"ipv4Address": "10.2.0.4"}]}})),
    )
    .await;
    assert_eq!(rec.status, 201, "{rec:?}");
    assert_eq!(
        rec.body["properties"]["fqdn"],
        "*.apps.c1.hypershift.local."
    );
    let z = call(&sim, "GET", &format!("{zone}?api-version=2024-06-01"), None).await;
    assert_eq!(z.body["properties"]["numberOfRecordSets"], 2);
    let bad = call(
        &sim,
        "PUT",
        &format!(
            "{}/providers/Microsoft.Network/privateDnsZones/x.local?api-version=2024-06-01",
            rg_path("dns")
        ),
        Some(json!({"location": "eastus"})),
    )
    .await;
    assert_eq!(bad.status, 400);
}

/// Day 2: a PLS re-PUT with new `visibility` and `autoApproval` lists keeps its alias and its
/// connections (existing connections keep their state), and the visibility check answers
/// per the new list.
#[tokio::test]
async fn pls_visibility_and_auto_approval_can_be_changed_in_place() {
    const OTHER: &str = "22222222-2222-2222-2222-222222222222";
    let sim = sim();
    let (pls, alias) = network_with_pls(&sim, &[SUB]).await;
    private_endpoint(&sim, &pls, false).await;
    let mut body = call(&sim, "GET", &format!("{pls}?{NET}"), None).await.body;
    body["properties"]["visibility"] = json!({"subscriptions": [OTHER]});
    body["properties"]["autoApproval"] = json!({"subscriptions": [OTHER]});
    let got = put_ok(&sim, &format!("{pls}?{NET}"), body).await;
    assert_eq!(
        got["properties"]["visibility"],
        json!({"subscriptions": [OTHER]})
    );
    assert_eq!(
        got["properties"]["autoApproval"],
        json!({"subscriptions": [OTHER]})
    );
    assert_eq!(got["properties"]["alias"], alias.as_str());
    let conns = got["properties"]["privateEndpointConnections"]
        .as_array()
        .unwrap();
    assert_eq!(conns.len(), 1);
    assert_eq!(
        conns[0]["properties"]["privateLinkServiceConnectionState"]["status"],
        "Approved"
    );
    for (sub, visible) in [(SUB, false), (OTHER, true)] {
        let r = call(
            &sim,
            "POST",
            &format!("/subscriptions/{sub}/providers/Microsoft.Network/locations/eastus/checkPrivateLinkServiceVisibility?{NET}"),
            Some(json!({"privateLinkServiceAlias": alias})),
        )
        .await;
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body["visible"], visible, "{sub}");
    }
}
