//! Federated credentials and role assignments: the identity steps whose input depends on
//! an identity created earlier in the run (its resource id and `principalId`).

use super::arm::{
    ChildrenJournal, ResourceOutput, azure_retry, azure_undo_retry, delete_children,
    ensure_children, record,
};
use super::env::{AzureEnv, Clients, Owner};
use crate::azure::durable::Progress;
use crate::azure::models::{API_AUTHORIZATION, API_MSI};
use crate::azure::roles;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::json;
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
        match ensure_children(
            ctx,
            &arm,
            &input.owner,
            FIC_TYPE,
            API_MSI,
            children,
            input.persistent,
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
    /// The identity (output of its ensure node): `principalId`.
    pub identity: Ref<ResourceOutput>,
}

/// Output of a role assignment.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoleOutput {
    /// Assignment id.
    pub id: String,
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
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
        let identity = ctx.output(&input.identity)?;
        let principal = identity.prop("principalId").unwrap_or_default().to_string();
        let spec = role_spec(&input, &principal);
        // Untagged: journal the assignment before writing it, so the undo deletes it only
        // if this run created it (see `arm::delete_children`). A stale one with our name is
        // replaced by a write of this run, so it is journaled too.
        let id = spec.id();
        let mut journal = ChildrenJournal::of_action(ctx)?;
        if !journal.lists(&id) && !roles::exists_as_specified(&arm, &spec).await? {
            journal.record_creating(ctx, &id).await?;
        }
        match roles::ensure(ctx, &arm, &spec).await? {
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
        let id = role_spec(&input, "").id();
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

fn role_spec(input: &RoleInput, principal: &str) -> roles::RoleAssignmentSpec {
    roles::RoleAssignmentSpec {
        scope: input.scope.clone(),
        name: crate::azure::names::role_assignment_name(
            &input.owner.infra_id,
            &input.component,
            &input.scope,
        ),
        role_definition_id: roles::role_definition_id(&input.scope, &input.role),
        principal_id: principal.to_string(),
    }
}
