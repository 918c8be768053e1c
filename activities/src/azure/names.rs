//! Deterministic names and ids (DOMAIN.md §3).
//!
//! Every name derives from the cluster name and infra id, so a retried, resumed or
//! re-run step targets the same resource instead of creating a twin. The forms follow
//! HyperShift's own (`hypershift create infra azure`) where it has one, except the
//! private endpoint: HyperShift's fixed `private-router-pe` collides between clusters, so
//! ours carries the cluster name and infra id.

use uuid::Uuid;

/// The eight workload-identity components (DOMAIN.md §4), in creation order.
pub const COMPONENTS: [&str; 8] = [
    "disk",
    "file",
    "image-registry",
    "ingress",
    "cloud-provider",
    "node-pool-mgmt",
    "network",
    "control-plane-operator",
];

/// Name of the subnet in the guest VNet.
pub const SUBNET: &str = "default";
/// A record of the API server in the private-link DNS zone.
pub const API_RECORD: &str = "api";
/// A record of the ingress wildcard in the private-link DNS zone.
pub const APPS_RECORD: &str = "*.apps";
/// TTL of the private-link A records.
pub const PRIVATE_LINK_RECORD_TTL: u32 = 300;
/// Longest PLS / PE / VNet-link name Azure accepts.
pub const MAX_NETWORK_NAME: usize = 80;

/// Built-in role definition GUIDs (DOMAIN.md §4).
pub mod roles {
    /// Azure Red Hat OpenShift Cloud Controller Manager (cloud-provider).
    pub const CLOUD_PROVIDER: &str = "a1f96423-95ce-4224-ab27-4e3dc72facd4";
    /// Azure Red Hat OpenShift Cluster Ingress Operator (ingress).
    pub const INGRESS: &str = "0336e1d3-7a87-462b-b6db-342b63f7802c";
    /// Azure Red Hat OpenShift File Storage Operator (file).
    pub const FILE: &str = "0d7aedc0-15fd-4a67-a412-efad370c947e";
    /// Azure Red Hat OpenShift Disk Storage Operator (disk).
    pub const DISK: &str = "5b7237c5-45e1-49d6-bc18-a1f62f400748";
    /// Azure Red Hat OpenShift Network Operator (network).
    pub const NETWORK: &str = "be7a6435-15ae-4171-8f30-4a343eff9e8f";
    /// Azure Red Hat OpenShift Image Registry Operator (image-registry).
    pub const IMAGE_REGISTRY: &str = "8b32b316-c2f5-4ddf-b05b-83dacd2d08b5";
    /// Contributor (node-pool-mgmt, control-plane-operator).
    pub const CONTRIBUTOR: &str = "b24988ac-6180-42a0-ab88-20f7382dd24c";

    /// The built-in role's display name for a role definition GUID (or a full
    /// `…/roleDefinitions/{guid}` id), as the portal and `az role definition list` show it.
    pub fn name(id: &str) -> Option<&'static str> {
        let guid = id.rsplit('/').next().unwrap_or(id);
        [
            (
                CLOUD_PROVIDER,
                "Azure Red Hat OpenShift Cloud Controller Manager",
            ),
            (INGRESS, "Azure Red Hat OpenShift Cluster Ingress Operator"),
            (FILE, "Azure Red Hat OpenShift File Storage Operator"),
            (DISK, "Azure Red Hat OpenShift Disk Storage Operator"),
            (NETWORK, "Azure Red Hat OpenShift Network Operator"),
            (
                IMAGE_REGISTRY,
                "Azure Red Hat OpenShift Image Registry Operator",
            ),
            (CONTRIBUTOR, "Contributor"),
            // Azure built-in roles, "Security" (the ARO HCP model's Key Vault grants).
            (
                "00482a5a-887f-4fb3-b363-3b7fe8e74483",
                "Key Vault Administrator",
            ),
            (
                "4633458b-17de-408a-b874-0445c86b69e6",
                "Key Vault Secrets User",
            ),
        ]
        .iter()
        .find(|(g, _)| g.eq_ignore_ascii_case(guid))
        .map(|(_, n)| *n)
    }
}

/// Managed resource group: `<name>-<infraID>`.
pub fn managed_rg(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}")
}

/// VNet resource group: `<name>-vnet-<infraID>`.
pub fn vnet_rg(name: &str, infra_id: &str) -> String {
    format!("{name}-vnet-{infra_id}")
}

