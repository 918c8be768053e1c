//! Typed ARM resource models for exactly the resources of DOMAIN.md §2, with their pinned
//! api-versions.
//!
//! Written from the Azure REST contract (and checked against the examples in
//! `shared/reference/azure`), never shared with the simulator. Every model is lenient:
//! unknown fields are ignored and every field is optional or defaulted, because ARM adds
//! fields over time and returns different subsets on PUT, GET and list. Request bodies are
//! built as `serde_json::Value` by the steps (ARM PUT replaces the client-owned fields, so
//! sending exactly what we mean matters more than a typed round-trip).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::secret::Secret;

/// Microsoft.Resources (resource groups).
pub const API_RESOURCES: &str = "2021-04-01";
/// Microsoft.ManagedIdentity (identities, federated credentials).
pub const API_MSI: &str = "2024-11-30";
/// Microsoft.Authorization (role assignments).
pub const API_AUTHORIZATION: &str = "2022-04-01";
/// Microsoft.Storage (accounts, containers, listKeys).
pub const API_STORAGE: &str = "2024-01-01";
/// Microsoft.Network (NSG, VNet, subnet, public IP, LB, PLS, PE).
pub const API_NETWORK: &str = "2023-11-01";
/// Microsoft.Network/privateDnsZones (zones, links, records).
pub const API_PRIVATE_DNS: &str = "2024-06-01";
/// Microsoft.Network/dnszones (public DNS zones and their record sets). The stable version
/// of the public DNS swagger (`specification/dns/resource-manager/Microsoft.Network/stable/2018-05-01/dns.json`
/// in Azure/azure-rest-api-specs; not among our spec excerpts) and the one HyperShift's
/// `armdns` v1.2.0 client sends (`cmd/infra/azure/networking.go` `GetBaseDomainID`).
pub const API_DNS: &str = "2018-05-01";

/// A resource type with its pinned api-version.
pub trait ArmType {
    /// ARM resource type, e.g. `Microsoft.Network/virtualNetworks`.
    const RESOURCE_TYPE: &'static str;
    /// The api-version we pin for it.
    const API_VERSION: &'static str;
}

/// The ARM envelope around a resource's `properties`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Resource<P> {
    /// Resource id.
    pub id: Option<String>,
    /// Resource name.
    pub name: Option<String>,
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: Option<String>,
    /// Region (tracked resources).
    pub location: Option<String>,
    /// Tags (tracked resources).
    pub tags: BTreeMap<String, String>,
    /// Entity tag.
    pub etag: Option<String>,
    /// SKU, for resources that have one.
    pub sku: Option<Sku>,
    /// Kind (storage accounts).
    pub kind: Option<String>,
    /// Availability zones (public IPs).
    pub zones: Vec<String>,
    /// Type-specific properties.
    pub properties: P,
}

impl<P: ArmType> Resource<P> {
    /// The pinned api-version of this resource type.
    pub const API_VERSION: &'static str = P::API_VERSION;
    /// The ARM resource type.
    pub const RESOURCE_TYPE: &'static str = P::RESOURCE_TYPE;
}

impl<P> Resource<P> {
    /// The id, or an empty string.
    pub fn id(&self) -> &str {
        self.id.as_deref().unwrap_or_default()
    }
}

/// A SKU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Sku {
    /// `Standard`, `Standard_LRS`, …
    pub name: Option<String>,
    /// `Regional`, `Standard`, …
    pub tier: Option<String>,
}

/// A reference to another resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubResource {
    /// Its id.
    pub id: Option<String>,
}

/// An ARM list page.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Page<T> {
    /// Items.
    pub value: Vec<T>,
    /// Absolute URL of the next page.
    pub next_link: Option<String>,
}

macro_rules! arm_type {
    ($t:ty, $rt:expr, $api:expr) => {
        impl ArmType for $t {
            const RESOURCE_TYPE: &'static str = $rt;
            const API_VERSION: &'static str = $api;
        }
    };
}

/// Resource group properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ResourceGroupProperties {
    /// `Succeeded`, `Deleting`, …
    pub provisioning_state: Option<String>,
}
arm_type!(
    ResourceGroupProperties,
    "Microsoft.Resources/resourceGroups",
    API_RESOURCES
);
/// A resource group.
pub type ResourceGroup = Resource<ResourceGroupProperties>;

