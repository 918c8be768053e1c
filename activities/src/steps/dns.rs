//! The public DNS zone of the base domain: found (read only) before anything is created;
//! the zone itself is never written or deleted by us. The only records we write in it are
//! a PublicAndPrivate cluster's two public hostnames ([`EnsurePublicRecords`]), marked as
//! ours in their metadata and deleted only when so marked.
//!
//! HyperShift's `hypershift create infra azure` requires an Azure DNS zone named exactly
//! `baseDomain` in the guest subscription (openshift/hypershift
//! `cmd/infra/azure/networking.go` `GetBaseDomainID`) and puts its id in the HostedCluster's
//! `spec.dns.publicZoneID`; the ingress identity's third role scope is that zone's resource
//! group (`--dns-zone-rg-name`, `support/azureutil` `GetServicePrincipalScopes`). With
//! `dnsZoneResourceGroup` the zone is read from that group (a GET); without it the
//! subscription's zones are listed, following `nextLink` (HyperShift reads only the first
//! page).

use super::arm::{DeleteOutput, azure_retry, azure_undo_retry, record};
use super::env::{AzureEnv, Clients, Owner};
use super::facts::Facts;
use crate::azure::durable::{self, Deleted, Progress};
use crate::azure::models::{API_AUTHORIZATION, API_DNS};
use crate::azure::names;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// ARM type of a public DNS zone.
pub const PUBLIC_ZONE_TYPE: &str = "Microsoft.Network/dnszones";

/// Input of `azure.public-dns-zone.find`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublicZoneInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Guest subscription (where HyperShift looks for the zone).
    pub subscription: String,
    /// The zone's name: the cluster's `baseDomain`.
    pub base_domain: String,
    /// `dnsZoneResourceGroup`: read the zone from this group instead of searching the
    /// subscription.
    #[serde(default)]
    pub resource_group: Option<String>,
    /// A missing zone is not an error (delete-cluster: the zone may be gone by then).
    #[serde(default)]
    pub optional: bool,
}

/// Output: the zone, if found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublicZoneOutput {
    /// Zone id (`spec.dns.publicZoneID`).
    pub id: Option<String>,
    /// Id of its resource group (`/subscriptions/{s}/resourceGroups/{g}`), the ingress
    /// identity's third role scope.
    pub resource_group_id: Option<String>,
    /// Ledger (the zone, read only).
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

impl PublicZoneOutput {
    /// The zone's resource group id, or a permanent error (the find node of a create
    /// never succeeds without one).
    ///
    /// # Errors
    /// No zone was found.
    pub fn group(&self) -> Result<&str, StepError> {
        self.resource_group_id.as_deref().ok_or_else(missing_output)
    }
}

fn missing_output() -> StepError {
    StepError::permanent(
        hcp_runtime::error::kind::DEFINITION,
        "the public DNS zone lookup found no zone",
    )
}

/// `/subscriptions/{s}/resourceGroups/{g}` of a resource id, with the group's name as ARM
/// wrote it (real ARM answers some DNS ids with a lower-cased `resourcegroups`).
pub fn group_of(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('/').collect();
    match parts.as_slice() {
        ["", s, sub, g, rg, ..]
            if s.eq_ignore_ascii_case("subscriptions")
                && g.eq_ignore_ascii_case("resourceGroups") =>
        {
            Some(names::resource_group_id(sub, rg))
        }
        _ => None,
    }
}

/// `azure.public-dns-zone.find`: read-only lookup of the zone named `baseDomain`.
#[derive(Clone, Debug)]
pub struct FindPublicZone(pub Arc<Clients>);

impl Action for FindPublicZone {
    const NAME: &'static str = "azure.public-dns-zone.find";
    const HAS_UNDO: bool = false;
    type Input = PublicZoneInput;
    type Output = PublicZoneOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        _ctx: &StepContext,
        input: PublicZoneInput,
    ) -> Result<Outcome<PublicZoneOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let found = find_public_zone(
            &arm,
            &input.subscription,
            input.resource_group.as_deref(),
            &input.base_domain,
        )
        .await?;
        let Some(id) = found else {
            if input.optional {
                return Ok(Outcome::Done(PublicZoneOutput {
                    id: None,
                    resource_group_id: None,
                    ledger: Vec::new(),
                }));
            }
            return Err(not_found(&input));
        };
        let resource_group_id = group_of(&id);
        Ok(Outcome::Done(PublicZoneOutput {
            ledger: vec![record(
                PUBLIC_ZONE_TYPE,
                &id,
                LedgerAction::Adopted,
                false,
                Some("public DNS zone of baseDomain: read only, never written or deleted".into()),
            )],
            resource_group_id,
            id: Some(id),
        }))
    }
}

