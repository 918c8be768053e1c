//! A cluster's layout: every name and resource id derived from its config and infra id
//! (DOMAIN.md §3). create-cluster, delete-cluster and `plan` all read it, so a delete
//! targets exactly what a create made, even without the create's journal.

use crate::config::{ClusterConfig, Identities, IdentityComponent, NatSubnet, Network, OidcIssuer};
use hcp_activities::azure::{AuthMode, Cloud, names};
use hcp_activities::kube::KubeTarget;
use hcp_activities::steps::{AzureEnv, MgmtEnv, Owner};

/// Namespace of HostedCluster and NodePool objects (HyperShift's default).
pub const CLUSTERS_NAMESPACE: &str = "clusters";

/// Pinned api-versions (DOMAIN.md §2), from the activities' models.
pub mod api {
    pub use hcp_activities::azure::models::{
        API_AUTHORIZATION as AUTHORIZATION, API_MSI as MSI, API_NETWORK as NETWORK,
        API_PRIVATE_DNS as PRIVATE_DNS, API_RESOURCES as RESOURCES, API_STORAGE as STORAGE,
    };
}

/// A workload identity component: its federated subjects and role assignments.
#[derive(Debug, Clone, Copy)]
pub struct ComponentSpec {
    /// Config component.
    pub component: IdentityComponent,
    /// Service accounts (`namespace:name`).
    pub subjects: &'static [&'static str],
    /// Role definition GUID.
    pub role: &'static str,
    /// Scopes, among [`Scope`].
    pub scopes: &'static [Scope],
}

/// Resource-group scopes of role assignments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `<name>-<infraID>`.
    Managed,
    /// The NSG's group.
    Nsg,
    /// The VNet's group.
    Vnet,
    /// The group of the public DNS zone of `baseDomain`, which the guest's ingress operator
    /// writes (HyperShift's `--dns-zone-rg-name`): `dnsZoneResourceGroup`, else the group
    /// the zone is found in at run time ([`Layout::scope_id`] is then `None`).
    Dns,
}

const CSI_DISK: &[&str] = &[
    "openshift-cluster-csi-drivers:azure-disk-csi-driver-node-sa",
    "openshift-cluster-csi-drivers:azure-disk-csi-driver-operator",
    "openshift-cluster-csi-drivers:azure-disk-csi-driver-controller-sa",
];
const CSI_FILE: &[&str] = &[
    "openshift-cluster-csi-drivers:azure-file-csi-driver-node-sa",
    "openshift-cluster-csi-drivers:azure-file-csi-driver-operator",
    "openshift-cluster-csi-drivers:azure-file-csi-driver-controller-sa",
];
const CONTRIBUTOR: &str = "b24988ac-6180-42a0-ab88-20f7382dd24c";

