//! The simulated operator's releases: a control-plane upgrade on a changed
//! `spec.release.image` (a `Partial` history entry, `Completed` after `guest_rollout`), the
//! `ClusterVersion*` conditions the guest's CVO bubbles up, and the releases HyperShift
//! refuses (a y-stream downgrade, one newer than the operator supports:
//! `support/supportedversion/version.go`).

use serde_json::{Value, json};

use crate::conditions::*;
use crate::sim::Simulator;
use crate::util::str_at;

/// A control-plane upgrade (day 2): a rolled-out cluster whose `spec.release.image` differs
/// from `status.version.desired.image`.
///
/// HyperShift rolls the new release out (`hostedcluster_controller.go`
/// `computeClusterVersionStatus` copies the CVO's `ClusterVersion` status through the
/// HostedControlPlane), and the guest's cluster-version operator records it as CVO does
/// (openshift/cluster-version-operator `pkg/cvo/status.go` `mergeOperatorHistory`): `desired`
/// becomes the new image and version, a `Partial` entry is prepended to `history` (the entry
/// it supersedes, if still without one, gets its `completionTime`), and `Completed` with a
/// `completionTime` once applied. The `ClusterVersion*` conditions are the CVO's
/// (`updateClusterVersionStatus`), bubbled up with reason `FromClusterVersion` when the CVO
/// gives none (`hostedclusterconfigoperator/controllers/hcpstatus/hcpstatus.go`):
/// `Progressing` True "Working towards <v>" while applying, False "Cluster version is <v>"
/// after; `Available` keeps "Done applying <old>" until the new release is applied ("Done
/// applying <v>"). The upgrade takes `guest_rollout`.
///
/// With the scenario's `stall_upgrade`, the `console` operator stays degraded: for the CVO's
/// first 40 minutes `Progressing` is True, reason `ClusterOperatorDegraded`, "Working towards
/// <v>: 760 of 851 done (89% complete), waiting up to 40 minutes on console", then "Unable to
/// apply <v>: wait has exceeded 40 minutes for these operators: console" with `Failing` True,
/// reason `ClusterOperatorDegraded`, "Cluster operator console is degraded"
/// (`convertErrorToProgressingForUpdateEffectFailAfterInterval`; the manifest counts are our
/// model's). The entry stays `Partial`; clearing the knob lets it complete.
pub(crate) fn upgrade(
    sim: &Simulator,
    now: u64,
    obj: &mut Value,
    s: &mut crate::state::HcSim,
) -> bool {
    let Some(spec) = str_at(obj, "/spec/release/image").map(str::to_string) else {
        return false;
    };
    let image = resolved_pullspec(&spec);
    let version = release_of(obj).map(|r| r.2).unwrap_or_default();
    let generation = obj
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let mut dirty = false;
    if !desired_is_spec(obj) {
        if upgrade_blocked(obj).is_some() {
            // `isUpgrading` fails: the operator's reconcile stops before the control plane,
            // which keeps running (and reporting) the release it has.
            return dirty;
        }
        let at = crate::util::rfc3339_secs(now);
        let status = crate::util::obj_mut(obj, "status");
        let v = status
            .entry("version")
            .or_insert_with(|| json!({"history": [], "availableUpdates": []}));
        if let Some(history) = v.get_mut("history").and_then(Value::as_array_mut) {
            if let Some(last) = history.first_mut()
                && last.get("completionTime").is_none_or(Value::is_null)
            {
                last["completionTime"] = json!(at);
            }
            history.insert(
                0,
                json!({"state": "Partial", "version": version, "image": image,
                    "startedTime": at, "completionTime": null, "verified": false}),
            );
        }
        v["desired"] = json!({"image": image, "version": version});
        v["observedGeneration"] = generation;
        s.upgrade_ms = Some(now);
        dirty = true;
        dirty |= cluster_version_working(obj, &version, now);
    }
    let Some(since) = s.upgrade_ms else {
        return dirty;
    };
    if str_at(obj, "/status/version/history/0/state") != Some("Partial") {
        s.upgrade_ms = None;
        return dirty;
    }
    if crate::preflight::scenario(sim).stall_upgrade {
        let exceeded = now >= since + sim.scaled(std::time::Duration::from_secs(40 * 60));
        let (progressing, failing) = if exceeded {
            (
                format!(
                    "Unable to apply {version}: wait has exceeded 40 minutes for these operators: {STALLED_OPERATOR}"
                ),
                Some(format!("Cluster operator {STALLED_OPERATOR} is degraded")),
            )
        } else {
            (
                format!(
                    "Working towards {version}: 760 of 851 done (89% complete), waiting up to 40 minutes on {STALLED_OPERATOR}"
                ),
                None,
            )
        };
        dirty |= set_condition(
            obj,
            "ClusterVersionProgressing",
            true,
            "ClusterOperatorDegraded",
            &progressing,
            now,
        );
        dirty |= match failing {
            Some(m) => set_condition(
                obj,
                "ClusterVersionFailing",
                true,
                "ClusterOperatorDegraded",
                &m,
                now,
            ),
            None => set_condition(
                obj,
                "ClusterVersionFailing",
                false,
                "FromClusterVersion",
                "",
                now,
            ),
        };
        return dirty;
    }
    if now < since + sim.scaled(sim.config().latency.guest_rollout) {
        // The knob cleared mid-upgrade: back to plain progress.
        dirty |= cluster_version_working(obj, &version, now);
        return dirty;
    }
    if let Some(entry) = obj.pointer_mut("/status/version/history/0") {
        entry["state"] = json!("Completed");
        entry["completionTime"] = json!(crate::util::rfc3339_secs(now));
    }
    s.upgrade_ms = None;
    cluster_version_done(obj, &version, now);
    true
}