impl Facts for FindPublicZone {
    const ARM_ACTIONS: &'static [&'static str] = &["Microsoft.Network/dnszones/read"];
}

/// The id of the public Azure DNS zone named `base_domain`: a GET in `resource_group` when
/// given (Zones_Get), else the subscription's zones listed, following nextLink (Zones_List,
/// `specification/dns/resource-manager/Microsoft.Network/stable/2018-05-01/dns.json`).
/// Private zones (another type, or `zoneType: Private`) never count. Shared by this step and
/// preflight's `azure.dns-zone`.
///
/// # Errors
/// The ARM read failed.
pub async fn find_public_zone(
    arm: &crate::azure::ArmClient,
    subscription: &str,
    resource_group: Option<&str>,
    base_domain: &str,
) -> Result<Option<String>, crate::azure::ArmError> {
    let domain = base_domain.trim_end_matches('.');
    Ok(match resource_group {
        Some(rg) => {
            let id = format!(
                "{}/providers/Microsoft.Network/dnszones/{domain}",
                names::resource_group_id(subscription, rg)
            );
            arm.get_value(&id, API_DNS)
                .await?
                .map(|v| zone_id(&v).unwrap_or(id))
        }
        None => {
            let path =
                format!("/subscriptions/{subscription}/providers/Microsoft.Network/dnszones");
            arm.list_values(&path, API_DNS)
                .await?
                .iter()
                .filter(|z| {
                    z.get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| n.trim_end_matches('.').eq_ignore_ascii_case(domain))
                })
                .filter(|z| {
                    z.pointer("/properties/zoneType")
                        .and_then(Value::as_str)
                        .is_none_or(|t| t.eq_ignore_ascii_case("Public"))
                })
                .find_map(zone_id)
        }
    })
}

fn zone_id(v: &Value) -> Option<String> {
    v.get("id").and_then(Value::as_str).map(str::to_string)
}

fn not_found(input: &PublicZoneInput) -> StepError {
    let msg = match &input.resource_group {
        Some(rg) => format!(
            "no public Azure DNS zone named {domain:?} in resource group {rg:?} of subscription {sub}: \
             HyperShift needs the zone of baseDomain (the guest's ingress writes *.apps.<name>.{domain} there). \
             Create it (`az network dns zone create -g {rg} -n {domain}`), or fix baseDomain or dnsZoneResourceGroup in the cluster file",
            domain = input.base_domain,
            sub = input.subscription,
        ),
        None => format!(
            "no public Azure DNS zone named {domain:?} in subscription {sub}: \
             HyperShift needs the zone of baseDomain (the guest's ingress writes *.apps.<name>.{domain} there). \
             Create it (`az network dns zone create -g <group> -n {domain}`), or fix baseDomain, \
             or set dnsZoneResourceGroup to the group that holds it",
            domain = input.base_domain,
            sub = input.subscription,
        ),
    };
    StepError::permanent(hcp_runtime::error::kind::VALIDATION, msg)
        .with_code("PublicDnsZoneNotFound")
}

/// Input of `azure.role-assignment.delete-in-dns-zone-group` (delete-cluster): the
/// ingress role assignment on the public zone's group, whose id is known only once the
/// zone is found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DnsScopeRoleDeleteInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// Component (for the deterministic name).
    pub component: String,
    /// The zone lookup.
    pub zone: Ref<PublicZoneOutput>,
}

/// `azure.role-assignment.delete-in-dns-zone-group`: delete our role assignment (by its
/// deterministic name) on the public DNS zone's group; nothing to do when the zone is gone.
#[derive(Clone, Debug)]
pub struct DeleteDnsScopeRoleAssignment(pub Arc<Clients>);

impl Action for DeleteDnsScopeRoleAssignment {
    const NAME: &'static str = "azure.role-assignment.delete-in-dns-zone-group";
    const HAS_UNDO: bool = false;
    type Input = DnsScopeRoleDeleteInput;
    type Output = DeleteOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: DnsScopeRoleDeleteInput,
    ) -> Result<Outcome<DeleteOutput>, StepError> {
        let zone = ctx.output(&input.zone)?;
        let Some(scope) = zone.resource_group_id else {
            return Ok(Outcome::Done(DeleteOutput { ledger: Vec::new() }));
        };
        let guid = names::role_assignment_name(&input.owner.infra_id, &input.component, &scope);
        let arm = self.0.arm(&input.azure).await?;
        let id = format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{guid}");
        // Untagged: ours by its deterministic name (as delete-cluster's other role
        // assignment deletes, `arm::delete_resource` with `tagged: false`).
        match durable::delete(ctx, &arm, &id, API_AUTHORIZATION, None).await? {
            Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
            Progress::Done(d) => {
                let action = match d {
                    Deleted::Gone => LedgerAction::Gone,
                    Deleted::Deleted => LedgerAction::Deleted,
                    Deleted::KeptNotOurs => LedgerAction::Kept,
                };
                Ok(Outcome::Done(DeleteOutput {
                    ledger: vec![record(
                        "Microsoft.Authorization/roleAssignments",
                        &id,
                        action,
                        false,
                        None,
                    )],
                }))
            }
        }
    }
}

