//! update-cluster's steps (issue 24): change a cluster that exists, in place.
//!
//! - `k8s.node-pool.update`: a pool's size (`replicas` or `autoScaling`) and machine
//!   template (`platform.azure`: VM size, disk, image); the undo puts back what the step
//!   found before its first write (checkpointed), and waits for the pool to settle again.
//! - `k8s.hosted-cluster.release`, `k8s.node-pool.release`: the release upgrade, control
//!   plane first. Pivots (no undo): HyperShift does not roll a control plane back, and a
//!   y-stream downgrade is refused (`support/supportedversion/version.go`
//!   `IsValidReleaseVersion`).
//! - `k8s.hosted-cluster.allowed-subscriptions`: the HostedCluster's
//!   `additionalAllowedSubscriptions` (what HyperShift's private-link controller reads);
//!   `azure.pls.visibility`: our own Private Link Service's visibility and auto-approval;
//!   `azure.pls.connections.prune`: rejects, then removes, every private endpoint
//!   connection from a subscription no longer allowed (a pivot: a rejected connection
//!   cannot be approved back by us; its owner must recreate it). HyperShift's own
//!   controller updates visibility but never touches existing connections
//!   (`control-plane-operator/controllers/azureprivatelinkservice/controller.go`).
//! - `k8s.hosted-cluster.topology`: PublicAndPrivate ↔ Private, waiting for HyperShift's
//!   public `router` Service to appear or go (the one topology change HyperShift allows).
//! - `k8s.cluster-secret.rotate`: new pull-secret or SSH-key contents, waiting for
//!   HyperShift's copy in the control-plane namespace and (SSH key) the pools' machines
//!   replaced (a pivot: old contents are never kept).
//!
//! Every write is a merge patch on an object carrying our ownership labels
//! ([`Mgmt::patch_ours`]) or a PUT on an ARM resource carrying our tags; what a step
//! changes is recorded in its ledger as `updated`, never as created.

use super::arm::{azure_retry, azure_undo_retry};
use super::env::{AzureEnv, Clients, MgmtEnv, Owner};
use super::facts::{Facts, WaitClass};
pub use super::objects::{cluster_version_conditions, stale_conditions};
use crate::azure::durable::{checkpoint_field, save_checkpoint_field};
use crate::azure::models::API_NETWORK;
use crate::azure::privatelink::{self, TeardownReport};
use crate::kube::mgmt::{Kind, Mgmt};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Error kind of a refusal HyperShift or Azure reports in a condition (permanent).
pub const REFUSED: &str = "refused";
/// Error kind of a compute quota refusal (permanent: more quota is an operator's act).
pub const QUOTA: &str = "quota";

fn k8s(
    kind: Kind,
    ns: &str,
    name: &str,
    action: LedgerAction,
    note: Option<String>,
) -> LedgerRecord {
    LedgerRecord {
        kind: "kubernetes".into(),
        resource_type: kind.type_name().into(),
        id: format!("{ns}/{name}"),
        action,
        persistent: false,
        note,
    }
}

fn azure(
    resource_type: &str,
    id: &str,
    action: LedgerAction,
    note: Option<String>,
) -> LedgerRecord {
    LedgerRecord {
        kind: "azure".into(),
        resource_type: resource_type.into(),
        id: id.into(),
        action,
        persistent: false,
        note,
    }
}

/// The object `kind ns/name`, which must exist and be ours (else a permanent error: an
/// update never adopts, and never writes what another owner made).
async fn ours_object(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    owner: &Owner,
) -> Result<kube::api::DynamicObject, StepError> {
    let Some(obj) = m.get(kind, ns, name).await? else {
        return Err(StepError::permanent(
            "not-found",
            format!(
                "{} {ns}/{name} does not exist: update-cluster changes a cluster that exists (was it deleted by hand? `hcp-workflow verify` compares the journal with what exists)",
                kind.type_name()
            ),
        ));
    };
    let labels = obj.metadata.labels.clone().unwrap_or_default();
    let labels = serde_json::to_value(&labels).unwrap_or_default();
    if !owner.owns(Some(&labels)) {
        return Err(StepError::permanent(
            "not-ours",
            format!(
                "{} {ns}/{name} does not carry this cluster's hcp-workflow labels: it is not ours to change",
                kind.type_name()
            ),
        ));
    }
    Ok(obj)
}

/// [`ours_object`]'s body (everything but its metadata).
async fn ours(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    owner: &Owner,
) -> Result<Value, StepError> {
    Ok(ours_object(m, kind, ns, name, owner).await?.data)
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// Condition `ctype` of an object's `status.conditions`: `(status, reason, message)`.
fn condition<'a>(obj: &'a Value, ctype: &str) -> Option<(&'a str, &'a str, &'a str)> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
        .map(|c| {
            (
                c.get("status").and_then(Value::as_str).unwrap_or("Unknown"),
                c.get("reason").and_then(Value::as_str).unwrap_or_default(),
                c.get("message").and_then(Value::as_str).unwrap_or_default(),
            )
        })
}

/// A permanent refusal when HyperShift reports `ctype=False` on `obj` (`what` names what
/// it refused).
fn refused_if_false(obj: &Value, ctype: &str, what: &str) -> Result<(), StepError> {
    match condition(obj, ctype).filter(|c| c.0 == "False") {
        Some((_, reason, msg)) => Err(StepError::permanent(
            REFUSED,
            format!("HyperShift refused {what} ({ctype}=False, {reason}): {msg}"),
        )),
        None => Ok(()),
    }
}

/// Sets `spec.release.image` of our `kind ns/name`; the wait reason that says so.
async fn set_release(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    image: &str,
) -> Result<String, StepError> {
    m.patch_ours(
        kind,
        ns,
        name,
        &json!({"spec": {"release": {"image": image}}}),
    )
    .await?;
    Ok(format!(
        "{} {ns}/{name} set to release {image}",
        kind.type_name()
    ))
}

fn is_true(obj: &Value, ctype: &str) -> bool {
    condition(obj, ctype).is_some_and(|c| c.0 == "True")
}

/// A merge patch (RFC 7386) that turns `from` into `to`: keys of `to` set (objects
/// recursively), keys only in `from` set to `null`.
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = Map::new();
            for (k, vb) in b {
                match a.get(k) {
                    Some(va) if va == vb => {}
                    Some(va) => {
                        out.insert(k.clone(), merge_patch(va, vb));
                    }
                    None => {
                        out.insert(k.clone(), vb.clone());
                    }
                }
            }
            for k in a.keys() {
                if !b.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}

/// Whether every field `want` sets has that value in `have` (objects recursively; what
/// HyperShift defaults beside them is not a difference).
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| wv.is_null() || h.get(k).is_some_and(|hv| contains(hv, wv))),
        _ => have == want,
    }
}

// ---------------------------------------------------------------------------------------

/// What `k8s.node-pool.update` sets on a NodePool: its size, machine template and
/// management settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSettings {
    /// `spec.replicas` (none with `auto_scaling`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// `spec.autoScaling` `(min, max)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scaling: Option<(i64, i64)>,
    /// `spec.platform.azure` as rendered (VM size, disk, image, …); `None`: unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Value>,
    /// Auto-repair and the drain timeouts; `None`: unchanged. (Absent from what binaries
    /// before it journaled: they never changed them.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub management: Option<PoolManagement>,
}

/// A pool's management settings, all changed in place. HyperShift copies the drain
/// timeouts into the MachineDeployment's template (`nodepool/capi.go`
/// `reconcileMachineDeployment`), which Cluster API propagates to the MachineSets and
/// Machines without a rollout (cluster-api.sigs.k8s.io, "MachineDeployment: In-place
/// propagation", `nodeDrainTimeout` and `nodeVolumeDetachTimeout`), and creates or deletes
/// the pool's MachineHealthCheck for `autoRepair` (`capi.go` `Reconcile`, condition
/// `AutorepairEnabled`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolManagement {
    /// `spec.management.autoRepair`.
    #[serde(default)]
    pub auto_repair: bool,
    /// `spec.nodeDrainTimeout` (a Go duration such as `600s`); `None`: unset (drain
    /// until done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_timeout: Option<String>,
    /// `spec.nodeVolumeDetachTimeout`; `None`: unset (wait for the volumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_volume_detach_timeout: Option<String>,
}

impl PoolManagement {
    /// As create-cluster renders them from `input` (`render::node_pool`).
    pub fn rendered(input: &crate::kube::render::NodePoolInput) -> Self {
        Self {
            auto_repair: input.auto_repair,
            node_drain_timeout: input.node_drain_timeout.clone(),
            node_volume_detach_timeout: input.node_volume_detach_timeout.clone(),
        }
    }

    /// As the live pool says them.
    pub fn of(pool: &Value) -> Self {
        let text = |p: &str| pool.pointer(p).and_then(Value::as_str).map(str::to_string);
        Self {
            auto_repair: pool
                .pointer("/spec/management/autoRepair")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            node_drain_timeout: text("/spec/nodeDrainTimeout"),
            node_volume_detach_timeout: text("/spec/nodeVolumeDetachTimeout"),
        }
    }
}

