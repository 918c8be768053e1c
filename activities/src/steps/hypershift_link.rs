//! Private link made by HyperShift itself (`privateLink.managedBy: hypershift`), and the
//! parts of HyperShift's private-link controllers that concern us in either mode.
//!
//! HyperShift 4.22 (`control-plane-operator/controllers/azureprivatelinkservice/observer.go`
//! and `controller.go`, `hypershift-operator/controllers/platform/azure/controller.go`):
//! the CPO's observer makes the `AzurePrivateLinkService` CR `private-router` in the
//! control-plane namespace `<ns>-<name>`; with the operator flag `--private-platform Azure`
//! the HyperShift operator creates the PLS `pls-<clusterID>` and puts its id and alias in
//! the CR's status; the CPO then creates the PE `private-router-pe`, the zone
//! `<name>.hypershift.local` (and a `<baseDomain>` zone) and reports them in the status.
//!
//! # What we do in hypershift mode
//! - create: durable waits on the CR's status ([`WaitHyperShiftPls`],
//!   [`WaitHyperShiftEndpoint`]); every Azure resource it names is verified with an ARM
//!   GET and recorded in the ledger as *adopted, managed by HyperShift*. These nodes have
//!   no undo: nothing HyperShift made is ever deleted by us.
//! - teardown (the HostedCluster's undo, and delete-cluster's [`ReleaseHyperShiftLink`] +
//!   [`VerifyHyperShiftLinkGone`] around its HostedCluster delete): before the
//!   HostedCluster is deleted, every private endpoint connection on the PLS that HyperShift's
//!   own PE (`status.privateEndpointID`) did not make is rejected, then removed — HyperShift's
//!   operator only *rejects* connections on delete, and Azure refuses to delete a PLS while
//!   any connection, a rejected one included, remains, so a foreign connection would hold
//!   the PLS, the CR, the namespace and the HostedCluster forever. Then HyperShift's
//!   finalizers are awaited (bounded), and afterwards every resource the CR named must
//!   answer 404.
//!
//! # Both modes: a CR finalizer that outlives the CPO
//! [`release_stuck_cr_finalizer`], called while a HostedCluster deletion is awaited.

use super::arm::{azure_undo_retry, record};
use super::env::{AzureEnv, Clients, MgmtEnv, Owner};
use super::facts::{Facts, WaitClass};
use super::objects::ObjectJournal;
use crate::azure::durable::{self, checkpoint_field, save_checkpoint_field};
use crate::azure::models::{API_NETWORK, API_PRIVATE_DNS};
use crate::azure::privatelink::{self, TeardownReport};
use crate::kube::error::KubeError;
use crate::kube::mgmt::{Kind, Mgmt};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Name of HyperShift's `AzurePrivateLinkService` CR (and of the Service it describes).
pub const CR_NAME: &str = "private-router";
/// The CPO's finalizer on the CR (`azurePrivateLinkServiceFinalizer`).
pub const CPO_CR_FINALIZER: &str = "hypershift.openshift.io/azure-private-link-service";
/// Note on ledger records of what HyperShift made.
pub const MANAGED_BY_HYPERSHIFT: &str = "managed by HyperShift (--private-platform Azure): removed by its finalizers when the HostedCluster goes, never by hcp-workflow";

const PLS_TYPE: &str = "Microsoft.Network/privateLinkServices";
const PE_TYPE: &str = "Microsoft.Network/privateEndpoints";
const ZONE_TYPE: &str = "Microsoft.Network/privateDnsZones";
const PEC_TYPE: &str = "Microsoft.Network/privateLinkServices/privateEndpointConnections";
/// Checkpoint member of the foreign-connection release.
const RELEASE_KEY: &str = "hypershift-link";

fn cr_resource() -> ApiResource {
    ApiResource {
        group: "hypershift.openshift.io".into(),
        version: "v1beta1".into(),
        api_version: "hypershift.openshift.io/v1beta1".into(),
        kind: "AzurePrivateLinkService".into(),
        plural: "azureprivatelinkservices".into(),
    }
}

/// The control-plane namespace of HostedCluster `ns/name`.
pub fn control_plane_namespace(ns: &str, name: &str) -> String {
    format!("{ns}-{name}")
}

