//! update-cluster: make a cluster that exists be what its file says now.
//!
//! The cluster file is the desired state. What the cluster is now is its last applied
//! configuration ([`crate::applied`], journaled by the create or update that made it); the
//! differences are sorted into what can change in place and what cannot ([`classify`]):
//!
//! | Change | Steps | Undo |
//! |---|---|---|
//! | `allowedSubscriptions` | the HostedCluster's `additionalAllowedSubscriptions`; the Private Link Service's visibility and auto-approval (ours), or a wait until HyperShift applied them (its); then every connection from a subscription no longer allowed rejected and removed | field and lists restored; the removal is a pivot |
//! | a node pool's `replicas` / `autoScaling` / machine template / `autoRepair` / drain timeouts | `k8s.node-pool.update`, one branch per pool, in parallel | the previous size, template and settings |
//! | a new node pool | `k8s.node-pool.apply` (as create-cluster) | deleted |
//! | `releaseImage` | the control plane (a pivot), then the pools in waves of `upgrade.maxParallel` | none: pivots |
//! | a removed node pool | deleted, waiting until its machines are gone (a pivot) | none |
//! | `topology` PublicAndPrivate → Private | `k8s.hosted-cluster.topology` (waits until HyperShift deleted the public `router` Service), then the public A records deleted | none: pivots |
//! | `topology` Private → PublicAndPrivate | the topology (refused when the API server Route has no public hostname), then the public A records at the router's new address; `ExternalDNSReachable` waited for | records deleted, topology put back |
//! | the pull secret's / SSH key's contents | `k8s.cluster-secret.rotate`: the Secret, HyperShift's copy in the control-plane namespace, and (SSH key) every pool's machines replaced | none: pivots (old contents are kept nowhere) |
//!
//! Order: what can be undone first (subscriptions, a switch to PublicAndPrivate, pool sizes
//! and templates, new pools), then the pivots (release, removals, a switch to Private, new
//! secret contents, connection pruning), so a failure before the first
//! pivot unwinds to the cluster as it was, and one after it pauses and never
//! tries to roll a control plane back. A final check waits for the HostedCluster to be
//! `Available` and its release rolled out (which also reads how to reach the cluster).
//!
//! Everything else is refused before anything is journaled ([`Refusal`]): the field, why
//! it cannot change in place, and what to do instead.

use crate::applied::{self, Change};
use crate::config::{ClusterConfig, NodePool, PrivateLinkManager};
use crate::create_cluster::node_pool_input;
use crate::layout::{CLUSTERS_NAMESPACE, Layout};
use crate::workflow::{Admission, Admit, BuildOptions, PreflightKind, WorkflowDef};
use hcp_activities::kube::mgmt::Kind;
use hcp_activities::kube::render;
use hcp_activities::steps::cluster::{
    ApplyNodePool, ConditionInput, DeleteObject, DeleteObjectInput, NodePoolNodeInput,
    RolloutInput, WaitCondition, WaitRollout,
};
use hcp_activities::steps::dns::{
    DeletePublicRecords, EnsurePublicRecords, FindPublicZone, PublicRecordsDeleteInput,
    PublicRecordsInput,
};
use hcp_activities::steps::hosted_cluster::{
    AllowedSubscriptionsInput, ReleaseInput, RotateClusterSecret, RotateSecretInput,
    SetAllowedSubscriptions, SetTopology, SetTopologyPrivate, TopologyInput, UpgradeControlPlane,
};
use hcp_activities::steps::node_pool::{
    PoolManagement, PoolReleaseInput, PoolSettings, PoolUpdateInput, UpdateNodePool,
    UpgradeNodePool,
};
use hcp_activities::steps::pls_access::{
    PlsAccessInput, PlsRef, PruneConnections, SetPlsVisibility,
};
use hcp_activities::steps::private_link::{PeReadInput, ReadPrivateEndpoint};
use hcp_runtime::{DagError, FailurePolicy, NodeOptions, Ref, SagaBuilder, SagaDag};
use serde::Serialize;
use serde_json::Value;

/// Workflow name.
pub const WORKFLOW: &str = "update-cluster";
/// Version of this definition (persisted with each run).
pub const VERSION: u32 = 1;

fn n(s: &str) -> String {
    format!("{WORKFLOW}.{s}")
}

fn o() -> NodeOptions {
    NodeOptions::default()
}

/// update-cluster's own refusals, before anything is asked of the cloud: no cluster to
/// update, nothing to change (nothing journaled), a change that cannot be made in place
/// (each field with why and the fix), a release change the two documents already refuse.
fn admit(a: &Admit<'_>) -> Admission {
    let (Some(by), Some(applied), Some(file)) = (a.state.exists_by(), a.applied, a.file) else {
        return Admission::NoCluster;
    };
    let plan = classify(applied, file);
    if plan.is_empty() {
        return Admission::NothingToChange { applied_by: by.id };
    }
    if !plan.refused.is_empty() {
        return Admission::CannotChangeInPlace {
            changes: plan.changes.len(),
            refused: plan.refused,
        };
    }
    let rows = release_checks(applied, a.cfg);
    let checked = rows.len();
    let failed: Vec<_> = rows
        .into_iter()
        .filter(|r| r.status == hcp_activities::preflight::Status::Fail)
        .collect();
    if failed.is_empty() {
        Admission::Proceed
    } else {
        Admission::ReleaseRefused { failed, checked }
    }
}

/// update-cluster as `start`, `plan`, `preflight` and `drive` see it.
pub static DEF: WorkflowDef = WorkflowDef {
    name: WORKFLOW,
    noun: "Update",
    default_on_failure: FailurePolicy::Unwind,
    forward_only: false,
    destructive: false,
    follows_create: true,
    applies_config: true,
    updates: true,
    removes_cluster: false,
    preflight: PreflightKind::Update,
    summary: "Change a cluster that exists into what its file says now: node pools (add, scale, autoscale, new machine template, remove), the release, allowed subscriptions.",
    admit,
    on_existing: None,
    build,
};

