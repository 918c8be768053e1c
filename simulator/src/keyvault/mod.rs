//! Simulated Azure Key Vault: the `Microsoft.KeyVault/vaults` ARM type ([`vaults`]) and the
//! data plane at `https://{vault}.vault.azure.net` (US Gov `.vault.usgovcloudapi.net`, China
//! `.vault.azure.cn`; plain-http scripts may use the path prefix `/_keyvault/{vault}`).
//!
//! Data plane modelled on `specification/keyvault/data-plane/Microsoft.KeyVault/stable/7.5/`
//! `secrets.json` (`SetSecret`, `GetSecret`, `GetSecrets`, `GetSecretVersions`,
//! `UpdateSecret`, `DeleteSecret`, `GetDeletedSecret(s)`, `PurgeDeletedSecret`,
//! `RecoverDeletedSecret`; `SecretBundle`, `DeletedSecretBundle`, `SecretItem`),
//! `certificates.json` (`CreateCertificate` 202 + `CertificateOperation`,
//! `GetCertificateOperation`, `GetCertificate`, `GetCertificates`,
//! `GetCertificateVersions`, `GetCertificatePolicy`, `DeleteCertificate`,
//! `GetDeletedCertificate(s)`, `PurgeDeletedCertificate`, `RecoverDeletedCertificate`;
//! `CertificateBundle`, `CertificatePolicy`) and `common.json` (`Attributes`,
//! `KeyVaultError`), with the examples `CreateCertificate-example.json`,
//! `GetCertificateOperation-example.json`, `GetCertificate-example.json`,
//! `DeleteCertificate-example.json`. api-versions 2016-10-01, 7.0–7.6, 2025-06-01, 2025-07-01
//! and 2026-04-01 are accepted.
//!
//! | Request | Answer |
//! |---|---|
//! | `PUT /secrets/{n}` | 200 + SecretBundle (a new version) |
//! | `GET /secrets/{n}[/{version}]` | 200 + SecretBundle (with `value`); 404 `SecretNotFound` |
//! | `PATCH /secrets/{n}/{version}` | 200 + SecretBundle (attributes, contentType, tags) |
//! | `GET /secrets`, `GET /secrets/{n}/versions` | `{"value":[SecretItem…],"nextLink":…}` (`maxresults` ≤ 25, `$skiptoken`) |
//! | `DELETE /secrets/{n}` | 200 + DeletedSecretBundle |
//! | `GET /deletedsecrets[/{n}]`, `DELETE /deletedsecrets/{n}`, `POST /deletedsecrets/{n}/recover` | 200 / 204 / 200 |
//! | `POST /certificates/{n}/create` | 202 + CertificateOperation (`status: inProgress`, `csr`) + `Location` |
//! | `GET /certificates/{n}/pending` | the operation: `inProgress`, then `completed` with `target` |
//! | `GET /certificates/{n}[/{version}]`, `…/policy`, `GET /certificates`, `…/{n}/versions` | CertificateBundle (`cer`, `x5t`, `kid`, `sid`, policy) / lists |
//! | `DELETE /certificates/{n}` | 200 + DeletedCertificateBundle (its secret is deleted with it) |
//! | `GET /deletedcertificates[/{n}]`, `DELETE /deletedcertificates/{n}`, `POST /deletedcertificates/{n}/recover` | 200 / 204 / 200 |
//!
//! **Authentication** ("Authentication in Azure Key Vault", the challenge protocol the SDKs
//! speak): no bearer token → 401 with `WWW-Authenticate: Bearer
//! authorization="https://login.microsoftonline.com/{tenant}", resource="https://vault.azure.net"`
//! and `AKV10000: Request is missing a Bearer or PoP token.`; a token for another audience
//! → 401 `AKV10022: Invalid audience…`; a token of another tenant → 401 `AKV10032: Invalid
//! issuer…`. A vault that does not exist (or is soft-deleted) has no DNS name: the
//! connection is dropped, as a client sees a name that does not resolve.
//!
//! **Authorization** ([`authz`]): on a vault with `enableRbacAuthorization` the principal
//! (the token's `oid`) needs a role assignment at the vault or above whose built-in role's
//! `dataActions` cover the operation, else 403 `Forbidden` / `ForbiddenByRbac`; on an
//! access-policy vault an access policy for its object id, else 403 `ForbiddenByPolicy`.
//! The principal hcp-workflow runs as (any client that is not an identity or application
//! of the simulated tenant) is allowed everything but the scenario's `denied_data_actions`,
//! and with `caller_needs_data_roles` needs the role assignments too on RBAC vaults.
//!
//! **Certificates.** Issuer `Self` only (`Unknown` stays `inProgress`, awaiting a merge the
//! simulator does not serve). Creation makes a real self-signed X.509 certificate with a new
//! RSA key (`key_props.key_size` 2048/3072/4096, by rcgen over aws-lc-rs) for
//! `x509_props.subject`, `sans`, `key_usage`, `ekus` and `validity_months` calendar months;
//! the operation completes after the latency model's PUT duration of
//! `Microsoft.KeyVault/vaults/certificates` (default 5 s × time scale). Its secret (same
//! name and version, `managed: true`, `kid` set, `nbf`/`exp` from the certificate) holds, for
//! `secret_props.contentType: application/x-pem-file`, the PKCS#8 `PRIVATE KEY` followed by
//! the `CERTIFICATE` (only the certificate when `key_props.exportable` is false).
//! `application/x-pkcs12` — Key Vault's default when no content type is given — is refused
//! with 400 `BadParameter` naming the simulator: PKCS#12 is not modelled. EC keys likewise.
//!
//! **Soft delete.** A deleted secret or certificate is "being deleted" for the latency
//! model's DELETE duration of `Microsoft.KeyVault/vaults/secrets` (purge or re-create then
//! answer 409 `ObjectIsBeingDeleted`), then a deleted object until purged, recovered or its
//! vault's retention ends: creating the name answers 409 `Conflict` /
//! `ObjectIsDeletedButRecoverable`. Purging is refused on purge-protected vaults. A
//! certificate's secret cannot be set, updated, deleted, purged or recovered on its own
//! (403 `SecretManagedByKeyVault`).
//!
//! Not modelled: keys (`/keys`; certificates still report a `kid`), backup/restore,
//! issuers and contacts, merge, certificate import and update, throttling, network rules.
//! Messages for conditions whose exact text we could not find in Azure's documentation or
//! public reports (e.g. the 400 validation texts) are ours; codes are Key Vault's.

mod authz;
mod vaults;
mod x509;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::Method;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use authz::{Act, Principal};
pub(crate) use vaults::{
    DeletedVault, dns_suffix, handle_arm, on_vault_removed, prepare_vault, vault_by_name,
};
/// The thumbprint of a PEM or DER certificate, for simulated controllers checking which
/// certificate a client presents.
#[cfg_attr(not(test), allow(unused_imports))]
pub(crate) use x509::cert_thumbprint;
pub(crate) use x509::{cert_der, cert_info, sha1, sha1_hex};

use crate::http::{ErrorCode, Req, json as json_resp, set_header};
use crate::sim::{Simulator, lock};
use crate::state::{ArmResource, State};
use crate::util::str_at;

/// Key Vault data-plane api-versions accepted: the `stable/` folders of
/// `specification/keyvault/data-plane/Microsoft.KeyVault/` (2016-10-01, 7.0–7.6, 2025-06-01,
/// 2025-07-01) and 2026-04-01, the default of azure-keyvault-certificates and
/// azure-keyvault-secrets 4.12.0 (the official-client suite drives it).
pub(crate) const API_VERSIONS: &[&str] = &[
    "2016-10-01",
    "7.0",
    "7.1",
    "7.2",
    "7.3",
    "7.4",
    "7.5",
    "7.6",
    "2025-06-01",
    "2025-07-01",
    "2026-04-01",
];

/// Key Vault's own application id (an audience equivalent to its URL).
const KEY_VAULT_APP_ID: &str = "cfa8b339-82a2-471a-a3c9-0fc0be7a4093";

/// Largest secret value Key Vault stores (25 KB).
const MAX_SECRET: usize = 25 * 1024;

/// Everything Key Vault holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct KvState {
    /// Data planes by lower-case vault name (kept while the vault is soft-deleted).
    #[serde(default)]
    pub vaults: BTreeMap<String, VaultData>,
    /// Soft-deleted vaults by lower-case name.
    #[serde(default)]
    pub deleted_vaults: BTreeMap<String, DeletedVault>,
}

/// One vault's secrets and certificates.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct VaultData {
    /// By lower-case name.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretObj>,
    #[serde(default)]
    pub certificates: BTreeMap<String, CertObj>,
}