impl PoolSettings {
    /// The settings of a live NodePool, for the fields `like` names.
    fn of(pool: &Value, like: &PoolSettings) -> PoolSettings {
        PoolSettings {
            replicas: pool.pointer("/spec/replicas").and_then(Value::as_i64),
            auto_scaling: pool
                .pointer("/spec/autoScaling")
                .and_then(|a| Some((a.get("min")?.as_i64()?, a.get("max")?.as_i64()?))),
            platform: like
                .platform
                .as_ref()
                .and(pool.pointer("/spec/platform/azure").cloned()),
            management: like.management.as_ref().map(|_| PoolManagement::of(pool)),
        }
    }

    /// The merge patch from the live pool to these settings.
    fn patch(&self, pool: &Value) -> Value {
        let mut spec = Map::new();
        spec.insert("replicas".into(), json!(self.replicas));
        spec.insert(
            "autoScaling".into(),
            json!(
                self.auto_scaling
                    .map(|(min, max)| json!({"min": min, "max": max}))
            ),
        );
        if let Some(p) = &self.platform {
            let live = pool
                .pointer("/spec/platform/azure")
                .cloned()
                .unwrap_or_else(|| json!({}));
            spec.insert("platform".into(), json!({"azure": merge_patch(&live, p)}));
        }
        if let Some(m) = &self.management {
            // A merge patch: `upgradeType` and the rest of `management` stay; a timeout
            // that is `null` is removed.
            spec.insert("management".into(), json!({"autoRepair": m.auto_repair}));
            spec.insert("nodeDrainTimeout".into(), json!(m.node_drain_timeout));
            spec.insert(
                "nodeVolumeDetachTimeout".into(),
                json!(m.node_volume_detach_timeout),
            );
        }
        json!({ "spec": spec })
    }

    /// Whether the live pool's spec says these settings.
    fn written(&self, pool: &Value) -> bool {
        let live = PoolSettings::of(pool, self);
        live.replicas == self.replicas
            && live.auto_scaling == self.auto_scaling
            && match (&self.platform, &live.platform) {
                (Some(want), Some(have)) => contains(have, want),
                (None, _) => true,
                (Some(_), None) => false,
            }
            && (self.management.is_none() || live.management == self.management)
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        match (self.replicas, self.auto_scaling) {
            (_, Some((min, max))) => parts.push(format!("autoscaling {min}–{max}")),
            (Some(r), None) => parts.push(format!("{r} replicas")),
            (None, None) => {}
        }
        if let Some(size) = self
            .platform
            .as_ref()
            .and_then(|p| p.get("vmSize"))
            .and_then(Value::as_str)
        {
            parts.push(size.to_string());
        }
        if let Some(m) = &self.management {
            parts.push(m.to_string());
        }
        parts.join(", ")
    }
}

/// A pool's machines refused by Azure for quota (CAPZ puts the compute error in the
/// Machine conditions, bubbled up to `AllMachinesReady`): the message, if so.
fn quota_refusal(pool: &Value) -> Option<String> {
    let (status, _, message) = condition(pool, "AllMachinesReady")?;
    (status == "False"
        && (message.contains("exceeding approved")
            || message.contains("QuotaExceeded")
            || message.contains("OperationNotAllowed")))
    .then(|| message.to_string())
}

/// Whether the pool runs `want` and nothing is rolling: `Ok(None)` settled, `Ok(Some(why))`
/// still moving, `Err` refused for good.
fn pool_settled(pool: &Value, want: &PoolSettings) -> Result<Option<String>, StepError> {
    if let Some(why) = stale_conditions(pool) {
        return Ok(Some(why));
    }
    if let Some(msg) = quota_refusal(pool) {
        return Err(StepError::permanent(
            QUOTA,
            format!(
                "Azure refused the pool's machines: {msg}; request more quota (`az quota` / the portal's Quotas page) or pick a smaller VM size, then `hcp-workflow retry`"
            ),
        ));
    }
    refused_if_false(pool, "ValidPlatformConfig", "the pool's platform")?;
    for moving in ["UpdatingPlatformMachineTemplate", "UpdatingConfig"] {
        if let Some((_, reason, msg)) = condition(pool, moving).filter(|c| c.0 == "True") {
            return Ok(Some(format!("{moving}=True ({reason}): {msg}")));
        }
    }
    let running = pool
        .pointer("/status/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let sized = match (want.replicas, want.auto_scaling) {
        (_, Some((min, max))) => (min..=max).contains(&running),
        (Some(r), None) => running == r,
        (None, None) => true,
    };
    if !sized {
        // Why not, as HyperShift aggregates the machines' conditions (a compute quota
        // refusal shows here, cut to HyperShift's 1000-byte summary).
        let machines = condition(pool, "AllMachinesReady")
            .filter(|c| c.0 == "False")
            .map(|(_, reason, msg)| {
                format!("; AllMachinesReady=False ({reason}): {}", msg.trim_end())
            })
            .unwrap_or_default();
        return Ok(Some(format!(
            "{running} machine(s) running, want {}{machines}",
            want.describe()
        )));
    }
    if let Some(why) = want
        .management
        .as_ref()
        .and_then(|m| repair_pending(pool, m))
    {
        return Ok(Some(why));
    }
    if !is_true(pool, "Ready") {
        let why = condition(pool, "Ready")
            .map(|c| format!("Ready={} ({}): {}", c.0, c.1, c.2))
            .unwrap_or_else(|| "Ready not reported yet".into());
        return Ok(Some(why));
    }
    Ok(None)
}

impl std::fmt::Display for PoolManagement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "auto-repair {}, drain timeout {}, volume detach timeout {}",
            if self.auto_repair { "on" } else { "off" },
            self.node_drain_timeout.as_deref().unwrap_or("none"),
            self.node_volume_detach_timeout.as_deref().unwrap_or("none")
        )
    }
}

/// Why the pool's health check is not yet as `want` says (`None`: it is). HyperShift
/// (`nodepool/capi.go`) sets `AutorepairEnabled` False as soon as `autoRepair` is off (the
/// MachineHealthCheck deleted), and True once it is on and a machine has reached the
/// ignition endpoint (`ReachedIgnitionEndpoint`); before that it creates no health check
/// and says nothing, and nothing here can make a machine boot, so that is not waited for.
fn repair_pending(pool: &Value, want: &PoolManagement) -> Option<String> {
    let enabled = condition(pool, "AutorepairEnabled").map(|c| c.0 == "True");
    if want.auto_repair && is_true(pool, "ReachedIgnitionEndpoint") && enabled != Some(true) {
        return Some(
            "AutorepairEnabled is not True yet: HyperShift has not created the pool's MachineHealthCheck".into(),
        );
    }
    if !want.auto_repair && enabled == Some(true) {
        return Some(
            "AutorepairEnabled is still True: HyperShift has not deleted the pool's MachineHealthCheck".into(),
        );
    }
    None
}

/// Input of `k8s.node-pool.update`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PoolUpdateInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace.
    pub namespace: String,
    /// NodePool name.
    pub name: String,
    /// What the file says now.
    pub desired: PoolSettings,
}

/// Output of `k8s.node-pool.update`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PoolUpdateOutput {
    /// Ledger (the pool, `updated`).
    pub ledger: Vec<LedgerRecord>,
    /// What the pool had before (restored by the undo).
    pub before: PoolSettings,
    /// Machines running when it settled (`status.replicas`).
    pub replicas: i64,
}

const BEFORE_KEY: &str = "before";

/// In an undo: what the action found before its first write (its checkpoint's `before`);
/// `None` when it never wrote.
fn before_of<T: serde::de::DeserializeOwned>(ctx: &StepContext) -> Result<Option<T>, StepError> {
    action_checkpoint_member(ctx, BEFORE_KEY)
}

/// In an undo: member `key` of the action's checkpoint.
fn action_checkpoint_member<T: serde::de::DeserializeOwned>(
    ctx: &StepContext,
    key: &str,
) -> Result<Option<T>, StepError> {
    let Some(Value::Object(cp)) = ctx.action_checkpoint::<Value>()? else {
        return Ok(None);
    };
    Ok(cp
        .get(key)
        .and_then(|b| serde_json::from_value::<T>(b.clone()).ok()))
}

/// `k8s.node-pool.update`: set a pool's size and machine template and wait until
/// HyperShift has rolled it out (`status.replicas`, `Ready`, no `UpdatingConfig` /
/// `UpdatingPlatformMachineTemplate`; `api/hypershift/v1beta1/nodepool_conditions.go`).
/// The undo puts back what the pool had before the first write, and waits the same way.
#[derive(Clone, Debug)]
pub struct UpdateNodePool(pub Arc<Clients>);

