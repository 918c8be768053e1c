//! HostedCluster and NodePool objects, rendered from typed inputs.
//!
//! The shape follows what HyperShift's own CLI renders (`hypershift create cluster azure`,
//! its `zz_fixture_*` test outputs) with the fields a *self-managed* Azure cluster needs
//! per the `hypershift.openshift.io/v1beta1` CRDs: workload identities
//! (`azureAuthenticationConfigType: WorkloadIdentities`, one client id per component), an
//! explicit `topology`, and for private topologies `private.type: PrivateLink` with the
//! NAT subnet. The tests validate both renderings against the real CRD schemas.
//!
//! Where DOMAIN.md and the CRD disagree, the CRD wins:
//! - the workload identity fields are camelCase component names
//!   ([`WORKLOAD_IDENTITY_FIELDS`]: `node-pool-mgmt` is `nodePoolManagement`, ...), each
//!   `{clientID}`, under `azureAuthenticationConfig.workloadIdentities`, next to
//!   `azureAuthenticationConfigType: WorkloadIdentities` (required);
//! - `private` needs `type: PrivateLink` beside `privateLink.natSubnetID`, and must be
//!   absent for topology `Public`;
//! - `privateLink` needs at least one property, so a private topology needs a NAT subnet
//!   or extra allowed subscriptions ([`HostedClusterInput::validate`]).
//!
//! Rendering is infallible (the steps journal the input, not the object); call
//! [`HostedClusterInput::validate`] / [`NodePoolInput::validate`] to catch the CEL rules
//! the API server would enforce (and which schema validation alone does not) before
//! applying.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// API version of HostedCluster and NodePool.
pub const HYPERSHIFT_API_VERSION: &str = "hypershift.openshift.io/v1beta1";

/// Key of the pull secret in its Secret (`kubernetes.io/dockerconfigjson` layout).
pub const PULL_SECRET_KEY: &str = ".dockerconfigjson";
/// Key of the SSH public key in its Secret.
pub const SSH_KEY_KEY: &str = "id_rsa.pub";
/// Key of the 32-byte etcd encryption key in its Secret (aescbc).
pub const ETCD_KEY_KEY: &str = "key";
/// Key of the service-account signing key (PKCS#1 PEM) in its Secret
/// (HyperShift's `ServiceAccountSigningKeySecretKey`).
pub const SA_SIGNING_KEY_KEY: &str = "key";
/// Label HyperShift's CLI puts on the Secrets it creates for a cluster.
pub const SAFE_TO_DELETE_LABEL: &str = "hypershift.openshift.io/safe-to-delete-with-cluster";

/// DOMAIN.md §4 component → CRD field under `workloadIdentities`.
pub const WORKLOAD_IDENTITY_FIELDS: [(&str, &str); 8] = [
    ("disk", "disk"),
    ("file", "file"),
    ("image-registry", "imageRegistry"),
    ("ingress", "ingress"),
    ("cloud-provider", "cloudProvider"),
    ("node-pool-mgmt", "nodePoolManagement"),
    ("network", "network"),
    ("control-plane-operator", "controlPlaneOperator"),
];

/// HyperShift's `AzureResourceManagedIdentities` (release-4.22
/// `api/hypershift/v1beta1/azure.go`): the control-plane components' Entra applications
/// with their credentials secrets in a Key Vault, and the data-plane managed identities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedIdentitiesInput {
    /// `controlPlane.managedIdentitiesKeyVault.name`.
    pub key_vault_name: String,
    /// `controlPlane.managedIdentitiesKeyVault.tenantID`.
    pub key_vault_tenant_id: String,
    /// DOMAIN.md §4 component → its `ManagedIdentity`.
    pub control_plane: BTreeMap<String, ManagedIdentityInput>,
    /// `dataPlane.imageRegistryMSIClientID`.
    pub image_registry_msi_client_id: String,
    /// `dataPlane.diskMSIClientID`.
    pub disk_msi_client_id: String,
    /// `dataPlane.fileMSIClientID`.
    pub file_msi_client_id: String,
}

/// HyperShift's `ManagedIdentity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedIdentityInput {
    /// `clientID`: the application's client id (filled at run time).
    pub client_id: String,
    /// `credentialsSecretName`: the Key Vault secret with msi-dataplane's credentials JSON
    /// (1–127 of `[a-zA-Z0-9-]`).
    pub credentials_secret_name: String,
    /// `objectEncoding`: `utf-8`, `hex` or `base64`.
    pub object_encoding: String,
}

/// Values of `spec.platform.azure.cloud` the 4.22 CRD accepts (`release-4.22`
/// `api/hypershift/v1beta1/azure.go`: `AzureBleuCloud` is only on `main`).
pub const AZURE_CLOUDS: [&str; 5] = [
    "AzurePublicCloud",
    "AzureUSGovernmentCloud",
    "AzureChinaCloud",
    "AzureGermanCloud",
    "AzureStackCloud",
];

/// Default worker VM size (DOMAIN.md §4).
pub const DEFAULT_VM_SIZE: &str = "Standard_D4s_v5";

/// API server endpoint topology (`spec.platform.azure.topology`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Topology {
    /// Public endpoint only.
    Public,
    /// Public and private (Private Link) endpoints.
    PublicAndPrivate,
    /// Private (Private Link) endpoint only.
    Private,
}

impl Topology {
    /// The CRD value.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Public => "Public",
            Topology::PublicAndPrivate => "PublicAndPrivate",
            Topology::Private => "Private",
        }
    }

    /// Whether a private endpoint is part of it.
    pub fn is_private(self) -> bool {
        !matches!(self, Topology::Public)
    }
}