/// Soft deletion of an object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Deletion {
    /// Unix seconds.
    pub deleted: i64,
    /// Until when (simulator ms) the deletion is still running.
    pub visible_ms: u64,
    /// Scheduled purge, Unix seconds.
    pub purge: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SecretObj {
    pub name: String,
    /// Oldest first.
    pub versions: Vec<SecretVersion>,
    /// Backs a certificate of the same name.
    #[serde(default)]
    pub managed: bool,
    #[serde(default)]
    pub deleted: Option<Deletion>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SecretVersion {
    pub version: String,
    pub value: String,
    pub content_type: Option<String>,
    pub enabled: bool,
    pub nbf: Option<i64>,
    pub exp: Option<i64>,
    pub created: i64,
    pub updated: i64,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CertObj {
    pub name: String,
    /// Completed versions, oldest first.
    pub versions: Vec<CertVersion>,
    /// The normalized policy (without `id` and `attributes`).
    pub policy: Value,
    pub policy_created: i64,
    pub policy_updated: i64,
    #[serde(default)]
    pub pending: Option<Pending>,
    #[serde(default)]
    pub deleted: Option<Deletion>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CertVersion {
    pub version: String,
    /// Base64 DER.
    pub cer: String,
    /// Base64url SHA-1 of the DER.
    pub x5t: String,
    pub enabled: bool,
    pub nbf: i64,
    pub exp: i64,
    pub created: i64,
    pub updated: i64,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// A certificate operation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub request_id: String,
    /// Base64 DER PKCS#10.
    pub csr: String,
    pub issuer: String,
    /// `inProgress` or `completed`.
    pub status: String,
    /// When it completes (simulator ms); `None`: never (issuer `Unknown`).
    pub done_ms: Option<u64>,
    /// What completion installs.
    pub staged: Option<(CertVersion, SecretVersion)>,
}

/// A secret as a reader (the Secrets Store CSI driver's Azure provider) gets it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KvSecret {
    pub value: String,
    pub content_type: Option<String>,
    /// `attributes.nbf` / `attributes.exp`, Unix seconds.
    pub nbf: Option<i64>,
    pub exp: Option<i64>,
    pub tags: BTreeMap<String, String>,
    /// The version read, and its full id (`https://{vault}.vault.azure.net/secrets/{n}/{v}`).
    pub version: String,
    pub id: String,
}

/// A Key Vault refusal: the HTTP status (0: the vault's name does not resolve), the error
/// code and message, and the inner error code (`ForbiddenByRbac`, …) — what a client such as
/// the CSI driver's Azure provider surfaces.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KvDenied {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub inner: Option<String>,
}

impl KvDenied {
    pub(crate) fn new(
        status: u16,
        code: &str,
        message: impl Into<String>,
        inner: Option<&str>,
    ) -> Self {
        Self {
            status,
            code: code.to_string(),
            message: message.into(),
            inner: inner.map(str::to_string),
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(400, "BadParameter", message, None)
    }

    fn secret_not_found(name: &str) -> Self {
        Self::new(
            404,
            "SecretNotFound",
            format!(
                "A secret with (name/id) {name} was not found in this key vault. If you recently deleted this secret you may be able to recover it using the correct recovery command. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182"
            ),
            None,
        )
    }

    fn cert_not_found(name: &str) -> Self {
        Self::new(
            404,
            "CertificateNotFound",
            format!(
                "A certificate with (name/id) {name} was not found in this key vault. If you recently deleted this certificate you may be able to recover it using the correct recovery command. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182"
            ),
            None,
        )
    }

    fn managed(op: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "Operation \"{op}\" is not allowed as this object's lifetime is managed by Key Vault."
            ),
            Some("SecretManagedByKeyVault"),
        )
    }

    /// The vault has no DNS name (it does not exist, or is soft-deleted).
    fn no_such_host(vault: &str) -> Self {
        Self::new(
            0,
            "NoSuchHost",
            format!("dial tcp: lookup {vault}.vault.azure.net: no such host"),
            None,
        )
    }

    /// The code recorded in the request log: the inner one when there is one.
    fn log_code(&self) -> &str {
        self.inner.as_deref().unwrap_or(&self.code)
    }

    fn into_response(self) -> Response {
        let mut err = json!({"code": self.code, "message": self.message});
        if let Some(i) = &self.inner {
            err["innererror"] = json!({"code": i});
        }
        let mut resp = json_resp(self.status, &json!({ "error": err }));
        resp.extensions_mut()
            .insert(ErrorCode(self.log_code().to_string()));
        resp
    }
}

/// A Key Vault error body (fault rules).
pub(crate) fn error_response(status: u16, code: &str, message: &str) -> Response {
    KvDenied::new(status, code, message, None).into_response()
}

/// The vault named by a data-plane host (`{vault}.vault.azure.net` and the sovereign
/// clouds' suffixes).
pub(crate) fn vault_of_host(host: &str) -> Option<String> {
    let h = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    [
        ".vault.azure.net",
        ".vault.usgovcloudapi.net",
        ".vault.azure.cn",
    ]
    .iter()
    .find_map(|s| h.strip_suffix(s))
    .filter(|v| !v.is_empty() && !v.contains('.'))
    .map(str::to_string)
}

fn now_s(now_ms: u64) -> i64 {
    (now_ms / 1000) as i64
}

// --- Functions for the rest of the simulator --------------------------------------------

/// Reads the current version of secret `name` in `vault` as `principal_object_id` would
/// (the AKS Key Vault Secrets Provider's identity mounting a SecretProviderClass object):
/// the vault must exist and not be soft-deleted (else status 0 `NoSuchHost`, the DNS error
/// the driver reports), the principal must be authorized by RBAC (a role assignment at the
/// vault or above with `secrets/getSecret/action`, else 403 `ForbiddenByRbac`) or by an
/// access policy with `secrets get` (else 403 `ForbiddenByPolicy`), and the secret must
/// exist and not be deleted (else 404 `SecretNotFound`) nor disabled (403 `SecretDisabled`).
/// The caller's scenario rules do not apply: this is always another principal.
pub(crate) fn read_secret_as(
    state: &State,
    vault: &str,
    name: &str,
    principal_object_id: &str,
) -> Result<KvSecret, KvDenied> {
    let v = vault_by_name(state, vault).ok_or_else(|| KvDenied::no_such_host(vault))?;
    let p = Principal {
        oid: principal_object_id.to_ascii_lowercase(),
        appid: None,
        tid: None,
        is_caller: false,
    };
    authz::check(
        state,
        None,
        v,
        &p,
        Act::SecretGet,
        &format!("secrets/{name}"),
    )?;
    let data = state.keyvault.vaults.get(&vault.to_ascii_lowercase());
    let obj = data
        .and_then(|d| d.secrets.get(&name.to_ascii_lowercase()))
        .filter(|s| s.deleted.is_none())
        .ok_or_else(|| KvDenied::secret_not_found(name))?;
    let ver = obj
        .versions
        .last()
        .ok_or_else(|| KvDenied::secret_not_found(name))?;
    if !ver.enabled {
        return Err(disabled());
    }
    Ok(KvSecret {
        value: ver.value.clone(),
        content_type: ver.content_type.clone(),
        nbf: ver.nbf,
        exp: ver.exp,
        tags: ver.tags.clone(),
        version: ver.version.clone(),
        id: format!(
            "https://{}.{}/secrets/{}/{}",
            vault.to_ascii_lowercase(),
            dns_suffix(str_at(&v.body, "/location").unwrap_or_default()),
            obj.name,
            ver.version
        ),
    })
}

fn disabled() -> KvDenied {
    KvDenied::new(
        403,
        "Forbidden",
        "Operation get is not allowed on a disabled secret.",
        Some("SecretDisabled"),
    )
}

/// Completes due certificate operations and purges objects whose retention ended.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let mut changed = vaults::tick(sim, &mut st.keyvault, now);
    let now_secs = now_s(now);
    for data in st.keyvault.vaults.values_mut() {
        let mut installs = Vec::new();
        for c in data.certificates.values_mut() {
            if let Some(p) = &mut c.pending
                && p.status == "inProgress"
                && p.done_ms.is_some_and(|d| d <= now)
                && let Some((cert, secret)) = p.staged.take()
            {
                p.status = "completed".into();
                c.versions.push(cert);
                installs.push((c.name.clone(), secret));
                changed = true;
            }
        }
        for (name, secret) in installs {
            let s = data
                .secrets
                .entry(name.to_ascii_lowercase())
                .or_insert_with(|| SecretObj {
                    name: name.clone(),
                    versions: Vec::new(),
                    managed: true,
                    deleted: None,
                });
            s.managed = true;
            s.versions.push(secret);
        }
        let before = data.secrets.len() + data.certificates.len();
        data.secrets
            .retain(|_, s| s.deleted.as_ref().is_none_or(|d| d.purge > now_secs));
        data.certificates
            .retain(|_, c| c.deleted.as_ref().is_none_or(|d| d.purge > now_secs));
        changed |= before != data.secrets.len() + data.certificates.len();
    }
    changed
}