impl UpdateNodePool {
    /// One look at the pool, writing `want` when it is not there yet: `Ok(running)` once
    /// it is settled (`status.replicas`), `Err(why)` while it moves.
    async fn converge(
        &self,
        ctx: &StepContext,
        input: &PoolUpdateInput,
        want: &PoolSettings,
        undo: bool,
    ) -> Result<Result<i64, String>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let (ns, name) = (&input.namespace, &input.name);
        let pool = ours(&m, Kind::NodePool, ns, name, &input.owner).await?;
        if !undo && checkpoint_field::<PoolSettings>(ctx, BEFORE_KEY)?.is_none() {
            // What the pool had before this run wrote anything: the undo's target.
            save_checkpoint_field(ctx, BEFORE_KEY, &PoolSettings::of(&pool, want)).await?;
        }
        if !want.written(&pool) {
            m.patch_ours(Kind::NodePool, ns, name, &want.patch(&pool))
                .await?;
            return Ok(Err(format!(
                "NodePool {ns}/{name} patched to {}",
                want.describe()
            )));
        }
        Ok(match pool_settled(&pool, want)? {
            None => Ok(pool
                .pointer("/status/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0)),
            Some(why) => Err(format!(
                "waiting for NodePool {ns}/{name} to settle at {}: {why}",
                want.describe()
            )),
        })
    }
}

impl Action for UpdateNodePool {
    const NAME: &'static str = "k8s.node-pool.update";
    type Input = PoolUpdateInput;
    type Output = PoolUpdateOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PoolUpdateInput,
    ) -> Result<Outcome<PoolUpdateOutput>, StepError> {
        let replicas = match self.converge(ctx, &input, &input.desired, false).await? {
            Err(why) => return Ok(ctx.wait(self.0.poll(), why)),
            Ok(running) => running,
        };
        let before = checkpoint_field::<PoolSettings>(ctx, BEFORE_KEY)?.unwrap_or_default();
        Ok(Outcome::Done(PoolUpdateOutput {
            ledger: vec![k8s(
                Kind::NodePool,
                &input.namespace,
                &input.name,
                LedgerAction::Updated,
                Some(format!(
                    "{} → {}",
                    before.describe(),
                    input.desired.describe()
                )),
            )],
            before,
            replicas,
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: PoolUpdateInput,
        _output: Option<PoolUpdateOutput>,
    ) -> Result<UndoOutcome, StepError> {
        // What the action found before its first write; none: it never wrote.
        let Some(before) = before_of::<PoolSettings>(ctx)? else {
            return Ok(UndoOutcome::Done);
        };
        match self.converge(ctx, &input, &before, true).await? {
            Ok(_) => Ok(UndoOutcome::Done),
            Err(why) => Ok(ctx.undo_wait(self.0.poll(), format!("restoring: {why}"))),
        }
    }
}

impl Facts for UpdateNodePool {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::NodePoolReady;
    const UNDO_WAIT: WaitClass = WaitClass::NodePoolReady;

    fn plan(i: &PoolUpdateInput) -> Vec<String> {
        let d = &i.desired;
        let mut what = Vec::new();
        if let Some((min, max)) = d.auto_scaling {
            what.push(format!("autoScaling {min}–{max}"));
        } else if let Some(r) = d.replicas {
            what.push(format!("replicas {r}"));
        }
        if let Some(size) = d
            .platform
            .as_ref()
            .and_then(|p| p.get("vmSize"))
            .and_then(Value::as_str)
        {
            what.push(format!("new machine template ({size}): machines replaced"));
        }
        if let Some(m) = &d.management {
            what.push(format!("{m} (in place)"));
        }
        vec![format!(
            "NodePool {}/{} → {}",
            i.namespace,
            i.name,
            what.join(", ")
        )]
    }
}

// ---------------------------------------------------------------------------------------

/// Input of `k8s.hosted-cluster.release`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReleaseInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace.
    pub namespace: String,
    /// HostedCluster name.
    pub name: String,
    /// The release image to run.
    pub release_image: String,
    /// Its version (`4.22.3`), when the file or the image's tag says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Output of `k8s.hosted-cluster.release`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReleaseOutput {
    /// Ledger (the HostedCluster, `updated`).
    pub ledger: Vec<LedgerRecord>,
    /// The version the control plane runs (`status.version.history[0].version`).
    pub version: Option<String>,
    /// When its rollout completed.
    pub completed_at: Option<String>,
}

/// Whether `entry` (of `status.version.history`, or `status.version.desired`) is the release
/// `image` of `version`. HyperShift starts the guest's cluster-version operator on the
/// image's *digest* (`v2/cvo/deployment.go` `discoverCVOReleaseImages`), and the CVO reports
/// what it runs, so a release given by tag shows as `<repository>@sha256:…`. HyperShift
/// itself compares "the spec image or its digest" (`isProgressing`); this tool cannot
/// resolve a digest, so it matches the image, else the version (as ARO HCP does), else, for
/// the desired release, HyperShift's verdict: `Progressing=False`, `AsExpected` ("at
/// expected version") for the HostedCluster's current generation.
pub fn is_release(hc: &Value, entry: &Value, image: &str, version: Option<&str>) -> bool {
    if str_at(entry, "/image") == Some(image) {
        return true;
    }
    if let (Some(want), Some(have)) = (version, str_at(entry, "/version")) {
        return semver(want).is_some() && semver(want) == semver(have);
    }
    let desired = hc.pointer("/status/version/desired/image");
    let generation = hc.pointer("/metadata/generation").and_then(Value::as_i64);
    entry.get("image").is_some()
        && entry.get("image") == desired
        && hc
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| {
                str_at(c, "/type") == Some("Progressing")
                    && str_at(c, "/status") == Some("False")
                    && str_at(c, "/reason") == Some("AsExpected")
                    && c.get("observedGeneration").and_then(Value::as_i64) == generation
            })
}

/// HyperShift will not start this upgrade: its `Progressing=False`, reason `Blocked`
/// (`hostedcluster_controller.go` `isProgressing` / `isUpgrading`: the guest's CVO says
/// `Upgradeable=False` and the new release is another minor), quoting the guest's own
/// `ClusterVersionUpgradeable` condition, with what the operator can do.
fn upgrade_blocked(hc: &Value, image: &str) -> Option<StepError> {
    let (_, _, msg) =
        condition(hc, "Progressing").filter(|c| c.0 == "False" && c.1 == "Blocked")?;
    let upgradeable = condition(hc, "ClusterVersionUpgradeable")
        .filter(|c| c.0 == "False")
        .map(|(_, r, m)| format!("; ClusterVersionUpgradeable=False ({r}): {m}"))
        .unwrap_or_default();
    Some(StepError::permanent(
        REFUSED,
        format!(
            "HyperShift will not start the upgrade to {image} (Progressing=False, Blocked): {msg}{upgradeable}. \
The guest's cluster-version operator blocks a minor upgrade while Upgradeable is False: resolve what it names (e.g. an admin \
acknowledgement in the guest's admin-acks ConfigMap), or put releaseImage back to the running release; forcing it \
(annotation hypershift.openshift.io/force-upgrade-to) is an operator's decision, not this tool's"
        ),
    ))
}

/// The version the control plane has completed: the newest `Completed` entry of
/// `status.version.history`, as HyperShift's NodePool controller reads it
/// (`hypershift-operator/controllers/nodepool/conditions.go` `supportedVersionSkewCondition`).
pub fn control_plane_version(hc: &Value) -> Option<String> {
    hc.pointer("/status/version/history")
        .and_then(Value::as_array)?
        .iter()
        .find(|h| h.get("state").and_then(Value::as_str) == Some("Completed"))
        .and_then(|h| h.get("version").and_then(Value::as_str))
        .map(str::to_string)
}

/// `k8s.hosted-cluster.release`: set the HostedCluster's `spec.release.image` and wait until
/// the control plane has rolled it out: `status.version.history[0]` is the image, with
/// state `Completed` (as `hypershift create cluster --wait` reads a rollout,
/// `cmd/cluster/core/create.go`). HyperShift refusing the release (`ValidReleaseImage=False`,
/// e.g. a y-stream downgrade) fails it for good. A pivot: no undo.
#[derive(Clone, Debug)]
pub struct UpgradeControlPlane(pub Arc<Clients>);

impl Action for UpgradeControlPlane {
    const NAME: &'static str = "k8s.hosted-cluster.release";
    const HAS_UNDO: bool = false;
    type Input = ReleaseInput;
    type Output = ReleaseOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: ReleaseInput,
    ) -> Result<Outcome<ReleaseOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let (ns, name) = (&input.namespace, &input.name);
        let hc = ours(&m, Kind::HostedCluster, ns, name, &input.owner).await?;
        let version = input.version.as_deref();
        if str_at(&hc, "/spec/release/image") != Some(input.release_image.as_str()) {
            // A minor upgrade the guest says it cannot take yet is refused before the
            // release is changed: HyperShift would only block it, with the spec changed.
            if let Some((_, reason, msg)) =
                condition(&hc, "ClusterVersionUpgradeable").filter(|c| c.0 == "False")
            {
                let running = hc
                    .pointer("/status/version/desired/version")
                    .and_then(Value::as_str)
                    .and_then(semver);
                let minor = version.and_then(semver);
                if matches!((running, minor), (Some(r), Some(t)) if (r.0, r.1) != (t.0, t.1)) {
                    return Err(StepError::permanent(
                        REFUSED,
                        format!(
                            "HostedCluster {ns}/{name} reports ClusterVersionUpgradeable=False ({reason}): {msg}; HyperShift blocks a minor upgrade until the guest's cluster-version operator says Upgradeable=True (`isUpgrading`), so the release was not changed: resolve what it names, then `hcp-workflow retry`"
                        ),
                    ));
                }
            }
            let why = set_release(&m, Kind::HostedCluster, ns, name, &input.release_image).await?;
            return Ok(ctx.wait(self.0.poll(), why));
        }
        refused_if_false(
            &hc,
            "ValidReleaseImage",
            &format!("release {}", input.release_image),
        )?;
        if let Some(e) = upgrade_blocked(&hc, &input.release_image) {
            return Err(e);
        }
        let latest = hc
            .pointer("/status/version/history/0")
            .cloned()
            .unwrap_or_default();
        let done = is_release(&hc, &latest, &input.release_image, version)
            && str_at(&latest, "/state") == Some("Completed");
        if done {
            return Ok(Outcome::Done(ReleaseOutput {
                ledger: vec![k8s(
                    Kind::HostedCluster,
                    ns,
                    name,
                    LedgerAction::Updated,
                    Some(format!("release {}", input.release_image)),
                )],
                version: str_at(&latest, "/version").map(str::to_string),
                completed_at: str_at(&latest, "/completionTime").map(str::to_string),
            }));
        }
        let status = hc.get("status").cloned().unwrap_or_default();
        let conds = cluster_version_conditions(&status);
        Ok(ctx.wait(
            self.0.poll(),
            format!(
                "waiting for HostedCluster {ns}/{name} to roll out {} (status.version.history[0]: {} {}){}",
                input.release_image,
                str_at(&latest, "/version").unwrap_or("-"),
                str_at(&latest, "/state").unwrap_or("not started"),
                if conds.is_empty() { String::new() } else { format!(": {}", conds.join("; ")) }
            ),
        ))
    }
}