/// A problem with a rendering input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// A component of DOMAIN.md §4 has no client id.
    #[error("no workload identity client id for component {0:?}")]
    MissingWorkloadIdentity(String),
    /// A client id key is not one of the 8 components.
    #[error(
        "unknown workload identity component {0:?} (expected one of disk, file, image-registry, ingress, cloud-provider, node-pool-mgmt, network, control-plane-operator)"
    )]
    UnknownComponent(String),
    /// A field breaks a rule the CRD (or its CEL validations) enforces.
    #[error("{field}: {message}")]
    Invalid {
        /// Input field name.
        field: &'static str,
        /// The rule.
        message: String,
    },
}

impl From<RenderError> for hcp_runtime::StepError {
    fn from(e: RenderError) -> Self {
        hcp_runtime::StepError::permanent(hcp_runtime::error::kind::VALIDATION, e.to_string())
    }
}

/// Everything a HostedCluster is rendered from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedClusterInput {
    /// Cluster name (`metadata.name`).
    pub name: String,
    /// Namespace of the HostedCluster (e.g. `clusters`).
    pub namespace: String,
    /// Infra id (`spec.infraID`).
    pub infra_id: String,
    /// OpenShift release image.
    pub release_image: String,
    /// Base domain (`spec.dns.baseDomain`).
    pub base_domain: String,
    /// Service-account issuer URL (`spec.issuerURL`).
    pub issuer_url: String,
    /// Azure region.
    pub location: String,
    /// Guest subscription.
    pub subscription_id: String,
    /// Entra tenant.
    pub tenant_id: String,
    /// Managed resource group *name* (`<name>-<infraID>`).
    pub resource_group: String,
    /// VNet ARM id.
    pub vnet_id: String,
    /// Worker subnet ARM id.
    pub subnet_id: String,
    /// NSG ARM id.
    pub nsg_id: String,
    /// Endpoint topology.
    pub topology: Topology,
    /// Azure cloud (`spec.platform.azure.cloud`: `AzurePublicCloud`,
    /// `AzureUSGovernmentCloud`, `AzureChinaCloud`, ...); `None` leaves the CRD default
    /// (`AzurePublicCloud`).
    #[serde(default)]
    pub cloud: Option<String>,
    /// Run control-plane components highly available (`HighlyAvailable`); false renders
    /// `SingleReplica` as HyperShift's CLI does. Immutable once the cluster exists.
    #[serde(default)]
    pub highly_available: bool,
    /// `spec.infrastructureAvailabilityPolicy: HighlyAvailable` (else SingleReplica).
    #[serde(default)]
    pub infrastructure_highly_available: bool,
    /// `spec.fips`.
    #[serde(default)]
    pub fips: bool,
    /// etcd volume storage class (`None`: the management cluster's default).
    #[serde(default)]
    pub etcd_storage_class: Option<String>,
    /// etcd volume size (`None`: 8Gi).
    #[serde(default)]
    pub etcd_size: Option<String>,
    /// `spec.imageContentSources`: (source, mirrors).
    #[serde(default)]
    pub image_content_sources: Vec<(String, Vec<String>)>,
    /// Azure KMS (`spec.secretEncryption` type kms): vault, key, version and the Key
    /// Vault secret of its credentials; `None`: aescbc with the etcd key Secret.
    #[serde(default)]
    pub kms: Option<KmsInput>,
    /// `operatorConfiguration.clusterNetworkOperator.ovnKubernetesConfig.mtu`.
    #[serde(default)]
    pub ovn_kubernetes_mtu: Option<i64>,
    /// `operatorConfiguration.clusterNetworkOperator.disableMultiNetwork`.
    #[serde(default)]
    pub disable_multi_network: bool,
    /// `spec.nodeSelector` of the control-plane pods.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// `spec.tolerations` (Kubernetes tolerations, as JSON).
    #[serde(default)]
    pub tolerations: Vec<Value>,
    /// `spec.labels` (labels on the control-plane pods).
    #[serde(default)]
    pub pod_labels: BTreeMap<String, String>,
    /// The user's labels on the HostedCluster object (ours are merged over them).
    #[serde(default)]
    pub user_labels: BTreeMap<String, String>,
    /// Annotations on the HostedCluster object.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// `spec.kubeAPIServerDNSName`.
    #[serde(default)]
    pub kube_api_server_dns_name: Option<String>,
    /// `spec.configuration.featureGate.featureSet`.
    #[serde(default)]
    pub feature_set: Option<String>,
    /// `spec.capabilities.enabled`.
    #[serde(default)]
    pub capabilities_enabled: Vec<String>,
    /// `spec.capabilities.disabled`.
    #[serde(default)]
    pub capabilities_disabled: Vec<String>,
    /// Annotation `hypershift.openshift.io/control-plane-operator-image`.
    #[serde(default)]
    pub control_plane_operator_image: Option<String>,
    /// DOMAIN.md §4 component (`disk`, `node-pool-mgmt`, ...) → identity client id.
    #[serde(default)]
    pub workload_identities: BTreeMap<String, String>,
    /// The ARO HCP model (`azureAuthenticationConfigType: ManagedIdentities`) instead of
    /// workload identities; `workload_identities` is then unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_identities: Option<ManagedIdentitiesInput>,
    /// NAT subnet of the Private Link Service (private topologies).
    #[serde(default)]
    pub nat_subnet_id: Option<String>,
    /// Extra subscriptions allowed to connect private endpoints (private topologies).
    #[serde(default)]
    pub additional_allowed_subscriptions: Vec<String>,
    /// Private DNS zone id for the cluster (`spec.dns.privateZoneID`), if any.
    #[serde(default)]
    pub private_zone_id: Option<String>,
    /// Public DNS zone id (`spec.dns.publicZoneID`), if any.
    #[serde(default)]
    pub public_zone_id: Option<String>,
    /// Secret holding the pull secret (key [`PULL_SECRET_KEY`]).
    pub pull_secret_name: String,
    /// Secret holding the SSH public key (key [`SSH_KEY_KEY`]), if any.
    #[serde(default)]
    pub ssh_key_secret_name: Option<String>,
    /// Secret holding the etcd encryption key (key [`ETCD_KEY_KEY`]).
    pub etcd_key_secret_name: String,
    /// Secret holding the service-account signing key (key [`SA_SIGNING_KEY_KEY`]).
    pub sa_signing_key_secret_name: String,
    /// Labels (our ownership labels).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Pod network (`spec.networking.clusterNetwork`); `None`: HyperShift's default
    /// `10.132.0.0/14` (also for runs journaled before it was configurable).
    #[serde(default)]
    pub cluster_network: Option<String>,
    /// Service network (`spec.networking.serviceNetwork`); `None`: `172.31.0.0/16`.
    #[serde(default)]
    pub service_network: Option<String>,
    /// Node network (`spec.networking.machineNetwork`), rendered when known so HyperShift's
    /// overlap check (`hostedcluster_controller.go` `validateNetworks`) runs too.
    #[serde(default)]
    pub machine_network: Option<String>,
}