/// HyperShift's CR of HostedCluster `ns/name`, if any.
///
/// # Errors
/// API and transport errors other than 404.
pub async fn read_cr(m: &Mgmt, ns: &str, name: &str) -> Result<Option<Value>, KubeError> {
    let cp = control_plane_namespace(ns, name);
    let api: Api<DynamicObject> = Api::namespaced_with(m.client().clone(), &cp, &cr_resource());
    let obj = api.get_opt(CR_NAME).await.map_err(|e| {
        KubeError::from_kube("get", &format!("AzurePrivateLinkService {cp}/{CR_NAME}"), e)
    })?;
    Ok(obj.and_then(|o| serde_json::to_value(o).ok()))
}

fn status_str<'a>(cr: &'a Value, field: &str) -> Option<&'a str> {
    cr.pointer(&format!("/status/{field}"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn condition<'a>(cr: &'a Value, ctype: &str) -> Option<&'a Value> {
    cr.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
}

fn cond_text(cr: &Value, ctype: &str) -> String {
    match condition(cr, ctype) {
        None => format!("{ctype} not reported yet"),
        Some(c) => format!(
            "{ctype}={} ({}: {})",
            c.get("status").and_then(Value::as_str).unwrap_or("Unknown"),
            c.get("reason").and_then(Value::as_str).unwrap_or_default(),
            c.get("message").and_then(Value::as_str).unwrap_or_default()
        ),
    }
}

fn cond_true(cr: &Value, ctype: &str) -> bool {
    condition(cr, ctype)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

/// The Azure resources a CR's status names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HyperShiftLinkIds {
    /// `status.privateLinkServiceID` (management subscription).
    #[serde(default)]
    pub pls_id: Option<String>,
    /// `status.privateEndpointID`: HyperShift's own PE (guest subscription).
    #[serde(default)]
    pub pe_id: Option<String>,
    /// `status.privateDNSZoneID` and `status.baseDomainDNSZoneID`.
    #[serde(default)]
    pub zone_ids: Vec<String>,
}

impl HyperShiftLinkIds {
    /// The ids an `AzurePrivateLinkService` reports in its status.
    pub fn of(cr: &Value) -> Self {
        HyperShiftLinkIds {
            pls_id: status_str(cr, "privateLinkServiceID").map(str::to_string),
            pe_id: status_str(cr, "privateEndpointID").map(str::to_string),
            zone_ids: ["privateDNSZoneID", "baseDomainDNSZoneID"]
                .iter()
                .filter_map(|f| status_str(cr, f).map(str::to_string))
                .collect(),
        }
    }
    fn is_empty(&self) -> bool {
        self.pls_id.is_none() && self.pe_id.is_none() && self.zone_ids.is_empty()
    }
}

/// Where HyperShift's resources live: the PLS in the management subscription, the PE and
/// zones in the guest's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HyperShiftLink {
    /// Azure target of the management cluster's network (the PLS).
    pub mgmt_azure: AzureEnv,
    /// Azure target of the guest (PE, zones).
    pub guest_azure: AzureEnv,
}

/// What a teardown recorded across attempts (checkpoint member [`RELEASE_KEY`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct ReleaseState {
    ids: HyperShiftLinkIds,
    /// Foreign connections rejected and removed.
    released: bool,
    /// Nothing of ours to tear down (no HostedCluster, or not this run's to delete).
    skip: bool,
    report: Option<TeardownReport>,
}

/// Rejects and removes every connection on the CR's PLS not made by HyperShift's own PE.
/// `Ok(None)` when done, `Ok(Some(reason))` while deletions run.
async fn release_foreign(
    clients: &Clients,
    link: &HyperShiftLink,
    ids: &HyperShiftLinkIds,
    report: &mut TeardownReport,
) -> Result<Option<(std::time::Duration, String)>, StepError> {
    let Some(pls) = &ids.pls_id else {
        return Ok(None);
    };
    let arm = clients.arm(&link.mgmt_azure).await?;
    if arm.get_value(pls, API_NETWORK).await?.is_none() {
        return Ok(None);
    }
    let (waiting, after) =
        privatelink::release_connections(&arm, pls, ids.pe_id.as_deref(), report).await?;
    if waiting == 0 {
        return Ok(None);
    }
    Ok(Some((
        after
            .unwrap_or_else(durable::default_poll)
            .min(durable::MAX_POLL),
        format!(
            "waiting for {waiting} private endpoint connection(s) of {pls} not made by HyperShift's own endpoint to be deleted"
        ),
    )))
}