impl Facts for DeleteDnsScopeRoleAssignment {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Authorization/roleAssignments/read",
        "Microsoft.Authorization/roleAssignments/delete",
    ];
}

// ---------------------------------------------------------------------------------------
// A PublicAndPrivate cluster's public hostnames.

/// ARM type of a public DNS A record set.
pub const PUBLIC_A_TYPE: &str = "Microsoft.Network/dnszones/A";

/// Record-set `metadata` keys that mark a record in the (shared, not ours) public zone as
/// this cluster's: a record set takes no tags, and the zone holds other people's records,
/// so delete-cluster deletes a record only when these say it is ours. Plain alphanumeric
/// names (Azure DNS metadata names are restricted; these are valid everywhere).
pub const META_CLUSTER: &str = "hcpworkflowcluster";
/// Infra id, see [`META_CLUSTER`].
pub const META_INFRA_ID: &str = "hcpworkflowinfraid";
/// The run that wrote the record, see [`META_CLUSTER`].
pub const META_RUN: &str = "hcpworkflowrun";

/// Input of `azure.public-dns-a-record.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublicRecordsInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The public zone lookup (the base domain's zone).
    pub zone: Ref<PublicZoneOutput>,
    /// Record names relative to the zone (`api-<name>`, `oauth-<name>`).
    pub names: Vec<String>,
    /// The HostedCluster node: its public `router` Service IP.
    pub hosted_cluster: Ref<super::objects::HostedClusterOutput>,
}

/// Output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublicRecordsOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

/// `azure.public-dns-a-record.ensure`: the A records of a PublicAndPrivate cluster's public
/// API and OAuth hostnames, pointing at the public `router` Service's load balancer (what
/// external-dns does for `hypershift create cluster azure --external-dns-domain`).
///
/// The zone is not ours: a record set of the same name that is not marked as this
/// cluster's (`metadata`, [`META_CLUSTER`]) is refused, never overwritten or adopted; one
/// of ours pointing elsewhere (a re-created router) is updated. Creation is journaled
/// before each PUT ([`super::arm::ensure_children`]), and the undo deletes only the record
/// sets this run created.
#[derive(Clone, Debug)]
pub struct EnsurePublicRecords(pub Arc<Clients>);

fn metadata_is_ours(owner: &Owner, body: &Value) -> bool {
    let meta = body.pointer("/properties/metadata");
    let get = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
    get(META_CLUSTER) == Some(owner.cluster.as_str())
        && get(META_INFRA_ID) == Some(owner.infra_id.as_str())
}

fn public_record_ids(zone_id: &str, names: &[String]) -> Vec<String> {
    names.iter().map(|n| format!("{zone_id}/A/{n}")).collect()
}