/// Worker image (`spec.platform.azure.image`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodePoolImage {
    /// A managed image / gallery image version ARM id (`type: ImageID`).
    ImageId(String),
    /// An Azure Marketplace image (`type: AzureMarketplace`).
    Marketplace {
        /// Publisher (`^[a-z0-9][a-z0-9-_]{2,49}$`).
        publisher: String,
        /// Offer.
        offer: String,
        /// SKU (`^[a-z0-9-_]+$`).
        sku: String,
        /// Version (`x.y.z` or `latest`).
        version: String,
    },
    /// An Azure Marketplace image left for HyperShift to fill from the release payload
    /// (OpenShift 4.20 and newer): rendered `type: AzureMarketplace` with only
    /// `azureMarketplace.imageGeneration`, which the CRD accepts ("must specify
    /// imageGeneration or must specify publisher, offer, sku and version") and the NodePool
    /// controller completes (openshift/hypershift
    /// `hypershift-operator/controllers/nodepool/azure.go` `defaultAzureNodePoolImage`).
    FromRelease {
        /// `Gen1` or `Gen2` (HyperShift's default).
        image_generation: String,
    },
}

/// Everything a NodePool is rendered from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePoolInput {
    /// NodePool name.
    pub name: String,
    /// Namespace (the HostedCluster's).
    pub namespace: String,
    /// HostedCluster name (`spec.clusterName`).
    pub cluster_name: String,
    /// Node count (ignored with `auto_scaling`).
    pub replicas: i32,
    /// `spec.autoScaling` `(min, max)` instead of `spec.replicas` (the CRD refuses both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scaling: Option<(i32, i32)>,
    /// OpenShift release image.
    pub release_image: String,
    /// VM size ([`DEFAULT_VM_SIZE`] when empty).
    #[serde(default)]
    pub vm_size: String,
    /// Boot image.
    pub image: NodePoolImage,
    /// OS disk size (CRD: 16–32767).
    pub os_disk_size_gib: i32,
    /// Worker subnet ARM id.
    pub subnet_id: String,
    /// Availability zone `1`, `2` or `3`.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// Labels (our ownership labels).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeDrainTimeout` (a Go duration such as `1800s`); `None`: not rendered
    /// (drain until done, HyperShift's default).
    #[serde(default)]
    pub node_drain_timeout: Option<String>,
    /// `spec.nodeVolumeDetachTimeout` (a Go duration).
    #[serde(default)]
    pub node_volume_detach_timeout: Option<String>,
    /// `spec.arch` (`amd64`, `arm64`); `None`: amd64.
    #[serde(default)]
    pub arch: Option<String>,
    /// `spec.management.upgradeType` (`Replace`, `InPlace`); `None`: Replace.
    #[serde(default)]
    pub upgrade_type: Option<String>,
    /// `platform.azure.encryptionAtHost` (`Enabled`, `Disabled`); `None`: the CRD default.
    #[serde(default)]
    pub encryption_at_host: Option<String>,
    /// `platform.azure.osDisk.encryptionSetID`.
    #[serde(default)]
    pub disk_encryption_set_id: Option<String>,
    /// `platform.azure.osDisk.diskStorageAccountType`; `None`: Premium_LRS.
    #[serde(default)]
    pub os_disk_storage_account_type: Option<String>,
    /// `spec.management.autoRepair`.
    #[serde(default)]
    pub auto_repair: bool,
    /// `platform.azure.osDisk.persistence: Ephemeral`.
    #[serde(default)]
    pub ephemeral_os_disk: bool,
    /// `platform.azure.diagnostics`: (storageAccountType, storageAccountURI).
    #[serde(default)]
    pub diagnostics: Option<(String, Option<String>)>,
}