// --- The data-plane surface ------------------------------------------------------------

/// The cloud a data-plane host belongs to, by its suffix.
fn cloud_of(host: &str, vault_location: &str) -> (&'static str, &'static str, &'static str) {
    let h = host.to_ascii_lowercase();
    let suffix = if h.contains(".vault.") {
        if h.contains("usgovcloudapi") {
            "vault.usgovcloudapi.net"
        } else if h.contains(".vault.azure.cn") {
            "vault.azure.cn"
        } else {
            "vault.azure.net"
        }
    } else {
        dns_suffix(vault_location)
    };
    let login = match suffix {
        "vault.usgovcloudapi.net" => "https://login.microsoftonline.us",
        "vault.azure.cn" => "https://login.chinacloudapi.cn",
        _ => "https://login.microsoftonline.com",
    };
    let resource = match suffix {
        "vault.usgovcloudapi.net" => "https://vault.usgovcloudapi.net",
        "vault.azure.cn" => "https://vault.azure.cn",
        _ => "https://vault.azure.net",
    };
    (suffix, login, resource)
}

/// Per-request context.
struct Kv<'a> {
    sim: &'a Simulator,
    req: &'a Req,
    now: u64,
    /// Lower-case vault name.
    vault: String,
    /// `https://{vault}.{suffix}`.
    base: String,
    api_version: String,
    /// The request path inside the vault (`/secrets/…`).
    path: String,
    principal: Principal,
}

/// What the synchronous part decided.
enum Step {
    Done(Response),
    /// A certificate to issue (outside the state lock), then [`commit_create`].
    Issue(Box<CreatePlan>),
}

struct CreatePlan {
    name: String,
    spec: x509::IssueSpec,
    policy: Value,
    issuer: String,
    enabled: bool,
    tags: BTreeMap<String, String>,
    content_type: String,
    exportable: bool,
}

/// Serves one data-plane request to `vault`; `None` when the vault has no DNS name (the
/// caller drops the connection, as a client sees an unresolvable host).
pub(crate) async fn handle(
    sim: &Simulator,
    req: &Req,
    vault: &str,
    rest: &[String],
) -> Option<Response> {
    let step = {
        let now = sim.now_ms();
        let mut st = lock(&sim.inner.state);
        tick(sim, &mut st, now);
        let v = vault_by_name(&st, vault)?.clone();
        match authenticate(sim, &st, req, &v, now, rest) {
            Err(r) => Step::Done(*r),
            Ok(kv) => match route(&kv, &mut st, &v, rest) {
                Ok(s) => s,
                Err(e) => Step::Done(e.into_response()),
            },
        }
    };
    let mut resp = match step {
        Step::Done(r) => r,
        Step::Issue(plan) => {
            let spec = plan.spec.clone();
            let now = sim.now_ms();
            let issued = tokio::task::spawn_blocking(move || x509::issue_self_signed(&spec, now))
                .await
                .unwrap_or_else(|e| Err(format!("certificate issuing failed: {e}")));
            let now = sim.now_ms();
            let mut st = lock(&sim.inner.state);
            let v = vault_by_name(&st, vault)?.clone();
            match authenticate(sim, &st, req, &v, now, rest) {
                Err(r) => *r,
                Ok(kv) => match commit_create(&kv, &mut st, *plan, issued) {
                    Ok(r) => r,
                    Err(e) => e.into_response(),
                },
            }
        }
    };
    set_header(&mut resp, "x-ms-keyvault-service-version", "1.9.1195.1");
    set_header(
        &mut resp,
        "x-ms-request-id",
        &uuid::Uuid::new_v4().to_string(),
    );
    Some(resp)
}

fn authenticate<'a>(
    sim: &'a Simulator,
    st: &State,
    req: &'a Req,
    v: &ArmResource,
    now: u64,
    rest: &[String],
) -> Result<Kv<'a>, Box<Response>> {
    let location = str_at(&v.body, "/location").unwrap_or_default();
    let (suffix, login, resource) = cloud_of(&req.host, location);
    let tenant = str_at(&v.body, "/properties/tenantId").unwrap_or_default();
    let challenge = |msg: &str| -> Box<Response> {
        let mut r = KvDenied::new(401, "Unauthorized", msg, None).into_response();
        set_header(
            &mut r,
            "www-authenticate",
            &format!("Bearer authorization=\"{login}/{tenant}\", resource=\"{resource}\""),
        );
        Box::new(r)
    };
    let missing = "AKV10000: Request is missing a Bearer or PoP token.";
    if crate::entra::bearer_token(req).is_none() {
        return Err(challenge(missing));
    }
    let Some(claims) = crate::entra::bearer_claims(req) else {
        return Err(challenge(missing));
    };
    let aud = str_at(&claims, "/aud").unwrap_or_default();
    let aud_ok = aud.trim_end_matches('/').eq_ignore_ascii_case(resource)
        || aud.eq_ignore_ascii_case(KEY_VAULT_APP_ID);
    if !aud_ok {
        return Err(challenge(&format!(
            "AKV10022: Invalid audience. Expected {resource}, found: {aud}."
        )));
    }
    let tid = str_at(&claims, "/tid").unwrap_or_default();
    if !tenant.is_empty() && !tid.eq_ignore_ascii_case(tenant) {
        return Err(challenge(&format!(
            "AKV10032: Invalid issuer. Expected one of https://sts.windows.net/{tenant}/, https://login.microsoftonline.com/{tenant}/v2.0, https://login.windows.net/{tenant}/, found: https://sts.windows.net/{tid}/."
        )));
    }
    let api_version = match req.q("api-version") {
        None => {
            return Err(Box::new(
                KvDenied::bad("The api-version query parameter is required.").into_response(),
            ));
        }
        Some(v) if !API_VERSIONS.contains(&v) => {
            return Err(Box::new(
                KvDenied::bad(format!(
                    "The specified version ({v}) is not recognized. Consider using the latest supported version (2026-04-01)."
                ))
                .into_response(),
            ));
        }
        Some(v) => v.to_string(),
    };
    let appid = str_at(&claims, "/appid").unwrap_or_default().to_string();
    let vault = v.name.to_ascii_lowercase();
    Ok(Kv {
        sim,
        req,
        now,
        base: format!("https://{vault}.{suffix}"),
        vault,
        api_version,
        path: format!("/{}", rest.join("/")),
        principal: Principal {
            oid: str_at(&claims, "/oid")
                .unwrap_or_default()
                .to_ascii_lowercase(),
            is_caller: !crate::graph::is_directory_principal(st, &appid),
            appid: Some(appid),
            tid: Some(tid.to_string()),
        },
    })
}

/// Secret and certificate names: 1–127 letters, digits and hyphens.
fn check_name(n: &str) -> Result<(), KvDenied> {
    let ok =
        (1..=127).contains(&n.len()) && n.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(KvDenied::bad(format!(
            "The request URI contains an invalid name: {n}"
        )))
    }
}