impl Action for EnsurePublicRecords {
    const NAME: &'static str = "azure.public-dns-a-record.ensure";
    type Input = PublicRecordsInput;
    type Output = PublicRecordsOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PublicRecordsInput,
    ) -> Result<Outcome<PublicRecordsOutput>, StepError> {
        let zone_id = ctx.output(&input.zone)?.id.ok_or_else(missing_output)?;
        let ip = ctx
            .output(&input.hosted_cluster)?
            .public_router_ip
            .ok_or_else(|| {
                StepError::permanent(
                    hcp_runtime::error::kind::DEFINITION,
                    "the HostedCluster step recorded no public router IP",
                )
            })?;
        let arm = self.0.arm(&input.azure).await?;
        let own = input.owner.ownership(ctx);
        let body = json!({"properties": {
            "TTL": 300,
            "ARecords": [{"ipv4Address": ip}],
            "metadata": {
                META_CLUSTER: input.owner.cluster,
                META_INFRA_ID: input.owner.infra_id,
                META_RUN: own.tags.get(durable::TAG_RUN).cloned().unwrap_or_default(),
            },
        }});
        let ids = public_record_ids(&zone_id, &input.names);
        for id in &ids {
            let existing = arm
                .get_value(id, API_DNS)
                .await
                .map_err(|e| StepError::from(e.with_resource(id)))?;
            let Some(existing) = existing else { continue };
            if !metadata_is_ours(&input.owner, &existing) {
                return Err(StepError::permanent(
                    "Conflict",
                    format!(
                        "the public zone already has a record set {id} that is not this cluster's (no metadata {META_CLUSTER}={} / {META_INFRA_ID}={}): it is left as is; remove it or pick another cluster name",
                        input.owner.cluster, input.owner.infra_id
                    ),
                ));
            }
            let points_here = existing
                .pointer("/properties/ARecords")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.len() == 1 && a[0].get("ipv4Address").and_then(Value::as_str) == Some(&ip)
                });
            if !points_here {
                // Ours, pointing at an older router: follow the router.
                arm.put(id, API_DNS, &body)
                    .await
                    .map_err(|e| StepError::from(e.with_resource(id)))?;
            }
        }
        let children = ids.into_iter().map(|id| (id, body.clone())).collect();
        match super::arm::ensure_children(
            ctx,
            &arm,
            &input.owner,
            PUBLIC_A_TYPE,
            API_DNS,
            children,
            false,
            false,
            false,
        )
        .await?
        {
            Outcome::Wait { until, reason } => Ok(Outcome::Wait { until, reason }),
            Outcome::Done(ledger) => Ok(Outcome::Done(PublicRecordsOutput { ledger })),
        }
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: PublicRecordsInput,
        output: Option<PublicRecordsOutput>,
    ) -> Result<hcp_runtime::UndoOutcome, StepError> {
        let Some(zone_id) = ctx.output(&input.zone).ok().and_then(|z| z.id) else {
            return Ok(hcp_runtime::UndoOutcome::Done);
        };
        let arm = self.0.arm(&input.azure).await?;
        super::arm::delete_children(
            ctx,
            &arm,
            PUBLIC_A_TYPE,
            API_DNS,
            &public_record_ids(&zone_id, &input.names),
            output.as_ref().map(|o| o.ledger.as_slice()),
            false,
        )
        .await
    }
}

impl Facts for EnsurePublicRecords {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/dnszones/A/read",
        "Microsoft.Network/dnszones/A/write",
        "Microsoft.Network/dnszones/A/delete",
    ];
}

/// Input of `azure.public-dns-a-record.delete` (delete-cluster).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublicRecordsDeleteInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The public zone lookup (optional: the zone may be gone).
    pub zone: Ref<PublicZoneOutput>,
    /// Record names relative to the zone.
    pub names: Vec<String>,
}

/// `azure.public-dns-a-record.delete`: delete the public hostnames' record sets that are
/// marked as this cluster's ([`META_CLUSTER`], [`META_INFRA_ID`]); any other record set of
/// that name is kept (the zone is shared). Nothing to do when the zone is gone.
#[derive(Clone, Debug)]
pub struct DeletePublicRecords(pub Arc<Clients>);

impl Action for DeletePublicRecords {
    const NAME: &'static str = "azure.public-dns-a-record.delete";
    const HAS_UNDO: bool = false;
    type Input = PublicRecordsDeleteInput;
    type Output = DeleteOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PublicRecordsDeleteInput,
    ) -> Result<Outcome<DeleteOutput>, StepError> {
        let Some(zone_id) = ctx.output(&input.zone)?.id else {
            return Ok(Outcome::Done(DeleteOutput { ledger: Vec::new() }));
        };
        let arm = self.0.arm(&input.azure).await?;
        let mut ledger = Vec::new();
        for id in public_record_ids(&zone_id, &input.names) {
            let existing = arm
                .get_value(&id, API_DNS)
                .await
                .map_err(|e| StepError::from(e.with_resource(&id)))?;
            let (action, note) = match existing {
                None => (LedgerAction::Gone, None),
                Some(body) if metadata_is_ours(&input.owner, &body) => {
                    arm.delete(&id, API_DNS)
                        .await
                        .map_err(|e| StepError::from(e.with_resource(&id)))?;
                    (LedgerAction::Deleted, None)
                }
                Some(_) => (
                    LedgerAction::Kept,
                    Some(
                        "not marked as this cluster's (record-set metadata): left in place"
                            .to_string(),
                    ),
                ),
            };
            ledger.push(record(PUBLIC_A_TYPE, &id, action, false, note));
        }
        Ok(Outcome::Done(DeleteOutput { ledger }))
    }
}

impl Facts for DeletePublicRecords {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/dnszones/A/read",
        "Microsoft.Network/dnszones/A/delete",
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_of_keeps_the_name_and_normalises_the_segment() {
        assert_eq!(
            group_of("/subscriptions/s/resourcegroups/DNS-rg/providers/Microsoft.Network/dnszones/example.com")
                .as_deref(),
            Some("/subscriptions/s/resourceGroups/DNS-rg")
        );
        assert_eq!(group_of("/subscriptions/s"), None);
    }
}
