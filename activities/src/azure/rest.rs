//! The HTTP layer shared by the Microsoft Graph and Key Vault data-plane clients.
//!
//! Built like [`super::ArmClient`]'s: an azure_core [`Pipeline`] with a bearer token for
//! the service's scope and the process's [`Transport`] (so simulator mode works), a short
//! in-memory retry for 408/429/5xx and connection failures honouring `Retry-After`
//! (≤ [`super::client::MAX_RETRIES`] retries, ≤ [`super::client::RETRY_BUDGET`] of sleep;
//! anything longer goes back to the engine as a classified error), and a refusal to send
//! the token to any host but the service's own.

use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::policies::Policy;
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::{Context, Method, Pipeline, PipelineSendOptions, Request, Url};

use super::client::{MAX_RETRIES, RETRY_BUDGET, backoff, is_retry_status};
use super::cloud::Cloud;
use super::error::{Service, ServiceError, retry_after};
use super::transport::{Transport, TransportError};

/// Which hosts a client may send its token to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostRule {
    /// Exactly this host (Graph).
    Exact(String),
    /// `<one DNS label>.<suffix>` (Key Vault: `{vault}.vault.azure.net`).
    Subdomain(String),
}

impl HostRule {
    fn allows(&self, host: &str) -> bool {
        match self {
            HostRule::Exact(h) => host == h,
            HostRule::Subdomain(suffix) => host
                .strip_suffix(suffix.as_str())
                .and_then(|l| l.strip_suffix('.'))
                .is_some_and(|label| {
                    !label.is_empty()
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                }),
        }
    }
}

/// A raw answer (any status).
#[derive(Debug)]
pub(crate) struct Raw {
    pub status: u16,
    pub headers: Headers,
    pub body: Vec<u8>,
}

impl Raw {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body decoded into `T` (an empty body is an error).
    pub fn decode<T: serde::de::DeserializeOwned>(
        &self,
        service: Service,
        target: Option<&str>,
    ) -> Result<T, ServiceError> {
        // Decoded straight from the bytes: a secret's value goes into its `Secret` wrapper
        // without passing through a `Value`, and a decode error names the type only.
        serde_json::from_slice(&self.body).map_err(|e| {
            ServiceError::local(
                service,
                "InvalidResponse",
                format!(
                    "HTTP {} answer does not match the expected {} (line {}, column {})",
                    self.status,
                    std::any::type_name::<T>(),
                    e.line(),
                    e.column()
                ),
                target,
            )
        })
    }

    pub fn error(&self, service: Service, target: Option<&str>) -> ServiceError {
        ServiceError::from_response(service, self.status, &self.headers, &self.body, target)
    }
}

/// One service's authenticated pipeline.
#[derive(Debug)]
pub(crate) struct Rest {
    pipeline: Pipeline,
    service: Service,
    hosts: HostRule,
}

impl Rest {
    /// A pipeline for `scope` through `transport`.
    pub fn new(
        cloud: &Cloud,
        credential: Arc<dyn TokenCredential>,
        transport: &Transport,
        scope: String,
        service: Service,
        hosts: HostRule,
    ) -> Result<Self, TransportError> {
        let options = transport.client_options(cloud)?;
        let auth: Arc<dyn Policy> =
            Arc::new(BearerTokenAuthorizationPolicy::new(credential, [scope]));
        let pipeline = Pipeline::new(
            Some(env!("CARGO_PKG_NAME")),
            Some(env!("CARGO_PKG_VERSION")),
            options,
            Vec::new(),
            vec![auth],
            None,
        );
        Ok(Self {
            pipeline,
            service,
            hosts,
        })
    }

    /// Sends one request with the short in-memory retry; any status is returned.
    ///
    /// `body` is sent as `application/json`. It may hold a secret (a Key Vault secret's
    /// value): it is never logged, and errors are built from the answer only.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&[u8]>,
        headers: &[(&'static str, &str)],
        target: Option<&str>,
    ) -> Result<Raw, ServiceError> {
        let service = self.service;
        let url = Url::parse(url).map_err(|e| {
            ServiceError::local(
                service,
                "InvalidUrl",
                format!("cannot parse URL '{url}': {e}"),
                target,
            )
        })?;
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        if url.scheme() != "https" || !self.hosts.allows(&host) {
            return Err(ServiceError::local(
                service,
                "RefusedUrl",
                format!(
                    "refusing to send an authenticated request to {url}: not on the {} host ({:?})",
                    service.as_str(),
                    self.hosts
                ),
                target,
            ));
        }
        let mut slept = Duration::ZERO;
        let mut attempt = 0;
        loop {
            let mut req = Request::new(url.clone(), method);
            req.insert_header("accept", "application/json");
            for (k, v) in headers {
                req.insert_header(HeaderName::from_static(k), HeaderValue::from(v.to_string()));
            }
            if let Some(b) = body {
                req.insert_header("content-type", "application/json");
                req.set_body(b.to_vec());
            }
            let result = self
                .pipeline
                .send(
                    &Context::new(),
                    &mut req,
                    Some(PipelineSendOptions {
                        skip_checks: true,
                        ..Default::default()
                    }),
                )
                .await;
            let (outcome, wait) = match result {
                Ok(rsp) => {
                    let status = u16::from(rsp.status());
                    let headers = rsp.headers().clone();
                    let body = rsp.into_body().as_ref().to_vec();
                    let raw = Raw {
                        status,
                        headers,
                        body,
                    };
                    if !is_retry_status(status) {
                        return Ok(raw);
                    }
                    let wait = retry_after(&raw.headers).unwrap_or_else(|| backoff(attempt));
                    (Ok(raw), wait)
                }
                Err(e) => {
                    let err = ServiceError::from_core(service, &e, target);
                    if err.code != "TransportError" {
                        return Err(err);
                    }
                    (Err(err), backoff(attempt))
                }
            };
            if attempt >= MAX_RETRIES || slept + wait > RETRY_BUDGET {
                return outcome;
            }
            tracing::debug!(service = service.as_str(), url = %url.path(), attempt, ?wait, "retrying request in memory");
            tokio::time::sleep(wait).await;
            slept += wait;
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HostRule;

    #[test]
    fn host_rules() {
        let g = HostRule::Exact("graph.microsoft.com".into());
        assert!(g.allows("graph.microsoft.com"));
        assert!(!g.allows("evil.com"));
        assert!(!g.allows("x.graph.microsoft.com"));
        let kv = HostRule::Subdomain("vault.azure.net".into());
        assert!(kv.allows("my-vault.vault.azure.net"));
        assert!(!kv.allows("vault.azure.net"));
        assert!(!kv.allows(".vault.azure.net"));
        assert!(!kv.allows("a.b.vault.azure.net"));
        assert!(!kv.allows("myvault.vault.azure.net.evil.com"));
        assert!(!kv.allows("evilvault.azure.net"));
    }
}
