//! `hcp-workflow verify`: is what the journal says still true in Azure and on the
//! management cluster?
//!
//! Read-only by construction: every call here is a GET (or a list, which is a GET that
//! follows `nextLink`). One [`Row`] per check, with what the journal expects, what was
//! found, and the fix. The expectations come from the caller (the cluster's ledger and its
//! layout, `hcp-workflows`' `verify` module); this module only looks.
//!
//! What is checked:
//! - **existence** of every resource the ledger holds as created, adopted, updated or kept
//!   (a GET at the api-version of its type);
//! - **ownership marks** of what hcp-workflow created: the `hcp-workflow.io/cluster` and
//!   `hcp-workflow.io/infra-id` tags (labels on Kubernetes objects, record-set metadata in
//!   DNS zones);
//! - **identity**: every federated credential's issuer, subject and audience; every role
//!   assignment's principal is the current `principalId` of one of the cluster's
//!   identities or service principals, or the outside principal its run resolved
//!   (`assignment`: a recreated identity leaves assignments to a principal that no longer
//!   exists: HyperShift's stale-assignment 403); ARO HCP's Entra applications, service
//!   principals and bound certificates (`entra`) and Key Vault certificates and secrets
//!   (`vault_object`, listed, never read);
//! - **private link**, whoever made it: the Private Link Service's visibility and
//!   auto-approval are exactly the allowed subscriptions; every private endpoint
//!   connection is the cluster's own endpoint's or from an allowed subscription, and
//!   Approved; the private DNS A records point at the endpoint's address. hcp-workflow's
//!   own (`privateLink.managedBy: hcp-workflow`) is found in the layout; HyperShift's
//!   (`managedBy: hypershift`) in the status of its `AzurePrivateLinkService`, whose
//!   conditions must all be True (`hypershift_link`);
//! - **VNet links**: every private DNS zone's virtual network link (the infra zone's and
//!   the private-link zone's, hcp-workflow's or HyperShift's) exists, names the guest VNet
//!   and is not in a failed state ([`vnet_link`]);
//! - **management cluster**: the Secrets the HostedCluster reads exist (pull secret, SSH
//!   key, service-account signing key, etcd encryption key); the HostedCluster is
//!   `Available`; each NodePool is `Ready` with the replicas the file says, and has the
//!   auto-repair and drain timeouts it says (`node-pool.settings`);
//! - **foreign**: resources in the cluster's own resource groups that no ledger knows
//!   (what the live cluster makes for itself, known by its makers' tags, is expected:
//!   [`guest_made`]).

use crate::azure::client::ArmClient;
use crate::azure::durable::{TAG_CLUSTER, TAG_INFRA_ID};
use crate::azure::error::{ArmError, ServiceError};
use crate::azure::models::{
    API_AUTHORIZATION, API_DNS, API_MSI, API_NETWORK, API_PRIVATE_DNS, API_RESOURCES, API_STORAGE,
};
use crate::kube::mgmt::Kind;
use crate::steps::node_pool::PoolManagement;
use crate::steps::{AzureEnv, Clients, MgmtEnv};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// What a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// As the journal says.
    Ok,
    /// It exists, but differs from what the journal expects.
    Drifted,
    /// The journal holds it, and it does not exist.
    Missing,
    /// It exists, and no ledger knows it.
    Foreign,
    /// It could not be checked (an error reading it).
    Unknown,
}

impl Verdict {
    /// Kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Drifted => "drifted",
            Verdict::Missing => "missing",
            Verdict::Foreign => "foreign",
            Verdict::Unknown => "unknown",
        }
    }
}

/// One check.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The check (`exists`, `tags`, `pls.visibility`, …).
    pub check: String,
    /// What it looked at: an ARM id or `Kind ns/name`.
    pub resource: String,
    /// Verdict.
    pub verdict: Verdict,
    /// What the journal expects.
    pub expected: String,
    /// What was found.
    pub found: String,
    /// The fix (a command), when not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// A resource the ledger holds (its newest entry is not a deletion).
#[derive(Clone, Debug)]
pub struct Expected {
    /// `azure` or `kubernetes`.
    pub kind: String,
    /// Resource type (`Microsoft.Network/virtualNetworks`, `HostedCluster`).
    pub resource_type: String,
    /// ARM id, or `ns/name` (Kubernetes).
    pub id: String,
    /// Created by hcp-workflow (its ownership marks are checked), not adopted or kept.
    pub ours: bool,
    /// A role assignment's principal, as the run that wrote it recorded it.
    pub principal: Option<crate::steps::identity::AssignedPrincipal>,
}

/// Who made a private link (its Private Link Service, endpoint, zones, links and records),
/// and so who puts it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkManager {
    /// hcp-workflow (`privateLink.managedBy: hcp-workflow`): `repair-cluster` puts it back.
    HcpWorkflow,
    /// HyperShift's controllers (`managedBy: hypershift`), as the `AzurePrivateLinkService`
    /// `cr` (`<namespace>/<name>`) reports them; hcp-workflow never writes them.
    HyperShift {
        /// The `AzurePrivateLinkService`, `<namespace>/<name>`.
        cr: String,
    },
}

impl LinkManager {
    /// How an operator sees what HyperShift's controllers report.
    fn describe(&self) -> String {
        match self {
            LinkManager::HcpWorkflow => String::new(),
            LinkManager::HyperShift { cr } => {
                let (ns, name) = cr.split_once('/').unwrap_or(("", cr));
                format!("kubectl describe azureprivatelinkservice -n {ns} {name}")
            }
        }
    }
}

/// A private link: hcp-workflow's own, or HyperShift's.
#[derive(Clone, Debug)]
pub struct PrivateLink {
    /// The Private Link Service.
    pub pls_id: String,
    /// The cluster's own private endpoint (hcp-workflow's, or HyperShift's
    /// `private-router-pe`).
    pub pe_id: String,
    /// Subscriptions whose endpoints may connect (the guest's first).
    pub allowed: Vec<String>,
    /// The private DNS A record sets that must point at the endpoint.
    pub records: Vec<String>,
    /// Who made it.
    pub manager: LinkManager,
}

/// HyperShift's own private link (`privateLink.managedBy: hypershift`): what verify
/// expects of the `AzurePrivateLinkService` HyperShift makes for the cluster and of the
/// Azure resources its status names (`hypershift_link`).
#[derive(Clone, Debug)]
pub struct HyperShiftLinkCheck {
    /// Subscriptions whose endpoints may connect, as HyperShift's operator computes them
    /// (`buildAllowedSubscriptions`: the guest subnet's subscription, then the CR's
    /// `additionalAllowedSubscriptions`, i.e. the file's `allowedSubscriptions`).
    pub allowed: Vec<String>,
    /// The guest VNet HyperShift's private DNS zones must be linked to (the CR's
    /// `spec.guestVNetID`, the HostedCluster's `platform.azure.vnetID`).
    pub vnet_id: String,
}

/// A private DNS zone's virtual network link that must exist and name a VNet.
#[derive(Clone, Debug)]
pub struct VnetLink {
    /// The link (`…/privateDnsZones/<zone>/virtualNetworkLinks/<name>`).
    pub id: String,
    /// The VNet its `properties.virtualNetwork.id` must name.
    pub vnet_id: String,
}

/// A Secret the HostedCluster reads (in [`Input::namespace`]).
#[derive(Clone, Debug)]
pub struct SecretRef {
    /// Secret name.
    pub name: String,
    /// The HostedCluster field naming it (`spec.pullSecret`).
    pub field: String,
    /// The fix when it is missing (what puts it back depends on what it holds: a pull
    /// secret comes from the file, an etcd encryption key only from a copy of it).
    pub fix: String,
}

/// A NodePool and the size and management settings the file gives it.
#[derive(Clone, Debug)]
pub struct Pool {
    /// NodePool name (`<cluster>-<pool>`).
    pub name: String,
    /// `replicas`, or `(min, max)` with autoscaling.
    pub replicas: Result<i64, (i64, i64)>,
    /// Auto-repair and the drain timeouts, as create-cluster renders them.
    pub management: PoolManagement,
}

/// Everything one verify of one cluster needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// Cluster name.
    pub cluster: String,
    /// Infra id.
    pub infra_id: String,
    /// Guest subscription target.
    pub azure: AzureEnv,
    /// Management subscription target.
    pub mgmt_azure: AzureEnv,
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// The ledger's resources.
    pub expected: Vec<Expected>,
    /// The issuer URL every federated credential must name.
    pub issuer_url: String,
    /// hcp-workflow's private link, when it made one.
    pub private_link: Option<PrivateLink>,
    /// HostedCluster namespace.
    pub namespace: String,
    /// The cluster's NodePools.
    pub pools: Vec<Pool>,
    /// Resource groups that are the cluster's own (created by it), scanned for foreign
    /// resources.
    pub own_groups: Vec<String>,
    /// The Secret (in [`Input::namespace`]) with the service-account signing key whose
    /// public half the issuer's JWKS must list.
    pub signing_key_secret: String,
    /// The management subscription (the Private Link Service's, the NAT subnet's): read
    /// with the management target's token.
    pub mgmt_subscription: String,
    /// HyperShift's private link, when HyperShift makes it.
    pub hypershift_link: Option<HyperShiftLinkCheck>,
    /// The private DNS zones' VNet links hcp-workflow made (the ledger's `exists` row of
    /// each is this check's: `dns.vnet-link`).
    pub vnet_links: Vec<VnetLink>,
    /// The Secrets the HostedCluster reads (the ledger's `exists` row of each is this
    /// check's: `secret.exists`).
    pub secrets: Vec<SecretRef>,
}

