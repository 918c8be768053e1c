//! Key Vault objects of the ARO HCP identity model: the vault, a self-signed certificate per
//! component created in it, and the credentials secret HyperShift mounts; and their deletes
//! (delete-cluster `--purge-persistent`). The ownership rules, tags and shared helpers are in
//! [`super::aro_identity`].

use super::arm::{azure_retry, azure_undo_retry, record};
use super::aro_identity::*;
use super::env::{AzureEnv, Clients, Owner};
use super::facts::Facts;
use crate::azure::durable::{self, Adopt, Deleted, EnsureSpec, OPERATIONS_KEY, Progress};
use crate::azure::error::ServiceError;
use crate::azure::keyvault::{self, API_KEY_VAULT, Attributes, Certificate, VAULT_TYPE};
use crate::azure::names;
use crate::secret::Secret;
use base64::Engine as _;
use hcp_runtime::error::kind;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

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

pub(super) fn vault_name(id: &str) -> Result<String, StepError> {
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
pub(super) fn vault_uri(body: &Value, azure: &AzureEnv, name: &str) -> String {
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

pub(super) fn rbac_off(id: &str) -> StepError {
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
pub(super) async fn foreign_contents(
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
// key-vault.certificate.ensure

pub(super) fn twelve() -> u32 {
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

pub(super) fn cert_ledger_id(vault_uri: &str, name: &str) -> String {
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

pub(super) fn certificate_output(
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
    pub(super) fn secret_name(&self, cert: &CertificateOutput) -> String {
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
pub(super) async fn delete_vault_object(
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
