//! The simulated HyperShift NodePool controller and the Cluster API MachineDeployment under
//! each NodePool, evaluated on every tick — at creation and for every later spec change
//! (day-2: scale, autoscaling, platform change, release upgrade).
//!
//! **HyperShift** (`hypershift-operator/controllers/nodepool/`, release-4.22) reconciles a
//! NodePool through its condition functions, in `nodepool_controller.go` `reconcile`'s order,
//! then `capi.go` `CAPI.Reconcile`:
//! - `AutoscalingEnabled` (`conditions.go` `autoscalerEnabledCondition`): True, reason
//!   `AsExpected`, `Maximum nodes: {max}, Minimum nodes: {min}` with `spec.autoScaling`,
//!   else False, reason `AsExpected`, no message. Both `replicas` and `autoScaling` set is
//!   refused by the API server (the NodePool CRD's CEL rule, `kube/api.rs`).
//! - `ValidReleaseImage` (`releaseImageCondition`): the release must pass
//!   `support/supportedversion/version.go` `IsValidReleaseVersion` against the pool's current
//!   `status.version` and, as the newest allowed, the control plane's version
//!   (`nodepool_controller.go` `getReleaseImage`, `getHostedClusterVersion`: the first
//!   `status.version.history` entry with a `completionTime`, else the HostedCluster's
//!   `spec.release.image`; capped at the operator's latest supported minor). Refused: False,
//!   reason `ValidationFailed`, `Failed to get release image: {error}`, and the reconcile
//!   stops there — no later condition changes and the MachineDeployment is left as it was
//!   (so a pool whose minor is above the control plane's never upgrades). Else True,
//!   `AsExpected`, `Using release image: {image}`.
//! - `SupportedVersionSkew` (`supportedVersionSkewCondition`, `ValidateVersionSkew`):
//!   against the control plane's newest `Completed` history version (or `history[0]`, or the
//!   desired version without history): False, reason `UnsupportedSkew`, with the skew error
//!   ("NodePool version 4.22.3 cannot be higher than the HostedCluster version 4.22.0", "NodePool
//!   minor version 4.18 is less than 4.19, which is the minimum NodePool version compatible
//!   with the 4.22 HostedCluster", "NodePool major version …"); Unknown, `ValidationFailed`,
//!   "HostedCluster version is not available yet, waiting for version information" before
//!   the HostedCluster has a `status.version`; else True, `AsExpected`, "Release image version
//!   is valid". HyperShift does not block on it ("the NodePool will keep trying to operate as
//!   usual", `nodepool_conditions.go`): a pool a patch above its control plane upgrades anyway.
//! - `UpdatingConfig` (`updatingConfigCondition`): True, `AsExpected`, `Updating config in
//!   progress. Target config: {hash}` while the pool's config hash ([`config_hash`],
//!   HyperShift's `HashWithoutVersion`: the worker SSH ignition rendered from the
//!   control-plane namespace's `ssh-key` Secret, the pull secret's *name*, the trust
//!   bundle's *name*) differs from the annotation `hypershift.openshift.io/nodePoolCurrentConfig`,
//!   else False, `AsExpected`, no message. The annotation is set to the hash once a rollout
//!   completes (`capi.go` `Reconcile`), so a new pool shows True until its first machines
//!   are up, as it does for `UpdatingVersion`. A changed hash is part of the machines'
//!   target ([`machines::Target`]): machines created with another config are replaced like
//!   those of another template. A changed pull secret *content* rolls nothing. Machines wait
//!   for the config (a HostedCluster with `spec.sshKey` whose `ssh-key` copy does not exist
//!   yet has none: HyperShift cannot generate the user data); machines of state written
//!   before configs were modelled count as at the first known config.
//! - `UpdatingVersion` (`updatingVersionCondition`): True, `AsExpected`, `Updating version in
//!   progress. Target version: {v}` while the target differs from `status.version`, else
//!   False, `AsExpected`.
//! - `UpdatingPlatformMachineTemplate` (`capi.go` `Reconcile`): True, `AsExpected`, `platform
//!   machine template update in progress. Target template: {template}` while the machine
//!   template ([`machines::Target`]) differs from the one the last completed rollout used, else
//!   False, `AsExpected`.
//! - the MachineDeployment (`reconcileMachineDeployment`): replicas from `spec.replicas`, or
//!   with autoscaling the current count clamped to `[max(min,1), max]`
//!   (`setMachineDeploymentReplicas`); the template and version; the rolling update's
//!   `maxSurge`/`maxUnavailable` (NodePool default 1/0). `status.replicas` is the
//!   MachineDeployment's available replicas; `Ready` bubbles up its `Ready`, which CAPI
//!   summarises from `Available` (`Minimum availability requires {replicas - maxUnavailable}
//!   replicas, current {available} available`, reason `WaitingForAvailableMachines`) — so a
//!   scale-up is `Ready=False` until the new nodes join, and a scale-up the quota refuses
//!   stays so. `status.version` is set once the rollout is complete
//!   (`MachineDeploymentComplete`: every replica updated and available).
//! - `AllMachinesReady`: see [`machines`].
//!
//! **Cluster API** (modelled, not HyperShift): the MachineDeployment creates machines up to
//! `replicas + maxSurge` during a rollout, deletes old ones while availability allows
//! (`replicas - maxUnavailable`), unavailable ones first, and scales surplus down; a node
//! joins `nodepool_ready` after its VM is created (and only when nodes can reach the API
//! server, `operator::node_block`); a deleted machine is drained, then its VM, NIC and disk go
//! `nodepool_delete` later. A PodDisruptionBudget that blocks eviction (scenario
//! `blocking_pdb`) holds a deleted machine's drain until `nodeDrainTimeout` (for ever
//! without one), with `AllMachinesReady=False`, reason `Draining`. With autoscaling and no
//! load, the cluster autoscaler removes machines above the minimum after its
//! `scale-down-unneeded-time` (10 minutes, its default).
//!
//! Not modelled: the HostedCluster's kubeconfig and ignition-endpoint gates (machines are
//! created as soon as the NodePool is seen and its config is known), config inputs other
//! than the SSH key and the pull secret / trust bundle names (`spec.config` MachineConfigs,
//! tuning, the other core ignition configs, `hostedCluster.spec.configuration`), the
//! `nodePoolCurrentConfigVersion` annotation, in-place upgrades of version and config
//! (`upgradeType: InPlace` pools replace machines for those like `Replace` ones; a changed
//! machine template replaces nothing, as in HyperShift), OpenShiftSDN's y-stream rule, VM creation time (a VM
//! exists at once; its node joins later).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::conditions::{objects, set_condition, set_condition_status};
use crate::kube::{HYPERSHIFT, kind_by_key, store};
use crate::machines::{self, Placement, Target};
use crate::operator::{FINALIZER, NodeBlock, node_block, parse_go_duration};
use crate::release::{SemVer, release_of};
use crate::sim::Simulator;
use crate::state::{MachineSim, MdSim, NpSim, State};
use crate::util::{self, str_at};

