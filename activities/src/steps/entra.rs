//! Entra ID (Microsoft Graph) objects of the ARO HCP identity model: an application per
//! control-plane component, its service principal, and the certificate's public key on the
//! application; and their deletes (delete-cluster `--purge-persistent`). The ownership
//! rules, tags and shared helpers are in [`super::aro_identity`].

use super::arm::{azure_retry, azure_undo_retry};
use super::aro_identity::*;
use super::env::{AzureEnv, Clients, Owner};
use super::facts::Facts;
use crate::azure::durable::{self};
use crate::azure::error::{ErrorClass, ServiceError};
use crate::azure::graph::{Application, KeyCredential};
use base64::Engine as _;
use hcp_runtime::error::kind;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------
// graph.application.ensure

/// Input of `graph.application.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ApplicationInput {
    /// Azure target (tenant, cloud, credentials).
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The application's `uniqueName` (tenant-unique, immutable: the idempotency key).
    pub unique_name: String,
    /// Display name.
    pub display_name: String,
    /// Outlives the cluster.
    #[serde(default)]
    pub persistent: bool,
}

pub(super) fn app_ledger_id(unique_name: &str) -> String {
    format!("applications(uniqueName='{unique_name}')")
}

/// `graph.application.ensure`: an Entra application by `uniqueName` (`PATCH
/// /applications(uniqueName=…)` with `Prefer: create-if-missing`), tagged with our
/// ownership. An existing one is read first and never written: adopted when it carries
/// this cluster's tags, refused otherwise.
///
/// Undo: only an application this run created (create intent journaled, run tag on it):
/// deleted, then permanently deleted from the directory's deleted items so its
/// `uniqueName` is free again.
#[derive(Clone, Debug)]
pub struct EnsureApplication(pub Arc<Clients>);

impl Action for EnsureApplication {
    const NAME: &'static str = "graph.application.ensure";
    type Input = ApplicationInput;
    type Output = ApplicationOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: ApplicationInput,
    ) -> Result<Outcome<ApplicationOutput>, StepError> {
        let graph = self.0.graph(&input.azure).await?;
        let journaled = action_field::<bool>(ctx, CREATING)?.unwrap_or(false);
        let own = input.owner.ownership(ctx);
        let app = match graph
            .get_application_by_unique_name(&input.unique_name)
            .await?
        {
            Some(app) => {
                let tags = graph_tag_object(&app.tags);
                if !input.owner.owns(Some(&tags)) {
                    return Err(not_ours(
                        &format!("Entra application uniqueName={}", input.unique_name),
                        &input.owner,
                        &tags,
                    ));
                }
                app
            }
            None => {
                // Journal the intent, then create: the undo deletes only what it lists.
                if !journaled {
                    durable::save_checkpoint_field(ctx, CREATING, &true).await?;
                }
                let body = json!({
                    "displayName": input.display_name,
                    "tags": graph_tags(&input.owner, ctx),
                    "notes": format!(
                        "Created by hcp-workflow for hosted cluster {} (infra id {}); deleted with it unless persistent.",
                        input.owner.cluster, input.owner.infra_id
                    ),
                });
                graph
                    .upsert_application(&input.unique_name, &body)
                    .await?
                    .value
            }
        };
        output_of_app(ctx, &input, &own, app)
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: ApplicationInput,
        output: Option<ApplicationOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let ledger_id = app_ledger_id(&input.unique_name);
        let created = journaled_create(ctx)? || output.as_ref().is_some_and(|o| o.created);
        if !created {
            return Ok(UndoOutcome::Done);
        }
        let graph = self.0.graph(&input.azure).await?;
        let mut deleting: Option<String> = durable::checkpoint_field(ctx, DELETING)?;
        if deleting.is_none() {
            let Some(app) = graph
                .get_application_by_unique_name(&input.unique_name)
                .await?
            else {
                return Ok(UndoOutcome::Done);
            };
            if !input
                .owner
                .created_by(Some(&graph_tag_object(&app.tags)), ctx)
            {
                save_undo_ledger(
                    ctx,
                    entra_record(
                        APP_TYPE,
                        &ledger_id,
                        LedgerAction::Kept,
                        input.persistent,
                        Some("not tagged as created by this run: left in place".into()),
                    ),
                )
                .await?;
                return Ok(UndoOutcome::Done);
            }
            durable::save_checkpoint_field(ctx, DELETING, &app.id).await?;
            deleting = Some(app.id);
        }
        let Some(id) = deleting else {
            return Ok(UndoOutcome::Done);
        };
        graph.delete_application(&id).await?;
        purge_deleted(
            ctx,
            &self.0,
            &graph,
            &id,
            APP_TYPE,
            &ledger_id,
            input.persistent,
        )
        .await
    }
}

