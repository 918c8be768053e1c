//! Typed ARM errors and their classification.
//!
//! ARM answers errors as `{"error":{"code","message","details":[…]}}` with the code
//! repeated in `x-ms-error-code`, and says how long to back off in `Retry-After` (seconds
//! or an HTTP date) or `retry-after-ms`. Whether a failure is worth retrying depends on the
//! status *and* the code (DOMAIN.md §6): a 409 `AnotherOperationInProgress` clears by
//! itself, a 400 `PrincipalNotFound` clears once Entra replicates, a 403
//! `AuthorizationFailed` or a `QuotaExceeded` never does and must reach a human quickly,
//! with a hint of what to do. [`ArmError`] carries all of that and converts into the
//! engine's journaled [`StepError`].

use std::fmt;
use std::time::{Duration, SystemTime};

use azure_core::http::headers::{HeaderName, Headers};
use hcp_runtime::StepError;
use hcp_runtime::error::kind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a failure should be handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorClass {
    /// 429: slow down, retry after the server's delay.
    Throttled,
    /// 408, 5xx, connection failures: retry.
    Transient,
    /// A conflict or replication delay that clears by itself (409
    /// `AnotherOperationInProgress`, `PrincipalNotFound`, `InUseSubnetCannotBeDeleted`, …).
    RetryableConflict,
    /// 404: the resource (or its parent / resource group) does not exist.
    NotFound,
    /// Retrying cannot help: validation, authorization, quota.
    Permanent,
}

impl ErrorClass {
    /// Whether another attempt may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Throttled | ErrorClass::Transient | ErrorClass::RetryableConflict
        )
    }
}

/// Codes that clear by themselves (whatever their status).
const RETRYABLE_CODES: &[&str] = &[
    "AnotherOperationInProgress",
    "RetryableError",
    "PrincipalNotFound",
    "InUseSubnetCannotBeDeleted",
    "ConcurrentFederatedIdentityCredentialsWritesForSingleManagedIdentity",
    "PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted",
    "CannotDeleteLoadBalancerWithPrivateLinkService",
    "OperationPreempted",
];

/// Codes of transient server failures (used when only a code is known, e.g. a failed
/// long-running operation).
const TRANSIENT_CODES: &[&str] = &[
    "InternalServerError",
    "ServiceUnavailable",
    "GatewayTimeout",
    "BadGateway",
    "RequestTimeout",
    "InternalError",
    "TransportError",
];

/// Codes meaning a quota or limit was reached.
const QUOTA_CODES: &[&str] = &[
    "QuotaExceeded",
    "PublicIPCountLimitReached",
    "OperationNotAllowed",
    "SkuNotAvailable",
    "ResourceQuotaExceeded",
    "SubscriptionQuotaExceeded",
];

/// Codes of authorization failures.
const AUTHZ_CODES: &[&str] = &[
    "AuthorizationFailed",
    "LinkedAuthorizationFailed",
    "AuthenticationFailed",
    "InvalidAuthenticationToken",
    "InvalidAuthenticationTokenTenant",
];

fn is_in(code: &str, list: &[&str]) -> bool {
    list.iter().any(|c| c.eq_ignore_ascii_case(code))
}

/// Classifies an ARM failure by status and code (DOMAIN.md §6). `status` 0 means the
/// status is unknown (a failed long-running operation reports a code only).
///
/// The error code in the body wins over the status, as in Azure's SDKs: a long-running
/// operation's poll can answer 409 (or 400) with `InternalServerError` in its body, which is
/// a transient server failure, not a conflict to give up on.
pub fn classify(status: u16, code: &str) -> ErrorClass {
    if is_in(code, RETRYABLE_CODES) {
        return ErrorClass::RetryableConflict;
    }
    if is_in(code, QUOTA_CODES) || is_in(code, AUTHZ_CODES) {
        return ErrorClass::Permanent;
    }
    if is_in(code, TRANSIENT_CODES) {
        return ErrorClass::Transient;
    }
    if is_in(code, THROTTLED_CODES) {
        return ErrorClass::Throttled;
    }
    match status {
        429 => ErrorClass::Throttled,
        408 | 500 | 502 | 503 | 504 => ErrorClass::Transient,
        404 => ErrorClass::NotFound,
        _ => ErrorClass::Permanent,
    }
}

/// Codes of throttling, whatever the status.
const THROTTLED_CODES: &[&str] = &["TooManyRequests", "SubscriptionRequestsThrottled"];