/// Why HyperShift will not start the upgrade the spec asks for, as `isUpgrading` says it
/// (`hostedcluster_controller.go`): the guest's CVO reports `Upgradeable=False` (bubbled up
/// as `ClusterVersionUpgradeable`), the new release is another minor, the upgrade is not
/// forced by the `hypershift.openshift.io/force-upgrade-to` annotation naming the spec's
/// image, and no `spec.controlPlaneRelease` is set. A z-stream upgrade always proceeds. A
/// digest reference's version is unknown to the simulator: it proceeds.
pub(crate) fn upgrade_blocked(obj: &Value) -> Option<String> {
    if obj.pointer("/status/version").is_none() || desired_is_spec(obj) {
        return None;
    }
    let upgradeable = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| str_at(c, "/type") == Some("ClusterVersionUpgradeable"))?;
    if str_at(upgradeable, "/status") != Some("False") {
        return None;
    }
    let spec = str_at(obj, "/spec/release/image").unwrap_or_default();
    if let Some(forced) = str_at(
        obj,
        "/metadata/annotations/hypershift.openshift.io~1force-upgrade-to",
    ) {
        return (forced != spec).then(|| {
            "force upgrade annotation is present but does not match desired release image".into()
        });
    }
    if obj
        .pointer("/spec/controlPlaneRelease")
        .is_some_and(|v| !v.is_null())
    {
        return None;
    }
    let current = str_at(obj, "/status/version/desired/version").and_then(SemVer::parse)?;
    let requested = release_of(obj).and_then(|r| SemVer::parse(&r.2))?;
    if (requested.major, requested.minor) == (current.major, current.minor) {
        return None;
    }
    Some("cluster version is not upgradeable".into())
}