/// The cluster autoscaler's default `--scale-down-unneeded-time`.
const SCALE_DOWN_UNNEEDED: std::time::Duration = std::time::Duration::from_secs(600);

pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let key = format!("{HYPERSHIFT}/nodepools");
    let Some(kind) = kind_by_key(&key) else {
        return false;
    };
    let nps = objects(st, &key);
    let live: std::collections::BTreeSet<String> =
        nps.iter().map(|(ns, n, _)| format!("{ns}/{n}")).collect();
    st.nps.retain(|k, _| live.contains(k));
    let mut changed = false;
    for (ns, name, obj) in nps {
        // Conditions are set as it goes: it works on its own copy.
        let mut obj = Arc::unwrap_or_clone(obj);
        let k = format!("{ns}/{name}");
        let s0 = st.nps.get(&k).cloned();
        let mut s = s0.clone().unwrap_or(NpSim {
            seen_ms: now,
            ..NpSim::default()
        });
        let machines0 = st.machines.get(&k).cloned();
        let dirty = if store::is_deleting(&obj) {
            deleting(sim, st, now, &k, &mut obj, &mut s)
        } else {
            reconcile(sim, st, now, (&ns, &name), &mut obj, &mut s)
        };
        changed |= s0.as_ref() != Some(&s) || st.machines.get(&k) != machines0.as_ref();
        st.nps.insert(k, s);
        if dirty {
            store::update(sim, st, kind, &ns, obj);
            changed = true;
        }
    }
    changed
}

/// The pool's HostedCluster, if it exists.
fn hosted_cluster(st: &State, ns: &str, np: &Value) -> Option<Arc<Value>> {
    let cluster = str_at(np, "/spec/clusterName").unwrap_or_default();
    store::get_shared(st, &format!("{HYPERSHIFT}/hostedclusters"), ns, cluster)
}

/// A NodePool being deleted: drained (unless its HostedCluster goes too), then CAPI deletes
/// its machines (CAPZ their VMs, NICs and disks) and HyperShift drops its finalizer.
fn deleting(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    k: &str,
    obj: &mut Value,
    s: &mut NpSim,
) -> bool {
    let lat = sim.config().latency.clone();
    let since = *s.delete_seen_ms.get_or_insert(now);
    let ns = k.split_once('/').map_or("", |(n, _)| n).to_string();
    // A NodePool deleted on its own drains its nodes first; with its HostedCluster being
    // deleted (or gone) it is not drained (HyperShift deletes the CAPI Cluster with it,
    // `hostedcluster_controller.go` `delete` → `deleteNodePools`; cluster-api
    // `isDeleteNodeAllowed` skips the drain of a Cluster being deleted). A drain a
    // PodDisruptionBudget blocks waits for `nodeDrainTimeout` (cluster-api gives up
    // draining after it), for ever without one.
    let with_cluster = hosted_cluster(st, &ns, obj).is_none_or(|h| store::is_deleting(&h));
    let drain_blocked = !with_cluster
        && crate::preflight::scenario(sim).blocking_pdb
        && drain_pending(obj, since, now, sim);
    let mut finalizers = store::finalizers(obj);
    if drain_blocked {
        return set_condition(
            obj,
            "AllMachinesReady",
            false,
            "Draining",
            DRAIN_MESSAGE,
            now,
        );
    }
    if finalizers.iter().any(|f| f == FINALIZER) && now >= since + sim.scaled(lat.nodepool_delete) {
        if let Some(ms) = st.machines.remove(k) {
            for m in &ms {
                machines::remove(st, m);
            }
        }
        finalizers.retain(|f| f != FINALIZER);
        store::set_finalizers(obj, &finalizers);
        return true;
    }
    false
}

/// What cluster-api's drain reports while a PodDisruptionBudget allows no eviction.
const DRAIN_MESSAGE: &str =
    "Drain failed: Cannot evict pod as it would violate the pod's disruption budget.";

/// Whether a drain that started at `since` is still waiting for `nodeDrainTimeout`.
fn drain_pending(np: &Value, since: u64, now: u64, sim: &Simulator) -> bool {
    match np
        .pointer("/spec/nodeDrainTimeout")
        .and_then(Value::as_str)
        .and_then(parse_go_duration)
    {
        Some(t) if !t.is_zero() => now < since + sim.scaled(t),
        _ => true,
    }
}

