//! A small ARM client on an azure_core pipeline.
//!
//! Why hand-written rather than the generated Azure SDK crates: the workflow needs a
//! handful of resource types at pinned api-versions, must see every status code and header
//! (to journal long-running operation URLs and to classify errors), and must never sleep
//! for long in memory. So the client is a thin layer over `azure_core::http::Pipeline`
//! (bearer token for the cloud's ARM scope, the chosen [`Transport`]) that
//!
//! - retries briefly in memory only (≤ [`MAX_RETRIES`] retries, ≤ [`RETRY_BUDGET`] of sleep)
//!   for 408/429/5xx and connection failures; anything longer — a 429 asking for 30 s, a
//!   conflict — is returned as a classified [`ArmError`] so the engine schedules a durable
//!   retry;
//! - never follows a URL (`nextLink`, `Azure-AsyncOperation`, `Location`) to a host other
//!   than the cloud's resource manager, so the bearer token cannot leak elsewhere;
//! - returns long-running operations as data ([`Operation`], serializable) that callers
//!   journal and [`ArmClient::poll`] later, possibly from another process.

use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use azure_core::http::headers::{HeaderName, Headers};
use azure_core::http::policies::Policy;
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::{Context, Method, Pipeline, PipelineSendOptions, Request, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cloud::Cloud;
use super::error::{ArmError, retry_after};
use super::transport::{Transport, TransportError};

/// Retries made in memory for one request (transient statuses and connection errors).
pub const MAX_RETRIES: u32 = 2;
/// Most time one request may spend sleeping between in-memory retries; a longer
/// server-requested delay is handed to the engine instead.
pub const RETRY_BUDGET: Duration = Duration::from_secs(2);
/// Pages followed by [`ArmClient::list`] before giving up (a loop guard).
const MAX_PAGES: usize = 1000;

/// How a long-running operation is polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OperationKind {
    /// `Azure-AsyncOperation`: a status document `{"status": "InProgress|Succeeded|Failed|Canceled"}`.
    AsyncOperation,
    /// `Location`: 202 while running, 200/204 when done, an error status when failed.
    Location,
}

/// A long-running operation to poll. Serializable: it is journaled as a checkpoint so a
/// resumed attempt (or another worker) polls instead of re-sending the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Absolute polling URL (on the resource manager host).
    pub url: String,
    /// Polling protocol.
    pub kind: OperationKind,
    /// Server-suggested polling interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Duration>,
}

/// Where a long-running operation stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationStatus {
    /// Still running; look again after `retry_after` (when the server said).
    InProgress {
        /// Server-suggested delay.
        retry_after: Option<Duration>,
    },
    /// Finished successfully.
    Succeeded,
    /// Finished with a failure (`Failed` or `Canceled`).
    Failed(ArmError),
}

/// Answer to a PUT.
#[derive(Debug, Clone, PartialEq)]
pub struct PutResponse {
    /// 200 (replaced), 201 (created) or 202 (accepted).
    pub status: u16,
    /// Response body, when there is one.
    pub body: Option<Value>,
    /// Operation to poll, when the PUT is long-running.
    pub operation: Option<Operation>,
}

/// Answer to a DELETE.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteResponse {
    /// The resource did not exist (404 or 204).
    Gone,
    /// Deleted synchronously (200; also a 202 without any polling header).
    Done,
    /// Deletion accepted; poll the operation.
    Accepted(Operation),
}

/// A raw answer (any status).
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Headers,
    body: Vec<u8>,
}

impl Raw {
    fn json(&self, rid: Option<&str>) -> Result<Option<Value>, ArmError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        serde_json::from_slice(&self.body).map(Some).map_err(|e| {
            ArmError::local(
                "InvalidResponse",
                format!("HTTP {} answer is not JSON: {e}", self.status),
                rid,
            )
        })
    }

    fn error(&self, rid: Option<&str>) -> ArmError {
        ArmError::from_response(self.status, &self.headers, &self.body, rid)
    }

    fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

#[derive(Debug)]
struct Inner {
    pipeline: Pipeline,
    endpoint: String,
    host: String,
}

/// ARM client: cheap to clone (one shared pipeline and token cache).
#[derive(Debug, Clone)]
pub struct ArmClient {
    inner: Arc<Inner>,
}

pub(crate) fn is_retry_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

pub(crate) fn backoff(attempt: u32) -> Duration {
    // 200 ms, 800 ms: two short tries fit the budget with room for a Retry-After of ~1 s.
    Duration::from_millis(200 * 4u64.pow(attempt))
}