impl Facts for UpgradeControlPlane {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::ClusterRollout;

    fn plan(i: &ReleaseInput) -> Vec<String> {
        vec![format!(
            "HostedCluster {}/{} → release {}",
            i.namespace, i.name, i.release_image
        )]
    }
}

/// Input of `k8s.node-pool.release`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PoolReleaseInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace.
    pub namespace: String,
    /// NodePool name.
    pub name: String,
    /// HostedCluster name (its completed version bounds the pool's).
    pub cluster: String,
    /// The release image.
    pub release_image: String,
    /// Its version (`4.22.3`), when the image's tag says it; else read from the control
    /// plane's history entry of the same image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Output of `k8s.node-pool.release`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PoolReleaseOutput {
    /// Ledger (the pool, `updated`).
    pub ledger: Vec<LedgerRecord>,
    /// `status.version` when it settled.
    pub version: Option<String>,
}

/// `(major, minor, patch)` of a version like `4.22.3` (pre-release suffixes ignored).
pub fn semver(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.split(['-', '+']).next()?;
    let mut it = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

/// `k8s.node-pool.release`: upgrade one pool after the control plane. Refuses (for good)
/// to go past the control plane's completed version; sets `spec.release.image`; waits
/// until `status.version` is the target and `UpdatingVersion` is not True; HyperShift's
/// `SupportedVersionSkew=False` fails it for good. A pivot: no undo.
#[derive(Clone, Debug)]
pub struct UpgradeNodePool(pub Arc<Clients>);

impl Action for UpgradeNodePool {
    const NAME: &'static str = "k8s.node-pool.release";
    const HAS_UNDO: bool = false;
    type Input = PoolReleaseInput;
    type Output = PoolReleaseOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PoolReleaseInput,
    ) -> Result<Outcome<PoolReleaseOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let (ns, name) = (&input.namespace, &input.name);
        let hc = ours(&m, Kind::HostedCluster, ns, &input.cluster, &input.owner).await?;
        let target = input.version.clone().or_else(|| {
            hc.pointer("/status/version/history")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|h| is_release(&hc, h, &input.release_image, None))
                .and_then(|h| str_at(h, "/version"))
                .map(str::to_string)
        });
        let cp = control_plane_version(&hc);
        let past = match (
            target.as_deref().and_then(semver),
            cp.as_deref().and_then(semver),
        ) {
            (Some(t), Some(c)) => t > c,
            _ => true,
        };
        let pool = ours(&m, Kind::NodePool, ns, name, &input.owner).await?;
        if str_at(&pool, "/spec/release/image") != Some(input.release_image.as_str()) {
            if past {
                return Err(StepError::permanent(
                    REFUSED,
                    format!(
                        "NodePool {ns}/{name} must not go past its control plane: the HostedCluster has completed {}, the pool would get {}; upgrade the control plane first",
                        cp.as_deref().unwrap_or("no version yet"),
                        target.as_deref().unwrap_or(&input.release_image)
                    ),
                ));
            }
            let why = set_release(&m, Kind::NodePool, ns, name, &input.release_image).await?;
            return Ok(ctx.wait(self.0.poll(), why));
        }
        refused_if_false(&pool, "SupportedVersionSkew", "the pool's release")?;
        refused_if_false(&pool, "ValidReleaseImage", "the pool's release")?;
        let have = str_at(&pool, "/status/version").map(str::to_string);
        let updating = condition(&pool, "UpdatingVersion").filter(|c| c.0 == "True");
        if let Some(why) = stale_conditions(&pool) {
            return Ok(ctx.wait(
                self.0.poll(),
                format!("waiting for NodePool {ns}/{name}: {why}"),
            ));
        }
        if have.is_some() && have == target && updating.is_none() {
            return Ok(Outcome::Done(PoolReleaseOutput {
                ledger: vec![k8s(
                    Kind::NodePool,
                    ns,
                    name,
                    LedgerAction::Updated,
                    Some(format!("release {}", input.release_image)),
                )],
                version: have,
            }));
        }
        Ok(ctx.wait(
            self.0.poll(),
            format!(
                "waiting for NodePool {ns}/{name} to run {} (status.version {}{})",
                target.as_deref().unwrap_or(&input.release_image),
                have.as_deref().unwrap_or("not reported"),
                updating
                    .map(|(_, r, msg)| format!("; UpdatingVersion=True ({r}): {msg}"))
                    .unwrap_or_default()
            ),
        ))
    }
}

impl Facts for UpgradeNodePool {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::NodePoolReady;

    fn plan(i: &PoolReleaseInput) -> Vec<String> {
        vec![format!(
            "NodePool {}/{} → release {} (never past the control plane)",
            i.namespace, i.name, i.release_image
        )]
    }
}

// ---------------------------------------------------------------------------------------

/// Input of `k8s.hosted-cluster.allowed-subscriptions`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AllowedSubscriptionsInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace.
    pub namespace: String,
    /// HostedCluster name.
    pub name: String,
    /// `spec.platform.azure.private.privateLink.additionalAllowedSubscriptions`.
    pub subscriptions: Vec<String>,
}

/// Output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AllowedSubscriptionsOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
    /// What the field held before.
    pub before: Vec<String>,
}

const SUBS_PTR: &str = "/spec/platform/azure/private/privateLink/additionalAllowedSubscriptions";

fn subs_patch(subs: &[String]) -> Value {
    json!({"spec": {"platform": {"azure": {"private": {"privateLink": {
        "additionalAllowedSubscriptions": if subs.is_empty() { Value::Null } else { json!(subs) }
    }}}}}})
}