/// A field the file changes that update-cluster will not change in place.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Refusal {
    /// The field, as the differences name it (`network.create.vnetCidr`).
    pub path: String,
    /// Why it cannot change in place.
    pub why: String,
    /// What to do instead.
    pub fix: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}; {}", self.path, self.why, self.fix)
    }
}

/// A pool whose size or machine template changes.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolChange {
    /// As applied.
    pub before: NodePool,
    /// As the file says.
    pub after: NodePool,
    /// Its machine template changes (HyperShift replaces the machines).
    pub template: bool,
    /// Its auto-repair or drain timeouts change (in place: no machine is replaced).
    pub management: bool,
}

/// The differences between the applied configuration and the file, sorted by what
/// update-cluster does with them.
#[derive(Clone, Debug, Default)]
pub struct UpdatePlan {
    /// Every difference, as [`applied::diff`] lists it.
    pub changes: Vec<Change>,
    /// New pools.
    pub added: Vec<NodePool>,
    /// Pools no longer in the file (as applied).
    pub removed: Vec<NodePool>,
    /// Pools whose size or template changes.
    pub changed: Vec<PoolChange>,
    /// `releaseImage`: (applied, file).
    pub release: Option<(String, String)>,
    /// `allowedSubscriptions`: (applied, file).
    pub allowed_subscriptions: Option<(Vec<String>, Vec<String>)>,
    /// `topology` between PublicAndPrivate and Private: (applied, file).
    pub topology: Option<(String, String)>,
    /// The pull secret file's contents changed.
    pub pull_secret: bool,
    /// The SSH key file's contents changed.
    pub ssh_key: bool,
    /// What cannot change in place.
    pub refused: Vec<Refusal>,
}

impl UpdatePlan {
    /// Nothing differs.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// A removed pool and an added pool alike in everything but the name: (removed,
    /// added). A NodePool cannot be renamed (its name is the object's name), so such an
    /// edit deletes every machine of the old pool and makes new ones.
    pub fn renames(&self) -> Vec<(String, String)> {
        let unnamed = |p: &NodePool| {
            let mut p = p.clone();
            p.name.clear();
            p
        };
        let mut taken: Vec<&str> = Vec::new();
        self.removed
            .iter()
            .filter_map(|r| {
                let a = self
                    .added
                    .iter()
                    .find(|a| !taken.contains(&a.name.as_str()) && unnamed(a) == unnamed(r))?;
                taken.push(&a.name);
                Some((r.name.clone(), a.name.clone()))
            })
            .collect()
    }

    /// What this update deletes or replaces, and what of it cannot be undone (the DAG's
    /// pivots): what is shown, and asked, before such a run is journaled.
    pub fn consequences(&self, cluster: &str, dag: &SagaDag) -> Consequences {
        let mut removes = Vec::new();
        for p in &self.removed {
            removes.push(format!(
                "delete NodePool {CLUSTERS_NAMESPACE}/{cluster}-{} and its {} machine{}",
                p.name,
                p.replicas
                    .map_or_else(|| "autoscaled".to_string(), |n| n.to_string()),
                if p.replicas == Some(1) { "" } else { "s" }
            ));
        }
        for c in self.changed.iter().filter(|c| c.template) {
            removes.push(format!(
                "replace every machine of pool {} (its machine template changes)",
                c.after.name
            ));
        }
        if self.ssh_key {
            removes.push("replace every machine of every pool (the SSH key changes)".into());
        }
        if let Some((from, to)) = &self.topology
            && to == "Private"
        {
            removes.push(format!(
                "delete the public endpoint ({from} → {to}): HyperShift's public router and the public api-{cluster}/oauth-{cluster} records"
            ));
        }
        if let Some((before, after)) = &self.allowed_subscriptions {
            let gone: Vec<&str> = before
                .iter()
                .filter(|s| !after.contains(s))
                .map(String::as_str)
                .collect();
            if !gone.is_empty() {
                removes.push(format!(
                    "reject, then remove, every private endpoint connection from {}",
                    gone.join(", ")
                ));
            }
        }
        let changes = usize::from(self.release.is_some())
            + usize::from(self.allowed_subscriptions.is_some())
            + usize::from(self.topology.is_some())
            + usize::from(self.pull_secret)
            + usize::from(self.ssh_key)
            + self.changed.len();
        Consequences {
            add: self.added.len(),
            change: changes,
            delete: self.removed.len(),
            removes,
            renames: self.renames(),
            ..Consequences::of_dag(dag)
        }
    }
}

/// What a run deletes, replaces or cannot undo: shown, and asked on a terminal, before it
/// is journaled; with nobody to ask it needs `--yes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Consequences {
    /// Pools (or other objects) it creates.
    pub add: usize,
    /// Things it changes in place.
    pub change: usize,
    /// Pools it deletes.
    pub delete: usize,
    /// What it deletes or replaces, one sentence each.
    pub removes: Vec<String>,
    /// Its pivots: (step, why it cannot be undone).
    pub pivots: Vec<(String, String)>,
    /// Pools that look renamed: (removed, added).
    pub renames: Vec<(String, String)>,
}

impl Consequences {
    /// The pivots of any DAG (a repair has no differences to count).
    pub fn of_dag(dag: &SagaDag) -> Consequences {
        Consequences {
            pivots: dag
                .nodes
                .iter()
                .filter_map(|n| n.pivot.clone().map(|why| (n.name.clone(), why)))
                .collect(),
            ..Consequences::default()
        }
    }

    /// Nothing is deleted, replaced or beyond undo: no need to ask.
    pub fn harmless(&self) -> bool {
        self.removes.is_empty() && self.pivots.is_empty()
    }

