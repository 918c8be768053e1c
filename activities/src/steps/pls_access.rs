//! Who may see and connect to a cluster's Private Link Service: `azure.pls.visibility`
//! (visibility and auto-approval of our own service) and `azure.pls.connections.prune`,
//! which rejects, then removes, every private endpoint connection from a subscription no
//! longer allowed (a pivot: a rejected connection cannot be approved back by us; its owner
//! must recreate it). HyperShift's own controller updates visibility but never touches
//! existing connections (`control-plane-operator/controllers/azureprivatelinkservice/controller.go`).

use super::arm::{azure_retry, azure_undo_retry};
use super::env::{AzureEnv, Clients, MgmtEnv, Owner};
use super::facts::Facts;
use super::in_place::*;
use crate::azure::durable::{checkpoint_field, save_checkpoint_field};
use crate::azure::models::API_NETWORK;
use crate::azure::privatelink::{self, TeardownReport};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

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

pub(super) const PLS_TYPE: &str = "Microsoft.Network/privateLinkServices";

pub(super) fn same_set(a: &[String], b: &[String]) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|x| b.iter().any(|y| y.eq_ignore_ascii_case(x)))
}

pub(super) fn pls_lists(pls: &Value) -> (Vec<String>, Vec<String>) {
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

pub(super) async fn resolve_pls(
    clients: &Clients,
    r: &PlsRef,
) -> Result<Option<String>, StepError> {
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
pub(super) const BEFORE_AUTO_APPROVAL_KEY: &str = "before-auto-approval";

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

pub(super) const PRUNE_KEY: &str = "pruned";

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