fn route(kv: &Kv<'_>, st: &mut State, v: &ArmResource, rest: &[String]) -> Result<Step, KvDenied> {
    let segs: Vec<&str> = rest.iter().map(String::as_str).collect();
    let sc = crate::preflight::scenario(kv.sim);
    let allow =
        |st: &State, act: Act, obj: &str| authz::check(st, Some(&sc), v, &kv.principal, act, obj);
    let done = |r: Result<Response, KvDenied>| r.map(Step::Done);
    let m = kv.req.method.clone();
    let lc = |s: &str| s.to_ascii_lowercase();
    let first = segs.first().map(|s| lc(s)).unwrap_or_default();
    let coll = first.as_str();
    if let Some(n) = segs.get(1) {
        check_name(n)?;
    }
    match (m, coll, &segs[1..]) {
        (Method::GET, "secrets", []) => {
            allow(st, Act::SecretList, "secrets")?;
            done(list_secrets(kv, st, v))
        }
        (Method::PUT, "secrets", [n]) => {
            allow(st, Act::SecretSet, &format!("secrets/{n}"))?;
            done(set_secret(kv, st, v, n))
        }
        (Method::GET, "secrets", [n, x]) if x.eq_ignore_ascii_case("versions") => {
            allow(st, Act::SecretList, &format!("secrets/{n}"))?;
            done(list_secret_versions(kv, st, v, n))
        }
        (Method::GET, "secrets", [n, rest @ ..]) if rest.len() <= 1 => {
            allow(st, Act::SecretGet, &format!("secrets/{n}"))?;
            done(get_secret(kv, st, v, n, rest.first().copied()))
        }
        (Method::PATCH, "secrets", [n, rest @ ..]) if rest.len() <= 1 => {
            allow(st, Act::SecretUpdate, &format!("secrets/{n}"))?;
            done(update_secret(kv, st, v, n, rest.first().copied()))
        }
        (Method::DELETE, "secrets", [n]) => {
            allow(st, Act::SecretDelete, &format!("secrets/{n}"))?;
            done(delete_secret(kv, st, v, n))
        }
        (Method::GET, "deletedsecrets", []) => {
            allow(st, Act::SecretList, "secrets")?;
            done(list_deleted(kv, st, v, Kind::Secret))
        }
        (Method::GET, "deletedsecrets", [n]) => {
            allow(st, Act::SecretList, &format!("secrets/{n}"))?;
            done(get_deleted(kv, st, v, Kind::Secret, n))
        }
        (Method::DELETE, "deletedsecrets", [n]) => {
            allow(st, Act::SecretPurge, &format!("secrets/{n}"))?;
            done(purge(kv, st, v, Kind::Secret, n))
        }
        (Method::POST, "deletedsecrets", [n, r]) if r.eq_ignore_ascii_case("recover") => {
            allow(st, Act::SecretRecover, &format!("secrets/{n}"))?;
            done(recover(kv, st, v, Kind::Secret, n))
        }
        (Method::GET, "certificates", []) => {
            allow(st, Act::CertList, "certificates")?;
            done(list_certs(kv, st, v))
        }
        (Method::POST, "certificates", [n, c]) if c.eq_ignore_ascii_case("create") => {
            allow(st, Act::CertCreate, &format!("certificates/{n}"))?;
            plan_create(kv, st, v, n).map(|p| Step::Issue(Box::new(p)))
        }
        (Method::GET, "certificates", [n, p]) if p.eq_ignore_ascii_case("pending") => {
            allow(st, Act::CertRead, &format!("certificates/{n}"))?;
            done(get_pending(kv, st, n))
        }
        (Method::GET, "certificates", [n, p]) if p.eq_ignore_ascii_case("policy") => {
            allow(st, Act::CertRead, &format!("certificates/{n}"))?;
            done(get_policy(kv, st, n))
        }
        (Method::GET, "certificates", [n, x]) if x.eq_ignore_ascii_case("versions") => {
            allow(st, Act::CertList, &format!("certificates/{n}"))?;
            done(list_cert_versions(kv, st, v, n))
        }
        (Method::GET, "certificates", [n, rest @ ..]) if rest.len() <= 1 => {
            allow(st, Act::CertRead, &format!("certificates/{n}"))?;
            done(get_cert(kv, st, v, n, rest.first().copied()))
        }
        (Method::DELETE, "certificates", [n]) => {
            allow(st, Act::CertDelete, &format!("certificates/{n}"))?;
            done(delete_cert(kv, st, v, n))
        }
        (Method::GET, "deletedcertificates", []) => {
            allow(st, Act::CertList, "certificates")?;
            done(list_deleted(kv, st, v, Kind::Cert))
        }
        (Method::GET, "deletedcertificates", [n]) => {
            allow(st, Act::CertRead, &format!("certificates/{n}"))?;
            done(get_deleted(kv, st, v, Kind::Cert, n))
        }
        (Method::DELETE, "deletedcertificates", [n]) => {
            allow(st, Act::CertPurge, &format!("certificates/{n}"))?;
            done(purge(kv, st, v, Kind::Cert, n))
        }
        (Method::POST, "deletedcertificates", [n, r]) if r.eq_ignore_ascii_case("recover") => {
            allow(st, Act::CertRecover, &format!("certificates/{n}"))?;
            done(recover(kv, st, v, Kind::Cert, n))
        }
        (m, _, _) => Err(KvDenied::new(
            400,
            "BadParameter",
            format!(
                "The request {m} {} is not served by the simulated Key Vault (see the keyvault module for the operations modelled).",
                kv.path
            ),
            None,
        )),
    }
}

// --- Helpers ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Secret,
    Cert,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Secret => "Secret",
            Kind::Cert => "Certificate",
        }
    }
    fn deleted_path(self) -> &'static str {
        match self {
            Kind::Secret => "deletedsecrets",
            Kind::Cert => "deletedcertificates",
        }
    }
}

fn data<'s>(st: &'s mut State, vault: &str) -> &'s mut VaultData {
    st.keyvault.vaults.entry(vault.to_string()).or_default()
}

fn retention_days(v: &ArmResource) -> i64 {
    v.body
        .pointer("/properties/softDeleteRetentionInDays")
        .and_then(Value::as_i64)
        .unwrap_or(90)
}

fn purge_protected(v: &ArmResource) -> bool {
    v.body
        .pointer("/properties/enablePurgeProtection")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn new_version(kv: &Kv<'_>, st: &mut State) -> String {
    crate::util::uuid(st, kv.sim.config().seed)
        .simple()
        .to_string()
}

fn body_map(kv: &Kv<'_>) -> Result<Map<String, Value>, KvDenied> {
    match kv.req.json_body() {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        _ => Err(KvDenied::bad(
            "The request body is not a valid JSON object.",
        )),
    }
}

fn tags_of(v: Option<&Value>) -> Result<BTreeMap<String, String>, KvDenied> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|s| (k.clone(), s.to_string()))
                    .ok_or_else(|| {
                        KvDenied::bad(format!("Invalid value for tag '{k}': tags are strings."))
                    })
            })
            .collect(),
        Some(_) => Err(KvDenied::bad("tags must be an object of strings.")),
    }
}

fn attrs_json(
    v: &ArmResource,
    enabled: bool,
    nbf: Option<i64>,
    exp: Option<i64>,
    created: i64,
    updated: i64,
) -> Value {
    let mut a = json!({
        "enabled": enabled,
        "created": created,
        "updated": updated,
        "recoveryLevel": if purge_protected(v) { "Recoverable" } else { "Recoverable+Purgeable" },
        "recoverableDays": retention_days(v),
    });
    if let Some(n) = nbf {
        a["nbf"] = json!(n);
    }
    if let Some(e) = exp {
        a["exp"] = json!(e);
    }
    a
}

fn secret_bundle(
    kv: &Kv<'_>,
    v: &ArmResource,
    obj: &SecretObj,
    ver: &SecretVersion,
    with_value: bool,
) -> Value {
    let mut b = json!({
        "id": format!("{}/secrets/{}/{}", kv.base, obj.name, ver.version),
        "attributes": attrs_json(v, ver.enabled, ver.nbf, ver.exp, ver.created, ver.updated),
        "tags": ver.tags,
    });
    if with_value {
        b["value"] = json!(ver.value);
    }
    if let Some(ct) = &ver.content_type {
        b["contentType"] = json!(ct);
    }
    if obj.managed {
        b["managed"] = json!(true);
        b["kid"] = json!(format!("{}/keys/{}/{}", kv.base, obj.name, ver.version));
    }
    b
}

fn deleted_fields(kv: &Kv<'_>, kind: Kind, name: &str, d: &Deletion, into: &mut Value) {
    into["recoveryId"] = json!(format!("{}/{}/{name}", kv.base, kind.deleted_path()));
    into["deletedDate"] = json!(d.deleted);
    into["scheduledPurgeDate"] = json!(d.purge);
}

fn policy_json(kv: &Kv<'_>, c: &CertObj) -> Value {
    let mut p = c.policy.clone();
    p["id"] = json!(format!("{}/certificates/{}/policy", kv.base, c.name));
    p["attributes"] =
        json!({"enabled": true, "created": c.policy_created, "updated": c.policy_updated});
    p
}

fn cert_bundle(kv: &Kv<'_>, v: &ArmResource, c: &CertObj, ver: &CertVersion) -> Value {
    json!({
        "id": format!("{}/certificates/{}/{}", kv.base, c.name, ver.version),
        "kid": format!("{}/keys/{}/{}", kv.base, c.name, ver.version),
        "sid": format!("{}/secrets/{}/{}", kv.base, c.name, ver.version),
        "x5t": ver.x5t,
        "cer": ver.cer,
        "attributes": attrs_json(v, ver.enabled, Some(ver.nbf), Some(ver.exp), ver.created, ver.updated),
        "policy": policy_json(kv, c),
        "tags": ver.tags,
    })
}