    /// `1 to add, 0 to change, 1 to delete (⚑ 1 cannot be undone)`, as terraform sums up.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} to add, {} to change, {} to delete",
            self.add, self.change, self.delete
        );
        if !self.pivots.is_empty() {
            s.push_str(&format!(" (⚑ {} cannot be undone)", self.pivots.len()));
        }
        s
    }

    /// The lines shown before the question (no trailing newline).
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        for r in &self.removes {
            out.push(format!("  - {r}"));
        }
        for (node, why) in &self.pivots {
            out.push(format!("  ⚑ {node}: {why}"));
        }
        for (from, to) in &self.renames {
            out.push(format!(
                "  ! pool `{from}` is removed and pool `{to}` added with the same settings: is this a rename? A NodePool cannot be renamed, so this deletes every machine of `{from}` and makes new ones for `{to}`; to keep them, keep `name: {from}` in the file"
            ));
        }
        out.push(self.summary());
        out.join("\n")
    }
}

/// Fields of a pool that reach its machine template (`spec.platform.azure`): HyperShift
/// rolls new machines (`UpdatingPlatformMachineTemplate`).
const TEMPLATE_FIELDS: [&str; 8] = [
    "vmSize",
    "osDiskSizeGiB",
    "osDiskStorageAccountType",
    "image",
    "diagnostics",
    "encryptionAtHost",
    "diskEncryptionSetId",
    "ephemeralOsDisk",
];

/// Fields of a pool that change in place without new machines: the health check and the
/// drain timeouts ([`hcp_activities::steps::node_pool::PoolManagement`]).
const MANAGEMENT_FIELDS: [&str; 3] = ["autoRepair", "nodeDrainTimeout", "nodeVolumeDetachTimeout"];

const NEW_CLUSTER: &str = "it cannot change on an existing cluster: keep the applied value, or make a new cluster (`hcp-workflow start delete-cluster --config FILE`, then `start create-cluster` with the new value)";

fn first_segment(path: &str) -> &str {
    path.split(['.', '[']).next().unwrap_or(path)
}

/// Why the top-level field `key` cannot change in place (`None`: it can).
fn immutable(key: &str) -> Option<&'static str> {
    Some(match key {
        "name" => "the cluster's name names the HostedCluster and every Azure resource",
        "infraID" => {
            "every Azure resource name and tag embeds the infra id (HostedCluster CRD: \"infraID is immutable\")"
        }
        "subscription" | "tenant" | "location" | "cloud" => {
            "the cluster's Azure resources live there; they cannot move"
        }
        "baseDomain" => "HostedCluster CRD: \"baseDomain is immutable\"",
        "network" | "networking" => {
            "the VNet, subnet, NSG and the cluster/service/machine networks are fixed at creation (HostedCluster CRD: \"clusterNetwork is immutable\", \"machineNetwork is immutable\", \"serviceNetwork is immutable\")"
        }
        "identities" => {
            "the workload identities are federated with this cluster's service accounts at creation"
        }
        "oidcIssuer" => "HostedCluster CRD: \"issuerURL is immutable\"",
        "persistentResourceGroup" | "resourceGroupTags" | "dnsZoneResourceGroup" => {
            "the resource groups were created (or chosen) with the cluster"
        }
        "managementCluster" => "the cluster's control plane runs on that management cluster",
        "privateLink" => {
            "who makes the private link (hcp-workflow or HyperShift) is fixed at creation"
        }
        "controlPlane" => {
            "update-cluster does not change control-plane settings yet (several are immutable in HyperShift: \"fips is immutable\", \"ControllerAvailabilityPolicy is immutable\", \"Etcd PV storage size is immutable\")"
        }
        "topology" => {
            "HostedCluster CRD: \"transitions between Public and non-Public topology are not supported\" (only PublicAndPrivate ↔ Private can change in place)"
        }
        _ => return None,
    })
}

/// Why pool field `field` cannot change in place (`None`: it can).
fn immutable_pool_field(field: &str) -> Option<&'static str> {
    Some(match field {
        "arch" => "NodePool CRD: \"Arch is immutable\"",
        "subnetId" => "NodePool CRD: \"SubnetID is immutable\"",
        "upgradeType" => "NodePool CRD: \"UpgradeType is immutable\"",
        "zone" => "a pool's machines stay in the availability zone they were created in",
        _ => return None,
    })
}

