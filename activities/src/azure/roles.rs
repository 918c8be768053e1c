//! Role assignments: deterministic GUID names, stale assignments replaced.
//!
//! A role assignment's name must be a GUID, so ours is UUIDv5 of
//! `<infraID>-<component>-<scope>` ([`super::names::role_assignment_name`]): a retried or
//! re-run step addresses the same assignment instead of piling up orphans (HyperShift
//! PR 8322). Azure never updates an assignment's principal or role in place
//! (`RoleAssignmentUpdateNotPermitted`), so one with our name but another principal — left
//! by an earlier cluster whose identity was recreated — is deleted and created again. An
//! identical assignment under another name answers 409 `RoleAssignmentExists`: that is
//! success (and not ours to delete later). `PrincipalNotFound` — a freshly created identity
//! not yet replicated in Entra — is a retryable error.

use hcp_runtime::StepError;
use hcp_runtime::action::StepContext;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::client::ArmClient;
use super::durable::{self, Deleted, Ensured, Progress};
use super::models::{API_AUTHORIZATION, RoleAssignment};
use super::names;

/// One role assignment to make exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleAssignmentSpec {
    /// Scope id (e.g. a resource group id).
    pub scope: String,
    /// Deterministic name ([`names::role_assignment_name`]).
    pub name: Uuid,
    /// Full role definition id ([`role_definition_id`]).
    pub role_definition_id: String,
    /// Principal (object) id of the identity.
    pub principal_id: String,
}

impl RoleAssignmentSpec {
    /// ARM id of the assignment.
    pub fn id(&self) -> String {
        names::role_assignment_id(&self.scope, &self.name)
    }

    /// PUT body.
    pub fn body(&self) -> Value {
        json!({"properties": {
            "roleDefinitionId": self.role_definition_id,
            "principalId": self.principal_id,
            "principalType": "ServicePrincipal",
        }})
    }
}

/// Full role definition id for a built-in role GUID, in the subscription of `scope`.
pub fn role_definition_id(scope: &str, role_guid: &str) -> String {
    match names::subscription_of(scope) {
        Some(sub) => names::role_definition_id(sub, role_guid),
        None => format!("/providers/Microsoft.Authorization/roleDefinitions/{role_guid}"),
    }
}

fn role_guid(role_definition_id: &str) -> String {
    names::name_of(role_definition_id).to_ascii_lowercase()
}

fn same_assignment(existing: &RoleAssignment, spec: &RoleAssignmentSpec) -> bool {
    let p = &existing.properties;
    p.principal_id
        .as_deref()
        .is_some_and(|x| x.eq_ignore_ascii_case(&spec.principal_id))
        && p.role_definition_id
            .as_deref()
            .is_some_and(|r| role_guid(r) == role_guid(&spec.role_definition_id))
}

/// Whether the assignment with our name exists as `spec` asks (same principal and role),
/// so that [`ensure`] will write nothing.
///
/// # Errors
/// ARM errors of the GET, classified.
pub async fn exists_as_specified(
    arm: &ArmClient,
    spec: &RoleAssignmentSpec,
) -> Result<bool, StepError> {
    Ok(look(arm, spec)
        .await?
        .is_some_and(|existing| same_assignment(&existing, spec)))
}

/// The assignment with the spec's name, as it is now (one GET): hand it to
/// [`ensure_seen`] so the ensure does not read it again.
///
/// # Errors
/// ARM errors, classified.
pub async fn look(
    arm: &ArmClient,
    spec: &RoleAssignmentSpec,
) -> Result<Option<RoleAssignment>, StepError> {
    let id = spec.id();
    arm.get::<RoleAssignment>(&id, API_AUTHORIZATION)
        .await
        .map_err(|e| StepError::from(e.with_resource(&id)))
}

/// Whether `seen` (from [`look`]) is the assignment `spec` describes.
pub fn is_as_specified(seen: Option<&RoleAssignment>, spec: &RoleAssignmentSpec) -> bool {
    seen.is_some_and(|existing| same_assignment(existing, spec))
}

/// Makes the assignment exist (synchronous in ARM: always `Done` or an error).
///
/// # Errors
/// `PrincipalNotFound` (retryable, replication delay); `AuthorizationFailed` (permanent:
/// the credential may not assign roles); other ARM errors, classified.
pub async fn ensure(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &RoleAssignmentSpec,
) -> Result<Progress<Ensured>, StepError> {
    let seen = look(arm, spec).await?;
    ensure_seen(ctx, arm, spec, seen).await
}

/// [`ensure`] when this attempt has just read the assignment ([`look`]): `seen` is what it
/// found, and it is not read again (one read where a read is needed). `None`
/// without a read is allowed only where the assignment cannot exist yet (a principal this
/// run created: a stale one with our name refuses the write, see `steps::identity`).
///
/// A PUT the ARM budget holds back (`ArmBudgetWait`: nothing was sent) after `seen` found
/// it missing journals that knowledge ([`durable::UNSENT_KEY`], as [`durable::ensure`]
/// does), so the next attempt need not read again ([`recalled_missing`],
/// [`ensure_recalled`]).
///
/// # Errors
/// As [`ensure`].
pub async fn ensure_seen(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &RoleAssignmentSpec,
    seen: Option<RoleAssignment>,
) -> Result<Progress<Ensured>, StepError> {
    ensure_known(ctx, arm, spec, seen, ctx.now().0).await
}