/// Which of `ids` still exist (ARM GET ≠ 404).
async fn remaining(
    clients: &Clients,
    link: &HyperShiftLink,
    ids: &HyperShiftLinkIds,
) -> Result<Vec<String>, StepError> {
    let mut left = Vec::new();
    if let Some(pls) = &ids.pls_id {
        let arm = clients.arm(&link.mgmt_azure).await?;
        if arm.get_value(pls, API_NETWORK).await?.is_some() {
            left.push(pls.clone());
        }
    }
    let arm = clients.arm(&link.guest_azure).await?;
    if let Some(pe) = &ids.pe_id
        && arm.get_value(pe, API_NETWORK).await?.is_some()
    {
        left.push(pe.clone());
    }
    for z in &ids.zone_ids {
        if arm.get_value(z, API_PRIVATE_DNS).await?.is_some() {
            left.push(z.clone());
        }
    }
    Ok(left)
}

fn wait_gone_reason(left: &[String]) -> String {
    format!(
        "waiting for HyperShift's finalizers to remove what its AzurePrivateLinkService named: {} still exist(s)",
        left.join(", ")
    )
}

/// The HostedCluster undo's first part in hypershift mode (before its delete): record what
/// the CR names, then reject and remove foreign connections. `Some(wait)` while not done.
///
/// # Errors
/// Kubernetes and ARM errors, classified.
pub async fn before_hosted_cluster_undo(
    clients: &Clients,
    ctx: &StepContext,
    m: &Mgmt,
    owner: &Owner,
    ns: &str,
    name: &str,
    link: &HyperShiftLink,
) -> Result<Option<UndoOutcome>, StepError> {
    let mut st: ReleaseState = checkpoint_field(ctx, RELEASE_KEY)?.unwrap_or_default();
    if st.released || st.skip {
        return Ok(None);
    }
    let before = st.clone();
    if st.report.is_none() {
        // Only a HostedCluster this undo will delete (this run's label and journal, as
        // `undo_object` decides) has its private link torn down.
        let labels = m.labels(Kind::HostedCluster, ns, name).await?;
        let ours = labels.is_some_and(|l| {
            owner.created_by(Some(&serde_json::to_value(&l).unwrap_or_default()), ctx)
        }) && ObjectJournal::of_undo(ctx)?
            .is_none_or(|j| j.lists(Kind::HostedCluster, ns, name));
        if !ours {
            st.skip = true;
            save_checkpoint_field(ctx, RELEASE_KEY, &st).await?;
            return Ok(None);
        }
        if let Some(cr) = read_cr(m, ns, name).await? {
            st.ids = HyperShiftLinkIds::of(&cr);
        }
        st.report = Some(TeardownReport::default());
    }
    let mut report = st.report.clone().unwrap_or_default();
    let pending = release_foreign(clients, link, &st.ids, &mut report).await?;
    st.report = Some(report);
    st.released = pending.is_none();
    if st != before {
        save_checkpoint_field(ctx, RELEASE_KEY, &st).await?;
    }
    Ok(pending.map(|(after, reason)| ctx.undo_wait(after, reason)))
}

/// The HostedCluster undo's last part in hypershift mode (after it is gone): every
/// resource the CR named must answer 404; waits (bounded by the undo's budget) otherwise.
///
/// # Errors
/// ARM errors, classified.
pub async fn after_hosted_cluster_undo(
    clients: &Clients,
    ctx: &StepContext,
    m: &Mgmt,
    ns: &str,
    name: &str,
    link: &HyperShiftLink,
) -> Result<UndoOutcome, StepError> {
    let st: ReleaseState = checkpoint_field(ctx, RELEASE_KEY)?.unwrap_or_default();
    if st.skip || m.get(Kind::HostedCluster, ns, name).await?.is_some() {
        return Ok(UndoOutcome::Done);
    }
    let left = remaining(clients, link, &st.ids).await?;
    if left.is_empty() {
        Ok(UndoOutcome::Done)
    } else {
        Ok(ctx.undo_wait(clients.poll(), wait_gone_reason(&left)))
    }
}