/// The 8 components, their subjects and roles (DOMAIN.md §4). 18 role assignments.
pub const COMPONENTS: [ComponentSpec; 8] = [
    ComponentSpec {
        component: IdentityComponent::Disk,
        subjects: CSI_DISK,
        role: "5b7237c5-45e1-49d6-bc18-a1f62f400748",
        scopes: &[Scope::Managed],
    },
    ComponentSpec {
        component: IdentityComponent::File,
        subjects: CSI_FILE,
        role: "0d7aedc0-15fd-4a67-a412-efad370c947e",
        scopes: &[Scope::Managed, Scope::Nsg, Scope::Vnet],
    },
    ComponentSpec {
        component: IdentityComponent::ImageRegistry,
        subjects: &[
            "openshift-image-registry:registry",
            "openshift-image-registry:cluster-image-registry-operator",
        ],
        role: "8b32b316-c2f5-4ddf-b05b-83dacd2d08b5",
        scopes: &[Scope::Managed],
    },
    ComponentSpec {
        component: IdentityComponent::Ingress,
        subjects: &["openshift-ingress-operator:ingress-operator"],
        role: "0336e1d3-7a87-462b-b6db-342b63f7802c",
        scopes: &[Scope::Managed, Scope::Vnet, Scope::Dns],
    },
    ComponentSpec {
        component: IdentityComponent::CloudProvider,
        subjects: &["kube-system:azure-cloud-provider"],
        role: "a1f96423-95ce-4224-ab27-4e3dc72facd4",
        scopes: &[Scope::Managed, Scope::Nsg, Scope::Vnet],
    },
    ComponentSpec {
        component: IdentityComponent::NodePoolManagement,
        subjects: &["kube-system:capi-provider"],
        role: CONTRIBUTOR,
        scopes: &[Scope::Managed, Scope::Vnet],
    },
    ComponentSpec {
        component: IdentityComponent::Network,
        subjects: &["openshift-cloud-network-config-controller:cloud-network-config-controller"],
        role: "be7a6435-15ae-4171-8f30-4a343eff9e8f",
        scopes: &[Scope::Managed, Scope::Vnet],
    },
    ComponentSpec {
        component: IdentityComponent::ControlPlaneOperator,
        subjects: &["kube-system:control-plane-operator"],
        role: CONTRIBUTOR,
        scopes: &[Scope::Managed, Scope::Nsg, Scope::Vnet],
    },
];

/// Every derived name and id of one cluster.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Cluster name.
    pub name: String,
    /// Infra id.
    pub infra_id: String,
    /// Guest subscription.
    pub sub: String,
    /// Location.
    pub location: String,
    /// Azure target of the guest subscription.
    pub azure: AzureEnv,
    /// Azure target of the management subscription (same tenant, cloud and auth).
    pub mgmt_azure: AzureEnv,
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Persistent group id.
    pub persistent_rg: String,
    /// Managed group id.
    pub managed_rg: String,
    /// VNet group id (ours, or the bring-your-own VNet's).
    pub vnet_rg: String,
    /// NSG group id.
    pub nsg_rg: String,
    /// Whether the network is created by us.
    pub network_created: bool,
    /// NSG id.
    pub nsg_id: String,
    /// VNet id.
    pub vnet_id: String,
    /// Guest subnet id.
    pub subnet_id: String,
    /// Infra private DNS zone id.
    pub infra_zone_id: String,
    /// Its VNet link id.
    pub infra_link_id: String,
    /// Egress public IP id.
    pub public_ip_id: String,
    /// Egress LB id.
    pub lb_id: String,
    /// OIDC storage account id, when the issuer is created.
    pub storage_account_id: Option<String>,
    /// Container.
    pub container: String,
    /// Issuer URL.
    pub issuer_url: String,
    /// Management LB group id.
    pub mgmt_lb_rg: String,
    /// Management VNet id.
    pub mgmt_vnet_id: String,
    /// NAT subnet id.
    pub nat_subnet_id: String,
    /// Whether we create the NAT subnet (auto or cidr), and with which CIDR.
    pub nat_subnet_create: Option<Option<String>>,
    /// PLS id.
    pub pls_id: String,
    /// PE id.
    pub pe_id: String,
    /// Group id of the public DNS zone when `dnsZoneResourceGroup` names it (else the zone
    /// is looked up at run time).
    pub dns_zone_rg: Option<String>,
    /// Private-link DNS zone id (`<name>.hypershift.local`).
    pub pl_zone_id: String,
    /// Its VNet link id.
    pub pl_link_id: String,
    /// The ARO HCP identity model's names (`identities.aroHcp`).
    pub aro: Option<AroLayout>,
    /// Private topologies: one private zone per published hostname (`api-<name>.<baseDomain>`,
    /// `oauth-<name>.<baseDomain>`), linked to the guest VNet, whose apex answers the
    /// private endpoint's address ([`EndpointZone`]).
    pub endpoint_zones: Vec<EndpointZone>,
}

