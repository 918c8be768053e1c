//! Simulator configuration: time scale, latency model, throttling, Azure quirks.
//!
//! Every simulated delay is a *model* duration (roughly what real Azure or HyperShift takes)
//! multiplied by [`SimConfig::time_scale`]. The default scale (0.01) turns a two-minute
//! HyperShift reconcile into 1.2 s so a whole cluster lifecycle runs in seconds;
//! [`SimConfig::realistic`] uses scale 1.0 for benchmarks.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Error;

/// ARM's subscription throttling, as Microsoft documents it since the 2024 move to regional
/// token buckets ("Understand how Azure Resource Manager throttles requests",
/// learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling,
/// "Regional throttling and token bucket algorithm"): per subscription, **per service
/// principal and per operation type**, reads 250 tokens refilled at 25/s, writes 200 at
/// 10/s, deletes 200 at 10/s; and per subscription and operation type a global limit "15
/// times the individual service principal limit" that all principals share. A request is
/// throttled when either bucket is empty. Runs on real (tokio) time, not scaled time: it
/// models what a client must survive per wall-clock second.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ThrottleConfig {
    /// When false, no request is ever throttled.
    pub enabled: bool,
    /// Read (GET/HEAD) bucket capacity.
    pub read_burst: u32,
    /// Read tokens added per second.
    pub read_per_second: f64,
    /// Write (PUT/PATCH/POST) bucket capacity.
    pub write_burst: u32,
    /// Write tokens added per second.
    pub write_per_second: f64,
    /// Delete bucket capacity.
    pub delete_burst: u32,
    /// Delete tokens added per second.
    pub delete_per_second: f64,
    /// The subscription's global bucket of each operation type, shared by every principal,
    /// is this many times a principal's (15 in the documentation).
    pub global_multiplier: u32,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            read_burst: 250,
            read_per_second: 25.0,
            write_burst: 200,
            write_per_second: 10.0,
            delete_burst: 200,
            delete_per_second: 10.0,
            global_multiplier: 15,
        }
    }
}

/// How long things take in the model (before [`SimConfig::time_scale`] is applied).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencyModel {
    /// PUT duration of an ARM long-running operation when the type has no entry in `put`.
    pub default_put: Duration,
    /// DELETE duration when the type has no entry in `delete`.
    pub default_delete: Duration,
    /// PUT durations by ARM resource type (case-insensitive, e.g.
    /// `Microsoft.Network/privateEndpoints`).
    pub put: BTreeMap<String, Duration>,
    /// DELETE durations by ARM resource type.
    pub delete: BTreeMap<String, Duration>,
    /// Suggested polling interval sent as `Retry-After` on LRO responses.
    pub poll_interval: Duration,
    /// How long one federated-credential write keeps its identity busy; a second write on
    /// the same identity during that time gets 409.
    pub fic_write: Duration,
    /// HostedCluster seen → `private-router` Service + internal LB exist.
    pub operator_router: Duration,
    /// HostedCluster seen → `Available=True` for topology Public (private topologies also
    /// wait for the private endpoint and DNS).
    pub operator_available: Duration,
    /// HostedCluster deletion requested → operator tries to tear down and drop its finalizer.
    pub operator_delete: Duration,
    /// NodePool seen → `Ready=True`.
    pub nodepool_ready: Duration,
    /// NodePool deletion requested → finalizer removed.
    pub nodepool_delete: Duration,
    /// Every NodePool of a cluster Ready → its release rolled out (`status.version.
    /// history[0].completionTime`), unless cluster operators fail (scenario
    /// `failing_cluster_operators`).
    #[serde(default = "default_guest_rollout")]
    pub guest_rollout: Duration,
    /// A NodePool's spec changed → HyperShift's NodePool controller reconciles it. Until
    /// then its conditions are the previous generation's (each carries the
    /// `observedGeneration` it was computed for, `nodepool/capi.go`, `conditions.go`): the
    /// controller works from a queue, behind other pools and requeues.
    #[serde(default = "default_nodepool_reconcile")]
    pub nodepool_reconcile: Duration,
}

fn default_guest_rollout() -> Duration {
    secs(300)
}

