//! The cluster file's shape: one YAML document per hosted cluster.
//!
//! Why these types look the way they do:
//! - keys are camelCase like HyperShift's own API (`infraID`, `baseDomain`, `releaseImage`), so
//!   a reader who knows HyperShift recognises them;
//! - every struct denies unknown keys, so a typo is an error instead of a silently ignored
//!   setting;
//! - values Azure validates (UUIDs, CIDRs, ARM ids, counts) are kept as written (`String`,
//!   `i64`) and checked by [`super::validate`], so one pass can report every problem at once
//!   instead of stopping at the first type error;
//! - secrets are never held: `pullSecret` and `sshKey` are file paths, read at use time by
//!   [`ClusterConfig::read_pull_secret`] and friends;
//! - the doc comments are the JSON Schema descriptions (`examples/cluster.schema.json`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// JSON Schema pattern of a canonical UUID (the form Azure prints).
const UUID_PATTERN: &str = "^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$";

/// Default container of a created OIDC issuer.
pub const DEFAULT_OIDC_CONTAINER: &str = "oidc";
/// Default address space of a created VNet (HyperShift's).
pub const DEFAULT_VNET_CIDR: &str = "10.0.0.0/16";
/// Default subnet of a created VNet (HyperShift's).
pub const DEFAULT_SUBNET_CIDR: &str = "10.0.0.0/24";
/// Default node VM size (HyperShift's).
pub const DEFAULT_VM_SIZE: &str = "Standard_D4s_v5";
/// Default OS disk size in GiB (HyperShift's).
pub const DEFAULT_OS_DISK_SIZE_GIB: i64 = 128;

/// One self-managed Azure HyperShift hosted cluster.
///
/// Relative file paths are resolved against the directory of the cluster file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "hcp-workflow cluster file")]
pub struct ClusterConfig {
    /// Cluster name (HostedCluster name). A DNS label: lowercase letters, digits and `-`,
    /// starting with a letter, at most 40 characters, because derived Azure names embed it
    /// (`<name>-<infraID>-pe` must fit 64 characters).
    #[schemars(
        length(min = 1, max = 40),
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,

    /// Infrastructure id, embedded in every Azure resource name and tag. Optional: when
    /// absent, `<name>-<5 random [a-z0-9]>` is generated once and recorded with the run.
    /// Lowercase letters, digits and `-`; `name` + `infraID` at most 60 characters.
    #[serde(rename = "infraID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 59),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub infra_id: Option<String>,

    /// Azure subscription (UUID) the guest cluster's resources are created in.
    #[schemars(extend("format" = "uuid"), regex(pattern = UUID_PATTERN))]
    pub subscription: String,

    /// Microsoft Entra tenant (UUID) of that subscription.
    #[schemars(extend("format" = "uuid"), regex(pattern = UUID_PATTERN))]
    pub tenant: String,

    /// Azure region, programmatic name (`eastus`, `westeurope`). Must be a region of `cloud`.
    pub location: String,

    /// Base DNS domain; the cluster's names live under `<name>.<baseDomain>`.
    #[schemars(length(min = 1, max = 253))]
    pub base_domain: String,

    /// Resource group of the existing public Azure DNS zone named exactly `baseDomain`, in
    /// `subscription` (HyperShift's `--dns-zone-rg-name`). The zone is required: its id
    /// becomes the HostedCluster's `spec.dns.publicZoneID`, and the ingress identity gets
    /// its role on this group. Default: the zone is looked up among the subscription's DNS
    /// zones. Never written or deleted by hcp-workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90))]
    pub dns_zone_resource_group: Option<String>,

    /// OpenShift release image, e.g. `quay.io/openshift-release-dev/ocp-release:4.22.0-multi`
    /// or a `@sha256:` digest reference.
    #[schemars(length(min = 1))]
    pub release_image: String,

    /// The release's OpenShift version (`4.22.0`). Required when `releaseImage` is pinned
    /// by digest (`@sha256:`), which carries no version; otherwise read from its tag. It
    /// gates what the release supports: HyperShift's Azure workload identities need 4.19,
    /// the Azure private topologies (Private, PublicAndPrivate) 4.22.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_version: Option<String>,

    /// Resource group that holds the resources outliving a cluster (identities, OIDC issuer).
    /// Shared by many clusters (HyperShift's `os4-common`): an existing group is adopted (one
    /// you made is never deleted); `delete-cluster --purge-persistent` removes this cluster's
    /// resources from it, and the group itself only once nothing else is inside.
    /// Azure rules: 1–90 letters, digits, `-`, `_`, `.`, `(`, `)`; not ending in `.`.
    #[schemars(length(min = 1, max = 90))]
    pub persistent_resource_group: String,

    /// OIDC issuer the guest's service-account tokens are trusted through.
    /// Default: `create: {}`.
    #[serde(default)]
    pub oidc_issuer: OidcIssuer,

    /// The 8 workload identities (disk, file, image-registry, ingress, cloud-provider,
    /// node-pool-mgmt, network, control-plane-operator). Default: `create: {}`.
    #[serde(default)]
    pub identities: Identities,

    /// Guest network: created, or brought by the user (never deleted then).
    /// Default: `create: {}` (10.0.0.0/16 with subnet 10.0.0.0/24).
    #[serde(default)]
    pub network: Network,

