//! Federated credentials and role assignments: the identity steps whose input depends on
//! an identity created earlier in the run (its resource id and `principalId`).

use super::arm::{
    ChildrenJournal, ResourceOutput, azure_retry, azure_undo_retry, created_by_run,
    delete_children, ensure_children, record,
};
use super::env::{AzureEnv, Clients, Owner};
use super::facts::Facts;
use crate::azure::durable::Progress;
use crate::azure::models::{API_AUTHORIZATION, API_MSI};
use crate::azure::roles;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One federated credential: its name and the service account subject.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Subject {
    /// Credential name (`^[a-zA-Z0-9][a-zA-Z0-9-_]{2,119}$`).
    pub name: String,
    /// `system:serviceaccount:<ns>:<sa>`.
    pub subject: String,
}

/// Input of `azure.federated-credentials.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FederatedInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The identity (output of its ensure node).
    pub identity: Ref<ResourceOutput>,
    /// Issuer URL (deterministic, so identities may precede the OIDC stage).
    pub issuer: String,
    /// Credentials to write, one at a time.
    pub subjects: Vec<Subject>,
    /// Whether identities outlive the cluster.
    #[serde(default)]
    pub persistent: bool,
    /// repair-cluster: write again what exists but drifted (see `arm::ensure_children`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub converge: bool,
}

/// Output: the credentials' ids.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FederatedOutput {
    /// Credential ids.
    pub ids: Vec<String>,
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

const FIC_TYPE: &str =
    "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials";

/// `azure.federated-credentials.ensure`: all credentials of one identity, written
/// sequentially — Azure refuses concurrent writes on one identity (409
/// `ConcurrentFederatedIdentityCredentialsWritesForSingleManagedIdentity`, retried).
#[derive(Clone, Debug)]
pub struct EnsureFederatedCredentials(pub Arc<Clients>);

impl Action for EnsureFederatedCredentials {
    const NAME: &'static str = "azure.federated-credentials.ensure";
    type Input = FederatedInput;
    type Output = FederatedOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: FederatedInput,
    ) -> Result<Outcome<FederatedOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let identity = ctx.output(&input.identity)?;
        let children: Vec<(String, serde_json::Value)> = input
            .subjects
            .iter()
            .map(|s| {
                let body = json!({"properties": {
                    "issuer": input.issuer,
                    "subject": s.subject,
                    "audiences": ["openshift"],
                }});
                (fic_id(&identity.id, s), body)
            })
            .collect();
        let ids = children.iter().map(|(id, _)| id.clone()).collect();
        let parent_new = created_by_run(&identity);
        match ensure_children(
            ctx,
            &arm,
            &input.owner,
            FIC_TYPE,
            API_MSI,
            children,
            input.persistent,
            input.converge,
            parent_new,
        )
        .await?
        {
            Outcome::Wait { until, reason } => Ok(Outcome::Wait { until, reason }),
            Outcome::Done(ledger) => Ok(Outcome::Done(FederatedOutput { ids, ledger })),
        }
    }

    /// Deletes only the credentials this run created (journaled before each PUT, see
    /// `arm::delete_children`): after create → delete (credentials are persistent) →
    /// create, the second run finds the first run's credentials under the same names, and
    /// its unwind must leave them.
    async fn undo(
        &self,
        ctx: &StepContext,
        input: FederatedInput,
        output: Option<FederatedOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        // Without the identity's output only the journaled ids are known (they are enough:
        // nothing else may be deleted anyway).
        let ids: Vec<String> = match ctx.output(&input.identity) {
            Ok(identity) => input
                .subjects
                .iter()
                .map(|s| fic_id(&identity.id, s))
                .collect(),
            Err(_) => Vec::new(),
        };
        delete_children(
            ctx,
            &arm,
            FIC_TYPE,
            API_MSI,
            &ids,
            output.as_ref().map(|o| o.ledger.as_slice()),
            input.persistent,
        )
        .await
    }
}

impl Facts for EnsureFederatedCredentials {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/read",
        "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/write",
        "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/delete",
    ];
}

fn fic_id(identity: &str, s: &Subject) -> String {
    format!("{identity}/federatedIdentityCredentials/{}", s.name)
}

