//! The ARM layer against an in-process simulator: `ensure` / `delete` (journal contract,
//! ownership, long-running operations), error classification under injected faults, role
//! assignments, private link teardown, storage keys and blobs, paging.
#![allow(clippy::unwrap_used)]

use crate::azure_support;

use std::time::Duration;

use hcp_activities::azure::durable::{
    self, Adopt, Deleted, EnsureSpec, OPERATIONS_KEY, Ownership, Progress,
};
use hcp_activities::azure::models::{
    API_AUTHORIZATION, API_MSI, API_NETWORK, API_RESOURCES, API_STORAGE, UserAssignedIdentity,
};
use hcp_activities::azure::roles::{self, RoleAssignmentSpec};
use hcp_activities::azure::storage::{BlobClient, storage_account_key};
use hcp_activities::azure::{ArmClient, Cloud, Transport, names, privatelink};
use hcp_runtime::StepError;
use hcp_simulator::{FaultRule, SimConfig, Simulator};
use serde_json::{Value, json};

use azure_support::{OTHER_SUB, SUB, requests};

fn own() -> Ownership {
    Ownership::new("demo", "abc12", &azure_support::run_id().to_string())
}

fn rg_id(sub: &str, rg: &str) -> String {
    names::resource_group_id(sub, rg)
}

fn spec(id: &str, api: &str, body: Value, tagged: bool) -> EnsureSpec {
    EnsureSpec {
        id: id.to_string(),
        api: api.to_string(),
        body,
        adopt: Adopt::OursOnly,
        tagged,
        ownership: own(),
        read_query: &[],
    }
}

async fn ensure_rg(arm: &ArmClient, sub: &str, rg: &str) -> String {
    let id = rg_id(sub, rg);
    let s = spec(&id, API_RESOURCES, json!({"location": "eastus"}), true);
    drive!(|c| durable::ensure(c, arm, &s));
    id
}

fn identity_id(sub: &str, rg: &str, name: &str) -> String {
    names::resource_id(
        sub,
        rg,
        "Microsoft.ManagedIdentity/userAssignedIdentities",
        name,
    )
}

async fn ensure_identity(arm: &ArmClient, sub: &str, rg: &str, name: &str) -> Value {
    let s = spec(
        &identity_id(sub, rg, name),
        API_MSI,
        json!({"location": "eastus"}),
        true,
    );
    drive!(|c| durable::ensure(c, arm, &s)).body
}

async fn ensure_vnet(arm: &ArmClient, sub: &str, rg: &str, name: &str, cidr: &str) -> String {
    let id = names::resource_id(sub, rg, "Microsoft.Network/virtualNetworks", name);
    let s = spec(
        &id,
        API_NETWORK,
        json!({"location": "eastus", "properties": {
            "addressSpace": {"addressPrefixes": [cidr]},
            "subnets": [{"name": "default", "properties": {"addressPrefix": cidr}}],
        }}),
        true,
    );
    drive!(|c| durable::ensure(c, arm, &s));
    id
}

async fn setup() -> (Simulator, Transport, ArmClient) {
    let (sim, transport) = azure_support::start().await;
    let arm = azure_support::arm(&transport).await;
    (sim, transport, arm)
}

async fn setup_with(cfg: SimConfig) -> (Simulator, Transport, ArmClient) {
    let (sim, transport) = azure_support::start_with(cfg).await;
    let arm = azure_support::arm(&transport).await;
    (sim, transport, arm)
}

/// One attempt of `ensure` with a fresh context; returns the result and the checkpoints saved.
async fn ensure_once(
    arm: &ArmClient,
    s: &EnsureSpec,
    checkpoint: Option<Value>,
) -> (Result<Progress<durable::Ensured>, StepError>, Vec<Value>) {
    let (c, cell) = azure_support::ctx(checkpoint);
    let r = durable::ensure(&c, arm, s).await;
    let saved = cell.lock().unwrap().clone();
    (r, saved)
}

