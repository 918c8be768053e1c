//! The simulator's whole mutable world, and its persistence.
//!
//! One [`State`] value holds ARM resources, long-running operations, Kubernetes objects,
//! blobs and the simulated operator's bookkeeping. It is serialisable so `--state FILE`
//! can write it after every mutation (temp file + rename, so a crash never leaves half a
//! file) and a restarted simulator continues where the old one stopped. Timestamps are
//! simulator-clock milliseconds (wall clock at start + tokio time since), which stay
//! meaningful across a restart.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;

/// Provisioning state the simulator tracks per ARM resource; rendered into
/// `properties.provisioningState` for types that have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Prov {
    Creating,
    Updating,
    Succeeded,
    Failed,
    Deleting,
}

impl Prov {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Prov::Creating => "Creating",
            Prov::Updating => "Updating",
            Prov::Succeeded => "Succeeded",
            Prov::Failed => "Failed",
            Prov::Deleting => "Deleting",
        }
    }
}

/// One stored ARM resource (including child resources such as subnets, which are stored
/// separately and folded into their parent's body when rendered).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ArmResource {
    /// Canonical id (`/subscriptions/{s}/resourceGroups/{rg}/providers/...`).
    pub id: String,
    /// Canonical type, e.g. `Microsoft.Network/virtualNetworks/subnets`.
    pub rtype: String,
    pub name: String,
    /// Lower-cased id of the scope or parent resource this resource lives under (the
    /// resource group for top-level resources, the VNet for a subnet, the scope for a role
    /// assignment); lists select by it.
    pub parent: String,
    /// The stored body: the client's last PUT body plus generated fields.
    pub body: Value,
    pub etag: String,
    pub prov: Prov,
    pub created_seq: u64,
    pub created_ms: u64,
    /// Operation currently running against this resource, if any.
    pub op: Option<String>,
    /// Simulator-only bookkeeping never rendered on the wire (resolved PLS ids, NIC id,
    /// allocated IPs, storage keys).
    #[serde(default)]
    pub internal: Value,
}

/// What a long-running operation does when it completes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum OpKind {
    Put { resource_id: String },
    Delete { resource_id: String },
}

/// Final outcome of an operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum OpOutcome {
    Succeeded,
    Failed {
        status: u16,
        code: String,
        message: String,
    },
}

/// A long-running ARM operation, polled through its `Azure-AsyncOperation` or `Location`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Operation {
    pub id: String,
    pub kind: OpKind,
    pub start_ms: u64,
    pub done_ms: u64,
    /// Set when the operation has completed.
    pub outcome: Option<OpOutcome>,
    /// Failure injected by a fault rule, applied when the operation completes.
    pub inject_failure: Option<(String, String)>,
}

/// One stored blob.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Blob {
    pub content_type: String,
    /// Base64 of the content, so the state file stays JSON.
    pub data_b64: String,
    pub etag: String,
    pub modified_ms: u64,
}

/// Per-HostedCluster bookkeeping of the simulated HyperShift operator.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct HcSim {
    pub seen_ms: u64,
    pub router_ip: Option<String>,
    pub lb_id: Option<String>,
    /// The private router's frontend on the shared internal load balancer (`None` in
    /// state written before the load balancer was shared: then `lb_id` is this cluster's own).
    #[serde(default)]
    pub fe_id: Option<String>,
    /// The control plane's Services exist (router, private router, API server).
    #[serde(default)]
    pub services: bool,
    /// Public IP of the public `router` Service (a Route API server with a hostname) or of
    /// the `kube-apiserver` LoadBalancer Service (public topologies).
    #[serde(default)]
    pub public_ip: Option<String>,
    pub available: bool,
    pub delete_seen_ms: Option<u64>,
    /// Since when every NodePool of the cluster is Ready (the rollout clock).
    #[serde(default)]
    pub pools_ready_ms: Option<u64>,
    /// The release rolled out (`completionTime` set).
    #[serde(default)]
    pub rolled_out: bool,
    /// Since when the control plane has been upgrading to `status.version.desired` (the
    /// `Partial` entry at `history[0]`), once the first release rolled out
    /// (`operator::upgrade`).
    #[serde(default)]
    pub upgrade_ms: Option<u64>,
}

/// The `*.apps` record sets the guest's ingress operator wrote for one HostedCluster
/// (`guest`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct GuestDnsSim {
    /// Lower-cased ids of the record sets written.
    #[serde(default)]
    pub records: Vec<String>,
    /// Zones that could not be written (no zone id, or no such zone).
    #[serde(default)]
    pub missing: Vec<String>,
    /// Records removed by the cleanup on deletion.
    #[serde(default)]
    pub cleaned: bool,
}