/// User-assigned identity properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IdentityProperties {
    /// Application (client) id: goes into the HostedCluster.
    pub client_id: Option<String>,
    /// Service principal object id: the principal of role assignments.
    pub principal_id: Option<String>,
    /// Tenant.
    pub tenant_id: Option<String>,
    /// `None` or `Regional`.
    pub isolation_scope: Option<String>,
}
arm_type!(
    IdentityProperties,
    "Microsoft.ManagedIdentity/userAssignedIdentities",
    API_MSI
);
/// A user-assigned managed identity.
pub type UserAssignedIdentity = Resource<IdentityProperties>;

/// Federated identity credential properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FederatedCredentialProperties {
    /// Issuer URL.
    pub issuer: Option<String>,
    /// `system:serviceaccount:<ns>:<sa>`.
    pub subject: Option<String>,
    /// Audiences (`openshift`).
    pub audiences: Vec<String>,
}
arm_type!(
    FederatedCredentialProperties,
    "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials",
    API_MSI
);
/// A federated identity credential.
pub type FederatedIdentityCredential = Resource<FederatedCredentialProperties>;

/// Role assignment properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RoleAssignmentProperties {
    /// Full role definition id.
    pub role_definition_id: Option<String>,
    /// Principal object id.
    pub principal_id: Option<String>,
    /// `ServicePrincipal`, `User`, …
    pub principal_type: Option<String>,
    /// Scope id.
    pub scope: Option<String>,
}
arm_type!(
    RoleAssignmentProperties,
    "Microsoft.Authorization/roleAssignments",
    API_AUTHORIZATION
);
/// A role assignment.
pub type RoleAssignment = Resource<RoleAssignmentProperties>;

/// Storage endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StorageEndpoints {
    /// Blob endpoint, e.g. `https://acct.blob.core.windows.net/`.
    pub blob: Option<String>,
}

/// Storage account properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StorageAccountProperties {
    /// `Creating`, `Succeeded`, …
    pub provisioning_state: Option<String>,
    /// Whether containers may allow anonymous reads (needed for the OIDC issuer).
    pub allow_blob_public_access: Option<bool>,
    /// Whether Shared Key authorization is allowed.
    pub allow_shared_key_access: Option<bool>,
    /// Endpoints.
    pub primary_endpoints: StorageEndpoints,
    /// Minimum TLS version.
    pub minimum_tls_version: Option<String>,
}
arm_type!(
    StorageAccountProperties,
    "Microsoft.Storage/storageAccounts",
    API_STORAGE
);
/// A storage account.
pub type StorageAccount = Resource<StorageAccountProperties>;

/// Blob container properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BlobContainerProperties {
    /// `None`, `Blob` or `Container`.
    pub public_access: Option<String>,
}
arm_type!(
    BlobContainerProperties,
    "Microsoft.Storage/storageAccounts/blobServices/containers",
    API_STORAGE
);
/// A blob container.
pub type BlobContainer = Resource<BlobContainerProperties>;

/// One storage account key. The value is a [`Secret`]: it cannot be printed or
/// serialized.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageAccountKey {
    /// `key1`, `key2`.
    #[serde(default)]
    pub key_name: Option<String>,
    /// `Full`, `Read`.
    #[serde(default)]
    pub permissions: Option<String>,
    /// The key (base64).
    pub value: Secret<String>,
}

/// Answer of `POST …/listKeys`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StorageAccountKeys {
    /// The keys.
    pub keys: Vec<StorageAccountKey>,
}

/// A network security rule (only what we read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SecurityRule {
    /// Id.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Raw properties.
    pub properties: Value,
}

/// NSG properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkSecurityGroupProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// User rules.
    pub security_rules: Vec<SecurityRule>,
    /// Azure's default rules.
    pub default_security_rules: Vec<SecurityRule>,
    /// Subnets using the NSG.
    pub subnets: Vec<SubResource>,
}
arm_type!(
    NetworkSecurityGroupProperties,
    "Microsoft.Network/networkSecurityGroups",
    API_NETWORK
);
/// A network security group.
pub type NetworkSecurityGroup = Resource<NetworkSecurityGroupProperties>;

/// Address space of a VNet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AddressSpace {
    /// CIDRs.
    pub address_prefixes: Vec<String>,
}