/// The api-version a GET of `resource_type` uses (`None`: not checked by GET).
pub fn api_version(resource_type: &str) -> Option<&'static str> {
    let t = resource_type.to_ascii_lowercase();
    Some(if t == "microsoft.resources/resourcegroups" {
        API_RESOURCES
    } else if t.starts_with("microsoft.managedidentity/") {
        API_MSI
    } else if t.starts_with("microsoft.authorization/") {
        API_AUTHORIZATION
    } else if t.starts_with("microsoft.storage/") {
        API_STORAGE
    } else if t.starts_with("microsoft.network/privatednszones") {
        API_PRIVATE_DNS
    } else if t.starts_with("microsoft.network/dnszones") {
        API_DNS
    } else if t.starts_with("microsoft.network/") {
        API_NETWORK
    } else {
        return None;
    })
}

/// Whether resources of this type carry tags hcp-workflow sets (children such as subnets,
/// federated credentials, record sets and role assignments do not).
fn tagged(resource_type: &str) -> bool {
    let t = resource_type.to_ascii_lowercase();
    let parts = t.split('/').count();
    t == "microsoft.resources/resourcegroups"
        || (parts == 2 && !t.starts_with("microsoft.authorization/"))
}

/// A record set hcp-workflow writes into a public zone it does not own (marked by its
/// `metadata`, since the zone is shared; the private zones' records are in zones of ours).
fn record_set(resource_type: &str) -> bool {
    resource_type
        .to_ascii_lowercase()
        .starts_with("microsoft.network/dnszones/")
}

/// Puts back what is missing or drifted (create-cluster's steps run forward again over the
/// unchanged file, plus the private link's access: `hcp-workflows`' `repair_cluster`).
pub const REPAIR: &str = "hcp-workflow start repair-cluster --config FILE";

fn row(
    check: &str,
    resource: &str,
    verdict: Verdict,
    expected: impl Into<String>,
    found: impl Into<String>,
    fix: Option<String>,
) -> Row {
    Row {
        check: check.into(),
        resource: resource.into(),
        verdict,
        expected: expected.into(),
        found: found.into(),
        fix: if verdict == Verdict::Ok { None } else { fix },
    }
}

fn unknown(check: &str, resource: &str, err: impl std::fmt::Display) -> Row {
    row(
        check,
        resource,
        Verdict::Unknown,
        "readable",
        format!("could not read it: {err}"),
        Some(
            "check the credentials and reachability (`hcp-workflow preflight`), then verify again"
                .into(),
        ),
    )
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

fn eq_ci(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// How many times a read that Azure throttled or failed transiently is tried again.
const READ_RETRIES: u32 = 4;
/// The longest a read waits before trying again (a longer `Retry-After` is cut to it).
const READ_WAIT_CAP: std::time::Duration = std::time::Duration::from_secs(10);

/// A read tried again while Azure throttles it (429, honouring `Retry-After`) or fails
/// transiently (5xx, a timeout): one throttled GET must not turn into a verdict. What is
/// still failing after the retries is the caller's `unknown` row, never a drift.
async fn patient<T, E, F, Fut>(mut f: F) -> Result<T, E>
where
    E: Transient,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if e.retryable() && tries < READ_RETRIES => {
                tries += 1;
                let wait = e
                    .asked_delay()
                    .unwrap_or(std::time::Duration::from_millis(250 << tries))
                    .min(READ_WAIT_CAP);
                tokio::time::sleep(wait).await;
            }
            other => return other,
        }
    }
}

/// An error a read may be tried again after.
trait Transient {
    fn retryable(&self) -> bool;
    fn asked_delay(&self) -> Option<std::time::Duration>;
}

impl Transient for ArmError {
    fn retryable(&self) -> bool {
        self.class.is_retryable()
    }
    fn asked_delay(&self) -> Option<std::time::Duration> {
        self.retry_after
    }
}

impl Transient for ServiceError {
    fn retryable(&self) -> bool {
        self.class.is_retryable()
    }
    fn asked_delay(&self) -> Option<std::time::Duration> {
        self.retry_after
    }
}

/// A GET of an ARM resource ([`ArmClient::get_value`]), [`patient`].
async fn read(arm: &ArmClient, id: &str, api: &str) -> Result<Option<Value>, ArmError> {
    patient(|| arm.get_value(id, api)).await
}

/// Subscription id of an ARM id (`/subscriptions/<id>/…`).
fn subscription_of(id: &str) -> &str {
    id.split('/').nth(2).unwrap_or_default()
}

/// Verify one cluster: every row, in a stable order (ledger order, then the cross-checks).
pub async fn verify(clients: &Clients, input: &Input) -> Vec<Row> {
    let mut rows = Vec::new();
    let arm = match clients.arm(&input.azure).await {
        Ok(a) => a,
        Err(e) => return vec![unknown("azure", &input.cluster, e)],
    };
    let mgmt_arm = clients.arm(&input.mgmt_azure).await.ok();
    let arm_for = |id: &str| -> &ArmClient {
        match &mgmt_arm {
            // Each subscription's client carries its token; both reach the same ARM.
            Some(m)
                if !input.mgmt_subscription.is_empty()
                    && eq_ci(&input.mgmt_subscription, subscription_of(id)) =>
            {
                m
            }
            _ => &arm,
        }
    };
    // The Azure resources whose existence the ledger's `exists` rows report.
    let ledger: BTreeSet<String> = input
        .expected
        .iter()
        .filter(|e| e.kind == "azure")
        .map(|e| e.id.to_ascii_lowercase())
        .collect();
    // Secrets the HostedCluster reads that the ledger holds (name → created by us): their
    // rows are `secret.exists`'s, not `exists`'s.
    let mut ledger_secrets: BTreeMap<String, bool> = BTreeMap::new();
    let mut principals: Vec<String> = Vec::new();
    // A cluster identity or service principal that could not be read: an assignment to a
    // principal none of the others has is then unknown, not stale.
    let mut principals_incomplete = false;
    let mut assignments: Vec<(&Expected, String)> = Vec::new();
    let mut vaults = VaultListings::default();
    for e in &input.expected {
        if e.kind == crate::steps::aro_identity::KIND_ENTRA {
            let (r, principal) = entra(clients, input, e).await;
            principals_incomplete |= r.verdict == Verdict::Unknown;
            principals.extend(principal);
            rows.push(r);
            continue;
        }
        if e.kind == crate::steps::aro_identity::KIND_KEY_VAULT {
            rows.extend(vault_object(clients, input, e, &mut vaults).await);
            continue;
        }
        if e.kind == "kubernetes" {
            if let Some(s) = referenced_secret(input, e) {
                ledger_secrets.insert(s.name.clone(), e.ours);
                continue;
            }
            rows.push(kube_exists(clients, input, e).await);
            continue;
        }
        // A VNet link's existence is its `dns.vnet-link` row's (one row per drift).
        if input.vnet_links.iter().any(|l| eq_ci(&l.id, &e.id)) {
            continue;
        }
        let Some(api) = api_version(&e.resource_type) else {
            continue;
        };
        let found = match read(arm_for(&e.id), &e.id, api).await {
            Ok(v) => v,
            Err(err) => {
                principals_incomplete |= e
                    .resource_type
                    .eq_ignore_ascii_case("Microsoft.ManagedIdentity/userAssignedIdentities");
                rows.push(unknown("exists", &e.id, err));
                continue;
            }
        };
        let Some(body) = found else {
            rows.push(row(
                "exists",
                &e.id,
                Verdict::Missing,
                format!(
                    "{} ({})",
                    e.resource_type,
                    if e.ours {
                        "created by hcp-workflow"
                    } else {
                        "used by it"
                    }
                ),
                "not found (404)",
                Some(if e.ours {
                    format!("recreate it under the same name: {REPAIR}")
                } else {
                    "it is not hcp-workflow's to recreate: restore it, or make the cluster again"
                        .into()
                }),
            ));
            continue;
        };
        rows.push(row(
            "exists",
            &e.id,
            Verdict::Ok,
            &e.resource_type,
            "exists",
            None,
        ));
        let t = e.resource_type.to_ascii_lowercase();
        if e.ours && tagged(&e.resource_type) {
            let tags = body.get("tags").cloned().unwrap_or(Value::Null);
            let have = |k: &str| {
                tags.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("(none)")
                    .to_string()
            };
            rows.push(tags_row(
                input,
                &e.id,
                (&have(TAG_CLUSTER), &have(TAG_INFRA_ID)),
                format!(
                    "az tag update --resource-id {} --operation Merge --tags {TAG_CLUSTER}={} {TAG_INFRA_ID}={}",
                    e.id, input.cluster, input.infra_id
                ),
            ));
        }
        if e.ours && record_set(&e.resource_type) {
            let meta = body
                .pointer("/properties/metadata")
                .cloned()
                .unwrap_or(Value::Null);
            let c = meta
                .get(crate::steps::dns::META_CLUSTER)
                .and_then(Value::as_str)
                .unwrap_or("(none)");
            rows.push(row(
                "marks",
                &e.id,
                if c == input.cluster {
                    Verdict::Ok
                } else {
                    Verdict::Drifted
                },
                format!(
                    "metadata {}={}",
                    crate::steps::dns::META_CLUSTER,
                    input.cluster
                ),
                format!("metadata {}={c}", crate::steps::dns::META_CLUSTER),
                Some(format!(
                    "az network dns record-set a update --ids {} --metadata {}={} {}={}",
                    e.id,
                    crate::steps::dns::META_CLUSTER,
                    input.cluster,
                    crate::steps::dns::META_INFRA_ID,
                    input.infra_id
                )),
            ));
        }
        if t.ends_with("/federatedidentitycredentials") {
            let issuer = str_at(&body, "/properties/issuer").unwrap_or_default();
            let audiences: Vec<&str> = body
                .pointer("/properties/audiences")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let ok = issuer.trim_end_matches('/') == input.issuer_url.trim_end_matches('/')
                && audiences == ["openshift"];
            rows.push(row(
                "identity.federation",
                &e.id,
                if ok { Verdict::Ok } else { Verdict::Drifted },
                format!("issuer {} audience openshift", input.issuer_url),
                format!(
                    "issuer {} audience {} (subject {})",
                    if issuer.is_empty() { "(none)" } else { issuer },
                    audiences.join(","),
                    str_at(&body, "/properties/subject").unwrap_or("(none)")
                ),
                Some(format!(
                    "{REPAIR} (writes it again with issuer {} and audience openshift)",
                    input.issuer_url
                )),
            ));
        }
        if t == "microsoft.managedidentity/userassignedidentities"
            && let Some(p) = str_at(&body, "/properties/principalId")
        {
            principals.push(p.to_ascii_lowercase());
        }
        if t == "microsoft.authorization/roleassignments" {
            assignments.push((
                e,
                str_at(&body, "/properties/principalId")
                    .unwrap_or_default()
                    .to_ascii_lowercase(),
            ));
        }
    }
    if !principals.is_empty() || assignments.iter().any(|(e, _)| e.principal.is_some()) {
        for (e, p) in assignments {
            rows.push(assignment(e, &p, &principals, principals_incomplete));
        }
    }
    if let Some(pl) = &input.private_link {
        rows.extend(private_link(arm_for(&pl.pls_id), &arm, pl, &ledger).await);
    }
    // What HyperShift's AzurePrivateLinkService names is HyperShift's, ledger or not (a
    // create records what the status named when its wait ended: the base-domain zone may
    // come after).
    let mut hypershift_made = Vec::new();
    if let Some(hs) = &input.hypershift_link {
        let pls_arm = mgmt_arm.as_ref().unwrap_or(&arm);
        let (r, named) = hypershift_link(clients, input, hs, pls_arm, &arm, &ledger).await;
        rows.extend(r);
        hypershift_made = named;
    }
    for l in &input.vnet_links {
        rows.push(vnet_link(&arm, l, &LinkManager::HcpWorkflow).await);
    }
    rows.extend(secrets(clients, input, &ledger_secrets).await);
    rows.extend(oidc(clients, input).await);
    rows.extend(management(clients, input).await);
    rows.extend(foreign(&arm, input, &hypershift_made).await);
    rows
}

