//! The ARO HCP identity model (issue 28): control-plane components as Entra applications
//! with certificates created in Key Vault, and the credentials secrets HyperShift mounts.
//!
//! What HyperShift's dev path does by hand (openshift/hypershift
//! `contrib/managed-azure/setup_MIv3_kv.sh`: an RBAC vault, one `az ad sp create-for-rbac
//! --create-cert --keyvault` per component, then a `<cert>-json` secret holding
//! msi-dataplane's `UserAssignedIdentityCredentials`), as saga steps:
//!
//! - `azure.key-vault.ensure` ([`EnsureKeyVault`]): the vault (RBAC authorization,
//!   standard SKU, our ownership tags), or a bring-your-own vault checked read only;
//! - `graph.application.ensure` ([`EnsureApplication`]): an application by `uniqueName`;
//! - `graph.service-principal.ensure` ([`EnsureServicePrincipal`]): its service principal
//!   (what role assignments name, see [`super::identity::IdentitySource::ServicePrincipal`]);
//! - `key-vault.certificate.ensure` ([`EnsureCertificate`]): a self-signed certificate
//!   created *in* Key Vault (its private key never leaves the vault except through the
//!   credentials secret below);
//! - `graph.application.bind-certificate` ([`BindCertificate`]): the certificate's public
//!   part in the application's `keyCredentials`;
//! - `key-vault.credentials-secret.ensure` ([`EnsureCredentialsSecret`]): the
//!   `UserAssignedIdentityCredentials` JSON secret the SecretProviderClass mounts;
//! - delete-cluster (`--purge-persistent`): `graph.application.delete`,
//!   `key-vault.certificate.delete`, `key-vault.secret.delete`, `azure.key-vault.delete`
//!   delete (and purge) only what carries this cluster's tags.
//!
//! Role assignments reuse `azure.role-assignment.ensure` with
//! [`super::identity::IdentitySource::ServicePrincipal`] (a control-plane component) or
//! `IdentitySource::Output` / `IdentitySource::Principal` (the caller, the AKS Key Vault
//! Secrets Provider identity).
//!
//! # Ownership and undo
//! Every ensure is idempotent (a repeat after success writes nothing) and its undo deletes
//! only what *this run* created. The proof is twofold, as for ARM's untagged children
//! (`arm::ChildrenJournal`): the step journals its intent in its checkpoint *before* the
//! create (read back by the undo through `StepContext::action_checkpoint`), and what it
//! creates carries the run tag `hcp-workflow.io/run` (Graph `tags` as `key=value`
//! strings, Key Vault object tags, ARM tags). "Found it already" means adopted — only
//! when it carries this cluster's tags (anything else is refused, `NotOurs`) — and an
//! adopted object is never deleted by an undo. A delete intent is journaled in the undo's
//! own checkpoint before each delete, so a purge after a crash purges only what this undo
//! deleted.
//!
//! `persistent` marks the ledger lines (persistent objects outlive a delete-cluster); it
//! does not change the undo: the undo of a failed create still removes what the run
//! created, as for the managed identities.
//!
//! # Secrets
//! The certificate's private key is read (as its backing secret's PEM) only by
//! [`EnsureCredentialsSecret`], straight into a [`Secret`], turned into the credentials
//! JSON (another [`Secret`]) and written to the vault. Inputs, outputs, checkpoints, logs
//! and errors hold names, versions, thumbprints and public certificates only.

use super::arm::{UNDO_LEDGER_KEY, azure_retry, azure_undo_retry, record};
use super::env::{AzureEnv, Clients, Owner};
use super::facts::Facts;
use crate::azure::durable::{self, Adopt, Deleted, EnsureSpec, OPERATIONS_KEY, Progress};
use crate::azure::error::{ErrorClass, ServiceError};
use crate::azure::graph::{Application, KeyCredential};
use crate::azure::keyvault::{self, API_KEY_VAULT, Attributes, Certificate, VAULT_TYPE};
use crate::azure::names;
use crate::secret::Secret;
use base64::Engine as _;
use hcp_runtime::error::kind;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Tag on a credentials secret: the certificate version it was built from (a repeat with
/// the same version writes nothing).
pub const TAG_CERT_VERSION: &str = "hcp-workflow.io/certificate-version";
/// Tag on a credentials secret: when to renew (RFC 3339, as msi-dataplane writes it).
pub const TAG_RENEW_AFTER: &str = "renew_after";
/// Tag on a credentials secret: after when it cannot be renewed (RFC 3339).
pub const TAG_CANNOT_RENEW_AFTER: &str = "cannot_renew_after";
/// Content type of a certificate's backing secret we create and accept.
pub const PEM_CONTENT_TYPE: &str = "application/x-pem-file";

/// Ledger kind of Entra (Graph) objects.
pub const KIND_ENTRA: &str = "entra";
/// Ledger kind of Key Vault data-plane objects (certificates, secrets).
pub const KIND_KEY_VAULT: &str = "key-vault";

const APP_TYPE: &str = "microsoft.graph.application";
const SP_TYPE: &str = "microsoft.graph.servicePrincipal";
const KEY_TYPE: &str = "microsoft.graph.keyCredential";
const CERT_TYPE: &str = "Microsoft.KeyVault/vaults/certificates";
const SECRET_TYPE: &str = "Microsoft.KeyVault/vaults/secrets";

/// Action checkpoint member: the create intent (`true` once journaled).
const CREATING: &str = "creating";
/// Action checkpoint member: a certificate creation was sent and may be pending.
const PENDING: &str = "pending";
/// Action checkpoint member: an existing object of ours is being given a new version
/// (a renewed certificate, a rebuilt credentials secret): never deleted by the undo.
const UPDATING: &str = "updating";
/// Action checkpoint member: the key id [`BindCertificate`] is adding.
const ADDING_KEY: &str = "adding-key";
/// Undo checkpoint member: the delete intent (the object's id or name).
const DELETING: &str = "deleting";
/// Undo checkpoint member: purges of a deleted item that found nothing yet.
const PURGE_LOOKS: &str = "purge-looks";
/// How many times an undo looks for a just-deleted item to purge before giving up on it.
const MAX_PURGE_LOOKS: u32 = 5;

// ---------------------------------------------------------------------------------------
// Shared helpers.

fn entra_record(
    resource_type: &str,
    id: &str,
    action: LedgerAction,
    persistent: bool,
    note: Option<String>,
) -> LedgerRecord {
    LedgerRecord {
        kind: KIND_ENTRA.into(),
        ..record(resource_type, id, action, persistent, note)
    }
}

fn vault_record(
    resource_type: &str,
    id: &str,
    action: LedgerAction,
    persistent: bool,
    note: Option<String>,
) -> LedgerRecord {
    LedgerRecord {
        kind: KIND_KEY_VAULT.into(),
        ..record(resource_type, id, action, persistent, note)
    }
}

fn adopted_note() -> Option<String> {
    Some("existed before this run: its undo leaves it in place".into())
}

/// Graph tags of our ownership: `hcp-workflow.io/cluster=<c>`, `…/infra-id=<i>`,
/// `…/run=<r>`.
pub fn graph_tags(owner: &Owner, ctx: &StepContext) -> Vec<String> {
    owner
        .tags(ctx)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// Graph `key=value` tags as a JSON object (what [`Owner::owns`] reads); other tags are
/// ignored.
pub fn graph_tag_object(tags: &[String]) -> Value {
    Value::Object(
        tags.iter()
            .filter_map(|t| t.split_once('='))
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    )
}

fn map_tags(tags: &Option<BTreeMap<String, String>>) -> Value {
    serde_json::to_value(tags.clone().unwrap_or_default()).unwrap_or(Value::Null)
}

fn not_ours(what: &str, owner: &Owner, seen: &Value) -> StepError {
    StepError::permanent(
        "ownership",
        format!(
            "refusing to adopt {what}: it exists but is not tagged as cluster {}'s (infra id {}; tags seen: {seen}) — remove it or pick another name, then run it again",
            owner.cluster, owner.infra_id
        ),
    )
    .with_code("NotOurs")
}

/// One member of this action's checkpoint.
fn action_field<T: DeserializeOwned>(ctx: &StepContext, key: &str) -> Result<Option<T>, StepError> {
    durable::checkpoint_field(ctx, key)
}

/// In an undo: one member of the forward action's last checkpoint.
fn forward_field<T: DeserializeOwned>(
    ctx: &StepContext,
    key: &str,
) -> Result<Option<T>, StepError> {
    let Some(Value::Object(mut cp)) = ctx.action_checkpoint::<Value>()? else {
        return Ok(None);
    };
    match cp.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
            StepError::permanent(
                kind::DEFINITION,
                format!("action checkpoint member `{key}`: {e}"),
            )
        }),
    }
}