/// What the simulated guest cluster's cloud controller made in Azure for one
/// HostedCluster (`guest_cloud`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct GuestCloudSim {
    /// Lower-cased id of the NSG the rules were added to.
    pub nsg: Option<String>,
    /// Names of the security rules it added there.
    pub rules: Vec<String>,
    /// The cleanup ran (rules removed, `CloudResourcesDestroyed=True`).
    pub cleaned: bool,
    /// Lower-cased id of a Private guest's ingress internal load balancer.
    #[serde(default)]
    pub ilb: Option<String>,
    /// Lower-cased ids of the storage the guest's operators made in the managed group (the
    /// image registry's storage account, a persistent volume's disk).
    #[serde(default)]
    pub storage: Vec<String>,
}

/// Per-NodePool bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct NpSim {
    pub seen_ms: u64,
    pub ready: bool,
    pub delete_seen_ms: Option<u64>,
    /// The machine template the pool's machines last completed a rollout to (HyperShift's
    /// `hypershift.openshift.io/nodePoolPlatformMachineTemplate` annotation).
    #[serde(default)]
    pub template: Option<String>,
    /// The MachineDeployment as HyperShift last reconciled it (CAPI works towards it even
    /// while HyperShift's reconcile is blocked).
    #[serde(default)]
    pub md: Option<MdSim>,
    /// The pool's `metadata.generation` when last seen (0: never), and since when that
    /// generation waits for HyperShift's reconcile (`LatencyModel::nodepool_reconcile`).
    #[serde(default)]
    pub generation: i64,
    #[serde(default)]
    pub generation_ms: Option<u64>,
}

/// The spec of a NodePool's MachineDeployment (`nodepool/capi.go`
/// `reconcileMachineDeployment`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MdSim {
    pub replicas: u32,
    pub template: String,
    pub version: String,
    /// The config hash of its machines' user data (`nodepool::config_hash`).
    #[serde(default)]
    pub config: String,
    /// The rolling update's resolved `maxSurge` and `maxUnavailable`.
    pub max_surge: u32,
    pub max_unavailable: u32,
    /// Since when an autoscaled pool has run more machines than its minimum with no load
    /// (the cluster autoscaler scales it down `scale-down-unneeded-time` later).
    #[serde(default)]
    pub unneeded_ms: Option<u64>,
}

/// One CAPI Machine of a NodePool and the Azure resources CAPZ made for it (`machines`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MachineSim {
    /// Machine name, also the VM's (`<nodepool>-<machineset suffix>-<suffix>`).
    pub name: String,
    /// `<namespace>/<name>` of the HostedCluster (its CAPI Cluster).
    pub cluster: String,
    /// The machine template it was created from.
    pub template: String,
    /// The OpenShift version it runs (`""` when the release image names none).
    pub version: String,
    /// The pool's config hash it was created with (`nodepool::config_hash`; `""` in state
    /// written before configs were modelled, or when created while the config was unknown:
    /// such a machine is taken to be at the first known config).
    #[serde(default)]
    pub config: String,
    /// VM size and the vCPUs it counts against the regional quota.
    pub size: String,
    pub cores: u32,
    /// Lower-cased subscription and location whose quota it counts against.
    pub sub: String,
    pub location: String,
    /// Lower-cased ids of the VM, its NIC and its OS disk (`None`: not in ARM — the
    /// cluster's managed resource group is outside the simulation, or the VM PUT failed).
    pub vm: Option<String>,
    pub nic: Option<String>,
    pub disk: Option<String>,
    /// When the VM was created (the node joins `nodepool_ready` later).
    pub created_ms: u64,
    /// Its node joined the cluster (it counts as available from then on).
    pub joined: bool,
    /// Deletion requested at (drain, then the VM, NIC and disk go `nodepool_delete` later).
    pub deleting_ms: Option<u64>,
    /// Why the VM could not be created (CAPZ's `VMRunning` message); retried every tick.
    pub failed: Option<String>,
}

impl MachineSim {
    /// The VM runs (created, not refused).
    pub(crate) fn running(&self) -> bool {
        self.failed.is_none()
    }
}

/// Per-HostedCluster bookkeeping of the simulated private-link controllers
/// (`privatelink_controllers`). The simulator has no HostedControlPlane object: its
/// finalizer and its deletion are these flags.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct PlsCtrlSim {
    /// The HostedControlPlane carries the CPO's `azure-pls-endpoint-cleanup` finalizer.
    pub hcp_finalizer: bool,
    /// The HostedControlPlane is gone, and the control-plane operator with it.
    pub hcp_gone: bool,
    /// The HyperShift operator's PLS controller requeued this cluster until then.
    pub ho_next_ms: u64,
    /// The `private-router` Service's resourceVersion the observer last reconciled.
    #[serde(default)]
    pub observed_router_rv: Option<String>,
}