/// Subnet properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubnetProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// CIDR.
    pub address_prefix: Option<String>,
    /// CIDRs (when several).
    pub address_prefixes: Vec<String>,
    /// Attached NSG.
    pub network_security_group: Option<SubResource>,
    /// `Enabled` / `Disabled` (must be `Disabled` on a PLS NAT subnet).
    pub private_link_service_network_policies: Option<String>,
    /// `Enabled` / `Disabled`.
    pub private_endpoint_network_policies: Option<String>,
    /// IP configurations using the subnet.
    pub ip_configurations: Vec<SubResource>,
    /// Private endpoints in the subnet.
    pub private_endpoints: Vec<SubResource>,
}
arm_type!(
    SubnetProperties,
    "Microsoft.Network/virtualNetworks/subnets",
    API_NETWORK
);
/// A subnet.
pub type Subnet = Resource<SubnetProperties>;

/// VNet properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualNetworkProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// Address space.
    pub address_space: AddressSpace,
    /// Subnets (inline).
    pub subnets: Vec<Subnet>,
}
arm_type!(
    VirtualNetworkProperties,
    "Microsoft.Network/virtualNetworks",
    API_NETWORK
);
/// A virtual network.
pub type VirtualNetwork = Resource<VirtualNetworkProperties>;

/// Public IP properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PublicIpAddressProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// `Static` / `Dynamic`.
    #[serde(rename = "publicIPAllocationMethod")]
    pub public_ip_allocation_method: Option<String>,
    /// `IPv4` / `IPv6`.
    #[serde(rename = "publicIPAddressVersion")]
    pub public_ip_address_version: Option<String>,
    /// The address, once allocated.
    pub ip_address: Option<String>,
    /// Idle timeout.
    pub idle_timeout_in_minutes: Option<u32>,
    /// What uses it.
    pub ip_configuration: Option<SubResource>,
}
arm_type!(
    PublicIpAddressProperties,
    "Microsoft.Network/publicIPAddresses",
    API_NETWORK
);
/// A public IP address.
pub type PublicIpAddress = Resource<PublicIpAddressProperties>;

/// Load balancer frontend properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FrontendIpConfigurationProperties {
    /// Private address (internal LBs): what the `private-router` Service reports.
    #[serde(rename = "privateIPAddress")]
    pub private_ip_address: Option<String>,
    /// `Static` / `Dynamic`.
    #[serde(rename = "privateIPAllocationMethod")]
    pub private_ip_allocation_method: Option<String>,
    /// Subnet (internal LBs).
    pub subnet: Option<SubResource>,
    /// Public IP (public LBs).
    #[serde(rename = "publicIPAddress")]
    pub public_ip_address: Option<SubResource>,
    /// Provisioning state.
    pub provisioning_state: Option<String>,
}

/// A frontend IP configuration (sub-resource with id and name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FrontendIpConfiguration {
    /// Id.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Properties.
    pub properties: FrontendIpConfigurationProperties,
}

/// A named sub-resource whose properties we do not model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NamedSubResource {
    /// Id.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Raw properties.
    pub properties: Value,
}

/// Load balancer properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LoadBalancerProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// Frontends.
    #[serde(rename = "frontendIPConfigurations")]
    pub frontend_ip_configurations: Vec<FrontendIpConfiguration>,
    /// Backend pools.
    pub backend_address_pools: Vec<NamedSubResource>,
    /// Probes.
    pub probes: Vec<NamedSubResource>,
    /// Rules.
    pub load_balancing_rules: Vec<NamedSubResource>,
    /// Outbound rules.
    pub outbound_rules: Vec<NamedSubResource>,
}
arm_type!(
    LoadBalancerProperties,
    "Microsoft.Network/loadBalancers",
    API_NETWORK
);
/// A load balancer.
pub type LoadBalancer = Resource<LoadBalancerProperties>;

/// Connection state between a private endpoint and a private link service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConnectionState {
    /// `Pending`, `Approved`, `Rejected`, `Disconnected`.
    pub status: Option<String>,
    /// Reason.
    pub description: Option<String>,
    /// Required actions.
    pub actions_required: Option<String>,
}

/// PLS-side private endpoint connection properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PrivateEndpointConnectionProperties {
    /// The endpoint.
    pub private_endpoint: Option<SubResource>,
    /// State.
    pub private_link_service_connection_state: ConnectionState,
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// Link identifier.
    pub link_identifier: Option<String>,
}
arm_type!(
    PrivateEndpointConnectionProperties,
    "Microsoft.Network/privateLinkServices/privateEndpointConnections",
    API_NETWORK
);
/// A connection on a private link service.
pub type PrivateEndpointConnection = Resource<PrivateEndpointConnectionProperties>;