#[tokio::test]
async fn identity_is_created_once_and_adopted_after() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "rg1").await;
    let body = ensure_identity(&arm, SUB, "rg1", "demo-disk-abc12").await;
    assert!(body.pointer("/properties/clientId").is_some());
    assert!(body.pointer("/properties/principalId").is_some());
    assert_eq!(body["tags"][durable::TAG_CLUSTER], "demo");
    // Again: read, no second PUT.
    let s = spec(
        &identity_id(SUB, "rg1", "demo-disk-abc12"),
        API_MSI,
        json!({"location": "eastus"}),
        true,
    );
    let (r, saved) = ensure_once(&arm, &s, None).await;
    let Progress::Done(e) = r.unwrap() else {
        panic!("expected Done")
    };
    assert!(e.created, "created by this run (run tag)");
    assert!(saved.is_empty());
    let log = sim.requests();
    assert_eq!(
        requests(&log, "PUT", "/userAssignedIdentities/demo-disk-abc12").len(),
        1
    );
    // A later run of the same cluster adopts it.
    let later = EnsureSpec {
        ownership: Ownership::new("demo", "abc12", "another-run"),
        ..s
    };
    let (r, _) = ensure_once(&arm, &later, None).await;
    assert!(matches!(r.unwrap(), Progress::Done(e) if !e.created));
}

#[tokio::test]
async fn vnet_put_is_journaled_and_polled_not_resent() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "rg1").await;
    let id = names::resource_id(
        SUB,
        "rg1",
        "Microsoft.Network/virtualNetworks",
        "demo-abc12",
    );
    let s = spec(
        &id,
        API_NETWORK,
        json!({"location": "eastus", "properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}],
        }}),
        true,
    );
    // First attempt: PUT accepted as a long-running operation, journaled, Pending.
    let (r, saved) = ensure_once(&arm, &s, None).await;
    assert!(matches!(r.unwrap(), Progress::Pending { .. }));
    assert_eq!(saved.len(), 1);
    let ops = saved[0][OPERATIONS_KEY].as_object().unwrap();
    let url = ops.values().next().unwrap()["operation"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        url.starts_with("https://management.azure.com/subscriptions/"),
        "{url}"
    );
    assert_eq!(ops.values().next().unwrap()["verb"], "put");
    // Resumed attempts poll the journaled URL until done; the PUT is never sent again.
    let mut checkpoint = Some(saved[0].clone());
    let ensured = loop {
        let (r, more) = ensure_once(&arm, &s, checkpoint.clone()).await;
        if let Some(last) = more.last() {
            checkpoint = Some(last.clone());
        }
        match r.unwrap() {
            Progress::Done(e) => break e,
            Progress::Pending { after, .. } => {
                tokio::time::sleep(after.min(Duration::from_millis(100))).await;
            }
        }
    };
    assert!(ensured.created);
    assert_eq!(ensured.body["properties"]["provisioningState"], "Succeeded");
    assert_eq!(ensured.body["properties"]["subnets"][0]["name"], "default");
    let log = sim.requests();
    assert_eq!(
        requests(&log, "PUT", "/virtualNetworks/demo-abc12").len(),
        1
    );
    let op_path = url.trim_start_matches("https://management.azure.com");
    let op_path = op_path.split('?').next().unwrap();
    assert!(
        !requests(&log, "GET", op_path).is_empty(),
        "polled {op_path}"
    );
    // And ensure again: no PUT.
    let (r, _) = ensure_once(&arm, &s, None).await;
    assert!(r.unwrap().is_done());
    assert_eq!(
        requests(&sim.requests(), "PUT", "/virtualNetworks/demo-abc12").len(),
        1
    );
}