/// The outcome of HyperShift's release checks for a pool.
enum ReleaseCheck {
    /// `spec.release.image` names no version (a digest): nothing to check.
    Unknown,
    /// `IsValidReleaseVersion` refused it: the `ValidReleaseImage` message.
    Refused(String),
    /// Valid; its version and the `SupportedVersionSkew` condition (status, reason, message).
    Valid(SemVer, Option<(&'static str, &'static str, String)>),
}

/// `getReleaseImage` (`IsValidReleaseVersion` against the pool's `status.version` and the
/// control plane's version) and `supportedVersionSkewCondition` (see the module docs).
fn release_check(sim: &Simulator, np: &Value, hc: &Value) -> ReleaseCheck {
    let Some(wanted) = release_of(np).and_then(|r| SemVer::parse(&r.2)) else {
        return ReleaseCheck::Unknown;
    };
    let current = str_at(np, "/status/version")
        .and_then(SemVer::parse)
        .unwrap_or_default();
    // `getHostedClusterVersion`: the first history entry with a completion time, else the
    // HostedCluster's release.
    let history = hc
        .pointer("/status/version/history")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let completed = history
        .iter()
        .find(|h| h.get("completionTime").is_some_and(|t| !t.is_null()))
        .and_then(|h| str_at(h, "/version"))
        .and_then(SemVer::parse);
    let Some(cp) = completed.or_else(|| release_of(hc).and_then(|r| SemVer::parse(&r.2))) else {
        return ReleaseCheck::Unknown;
    };
    let latest = crate::release::latest_supported(sim);
    let max = if cp > latest { latest } else { cp };
    let min = SemVer::new(4, 14, 0);
    let refused = if wanted < SemVer::new(4, 8, 0) {
        Some(format!(
            "releases before 4.8 are not supported. Attempting to use: \"{wanted}\""
        ))
    } else if current.minor > wanted.minor {
        Some(format!(
            "y-stream downgrade from \"{current}\" to \"{wanted}\" is not supported"
        ))
    } else if (wanted.major == max.major && wanted.minor > max.minor) || wanted.major > max.major {
        Some(format!(
            "the latest version supported is: \"{max}\". Attempting to use: \"{wanted}\""
        ))
    } else if (wanted.major == min.major && wanted.minor < min.minor) || wanted.major < min.major {
        Some(format!(
            "the minimum version supported for platform Azure is: \"{min}\". Attempting to use: \"{wanted}\""
        ))
    } else {
        None
    };
    if let Some(e) = refused {
        return ReleaseCheck::Refused(format!("Failed to get release image: {e}"));
    }
    // `supportedVersionSkewCondition`: the newest Completed version, else history[0], else
    // the desired version.
    let skew = match hc.pointer("/status/version") {
        None => Some((
            "Unknown",
            "ValidationFailed",
            "HostedCluster version is not available yet, waiting for version information"
                .to_string(),
        )),
        Some(v) => {
            let cp = if history.is_empty() {
                str_at(v, "/desired/version")
            } else {
                history
                    .iter()
                    .find(|h| str_at(h, "/state") == Some("Completed"))
                    .or(history.first())
                    .and_then(|h| str_at(h, "/version"))
            };
            cp.and_then(SemVer::parse)
                .map(|cp| match validate_skew(cp, wanted) {
                    Err(e) => ("False", "UnsupportedSkew", e),
                    Ok(()) => (
                        "True",
                        "AsExpected",
                        "Release image version is valid".into(),
                    ),
                })
        }
    };
    ReleaseCheck::Valid(wanted, skew)
}

/// `support/supportedversion/version.go` `ValidateVersionSkew` (messages verbatim).
fn validate_skew(hc: SemVer, np: SemVer) -> Result<(), String> {
    if np.major != hc.major {
        return Err(format!(
            "NodePool major version {} must match HostedCluster major version {}",
            np.major, hc.major
        ));
    }
    if np > hc {
        return Err(format!(
            "NodePool version {np} cannot be higher than the HostedCluster version {hc}"
        ));
    }
    let diff = i64::from(hc.minor) - i64::from(np.minor);
    if diff > 3 {
        let min_minor = (i64::from(hc.minor) - 3).max(0);
        return Err(format!(
            "NodePool minor version {}.{} is less than {}.{min_minor}, which is the minimum NodePool version compatible with the {}.{} HostedCluster",
            np.major, np.minor, hc.major, hc.major, hc.minor
        ));
    }
    Ok(())
}

/// `spec.autoScaling` as `(min, max)`.
/// `validateManagement`'s error, verbatim (`nodepool_controller.go`), if any.
fn management_error(np: &Value) -> Option<String> {
    let m = np.pointer("/spec/management")?;
    let upgrade = m
        .get("upgradeType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if upgrade == "InPlace" {
        return None;
    }
    let replace = m.get("replace").filter(|r| r.is_object());
    let Some(replace) = replace.filter(|_| upgrade == "Replace") else {
        return Some("this is unsupported. \"Replace\" upgrade type and a strategy: \"RollingUpdate\" or \"OnDelete\" are required".into());
    };
    let strategy = replace
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if strategy != "RollingUpdate" && strategy != "OnDelete" {
        return Some("this is unsupported. \"Replace\" upgrade type only support strategies \"OnDelete\" and \"RollingUpdate\"".into());
    }
    if strategy == "RollingUpdate" && replace.get("rollingUpdate").is_none() {
        return Some("this is unsupported. \"Replace\" upgrade type with strategy \"RollingUpdate\" require a MaxUnavailable and MaxSurge".into());
    }
    None
}