/// Whether the forward action journaled its create intent.
fn journaled_create(ctx: &StepContext) -> Result<bool, StepError> {
    Ok(forward_field::<bool>(ctx, CREATING)?.unwrap_or(false))
}

/// Saves the undo's ledger (read by `hcp_runtime::ledger` instead of deriving it).
async fn save_undo_ledger(ctx: &StepContext, rec: LedgerRecord) -> Result<(), StepError> {
    durable::save_checkpoint_field(ctx, UNDO_LEDGER_KEY, &vec![rec]).await
}

/// A read of an object another step of this run just created or read answered 404:
/// Entra replicates (or an operator deleted it); retry within the step's policy.
fn replicating(e: ServiceError, what: &str) -> StepError {
    if e.class == ErrorClass::NotFound {
        StepError::retryable(
            kind::CONFLICT,
            format!(
                "{what} is not visible yet (Entra replicates new objects within seconds to minutes; or it was deleted outside hcp-workflow): {e}"
            ),
        )
        .with_code("NotReplicatedYet")
    } else {
        e.into()
    }
}

fn now_secs(ctx: &StepContext) -> i64 {
    ctx.now().0.div_euclid(1000)
}

/// RFC 3339 in UTC, whole seconds (`2025-01-15T10:00:00Z`), as msi-dataplane writes.
pub fn rfc3339(secs: i64) -> String {
    let s = hcp_runtime::Timestamp(secs.saturating_mul(1000)).to_rfc3339();
    match s.strip_suffix(".000Z") {
        Some(base) => format!("{base}Z"),
        None => s,
    }
}

/// When a credential valid from `not_before` to `not_after` (Unix seconds) should be
/// renewed: two thirds into its validity.
pub fn renew_after(not_before: i64, not_after: i64) -> i64 {
    not_before + (not_after - not_before).max(0) * 2 / 3
}

// ---------------------------------------------------------------------------------------
// azure.key-vault.ensure

/// Input of `azure.key-vault.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyVaultInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// ARM id of the vault (`/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.KeyVault/vaults/{name}`).
    pub id: String,
    /// Region.
    pub location: String,
    /// Entra tenant of the vault (default: the run's tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Bring-your-own (named by the user): must exist with RBAC authorization; only read,
    /// never created or deleted.
    #[serde(default)]
    pub byo: bool,
    /// Outlives the cluster.
    #[serde(default)]
    pub persistent: bool,
    /// Shared by several clusters (a persistent vault): an existing vault is adopted
    /// read only whoever made it (it must use RBAC authorization); a missing one is
    /// created with our tags. Each cluster's certificates and secrets in it are its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// Output of `azure.key-vault.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct KeyVaultOutput {
    /// ARM id.
    pub id: String,
    /// Vault name (the data-plane host's first label).
    pub name: String,
    /// `https://{name}.{suffix}/`.
    pub uri: String,
    /// This run created it.
    pub created: bool,
    /// Ledger.
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

/// `azure.key-vault.ensure`: the vault holding the control-plane certificates and
/// credentials secrets.
///
/// Ours: created with RBAC authorization, the standard SKU and our ownership tags, or
/// adopted when it carries this cluster's tags (anything else is refused, unless the
/// vault is `shared`: then it is used read only, whoever made it). A missing name
/// is checked with `checkNameAvailability` first (vault names are global; a taken name
/// fails for good, saying why). Bring-your-own: read only; it must exist and use RBAC
/// authorization.
///
/// Undo: only a vault this run created (its run tag), and only when it holds no
/// certificates or secrets other than this run's — then deleted and its soft-deleted copy
/// purged, so the name can be used again. A vault whose contents cannot be listed (the
/// caller's data role already gone) is kept, and the ledger says why.
#[derive(Clone, Debug)]
pub struct EnsureKeyVault(pub Arc<Clients>);

fn vault_name(id: &str) -> Result<String, StepError> {
    let name = names::name_of(id).to_string();
    keyvault::validate_vault_name(&name)
        .map_err(|m| StepError::permanent(kind::VALIDATION, m).with_code("InvalidVaultName"))?;
    Ok(name)
}