fn operation_from(headers: &Headers, status: u16) -> Option<Operation> {
    let get = |n: &'static str| {
        headers
            .get_optional_str(&HeaderName::from_static(n))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let retry_after = retry_after(headers);
    if let Some(url) = get("azure-asyncoperation") {
        return Some(Operation {
            url,
            kind: OperationKind::AsyncOperation,
            retry_after,
        });
    }
    if matches!(status, 201 | 202)
        && let Some(url) = get("location")
    {
        return Some(Operation {
            url,
            kind: OperationKind::Location,
            retry_after,
        });
    }
    None
}

impl ArmClient {
    /// A client for `cloud`'s resource manager, authenticating with `credential` (token
    /// scope [`Cloud::arm_scope`]) and sending through `transport`.
    ///
    /// # Errors
    /// The transport could not be built.
    pub fn new(
        cloud: &Cloud,
        credential: Arc<dyn TokenCredential>,
        transport: &Transport,
    ) -> Result<Self, TransportError> {
        let options = transport.client_options(cloud)?;
        let auth: Arc<dyn Policy> = Arc::new(BearerTokenAuthorizationPolicy::new(
            credential,
            [cloud.arm_scope()],
        ));
        let pipeline = Pipeline::new(
            Some(env!("CARGO_PKG_NAME")),
            Some(env!("CARGO_PKG_VERSION")),
            options,
            Vec::new(),
            vec![auth],
            None,
        );
        Ok(Self {
            inner: Arc::new(Inner {
                pipeline,
                endpoint: cloud.resource_manager().to_string(),
                host: cloud.resource_manager_host().to_ascii_lowercase(),
            }),
        })
    }