fn pools_of(doc: &Value) -> Vec<NodePool> {
    doc.get("nodePools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| serde_json::from_value(p.clone()).ok())
        .collect()
}

fn strings_of(doc: &Value, key: &str) -> Vec<String> {
    doc.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Sort the differences from `applied` to `file` (both [`applied::document`]s).
pub fn classify(applied: &Value, file: &Value) -> UpdatePlan {
    let changes = applied::diff(applied, file);
    let mut plan = UpdatePlan {
        changes: changes.clone(),
        ..UpdatePlan::default()
    };
    let (before_pools, after_pools) = (pools_of(applied), pools_of(file));
    let find = |list: &[NodePool], name: &str| list.iter().find(|p| p.name == name).cloned();
    for c in &changes {
        let key = first_segment(&c.path);
        match key {
            "nodePools" => {
                let rest = c.path.trim_start_matches("nodePools[");
                let (name, field) = match rest.split_once(']') {
                    Some((name, field)) => (name, field.trim_start_matches('.')),
                    None => (rest, ""),
                };
                let field = first_segment(field);
                match (find(&before_pools, name), find(&after_pools, name)) {
                    (None, Some(p)) => plan.added.push(p),
                    (Some(p), None) => plan.removed.push(p),
                    (Some(before), Some(after)) => {
                        if let Some(why) = immutable_pool_field(field) {
                            plan.refused.push(Refusal {
                                path: c.path.clone(),
                                why: why.to_string(),
                                fix: format!(
                                    "keep the applied value, or add a pool with a new name and remove `{name}`"
                                ),
                            });
                            continue;
                        }
                        let template = TEMPLATE_FIELDS.contains(&field);
                        if template && before.upgrade_type.as_deref() == Some("InPlace") {
                            // HyperShift only swaps an InPlace pool's MachineSet template
                            // reference (`nodepool/capi.go` `reconcileMachineSet`): no running
                            // machine would change, yet the pool would report it done.
                            plan.refused.push(Refusal {
                                path: c.path.clone(),
                                why: "pool `".to_string() + name + "` has upgradeType InPlace: HyperShift applies a machine-template change only to machines created after it (docs/content/reference/nodepool-rollouts.md, \"InPlace\"), so none of the running machines would change",
                                fix: format!(
                                    "keep the applied value, or add a pool with a new name and the new value, then remove `{name}`"
                                ),
                            });
                            continue;
                        }
                        let management = MANAGEMENT_FIELDS.contains(&field);
                        match plan.changed.iter_mut().find(|x| x.after.name == name) {
                            Some(x) => {
                                x.template |= template;
                                x.management |= management;
                            }
                            None => plan.changed.push(PoolChange {
                                before,
                                after,
                                template,
                                management,
                            }),
                        }
                    }
                    (None, None) => {}
                }
            }
            "releaseImage" => {
                plan.release = Some((
                    c.applied.as_str().unwrap_or_default().to_string(),
                    c.file.as_str().unwrap_or_default().to_string(),
                ));
            }
            "topology" => {
                let (from, to) = (
                    c.applied.as_str().unwrap_or("Public").to_string(),
                    c.file.as_str().unwrap_or("Public").to_string(),
                );
                let private = |t: &str| t == "PublicAndPrivate" || t == "Private";
                if private(&from) && private(&to) {
                    plan.topology = Some((from, to));
                } else {
                    plan.refused.push(Refusal {
                        path: c.path.clone(),
                        why: immutable("topology").unwrap_or_default().to_string(),
                        fix: NEW_CLUSTER.to_string(),
                    });
                }
            }
            "pullSecret" => plan.pull_secret = true,
            "sshKey" => plan.ssh_key = true,
            "allowedSubscriptions" => {
                plan.allowed_subscriptions = Some((
                    strings_of(applied, "allowedSubscriptions"),
                    strings_of(file, "allowedSubscriptions"),
                ));
            }
            other => plan.refused.push(Refusal {
                path: c.path.clone(),
                why: immutable(other)
                    .unwrap_or("update-cluster cannot change this field")
                    .to_string(),
                fix: NEW_CLUSTER.to_string(),
            }),
        }
    }
    plan
}

/// `4.22.3` of a release image tagged `…:4.22.3-multi` (a digest reference has no version
/// in its name: `None`).
pub fn release_version(image: &str) -> Option<String> {
    if image.contains('@') {
        return None;
    }
    let tag = image.rsplit_once(':')?.1;
    let v = tag.split('-').next()?;
    let parts: Vec<&str> = v.split('.').collect();
    (parts.len() >= 2 && parts.iter().all(|p| p.parse::<u64>().is_ok())).then(|| v.to_string())
}

/// The settings `k8s.node-pool.update` writes for the pool of `c`: the template and the
/// management settings as create-cluster renders them.
fn pool_settings(cfg: &ClusterConfig, l: &Layout, c: &PoolChange) -> PoolSettings {
    let p = &c.after;
    let input = node_pool_input(cfg, l, p);
    let platform = c.template.then(|| {
        render::node_pool(&input)
            .pointer("/spec/platform/azure")
            .cloned()
            .unwrap_or(Value::Null)
    });
    PoolSettings {
        replicas: if p.auto_scaling.is_some() {
            None
        } else {
            p.replicas
        },
        auto_scaling: p.auto_scaling.map(|a| (a.min, a.max)),
        platform,
        management: c.management.then(|| PoolManagement::rendered(&input)),
    }
}

/// Build the update DAG for `cfg` over the applied configuration in `opts.applied`.
///
/// # Errors
/// A definition error (a bug), or [`DagError::Empty`] when nothing changes (`start`
/// says "nothing to change" before it builds).
pub fn build(cfg: &ClusterConfig, l: &Layout, opts: BuildOptions<'_>) -> Result<SagaDag, DagError> {
    let file = applied::document(cfg);
    // Without an applied configuration (`preflight update-cluster`, which reads no
    // journal): the file against itself, nothing to change.
    let applied = opts.applied.cloned().unwrap_or_else(|| file.clone());
    let plan = classify(&applied, &file);
    build_plan(cfg, l, &plan)
}

/// The DAG of an [`UpdatePlan`] (its refusals are left out: `start` refuses them first).
///
/// # Errors
/// A definition error (a bug).
pub fn build_plan(cfg: &ClusterConfig, l: &Layout, plan: &UpdatePlan) -> Result<SagaDag, DagError> {
    let mut b = SagaBuilder::new(WORKFLOW, VERSION);
    let u = Update::new(cfg, l, plan);
    // 1. What can be undone: subscriptions, a switch to PublicAndPrivate, pool sizes and
    //    templates, new pools.
    u.allowed_subscriptions(&mut b)?;
    u.to_public(&mut b)?;
    u.node_pools(&mut b)?;
    // 2. Pivots: the release (control plane, then the pools in waves), removed pools, a
    //    switch to Private, rotated secrets, connections from subscriptions no longer
    //    allowed.
    u.release(&mut b)?;
    u.removed_pools(&mut b)?;
    u.to_private(&mut b)?;
    u.secrets(&mut b)?;
    u.connections(&mut b)?;
    // 3. The cluster is available again, on its release.
    u.available(&mut b)?;
    let mut dag = b.build()?;
    crate::budgets::apply(&mut dag, &cfg.wait_budgets);
    Ok(dag)
}

/// What every stage of an update's DAG reads: the file, the names, the plan, and what
/// follows from them.
struct Update<'a> {
    cfg: &'a ClusterConfig,
    l: &'a Layout,
    plan: &'a UpdatePlan,
    /// The topology has a private link (Private, PublicAndPrivate).
    private: bool,
    /// HyperShift's controllers make the private link (`privateLink.managedBy: hypershift`).
    hypershift_link: bool,
    /// Who may see and connect to the Private Link Service.
    access: PlsAccessInput,
    /// The public hostnames a PublicAndPrivate cluster's services carry (create-cluster
    /// rendered them; `spec.services` is immutable, so they outlive a switch to Private).
    public_names: Vec<String>,
    /// The update switches the topology to PublicAndPrivate.
    to_public: bool,
}

impl<'a> Update<'a> {
    fn new(cfg: &'a ClusterConfig, l: &'a Layout, plan: &'a UpdatePlan) -> Self {
        let hypershift_link = cfg.private_link.managed_by == PrivateLinkManager::Hypershift;
        let pls = if hypershift_link {
            PlsRef::HyperShift {
                mgmt: l.mgmt.clone(),
                namespace: CLUSTERS_NAMESPACE.into(),
                name: l.name.clone(),
            }
        } else {
            PlsRef::Ours {
                id: l.pls_id.clone(),
            }
        };
        let access = PlsAccessInput {
            azure: l.mgmt_azure.clone(),
            owner: l.owner.clone(),
            pls,
            subscriptions: crate::create_cluster::pls_subscriptions(cfg, l),
        };
        let public_names = render::public_hostnames(
            &l.name,
            &cfg.base_domain,
            render::Topology::PublicAndPrivate,
            false,
        )
        .map(|h| h.relative(&cfg.base_domain))
        .unwrap_or_default();
        let to_public = plan
            .topology
            .as_ref()
            .is_some_and(|(_, to)| to == "PublicAndPrivate");
        Update {
            cfg,
            l,
            plan,
            private: cfg.topology.uses_private_link(),
            hypershift_link,
            access,
            public_names,
            to_public,
        }
    }

    fn topology_input(&self, to: &str) -> TopologyInput {
        TopologyInput {
            mgmt: self.l.mgmt.clone(),
            owner: self.l.owner.clone(),
            namespace: CLUSTERS_NAMESPACE.into(),
            name: self.l.name.clone(),
            topology: to.to_string(),
        }
    }

    /// The HostedCluster's allowed subscriptions, then the service's visibility.
    fn allowed_subscriptions(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let (cfg, l) = (self.cfg, self.l);
        if !(self.private && self.plan.allowed_subscriptions.is_some()) {
            return Ok(());
        }
        b.stage("allowed-subscriptions");
        let hc = b.add::<SetAllowedSubscriptions>(
            n("allowed-subscriptions.hosted-cluster"),
            &AllowedSubscriptionsInput {
                mgmt: l.mgmt.clone(),
                owner: l.owner.clone(),
                namespace: CLUSTERS_NAMESPACE.into(),
                name: l.name.clone(),
                subscriptions: cfg.allowed_subscriptions.clone(),
            },
            o(),
        )?;
        b.add::<SetPlsVisibility>(n("allowed-subscriptions.pls"), &self.access, o().after(&hc))?;
        Ok(())
    }

    /// To PublicAndPrivate (undoable): the public router comes back, its A records are
    /// (re)written by this run (the undo deletes them, then writes the topology back).
    fn to_public(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let (cfg, l) = (self.cfg, self.l);
        if !self.to_public {
            return Ok(());
        }
        b.stage("topology");
        let zone = b.add::<FindPublicZone>(
            n("topology.public-dns-zone"),
            &crate::create_cluster::public_zone_input(cfg, l, false),
            o(),
        )?;
        let hc = b.add::<SetTopology>(
            n("topology.hosted-cluster"),
            &self.topology_input("PublicAndPrivate"),
            o(),
        )?;
        b.add::<EnsurePublicRecords>(
            n("topology.public-dns"),
            &PublicRecordsInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                zone: zone.clone(),
                names: self.public_names.clone(),
                hosted_cluster: hc.clone(),
            },
            o().after(&hc).after(&zone),
        )?;
        Ok(())
    }

    /// Pool sizes and templates changed in place; new pools (on the current release).
    fn node_pools(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let (cfg, l, plan) = (self.cfg, self.l, self.plan);
        let upgrade = plan.release.as_ref();
        if !plan.changed.is_empty() || (!plan.added.is_empty() && upgrade.is_none()) {
            b.stage("nodepools");
            for c in &plan.changed {
                b.add::<UpdateNodePool>(
                    n(&format!("nodepools.{}", c.after.name)),
                    &PoolUpdateInput {
                        mgmt: l.mgmt.clone(),
                        owner: l.owner.clone(),
                        namespace: CLUSTERS_NAMESPACE.into(),
                        name: format!("{}-{}", l.name, c.after.name),
                        desired: pool_settings(cfg, l, c),
                    },
                    o(),
                )?;
            }
            if upgrade.is_none() {
                add_pools(b, cfg, l, &plan.added)?;
            }
        }
        Ok(())
    }

    /// The release: the control plane, then the pools in waves of `upgrade.maxParallel`;
    /// pools added by this update start on the new release once the control plane runs it.
    fn release(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let (cfg, l, plan) = (self.cfg, self.l, self.plan);
        let upgrade = plan.release.as_ref();
        if let Some((_, image)) = upgrade {
            b.stage("release");
            b.add::<UpgradeControlPlane>(
            n("release.control-plane"),
            &ReleaseInput {
                mgmt: l.mgmt.clone(),
                owner: l.owner.clone(),
                namespace: CLUSTERS_NAMESPACE.into(),
                name: l.name.clone(),
                release_image: image.clone(),
                version: cfg
                    .release_version
                    .clone()
                    .or_else(|| release_version(image)),
            },
            o().pivot(
                "HyperShift does not roll a control plane back: a release, once rolled out, stays",
            ),
        )?;
            b.stage("release-nodepools");
            let wave = cfg.upgrade.max_parallel.unwrap_or(1).max(1) as usize;
            let mut pools: Vec<&NodePool> = cfg
                .node_pools
                .iter()
                .filter(|p| !plan.added.iter().any(|a| a.name == p.name))
                .collect();
            pools.sort_by(|a, b| a.name.cmp(&b.name));
            let mut refs: Vec<Ref<hcp_activities::steps::node_pool::PoolReleaseOutput>> =
                Vec::new();
            for (i, p) in pools.iter().enumerate() {
                let mut opts = o()
                    .pivot("a node pool's machines, once on the new release, are not rolled back");
                if i >= wave {
                    opts = opts.after(&refs[i - wave]);
                }
                refs.push(
                    b.add::<UpgradeNodePool>(
                        n(&format!("release-nodepools.{}", p.name)),
                        &PoolReleaseInput {
                            mgmt: l.mgmt.clone(),
                            owner: l.owner.clone(),
                            namespace: CLUSTERS_NAMESPACE.into(),
                            name: format!("{}-{}", l.name, p.name),
                            cluster: l.name.clone(),
                            release_image: image.clone(),
                            version: cfg
                                .release_version
                                .clone()
                                .or_else(|| release_version(image)),
                        },
                        opts,
                    )?,
                );
            }
            if !plan.added.is_empty() {
                // New pools start on the new release, once the control plane runs it.
                b.stage("nodepools-added");
                add_pools(b, cfg, l, &plan.added)?;
            }
        }
        Ok(())
    }

    /// Removed pools are deleted (a pivot: their machines go).
    fn removed_pools(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let (l, plan) = (self.l, self.plan);
        if !plan.removed.is_empty() {
            b.stage("nodepools-removed");
            for p in &plan.removed {
                b.add::<DeleteObject>(
                    n(&format!("nodepools-removed.{}", p.name)),
                    &DeleteObjectInput {
                        mgmt: l.mgmt.clone(),
                        owner: l.owner.clone(),
                        kind: Kind::NodePool,
                        namespace: CLUSTERS_NAMESPACE.into(),
                        names: vec![format!("{}-{}", l.name, p.name)],
                        persistent: false,
                        cleanup_cloud_resources: false,
                        hypershift_private_link: None,
                    },
                    o().pivot(
                        "a removed node pool's machines are deleted; they cannot be brought back",
                    ),
                )?;
            }
        }
        Ok(())
    }

    /// To Private: HyperShift deletes the public router (its address is released), then the
    /// public A records that pointed at it go.
    fn to_private(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let (cfg, l, plan) = (self.cfg, self.l, self.plan);
        if plan.topology.is_none() || self.to_public {
            return Ok(());
        }
        b.stage("topology");
        let hc = b.add::<SetTopologyPrivate>(
            n("topology.hosted-cluster"),
            &self.topology_input("Private"),
            o().pivot("the public router's load balancer address is released; switching back to PublicAndPrivate gets a new one"),
        )?;
        let zone = b.add::<FindPublicZone>(
            n("topology.public-dns-zone"),
            &crate::create_cluster::public_zone_input(cfg, l, true),
            o(),
        )?;
        // `spec.services` is immutable: the API server and OAuth keep their public
        // hostnames, the kubeconfig's among them. Before their public records go, their
        // own private zones answer them in the guest VNet (a cluster made before those
        // zones existed gets them here; ensuring existing ones changes nothing).
        let mut records_after = o().after(&hc).after(&zone);
        if !self.hypershift_link {
            let pe = b.add::<ReadPrivateEndpoint>(
                n("topology.private-endpoint"),
                &PeReadInput {
                    azure: l.azure.clone(),
                    id: l.pe_id.clone(),
                },
                o(),
            )?;
            let written = crate::create_cluster::endpoint_zones(
                b,
                l,
                (WORKFLOW, "topology"),
                &pe,
                None,
                false,
            )?;
            records_after.after.extend(written);
        }
        b.add::<DeletePublicRecords>(
            n("topology.public-dns"),
            &PublicRecordsDeleteInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                zone: zone.clone(),
                names: self.public_names.clone(),
            },
            records_after.pivot(
                "the public A records are deleted; switching back to PublicAndPrivate writes new ones",
            ),
        )?;
        Ok(())
    }

    /// The pull secret and SSH key, rotated from the file (pivots: the old ones are kept
    /// nowhere).
    fn secrets(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let (cfg, l, plan) = (self.cfg, self.l, self.plan);
        if plan.pull_secret || plan.ssh_key {
            b.stage("secrets");
            let rotate = |secret: &str,
                          key: &str,
                          file: &std::path::Path,
                          what: &str,
                          cp: &str,
                          pools: Vec<String>| RotateSecretInput {
                mgmt: l.mgmt.clone(),
                owner: l.owner.clone(),
                namespace: CLUSTERS_NAMESPACE.into(),
                cluster: l.name.clone(),
                secret: l.secret(secret),
                key: key.into(),
                file: file.to_path_buf(),
                what: what.into(),
                control_plane_secret: cp.into(),
                pools,
            };
            const GONE: &str = "the previous contents are not kept anywhere (a secret never reaches the journal): there is nothing to put back";
            if plan.pull_secret {
                b.add::<RotateClusterSecret>(
                    n("secrets.pull-secret"),
                    &rotate(
                        "pull-secret",
                        ".dockerconfigjson",
                        &cfg.pull_secret,
                        "pull secret",
                        "pull-secret",
                        Vec::new(),
                    ),
                    o().pivot(GONE),
                )?;
            }
            if plan.ssh_key {
                let pools = cfg
                    .node_pools
                    .iter()
                    .map(|p| format!("{}-{}", l.name, p.name))
                    .collect();
                b.add::<RotateClusterSecret>(
                    n("secrets.ssh-key"),
                    &rotate(
                        "ssh-key",
                        "id_rsa.pub",
                        &cfg.ssh_key,
                        "SSH public key",
                        "ssh-key",
                        pools,
                    ),
                    o().pivot(GONE),
                )?;
            }
        }
        Ok(())
    }

    /// Connections are pruned only when a subscription lost its access.
    fn connections(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let plan = self.plan;
        let revoked = plan
            .allowed_subscriptions
            .as_ref()
            .is_some_and(|(before, after)| {
                before
                    .iter()
                    .any(|s| !after.iter().any(|a| a.eq_ignore_ascii_case(s)))
            });
        if self.private && revoked {
            b.stage("connections");
            b.add::<PruneConnections>(
            n("connections.prune"),
            &self.access,
            o().pivot("a rejected private endpoint connection cannot be approved back by hcp-workflow: its owner must create it again"),
        )?;
        }
        Ok(())
    }

    /// HostedCluster `Available` (and `ExternalDNSReachable` after a switch to
    /// PublicAndPrivate), then the guest's rollout.
    fn available(&self, b: &mut SagaBuilder) -> Result<(), DagError> {
        let l = self.l;
        b.stage("available");
        b.add::<WaitCondition>(
            n("available.hosted-cluster"),
            &ConditionInput {
                mgmt: l.mgmt.clone(),
                kind: Kind::HostedCluster,
                namespace: CLUSTERS_NAMESPACE.into(),
                name: l.name.clone(),
                condition: "Available".into(),
            },
            o(),
        )?;
        if self.to_public {
            // The control-plane operator resolves the public hostname again (as create-cluster's
            // `available.external-dns`): the records just written are what users will dial.
            b.add::<WaitCondition>(
                n("available.external-dns"),
                &ConditionInput {
                    mgmt: l.mgmt.clone(),
                    kind: Kind::HostedCluster,
                    namespace: CLUSTERS_NAMESPACE.into(),
                    name: l.name.clone(),
                    condition: "ExternalDNSReachable".into(),
                },
                o(),
            )?;
        }
        // The guest's release has rolled out (and how to reach the cluster, for the outcome).
        b.add::<WaitRollout>(
            n("available.rollout"),
            &RolloutInput {
                mgmt: l.mgmt.clone(),
                namespace: CLUSTERS_NAMESPACE.into(),
                name: l.name.clone(),
            },
            o(),
        )?;
        Ok(())
    }
}