/// A private zone named exactly one of the control plane's hostnames, so the guest VNet
/// resolves that name (and only that name) to the private endpoint.
///
/// HyperShift's own private link (`controllers/azureprivatelinkservice/controller.go`
/// `reconcileBaseDomainDNS`) writes `api-<name>` and `oauth-<name>` in a private zone named
/// the whole base domain. Azure's resolver makes a linked private zone authoritative for
/// every name under it, with no fall-through to public DNS, so that zone would hide every
/// other record of the base domain from the guest (a team's `registry.<baseDomain>`,
/// another cluster's names), and two clusters sharing a VNet could not both link one. A
/// zone per hostname shadows only the name it answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointZone {
    /// The hostname (the zone's name).
    pub host: String,
    /// The zone's id.
    pub zone_id: String,
    /// Its link to the guest VNet.
    pub link_id: String,
}

/// Names of the ARO HCP identity model (all in the persistent group, keyed by the cluster
/// name rather than the infra id, so a re-create of the cluster reuses them as the seed's
/// "Resource Reusability" asks).
#[derive(Debug, Clone)]
pub struct AroLayout {
    /// Key Vault name.
    pub key_vault: String,
    /// Key Vault ARM id.
    pub key_vault_id: String,
    /// A vault the user made (never written or deleted).
    pub key_vault_existing: bool,
    /// Certificate validity in months.
    pub validity_months: u32,
    /// The AKS management cluster's ARM id.
    pub aks_cluster_id: String,
    /// Tenant of the vault (the cluster's).
    pub tenant: String,
    /// SHA-256(subscription/persistentResourceGroup/name), hex, first 8: keeps two
    /// subscriptions' `demo` clusters' Entra applications apart (applications are
    /// tenant-wide).
    hash: String,
    name: String,
    persistent_rg: String,
}

/// The seed's short name of a control-plane component (its Key Vault secret suffix:
/// `<name>-cpo`, `<name>-nodepool-mgmt`, …).
pub fn aro_short(c: IdentityComponent) -> &'static str {
    match c {
        IdentityComponent::ControlPlaneOperator => "cpo",
        IdentityComponent::NodePoolManagement => "nodepool-mgmt",
        IdentityComponent::CloudProvider => "cloud-provider",
        IdentityComponent::Disk => "disk",
        IdentityComponent::File => "file",
        IdentityComponent::Ingress => "ingress",
        IdentityComponent::Network => "network",
        IdentityComponent::ImageRegistry => "image-registry",
    }
}

/// The data-plane managed identities: component, federated subject, built-in role
/// (`contrib/managed-azure/setup_dataplane_identities.sh` and `cmd/infra/azure/rbac.go`
/// `AssignDataPlaneRoles`, release-4.22; role ids from Azure's built-in roles list,
/// "Azure Red Hat OpenShift Image Registry Operator" / "… Azure Disk CSI Driver Operator" /
/// "… Azure Files CSI Driver Operator"), and the role assignment's name component
/// (`config.CIRO+"WI"`, …).
pub const ARO_DATA_PLANE: [(&str, &str, &str, &str); 3] = [
    (
        "image-registry",
        "openshift-image-registry:registry",
        "8b32b316-c2f5-4ddf-b05b-83dacd2d08b5",
        "ciroWI",
    ),
    (
        "disk",
        "openshift-cluster-csi-drivers:azure-disk-csi-driver-node-sa",
        "5b7237c5-45e1-49d6-bc18-a1f62f400748",
        "azure-diskWI",
    ),
    (
        "file",
        "openshift-cluster-csi-drivers:azure-file-csi-driver-node-sa",
        "0d7aedc0-15fd-4a67-a412-efad370c947e",
        "azure-fileWI",
    ),
];