/// One entry of an ARM error's `details`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ArmErrorDetail {
    /// Detail code.
    pub code: String,
    /// Detail message.
    pub message: String,
    /// What the detail is about, when ARM says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// A failed ARM (or blob) request, parsed and classified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ArmError {
    /// HTTP status (0 for transport failures and failed long-running operations).
    pub status: u16,
    /// Azure error code (`AuthorizationFailed`, `QuotaExceeded`, …).
    pub code: String,
    /// Azure's message.
    pub message: String,
    /// Azure's `details`.
    pub details: Vec<ArmErrorDetail>,
    /// Server-requested delay before trying again.
    pub retry_after: Option<Duration>,
    /// The resource the request was about.
    pub resource_id: Option<String>,
    /// How to handle it.
    pub class: ErrorClass,
    /// The failed request was a DELETE (or the operation of one): nothing in the cluster
    /// file can fix it, so the hint speaks of what blocks the deletion.
    pub deleting: bool,
}

#[derive(Deserialize)]
struct Envelope {
    error: Option<Inner>,
    code: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct Inner {
    code: Option<String>,
    message: Option<String>,
    #[serde(default)]
    details: Vec<ArmErrorDetail>,
}

/// Reads `retry-after-ms` / `x-ms-retry-after-ms` (milliseconds) or `Retry-After`
/// (seconds or an HTTP date).
pub fn retry_after(headers: &Headers) -> Option<Duration> {
    let get = |name: &'static str| {
        headers
            .get_optional_str(&HeaderName::from_static(name))
            .map(str::trim)
    };
    for name in ["retry-after-ms", "x-ms-retry-after-ms"] {
        if let Some(ms) = get(name).and_then(|v| v.parse::<u64>().ok()) {
            return Some(Duration::from_millis(ms));
        }
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

impl ArmError {
    /// Parses an error answer: body `{"error":{…}}` (or a bare `{"code","message"}`), code
    /// falling back to `x-ms-error-code`, then to the status.
    pub fn from_response(
        status: u16,
        headers: &Headers,
        body: &[u8],
        resource_id: Option<&str>,
    ) -> Self {
        let header_code = headers
            .get_optional_str(&HeaderName::from_static("x-ms-error-code"))
            .map(str::to_string);
        let parsed: Option<Envelope> = serde_json::from_slice(body).ok();
        let (mut code, mut message, mut details) = (None, None, Vec::new());
        if let Some(env) = parsed {
            match env.error {
                Some(inner) => {
                    code = inner.code;
                    message = inner.message;
                    details = inner.details;
                }
                None => {
                    code = env.code;
                    message = env.message;
                }
            }
        }
        if message.is_none() {
            // Storage answers XML: `<Error><Code>…</Code><Message>…</Message></Error>`.
            let text = String::from_utf8_lossy(body);
            message = xml_field(&text, "Message");
            if code.is_none() {
                code = xml_field(&text, "Code");
            }
        }
        let code = code
            .filter(|c| !c.is_empty())
            .or(header_code)
            .unwrap_or_else(|| format!("HttpStatus{status}"));
        let message = message.unwrap_or_else(|| format!("HTTP {status} without an error body"));
        ArmError {
            status,
            class: classify(status, &code),
            code,
            message,
            details,
            retry_after: retry_after(headers),
            resource_id: resource_id.map(str::to_string),
            deleting: false,
        }
    }

    /// An error from the `error` object of a failed long-running operation.
    pub fn from_operation(error: Option<&Value>, resource_id: Option<&str>, status: &str) -> Self {
        let code = error
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| format!("Operation{status}"));
        let message = error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("the long-running operation ended {status}"));
        let details = error
            .and_then(|e| e.get("details"))
            .and_then(|d| serde_json::from_value(d.clone()).ok())
            .unwrap_or_default();
        ArmError {
            status: 0,
            class: classify(0, &code),
            code,
            message,
            details,
            retry_after: None,
            resource_id: resource_id.map(str::to_string),
            deleting: false,
        }
    }

    /// A transport failure (connection refused, reset, timeout): transient.
    pub fn transport(message: impl Into<String>, resource_id: Option<&str>) -> Self {
        ArmError {
            status: 0,
            code: "TransportError".into(),
            message: message.into(),
            details: Vec::new(),
            retry_after: None,
            resource_id: resource_id.map(str::to_string),
            deleting: false,
            class: ErrorClass::Transient,
        }
    }

    /// An error of our own making (unexpected response shape, refused URL): permanent.
    pub fn local(code: &str, message: impl Into<String>, resource_id: Option<&str>) -> Self {
        ArmError {
            status: 0,
            code: code.into(),
            message: message.into(),
            details: Vec::new(),
            retry_after: None,
            resource_id: resource_id.map(str::to_string),
            deleting: false,
            class: ErrorClass::Permanent,
        }
    }