/// While a HostedCluster's deletion is awaited: HyperShift's CPO puts its finalizer on the
/// CR as soon as it makes it, but removes it only (a) from `reconcileDelete` when the CR is
/// deleted while the CPO still runs, or (b) from `reconcileHCPDeletion` — and that runs
/// only if the HostedControlPlane carries the CPO's `azure-pls-endpoint-cleanup`
/// finalizer, which the CPO adds only once a PLS alias appeared (`controller.go`, steps 6
/// and 7). Without `--private-platform Azure` no alias ever appears, so the HCP goes
/// without the CPO's cleanup, the CPO goes with it, and the CR (garbage collected with its
/// HCP owner) keeps a finalizer nobody will remove: the namespace, then the HostedCluster,
/// hang (the 40-minute timeout the CPO's own comment describes).
///
/// So, when the CR is being deleted and still carries [`CPO_CR_FINALIZER`], we remove
/// that finalizer — **only when its status names no Azure resource** (no PLS id or alias,
/// no PE, no zone): then the CPO's `reconcileDelete` would have had nothing of its own to
/// delete (it creates a PE only after an alias, zones only after a PE IP), so releasing
/// it destroys nothing and orphans nothing it recorded. (A PE the CPO created but failed
/// to record — a status write lost after the PUT — is the one case this cannot see; it
/// needs an alias first, which hcp-workflow mode never gives.) A CR whose status names
/// Azure resources is left to HyperShift — unless `link` is given (hypershift mode) and
/// ARM proves what the CPO's cleanup owns is gone.
///
/// **HyperShift 4.22**: on `release-4.22` the CPO's `reconcileHCPDeletion`
/// deletes the PE, the records, links and zones, then removes only the *HostedControlPlane*
/// finalizer (`control-plane-operator/controllers/azureprivatelinkservice/controller.go`);
/// removing the CR's own finalizer there is `main`-only (commit `30d6ce523b`). So on a real
/// 4.22 management cluster every hypershift-mode delete ends with the CR held by
/// [`CPO_CR_FINALIZER`] after the CPO is gone. With `link`, that finalizer is released once
/// an ARM GET of the private endpoint and of every zone the CR's status names answers 404:
/// the CPO's cleanup is then provably done, and the finalizer guards nothing. (The PLS is
/// the HyperShift operator's, behind its own finalizer, which stays.) Returns a note for
/// the wait message.
///
/// # Errors
/// Kubernetes API and ARM errors.
pub async fn release_stuck_cr_finalizer(
    link: Option<(&Clients, &HyperShiftLink)>,
    m: &Mgmt,
    ns: &str,
    name: &str,
) -> Result<String, StepError> {
    let Some(cr) = read_cr(m, ns, name).await? else {
        return Ok(String::new());
    };
    let deleting = cr
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    let finalizers: Vec<String> = cr
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if !deleting || !finalizers.iter().any(|f| f == CPO_CR_FINALIZER) {
        return Ok(String::new());
    }
    let cp = control_plane_namespace(ns, name);
    let ids = HyperShiftLinkIds::of(&cr);
    let names_azure = !ids.is_empty() || status_str(&cr, "privateLinkServiceAlias").is_some();
    let mut why = "its status names no Azure resource".to_string();
    if names_azure {
        let Some((clients, link)) = link else {
            return Ok(format!(
                "; AzurePrivateLinkService {cp}/{CR_NAME} is held by {} (left to HyperShift: it names Azure resources)",
                finalizers.join(", ")
            ));
        };
        // What the CPO's cleanup deletes: its PE and the zones (records and links go with
        // a zone). The PLS is not its to delete.
        let cpo_owned = HyperShiftLinkIds {
            pls_id: None,
            pe_id: ids.pe_id.clone(),
            zone_ids: ids.zone_ids.clone(),
        };
        let left = remaining(clients, link, &cpo_owned).await?;
        if !left.is_empty() {
            return Ok(format!(
                "; AzurePrivateLinkService {cp}/{CR_NAME} is held by {} until HyperShift's cleanup removes {}",
                finalizers.join(", "),
                left.join(", ")
            ));
        }
        why = "ARM answers 404 for the private endpoint and zones its status names".into();
    }
    let rest: Vec<&String> = finalizers
        .iter()
        .filter(|f| *f != CPO_CR_FINALIZER)
        .collect();
    let body = json!({"metadata": {
        "resourceVersion": cr.pointer("/metadata/resourceVersion"),
        "finalizers": rest,
    }});
    let api: Api<DynamicObject> = Api::namespaced_with(m.client().clone(), &cp, &cr_resource());
    let params = PatchParams {
        field_manager: Some(crate::kube::mgmt::FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    match api.patch(CR_NAME, &params, &Patch::Merge(&body)).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            return Err(KubeError::from_kube(
                "remove finalizer",
                &format!("AzurePrivateLinkService {cp}/{CR_NAME}"),
                e,
            )
            .into());
        }
    }
    tracing::info!(cr = %format!("{cp}/{CR_NAME}"), %why, "released the CPO's finalizer of an AzurePrivateLinkService");
    Ok(format!(
        "; released {CPO_CR_FINALIZER} of AzurePrivateLinkService {cp}/{CR_NAME} ({why})"
    ))
}