impl Action for EnsureKeyVault {
    const NAME: &'static str = "azure.key-vault.ensure";
    type Input = KeyVaultInput;
    type Output = KeyVaultOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: KeyVaultInput,
    ) -> Result<Outcome<KeyVaultOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let name = vault_name(&input.id)?;
        let id = input.id.as_str();
        if input.byo {
            let Some(body) = arm
                .get_value(id, API_KEY_VAULT)
                .await
                .map_err(|e| StepError::from(e.with_resource(id)))?
            else {
                return Err(StepError::permanent(
                    kind::VALIDATION,
                    format!(
                        "the Key Vault `{id}` named in the cluster configuration does not exist (or this identity cannot read it) — create it with RBAC authorization or fix the name, then run it again"
                    ),
                )
                .with_code("ResourceNotFound"));
            };
            if !keyvault::rbac_enabled(&body) {
                return Err(rbac_off(id));
            }
            return Ok(Outcome::Done(KeyVaultOutput {
                id: id.to_string(),
                uri: vault_uri(&body, &input.azure, &name),
                name,
                created: false,
                ledger: vec![record(
                    VAULT_TYPE,
                    id,
                    LedgerAction::Adopted,
                    input.persistent,
                    Some("bring-your-own: read only, never deleted".into()),
                )],
            }));
        }
        let tenant = input
            .tenant_id
            .clone()
            .unwrap_or_else(|| input.azure.tenant_id.clone());
        let spec = EnsureSpec {
            id: id.to_string(),
            api: API_KEY_VAULT.to_string(),
            body: keyvault::vault_body(&input.location, &tenant),
            adopt: Adopt::OursOnly,
            tagged: true,
            ownership: input.owner.ownership(ctx),
            read_query: &[],
        };
        // A write journaled by an earlier attempt is polled by `durable::ensure`; otherwise
        // look first, and check a missing name before the PUT.
        let writing = durable::checkpoint_field::<BTreeMap<String, Value>>(ctx, OPERATIONS_KEY)?
            .is_some_and(|ops| ops.contains_key(&id.to_ascii_lowercase()));
        let progress = if writing {
            durable::ensure(ctx, &arm, &spec).await?
        } else {
            let seen = arm
                .get_value(id, API_KEY_VAULT)
                .await
                .map_err(|e| StepError::from(e.with_resource(id)))?;
            if input.shared
                && let Some(body) = &seen
                && !input.owner.owns(body.get("tags"))
            {
                // Another cluster's (or the user's) shared vault: used, never written.
                if !keyvault::rbac_enabled(body) {
                    return Err(rbac_off(id));
                }
                return Ok(Outcome::Done(KeyVaultOutput {
                    id: id.to_string(),
                    uri: vault_uri(body, &input.azure, &name),
                    name,
                    created: false,
                    ledger: vec![record(
                        VAULT_TYPE,
                        id,
                        LedgerAction::Adopted,
                        input.persistent,
                        Some("shared vault made by another cluster or the user: read only, never deleted by this cluster".into()),
                    )],
                }));
            }
            if seen.is_none() {
                let sub = names::subscription_of(id).unwrap_or_default();
                let avail = keyvault::check_name_availability(&arm, sub, &name)
                    .await
                    .map_err(|e| StepError::from(e.with_resource(id)))?;
                if !avail.name_available {
                    return Err(StepError::permanent(
                        kind::VALIDATION,
                        format!(
                            "the Key Vault name `{name}` cannot be used ({}: {}) — vault names are global and a deleted vault keeps its name until purged; pick another name or purge it, then run it again",
                            avail.reason.as_deref().unwrap_or("unavailable"),
                            avail.message.as_deref().unwrap_or("no reason given"),
                        ),
                    )
                    .with_code("VaultNameUnavailable"));
                }
            }
            durable::ensure_seen(ctx, &arm, &spec, Some(seen)).await?
        };
        match progress {
            Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
            Progress::Done(e) => {
                if !keyvault::rbac_enabled(&e.body) {
                    return Err(rbac_off(id));
                }
                let created = input.owner.created_by(e.body.get("tags"), ctx);
                Ok(Outcome::Done(KeyVaultOutput {
                    id: e.id.clone(),
                    uri: vault_uri(&e.body, &input.azure, &name),
                    name,
                    created,
                    ledger: vec![record(
                        VAULT_TYPE,
                        &e.id,
                        LedgerAction::created_or_adopted(created),
                        input.persistent,
                        (!created).then(|| {
                            "ours from an earlier run: its undo leaves it in place".into()
                        }),
                    )],
                }))
            }
        }
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: KeyVaultInput,
        _output: Option<KeyVaultOutput>,
    ) -> Result<UndoOutcome, StepError> {
        if input.byo {
            return Ok(UndoOutcome::Done);
        }
        let arm = self.0.arm(&input.azure).await?;
        let name = vault_name(&input.id)?;
        let id = input.id.as_str();
        let sub = names::subscription_of(id).unwrap_or_default().to_string();
        let keep = |note: String| {
            record(
                VAULT_TYPE,
                id,
                LedgerAction::Kept,
                input.persistent,
                Some(note),
            )
        };
        let deleting = durable::checkpoint_field::<bool>(ctx, DELETING)?.unwrap_or(false);
        if !deleting {
            let Some(body) = arm
                .get_value(id, API_KEY_VAULT)
                .await
                .map_err(|e| StepError::from(e.with_resource(id)))?
            else {
                return Ok(UndoOutcome::Done);
            };
            if !input.owner.created_by(body.get("tags"), ctx) {
                save_undo_ledger(ctx, keep("existed before this run: left in place".into()))
                    .await?;
                return Ok(UndoOutcome::Done);
            }
            if let Some(why) = foreign_contents(&self.0, &input, &name, ctx, true).await? {
                tracing::info!(node = ctx.node(), %id, %why, "undo keeps the Key Vault");
                save_undo_ledger(ctx, keep(why)).await?;
                return Ok(UndoOutcome::Done);
            }
            durable::save_checkpoint_field(ctx, DELETING, &true).await?;
        }
        match durable::delete_created(ctx, &arm, id, API_KEY_VAULT, &input.owner.ownership(ctx))
            .await?
        {
            Progress::Pending { after, reason } => return Ok(ctx.undo_wait(after, reason)),
            Progress::Done(Deleted::KeptNotOurs) => {
                save_undo_ledger(ctx, keep("not created by this run: left in place".into()))
                    .await?;
                return Ok(UndoOutcome::Done);
            }
            Progress::Done(Deleted::Deleted | Deleted::Gone) => {}
        }
        // Deleted (by this undo: the intent was journaled): purge its soft-deleted copy so
        // the global name is free again.
        let purged = keyvault::purge_deleted_vault(&arm, &sub, &input.location, &name)
            .await
            .map_err(|e| StepError::from(e.with_resource(id)))?;
        let note = (!purged).then(|| "no soft-deleted copy was found to purge".to_string());
        save_undo_ledger(
            ctx,
            record(
                VAULT_TYPE,
                id,
                LedgerAction::Deleted,
                input.persistent,
                note,
            ),
        )
        .await?;
        Ok(UndoOutcome::Done)
    }
}

impl Facts for EnsureKeyVault {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.KeyVault/vaults/read",
        "Microsoft.KeyVault/vaults/write",
        "Microsoft.KeyVault/vaults/delete",
        "Microsoft.KeyVault/checkNameAvailability/read",
        "Microsoft.KeyVault/locations/deletedVaults/read",
        "Microsoft.KeyVault/locations/deletedVaults/purge/action",
    ];
}

/// `properties.vaultUri`, else `https://{name}.{suffix}/`.
fn vault_uri(body: &Value, azure: &AzureEnv, name: &str) -> String {
    body.pointer("/properties/vaultUri")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            azure
                .cloud
                .key_vault_host(name)
                .map(|h| format!("https://{h}/"))
        })
        .unwrap_or_default()
}

fn rbac_off(id: &str) -> StepError {
    StepError::permanent(
        kind::VALIDATION,
        format!(
            "the Key Vault `{id}` does not use RBAC authorization (it uses access policies): HyperShift's SecretProviderClasses and hcp-workflow's role assignments need `enableRbacAuthorization` — enable it (az keyvault update --enable-rbac-authorization true) or name another vault, then run it again"
        ),
    )
    .with_code("VaultNotRbac")
}

/// Why a vault this run created must be kept: it holds certificates or secrets not
/// tagged with this run, or its contents cannot be listed. `None`: it may be deleted.
///
/// `this_run`: "ours" means tagged with this run (an undo); otherwise with this cluster
/// (delete-cluster).
async fn foreign_contents(
    clients: &Clients,
    input: &KeyVaultInput,
    name: &str,
    ctx: &StepContext,
    this_run: bool,
) -> Result<Option<String>, StepError> {
    let kv = match clients.key_vault(&input.azure).await {
        Ok(kv) => kv,
        Err(e) => {
            return Ok(Some(format!(
                "could not reach its data plane to check it is empty ({}): left in place",
                e.message
            )));
        }
    };
    let own = input.owner.ownership(ctx);
    let ours = |tags: &Option<BTreeMap<String, String>>| {
        let t = map_tags(tags);
        if this_run {
            own.is_this_run(Some(&t))
        } else {
            own.is_ours(Some(&t))
        }
    };
    let unlisted = |e: ServiceError| -> Result<Option<String>, StepError> {
        if e.class.is_retryable() && !e.is("ForbiddenByRbac") {
            return Err(e.into());
        }
        Ok(Some(format!(
            "could not list its certificates and secrets to check it is empty ({} {}): left in place",
            e.code,
            e.inner_code.as_deref().unwrap_or_default()
        )))
    };
    let certs = match kv.list_certificates(name).await {
        Ok(c) => c,
        Err(e) => return unlisted(e),
    };
    let secrets = match kv.list_secrets(name).await {
        Ok(s) => s,
        Err(e) => return unlisted(e),
    };
    let foreign_certs: Vec<String> = certs
        .iter()
        .filter(|c| !ours(&c.tags))
        .map(|c| c.name().unwrap_or("?").to_string())
        .collect();
    // A certificate's backing secret (`managed`) belongs to the certificate.
    let foreign_secrets: Vec<String> = secrets
        .iter()
        .filter(|s| s.managed != Some(true) && !ours(&s.tags))
        .map(|s| s.name().unwrap_or("?").to_string())
        .collect();
    if foreign_certs.is_empty() && foreign_secrets.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "holds certificates [{}] and secrets [{}] that are not {}: left in place",
        foreign_certs.join(", "),
        foreign_secrets.join(", "),
        if this_run {
            "this run's"
        } else {
            "this cluster's"
        }
    )))
}

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

/// Output of `graph.application.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ApplicationOutput {
    /// Object id.
    pub id: String,
    /// Application (client) id: the `clientID` HyperShift is given.
    pub app_id: String,
    /// `uniqueName`.
    pub unique_name: String,
    /// This run created it.
    pub created: bool,
    /// Ledger.
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