/// Input of `azure.role-assignment.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoleInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// Component (for the deterministic name).
    pub component: String,
    /// Scope (a resource group id).
    pub scope: String,
    /// Role definition GUID.
    pub role: String,
    /// The identity: the output of its ensure node (`principalId`), or a bring-your-own
    /// identity resolved by [`ResolveIdentities`].
    pub identity: IdentitySource,
    /// Take the scope from the public DNS zone lookup instead of `scope`: its resource
    /// group (the ingress identity's third scope, known only once the zone is found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_from: Option<Ref<super::dns::PublicZoneOutput>>,
    /// Seed of the assignment's deterministic name instead of the infra id: an
    /// assignment shared by every cluster of a persistent Key Vault is named by the vault,
    /// so the next cluster finds the same one (adopted, never deleted by its undo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_seed: Option<String>,
}

impl RoleInput {
    /// The scope: `scope`, or the public zone's group when `scope_from` is set.
    fn resolved_scope(&self, ctx: &StepContext) -> Result<String, StepError> {
        match &self.scope_from {
            None => Ok(self.scope.clone()),
            Some(r) => Ok(ctx.output(r)?.group()?.to_string()),
        }
    }
}

/// Where a role assignment's principal comes from.
///
/// Untagged: a created identity serializes as the plain `{"$ref": …}` journals of older
/// binaries hold. Each variant has a member no other has (`$ref`, `resolved`,
/// `service_principal`, `principal_id`, `principal_from`), so the shapes never overlap;
/// new variants go after the old ones.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IdentitySource {
    /// The identity this run created or adopted (output of its ensure node).
    Created(Ref<ResourceOutput>),
    /// A bring-your-own identity: `component` of the resolve node's output.
    Resolved {
        /// The resolve node.
        resolved: Ref<ResolvedIdentities>,
        /// Component (`disk`, `node-pool-mgmt`, …).
        component: String,
    },
    /// An Entra application's service principal (output of its
    /// `graph.service-principal.ensure` node; the ARO HCP control-plane components).
    ServicePrincipal {
        /// The service principal node.
        service_principal: Ref<super::entra::ServicePrincipalOutput>,
    },
    /// A fixed principal object id, known when the DAG is built (e.g. the management
    /// cluster's Key Vault Secrets Provider identity). Never created by this run.
    Principal {
        /// Principal (object) id.
        principal_id: String,
    },
    /// A principal object id read at run time from a read-only node's output (the caller,
    /// `azure.caller.principal`; the AKS Key Vault Secrets Provider identity,
    /// `azure.aks-cluster.read`). Never created by this run.
    Output {
        /// The node.
        principal_from: Ref<serde_json::Value>,
        /// RFC 6901 pointer to the object id in its output.
        pointer: String,
    },
}

impl IdentitySource {
    /// Whether this run created the identity ([`created_by_run`] (a new identity has no federated credentials and no role assignments yet)); a bring-your-own one never.
    ///
    /// # Errors
    /// The referenced output is missing.
    pub fn created_by_this_run(&self, ctx: &StepContext) -> Result<bool, StepError> {
        match self {
            IdentitySource::Created(r) => Ok(created_by_run(&ctx.output(r)?)),
            IdentitySource::ServicePrincipal { service_principal } => {
                Ok(ctx.output(service_principal)?.created)
            }
            IdentitySource::Resolved { .. }
            | IdentitySource::Principal { .. }
            | IdentitySource::Output { .. } => Ok(false),
        }
    }

    /// A principal that is none of the cluster's identities: the ledger names no object
    /// whose principal it is.
    pub fn is_external(&self) -> bool {
        matches!(
            self,
            IdentitySource::Principal { .. } | IdentitySource::Output { .. }
        )
    }

    /// The identity's principal (object) id.
    ///
    /// # Errors
    /// The referenced output is missing or lacks the component.
    pub fn principal(&self, ctx: &StepContext) -> Result<String, StepError> {
        match self {
            IdentitySource::Created(r) => Ok(ctx
                .output(r)?
                .prop("principalId")
                .unwrap_or_default()
                .to_string()),
            IdentitySource::Resolved {
                resolved,
                component,
            } => ctx
                .output(resolved)?
                .identities
                .get(component)
                .map(|i| i.principal_id.clone())
                .ok_or_else(|| {
                    StepError::permanent(
                        hcp_runtime::error::kind::DEFINITION,
                        format!("no resolved identity for component {component}"),
                    )
                }),
            IdentitySource::ServicePrincipal { service_principal } => {
                Ok(ctx.output(service_principal)?.id)
            }
            IdentitySource::Principal { principal_id } => Ok(principal_id.clone()),
            IdentitySource::Output {
                principal_from,
                pointer,
            } => ctx
                .output(principal_from)?
                .pointer(pointer)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    StepError::permanent(
                        hcp_runtime::error::kind::DEFINITION,
                        format!(
                            "output of {} has no principal id at {pointer}",
                            principal_from.node()
                        ),
                    )
                }),
        }
    }
}