/// Whether a role assignment still names a principal that is there: one of the cluster's
/// identities' or service principals' current principal, or, for one written for a
/// principal outside the cluster (the caller, the management cluster's Key Vault Secrets
/// Provider identity), the principal its run resolved. A recreated identity leaves its
/// assignments naming a principal that no longer exists (HyperShift's stale-assignment
/// 403); a read that failed leaves the answer unknown.
fn assignment(e: &Expected, live: &str, principals: &[String], incomplete: bool) -> Row {
    let recorded = e.principal.as_ref();
    let external = recorded.filter(|r| r.external);
    let expected = match external {
        Some(r) => format!("principal {} (the one its run resolved)", r.id),
        None => "the principalId of one of the cluster's identities".into(),
    };
    let fix = Some(format!(
        "{REPAIR} (replaces it with an assignment to the identity's current principal)"
    ));
    let ok = match external {
        Some(r) => r.id.eq_ignore_ascii_case(live),
        None => principals.iter().any(|p| p == live),
    };
    if ok {
        return row(
            "identity.assignment",
            &e.id,
            Verdict::Ok,
            expected,
            format!("principal {live}"),
            None,
        );
    }
    if external.is_none() && incomplete {
        return row(
            "identity.assignment",
            &e.id,
            Verdict::Unknown,
            expected,
            format!(
                "principal {live}, which is none of the identities read (one of them could not be read)"
            ),
            Some(
                "check the credentials and reachability (`hcp-workflow preflight`), then verify again"
                    .into(),
            ),
        );
    }
    row(
        "identity.assignment",
        &e.id,
        Verdict::Drifted,
        expected,
        format!(
            "principal {live}{}",
            if external.is_some() {
                ", another one (re-created since?)"
            } else {
                ", which is none of them (an identity recreated since?)"
            }
        ),
        fix,
    )
}

/// The `tags` row of something hcp-workflow created: it still carries this cluster's
/// `hcp-workflow.io/cluster` and `hcp-workflow.io/infra-id` (`found`), or `fix` puts them
/// back.
fn tags_row(input: &Input, id: &str, (c, i): (&str, &str), fix: String) -> Row {
    let ok = c == input.cluster && i == input.infra_id;
    row(
        "tags",
        id,
        if ok { Verdict::Ok } else { Verdict::Drifted },
        format!(
            "{TAG_CLUSTER}={} {TAG_INFRA_ID}={}",
            input.cluster, input.infra_id
        ),
        format!("{TAG_CLUSTER}={c} {TAG_INFRA_ID}={i}"),
        Some(fix),
    )
}

/// The text between `open` and the next `close` in `s`.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let rest = &s[s.find(open)? + open.len()..];
    Some(&rest[..rest.find(close)?])
}

/// Graph `key=value` tags hold this cluster's ownership.
fn graph_owned(tags: &[String], input: &Input) -> bool {
    let has = |k: &str, v: &str| tags.iter().any(|t| t == &format!("{k}={v}"));
    has(TAG_CLUSTER, &input.cluster) && has(TAG_INFRA_ID, &input.infra_id)
}

/// An Entra object of the ledger (`entra`): an application (by `uniqueName`, with this
/// cluster's tags when ours), its service principal (whose object id is what the control
/// plane's role assignments name: returned), or a certificate credential bound to an
/// application. One row each.
async fn entra(clients: &Clients, input: &Input, e: &Expected) -> (Row, Option<String>) {
    let graph = match clients.graph(&input.azure).await {
        Ok(g) => g,
        Err(err) => return (unknown("exists", &e.id, err), None),
    };
    let t = e.resource_type.to_ascii_lowercase();
    let fix = || {
        Some(if e.ours {
            format!("recreate it under the same name: {REPAIR}")
        } else {
            "it is not hcp-workflow's to recreate: restore it, or make the cluster again".into()
        })
    };
    let missing = |what: &str| {
        row(
            "exists",
            &e.id,
            Verdict::Missing,
            what,
            "not found (404)",
            fix(),
        )
    };
    if t.ends_with(".serviceprincipal") {
        let Some(app_id) = between(&e.id, "appId='", "')") else {
            return (missing("a service principal"), None);
        };
        return match graph.get_service_principal_by_app_id(app_id).await {
            Err(err) => (unknown("exists", &e.id, err), None),
            Ok(None) => (missing("a service principal"), None),
            Ok(Some(sp)) => (
                row(
                    "exists",
                    &e.id,
                    Verdict::Ok,
                    "a service principal",
                    format!("object id {}", sp.id),
                    None,
                ),
                Some(sp.id.to_ascii_lowercase()),
            ),
        };
    }
    if t.ends_with(".keycredential") {
        let (Some(app), Some(kid)) = (
            between(&e.id, "applications/", "/keyCredentials/"),
            e.id.rsplit('/').next(),
        ) else {
            return (missing("a certificate credential"), None);
        };
        return match graph.get_application(app).await {
            Err(err) => (unknown("exists", &e.id, err), None),
            Ok(None) => (missing("a certificate credential of an application"), None),
            Ok(Some(a)) => {
                let found = a.key_credentials.iter().any(|k| {
                    k.key_id
                        .as_deref()
                        .is_some_and(|k| k.eq_ignore_ascii_case(kid))
                });
                if found {
                    (
                        row(
                            "exists",
                            &e.id,
                            Verdict::Ok,
                            "a certificate credential",
                            "bound",
                            None,
                        ),
                        None,
                    )
                } else {
                    (
                        row(
                            "exists",
                            &e.id,
                            Verdict::Missing,
                            format!("key {kid} in the keyCredentials of application {app}"),
                            format!("{} other key(s)", a.key_credentials.len()),
                            Some(format!("{REPAIR} (binds the certificate again)")),
                        ),
                        None,
                    )
                }
            }
        };
    }
    let Some(unique) = between(&e.id, "uniqueName='", "')") else {
        return (missing(&e.resource_type), None);
    };
    match graph.get_application_by_unique_name(unique).await {
        Err(err) => (unknown("exists", &e.id, err), None),
        Ok(None) => (missing("an application"), None),
        Ok(Some(a)) if e.ours && !graph_owned(&a.tags, input) => (
            row(
                "tags",
                &e.id,
                Verdict::Drifted,
                format!(
                    "{TAG_CLUSTER}={} {TAG_INFRA_ID}={}",
                    input.cluster, input.infra_id
                ),
                format!("tags {}", a.tags.join(",")),
                Some(format!(
                    "az ad app update --id {} --set tags=[...] (add {TAG_CLUSTER}={} and {TAG_INFRA_ID}={} back)",
                    a.app_id, input.cluster, input.infra_id
                )),
            ),
            None,
        ),
        Ok(Some(a)) => (
            row(
                "exists",
                &e.id,
                Verdict::Ok,
                "an application",
                format!("client id {}", a.app_id),
                None,
            ),
            None,
        ),
    }
}

