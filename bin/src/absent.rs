//! Whether anything a delete would remove exists, asked of Azure and the management
//! cluster read-only, target by target as the delete's own DAG names them.
//!
//! A delete of a cluster this journal never created is built from deterministic names
//! alone: without this look, it would list every name as something it "will delete",
//! journal a run that finds each one gone, and record the cluster as deleted.

use hcp_activities::azure::models::{API_DNS, API_NETWORK};
use hcp_activities::steps::arm::DeleteInput;
use hcp_activities::steps::cluster::DeleteObjectInput;
use hcp_activities::steps::dns::{
    DnsScopeRoleDeleteInput, PublicRecordsDeleteInput, PublicZoneInput,
};
use hcp_activities::steps::env::{AzureEnv, Clients};
use hcp_activities::steps::private_link::PlsDeleteInput;
use hcp_runtime::SagaDag;
use serde_json::Value;

/// What the look found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Live {
    /// Every target of the DAG is gone.
    Nothing,
    /// The first target that exists, or that could not be checked (an error, a step of a
    /// kind this look does not know): the delete goes on as usual.
    Maybe(String),
}

/// The public DNS zone the DAG's lookup step finds: `(zone id, its group's id)`.
type Zone = Option<(String, Option<String>)>;

/// Looks at every target of delete DAG `dag`, in order, and stops at the first that
/// exists (or cannot be checked).
pub(crate) async fn look(dag: &SagaDag, clients: &Clients) -> Live {
    let mut zone: Zone = None;
    for n in &dag.nodes {
        match target(n.action.as_str(), &n.input, clients, &mut zone).await {
            Ok(None) => {}
            Ok(Some(found)) => return Live::Maybe(format!("{}: {found}", n.name)),
            Err(why) => return Live::Maybe(format!("{}: cannot check: {why}", n.name)),
        }
    }
    Live::Nothing
}

/// `Ok(Some(what))` when the step's target exists, `Ok(None)` when it is gone.
async fn target(
    action: &str,
    input: &Value,
    clients: &Clients,
    zone: &mut Zone,
) -> Result<Option<String>, String> {
    let decode = |what: &str| format!("the {what} input of {action} does not decode");
    match action {
        // Read only: the user's zone, never deleted; its group names the roles below.
        "azure.public-dns-zone.find" => {
            let i: PublicZoneInput =
                serde_json::from_value(input.clone()).map_err(|_| decode("zone lookup"))?;
            let arm = arm(clients, &i.azure).await?;
            let found = hcp_activities::steps::dns::find_public_zone(
                &arm,
                &i.subscription,
                i.resource_group.as_deref(),
                &i.base_domain,
            )
            .await
            .map_err(|e| e.to_string())?;
            *zone = found.map(|id| {
                let rg = hcp_activities::steps::dns::group_of(&id);
                (id, rg)
            });
            Ok(None)
        }
        "azure.role-assignment.delete-in-dns-zone-group" => {
            let i: DnsScopeRoleDeleteInput =
                serde_json::from_value(input.clone()).map_err(|_| decode("role"))?;
            let Some(scope) = zone.as_ref().and_then(|z| z.1.clone()) else {
                return Ok(None);
            };
            let guid = hcp_activities::azure::names::role_assignment_name(
                &i.owner.infra_id,
                &i.component,
                &scope,
            );
            let id = format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{guid}");
            exists(
                clients,
                &i.azure,
                &id,
                hcp_activities::azure::models::API_AUTHORIZATION,
            )
            .await
        }
        "azure.public-dns-a-record.delete" => {
            let i: PublicRecordsDeleteInput =
                serde_json::from_value(input.clone()).map_err(|_| decode("records"))?;
            let Some(zone_id) = zone.as_ref().map(|z| z.0.clone()) else {
                return Ok(None);
            };
            for name in &i.names {
                if let Some(f) =
                    exists(clients, &i.azure, &format!("{zone_id}/A/{name}"), API_DNS).await?
                {
                    return Ok(Some(f));
                }
            }
            Ok(None)
        }
        "azure.private-link-service.delete" => {
            let i: PlsDeleteInput =
                serde_json::from_value(input.clone()).map_err(|_| decode("PLS"))?;
            exists(clients, &i.azure, &i.id, API_NETWORK).await
        }
        "k8s.object.delete" => {
            let i: DeleteObjectInput =
                serde_json::from_value(input.clone()).map_err(|_| decode("object"))?;
            let m = clients.mgmt(&i.mgmt).await.map_err(|e| e.to_string())?;
            for name in &i.names {
                let found = m
                    .get(i.kind, &i.namespace, name)
                    .await
                    .map_err(|e| e.to_string())?;
                if found.is_some() {
                    return Ok(Some(format!(
                        "{} {}/{name} exists",
                        i.kind.type_name(),
                        i.namespace
                    )));
                }
            }
            Ok(None)
        }
        // Every ARM delete of a resource named by its id (groups, network, identities,
        // role assignments, zones and their records and links).
        _ if input.get("id").is_some() && input.get("api").is_some() => {
            let i: DeleteInput =
                serde_json::from_value(input.clone()).map_err(|_| decode("delete"))?;
            exists(clients, &i.azure, &i.id, &i.api).await
        }
        _ => Err(format!("{action} is not a delete this look knows")),
    }
}

async fn arm(
    clients: &Clients,
    env: &AzureEnv,
) -> Result<hcp_activities::azure::ArmClient, String> {
    clients.arm(env).await.map_err(|e| e.to_string())
}

/// `Ok(Some("… exists"))` when ARM has `id`.
async fn exists(
    clients: &Clients,
    env: &AzureEnv,
    id: &str,
    api: &str,
) -> Result<Option<String>, String> {
    let arm = arm(clients, env).await?;
    match arm.get_value(id, api).await {
        Ok(Some(_)) => Ok(Some(format!("{id} exists"))),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}
