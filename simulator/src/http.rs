//! The single HTTP entry point: request capture, logging, faults, throttling, routing.
//!
//! Every request goes through [`dispatch`]: it gets a sequence number, is matched against
//! the fault rules, is throttled (ARM only), routed to its surface by host and path, and is
//! recorded in the request log with the status and error code it got. `/_sim/...` control
//! requests are served but not logged, so the log shows only what clients did.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::faults::FaultAction;
use crate::sim::{RequestRecord, Simulator, lock};
use crate::throttle::{OpClass, Take};
use crate::{arm, blob, control, entra, graph, keyvault, kube};

/// Largest request body accepted (blobs and ARM bodies are small).
const BODY_LIMIT: usize = 32 * 1024 * 1024;

/// Header a redirecting transport may set to tell the simulator which host the client
/// meant (`management.azure.com`, `{account}.blob.core.windows.net`, ...).
pub const ORIGINAL_HOST_HEADER: &str = "x-ms-original-host";

/// Error code attached to a response for the request log (set as a response extension so
/// it never appears on the wire unless the surface sends it anyway).
#[derive(Debug, Clone)]
pub(crate) struct ErrorCode(pub String);

/// A captured request.
#[derive(Debug)]
pub(crate) struct Req {
    pub method: Method,
    /// Raw path as received (percent-encoded).
    pub path: String,
    /// Path and query as received.
    pub path_and_query: String,
    /// Decoded, non-empty path segments.
    pub segments: Vec<String>,
    /// Decoded query pairs, in order.
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Host the client addressed (`x-ms-original-host`, else `Host`).
    pub host: String,
}

impl Req {
    /// First query value for `key` (case-insensitive key, as ARM treats `api-version`).
    pub(crate) fn q(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Base URL (scheme + host) the client used, for `nextLink` and operation URLs: a
    /// client reaching us through an https-preserving transport keeps seeing
    /// `https://management.azure.com`, a plain client keeps seeing `http://127.0.0.1:PORT`.
    pub(crate) fn base_url(&self) -> String {
        let h = self.host.to_ascii_lowercase();
        let azure = [
            ".azure.com",
            ".windows.net",
            ".usgovcloudapi.net",
            ".chinacloudapi.cn",
            "login.microsoftonline.com",
            ".microsoft.com",
            ".microsoft.us",
            ".vault.azure.net",
            ".vault.azure.cn",
        ];
        if self.headers.contains_key(ORIGINAL_HOST_HEADER) || azure.iter().any(|s| h.ends_with(s)) {
            format!("https://{}", self.host)
        } else {
            format!("http://{}", self.host)
        }
    }

    pub(crate) fn json_body(&self) -> Result<Value, String> {
        if self.body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&self.body).map_err(|e| format!("invalid JSON body: {e}"))
    }
}

/// Which surface a request is for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Surface {
    Control,
    Entra,
    Blob {
        account: String,
        rest: Vec<String>,
    },
    /// Microsoft Graph (`graph.microsoft.com`, the sovereign clouds' hosts, or `/_graph/…`).
    Graph,
    /// A Key Vault data plane (`{vault}.vault.azure.net`, …, or `/_keyvault/{vault}/…`).
    KeyVault {
        vault: String,
        rest: Vec<String>,
    },
    Arm,
    Kube,
    Unknown,
}

pub(crate) fn classify(req: &Req) -> Surface {
    let segs = &req.segments;
    let first = segs.first().map(String::as_str).unwrap_or("");
    if first == "_sim" {
        return Surface::Control;
    }
    let host = req.host.to_ascii_lowercase();
    let host = host.split(':').next().unwrap_or("");
    if let Some(account) = host.strip_suffix(".blob.core.windows.net") {
        return Surface::Blob {
            account: account.to_string(),
            rest: segs.clone(),
        };
    }
    if graph::HOSTS.contains(&host) || first == "_graph" {
        return Surface::Graph;
    }
    if let Some(vault) = keyvault::vault_of_host(host) {
        return Surface::KeyVault {
            vault,
            rest: segs.clone(),
        };
    }
    if first == "_keyvault" && segs.len() >= 2 {
        return Surface::KeyVault {
            vault: segs[1].to_ascii_lowercase(),
            rest: segs[2..].to_vec(),
        };
    }
    if first == "_blob" && segs.len() >= 2 {
        return Surface::Blob {
            account: segs[1].to_ascii_lowercase(),
            rest: segs[2..].to_vec(),
        };
    }
    if first.eq_ignore_ascii_case("subscriptions") {
        return Surface::Arm;
    }
    if matches!(first, "api" | "apis" | "version" | "openapi") {
        return Surface::Kube;
    }
    if segs.len() >= 2 && (segs[1] == "oauth2" || segs[1] == "v2.0") {
        return Surface::Entra;
    }
    Surface::Unknown
}