    /// The guest's pod and service networks (HyperShift's `--cluster-cidr`,
    /// `--service-cidr`; `spec.networking`). They must not overlap each other, the node
    /// network (`network.create.vnetCidr` or `network.existing.machineCidr`) or
    /// OVN-Kubernetes' internal ranges (100.64.0.0/16, 100.88.0.0/16, 169.254.0.0/17).
    /// Default: clusterNetwork 10.132.0.0/14, serviceNetwork 172.31.0.0/16 (HyperShift's).
    #[serde(default, skip_serializing_if = "Networking::is_default")]
    pub networking: Networking,

    /// The hosted control plane's options, as `hypershift create cluster azure` takes them
    /// (`--control-plane-availability-policy`, `--infra-availability-policy`, `--fips`,
    /// `--etcd-storage-class`, `--etcd-storage-size`, `--image-content-sources`). Default:
    /// HyperShift's CLI defaults (single replica, no FIPS, an 8Gi etcd volume of the
    /// management cluster's default storage class, no mirrors).
    #[serde(default, skip_serializing_if = "ControlPlane::is_default")]
    pub control_plane: ControlPlane,

    /// Extra tags on every resource group hcp-workflow creates (`--resource-group-tags`),
    /// e.g. `{costCenter: "4711"}`. At most 47 (Azure allows 50 per resource; hcp-workflow's
    /// own three ownership tags are always set, and keys starting `hcp-workflow.io/` are
    /// reserved for them). Keys ≤ 512 characters without `<>%&\?/`, values ≤ 256.
    /// Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_group_tags: BTreeMap<String, String>,

    /// API endpoint exposure. `Private` and `PublicAndPrivate` wire a Private Link Service in
    /// the management cluster and a Private Endpoint in the guest VNet.
    pub topology: Topology,

    /// The management (HyperShift operator) cluster.
    pub management_cluster: ManagementCluster,

    /// Node pools; at least one, names unique.
    #[schemars(length(min = 1))]
    pub node_pools: Vec<NodePool>,

    /// How long each kind of wait may last before the run stops for an operator (state
    /// `needs-operator`: `hcp-workflow retry` gives the wait a fresh budget, `cancel`
    /// unwinds; a wait past its budget never unwinds on its own). Durations like `45m`,
    /// `1h30m`. Defaults: hostedClusterAvailable 45m, nodePoolReady 60m, armOperation 30m,
    /// privateLinkTeardown 30m, kubernetesDeletion 30m, clusterRollout 60m.
    #[serde(default, skip_serializing_if = "WaitBudgets::is_empty")]
    pub wait_budgets: WaitBudgets,

    /// How `update-cluster` rolls a new `releaseImage` out: the control plane first, then
    /// the node pools in waves of `maxParallel` (default 1). Not part of the cluster: a
    /// change here changes nothing.
    #[serde(default, skip_serializing_if = "Upgrade::is_default")]
    pub upgrade: Upgrade,

    /// Extra subscriptions (UUIDs) allowed to see and auto-connect to the cluster's Private
    /// Link Service, besides `subscription`. Default: none. Changing it on an existing
    /// cluster (`update-cluster`) updates the service's visibility and auto-approval, and
    /// rejects then removes every private endpoint connection from a subscription no
    /// longer allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = UUID_PATTERN)))]
    pub allowed_subscriptions: Vec<String>,

    /// Who makes the private link (Private Link Service, Private Endpoint, private DNS) of
    /// a `Private` or `PublicAndPrivate` cluster. Default: `managedBy: auto`.
    #[serde(default, skip_serializing_if = "PrivateLink::is_default")]
    pub private_link: PrivateLink,

    /// Path to the pull secret (a JSON object with an `auths` object). Read at use time,
    /// never copied into the journal or outputs.
    pub pull_secret: PathBuf,

    /// Path to an SSH public key (`ssh-rsa`, `ssh-ed25519` or `ecdsa-…`) for the nodes.
    pub ssh_key: PathBuf,

    /// How hcp-workflow authenticates to Azure. Default: `auto` (workload identity, a
    /// client secret from the environment, managed identity, then Azure CLI).
    #[serde(default)]
    pub auth: AuthMode,

    /// Azure cloud. Default: `public`.
    #[serde(default)]
    pub cloud: Cloud,

    /// What a run does when a step fails for good (after its retries): `unwind` undoes
    /// every started step in reverse order (create-cluster's default); `pause` keeps all
    /// the work and waits in `needs-operator` (`hcp-workflow retry` re-runs the failed step
    /// and goes on, `cancel` unwinds); `pause=24h` pauses, then unwinds by itself if nobody
    /// acted by then. `start --on-failure` wins over this key. delete-cluster only goes
    /// forward (`pause`, always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(unwind|pause(=[0-9][0-9a-z ]*)?)$"))]
    pub on_failure: Option<String>,
}

/// Where the OIDC issuer comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OidcIssuer {
    /// Create a storage account + container serving the discovery document and JWKS.
    Create(OidcIssuerCreate),
    /// Use an issuer that already serves the documents. Its private signing key is given
    /// as a file (`signingKey`) and stored in the cluster's service-account signing key
    /// Secret instead of a generated one; its `kid` must be in the issuer's JWKS.
    Existing(OidcIssuerExisting),
}

impl Default for OidcIssuer {
    fn default() -> Self {
        OidcIssuer::Create(OidcIssuerCreate::default())
    }
}