fn invalid(field: &'static str, message: impl Into<String>) -> RenderError {
    RenderError::Invalid {
        field,
        message: message.into(),
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` (infraID's CEL rule; also a DNS label).
fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(ok)
        && b.last().is_some_and(ok)
        && b.iter().all(|c| ok(c) || *c == b'-')
}

/// 8-4-4-4-12 hexadecimal (the client id / subscription pattern).
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// `/subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{v}/subnets/{n}`.
fn is_subnet_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() == 11
        && parts[0].is_empty()
        && parts[1] == "subscriptions"
        && parts[3] == "resourceGroups"
        && parts[5] == "providers"
        && parts[6] == "Microsoft.Network"
        && parts[7] == "virtualNetworks"
        && parts[9] == "subnets"
        && parts.iter().skip(1).all(|p| !p.is_empty())
}

/// HyperShift's default pod network (`support/globalconfig` `DefaultIPv4ClusterCIDR`).
pub const DEFAULT_CLUSTER_NETWORK: &str = "10.132.0.0/14";
/// HyperShift's default service network (`DefaultIPv4ServiceCIDR`).
pub const DEFAULT_SERVICE_NETWORK: &str = "172.31.0.0/16";

impl HostedClusterInput {
    /// Checks the rules the API server would enforce (schema patterns, CEL rules) so a
    /// bad input fails before anything is applied.
    ///
    /// # Errors
    /// The first problem found.
    pub fn validate(&self) -> Result<(), RenderError> {
        if !is_dns_label(&self.name) {
            return Err(invalid("name", "must be a DNS label ([a-z0-9-], ≤ 63)"));
        }
        if !is_dns_label(&self.infra_id) {
            return Err(invalid(
                "infra_id",
                "must match ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            ));
        }
        if self.release_image.is_empty() {
            return Err(invalid("release_image", "must not be empty"));
        }
        if !(self.issuer_url.starts_with("https://") || self.issuer_url.starts_with("http://")) {
            return Err(invalid("issuer_url", "must be a URL"));
        }
        if !is_subnet_id(&self.subnet_id) {
            return Err(invalid("subnet_id", "must be a subnet ARM id"));
        }
        if let Some(mi) = &self.managed_identities {
            mi.validate()?;
        }
        for (component, _) in WORKLOAD_IDENTITY_FIELDS {
            if self.managed_identities.is_some() {
                break;
            }
            match self.workload_identities.get(component) {
                None => return Err(RenderError::MissingWorkloadIdentity(component.into())),
                Some(id) if !is_uuid(id) => {
                    return Err(invalid(
                        "workload_identities",
                        format!("client id of {component} is not a UUID: {id:?}"),
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(unknown) = self
            .workload_identities
            .keys()
            .find(|k| !WORKLOAD_IDENTITY_FIELDS.iter().any(|(c, _)| c == k))
        {
            return Err(RenderError::UnknownComponent(unknown.clone()));
        }
        if let Some(cloud) = &self.cloud
            && !AZURE_CLOUDS.contains(&cloud.as_str())
        {
            return Err(invalid(
                "cloud",
                format!("{cloud:?} is not one of {}", AZURE_CLOUDS.join(", ")),
            ));
        }
        if self.topology.is_private() {
            if self.nat_subnet_id.is_none() && self.additional_allowed_subscriptions.is_empty() {
                return Err(invalid(
                    "nat_subnet_id",
                    "a private topology needs the NAT subnet of the Private Link Service (privateLink must not be empty)",
                ));
            }
            if let Some(nat) = &self.nat_subnet_id
                && !is_subnet_id(nat)
            {
                return Err(invalid("nat_subnet_id", "must be a subnet ARM id"));
            }
            if let Some(bad) = self
                .additional_allowed_subscriptions
                .iter()
                .find(|s| !is_uuid(s))
            {
                return Err(invalid(
                    "additional_allowed_subscriptions",
                    format!("{bad:?} is not a subscription UUID"),
                ));
            }
        }
        Ok(())
    }
}

impl NodePoolInput {
    /// Checks the rules the API server would enforce.
    ///
    /// # Errors
    /// The first problem found.
    pub fn validate(&self) -> Result<(), RenderError> {
        if !is_dns_label(&self.name) {
            return Err(invalid("name", "must be a DNS label ([a-z0-9-], ≤ 63)"));
        }
        if self.replicas < 0 {
            return Err(invalid("replicas", "must be ≥ 0"));
        }
        if !(16..=32767).contains(&self.os_disk_size_gib) {
            return Err(invalid("os_disk_size_gib", "must be 16–32767"));
        }
        if !is_subnet_id(&self.subnet_id) {
            return Err(invalid("subnet_id", "must be a subnet ARM id"));
        }
        // The CRD checks the subscription segment of a NodePool subnet id is a UUID.
        if self.subnet_id.split('/').nth(2).is_none_or(|s| !is_uuid(s)) {
            return Err(invalid("subnet_id", "subscription segment must be a UUID"));
        }
        if let Some(z) = &self.availability_zone
            && !["1", "2", "3"].contains(&z.as_str())
        {
            return Err(invalid("availability_zone", "must be 1, 2 or 3"));
        }
        if self.release_image.is_empty() || self.release_image.contains(char::is_whitespace) {
            return Err(invalid(
                "release_image",
                "must be a non-empty image reference",
            ));
        }
        Ok(())
    }
}

fn metadata(name: &str, namespace: &str, labels: &BTreeMap<String, String>) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    m.insert("namespace".into(), json!(namespace));
    if !labels.is_empty() {
        m.insert("labels".into(), json!(labels));
    }
    Value::Object(m)
}

/// Azure KMS for etcd, as `hypershift create cluster azure --encryption-key-id
/// --kms-credentials-secret-name` renders it (`cmd/cluster/azure/create.go`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KmsInput {
    /// Key Vault name.
    pub vault: String,
    /// Key name.
    pub key: String,
    /// Key version.
    pub version: String,
    /// Key Vault secret with the KMS identity's credentials.
    pub credentials_secret_name: String,
}

/// The hostnames whose A records hcp-workflow writes in the base domain's public zone:
/// a PublicAndPrivate cluster's API server and OAuth (at its public `router`), or a public
/// ARO HCP cluster's four Routes (at the management cluster's shared ingress router).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicHostnames {
    /// `api-<name>.<baseDomain>`.
    pub api: String,
    /// Every hostname, the API server's first.
    pub all: Vec<String>,
    /// Served by the management cluster's shared ingress (`hypershift-sharedingress/router`)
    /// rather than the cluster's own public router.
    pub shared_ingress: bool,
}