// ---------------------------------------------------------------------------------------

/// Input of the hypershift-mode waits and teardown steps.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HyperShiftLinkInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// HostedCluster namespace.
    pub namespace: String,
    /// HostedCluster name.
    pub name: String,
    /// Where HyperShift's resources live.
    pub link: HyperShiftLink,
}

/// Output of [`WaitHyperShiftPls`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HyperShiftPlsOutput {
    /// The PLS id (`status.privateLinkServiceID`).
    pub id: String,
    /// Its alias.
    pub alias: String,
    /// Ledger (adopted, managed by HyperShift).
    pub ledger: Vec<LedgerRecord>,
}

fn adopted(resource_type: &str, id: &str) -> LedgerRecord {
    record(
        resource_type,
        id,
        LedgerAction::Adopted,
        false,
        Some(MANAGED_BY_HYPERSHIFT.into()),
    )
}

/// `hypershift.private-link-service.wait`: durable wait until HyperShift's operator has
/// made the PLS (the CR's `status.privateLinkServiceID` and alias, `AzurePLSCreated=True`),
/// then an ARM GET of it. No undo: the PLS is HyperShift's.
#[derive(Clone, Debug)]
pub struct WaitHyperShiftPls(pub Arc<Clients>);

impl Action for WaitHyperShiftPls {
    const NAME: &'static str = "hypershift.private-link-service.wait";
    const HAS_UNDO: bool = false;
    type Input = HyperShiftLinkInput;
    type Output = HyperShiftPlsOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: HyperShiftLinkInput,
    ) -> Result<Outcome<HyperShiftPlsOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let cp = control_plane_namespace(&input.namespace, &input.name);
        let Some(cr) = read_cr(&m, &input.namespace, &input.name).await? else {
            return Ok(ctx.wait(
                self.0.poll(),
                format!("waiting for HyperShift's control-plane operator to create AzurePrivateLinkService {cp}/{CR_NAME}"),
            ));
        };
        let (Some(id), Some(alias)) = (
            status_str(&cr, "privateLinkServiceID"),
            status_str(&cr, "privateLinkServiceAlias"),
        ) else {
            return Ok(ctx.wait(
                self.0.poll(),
                format!(
                    "waiting for HyperShift's operator to create the private link service of {cp}/{CR_NAME}: {}; {}",
                    cond_text(&cr, "AzureInternalLoadBalancerAvailable"),
                    cond_text(&cr, "AzurePLSCreated")
                ),
            ));
        };
        let arm = self.0.arm(&input.link.mgmt_azure).await?;
        if arm.get_value(id, API_NETWORK).await?.is_none() {
            return Ok(ctx.wait(
                self.0.poll(),
                format!("AzurePrivateLinkService {cp}/{CR_NAME} names {id}, which Azure does not (yet) know"),
            ));
        }
        Ok(Outcome::Done(HyperShiftPlsOutput {
            id: id.to_string(),
            alias: alias.to_string(),
            ledger: vec![adopted(PLS_TYPE, id)],
        }))
    }
}

impl Facts for WaitHyperShiftPls {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::HostedClusterAvailable;
}