/// A created OIDC issuer: `https://<storageAccount>.blob.<storage suffix>/<container>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcIssuerCreate {
    /// Storage account name: 3–24 lowercase letters and digits, globally unique. Default:
    /// derived from `name` and a hash of `name` + `infraID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 3, max = 24), regex(pattern = r"^[a-z0-9]{3,24}$"))]
    pub storage_account: Option<String>,

    /// Blob container: 3–63 lowercase letters, digits and single `-`. Default: `oidc`.
    #[serde(default = "default_container")]
    #[schemars(length(min = 3, max = 63))]
    pub container: String,
}

impl Default for OidcIssuerCreate {
    fn default() -> Self {
        Self {
            storage_account: None,
            container: default_container(),
        }
    }
}

/// An existing OIDC issuer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcIssuerExisting {
    /// Issuer URL: `https://…`, no query, fragment or trailing `/` (it must equal the `iss`
    /// of the tokens exactly).
    #[schemars(extend("format" = "uri"))]
    pub url: String,

    /// Path to the issuer's private signing key: a PEM RSA private key (`RSA PRIVATE KEY`
    /// or `PRIVATE KEY`), HyperShift's `--sa-token-issuer-private-key-path`. Stored in the
    /// service-account signing key Secret (key `key`); its key id (base64url SHA-256 of
    /// the public key) must be published in `<url>/openid/v1/jwks`. Read at use time,
    /// never copied into the journal or outputs.
    pub signing_key: PathBuf,
}

/// Where the workload identities come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Identities {
    /// Create the 8 user-assigned identities and their federated credentials in
    /// `persistentResourceGroup`.
    Create(IdentitiesCreate),
    /// Use identities that already exist, listed in HyperShift's workload-identities file.
    Existing(IdentitiesExisting),
    /// The ARO HCP model (HyperShift's `azureAuthenticationConfigType: ManagedIdentities`,
    /// seed `000_4293f64c3e51efdc`): the 8 control-plane components authenticate as Entra
    /// applications with certificates created in a Key Vault of `persistentResourceGroup`
    /// (mounted by the AKS Secrets Store CSI driver); image registry, disk and file get
    /// data-plane managed identities. Needs `managementCluster.platform: aks`.
    AroHcp(IdentitiesAroHcp),
}

impl Default for Identities {
    fn default() -> Self {
        Identities::Create(IdentitiesCreate {})
    }
}

/// Create the identities (no settings yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentitiesCreate {}

/// The ARO HCP identity model's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdentitiesAroHcp {
    /// The Key Vault holding the components' certificates and credentials secrets.
    #[serde(default)]
    pub key_vault: KeyVault,
    /// Validity of each component certificate Key Vault creates, in months (1–120).
    /// Default 12 (Key Vault's default policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 120))]
    pub certificate_validity_months: Option<u32>,
}

/// A Key Vault of `persistentResourceGroup`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyVault {
    /// Vault name: 3–24 letters, digits and '-', starting with a letter, ending with a
    /// letter or digit, no "--"; unique across Azure. Default: `hcp-` + a hash of the
    /// subscription and `persistentResourceGroup` (one vault per persistent group, shared
    /// by its clusters, as the seed's "Shared Resources" describe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 3, max = 24))]
    pub name: Option<String>,
    /// `true`: a vault you made (RBAC authorization on); hcp-workflow never deletes it and
    /// needs Key Vault Certificates Officer + Secrets Officer on it. Default `false`:
    /// create it (tagged; removed only by `--purge-persistent` once it holds nothing
    /// else), grant the caller Key Vault Administrator on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub existing: bool,
}

/// Identities that already exist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdentitiesExisting {
    /// Path to a `workload-identities.json` as written by `hypershift create iam azure`:
    /// `{"disk": {"clientID": "<uuid>"}, "file": …, "imageRegistry": …, "ingress": …,
    /// "cloudProvider": …, "nodePoolManagement": …, "network": …, "controlPlaneOperator": …}`.
    pub file: PathBuf,
}

/// The guest network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Network {
    /// Create resource groups, NSG, VNet and subnet (tagged, deleted with the cluster).
    Create(NetworkCreate),
    /// Use an existing VNet, subnet and NSG (never modified beyond what the cluster needs,
    /// never deleted).
    Existing(NetworkExisting),
}

impl Default for Network {
    fn default() -> Self {
        Network::Create(NetworkCreate::default())
    }
}

/// Address ranges of a created network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkCreate {
    /// VNet address space, IPv4 CIDR (prefix /8–/29). Default: `10.0.0.0/16`.
    #[serde(default = "default_vnet_cidr")]
    pub vnet_cidr: String,
    /// Node subnet, IPv4 CIDR inside `vnetCidr` (prefix /8–/29). Default: `10.0.0.0/24`.
    #[serde(default = "default_subnet_cidr")]
    pub subnet_cidr: String,
}

impl Default for NetworkCreate {
    fn default() -> Self {
        Self {
            vnet_cidr: default_vnet_cidr(),
            subnet_cidr: default_subnet_cidr(),
        }
    }
}

