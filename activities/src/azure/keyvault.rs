//! Azure Key Vault: the vault (ARM) and its certificates and secrets (data plane).
//!
//! **ARM** (`Microsoft.KeyVault/vaults`, api-version [`API_KEY_VAULT`], keyvault.json
//! stable 2023-07-01): the vault body ([`vault_body`]: RBAC authorization, standard SKU),
//! its global name rules ([`validate_vault_name`], `checkNameAvailability`) and the
//! soft-delete bin (`deletedVaults/{name}`, `…/purge`). Creating and deleting the vault
//! itself goes through [`super::durable`] like every tagged ARM resource.
//!
//! **Data plane** ([`KeyVaultClient`], api-version [`API_DATA_PLANE`],
//! `specification/keyvault/data-plane/Microsoft.KeyVault/stable/7.5/{certificates,secrets}.json`):
//! host `{vault}.{suffix}` ([`Cloud::key_vault_host`]), token scope
//! [`Cloud::key_vault_scope`], the same pipeline, short retry and host check as
//! [`super::graph::GraphClient`]. A secret's value is only ever held in a
//! [`crate::secret::Secret`]: read straight into it, sent from it, never logged, journaled
//! or put in an error.

use std::collections::BTreeMap;
use std::sync::Arc;

use azure_core::credentials::TokenCredential;
use azure_core::http::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::client::ArmClient;
use super::cloud::Cloud;
use super::error::{ArmError, ErrorClass, Service, ServiceError};
use super::graph::ClientSetupError;
use super::rest::{HostRule, Raw, Rest};
use super::transport::Transport;
use crate::secret::Secret;

/// A failed Key Vault data-plane request ([`ServiceError`] of [`Service::KeyVault`]).
pub type KeyVaultError = ServiceError;

/// ARM api-version of `Microsoft.KeyVault` (vaults, checkNameAvailability, deletedVaults).
pub const API_KEY_VAULT: &str = "2023-07-01";
/// ARM resource type of a vault.
pub const VAULT_TYPE: &str = "Microsoft.KeyVault/vaults";
/// Data-plane api-version.
pub const API_DATA_PLANE: &str = "7.5";
/// Pages followed by a list before giving up (a loop guard).
const MAX_PAGES: usize = 1000;

// ---------------------------------------------------------------------------------------
// ARM: the vault.

/// Checks a vault name against Key Vault's rules: 3–24 characters, ASCII letters, digits
/// and hyphens, starting with a letter, ending with a letter or digit, no consecutive
/// hyphens.
///
/// # Errors
/// Why the name is not valid.
pub fn validate_vault_name(name: &str) -> Result<(), String> {
    let len = name.len();
    if !(3..=24).contains(&len) {
        return Err(format!(
            "Key Vault name `{name}` must be 3 to 24 characters long (it is {len})"
        ));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!(
            "Key Vault name `{name}` may hold only letters, digits and hyphens"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!("Key Vault name `{name}` must start with a letter"));
    }
    if name.ends_with('-') {
        return Err(format!(
            "Key Vault name `{name}` must end with a letter or a digit"
        ));
    }
    if name.contains("--") {
        return Err(format!(
            "Key Vault name `{name}` must not hold consecutive hyphens"
        ));
    }
    Ok(())
}

/// The PUT body of a vault: standard SKU, RBAC authorization (no access policies),
/// `tenant_id`; ownership tags are merged in by [`super::durable`].
pub fn vault_body(location: &str, tenant_id: &str) -> Value {
    json!({
        "location": location,
        "properties": {
            "tenantId": tenant_id,
            "sku": {"family": "A", "name": "standard"},
            "enableRbacAuthorization": true,
        }
    })
}