#[tokio::test]
async fn failed_operation_is_permanent_and_dropped_from_the_journal() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "rg1").await;
    sim.add_fault(FaultRule {
        method: Some("PUT".into()),
        resource_type: Some("Microsoft.Network/networkSecurityGroups".into()),
        fail_async: true,
        error_code: Some("InvalidResourceReference".into()),
        message: Some("bad rule".into()),
        ..Default::default()
    })
    .unwrap();
    let id = names::resource_id(SUB, "rg1", "Microsoft.Network/networkSecurityGroups", "n");
    let s = spec(&id, API_NETWORK, json!({"location": "eastus"}), true);
    let mut checkpoint = None;
    let err = loop {
        let (r, saved) = ensure_once(&arm, &s, checkpoint.clone()).await;
        if let Some(last) = saved.last() {
            checkpoint = Some(last.clone());
        }
        match r {
            Err(e) => break e,
            Ok(Progress::Pending { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(Progress::Done(_)) => panic!("the operation was made to fail"),
        }
    };
    assert!(!err.retryable, "{err}");
    assert_eq!(err.code.as_deref(), Some("InvalidResourceReference"));
    assert!(err.message.contains(&id), "{err}");
    let ops = &checkpoint.unwrap()[OPERATIONS_KEY];
    assert!(ops.as_object().unwrap().is_empty(), "{ops}");
}

#[tokio::test]
async fn existing_untagged_resource_is_not_adopted() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "rg1").await;
    let id = identity_id(SUB, "rg1", "someone-elses");
    arm.put(
        &id,
        API_MSI,
        &json!({"location": "eastus", "tags": {"team": "x"}}),
    )
    .await
    .unwrap();
    let s = spec(&id, API_MSI, json!({"location": "eastus"}), true);
    let (r, _) = ensure_once(&arm, &s, None).await;
    let err = r.err().unwrap();
    assert!(!err.retryable);
    assert_eq!(err.code.as_deref(), Some("NotOurs"));
    assert!(
        err.message.contains(&id) && err.message.contains("\"team\""),
        "{err}"
    );
    assert_eq!(requests(&sim.requests(), "PUT", "/someone-elses").len(), 1);
}

#[tokio::test]
async fn deletes_respect_absence_and_ownership() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "rg1").await;
    // Missing: Gone, no DELETE.
    let missing = identity_id(SUB, "rg1", "nope");
    let d = drive!(|c| durable::delete(c, &arm, &missing, API_MSI, Some(&own())));
    assert_eq!(d, Deleted::Gone);
    // Untagged: kept, no DELETE.
    let theirs = identity_id(SUB, "rg1", "theirs");
    arm.put(&theirs, API_MSI, &json!({"location": "eastus"}))
        .await
        .unwrap();
    let d = drive!(|c| durable::delete(c, &arm, &theirs, API_MSI, Some(&own())));
    assert_eq!(d, Deleted::KeptNotOurs);
    // Ours, long-running (network DELETE → 202): journaled, polled, deleted.
    let vnet = ensure_vnet(&arm, SUB, "rg1", "v", "10.1.0.0/16").await;
    let d = drive!(|c| durable::delete(c, &arm, &vnet, API_NETWORK, Some(&own())));
    assert_eq!(d, Deleted::Deleted);
    assert!(arm.get_value(&vnet, API_NETWORK).await.unwrap().is_none());
    let log = sim.requests();
    assert!(requests(&log, "DELETE", "/nope").is_empty());
    assert!(requests(&log, "DELETE", "/theirs").is_empty());
    assert_eq!(requests(&log, "DELETE", "/virtualNetworks/v").len(), 1);
    assert!(sim.inventory().iter().any(|i| i.id.ends_with("/theirs")));
    // A resource in a deleted group: Gone (deletes never hang on missing groups).
    let orphan = identity_id(SUB, "no-such-group", "x");
    let d = drive!(|c| durable::delete(c, &arm, &orphan, API_MSI, None));
    assert_eq!(d, Deleted::Gone);
}

async fn put_identity_err(sim: &Simulator, arm: &ArmClient, rule: FaultRule) -> StepError {
    sim.add_fault(FaultRule {
        method: Some("PUT".into()),
        resource_type: Some("Microsoft.ManagedIdentity/userAssignedIdentities".into()),
        ..rule
    })
    .unwrap();
    let s = spec(
        &identity_id(SUB, "rg1", "faulty"),
        API_MSI,
        json!({"location": "eastus"}),
        true,
    );
    let (r, _) = ensure_once(arm, &s, None).await;
    sim.clear_faults();
    r.err().unwrap()
}