/// Subscription list (`visibility`, `autoApproval`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SubscriptionList {
    /// Subscription ids (`*` = any).
    pub subscriptions: Vec<String>,
}

/// PLS IP configuration properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PlsIpConfigurationProperties {
    /// NAT address.
    #[serde(rename = "privateIPAddress")]
    pub private_ip_address: Option<String>,
    /// `Static` / `Dynamic`.
    #[serde(rename = "privateIPAllocationMethod")]
    pub private_ip_allocation_method: Option<String>,
    /// NAT subnet.
    pub subnet: Option<SubResource>,
    /// Primary configuration.
    pub primary: Option<bool>,
}

/// PLS IP configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PlsIpConfiguration {
    /// Id.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Properties.
    pub properties: PlsIpConfigurationProperties,
}

/// Private link service properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PrivateLinkServiceProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// Alias a PE may use instead of the id.
    pub alias: Option<String>,
    /// Subscriptions that may see the service.
    pub visibility: SubscriptionList,
    /// Subscriptions whose endpoints are approved automatically.
    pub auto_approval: SubscriptionList,
    /// FQDNs.
    pub fqdns: Vec<String>,
    /// Frontends of the internal LB it fronts.
    pub load_balancer_frontend_ip_configurations: Vec<SubResource>,
    /// NAT IP configurations.
    pub ip_configurations: Vec<PlsIpConfiguration>,
    /// Connections (ours and foreign).
    pub private_endpoint_connections: Vec<PrivateEndpointConnection>,
    /// NICs Azure created.
    pub network_interfaces: Vec<SubResource>,
}
arm_type!(
    PrivateLinkServiceProperties,
    "Microsoft.Network/privateLinkServices",
    API_NETWORK
);
/// A private link service.
pub type PrivateLinkService = Resource<PrivateLinkServiceProperties>;

/// PE-side connection properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PlsConnectionProperties {
    /// PLS id or alias.
    pub private_link_service_id: Option<String>,
    /// Group ids.
    pub group_ids: Vec<String>,
    /// Message to the PLS owner.
    pub request_message: Option<String>,
    /// State as seen from the endpoint.
    pub private_link_service_connection_state: ConnectionState,
}

/// PE-side connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PlsConnection {
    /// Id.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Properties.
    pub properties: PlsConnectionProperties,
}

/// Custom DNS configuration of a PE (FQDN → addresses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CustomDnsConfig {
    /// FQDN.
    pub fqdn: Option<String>,
    /// Addresses.
    pub ip_addresses: Vec<String>,
}

/// NIC IP configuration properties (from `$expand=networkInterfaces`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NicIpConfigurationProperties {
    /// Address.
    #[serde(rename = "privateIPAddress")]
    pub private_ip_address: Option<String>,
    /// Subnet.
    pub subnet: Option<SubResource>,
}

/// NIC IP configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NicIpConfiguration {
    /// Id.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Properties.
    pub properties: NicIpConfigurationProperties,
}

/// NIC properties (only what we read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkInterfaceProperties {
    /// IP configurations.
    pub ip_configurations: Vec<NicIpConfiguration>,
}

/// A NIC reference, expanded or not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NetworkInterfaceRef {
    /// Id.
    pub id: Option<String>,
    /// Properties when expanded.
    pub properties: NetworkInterfaceProperties,
}

/// PE static IP configuration properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PeIpConfigurationProperties {
    /// Group id.
    pub group_id: Option<String>,
    /// Member name.
    pub member_name: Option<String>,
    /// Address.
    #[serde(rename = "privateIPAddress")]
    pub private_ip_address: Option<String>,
}

/// PE static IP configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PeIpConfiguration {
    /// Name.
    pub name: Option<String>,
    /// Properties.
    pub properties: PeIpConfigurationProperties,
}

/// Private endpoint properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PrivateEndpointProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// Subnet.
    pub subnet: Option<SubResource>,
    /// Auto-approved connections.
    pub private_link_service_connections: Vec<PlsConnection>,
    /// Manually approved connections (what we create).
    pub manual_private_link_service_connections: Vec<PlsConnection>,
    /// FQDN → addresses.
    pub custom_dns_configs: Vec<CustomDnsConfig>,
    /// NICs (expanded with `$expand=networkInterfaces`).
    pub network_interfaces: Vec<NetworkInterfaceRef>,
    /// Static IP configurations.
    pub ip_configurations: Vec<PeIpConfiguration>,
    /// Custom NIC name.
    pub custom_network_interface_name: Option<String>,
}
arm_type!(
    PrivateEndpointProperties,
    "Microsoft.Network/privateEndpoints",
    API_NETWORK
);
/// A private endpoint.
pub type PrivateEndpoint = Resource<PrivateEndpointProperties>;