/// The hosted control plane's options (HostedCluster `spec`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControlPlane {
    /// `SingleReplica` or `HighlyAvailable` (three replicas of each control-plane component,
    /// spread over zones; `spec.controllerAvailabilityPolicy`). Immutable once the cluster
    /// exists. Default: `SingleReplica`, as HyperShift's CLI.
    #[serde(default, skip_serializing_if = "AvailabilityPolicy::is_single")]
    pub availability_policy: AvailabilityPolicy,
    /// The same for the guest's infrastructure services (ingress, monitoring, ...;
    /// `spec.infrastructureAvailabilityPolicy`). Default: `SingleReplica`.
    #[serde(default, skip_serializing_if = "AvailabilityPolicy::is_single")]
    pub infrastructure_availability_policy: AvailabilityPolicy,
    /// FIPS mode on the nodes (`spec.fips`; immutable). Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fips: bool,
    /// etcd's data volume.
    #[serde(default, skip_serializing_if = "Etcd::is_default")]
    pub etcd: Etcd,
    /// Registry mirrors for disconnected installs (`spec.imageContentSources`, HyperShift's
    /// `--image-content-sources`): each `{source, mirrors: [...]}`. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_content_sources: Vec<ImageContentSource>,
    /// Where the control plane's pods run on the management cluster and how they are
    /// labelled (`--node-selector`, `--toleration`, `--pods-labels`).
    #[serde(default, skip_serializing_if = "Placement::is_default")]
    pub placement: Placement,
    /// Labels and annotations on the HostedCluster object itself (`--labels`,
    /// `--annotations`); keys starting `hcp-workflow.io/` are reserved. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// See `labels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// A custom DNS name for the API server (`--kas-dns-name`,
    /// `spec.kubeAPIServerDNSName`), e.g. `api.corp.example.com`. Default: none.
    #[serde(
        default,
        rename = "kubeAPIServerDNSName",
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_api_server_dns_name: Option<String>,
    /// `TechPreviewNoUpgrade` or `DevPreviewNoUpgrade` (`--feature-set`). Default: none
    /// (the default feature set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["TechPreviewNoUpgrade", "DevPreviewNoUpgrade"]))]
    pub feature_set: Option<String>,
    /// Optional capabilities to enable or disable at install (`--enable-cluster-capabilities`,
    /// `--disable-cluster-capabilities`; `spec.capabilities`, immutable): any of
    /// `ImageRegistry`, `openshift-samples`, `Insights`, `baremetal`, `Console`,
    /// `NodeTuning`, `Ingress`. Default: HyperShift's.
    #[serde(default, skip_serializing_if = "Capabilities::is_default")]
    pub capabilities: Capabilities,
    /// Override of the control-plane operator's image (`--control-plane-operator-image`;
    /// annotation `hypershift.openshift.io/control-plane-operator-image`). Default: the
    /// release's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_operator_image: Option<String>,
    /// KMS encryption of etcd with an Azure Key Vault key (`--encryption-key-id`,
    /// `--kms-credentials-secret-name`), rendered as `hypershift create cluster azure`
    /// does: `{keyId: https://<vault>.vault.azure.net/keys/<key>/<version>,
    /// credentialsSecretName: <Key Vault secret with the UserAssignedIdentityCredentials
    /// JSON>}`. On HyperShift 4.22 the KMS plugin reads those credentials through the
    /// management cluster's Secrets Store CSI driver (the ARO HCP identity model).
    /// Default: none (aescbc with the cluster's own key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms: Option<Kms>,
}

/// Azure KMS for etcd (HostedCluster `spec.secretEncryption.kms.azure`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kms {
    /// Key identifier `https://<vault>.vault.azure.net/keys/<key>/<version>`.
    pub key_id: String,
    /// Name of the Key Vault secret holding the KMS identity's credentials.
    pub credentials_secret_name: String,
}

/// Placement of the control plane's pods (HostedCluster `spec.nodeSelector`,
/// `spec.tolerations`, `spec.labels`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    /// Node labels the control-plane pods must match. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the control-plane pods, as Kubernetes writes them (`key`, `operator`
    /// `Exists`|`Equal`, `value`, `effect` `NoSchedule`|`PreferNoSchedule`|`NoExecute`,
    /// `tolerationSeconds`). Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Extra labels on the control-plane pods. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
}

impl Placement {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A Kubernetes toleration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    /// Taint key; empty with `operator: Exists` tolerates everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Exists` or `Equal`. Default: `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Exists", "Equal"]))]
    pub operator: Option<String>,
    /// Taint value (with `Equal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`; none: all effects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["NoSchedule", "PreferNoSchedule", "NoExecute"]))]
    pub effect: Option<String>,
    /// How long a `NoExecute` taint is tolerated, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Optional cluster capabilities (`spec.capabilities`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capabilities {
    /// Capabilities to enable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enabled: Vec<String>,
    /// Capabilities to disable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<String>,
}

impl Capabilities {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl ControlPlane {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// HyperShift's `AvailabilityPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AvailabilityPolicy {
    /// One replica of each component.
    #[default]
    SingleReplica,
    /// Three replicas, spread.
    HighlyAvailable,
}

impl AvailabilityPolicy {
    fn is_single(&self) -> bool {
        *self == Self::SingleReplica
    }
}

/// etcd's persistent volume (`spec.etcd.managed.storage.persistentVolume`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Etcd {
    /// Storage class of the management cluster (a DNS-1123 subdomain). Default: the
    /// management cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Volume size, a Kubernetes quantity in binary units like `8Gi` or `32Gi` (at least
    /// `1Gi`). Default: `8Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
}

impl Etcd {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// One mirrored source (`spec.imageContentSources[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageContentSource {
    /// The repository mirrored, e.g. `quay.io/openshift-release-dev/ocp-release`.
    pub source: String,
    /// Its mirrors, in order of preference; at least one.
    pub mirrors: Vec<String>,
}