impl From<Ref<ResourceOutput>> for IdentitySource {
    fn from(r: Ref<ResourceOutput>) -> Self {
        IdentitySource::Created(r)
    }
}

/// Output of a role assignment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoleOutput {
    /// Assignment id.
    pub id: String,
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
    /// The principal it was written for (absent in runs made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<AssignedPrincipal>,
}

/// The principal a role assignment was written for, as verify needs it: a principal that
/// is none of the cluster's identities (the caller, the management cluster's Key Vault
/// Secrets Provider identity) can only be checked against what the run resolved.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct AssignedPrincipal {
    /// Principal (object) id.
    pub id: String,
    /// Not one of the cluster's identities or service principals (read at run time, or
    /// fixed by the file): no ledger entry names it.
    pub external: bool,
}

const RA_TYPE: &str = "Microsoft.Authorization/roleAssignments";

/// `azure.role-assignment.ensure`: deterministic GUID name; `RoleAssignmentExists` is done;
/// one with our name but another principal is stale and replaced; `PrincipalNotFound`
/// (identity replication delay) is retried within the node's policy.
#[derive(Clone, Debug)]
pub struct EnsureRoleAssignment(pub Arc<Clients>);

impl Action for EnsureRoleAssignment {
    const NAME: &'static str = "azure.role-assignment.ensure";
    type Input = RoleInput;
    type Output = RoleOutput;

    fn retry_policy() -> RetryPolicy {
        // PrincipalNotFound can last minutes after an identity is created.
        azure_retry().with_max_attempts(20)
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: RoleInput,
    ) -> Result<Outcome<RoleOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let principal = input.identity.principal(ctx)?;
        let scope = input.resolved_scope(ctx)?;
        let spec = role_spec(&input, &scope, &principal);
        // Untagged: journal the assignment before writing it, so the undo deletes it only
        // if this run created it (see `arm::delete_children`). A stale one with our name is
        // replaced by a write of this run, so it is journaled too.
        let id = spec.id();
        let mut journal = ChildrenJournal::of_action(ctx)?;
        // An earlier attempt of this step knew the assignment missing (read so, or its
        // principal new), journaled its intent, and the ARM budget then held its PUT back,
        // nothing sent: write without reading again. Safe after a crash at any
        // point: that record is written only after a PUT that did not leave, and removed
        // durably before any PUT of it is sent (in `roles`), so an attempt after a
        // PUT that may have gone out finds no record and takes the read below. Trusted only
        // with the intent journaled (both branches below journal it before writing), so
        // the undo's view is exactly what it would be after a read.
        let recalled = if journal.lists(&id) {
            roles::recalled_missing(ctx, &spec)?
        } else {
            None
        };
        let progress = if let Some(at) = recalled {
            roles::ensure_recalled(ctx, &arm, &spec, at).await?
        } else if !journal.lists(&id) && input.identity.created_by_this_run(ctx)? {
            // A principal this run created has no assignment yet: journal, then write, with
            // no read first. One with our name for an older principal (a stale
            // one) refuses the write (409 RoleAssignmentUpdateNotPermitted): then the usual
            // read-and-replace.
            journal.record_creating(ctx, &id).await?;
            match roles::ensure_seen(ctx, &arm, &spec, None).await {
                Err(e) if e.code.as_deref() == Some("RoleAssignmentUpdateNotPermitted") => {
                    roles::ensure(ctx, &arm, &spec).await?
                }
                other => other?,
            }
        } else {
            let seen = roles::look(&arm, &spec).await?;
            if !journal.lists(&id) && !roles::is_as_specified(seen.as_ref(), &spec) {
                journal.record_creating(ctx, &id).await?;
            }
            // What this attempt just read is still what there is (the intent is journaled
            // in between, nothing else): one GET per assignment, not two.
            roles::ensure_seen(ctx, &arm, &spec, seen).await?
        };
        match progress {
            Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
            Progress::Done(e) => {
                // An identical assignment under another name (`RoleAssignmentExists`) is
                // someone else's: `e.id` is then not the journaled id.
                let created = journal.lists(&e.id);
                let note = (!created)
                    .then(|| "existed before this run: its undo leaves it in place".to_string());
                Ok(Outcome::Done(RoleOutput {
                    ledger: vec![record(
                        RA_TYPE,
                        &e.id,
                        LedgerAction::created_or_adopted(created),
                        false,
                        note,
                    )],
                    id: e.id,
                    principal: Some(AssignedPrincipal {
                        id: principal,
                        external: input.identity.is_external(),
                    }),
                }))
            }
        }
    }

    /// Deletes the assignment only if this run created it (journaled before its PUT): a
    /// re-run create that is unwound must not take the assignments of the cluster it
    /// found.
    async fn undo(
        &self,
        ctx: &StepContext,
        input: RoleInput,
        output: Option<RoleOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        // The id depends on the infra id, component and scope only, not on the principal.
        let id = role_spec(&input, &input.resolved_scope(ctx)?, "").id();
        delete_children(
            ctx,
            &arm,
            RA_TYPE,
            API_AUTHORIZATION,
            &[id],
            output.as_ref().map(|o| o.ledger.as_slice()),
            false,
        )
        .await
    }
}