/// Whether a vault body says RBAC authorization is on.
pub fn rbac_enabled(body: &Value) -> bool {
    body.pointer("/properties/enableRbacAuthorization")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Answer of `checkNameAvailability`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NameAvailability {
    /// Whether the name may be used.
    pub name_available: bool,
    /// `AccountNameInvalid` or `AlreadyExists`.
    pub reason: Option<String>,
    /// Azure's explanation.
    pub message: Option<String>,
}

/// `POST /subscriptions/{s}/providers/Microsoft.KeyVault/checkNameAvailability`.
///
/// # Errors
/// ARM errors, classified.
pub async fn check_name_availability(
    arm: &ArmClient,
    subscription: &str,
    name: &str,
) -> Result<NameAvailability, ArmError> {
    let path =
        format!("/subscriptions/{subscription}/providers/Microsoft.KeyVault/checkNameAvailability");
    let body = json!({"name": name, "type": VAULT_TYPE});
    let answer = arm.post(&path, API_KEY_VAULT, Some(&body)).await?;
    super::client::decode(answer.unwrap_or(Value::Null), Some(&path))
}

/// Path of a soft-deleted vault.
pub fn deleted_vault_path(subscription: &str, location: &str, name: &str) -> String {
    format!(
        "/subscriptions/{subscription}/providers/Microsoft.KeyVault/locations/{}/deletedVaults/{name}",
        location.to_ascii_lowercase().replace(' ', "")
    )
}

/// A soft-deleted vault; `None` when there is none.
///
/// # Errors
/// ARM errors, classified.
pub async fn get_deleted_vault(
    arm: &ArmClient,
    subscription: &str,
    location: &str,
    name: &str,
) -> Result<Option<Value>, ArmError> {
    arm.get_value(
        &deleted_vault_path(subscription, location, name),
        API_KEY_VAULT,
    )
    .await
}

/// Purges a soft-deleted vault so its name can be used again (`POST
/// …/deletedVaults/{name}/purge`); `false` when there is no such deleted vault.
///
/// # Errors
/// ARM errors, classified.
pub async fn purge_deleted_vault(
    arm: &ArmClient,
    subscription: &str,
    location: &str,
    name: &str,
) -> Result<bool, ArmError> {
    let path = format!("{}/purge", deleted_vault_path(subscription, location, name));
    match arm.post(&path, API_KEY_VAULT, None).await {
        Ok(_) => Ok(true),
        Err(e) if e.class == ErrorClass::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------
// Data plane: models.

/// Attributes of a certificate or secret (times are Unix seconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attributes {
    /// Enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Not before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    /// Expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    /// Created (read only).
    #[serde(default, skip_serializing)]
    pub created: Option<i64>,
    /// Updated (read only).
    #[serde(default, skip_serializing)]
    pub updated: Option<i64>,
    /// Recovery level (read only).
    #[serde(default, skip_serializing)]
    pub recovery_level: Option<String>,
}

/// A certificate's public parts (`GET /certificates/{name}[/{version}]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// `https://{vault}.{suffix}/certificates/{name}/{version}`.
    #[serde(default)]
    pub id: String,
    /// The backing key's id.
    #[serde(default)]
    pub kid: Option<String>,
    /// The backing secret's id (`…/secrets/{name}/{version}`).
    #[serde(default)]
    pub sid: Option<String>,
    /// Base64url SHA-1 thumbprint.
    #[serde(default)]
    pub x5t: Option<String>,
    /// Base64 DER of the certificate.
    #[serde(default)]
    pub cer: Option<String>,
    /// Attributes.
    #[serde(default)]
    pub attributes: Attributes,
    /// Tags.
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
    /// The certificate policy (issuer, subject, key and secret properties).
    #[serde(default)]
    pub policy: Option<Value>,
}

impl Certificate {
    /// The version: the last segment of `id`.
    pub fn version(&self) -> Option<&str> {
        object_version(&self.id)
    }

    /// `policy.secret_props.contentType` (`application/x-pem-file`,
    /// `application/x-pkcs12`).
    pub fn content_type(&self) -> Option<&str> {
        self.policy
            .as_ref()
            .and_then(|p| p.pointer("/secret_props/contentType"))
            .and_then(Value::as_str)
    }

    /// The tags (empty when none).
    pub fn tags(&self) -> BTreeMap<String, String> {
        self.tags.clone().unwrap_or_default()
    }
}

/// `…/{collection}/{name}/{version}` → `version`.
pub fn object_version(id: &str) -> Option<&str> {
    let path = id.split_once("://").map_or(id, |(_, r)| r);
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    match parts.as_slice() {
        [_, _, _, v] if !v.is_empty() => Some(v),
        _ => None,
    }
}

/// A pending certificate creation (`/certificates/{name}/pending`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct CertificateOperation {
    /// `…/certificates/{name}/pending`.
    #[serde(default)]
    pub id: String,
    /// `inProgress`, `completed`, `failed`, `cancelled`.
    #[serde(default)]
    pub status: String,
    /// Details of the status.
    #[serde(default)]
    pub status_details: Option<String>,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<OperationError>,
    /// The certificate, once completed.
    #[serde(default)]
    pub target: Option<String>,
    /// Whether cancellation was asked for.
    #[serde(default)]
    pub cancellation_requested: Option<bool>,
}