/// Removes condition `ctype` (HyperShift's `removeStatusCondition`); whether it was there.
fn remove_condition(obj: &mut Value, ctype: &str) -> bool {
    let Some(cs) = obj
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = cs.len();
    cs.retain(|c| c.get("type").and_then(Value::as_str) != Some(ctype));
    cs.len() != before
}

fn autoscaling(np: &Value) -> Option<(u32, u32)> {
    let a = np.pointer("/spec/autoScaling")?;
    let min = a.get("min").and_then(Value::as_u64).unwrap_or(0) as u32;
    let max = a.get("max").and_then(Value::as_u64).unwrap_or(0) as u32;
    Some((min, max))
}

/// One NodePool that is not being deleted.
fn reconcile(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    (ns, name): (&str, &str),
    obj: &mut Value,
    s: &mut NpSim,
) -> bool {
    let lat = sim.config().latency.clone();
    let k = format!("{ns}/{name}");
    let mut dirty = false;
    let mut finalizers = store::finalizers(obj);
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_string());
        store::set_finalizers(obj, &finalizers);
        dirty = true;
    }
    if obj.pointer("/status/conditions").is_none() {
        dirty |= set_condition(
            obj,
            "Ready",
            false,
            "WaitingForNodes",
            "nodes are being provisioned",
            now,
        );
    }
    // A changed spec waits its turn in the controller's queue: until then every condition
    // stays as the previous generation's reconcile left it, `observedGeneration` included.
    // (Cluster API pauses too meanwhile: a simplification, the window is short.)
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if s.generation != generation {
        s.generation_ms = (s.generation != 0).then_some(now);
        s.generation = generation;
    }
    if s.generation_ms
        .is_some_and(|at| now < at + sim.scaled(lat.nodepool_reconcile))
    {
        return dirty;
    }
    s.generation_ms = None;
    let cluster = str_at(obj, "/spec/clusterName")
        .unwrap_or_default()
        .to_string();
    let hc = hosted_cluster(st, ns, obj);
    let hs = st.hcs.get(&format!("{ns}/{cluster}")).cloned();
    let image_ok = crate::guest::image_usable(obj);

    // 1. HyperShift's conditions, in its order.
    let auto = autoscaling(obj);
    dirty |= match auto {
        Some((min, max)) => set_condition(
            obj,
            "AutoscalingEnabled",
            true,
            "AsExpected",
            &format!("Maximum nodes: {max}, Minimum nodes: {min}"),
            now,
        ),
        None => set_condition(obj, "AutoscalingEnabled", false, "AsExpected", "", now),
    };
    // `updateManagementEnabledCondition` → `validateManagement` (nodepool_controller.go):
    // InPlace, or Replace with a strategy (the CRD defaults a RollingUpdate one).
    dirty |= match management_error(obj) {
        Some(msg) => set_condition(
            obj,
            "UpdateManagementEnabled",
            false,
            "ValidationFailed",
            &msg,
            now,
        ),
        None => set_condition(obj, "UpdateManagementEnabled", true, "AsExpected", "", now),
    };
    let check = hc.as_ref().map(|h| release_check(sim, obj, h));
    let release_refused = matches!(check, Some(ReleaseCheck::Refused(_)));
    let image = str_at(obj, "/spec/release/image")
        .unwrap_or_default()
        .to_string();
    match &check {
        Some(ReleaseCheck::Refused(msg)) => {
            dirty |= set_condition(
                obj,
                "ValidReleaseImage",
                false,
                "ValidationFailed",
                msg,
                now,
            );
        }
        Some(ReleaseCheck::Valid(_, skew)) => {
            dirty |= set_condition(
                obj,
                "ValidReleaseImage",
                true,
                "AsExpected",
                &format!("Using release image: {image}"),
                now,
            );
            if let Some((status, reason, message)) = skew {
                dirty |=
                    set_condition_status(obj, "SupportedVersionSkew", status, reason, message, now);
            }
        }
        _ => {}
    }
    // `ignitionEndpointAvailableCondition`: False while the HostedCluster has no
    // `status.ignitionEndpoint`, and removed once it has one (the CA Secret is there with
    // it here); then `validArchPlatformCondition`, `reconciliationActiveCondition` and
    // `validPlatformConfigCondition` (conditions.go, messages verbatim).
    if let Some(h) = &hc {
        if str_at(h, "/status/ignitionEndpoint").is_none_or(str::is_empty) {
            dirty |= set_condition(
                obj,
                "IgnitionEndpointAvailable",
                false,
                "IgnitionEndpointMissing",
                "Ignition endpoint not available, waiting",
                now,
            );
        } else {
            dirty |= remove_condition(obj, "IgnitionEndpointAvailable");
        }
        let arch = str_at(obj, "/spec/arch").unwrap_or("amd64").to_string();
        let payload = str_at(h, "/status/payloadArch")
            .unwrap_or_default()
            .to_string();
        dirty |= if payload == "Multi" || payload.eq_ignore_ascii_case(&arch) {
            set_condition(obj, "ValidArchPlatform", true, "AsExpected", "", now)
        } else {
            set_condition(
                obj,
                "ValidArchPlatform",
                false,
                "InvalidArchPlatform",
                &format!(
                    "NodePool CPU arch, {arch}, is not supported by the HostedCluster payload type, {payload}; either change the NodePool CPU arch or use a multi-arch release image"
                ),
                now,
            )
        };
    }
    dirty |= match str_at(obj, "/spec/pausedUntil").map(str::to_string) {
        Some(p) if p == "true" => set_condition(
            obj,
            "ReconciliationActive",
            false,
            "ReconciliationPaused",
            "Reconciliation paused until field removed",
            now,
        ),
        _ => set_condition(
            obj,
            "ReconciliationActive",
            true,
            "ReconciliationActive",
            "Reconciliation active on resource",
            now,
        ),
    };
    dirty |= set_condition(
        obj,
        "ValidPlatformConfig",
        true,
        "AsExpected",
        "All is well",
        now,
    );
    // Whether nodes can be created and join (CAPZ's and the nodes' credentials, the path to
    // the API server) matters only while some machine has to: a settled pool of a big
    // simulated fleet does not re-check every role assignment on every tick.
    let settled = s.ready
        && st.machines.get(&k).is_some_and(|ms| {
            ms.iter().all(|m| m.joined)
                && s.md
                    .as_ref()
                    .is_some_and(|md| ms.len() as u32 == md.replicas)
        });
    let reach = match (&hc, &hs) {
        _ if settled => Ok(()),
        (Some(hc), Some(hs)) => node_block(sim, st, ns, name, hc, hs),
        _ => Err(NodeBlock {
            ctype: "AllNodesHealthy",
            reason: "WaitingForNodeRef",
            message: format!(
                "Machine {name}-0: WaitingForNodeRef (the HostedCluster has no control plane yet)"
            ),
        }),
    };
    // CAPZ cannot create VMs at all (its identity is broken): no machine gets one.
    let capz_blocked = matches!(&reach, Err(b) if b.ctype == "AllMachinesReady");
    let version = check
        .as_ref()
        .and_then(|c| match c {
            ReleaseCheck::Valid(v, _) => Some(v.to_string()),
            _ => None,
        })
        .unwrap_or_default();
    // The config the machines' user data is generated from; machines wait for it.
    let config = hc.as_ref().and_then(|h| config_hash(st, ns, h));
    let target = Target::of(name, obj, &version, config.as_deref().unwrap_or_default());
    let hc_live = hc.as_ref().is_some_and(|h| !store::is_deleting(h));

    // 2. The MachineDeployment, as HyperShift reconciles it (not while its reconcile is
    //    blocked, nor before it can build a machine template and the user data).
    if hc_live && image_ok && !release_refused && config.is_some() {
        let md = s.md.get_or_insert_with(MdSim::default);
        let replicas = match auto {
            Some((min, max)) => {
                let min = min.max(1);
                let clamped = if md.replicas <= min {
                    min
                } else {
                    md.replicas.min(max)
                };
                // No load: the cluster autoscaler removes what is above the minimum.
                if clamped > min {
                    let since = *md.unneeded_ms.get_or_insert(now);
                    if now >= since + sim.scaled(SCALE_DOWN_UNNEEDED) {
                        md.unneeded_ms = None;
                        min
                    } else {
                        clamped
                    }
                } else {
                    md.unneeded_ms = None;
                    clamped
                }
            }
            None => {
                md.unneeded_ms = None;
                obj.pointer("/spec/replicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(0) as u32
            }
        };
        let rolling = obj.pointer("/spec/management/replace/rollingUpdate");
        let mut surge = machines::scaled_int_or_percent(
            rolling.and_then(|r| r.get("maxSurge")),
            replicas,
            true,
            1,
        );
        let unavailable = machines::scaled_int_or_percent(
            rolling.and_then(|r| r.get("maxUnavailable")),
            replicas,
            false,
            0,
        );
        // `ResolveFenceposts`: both zero would never make progress.
        if surge == 0 && unavailable == 0 {
            surge = 1;
        }
        *md = MdSim {
            replicas,
            template: target.template.clone(),
            version: target.version.clone(),
            config: target.config.clone(),
            max_surge: surge,
            max_unavailable: unavailable.min(replicas),
            unneeded_ms: md.unneeded_ms,
        };
    }

    // 3. CAPI and CAPZ work towards the MachineDeployment.
    let mut ms = st.machines.remove(&k).unwrap_or_default();
    // Machines from before configs were modelled, or created while the config was unknown,
    // are at the first known config: it does not roll them.
    if let Some(c) = &config {
        for m in ms.iter_mut().filter(|m| m.config.is_empty()) {
            m.config.clone_from(c);
        }
    }
    let place = hc.as_ref().map(|h| Placement::of(st, ns, &cluster, h));
    let drain_blocked = capi(
        sim,
        st,
        now,
        obj,
        s.md.as_ref(),
        place.as_ref().filter(|_| hc_live && !capz_blocked),
        &mut ms,
    );
    let join_after = sim.scaled(lat.nodepool_ready);
    for m in &mut ms {
        if !m.joined && m.running() && now >= m.created_ms + join_after && reach.is_ok() {
            m.joined = true;
        }
    }
    let available = ms.iter().filter(|m| m.joined).count() as u32;
    let md = s.md.clone().unwrap_or_default();

    // 4. What HyperShift reports: replicas, Ready, machines, the rollout.
    if obj.pointer("/status/replicas").and_then(Value::as_u64) != Some(u64::from(available)) {
        util::obj_mut(obj, "status").insert("replicas".into(), json!(available));
        dirty = true;
    }
    let first_due = now >= s.seen_ms + join_after;
    let min_needed = md.replicas.saturating_sub(md.max_unavailable);
    let waiting = format!(
        "Minimum availability requires {min_needed} replicas, current {available} available"
    );
    if first_due && image_ok {
        match &reach {
            Err(b) if !s.ready => {
                // The MachineDeployment's availability stays short (bubbled up as the
                // NodePool's `Ready`, `nodepool/capi.go`), and the Machines say why.
                dirty |= set_condition(
                    obj,
                    "Ready",
                    false,
                    "WaitingForAvailableMachines",
                    &waiting,
                    now,
                );
                dirty |= set_condition(obj, b.ctype, false, b.reason, &b.message, now);
            }
            _ if s.md.is_some() && available >= min_needed => {
                if !s.ready {
                    s.ready = true;
                    dirty |= set_condition(
                        obj,
                        "AllNodesHealthy",
                        true,
                        "AsExpected",
                        "All is well",
                        now,
                    );
                }
                dirty |=
                    set_condition(obj, "Ready", true, "AsExpected", "All nodes are ready", now);
            }
            _ if s.md.is_some() => {
                dirty |= set_condition(
                    obj,
                    "Ready",
                    false,
                    "WaitingForAvailableMachines",
                    &waiting,
                    now,
                );
            }
            _ => {}
        }
    }
    if !capz_blocked || s.ready {
        if let Some((reason, message)) = machines::all_machines_ready(&ms) {
            dirty |= set_condition(obj, "AllMachinesReady", false, &reason, &message, now);
        } else if drain_blocked {
            dirty |= set_condition(
                obj,
                "AllMachinesReady",
                false,
                "Draining",
                DRAIN_MESSAGE,
                now,
            );
        } else if s.ready {
            dirty |= set_condition(
                obj,
                "AllMachinesReady",
                true,
                "AsExpected",
                "All is well",
                now,
            );
        }
    }
    if s.md.is_some() && !release_refused {
        // `MachineDeploymentComplete`: every replica at the template and version, available.
        let complete = first_due
            && ms.len() as u32 == md.replicas
            && available == md.replicas
            && ms.iter().all(|m| {
                (in_place(obj) || m.template == md.template)
                    && m.version == md.version
                    && m.config == md.config
            });
        if complete {
            if !md.version.is_empty() && str_at(obj, "/status/version") != Some(md.version.as_str())
            {
                util::obj_mut(obj, "status").insert("version".into(), json!(md.version));
                dirty = true;
            }
            s.template = Some(md.template.clone());
            // `capi.go` `Reconcile`: the config of a completed rollout.
            if !md.config.is_empty() && current_config(obj) != Some(md.config.as_str()) {
                let meta = util::obj_mut(obj, "metadata");
                let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
                if !annotations.is_object() {
                    *annotations = json!({});
                }
                annotations[CURRENT_CONFIG_ANNOTATION] = json!(md.config);
                dirty = true;
            }
        }
        // `updatingConfigCondition` (before `updatingVersionCondition` in HyperShift's
        // order); not while the config cannot be generated (HyperShift's token fails then).
        if !target.config.is_empty() {
            dirty |= if current_config(obj) != Some(target.config.as_str()) {
                set_condition(
                    obj,
                    "UpdatingConfig",
                    true,
                    "AsExpected",
                    &format!(
                        "Updating config in progress. Target config: {}",
                        target.config
                    ),
                    now,
                )
            } else {
                set_condition(obj, "UpdatingConfig", false, "AsExpected", "", now)
            };
        }
        let current = str_at(obj, "/status/version")
            .unwrap_or_default()
            .to_string();
        dirty |= if !target.version.is_empty() && target.version != current {
            set_condition(
                obj,
                "UpdatingVersion",
                true,
                "AsExpected",
                &format!(
                    "Updating version in progress. Target version: {}",
                    target.version
                ),
                now,
            )
        } else {
            set_condition(obj, "UpdatingVersion", false, "AsExpected", "", now)
        };
        dirty |= if s.template.as_deref() != Some(target.template.as_str()) {
            set_condition(
                obj,
                "UpdatingPlatformMachineTemplate",
                true,
                "AsExpected",
                &format!(
                    "platform machine template update in progress. Target template: {}",
                    target.template
                ),
                now,
            )
        } else {
            set_condition(
                obj,
                "UpdatingPlatformMachineTemplate",
                false,
                "AsExpected",
                "",
                now,
            )
        };
    }
    if s.md.is_some() && !release_refused {
        dirty |= health_check(obj, &ms, &md, now);
    }
    if !ms.is_empty() {
        st.machines.insert(k, ms);
    }
    dirty
}