/// Key Vault Administrator (the caller, on a vault it creates; HyperShift's
/// `setup_MIv3_kv.sh` does the same) and Key Vault Secrets User (the AKS Key Vault Secrets
/// Provider identity: `secrets/getSecret`, what the CSI driver needs): Azure built-in roles
/// (learn.microsoft.com, "Azure built-in roles for Security").
pub const KEY_VAULT_ADMINISTRATOR: &str = "00482a5a-887f-4fb3-b363-3b7fe8e74483";
/// See [`KEY_VAULT_ADMINISTRATOR`].
pub const KEY_VAULT_SECRETS_USER: &str = "4633458b-17de-408a-b874-0445c86b69e6";

impl AroLayout {
    /// Certificate name of a component (`<name>-<short>`, the seed's table).
    pub fn cert(&self, c: IdentityComponent) -> String {
        format!("{}-{}", self.name, aro_short(c))
    }

    /// Its credentials secret (`<cert>-json`, as HyperShift's `setup_MIv3_kv.sh`).
    pub fn credentials_secret(&self, c: IdentityComponent) -> String {
        format!("{}-json", self.cert(c))
    }

    /// The Entra application's `uniqueName` (its idempotency key).
    pub fn app_unique_name(&self, c: IdentityComponent) -> String {
        format!("hcp-{}-{}-{}", self.name, aro_short(c), self.hash)
    }

    /// The application's display name.
    pub fn app_display_name(&self, c: IdentityComponent) -> String {
        format!("{}-{}", self.name, aro_short(c))
    }

    /// A data-plane managed identity's id (`<name>-<component>-dp`).
    pub fn data_plane_identity_id(&self, component: &str) -> String {
        format!(
            "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{}-{component}-dp",
            self.persistent_rg, self.name
        )
    }
}

/// `/subscriptions/{sub}/resourceGroups/{rg}`.
pub fn rg_id(sub: &str, rg: &str) -> String {
    names::resource_group_id(sub, rg)
}

fn parent_rg(id: &str) -> String {
    // /subscriptions/s/resourceGroups/g/providers/...
    id.split('/').take(5).collect::<Vec<_>>().join("/")
}