impl Facts for EnsureApplication {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

/// Permanently deletes a deleted directory object this undo deleted; a deleted item not
/// visible yet is looked for again a few times (Entra replicates).
pub(super) async fn purge_deleted(
    ctx: &StepContext,
    clients: &Clients,
    graph: &crate::azure::GraphClient,
    id: &str,
    resource_type: &str,
    ledger_id: &str,
    persistent: bool,
) -> Result<UndoOutcome, StepError> {
    if graph.purge_deleted_item(id).await? {
        save_undo_ledger(
            ctx,
            entra_record(
                resource_type,
                ledger_id,
                LedgerAction::Deleted,
                persistent,
                None,
            ),
        )
        .await?;
        return Ok(UndoOutcome::Done);
    }
    let looks = durable::checkpoint_field::<u32>(ctx, PURGE_LOOKS)?.unwrap_or(0) + 1;
    if looks < MAX_PURGE_LOOKS {
        durable::save_checkpoint_field(ctx, PURGE_LOOKS, &looks).await?;
        return Ok(ctx.undo_wait(
            clients.poll(),
            format!("waiting for Entra to list deleted {resource_type} {id} among deleted items"),
        ));
    }
    save_undo_ledger(
        ctx,
        entra_record(
            resource_type,
            ledger_id,
            LedgerAction::Deleted,
            persistent,
            Some("deleted; not found among deleted items to delete permanently (Entra removes it after 30 days)".into()),
        ),
    )
    .await?;
    Ok(UndoOutcome::Done)
}

pub(super) fn output_of_app(
    ctx: &StepContext,
    input: &ApplicationInput,
    own: &durable::Ownership,
    app: Application,
) -> Result<Outcome<ApplicationOutput>, StepError> {
    let journaled = action_field::<bool>(ctx, CREATING)?.unwrap_or(false);
    let created = journaled && own.is_this_run(Some(&graph_tag_object(&app.tags)));
    if app.id.is_empty() || app.app_id.is_empty() {
        return Err(StepError::retryable(
            kind::TRANSIENT,
            format!(
                "Microsoft Graph answered application uniqueName={} without its id or appId",
                input.unique_name
            ),
        ));
    }
    Ok(Outcome::Done(ApplicationOutput {
        ledger: vec![entra_record(
            APP_TYPE,
            &app_ledger_id(&input.unique_name),
            LedgerAction::created_or_adopted(created),
            input.persistent,
            (!created).then(|| {
                format!("appId {}; ", app.app_id)
                    + "existed before this run: its undo leaves it in place"
            }),
        )],
        id: app.id,
        app_id: app.app_id,
        unique_name: input.unique_name.clone(),
        created,
    }))
}

// ---------------------------------------------------------------------------------------
// graph.service-principal.ensure

/// Input of `graph.service-principal.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServicePrincipalInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The application (output of its ensure node).
    pub application: Ref<ApplicationOutput>,
    /// Outlives the cluster.
    #[serde(default)]
    pub persistent: bool,
}

/// Output of `graph.service-principal.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServicePrincipalOutput {
    /// Object id: the `principalId` of role assignments.
    pub id: String,
    /// The application's client id.
    pub app_id: String,
    /// This run created it.
    pub created: bool,
    /// Ledger.
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

pub(super) fn sp_ledger_id(app_id: &str) -> String {
    format!("servicePrincipals(appId='{app_id}')")
}

/// `graph.service-principal.ensure`: the application's service principal (`PATCH
/// /servicePrincipals(appId=…)` with `Prefer: create-if-missing`), tagged with our
/// ownership. One that exists is adopted (it belongs to our application). A 400 "does not
/// reference a valid application object" right after the application was created is
/// Entra replicating: retried.
///
/// Undo: only a service principal this run created (intent journaled, run tag on it).
#[derive(Clone, Debug)]
pub struct EnsureServicePrincipal(pub Arc<Clients>);

impl Action for EnsureServicePrincipal {
    const NAME: &'static str = "graph.service-principal.ensure";
    type Input = ServicePrincipalInput;
    type Output = ServicePrincipalOutput;