/// Output of [`WaitHyperShiftEndpoint`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HyperShiftEndpointOutput {
    /// The PE id.
    pub pe_id: String,
    /// Its private IP.
    pub ip: String,
    /// Zone ids (`<name>.hypershift.local`, and the base-domain zone when there is one).
    pub zone_ids: Vec<String>,
    /// Ledger (adopted, managed by HyperShift).
    pub ledger: Vec<LedgerRecord>,
}

/// `hypershift.private-endpoint.wait`: durable wait until HyperShift's control-plane
/// operator has made the PE (`AzurePrivateEndpointAvailable=True`; a connection pending
/// approval is said plainly) and the DNS (`AzurePrivateDNSAvailable=True`), then ARM GETs
/// of each. No undo.
#[derive(Clone, Debug)]
pub struct WaitHyperShiftEndpoint(pub Arc<Clients>);

impl Action for WaitHyperShiftEndpoint {
    const NAME: &'static str = "hypershift.private-endpoint.wait";
    const HAS_UNDO: bool = false;
    type Input = HyperShiftLinkInput;
    type Output = HyperShiftEndpointOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: HyperShiftLinkInput,
    ) -> Result<Outcome<HyperShiftEndpointOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let cp = control_plane_namespace(&input.namespace, &input.name);
        let Some(cr) = read_cr(&m, &input.namespace, &input.name).await? else {
            return Err(StepError::retryable(
                "not-found",
                format!("AzurePrivateLinkService {cp}/{CR_NAME} disappeared"),
            ));
        };
        if let Some(c) = condition(&cr, "AzurePrivateEndpointAvailable")
            && c.get("reason").and_then(Value::as_str)
                == Some("PrivateEndpointConnectionNotApproved")
        {
            return Ok(ctx.wait(
                self.0.poll(),
                format!(
                    "HyperShift's private endpoint {} is waiting for approval: its connection to {} is not Approved; approve it on the private link service, or add the guest subscription to allowedSubscriptions (HyperShift: {})",
                    status_str(&cr, "privateEndpointID").unwrap_or("private-router-pe"),
                    status_str(&cr, "privateLinkServiceID").unwrap_or("the PLS"),
                    c.get("message").and_then(Value::as_str).unwrap_or_default()
                ),
            ));
        }
        let ids = HyperShiftLinkIds::of(&cr);
        let ip = status_str(&cr, "privateEndpointIP");
        // `AzurePrivateDNSAvailable` turns True once the cluster's own zone is done, before
        // the base-domain zone (release-4.22
        // control-plane-operator/controllers/azureprivatelinkservice/controller.go, steps 9
        // and 10); `AzurePrivateLinkServiceAvailable` comes after both (step 11). Waiting for
        // it too means the ledger records every zone HyperShift made.
        let ready = cond_true(&cr, "AzurePrivateEndpointAvailable")
            && cond_true(&cr, "AzurePrivateDNSAvailable")
            && cond_true(&cr, "AzurePrivateLinkServiceAvailable")
            && status_str(&cr, "privateDNSZoneID").is_some();
        let (Some(pe), Some(ip), true) = (ids.pe_id.clone(), ip, ready) else {
            return Ok(ctx.wait(
                self.0.poll(),
                format!(
                    "waiting for HyperShift's control-plane operator to create the private endpoint and DNS of {cp}/{CR_NAME}: {}; {}; {}",
                    cond_text(&cr, "AzurePrivateEndpointAvailable"),
                    cond_text(&cr, "AzurePrivateDNSAvailable"),
                    cond_text(&cr, "AzurePrivateLinkServiceAvailable")
                ),
            ));
        };
        let arm = self.0.arm(&input.link.guest_azure).await?;
        let mut ledger = Vec::new();
        for (t, id, api) in std::iter::once((PE_TYPE, &pe, API_NETWORK))
            .chain(ids.zone_ids.iter().map(|z| (ZONE_TYPE, z, API_PRIVATE_DNS)))
        {
            if arm.get_value(id, api).await?.is_none() {
                return Ok(ctx.wait(
                    self.0.poll(),
                    format!("AzurePrivateLinkService {cp}/{CR_NAME} names {id}, which Azure does not (yet) know"),
                ));
            }
            ledger.push(adopted(t, id));
        }
        Ok(Outcome::Done(HyperShiftEndpointOutput {
            pe_id: pe,
            ip: ip.to_string(),
            zone_ids: ids.zone_ids,
            ledger,
        }))
    }
}