/// Whether the pool upgrades in place (`spec.management.upgradeType: InPlace`).
pub(crate) fn in_place(np: &Value) -> bool {
    str_at(np, "/spec/management/upgradeType") == Some("InPlace")
}

/// `ReachedIgnitionEndpoint` and `AutorepairEnabled`, as HyperShift sets them.
/// - `nodepool/conditions.go` `createReachedIgnitionEndpointCondition`: True once a machine
///   fetched the payload of the pool's current token (the token Secret's
///   `hypershift.openshift.io/ignition-reached` annotation), else False `IgnitionNotReached`.
///   A new config or release makes a new token, so a Replace rollout reads False until a new
///   machine boots: here, a machine that joined at the MachineDeployment's config.
/// - `nodepool/capi.go` `Reconcile`: with `spec.management.autoRepair`, the MachineHealthCheck
///   is created and `AutorepairEnabled` set True only once ignition was reached (before that
///   the condition is left as it was); without it, the health check is deleted and the
///   condition set False at once. Both with reason `AsExpected`.
fn health_check(obj: &mut Value, ms: &[MachineSim], md: &MdSim, now: u64) -> bool {
    let reached = ms
        .iter()
        .any(|m| m.joined && (md.config.is_empty() || m.config == md.config));
    let reason = if reached {
        "AsExpected"
    } else {
        "IgnitionNotReached"
    };
    let mut dirty = set_condition(obj, "ReachedIgnitionEndpoint", reached, reason, "", now);
    let auto_repair = obj
        .pointer("/spec/management/autoRepair")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if !auto_repair {
        dirty |= set_condition(obj, "AutorepairEnabled", false, "AsExpected", "", now);
    } else if reached {
        dirty |= set_condition(obj, "AutorepairEnabled", true, "AsExpected", "", now);
    }
    dirty
}