#[tokio::test]
async fn faults_are_classified() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "rg1").await;
    // 429 with a long Retry-After: handed to the engine at once (no in-memory wait).
    let e = put_identity_err(
        &sim,
        &arm,
        FaultRule {
            status: Some(429),
            retry_after: Some(30),
            ..Default::default()
        },
    )
    .await;
    assert!(e.retryable, "{e}");
    assert_eq!(e.kind, "throttled");
    assert_eq!(e.retry_after_ms, Some(30_000));
    assert_eq!(requests(&sim.requests(), "PUT", "/faulty").len(), 1);
    // 409 AnotherOperationInProgress: retryable conflict.
    let e = put_identity_err(
        &sim,
        &arm,
        FaultRule {
            status: Some(409),
            error_code: Some("AnotherOperationInProgress".into()),
            ..Default::default()
        },
    )
    .await;
    assert!(e.retryable);
    assert_eq!(e.kind, "conflict");
    assert_eq!(e.code.as_deref(), Some("AnotherOperationInProgress"));
    // 403 AuthorizationFailed: permanent, code and hint in the message.
    let e = put_identity_err(
        &sim,
        &arm,
        FaultRule {
            status: Some(403),
            error_code: Some("AuthorizationFailed".into()),
            message: Some("The client does not have authorization to perform action".into()),
            ..Default::default()
        },
    )
    .await;
    assert!(!e.retryable);
    assert_eq!(e.kind, "authorization");
    assert!(
        e.message
            .starts_with("Azure AuthorizationFailed on /subscriptions/"),
        "{e}"
    );
    assert!(e.message.contains("grant the credential"), "{e}");
    // QuotaExceeded: permanent, never retried.
    let e = put_identity_err(
        &sim,
        &arm,
        FaultRule {
            status: Some(409),
            error_code: Some("QuotaExceeded".into()),
            ..Default::default()
        },
    )
    .await;
    assert!(!e.retryable);
    assert_eq!(e.kind, "quota");
    assert!(e.message.contains("raise the quota"), "{e}");
    // One 500: retried in memory, the step never sees it.
    sim.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some("*/userAssignedIdentities/flaky*".into()),
        status: Some(500),
        nth: Some(1),
        ..Default::default()
    })
    .unwrap();
    let s = spec(
        &identity_id(SUB, "rg1", "flaky"),
        API_MSI,
        json!({"location": "eastus"}),
        true,
    );
    let (r, _) = ensure_once(&arm, &s, None).await;
    assert!(r.unwrap().is_done());
    let statuses: Vec<u16> = requests(&sim.requests(), "PUT", "/flaky")
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![500, 201]);
    // A dropped connection on a read: retried in memory too.
    sim.add_fault(FaultRule {
        method: Some("GET".into()),
        path: Some("*/userAssignedIdentities/flaky*".into()),
        drop_connection: true,
        nth: Some(1),
        ..Default::default()
    })
    .unwrap();
    assert!(
        arm.get_value(&identity_id(SUB, "rg1", "flaky"), API_MSI)
            .await
            .unwrap()
            .is_some()
    );
}

fn role_spec(scope: &str, principal: &str, component: &str) -> RoleAssignmentSpec {
    RoleAssignmentSpec {
        scope: scope.to_string(),
        name: names::role_assignment_name("abc12", component, scope),
        role_definition_id: roles::role_definition_id(scope, names::roles::CONTRIBUTOR),
        principal_id: principal.to_string(),
    }
}