fn subs_of(hc: &Value) -> Vec<String> {
    hc.pointer(SUBS_PTR)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `k8s.hosted-cluster.allowed-subscriptions`: the field HyperShift's private-link
/// controllers read (`api/hypershift/v1beta1/azure.go` `AzurePrivateLinkSpec`); the undo
/// writes back what it held.
#[derive(Clone, Debug)]
pub struct SetAllowedSubscriptions(pub Arc<Clients>);

impl Action for SetAllowedSubscriptions {
    const NAME: &'static str = "k8s.hosted-cluster.allowed-subscriptions";
    type Input = AllowedSubscriptionsInput;
    type Output = AllowedSubscriptionsOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: AllowedSubscriptionsInput,
    ) -> Result<Outcome<AllowedSubscriptionsOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let (ns, name) = (&input.namespace, &input.name);
        let hc = ours(&m, Kind::HostedCluster, ns, name, &input.owner).await?;
        let before = match checkpoint_field::<Vec<String>>(ctx, BEFORE_KEY)? {
            Some(b) => b,
            None => {
                let b = subs_of(&hc);
                save_checkpoint_field(ctx, BEFORE_KEY, &b).await?;
                b
            }
        };
        if subs_of(&hc) != input.subscriptions {
            m.patch_ours(
                Kind::HostedCluster,
                ns,
                name,
                &subs_patch(&input.subscriptions),
            )
            .await?;
        }
        Ok(Outcome::Done(AllowedSubscriptionsOutput {
            ledger: vec![k8s(
                Kind::HostedCluster,
                ns,
                name,
                LedgerAction::Updated,
                Some(format!(
                    "additionalAllowedSubscriptions [{}]",
                    input.subscriptions.join(", ")
                )),
            )],
            before,
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: AllowedSubscriptionsInput,
        _output: Option<AllowedSubscriptionsOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let Some(before) = before_of::<Vec<String>>(ctx)? else {
            return Ok(UndoOutcome::Done);
        };
        let m = self.0.mgmt(&input.mgmt).await?;
        let hc = ours(
            &m,
            Kind::HostedCluster,
            &input.namespace,
            &input.name,
            &input.owner,
        )
        .await?;
        if subs_of(&hc) != before {
            m.patch_ours(
                Kind::HostedCluster,
                &input.namespace,
                &input.name,
                &subs_patch(&before),
            )
            .await?;
        }
        Ok(UndoOutcome::Done)
    }
}

impl Facts for SetAllowedSubscriptions {
    const ARM_ACTIONS: &'static [&'static str] = &[];

    fn plan(i: &AllowedSubscriptionsInput) -> Vec<String> {
        vec![format!(
            "HostedCluster {}/{} additionalAllowedSubscriptions → [{}]",
            i.namespace,
            i.name,
            i.subscriptions.join(", ")
        )]
    }
}

/// Input of `k8s.hosted-cluster.topology`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TopologyInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace.
    pub namespace: String,
    /// HostedCluster name.
    pub name: String,
    /// `PublicAndPrivate` or `Private`.
    pub topology: String,
}

const TOPOLOGY_PTR: &str = "/spec/platform/azure/topology";
/// HyperShift's public router Service in the control-plane namespace
/// (`control-plane-operator/controllers/hostedcontrolplane/manifests` `RouterPublicService`).
const PUBLIC_ROUTER: &str = "router";

/// The API server Route's public hostname of a HostedCluster (`spec.services`), if any.
fn kas_hostname(hc: &Value) -> Option<&str> {
    hc.pointer("/spec/services")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| str_at(s, "/service") == Some("APIServer"))
        .and_then(|s| str_at(s, "/servicePublishingStrategy/route/hostname"))
        .filter(|h| !h.is_empty())
}

/// `k8s.hosted-cluster.topology`: switch a HostedCluster between `PublicAndPrivate` and
/// `Private`, the one topology change HyperShift 4.22 allows
/// (`api/hypershift/v1beta1/azure.go` `AzurePlatformSpec`: "Transitions between
/// PublicAndPrivate and Private are allowed after creation"; the CRD refuses the rest with
/// "transitions between Public and non-Public topology are not supported"), then wait for
/// HyperShift to apply it. Both topologies keep the private router, its internal load
/// balancer and the Private Link Service (`IsPrivateHCP`); what changes is the public side
/// (`control-plane-operator/controllers/hostedcontrolplane/infra/infra.go`
/// `reconcileHCPRouterServices`): with `IsPublicHCP && LabelHCPRoutes`
/// (`support/util/visibility.go`: PublicAndPrivate with an API server Route hostname) the
/// public `router` LoadBalancer Service exists, otherwise it is deleted.
///
/// - To `PublicAndPrivate`: refused before any write when the API server Route has no
///   public hostname (a cluster created `Private`): `spec.services` is immutable
///   (HostedCluster CRD: "Services is immutable. Changes might result in unpredictable and
///   disruptive behavior."), so HyperShift would make no public router, and the public
///   endpoint create-cluster publishes could not exist. Done once the `router` Service
///   has its public IP (the output's `public_router_ip`, for the public A records).
/// - To `Private`: done once HyperShift has deleted the `router` Service.
///
/// The undo writes back the topology found before the first write (checkpointed).
#[derive(Clone, Debug)]
pub struct SetTopology(pub Arc<Clients>);

impl Action for SetTopology {
    const NAME: &'static str = "k8s.hosted-cluster.topology";
    type Input = TopologyInput;
    type Output = super::objects::HostedClusterOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: TopologyInput,
    ) -> Result<Outcome<super::objects::HostedClusterOutput>, StepError> {
        switch_topology(&self.0, ctx, input).await
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: TopologyInput,
        _output: Option<super::objects::HostedClusterOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let Some(before) = before_of::<String>(ctx)? else {
            return Ok(UndoOutcome::Done);
        };
        let m = self.0.mgmt(&input.mgmt).await?;
        let (ns, name) = (&input.namespace, &input.name);
        let hc = ours(&m, Kind::HostedCluster, ns, name, &input.owner).await?;
        if str_at(&hc, TOPOLOGY_PTR) != Some(before.as_str()) {
            m.patch_ours(
                Kind::HostedCluster,
                ns,
                name,
                &json!({"spec": {"platform": {"azure": {"topology": before}}}}),
            )
            .await?;
        }
        Ok(UndoOutcome::Done)
    }
}

impl Facts for SetTopology {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

async fn switch_topology(
    clients: &Clients,
    ctx: &StepContext,
    input: TopologyInput,
) -> Result<Outcome<super::objects::HostedClusterOutput>, StepError> {
    let m = clients.mgmt(&input.mgmt).await?;
    let (ns, name) = (&input.namespace, &input.name);
    let hc = ours(&m, Kind::HostedCluster, ns, name, &input.owner).await?;
    let now = str_at(&hc, TOPOLOGY_PTR).unwrap_or("Public").to_string();
    let before = match checkpoint_field::<String>(ctx, BEFORE_KEY)? {
        Some(b) => b,
        None => {
            save_checkpoint_field(ctx, BEFORE_KEY, &now).await?;
            now.clone()
        }
    };
    let public = input.topology == "PublicAndPrivate";
    if public && kas_hostname(&hc).is_none() {
        return Err(StepError::permanent(
            REFUSED,
            format!(
                "HostedCluster {ns}/{name} publishes its API server by a Route without a public hostname (it was created Private), and HyperShift's `spec.services` is immutable (\"Services is immutable. Changes might result in unpredictable and disruptive behavior.\"): as PublicAndPrivate it would get no public router and no public endpoint; keep topology {before}, or make a new cluster with topology PublicAndPrivate"
            ),
        ));
    }
    if now != input.topology {
        m.patch_ours(
            Kind::HostedCluster,
            ns,
            name,
            &json!({"spec": {"platform": {"azure": {"topology": input.topology}}}}),
        )
        .await?;
        return Ok(ctx.wait(
            clients.poll(),
            format!(
                "HostedCluster {ns}/{name} set to topology {}",
                input.topology
            ),
        ));
    }
    let cp_ns = format!("{ns}-{name}");
    let ip = m.service_lb_ip(&cp_ns, PUBLIC_ROUTER).await?;
    if public && ip.is_none() {
        return Ok(ctx.wait(
            clients.poll(),
            format!(
                "waiting for HyperShift to give Service {cp_ns}/{PUBLIC_ROUTER} a public load balancer IP (topology PublicAndPrivate)"
            ),
        ));
    }
    if !public && m.get(Kind::Service, &cp_ns, PUBLIC_ROUTER).await?.is_some() {
        return Ok(ctx.wait(
            clients.poll(),
            format!(
                "waiting for HyperShift to delete the public Service {cp_ns}/{PUBLIC_ROUTER} (topology Private has no public router)"
            ),
        ));
    }
    Ok(Outcome::Done(super::objects::HostedClusterOutput {
        namespace: ns.clone(),
        name: name.clone(),
        router_ip: None,
        public_router_ip: if public { ip } else { None },
        ledger: vec![k8s(
            Kind::HostedCluster,
            ns,
            name,
            LedgerAction::Updated,
            Some(format!("topology {before} → {}", input.topology)),
        )],
    }))
}

/// `k8s.hosted-cluster.topology-private`: [`SetTopology`] to `Private`, as a pivot (no
/// undo): HyperShift deletes the public router and its load balancer address is released;
/// writing `PublicAndPrivate` back would get a new address the public records no longer
/// name.
#[derive(Clone, Debug)]
pub struct SetTopologyPrivate(pub Arc<Clients>);

impl Action for SetTopologyPrivate {
    const NAME: &'static str = "k8s.hosted-cluster.topology-private";
    const HAS_UNDO: bool = false;
    type Input = TopologyInput;
    type Output = super::objects::HostedClusterOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: TopologyInput,
    ) -> Result<Outcome<super::objects::HostedClusterOutput>, StepError> {
        switch_topology(&self.0, ctx, input).await
    }
}