impl Layout {
    /// Derive the layout of `cfg` with `infra_id`; `simulated` marks runs against the
    /// simulator (their targets are journaled that way).
    pub fn new(cfg: &ClusterConfig, infra_id: &str, simulated: bool) -> Self {
        let (name, sub) = (cfg.name.clone(), cfg.subscription.clone());
        let cloud = match &cfg.cloud {
            crate::config::Cloud::Public => Cloud::Public,
            crate::config::Cloud::UsGovernment => Cloud::UsGovernment,
            crate::config::Cloud::China => Cloud::China,
            crate::config::Cloud::Custom(c) => Cloud::Custom {
                resource_manager: c.resource_manager.clone(),
                authority_host: c.authority_host.clone(),
                storage_suffix: c.storage_suffix.clone(),
                graph: c.graph.clone(),
                key_vault_suffix: c.key_vault_suffix.clone(),
            },
        };
        let auth = match cfg.auth {
            crate::config::AuthMode::Auto => AuthMode::Auto,
            crate::config::AuthMode::WorkloadIdentity => AuthMode::WorkloadIdentity,
            crate::config::AuthMode::ClientSecret => AuthMode::ClientSecret,
            crate::config::AuthMode::ManagedIdentity => AuthMode::ManagedIdentity,
            crate::config::AuthMode::AzureCli => AuthMode::AzureCli,
        };
        let azure = AzureEnv {
            cloud,
            tenant_id: cfg.tenant.clone(),
            auth,
            simulated,
        };
        let mgmt = if simulated {
            MgmtEnv::Simulator
        } else {
            MgmtEnv::Cluster(KubeTarget::Kubeconfig {
                path: cfg.management_cluster.kubeconfig.clone(),
                context: cfg.management_cluster.context.clone(),
            })
        };
        let managed_rg = rg_id(&sub, &names::managed_rg(&name, infra_id));
        let (network_created, vnet_rg, nsg_rg, nsg_id, vnet_id, subnet_id) = match &cfg.network {
            Network::Create(_) => {
                let vnet_rg = rg_id(&sub, &names::vnet_rg(&name, infra_id));
                let nsg_rg = rg_id(&sub, &names::nsg_rg(&name, infra_id));
                let nsg_id = format!(
                    "{nsg_rg}/providers/Microsoft.Network/networkSecurityGroups/{}",
                    names::nsg(&name, infra_id)
                );
                let vnet_id = format!(
                    "{vnet_rg}/providers/Microsoft.Network/virtualNetworks/{}",
                    names::vnet(&name, infra_id)
                );
                let subnet_id = format!("{vnet_id}/subnets/default");
                (true, vnet_rg, nsg_rg, nsg_id, vnet_id, subnet_id)
            }
            Network::Existing(e) => (
                false,
                parent_rg(&e.vnet_id),
                parent_rg(&e.nsg_id),
                e.nsg_id.clone(),
                e.vnet_id.clone(),
                e.subnet_id.clone(),
            ),
        };
        let persistent_rg = rg_id(&sub, &cfg.persistent_resource_group);
        let (storage_account_id, container) = match &cfg.oidc_issuer {
            OidcIssuer::Create(c) => (
                cfg.oidc_storage_account(infra_id).map(|a| {
                    format!("{persistent_rg}/providers/Microsoft.Storage/storageAccounts/{a}")
                }),
                c.container.clone(),
            ),
            OidcIssuer::Existing(_) => (None, String::new()),
        };
        let mc = &cfg.management_cluster;
        let mgmt_sub = mc.subscription.clone().unwrap_or_else(|| sub.clone());
        let mgmt_lb_rg = rg_id(
            &mgmt_sub,
            mc.load_balancer_resource_group
                .as_deref()
                .unwrap_or_default(),
        );
        let mgmt_vnet_id = mc.vnet_id.clone().unwrap_or_default();
        let (nat_subnet_id, nat_subnet_create) = match &mc.nat_subnet {
            NatSubnet::Id(id) => (id.clone(), None),
            NatSubnet::Auto => (
                format!("{mgmt_vnet_id}/subnets/{}", names::pls_nat_subnet(infra_id)),
                Some(None),
            ),
            NatSubnet::Cidr(c) => (
                format!("{mgmt_vnet_id}/subnets/{}", names::pls_nat_subnet(infra_id)),
                Some(Some(c.clone())),
            ),
        };
        let dns_zone_rg = cfg.dns_zone_resource_group.as_ref().map(|g| rg_id(&sub, g));
        let aro = match &cfg.identities {
            Identities::AroHcp(a) => {
                let key_vault = a.key_vault.name.clone().unwrap_or_else(|| {
                    crate::config::derive_key_vault(&sub, &cfg.persistent_resource_group)
                });
                let digest = <sha2::Sha256 as sha2::Digest>::digest(
                    format!("{sub}/{}/{name}", cfg.persistent_resource_group)
                        .to_ascii_lowercase()
                        .as_bytes(),
                );
                let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
                Some(AroLayout {
                    key_vault_id: format!(
                        "{persistent_rg}/providers/Microsoft.KeyVault/vaults/{key_vault}"
                    ),
                    key_vault,
                    key_vault_existing: a.key_vault.existing,
                    validity_months: a.certificate_validity_months.unwrap_or(12),
                    aks_cluster_id: mc.aks_cluster_id.clone().unwrap_or_default(),
                    tenant: cfg.tenant.clone(),
                    hash,
                    name: name.clone(),
                    persistent_rg: persistent_rg.clone(),
                })
            }
            _ => None,
        };
        let pl_zone = names::private_link_dns_zone(&name);
        let infra_zone = names::infra_dns_zone(&name, &cfg.base_domain);
        let endpoint_zones = if cfg.topology.uses_private_link() {
            [
                names::endpoint_hostname("api", &name, &cfg.base_domain),
                names::endpoint_hostname("oauth", &name, &cfg.base_domain),
            ]
            .into_iter()
            .map(|host| {
                let zone_id =
                    format!("{managed_rg}/providers/Microsoft.Network/privateDnsZones/{host}");
                EndpointZone {
                    link_id: format!(
                        "{zone_id}/virtualNetworkLinks/{}",
                        names::endpoint_dns_link(&name, infra_id)
                    ),
                    zone_id,
                    host,
                }
            })
            .collect()
        } else {
            Vec::new()
        };
        Layout {
            endpoint_zones,
            infra_zone_id: format!(
                "{managed_rg}/providers/Microsoft.Network/privateDnsZones/{infra_zone}"
            ),
            infra_link_id: format!(
                "{managed_rg}/providers/Microsoft.Network/privateDnsZones/{infra_zone}/virtualNetworkLinks/{}",
                names::infra_dns_link(&name, infra_id)
            ),
            public_ip_id: format!(
                "{managed_rg}/providers/Microsoft.Network/publicIPAddresses/{}",
                names::egress_public_ip(infra_id)
            ),
            lb_id: format!(
                "{managed_rg}/providers/Microsoft.Network/loadBalancers/{}",
                names::egress_lb(infra_id)
            ),
            pls_id: format!(
                "{mgmt_lb_rg}/providers/Microsoft.Network/privateLinkServices/{}",
                names::pls(infra_id)
            ),
            pe_id: format!(
                "{managed_rg}/providers/Microsoft.Network/privateEndpoints/{}",
                names::private_endpoint(&name, infra_id)
            ),
            pl_zone_id: format!(
                "{managed_rg}/providers/Microsoft.Network/privateDnsZones/{pl_zone}"
            ),
            pl_link_id: format!(
                "{managed_rg}/providers/Microsoft.Network/privateDnsZones/{pl_zone}/virtualNetworkLinks/{}",
                names::private_link_dns_link(&name, infra_id)
            ),
            issuer_url: cfg.oidc_issuer_url(infra_id),
            aro,
            owner: Owner {
                cluster: name.clone(),
                infra_id: infra_id.to_string(),
            },
            mgmt_azure: azure.clone(),
            azure,
            mgmt,
            location: cfg.location.clone(),
            name,
            infra_id: infra_id.to_string(),
            sub,
            dns_zone_rg,
            persistent_rg,
            managed_rg,
            vnet_rg,
            nsg_rg,
            network_created,
            nsg_id,
            vnet_id,
            subnet_id,
            storage_account_id,
            container,
            mgmt_lb_rg,
            mgmt_vnet_id,
            nat_subnet_id,
            nat_subnet_create,
        }
    }

