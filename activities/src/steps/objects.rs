//! What the Kubernetes steps share, whichever workflow runs them: the journal of the
//! objects a step creates ([`ObjectJournal`]), the HostedCluster's output, reading an input
//! file, and the conditions HyperShift reports on NodePools and HostedClusters.

use crate::kube::mgmt::Kind;
use crate::secret::Secret;
use hcp_runtime::StepContext;
use hcp_runtime::StepError;
use hcp_runtime::ledger::LedgerRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Checkpoint member in which a step journals the objects it creates ([`ObjectJournal`]).
pub const OBJECTS_KEY: &str = "created-objects";

/// The objects a step found missing and is creating (or created), as `Kind/ns/name`, each
/// saved durably before its first write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectJournal {
    /// `Kind/namespace/name` of each object this run is creating.
    #[serde(default)]
    pub creating: Vec<String>,
}

impl ObjectJournal {
    /// The journal key of an object.
    pub fn key(kind: Kind, ns: &str, name: &str) -> String {
        format!("{}/{ns}/{name}", kind.type_name())
    }

    /// Whether the journal lists `kind ns/name`.
    pub fn lists(&self, kind: Kind, ns: &str, name: &str) -> bool {
        let k = Self::key(kind, ns, name);
        self.creating.contains(&k)
    }

    /// In an undo: the forward action's journal; `None` when it saved none.
    ///
    /// # Errors
    /// The member does not decode (permanent `definition` error).
    pub fn of_undo(ctx: &StepContext) -> Result<Option<Self>, StepError> {
        let Some(serde_json::Value::Object(mut cp)) =
            ctx.action_checkpoint::<serde_json::Value>()?
        else {
            return Ok(None);
        };
        match cp.remove(OBJECTS_KEY) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                StepError::permanent(
                    hcp_runtime::error::kind::DEFINITION,
                    format!("action checkpoint member `{OBJECTS_KEY}`: {e}"),
                )
            }),
        }
    }
}

/// Output: the HostedCluster and, for private topologies, the router IP.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostedClusterOutput {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Internal load balancer IP of the private router.
    pub router_ip: Option<String>,
    /// Public load balancer IP of the public `router` Service (PublicAndPrivate).
    #[serde(default)]
    pub public_router_ip: Option<String>,
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

pub(crate) fn read_file(path: &std::path::Path, what: &str) -> Result<Secret<Vec<u8>>, StepError> {
    crate::files::read_regular(path, crate::files::MAX_INPUT_FILE)
        .map(Secret::new)
        .map_err(|e| {
            StepError::permanent(
                "validation",
                format!("cannot read the {what} file {}: {e}", path.display()),
            )
            .with_code("FileUnreadable")
        })
}

/// Why the pool's conditions do not yet speak of its current spec: HyperShift stamps every
/// NodePool condition with the `metadata.generation` it reconciled (`nodepool/capi.go`,
/// `conditions.go`: `ObservedGeneration: nodePool.Generation`), and until it has reconciled
/// a change, `Ready` and `UpdatingPlatformMachineTemplate` are the previous spec's.
pub fn stale_conditions(pool: &Value) -> Option<String> {
    let generation = pool
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)?;
    let conds = pool
        .pointer("/status/conditions")
        .and_then(Value::as_array)?;
    conds
        .iter()
        .filter(|c| {
            matches!(
                str_at(c, "/type"),
                Some("Ready" | "UpdatingPlatformMachineTemplate" | "UpdatingConfig" | "UpdatingVersion")
            )
        })
        .find_map(|c| {
            let seen = c.get("observedGeneration").and_then(Value::as_i64)?;
            (seen < generation).then(|| {
                format!(
                    "HyperShift has not reconciled the pool's generation {generation} yet ({} is of generation {seen})",
                    str_at(c, "/type").unwrap_or_default()
                )
            })
        })
}

/// The `ClusterVersion*` conditions HyperShift bubbles up from the guest's CVO
/// (`api/hypershift/v1beta1/hostedcluster_conditions.go`) that say why a rollout is not
/// done.
pub fn cluster_version_conditions(status: &Value) -> Vec<String> {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            let t = c.get("type").and_then(Value::as_str).unwrap_or_default();
            let st = c.get("status").and_then(Value::as_str).unwrap_or_default();
            (t == "ClusterVersionFailing" && st == "True")
                || (t == "ClusterVersionAvailable" && st == "False")
                || (t == "ClusterVersionProgressing" && st == "True")
        })
        .map(|c| {
            format!(
                "{}={}: {}",
                c.get("type").and_then(Value::as_str).unwrap_or_default(),
                c.get("status").and_then(Value::as_str).unwrap_or_default(),
                c.get("message").and_then(Value::as_str).unwrap_or_default()
            )
        })
        .collect()
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}