/// One page of a list (`maxresults` 1–25, default 25; `$skiptoken` = offset).
fn page(kv: &Kv<'_>, items: Vec<Value>) -> Result<Response, KvDenied> {
    let max = match kv.req.q("maxresults") {
        None => 25,
        Some(m) => match m.parse::<usize>() {
            Ok(n) if (1..=25).contains(&n) => n,
            _ => {
                return Err(KvDenied::bad(format!(
                    "Invalid maxresults: {m}. The value must be between 1 and 25."
                )));
            }
        },
    };
    let skip: usize = kv
        .req
        .q("$skiptoken")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let total = items.len();
    let chunk: Vec<Value> = items.into_iter().skip(skip).take(max).collect();
    let next = (skip + max < total).then(|| {
        format!(
            "{}{}?api-version={}&$skiptoken={}&maxresults={max}",
            kv.base,
            kv.path,
            kv.api_version,
            skip + max
        )
    });
    Ok(json_resp(200, &json!({"value": chunk, "nextLink": next})))
}

/// 409 for a name whose object is soft-deleted (still being deleted, or recoverable).
fn deleted_conflict(kv: &Kv<'_>, kind: Kind, name: &str, d: &Deletion) -> KvDenied {
    if kv.now < d.visible_ms {
        KvDenied::new(
            409,
            "Conflict",
            format!(
                "{} {name} is currently being deleted and cannot be re-created; retry later.",
                kind.word()
            ),
            Some("ObjectIsBeingDeleted"),
        )
    } else {
        KvDenied::new(
            409,
            "Conflict",
            format!(
                "{} {name} is currently in a deleted but recoverable state, and its name cannot be reused; in this state, the {} can only be recovered or purged.",
                kind.word(),
                kind.word().to_ascii_lowercase()
            ),
            Some("ObjectIsDeletedButRecoverable"),
        )
    }
}

fn deletion(kv: &Kv<'_>, v: &ArmResource) -> Deletion {
    let running = kv.sim.scaled(
        kv.sim
            .config()
            .latency
            .delete_for("Microsoft.KeyVault/vaults/secrets"),
    );
    let retention = kv.sim.scaled(Duration::from_secs(
        retention_days(v).max(0) as u64 * 86_400,
    ));
    Deletion {
        deleted: now_s(kv.now),
        visible_ms: kv.now + running,
        purge: now_s(kv.now + retention),
    }
}

// --- Secrets ---------------------------------------------------------------------------

fn live_secret<'s>(st: &'s State, kv: &Kv<'_>, name: &str) -> Result<&'s SecretObj, KvDenied> {
    st.keyvault
        .vaults
        .get(&kv.vault)
        .and_then(|d| d.secrets.get(&name.to_ascii_lowercase()))
        .filter(|s| s.deleted.is_none() && !s.versions.is_empty())
        .ok_or_else(|| KvDenied::secret_not_found(name))
}

fn set_secret(
    kv: &Kv<'_>,
    st: &mut State,
    v: &ArmResource,
    name: &str,
) -> Result<Response, KvDenied> {
    let body = body_map(kv)?;
    let Some(value) = body.get("value").and_then(Value::as_str) else {
        return Err(KvDenied::bad(
            "The parameter 'value' is required and must be a string.",
        ));
    };
    if value.len() > MAX_SECRET {
        return Err(KvDenied::bad(
            "The secret value exceeds the maximum size of 25 KB.",
        ));
    }
    let key = name.to_ascii_lowercase();
    {
        let d = data(st, &kv.vault);
        if let Some(s) = d.secrets.get(&key) {
            if let Some(del) = &s.deleted {
                return Err(deleted_conflict(kv, Kind::Secret, name, del));
            }
            if s.managed {
                return Err(KvDenied::managed("set"));
            }
        }
        if d.certificates.contains_key(&key) {
            return Err(KvDenied::managed("set"));
        }
    }
    let attrs = body.get("attributes").cloned().unwrap_or(Value::Null);
    let tags = tags_of(body.get("tags"))?;
    let version = new_version(kv, st);
    let ts = now_s(kv.now);
    let ver = SecretVersion {
        version,
        value: value.to_string(),
        content_type: body
            .get("contentType")
            .and_then(Value::as_str)
            .map(str::to_string),
        enabled: attrs
            .get("enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        nbf: attrs.get("nbf").and_then(Value::as_i64),
        exp: attrs.get("exp").and_then(Value::as_i64),
        created: ts,
        updated: ts,
        tags,
    };
    let d = data(st, &kv.vault);
    let obj = d.secrets.entry(key).or_insert_with(|| SecretObj {
        name: name.to_string(),
        versions: Vec::new(),
        managed: false,
        deleted: None,
    });
    obj.versions.push(ver.clone());
    let obj = obj.clone();
    Ok(json_resp(200, &secret_bundle(kv, v, &obj, &ver, true)))
}

fn find_version<'o, T>(
    versions: &'o [T],
    version: Option<&str>,
    id: impl Fn(&T) -> &str,
) -> Option<&'o T> {
    match version {
        None => versions.last(),
        Some(want) => versions.iter().find(|x| id(x).eq_ignore_ascii_case(want)),
    }
}

fn get_secret(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    name: &str,
    version: Option<&str>,
) -> Result<Response, KvDenied> {
    let obj = live_secret(st, kv, name)?;
    let ver = find_version(&obj.versions, version, |x| &x.version).ok_or_else(|| {
        KvDenied::secret_not_found(&format!("{name}/{}", version.unwrap_or_default()))
    })?;
    if !ver.enabled {
        return Err(disabled());
    }
    Ok(json_resp(200, &secret_bundle(kv, v, obj, ver, true)))
}

fn update_secret(
    kv: &Kv<'_>,
    st: &mut State,
    v: &ArmResource,
    name: &str,
    version: Option<&str>,
) -> Result<Response, KvDenied> {
    let body = body_map(kv)?;
    let obj = live_secret(st, kv, name)?;
    if obj.managed {
        return Err(KvDenied::managed("update"));
    }
    let tags = body.get("tags").map(|t| tags_of(Some(t))).transpose()?;
    let ts = now_s(kv.now);
    let key = name.to_ascii_lowercase();
    let d = data(st, &kv.vault);
    let Some(obj) = d.secrets.get_mut(&key) else {
        return Err(KvDenied::secret_not_found(name));
    };
    let idx = match version {
        None => obj.versions.len().checked_sub(1),
        Some(want) => obj
            .versions
            .iter()
            .position(|x| x.version.eq_ignore_ascii_case(want)),
    }
    .ok_or_else(|| {
        KvDenied::secret_not_found(&format!("{name}/{}", version.unwrap_or_default()))
    })?;
    let ver = &mut obj.versions[idx];
    if let Some(ct) = body.get("contentType") {
        ver.content_type = ct.as_str().map(str::to_string);
    }
    if let Some(a) = body.get("attributes") {
        if let Some(e) = a.get("enabled").and_then(Value::as_bool) {
            ver.enabled = e;
        }
        if let Some(n) = a.get("nbf") {
            ver.nbf = n.as_i64();
        }
        if let Some(x) = a.get("exp") {
            ver.exp = x.as_i64();
        }
    }
    if let Some(t) = tags {
        ver.tags = t;
    }
    ver.updated = ts;
    let ver = ver.clone();
    let obj = obj.clone();
    Ok(json_resp(200, &secret_bundle(kv, v, &obj, &ver, false)))
}

fn secret_item(
    kv: &Kv<'_>,
    v: &ArmResource,
    obj: &SecretObj,
    ver: &SecretVersion,
    with_version: bool,
) -> Value {
    let mut b = secret_bundle(kv, v, obj, ver, false);
    if !with_version {
        b["id"] = json!(format!("{}/secrets/{}", kv.base, obj.name));
    }
    if let Value::Object(m) = &mut b {
        m.remove("kid");
    }
    b
}

fn list_secrets(kv: &Kv<'_>, st: &State, v: &ArmResource) -> Result<Response, KvDenied> {
    let items: Vec<Value> = st
        .keyvault
        .vaults
        .get(&kv.vault)
        .map(|d| {
            d.secrets
                .values()
                .filter(|s| s.deleted.is_none())
                .filter_map(|s| {
                    s.versions
                        .last()
                        .map(|ver| secret_item(kv, v, s, ver, false))
                })
                .collect()
        })
        .unwrap_or_default();
    page(kv, items)
}

