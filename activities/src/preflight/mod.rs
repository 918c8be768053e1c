//! `hcp-workflow preflight`: prove a cluster's prerequisites against the real APIs before
//! anything is journaled.
//!
//! Every check is **read-only**: GETs, plus the read-only POSTs Azure and Kubernetes define
//! for questions (`checkNameAvailability`, `checkPrivateLinkServiceVisibility`,
//! `SelfSubjectReview`, `SelfSubjectAccessReview`) and the Entra token request. Nothing is
//! created, changed or journaled.
//!
//! All checks run concurrently ([`futures::future::join_all`]), each under its own timeout
//! ([`Options::per_check_timeout`]); a check that does not answer in time is a `fail` row
//! saying so. A check yields one or more [`CheckResult`] rows: status, check id, the exact
//! resource or scope it looked at, what it found, and for a failure the fix (the `az` / `oc`
//! command or portal setting).
//!
//! - [`azure`]: token and who, resource providers and the EncryptionAtHost feature,
//!   effective permissions per scope (derived from the DAG, [`crate::steps::permissions`]),
//!   quotas, VM sizes, the public DNS zone, the storage account name, the persistent group,
//!   the private-link prerequisites.
//! - [`kube`]: the management cluster (reachable, who, access reviews, Route API, CRDs, the
//!   operator, its supported versions and `--private-platform`, the HostedCluster name).
//! - [`refs`]: the cluster file's references (existing OIDC issuer, bring-your-own network
//!   and identities).

pub mod aro;
pub mod azure;
pub mod kube;
pub mod refs;

use crate::steps::cluster::ExistingIssuerKey;
use crate::steps::{AzureEnv, Clients, MgmtEnv, Owner};
use futures::future::BoxFuture;
use hcp_runtime::SagaDag;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A row's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The prerequisite holds.
    Pass,
    /// It could not be proven, or it holds with a caveat; the run may still work.
    Warn,
    /// The run would fail: fix it first.
    Fail,
}

impl Status {
    /// `pass`, `warn`, `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One row of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Verdict.
    pub status: Status,
    /// Check id (`azure.provider`, `k8s.access`, …).
    pub check: String,
    /// What was checked: the exact resource, scope or object.
    pub target: String,
    /// What was found.
    pub detail: String,
    /// How to fix a failure (or a warning): the command or the setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl CheckResult {
    /// A `pass` row.
    pub fn pass(check: &str, target: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            status: Status::Pass,
            check: check.to_string(),
            target: target.into(),
            detail: detail.into(),
            fix: None,
        }
    }

    /// A `warn` row.
    pub fn warn(
        check: &str,
        target: impl Into<String>,
        detail: impl Into<String>,
        fix: Option<String>,
    ) -> Self {
        Self {
            status: Status::Warn,
            check: check.to_string(),
            target: target.into(),
            detail: detail.into(),
            fix,
        }
    }

    /// A `fail` row with its fix.
    pub fn fail(
        check: &str,
        target: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            status: Status::Fail,
            check: check.to_string(),
            target: target.into(),
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The workflow checked for.
    pub workflow: String,
    /// Every row, in check order.
    pub rows: Vec<CheckResult>,
    /// Wall time of the whole run, in milliseconds.
    pub elapsed_ms: u64,
}

impl Report {
    /// Whether any row failed.
    pub fn failed(&self) -> bool {
        self.rows.iter().any(|r| r.status == Status::Fail)
    }

    /// The failing rows.
    pub fn failures(&self) -> impl Iterator<Item = &CheckResult> {
        self.rows.iter().filter(|r| r.status == Status::Fail)
    }

    /// Counts of pass, warn, fail.
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |s| self.rows.iter().filter(|r| r.status == s).count();
        (n(Status::Pass), n(Status::Warn), n(Status::Fail))
    }
}

/// Which workflow the checks are for (some checks apply to one only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Workflow {
    /// create-cluster: everything.
    Create,
    /// delete-cluster: who we are, permissions for the deletes, the management cluster.
    Delete,
    /// update-cluster: who we are, the permissions its steps need, the HostedCluster
    /// exists and is ours, the operator supports the release.
    Update,
}

/// One node pool, as the checks need it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pool {
    /// Pool name.
    pub name: String,
    /// VM size.
    pub vm_size: String,
    /// Replicas.
    pub replicas: i64,
    /// Availability zone, if pinned.
    pub zone: Option<String>,
    /// An update that replaces the pool's running machines with `replicas` of `vm_size`:
    /// the size and count they run now. HyperShift's rolling update (NodePool defaults
    /// `maxSurge: 1`, `maxUnavailable: 0`) adds new machines one at a time before old ones
    /// go, so the regional peak is far below a whole second set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<(String, i64)>,
}