impl Facts for SetTopologyPrivate {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

/// Input of `k8s.cluster-secret.rotate`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RotateSecretInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace of the HostedCluster and its Secrets.
    pub namespace: String,
    /// HostedCluster name.
    pub cluster: String,
    /// The Secret create-cluster made (`<name>-pull-secret`, `<name>-ssh-key`).
    pub secret: String,
    /// Its key (`.dockerconfigjson`, `id_rsa.pub`).
    pub key: String,
    /// The file with the new contents (read at run time; never journaled).
    pub file: std::path::PathBuf,
    /// What it is, for messages ("pull secret", "SSH public key").
    pub what: String,
    /// The copy HyperShift keeps in the control-plane namespace (`pull-secret`, `ssh-key`).
    pub control_plane_secret: String,
    /// NodePools whose machines HyperShift replaces for this change (the SSH key's), by name.
    #[serde(default)]
    pub pools: Vec<String>,
}

/// Output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RotateSecretOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
    /// SHA-256 (hex) of the contents now in place.
    pub sha256: String,
}

/// HyperShift's annotation with the config hash a NodePool's machines run
/// (`hypershift-operator/controllers/nodepool/nodepool_controller.go`
/// `nodePoolAnnotationCurrentConfig`, set by `capi.go` once a rollout completes).
pub const CURRENT_CONFIG: &str = "hypershift.openshift.io/nodePoolCurrentConfig";

/// A NodePool's [`CURRENT_CONFIG`] annotation (`""` when it has none yet).
fn current_config(pool: &kube::api::DynamicObject) -> String {
    pool.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CURRENT_CONFIG).cloned())
        .unwrap_or_default()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `k8s.cluster-secret.rotate`: new pull-secret or SSH-key contents (the file changed),
/// written into the Secret create-cluster made, then rolled out where HyperShift rolls
/// them out:
/// - the HyperShift operator copies both into the control-plane namespace on every
///   reconcile (`hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`:
///   `pull-secret`, key `.dockerconfigjson`; `ssh-key`, key `id_rsa.pub`): waited for;
/// - the SSH key is in every NodePool's config (the CPO renders it into the worker SSH
///   ignition config, `control-plane-operator/controllers/hostedcontrolplane/ignition/
///   reconcile.go`; `nodepool/config.go` hashes it with the rest of the MCO config), so
///   HyperShift replaces the machines (`UpdatingConfig`): waited for, pool by pool, until
///   its `nodePoolCurrentConfig` annotation changed and it is settled;
/// - the pull secret's *contents* are not in that hash (`config.go` `HashWithoutVersion`
///   has only its name): machines are not replaced; new machines get it in their
///   ignition payload (`token.go` `pull-secret-hash`), and the hosted cluster's global
///   pull secret is synced by its config operator.
///
/// A pivot: the previous contents are not kept anywhere (a secret never reaches the
/// journal), so there is nothing to restore. The ledger notes only the SHA-256.
#[derive(Clone, Debug)]
pub struct RotateClusterSecret(pub Arc<Clients>);

impl Action for RotateClusterSecret {
    const NAME: &'static str = "k8s.cluster-secret.rotate";
    const HAS_UNDO: bool = false;
    type Input = RotateSecretInput;
    type Output = RotateSecretOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: RotateSecretInput,
    ) -> Result<Outcome<RotateSecretOutput>, StepError> {
        use base64::Engine;
        let m = self.0.mgmt(&input.mgmt).await?;
        let ns = &input.namespace;
        let new = super::objects::read_file(&input.file, &input.what)?;
        let sha = sha256_hex(new.expose());
        ours(&m, Kind::HostedCluster, ns, &input.cluster, &input.owner).await?;
        // The machines' config before the first write, to see HyperShift's rollout end.
        let before = match checkpoint_field::<std::collections::BTreeMap<String, String>>(
            ctx, BEFORE_KEY,
        )? {
            Some(b) => b,
            None => {
                let mut b = std::collections::BTreeMap::new();
                for pool in &input.pools {
                    let p = ours_object(&m, Kind::NodePool, ns, pool, &input.owner).await?;
                    b.insert(pool.clone(), current_config(&p));
                }
                save_checkpoint_field(ctx, BEFORE_KEY, &b).await?;
                b
            }
        };
        let have = m.get_secret_data(ns, &input.secret, &input.key).await?;
        if have.as_ref().map(|h| h.expose().as_slice()) != Some(new.expose().as_slice()) {
            let encoded = base64::engine::general_purpose::STANDARD.encode(new.expose());
            let written = m
                .patch_ours(
                    Kind::Secret,
                    ns,
                    &input.secret,
                    &json!({"data": {input.key.clone(): encoded}}),
                )
                .await?;
            if written.is_none() {
                return Err(StepError::permanent(
                    "not-found",
                    format!(
                        "Secret {ns}/{} does not exist: update-cluster changes a cluster that exists (`hcp-workflow verify` compares the journal with what exists)",
                        input.secret
                    ),
                ));
            }
            return Ok(ctx.wait(
                self.0.poll(),
                format!(
                    "Secret {ns}/{} has the new {} (sha256 {})",
                    input.secret,
                    input.what,
                    &sha[..12]
                ),
            ));
        }
        let cp_ns = format!("{ns}-{}", input.cluster);
        let copied = m
            .get_secret_data(&cp_ns, &input.control_plane_secret, &input.key)
            .await?;
        if copied.as_ref().map(|h| h.expose().as_slice()) != Some(new.expose().as_slice()) {
            return Ok(ctx.wait(
                self.0.poll(),
                format!(
                    "waiting for HyperShift to copy Secret {ns}/{} into {cp_ns}/{}",
                    input.secret, input.control_plane_secret
                ),
            ));
        }
        let mut ledger = vec![k8s(
            Kind::Secret,
            ns,
            &input.secret,
            LedgerAction::Updated,
            Some(format!(
                "new {} (sha256 {}); HyperShift's copy {cp_ns}/{} matches",
                input.what,
                &sha[..12],
                input.control_plane_secret
            )),
        )];
        for pool in &input.pools {
            let obj = ours_object(&m, Kind::NodePool, ns, pool, &input.owner).await?;
            let now = current_config(&obj);
            let now = now.as_str();
            let p = obj.data;
            let was = before.get(pool).map(String::as_str).unwrap_or_default();
            let updating = condition(&p, "UpdatingConfig").filter(|c| c.0 == "True");
            let stale = stale_conditions(&p);
            if now == was || updating.is_some() || stale.is_some() || !is_true(&p, "Ready") {
                let why = match updating {
                    Some((_, reason, msg)) => format!("UpdatingConfig=True ({reason}): {msg}"),
                    None if stale.is_some() => stale.unwrap_or_default(),
                    None if now == was => format!(
                        "config still {}",
                        if was.is_empty() { "not reported" } else { was }
                    ),
                    None => condition(&p, "Ready")
                        .map(|c| format!("Ready={} ({}): {}", c.0, c.1, c.2))
                        .unwrap_or_else(|| "Ready not reported yet".into()),
                };
                return Ok(ctx.wait(
                    self.0.poll(),
                    format!(
                        "waiting for HyperShift to replace NodePool {ns}/{pool}'s machines with the new {} ({why})",
                        input.what
                    ),
                ));
            }
            ledger.push(k8s(
                Kind::NodePool,
                ns,
                pool,
                LedgerAction::Updated,
                Some(format!(
                    "machines replaced for the new {} (config {now})",
                    input.what
                )),
            ));
        }
        Ok(Outcome::Done(RotateSecretOutput {
            ledger,
            sha256: sha,
        }))
    }
}

impl Facts for RotateClusterSecret {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

/// Which Private Link Service a step works on.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlsRef {
    /// hcp-workflow's own (`privateLink.managedBy: hcp-workflow`), tagged as ours.
    Ours {
        /// ARM id.
        id: String,
    },
    /// HyperShift's: the id its `AzurePrivateLinkService` reports
    /// (`status.privateLinkServiceID`).
    HyperShift {
        /// Management cluster.
        mgmt: MgmtEnv,
        /// HostedCluster namespace.
        namespace: String,
        /// HostedCluster name.
        name: String,
    },
}

impl PlsRef {
    /// The service as a plan names it: its id, or HyperShift's (known once it made it).
    fn planned(&self) -> String {
        match self {
            PlsRef::Ours { id } => id.clone(),
            PlsRef::HyperShift { .. } => {
                "HyperShift's Private Link Service (its AzurePrivateLinkService names it)".into()
            }
        }
    }
}

/// Input of `azure.pls.visibility` and `azure.pls.connections.prune`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlsAccessInput {
    /// The management subscription (where the PLS lives).
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The PLS.
    pub pls: PlsRef,
    /// Every subscription allowed: the guest's and `allowedSubscriptions`.
    pub subscriptions: Vec<String>,
}