/// The `error` of a failed certificate operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationError {
    /// Code.
    #[serde(default)]
    pub code: Option<String>,
    /// Message.
    #[serde(default)]
    pub message: Option<String>,
}

impl CertificateOperation {
    /// Still running.
    pub fn in_progress(&self) -> bool {
        self.status.eq_ignore_ascii_case("inProgress")
    }

    /// Finished successfully.
    pub fn completed(&self) -> bool {
        self.status.eq_ignore_ascii_case("completed")
    }
}

/// A secret with its value (`GET /secrets/{name}[/{version}]`). The value is a
/// [`Secret`]: it cannot be printed or serialized.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretBundle {
    /// The value.
    pub value: Secret<String>,
    /// `https://{vault}.{suffix}/secrets/{name}/{version}`.
    #[serde(default)]
    pub id: String,
    /// Content type (`application/x-pem-file` for a PEM certificate's backing secret).
    #[serde(default)]
    pub content_type: Option<String>,
    /// Attributes.
    #[serde(default)]
    pub attributes: Attributes,
    /// Tags.
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
    /// `true` for a certificate's backing secret.
    #[serde(default)]
    pub managed: Option<bool>,
}

/// A secret without its value (list items, the answer of a set, a delete).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretItem {
    /// `https://{vault}.{suffix}/secrets/{name}[/{version}]`.
    #[serde(default)]
    pub id: String,
    /// Content type.
    #[serde(default)]
    pub content_type: Option<String>,
    /// Attributes.
    #[serde(default)]
    pub attributes: Attributes,
    /// Tags.
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
    /// `true` for a certificate's backing secret.
    #[serde(default)]
    pub managed: Option<bool>,
}

impl SecretItem {
    /// The version (when `id` names one).
    pub fn version(&self) -> Option<&str> {
        object_version(&self.id)
    }

    /// The name: the segment after `/secrets/`.
    pub fn name(&self) -> Option<&str> {
        object_name(&self.id)
    }
}

/// A certificate list item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateItem {
    /// `https://{vault}.{suffix}/certificates/{name}`.
    #[serde(default)]
    pub id: String,
    /// Thumbprint.
    #[serde(default)]
    pub x5t: Option<String>,
    /// Attributes.
    #[serde(default)]
    pub attributes: Attributes,
    /// Tags.
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
}

impl CertificateItem {
    /// The name: the segment after `/certificates/`.
    pub fn name(&self) -> Option<&str> {
        object_name(&self.id)
    }
}

/// `…/{collection}/{name}[/{version}]` → `name`.
pub fn object_name(id: &str) -> Option<&str> {
    let path = id.split_once("://").map_or(id, |(_, r)| r);
    path.split('/').nth(2).filter(|n| !n.is_empty())
}