/// Each vault's certificates and secrets, listed once (names and tags, never values).
#[derive(Default)]
struct VaultListings(BTreeMap<String, Result<VaultObjects, String>>);

struct VaultObjects {
    /// Lower-cased certificate name → tags.
    certificates: BTreeMap<String, BTreeMap<String, String>>,
    /// Lower-cased secret name → tags.
    secrets: BTreeMap<String, BTreeMap<String, String>>,
}

/// A Key Vault object of the ledger (`key-vault`): a certificate, or the credentials
/// secret HyperShift mounts. Listed, not read, so no secret value is ever fetched.
async fn vault_object(
    clients: &Clients,
    input: &Input,
    e: &Expected,
    vaults: &mut VaultListings,
) -> Vec<Row> {
    // `https://{vault}.{suffix}/{certificates|secrets}/{name}`
    let rest = e.id.split_once("://").map_or(e.id.as_str(), |(_, r)| r);
    let mut parts = rest.split('/');
    let (Some(host), Some(collection), Some(name)) = (parts.next(), parts.next(), parts.next())
    else {
        return vec![unknown("exists", &e.id, "not a Key Vault object id")];
    };
    let vault = host.split('.').next().unwrap_or(host).to_ascii_lowercase();
    if !vaults.0.contains_key(&vault) {
        let listed = match clients.key_vault(&input.azure).await {
            Err(err) => Err(err.to_string()),
            Ok(kv) => {
                let tags = |t: &Option<BTreeMap<String, String>>| t.clone().unwrap_or_default();
                let name_of = |id: &str| {
                    crate::azure::keyvault::object_name(id)
                        .unwrap_or_default()
                        .to_ascii_lowercase()
                };
                match (
                    kv.list_certificates(&vault).await,
                    kv.list_secrets(&vault).await,
                ) {
                    (Ok(c), Ok(s)) => Ok(VaultObjects {
                        certificates: c.iter().map(|i| (name_of(&i.id), tags(&i.tags))).collect(),
                        secrets: s.iter().map(|i| (name_of(&i.id), tags(&i.tags))).collect(),
                    }),
                    (Err(err), _) | (_, Err(err)) => Err(err.to_string()),
                }
            }
        };
        vaults.0.insert(vault.clone(), listed);
    }
    let objects = match vaults.0.get(&vault) {
        Some(Ok(o)) => o,
        Some(Err(err)) => return vec![unknown("exists", &e.id, err)],
        None => return vec![],
    };
    let (what, kind, listed) = if collection.eq_ignore_ascii_case("certificates") {
        (
            "a Key Vault certificate",
            "certificate",
            &objects.certificates,
        )
    } else {
        ("a Key Vault secret", "secret", &objects.secrets)
    };
    let Some(tags) = listed.get(&name.to_ascii_lowercase()) else {
        return vec![row(
            "exists",
            &e.id,
            Verdict::Missing,
            what,
            "not found in the vault's listing",
            Some(format!(
                "a deleted Key Vault object waits in the vault's soft-delete bin, and its name cannot be used again until it is recovered: az keyvault {kind} recover --vault-name {vault} --name {name}{}",
                if e.ours {
                    format!(" (if it was purged: {REPAIR})")
                } else {
                    String::new()
                }
            )),
        )];
    };
    let mut rows = vec![row("exists", &e.id, Verdict::Ok, what, "exists", None)];
    if e.ours {
        let have = |k: &str| tags.get(k).map_or("(none)", String::as_str).to_string();
        rows.push(tags_row(
            input,
            &e.id,
            (&have(TAG_CLUSTER), &have(TAG_INFRA_ID)),
            format!(
                "az keyvault {kind} set-attributes --vault-name {vault} --name {name} --tags {TAG_CLUSTER}={} {TAG_INFRA_ID}={}",
                input.cluster, input.infra_id
            ),
        ));
    }
    rows
}

/// The issuer's discovery document and JWKS are publicly readable (anonymous GETs, as Entra
/// ID reads them when a workload exchanges its token), the document names the issuer, and
/// the JWKS lists the key the cluster signs with: the public half of the key in its
/// Secret, compared by kid (the private key is never printed).
async fn oidc(clients: &Clients, input: &Input) -> Vec<Row> {
    let base = input.issuer_url.trim_end_matches('/');
    let cloud = &input.azure.cloud;
    let transport = clients.transport();
    let disc_url = format!("{base}/{}", crate::oidc::DISCOVERY_PATH);
    let mut rows = Vec::new();
    let fix = "hcp-workflow start repair-cluster --config FILE (publishes the documents again)";
    match crate::azure::storage::get_public(cloud, &transport, &disc_url).await {
        Err(e) => rows.push(unknown("oidc.discovery", &disc_url, e)),
        Ok(None) => rows.push(row(
            "oidc.discovery",
            &disc_url,
            Verdict::Missing,
            "publicly readable",
            "404",
            Some(fix.into()),
        )),
        Ok(Some(b)) => {
            let issuer = serde_json::from_slice::<Value>(&b)
                .ok()
                .and_then(|v| v.get("issuer").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default();
            rows.push(row(
                "oidc.discovery",
                &disc_url,
                if issuer.trim_end_matches('/') == base {
                    Verdict::Ok
                } else {
                    Verdict::Drifted
                },
                format!("issuer {base}"),
                format!(
                    "issuer {}",
                    if issuer.is_empty() { "(none)" } else { &issuer }
                ),
                Some(fix.into()),
            ));
        }
    }
    let jwks_url = crate::steps::cluster::jwks_url(clients, cloud, &input.issuer_url).await;
    let want = match clients.mgmt(&input.mgmt).await {
        Err(e) => return [rows, vec![unknown("oidc.jwks", &jwks_url, e)]].concat(),
        Ok(m) => match m
            .get_secret_data(&input.namespace, &input.signing_key_secret, "key")
            .await
        {
            Err(e) => return [rows, vec![unknown("oidc.jwks", &jwks_url, e)]].concat(),
            Ok(None) => None,
            Ok(Some(pem)) => std::str::from_utf8(pem.expose())
                .ok()
                .and_then(|p| crate::oidc::IssuerKey::from_private_pem(p).ok())
                .map(|k| k.kid()),
        },
    };
    match crate::azure::storage::get_public(cloud, &transport, &jwks_url).await {
        Err(e) => rows.push(unknown("oidc.jwks", &jwks_url, e)),
        Ok(None) => rows.push(row(
            "oidc.jwks",
            &jwks_url,
            Verdict::Missing,
            "publicly readable",
            "404",
            Some(fix.into()),
        )),
        Ok(Some(b)) => {
            let kids: Vec<String> = serde_json::from_slice::<Value>(&b)
                .ok()
                .and_then(|v| v.get("keys").and_then(Value::as_array).cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|k| k.get("kid").and_then(Value::as_str).map(str::to_string))
                .collect();
            let (verdict, expected) = match &want {
                Some(kid) if kids.contains(kid) => (Verdict::Ok, format!("kid {kid}")),
                Some(kid) => (Verdict::Drifted, format!("kid {kid}")),
                // No signing key Secret (it is in the ledger: its `exists` row says so).
                None => (
                    Verdict::Ok,
                    "a key (the signing key Secret is not readable here)".into(),
                ),
            };
            rows.push(row(
                "oidc.jwks",
                &jwks_url,
                verdict,
                expected,
                format!("kids [{}]", kids.join(", ")),
                Some(fix.into()),
            ));
        }
    }
    rows
}

async fn kube_exists(clients: &Clients, input: &Input, e: &Expected) -> Row {
    let kind = match e.resource_type.as_str() {
        "HostedCluster" => Kind::HostedCluster,
        "NodePool" => Kind::NodePool,
        "Secret" => Kind::Secret,
        "Service" => Kind::Service,
        "Namespace" => Kind::Namespace,
        other => {
            return row(
                "exists",
                &e.id,
                Verdict::Unknown,
                other,
                "a kind verify does not read",
                None,
            );
        }
    };
    let (ns, name) = e.id.split_once('/').unwrap_or(("", &e.id));
    let m = match clients.mgmt(&input.mgmt).await {
        Ok(m) => m,
        Err(err) => return unknown("exists", &e.id, err),
    };
    let resource = format!("{} {}", kind.type_name(), e.id);
    match m.get(kind, ns, name).await {
        Err(err) => unknown("exists", &resource, err),
        Ok(None) => row(
            "exists",
            &resource,
            Verdict::Missing,
            "exists",
            "not found",
            Some(if e.ours {
                format!("recreate it under the same name: {REPAIR}")
            } else {
                "it is not hcp-workflow's to recreate".into()
            }),
        ),
        Ok(Some(obj)) => labelled(
            "exists",
            &resource,
            (kind, ns, name),
            &obj.metadata.labels.unwrap_or_default(),
            e.ours,
            input,
        ),
    }
}

/// The row of a Kubernetes object that exists: one hcp-workflow created (`ours`) must
/// still carry the cluster's label.
fn labelled(
    check: &str,
    resource: &str,
    (kind, ns, name): (Kind, &str, &str),
    labels: &BTreeMap<String, String>,
    ours: bool,
    input: &Input,
) -> Row {
    let c = labels
        .get(crate::kube::LABEL_CLUSTER)
        .map(String::as_str)
        .unwrap_or("(none)");
    let ok = !ours || c == input.cluster;
    row(
        check,
        resource,
        if ok { Verdict::Ok } else { Verdict::Drifted },
        format!("{}={}", crate::kube::LABEL_CLUSTER, input.cluster),
        format!("exists, {}={c}", crate::kube::LABEL_CLUSTER),
        Some(format!(
            "kubectl label -n {ns} {} {name} {}={} {}={} --overwrite",
            kind.type_name().to_ascii_lowercase(),
            crate::kube::LABEL_CLUSTER,
            input.cluster,
            crate::kube::LABEL_INFRA_ID,
            input.infra_id
        )),
    )
}

/// The Secret the HostedCluster reads that ledger entry `e` is, if it is one.
fn referenced_secret<'a>(input: &'a Input, e: &Expected) -> Option<&'a SecretRef> {
    if e.resource_type != Kind::Secret.type_name() {
        return None;
    }
    let (ns, name) = e.id.split_once('/')?;
    if ns != input.namespace {
        return None;
    }
    input.secrets.iter().find(|s| s.name == name)
}