/// NSG resource group: `<name>-nsg-<infraID>`.
pub fn nsg_rg(name: &str, infra_id: &str) -> String {
    format!("{name}-nsg-{infra_id}")
}

/// NSG: `<name>-<infraID>-nsg`.
pub fn nsg(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}-nsg")
}

/// Guest VNet: `<name>-<infraID>`.
pub fn vnet(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}")
}

/// Infra private DNS zone: `<name>.<baseDomain>`.
pub fn infra_dns_zone(name: &str, base_domain: &str) -> String {
    format!("{name}.{}", base_domain.trim_matches('.'))
}

/// Link of the infra DNS zone to the guest VNet: `<name>-<infraID>`.
pub fn infra_dns_link(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}")
}

/// Egress public IP: `<infraID>`.
pub fn egress_public_ip(infra_id: &str) -> String {
    infra_id.to_string()
}

/// Egress load balancer: `<infraID>`.
pub fn egress_lb(infra_id: &str) -> String {
    infra_id.to_string()
}

/// Workload identity: `<name>-<component>-<infraID>`.
pub fn identity(name: &str, component: &str, infra_id: &str) -> String {
    format!("{name}-{component}-{infra_id}")
}

/// Federated credential on a component's identity, one per service account:
/// `<name>-<infraID>-<serviceAccount>`, cut to Azure's 120 characters and checked against
/// `^[a-zA-Z0-9][a-zA-Z0-9-_]{2,119}$` (other characters become `-`).
pub fn federated_credential(name: &str, infra_id: &str, service_account: &str) -> String {
    let raw = format!("{name}-{infra_id}-{service_account}");
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(120)
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        s.insert(0, 'f');
        s.truncate(120);
    }
    s
}

/// Whether `n` is a valid federated credential name.
pub fn is_valid_federated_credential(n: &str) -> bool {
    let b = n.as_bytes();
    (3..=120).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
}

/// Whether `n` is a valid storage account name (3–24 of `[a-z0-9]`).
pub fn is_valid_storage_account(n: &str) -> bool {
    (3..=24).contains(&n.len())
        && n.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Role assignment name: UUIDv5(DNS namespace, `<infraID>-<component>-<scope>`), where
/// `scope` is the full ARM id of the scope (e.g. the resource group id).
pub fn role_assignment_name(infra_id: &str, component: &str, scope: &str) -> Uuid {
    Uuid::new_v5(
        &Uuid::NAMESPACE_DNS,
        format!("{infra_id}-{component}-{scope}").as_bytes(),
    )
}

/// Private link service: `pls-<clusterID>`.
pub fn pls(cluster_id: &str) -> String {
    format!("pls-{cluster_id}")
}

/// NAT subnet of the PLS in the management VNet: `<infraID>-pls-nat`.
pub fn pls_nat_subnet(infra_id: &str) -> String {
    format!("{infra_id}-pls-nat")
}

/// Private endpoint in the guest VNet: `<name>-<infraID>-pe`.
pub fn private_endpoint(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}-pe")
}

/// The PE's connection entry name: `<name>-<infraID>-pe-conn`.
pub fn private_endpoint_connection(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}-pe-conn")
}

/// Private-link DNS zone: `<name>.hypershift.local`.
pub fn private_link_dns_zone(name: &str) -> String {
    format!("{name}.hypershift.local")
}

/// Link of the private-link DNS zone to the guest VNet: `<name>-<infraID>-pl`.
pub fn private_link_dns_link(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}-pl")
}

/// A control-plane hostname as `hypershift create cluster azure --external-dns-domain`
/// names it (`cmd/cluster/azure/create.go`): `<prefix>-<name>.<baseDomain>`.
pub fn endpoint_hostname(prefix: &str, name: &str, base_domain: &str) -> String {
    format!("{prefix}-{name}.{}", base_domain.trim_matches('.'))
}

/// Link of a hostname's private zone to the guest VNet: `<name>-<infraID>-ep`.
pub fn endpoint_dns_link(name: &str, infra_id: &str) -> String {
    format!("{name}-{infra_id}-ep")
}

/// `/subscriptions/{sub}`.
pub fn subscription_id(sub: &str) -> String {
    format!("/subscriptions/{sub}")
}

/// `/subscriptions/{sub}/resourceGroups/{rg}`.
pub fn resource_group_id(sub: &str, rg: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}")
}