/// The guest's pod and service networks (HyperShift `spec.networking`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Networking {
    /// Pod network, IPv4 CIDR. Default: `10.132.0.0/14` (HyperShift's
    /// `globalconfig.DefaultIPv4ClusterCIDR`).
    #[serde(default = "default_cluster_network")]
    pub cluster_network: String,
    /// Service network, IPv4 CIDR. Default: `172.31.0.0/16` (HyperShift's
    /// `globalconfig.DefaultIPv4ServiceCIDR`).
    #[serde(default = "default_service_network")]
    pub service_network: String,
    /// MTU of OVN-Kubernetes' tunnel interface on the nodes, 576–9216, 100 below the
    /// uplink's (`--ovn-kubernetes-mtu`; immutable). Default: auto-detected.
    #[serde(
        default,
        rename = "ovnKubernetesMTU",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 576, max = 9216))]
    pub ovn_kubernetes_mtu: Option<i64>,
    /// Disable Multus and its components in the guest (`--disable-multi-network`;
    /// immutable). Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_multi_network: bool,
}

fn default_cluster_network() -> String {
    "10.132.0.0/14".into()
}

fn default_service_network() -> String {
    "172.31.0.0/16".into()
}

impl Default for Networking {
    fn default() -> Self {
        Self {
            cluster_network: default_cluster_network(),
            service_network: default_service_network(),
            ovn_kubernetes_mtu: None,
            disable_multi_network: false,
        }
    }
}

impl Networking {
    /// Whether every field has its default (then it is not written out).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// A bring-your-own network, by ARM id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkExisting {
    /// `/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<name>`
    pub vnet_id: String,
    /// A subnet of `vnetId`: `<vnetId>/subnets/<name>`.
    pub subnet_id: String,
    /// `/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.Network/networkSecurityGroups/<name>`
    pub nsg_id: String,
    /// The node network, IPv4 CIDR (HyperShift's `--machine-cidr`, `spec.networking.
    /// machineNetwork`): checked against the pod and service networks, and rendered so
    /// HyperShift checks it too. Default: none (not rendered, not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_cidr: Option<String>,
}

/// API endpoint exposure (HyperShift's `spec.platform.azure.topology`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Topology {
    /// Public endpoints only; no private link.
    Public,
    /// Public endpoints plus private access through the Private Endpoint.
    PublicAndPrivate,
    /// Private access only, through the Private Endpoint.
    Private,
}

impl Topology {
    /// Whether the Private Link Service / Private Endpoint / private DNS stages run.
    pub fn uses_private_link(self) -> bool {
        !matches!(self, Topology::Public)
    }
}

/// Who makes the private link.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrivateLink {
    /// `hypershift`: the HyperShift operator was installed with `--private-platform Azure`;
    /// its controllers make the PLS (`pls-<clusterID>`), the PE (`private-router-pe`) and
    /// the zone `<name>.hypershift.local`, and hcp-workflow waits for them, records them
    /// as HyperShift's, and before deleting the HostedCluster rejects and removes every
    /// connection HyperShift's own endpoint did not make. `hcp-workflow`: the operator runs
    /// without that flag, and hcp-workflow makes and deletes them itself. `auto` (default):
    /// read the operator Deployment `hypershift/operator`'s args before anything is
    /// journaled; the run records the resolved mode. A mode that contradicts the
    /// operator's install is refused before journaling.
    #[serde(default)]
    pub managed_by: PrivateLinkManager,
}

impl PrivateLink {
    fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// `privateLink.managedBy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PrivateLinkManager {
    /// Decide from the HyperShift operator's `--private-platform` flag.
    #[default]
    Auto,
    /// HyperShift's own controllers (operator flag `--private-platform Azure`).
    Hypershift,
    /// hcp-workflow (operator without the flag).
    HcpWorkflow,
}

impl PrivateLinkManager {
    /// The config value (`auto`, `hypershift`, `hcp-workflow`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Hypershift => "hypershift",
            Self::HcpWorkflow => "hcp-workflow",
        }
    }
}

/// The management cluster, where HyperShift's operator runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagementCluster {
    /// Path to a kubeconfig. Default: `$KUBECONFIG`, then `~/.kube/config`, then in-cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context. Default: the current context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,

    /// Subscription (UUID) of the management cluster's network, where the Private Link
    /// Service is created. Required unless `topology` is `Public`; must match `vnetId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "uuid"), regex(pattern = UUID_PATTERN))]
    pub subscription: Option<String>,

    /// Resource group of the management cluster's internal load balancers (for AKS, the
    /// node resource group `MC_…`). Required unless `topology` is `Public`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 90))]
    pub load_balancer_resource_group: Option<String>,

    /// ARM id of the management cluster's VNet (the NAT subnet lives there). Required unless
    /// `topology` is `Public`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnet_id: Option<String>,

    /// Subnet for the Private Link Service's NAT IPs. `auto` (default): create
    /// `<infraID>-pls-nat`, a free /24 of the management VNet; `{id: <subnet id>}`: use an
    /// existing subnet of `vnetId`; `{cidr: <IPv4 CIDR>}`: create `<infraID>-pls-nat` there.
    #[serde(default)]
    pub nat_subnet: NatSubnet,

    /// What the management cluster is: `openshift` (default; an OpenShift cluster on
    /// Azure) or `aks` (an AKS cluster, as ARO HCP runs; `identities.aroHcp` needs it).
    #[serde(default, skip_serializing_if = "ManagementPlatform::is_default")]
    pub platform: ManagementPlatform,

    /// ARM id of the AKS management cluster (`Microsoft.ContainerService/managedClusters`).
    /// Required with `platform: aks`: preflight reads its Key Vault Secrets Provider add-on,
    /// OIDC issuer and workload identity, and the add-on's identity is granted Key Vault
    /// Secrets User on the identities' vault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aks_cluster_id: Option<String>,
}