/// Query parameters with which a resource of `resource_type` is read before it is written
/// (`durable::ensure`): a private endpoint is read with its network interfaces
/// (`$expand=networkInterfaces`, PrivateEndpoints_Get,
/// `network/…/stable/2023-11-01/privateEndpoint.json`), where its address is when no
/// custom DNS config carries it, so the step that needs the address reads it once.
pub fn read_query(resource_type: &str) -> &'static [(&'static str, &'static str)] {
    if resource_type.eq_ignore_ascii_case(PrivateEndpointProperties::RESOURCE_TYPE) {
        &[("$expand", "networkInterfaces")]
    } else {
        &[]
    }
}

impl PrivateEndpoint {
    /// Connection state of the first connection (manual first), e.g. `Approved`.
    pub fn connection_status(&self) -> Option<&str> {
        self.properties
            .manual_private_link_service_connections
            .iter()
            .chain(&self.properties.private_link_service_connections)
            .find_map(|c| {
                c.properties
                    .private_link_service_connection_state
                    .status
                    .as_deref()
            })
    }

    /// The endpoint's address: `customDnsConfigs[0].ipAddresses[0]`, else the first
    /// expanded NIC's first IP configuration, else a static IP configuration.
    pub fn private_ip(&self) -> Option<&str> {
        let p = &self.properties;
        p.custom_dns_configs
            .iter()
            .find_map(|c| c.ip_addresses.first())
            .or_else(|| {
                p.network_interfaces.iter().find_map(|n| {
                    n.properties
                        .ip_configurations
                        .iter()
                        .find_map(|c| c.properties.private_ip_address.as_ref())
                })
            })
            .or_else(|| {
                p.ip_configurations
                    .iter()
                    .find_map(|c| c.properties.private_ip_address.as_ref())
            })
            .map(String::as_str)
    }
}

/// Private DNS zone properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PrivateDnsZoneProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// Record sets (including SOA).
    pub number_of_record_sets: Option<u64>,
    /// VNet links.
    pub number_of_virtual_network_links: Option<u64>,
}
arm_type!(
    PrivateDnsZoneProperties,
    "Microsoft.Network/privateDnsZones",
    API_PRIVATE_DNS
);
/// A private DNS zone.
pub type PrivateDnsZone = Resource<PrivateDnsZoneProperties>;

/// VNet link properties.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VirtualNetworkLinkProperties {
    /// Provisioning state.
    pub provisioning_state: Option<String>,
    /// Linked VNet.
    pub virtual_network: Option<SubResource>,
    /// Auto-registration of VM records.
    pub registration_enabled: Option<bool>,
    /// `InProgress` / `Completed`.
    pub virtual_network_link_state: Option<String>,
}
arm_type!(
    VirtualNetworkLinkProperties,
    "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
    API_PRIVATE_DNS
);
/// A private DNS zone → VNet link.
pub type VirtualNetworkLink = Resource<VirtualNetworkLinkProperties>;

/// An A record value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ARecord {
    /// IPv4 address.
    pub ipv4_address: Option<String>,
}

/// A record set properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ARecordSetProperties {
    /// TTL in seconds.
    pub ttl: Option<u32>,
    /// FQDN (with trailing dot).
    pub fqdn: Option<String>,
    /// Addresses.
    pub a_records: Vec<ARecord>,
    /// Auto-registered by a VNet link.
    pub is_auto_registered: Option<bool>,
    /// Metadata.
    pub metadata: BTreeMap<String, String>,
}
arm_type!(
    ARecordSetProperties,
    "Microsoft.Network/privateDnsZones/A",
    API_PRIVATE_DNS
);
/// An A record set.
pub type ARecordSet = Resource<ARecordSetProperties>;

/// `properties.provisioningState` of any resource body, if it has one.
pub fn provisioning_state(body: &Value) -> Option<&str> {
    body.pointer("/properties/provisioningState")
        .and_then(Value::as_str)
}

/// Whether Azure is deleting the resource (`provisioningState: Deleting`).
pub fn is_deleting(body: &Value) -> bool {
    provisioning_state(body).is_some_and(|s| s.eq_ignore_ascii_case("Deleting"))
}