    /// The resource manager endpoint, e.g. `https://management.azure.com`.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    fn url(&self, id: &str, api: &str, query: &[(&str, &str)]) -> Result<String, ArmError> {
        if !id.starts_with('/') {
            return Err(ArmError::local(
                "InvalidResourceId",
                format!("an ARM resource id or path must start with '/', got '{id}'"),
                Some(id),
            ));
        }
        let mut url = Url::parse(&format!("{}{id}", self.inner.endpoint)).map_err(|e| {
            ArmError::local(
                "InvalidResourceId",
                format!("bad URL for {id}: {e}"),
                Some(id),
            )
        })?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("api-version", api);
            for (k, v) in query {
                q.append_pair(k, v);
            }
        }
        Ok(url.to_string())
    }

    /// Sends one request with the short in-memory retry; any status is returned.
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
        rid: Option<&str>,
    ) -> Result<Raw, ArmError> {
        let url = Url::parse(url).map_err(|e| {
            ArmError::local("InvalidUrl", format!("cannot parse URL '{url}': {e}"), rid)
        })?;
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        if url.scheme() != "https" || host != self.inner.host {
            return Err(ArmError::local(
                "RefusedUrl",
                format!(
                    "refusing to send an authenticated request to {url}: not on the resource manager host {}",
                    self.inner.host
                ),
                rid,
            ));
        }
        let payload = match body {
            Some(b) => Some(serde_json::to_vec(b).map_err(|e| {
                ArmError::local("InvalidRequest", format!("body not serializable: {e}"), rid)
            })?),
            None => None,
        };
        let mut slept = Duration::ZERO;
        let mut attempt = 0;
        let class = super::budget::Class::of(&method);
        let budget_key = super::budget::Key::of(&self.inner.host, url.path(), class);
        let caller = super::budget::Caller::current();
        // The answer of the try before an in-memory retry.
        let mut previous: Option<Result<Raw, ArmError>> = None;
        loop {
            // The subscription's budget first: a turn further away than a moment
            // goes back to the engine as a soft, throttled retry that names the budget.
            if let Some(k) = &budget_key
                && let Err(d) = super::budget::global().acquire(k, caller.as_ref()).await
            {
                // An in-memory retry held back: the request did go out, so the caller gets
                // that try's own answer. `ArmBudgetWait` always means "nothing was sent"
                // (`durable::ensure` relies on it to keep what it read).
                if let Some(answer) = previous.take() {
                    return answer;
                }
                let mut e = ArmError::local("ArmBudgetWait", d.message, rid);
                e.class = super::error::ErrorClass::Throttled;
                e.status = 429;
                e.retry_after = Some(d.after);
                return Err(e);
            }
            let mut req = Request::new(url.clone(), method);
            req.insert_header("accept", "application/json");
            if let Some(p) = &payload {
                req.insert_header("content-type", "application/json");
                req.set_body(p.clone());
            }
            let result = self
                .inner
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
                    if let Some(k) = &budget_key {
                        let left = headers
                            .get_optional_str(&HeaderName::from_static(class.remaining_header()))
                            .and_then(|v| v.trim().parse::<u32>().ok());
                        super::budget::global().observe(k, status, left, retry_after(&headers));
                    }
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
                    let err = ArmError::from_core(&e, rid);
                    if err.code != "TransportError" {
                        return Err(err);
                    }
                    (Err(err), backoff(attempt))
                }
            };
            if attempt >= MAX_RETRIES || slept + wait > RETRY_BUDGET {
                return outcome;
            }
            tracing::debug!(%url, attempt, ?wait, "retrying ARM request in memory");
            previous = Some(outcome);
            tokio::time::sleep(wait).await;
            slept += wait;
            attempt += 1;
        }
    }

    /// GET a resource as JSON; `None` when it (or its resource group or parent) does not
    /// exist.
    ///
    /// # Errors
    /// Any other failure, classified.
    pub async fn get_value(&self, id: &str, api: &str) -> Result<Option<Value>, ArmError> {
        self.get_value_with(id, api, &[]).await
    }

    /// [`Self::get_value`] with extra query parameters (e.g. `$expand`).
    ///
    /// # Errors
    /// See [`Self::get_value`].
    pub async fn get_value_with(
        &self,
        id: &str,
        api: &str,
        query: &[(&str, &str)],
    ) -> Result<Option<Value>, ArmError> {
        let url = self.url(id, api, query)?;
        let raw = self.send(Method::Get, &url, None, Some(id)).await?;
        match raw.status {
            404 => Ok(None),
            200..=299 => match raw.json(Some(id))? {
                Some(v) => Ok(Some(v)),
                None => Err(ArmError::local(
                    "InvalidResponse",
                    "GET answered without a body",
                    Some(id),
                )),
            },
            _ => Err(raw.error(Some(id))),
        }
    }

    /// GET a resource into a model; `None` when it does not exist.
    ///
    /// # Errors
    /// Any other failure; a body that does not fit `T` is a permanent `InvalidResponse`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        id: &str,
        api: &str,
    ) -> Result<Option<T>, ArmError> {
        match self.get_value(id, api).await? {
            None => Ok(None),
            Some(v) => decode(v, Some(id)).map(Some),
        }
    }

    /// PUT (create or replace) a resource.
    ///
    /// # Errors
    /// Any non-2xx answer, classified.
    pub async fn put(&self, id: &str, api: &str, body: &Value) -> Result<PutResponse, ArmError> {
        let url = self.url(id, api, &[])?;
        let raw = self.send(Method::Put, &url, Some(body), Some(id)).await?;
        if !raw.is_success() {
            return Err(raw.error(Some(id)));
        }
        Ok(PutResponse {
            status: raw.status,
            body: raw.json(Some(id))?,
            operation: operation_from(&raw.headers, raw.status),
        })
    }

    /// DELETE a resource.
    ///
    /// # Errors
    /// Any failure other than 404, classified.
    pub async fn delete(&self, id: &str, api: &str) -> Result<DeleteResponse, ArmError> {
        let url = self.url(id, api, &[])?;
        let raw = self.send(Method::Delete, &url, None, Some(id)).await?;
        match raw.status {
            404 | 204 => Ok(DeleteResponse::Gone),
            202 => Ok(match operation_from(&raw.headers, raw.status) {
                Some(op) => DeleteResponse::Accepted(op),
                None => DeleteResponse::Done,
            }),
            200..=299 => Ok(DeleteResponse::Done),
            _ => Err(raw.error(Some(id)).while_deleting()),
        }
    }

    /// POST an action (e.g. `{account id}/listKeys`); the answer body, if any.
    ///
    /// # Errors
    /// Any non-2xx answer, classified.
    pub async fn post(
        &self,
        path: &str,
        api: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, ArmError> {
        let url = self.url(path, api, &[])?;
        let raw = self.send(Method::Post, &url, body, Some(path)).await?;
        if !raw.is_success() {
            return Err(raw.error(Some(path)));
        }
        raw.json(Some(path))
    }

    /// Lists a collection as JSON values, following `nextLink`.
    ///
    /// # Errors
    /// Any failure (a missing parent is a `NotFound` error here, not an empty list).
    pub async fn list_values(&self, path: &str, api: &str) -> Result<Vec<Value>, ArmError> {
        self.list_values_with(path, api, &[]).await
    }

    /// [`Self::list_values`] with extra query parameters (e.g. `$filter`).
    ///
    /// # Errors
    /// See [`Self::list_values`].
    pub async fn list_values_with(
        &self,
        path: &str,
        api: &str,
        query: &[(&str, &str)],
    ) -> Result<Vec<Value>, ArmError> {
        let mut url = self.url(path, api, query)?;
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let raw = self.send(Method::Get, &url, None, Some(path)).await?;
            if !raw.is_success() {
                return Err(raw.error(Some(path)));
            }
            let page = raw.json(Some(path))?.unwrap_or(Value::Null);
            if let Some(items) = page.get("value").and_then(Value::as_array) {
                out.extend(items.iter().cloned());
            }
            match page.get("nextLink").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => url = next.to_string(),
                _ => return Ok(out),
            }
        }
        Err(ArmError::local(
            "TooManyPages",
            format!("more than {MAX_PAGES} pages listing {path}"),
            Some(path),
        ))
    }

    /// Lists a collection into models, following `nextLink`.
    ///
    /// # Errors
    /// See [`Self::list_values`]; an item not fitting `T` is a permanent `InvalidResponse`.
    pub async fn list<T: DeserializeOwned>(
        &self,
        path: &str,
        api: &str,
    ) -> Result<Vec<T>, ArmError> {
        self.list_values(path, api)
            .await?
            .into_iter()
            .map(|v| decode(v, Some(path)))
            .collect()
    }

    /// Polls a long-running operation once.
    ///
    /// # Errors
    /// The poll itself failed (network, throttling, operation unknown: `NotFound`). A
    /// *failed operation* is `Ok(OperationStatus::Failed)`.
    pub async fn poll(&self, op: &Operation) -> Result<OperationStatus, ArmError> {
        let raw = self.send(Method::Get, &op.url, None, None).await?;
        let later = retry_after(&raw.headers).or(op.retry_after);
        match op.kind {
            OperationKind::AsyncOperation => {
                if !raw.is_success() {
                    return Err(raw.error(None));
                }
                let doc = raw.json(None)?.unwrap_or(Value::Null);
                let status = doc.get("status").and_then(Value::as_str).unwrap_or("");
                if status.eq_ignore_ascii_case("Succeeded") {
                    Ok(OperationStatus::Succeeded)
                } else if ["Failed", "Canceled", "Cancelled"]
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(status))
                {
                    Ok(OperationStatus::Failed(ArmError::from_operation(
                        doc.get("error"),
                        None,
                        status,
                    )))
                } else {
                    Ok(OperationStatus::InProgress { retry_after: later })
                }
            }
            OperationKind::Location => match raw.status {
                202 => Ok(OperationStatus::InProgress { retry_after: later }),
                200..=299 => Ok(OperationStatus::Succeeded),
                s if s == 404 || is_retry_status(s) => Err(raw.error(None)),
                _ => Ok(OperationStatus::Failed(raw.error(None))),
            },
        }
    }
}