impl PublicHostnames {
    /// The records' names relative to the zone `base_domain` (`api-<name>`, `oauth-<name>`, …).
    pub fn relative(&self, base_domain: &str) -> Vec<String> {
        self.all
            .iter()
            .map(|h| {
                h.strip_suffix(&format!(".{base_domain}"))
                    .unwrap_or(h)
                    .to_string()
            })
            .collect()
    }
}

/// The public hostnames for `topology` ([`PublicHostnames`]): PublicAndPrivate's two, a
/// Public `ManagedIdentities` cluster's four ([`endpoint_hostnames`]), none otherwise.
pub fn public_hostnames(
    name: &str,
    base_domain: &str,
    topology: Topology,
    managed_identities: bool,
) -> Option<PublicHostnames> {
    if topology == Topology::Private {
        return None;
    }
    let h = endpoint_hostnames(name, base_domain, topology, managed_identities)?;
    Some(PublicHostnames {
        api: h.api.clone(),
        all: h.all().into_iter().map(str::to_string).collect(),
        shared_ingress: topology == Topology::Public,
    })
}

/// The hostnames the control plane's Routes are published under, named as
/// `hypershift create cluster azure --external-dns-domain` names them
/// (`cmd/cluster/azure/create.go`: `api-%s.%s`, `oauth-%s.%s`, `konnectivity-%s.%s`,
/// `ignition-%s.%s`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointHostnames {
    /// `api-<name>.<baseDomain>`.
    pub api: String,
    /// `oauth-<name>.<baseDomain>`.
    pub oauth: String,
    /// `konnectivity-<name>.<baseDomain>` (shared ingress only).
    pub konnectivity: Option<String>,
    /// `ignition-<name>.<baseDomain>` (shared ingress only).
    pub ignition: Option<String>,
}

impl EndpointHostnames {
    /// Every hostname, API server first.
    pub fn all(&self) -> Vec<&str> {
        let mut v = vec![self.api.as_str(), self.oauth.as_str()];
        v.extend(self.konnectivity.as_deref());
        v.extend(self.ignition.as_deref());
        v
    }

    /// The hostname of `service` (`APIServer`, `OAuthServer`, `Konnectivity`, `Ignition`).
    pub fn of(&self, service: &str) -> Option<&str> {
        match service {
            "APIServer" => Some(&self.api),
            "OAuthServer" => Some(&self.oauth),
            "Konnectivity" => self.konnectivity.as_deref(),
            "Ignition" => self.ignition.as_deref(),
            _ => None,
        }
    }
}

/// Which Routes get hostnames, from HyperShift's code:
/// - **Private and PublicAndPrivate**: the API server and OAuth. A 4.22 control-plane
///   operator cannot publish a Route API server without a hostname: `kas/service.go`
///   `ReconcileServiceStatus` reads `strategy.Route.Hostname` with no nil check, a panic on
///   every reconcile (only `main`, commit `30d61dfa07`, falls back to the router's
///   address); HyperShift's own private link writes `api-<name>` and `oauth-<name>` at the
///   private endpoint in a zone the guest VNet resolves
///   (`controllers/azureprivatelinkservice/controller.go` `reconcileBaseDomainDNS`).
///   Konnectivity and Ignition stay hostname-less: the private router serves them under
///   `*.apps.<name>.hypershift.local`.
/// - **Public with `ManagedIdentities`** (ARO HCP): HyperShift serves it through the
///   management cluster's shared ingress (`support/util/visibility.go`
///   `UseSharedIngressHCP`), which routes by hostname: the API host is the API Route's
///   hostname (`sharedingress.KasRouteHostname`) and, on AKS, a hostname-less Route gets no
///   host at all, so all four are Routes with hostnames, as HyperShift's AKS path renders
///   them (`contrib/managed-azure/create_basic_hosted_cluster.sh --external-dns-domain`).
/// - **Public with workload identities**: none (a LoadBalancer API server).
pub fn endpoint_hostnames(
    name: &str,
    base_domain: &str,
    topology: Topology,
    managed_identities: bool,
) -> Option<EndpointHostnames> {
    let host = |prefix: &str| crate::azure::names::endpoint_hostname(prefix, name, base_domain);
    if topology.is_private() {
        return Some(EndpointHostnames {
            api: host("api"),
            oauth: host("oauth"),
            konnectivity: None,
            ignition: None,
        });
    }
    managed_identities.then(|| EndpointHostnames {
        api: host("api"),
        oauth: host("oauth"),
        konnectivity: Some(host("konnectivity")),
        ignition: Some(host("ignition")),
    })
}