impl Facts for EnsureRoleAssignment {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Authorization/roleAssignments/read",
        "Microsoft.Authorization/roleAssignments/write",
        "Microsoft.Authorization/roleAssignments/delete",
    ];
}

fn role_spec(input: &RoleInput, scope: &str, principal: &str) -> roles::RoleAssignmentSpec {
    roles::RoleAssignmentSpec {
        scope: scope.to_string(),
        name: crate::azure::names::role_assignment_name(
            input.name_seed.as_deref().unwrap_or(&input.owner.infra_id),
            &input.component,
            scope,
        ),
        role_definition_id: roles::role_definition_id(scope, &input.role),
        principal_id: principal.to_string(),
    }
}

// ---------------------------------------------------------------------------------------

/// One bring-your-own identity, resolved from its client id.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ResolvedIdentity {
    /// ARM id of the user-assigned identity.
    pub id: String,
    /// Client (application) id, as given.
    pub client_id: String,
    /// Principal (object) id: what role assignments name.
    pub principal_id: String,
}

/// Input of `azure.identities.resolve`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResolveInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Subscription whose user-assigned identities are listed.
    pub subscription: String,
    /// Component → client id (from the workload-identities file).
    pub client_ids: BTreeMap<String, String>,
}

/// Output: component → identity.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResolvedIdentities {
    /// Component → identity.
    pub identities: BTreeMap<String, ResolvedIdentity>,
    /// Ledger: each identity, read only (bring-your-own: never deleted).
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

/// `azure.identities.resolve`: the principal id of each bring-your-own workload identity,
/// found by listing the subscription's user-assigned identities (`properties.clientId` →
/// `properties.principalId`; no Graph call). Read only; a client id that matches no
/// identity fails for good, naming the component and the client id.
///
/// HyperShift resolves client ids with Microsoft Graph instead (openshift/hypershift
/// `cmd/infra/azure/rbac.go` `getObjectIDFromClientID`) and assigns the roles only with
/// `--assign-identity-roles` (`cmd/infra/azure/create.go` `handleIdentitiesAndRBAC`).
#[derive(Clone, Debug)]
pub struct ResolveIdentities(pub Arc<Clients>);