fn default_nodepool_reconcile() -> Duration {
    secs(30)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

impl Default for LatencyModel {
    fn default() -> Self {
        // Ballpark figures observed on public Azure; precise values do not matter, their
        // order of magnitude does (a PE takes a minute, a subnet a few seconds).
        let put = [
            ("Microsoft.Network/virtualNetworks", 5),
            ("Microsoft.Network/virtualNetworks/subnets", 5),
            ("Microsoft.Network/networkSecurityGroups", 5),
            ("Microsoft.Network/publicIPAddresses", 5),
            ("Microsoft.Network/loadBalancers", 10),
            ("Microsoft.Network/privateLinkServices", 30),
            ("Microsoft.Network/privateEndpoints", 60),
            ("Microsoft.Network/privateDnsZones", 30),
            ("Microsoft.Network/privateDnsZones/virtualNetworkLinks", 30),
            ("Microsoft.Storage/storageAccounts", 20),
        ];
        let delete = [
            ("Microsoft.Resources/resourceGroups", 60),
            ("Microsoft.Network/privateEndpoints", 30),
            ("Microsoft.Network/privateLinkServices", 20),
            (
                "Microsoft.Network/privateLinkServices/privateEndpointConnections",
                10,
            ),
            ("Microsoft.Network/privateDnsZones", 30),
            ("Microsoft.Network/privateDnsZones/virtualNetworkLinks", 30),
        ];
        Self {
            default_put: secs(5),
            default_delete: secs(10),
            put: put.iter().map(|(k, v)| (k.to_string(), secs(*v))).collect(),
            delete: delete
                .iter()
                .map(|(k, v)| (k.to_string(), secs(*v)))
                .collect(),
            poll_interval: secs(10),
            fic_write: secs(2),
            operator_router: secs(120),
            operator_available: secs(60),
            operator_delete: secs(30),
            nodepool_ready: secs(300),
            nodepool_delete: secs(60),
            guest_rollout: default_guest_rollout(),
            nodepool_reconcile: default_nodepool_reconcile(),
        }
    }
}

impl LatencyModel {
    /// Model duration of a PUT of `rtype`.
    pub fn put_for(&self, rtype: &str) -> Duration {
        lookup(&self.put, rtype).unwrap_or(self.default_put)
    }
    /// Model duration of a DELETE of `rtype`.
    pub fn delete_for(&self, rtype: &str) -> Duration {
        lookup(&self.delete, rtype).unwrap_or(self.default_delete)
    }
}

fn lookup(map: &BTreeMap<String, Duration>, rtype: &str) -> Option<Duration> {
    map.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(rtype))
        .map(|(_, v)| *v)
}