fn list_secret_versions(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    name: &str,
) -> Result<Response, KvDenied> {
    let obj = live_secret(st, kv, name)?;
    let items = obj
        .versions
        .iter()
        .map(|ver| secret_item(kv, v, obj, ver, true))
        .collect();
    page(kv, items)
}

fn delete_secret(
    kv: &Kv<'_>,
    st: &mut State,
    v: &ArmResource,
    name: &str,
) -> Result<Response, KvDenied> {
    let obj = live_secret(st, kv, name)?;
    if obj.managed {
        return Err(KvDenied::managed("delete"));
    }
    let del = deletion(kv, v);
    let key = name.to_ascii_lowercase();
    let d = data(st, &kv.vault);
    let Some(obj) = d.secrets.get_mut(&key) else {
        return Err(KvDenied::secret_not_found(name));
    };
    obj.deleted = Some(del.clone());
    let obj = obj.clone();
    let Some(ver) = obj.versions.last() else {
        return Err(KvDenied::secret_not_found(name));
    };
    let mut b = secret_bundle(kv, v, &obj, ver, false);
    deleted_fields(kv, Kind::Secret, &obj.name, &del, &mut b);
    Ok(json_resp(200, &b))
}

// --- Deleted objects -------------------------------------------------------------------

fn deleted_not_found(kind: Kind, name: &str) -> KvDenied {
    let code = match kind {
        Kind::Secret => "SecretNotFound",
        Kind::Cert => "CertificateNotFound",
    };
    KvDenied::new(
        404,
        code,
        format!("Deleted {} not found: {name}", kind.word()),
        None,
    )
}

/// The deleted-object view of a name: its rendered bundle, deletion, and whether it is a
/// certificate's secret.
fn deleted_view(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    kind: Kind,
    name: &str,
) -> Option<(Value, Deletion, bool)> {
    let d = st.keyvault.vaults.get(&kv.vault)?;
    let key = name.to_ascii_lowercase();
    match kind {
        Kind::Secret => {
            let s = d.secrets.get(&key)?;
            let del = s.deleted.clone()?;
            let ver = s.versions.last()?;
            let mut b = secret_bundle(kv, v, s, ver, false);
            deleted_fields(kv, kind, &s.name, &del, &mut b);
            Some((b, del, s.managed))
        }
        Kind::Cert => {
            let c = d.certificates.get(&key)?;
            let del = c.deleted.clone()?;
            let mut b = match c.versions.last() {
                Some(ver) => cert_bundle(kv, v, c, ver),
                None => {
                    json!({"id": format!("{}/certificates/{}", kv.base, c.name), "policy": policy_json(kv, c)})
                }
            };
            deleted_fields(kv, kind, &c.name, &del, &mut b);
            Some((b, del, false))
        }
    }
}

fn get_deleted(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    kind: Kind,
    name: &str,
) -> Result<Response, KvDenied> {
    match deleted_view(kv, st, v, kind, name) {
        Some((b, del, _)) if kv.now >= del.visible_ms => Ok(json_resp(200, &b)),
        _ => Err(deleted_not_found(kind, name)),
    }
}

fn list_deleted(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    kind: Kind,
) -> Result<Response, KvDenied> {
    let names: Vec<String> = st
        .keyvault
        .vaults
        .get(&kv.vault)
        .map(|d| match kind {
            Kind::Secret => d.secrets.values().map(|s| s.name.clone()).collect(),
            Kind::Cert => d.certificates.values().map(|c| c.name.clone()).collect(),
        })
        .unwrap_or_default();
    let items: Vec<Value> = names
        .iter()
        .filter_map(|n| deleted_view(kv, st, v, kind, n))
        .filter(|(_, del, _)| kv.now >= del.visible_ms)
        .map(|(mut b, _, _)| {
            // Items carry the id without version and no policy/value.
            if let Value::Object(m) = &mut b {
                m.remove("policy");
                m.remove("cer");
                m.remove("kid");
                m.remove("sid");
            }
            let coll = if kind == Kind::Secret {
                "secrets"
            } else {
                "certificates"
            };
            let n = b["recoveryId"]
                .as_str()
                .and_then(|r| r.rsplit('/').next())
                .unwrap_or_default()
                .to_string();
            b["id"] = json!(format!("{}/{coll}/{n}", kv.base));
            b
        })
        .collect();
    page(kv, items)
}

fn check_deleted_op(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    kind: Kind,
    name: &str,
    op: &str,
) -> Result<(), KvDenied> {
    let Some((_, del, managed)) = deleted_view(kv, st, v, kind, name) else {
        return Err(deleted_not_found(kind, name));
    };
    if kv.now < del.visible_ms {
        return Err(KvDenied::new(
            409,
            "Conflict",
            format!("{} {name} is currently being deleted.", kind.word()),
            Some("ObjectIsBeingDeleted"),
        ));
    }
    if managed {
        return Err(KvDenied::managed(op));
    }
    Ok(())
}

fn purge(
    kv: &Kv<'_>,
    st: &mut State,
    v: &ArmResource,
    kind: Kind,
    name: &str,
) -> Result<Response, KvDenied> {
    check_deleted_op(kv, st, v, kind, name, "purge")?;
    if purge_protected(v) {
        return Err(KvDenied::new(
            403,
            "Forbidden",
            "Operation \"purge\" is not allowed because purge protection is enabled for this vault. Key Vault service will automatically purge it after the retention period has passed.",
            None,
        ));
    }
    let key = name.to_ascii_lowercase();
    let d = data(st, &kv.vault);
    match kind {
        Kind::Secret => {
            d.secrets.remove(&key);
        }
        Kind::Cert => {
            d.certificates.remove(&key);
            if d.secrets.get(&key).is_some_and(|s| s.managed) {
                d.secrets.remove(&key);
            }
        }
    }
    Ok(crate::http::empty(204))
}

fn recover(
    kv: &Kv<'_>,
    st: &mut State,
    v: &ArmResource,
    kind: Kind,
    name: &str,
) -> Result<Response, KvDenied> {
    check_deleted_op(kv, st, v, kind, name, "recover")?;
    let key = name.to_ascii_lowercase();
    let d = data(st, &kv.vault);
    match kind {
        Kind::Secret => {
            if let Some(s) = d.secrets.get_mut(&key) {
                s.deleted = None;
            }
        }
        Kind::Cert => {
            if let Some(c) = d.certificates.get_mut(&key) {
                c.deleted = None;
            }
            if let Some(s) = d.secrets.get_mut(&key).filter(|s| s.managed) {
                s.deleted = None;
            }
        }
    }
    let d = st.keyvault.vaults.get(&kv.vault);
    let body = match kind {
        Kind::Secret => d.and_then(|d| d.secrets.get(&key)).and_then(|s| {
            s.versions
                .last()
                .map(|ver| secret_bundle(kv, v, s, ver, false))
        }),
        Kind::Cert => d
            .and_then(|d| d.certificates.get(&key))
            .and_then(|c| c.versions.last().map(|ver| cert_bundle(kv, v, c, ver))),
    };
    Ok(json_resp(200, &body.unwrap_or(Value::Null)))
}

// --- Certificates ----------------------------------------------------------------------

fn live_cert<'s>(st: &'s State, kv: &Kv<'_>, name: &str) -> Result<&'s CertObj, KvDenied> {
    st.keyvault
        .vaults
        .get(&kv.vault)
        .and_then(|d| d.certificates.get(&name.to_ascii_lowercase()))
        .filter(|c| c.deleted.is_none())
        .ok_or_else(|| KvDenied::cert_not_found(name))
}