    /// Maps an azure_core error that carries no ARM answer (transport, credential).
    pub fn from_core(e: &azure_core::Error, resource_id: Option<&str>) -> Self {
        use azure_core::error::ErrorKind;
        match e.kind() {
            ErrorKind::Io | ErrorKind::Connection => Self::transport(format!("{e}"), resource_id),
            // The credential was proven when the client was built; a later token failure
            // is far more often an Entra or network blip than a revoked secret, and a
            // permanent error here would unwind a half-built cluster. Retry (bounded by
            // the step's retry policy).
            ErrorKind::Credential => ArmError {
                class: ErrorClass::Transient,
                ..Self::local(
                    "CredentialUnavailable",
                    format!("could not get an access token: {e}"),
                    resource_id,
                )
            },
            ErrorKind::HttpResponse { status, .. } => {
                let status = u16::from(*status);
                let code = if status == 429 || status >= 500 {
                    format!("HttpStatus{status}")
                } else {
                    "AuthenticationFailed".to_string()
                };
                ArmError {
                    status,
                    class: classify(status, &code),
                    code,
                    message: format!("{e}"),
                    details: Vec::new(),
                    retry_after: None,
                    resource_id: resource_id.map(str::to_string),
                    deleting: false,
                }
            }
            _ => Self::local("ClientError", format!("{e}"), resource_id),
        }
    }

    /// Whether the code is `code` (case-insensitive, as ARM codes are compared).
    pub fn is(&self, code: &str) -> bool {
        self.code.eq_ignore_ascii_case(code)
    }

    /// Marks the error as the answer to a DELETE (or to the operation of one).
    #[must_use]
    pub fn while_deleting(mut self) -> Self {
        self.deleting = true;
        self
    }

    /// Sets the resource the error is about (when the caller knows it better).
    pub fn with_resource(mut self, id: &str) -> Self {
        self.resource_id = Some(id.to_string());
        self
    }

    /// The engine error kind for this failure.
    pub fn kind(&self) -> &'static str {
        match self.class {
            ErrorClass::Throttled => kind::THROTTLED,
            ErrorClass::Transient => kind::TRANSIENT,
            ErrorClass::RetryableConflict => kind::CONFLICT,
            ErrorClass::NotFound => "not-found",
            ErrorClass::Permanent if is_in(&self.code, QUOTA_CODES) => kind::QUOTA,
            ErrorClass::Permanent
                if is_in(&self.code, AUTHZ_CODES) || matches!(self.status, 401 | 403) =>
            {
                kind::AUTHORIZATION
            }
            ErrorClass::Permanent if self.status == 400 => kind::VALIDATION,
            ErrorClass::Permanent => "azure",
        }
    }

    /// What an operator should do about it (one short sentence), naming the resource:
    /// what to do depends on the class and code, and on whether the request was a delete
    /// (an undo or delete-cluster, where nothing in the cluster file can help).
    pub fn hint(&self) -> String {
        // No "then retry RUN": a permanent forward failure unwinds the run (a finished run is
        // never retried); the failure card of `show`/`why` gives the action that fits the
        // run's state.
        let retry = if self.deleting {
            "then retry the step"
        } else {
            "then run it again"
        };
        let code = self.code.as_str();
        let target = self.resource_id.as_deref().unwrap_or("the resource");
        match self.class {
            ErrorClass::Throttled => {
                "Azure is throttling this subscription; the step retries after the requested delay"
                    .into()
            }
            ErrorClass::Transient if code.eq_ignore_ascii_case("CredentialUnavailable") => {
                "could not get an Azure token; the step retries — if this persists, check the credentials (auth mode, secret expiry)"
                    .into()
            }
            ErrorClass::Transient => "a transient Azure or network failure; the step retries".into(),
            ErrorClass::RetryableConflict => match code {
                c if c.eq_ignore_ascii_case("PrincipalNotFound") => {
                    "the identity is not replicated in Entra yet (this can take minutes); the step retries"
                        .into()
                }
                c if c.eq_ignore_ascii_case("InUseSubnetCannotBeDeleted") => {
                    "something still uses the subnet; the step retries once it is released".into()
                }
                c if c.eq_ignore_ascii_case(
                    "PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted",
                ) =>
                {
                    "private endpoint connections still exist on the service; the step rejects and deletes them and retries"
                        .into()
                }
                c if c.eq_ignore_ascii_case("CannotDeleteLoadBalancerWithPrivateLinkService") => {
                    "a private link service still fronts this load balancer; the step retries after it is deleted"
                        .into()
                }
                _ => "another operation on this resource is in progress; the step retries".into(),
            },
            ErrorClass::NotFound => format!(
                "{target}, its parent or its resource group does not exist (deleted outside hcp-workflow?); check the ids, {retry}"
            ),
            ErrorClass::Permanent => {
                if is_in(code, QUOTA_CODES) {
                    format!("raise the quota or pick another vmSize/location, {retry}")
                } else if is_in(code, AUTHZ_CODES) || matches!(self.status, 401 | 403) {
                    format!(
                        "grant the credential's principal the needed role on {target} (Contributor and User Access Administrator, or Owner), {retry}"
                    )
                } else if self.deleting {
                    format!(
                        "Azure refused to delete {target} ({code}); nothing in the cluster file causes this: read Azure's message, remove what blocks the deletion (a lock, a resource that still uses it), or delete {target} yourself, {retry}"
                    )
                } else if self.status == 400 && is_in(code, INVALID_VALUE_CODES) {
                    format!(
                        "Azure rejected a value of {target} ({code}): fix the cluster file's field that sets it (Azure's message names it), {retry}"
                    )
                } else {
                    format!(
                        "Azure refused the request for {target} ({code}): read Azure's message and fix the cause, {retry}"
                    )
                }
            }
        }
    }
}