pub(crate) fn router(sim: Simulator) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(sim)
}

async fn handle(State(sim): State<Simulator>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => return (StatusCode::PAYLOAD_TOO_LARGE, "body too large").into_response(),
    };
    let path = parts.uri.path().to_string();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| path.clone());
    let segments = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let query = parts
        .uri
        .query()
        .map(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).unwrap_or_default())
        .unwrap_or_default();
    let host = parts
        .headers
        .get(ORIGINAL_HOST_HEADER)
        .or_else(|| parts.headers.get(axum::http::header::HOST))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| parts.uri.authority().map(|a| a.to_string()))
        .unwrap_or_else(|| "localhost".to_string());
    let req = Req {
        method: parts.method,
        path,
        path_and_query,
        segments,
        query,
        headers: parts.headers,
        body,
        host,
    };
    dispatch(sim, req).await
}

/// Routes one captured request; see the module docs.
pub(crate) async fn dispatch(sim: Simulator, req: Req) -> Response {
    let surface = classify(&req);
    // A write makes the next request run the controllers whatever the time (they react
    // to it): `Simulator::tick_for_request`.
    let writes = !matches!(req.method, Method::GET | Method::HEAD);
    if surface == Surface::Control {
        sim.written();
        return control::handle(&sim, &req);
    }
    let seq = sim.next_request_seq();
    sim.tick_for_request();
    if writes {
        sim.written();
    }
    let rtype = match &surface {
        Surface::Arm => arm::classify_type(&req),
        Surface::Kube => kube::classify_type(&req),
        Surface::Blob { .. } => {
            Some("Microsoft.Storage/storageAccounts/blobServices/containers/blobs".to_string())
        }
        Surface::Entra => Some("Microsoft.Entra/token".to_string()),
        Surface::Graph => Some(graph_type(&req)),
        Surface::KeyVault { rest, .. } => Some(format!(
            "Microsoft.KeyVault/vaults/{}",
            rest.first()
                .map(|s| s.to_ascii_lowercase())
                .unwrap_or_default()
        )),
        _ => None,
    };
    let hit =
        lock(&sim.inner.faults).check(req.method.as_str(), &req.path_and_query, rtype.as_deref());
    let mut fail_async = None;
    if let Some(hit) = hit {
        if hit.latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(hit.latency_ms)).await;
        }
        match hit.action {
            FaultAction::Pass => {}
            FaultAction::FailAsync { code, message } => fail_async = Some((code, message)),
            FaultAction::Drop => {
                record(&sim, seq, &req, 0, Some("ConnectionDropped".into()));
                return dropped_connection();
            }
            FaultAction::Respond {
                status,
                code,
                message,
                retry_after,
            } => {
                let mut resp = match (&surface, retry_after) {
                    // An API server's Status carries the delay too (apimachinery
                    // `errors.NewTooManyRequests`: `details.retryAfterSeconds`), which is
                    // what kube clients read; the header alone is lost in their error type.
                    (Surface::Kube, Some(s)) => kube::status_with_details(
                        status,
                        &code,
                        &message,
                        serde_json::json!({"retryAfterSeconds": s}),
                    ),
                    _ => error_for(&surface, status, &code, &message),
                };
                if let Some(s) = retry_after {
                    set_header(&mut resp, "retry-after", &s.to_string());
                }
                record(&sim, seq, &req, status, Some(code));
                return resp;
            }
        }
    }
    if surface == Surface::Arm
        && let Some(sub) = arm::subscription_of(&req)
    {
        let class = OpClass::of(&req.method);
        let principal = principal_of(&req);
        let take = lock(&sim.inner.throttle).take(&sub, &principal, class);
        match take {
            Take::Throttled(secs) => {
                let msg = format!(
                    "Number of '{}' requests for subscription '{sub}' actor '{principal}' exceeded. Please try again after '{secs}' seconds after additional tokens are available. Refer to https://aka.ms/arm-throttling",
                    class.singular()
                );
                let mut resp = arm::error_response(429, "SubscriptionRequestsThrottled", &msg);
                set_header(&mut resp, "retry-after", &secs.to_string());
                record(
                    &sim,
                    seq,
                    &req,
                    429,
                    Some("SubscriptionRequestsThrottled".into()),
                );
                return resp;
            }
            Take::Ok { left, global_left } => {
                let mut resp = arm::handle(&sim, &req, fail_async).await;
                let (own, global) = class.headers();
                set_header(&mut resp, own, &left.to_string());
                set_header(&mut resp, global, &global_left.to_string());
                return finish(&sim, seq, &req, resp);
            }
        }
    }
    let resp = match surface {
        Surface::Arm => arm::handle(&sim, &req, fail_async).await,
        Surface::Kube => kube::handle(&sim, &req).await,
        Surface::Entra => entra::handle(&sim, &req),
        Surface::Blob { account, rest } => blob::handle(&sim, &req, &account, &rest),
        Surface::Graph => graph::handle(&sim, &req),
        Surface::KeyVault { vault, rest } => {
            match keyvault::handle(&sim, &req, &vault, &rest).await {
                Some(r) => r,
                None => {
                    // No such vault: its DNS name does not resolve, so the client never
                    // gets an HTTP answer.
                    record(&sim, seq, &req, 0, Some("NameResolutionFailure".into()));
                    return dropped_connection();
                }
            }
        }
        Surface::Control | Surface::Unknown => error_for(
            &Surface::Unknown,
            404,
            "NotFound",
            &format!("no simulated endpoint at {}", req.path),
        ),
    };
    finish(&sim, seq, &req, resp)
}