/// The management cluster's platform.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ManagementPlatform {
    /// An OpenShift cluster on Azure.
    #[default]
    Openshift,
    /// An AKS cluster.
    Aks,
}

impl ManagementPlatform {
    fn is_default(&self) -> bool {
        *self == ManagementPlatform::Openshift
    }
}

/// The Private Link Service NAT subnet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NatSubnet {
    /// Create a /24 in a free range of the management VNet.
    #[default]
    Auto,
    /// Use this existing subnet (ARM id, a subnet of `managementCluster.vnetId`).
    Id(String),
    /// Create the subnet with this IPv4 CIDR (prefix /8–/29).
    Cidr(String),
}

/// One node pool (a HyperShift NodePool).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePool {
    /// 1–15 lowercase letters and digits, unique among the pools.
    #[schemars(length(min = 1, max = 15), regex(pattern = r"^[a-z0-9]{1,15}$"))]
    pub name: String,

    /// Number of nodes, ≥ 0. Required unless `autoScaling` is set (HyperShift refuses
    /// both: "Both replicas or autoScaling should not be set"). Changing it on an existing
    /// cluster (`update-cluster`) scales the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,

    /// Let the cluster autoscaler size the pool between `min` and `max` nodes (NodePool
    /// `spec.autoScaling`); instead of `replicas`. On Azure `min` ≥ 1 (HyperShift:
    /// scale-from-zero is AWS only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scaling: Option<AutoScaling>,

    /// Azure VM size. Default: `Standard_D4s_v5`.
    #[serde(default = "default_vm_size")]
    pub vm_size: String,

    /// OS disk size in GiB, 30–4095. Default: 128.
    #[serde(rename = "osDiskSizeGiB", default = "default_os_disk_size_gib")]
    #[schemars(range(min = 30, max = 4095))]
    pub os_disk_size_gib: i64,

    /// Availability zone `"1"`, `"2"` or `"3"` (a string). Default: none (regional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["1", "2", "3"]))]
    pub zone: Option<String>,

    /// Boot image, as HyperShift's `AzureVMImage`: `{type: AzureMarketplace,
    /// azureMarketplace: {publisher, offer, sku, version}}` or `{type: ImageID, imageID:
    /// <ARM id>}`. Default (OpenShift 4.20 and newer): the Gen2 RHCOS marketplace image of
    /// the release, filled in by HyperShift's NodePool controller (`azureMarketplace:
    /// {imageGeneration: Gen1}` picks Gen1). Required before 4.20, with all of publisher,
    /// offer, sku and version or an image id (RHCOS SKUs: `aro_4NN` is Gen1, `4NN-v2`
    /// Gen2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<NodePoolImage>,

    /// How long a node of this pool is drained before it is deleted anyway (HyperShift's
    /// `--node-drain-timeout`, NodePool `spec.nodeDrainTimeout`), a duration like `30m`.
    /// Default: none: drain until done (a PodDisruptionBudget can block a scale-down or a
    /// replace for ever). Deleting the cluster never drains (HyperShift deletes the pools
    /// with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_timeout: Option<String>,

    /// How long a deleted node waits for its volumes to detach (`--node-volume-detach-timeout`,
    /// NodePool `spec.nodeVolumeDetachTimeout`), a duration like `5m`. Default: none (wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_volume_detach_timeout: Option<String>,

    /// CPU architecture of the nodes: `amd64` or `arm64` (`--arch`; an arm64 pool needs an
    /// Arm VM size such as `Standard_D4ps_v5`). Default: `amd64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["amd64", "arm64"]))]
    pub arch: Option<String>,

    /// How nodes take a new release or configuration: `Replace` (new machines) or
    /// `InPlace` (`--node-upgrade-type`). Default: `Replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Replace", "InPlace"]))]
    pub upgrade_type: Option<String>,

    /// Encryption at host (`--encryption-at-host`): `Enabled` or `Disabled`; the
    /// subscription needs the `Microsoft.Compute/EncryptionAtHost` feature for `Enabled`.
    /// Default: HyperShift's (`Enabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Enabled", "Disabled"]))]
    pub encryption_at_host: Option<String>,

    /// ARM id of a disk encryption set (`Microsoft.Compute/diskEncryptionSets`) for the OS
    /// disks (`--disk-encryption-set-id`), in `subscription`. Default: platform-managed keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_encryption_set_id: Option<String>,

    /// OS disk type (`--disk-storage-account-type`): `Premium_LRS`, `PremiumV2_LRS`,
    /// `Standard_LRS` or `StandardSSD_LRS`. Default: `Premium_LRS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Premium_LRS", "PremiumV2_LRS", "Standard_LRS", "StandardSSD_LRS"]))]
    pub os_disk_storage_account_type: Option<String>,

    /// Machine health checks replace unhealthy nodes (`--auto-repair`). Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_repair: bool,

    /// Ephemeral OS disks (`--enable-ephemeral-disk`, `osDisk.persistence: Ephemeral`; the
    /// VM size must support them). Default: false (persistent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ephemeral_os_disk: bool,

    /// Boot diagnostics (`--diagnostics-storage-account-type`,
    /// `--diagnostics-storage-account-uri`): `{storageAccountType: Managed | UserManaged |
    /// Disabled, storageAccountURI: <https URI, with UserManaged only>}`. Default:
    /// HyperShift's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Diagnostics>,

    /// The pool's subnet (`--nodepool-subnet-id`), an ARM id of a subnet of the cluster's
    /// VNet. Default: the cluster's subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
}