/// The HostedCluster's `Progressing` condition, as `hostedcluster_controller.go` sets it from
/// `isProgressing`: False, reason `Blocked`, when `isUpgrading` refuses ("ClusterVersionUpgradeable
/// condition is false: …"); True, reason `Progressing`, while there is no `status.version` or
/// its `desired.image` is neither the spec's image nor its digest; else False, `AsExpected`
/// (which it is as soon as the CVO *starts* the new release: HyperShift's `Progressing` does
/// not say the rollout completed, `status.version.history[0]` does).
pub(crate) fn progressing(obj: &mut Value, now: u64) -> bool {
    let (status, reason, message) = if let Some(why) = upgrade_blocked(obj) {
        (
            false,
            "Blocked",
            format!("ClusterVersionUpgradeable condition is false: {why}"),
        )
    } else if obj.pointer("/status/version").is_none() || !desired_is_spec(obj) {
        (
            true,
            "Progressing",
            "HostedCluster is deploying, upgrading, or reconfiguring".to_string(),
        )
    } else {
        (
            false,
            "AsExpected",
            "HostedCluster is at expected version".to_string(),
        )
    };
    set_condition(obj, "Progressing", status, reason, &message, now)
}

/// `ClusterVersionUpgradeable`, bubbled up from the guest CVO's `Upgradeable` once the
/// cluster runs a release: False with the scenario's `not_upgradeable` (reason
/// `AdminAckRequired`, one of the CVO's), else True.
pub(crate) fn upgradeable(sim: &Simulator, obj: &mut Value, now: u64) -> bool {
    if obj.pointer("/status/version").is_none() {
        return false;
    }
    match crate::preflight::scenario(sim).not_upgradeable {
        Some(message) => set_condition(
            obj,
            "ClusterVersionUpgradeable",
            false,
            "AdminAckRequired",
            &message,
            now,
        ),
        None => set_condition(
            obj,
            "ClusterVersionUpgradeable",
            true,
            "FromClusterVersion",
            "",
            now,
        ),
    }
}

/// The `ClusterVersion*` conditions of a completed rollout of `version`, as HyperShift
/// bubbles them up from the guest's CVO (`hostedcluster_controller.go`
/// `computeClusterVersionStatus`; the CVO's messages, `pkg/cvo/status.go`).
pub(crate) fn cluster_version_done(obj: &mut Value, version: &str, now: u64) {
    set_condition(
        obj,
        "ClusterVersionAvailable",
        true,
        "FromClusterVersion",
        &format!("Done applying {version}"),
        now,
    );
    set_condition(
        obj,
        "ClusterVersionProgressing",
        false,
        "FromClusterVersion",
        &format!("Cluster version is {version}"),
        now,
    );
    set_condition(
        obj,
        "ClusterVersionFailing",
        false,
        "FromClusterVersion",
        "",
        now,
    );
}

/// The `ClusterVersion*` conditions while the CVO works towards `version` without trouble.
pub(crate) fn cluster_version_working(obj: &mut Value, version: &str, now: u64) -> bool {
    let p = set_condition(
        obj,
        "ClusterVersionProgressing",
        true,
        "FromClusterVersion",
        &format!("Working towards {version}"),
        now,
    );
    set_condition(
        obj,
        "ClusterVersionFailing",
        false,
        "FromClusterVersion",
        "",
        now,
    ) | p
}

/// A release version as HyperShift compares them (`github.com/blang/semver`: major, minor,
/// patch; pre-release and build metadata dropped, as [`release_of`] drops them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SemVer {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl SemVer {
    pub(crate) fn new(major: u32, minor: u32, patch: u32) -> SemVer {
        SemVer {
            major,
            minor,
            patch,
        }
    }

    /// `4.22.3` (a missing patch is 0; anything after `-`/`+` is ignored).
    pub(crate) fn parse(v: &str) -> Option<SemVer> {
        let core = v.split(['-', '+']).next()?;
        let mut it = core.split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        let patch = it.next().map_or(Some(0), |p| p.parse().ok())?;
        Some(SemVer::new(major, minor, patch))
    }
}