fn finish(sim: &Simulator, seq: u64, req: &Req, resp: Response) -> Response {
    let code = resp
        .headers()
        .get("x-ms-error-code")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| resp.extensions().get::<ErrorCode>().map(|c| c.0.clone()));
    record(sim, seq, req, resp.status().as_u16(), code);
    if !matches!(req.method, Method::GET | Method::HEAD) {
        sim.persist_logged();
    }
    resp
}

fn record(sim: &Simulator, seq: u64, req: &Req, status: u16, error_code: Option<String>) {
    let rec = RequestRecord {
        seq,
        method: req.method.to_string(),
        path: req.path_and_query.clone(),
        status,
        error_code,
        actor: None,
        error_message: None,
        at_ms: sim.now_ms(),
    };
    let mut log = lock(&sim.inner.log);
    // Concurrent requests finish out of order; keep the log ordered by arrival.
    let pos = log.partition_point(|r| r.seq < seq);
    log.insert(pos, rec);
}

/// A response whose body fails immediately: hyper aborts the connection, so the client
/// sees a transport error rather than an HTTP status.
fn dropped_connection() -> Response {
    let stream = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "fault: connection dropped",
        ))
    });
    Response::new(Body::from_stream(stream))
}

/// An error in the format of the surface (ARM JSON, Kubernetes Status, OAuth, blob XML).
pub(crate) fn error_for(surface: &Surface, status: u16, code: &str, message: &str) -> Response {
    match surface {
        Surface::Kube => kube::status_response(status, code, message),
        Surface::Entra => entra::error_response(status, code, message),
        Surface::Blob { .. } => blob::error_response(status, code, message),
        Surface::Graph => graph::error_response(status, code, message),
        Surface::KeyVault { .. } => keyvault::error_response(status, code, message),
        _ => arm::error_response(status, code, message),
    }
}

pub(crate) fn set_header(resp: &mut Response, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

/// JSON response with a status.
pub(crate) fn json(status: u16, v: &Value) -> Response {
    let mut resp = Response::new(Body::from(serde_json::to_vec(v).unwrap_or_default()));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

/// Empty response with a status.
pub(crate) fn empty(status: u16) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp
}

/// Who is calling, for ARM's per-principal buckets: the `appid` (else `oid`) of the bearer
/// token the simulator's Entra issued, read without verifying it (the simulator signs
/// nothing); `anonymous` for anything else.
fn principal_of(req: &Req) -> String {
    use base64::Engine as _;
    let claims = req
        .header("authorization")
        .and_then(|a| {
            a.strip_prefix("Bearer ")
                .or_else(|| a.strip_prefix("bearer "))
        })
        .and_then(|t| t.split('.').nth(1))
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p.trim_end_matches('='))
                .ok()
        })
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    claims
        .as_ref()
        .and_then(|c| c.get("appid").or_else(|| c.get("oid")))
        .and_then(|v| v.as_str())
        .map_or_else(|| "anonymous".to_string(), str::to_string)
}

/// The Graph resource type a request addresses, for fault matching:
/// `Microsoft.Graph/applications`, `Microsoft.Graph/servicePrincipals`, …
fn graph_type(req: &Req) -> String {
    let coll = req
        .segments
        .iter()
        .skip_while(|s| *s == "_graph")
        .nth(1)
        .map(|s| s.split('(').next().unwrap_or_default().to_string())
        .unwrap_or_default();
    format!("Microsoft.Graph/{coll}")
}