/// A node pool's autoscaling bounds (NodePool `spec.autoScaling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutoScaling {
    /// Fewest nodes, ≥ 1.
    #[schemars(range(min = 1))]
    pub min: i64,
    /// Most nodes, ≥ `min`.
    #[schemars(range(min = 1))]
    pub max: i64,
}

impl NodePool {
    /// The nodes the pool runs when it is settled: `replicas`, or the autoscaler's `min`
    /// (a new or idle pool runs its minimum).
    pub fn desired_replicas(&self) -> i64 {
        match (self.replicas, self.auto_scaling) {
            (Some(r), _) => r,
            (None, Some(a)) => a.min,
            (None, None) => 0,
        }
    }
}

/// How `update-cluster` rolls a new release out to the node pools.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Upgrade {
    /// How many node pools take the new release at once, after the control plane has.
    /// Default: 1 (one pool at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_parallel: Option<u32>,
}

impl Upgrade {
    /// `true` when nothing is set (omitted from the document).
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// A node pool's boot diagnostics (NodePool `platform.azure.diagnostics`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Diagnostics {
    /// `Managed`, `UserManaged` or `Disabled`.
    #[schemars(extend("enum" = ["Managed", "UserManaged", "Disabled"]))]
    pub storage_account_type: String,
    /// The storage account's blob endpoint (with `UserManaged` only).
    #[serde(
        default,
        rename = "storageAccountURI",
        skip_serializing_if = "Option::is_none"
    )]
    pub storage_account_uri: Option<String>,
}

/// A node pool's boot image (HyperShift's `AzureVMImage`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolImage {
    /// `AzureMarketplace` or `ImageID`.
    #[serde(rename = "type")]
    pub image_type: ImageType,
    /// ARM id of a managed image or gallery image version; required with `type: ImageID`,
    /// forbidden otherwise.
    #[serde(rename = "imageID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub image_id: Option<String>,
    /// The marketplace image; only with `type: AzureMarketplace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure_marketplace: Option<MarketplaceImage>,
}

/// Kinds of boot image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ImageType {
    /// An Azure Marketplace image.
    AzureMarketplace,
    /// A managed image or gallery image version, by ARM id.
    #[serde(rename = "ImageID")]
    ImageId,
}

/// An Azure Marketplace image (HyperShift's `AzureMarketplaceImage`): publisher, offer,
/// sku and version all set, or none of them (release default, 4.20 and newer).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarketplaceImage {
    /// Publisher, 3–50 of `[a-z0-9-_]`, starting with a letter or digit (RHCOS:
    /// `azureopenshift`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9][a-z0-9-_]{2,49}$"))]
    pub publisher: Option<String>,
    /// Offer (RHCOS: `aro4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub offer: Option<String>,
    /// SKU, `[a-z0-9-_]+` (RHCOS 4.NN: `aro_4NN` Gen1, `4NN-v2` Gen2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z0-9-_]+$"))]
    pub sku: Option<String>,
    /// `Major.Minor.Build` or `latest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+\.[0-9]+\.[0-9]+$|^latest$"))]
    pub version: Option<String>,
    /// `Gen1` or `Gen2` (default `Gen2`): which generation HyperShift picks from the
    /// release when publisher, offer, sku and version are omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_generation: Option<ImageGeneration>,
}

/// Hyper-V generation of a marketplace image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ImageGeneration {
    /// Generation 1.
    Gen1,
    /// Generation 2 (HyperShift's default).
    Gen2,
}

impl ImageGeneration {
    /// The CRD value.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageGeneration::Gen1 => "Gen1",
            ImageGeneration::Gen2 => "Gen2",
        }
    }
}

/// How hcp-workflow authenticates to Azure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    /// Try, in order: workload identity, a client secret from the environment, managed
    /// identity, Azure CLI (`AuthMode::AUTO_ORDER` in hcp-activities).
    #[default]
    Auto,
    /// Federated token file (`AZURE_FEDERATED_TOKEN_FILE`, `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`).
    WorkloadIdentity,
    /// Service principal secret from `AZURE_CLIENT_ID` / `AZURE_CLIENT_SECRET` /
    /// `AZURE_TENANT_ID` (never from this file).
    ClientSecret,
    /// The managed identity of the machine hcp-workflow runs on.
    ManagedIdentity,
    /// The signed-in Azure CLI (`az login`).
    AzureCli,
}

/// Azure cloud.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Cloud {
    /// Azure public cloud.
    #[default]
    Public,
    /// Azure Government (US).
    UsGovernment,
    /// Azure operated by 21Vianet (China).
    China,
    /// Another cloud, by its endpoints.
    Custom(CustomCloud),
}