/// Cluster API's MachineDeployment/MachineSet controllers and CAPZ for one pool: finishes
/// deletions, retries refused VMs, and creates/deletes machines towards `md` (creation only
/// with a `place`). Returns whether a deletion waits for a blocked drain.
fn capi(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    np: &Value,
    md: Option<&MdSim>,
    place: Option<&Placement>,
    ms: &mut Vec<MachineSim>,
) -> bool {
    let lat = sim.config().latency.clone();
    let pdb = crate::preflight::scenario(sim).blocking_pdb;
    // A VM its resource group took with it (the group was deleted) is gone.
    ms.retain(|m| !machines::vanished(st, m));
    // Deletions: drained (a joined node, unless a PodDisruptionBudget blocks eviction),
    // then the VM, NIC and disk go.
    let mut drain_blocked = false;
    let mut keep = Vec::with_capacity(ms.len());
    for m in ms.drain(..) {
        match m.deleting_ms {
            Some(t) if m.joined && pdb && drain_pending(np, t, now, sim) => {
                drain_blocked = true;
                keep.push(m);
            }
            Some(t) if now >= t + sim.scaled(lat.nodepool_delete) || !m.running() => {
                machines::remove(st, &m);
            }
            _ => keep.push(m),
        }
    }
    *ms = keep;
    let (Some(md), Some(place)) = (md, place) else {
        return drain_blocked;
    };
    machines::retry(sim, st, now, place, np, ms);
    // An `InPlace` pool's MachineSet only has its template reference swapped
    // (`capi.go` `reconcileMachineSet`): machines made from an older template stay, and only
    // machines created after the change use the new one
    // (`docs/content/reference/nodepool-rollouts.md`, "InPlace").
    let in_place = in_place(np);
    let at_target = |m: &MachineSim| {
        (in_place || m.template == md.template) && m.version == md.version && m.config == md.config
    };
    let live: Vec<usize> = (0..ms.len())
        .filter(|&i| ms[i].deleting_ms.is_none())
        .collect();
    let new_n = live.iter().filter(|&&i| at_target(&ms[i])).count() as u32;
    let old_n = live.len() as u32 - new_n;
    let total = live.len() as u32;
    // Scale the new MachineSet up (`reconcileNewMachineSet`): during a rollout only up to
    // replicas + maxSurge machines in all.
    let add = if old_n > 0 {
        md.replicas
            .saturating_sub(new_n)
            .min((md.replicas + md.max_surge).saturating_sub(total))
    } else {
        md.replicas.saturating_sub(new_n)
    };
    let target = Target {
        template: md.template.clone(),
        version: md.version.clone(),
        config: md.config.clone(),
    };
    for _ in 0..add {
        let m = machines::create(sim, st, now, place, np, &target, ms.as_slice());
        ms.push(m);
    }
    // Scale old MachineSets down (`reconcileOldMachineSets`): unavailable old machines
    // first, as far as the total stays above the minimum available; then available ones
    // while availability allows.
    let live: Vec<usize> = (0..ms.len())
        .filter(|&i| ms[i].deleting_ms.is_none())
        .collect();
    let total = live.len() as u32;
    let min_available = md.replicas.saturating_sub(md.max_unavailable);
    let new_unavailable = live
        .iter()
        .filter(|&&i| at_target(&ms[i]) && !ms[i].joined)
        .count() as u32;
    let mut budget = total.saturating_sub(min_available + new_unavailable);
    let mut old_unhealthy: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&i| !at_target(&ms[i]) && !ms[i].joined)
        .collect();
    old_unhealthy.sort_by_key(|&i| (ms[i].running(), std::cmp::Reverse(ms[i].created_ms)));
    for i in old_unhealthy {
        if budget == 0 {
            break;
        }
        ms[i].deleting_ms = Some(now);
        budget -= 1;
    }
    let available_live = (0..ms.len())
        .filter(|&i| ms[i].deleting_ms.is_none() && ms[i].joined)
        .count() as u32;
    let mut budget = available_live.saturating_sub(min_available);
    let mut old_healthy: Vec<usize> = (0..ms.len())
        .filter(|&i| ms[i].deleting_ms.is_none() && !at_target(&ms[i]) && ms[i].joined)
        .collect();
    old_healthy.sort_by_key(|&i| ms[i].created_ms);
    for i in old_healthy {
        if budget == 0 {
            break;
        }
        ms[i].deleting_ms = Some(now);
        budget -= 1;
    }
    // Surplus new machines (a scale-down): refused ones first, then those without a node,
    // then the newest.
    let mut new_live: Vec<usize> = (0..ms.len())
        .filter(|&i| ms[i].deleting_ms.is_none() && at_target(&ms[i]))
        .collect();
    if new_live.len() as u32 > md.replicas {
        new_live.sort_by_key(|&i| {
            (
                ms[i].running(),
                ms[i].joined,
                std::cmp::Reverse(ms[i].created_ms),
            )
        });
        let surplus = new_live.len() - md.replicas as usize;
        for &i in new_live.iter().take(surplus) {
            ms[i].deleting_ms = Some(now);
        }
    }
    // Refused machines have nothing to drain or delete but their NIC.
    let mut keep = Vec::with_capacity(ms.len());
    for m in ms.drain(..) {
        if m.deleting_ms.is_some() && !m.running() {
            machines::remove(st, &m);
        } else {
            keep.push(m);
        }
    }
    *ms = keep;
    drain_blocked
}