/// ARM codes of a request body with a value Azure does not accept: the cluster file sets
/// such values, so fixing the file is the answer.
const INVALID_VALUE_CODES: &[&str] = &[
    "InvalidParameter",
    "InvalidParameterValue",
    "InvalidRequestContent",
    "InvalidRequestFormat",
    "InvalidResourceName",
    "InvalidResourceLocation",
    "LinkedInvalidPropertyId",
    "InvalidTemplate",
    "PropertyChangeNotAllowed",
    "InvalidAddressPrefix",
    "NetcfgInvalidSubnet",
    "InvalidCIDRNotation",
    "SkuNotAvailable",
];

impl fmt::Display for ArmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Azure {}", self.code)?;
        if let Some(id) = &self.resource_id {
            write!(f, " on {id}")?;
        }
        write!(f, ": {}", self.message.trim_end())?;
        for d in &self.details {
            if !d.message.is_empty() && d.message != self.message {
                write!(f, " [{}: {}]", d.code, d.message.trim_end())?;
            }
        }
        write!(f, " — {}", self.hint())
    }
}

impl From<ArmError> for StepError {
    fn from(e: ArmError) -> Self {
        let message = e.to_string();
        let base = if e.class.is_retryable() {
            StepError::retryable(e.kind(), message)
        } else {
            StepError::permanent(e.kind(), message)
        };
        let base = base.with_code(e.code.clone());
        match e.retry_after {
            Some(d) => base.with_retry_after(d),
            None => base,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Microsoft Graph and Key Vault's data plane.

/// A service other than ARM that the activities call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    /// Microsoft Graph v1.0 (Entra applications and service principals).
    Graph,
    /// Azure Key Vault's data plane (certificates and secrets).
    KeyVault,
}

impl Service {
    /// Human name, e.g. `Microsoft Graph`.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Graph => "Microsoft Graph",
            Service::KeyVault => "Key Vault",
        }
    }
}

/// Graph codes that clear by themselves (replication, concurrent writes).
const GRAPH_RETRYABLE_CODES: &[&str] = &[
    "Directory_ConcurrencyViolation",
    "Directory_ResultSizeLimitExceeded",
    "ConcurrencyViolation",
];

/// Graph codes of throttling.
const GRAPH_THROTTLED_CODES: &[&str] = &["TooManyRequests", "Request_ThrottledTemporarily"];

/// Key Vault inner codes that clear by themselves.
const KEY_VAULT_RETRYABLE_CODES: &[&str] = &[
    // A role assignment on the vault takes minutes to apply (Key Vault RBAC docs).
    "ForbiddenByRbac",
    // A delete still being processed: a purge right after it answers this.
    "ObjectIsBeingDeleted",
];

/// Classifies a Microsoft Graph failure. `message` matters for one case: right after an
/// application is created, creating its service principal can answer 400
/// `Request_BadRequest` "… does not reference a valid application object" until Entra
/// replicates it (learn.microsoft.com/graph/best-practices-concept#handling-expected-errors
/// and the Graph replication note in serviceprincipal-post-serviceprincipals).
pub fn classify_graph(status: u16, code: &str, message: &str) -> ErrorClass {
    if is_in(code, GRAPH_RETRYABLE_CODES)
        || message.contains("does not reference a valid application object")
    {
        return ErrorClass::RetryableConflict;
    }
    if is_in(code, GRAPH_THROTTLED_CODES) {
        return ErrorClass::Throttled;
    }
    if is_in(code, TRANSIENT_CODES) || code.eq_ignore_ascii_case("UnknownError") && status >= 500 {
        return ErrorClass::Transient;
    }
    match status {
        429 => ErrorClass::Throttled,
        408 | 500 | 502 | 503 | 504 => ErrorClass::Transient,
        404 => ErrorClass::NotFound,
        _ => ErrorClass::Permanent,
    }
}

/// Classifies a Key Vault data-plane failure by status, code and inner code.
pub fn classify_key_vault(status: u16, code: &str, inner: Option<&str>) -> ErrorClass {
    if inner.is_some_and(|i| is_in(i, KEY_VAULT_RETRYABLE_CODES)) {
        return ErrorClass::RetryableConflict;
    }
    if is_in(code, TRANSIENT_CODES) {
        return ErrorClass::Transient;
    }
    if is_in(code, THROTTLED_CODES) || code.eq_ignore_ascii_case("Throttled") {
        return ErrorClass::Throttled;
    }
    match status {
        429 => ErrorClass::Throttled,
        408 | 500 | 502 | 503 | 504 => ErrorClass::Transient,
        404 => ErrorClass::NotFound,
        _ => ErrorClass::Permanent,
    }
}

