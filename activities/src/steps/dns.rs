//! The public DNS zone of the base domain: found (read only) before anything is created,
//! never written or deleted by us.
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
use crate::azure::durable::{self, Deleted, Progress};
use crate::azure::models::{API_AUTHORIZATION, API_DNS};
use crate::azure::names;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
