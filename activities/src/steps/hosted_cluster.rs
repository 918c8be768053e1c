//! A HostedCluster that exists, changed in place: `k8s.hosted-cluster.release` (the
//! control plane's release; a pivot, HyperShift does not roll it back, and a y-stream
//! downgrade is refused: `support/supportedversion/version.go` `IsValidReleaseVersion`),
//! `k8s.hosted-cluster.allowed-subscriptions` (what HyperShift's private-link controller
//! reads), `k8s.hosted-cluster.topology` (PublicAndPrivate ↔ Private, the one topology
//! change HyperShift allows) and `k8s.cluster-secret.rotate` (new pull-secret or SSH-key
//! contents; a pivot, old contents are never kept).

use super::arm::{azure_retry, azure_undo_retry};
use super::env::{Clients, MgmtEnv, Owner};
use super::facts::{Facts, WaitClass};
use super::in_place::*;
use super::objects::{cluster_version_conditions, stale_conditions};
use crate::azure::durable::{checkpoint_field, save_checkpoint_field};
use crate::kube::mgmt::Kind;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

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
pub(super) fn upgrade_blocked(hc: &Value, image: &str) -> Option<StepError> {
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

/// `(major, minor, patch)` of a version like `4.22.3` (pre-release suffixes ignored).
pub fn semver(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.split(['-', '+']).next()?;
    let mut it = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

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

pub(super) const SUBS_PTR: &str =
    "/spec/platform/azure/private/privateLink/additionalAllowedSubscriptions";

pub(super) fn subs_patch(subs: &[String]) -> Value {
    json!({"spec": {"platform": {"azure": {"private": {"privateLink": {
        "additionalAllowedSubscriptions": if subs.is_empty() { Value::Null } else { json!(subs) }
    }}}}}})
}

pub(super) fn subs_of(hc: &Value) -> Vec<String> {
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

pub(super) const TOPOLOGY_PTR: &str = "/spec/platform/azure/topology";
/// HyperShift's public router Service in the control-plane namespace
/// (`control-plane-operator/controllers/hostedcontrolplane/manifests` `RouterPublicService`).
pub(super) const PUBLIC_ROUTER: &str = "router";

/// The API server Route's public hostname of a HostedCluster (`spec.services`), if any.
pub(super) fn kas_hostname(hc: &Value) -> Option<&str> {
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

pub(super) async fn switch_topology(
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
pub(super) fn current_config(pool: &kube::api::DynamicObject) -> String {
    pool.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CURRENT_CONFIG).cloned())
        .unwrap_or_default()
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
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