/// A failed Microsoft Graph or Key Vault request, parsed and classified.
///
/// Built from the answer only: a request body (which may carry a secret's value) never
/// reaches it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ServiceError {
    /// Which service answered.
    pub service: Service,
    /// HTTP status (0 for transport failures and local errors).
    pub status: u16,
    /// Error code (`Authorization_RequestDenied`, `Forbidden`, `CertificateNotFound`, …).
    pub code: String,
    /// Key Vault's `innererror.code` (`ForbiddenByRbac`, `ObjectIsDeletedButRecoverable`).
    pub inner_code: Option<String>,
    /// The service's message, followed by ` (request-id …)` when the answer carried one
    /// (Graph's `innerError.request-id`, or the `request-id` / `x-ms-request-id` header):
    /// what Microsoft support asks for.
    pub message: String,
    /// Server-requested delay before trying again.
    pub retry_after: Option<Duration>,
    /// What the request was about (`applications(uniqueName='…')`, `kv/certificates/x`).
    pub target: Option<String>,
    /// How to handle it.
    pub class: ErrorClass,
}

#[derive(Deserialize)]
struct ServiceEnvelope {
    error: Option<ServiceInner>,
}

#[derive(Deserialize)]
struct ServiceInner {
    code: Option<String>,
    message: Option<String>,
    #[serde(alias = "innerError", alias = "innererror")]
    inner: Option<ServiceInnerMost>,
}

#[derive(Deserialize)]
struct ServiceInnerMost {
    code: Option<String>,
    #[serde(rename = "request-id")]
    request_id: Option<String>,
}

