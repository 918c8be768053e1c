//! Every response body of the Azure REST examples in `shared/reference/azure` parses into
//! our model for its resource type, with the fields the workflow reads present.
//!
//! A new example file without a mapping here fails the test, so the models keep up with
//! the reference set.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use hcp_activities::azure::models::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn reference() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference/azure");
    dir.is_dir().then_some(dir)
}

fn parse<T: DeserializeOwned>(file: &str, v: &Value) -> T {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn some(file: &str, what: &str, v: Option<&String>) {
    assert!(v.is_some_and(|s| !s.is_empty()), "{file}: {what} missing");
}

/// Checks one response body; returns false when the file has no mapping.
fn check(file: &str, status: &str, body: &Value) -> bool {
    let f = file;
    match f {
        _ if f.starts_with("RoleAssignments_") => {
            let r: RoleAssignment = parse(f, body);
            assert!(r.id().contains("/roleAssignments/"), "{f}");
            some(f, "principalId", r.properties.principal_id.as_ref());
            some(
                f,
                "roleDefinitionId",
                r.properties.role_definition_id.as_ref(),
            );
            some(f, "scope", r.properties.scope.as_ref());
        }
        "FederatedIdentityCredentialList.json" => {
            let p: Page<FederatedIdentityCredential> = parse(f, body);
            assert!(!p.value.is_empty() && p.next_link.is_some(), "{f}");
            some(f, "issuer", p.value[0].properties.issuer.as_ref());
        }
        _ if f.starts_with("FederatedIdentityCredential") => {
            let c: FederatedIdentityCredential = parse(f, body);
            some(f, "issuer", c.properties.issuer.as_ref());
            some(f, "subject", c.properties.subject.as_ref());
            assert!(!c.properties.audiences.is_empty(), "{f}");
        }
        _ if f.starts_with("Identity") => {
            let i: UserAssignedIdentity = parse(f, body);
            some(f, "clientId", i.properties.client_id.as_ref());
            some(f, "principalId", i.properties.principal_id.as_ref());
            some(f, "tenantId", i.properties.tenant_id.as_ref());
            assert!(!i.tags.is_empty(), "{f}");
        }
        "LoadBalancerList.json" => {
            let p: Page<LoadBalancer> = parse(f, body);
            assert_eq!(p.value.len(), 2, "{f}");
        }
        _ if f.starts_with("LoadBalancer") => {
            let lb: LoadBalancer = parse(f, body);
            some(
                f,
                "provisioningState",
                lb.properties.provisioning_state.as_ref(),
            );
            let fe = &lb.properties.frontend_ip_configurations;
            assert!(!fe.is_empty(), "{f}");
            some(f, "frontend id", fe[0].id.as_ref());
            if f == "LoadBalancerGet.json" {
                assert_eq!(
                    fe[0].properties.private_ip_address.as_deref(),
                    Some("10.0.1.4")
                );
            }
            if f.contains("OutboundRules") {
                assert!(!lb.properties.outbound_rules.is_empty(), "{f}");
                assert_eq!(lb.sku.and_then(|s| s.name).as_deref(), Some("Standard"));
            }
        }
        _ if f.starts_with("NetworkSecurityGroup") => {
            let n: NetworkSecurityGroup = parse(f, body);
            some(
                f,
                "provisioningState",
                n.properties.provisioning_state.as_ref(),
            );
            assert!(!n.properties.default_security_rules.is_empty(), "{f}");
        }
        "PrivateLinkServiceListPrivateEndpointConnection.json" => {
            let p: Page<PrivateEndpointConnection> = parse(f, body);
            assert!(!p.value.is_empty(), "{f}");
            assert!(
                p.value
                    .iter()
                    .all(|c| c.properties.private_endpoint.is_some()),
                "{f}"
            );
        }
        _ if f.starts_with("PrivateLinkService") && f.contains("PrivateEndpointConnection") => {
            let c: PrivateEndpointConnection = parse(f, body);
            some(f, "name", c.name.as_ref());
            some(
                f,
                "connection status",
                c.properties
                    .private_link_service_connection_state
                    .status
                    .as_ref(),
            );
        }
        _ if f.starts_with("PrivateLinkService") => {
            let p: PrivateLinkService = parse(f, body);
            some(f, "alias", p.properties.alias.as_ref());
            assert!(
                !p.properties
                    .load_balancer_frontend_ip_configurations
                    .is_empty(),
                "{f}"
            );
            assert!(!p.properties.ip_configurations.is_empty(), "{f}");
            assert!(!p.properties.visibility.subscriptions.is_empty(), "{f}");
            if f == "PrivateLinkServiceGet.json" {
                let c = &p.properties.private_endpoint_connections[0];
                assert_eq!(
                    c.properties
                        .private_link_service_connection_state
                        .status
                        .as_deref(),
                    Some("Approved")
                );
            }
        }
        _ if f.starts_with("PrivateEndpoint") => {
            let pe: PrivateEndpoint = parse(f, body);
            some(
                f,
                "provisioningState",
                pe.properties.provisioning_state.as_ref(),
            );
            assert!(pe.properties.subnet.is_some(), "{f}");
            assert!(pe.connection_status().is_some() || status == "201", "{f}");
            if f == "PrivateEndpointGet.json" {
                assert_eq!(pe.private_ip(), Some("192.168.0.4"));
                assert_eq!(pe.connection_status(), Some("Approved"));
            }
        }
        _ if f.starts_with("PublicIpAddress") => {
            let ip: PublicIpAddress = parse(f, body);
            some(
                f,
                "allocation",
                ip.properties.public_ip_allocation_method.as_ref(),
            );
            some(
                f,
                "version",
                ip.properties.public_ip_address_version.as_ref(),
            );
        }
        _ if f.starts_with("Subnet") => {
            let s: Subnet = parse(f, body);
            some(f, "addressPrefix", s.properties.address_prefix.as_ref());
        }
        _ if f.starts_with("VirtualNetworkLink") => {
            let l: VirtualNetworkLink = parse(f, body);
            assert!(l.properties.virtual_network.is_some(), "{f}");
            assert!(l.properties.registration_enabled.is_some(), "{f}");
            some(
                f,
                "provisioningState",
                l.properties.provisioning_state.as_ref(),
            );
        }
        _ if f.starts_with("VirtualNetwork") => {
            let v: VirtualNetwork = parse(f, body);
            assert!(
                !v.properties.address_space.address_prefixes.is_empty(),
                "{f}"
            );
            assert!(!v.properties.subnets.is_empty(), "{f}");
            some(
                f,
                "subnet prefix",
                v.properties.subnets[0].properties.address_prefix.as_ref(),
            );
        }
        _ if f.starts_with("PrivateZone") => {
            let z: PrivateDnsZone = parse(f, body);
            some(
                f,
                "provisioningState",
                z.properties.provisioning_state.as_ref(),
            );
            some(f, "location", z.location.as_ref());
        }
        _ if f.starts_with("RecordSetA") => {
            let r: ARecordSet = parse(f, body);
            assert!(r.properties.ttl.is_some(), "{f}");
            assert!(r.properties.a_records[0].ipv4_address.is_some(), "{f}");
        }
        "CreateResourceGroup.json" | "GetResourceGroups.json" => {
            let g: ResourceGroup = parse(f, body);
            some(f, "location", g.location.as_ref());
        }
        _ if f.starts_with("BlobContainers") => {
            let c: BlobContainer = parse(f, body);
            assert!(c.id().contains("/containers/"), "{f}");
            if f == "BlobContainersGet.json" {
                some(f, "publicAccess", c.properties.public_access.as_ref());
            }
        }
        "StorageAccountListKeys.json" => {
            let k: StorageAccountKeys = parse(f, body);
            assert_eq!(k.keys.len(), 2, "{f}");
            assert!(
                !format!("{k:?}").contains("<value>"),
                "key values never print"
            );
            assert_eq!(k.keys[0].value.expose(), "<value>");
        }
        _ if f.starts_with("StorageAccount") => {
            let a: StorageAccount = parse(f, body);
            some(
                f,
                "provisioningState",
                a.properties.provisioning_state.as_ref(),
            );
            some(
                f,
                "blob endpoint",
                a.properties.primary_endpoints.blob.as_ref(),
            );
            assert!(a.sku.and_then(|s| s.name).is_some(), "{f}");
        }
        _ => return false,
    }
    true
}

#[test]
fn reference_examples_parse_into_models() {
    let Some(dir) = reference() else {
        println!("skipped: no ../shared");
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut checked = 0;
    let mut unmapped = Vec::new();
    for path in &files {
        let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let Some(responses) = doc.get("responses").and_then(Value::as_object) else {
            continue; // a swagger document, not an example
        };
        let name = path.file_name().unwrap().to_str().unwrap();
        for (status, rsp) in responses {
            let Some(body) = rsp.get("body").filter(|b| b.is_object()) else {
                continue;
            };
            if check(name, status, body) {
                checked += 1;
            } else {
                unmapped.push(name.to_string());
            }
        }
    }
    assert!(unmapped.is_empty(), "no model mapping for {unmapped:?}");
    assert!(checked >= 40, "only {checked} bodies checked");
}

#[test]
fn api_versions_are_pinned_per_type() {
    assert_eq!(VirtualNetwork::API_VERSION, "2023-11-01");
    assert_eq!(PrivateLinkService::API_VERSION, API_NETWORK);
    assert_eq!(PrivateDnsZone::API_VERSION, "2024-06-01");
    assert_eq!(
        ARecordSet::RESOURCE_TYPE,
        "Microsoft.Network/privateDnsZones/A"
    );
    assert_eq!(UserAssignedIdentity::API_VERSION, "2024-11-30");
    assert_eq!(RoleAssignment::API_VERSION, "2022-04-01");
    assert_eq!(StorageAccount::API_VERSION, "2024-01-01");
    assert_eq!(ResourceGroup::API_VERSION, "2021-04-01");
}