/// Output of `azure.pls.visibility` and `azure.pls.connections.prune`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlsAccessOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
    /// `azure.pls.visibility`: the lists before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Vec<String>>,
    /// `azure.pls.connections.prune`: the connections rejected and removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

const PLS_TYPE: &str = "Microsoft.Network/privateLinkServices";

fn same_set(a: &[String], b: &[String]) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|x| b.iter().any(|y| y.eq_ignore_ascii_case(x)))
}

fn pls_lists(pls: &Value) -> (Vec<String>, Vec<String>) {
    let list = |p: &str| -> Vec<String> {
        pls.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    (
        list("/properties/visibility/subscriptions"),
        list("/properties/autoApproval/subscriptions"),
    )
}

async fn resolve_pls(clients: &Clients, r: &PlsRef) -> Result<Option<String>, StepError> {
    match r {
        PlsRef::Ours { id } => Ok(Some(id.clone())),
        PlsRef::HyperShift {
            mgmt,
            namespace,
            name,
        } => {
            let m = clients.mgmt(mgmt).await?;
            let cr = super::hypershift_link::read_cr(&m, namespace, name).await?;
            Ok(cr.and_then(|cr| super::hypershift_link::HyperShiftLinkIds::of(&cr).pls_id))
        }
    }
}

/// `azure.pls.visibility`: our Private Link Service's `visibility` and `autoApproval`
/// become exactly the allowed subscriptions (the lists before are checkpointed; the undo
/// puts each back as it was). With HyperShift's PLS it waits until HyperShift's controller
/// has applied `additionalAllowedSubscriptions` (its `reconcileAzurePrivateLinkService`),
/// writing nothing.
#[derive(Clone, Debug)]
pub struct SetPlsVisibility(pub Arc<Clients>);

/// Checkpoint member of `azure.pls.visibility`: the auto-approval list before its first
/// write (`before` holds the visibility list). The two can differ (one widened by hand);
/// the undo puts each back as it was. Absent in runs of an older binary: the undo then
/// gives auto-approval the visibility list.
const BEFORE_AUTO_APPROVAL_KEY: &str = "before-auto-approval";

/// Annotation hcp-workflow sets on HyperShift's `private-router` Service so that its
/// private-link observer reconciles (see [`SetPlsVisibility::nudge_observer`]).
pub const OBSERVER_NUDGE_ANNOTATION: &str = "hcp-workflow.io/allowed-subscriptions";

impl SetPlsVisibility {
    /// HyperShift mode: its control-plane operator's observer
    /// (`control-plane-operator/controllers/azureprivatelinkservice/observer.go`) copies
    /// `additionalAllowedSubscriptions` from the HostedControlPlane into the
    /// `AzurePrivateLinkService` CR, but its controller watches only the `private-router`
    /// Service (`For(&Service{})` with a name predicate, no HostedControlPlane watch), so a
    /// changed list waits for the Service's next change or a resync (about 10 hours).
    /// While the CR's list is not the wanted one, annotate that Service with the wanted list
    /// and the time ([`OBSERVER_NUDGE_ANNOTATION`]): any update of the Service makes the
    /// observer reconcile, and HyperShift's own writes of the Service keep other
    /// annotations. Returns a note for the wait's reason.
    async fn nudge_observer(
        &self,
        mgmt: &MgmtEnv,
        namespace: &str,
        name: &str,
        want_vis: &[String],
    ) -> Result<String, StepError> {
        let m = self.0.mgmt(mgmt).await?;
        let Some(cr) = super::hypershift_link::read_cr(&m, namespace, name).await? else {
            return Ok(String::new());
        };
        let guest = str_at(&cr, "/spec/subscriptionID").unwrap_or_default();
        let have: Vec<String> = cr
            .pointer("/spec/additionalAllowedSubscriptions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let want: Vec<String> = want_vis
            .iter()
            .filter(|s| !s.eq_ignore_ascii_case(guest))
            .cloned()
            .collect();
        if same_set(&have, &want) {
            return Ok(String::new());
        }
        let cp = super::hypershift_link::control_plane_namespace(namespace, name);
        let value = format!(
            "{} @{}",
            want.join(","),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or_default()
        );
        let found = m
            .nudge_service(&cp, "private-router", OBSERVER_NUDGE_ANNOTATION, &value)
            .await?;
        Ok(if found {
            format!(
                "; its AzurePrivateLinkService still lists [{}]: annotated Service {cp}/private-router so HyperShift's observer (which watches only that Service) copies the new list",
                have.join(", ")
            )
        } else {
            String::new()
        })
    }

    /// One look at the PLS, writing `want_vis` as its visibility and `want_auto` as its
    /// auto-approval when they are not there yet.
    async fn converge(
        &self,
        ctx: &StepContext,
        input: &PlsAccessInput,
        want_vis: &[String],
        want_auto: &[String],
        undo: bool,
    ) -> Result<Result<String, String>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let Some(id) = resolve_pls(&self.0, &input.pls).await? else {
            return Ok(Err(
                "waiting for HyperShift's AzurePrivateLinkService to name its Private Link Service"
                    .into(),
            ));
        };
        let Some(pls) = arm.get_value(&id, API_NETWORK).await? else {
            return Err(StepError::permanent(
                "not-found",
                format!(
                    "Private Link Service {id} does not exist (deleted by hand? `hcp-workflow verify` checks the ledger against Azure)"
                ),
            ));
        };
        let (vis, auto) = pls_lists(&pls);
        if !undo && checkpoint_field::<Vec<String>>(ctx, BEFORE_KEY)?.is_none() {
            // Both before the first write (`before` last: it says both are saved).
            save_checkpoint_field(ctx, BEFORE_AUTO_APPROVAL_KEY, &auto).await?;
            save_checkpoint_field(ctx, BEFORE_KEY, &vis).await?;
        }
        if same_set(&vis, want_vis) && same_set(&auto, want_auto) {
            let state = str_at(&pls, "/properties/provisioningState").unwrap_or("Succeeded");
            if state.eq_ignore_ascii_case("Succeeded") {
                return Ok(Ok(id));
            }
            return Ok(Err(format!(
                "waiting for {id} to finish updating (provisioningState {state})"
            )));
        }
        if let PlsRef::HyperShift {
            mgmt,
            namespace,
            name,
        } = &input.pls
        {
            let nudged = self.nudge_observer(mgmt, namespace, name, want_vis).await?;
            return Ok(Err(format!(
                "waiting for HyperShift to set the visibility of {id} to [{}] (now [{}]){nudged}",
                want_vis.join(", "),
                vis.join(", ")
            )));
        }
        if !input.owner.owns(pls.get("tags")) {
            return Err(StepError::permanent(
                "not-ours",
                format!(
                    "Private Link Service {id} does not carry this cluster's tags: not ours to change"
                ),
            ));
        }
        let mut body = json!({
            "location": pls.get("location").cloned().unwrap_or(Value::Null),
            "tags": pls.get("tags").cloned().unwrap_or_else(|| json!({})),
            "properties": pls.get("properties").cloned().unwrap_or_else(|| json!({})),
        });
        if let Some(p) = body.get_mut("properties").and_then(Value::as_object_mut) {
            p.remove("privateEndpointConnections");
            p.remove("provisioningState");
            p.remove("alias");
            p.remove("networkInterfaces");
            p.insert("visibility".into(), json!({"subscriptions": want_vis}));
            p.insert("autoApproval".into(), json!({"subscriptions": want_auto}));
        }
        arm.put(&id, API_NETWORK, &body)
            .await
            .map_err(|e| StepError::from(e.with_resource(&id)))?;
        Ok(Err(if same_set(want_vis, want_auto) {
            format!(
                "{id}: visibility and auto-approval set to [{}]",
                want_vis.join(", ")
            )
        } else {
            format!(
                "{id}: visibility set to [{}], auto-approval to [{}]",
                want_vis.join(", "),
                want_auto.join(", ")
            )
        }))
    }
}

impl Action for SetPlsVisibility {
    const NAME: &'static str = "azure.pls.visibility";
    type Input = PlsAccessInput;
    type Output = PlsAccessOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PlsAccessInput,
    ) -> Result<Outcome<PlsAccessOutput>, StepError> {
        match self
            .converge(
                ctx,
                &input,
                &input.subscriptions,
                &input.subscriptions,
                false,
            )
            .await?
        {
            Err(why) => Ok(ctx.wait(self.0.poll(), why)),
            Ok(id) => Ok(Outcome::Done(PlsAccessOutput {
                ledger: vec![azure(
                    PLS_TYPE,
                    &id,
                    if matches!(input.pls, PlsRef::Ours { .. }) {
                        LedgerAction::Updated
                    } else {
                        LedgerAction::Kept
                    },
                    Some(format!("visibility [{}]", input.subscriptions.join(", "))),
                )],
                before: checkpoint_field(ctx, BEFORE_KEY)?,
                removed: Vec::new(),
            })),
        }
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: PlsAccessInput,
        _output: Option<PlsAccessOutput>,
    ) -> Result<UndoOutcome, StepError> {
        if matches!(input.pls, PlsRef::HyperShift { .. }) {
            // HyperShift follows the HostedCluster field, which its own undo restores.
            return Ok(UndoOutcome::Done);
        }
        let Some(before) = before_of::<Vec<String>>(ctx)? else {
            return Ok(UndoOutcome::Done);
        };
        let before_auto = action_checkpoint_member::<Vec<String>>(ctx, BEFORE_AUTO_APPROVAL_KEY)?
            .unwrap_or_else(|| before.clone());
        match self
            .converge(ctx, &input, &before, &before_auto, true)
            .await?
        {
            Ok(_) => Ok(UndoOutcome::Done),
            Err(why) => Ok(ctx.undo_wait(self.0.poll(), format!("restoring: {why}"))),
        }
    }
}