/// HyperShift's default `maxSurge` of a Replace pool (`nodepool/capi.go`
/// `reconcileMachineDeployment`, `api/hypershift/v1beta1/nodepool_types.go`).
pub const DEFAULT_MAX_SURGE: i64 = 1;

/// The vCPUs a rolling replacement of `replicas` machines of `old` vCPUs by machines of
/// `new` vCPUs adds at its peak, with `surge` machines made before old ones go: after `k`
/// new machines, `k - surge` old ones are gone, so the peak is at `k = surge` or at
/// `k = replicas`: `max(surge·new, replicas·(new − old) + surge·old)`.
pub fn rolling_peak(replicas: i64, old: i64, new: i64, surge: i64) -> i64 {
    let s = surge.min(replicas).max(0);
    (s * new).max(replicas * (new - old) + s * old).max(0)
}

/// How the NAT subnet of the Private Link Service is had.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum NatSubnet {
    /// An existing subnet (id).
    Existing(String),
    /// Created by us, with this CIDR, or a free /24 (`None`, `auto`).
    Create {
        /// The subnet id it will have.
        id: String,
        /// The CIDR asked for.
        cidr: Option<String>,
    },
}

/// The private-link side of a Private/PublicAndPrivate cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PrivateLinkInputs {
    /// `privateLink.managedBy` as given (`auto`, `hypershift`, `hcp-workflow`).
    pub managed_by: String,
    /// Management subscription's Azure target.
    pub mgmt_azure: AzureEnv,
    /// Management subscription.
    pub mgmt_subscription: String,
    /// Load-balancer resource group id (where the PLS goes).
    pub lb_rg: String,
    /// Management VNet id.
    pub vnet_id: String,
    /// NAT subnet.
    pub nat_subnet: NatSubnet,
    /// The PLS id (hcp-workflow mode).
    pub pls_id: String,
}

/// Bring-your-own network ids.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByoNetwork {
    /// VNet id.
    pub vnet_id: String,
    /// Subnet id.
    pub subnet_id: String,
    /// NSG id.
    pub nsg_id: String,
}

/// Everything the checks read, taken from the cluster file and its layout by the caller
/// (this crate does not know the file format).
#[derive(Clone, Debug)]
pub struct Inputs {
    /// Which workflow.
    pub workflow: Workflow,
    /// Guest subscription's Azure target.
    pub azure: AzureEnv,
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Cluster and infra id.
    pub owner: Owner,
    /// HostedCluster namespace.
    pub namespace: String,
    /// Guest subscription.
    pub subscription: String,
    /// Region.
    pub location: String,
    /// `baseDomain`.
    pub base_domain: String,
    /// `dnsZoneResourceGroup` (a name).
    pub dns_zone_resource_group: Option<String>,
    /// OIDC storage account id, when the issuer is created.
    pub storage_account_id: Option<String>,
    /// Persistent group id.
    pub persistent_rg: String,
    /// Node pools.
    pub pools: Vec<Pool>,
    /// Whether the network (VNet) is created by us.
    pub network_created: bool,
    /// Bring-your-own network.
    pub byo_network: Option<ByoNetwork>,
    /// Bring-your-own identities: component → client id.
    pub byo_identities: Option<BTreeMap<String, String>>,
    /// Bring-your-own identities: component → the service-account subjects its federated
    /// credentials must name (`system:serviceaccount:<namespace>:<name>`).
    pub byo_subjects: BTreeMap<String, Vec<String>>,
    /// The cluster's OIDC issuer URL (what a federated credential's `issuer` must be).
    pub issuer_url: String,
    /// Existing OIDC issuer and its signing key file.
    pub oidc_existing: Option<ExistingIssuerKey>,
    /// The release's OpenShift minor version.
    pub release: Option<(u32, u32)>,
    /// Private link, for private topologies.
    pub private_link: Option<PrivateLinkInputs>,
    /// The ARO HCP identity model (`identities.aroHcp`).
    pub aro: Option<aro::AroInputs>,
}

/// Run options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Limit of each check.
    pub per_check_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            per_check_timeout: Duration::from_secs(30),
        }
    }
}

/// One check to run: its id, what it looks at (for the timeout row), and its future.
pub(crate) struct Check {
    pub id: &'static str,
    pub target: String,
    pub fut: BoxFuture<'static, Vec<CheckResult>>,
}

impl Check {
    pub(crate) fn new(
        id: &'static str,
        target: impl Into<String>,
        fut: impl std::future::Future<Output = Vec<CheckResult>> + Send + 'static,
    ) -> Self {
        Self {
            id,
            target: target.into(),
            fut: Box::pin(fut),
        }
    }
}