/// Decodes a JSON value into a model.
///
/// # Errors
/// A permanent `InvalidResponse` naming the resource.
pub fn decode<T: DeserializeOwned>(v: Value, rid: Option<&str>) -> Result<T, ArmError> {
    serde_json::from_value(v).map_err(|e| {
        ArmError::local(
            "InvalidResponse",
            format!(
                "answer does not match the expected {}: {e}",
                std::any::type_name::<T>()
            ),
            rid,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_headers() {
        let mut h = Headers::new();
        h.insert(
            HeaderName::from_static("location"),
            "https://m/l".to_string(),
        );
        h.insert(HeaderName::from_static("retry-after"), "5".to_string());
        assert_eq!(operation_from(&h, 200), None);
        let op = operation_from(&h, 202);
        assert_eq!(
            op,
            Some(Operation {
                url: "https://m/l".into(),
                kind: OperationKind::Location,
                retry_after: Some(Duration::from_secs(5)),
            })
        );
        h.insert(
            HeaderName::from_static("azure-asyncoperation"),
            "https://m/a".to_string(),
        );
        assert_eq!(
            operation_from(&h, 201).map(|o| o.kind),
            Some(OperationKind::AsyncOperation)
        );
        let back: Operation =
            serde_json::from_value(serde_json::to_value(op.clone()).unwrap_or_default())
                .unwrap_or_else(|_| Operation {
                    url: String::new(),
                    kind: OperationKind::AsyncOperation,
                    retry_after: None,
                });
        assert_eq!(Some(back), op);
    }

    #[test]
    fn backoff_fits_budget() {
        let total: Duration = (0..MAX_RETRIES).map(backoff).sum();
        assert!(total <= RETRY_BUDGET);
    }
}