/// Endpoints of a custom cloud.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomCloud {
    /// ARM endpoint, `https://…` (token scope is `<resourceManager>/.default`).
    #[schemars(extend("format" = "uri"))]
    pub resource_manager: String,
    /// Entra authority host, `https://…`.
    #[schemars(extend("format" = "uri"))]
    pub authority_host: String,
    /// Storage DNS suffix, e.g. `core.windows.net` (blob host is
    /// `<account>.blob.<storageSuffix>`).
    pub storage_suffix: String,
    /// Microsoft Graph endpoint, `https://…` (`identities.aroHcp` creates Entra
    /// applications there). Optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "uri"))]
    pub graph: Option<String>,
    /// Key Vault DNS suffix, e.g. `vault.azure.net` (vault host `<name>.<suffix>`).
    /// Optional; `identities.aroHcp` needs it on a custom cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_vault_suffix: Option<String>,
}

/// Endpoints of a cloud, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudEndpoints {
    /// ARM endpoint without trailing `/`, e.g. `https://management.azure.com`.
    pub resource_manager: String,
    /// Entra authority host without trailing `/`, e.g. `https://login.microsoftonline.com`.
    pub authority_host: String,
    /// Storage DNS suffix, e.g. `core.windows.net`.
    pub storage_suffix: String,
}

impl Cloud {
    /// The cloud's endpoints.
    pub fn endpoints(&self) -> CloudEndpoints {
        let (rm, auth, storage) = match self {
            Cloud::Public => (
                "https://management.azure.com",
                "https://login.microsoftonline.com",
                "core.windows.net",
            ),
            Cloud::UsGovernment => (
                "https://management.usgovcloudapi.net",
                "https://login.microsoftonline.us",
                "core.usgovcloudapi.net",
            ),
            Cloud::China => (
                "https://management.chinacloudapi.cn",
                "https://login.chinacloudapi.cn",
                "core.chinacloudapi.cn",
            ),
            Cloud::Custom(c) => (
                c.resource_manager.trim_end_matches('/'),
                c.authority_host.trim_end_matches('/'),
                c.storage_suffix.as_str(),
            ),
        };
        CloudEndpoints {
            resource_manager: rm.to_string(),
            authority_host: auth.to_string(),
            storage_suffix: storage.to_string(),
        }
    }

    /// Name used in messages (`public`, `usGovernment`, `china`, `custom`).
    pub fn label(&self) -> &'static str {
        match self {
            Cloud::Public => "public",
            Cloud::UsGovernment => "usGovernment",
            Cloud::China => "china",
            Cloud::Custom(_) => "custom",
        }
    }
}

fn default_container() -> String {
    DEFAULT_OIDC_CONTAINER.to_string()
}

fn default_vnet_cidr() -> String {
    DEFAULT_VNET_CIDR.to_string()
}

fn default_subnet_cidr() -> String {
    DEFAULT_SUBNET_CIDR.to_string()
}

fn default_vm_size() -> String {
    DEFAULT_VM_SIZE.to_string()
}

fn default_os_disk_size_gib() -> i64 {
    DEFAULT_OS_DISK_SIZE_GIB
}

/// Per-kind wait budgets (see [`ClusterConfig::wait_budgets`]); unset means the default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitBudgets {
    /// The HostedCluster's `Available` condition (default 45m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosted_cluster_available: Option<String>,
    /// Each NodePool's `Ready` condition (default 60m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool_ready: Option<String>,
    /// An Azure long-running operation (create or delete of one resource; default 30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_operation: Option<String>,
    /// The Private Link Service teardown: rejecting and removing every private endpoint
    /// connection, then the PLS (default 30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_link_teardown: Option<String>,
    /// A HostedCluster or NodePool deletion waiting for HyperShift's finalizers (default
    /// 30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_deletion: Option<String>,
    /// The guest's rollout after its pools are Ready: every cluster operator available,
    /// as `hypershift create cluster --wait` waits for (default 60m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_rollout: Option<String>,
}

impl WaitBudgets {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `(config key, value, default)` for each budget.
    pub fn entries(&self) -> [(&'static str, Option<&str>, std::time::Duration); 6] {
        let m = |n: u64| std::time::Duration::from_secs(n * 60);
        [
            (
                "hostedClusterAvailable",
                self.hosted_cluster_available.as_deref(),
                m(45),
            ),
            ("nodePoolReady", self.node_pool_ready.as_deref(), m(60)),
            ("armOperation", self.arm_operation.as_deref(), m(30)),
            (
                "privateLinkTeardown",
                self.private_link_teardown.as_deref(),
                m(30),
            ),
            (
                "kubernetesDeletion",
                self.kubernetes_deletion.as_deref(),
                m(30),
            ),
            ("clusterRollout", self.cluster_rollout.as_deref(), m(60)),
        ]
    }

    /// The budget for `key` (one of [`Self::entries`]' keys); the default when unset or
    /// not a duration (validation refuses the latter before any run is built).
    pub fn get(&self, key: &str) -> std::time::Duration {
        self.entries()
            .into_iter()
            .find(|(k, _, _)| *k == key)
            .map(|(_, v, d)| {
                v.and_then(|v| humantime::parse_duration(v).ok())
                    .unwrap_or(d)
            })
            .unwrap_or(std::time::Duration::from_secs(30 * 60))
    }
}

impl ClusterConfig {
    /// `(major, minor)` of the release: `releaseVersion`, else the tag of `releaseImage`
    /// (`…:4.22.0-multi`). `None` when neither says (validation refuses that).
    pub fn release_minor(&self) -> Option<(u32, u32)> {
        let text = match &self.release_version {
            Some(v) => v.as_str(),
            None if self.release_image.contains('@') => return None,
            None => self.release_image.rsplit_once(':').map(|(_, t)| t)?,
        };
        let mut parts = text.split(['.', '-']);
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    }
}