fn app_ledger_id(unique_name: &str) -> String {
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
async fn purge_deleted(
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

fn output_of_app(
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

fn sp_ledger_id(app_id: &str) -> String {
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
// key-vault.certificate.ensure

fn twelve() -> u32 {
    12
}

/// Input of `key-vault.certificate.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CertificateInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The vault (output of its ensure node).
    pub vault: Ref<KeyVaultOutput>,
    /// Certificate name (1–127 letters, digits, hyphens).
    pub name: String,
    /// X.509 subject, e.g. `CN=cloud-provider-demo`.
    pub subject: String,
    /// Validity in months (Key Vault: 1–1200).
    #[serde(default = "twelve")]
    pub validity_months: u32,
    /// Outlives the cluster.
    #[serde(default)]
    pub persistent: bool,
}

/// Output of `key-vault.certificate.ensure`: public parts only.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CertificateOutput {
    /// Vault name.
    pub vault: String,
    /// Certificate name.
    pub name: String,
    /// Certificate id with its version.
    pub id: String,
    /// Version.
    pub version: String,
    /// Base64url SHA-1 thumbprint.
    pub x5t: String,
    /// Base64 DER of the certificate (public).
    pub cer: String,
    /// Subject, as asked.
    pub subject: String,
    /// Not before (Unix seconds).
    pub not_before: i64,
    /// Expires (Unix seconds).
    pub expires: i64,
    /// This run created the certificate.
    pub created: bool,
    /// Ledger.
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

/// The `create` body: self-signed, RSA 2048 exportable, the secret as PEM.
pub fn certificate_body(
    subject: &str,
    validity_months: u32,
    tags: &BTreeMap<String, String>,
) -> Value {
    json!({
        "policy": {
            "key_props": {"exportable": true, "kty": "RSA", "key_size": 2048, "reuse_key": false},
            "secret_props": {"contentType": PEM_CONTENT_TYPE},
            "x509_props": {"subject": subject, "validity_months": validity_months},
            "issuer": {"name": "Self"},
        },
        "attributes": {"enabled": true},
        "tags": tags,
    })
}

/// Whether an existing certificate is good to reuse at `now`: enabled, complete, and not
/// yet two thirds into its validity (past that it is renewed: a new version).
pub fn reusable(cert: &Certificate, now: i64) -> bool {
    let a = &cert.attributes;
    let (Some(nbf), Some(exp)) = (a.nbf, a.exp) else {
        return false;
    };
    a.enabled != Some(false)
        && cert.x5t.as_deref().is_some_and(|x| !x.is_empty())
        && cert.cer.as_deref().is_some_and(|c| !c.is_empty())
        && now < renew_after(nbf, exp)
}

fn cert_ledger_id(vault_uri: &str, name: &str) -> String {
    format!("{}/certificates/{name}", vault_uri.trim_end_matches('/'))
}

/// `key-vault.certificate.ensure`: a self-signed certificate created in Key Vault (`POST
/// /certificates/{name}/create`, then `…/pending` polled as a durable wait), policy RSA
/// 2048 exportable with a PEM secret.
///
/// An existing certificate of ours (this cluster's tags) that is still good
/// ([`reusable`]) is reused — a re-created cluster keeps its certificates; one past two
/// thirds of its validity gets a new version (ledger `updated`); one without our tags is
/// refused. A PKCS#12 one is refused too: the credentials secret needs PEM.
///
/// Undo: only a certificate this run created (intent journaled, run tag): deleted, then
/// purged from the vault's soft-delete bin. A renewed one keeps its new version.
#[derive(Clone, Debug)]
pub struct EnsureCertificate(pub Arc<Clients>);

impl Action for EnsureCertificate {
    const NAME: &'static str = "key-vault.certificate.ensure";
    type Input = CertificateInput;
    type Output = CertificateOutput;

    fn retry_policy() -> RetryPolicy {
        // A data role assigned moments ago takes minutes to apply (ForbiddenByRbac).
        azure_retry().with_max_attempts(20)
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: CertificateInput,
    ) -> Result<Outcome<CertificateOutput>, StepError> {
        keyvault::validate_object_name(&input.name)
            .map_err(|m| StepError::permanent(kind::VALIDATION, m).with_code("InvalidName"))?;
        let kv = self.0.key_vault(&input.azure).await?;
        let vault = ctx.output(&input.vault)?;
        let name = input.name.as_str();
        let what = format!("certificate {name} in Key Vault {}", vault.name);
        let journaled = action_field::<bool>(ctx, CREATING)?.unwrap_or(false);
        let renewing = action_field::<bool>(ctx, UPDATING)?.unwrap_or(false);
        let pending = action_field::<bool>(ctx, PENDING)?.unwrap_or(false);
        // A create sent by this or an earlier attempt (journaled before it was sent):
        // follow it before anything else.
        if pending || journaled || renewing {
            match kv.get_certificate_operation(&vault.name, name).await? {
                Some(op) if op.in_progress() => {
                    if !pending {
                        durable::save_checkpoint_field(ctx, PENDING, &true).await?;
                    }
                    return Ok(ctx.wait(
                        self.0.poll(),
                        format!("waiting for Key Vault to issue {what}"),
                    ));
                }
                Some(op) if !op.completed() => {
                    durable::save_checkpoint_field(ctx, PENDING, &false).await?;
                    let err = op.error.unwrap_or_default();
                    return Err(StepError::permanent(
                        "azure",
                        format!(
                            "Key Vault did not issue {what}: status {} ({}: {}) — see the vault's certificate operation, fix the cause, then run it again",
                            op.status,
                            err.code.as_deref().unwrap_or("no code"),
                            err.message.as_deref().or(op.status_details.as_deref()).unwrap_or("no message"),
                        ),
                    )
                    .with_code("CertificateOperationFailed"));
                }
                _ => {
                    if pending {
                        durable::save_checkpoint_field(ctx, PENDING, &false).await?;
                    }
                }
            }
        }
        // A vault this run created holds nothing yet (unless this step's earlier attempt
        // created it, which the journal says).
        let existing = if vault.created && !journaled {
            None
        } else {
            kv.get_certificate(&vault.name, name, None).await?
        };
        let now = now_secs(ctx);
        let own = input.owner.ownership(ctx);
        if let Some(cert) = existing {
            let tags = map_tags(&cert.tags);
            if !input.owner.owns(Some(&tags)) {
                return Err(not_ours(&what, &input.owner, &tags));
            }
            if cert
                .content_type()
                .is_some_and(|c| !c.eq_ignore_ascii_case(PEM_CONTENT_TYPE))
            {
                return Err(StepError::permanent(
                    kind::VALIDATION,
                    format!(
                        "{what} keeps its secret as {} but the credentials secret needs {PEM_CONTENT_TYPE} — delete it (and purge it) so hcp-workflow creates it, then run it again",
                        cert.content_type().unwrap_or_default()
                    ),
                )
                .with_code("CertificateNotPem"));
            }
            if reusable(&cert, now) {
                let created = journaled && own.is_this_run(Some(&tags));
                return certificate_output(&input, &vault, cert, created, renewing && !created);
            }
            if !journaled && !renewing {
                durable::save_checkpoint_field(ctx, UPDATING, &true).await?;
            }
        } else if !journaled {
            durable::save_checkpoint_field(ctx, CREATING, &true).await?;
        }
        let body = certificate_body(&input.subject, input.validity_months, &own.tags);
        kv.create_certificate(&vault.name, name, &body).await?;
        durable::save_checkpoint_field(ctx, PENDING, &true).await?;
        let verb = if journaled { "issue" } else { "renew" };
        Ok(ctx.wait(
            self.0.poll(),
            format!("waiting for Key Vault to {verb} {what}"),
        ))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: CertificateInput,
        output: Option<CertificateOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let created = journaled_create(ctx)? || output.as_ref().is_some_and(|o| o.created);
        if !created {
            return Ok(UndoOutcome::Done);
        }
        let Ok(vault) = ctx.output(&input.vault) else {
            return Ok(UndoOutcome::Done);
        };
        let kv = self.0.key_vault(&input.azure).await?;
        let name = input.name.as_str();
        let ledger_id = cert_ledger_id(&vault.uri, name);
        let deleting = durable::checkpoint_field::<bool>(ctx, DELETING)?.unwrap_or(false);
        if !deleting {
            if let Some(op) = kv.get_certificate_operation(&vault.name, name).await?
                && op.in_progress()
            {
                return Ok(ctx.undo_wait(
                    self.0.poll(),
                    format!("waiting for Key Vault to finish issuing certificate {name} before deleting it"),
                ));
            }
            let Some(cert) = kv.get_certificate(&vault.name, name, None).await? else {
                return Ok(UndoOutcome::Done);
            };
            if !input.owner.created_by(Some(&map_tags(&cert.tags)), ctx) {
                save_undo_ledger(
                    ctx,
                    vault_record(
                        CERT_TYPE,
                        &ledger_id,
                        LedgerAction::Kept,
                        input.persistent,
                        Some("not tagged as created by this run: left in place".into()),
                    ),
                )
                .await?;
                return Ok(UndoOutcome::Done);
            }
            durable::save_checkpoint_field(ctx, DELETING, &true).await?;
        }
        kv.delete_certificate(&vault.name, name).await?;
        let purged = kv.purge_deleted_certificate(&vault.name, name).await?;
        save_undo_ledger(
            ctx,
            vault_record(
                CERT_TYPE,
                &ledger_id,
                LedgerAction::Deleted,
                input.persistent,
                (!purged).then(|| "no soft-deleted copy was found to purge".into()),
            ),
        )
        .await?;
        Ok(UndoOutcome::Done)
    }
}

impl Facts for EnsureCertificate {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

fn certificate_output(
    input: &CertificateInput,
    vault: &KeyVaultOutput,
    cert: Certificate,
    created: bool,
    renewed: bool,
) -> Result<Outcome<CertificateOutput>, StepError> {
    let incomplete = || {
        StepError::retryable(
            kind::TRANSIENT,
            format!(
                "Key Vault answered certificate {} without its version, thumbprint or validity",
                input.name
            ),
        )
    };
    let version = cert.version().ok_or_else(incomplete)?.to_string();
    let (Some(nbf), Some(exp)) = (cert.attributes.nbf, cert.attributes.exp) else {
        return Err(incomplete());
    };
    let action = match (created, renewed) {
        (true, _) => LedgerAction::Created,
        (false, true) => LedgerAction::Updated,
        (false, false) => LedgerAction::Adopted,
    };
    let note = match action {
        LedgerAction::Updated => Some(format!(
            "renewed (new version {version}): its undo leaves it in place"
        )),
        LedgerAction::Adopted => adopted_note(),
        _ => None,
    };
    Ok(Outcome::Done(CertificateOutput {
        ledger: vec![vault_record(
            CERT_TYPE,
            &cert_ledger_id(&vault.uri, &input.name),
            action,
            input.persistent,
            note,
        )],
        vault: vault.name.clone(),
        name: input.name.clone(),
        version,
        x5t: cert.x5t.clone().unwrap_or_default(),
        cer: cert.cer.clone().unwrap_or_default(),
        subject: input.subject.clone(),
        not_before: nbf,
        expires: exp,
        created,
        id: cert.id,
    }))
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
fn is_same_key(k: &KeyCredential, thumb: &[u8], key_id: &str) -> bool {
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

fn not_found(what: &str) -> ServiceError {
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
// key-vault.credentials-secret.ensure

/// Input of `key-vault.credentials-secret.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CredentialsSecretInput {
    /// Azure target (its tenant is the credentials' `tenant_id`, its cloud's authority
    /// host their `authentication_endpoint`).
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// The vault.
    pub vault: Ref<KeyVaultOutput>,
    /// The certificate whose backing secret holds the key.
    pub certificate: Ref<CertificateOutput>,
    /// The application (its `appId` is the credentials' `client_id`).
    pub application: Ref<ApplicationOutput>,
    /// Secret name (default `<certificate>-json`): the `credentialsSecretName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Outlives the cluster.
    #[serde(default)]
    pub persistent: bool,
}

impl CredentialsSecretInput {
    fn secret_name(&self, cert: &CertificateOutput) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("{}-json", cert.name))
    }
}

/// Output of `key-vault.credentials-secret.ensure`: names and versions only.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CredentialsSecretOutput {
    /// Secret name (`credentialsSecretName`).
    pub name: String,
    /// Secret version.
    pub version: String,
    /// The certificate version it was built from.
    pub certificate_version: String,
    /// This run created the secret.
    pub created: bool,
    /// Ledger.
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

/// msi-dataplane's `UserAssignedIdentityCredentials`, as HyperShift reads it
/// (docs/content/reference/architecture/managed-azure/keyvault-secret-structure.md).
#[derive(Serialize)]
struct UserAssignedIdentityCredentials<'a> {
    authentication_endpoint: String,
    client_id: &'a str,
    client_secret: String,
    tenant_id: &'a str,
    not_before: String,
    not_after: String,
    renew_after: String,
    cannot_renew_after: String,
}

/// The credentials JSON of one application: `client_secret` is the base64 of the PEM
/// bundle (certificate and private key), `authentication_endpoint` the cloud's
/// authority host with a trailing `/`, the times RFC 3339 from the certificate's
/// validity (`renew_after` two thirds into it, `cannot_renew_after` = `not_after`).
pub fn credentials_json(
    authority_host: &str,
    client_id: &str,
    tenant_id: &str,
    pem: &Secret<String>,
    not_before: i64,
    not_after: i64,
) -> Secret<String> {
    let creds = UserAssignedIdentityCredentials {
        authentication_endpoint: format!("{}/", authority_host.trim_end_matches('/')),
        client_id,
        client_secret: base64::engine::general_purpose::STANDARD.encode(pem.expose()),
        tenant_id,
        not_before: rfc3339(not_before),
        not_after: rfc3339(not_after),
        renew_after: rfc3339(renew_after(not_before, not_after)),
        cannot_renew_after: rfc3339(not_after),
    };
    // A struct of strings always serializes.
    Secret::new(serde_json::to_string(&creds).unwrap_or_default())
}

/// Whether a PEM bundle holds a certificate and a private key (checked without ever
/// printing it).
pub fn is_pem_bundle(pem: &Secret<String>) -> bool {
    let p = pem.expose();
    p.contains("-----BEGIN CERTIFICATE-----") && p.contains("PRIVATE KEY-----")
}

/// `key-vault.credentials-secret.ensure`: the secret `<certificate>-json` holding
/// msi-dataplane's `UserAssignedIdentityCredentials` ([`credentials_json`]), with
/// attributes `nbf`/`exp` from the certificate and tags (ownership,
/// [`TAG_CERT_VERSION`], `renew_after`, `cannot_renew_after`).
///
/// Idempotent by [`TAG_CERT_VERSION`]: a secret of ours built from the same certificate
/// version is left alone; one built from another version gets a new version (ledger
/// `updated`). One without our tags is refused. The certificate's private key is read
/// into memory only, never journaled, logged or put in an error.
///
/// Undo: only a secret this run created (intent journaled, run tag): deleted and purged.
#[derive(Clone, Debug)]
pub struct EnsureCredentialsSecret(pub Arc<Clients>);

impl Action for EnsureCredentialsSecret {
    const NAME: &'static str = "key-vault.credentials-secret.ensure";
    type Input = CredentialsSecretInput;
    type Output = CredentialsSecretOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry().with_max_attempts(20)
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: CredentialsSecretInput,
    ) -> Result<Outcome<CredentialsSecretOutput>, StepError> {
        let kv = self.0.key_vault(&input.azure).await?;
        let vault = ctx.output(&input.vault)?;
        let cert = ctx.output(&input.certificate)?;
        let app = ctx.output(&input.application)?;
        let name = input.secret_name(&cert);
        keyvault::validate_object_name(&name)
            .map_err(|m| StepError::permanent(kind::VALIDATION, m).with_code("InvalidName"))?;
        let what = format!("secret {name} in Key Vault {}", vault.name);
        let own = input.owner.ownership(ctx);
        let journaled = action_field::<bool>(ctx, CREATING)?.unwrap_or(false);
        let ledger_id = format!("{}/secrets/{name}", vault.uri.trim_end_matches('/'));
        let done = |version: String, created: bool, updated: bool| {
            let action = match (created, updated) {
                (true, _) => LedgerAction::Created,
                (false, true) => LedgerAction::Updated,
                (false, false) => LedgerAction::Adopted,
            };
            Outcome::Done(CredentialsSecretOutput {
                ledger: vec![vault_record(
                    SECRET_TYPE,
                    &ledger_id,
                    action,
                    input.persistent,
                    match action {
                        LedgerAction::Updated => Some(format!(
                            "new version built from certificate version {}: its undo leaves it in place",
                            cert.version
                        )),
                        LedgerAction::Adopted => adopted_note(),
                        _ => None,
                    },
                )],
                name: name.clone(),
                version,
                certificate_version: cert.version.clone(),
                created,
            })
        };
        // Only the tags and version of what exists are kept; its value is dropped here.
        let existing = kv
            .get_secret(&vault.name, &name, None)
            .await?
            .map(|s| (s.tags, s.id));
        if let Some((tags, id)) = &existing {
            let tag_obj = map_tags(tags);
            if !input.owner.owns(Some(&tag_obj)) {
                return Err(not_ours(&what, &input.owner, &tag_obj));
            }
            let built_from = tags.as_ref().and_then(|t| t.get(TAG_CERT_VERSION));
            if built_from.is_some_and(|v| v == &cert.version) {
                let created = journaled && own.is_this_run(Some(&tag_obj));
                let updated = action_field::<bool>(ctx, UPDATING)?.unwrap_or(false);
                let version = keyvault::object_version(id).unwrap_or_default().to_string();
                return Ok(done(version, created, updated));
            }
            durable::save_checkpoint_field(ctx, UPDATING, &true).await?;
        } else if !journaled {
            durable::save_checkpoint_field(ctx, CREATING, &true).await?;
        }
        // The certificate's backing secret: the PEM with the private key.
        let Some(backing) = kv
            .get_secret(&vault.name, &cert.name, Some(&cert.version))
            .await?
        else {
            return Err(StepError::retryable(
                kind::CONFLICT,
                format!(
                    "the backing secret of certificate {} version {} is not readable yet in Key Vault {}",
                    cert.name, cert.version, vault.name
                ),
            )
            .with_code("SecretNotFound"));
        };
        if backing
            .content_type
            .as_deref()
            .is_some_and(|c| !c.eq_ignore_ascii_case(PEM_CONTENT_TYPE))
            || !is_pem_bundle(&backing.value)
        {
            return Err(StepError::permanent(
                kind::VALIDATION,
                format!(
                    "the backing secret of certificate {} (content type {}) is not a PEM bundle with a certificate and a private key",
                    cert.name,
                    backing.content_type.as_deref().unwrap_or("unset")
                ),
            )
            .with_code("CertificateNotPem"));
        }
        let value = credentials_json(
            input.azure.cloud.authority_host(),
            &app.app_id,
            &input.azure.tenant_id,
            &backing.value,
            cert.not_before,
            cert.expires,
        );
        drop(backing);
        let mut tags = own.tags.clone();
        tags.insert(TAG_CERT_VERSION.into(), cert.version.clone());
        tags.insert(
            TAG_RENEW_AFTER.into(),
            rfc3339(renew_after(cert.not_before, cert.expires)),
        );
        tags.insert(TAG_CANNOT_RENEW_AFTER.into(), rfc3339(cert.expires));
        let attributes = Attributes {
            enabled: Some(true),
            nbf: Some(cert.not_before),
            exp: Some(cert.expires),
            ..Attributes::default()
        };
        let written = kv
            .set_secret(
                &vault.name,
                &name,
                &value,
                Some("application/json"),
                &attributes,
                &tags,
            )
            .await?;
        let version = written.version().unwrap_or_default().to_string();
        // Missing: this run created it. Present (built from another certificate version):
        // this run's only if an earlier attempt of this step created it.
        let created = match &existing {
            None => true,
            Some((t, _)) => journaled && own.is_this_run(Some(&map_tags(t))),
        };
        Ok(done(version, created, !created))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: CredentialsSecretInput,
        output: Option<CredentialsSecretOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let created = journaled_create(ctx)? || output.as_ref().is_some_and(|o| o.created);
        if !created {
            return Ok(UndoOutcome::Done);
        }
        let (Ok(vault), Ok(cert)) = (ctx.output(&input.vault), ctx.output(&input.certificate))
        else {
            return Ok(UndoOutcome::Done);
        };
        let kv = self.0.key_vault(&input.azure).await?;
        let name = input.secret_name(&cert);
        let ledger_id = format!("{}/secrets/{name}", vault.uri.trim_end_matches('/'));
        let deleting = durable::checkpoint_field::<bool>(ctx, DELETING)?.unwrap_or(false);
        if !deleting {
            let Some(tags) = kv
                .get_secret(&vault.name, &name, None)
                .await?
                .map(|s| s.tags)
            else {
                return Ok(UndoOutcome::Done);
            };
            if !input.owner.created_by(Some(&map_tags(&tags)), ctx) {
                save_undo_ledger(
                    ctx,
                    vault_record(
                        SECRET_TYPE,
                        &ledger_id,
                        LedgerAction::Kept,
                        input.persistent,
                        Some("not tagged as created by this run: left in place".into()),
                    ),
                )
                .await?;
                return Ok(UndoOutcome::Done);
            }
            durable::save_checkpoint_field(ctx, DELETING, &true).await?;
        }
        kv.delete_secret(&vault.name, &name).await?;
        let purged = kv.purge_deleted_secret(&vault.name, &name).await?;
        save_undo_ledger(
            ctx,
            vault_record(
                SECRET_TYPE,
                &ledger_id,
                LedgerAction::Deleted,
                input.persistent,
                (!purged).then(|| "no soft-deleted copy was found to purge".into()),
            ),
        )
        .await?;
        Ok(UndoOutcome::Done)
    }
}

impl Facts for EnsureCredentialsSecret {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::keyvault::Attributes;

    const PEM: &str = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nMIIDqDCCApCg\n-----END CERTIFICATE-----\n";

    #[test]
    fn times_are_rfc3339_whole_seconds() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_705_312_800), "2024-01-15T10:00:00Z");
        assert_eq!(renew_after(0, 300), 200);
        assert_eq!(renew_after(100, 100), 100);
        assert_eq!(renew_after(100, 50), 100);
    }

    #[test]
    fn credentials_json_has_msi_dataplane_shape() {
        let nbf = 1_705_312_800; // 2024-01-15T10:00:00Z
        let exp = nbf + 366 * 24 * 3600; // 2025-01-15T10:00:00Z
        let json = credentials_json(
            "https://login.microsoftonline.com",
            "11111111-1111-1111-1111-111111111111",
            "22222222-2222-2222-2222-222222222222",
            &Secret::new(PEM.to_string()),
            nbf,
            exp,
        );
        assert_eq!(format!("{json:?}"), "[redacted]");
        let v: Value = serde_json::from_str(json.expose()).unwrap_or_default();
        let keys: Vec<&str> = v
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys.len(), 8, "exactly the documented members: {keys:?}");
        assert_eq!(
            v["authentication_endpoint"],
            "https://login.microsoftonline.com/"
        );
        assert_eq!(v["client_id"], "11111111-1111-1111-1111-111111111111");
        assert_eq!(v["tenant_id"], "22222222-2222-2222-2222-222222222222");
        assert_eq!(v["not_before"], "2024-01-15T10:00:00Z");
        assert_eq!(v["not_after"], "2025-01-15T10:00:00Z");
        assert_eq!(v["cannot_renew_after"], "2025-01-15T10:00:00Z");
        assert_eq!(v["renew_after"], rfc3339(renew_after(nbf, exp)).as_str());
        let secret = v["client_secret"].as_str().unwrap_or_default();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(secret)
            .unwrap_or_default();
        assert_eq!(String::from_utf8(decoded).unwrap_or_default(), PEM);
        // A trailing slash is not doubled (gov and custom authorities alike).
        let json = credentials_json(
            "https://login.microsoftonline.us/",
            "c",
            "t",
            &Secret::new(PEM.to_string()),
            nbf,
            exp,
        );
        let v: Value = serde_json::from_str(json.expose()).unwrap_or_default();
        assert_eq!(
            v["authentication_endpoint"],
            "https://login.microsoftonline.us/"
        );
    }

    #[test]
    fn pem_bundles_are_recognised() {
        assert!(is_pem_bundle(&Secret::new(PEM.to_string())));
        assert!(!is_pem_bundle(&Secret::new("MIIKPAIBAzCCCfYG".to_string())));
        assert!(!is_pem_bundle(&Secret::new(
            "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n".to_string()
        )));
    }

    #[test]
    fn key_credentials_from_a_certificate() {
        // SHA-1 thumbprint bytes 00 01 … 13 as Key Vault's base64url x5t.
        let bytes: Vec<u8> = (0u8..20).collect();
        let x5t = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes);
        assert_eq!(thumbprint_bytes(&x5t), Some(bytes.clone()));
        assert_eq!(thumbprint_bytes(&format!("{x5t}=")), Some(bytes.clone()));
        let cert = CertificateOutput {
            vault: "kv".into(),
            name: "cpo".into(),
            id: "https://kv.vault.azure.net/certificates/cpo/v1".into(),
            version: "v1".into(),
            x5t: x5t.clone(),
            cer: "MIIC".into(),
            subject: "CN=cpo".into(),
            not_before: 0,
            expires: 86_400,
            created: true,
            ledger: vec![],
        };
        let kid = key_id("app-object-id", &x5t);
        assert_eq!(kid, key_id("app-object-id", &x5t), "deterministic");
        assert_ne!(kid, key_id("other-app", &x5t));
        let k = key_credential(&cert, &kid, &bytes);
        let v = serde_json::to_value(&k).unwrap_or_default();
        assert_eq!(v["type"], "AsymmetricX509Cert");
        assert_eq!(v["usage"], "Verify");
        assert_eq!(v["key"], "MIIC");
        assert_eq!(v["displayName"], "CN=cpo");
        assert_eq!(
            v["customKeyIdentifier"],
            base64::engine::general_purpose::STANDARD
                .encode(&bytes)
                .as_str()
        );
        assert_eq!(v["startDateTime"], "1970-01-01T00:00:00Z");
        assert_eq!(v["endDateTime"], "1970-01-02T00:00:00Z");
        assert_eq!(v["keyId"], kid.as_str());
        // Found again by thumbprint (as Graph returns it, key null, another keyId) or id.
        let listed = KeyCredential {
            key: None,
            key_id: Some("another".into()),
            ..k.clone()
        };
        assert!(is_same_key(&listed, &bytes, &kid));
        let other = KeyCredential {
            custom_key_identifier: Some("AAAA".into()),
            key_id: Some(kid.to_uppercase()),
            ..k.clone()
        };
        assert!(is_same_key(&other, &bytes, &kid));
        let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
        let portal = KeyCredential {
            custom_key_identifier: Some(base64::engine::general_purpose::STANDARD.encode(hex)),
            key_id: Some("y".into()),
            ..k.clone()
        };
        assert!(is_same_key(&portal, &bytes, &kid), "hex-text identifier");
        let unrelated = KeyCredential {
            custom_key_identifier: Some("AAAA".into()),
            key_id: Some("x".into()),
            ..k
        };
        assert!(!is_same_key(&unrelated, &bytes, &kid));
    }

    #[test]
    fn graph_tags_read_as_ownership() {
        let tags = vec![
            "hcp-workflow.io/cluster=demo".to_string(),
            "hcp-workflow.io/infra-id=abc12".to_string(),
            "hcp-workflow.io/run=r1".to_string(),
            "WindowsAzureActiveDirectoryIntegratedApp".to_string(),
        ];
        let obj = graph_tag_object(&tags);
        let owner = Owner {
            cluster: "demo".into(),
            infra_id: "abc12".into(),
        };
        assert!(owner.owns(Some(&obj)));
        assert!(durable::Ownership::new("demo", "abc12", "r1").is_this_run(Some(&obj)));
        assert!(!durable::Ownership::new("demo", "abc12", "r2").is_this_run(Some(&obj)));
        assert!(!owner.owns(Some(&graph_tag_object(&[]))));
    }

    #[test]
    fn certificate_policy_and_reuse() {
        let tags = BTreeMap::from([("k".to_string(), "v".to_string())]);
        let b = certificate_body("CN=cpo-demo", 12, &tags);
        assert_eq!(b["policy"]["key_props"]["kty"], "RSA");
        assert_eq!(b["policy"]["key_props"]["key_size"], 2048);
        assert_eq!(b["policy"]["key_props"]["exportable"], true);
        assert_eq!(b["policy"]["secret_props"]["contentType"], PEM_CONTENT_TYPE);
        assert_eq!(b["policy"]["x509_props"]["subject"], "CN=cpo-demo");
        assert_eq!(b["policy"]["x509_props"]["validity_months"], 12);
        assert_eq!(b["policy"]["issuer"]["name"], "Self");
        assert_eq!(b["tags"]["k"], "v");
        let cert = |nbf, exp, enabled| Certificate {
            id: "https://kv.vault.azure.net/certificates/cpo/v1".into(),
            x5t: Some("x".into()),
            cer: Some("c".into()),
            attributes: Attributes {
                enabled: Some(enabled),
                nbf: Some(nbf),
                exp: Some(exp),
                ..Attributes::default()
            },
            ..Certificate::default()
        };
        assert!(reusable(&cert(0, 300, true), 100));
        assert!(!reusable(&cert(0, 300, true), 200), "two thirds in: renew");
        assert!(!reusable(&cert(0, 300, false), 100), "disabled");
        assert!(!reusable(&Certificate::default(), 0), "incomplete");
    }

    #[test]
    fn inputs_are_serde_stable() {
        let azure = json!({"cloud": "public", "tenant_id": "t", "auth": "auto"});
        let owner = json!({"cluster": "demo", "infra_id": "abc12"});
        let cert: Result<CertificateInput, _> = serde_json::from_value(json!({
            "azure": azure, "owner": owner, "vault": {"$ref": "aro.vault"},
            "name": "cpo-demo", "subject": "CN=cpo-demo"
        }));
        let cert = cert.expect("minimal certificate input");
        assert_eq!(cert.validity_months, 12);
        assert!(!cert.persistent);
        let vault: Result<KeyVaultInput, _> = serde_json::from_value(json!({
            "azure": azure, "owner": owner,
            "id": "/subscriptions/s/resourceGroups/g/providers/Microsoft.KeyVault/vaults/kv-demo",
            "location": "eastus"
        }));
        let vault = vault.expect("minimal vault input");
        assert!(!vault.byo && vault.tenant_id.is_none());
        let secret: Result<CredentialsSecretInput, _> = serde_json::from_value(json!({
            "azure": azure, "owner": owner, "vault": {"$ref": "v"},
            "certificate": {"$ref": "c"}, "application": {"$ref": "a"}
        }));
        let secret = secret.expect("minimal secret input");
        let out = CertificateOutput {
            vault: "kv".into(),
            name: "cpo-demo".into(),
            id: String::new(),
            version: "v".into(),
            x5t: String::new(),
            cer: String::new(),
            subject: String::new(),
            not_before: 0,
            expires: 0,
            created: false,
            ledger: vec![],
        };
        assert_eq!(secret.secret_name(&out), "cpo-demo-json");
        let v = serde_json::to_value(&secret).unwrap_or_default();
        assert!(v.get("name").is_none(), "unset name is not journaled");
    }

    #[test]
    fn registered_names_have_permission_entries() {
        for name in [
            EnsureKeyVault::NAME,
            EnsureApplication::NAME,
            EnsureServicePrincipal::NAME,
            EnsureCertificate::NAME,
            BindCertificate::NAME,
            EnsureCredentialsSecret::NAME,
            DeleteApplication::NAME,
            DeleteCertificate::NAME,
            DeleteSecret::NAME,
            DeleteKeyVault::NAME,
        ] {
            assert!(
                super::super::permissions::arm_actions(name).is_some(),
                "{name} has no permissions entry"
            );
        }
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

/// Input of `key-vault.certificate.delete` and `key-vault.secret.delete`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteVaultObjectInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// Vault name.
    pub vault: String,
    /// Certificate or secret name.
    pub name: String,
    /// Persistent (recorded as such).
    #[serde(default)]
    pub persistent: bool,
}