/// Run every check that applies to `inputs.workflow`, concurrently, each under
/// `opts.per_check_timeout`. `dag` is the workflow's DAG: the permissions to check are
/// derived from its nodes.
pub async fn run(
    clients: std::sync::Arc<Clients>,
    inputs: &Inputs,
    dag: &SagaDag,
    opts: &Options,
) -> Report {
    let t0 = Instant::now();
    let inputs = std::sync::Arc::new(inputs.clone());
    let mut checks = Vec::new();
    checks.extend(azure::checks(&clients, &inputs, dag));
    checks.extend(kube::checks(&clients, &inputs));
    checks.extend(refs::checks(&clients, &inputs));
    checks.extend(aro::checks(&clients, &inputs));
    let limit = opts.per_check_timeout;
    let futs = checks.into_iter().map(|c| async move {
        match tokio::time::timeout(limit, c.fut).await {
            Ok(rows) => rows,
            Err(_) => vec![CheckResult::fail(
                c.id,
                c.target,
                format!("no answer within {} s", limit.as_secs()),
                "check the network path to the endpoint (proxy, firewall, private endpoint) and retry",
            )],
        }
    });
    let rows: Vec<CheckResult> = collapse_dependents(
        futures::future::join_all(futs)
            .await
            .into_iter()
            .flatten()
            .collect(),
    );
    Report {
        workflow: match inputs.workflow {
            Workflow::Create => "create-cluster".into(),
            Workflow::Delete => "delete-cluster".into(),
            Workflow::Update => "update-cluster".into(),
        },
        rows,
        elapsed_ms: t0.elapsed().as_millis() as u64,
    }
}

/// The rows that failed only because `azure.token` did (no ARM client could be made: the
/// same error, repeated once per provider, permission, quota, …) become one row after it,
/// naming how many checks of which kinds wait for it; the first failing dependency is what
/// to fix, and twenty copies of its error hide that.
fn collapse_dependents(rows: Vec<CheckResult>) -> Vec<CheckResult> {
    let token_failed = rows
        .iter()
        .any(|r| r.check == "azure.token" && r.status == Status::Fail);
    if !token_failed {
        return rows;
    }
    let (dependent, mut kept): (Vec<CheckResult>, Vec<CheckResult>) = rows
        .into_iter()
        .partition(|r| r.status == Status::Fail && r.detail.starts_with(azure::NO_CLIENT));
    if dependent.is_empty() {
        return kept;
    }
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for r in &dependent {
        match kinds.iter_mut().find(|(k, _)| *k == r.check) {
            Some((_, n)) => *n += 1,
            None => kinds.push((r.check.clone(), 1)),
        }
    }
    let named: Vec<String> = kinds
        .iter()
        .map(|(k, n)| {
            if *n == 1 {
                k.clone()
            } else {
                format!("{k} ×{n}")
            }
        })
        .collect();
    let row = CheckResult::fail(
        "azure.not-checked",
        format!("{} checks: {}", dependent.len(), named.join(", ")),
        "not checked: each needs an ARM token, and azure.token could not get one",
        "fix azure.token first, then run preflight again",
    );
    let at = kept
        .iter()
        .position(|r| r.check == "azure.token")
        .map_or(kept.len(), |i| i + 1);
    kept.insert(at, row);
    kept
}

/// A short text for an error (never a secret: ARM and Kubernetes errors carry none).
pub(crate) fn short(e: &impl std::fmt::Display) -> String {
    let s = e.to_string();
    if s.len() > 240 {
        let mut end = 240;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Twenty rows that fail only because the token did are one row after `azure.token`,
    /// naming them; rows that fail for their own reason stay.
    #[test]
    fn rows_that_wait_for_the_token_become_one_row_after_it() {
        let dependent = |check: &str, target: &str| {
            CheckResult::fail(
                check,
                target,
                format!("{}cannot reach https://login.example/t", azure::NO_CLIENT),
                azure::NO_CLIENT_FIX,
            )
        };
        let mut rows = vec![
            CheckResult::pass("config.release", "r", "ok"),
            CheckResult::fail(
                "azure.token",
                "t",
                "cannot reach https://login.example/t",
                "network",
            ),
            CheckResult::fail("k8s.reachable", "k", "connection refused", "kubeconfig"),
        ];
        for i in 0..6 {
            rows.push(dependent("azure.provider", &format!("p{i}")));
            rows.push(dependent("azure.permission", &format!("q{i}")));
        }
        rows.push(dependent("azure.quota", "q"));
        let out = collapse_dependents(rows);
        let checks: Vec<&str> = out.iter().map(|r| r.check.as_str()).collect();
        assert_eq!(
            checks,
            [
                "config.release",
                "azure.token",
                "azure.not-checked",
                "k8s.reachable"
            ]
        );
        assert_eq!(
            out[2].target,
            "13 checks: azure.provider ×6, azure.permission ×6, azure.quota"
        );
        assert_eq!(out[2].status, Status::Fail);
        // A token that worked: nothing is folded.
        let ok = vec![
            CheckResult::pass("azure.token", "t", "ok"),
            dependent("azure.quota", "q"),
        ];
        assert_eq!(collapse_dependents(ok.clone()), ok);
    }
}