impl ManagedIdentitiesInput {
    /// The CRD's rules: all 8 components, UUID client ids, secret names of
    /// `^[a-zA-Z0-9-]{1,127}$`, an encoding of `utf-8|hex|base64`, UUID data-plane ids.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate(&self) -> Result<(), RenderError> {
        let invalid = |message: String| RenderError::Invalid {
            field: "managed_identities",
            message,
        };
        for (component, _) in WORKLOAD_IDENTITY_FIELDS {
            let Some(m) = self.control_plane.get(component) else {
                return Err(RenderError::MissingWorkloadIdentity(component.into()));
            };
            if !is_uuid(&m.client_id) {
                return Err(invalid(format!(
                    "client id of {component} is not a UUID: {:?}",
                    m.client_id
                )));
            }
            let n = &m.credentials_secret_name;
            if n.is_empty()
                || n.len() > 127
                || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                return Err(invalid(format!(
                    "credentialsSecretName of {component} must match ^[a-zA-Z0-9-]{{1,127}}$: {n:?}"
                )));
            }
            if !["utf-8", "hex", "base64"].contains(&m.object_encoding.as_str()) {
                return Err(invalid(format!(
                    "objectEncoding of {component} must be utf-8, hex or base64: {:?}",
                    m.object_encoding
                )));
            }
        }
        if let Some(unknown) = self
            .control_plane
            .keys()
            .find(|k| !WORKLOAD_IDENTITY_FIELDS.iter().any(|(c, _)| c == k))
        {
            return Err(RenderError::UnknownComponent(unknown.clone()));
        }
        for (what, id) in [
            (
                "imageRegistryMSIClientID",
                &self.image_registry_msi_client_id,
            ),
            ("diskMSIClientID", &self.disk_msi_client_id),
            ("fileMSIClientID", &self.file_msi_client_id),
        ] {
            if !is_uuid(id) {
                return Err(invalid(format!("dataPlane.{what} is not a UUID: {id:?}")));
            }
        }
        if self.key_vault_name.is_empty() || !is_uuid(&self.key_vault_tenant_id) {
            return Err(invalid(
                "managedIdentitiesKeyVault needs a name and a UUID tenantID".into(),
            ));
        }
        Ok(())
    }

    /// `spec.platform.azure.azureAuthenticationConfig.managedIdentities`.
    pub fn render(&self) -> Value {
        let mut control_plane = Map::new();
        control_plane.insert(
            "managedIdentitiesKeyVault".into(),
            json!({"name": self.key_vault_name, "tenantID": self.key_vault_tenant_id}),
        );
        for (component, field) in WORKLOAD_IDENTITY_FIELDS {
            if let Some(m) = self.control_plane.get(component) {
                control_plane.insert(
                    field.to_string(),
                    json!({
                        "clientID": m.client_id,
                        "credentialsSecretName": m.credentials_secret_name,
                        "objectEncoding": m.object_encoding,
                    }),
                );
            }
        }
        json!({
            "controlPlane": control_plane,
            "dataPlane": {
                "imageRegistryMSIClientID": self.image_registry_msi_client_id,
                "diskMSIClientID": self.disk_msi_client_id,
                "fileMSIClientID": self.file_msi_client_id,
            },
        })
    }
}