/// `secret.exists`: every Secret the HostedCluster names exists (HyperShift's operator
/// copies each into the control-plane namespace on every reconcile and fails without it:
/// `hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`, "failed to
/// get pull secret", "failed to get active aescbc secret"); one hcp-workflow created
/// (`ledger`: name → created by us) still carries the cluster's label.
async fn secrets(clients: &Clients, input: &Input, ledger: &BTreeMap<String, bool>) -> Vec<Row> {
    if input.secrets.is_empty() {
        return Vec::new();
    }
    let ns = &input.namespace;
    let m = match clients.mgmt(&input.mgmt).await {
        Ok(m) => m,
        Err(e) => {
            return input
                .secrets
                .iter()
                .map(|s| unknown("secret.exists", &format!("Secret {ns}/{}", s.name), &e))
                .collect();
        }
    };
    let mut rows = Vec::new();
    for s in &input.secrets {
        let resource = format!("Secret {ns}/{}", s.name);
        let reads = format!(
            "the HostedCluster {ns}/{} reads it ({})",
            input.cluster, s.field
        );
        rows.push(match m.get(Kind::Secret, ns, &s.name).await {
            Err(e) => unknown("secret.exists", &resource, e),
            Ok(None) => row(
                "secret.exists",
                &resource,
                Verdict::Missing,
                format!("exists: {reads}"),
                "not found",
                Some(s.fix.clone()),
            ),
            Ok(Some(obj)) => {
                let mut r = labelled(
                    "secret.exists",
                    &resource,
                    (Kind::Secret, ns, &s.name),
                    &obj.metadata.labels.unwrap_or_default(),
                    ledger.get(&s.name).copied().unwrap_or(false),
                    input,
                );
                r.expected = format!("exists ({reads}), {}", r.expected);
                r
            }
        });
    }
    rows
}

fn set_of(v: &Value, p: &str) -> BTreeSet<String> {
    v.pointer(p)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_ascii_lowercase)
                .collect()
        })
        .unwrap_or_default()
}

/// The rows of a private link, whoever made it (hcp-workflow's own, from the layout; or
/// HyperShift's, from its `AzurePrivateLinkService`: `hypershift_link`): the Private
/// Link Service's visibility and auto-approval are exactly `pl.allowed` (HyperShift's
/// operator sets both to that list: `hypershift-operator/controllers/platform/azure/
/// controller.go` `buildAllowedSubscriptions`, `plsSubscriptionsDrifted`); every private
/// endpoint connection is the cluster's own endpoint's or from an allowed subscription,
/// and Approved; the A records point at the endpoint's address. Shapes as Azure's
/// `network` 2023-11-01 `privateLinkService.json` (`PrivateLinkServiceProperties`:
/// `visibility`, `autoApproval`, `privateEndpointConnections[].properties.
/// privateLinkServiceConnectionState.status`) and `privatedns` 2024-06-01
/// `privatedns.json` (`RecordSetProperties.aRecords`). What the ledger holds (`ledger`,
/// lower-case ids) has its existence reported by its `exists` row; what it does not
/// (HyperShift's records, a Private Link Service HyperShift made again) by these rows.
async fn private_link(
    pls_arm: &ArmClient,
    arm: &ArmClient,
    pl: &PrivateLink,
    ledger: &BTreeSet<String>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let hs = match &pl.manager {
        LinkManager::HcpWorkflow => None,
        LinkManager::HyperShift { cr } => Some((cr.as_str(), pl.manager.describe())),
    };
    let in_ledger = |id: &str| ledger.contains(&id.to_ascii_lowercase());
    let pls = match read(pls_arm, &pl.pls_id, API_NETWORK).await {
        Err(e) => return vec![unknown("pls", &pl.pls_id, e)],
        Ok(None) if in_ledger(&pl.pls_id) => return rows, // its `exists` row says so
        Ok(None) => {
            return vec![row(
                "exists",
                &pl.pls_id,
                Verdict::Missing,
                match &hs {
                    Some((cr, _)) => format!(
                        "Microsoft.Network/privateLinkServices (AzurePrivateLinkService {cr} names it)"
                    ),
                    None => "Microsoft.Network/privateLinkServices".into(),
                },
                "not found (404)",
                Some(match &hs {
                    Some((_, describe)) => format!(
                        "HyperShift's operator makes it again on its next reconcile; if it does not: {describe}"
                    ),
                    None => format!("recreate it under the same name: {REPAIR}"),
                }),
            )];
        }
        Ok(Some(p)) => p,
    };
    let want: BTreeSet<String> = pl.allowed.iter().map(|s| s.to_ascii_lowercase()).collect();
    let show = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
    for (check, ptr) in [
        ("pls.visibility", "/properties/visibility/subscriptions"),
        (
            "pls.auto-approval",
            "/properties/autoApproval/subscriptions",
        ),
    ] {
        let have = set_of(&pls, ptr);
        rows.push(row(
            check,
            &pl.pls_id,
            if have == want {
                Verdict::Ok
            } else {
                Verdict::Drifted
            },
            format!("[{}]", show(&want)),
            format!("[{}]", show(&have)),
            Some(match &hs {
                // `reconcilePrivateLinkService`: an existing PLS whose lists drifted is
                // updated in place (`updatePLSSubscriptions`) on the operator's next
                // reconcile (it requeues every `DriftDetectionRequeueInterval`).
                Some((_, describe)) => format!(
                    "HyperShift's operator sets them back to [{}] on its next reconcile; if it does not: {describe} (the list itself changes with hcp-workflow start update-cluster)",
                    pl.allowed.join(", ")
                ),
                None => format!("{REPAIR} (sets them to {})", pl.allowed.join(", ")),
            }),
        ));
    }
    let conns = pls
        .pointer("/properties/privateEndpointConnections")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut ours_seen = false;
    for c in &conns {
        let id = str_at(c, "/id").unwrap_or_default();
        let pe = str_at(c, "/properties/privateEndpoint/id").unwrap_or_default();
        let status =
            str_at(c, "/properties/privateLinkServiceConnectionState/status").unwrap_or("Unknown");
        let ours = eq_ci(pe, &pl.pe_id);
        ours_seen |= ours;
        let allowed = want.contains(&subscription_of(pe).to_ascii_lowercase());
        let (verdict, fix) = if !ours && !allowed {
            (
                Verdict::Foreign,
                match &hs {
                    // HyperShift's operator only rejects connections when the CR is
                    // deleted (`rejectPrivateEndpointConnections`); repair-cluster's access
                    // stage does it on HyperShift's Private Link Service too.
                    Some(_) => format!(
                        "{REPAIR} (rejects, then removes it; HyperShift's operator does not), or by hand: az network private-endpoint-connection reject --id {id}; az network private-endpoint-connection delete --id {id}"
                    ),
                    None => format!("{REPAIR} (rejects, then removes it)"),
                },
            )
        } else if status != "Approved" {
            (
                Verdict::Drifted,
                match (&hs, ours) {
                    (Some((_, describe)), true) => format!(
                        "a rejected connection is not approved again: delete HyperShift's endpoint (az network private-endpoint delete --ids {}) and its control-plane operator makes it again; a pending one: az network private-endpoint-connection approve --id {id} ({describe})",
                        pl.pe_id
                    ),
                    (None, true) => format!(
                        "a rejected connection is not approved again: delete our endpoint (az network private-endpoint delete --ids {}), then {REPAIR}",
                        pl.pe_id
                    ),
                    (_, false) => "its owner asks again, or approve it in the portal".to_string(),
                },
            )
        } else {
            (Verdict::Ok, String::new())
        };
        rows.push(row(
            "pls.connection",
            id,
            verdict,
            "the cluster's endpoint's or from an allowed subscription, Approved",
            format!("endpoint {pe}, {status}"),
            Some(fix),
        ));
    }
    if !ours_seen {
        rows.push(row(
            "pls.connection",
            &pl.pe_id,
            Verdict::Missing,
            "the cluster's private endpoint's connection, Approved",
            "no connection from it",
            Some(match &hs {
                Some((_, describe)) => format!(
                    "delete HyperShift's endpoint (az network private-endpoint delete --ids {}): its control-plane operator makes it again, connected ({describe})",
                    pl.pe_id
                ),
                None => format!(
                    "delete our endpoint (az network private-endpoint delete --ids {}), then {REPAIR}",
                    pl.pe_id
                ),
            }),
        ));
    }
    let ip = match crate::azure::privatelink::private_endpoint_ip(arm, &pl.pe_id).await {
        Ok(ip) => ip,
        Err(e) => {
            rows.push(unknown("dns.a", &pl.pe_id, e));
            return rows;
        }
    };
    let record_fix = |ip: Option<&str>| match &hs {
        // `reconcileDNSZone` writes each record (`RecordSets.CreateOrUpdate`) on every
        // reconcile of the CR.
        Some((_, describe)) => format!(
            "HyperShift's control-plane operator writes it again (→ {}) on its next reconcile; if it does not: {describe}",
            ip.unwrap_or("the endpoint's address")
        ),
        None => format!(
            "{REPAIR} (points it at {} again)",
            ip.unwrap_or("the endpoint's address")
        ),
    };
    for rec in &pl.records {
        let found = match read(arm, rec, API_PRIVATE_DNS).await {
            Err(e) => {
                rows.push(unknown("dns.a", rec, e));
                continue;
            }
            Ok(None) if in_ledger(rec) => continue, // its `exists` row says it is missing
            Ok(None) => {
                rows.push(row(
                    "dns.a",
                    rec,
                    Verdict::Missing,
                    format!(
                        "→ {} (the private endpoint)",
                        ip.as_deref().unwrap_or("(no address)")
                    ),
                    "not found (404)",
                    Some(record_fix(ip.as_deref())),
                ));
                continue;
            }
            Ok(Some(r)) => r,
        };
        let have: Vec<&str> = found
            .pointer("/properties/aRecords")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| str_at(x, "/ipv4Address")).collect())
            .unwrap_or_default();
        let ok = ip.as_deref().is_some_and(|ip| have == [ip]);
        rows.push(row(
            "dns.a",
            rec,
            if ok { Verdict::Ok } else { Verdict::Drifted },
            format!(
                "→ {} (the private endpoint)",
                ip.as_deref().unwrap_or("(no address)")
            ),
            format!(
                "→ {}",
                if have.is_empty() {
                    "(nothing)".into()
                } else {
                    have.join(", ")
                }
            ),
            Some(record_fix(ip.as_deref())),
        ));
    }
    rows
}