impl ServiceError {
    /// Parses an error answer `{"error":{"code","message","innerError"|"innererror":{…}}}`.
    pub fn from_response(
        service: Service,
        status: u16,
        headers: &Headers,
        body: &[u8],
        target: Option<&str>,
    ) -> Self {
        let parsed: Option<ServiceEnvelope> = serde_json::from_slice(body).ok();
        let inner = parsed.and_then(|e| e.error);
        let header = |n: &'static str| {
            headers
                .get_optional_str(&HeaderName::from_static(n))
                .map(str::to_string)
        };
        let code = inner
            .as_ref()
            .and_then(|i| i.code.clone())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| format!("HttpStatus{status}"));
        let mut message = inner
            .as_ref()
            .and_then(|i| i.message.clone())
            .unwrap_or_else(|| format!("HTTP {status} without an error body"));
        let inner_code = inner
            .as_ref()
            .and_then(|i| i.inner.as_ref())
            .and_then(|i| i.code.clone());
        let request_id = inner
            .as_ref()
            .and_then(|i| i.inner.as_ref())
            .and_then(|i| i.request_id.clone())
            .or_else(|| header("request-id"))
            .or_else(|| header("x-ms-request-id"));
        let class = match service {
            Service::Graph => classify_graph(status, &code, &message),
            Service::KeyVault => classify_key_vault(status, &code, inner_code.as_deref()),
        };
        if let Some(r) = request_id {
            message = format!("{} (request-id {r})", message.trim_end());
        }
        ServiceError {
            service,
            status,
            code,
            inner_code,
            message,
            retry_after: retry_after(headers),
            target: target.map(str::to_string),
            class,
        }
    }

    /// An error of our own making (unexpected answer, refused URL): permanent.
    pub fn local(
        service: Service,
        code: &str,
        message: impl Into<String>,
        target: Option<&str>,
    ) -> Self {
        ServiceError {
            service,
            status: 0,
            code: code.into(),
            inner_code: None,
            message: message.into(),
            retry_after: None,
            target: target.map(str::to_string),
            class: ErrorClass::Permanent,
        }
    }

    /// Maps an azure_core error that carries no answer (transport, credential), as
    /// [`ArmError::from_core`] does.
    pub fn from_core(service: Service, e: &azure_core::Error, target: Option<&str>) -> Self {
        let arm = ArmError::from_core(e, target);
        ServiceError {
            service,
            status: arm.status,
            code: arm.code,
            inner_code: None,
            message: arm.message,
            retry_after: None,
            target: target.map(str::to_string),
            class: arm.class,
        }
    }

    /// Whether the code (or Key Vault's inner code) is `code`, case-insensitively.
    pub fn is(&self, code: &str) -> bool {
        self.code.eq_ignore_ascii_case(code)
            || self
                .inner_code
                .as_deref()
                .is_some_and(|i| i.eq_ignore_ascii_case(code))
    }

    /// Whether the object (or its parent) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.class == ErrorClass::NotFound
    }

    /// The engine error kind for this failure.
    pub fn kind(&self) -> &'static str {
        match self.class {
            ErrorClass::Throttled => kind::THROTTLED,
            ErrorClass::Transient => kind::TRANSIENT,
            ErrorClass::RetryableConflict => kind::CONFLICT,
            ErrorClass::NotFound => "not-found",
            ErrorClass::Permanent if matches!(self.status, 401 | 403) => kind::AUTHORIZATION,
            ErrorClass::Permanent if self.code.eq_ignore_ascii_case("AuthenticationFailed") => {
                kind::AUTHORIZATION
            }
            ErrorClass::Permanent if self.status == 400 => kind::VALIDATION,
            ErrorClass::Permanent => "azure",
        }
    }

    /// What an operator should do about it (one short sentence).
    pub fn hint(&self) -> String {
        let retry = "then run it again";
        match (self.service, self.class) {
            (_, ErrorClass::Throttled) => format!(
                "{} is throttling this caller; the step retries after the requested delay",
                self.service.as_str()
            ),
            (_, ErrorClass::Transient) => format!(
                "a transient {} or network failure; the step retries",
                self.service.as_str()
            ),
            (Service::Graph, ErrorClass::RetryableConflict) => {
                "Entra has not replicated a new object yet (this can take seconds to minutes); the step retries"
                    .into()
            }
            (Service::KeyVault, ErrorClass::RetryableConflict) if self.is("ForbiddenByRbac") => {
                "the credential's principal needs a Key Vault data role on the vault (Key Vault Administrator, or Key Vault Certificates Officer and Key Vault Secrets Officer); a new role assignment takes minutes to apply, so the step retries"
                    .into()
            }
            (Service::KeyVault, ErrorClass::RetryableConflict) => {
                "Key Vault is still processing an earlier delete; the step retries".into()
            }
            (_, ErrorClass::NotFound) => format!(
                "the object does not exist (deleted outside hcp-workflow?); check the names, {retry}"
            ),
            (Service::Graph, ErrorClass::Permanent) if self.status == 403 => format!(
                "grant the credential's application the Microsoft Graph application permission Application.ReadWrite.OwnedBy (with admin consent); with it the credential may change only applications it owns, so an application of this name made by someone else must be deleted or get this principal as an owner, {retry}"
            ),
            (Service::Graph, ErrorClass::Permanent) if self.status == 401 => format!(
                "Microsoft Graph refused the token: check that the credential belongs to this tenant and cloud, {retry}"
            ),
            (Service::KeyVault, ErrorClass::Permanent) if self.is("ObjectIsDeletedButRecoverable") => {
                format!(
                    "an object of this name was deleted and waits in the vault's soft-delete bin: recover or purge it (az keyvault certificate purge / az keyvault secret purge), {retry}"
                )
            }
            (Service::KeyVault, ErrorClass::Permanent) if matches!(self.status, 401 | 403) => {
                format!(
                    "give the credential's principal a Key Vault data role on the vault (Key Vault Administrator, or Key Vault Certificates Officer and Key Vault Secrets Officer) and make sure the vault uses RBAC authorization, {retry}"
                )
            }
            (_, ErrorClass::Permanent) if self.status == 400 => format!(
                "fix the value {} rejected, {retry}",
                self.service.as_str()
            ),
            (_, ErrorClass::Permanent) => format!(
                "see {}'s message and fix the cause, {retry}",
                self.service.as_str()
            ),
        }
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.service.as_str(), self.code)?;
        if let Some(i) = &self.inner_code {
            write!(f, "/{i}")?;
        }
        if let Some(t) = &self.target {
            write!(f, " on {t}")?;
        }
        write!(f, ": {}", self.message.trim_end())?;
        write!(f, " — {}", self.hint())
    }
}

impl From<ServiceError> for StepError {
    fn from(e: ServiceError) -> Self {
        let message = e.to_string();
        let base = if e.class.is_retryable() {
            StepError::retryable(e.kind(), message)
        } else {
            StepError::permanent(e.kind(), message)
        };
        let code = e.inner_code.clone().unwrap_or_else(|| e.code.clone());
        let base = base.with_code(code);
        match e.retry_after {
            Some(d) => base.with_retry_after(d),
            None => base,
        }
    }
}