/// The HostedCluster for `input` (see the module docs for the shape and
/// [`HostedClusterInput::validate`] for the rules it assumes).
///
/// Defaults follow HyperShift's CLI: `SingleReplica` controllers (unless
/// `highly_available`), managed etcd on an 8 GiB
/// volume, OVN-Kubernetes with the default cluster/service networks, aescbc secret
/// encryption with the etcd key Secret, OLM catalogs on the management cluster, the
/// APIServer published by a LoadBalancer (Public) or a Route (Private; PublicAndPrivate
/// with public hostnames for it and OAuth), and Ignition, Konnectivity and OAuthServer by
/// Route.
pub fn hosted_cluster(input: &HostedClusterInput) -> Value {
    let identities: Map<String, Value> = WORKLOAD_IDENTITY_FIELDS
        .iter()
        .filter_map(|(component, field)| {
            input
                .workload_identities
                .get(*component)
                .map(|id| (field.to_string(), json!({ "clientID": id })))
        })
        .collect();
    let auth = match &input.managed_identities {
        Some(mi) => json!({
            "azureAuthenticationConfigType": "ManagedIdentities",
            "managedIdentities": mi.render(),
        }),
        None => json!({
            "azureAuthenticationConfigType": "WorkloadIdentities",
            "workloadIdentities": identities,
        }),
    };
    let mut azure = json!({
        "azureAuthenticationConfig": auth,
        "location": input.location,
        "resourceGroup": input.resource_group,
        "vnetID": input.vnet_id,
        "subnetID": input.subnet_id,
        "securityGroupID": input.nsg_id,
        "subscriptionID": input.subscription_id,
        "tenantID": input.tenant_id,
        "topology": input.topology.as_str(),
    });
    if let Some(cloud) = &input.cloud {
        azure["cloud"] = json!(cloud);
    }
    if input.topology.is_private() {
        let mut private_link = Map::new();
        if let Some(nat) = &input.nat_subnet_id {
            private_link.insert("natSubnetID".into(), json!(nat));
        }
        if !input.additional_allowed_subscriptions.is_empty() {
            private_link.insert(
                "additionalAllowedSubscriptions".into(),
                json!(input.additional_allowed_subscriptions),
            );
        }
        azure["private"] = json!({"type": "PrivateLink", "privateLink": private_link});
    }
    let mut dns = json!({"baseDomain": input.base_domain});
    if let Some(z) = &input.private_zone_id {
        dns["privateZoneID"] = json!(z);
    }
    if let Some(z) = &input.public_zone_id {
        dns["publicZoneID"] = json!(z);
    }
    // How the API server is published decides whether nodes can reach it:
    // - Public: a LoadBalancer, as HyperShift's CLI renders without external DNS
    //   (`cmd/cluster/core/create.go` `GetIngressServicePublishingStrategyMapping`).
    // - Private and PublicAndPrivate: nodes dial `api.<name>.hypershift.local`, on 443 for
    //   a Route KAS and 6443 for a LoadBalancer one (`support/util/networking.go`
    //   `APIPortForLocalZone`), through the private endpoint; on Azure the Private Link
    //   Service fronts only the `private-router` (443), which reaches the API server only
    //   through the `kube-apiserver-internal` Route a Route KAS gets
    //   (`control-plane-operator/controllers/hostedcontrolplane/infra/infra.go`
    //   `reconcileAPIServerService`). So both private topologies publish it by Route.
    // - PublicAndPrivate's public side: a Route needs a hostname there ("route hostname is
    //   required for service APIServer", `kas/service.go`). As `create cluster azure
    //   --external-dns-domain` does (`cmd/cluster/azure/create.go`), the API server and
    //   OAuth get `api-<name>.<domain>` / `oauth-<name>.<domain>`; the hostname makes the
    //   CPO create the public `router` Service (`infra.go` `reconcileHCPRouterServices`,
    //   `support/util/visibility.go` `LabelHCPRoutes`), and hcp-workflow writes the two A
    //   records in the base domain's public zone (there is no external-dns here).
    //   Konnectivity and Ignition stay hostname-less Routes on the private router.
    // - Every Route that needs a hostname gets one ([`endpoint_hostnames`]).
    let hostnames = endpoint_hostnames(
        &input.name,
        &input.base_domain,
        input.topology,
        input.managed_identities.is_some(),
    );
    let api_server = if hostnames.is_some() {
        "Route"
    } else {
        "LoadBalancer"
    };
    let service = |name: &str, kind: &str| {
        let mut s = json!({"service": name, "servicePublishingStrategy": {"type": kind}});
        if let Some(host) = hostnames.as_ref().and_then(|h| h.of(name)) {
            s["servicePublishingStrategy"]["route"] = json!({"hostname": host});
        }
        s
    };
    let mut networking = json!({
        "clusterNetwork": [{"cidr": input.cluster_network.as_deref().unwrap_or(DEFAULT_CLUSTER_NETWORK)}],
        "networkType": "OVNKubernetes",
        "serviceNetwork": [{"cidr": input.service_network.as_deref().unwrap_or(DEFAULT_SERVICE_NETWORK)}],
    });
    if let Some(m) = &input.machine_network {
        networking["machineNetwork"] = json!([{"cidr": m}]);
    }
    let mut pv = json!({"size": input.etcd_size.as_deref().unwrap_or("8Gi")});
    if let Some(class) = &input.etcd_storage_class {
        pv["storageClassName"] = json!(class);
    }
    let policy = |ha: bool| {
        if ha {
            "HighlyAvailable"
        } else {
            "SingleReplica"
        }
    };
    let mut spec = json!({
        "controllerAvailabilityPolicy": policy(input.highly_available),
        "infrastructureAvailabilityPolicy": policy(input.infrastructure_highly_available),
        "dns": dns,
        "etcd": {
            "managementType": "Managed",
            "managed": {"storage": {"type": "PersistentVolume", "persistentVolume": pv}},
        },
        "fips": input.fips,
        "infraID": input.infra_id,
        "issuerURL": input.issuer_url,
        "networking": networking,
        "olmCatalogPlacement": "management",
        "platform": {"type": "Azure", "azure": azure},
        "pullSecret": {"name": input.pull_secret_name},
        "release": {"image": input.release_image},
        "secretEncryption": match &input.kms {
            None => json!({"type": "aescbc", "aescbc": {"activeKey": {"name": input.etcd_key_secret_name}}}),
            Some(k) => json!({"type": "kms", "kms": {"provider": "Azure", "azure": {
                "activeKey": {"keyVaultName": k.vault, "keyName": k.key, "keyVersion": k.version},
                // `cmd/cluster/azure/create.go` `ObjectEncoding`.
                "kms": {"credentialsSecretName": k.credentials_secret_name, "objectEncoding": "utf-8"},
            }}}),
        },
        "serviceAccountSigningKey": {"name": input.sa_signing_key_secret_name},
        "services": [
            service("APIServer", api_server),
            service("Ignition", "Route"),
            service("Konnectivity", "Route"),
            service("OAuthServer", "Route"),
        ],
    });
    if let Some(ssh) = &input.ssh_key_secret_name {
        spec["sshKey"] = json!({"name": ssh});
    }
    if input.disable_multi_network || input.ovn_kubernetes_mtu.is_some() {
        // As `cmd/cluster/core/create.go` sets them.
        let mut cno = Map::new();
        if input.disable_multi_network {
            cno.insert("disableMultiNetwork".into(), json!(true));
        }
        if let Some(mtu) = input.ovn_kubernetes_mtu {
            cno.insert("ovnKubernetesConfig".into(), json!({"mtu": mtu}));
        }
        spec["operatorConfiguration"] = json!({"clusterNetworkOperator": cno});
    }
    if !input.node_selector.is_empty() {
        spec["nodeSelector"] = json!(input.node_selector);
    }
    if !input.tolerations.is_empty() {
        spec["tolerations"] = json!(input.tolerations);
    }
    if !input.pod_labels.is_empty() {
        spec["labels"] = json!(input.pod_labels);
    }
    if let Some(n) = &input.kube_api_server_dns_name {
        spec["kubeAPIServerDNSName"] = json!(n);
    }
    if let Some(f) = &input.feature_set {
        spec["configuration"] = json!({"featureGate": {"featureSet": f}});
    }
    if !input.capabilities_enabled.is_empty() || !input.capabilities_disabled.is_empty() {
        let mut caps = Map::new();
        if !input.capabilities_enabled.is_empty() {
            caps.insert("enabled".into(), json!(input.capabilities_enabled));
        }
        if !input.capabilities_disabled.is_empty() {
            caps.insert("disabled".into(), json!(input.capabilities_disabled));
        }
        spec["capabilities"] = Value::Object(caps);
    }
    if !input.image_content_sources.is_empty() {
        spec["imageContentSources"] = json!(
            input
                .image_content_sources
                .iter()
                .map(|(source, mirrors)| json!({"source": source, "mirrors": mirrors}))
                .collect::<Vec<_>>()
        );
    }
    let mut labels = input.user_labels.clone();
    labels.extend(input.labels.clone());
    let mut meta = metadata(&input.name, &input.namespace, &labels);
    let mut annotations = input.annotations.clone();
    if let Some(image) = &input.control_plane_operator_image {
        annotations.insert(
            "hypershift.openshift.io/control-plane-operator-image".into(),
            image.clone(),
        );
    }
    if !annotations.is_empty() {
        meta["annotations"] = json!(annotations);
    }
    json!({
        "apiVersion": HYPERSHIFT_API_VERSION,
        "kind": "HostedCluster",
        "metadata": meta,
        "spec": spec,
    })
}