/// The condition types HyperShift's controllers set on an `AzurePrivateLinkService`
/// (`api/hypershift/v1beta1/azureprivatelinkservice_types.go`, release-4.22): each must be
/// True on a working private link.
pub const HYPERSHIFT_LINK_CONDITIONS: [&str; 5] = [
    "AzurePrivateLinkServiceAvailable",
    "AzureInternalLoadBalancerAvailable",
    "AzurePLSCreated",
    "AzurePrivateEndpointAvailable",
    "AzurePrivateDNSAvailable",
];

/// HyperShift's own private link (`privateLink.managedBy: hypershift`), modelled on
/// HyperShift release-4.22: `api/hypershift/v1beta1/azureprivatelinkservice_types.go` (the
/// CR, its conditions and status ids), `hypershift-operator/controllers/platform/azure/
/// controller.go` (the Private Link Service, its visibility and auto-approval) and
/// `control-plane-operator/controllers/azureprivatelinkservice/controller.go` (the
/// endpoint `private-router-pe`; the zone `<name>.hypershift.local` with link
/// `<cr>-vnet-link` and records `api`, `*.apps`; the base-domain zone with link
/// `<cr>-basedomain-vnet-link` and records `api-<name>`, `oauth-<name>`).
///
/// The CR is `private-router` in the control-plane namespace: the only one HyperShift's
/// control-plane operator makes for a cluster whose OAuth server is published as a Route,
/// as hcp-workflow renders it (`control-plane-operator/main.go`: the OAuth observer runs
/// only for a LoadBalancer OAuth service). Rows: `pls.condition` per condition type (True
/// or drifted), `pls.status` (its status names the Private Link Service, the endpoint and
/// the zone), then `private_link`'s rows over what it names and [`vnet_link`]'s over
/// its zones' links.
async fn hypershift_link(
    clients: &Clients,
    input: &Input,
    hs: &HyperShiftLinkCheck,
    pls_arm: &ArmClient,
    arm: &ArmClient,
    ledger: &BTreeSet<String>,
) -> (Vec<Row>, Vec<String>) {
    use crate::steps::hypershift_link::{
        CR_NAME, HyperShiftLinkIds, control_plane_namespace, read_cr,
    };
    let cp = control_plane_namespace(&input.namespace, &input.cluster);
    let manager = LinkManager::HyperShift {
        cr: format!("{cp}/{CR_NAME}"),
    };
    let describe = manager.describe();
    let resource = format!("AzurePrivateLinkService {cp}/{CR_NAME}");
    let cr = match clients.mgmt(&input.mgmt).await {
        Err(e) => return (vec![unknown("pls.condition", &resource, e)], Vec::new()),
        Ok(m) => match read_cr(&m, &input.namespace, &input.cluster).await {
            Err(e) => return (vec![unknown("pls.condition", &resource, e)], Vec::new()),
            Ok(Some(cr)) => cr,
            Ok(None) => {
                let missing = row(
                    "pls.condition",
                    &resource,
                    Verdict::Missing,
                    "HyperShift's AzurePrivateLinkService (its control-plane operator makes it once the private-router Service has an internal load balancer address)",
                    "not found",
                    Some(format!(
                        "kubectl get service -n {cp} {CR_NAME} -o wide; is the HyperShift operator installed with --private-platform Azure (hcp-workflow preflight)?"
                    )),
                );
                return (vec![missing], Vec::new());
            }
        },
    };
    let ids = HyperShiftLinkIds::of(&cr);
    let named: Vec<String> = ids
        .pls_id
        .iter()
        .chain(ids.pe_id.iter())
        .chain(ids.zone_ids.iter())
        .cloned()
        .collect();
    let mut rows = Vec::new();
    let conditions: Vec<Value> = cr
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let others = conditions
        .iter()
        .filter_map(|c| str_at(c, "/type"))
        .filter(|t| !HYPERSHIFT_LINK_CONDITIONS.contains(t));
    let types: Vec<&str> = HYPERSHIFT_LINK_CONDITIONS
        .iter()
        .copied()
        .chain(others)
        .collect();
    for t in types {
        let c = conditions.iter().find(|c| str_at(c, "/type") == Some(t));
        let status = c.and_then(|c| str_at(c, "/status"));
        rows.push(row(
            "pls.condition",
            &resource,
            if status == Some("True") {
                Verdict::Ok
            } else {
                Verdict::Drifted
            },
            format!("{t}=True"),
            match c {
                None => format!("{t} not reported"),
                Some(c) => format!(
                    "{t}={} ({}): {}",
                    status.unwrap_or("Unknown"),
                    str_at(c, "/reason").unwrap_or_default(),
                    str_at(c, "/message").unwrap_or_default()
                ),
            },
            Some(format!(
                "{describe} (the reason and message say what failed in Azure; HyperShift's controllers retry on their own)"
            )),
        ));
    }
    let status = |f: &str| {
        str_at(&cr, &format!("/status/{f}"))
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let (pls, pe, zone) = (
        status("privateLinkServiceID"),
        status("privateEndpointID"),
        status("privateDNSZoneID"),
    );
    let unnamed: Vec<&str> = [
        ("privateLinkServiceID", &pls),
        ("privateEndpointID", &pe),
        ("privateDNSZoneID", &zone),
    ]
    .iter()
    .filter(|(_, v)| v.is_none())
    .map(|(f, _)| *f)
    .collect();
    rows.push(row(
        "pls.status",
        &resource,
        if unnamed.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Missing
        },
        "status.privateLinkServiceID, privateEndpointID and privateDNSZoneID set",
        if unnamed.is_empty() {
            "all set".to_string()
        } else {
            format!("not set: {}", unnamed.join(", "))
        },
        Some(format!(
            "{describe} (its conditions say which step is failing)"
        )),
    ));
    let (Some(pls_id), Some(pe_id)) = (pls, pe) else {
        return (rows, named);
    };
    let base = status("baseDomainDNSZoneID");
    let mut records = Vec::new();
    let mut links = Vec::new();
    if let Some(z) = &zone {
        records.extend(["api", "*.apps"].iter().map(|r| format!("{z}/A/{r}")));
        links.push(format!("{z}/virtualNetworkLinks/{CR_NAME}-vnet-link"));
    }
    if let Some(z) = &base {
        // `reconcileBaseDomainDNS` (private-router, no sibling OAuth CR).
        records.extend(
            ["api", "oauth"]
                .iter()
                .map(|r| format!("{z}/A/{r}-{}", input.cluster)),
        );
        links.push(format!(
            "{z}/virtualNetworkLinks/{CR_NAME}-basedomain-vnet-link"
        ));
    }
    let pl = PrivateLink {
        pls_id,
        pe_id,
        allowed: hs.allowed.clone(),
        records,
        manager: manager.clone(),
    };
    rows.extend(private_link(pls_arm, arm, &pl, ledger).await);
    for id in links {
        let link = VnetLink {
            id,
            vnet_id: hs.vnet_id.clone(),
        };
        rows.push(vnet_link(arm, &link, &manager).await);
    }
    (rows, named)
}