/// Everything the simulator knows.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct State {
    /// Monotonic creation counter shared by ARM and Kubernetes objects.
    pub created_seq: u64,
    /// Counter mixed into the seed for generated ids (so a reload does not repeat ids).
    pub rng_draws: u64,
    /// ARM resources by lower-cased id.
    pub arm: BTreeMap<String, ArmResource>,
    /// Operations by id.
    pub ops: BTreeMap<String, Operation>,
    /// Next private IP offset per subnet (lower-cased subnet id).
    pub ip_next: BTreeMap<String, u32>,
    /// Kubernetes objects by `<group>/<plural>|<namespace>|<name>`.
    pub kube: BTreeMap<String, KubeEntry>,
    /// Current Kubernetes resourceVersion.
    pub kube_rv: u64,
    /// Blobs by `<account>/<container>/<blob>` (account lower-cased).
    pub blobs: BTreeMap<String, Blob>,
    /// Operator bookkeeping by HostedCluster key `<namespace>/<name>`.
    pub hcs: BTreeMap<String, HcSim>,
    /// Operator bookkeeping by NodePool key.
    pub nps: BTreeMap<String, NpSim>,
    /// CAPI Machines by NodePool key. Kept apart from [`NpSim`]: machines outlive a NodePool
    /// object that vanished without HyperShift's finalizer, until their cluster is deleted.
    #[serde(default)]
    pub machines: BTreeMap<String, Vec<MachineSim>>,
    /// Private-link controller bookkeeping by HostedCluster key.
    #[serde(default)]
    pub pls_ctrl: BTreeMap<String, PlsCtrlSim>,
    /// Per-HostedCluster bookkeeping of the guest's cloud controller (`guest_cloud`).
    #[serde(default)]
    pub guest_cloud: BTreeMap<String, GuestCloudSim>,
    /// Per-HostedCluster records of the guest's ingress operator (`guest`).
    #[serde(default)]
    pub guest_dns: BTreeMap<String, GuestDnsSim>,
    /// Microsoft Graph directory objects: applications, service principals, deleted items
    /// (`graph`).
    #[serde(default)]
    pub graph: crate::graph::GraphState,
    /// Key Vault data planes (secrets, certificates) and soft-deleted vaults (`keyvault`).
    #[serde(default)]
    pub keyvault: crate::keyvault::KvState,
    /// Secrets Store CSI volumes of ARO HCP control-plane pods, by
    /// `<cp namespace>/<SecretProviderClass>` (`aro_hcp`).
    #[serde(default)]
    pub csi_mounts: BTreeMap<String, crate::aro_hcp::MountSim>,
    /// Recent Kubernetes watch events (not persisted: a watcher of a restarted simulator
    /// gets 410 Gone and re-lists, as with a real API server).
    #[serde(skip)]
    pub kube_events: std::collections::VecDeque<std::sync::Arc<KubeEvent>>,
    /// Oldest resourceVersion a watch can resume from (history before it is gone).
    #[serde(skip)]
    pub kube_history_floor: u64,
}

/// One Kubernetes watch event.
#[derive(Debug, Clone)]
pub(crate) struct KubeEvent {
    pub rv: u64,
    pub kind_key: String,
    pub namespace: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub etype: &'static str,
    pub object: std::sync::Arc<Value>,
}

/// One stored Kubernetes object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KubeEntry {
    /// `<group>/<plural>` (`core/secrets`, `hypershift.openshift.io/hostedclusters`).
    pub kind_key: String,
    pub namespace: String,
    pub name: String,
    /// Shared with the events that carry it and with the controllers that read it: they
    /// run before every request, and copy an object only to change it.
    pub object: std::sync::Arc<Value>,
    pub created_seq: u64,
}

impl State {
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.created_seq += 1;
        self.created_seq
    }

    pub(crate) fn load(path: &Path) -> Result<Option<State>, Error> {
        match std::fs::read(path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|source| Error::ParseState {
                        path: path.to_path_buf(),
                        source,
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(Error::ReadState {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes the state atomically: a reader (or a restarted simulator) sees either the
    /// previous or the new file, never a torn one.
    pub(crate) fn save(&self, path: &Path) -> Result<(), Error> {
        let err = |source| Error::WriteState {
            path: path.to_path_buf(),
            source,
        };
        let bytes = serde_json::to_vec(self).map_err(|e| err(std::io::Error::other(e)))?;
        // Per process: two writers of one file never rename each other's temporary file.
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp.{}", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, bytes).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }
}