/// Validates a `CertificatePolicy` and fills in Key Vault's defaults.
fn normalize_policy(p: &Value) -> Result<(Value, x509::IssueSpec, String, String, bool), KvDenied> {
    let kp = p.get("key_props").cloned().unwrap_or_else(|| json!({}));
    let kty = kp
        .get("kty")
        .and_then(Value::as_str)
        .unwrap_or("RSA")
        .to_string();
    if !(kty == "RSA" || kty == "RSA-HSM") {
        return Err(KvDenied::bad(format!(
            "hcp-simulator: key_props.kty '{kty}' is not modelled; certificates are issued with RSA keys (kty RSA)."
        )));
    }
    let key_size = kp.get("key_size").and_then(Value::as_u64).unwrap_or(2048) as u32;
    if ![2048, 3072, 4096].contains(&key_size) {
        return Err(KvDenied::bad(format!(
            "Invalid key size {key_size}: RSA keys are 2048, 3072 or 4096 bits."
        )));
    }
    let exportable = kp
        .get("exportable")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let reuse = kp
        .get("reuse_key")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let content_type = p
        .pointer("/secret_props/contentType")
        .and_then(Value::as_str)
        .unwrap_or("application/x-pkcs12")
        .to_string();
    match content_type.as_str() {
        "application/x-pem-file" => {}
        "application/x-pkcs12" => {
            return Err(KvDenied::bad(
                "hcp-simulator: secret_props.contentType 'application/x-pkcs12' (Key Vault's default when none is given) is not modelled: the simulator issues PEM secrets only; set 'application/x-pem-file'.",
            ));
        }
        other => {
            return Err(KvDenied::bad(format!(
                "Invalid content type '{other}': certificate secrets are 'application/x-pkcs12' or 'application/x-pem-file'."
            )));
        }
    }
    let issuer = p
        .pointer("/issuer/name")
        .and_then(Value::as_str)
        .unwrap_or("Unknown")
        .to_string();
    if !(issuer == "Self" || issuer == "Unknown") {
        return Err(KvDenied::bad(format!(
            "hcp-simulator: issuer '{issuer}' is not modelled; use the issuer 'Self'."
        )));
    }
    let xp = p.get("x509_props").cloned().unwrap_or_else(|| json!({}));
    let Some(subject) = xp
        .get("subject")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return Err(KvDenied::bad(
            "The x509_props.subject of the certificate policy is required.",
        ));
    };
    x509::parse_subject(&subject).map_err(KvDenied::bad)?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let dns_names = strings(xp.pointer("/sans/dns_names"));
    let emails = strings(xp.pointer("/sans/emails"));
    let validity = match xp.get("validity_months") {
        None | Some(Value::Null) => 12,
        Some(v) => match v.as_u64() {
            Some(m) if (1..=1200).contains(&m) => m as u32,
            _ => return Err(KvDenied::bad(format!("Invalid validity_months: {v}."))),
        },
    };
    let mut key_usage = strings(xp.get("key_usage"));
    if xp.get("key_usage").is_none() {
        key_usage = vec!["digitalSignature".into(), "keyEncipherment".into()];
    }
    let mut ekus = strings(xp.get("ekus"));
    if xp.get("ekus").is_none() {
        ekus = vec!["1.3.6.1.5.5.7.3.1".into(), "1.3.6.1.5.5.7.3.2".into()];
    }
    let mut x509_props = json!({
        "subject": subject,
        "ekus": ekus,
        "key_usage": key_usage,
        "validity_months": validity,
        "basic_constraints": {"ca": false},
    });
    if let Some(s) = xp.get("sans") {
        x509_props["sans"] = s.clone();
    }
    let lifetime = p.get("lifetime_actions").cloned().unwrap_or_else(
        || json!([{"trigger": {"lifetime_percentage": 80}, "action": {"action_type": "AutoRenew"}}]),
    );
    let policy = json!({
        "key_props": {"exportable": exportable, "kty": kty, "key_size": key_size, "reuse_key": reuse},
        "secret_props": {"contentType": content_type},
        "x509_props": x509_props,
        "lifetime_actions": lifetime,
        "issuer": {"name": issuer},
    });
    let spec = x509::IssueSpec {
        subject,
        dns_names,
        emails,
        validity_months: validity,
        key_size,
        key_usage,
        ekus,
    };
    Ok((policy, spec, issuer, content_type, exportable))
}

fn create_conflicts(kv: &Kv<'_>, st: &State, name: &str) -> Result<(), KvDenied> {
    let Some(d) = st.keyvault.vaults.get(&kv.vault) else {
        return Ok(());
    };
    let key = name.to_ascii_lowercase();
    if let Some(c) = d.certificates.get(&key) {
        if let Some(del) = &c.deleted {
            return Err(deleted_conflict(kv, Kind::Cert, name, del));
        }
        if c.pending.as_ref().is_some_and(|p| p.status == "inProgress") {
            return Err(KvDenied::new(
                409,
                "Conflict",
                format!(
                    "There was a conflict while updating pending certificate '{}/certificates/{}/pending'. This can happen when multiple operations are performed in parallel against the pending certificate. To avoid this error, perform operations against the pending certificate in a sequential manner.",
                    kv.base, c.name
                ),
                None,
            ));
        }
    }
    if let Some(s) = d.secrets.get(&key)
        && !s.managed
    {
        if let Some(del) = &s.deleted {
            return Err(deleted_conflict(kv, Kind::Secret, name, del));
        }
        return Err(KvDenied::new(
            409,
            "Conflict",
            format!(
                "A secret named {name} already exists; a certificate's secret would take its name."
            ),
            None,
        ));
    }
    Ok(())
}

fn plan_create(
    kv: &Kv<'_>,
    st: &State,
    _v: &ArmResource,
    name: &str,
) -> Result<CreatePlan, KvDenied> {
    let body = body_map(kv)?;
    create_conflicts(kv, st, name)?;
    let stored = st
        .keyvault
        .vaults
        .get(&kv.vault)
        .and_then(|d| d.certificates.get(&name.to_ascii_lowercase()))
        .map(|c| c.policy.clone());
    let policy = match (body.get("policy"), stored) {
        (Some(p), _) if p.is_object() => p.clone(),
        (_, Some(p)) => p,
        _ => {
            return Err(KvDenied::bad(
                "The certificate policy is required to create a new certificate.",
            ));
        }
    };
    let (policy, spec, issuer, content_type, exportable) = normalize_policy(&policy)?;
    Ok(CreatePlan {
        name: name.to_string(),
        spec,
        policy,
        issuer,
        enabled: body
            .get("attributes")
            .and_then(|a| a.get("enabled"))
            .and_then(Value::as_bool)
            .unwrap_or(true),
        tags: tags_of(body.get("tags"))?,
        content_type,
        exportable,
    })
}

fn operation_json(kv: &Kv<'_>, c: &CertObj, p: &Pending) -> Value {
    let mut op = json!({
        "id": format!("{}/certificates/{}/pending", kv.base, c.name),
        "issuer": {"name": p.issuer},
        "csr": p.csr,
        "cancellation_requested": false,
        "status": p.status,
        "request_id": p.request_id,
    });
    if p.status == "completed" {
        op["target"] = json!(format!("{}/certificates/{}", kv.base, c.name));
    } else {
        op["status_details"] = json!(
            "Pending certificate created. Certificate request is in progress. This may take some time based on the issuer provider. Please check again later."
        );
    }
    op
}

fn commit_create(
    kv: &Kv<'_>,
    st: &mut State,
    plan: CreatePlan,
    issued: Result<x509::Issued, String>,
) -> Result<Response, KvDenied> {
    create_conflicts(kv, st, &plan.name)?;
    let issued = issued.map_err(|e| KvDenied::new(500, "InternalServerError", e, None))?;
    let version = new_version(kv, st);
    let request_id = new_version(kv, st);
    let ts = now_s(kv.now);
    let cert = CertVersion {
        version: version.clone(),
        cer: STANDARD.encode(&issued.cert_der),
        x5t: URL_SAFE_NO_PAD.encode(sha1(&issued.cert_der)),
        enabled: plan.enabled,
        nbf: issued.not_before,
        exp: issued.not_after,
        created: ts,
        updated: ts,
        tags: plan.tags.clone(),
    };
    let value = if plan.exportable {
        format!("{}{}", issued.key_pem, issued.cert_pem)
    } else {
        issued.cert_pem.clone()
    };
    let secret = SecretVersion {
        version,
        value,
        content_type: Some(plan.content_type.clone()),
        enabled: plan.enabled,
        nbf: Some(issued.not_before),
        exp: Some(issued.not_after),
        created: ts,
        updated: ts,
        tags: plan.tags.clone(),
    };
    let self_issued = plan.issuer == "Self";
    let done_ms = self_issued.then(|| {
        kv.now
            + kv.sim.scaled(
                kv.sim
                    .config()
                    .latency
                    .put_for("Microsoft.KeyVault/vaults/certificates"),
            )
    });
    let d = data(st, &kv.vault);
    let c = d
        .certificates
        .entry(plan.name.to_ascii_lowercase())
        .or_insert_with(|| CertObj {
            name: plan.name.clone(),
            versions: Vec::new(),
            policy: Value::Null,
            policy_created: ts,
            policy_updated: ts,
            pending: None,
            deleted: None,
        });
    c.policy = plan.policy;
    c.policy_updated = ts;
    c.pending = Some(Pending {
        request_id,
        csr: STANDARD.encode(&issued.csr_der),
        issuer: plan.issuer,
        status: "inProgress".into(),
        done_ms,
        staged: self_issued.then_some((cert, secret)),
    });
    let c = c.clone();
    let Some(p) = &c.pending else {
        return Err(KvDenied::new(
            500,
            "InternalServerError",
            "lost the pending operation",
            None,
        ));
    };
    let mut resp = json_resp(202, &operation_json(kv, &c, p));
    set_header(
        &mut resp,
        "location",
        &format!(
            "{}/certificates/{}/pending?api-version={}&request_id={}",
            kv.base, c.name, kv.api_version, p.request_id
        ),
    );
    set_header(&mut resp, "retry-after", "10");
    Ok(resp)
}