/// When an earlier attempt of this step knew the assignment missing (it read it so, or its
/// principal was created by this run) and the ARM budget then held its PUT back before
/// sending it (journal clock, ms): the record of [`durable::UNSENT_KEY`], trusted for
/// [`durable::UNSENT_TRUST`] only. Removed durably before any PUT of the assignment is
/// sent, so once a PUT may have left (and after a crash) this is `None` and the step reads.
///
/// # Errors
/// A checkpoint that does not parse.
pub fn recalled_missing(
    ctx: &StepContext,
    spec: &RoleAssignmentSpec,
) -> Result<Option<i64>, StepError> {
    durable::unsent_missing(ctx, &spec.id())
}

/// [`ensure`] without reading, when [`recalled_missing`] said when the assignment was known
/// missing (`missing_since`): that knowledge is kept if the budget holds the PUT back again
/// (it does not grow younger). A stale assignment with our name (another principal) that
/// the knowledge did not cover refuses the write (409 `RoleAssignmentUpdateNotPermitted`,
/// nothing written): then the usual read-and-replace ([`ensure`]).
///
/// # Errors
/// As [`ensure`].
pub async fn ensure_recalled(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &RoleAssignmentSpec,
    missing_since: i64,
) -> Result<Progress<Ensured>, StepError> {
    match ensure_known(ctx, arm, spec, None, missing_since).await {
        Err(e) if e.code.as_deref() == Some("RoleAssignmentUpdateNotPermitted") => {
            ensure(ctx, arm, spec).await
        }
        other => other,
    }
}

/// `read_at`: when `seen` was learned (journal clock, ms).
async fn ensure_known(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &RoleAssignmentSpec,
    seen: Option<RoleAssignment>,
    read_at: i64,
) -> Result<Progress<Ensured>, StepError> {
    let id = spec.id();
    // Known missing (not a stale one just deleted: that DELETE was sent, so nothing about
    // the name is kept past this attempt).
    let missing_since = seen.is_none().then_some(read_at);
    if let Some(existing) = seen {
        if same_assignment(&existing, spec) {
            let body = serde_json::to_value(&existing).unwrap_or(Value::Null);
            return Ok(Progress::Done(Ensured {
                id,
                body,
                created: false,
            }));
        }
        tracing::info!(%id, "role assignment with our name has another principal or role: replacing it");
        arm.delete(&id, API_AUTHORIZATION)
            .await
            .map_err(|e| StepError::from(e.with_resource(&id)))?;
    }
    // The record of a held-back PUT is kept as `durable::ensure` keeps it.
    match durable::put_keeping_unsent(
        ctx,
        arm,
        &id,
        API_AUTHORIZATION,
        &spec.body(),
        missing_since,
    )
    .await?
    {
        Ok(rsp) => Ok(Progress::Done(Ensured {
            id,
            body: rsp.body.unwrap_or(Value::Null),
            created: true,
        })),
        Err(e) if e.is("RoleAssignmentExists") => {
            let twin = find_twin(arm, spec).await?;
            Ok(Progress::Done(match twin {
                Some(body) => Ensured {
                    id: body
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| id.clone(), str::to_string),
                    body,
                    created: false,
                },
                None => Ensured {
                    id,
                    body: Value::Null,
                    created: false,
                },
            }))
        }
        Err(e) => Err(e.with_resource(&id).into()),
    }
}

/// The identical assignment (same principal, role and scope) under another name.
async fn find_twin(arm: &ArmClient, spec: &RoleAssignmentSpec) -> Result<Option<Value>, StepError> {
    let filter = format!("atScope() and principalId eq '{}'", spec.principal_id);
    let path = format!(
        "{}/providers/Microsoft.Authorization/roleAssignments",
        spec.scope
    );
    let items = arm
        .list_values_with(&path, API_AUTHORIZATION, &[("$filter", &filter)])
        .await?;
    Ok(items.into_iter().find(|v| {
        let get = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default();
        get("/properties/principalId").eq_ignore_ascii_case(&spec.principal_id)
            && role_guid(get("/properties/roleDefinitionId")) == role_guid(&spec.role_definition_id)
            && get("/properties/scope").eq_ignore_ascii_case(&spec.scope)
    }))
}

/// Deletes the assignment with our name (whatever its principal: the name is ours).
///
/// # Errors
/// ARM errors, classified.
pub async fn delete(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &RoleAssignmentSpec,
) -> Result<Progress<Deleted>, StepError> {
    let _ = ctx;
    let id = spec.id();
    match arm.delete(&id, API_AUTHORIZATION).await {
        Ok(super::client::DeleteResponse::Gone) => Ok(Progress::Done(Deleted::Gone)),
        Ok(_) => Ok(Progress::Done(Deleted::Deleted)),
        Err(e) => Err(e.with_resource(&id).into()),
    }
}

pub use self::ensure as role_assignment_ensure;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_definition_ids() {
        assert_eq!(
            role_definition_id(
                "/subscriptions/s1/resourceGroups/rg",
                names::roles::CONTRIBUTOR
            ),
            "/subscriptions/s1/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c"
        );
        let spec = RoleAssignmentSpec {
            scope: "/subscriptions/s1/resourceGroups/rg".into(),
            name: names::role_assignment_name("abc", "disk", "/subscriptions/s1/resourceGroups/rg"),
            role_definition_id: role_definition_id("/subscriptions/s1", names::roles::DISK),
            principal_id: "p".into(),
        };
        assert!(spec.id().starts_with(
            "/subscriptions/s1/resourceGroups/rg/providers/Microsoft.Authorization/roleAssignments/"
        ));
        assert_eq!(
            spec.body()["properties"]["principalType"],
            "ServicePrincipal"
        );
    }
}