#[tokio::test]
async fn role_assignments_are_deterministic_and_replace_stale_ones() {
    let (sim, _t, arm) = setup().await;
    let scope = ensure_rg(&arm, SUB, "rg1").await;
    let principal = "aaaaaaaa-0000-0000-0000-000000000001";
    let s = role_spec(&scope, principal, "node-pool-mgmt");
    let e = drive!(|c| roles::ensure(c, &arm, &s));
    assert!(e.created);
    assert_eq!(e.id, s.id());
    assert_eq!(e.body["properties"]["principalId"], principal);
    // Again: no second PUT.
    let e = drive!(|c| roles::ensure(c, &arm, &s));
    assert!(!e.created);
    assert_eq!(requests(&sim.requests(), "PUT", &s.id()).len(), 1);
    // Same name, another principal (an identity recreated since): delete, then create.
    let newer = role_spec(
        &scope,
        "aaaaaaaa-0000-0000-0000-000000000002",
        "node-pool-mgmt",
    );
    let e = drive!(|c| roles::ensure(c, &arm, &newer));
    assert!(e.created);
    let log = sim.requests();
    let id_path = s.id();
    let seqs: Vec<(String, u64)> = log
        .iter()
        .filter(|r| r.path.split('?').next() == Some(id_path.as_str()) && r.method != "GET")
        .map(|r| (r.method.clone(), r.seq))
        .collect();
    let methods: Vec<&str> = seqs.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(methods, vec!["PUT", "DELETE", "PUT"]);
    let got = arm
        .get_value(&s.id(), API_AUTHORIZATION)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got["properties"]["principalId"],
        "aaaaaaaa-0000-0000-0000-000000000002"
    );
    // An identical assignment under another name: RoleAssignmentExists means done.
    let twin = role_spec(
        &scope,
        "aaaaaaaa-0000-0000-0000-000000000002",
        "other-component",
    );
    let e = drive!(|c| roles::ensure(c, &arm, &twin));
    assert!(!e.created);
    assert_eq!(e.id, s.id(), "reports the existing twin");
    assert!(
        requests(&sim.requests(), "PUT", &twin.id())
            .iter()
            .any(|r| r.error_code.as_deref() == Some("RoleAssignmentExists"))
    );
    // Delete by name.
    let d = drive!(|c| roles::delete(c, &arm, &newer));
    assert_eq!(d, Deleted::Deleted);
    let d = drive!(|c| roles::delete(c, &arm, &newer));
    assert_eq!(d, Deleted::Gone);
}

/// Our role assignments set `principalType: ServicePrincipal`, the documented way to avoid
/// `PrincipalNotFound` while a new identity replicates in Entra
/// (https://learn.microsoft.com/azure/role-based-access-control/role-assignments-template#new-service-principal):
/// the first PUT succeeds even inside the replication window. Should Azure still answer
/// `PrincipalNotFound`, it is retryable and the step gets there.
#[tokio::test]
async fn principal_type_avoids_principal_not_found_and_it_stays_retryable() {
    let mut cfg = azure_support::config();
    cfg.principal_not_found_for = Duration::from_secs(60); // 0.6 s at the test time scale
    let (sim, _t, arm) = setup_with(cfg).await;
    let scope = ensure_rg(&arm, SUB, "rg1").await;
    let identity = ensure_identity(&arm, SUB, "rg1", "demo-network-abc12").await;
    let principal = identity["properties"]["principalId"].as_str().unwrap();
    let s = role_spec(&scope, principal, "network");
    let (c, _) = azure_support::ctx(None);
    match roles::ensure(&c, &arm, &s).await {
        Ok(Progress::Done(e)) => assert!(e.created),
        other => panic!("the first PUT succeeds: {other:?}"),
    }
    let log = sim.requests();
    let puts = requests(&log, "PUT", &s.id());
    assert_eq!(puts.len(), 1);
    assert_eq!(puts[0].status, 201);

    // Azure answering PrincipalNotFound anyway (a fault): retryable, then done.
    let other = ensure_identity(&arm, SUB, "rg1", "demo-disk-abc12").await;
    let s2 = role_spec(
        &scope,
        other["properties"]["principalId"].as_str().unwrap(),
        "disk",
    );
    sim.add_fault(FaultRule {
        method: Some("PUT".into()),
        path: Some(s2.id()),
        status: Some(400),
        error_code: Some("PrincipalNotFound".into()),
        message: Some("Principal does not exist in the directory.".into()),
        times: Some(2),
        ..Default::default()
    })
    .unwrap();
    let mut retried = 0;
    let e = loop {
        let (c, _) = azure_support::ctx(None);
        match roles::ensure(&c, &arm, &s2).await {
            Ok(Progress::Done(e)) => break e,
            Ok(Progress::Pending { .. }) => panic!("role assignments are synchronous"),
            Err(err) => {
                assert!(err.retryable, "{err}");
                assert_eq!(err.code.as_deref(), Some("PrincipalNotFound"));
                retried += 1;
                assert!(retried < 10);
            }
        }
    };
    assert_eq!(retried, 2);
    assert!(e.created);
}