    fn retry_policy() -> RetryPolicy {
        // Replication of a new application can take minutes.
        azure_retry().with_max_attempts(20)
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: ServicePrincipalInput,
    ) -> Result<Outcome<ServicePrincipalOutput>, StepError> {
        let graph = self.0.graph(&input.azure).await?;
        let app = ctx.output(&input.application)?;
        let journaled = action_field::<bool>(ctx, CREATING)?.unwrap_or(false);
        // An application this run created has no service principal yet (unless an earlier
        // attempt made it, which the journal says): no read first.
        let existing = if app.created && !journaled {
            None
        } else {
            graph.get_service_principal_by_app_id(&app.app_id).await?
        };
        let sp = match existing {
            Some(sp) => sp,
            None => {
                if !journaled {
                    durable::save_checkpoint_field(ctx, CREATING, &true).await?;
                }
                let body = json!({"tags": graph_tags(&input.owner, ctx)});
                graph
                    .upsert_service_principal(&app.app_id, &body)
                    .await?
                    .value
            }
        };
        let journaled = action_field::<bool>(ctx, CREATING)?.unwrap_or(false);
        let created = journaled
            && input
                .owner
                .created_by(Some(&graph_tag_object(&sp.tags)), ctx);
        if sp.id.is_empty() {
            return Err(StepError::retryable(
                kind::TRANSIENT,
                format!(
                    "Microsoft Graph answered the service principal of appId {} without its id",
                    app.app_id
                ),
            ));
        }
        Ok(Outcome::Done(ServicePrincipalOutput {
            ledger: vec![entra_record(
                SP_TYPE,
                &sp_ledger_id(&app.app_id),
                LedgerAction::created_or_adopted(created),
                input.persistent,
                (!created).then(adopted_note).flatten(),
            )],
            id: sp.id,
            app_id: app.app_id,
            created,
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: ServicePrincipalInput,
        output: Option<ServicePrincipalOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let created = journaled_create(ctx)? || output.as_ref().is_some_and(|o| o.created);
        if !created {
            return Ok(UndoOutcome::Done);
        }
        let graph = self.0.graph(&input.azure).await?;
        let app_id = match (&output, ctx.output(&input.application)) {
            (Some(o), _) => o.app_id.clone(),
            (None, Ok(app)) => app.app_id,
            // No application: nothing of ours can exist under it.
            (None, Err(_)) => return Ok(UndoOutcome::Done),
        };
        let ledger_id = sp_ledger_id(&app_id);
        // Deleted already by an earlier attempt of this undo (its id journaled first):
        // only its deleted item is left to remove.
        if let Some(id) = durable::checkpoint_field::<String>(ctx, DELETING)? {
            graph.delete_service_principal(&id).await?;
            return purge_deleted(
                ctx,
                &self.0,
                &graph,
                &id,
                SP_TYPE,
                &ledger_id,
                input.persistent,
            )
            .await;
        }
        let Some(sp) = graph.get_service_principal_by_app_id(&app_id).await? else {
            return Ok(UndoOutcome::Done);
        };
        if !input
            .owner
            .created_by(Some(&graph_tag_object(&sp.tags)), ctx)
        {
            save_undo_ledger(
                ctx,
                entra_record(
                    SP_TYPE,
                    &ledger_id,
                    LedgerAction::Kept,
                    input.persistent,
                    Some("not tagged as created by this run: left in place".into()),
                ),
            )
            .await?;
            return Ok(UndoOutcome::Done);
        }
        durable::save_checkpoint_field(ctx, DELETING, &sp.id).await?;
        graph.delete_service_principal(&sp.id).await?;
        // A deleted service principal goes to the directory's deleted items too (restorable
        // for 30 days): removed from there as well, or the undo leaves it behind.
        purge_deleted(
            ctx,
            &self.0,
            &graph,
            &sp.id,
            SP_TYPE,
            &ledger_id,
            input.persistent,
        )
        .await
    }
}

impl Facts for EnsureServicePrincipal {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

// ---------------------------------------------------------------------------------------
// graph.application.bind-certificate

/// Input of `graph.application.bind-certificate`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BindCertificateInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The application.
    pub application: Ref<ApplicationOutput>,
    /// The certificate.
    pub certificate: Ref<CertificateOutput>,
}

/// Output of `graph.application.bind-certificate`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct BindCertificateOutput {
    /// The key credential's `keyId`.
    pub key_id: String,
    /// The certificate's thumbprint (base64url SHA-1).
    pub x5t: String,
    /// This run added the key.
    pub added: bool,
    /// Ledger.
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

/// The deterministic `keyId` of a certificate's key on an application (UUIDv5 of the
/// application's object id and the thumbprint).
pub fn key_id(app_object_id: &str, x5t: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("hcp-workflow:key-credential:{app_object_id}:{x5t}").as_bytes(),
    )
    .to_string()
}

/// The thumbprint bytes of a base64url `x5t` (padding optional).
pub fn thumbprint_bytes(x5t: &str) -> Option<Vec<u8>> {
    let t = x5t.trim_end_matches('=');
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t)
        .ok()
}

/// Whether a key credential is the certificate with thumbprint `thumb` or has key id
/// `key_id`. Its `customKeyIdentifier` is base64 of the thumbprint bytes (what we write),
/// or base64 of the thumbprint's hex text (what the portal and some tools write).
pub(super) fn is_same_key(k: &KeyCredential, thumb: &[u8], key_id: &str) -> bool {
    let hex: String = thumb.iter().map(|b| format!("{b:02x}")).collect();
    k.key_id
        .as_deref()
        .is_some_and(|id| id.eq_ignore_ascii_case(key_id))
        || k.custom_key_identifier.as_deref().is_some_and(|c| {
            base64::engine::general_purpose::STANDARD
                .decode(c)
                .ok()
                .is_some_and(|b| {
                    b == thumb
                        || std::str::from_utf8(&b).is_ok_and(|t| t.eq_ignore_ascii_case(&hex))
                })
        })
}

/// The key credential of a certificate.
pub fn key_credential(cert: &CertificateOutput, key_id: &str, thumb: &[u8]) -> KeyCredential {
    KeyCredential {
        kind: Some("AsymmetricX509Cert".into()),
        usage: Some("Verify".into()),
        key: Some(cert.cer.clone()),
        display_name: Some(cert.subject.clone()),
        custom_key_identifier: Some(base64::engine::general_purpose::STANDARD.encode(thumb)),
        start_date_time: Some(rfc3339(cert.not_before)),
        end_date_time: Some(rfc3339(cert.expires)),
        key_id: Some(key_id.to_string()),
        extra: Default::default(),
    }
}

/// `graph.application.bind-certificate`: the certificate's public part in the
/// application's `keyCredentials` (added when its thumbprint is absent; the other keys are
/// written back as they were).
///
/// Undo: removes only the key this run added (its `keyId` journaled before the write).
#[derive(Clone, Debug)]
pub struct BindCertificate(pub Arc<Clients>);

impl Action for BindCertificate {
    const NAME: &'static str = "graph.application.bind-certificate";
    type Input = BindCertificateInput;
    type Output = BindCertificateOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry().with_max_attempts(20)
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: BindCertificateInput,
    ) -> Result<Outcome<BindCertificateOutput>, StepError> {
        let graph = self.0.graph(&input.azure).await?;
        let app_ref = ctx.output(&input.application)?;
        let cert = ctx.output(&input.certificate)?;
        let thumb = thumbprint_bytes(&cert.x5t).ok_or_else(|| {
            StepError::permanent(
                kind::DEFINITION,
                format!("certificate {} has no valid thumbprint", cert.name),
            )
        })?;
        let kid = key_id(&app_ref.id, &cert.x5t);
        let what = format!("application {}", app_ref.unique_name);
        let app = graph
            .get_application(&app_ref.id)
            .await
            .map_err(|e| replicating(e, &what))?
            .ok_or_else(|| replicating(not_found(&what), &what))?;
        let journaled =
            action_field::<String>(ctx, ADDING_KEY)?.is_some_and(|k| k.eq_ignore_ascii_case(&kid));
        let ledger_id = format!("applications/{}/keyCredentials/{kid}", app_ref.id);
        let present = app
            .key_credentials
            .iter()
            .find(|k| is_same_key(k, &thumb, &kid));
        let (key_id, added) = match present {
            Some(k) => (k.key_id.clone().unwrap_or_else(|| kid.clone()), journaled),
            None => {
                durable::save_checkpoint_field(ctx, ADDING_KEY, &kid).await?;
                let mut keys = app.key_credentials.clone();
                keys.push(key_credential(&cert, &kid, &thumb));
                graph.set_key_credentials(&app.id, &keys).await?;
                (kid.clone(), true)
            }
        };
        Ok(Outcome::Done(BindCertificateOutput {
            ledger: vec![entra_record(
                KEY_TYPE,
                &ledger_id,
                LedgerAction::created_or_adopted(added),
                app_ref.ledger.iter().any(|r| r.persistent),
                (!added).then(adopted_note).flatten(),
            )],
            key_id,
            x5t: cert.x5t,
            added,
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: BindCertificateInput,
        output: Option<BindCertificateOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let added: Option<String> = forward_field(ctx, ADDING_KEY)?
            .or_else(|| output.filter(|o| o.added).map(|o| o.key_id));
        let Some(kid) = added else {
            return Ok(UndoOutcome::Done);
        };
        let Ok(app_ref) = ctx.output(&input.application) else {
            return Ok(UndoOutcome::Done);
        };
        let graph = self.0.graph(&input.azure).await?;
        let Some(app) = graph.get_application(&app_ref.id).await? else {
            return Ok(UndoOutcome::Done);
        };
        let keep: Vec<KeyCredential> = app
            .key_credentials
            .iter()
            .filter(|k| {
                !k.key_id
                    .as_deref()
                    .is_some_and(|id| id.eq_ignore_ascii_case(&kid))
            })
            .cloned()
            .collect();
        if keep.len() != app.key_credentials.len() {
            graph.set_key_credentials(&app.id, &keep).await?;
            save_undo_ledger(
                ctx,
                entra_record(
                    KEY_TYPE,
                    &format!("applications/{}/keyCredentials/{kid}", app_ref.id),
                    LedgerAction::Deleted,
                    false,
                    None,
                ),
            )
            .await?;
        }
        Ok(UndoOutcome::Done)
    }
}

impl Facts for BindCertificate {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

pub(super) fn not_found(what: &str) -> ServiceError {
    ServiceError {
        status: 404,
        class: ErrorClass::NotFound,
        ..ServiceError::local(
            crate::azure::Service::Graph,
            "Request_ResourceNotFound",
            format!("{what} was not found"),
            None,
        )
    }
}

// ---------------------------------------------------------------------------------------
// delete-cluster (`--purge-persistent`): delete what carries this cluster's tags.

/// Input of `graph.application.delete`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteApplicationInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The application's `uniqueName`.
    pub unique_name: String,
    /// Persistent (recorded as such).
    #[serde(default)]
    pub persistent: bool,
}

/// `graph.application.delete` (delete-cluster): deletes the application (Entra deletes its
/// service principal with it) and its deleted item, only when it carries this cluster's
/// tags; anything else is kept. Missing is done.
#[derive(Clone, Debug)]
pub struct DeleteApplication(pub Arc<Clients>);

impl Action for DeleteApplication {
    const NAME: &'static str = "graph.application.delete";
    const HAS_UNDO: bool = false;
    type Input = DeleteApplicationInput;
    type Output = super::arm::DeleteOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: DeleteApplicationInput,
    ) -> Result<Outcome<super::arm::DeleteOutput>, StepError> {
        let graph = self.0.graph(&input.azure).await?;
        let ledger_id = app_ledger_id(&input.unique_name);
        let rec = |action, note: Option<String>| {
            Outcome::Done(super::arm::DeleteOutput {
                ledger: vec![entra_record(
                    APP_TYPE,
                    &ledger_id,
                    action,
                    input.persistent,
                    note,
                )],
            })
        };
        let mut deleting: Option<String> = action_field(ctx, DELETING)?;
        if deleting.is_none() {
            let Some(app) = graph
                .get_application_by_unique_name(&input.unique_name)
                .await?
            else {
                return Ok(rec(LedgerAction::Gone, None));
            };
            if !input.owner.owns(Some(&graph_tag_object(&app.tags))) {
                return Ok(rec(
                    LedgerAction::Kept,
                    Some("not tagged as this cluster's: left in place".into()),
                ));
            }
            durable::save_checkpoint_field(ctx, DELETING, &app.id).await?;
            deleting = Some(app.id);
        }
        let Some(id) = deleting else {
            return Ok(rec(LedgerAction::Gone, None));
        };
        graph.delete_application(&id).await?;
        let purged = graph.purge_deleted_item(&id).await?;
        Ok(rec(
            LedgerAction::Deleted,
            (!purged).then(|| "not found among deleted items to delete permanently".into()),
        ))
    }
}

impl Facts for DeleteApplication {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}