fn add_pools(
    b: &mut SagaBuilder,
    cfg: &ClusterConfig,
    l: &Layout,
    pools: &[NodePool],
) -> Result<(), DagError> {
    for p in pools {
        b.add::<ApplyNodePool>(
            n(&format!("nodepools.{}", p.name)),
            &NodePoolNodeInput {
                mgmt: l.mgmt.clone(),
                owner: l.owner.clone(),
                spec: node_pool_input(cfg, l, p),
                reapply: false,
            },
            o(),
        )?;
    }
    Ok(())
}

/// One pool's machines an update adds: `(pool, vmSize, machines, zone, replaces)`.
pub type AddedMachines = (String, String, i64, Option<String>, Option<(String, i64)>);

/// The machines an update adds beyond what runs (for the vCPU quota and VM size rows of
/// its preflight): per pool of the file — all of a new pool, the growth of a scaled one,
/// and, for a pool whose VM size changes, the new set with what it replaces (HyperShift
/// rolls them: new machines surge one at a time before old ones go, so the regional peak
/// is [`hcp_activities::preflight::rolling_peak`], while the new size's family needs all).
pub fn added_machines(applied: &Value, cfg: &ClusterConfig) -> Vec<AddedMachines> {
    let before = pools_of(applied);
    cfg.node_pools
        .iter()
        .filter_map(|p| {
            let want = p.desired_replicas();
            let (extra, replaces) = match before.iter().find(|b| b.name == p.name) {
                None => (want, None),
                Some(b) if b.vm_size != p.vm_size => {
                    (want, Some((b.vm_size.clone(), b.desired_replicas())))
                }
                Some(b) => (want - b.desired_replicas(), None),
            };
            (extra > 0).then(|| {
                (
                    p.name.clone(),
                    p.vm_size.clone(),
                    extra,
                    p.zone.clone(),
                    replaces,
                )
            })
        })
        .collect()
}