/// Everything that shapes a simulator instance.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Multiplier applied to every model duration (1.0 = realistic Azure timings).
    pub time_scale: f64,
    /// Seed of the random generator (ids, GUIDs, IPs, probabilistic faults).
    pub seed: u64,
    /// Model time during which a role assignment naming a freshly created identity's
    /// principal answers `PrincipalNotFound` (Entra replication delay).
    pub principal_not_found_for: Duration,
    /// Whether a *rejected* private-endpoint connection still blocks deleting its PLS
    /// (Azure does block until the connection is deleted; default true).
    pub rejected_connection_blocks_pls_delete: bool,
    /// Per-subscription token buckets.
    pub throttle: ThrottleConfig,
    /// Directory of CRD YAML files; HostedCluster/NodePool writes are validated against them.
    pub crds_dir: Option<PathBuf>,
    /// Directory of Azure REST API spec excerpts (Swagger 2.0, laid out as in
    /// Azure/azure-rest-api-specs under `specification/`); ARM PUT/PATCH bodies are
    /// validated against the schema of their operation (400 when Azure would refuse).
    /// `None`: only the hand-written per-type checks run.
    pub specs_dir: Option<PathBuf>,
    /// File the whole state is persisted to after every mutation (and loaded from at start).
    pub state_file: Option<PathBuf>,
    /// Write the state file at most this often (`simulator serve`: a big simulated fleet
    /// would otherwise serialize its whole world on every request), and on shutdown.
    /// `None` (the in-process `--simulate`): after every mutation, so the next command of
    /// the same journal always sees it.
    pub persist_every: Option<std::time::Duration>,
    /// Subscription holding the management cluster (its resource group, VNet, and the
    /// internal load balancers the simulated HyperShift operator creates).
    pub management_subscription: String,
    /// Resource group of the management cluster's network resources.
    pub management_resource_group: String,
    /// Region of the management resources.
    pub management_location: String,
    /// Name of the management VNet (address space 10.224.0.0/12, subnet `aks-subnet`
    /// 10.224.0.0/16) seeded at start so a PLS NAT subnet can be added to it.
    pub management_vnet: String,
    /// Tenant reported in identities and tokens.
    pub tenant_id: String,
    /// Items per page of ARM list responses before a `nextLink` is emitted (small by
    /// default so clients that ignore `nextLink` fail visibly).
    pub list_page_size: usize,
    /// Model durations.
    pub latency: LatencyModel,
    /// How the simulated HyperShift operator was installed: with `--private-platform Azure`
    /// ([`PrivatePlatform::Azure`]: its Private Link Service controller runs) or without
    /// ([`PrivatePlatform::None`], the default: hcp-workflow makes the private link itself,
    /// as the e2e tests written before the two modes expect). The operator Deployment
    /// `hypershift/operator` carries the matching args.
    pub private_platform: PrivatePlatform,
    /// What the management cluster is: OpenShift (default; serves the Route API, so the
    /// control-plane operator's private-link controllers start) or AKS (no Route API: they
    /// do not start, as in HyperShift's `setupPrivatePlatformControllers`).
    pub management_platform: ManagementPlatform,
    /// Minor version of the simulated HyperShift operator (`4.22`): the newest OpenShift
    /// release it accepts (`support/supportedversion/version.go` `LatestSupportedVersion`
    /// on its release branch), and whether it knows the Azure private topology (4.22).
    pub hypershift_version: String,
    /// Public DNS zones seeded at start when missing (default: none; `simulator serve`
    /// seeds [`DnsZoneSeed::example`] unless told otherwise, `--simulate` the cluster
    /// file's `baseDomain`).
    pub dns_zones: Vec<DnsZoneSeed>,
    /// Failures the preflight read APIs answer with (see the `preflight`
    /// module); changeable while running with `PUT /_sim/scenario`.
    pub scenario: crate::preflight::Scenario,
}

/// Public Azure DNS zones that exist before anything runs (the zone of a cluster's
/// `baseDomain`, which HyperShift requires and never creates). Seeded at start when
/// missing, untagged (not any run's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsZoneSeed {
    /// Subscription holding the zone.
    pub subscription: String,
    /// Its resource group (created with it when missing).
    pub resource_group: String,
    /// The zone name, a domain like `hcp.example.com`.
    pub domain: String,
}

/// Subscription of seeded zones when none is named: the guest subscription of
/// `examples/cluster.yaml` and of the end-to-end tests' cluster files.
pub const DEFAULT_DNS_ZONE_SUBSCRIPTION: &str = "11111111-2222-3333-4444-555555555555";
/// Resource group of seeded zones when none is named.
pub const DEFAULT_DNS_ZONE_RESOURCE_GROUP: &str = "hcp-dns";
/// The base domain of `examples/cluster.yaml`, seeded by `simulator serve` by default.
pub const DEFAULT_DNS_ZONE: &str = "hcp.example.com";