/// `/subscriptions/{sub}/resourceGroups/{rg}/providers/{provider_type}/{name}`, e.g.
/// `provider_type = "Microsoft.Network/virtualNetworks"`.
pub fn resource_id(sub: &str, rg: &str, provider_type: &str, name: &str) -> String {
    format!(
        "{}/providers/{provider_type}/{name}",
        resource_group_id(sub, rg)
    )
}

/// A child resource id: `{parent}/{child_type}/{name}` (e.g. `subnets`, `A`,
/// `federatedIdentityCredentials`, `privateEndpointConnections`).
pub fn child_id(parent: &str, child_type: &str, name: &str) -> String {
    format!("{parent}/{child_type}/{name}")
}

/// Role definition id: `/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{guid}`.
pub fn role_definition_id(sub: &str, role_guid: &str) -> String {
    format!("/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{role_guid}")
}

/// Role assignment id: `{scope}/providers/Microsoft.Authorization/roleAssignments/{name}`.
pub fn role_assignment_id(scope: &str, name: &Uuid) -> String {
    format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{name}")
}

/// The subscription of an ARM id (`/subscriptions/{sub}/…`), if it has one.
pub fn subscription_of(id: &str) -> Option<&str> {
    let mut parts = id.split('/').filter(|s| !s.is_empty());
    match (parts.next(), parts.next()) {
        (Some(s), Some(sub)) if s.eq_ignore_ascii_case("subscriptions") => Some(sub),
        _ => None,
    }
}

/// The last segment of an ARM id (the resource name).
pub fn name_of(id: &str) -> &str {
    id.trim_end_matches('/').rsplit('/').next().unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_names() {
        assert_eq!(managed_rg("demo", "abc12"), "demo-abc12");
        assert_eq!(vnet_rg("demo", "abc12"), "demo-vnet-abc12");
        assert_eq!(nsg_rg("demo", "abc12"), "demo-nsg-abc12");
        assert_eq!(nsg("demo", "abc12"), "demo-abc12-nsg");
        assert_eq!(vnet("demo", "abc12"), "demo-abc12");
        assert_eq!(infra_dns_zone("demo", "example.com."), "demo.example.com");
        assert_eq!(identity("demo", "disk", "abc12"), "demo-disk-abc12");
        assert_eq!(pls("1234"), "pls-1234");
        assert_eq!(pls_nat_subnet("abc12"), "abc12-pls-nat");
        assert_eq!(private_endpoint("demo", "abc12"), "demo-abc12-pe");
        assert_eq!(private_link_dns_zone("demo"), "demo.hypershift.local");
        assert_eq!(
            resource_id("s", "rg", "Microsoft.Network/virtualNetworks", "v"),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v"
        );
    }

    #[test]
    fn role_assignment_names_are_uuid_v5_dns() {
        let scope = "/subscriptions/s/resourceGroups/demo-abc12";
        let a = role_assignment_name("abc12", "disk", scope);
        assert_eq!(a.get_version_num(), 5);
        assert_eq!(a, role_assignment_name("abc12", "disk", scope));
        assert_ne!(a, role_assignment_name("abc12", "file", scope));
        assert_eq!(
            a,
            Uuid::new_v5(
                &Uuid::NAMESPACE_DNS,
                format!("abc12-disk-{scope}").as_bytes()
            )
        );
    }

    #[test]
    fn federated_credential_names_are_valid() {
        let n = federated_credential("demo", "abc12", "azure-disk-csi-driver-node-sa");
        assert_eq!(n, "demo-abc12-azure-disk-csi-driver-node-sa");
        assert!(is_valid_federated_credential(&n));
        let long = federated_credential(&"x".repeat(100), "abc12", &"y".repeat(100));
        assert_eq!(long.len(), 120);
        assert!(is_valid_federated_credential(&long));
        assert!(is_valid_federated_credential(&federated_credential(
            "_a", "b:c", "d"
        )));
        assert!(!is_valid_federated_credential("-ab"));
        assert!(is_valid_storage_account("abc123"));
        assert!(!is_valid_storage_account("ABC"));
    }

    #[test]
    fn id_parts() {
        let id =
            "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Network/privateEndpoints/pe";
        assert_eq!(subscription_of(id), Some("s1"));
        assert_eq!(name_of(id), "pe");
        assert_eq!(subscription_of("/x"), None);
    }
}