#[tokio::test]
async fn pls_teardown_rejects_and_deletes_every_connection_before_the_pls() {
    let (sim, _t, arm) = setup().await;
    let mcfg = sim.config().clone();
    let msub = mcfg.management_subscription.clone();
    let mrg = rg_id(&msub, &mcfg.management_resource_group);
    let mvnet = format!(
        "{mrg}/providers/Microsoft.Network/virtualNetworks/{}",
        mcfg.management_vnet
    );
    // NAT subnet in a free /24 of the management VNet.
    let vnet_body = arm.get_value(&mvnet, API_NETWORK).await.unwrap().unwrap();
    let cidr = privatelink::free_slash24(&vnet_body).unwrap();
    let nat = format!("{mvnet}/subnets/{}", names::pls_nat_subnet("abc12"));
    let s = spec(
        &nat,
        API_NETWORK,
        json!({"properties": {"addressPrefix": cidr, "privateLinkServiceNetworkPolicies": "Disabled"}}),
        false,
    );
    drive!(|c| durable::ensure(c, &arm, &s));
    // The control plane's internal LB (normally made by the operator).
    let lb = format!("{mrg}/providers/Microsoft.Network/loadBalancers/kube-internal");
    let s = spec(
        &lb,
        API_NETWORK,
        json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {"frontendIPConfigurations": [
            {"name": "router", "properties": {"subnet": {"id": format!("{mvnet}/subnets/aks-subnet")}}}]}}),
        true,
    );
    let lb_body = drive!(|c| durable::ensure(c, &arm, &s)).body;
    let ip = lb_body["properties"]["frontendIPConfigurations"][0]["properties"]["privateIPAddress"]
        .as_str()
        .unwrap()
        .to_string();
    let (found_lb, fe) = privatelink::find_internal_lb(&arm, &mrg, &ip)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found_lb.to_ascii_lowercase(), lb.to_ascii_lowercase());
    assert!(fe.ends_with("/frontendIPConfigurations/router"));
    assert!(
        privatelink::find_internal_lb(&arm, &mrg, "10.9.9.9")
            .await
            .unwrap()
            .is_none()
    );
    // The PLS, auto-approving the guest subscription only.
    let pls = format!(
        "{mrg}/providers/Microsoft.Network/privateLinkServices/{}",
        names::pls("c1")
    );
    let s = spec(
        &pls,
        API_NETWORK,
        json!({"location": "eastus", "properties": {
            "loadBalancerFrontendIpConfigurations": [{"id": fe}],
            "ipConfigurations": [{"name": "nat", "properties": {"subnet": {"id": nat}}}],
            "visibility": {"subscriptions": [SUB]},
            "autoApproval": {"subscriptions": [SUB]},
        }}),
        true,
    );
    let alias = drive!(|c| durable::ensure(c, &arm, &s)).body["properties"]["alias"]
        .as_str()
        .unwrap()
        .to_string();
    // Our PE (guest subscription) and a foreign PE (another subscription, by alias).
    let mut pes = Vec::new();
    for (sub, target) in [(SUB, pls.clone()), (OTHER_SUB, alias.clone())] {
        ensure_rg(&arm, sub, "guest").await;
        let vnet = ensure_vnet(&arm, sub, "guest", "gv", "10.50.0.0/16").await;
        let pe = names::resource_id(
            sub,
            "guest",
            "Microsoft.Network/privateEndpoints",
            "demo-abc12-pe",
        );
        let s = spec(
            &pe,
            API_NETWORK,
            json!({"location": "eastus", "properties": {
                "subnet": {"id": format!("{vnet}/subnets/default")},
                "manualPrivateLinkServiceConnections": [{"name": "conn", "properties": {
                    "privateLinkServiceId": target, "requestMessage": "hcp-workflow"}}],
            }}),
            true,
        );
        drive!(|c| durable::ensure(c, &arm, &s));
        pes.push(pe);
    }
    let ip = privatelink::private_endpoint_ip(&arm, &pes[0])
        .await
        .unwrap();
    assert!(
        ip.as_deref().is_some_and(|ip| ip.starts_with("10.50.0.")),
        "{ip:?}"
    );
    let conns = arm
        .list_values(&format!("{pls}/privateEndpointConnections"), API_NETWORK)
        .await
        .unwrap();
    assert_eq!(conns.len(), 2);
    let conn_ids: Vec<String> = conns
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    // Teardown.
    let report = drive!(|c| privatelink::teardown(c, &arm, &pls));
    assert_eq!(report.pls, Deleted::Deleted);
    assert_eq!(report.rejected.len(), 2, "{report:?}");
    assert_eq!(report.deleted_connections.len(), 2, "{report:?}");
    assert_eq!(report.connected_endpoints.len(), 2, "{report:?}");
    assert!(
        pes.iter().all(|pe| report.connected_endpoints.contains(pe)),
        "ours and the foreign one"
    );
    assert!(arm.get_value(&pls, API_NETWORK).await.unwrap().is_none());
    // Order in the request log: each connection PUT Rejected, then DELETEd, all before the
    // first DELETE of the PLS.
    let log = sim.requests();
    let pls_delete = requests(&log, "DELETE", &pls)[0].seq;
    for id in &conn_ids {
        let put = requests(&log, "PUT", id);
        let del = requests(&log, "DELETE", id);
        assert_eq!(put.len(), 1, "{id}");
        assert_eq!(put[0].status, 200);
        assert!(!del.is_empty(), "{id}");
        assert!(put[0].seq < del[0].seq && del[0].seq < pls_delete, "{id}");
    }
    assert!(
        requests(&log, "DELETE", &pls)
            .iter()
            .all(|r| r.status == 202),
        "the PLS was deleted only once its connections were gone"
    );
    // Again: nothing left to do.
    let report = drive!(|c| privatelink::teardown(c, &arm, &pls));
    assert_eq!(report.pls, Deleted::Gone);
}