/// Annotation HyperShift records the config of a pool's last completed rollout in
/// (`nodepool_controller.go` `nodePoolAnnotationCurrentConfig`, set in `capi.go`
/// `Reconcile` once the MachineDeployment is complete).
pub(crate) const CURRENT_CONFIG_ANNOTATION: &str = "hypershift.openshift.io/nodePoolCurrentConfig";

/// The pool's `hypershift.openshift.io/nodePoolCurrentConfig` annotation.
fn current_config(np: &Value) -> Option<&str> {
    np.pointer("/metadata/annotations")
        .and_then(|a| a.get(CURRENT_CONFIG_ANNOTATION))
        .and_then(Value::as_str)
}

/// The pool's config hash, HyperShift's `HashWithoutVersion`
/// (`hypershift-operator/controllers/nodepool/config.go`: `HashSimple(mcoRawConfig +
/// pullSecretName + additionalTrustBundleName)`, 32-bit FNV-1a as `%08x`), or `None` while
/// it cannot be generated.
///
/// Of `mcoRawConfig` (the core ignition ConfigMaps the control-plane operator renders in
/// the control-plane namespace, and the pool's own `spec.config`) the simulator models the
/// worker SSH MachineConfig: `reconcileCoreIgnitionConfig` reads the HostedControlPlane's
/// `spec.sshKey` — the `<cp-ns>/ssh-key` Secret the HyperShift operator syncs
/// (`operator::sync_secrets`) — and `ReconcileWorkerSSHIgnitionConfig`
/// (`control-plane-operator/controllers/hostedcontrolplane/ignition/reconcile.go`) renders
/// ignition 3.2.0 with user `core` and that key (no key without `spec.sshKey`). So a changed
/// SSH key, a changed pull secret *name* or trust bundle *name* rolls the pool; a changed
/// pull secret *content* does not. Until `<cp-ns>/ssh-key` exists for a HostedCluster with
/// `spec.sshKey`, the config is unknown and the pool's machines wait (HyperShift cannot
/// build the user data without the core configs). The hash is over the simulator's
/// rendering, not the real `mcoRawConfig`, so its value differs from a real one.
pub(crate) fn config_hash(st: &State, ns: &str, hc: &Value) -> Option<String> {
    let name = str_at(hc, "/metadata/name").unwrap_or_default();
    let cp_ns = format!("{ns}-{name}");
    let key = match str_at(hc, "/spec/sshKey/name").filter(|n| !n.is_empty()) {
        None => String::new(),
        Some(_) => {
            use base64::Engine;
            let b64 = store::get(st, "core/secrets", &cp_ns, crate::operator::CP_SSH_KEY)?
                .pointer("/data")?
                .get(crate::operator::SSH_KEY_KEY)?
                .as_str()?;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_else(|_| b64.as_bytes().to_vec());
            String::from_utf8_lossy(&raw).into_owned()
        }
    };
    let mut user = json!({"name": "core"});
    if !key.is_empty() {
        user["sshAuthorizedKeys"] = json!([key]);
    }
    let ssh_ignition = json!({"ignition": {"version": "3.2.0"}, "passwd": {"users": [user]}});
    let pull_secret = str_at(hc, "/spec/pullSecret/name").unwrap_or_default();
    let trust_bundle = str_at(hc, "/spec/additionalTrustBundle/name").unwrap_or_default();
    Some(format!(
        "{:08x}",
        machines::fnv(&format!("{ssh_ignition}{pull_secret}{trust_bundle}"))
    ))
}