/// `key-vault.certificate.delete` (delete-cluster): deletes and purges the certificate
/// only when it carries this cluster's tags. A missing vault or certificate is done.
#[derive(Clone, Debug)]
pub struct DeleteCertificate(pub Arc<Clients>);

/// `key-vault.secret.delete` (delete-cluster): deletes and purges the secret only when it
/// carries this cluster's tags. A missing vault or secret is done.
#[derive(Clone, Debug)]
pub struct DeleteSecret(pub Arc<Clients>);

/// Delete-cluster's delete of one vault object of ours.
async fn delete_vault_object(
    clients: &Clients,
    ctx: &StepContext,
    input: &DeleteVaultObjectInput,
    certificate: bool,
) -> Result<Outcome<super::arm::DeleteOutput>, StepError> {
    let kv = clients.key_vault(&input.azure).await?;
    let (resource_type, collection) = if certificate {
        (CERT_TYPE, "certificates")
    } else {
        (SECRET_TYPE, "secrets")
    };
    let ledger_id = format!("{}/{collection}/{}", kv.vault_uri(&input.vault), input.name);
    let rec = |action, note: Option<String>| {
        Outcome::Done(super::arm::DeleteOutput {
            ledger: vec![vault_record(
                resource_type,
                &ledger_id,
                action,
                input.persistent,
                note,
            )],
        })
    };
    let gone_vault = |e: ServiceError| -> Result<Option<()>, StepError> {
        // The vault itself is gone (its DNS name no longer resolves, or 404 VaultNotFound).
        if e.is_not_found() {
            Ok(None)
        } else {
            Err(e.into())
        }
    };
    let deleting = action_field::<bool>(ctx, DELETING)?.unwrap_or(false);
    if !deleting {
        let tags = if certificate {
            match kv.get_certificate(&input.vault, &input.name, None).await {
                Ok(c) => c.map(|c| c.tags),
                Err(e) => gone_vault(e)?.map(|()| None),
            }
        } else {
            match kv.get_secret(&input.vault, &input.name, None).await {
                Ok(s) => s.map(|s| s.tags),
                Err(e) => gone_vault(e)?.map(|()| None),
            }
        };
        let Some(tags) = tags else {
            return Ok(rec(LedgerAction::Gone, None));
        };
        if !input.owner.owns(Some(&map_tags(&tags))) {
            return Ok(rec(
                LedgerAction::Kept,
                Some("not tagged as this cluster's: left in place".into()),
            ));
        }
        durable::save_checkpoint_field(ctx, DELETING, &true).await?;
    }
    let purged = if certificate {
        kv.delete_certificate(&input.vault, &input.name).await?;
        kv.purge_deleted_certificate(&input.vault, &input.name)
            .await?
    } else {
        kv.delete_secret(&input.vault, &input.name).await?;
        kv.purge_deleted_secret(&input.vault, &input.name).await?
    };
    Ok(rec(
        LedgerAction::Deleted,
        (!purged).then(|| "no soft-deleted copy was found to purge".into()),
    ))
}