impl DnsZoneSeed {
    /// Parses `--dns-zone` values: `<domain>[@[<subscription>/]<resourceGroup>]`
    /// (defaults [`DEFAULT_DNS_ZONE_SUBSCRIPTION`], [`DEFAULT_DNS_ZONE_RESOURCE_GROUP`]).
    ///
    /// # Errors
    /// An empty domain, group or subscription.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (domain, at) = match s.split_once('@') {
            Some((d, rest)) => (d, Some(rest)),
            None => (s, None),
        };
        let (subscription, resource_group) = match at {
            None => (
                DEFAULT_DNS_ZONE_SUBSCRIPTION,
                DEFAULT_DNS_ZONE_RESOURCE_GROUP,
            ),
            Some(rest) => match rest.split_once('/') {
                Some((sub, rg)) => (sub, rg),
                None => (DEFAULT_DNS_ZONE_SUBSCRIPTION, rest),
            },
        };
        let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        if !domain.contains('.') || subscription.is_empty() || resource_group.is_empty() {
            return Err(format!(
                "`{s}`: expected <domain>[@[<subscription>/]<resourceGroup>], e.g. hcp.example.com@hcp-dns"
            ));
        }
        Ok(Self {
            subscription: subscription.to_string(),
            resource_group: resource_group.to_string(),
            domain,
        })
    }

    /// The zone of `examples/cluster.yaml` ([`DEFAULT_DNS_ZONE`]).
    pub fn example() -> Self {
        Self {
            subscription: DEFAULT_DNS_ZONE_SUBSCRIPTION.to_string(),
            resource_group: DEFAULT_DNS_ZONE_RESOURCE_GROUP.to_string(),
            domain: DEFAULT_DNS_ZONE.to_string(),
        }
    }
}

/// The HyperShift operator version simulated by default (the project's target).
pub const DEFAULT_HYPERSHIFT_VERSION: &str = "4.22";

/// `(major, minor)` of a version like `4.22`, `4.22.0` or `4.22.0-multi`.
pub fn minor_version(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split(['.', '-']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// The HyperShift operator's `--private-platform` flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrivatePlatform {
    /// `--private-platform Azure`.
    Azure,
    /// No flag (HyperShift's default `None`).
    #[default]
    None,
}

impl std::str::FromStr for PrivatePlatform {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "azure" => Ok(Self::Azure),
            "none" => Ok(Self::None),
            _ => Err(format!("`{s}`: expected azure or none")),
        }
    }
}

/// The management cluster's platform.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManagementPlatform {
    /// OpenShift: the Route API (`route.openshift.io/v1`) is served.
    #[default]
    OpenShift,
    /// AKS: no Route API.
    Aks,
}

impl std::str::FromStr for ManagementPlatform {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "openshift" => Ok(Self::OpenShift),
            "aks" => Ok(Self::Aks),
            _ => Err(format!("`{s}`: expected openshift or aks")),
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            time_scale: 0.01,
            seed: 1,
            principal_not_found_for: secs(30),
            rejected_connection_blocks_pls_delete: true,
            throttle: ThrottleConfig::default(),
            crds_dir: None,
            specs_dir: None,
            state_file: None,
            persist_every: None,
            management_subscription: "00000000-0000-0000-0000-00000000a0a0".to_string(),
            management_resource_group: "hcp-management".to_string(),
            management_location: "eastus".to_string(),
            management_vnet: "management-vnet".to_string(),
            tenant_id: "00000000-0000-0000-0000-0000000000e1".to_string(),
            list_page_size: 5,
            latency: LatencyModel::default(),
            private_platform: PrivatePlatform::default(),
            management_platform: ManagementPlatform::default(),
            hypershift_version: DEFAULT_HYPERSHIFT_VERSION.to_string(),
            dns_zones: Vec::new(),
            scenario: crate::preflight::Scenario::default(),
        }
    }
}

impl SimConfig {
    /// Realistic Azure timings (scale 1.0) and a replication delay of two minutes, for
    /// benchmarks and rehearsals that want minutes-long operations.
    pub fn realistic() -> Self {
        Self {
            time_scale: 1.0,
            principal_not_found_for: secs(120),
            list_page_size: 100,
            ..Self::default()
        }
    }

    /// Scaled wall-clock duration of a model duration, in milliseconds.
    pub fn scaled_ms(&self, model: Duration) -> u64 {
        let ms = model.as_secs_f64() * 1000.0 * self.time_scale;
        if ms.is_finite() && ms > 0.0 {
            ms.round() as u64
        } else {
            0
        }
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if !(self.time_scale.is_finite() && self.time_scale >= 0.0) {
            return Err(Error::Config(format!(
                "time scale must be a non-negative number, got {}",
                self.time_scale
            )));
        }
        if self.list_page_size == 0 {
            return Err(Error::Config("list_page_size must be at least 1".into()));
        }
        Ok(())
    }
}