/// `dns.vnet-link`: a private DNS zone's virtual network link exists, names the guest VNet
/// (`properties.virtualNetwork.id`) and is not in a failed state (`properties.
/// provisioningState` Failed or Canceled): Azure's `privatedns` 2024-06-01
/// `privatedns.json` `VirtualNetworkLinkProperties` (`virtualNetworkLinkState`
/// InProgress/Completed is reported as found). A zone without its link resolves nothing
/// in the VNet: the guest's nodes cannot reach the API server by its private name.
pub async fn vnet_link(arm: &ArmClient, link: &VnetLink, manager: &LinkManager) -> Row {
    let check = "dns.vnet-link";
    let expected = format!("linked to {}", link.vnet_id);
    let body = match read(arm, &link.id, API_PRIVATE_DNS).await {
        Err(e) => return unknown(check, &link.id, e),
        Ok(None) => {
            return row(
                check,
                &link.id,
                Verdict::Missing,
                expected,
                "not found (404)",
                Some(match manager {
                    LinkManager::HcpWorkflow => format!(
                        "{REPAIR} (recreates it under the same name, linked to {})",
                        link.vnet_id
                    ),
                    LinkManager::HyperShift { .. } => format!(
                        "HyperShift's control-plane operator makes it again on its next reconcile; if it does not: {}",
                        manager.describe()
                    ),
                }),
            );
        }
        Ok(Some(b)) => b,
    };
    let vnet = str_at(&body, "/properties/virtualNetwork/id").unwrap_or("(none)");
    let prov = str_at(&body, "/properties/provisioningState").unwrap_or("(none)");
    let state = str_at(&body, "/properties/virtualNetworkLinkState").unwrap_or("(none)");
    let elsewhere = !eq_ci(vnet, &link.vnet_id);
    let failed = matches!(prov, "Failed" | "Canceled");
    let delete = format!(
        "az network private-dns link vnet delete --ids {} --yes",
        link.id
    );
    row(
        check,
        &link.id,
        if elsewhere || failed {
            Verdict::Drifted
        } else {
            Verdict::Ok
        },
        format!("{expected}, not failed"),
        format!("linked to {vnet}, provisioningState {prov}, virtualNetworkLinkState {state}"),
        Some(match (manager, elsewhere) {
            // An existing link is adopted as it is: repair writes again only a missing or
            // failed one.
            (LinkManager::HcpWorkflow, true) => format!(
                "delete it ({delete}), then {REPAIR} (recreates it linked to {})",
                link.vnet_id
            ),
            (LinkManager::HcpWorkflow, false) => {
                format!("{REPAIR} (writes a link of ours in a failed state again)")
            }
            (LinkManager::HyperShift { .. }, true) => format!(
                "delete it ({delete}): HyperShift's control-plane operator makes it again, linked to its spec.guestVNetID ({})",
                manager.describe()
            ),
            (LinkManager::HyperShift { .. }, false) => format!(
                "HyperShift's control-plane operator writes it again on its next reconcile; if it does not: {}",
                manager.describe()
            ),
        }),
    )
}

async fn management(clients: &Clients, input: &Input) -> Vec<Row> {
    let m = match clients.mgmt(&input.mgmt).await {
        Ok(m) => m,
        Err(e) => return vec![unknown("management-cluster", &input.cluster, e)],
    };
    let ns = &input.namespace;
    let mut rows = Vec::new();
    let hc = format!("HostedCluster {ns}/{}", input.cluster);
    match m
        .condition(Kind::HostedCluster, ns, &input.cluster, "Available")
        .await
    {
        Err(e) => rows.push(unknown("hosted-cluster.available", &hc, e)),
        Ok(c) => {
            let ok = c.as_ref().is_some_and(|c| c.is_true());
            rows.push(row(
                "hosted-cluster.available",
                &hc,
                if ok { Verdict::Ok } else { Verdict::Drifted },
                "Available=True",
                c.map(|c| {
                    format!(
                        "Available={} ({}): {}",
                        c.status,
                        c.reason.unwrap_or_default(),
                        c.message.unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "no Available condition (is it there?)".into()),
                Some(format!(
                    "kubectl describe hostedcluster -n {ns} {}",
                    input.cluster
                )),
            ));
        }
    }
    for p in &input.pools {
        let res = format!("NodePool {ns}/{}", p.name);
        let obj = match m.get(Kind::NodePool, ns, &p.name).await {
            Err(e) => {
                rows.push(unknown("node-pool.ready", &res, e));
                continue;
            }
            Ok(None) => continue, // its `exists` row says it is missing
            Ok(Some(o)) => o.data,
        };
        let ready = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| str_at(c, "/type") == Some("Ready")))
            .and_then(|c| str_at(c, "/status"))
            .unwrap_or("Unknown")
            .to_string();
        let spec = obj.pointer("/spec/replicas").and_then(Value::as_i64);
        let auto = obj
            .pointer("/spec/autoScaling")
            .and_then(|a| Some((a.get("min")?.as_i64()?, a.get("max")?.as_i64()?)));
        let running = obj
            .pointer("/status/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let (want, size_ok) = match p.replicas {
            Ok(r) => (
                format!("{r} replicas"),
                spec == Some(r) && auto.is_none() && running == r,
            ),
            Err((min, max)) => (
                format!("autoscaling {min}–{max}"),
                auto == Some((min, max)) && (min..=max).contains(&running),
            ),
        };
        let ok = ready == "True" && size_ok;
        rows.push(row(
            "node-pool.ready",
            &res,
            if ok { Verdict::Ok } else { Verdict::Drifted },
            format!("Ready=True, {want}"),
            format!(
                "Ready={ready}, {}, {running} running",
                match (spec, auto) {
                    (_, Some((a, b))) => format!("autoscaling {a}–{b}"),
                    (Some(r), None) => format!("{r} replicas"),
                    (None, None) => "no size".into(),
                }
            ),
            Some(format!(
                "a size changed by hand: {REPAIR} (applies the pool again); not ready: kubectl describe nodepool -n {ns} {}",
                p.name
            )),
        ));
        let live = PoolManagement::of(&obj);
        let same = live == p.management;
        rows.push(row(
            "node-pool.settings",
            &res,
            if same { Verdict::Ok } else { Verdict::Drifted },
            p.management.to_string(),
            live.to_string(),
            (!same).then(|| {
                format!(
                    "changed by hand: {REPAIR} (applies the pool again), or write the new values in the file and run update-cluster; a timeout the file leaves unset but someone set stays: kubectl patch nodepool -n {ns} {} --type merge -p '{{\"spec\":{{\"nodeDrainTimeout\":null,\"nodeVolumeDetachTimeout\":null}}}}'",
                    p.name
                )
            }),
        ));
    }
    rows
}