impl Action for DeleteCertificate {
    const NAME: &'static str = "key-vault.certificate.delete";
    const HAS_UNDO: bool = false;
    type Input = DeleteVaultObjectInput;
    type Output = super::arm::DeleteOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: DeleteVaultObjectInput,
    ) -> Result<Outcome<super::arm::DeleteOutput>, StepError> {
        delete_vault_object(&self.0, ctx, &input, true).await
    }
}

impl Facts for DeleteCertificate {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

impl Action for DeleteSecret {
    const NAME: &'static str = "key-vault.secret.delete";
    const HAS_UNDO: bool = false;
    type Input = DeleteVaultObjectInput;
    type Output = super::arm::DeleteOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: DeleteVaultObjectInput,
    ) -> Result<Outcome<super::arm::DeleteOutput>, StepError> {
        delete_vault_object(&self.0, ctx, &input, false).await
    }
}

impl Facts for DeleteSecret {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

/// `azure.key-vault.delete` (delete-cluster): deletes the vault and purges it, only when it
/// carries this cluster's tags, is not bring-your-own, and holds no certificates or
/// secrets other than this cluster's; otherwise kept (the ledger says why).
#[derive(Clone, Debug)]
pub struct DeleteKeyVault(pub Arc<Clients>);

impl Action for DeleteKeyVault {
    const NAME: &'static str = "azure.key-vault.delete";
    const HAS_UNDO: bool = false;
    type Input = KeyVaultInput;
    type Output = super::arm::DeleteOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: KeyVaultInput,
    ) -> Result<Outcome<super::arm::DeleteOutput>, StepError> {
        let id = input.id.as_str();
        let rec = |action, note: Option<String>| {
            Outcome::Done(super::arm::DeleteOutput {
                ledger: vec![record(VAULT_TYPE, id, action, input.persistent, note)],
            })
        };
        if input.byo {
            return Ok(rec(
                LedgerAction::Kept,
                Some("bring-your-own: never deleted".into()),
            ));
        }
        let arm = self.0.arm(&input.azure).await?;
        let name = vault_name(id)?;
        let sub = names::subscription_of(id).unwrap_or_default().to_string();
        let deleting = action_field::<bool>(ctx, DELETING)?.unwrap_or(false);
        if !deleting {
            let Some(body) = arm
                .get_value(id, API_KEY_VAULT)
                .await
                .map_err(|e| StepError::from(e.with_resource(id)))?
            else {
                return Ok(rec(LedgerAction::Gone, None));
            };
            if !input.owner.owns(body.get("tags")) {
                return Ok(rec(
                    LedgerAction::Kept,
                    Some("not tagged as this cluster's: left in place".into()),
                ));
            }
            if let Some(why) = foreign_contents(&self.0, &input, &name, ctx, false).await? {
                return Ok(rec(LedgerAction::Kept, Some(why)));
            }
            durable::save_checkpoint_field(ctx, DELETING, &true).await?;
        }
        match durable::delete(
            ctx,
            &arm,
            id,
            API_KEY_VAULT,
            Some(&input.owner.ownership(ctx)),
        )
        .await?
        {
            Progress::Pending { after, reason } => return Ok(ctx.wait(after, reason)),
            Progress::Done(Deleted::KeptNotOurs) => {
                return Ok(rec(
                    LedgerAction::Kept,
                    Some("not tagged as this cluster's: left in place".into()),
                ));
            }
            Progress::Done(Deleted::Deleted | Deleted::Gone) => {}
        }
        let purged = keyvault::purge_deleted_vault(&arm, &sub, &input.location, &name)
            .await
            .map_err(|e| StepError::from(e.with_resource(id)))?;
        Ok(rec(
            LedgerAction::Deleted,
            (!purged).then(|| "no soft-deleted copy was found to purge".into()),
        ))
    }
}

impl Facts for DeleteKeyVault {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.KeyVault/vaults/read",
        "Microsoft.KeyVault/vaults/delete",
        "Microsoft.KeyVault/locations/deletedVaults/read",
        "Microsoft.KeyVault/locations/deletedVaults/purge/action",
    ];
}