#[tokio::test]
async fn storage_keys_and_shared_key_blobs() {
    let (sim, transport, arm) = setup().await;
    ensure_rg(&arm, SUB, "oidc").await;
    let account = "demoabc12oidc";
    let id = names::resource_id(SUB, "oidc", "Microsoft.Storage/storageAccounts", account);
    let s = spec(
        &id,
        API_STORAGE,
        json!({"location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"},
               "properties": {"allowBlobPublicAccess": true}}),
        true,
    );
    // Storage create: 202 + Location only; journaled and polled.
    let e = drive!(|c| durable::ensure(c, &arm, &s));
    assert_eq!(e.body["properties"]["provisioningState"], "Succeeded");
    let container = format!("{id}/blobServices/default/containers/oidc");
    let s = spec(
        &container,
        API_STORAGE,
        json!({"properties": {"publicAccess": "Container"}}),
        false,
    );
    drive!(|c| durable::ensure(c, &arm, &s));
    let key = storage_account_key(&arm, &id).await.unwrap();
    assert_eq!(format!("{key:?}"), "[redacted]");
    let blob = BlobClient::new(&Cloud::Public, &transport, account, key).unwrap();
    let doc = br#"{"issuer":"https://demoabc12oidc.blob.core.windows.net/oidc"}"#.to_vec();
    blob.put(
        "oidc",
        ".well-known/openid-configuration",
        doc.clone(),
        "application/json",
    )
    .await
    .unwrap();
    let got = blob
        .get("oidc", ".well-known/openid-configuration")
        .await
        .unwrap();
    assert_eq!(got, Some(doc));
    assert_eq!(blob.get("oidc", "openid/v1/jwks").await.unwrap(), None);
    let err = blob
        .put("missing", "x", vec![1], "text/plain")
        .await
        .err()
        .unwrap();
    assert_eq!(err.code, "ContainerNotFound");
    let log = sim.requests();
    assert_eq!(requests(&log, "POST", &format!("{id}/listKeys")).len(), 1);
    let puts = requests(&log, "PUT", "/oidc/.well-known/openid-configuration");
    assert_eq!(puts.len(), 1);
    assert_eq!(puts[0].status, 201);
}