impl std::fmt::Display for SemVer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The operator's `LatestSupportedVersion` (`<minor>.0` of the simulated operator).
pub(crate) fn latest_supported(sim: &Simulator) -> SemVer {
    let (major, minor) =
        crate::config::minor_version(&sim.config().hypershift_version).unwrap_or((4, 22));
    SemVer::new(major, minor, 0)
}

/// The pull spec the guest's cluster-version operator runs for `image`: HyperShift resolves
/// a tag to its digest before it starts the CVO (`control-plane-operator/controllers/
/// hostedcontrolplane/v2/cvo/deployment.go` `discoverCVOReleaseImages`, `support/util/
/// imagemetadata.go` `GetDigest`), and the CVO reports what it runs, so the HostedCluster's
/// `status.version.desired.image` and `history[].image` hold `<repository>@sha256:<digest>`.
/// The simulated registry's digest of a tag is the SHA-256 of the reference (stable, unique
/// per tag); a digest reference is its own.
pub(crate) fn resolved_pullspec(image: &str) -> String {
    use sha2::Digest as _;
    if image.contains('@') {
        return image.to_string();
    }
    // `registry:5000/repo:tag`: the tag is after the last `:` that follows the last `/`.
    let repo = match image.rsplit_once(':') {
        Some((r, tag)) if !tag.contains('/') => r,
        _ => image,
    };
    let digest = sha2::Sha256::digest(image.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("{repo}@sha256:{hex}")
}

/// The tag of the simulated registry that `<repo>@sha256:<digest>` is the digest of
/// ([`resolved_pullspec`] of `<repo>:<tag>`): the release tags 4.14.0 to 4.25.40, plain and
/// `-multi`/`-x86_64`, are tried once per repository and remembered.
pub(crate) fn digest_tag(image: &str) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static BY_REPO: OnceLock<Mutex<HashMap<String, HashMap<String, String>>>> = OnceLock::new();
    let (repo, _) = image.split_once('@')?;
    let mut all = BY_REPO.get_or_init(Default::default).lock().ok()?;
    let tags = all.entry(repo.to_string()).or_insert_with(|| {
        let mut m = HashMap::new();
        for minor in 14..=25 {
            for patch in 0..=40 {
                for suffix in ["", "-multi", "-x86_64"] {
                    let tag = format!("4.{minor}.{patch}{suffix}");
                    m.insert(resolved_pullspec(&format!("{repo}:{tag}")), tag);
                }
            }
        }
        m
    });
    tags.get(image).cloned()
}

/// Whether the CVO runs (or is rolling to) the release the spec asks for: HyperShift's
/// `isProgressing` compares "the spec image or its digest" with `status.version.desired.image`
/// (`hostedcluster_controller.go`).
pub(crate) fn desired_is_spec(obj: &Value) -> bool {
    let Some(spec) = str_at(obj, "/spec/release/image") else {
        return false;
    };
    str_at(obj, "/status/version/desired/image")
        .is_some_and(|d| d == spec || d == resolved_pullspec(spec))
}

/// `(major, minor, version)` of the release image, read from its tag
/// (`…/ocp-release:4.22.0-multi` → 4.22, "4.22.0"), or for a digest reference from the tag
/// the simulated registry gave that digest ([`digest_tag`]); `None` for a digest it never
/// gave, whose version only the payload knows (the simulator then accepts it).
pub(crate) fn release_of(obj: &Value) -> Option<(u32, u32, String)> {
    let image = str_at(obj, "/spec/release/image")?;
    let tag = if image.contains('@') {
        digest_tag(image)?
    } else {
        image.rsplit_once(':')?.1.to_string()
    };
    let tag = tag.as_str();
    let (major, minor) = crate::config::minor_version(tag)?;
    Some((
        major,
        minor,
        tag.split('-').next().unwrap_or(tag).to_string(),
    ))
}

/// The guest ClusterOperator a stalled upgrade waits on (scenario `stall_upgrade`).
pub(crate) const STALLED_OPERATOR: &str = "console";