impl Action for ResolveIdentities {
    const NAME: &'static str = "azure.identities.resolve";
    const HAS_UNDO: bool = false;
    type Input = ResolveInput;
    type Output = ResolvedIdentities;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        _ctx: &StepContext,
        input: ResolveInput,
    ) -> Result<Outcome<ResolvedIdentities>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let path = format!(
            "/subscriptions/{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities",
            input.subscription
        );
        let listed = arm.list_values(&path, API_MSI).await?;
        let mut identities = BTreeMap::new();
        let mut ledger = Vec::new();
        for (component, client_id) in &input.client_ids {
            let Some(r) = find_by_client_id(&listed, client_id) else {
                return Err(StepError::permanent(
                    hcp_runtime::error::kind::VALIDATION,
                    format!(
                        "identities.existing.file: the {component} identity's client id {client_id} matches no user-assigned identity in subscription {}: \
                         fix the client id in the workload-identities file, or create the identity in that subscription \
                         (its role assignments need its principal id)",
                        input.subscription
                    ),
                )
                .with_code("IdentityNotFound"));
            };
            ledger.push(record(
                "Microsoft.ManagedIdentity/userAssignedIdentities",
                &r.id,
                LedgerAction::Adopted,
                true,
                Some("bring-your-own identity: read only, never deleted".into()),
            ));
            identities.insert(component.clone(), r);
        }
        Ok(Outcome::Done(ResolvedIdentities { identities, ledger }))
    }
}

impl Facts for ResolveIdentities {
    const ARM_ACTIONS: &'static [&'static str] =
        &["Microsoft.ManagedIdentity/userAssignedIdentities/read"];
}

/// The user-assigned identity of `client_id` among `listed` (the subscription's identities,
/// `GET /subscriptions/{s}/providers/Microsoft.ManagedIdentity/userAssignedIdentities`),
/// matched on `properties.clientId`. Shared by `azure.identities.resolve` and preflight.
pub fn find_by_client_id(
    listed: &[serde_json::Value],
    client_id: &str,
) -> Option<ResolvedIdentity> {
    let v = listed.iter().find(|v| {
        v.pointer("/properties/clientId")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|c| c.eq_ignore_ascii_case(client_id))
    })?;
    Some(ResolvedIdentity {
        id: v.get("id")?.as_str()?.to_string(),
        client_id: client_id.to_string(),
        principal_id: v.pointer("/properties/principalId")?.as_str()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::IdentitySource;
    use serde_json::json;

    #[test]
    fn identity_sources_keep_their_journaled_shapes() {
        // Journaled by older binaries: still parse, as the same variants.
        let created: IdentitySource =
            serde_json::from_value(json!({"$ref": "identities.disk"})).expect("created");
        assert!(matches!(&created, IdentitySource::Created(r) if r.node() == "identities.disk"));
        let resolved: IdentitySource = serde_json::from_value(
            json!({"resolved": {"$ref": "identities.resolve"}, "component": "disk"}),
        )
        .expect("resolved");
        assert!(
            matches!(&resolved, IdentitySource::Resolved { resolved, component } if resolved.node() == "identities.resolve" && component == "disk")
        );
        // …and serialize as they did.
        assert_eq!(
            serde_json::to_value(&created).ok(),
            Some(json!({"$ref": "identities.disk"}))
        );
        assert_eq!(
            serde_json::to_value(&resolved).ok(),
            Some(json!({"resolved": {"$ref": "identities.resolve"}, "component": "disk"}))
        );
        // The new shapes round-trip and are not mistaken for the old ones.
        let sp = json!({"service_principal": {"$ref": "aro.sp.cpo"}});
        let parsed: IdentitySource = serde_json::from_value(sp.clone()).expect("sp");
        assert!(
            matches!(&parsed, IdentitySource::ServicePrincipal { service_principal } if service_principal.node() == "aro.sp.cpo")
        );
        assert_eq!(serde_json::to_value(&parsed).ok(), Some(sp));
        let fixed = json!({"principal_id": "00000000-0000-0000-0000-000000000001"});
        let parsed: IdentitySource = serde_json::from_value(fixed.clone()).expect("fixed");
        assert!(
            matches!(&parsed, IdentitySource::Principal { principal_id } if principal_id.ends_with('1'))
        );
        assert_eq!(serde_json::to_value(&parsed).ok(), Some(fixed));
        let from = json!({"principal_from": {"$ref": "aks.read"}, "pointer": "/key_vault_secrets_provider/object_id"});
        let parsed: IdentitySource = serde_json::from_value(from.clone()).expect("from output");
        assert!(
            matches!(&parsed, IdentitySource::Output { principal_from, pointer } if principal_from.node() == "aks.read" && pointer.starts_with("/key_vault"))
        );
        assert_eq!(serde_json::to_value(&parsed).ok(), Some(from));
        assert!(serde_json::from_value::<IdentitySource>(json!({"nothing": 1})).is_err());
    }
}