#[tokio::test]
async fn lists_follow_next_link() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "many").await;
    for i in 0..7 {
        arm.put(
            &identity_id(SUB, "many", &format!("id{i}")),
            API_MSI,
            &json!({"location": "eastus"}),
        )
        .await
        .unwrap();
    }
    let path = format!(
        "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities",
        rg_id(SUB, "many")
    );
    let items: Vec<UserAssignedIdentity> = arm.list(&path, API_MSI).await.unwrap();
    assert_eq!(items.len(), 7);
    assert!(items.iter().all(|i| i.properties.client_id.is_some()));
    let log = sim.requests();
    assert!(
        log.iter()
            .any(|r| r.method == "GET" && r.path.contains("skipToken"))
    );
    // A missing parent is an error for lists, not an empty list.
    let e = arm
        .list_values(
            &format!(
                "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities",
                rg_id(SUB, "none")
            ),
            API_MSI,
        )
        .await
        .err()
        .unwrap();
    assert_eq!(e.code, "ResourceGroupNotFound");
}

/// In a parent this run created, the first PUT goes out unread; its intent is
/// journaled before it, so every later call (a poll after a wait, a new attempt, the
/// attempt after a crash before the PUT left) reads, and never PUTs blind a second time.
#[tokio::test]
async fn in_a_new_parent_the_first_put_is_unread_and_every_later_call_reads() {
    let (sim, _t, arm) = setup().await;
    ensure_rg(&arm, SUB, "fresh").await;
    let id = names::resource_id(
        SUB,
        "fresh",
        "Microsoft.Network/networkSecurityGroups",
        "demo-abc12-nsg",
    );
    let s = spec(&id, API_NETWORK, json!({"location": "eastus"}), true);
    let count = |m: &str| {
        requests(&sim.requests(), m, "/networkSecurityGroups/demo-abc12-nsg")
            .iter()
            .filter(|r| !r.path.contains("/operations/"))
            .count()
    };

    // First call: the intent is durable before the PUT, no GET.
    let (c, cell) = azure_support::ctx(None);
    let r = durable::ensure_new(&c, &arm, &s).await.unwrap();
    let saved = cell.lock().unwrap().clone();
    assert!(
        saved
            .first()
            .is_some_and(|cp| cp[durable::UNREAD_KEY][0] == id.to_ascii_lowercase()),
        "intent journaled first: {saved:?}"
    );
    assert_eq!((count("GET"), count("PUT")), (0, 1));
    // Polled to the end (the journaled operation, then the final read).
    let mut checkpoint = saved.last().cloned();
    let mut r = r;
    while let Progress::Pending { after, .. } = r {
        tokio::time::sleep(after.min(Duration::from_millis(100))).await;
        let (c, cell) = azure_support::ctx(checkpoint.clone());
        r = durable::ensure_new(&c, &arm, &s).await.unwrap();
        if let Some(last) = cell.lock().unwrap().last() {
            checkpoint = Some(last.clone());
        }
    }
    assert!(matches!(r, Progress::Done(ref e) if e.created), "{r:?}");
    assert_eq!(count("PUT"), 1);
    let gets = count("GET");

    // Called again with its journal (a poll after a later wait): it reads, adopts, no PUT.
    let (c, _) = azure_support::ctx(checkpoint.clone());
    let r = durable::ensure_new(&c, &arm, &s).await.unwrap();
    assert!(matches!(r, Progress::Done(ref e) if e.created), "{r:?}");
    assert_eq!((count("GET"), count("PUT")), (gets + 1, 1));

    // A crash after the intent was journaled but before the PUT left: the next attempt
    // reads (finds nothing) and only then PUTs.
    let other = names::resource_id(
        SUB,
        "fresh",
        "Microsoft.Network/networkSecurityGroups",
        "demo-abc12-nsg2",
    );
    let s2 = spec(&other, API_NETWORK, json!({"location": "eastus"}), true);
    let intent = json!({ durable::UNREAD_KEY: [other.to_ascii_lowercase()] });
    let (c, _) = azure_support::ctx(Some(intent));
    durable::ensure_new(&c, &arm, &s2).await.unwrap();
    let log = sim.requests();
    let path = "/networkSecurityGroups/demo-abc12-nsg2";
    assert_eq!(
        (
            requests(&log, "GET", path).len(),
            requests(&log, "PUT", path).len()
        ),
        (1, 1),
        "read before the PUT after a crash"
    );
}