fn xml_field(text: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&close)? + start;
    Some(text[start..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (k, v) in pairs {
            h.insert(HeaderName::from_static(k), v.to_string());
        }
        h
    }

    #[test]
    fn parses_body_and_headers() {
        let body = br#"{"error":{"code":"QuotaExceeded","message":"Operation could not be completed as it results in exceeding approved Total Regional Cores quota.","details":[{"code":"X","message":"more"}]}}"#;
        let e = ArmError::from_response(
            409,
            &headers(&[("x-ms-error-code", "QuotaExceeded")]),
            body,
            Some("/subscriptions/s/x"),
        );
        assert_eq!(e.code, "QuotaExceeded");
        assert_eq!(e.class, ErrorClass::Permanent);
        assert_eq!(e.details.len(), 1);
        let s = StepError::from(e);
        assert!(!s.retryable);
        assert_eq!(s.kind, kind::QUOTA);
        assert_eq!(s.code.as_deref(), Some("QuotaExceeded"));
        assert!(
            s.message
                .starts_with("Azure QuotaExceeded on /subscriptions/s/x: ")
        );
        assert!(s.message.contains("raise the quota"), "{}", s.message);
    }

    #[test]
    fn code_from_header_and_retry_after_forms() {
        let e = ArmError::from_response(429, &headers(&[("retry-after", "7")]), b"", None);
        assert_eq!(e.code, "HttpStatus429");
        assert_eq!(e.class, ErrorClass::Throttled);
        assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
        let e = ArmError::from_response(
            503,
            &headers(&[("retry-after", "3"), ("retry-after-ms", "250")]),
            b"",
            None,
        );
        assert_eq!(e.retry_after, Some(Duration::from_millis(250)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let e = ArmError::from_response(429, &headers(&[("retry-after", &later)]), b"", None);
        let d = e.retry_after.unwrap_or_default();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
        let past = "Fri, 01 Jan 2021 00:00:00 GMT";
        let e = ArmError::from_response(429, &headers(&[("retry-after", past)]), b"", None);
        assert_eq!(e.retry_after, Some(Duration::ZERO));
        let e = ArmError::from_response(
            409,
            &headers(&[("x-ms-error-code", "AnotherOperationInProgress")]),
            b"not json",
            None,
        );
        assert_eq!(e.code, "AnotherOperationInProgress");
        assert!(e.class.is_retryable());
    }

    #[test]
    fn classification_table() {
        let cases = [
            (408, "RequestTimeout", ErrorClass::Transient),
            (429, "SubscriptionRequestsThrottled", ErrorClass::Throttled),
            // The code in the body wins over the status.
            (409, "InternalServerError", ErrorClass::Transient),
            (400, "ServiceUnavailable", ErrorClass::Transient),
            (409, "TooManyRequests", ErrorClass::Throttled),
            (409, "Conflict", ErrorClass::Permanent),
            (500, "InternalServerError", ErrorClass::Transient),
            (502, "BadGateway", ErrorClass::Transient),
            (503, "ServiceUnavailable", ErrorClass::Transient),
            (504, "GatewayTimeout", ErrorClass::Transient),
            (
                409,
                "AnotherOperationInProgress",
                ErrorClass::RetryableConflict,
            ),
            (409, "RetryableError", ErrorClass::RetryableConflict),
            (400, "PrincipalNotFound", ErrorClass::RetryableConflict),
            (
                400,
                "InUseSubnetCannotBeDeleted",
                ErrorClass::RetryableConflict,
            ),
            (
                409,
                "ConcurrentFederatedIdentityCredentialsWritesForSingleManagedIdentity",
                ErrorClass::RetryableConflict,
            ),
            (
                400,
                "PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted",
                ErrorClass::RetryableConflict,
            ),
            (
                400,
                "CannotDeleteLoadBalancerWithPrivateLinkService",
                ErrorClass::RetryableConflict,
            ),
            (400, "InvalidRequestContent", ErrorClass::Permanent),
            (403, "AuthorizationFailed", ErrorClass::Permanent),
            (409, "QuotaExceeded", ErrorClass::Permanent),
            (400, "PublicIPCountLimitReached", ErrorClass::Permanent),
            (409, "OperationNotAllowed", ErrorClass::Permanent),
            (409, "Conflict", ErrorClass::Permanent),
            (404, "ResourceNotFound", ErrorClass::NotFound),
            (0, "InternalServerError", ErrorClass::Transient),
            (0, "SomethingFailed", ErrorClass::Permanent),
        ];
        for (status, code, class) in cases {
            assert_eq!(classify(status, code), class, "{status} {code}");
        }
    }

    #[test]
    fn authorization_hint_and_kind() {
        let e = ArmError::from_response(
            403,
            &Headers::new(),
            br#"{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization"}}"#,
            Some("/subscriptions/s/resourcegroups/rg"),
        );
        let s = StepError::from(e);
        assert_eq!(s.kind, kind::AUTHORIZATION);
        assert!(s.message.contains("AuthorizationFailed"));
        assert!(s.message.contains("grant the credential"));
    }

    #[test]
    fn storage_xml_errors() {
        let e = ArmError::from_response(
            404,
            &headers(&[("x-ms-error-code", "BlobNotFound")]),
            b"<?xml version=\"1.0\"?><Error><Code>BlobNotFound</Code><Message>The specified blob does not exist.</Message></Error>",
            None,
        );
        assert_eq!(e.code, "BlobNotFound");
        assert_eq!(e.message, "The specified blob does not exist.");
        assert_eq!(e.class, ErrorClass::NotFound);
    }

    #[test]
    fn graph_errors() {
        let denied = ServiceError::from_response(
            Service::Graph,
            403,
            &Headers::new(),
            br#"{"error":{"code":"Authorization_RequestDenied","message":"Insufficient privileges to complete the operation.","innerError":{"date":"2025-01-01T00:00:00","request-id":"r-1","client-request-id":"c-1"}}}"#,
            Some("applications(uniqueName='x')"),
        );
        assert_eq!(denied.class, ErrorClass::Permanent);
        assert!(
            denied.message.ends_with("(request-id r-1)"),
            "{}",
            denied.message
        );
        let s = StepError::from(denied);
        assert!(!s.retryable);
        assert_eq!(s.kind, kind::AUTHORIZATION);
        assert_eq!(s.code.as_deref(), Some("Authorization_RequestDenied"));
        assert!(
            s.message.contains("Application.ReadWrite.OwnedBy"),
            "{}",
            s.message
        );
        assert!(s.message.contains("request-id r-1"), "{}", s.message);

        let throttled = ServiceError::from_response(
            Service::Graph,
            429,
            &headers(&[("retry-after", "4")]),
            br#"{"error":{"code":"TooManyRequests","message":"slow down"}}"#,
            None,
        );
        assert_eq!(throttled.class, ErrorClass::Throttled);
        assert_eq!(throttled.retry_after, Some(Duration::from_secs(4)));
        let s = StepError::from(throttled);
        assert!(s.retryable);
        assert_eq!(s.retry_after(), Some(Duration::from_secs(4)));

        for status in [500, 502, 503, 504] {
            let e = ServiceError::from_response(Service::Graph, status, &Headers::new(), b"", None);
            assert_eq!(e.class, ErrorClass::Transient, "{status}");
        }
        let missing = ServiceError::from_response(
            Service::Graph,
            404,
            &Headers::new(),
            br#"{"error":{"code":"Request_ResourceNotFound","message":"Resource 'x' does not exist"}}"#,
            None,
        );
        assert!(missing.is_not_found());
        let replicating = ServiceError::from_response(
            Service::Graph,
            400,
            &Headers::new(),
            br#"{"error":{"code":"Request_BadRequest","message":"The appId 'a' of the service principal does not reference a valid application object."}}"#,
            None,
        );
        assert!(replicating.class.is_retryable());
        let bad = ServiceError::from_response(
            Service::Graph,
            400,
            &Headers::new(),
            br#"{"error":{"code":"Request_BadRequest","message":"Invalid value"}}"#,
            None,
        );
        assert_eq!(StepError::from(bad).kind, kind::VALIDATION);
    }

    #[test]
    fn key_vault_errors() {
        let rbac = ServiceError::from_response(
            Service::KeyVault,
            403,
            &Headers::new(),
            br#"{"error":{"code":"Forbidden","message":"Caller is not authorized to perform action on resource.\r\nAction: 'Microsoft.KeyVault/vaults/certificates/create/action'","innererror":{"code":"ForbiddenByRbac"}}}"#,
            Some("kv/certificates/x"),
        );
        assert!(rbac.is("ForbiddenByRbac"));
        assert!(rbac.class.is_retryable());
        let s = StepError::from(rbac);
        assert_eq!(s.code.as_deref(), Some("ForbiddenByRbac"));
        assert!(
            s.message.contains("Key Vault Administrator"),
            "{}",
            s.message
        );

        let deleted = ServiceError::from_response(
            Service::KeyVault,
            409,
            &Headers::new(),
            br#"{"error":{"code":"Conflict","message":"Certificate x is currently in a deleted but recoverable state","innererror":{"code":"ObjectIsDeletedButRecoverable"}}}"#,
            None,
        );
        assert_eq!(deleted.class, ErrorClass::Permanent);
        assert!(deleted.hint().contains("purge"));
        let unauthorized = ServiceError::from_response(
            Service::KeyVault,
            401,
            &Headers::new(),
            br#"{"error":{"code":"Unauthorized","message":"AKV10000: Request is missing a Bearer or PoP token."}}"#,
            None,
        );
        assert_eq!(StepError::from(unauthorized).kind, kind::AUTHORIZATION);
        let missing = ServiceError::from_response(
            Service::KeyVault,
            404,
            &Headers::new(),
            br#"{"error":{"code":"CertificateNotFound","message":"A certificate with (name/id) x was not found in this key vault."}}"#,
            None,
        );
        assert!(missing.is_not_found());
        assert_eq!(
            classify_key_vault(409, "Conflict", Some("ObjectIsBeingDeleted")),
            ErrorClass::RetryableConflict
        );
        assert_eq!(
            classify_key_vault(429, "Throttled", None),
            ErrorClass::Throttled
        );
        assert_eq!(classify_key_vault(503, "x", None), ErrorClass::Transient);
    }
}