/// Checks a certificate or secret name: 1–127 ASCII letters, digits and hyphens.
///
/// # Errors
/// Why the name is not valid.
pub fn validate_object_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 127
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(format!(
            "Key Vault object name `{name}` must be 1 to 127 letters, digits and hyphens"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Data plane: the client.

/// Key Vault data-plane client for one cloud (any vault of it): cheap to clone.
#[derive(Debug, Clone)]
pub struct KeyVaultClient {
    rest: Arc<Rest>,
    suffix: String,
}

impl KeyVaultClient {
    /// A client for `cloud`'s vaults, authenticating with `credential` (scope
    /// [`Cloud::key_vault_scope`]) through `transport`.
    ///
    /// # Errors
    /// The transport could not be built, or the cloud names no Key Vault suffix.
    pub fn new(
        cloud: &Cloud,
        credential: Arc<dyn TokenCredential>,
        transport: &Transport,
    ) -> Result<Self, ClientSetupError> {
        let (Some(suffix), Some(scope)) = (cloud.key_vault_suffix(), cloud.key_vault_scope())
        else {
            return Err(ClientSetupError::NoEndpoint("Key Vault"));
        };
        let suffix = suffix.to_ascii_lowercase();
        let rest = Rest::new(
            cloud,
            credential,
            transport,
            scope,
            Service::KeyVault,
            HostRule::Subdomain(suffix.clone()),
        )?;
        Ok(Self {
            rest: Arc::new(rest),
            suffix,
        })
    }

    /// `https://{vault}.{suffix}` — the vault's URI without trailing slash.
    pub fn vault_uri(&self, vault: &str) -> String {
        format!("https://{}.{}", vault.to_ascii_lowercase(), self.suffix)
    }

    fn target(vault: &str, path: &str) -> String {
        format!("{vault}/{path}")
    }

    fn check(vault: &str, names: &[&str]) -> Result<(), KeyVaultError> {
        validate_vault_name(vault)
            .and_then(|()| names.iter().try_for_each(|n| validate_object_name(n)))
            .map_err(|m| ServiceError::local(Service::KeyVault, "InvalidName", m, Some(vault)))
    }

    async fn send(
        &self,
        method: Method,
        vault: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Raw, KeyVaultError> {
        let url = format!(
            "{}/{path}?api-version={API_DATA_PLANE}",
            self.vault_uri(vault)
        );
        self.rest
            .send(method, &url, body, &[], Some(&Self::target(vault, path)))
            .await
    }

    async fn get_opt<T: DeserializeOwned>(
        &self,
        vault: &str,
        path: &str,
    ) -> Result<Option<T>, KeyVaultError> {
        let raw = self.send(Method::Get, vault, path, None).await?;
        let target = Self::target(vault, path);
        match raw.status {
            404 => Ok(None),
            200..=299 => raw.decode(Service::KeyVault, Some(&target)).map(Some),
            _ => Err(raw.error(Service::KeyVault, Some(&target))),
        }
    }

    async fn delete(&self, vault: &str, path: &str) -> Result<bool, KeyVaultError> {
        let raw = self.send(Method::Delete, vault, path, None).await?;
        match raw.status {
            404 => Ok(false),
            200..=299 => Ok(true),
            _ => Err(raw.error(Service::KeyVault, Some(&Self::target(vault, path)))),
        }
    }

    async fn list<T: DeserializeOwned>(
        &self,
        vault: &str,
        path: &str,
    ) -> Result<Vec<T>, KeyVaultError> {
        #[derive(Deserialize)]
        #[serde(bound = "T: DeserializeOwned")]
        struct Page<T> {
            #[serde(default = "Vec::new")]
            value: Vec<T>,
            #[serde(rename = "nextLink", default)]
            next: Option<String>,
        }
        let target = Self::target(vault, path);
        let mut url = format!(
            "{}/{path}?api-version={API_DATA_PLANE}",
            self.vault_uri(vault)
        );
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let raw = self
                .rest
                .send(Method::Get, &url, None, &[], Some(&target))
                .await?;
            if !raw.is_success() {
                return Err(raw.error(Service::KeyVault, Some(&target)));
            }
            let page: Page<T> = raw.decode(Service::KeyVault, Some(&target))?;
            out.extend(page.value);
            match page.next {
                Some(n) if !n.is_empty() => url = n,
                _ => return Ok(out),
            }
        }
        Err(ServiceError::local(
            Service::KeyVault,
            "TooManyPages",
            format!("more than {MAX_PAGES} pages listing {target}"),
            Some(&target),
        ))
    }

    /// Starts creating a certificate (`POST /certificates/{name}/create`; a new version
    /// when it exists). `body` is `{policy, attributes, tags}`.
    ///
    /// # Errors
    /// Key Vault errors, classified (409 `ObjectIsDeletedButRecoverable`: a deleted
    /// certificate of that name is in the soft-delete bin).
    pub async fn create_certificate(
        &self,
        vault: &str,
        name: &str,
        body: &Value,
    ) -> Result<CertificateOperation, KeyVaultError> {
        Self::check(vault, &[name])?;
        let path = format!("certificates/{name}/create");
        let bytes = serde_json::to_vec(body).map_err(|e| {
            ServiceError::local(
                Service::KeyVault,
                "InvalidRequest",
                format!("body not serializable: {e}"),
                Some(&path),
            )
        })?;
        let raw = self.send(Method::Post, vault, &path, Some(&bytes)).await?;
        let target = Self::target(vault, &path);
        if !raw.is_success() {
            return Err(raw.error(Service::KeyVault, Some(&target)));
        }
        raw.decode(Service::KeyVault, Some(&target))
    }

    /// The pending creation of a certificate; `None` when there is none.
    ///
    /// # Errors
    /// Key Vault errors, classified.
    pub async fn get_certificate_operation(
        &self,
        vault: &str,
        name: &str,
    ) -> Result<Option<CertificateOperation>, KeyVaultError> {
        Self::check(vault, &[name])?;
        self.get_opt(vault, &format!("certificates/{name}/pending"))
            .await
    }

    /// `GET {collection}/{name}[/{version}]`; `None` when there is none.
    async fn get_object<T: serde::de::DeserializeOwned>(
        &self,
        vault: &str,
        collection: &str,
        name: &str,
        version: Option<&str>,
    ) -> Result<Option<T>, KeyVaultError> {
        Self::check(vault, &[name])?;
        let path = match version {
            Some(v) => {
                Self::check(vault, &[v])?;
                format!("{collection}/{name}/{v}")
            }
            None => format!("{collection}/{name}"),
        };
        self.get_opt(vault, &path).await
    }

    /// A certificate's public parts (latest version when `version` is `None`); `None`
    /// when there is none.
    ///
    /// # Errors
    /// Key Vault errors, classified.
    pub async fn get_certificate(
        &self,
        vault: &str,
        name: &str,
        version: Option<&str>,
    ) -> Result<Option<Certificate>, KeyVaultError> {
        self.get_object(vault, "certificates", name, version).await
    }

    /// A secret with its value (latest version when `version` is `None`); `None` when
    /// there is none. For a certificate's backing secret the value is the certificate
    /// with its private key.
    ///
    /// # Errors
    /// Key Vault errors, classified; the value is never part of one.
    pub async fn get_secret(
        &self,
        vault: &str,
        name: &str,
        version: Option<&str>,
    ) -> Result<Option<SecretBundle>, KeyVaultError> {
        self.get_object(vault, "secrets", name, version).await
    }

    /// Writes a new version of a secret (`PUT /secrets/{name}`); the answer without its
    /// value.
    ///
    /// # Errors
    /// Key Vault errors, classified; the value is never part of one.
    pub async fn set_secret(
        &self,
        vault: &str,
        name: &str,
        value: &Secret<String>,
        content_type: Option<&str>,
        attributes: &Attributes,
        tags: &BTreeMap<String, String>,
    ) -> Result<SecretItem, KeyVaultError> {
        Self::check(vault, &[name])?;
        let path = format!("secrets/{name}");
        let mut body = json!({"attributes": attributes, "tags": tags});
        if let Some(ct) = content_type {
            body["contentType"] = Value::String(ct.to_string());
        }
        body["value"] = Value::String(value.expose().clone());
        // Serialization of a JSON value cannot fail; the error text would not hold the
        // value anyway.
        let bytes = Secret::new(serde_json::to_vec(&body).map_err(|_| {
            ServiceError::local(
                Service::KeyVault,
                "InvalidRequest",
                "secret body not serializable",
                Some(&path),
            )
        })?);
        drop(body);
        let raw = self
            .send(Method::Put, vault, &path, Some(bytes.expose()))
            .await?;
        let target = Self::target(vault, &path);
        if !raw.is_success() {
            return Err(raw.error(Service::KeyVault, Some(&target)));
        }
        // The answer echoes the value: decoded into the value-less item.
        raw.decode(Service::KeyVault, Some(&target))
    }

    /// Deletes a certificate (soft delete, with its key and backing secret); `false` when
    /// there was none.
    ///
    /// # Errors
    /// Key Vault errors, classified.
    pub async fn delete_certificate(&self, vault: &str, name: &str) -> Result<bool, KeyVaultError> {
        Self::check(vault, &[name])?;
        self.delete(vault, &format!("certificates/{name}")).await
    }

    /// Purges a deleted certificate (`DELETE /deletedcertificates/{name}`); `false` when
    /// there was none.
    ///
    /// # Errors
    /// Key Vault errors, classified (409 `ObjectIsBeingDeleted` right after the delete:
    /// retryable).
    pub async fn purge_deleted_certificate(
        &self,
        vault: &str,
        name: &str,
    ) -> Result<bool, KeyVaultError> {
        Self::check(vault, &[name])?;
        self.delete(vault, &format!("deletedcertificates/{name}"))
            .await
    }

    /// Deletes a secret (soft delete); `false` when there was none.
    ///
    /// # Errors
    /// Key Vault errors, classified (403 for a certificate's backing secret).
    pub async fn delete_secret(&self, vault: &str, name: &str) -> Result<bool, KeyVaultError> {
        Self::check(vault, &[name])?;
        self.delete(vault, &format!("secrets/{name}")).await
    }

    /// Purges a deleted secret (`DELETE /deletedsecrets/{name}`); `false` when there was
    /// none.
    ///
    /// # Errors
    /// Key Vault errors, classified.
    pub async fn purge_deleted_secret(
        &self,
        vault: &str,
        name: &str,
    ) -> Result<bool, KeyVaultError> {
        Self::check(vault, &[name])?;
        self.delete(vault, &format!("deletedsecrets/{name}")).await
    }

    /// Every certificate of the vault (latest versions, no private parts).
    ///
    /// # Errors
    /// Key Vault errors, classified.
    pub async fn list_certificates(
        &self,
        vault: &str,
    ) -> Result<Vec<CertificateItem>, KeyVaultError> {
        Self::check(vault, &[])?;
        self.list(vault, "certificates").await
    }

    /// Every secret of the vault, without values (certificates' backing secrets have
    /// `managed: true`).
    ///
    /// # Errors
    /// Key Vault errors, classified.
    pub async fn list_secrets(&self, vault: &str) -> Result<Vec<SecretItem>, KeyVaultError> {
        Self::check(vault, &[])?;
        self.list(vault, "secrets").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vault_names() {
        assert!(validate_vault_name("hcp-demo-abc12").is_ok());
        assert!(validate_vault_name("ab").is_err());
        assert!(validate_vault_name("a".repeat(25).as_str()).is_err());
        assert!(validate_vault_name("1abc").is_err());
        assert!(validate_vault_name("abc-").is_err());
        assert!(validate_vault_name("ab--c").is_err());
        assert!(validate_vault_name("ab_c").is_err());
        assert!(validate_object_name("cpo-demo-json").is_ok());
        assert!(validate_object_name("a/b").is_err());
        assert!(validate_object_name("").is_err());
    }

    #[test]
    fn ids_and_bodies() {
        let id = "https://kv.vault.azure.net/certificates/cpo/0123abcd";
        assert_eq!(object_version(id), Some("0123abcd"));
        assert_eq!(object_name(id), Some("cpo"));
        assert_eq!(object_version("https://kv.vault.azure.net/secrets/x"), None);
        assert_eq!(
            object_name("https://kv.vault.azure.net/secrets/x"),
            Some("x")
        );
        let body = vault_body("eastus", "t");
        assert!(rbac_enabled(&body));
        assert_eq!(body["properties"]["sku"]["name"], "standard");
        assert!(!rbac_enabled(&json!({"properties": {}})));
        assert_eq!(
            deleted_vault_path("s", "East US", "kv"),
            "/subscriptions/s/providers/Microsoft.KeyVault/locations/eastus/deletedVaults/kv"
        );
    }

    #[test]
    fn secret_bundles_redact_their_value() {
        let b: Option<SecretBundle> = serde_json::from_value(json!({
            "value": "-----BEGIN PRIVATE KEY-----\nMII…", "id": "https://kv.vault.azure.net/secrets/x/1",
            "contentType": "application/x-pem-file", "managed": true,
            "attributes": {"enabled": true, "nbf": 1, "exp": 2, "created": 1, "recoveryLevel": "Recoverable+Purgeable"}
        }))
        .ok();
        let b = b.expect("decodes");
        assert!(!format!("{b:?}").contains("PRIVATE"));
        assert_eq!(b.attributes.exp, Some(2));
        // Write-side attributes carry no read-only fields.
        let a = serde_json::to_value(&b.attributes).unwrap_or_default();
        assert_eq!(a, json!({"enabled": true, "nbf": 1, "exp": 2}));
    }
}