fn get_pending(kv: &Kv<'_>, st: &State, name: &str) -> Result<Response, KvDenied> {
    let not_found = || {
        KvDenied::new(
            404,
            "PendingCertificateNotFound",
            format!("Pending certificate not found: {name}"),
            None,
        )
    };
    let c = live_cert(st, kv, name).map_err(|_| not_found())?;
    let p = c.pending.as_ref().ok_or_else(not_found)?;
    Ok(json_resp(200, &operation_json(kv, c, p)))
}

fn get_policy(kv: &Kv<'_>, st: &State, name: &str) -> Result<Response, KvDenied> {
    let c = live_cert(st, kv, name)?;
    Ok(json_resp(200, &policy_json(kv, c)))
}

fn get_cert(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    name: &str,
    version: Option<&str>,
) -> Result<Response, KvDenied> {
    let c = live_cert(st, kv, name)?;
    let ver = find_version(&c.versions, version, |x| &x.version).ok_or_else(|| match version {
        Some(ver) => KvDenied::cert_not_found(&format!("{name}/{ver}")),
        None => KvDenied::cert_not_found(name),
    })?;
    Ok(json_resp(200, &cert_bundle(kv, v, c, ver)))
}

fn cert_item(
    kv: &Kv<'_>,
    v: &ArmResource,
    c: &CertObj,
    ver: &CertVersion,
    with_version: bool,
) -> Value {
    let id = if with_version {
        format!("{}/certificates/{}/{}", kv.base, c.name, ver.version)
    } else {
        format!("{}/certificates/{}", kv.base, c.name)
    };
    json!({
        "id": id,
        "x5t": ver.x5t,
        "attributes": attrs_json(v, ver.enabled, Some(ver.nbf), Some(ver.exp), ver.created, ver.updated),
        "tags": ver.tags,
    })
}

fn list_certs(kv: &Kv<'_>, st: &State, v: &ArmResource) -> Result<Response, KvDenied> {
    let items: Vec<Value> = st
        .keyvault
        .vaults
        .get(&kv.vault)
        .map(|d| {
            d.certificates
                .values()
                .filter(|c| c.deleted.is_none())
                .filter_map(|c| c.versions.last().map(|ver| cert_item(kv, v, c, ver, false)))
                .collect()
        })
        .unwrap_or_default();
    page(kv, items)
}

fn list_cert_versions(
    kv: &Kv<'_>,
    st: &State,
    v: &ArmResource,
    name: &str,
) -> Result<Response, KvDenied> {
    let c = live_cert(st, kv, name)?;
    let items = c
        .versions
        .iter()
        .map(|ver| cert_item(kv, v, c, ver, true))
        .collect();
    page(kv, items)
}

fn delete_cert(
    kv: &Kv<'_>,
    st: &mut State,
    v: &ArmResource,
    name: &str,
) -> Result<Response, KvDenied> {
    live_cert(st, kv, name)?;
    let del = deletion(kv, v);
    let key = name.to_ascii_lowercase();
    let d = data(st, &kv.vault);
    if let Some(c) = d.certificates.get_mut(&key) {
        c.deleted = Some(del.clone());
        c.pending = None;
    }
    if let Some(s) = d.secrets.get_mut(&key).filter(|s| s.managed) {
        s.deleted = Some(del.clone());
    }
    let (b, _, _) =
        deleted_view(kv, st, v, Kind::Cert, name).ok_or_else(|| KvDenied::cert_not_found(name))?;
    Ok(json_resp(200, &b))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::arm::types;
    use crate::state::Prov;

    fn res(id: &str, rtype: &str, parent: &str, body: Value) -> ArmResource {
        ArmResource {
            id: id.to_string(),
            rtype: rtype.to_string(),
            name: id.rsplit('/').next().unwrap_or_default().to_string(),
            parent: parent.to_ascii_lowercase(),
            body,
            etag: String::new(),
            prov: Prov::Succeeded,
            created_seq: 0,
            created_ms: 0,
            op: None,
            internal: Value::Null,
        }
    }

    #[test]
    fn read_secret_as_checks_vault_rbac_and_secret() {
        let mut st = State::default();
        let rg = "/subscriptions/s1/resourceGroups/rg";
        let vault = format!("{rg}/providers/Microsoft.KeyVault/vaults/kv1");
        st.arm.insert(
            vault.to_ascii_lowercase(),
            res(
                &vault,
                types::VAULT,
                rg,
                json!({"location": "eastus", "properties": {"enableRbacAuthorization": true}}),
            ),
        );
        let secret = SecretVersion {
            version: "v1".into(),
            value: "{\"client_id\":\"c\"}".into(),
            content_type: None,
            enabled: true,
            nbf: Some(1),
            exp: Some(2),
            created: 0,
            updated: 0,
            tags: BTreeMap::from([("renew_after".to_string(), "x".to_string())]),
        };
        st.keyvault
            .vaults
            .entry("kv1".into())
            .or_default()
            .secrets
            .insert(
                "cpo-json".into(),
                SecretObj {
                    name: "cpo-json".into(),
                    versions: vec![secret],
                    managed: false,
                    deleted: None,
                },
            );
        let e = read_secret_as(&st, "kv1", "cpo-json", "P1").unwrap_err();
        assert_eq!(
            (e.status, e.inner.as_deref()),
            (403, Some("ForbiddenByRbac"))
        );
        assert!(e.message.contains("oid=p1"), "{}", e.message);
        // Key Vault Secrets User on the resource group covers the vault.
        let ra = format!("{rg}/providers/Microsoft.Authorization/roleAssignments/r1");
        st.arm.insert(
            ra.to_ascii_lowercase(),
            res(
                &ra,
                types::ROLE,
                rg,
                json!({"properties": {"principalId": "p1", "roleDefinitionId": "/subscriptions/s1/providers/Microsoft.Authorization/roleDefinitions/4633458b-17de-408a-b874-0445c86b69e6"}}),
            ),
        );
        let s = read_secret_as(&st, "KV1", "cpo-json", "p1").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((s.nbf, s.exp, s.version.as_str()), (Some(1), Some(2), "v1"));
        assert_eq!(s.id, "https://kv1.vault.azure.net/secrets/cpo-json/v1");
        assert_eq!(s.tags["renew_after"], "x");
        let e = read_secret_as(&st, "kv1", "other", "p1").unwrap_err();
        assert_eq!((e.status, e.code.as_str()), (404, "SecretNotFound"));
        let e = read_secret_as(&st, "kv2", "cpo-json", "p1").unwrap_err();
        assert_eq!(e.status, 0);
        // Another principal still has no role.
        assert_eq!(
            read_secret_as(&st, "kv1", "cpo-json", "p2")
                .unwrap_err()
                .status,
            403
        );
    }

    #[test]
    fn issued_certificates_and_thumbprints() {
        let spec = x509::IssueSpec {
            subject: "CN=t, O=o".into(),
            dns_names: vec!["a.example.com".into()],
            emails: vec![],
            validity_months: 1,
            key_size: 2048,
            key_usage: vec!["digitalSignature".into()],
            ekus: vec!["1.3.6.1.5.5.7.3.2".into()],
        };
        let issued =
            x509::issue_self_signed(&spec, 1_700_000_000_000).unwrap_or_else(|e| panic!("{e}"));
        let info = cert_info(&issued.cert_der).unwrap_or_else(|| panic!("unparseable"));
        assert_eq!(info.subject, "CN=t, O=o");
        assert_eq!(info.not_before, 1_700_000_000);
        // 2023-11-14 + 1 month.
        assert_eq!(info.not_after - info.not_before, 30 * 86_400);
        let bundle = format!("{}{}", issued.key_pem, issued.cert_pem);
        let want = sha1_hex(&issued.cert_der);
        assert_eq!(
            cert_thumbprint(bundle.as_bytes()).as_deref(),
            Some(want.as_str())
        );
        assert_eq!(
            cert_thumbprint(&issued.cert_der).as_deref(),
            Some(want.as_str())
        );
        assert_eq!(cert_thumbprint(b"garbage"), None);
    }
}
