//! The ARO HCP identity model: control-plane components as Entra applications
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

use super::arm::{UNDO_LEDGER_KEY, record};
use super::env::Owner;
use crate::azure::durable::{self};
use crate::azure::error::{ErrorClass, ServiceError};
use hcp_runtime::error::kind;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{StepContext, StepError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

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

pub(super) const APP_TYPE: &str = "microsoft.graph.application";
pub(super) const SP_TYPE: &str = "microsoft.graph.servicePrincipal";
pub(super) const KEY_TYPE: &str = "microsoft.graph.keyCredential";
pub(super) const CERT_TYPE: &str = "Microsoft.KeyVault/vaults/certificates";
pub(super) const SECRET_TYPE: &str = "Microsoft.KeyVault/vaults/secrets";

/// Action checkpoint member: the create intent (`true` once journaled).
pub(super) const CREATING: &str = "creating";
/// Action checkpoint member: a certificate creation was sent and may be pending.
pub(super) const PENDING: &str = "pending";
/// Action checkpoint member: an existing object of ours is being given a new version
/// (a renewed certificate, a rebuilt credentials secret): never deleted by the undo.
pub(super) const UPDATING: &str = "updating";
/// Action checkpoint member: the key id [`BindCertificate`] is adding.
pub(super) const ADDING_KEY: &str = "adding-key";
/// Undo checkpoint member: the delete intent (the object's id or name).
pub(super) const DELETING: &str = "deleting";
/// Undo checkpoint member: purges of a deleted item that found nothing yet.
pub(super) const PURGE_LOOKS: &str = "purge-looks";
/// How many times an undo looks for a just-deleted item to purge before giving up on it.
pub(super) const MAX_PURGE_LOOKS: u32 = 5;

// ---------------------------------------------------------------------------------------
// Shared helpers.

pub(super) fn entra_record(
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

pub(super) fn vault_record(
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

pub(super) fn adopted_note() -> Option<String> {
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

pub(super) fn map_tags(tags: &Option<BTreeMap<String, String>>) -> Value {
    serde_json::to_value(tags.clone().unwrap_or_default()).unwrap_or(Value::Null)
}

pub(super) fn not_ours(what: &str, owner: &Owner, seen: &Value) -> StepError {
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
pub(super) fn action_field<T: DeserializeOwned>(
    ctx: &StepContext,
    key: &str,
) -> Result<Option<T>, StepError> {
    durable::checkpoint_field(ctx, key)
}

/// In an undo: one member of the forward action's last checkpoint.
pub(super) fn forward_field<T: DeserializeOwned>(
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
pub(super) fn journaled_create(ctx: &StepContext) -> Result<bool, StepError> {
    Ok(forward_field::<bool>(ctx, CREATING)?.unwrap_or(false))
}

/// Saves the undo's ledger (read by `hcp_runtime::ledger` instead of deriving it).
pub(super) async fn save_undo_ledger(
    ctx: &StepContext,
    rec: LedgerRecord,
) -> Result<(), StepError> {
    durable::save_checkpoint_field(ctx, UNDO_LEDGER_KEY, &vec![rec]).await
}

/// A read of an object another step of this run just created or read answered 404:
/// Entra replicates (or an operator deleted it); retry within the step's policy.
pub(super) fn replicating(e: ServiceError, what: &str) -> StepError {
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

pub(super) fn now_secs(ctx: &StepContext) -> i64 {
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
// What one resource kind's step hands the other's (the certificate is bound to the
// application; the credentials secret names the application).

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

#[cfg(test)]
mod tests {
    use super::super::entra::*;
    use super::super::key_vault::*;
    use super::*;
    use crate::azure::graph::KeyCredential;
    use crate::azure::keyvault::Attributes;
    use crate::azure::keyvault::Certificate;
    use crate::secret::Secret;
    use base64::Engine as _;
    use hcp_runtime::Action;
    use serde_json::{Value, json};

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