impl Facts for SetPlsVisibility {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/privateLinkServices/read",
        "Microsoft.Network/privateLinkServices/write",
    ];

    fn plan(i: &PlsAccessInput) -> Vec<String> {
        vec![format!(
            "{} visibility and auto-approval → [{}]",
            i.pls.planned(),
            i.subscriptions.join(", ")
        )]
    }
}

/// `azure.pls.connections.prune`: every private endpoint connection whose endpoint is in a
/// subscription not allowed any more is rejected, then removed (as the teardown does,
/// `azure::privatelink::release_connections`); allowed ones are not touched. A pivot: a
/// rejected connection cannot be given back.
#[derive(Clone, Debug)]
pub struct PruneConnections(pub Arc<Clients>);

const PRUNE_KEY: &str = "pruned";

impl Action for PruneConnections {
    const NAME: &'static str = "azure.pls.connections.prune";
    const HAS_UNDO: bool = false;
    type Input = PlsAccessInput;
    type Output = PlsAccessOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PlsAccessInput,
    ) -> Result<Outcome<PlsAccessOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let Some(id) = resolve_pls(&self.0, &input.pls).await? else {
            return Ok(ctx.wait(
                self.0.poll(),
                "waiting for HyperShift's AzurePrivateLinkService to name its Private Link Service",
            ));
        };
        let mut report: TeardownReport = checkpoint_field(ctx, PRUNE_KEY)?.unwrap_or_default();
        let before = report.clone();
        let allowed = input.subscriptions.clone();
        let reason = format!(
            "Rejected by hcp-workflow: this subscription is no longer allowed to connect to cluster {} (allowedSubscriptions)",
            input.owner.cluster
        );
        let (waiting, after) = privatelink::release_connections_where(
            &arm,
            &id,
            &|pe: &str| {
                let sub = pe.split('/').nth(2).unwrap_or_default();
                !allowed.iter().any(|a| a.eq_ignore_ascii_case(sub))
            },
            &reason,
            &mut report,
        )
        .await?;
        if report != before {
            save_checkpoint_field(ctx, PRUNE_KEY, &report).await?;
        }
        if waiting > 0 {
            return Ok(ctx.wait(
                after.unwrap_or_else(|| self.0.poll()),
                format!("waiting for {waiting} rejected private endpoint connection(s) of {id} to be removed"),
            ));
        }
        Ok(Outcome::Done(PlsAccessOutput {
            ledger: report
                .deleted_connections
                .iter()
                .map(|c| {
                    azure(
                        "Microsoft.Network/privateLinkServices/privateEndpointConnections",
                        c,
                        LedgerAction::Deleted,
                        Some(
                            "rejected, then removed: its subscription is no longer allowed".into(),
                        ),
                    )
                })
                .collect(),
            before: None,
            removed: report.deleted_connections.clone(),
        }))
    }
}

impl Facts for PruneConnections {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/privateLinkServices/read",
        "Microsoft.Network/privateLinkServices/privateEndpointConnections/read",
        "Microsoft.Network/privateLinkServices/privateEndpointConnections/write",
        "Microsoft.Network/privateLinkServices/privateEndpointConnections/delete",
    ];

    fn plan(i: &PlsAccessInput) -> Vec<String> {
        vec![format!(
            "{}: private endpoint connections from any other subscription rejected, then removed",
            i.pls.planned()
        )]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_turns_one_into_the_other() {
        let a = json!({"vmSize": "D4", "image": {"type": "AzureMarketplace", "azureMarketplace": {"imageGeneration": "Gen2"}}, "osDisk": {"sizeGiB": 128}});
        let b = json!({"vmSize": "D8", "image": {"type": "ImageID", "imageID": "/x"}, "osDisk": {"sizeGiB": 128}});
        let p = merge_patch(&a, &b);
        assert_eq!(
            p,
            json!({"vmSize": "D8", "image": {"type": "ImageID", "imageID": "/x", "azureMarketplace": null}})
        );
        assert!(contains(&b, &json!({"vmSize": "D8"})));
        assert!(!contains(&a, &json!({"vmSize": "D8"})));
    }

    #[test]
    fn versions_compare_and_the_control_plane_is_the_newest_completed() {
        assert!(semver("4.22.3").unwrap() > semver("4.22.0-rc.1").unwrap());
        assert!(semver("4.21.9") < semver("4.22.0"));
        let hc = json!({"status": {"version": {"history": [
            {"state": "Partial", "version": "4.22.1"},
            {"state": "Completed", "version": "4.22.0"}]}}});
        assert_eq!(control_plane_version(&hc).as_deref(), Some("4.22.0"));
    }

    #[test]
    fn a_pool_refused_for_quota_fails_for_good() {
        let pool = json!({"status": {"replicas": 2, "conditions": [
            {"type": "AllMachinesReady", "status": "False", "reason": "CreateError",
             "message": "Code=\"OperationNotAllowed\" Message=\"Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota.\""}]}});
        let want = PoolSettings {
            replicas: Some(5),
            ..Default::default()
        };
        let e = pool_settled(&pool, &want).unwrap_err();
        assert_eq!(e.kind, QUOTA);
        let settled =
            json!({"status": {"replicas": 5, "conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(pool_settled(&settled, &want).unwrap(), None);
        let auto = PoolSettings {
            auto_scaling: Some((1, 3)),
            ..Default::default()
        };
        assert!(
            pool_settled(&settled, &auto).unwrap().is_some(),
            "5 is outside 1–3"
        );
    }

    #[test]
    fn management_settings_are_patched_in_place_and_waited_for() {
        let live = json!({"spec": {"replicas": 2,
            "management": {"autoRepair": false, "upgradeType": "Replace"},
            "nodeDrainTimeout": "600s"}});
        let want = PoolSettings {
            replicas: Some(2),
            management: Some(PoolManagement {
                auto_repair: true,
                node_drain_timeout: None,
                node_volume_detach_timeout: Some("300s".into()),
            }),
            ..Default::default()
        };
        // What the undo puts back: the live values of the fields this update changes.
        let before = PoolSettings::of(&live, &want);
        assert_eq!(
            before.management,
            Some(PoolManagement {
                auto_repair: false,
                node_drain_timeout: Some("600s".into()),
                node_volume_detach_timeout: None,
            })
        );
        assert!(!want.written(&live));
        let patch = want.patch(&live);
        assert_eq!(patch["spec"]["management"], json!({"autoRepair": true}));
        assert!(patch["spec"]["nodeDrainTimeout"].is_null());
        assert_eq!(patch["spec"]["nodeVolumeDetachTimeout"], "300s");
        // Without management settings, none of them is touched (and none is compared).
        let size_only = PoolSettings {
            replicas: Some(2),
            ..Default::default()
        };
        assert!(size_only.patch(&live)["spec"].get("management").is_none());
        assert!(size_only.written(&live));
        assert_eq!(PoolSettings::of(&live, &size_only).management, None);

        let pool = |conditions: Value| json!({"status": {"replicas": 2, "conditions": conditions}});
        let ready = json!({"type": "Ready", "status": "True"});
        let ignited = json!({"type": "ReachedIgnitionEndpoint", "status": "True"});
        let m = want.management.clone().unwrap();
        // On, a machine ignited, no health check yet: wait.
        let waiting = pool(json!([ready, ignited,
            {"type": "AutorepairEnabled", "status": "False", "reason": "AsExpected"}]));
        assert!(repair_pending(&waiting, &m).is_some());
        assert!(pool_settled(&waiting, &want).unwrap().is_some());
        let on = pool(json!([ready, ignited, {"type": "AutorepairEnabled", "status": "True"}]));
        assert_eq!(pool_settled(&on, &want).unwrap(), None);
        // On, but no machine has reached ignition: HyperShift says nothing yet; not waited.
        assert_eq!(repair_pending(&pool(json!([ready])), &m), None);
        // Off while HyperShift still reports it on: wait.
        let off = PoolManagement {
            auto_repair: false,
            ..m
        };
        assert!(repair_pending(&on, &off).is_some());
        assert_eq!(repair_pending(&waiting, &off), None);
    }
}