/// Removes the machines of every pool of cluster `cluster` (`<ns>/<name>`) that are left
/// (HyperShift deletes the CAPI Cluster, and CAPI every machine of it, when the
/// HostedCluster goes — also those of a NodePool that vanished without its finalizer).
pub(crate) fn remove_cluster_machines(st: &mut State, cluster: &str) {
    let pools: Vec<String> = st
        .machines
        .iter()
        .filter(|(_, ms)| ms.iter().any(|m| m.cluster == cluster))
        .map(|(k, _)| k.clone())
        .collect();
    for k in pools {
        let ms = st.machines.remove(&k).unwrap_or_default();
        let (gone, kept): (Vec<MachineSim>, Vec<MachineSim>) =
            ms.into_iter().partition(|m| m.cluster == cluster);
        for m in &gone {
            machines::remove(st, m);
        }
        if !kept.is_empty() {
            st.machines.insert(k, kept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_messages_are_hypershifts() {
        let v = |s: &str| SemVer::parse(s).unwrap_or_default();
        assert_eq!(validate_skew(v("4.22.0"), v("4.22.0")), Ok(()));
        assert_eq!(validate_skew(v("4.22.0"), v("4.19.5")), Ok(()));
        assert_eq!(
            validate_skew(v("4.22.0"), v("4.22.3")),
            Err(
                "NodePool version 4.22.3 cannot be higher than the HostedCluster version 4.22.0"
                    .into()
            )
        );
        assert_eq!(
            validate_skew(v("4.22.1"), v("4.18.9")),
            Err("NodePool minor version 4.18 is less than 4.19, which is the minimum NodePool version compatible with the 4.22 HostedCluster".into())
        );
        assert_eq!(
            validate_skew(v("4.22.1"), v("5.0.0")),
            Err("NodePool major version 5 must match HostedCluster major version 4".into())
        );
    }
}