impl Facts for WaitHyperShiftEndpoint {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::HostedClusterAvailable;
}

/// Output of [`ReleaseHyperShiftLink`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReleaseOutput {
    /// What the CR named before the HostedCluster was deleted.
    pub ids: HyperShiftLinkIds,
    /// Ledger: connections rejected and removed.
    pub ledger: Vec<LedgerRecord>,
}

/// `hypershift.private-link.release` (delete-cluster, before the HostedCluster delete):
/// record what the CR names, then reject and remove every connection on its PLS that
/// HyperShift's own PE did not make. Only for a HostedCluster of ours.
#[derive(Clone, Debug)]
pub struct ReleaseHyperShiftLink(pub Arc<Clients>);

impl Action for ReleaseHyperShiftLink {
    const NAME: &'static str = "hypershift.private-link.release";
    const HAS_UNDO: bool = false;
    type Input = HyperShiftLinkInput;
    type Output = ReleaseOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry().with_max_attempts(30)
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: HyperShiftLinkInput,
    ) -> Result<Outcome<ReleaseOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let mut st: ReleaseState = checkpoint_field(ctx, RELEASE_KEY)?.unwrap_or_default();
        let before = st.clone();
        if st.report.is_none() {
            let labels = m
                .labels(Kind::HostedCluster, &input.namespace, &input.name)
                .await?;
            let ours = labels.is_some_and(|l| {
                input
                    .owner
                    .owns(Some(&serde_json::to_value(&l).unwrap_or_default()))
            });
            if ours && let Some(cr) = read_cr(&m, &input.namespace, &input.name).await? {
                st.ids = HyperShiftLinkIds::of(&cr);
            }
            st.report = Some(TeardownReport::default());
        }
        let mut report = st.report.clone().unwrap_or_default();
        let pending = release_foreign(&self.0, &input.link, &st.ids, &mut report).await?;
        st.report = Some(report.clone());
        if st != before {
            save_checkpoint_field(ctx, RELEASE_KEY, &st).await?;
        }
        if let Some((after, reason)) = pending {
            return Ok(ctx.wait(after, reason));
        }
        let ledger = report
            .deleted_connections
            .iter()
            .map(|c| {
                record(
                    PEC_TYPE,
                    c,
                    LedgerAction::Deleted,
                    false,
                    Some("rejected, then removed, before the HostedCluster was deleted".into()),
                )
            })
            .collect();
        Ok(Outcome::Done(ReleaseOutput {
            ids: st.ids,
            ledger,
        }))
    }
}

impl Facts for ReleaseHyperShiftLink {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::PrivateLinkTeardown;
}

/// Input of [`VerifyHyperShiftLinkGone`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VerifyGoneInput {
    /// Where HyperShift's resources live.
    pub link: HyperShiftLink,
    /// The release node (what the CR named).
    pub release: Ref<ReleaseOutput>,
}

/// Output of [`VerifyHyperShiftLinkGone`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VerifyGoneOutput {
    /// Ledger: each resource gone (removed by HyperShift).
    pub ledger: Vec<LedgerRecord>,
}

/// `hypershift.private-link.verify-gone` (delete-cluster, after the HostedCluster is
/// gone): every resource the CR named answers 404; a durable wait otherwise.
#[derive(Clone, Debug)]
pub struct VerifyHyperShiftLinkGone(pub Arc<Clients>);

impl Action for VerifyHyperShiftLinkGone {
    const NAME: &'static str = "hypershift.private-link.verify-gone";
    const HAS_UNDO: bool = false;
    type Input = VerifyGoneInput;
    type Output = VerifyGoneOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: VerifyGoneInput,
    ) -> Result<Outcome<VerifyGoneOutput>, StepError> {
        let ids = ctx.output(&input.release)?.ids;
        let left = remaining(&self.0, &input.link, &ids).await?;
        if !left.is_empty() {
            return Ok(ctx.wait(self.0.poll(), wait_gone_reason(&left)));
        }
        let note = || Some("removed by HyperShift's finalizers".to_string());
        let mut ledger = Vec::new();
        if let Some(p) = &ids.pls_id {
            ledger.push(record(PLS_TYPE, p, LedgerAction::Gone, false, note()));
        }
        if let Some(p) = &ids.pe_id {
            ledger.push(record(PE_TYPE, p, LedgerAction::Gone, false, note()));
        }
        for z in &ids.zone_ids {
            ledger.push(record(ZONE_TYPE, z, LedgerAction::Gone, false, note()));
        }
        Ok(Outcome::Done(VerifyGoneOutput { ledger }))
    }
}