/// The version of the release a document names (`releaseVersion`, else the image's tag).
fn doc_version(doc: &Value) -> Option<String> {
    doc.get("releaseVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            doc.get("releaseImage")
                .and_then(Value::as_str)
                .and_then(release_version)
        })
}

/// The preflight rows of a release change, each a refusal when it fails:
/// - `update.release.downgrade`: HyperShift refuses a y-stream downgrade
///   (`support/supportedversion/version.go` `IsValidReleaseVersion`: "y-stream downgrade
///   from %q to %q is not supported"); a z-stream downgrade passes HyperShift but not the
///   guest's cluster-version operator without force: refused too.
/// - `update.release.skew`: while the control plane runs the new release the pools still
///   run the applied one; HyperShift supports pools at most 3 minors behind
///   (`ValidateVersionSkew`, same file) and reports `SupportedVersionSkew=False` otherwise.
/// - `update.release.reference`: a tag can move under a running cluster; HyperShift
///   resolves it to a digest itself (`hostedcluster_controller.go` `isProgressing`), so a
///   tag is a warning, not a refusal.
///
/// The operator's `supported-versions` row is `k8s.supported-versions` (every update).
pub fn release_checks(
    applied: &Value,
    cfg: &ClusterConfig,
) -> Vec<hcp_activities::preflight::CheckResult> {
    use hcp_activities::preflight::CheckResult;
    use hcp_activities::steps::hosted_cluster::semver;
    let from_image = applied
        .get("releaseImage")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if from_image == cfg.release_image {
        return Vec::new();
    }
    let target = format!("releaseImage {from_image} → {}", cfg.release_image);
    let from = doc_version(applied);
    let to = cfg
        .release_version
        .clone()
        .or_else(|| release_version(&cfg.release_image));
    let mut rows = Vec::new();
    match (
        from.as_deref().and_then(semver),
        to.as_deref().and_then(semver),
    ) {
        (Some(f), Some(t)) => {
            let (fs, ts) = (from.clone().unwrap_or_default(), to.clone().unwrap_or_default());
            if t < f {
                let y = t.1 < f.1 || t.0 < f.0;
                rows.push(CheckResult::fail(
                    "update.release.downgrade",
                    target.clone(),
                    if y {
                        format!("y-stream downgrade from \"{fs}\" to \"{ts}\" is not supported (HyperShift refuses it)")
                    } else {
                        format!("downgrade from {fs} to {ts}: the cluster-version operator does not downgrade without force")
                    },
                    format!("keep releaseImage at {fs} or newer"),
                ));
            } else {
                rows.push(CheckResult::pass(
                    "update.release.downgrade",
                    target.clone(),
                    format!("{fs} → {ts}: an upgrade"),
                ));
            }
            // Every pool runs the applied release until its wave.
            let gap = i64::try_from(t.1).unwrap_or(0) - i64::try_from(f.1).unwrap_or(0);
            if t.0 != f.0 {
                rows.push(CheckResult::fail(
                    "update.release.skew",
                    target.clone(),
                    format!("NodePool major version {} must match HostedCluster major version {}", f.0, t.0),
                    "upgrade within one major version",
                ));
            } else if gap > 3 {
                rows.push(CheckResult::fail(
                    "update.release.skew",
                    target.clone(),
                    format!(
                        "NodePool minor version {}.{} is less than {}.{}, which is the minimum NodePool version compatible with the {}.{} HostedCluster (the pools run {fs} until their wave)",
                        f.0, f.1, t.0, t.1.saturating_sub(3), t.0, t.1
                    ),
                    format!("upgrade in steps of at most 3 minor versions (e.g. to {}.{} first)", f.0, f.1 + 3),
                ));
            } else {
                rows.push(CheckResult::pass(
                    "update.release.skew",
                    target.clone(),
                    format!("the pools ({fs}) stay within 3 minors of the control plane ({ts}) during the upgrade"),
                ));
            }
        }
        _ => rows.push(CheckResult::warn(
            "update.release.downgrade",
            target.clone(),
            "a version is unknown (a digest without releaseVersion): downgrade and skew not checked",
            Some("set releaseVersion beside a digest releaseImage".into()),
        )),
    }
    if !cfg.release_image.contains("@sha256:") {
        rows.push(CheckResult::warn(
            "update.release.reference",
            cfg.release_image.clone(),
            "a tag, not a digest: HyperShift resolves it when it rolls out; the tag could move before then",
            Some("pin the release by digest (…@sha256:…) with releaseVersion".into()),
        ));
    }
    rows
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "name": "demo", "releaseImage": "quay.io/x/ocp-release:4.22.0-multi",
            "topology": "Private", "network": {"create": {"vnetCidr": "10.0.0.0/16"}},
            "nodePools": [{"name": "workers", "replicas": 2, "vmSize": "Standard_D4s_v5", "osDiskSizeGiB": 128},
                          {"name": "infra", "replicas": 1, "vmSize": "Standard_D4s_v5", "osDiskSizeGiB": 128}],
        })
    }

    #[test]
    fn changes_are_sorted_by_kind_and_immutable_ones_refused() {
        let a = doc();
        let mut b = doc();
        b["releaseImage"] = json!("quay.io/x/ocp-release:4.22.3-multi");
        b["nodePools"][0]["replicas"] = json!(3);
        b["nodePools"][1]["vmSize"] = json!("Standard_D8s_v5");
        b["nodePools"][1]["arch"] = json!("arm64");
        b["nodePools"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "gpu", "replicas": 1}));
        b["network"]["create"]["vnetCidr"] = json!("10.1.0.0/16");
        b["allowedSubscriptions"] = json!(["22222222-3333-4444-5555-666666666666"]);
        let p = classify(&a, &b);
        assert_eq!(
            p.release.as_ref().map(|r| r.1.as_str()),
            Some("quay.io/x/ocp-release:4.22.3-multi")
        );
        assert_eq!(p.added.len(), 1);
        let changed: Vec<(&str, bool)> = p
            .changed
            .iter()
            .map(|c| (c.after.name.as_str(), c.template))
            .collect();
        assert_eq!(changed, vec![("workers", false), ("infra", true)]);
        assert!(p.changed.iter().all(|c| !c.management));
        let refused: Vec<&str> = p.refused.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            refused,
            vec!["network.create.vnetCidr", "nodePools[infra].arch"]
        );
        assert!(p.refused[0].why.contains("machineNetwork is immutable"));
        assert_eq!(p.allowed_subscriptions.as_ref().map(|s| s.1.len()), Some(1));
        assert!(classify(&a, &a).is_empty());
    }

    #[test]
    fn a_pool_s_auto_repair_and_drain_timeouts_change_in_place() {
        let a = doc();
        let mut b = doc();
        b["nodePools"][0]["autoRepair"] = json!(true);
        b["nodePools"][1]["nodeDrainTimeout"] = json!("20m");
        b["nodePools"][1]["nodeVolumeDetachTimeout"] = json!("5m");
        let p = classify(&a, &b);
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        let changed: Vec<(&str, bool, bool)> = p
            .changed
            .iter()
            .map(|c| (c.after.name.as_str(), c.template, c.management))
            .collect();
        assert_eq!(
            changed,
            vec![("workers", false, true), ("infra", false, true)]
        );
    }

    #[test]
    fn only_private_topologies_switch_and_new_secret_contents_roll_out() {
        let a = doc();
        let mut b = doc();
        b["topology"] = json!("PublicAndPrivate");
        b["sshKey"] = json!({"sha256": "00"});
        let p = classify(&a, &b);
        assert_eq!(
            p.topology,
            Some(("Private".to_string(), "PublicAndPrivate".to_string()))
        );
        assert!(p.ssh_key && !p.pull_secret);
        assert!(p.refused.is_empty(), "{:?}", p.refused);
        b["topology"] = json!("Public");
        let p = classify(&a, &b);
        assert_eq!(p.topology, None);
        assert_eq!(p.refused.len(), 1);
        assert!(
            p.refused[0]
                .why
                .contains("transitions between Public and non-Public topology are not supported"),
            "{}",
            p.refused[0].why
        );
    }

    #[test]
    fn release_versions_come_from_tags() {
        assert_eq!(
            release_version("quay.io/openshift-release-dev/ocp-release:4.22.3-multi").as_deref(),
            Some("4.22.3")
        );
        assert_eq!(release_version("quay.io/x/ocp-release@sha256:abc"), None);
        assert_eq!(release_version("registry:5000/x:latest"), None);
    }
}