/// Whether `r`, listed in one of the cluster's own groups, is what the live cluster makes
/// for itself, by the marks its makers' code gives it:
/// - HyperShift's machines: CAPZ's `sigs.k8s.io_cluster-api-provider-azure_cluster_<infraID>`;
/// - the image registry's storage account, private endpoint, zone and link:
///   `kubernetes.io_cluster.<infraID>: owned` (cluster-image-registry-operator
///   `pkg/storage/azure/azure.go`);
/// - the cloud provider's public addresses and private link services:
///   `k8s-azure-cluster-name` (or the older `kubernetes-cluster-name`) = the infra id, which
///   HyperShift passes as `--cluster-name` (cloud-provider-azure `pkg/consts/consts.go`);
///   its load balancers carry no tag (HyperShift's cloud config sets none) and are named
///   `<infraID>` and `<infraID>-internal` (`getAzureLoadBalancerName`);
/// - CSI volumes, snapshots and Azure Files accounts: `k8s-azure-created-by`
///   (`kubernetes-azure-dd`, `azure`) and `kubernetes.io-created-for-*` (azuredisk- and
///   azurefile-csi-driver), which name no cluster: trusted only because the resource sits in
///   this cluster's own group.
pub fn guest_made(r: &Value, infra_id: &str, capz: &str) -> bool {
    let tags = r.get("tags").and_then(Value::as_object);
    let tag = |k: &str| tags.and_then(|t| t.get(k)).and_then(Value::as_str);
    let tagged = tags.is_some_and(|t| t.contains_key(capz))
        || tag(&format!("kubernetes.io_cluster.{infra_id}")) == Some("owned")
        || tag("k8s-azure-cluster-name") == Some(infra_id)
        || tag("kubernetes-cluster-name") == Some(infra_id)
        || tags.is_some_and(|t| {
            t.contains_key("k8s-azure-created-by")
                || t.keys()
                    .any(|k| k.starts_with("kubernetes.io-created-for-"))
        });
    let cloud_lb = str_at(r, "/type")
        .is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Network/loadBalancers"))
        && str_at(r, "/name").is_some_and(|n| n == infra_id || n == format!("{infra_id}-internal"));
    tagged || cloud_lb
}

/// `foreign`: what the cluster's own groups hold beyond the ledger (`input.expected`) and
/// `hypershift_made` (what HyperShift's `AzurePrivateLinkService` names).
async fn foreign(arm: &ArmClient, input: &Input, hypershift_made: &[String]) -> Vec<Row> {
    let ids: Vec<&str> = input
        .expected
        .iter()
        .map(|e| e.id.as_str())
        .chain(hypershift_made.iter().map(String::as_str))
        .collect();
    let mut known: BTreeSet<String> = ids.iter().map(|i| i.to_ascii_lowercase()).collect();
    let mut rows = Vec::new();
    // A private endpoint's network interface is Azure's, made with the endpoint.
    for id in ids.iter().filter(|i| {
        i.to_ascii_lowercase()
            .contains("/providers/microsoft.network/privateendpoints/")
    }) {
        let pe = match read(arm, id, API_NETWORK).await {
            Ok(pe) => pe,
            Err(e) => {
                // Without the endpoint, its network interface would look foreign.
                rows.push(unknown("foreign", id, e));
                continue;
            }
        };
        if let Some(pe) = pe {
            for nic in pe
                .pointer("/properties/networkInterfaces")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(id) = str_at(nic, "/id") {
                    known.insert(id.to_ascii_lowercase());
                }
            }
        }
    }
    let capz = format!(
        "sigs.k8s.io_cluster-api-provider-azure_cluster_{}",
        input.infra_id
    );
    for g in &input.own_groups {
        let path = format!("{g}/resources");
        let listed = match patient(|| arm.list_values(&path, API_RESOURCES)).await {
            Ok(l) => l,
            Err(e) => {
                if e.status == 404 {
                    continue; // the group itself is checked by its `exists` row
                }
                rows.push(unknown("foreign", g, e));
                continue;
            }
        };
        let guest_made = |r: &Value| guest_made(r, &input.infra_id, &capz);
        let made: BTreeSet<String> = listed
            .iter()
            .filter(|r| guest_made(r))
            .filter_map(|r| str_at(r, "/id").map(str::to_ascii_lowercase))
            .collect();
        for r in &listed {
            let Some(id) = str_at(r, "/id") else { continue };
            let lid = id.to_ascii_lowercase();
            if known.contains(&lid) || made.contains(&lid) {
                continue;
            }
            if str_at(r, "/managedBy").is_some_and(|m| made.contains(&m.to_ascii_lowercase())) {
                continue;
            }
            rows.push(row(
                "foreign",
                id,
                Verdict::Foreign,
                "only what the ledger holds (and what the live cluster makes: machines, load balancers, registry storage, volumes)",
                format!(
                    "{} that no ledger knows{}",
                    str_at(r, "/type").unwrap_or("a resource"),
                    r.pointer("/tags")
                        .filter(|t| t.as_object().is_some_and(|m| !m.is_empty()))
                        .map(|t| format!(", tags {t}"))
                        .unwrap_or_default()
                ),
                Some("find who made it (the guest's cloud controller, HyperShift, a person): hcp-workflow never deletes what it did not create".into()),
            ));
        }
    }
    rows
}

/// A resource still tagged as a deleted cluster's.
#[derive(Clone, Debug, Serialize)]
pub struct Leftover {
    /// ARM id.
    pub id: String,
    /// Resource type (`Microsoft.Resources/resourceGroups` for a group).
    #[serde(rename = "type")]
    pub resource_type: String,
    /// Its subscription.
    pub subscription: String,
}

/// Everything in `subscription` tagged `hcp-workflow.io/cluster=<cluster>` and
/// `hcp-workflow.io/infra-id=<infra_id>`: resource groups and resources, from the generic
/// lists with a tag filter (`$filter=tagName eq '…' and tagValue eq '…'`, following
/// `nextLink`; ARM filters on one tag, the infra id is matched here). Read-only.
///
/// # Errors
/// The lists could not be read (a message naming the list).
pub async fn tagged_leftovers(
    clients: &Clients,
    azure: &AzureEnv,
    subscription: &str,
    cluster: &str,
    infra_id: &str,
) -> Result<Vec<Leftover>, String> {
    let arm = clients.arm(azure).await.map_err(|e| e.to_string())?;
    let filter = format!("tagName eq '{TAG_CLUSTER}' and tagValue eq '{cluster}'");
    let mut out = Vec::new();
    for (path, rtype) in [
        (
            format!("/subscriptions/{subscription}/resourcegroups"),
            Some("Microsoft.Resources/resourceGroups"),
        ),
        (format!("/subscriptions/{subscription}/resources"), None),
    ] {
        let query = [("$filter", filter.as_str())];
        let listed = patient(|| arm.list_values_with(&path, API_RESOURCES, &query))
            .await
            .map_err(|e| format!("listing {path}: {e}"))?;
        for r in listed {
            let infra = r
                .pointer("/tags")
                .and_then(|t| t.get(TAG_INFRA_ID))
                .and_then(Value::as_str);
            if infra != Some(infra_id) {
                continue;
            }
            out.push(Leftover {
                id: str_at(&r, "/id").unwrap_or_default().to_string(),
                resource_type: rtype
                    .map(str::to_string)
                    .or_else(|| str_at(&r, "/type").map(str::to_string))
                    .unwrap_or_default(),
                subscription: subscription.to_string(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ledger_type_is_read_at_its_api_version_and_only_tracked_ones_carry_tags() {
        assert_eq!(
            api_version("Microsoft.Resources/resourceGroups"),
            Some(API_RESOURCES)
        );
        assert_eq!(
            api_version(
                "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials"
            ),
            Some(API_MSI)
        );
        assert_eq!(
            api_version("Microsoft.Network/privateDnsZones/A"),
            Some(API_PRIVATE_DNS)
        );
        assert_eq!(api_version("Microsoft.Network/dnszones/A"), Some(API_DNS));
        assert_eq!(
            api_version("Microsoft.Network/privateLinkServices"),
            Some(API_NETWORK)
        );
        assert_eq!(api_version("Microsoft.Compute/virtualMachines"), None);
        assert!(tagged("Microsoft.Network/virtualNetworks"));
        assert!(tagged("Microsoft.Resources/resourceGroups"));
        assert!(!tagged("Microsoft.Network/virtualNetworks/subnets"));
        assert!(!tagged("Microsoft.Authorization/roleAssignments"));
        assert!(record_set("Microsoft.Network/dnszones/A"));
        assert!(!record_set("Microsoft.Network/privateDnsZones/A"));
    }

    #[test]
    fn hypershifts_link_is_described_by_its_azure_private_link_service() {
        let m = LinkManager::HyperShift {
            cr: "clusters-demo/private-router".into(),
        };
        assert_eq!(
            m.describe(),
            "kubectl describe azureprivatelinkservice -n clusters-demo private-router"
        );
        assert_eq!(LinkManager::HcpWorkflow.describe(), "");
        assert!(HYPERSHIFT_LINK_CONDITIONS.contains(&"AzurePrivateDNSAvailable"));
    }

    #[test]
    fn a_row_that_is_ok_carries_no_fix() {
        let r = row(
            "tags",
            "/x",
            Verdict::Ok,
            "a",
            "a",
            Some("do something".into()),
        );
        assert_eq!(r.fix, None);
        let r = row(
            "tags",
            "/x",
            Verdict::Drifted,
            "a",
            "b",
            Some("do something".into()),
        );
        assert_eq!(r.fix.as_deref(), Some("do something"));
        assert_eq!(
            subscription_of("/subscriptions/abc/resourceGroups/g"),
            "abc"
        );
    }
}