/// The NodePool for `input`: amd64, `Replace` upgrades without auto-repair (as HyperShift's
/// CLI renders), Premium_LRS OS disk.
pub fn node_pool(input: &NodePoolInput) -> Value {
    let image = match &input.image {
        NodePoolImage::ImageId(id) => json!({"type": "ImageID", "imageID": id}),
        NodePoolImage::Marketplace {
            publisher,
            offer,
            sku,
            version,
        } => json!({
            "type": "AzureMarketplace",
            "azureMarketplace": {"publisher": publisher, "offer": offer, "sku": sku, "version": version},
        }),
        NodePoolImage::FromRelease { image_generation } => json!({
            "type": "AzureMarketplace",
            "azureMarketplace": {"imageGeneration": image_generation},
        }),
    };
    let vm_size = if input.vm_size.is_empty() {
        DEFAULT_VM_SIZE
    } else {
        input.vm_size.as_str()
    };
    let mut azure = json!({
        "vmSize": vm_size,
        "image": image,
        "osDisk": {
            "sizeGiB": input.os_disk_size_gib,
            "diskStorageAccountType": input.os_disk_storage_account_type.as_deref().unwrap_or("Premium_LRS"),
        },
        "subnetID": input.subnet_id,
    });
    if let Some(z) = &input.availability_zone {
        azure["availabilityZone"] = json!(z);
    }
    if let Some(des) = &input.disk_encryption_set_id {
        azure["osDisk"]["encryptionSetID"] = json!(des);
    }
    if let Some(e) = &input.encryption_at_host {
        azure["encryptionAtHost"] = json!(e);
    }
    if input.ephemeral_os_disk {
        azure["osDisk"]["persistence"] = json!("Ephemeral");
    }
    if let Some((kind, uri)) = &input.diagnostics {
        let mut d = json!({"storageAccountType": kind});
        if let Some(uri) = uri {
            d["userManaged"] = json!({"storageAccountURI": uri});
        }
        azure["diagnostics"] = d;
    }
    let mut pool = json!({
        "apiVersion": HYPERSHIFT_API_VERSION,
        "kind": "NodePool",
        "metadata": metadata(&input.name, &input.namespace, &input.labels),
        "spec": {
            "arch": input.arch.as_deref().unwrap_or("amd64"),
            "clusterName": input.cluster_name,
            "management": {"autoRepair": input.auto_repair, "upgradeType": input.upgrade_type.as_deref().unwrap_or("Replace")},
            "platform": {"type": "Azure", "azure": azure},
            "release": {"image": input.release_image},
        },
    });
    match input.auto_scaling {
        Some((min, max)) => pool["spec"]["autoScaling"] = json!({"min": min, "max": max}),
        None => pool["spec"]["replicas"] = json!(input.replicas),
    }
    if let Some(t) = &input.node_drain_timeout {
        pool["spec"]["nodeDrainTimeout"] = json!(t);
    }
    if let Some(t) = &input.node_volume_detach_timeout {
        pool["spec"]["nodeVolumeDetachTimeout"] = json!(t);
    }
    pool
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert!(is_dns_label("demo-x1"));
        assert!(!is_dns_label("-demo"));
        assert!(!is_dns_label("Demo"));
        assert!(is_uuid("00000000-0000-0000-0000-0000000000e1"));
        assert!(!is_uuid("00000000-0000-0000-0000-0000000000e"));
        assert!(is_subnet_id(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/default"
        ));
        assert!(!is_subnet_id("/subscriptions/s/resourceGroups/rg"));
    }
}
