//! A NodePool that exists, changed in place: `k8s.node-pool.update` sets its size
//! (`replicas` or `autoScaling`), machine template (`platform.azure`: VM size, disk,
//! image) and management settings, the undo putting back what the step found;
//! `k8s.node-pool.release` moves it to the release the control plane runs (a pivot; never
//! past the control plane).

use super::arm::{azure_retry, azure_undo_retry};
use super::env::{Clients, MgmtEnv, Owner};
use super::facts::{Facts, WaitClass};
use super::hosted_cluster::{control_plane_version, is_release, semver};
use super::in_place::*;
use super::objects::stale_conditions;
use crate::azure::durable::{checkpoint_field, save_checkpoint_field};
use crate::kube::mgmt::Kind;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::Arc;

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
pub(super) fn quota_refusal(pool: &Value) -> Option<String> {
    let (status, _, message) = condition(pool, "AllMachinesReady")?;
    (status == "False"
        && (message.contains("exceeding approved")
            || message.contains("QuotaExceeded")
            || message.contains("OperationNotAllowed")))
    .then(|| message.to_string())
}

/// Whether the pool runs `want` and nothing is rolling: `Ok(None)` settled, `Ok(Some(why))`
/// still moving, `Err` refused for good.
pub(super) fn pool_settled(pool: &Value, want: &PoolSettings) -> Result<Option<String>, StepError> {
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
pub(super) fn repair_pending(pool: &Value, want: &PoolManagement) -> Option<String> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::hosted_cluster::*;
    use super::super::in_place::*;
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