impl Facts for VerifyHyperShiftLinkGone {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::PrivateLinkTeardown;
}

// ---------------------------------------------------------------------------------------

/// How the HyperShift operator was installed, as far as private link is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorInstall {
    /// The Deployment `hypershift/operator` exists.
    pub found: bool,
    /// Its container args carry `--private-platform=Azure` (or `--private-platform Azure`).
    pub private_platform_azure: bool,
    /// The management cluster serves the Route API (`route.openshift.io`): HyperShift's
    /// control-plane operator starts its private-link controllers only then
    /// (`control-plane-operator/main.go` `setupPrivatePlatformControllers`).
    pub route_api: bool,
}

/// Whether container args (and command) say `--private-platform Azure`, in either form.
pub fn has_private_platform_azure<'a>(args: impl IntoIterator<Item = &'a str>) -> bool {
    let args: Vec<&str> = args.into_iter().collect();
    args.iter()
        .enumerate()
        .any(|(i, a)| match a.strip_prefix("--private-platform") {
            Some(rest) => match rest.strip_prefix('=') {
                Some(v) => v.eq_ignore_ascii_case("azure"),
                None if rest.is_empty() => args
                    .get(i + 1)
                    .is_some_and(|v| v.eq_ignore_ascii_case("azure")),
                None => false,
            },
            None => false,
        })
}

/// Reads the HyperShift operator Deployment `hypershift/operator` and the API groups.
///
/// # Errors
/// API and transport errors other than a missing Deployment.
pub async fn operator_install(m: &Mgmt) -> Result<OperatorInstall, KubeError> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: Api<Deployment> = Api::namespaced(m.client().clone(), "hypershift");
    let d = api
        .get_opt("operator")
        .await
        .map_err(|e| KubeError::from_kube("get", "Deployment hypershift/operator", e))?;
    let private_platform_azure = d.as_ref().is_some_and(|d| {
        d.spec.template.spec.as_ref().is_some_and(|p| {
            p.containers.iter().any(|c| {
                has_private_platform_azure(
                    c.command
                        .iter()
                        .flatten()
                        .chain(c.args.iter().flatten())
                        .map(String::as_str),
                )
            })
        })
    });
    let groups = m
        .client()
        .list_api_groups()
        .await
        .map_err(|e| KubeError::from_kube("discover", "API groups", e))?;
    Ok(OperatorInstall {
        found: d.is_some(),
        private_platform_azure,
        route_api: groups.groups.iter().any(|g| g.name == "route.openshift.io"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_private_platform_flag_in_both_forms() {
        assert!(has_private_platform_azure([
            "run",
            "--private-platform=Azure"
        ]));
        assert!(has_private_platform_azure([
            "run",
            "--private-platform",
            "Azure"
        ]));
        assert!(has_private_platform_azure(["--private-platform=azure"]));
        assert!(!has_private_platform_azure([
            "run",
            "--private-platform=AWS"
        ]));
        assert!(!has_private_platform_azure(["run", "--private-platform"]));
        assert!(!has_private_platform_azure([
            "run",
            "--private-platform-x=Azure"
        ]));
        assert!(!has_private_platform_azure(["run"]));
    }

    #[test]
    fn ids_come_from_the_status_and_empty_means_nothing_named() {
        let cr = json!({"status": {"privateLinkServiceID": "/p", "privateEndpointID": "",
            "privateDNSZoneID": "/z", "baseDomainDNSZoneID": "/b"}});
        let ids = HyperShiftLinkIds::of(&cr);
        assert_eq!(ids.pls_id.as_deref(), Some("/p"));
        assert_eq!(ids.pe_id, None);
        assert_eq!(ids.zone_ids, vec!["/z".to_string(), "/b".to_string()]);
        assert!(HyperShiftLinkIds::of(&json!({"status": {}})).is_empty());
    }
}