    /// Identity id of a component (`<name>-<component>-<infraID>` in the persistent group).
    pub fn identity_id(&self, c: IdentityComponent) -> String {
        format!(
            "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{}",
            self.persistent_rg,
            names::identity(&self.name, c.name(), &self.infra_id)
        )
    }

    /// Whether identities are created by us.
    pub fn identities_created(cfg: &ClusterConfig) -> bool {
        matches!(cfg.identities, Identities::Create(_))
    }

    /// The resource group id of a role-assignment scope; `None` for [`Scope::Dns`] when the
    /// public zone's group is found at run time.
    pub fn scope_id(&self, s: Scope) -> Option<&str> {
        match s {
            Scope::Managed => Some(&self.managed_rg),
            Scope::Nsg => Some(&self.nsg_rg),
            Scope::Vnet => Some(&self.vnet_rg),
            Scope::Dns => self.dns_zone_rg.as_deref(),
        }
    }

    /// Federated credential name for a service account subject `ns:sa`.
    pub fn fic_name(&self, subject: &str) -> String {
        let sa = subject.rsplit(':').next().unwrap_or(subject);
        names::federated_credential(&self.name, &self.infra_id, sa)
    }

    /// HostedCluster Secret names.
    pub fn secret(&self, what: &str) -> String {
        format!("{}-{what}", self.name)
    }
}
