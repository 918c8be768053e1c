//! Shared helpers: an in-process simulator driven through its router (no socket).
#![allow(clippy::unwrap_used, dead_code)]

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use hcp_simulator::{SimConfig, Simulator};
use serde_json::Value;
use tower::ServiceExt;

pub const SUB: &str = "11111111-1111-1111-1111-111111111111";
pub const NET: &str = "api-version=2023-11-01";

/// Fast config without throttling (tests of throttling turn it on).
pub fn config() -> SimConfig {
    let mut c = SimConfig::default();
    c.throttle.enabled = false;
    c
}

pub fn sim() -> Simulator {
    Simulator::new(config()).unwrap()
}

/// A response: status, headers, JSON body (Null when empty or not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
    pub fn code(&self) -> Option<String> {
        self.header("x-ms-error-code")
    }
}

pub async fn call_with(
    sim: &Simulator,
    method: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> Resp {
    let mut b = Request::builder().method(method).uri(path);
    let mut has_auth = false;
    let mut has_host = false;
    for (k, v) in headers {
        has_auth |= k.eq_ignore_ascii_case("authorization");
        has_host |= k.eq_ignore_ascii_case("host");
        if !v.is_empty() {
            b = b.header(*k, *v);
        }
    }
    if !has_host {
        b = b.header("host", "management.azure.com");
    }
    if !has_auth {
        b = b.header("authorization", "Bearer test-token");
    }
    let req = match body {
        Some(v) => b
            .header("content-type", "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    };
    let resp = sim.router().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).to_string();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Resp {
        status,
        headers,
        body,
        text,
    }
}

pub async fn call(sim: &Simulator, method: &str, path: &str, body: Option<Value>) -> Resp {
    call_with(sim, method, path, body, &[]).await
}

/// A server-side apply of `obj` at `path` (field manager `test`, forced).
pub async fn apply(sim: &Simulator, path: &str, obj: &Value) -> Resp {
    call_with(
        sim,
        "PATCH",
        &format!("{path}?fieldManager=test&force=true"),
        Some(obj.clone()),
        &[("content-type", "application/apply-patch+yaml")],
    )
    .await
}

/// A namespace, created if missing.
pub async fn ensure_ns(sim: &Simulator, ns: &str) {
    let r = call(
        sim,
        "POST",
        "/api/v1/namespaces",
        Some(
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        ),
    )
    .await;
    assert!(r.status == 201 || r.status == 409, "{r:?}");
}

/// GET `path` until `pred` holds (20 s at most); panics naming `what`.
pub async fn wait_until(
    sim: &Simulator,
    path: &str,
    what: &str,
    pred: impl Fn(&Resp) -> bool,
) -> Resp {
    let mut last = None;
    for _ in 0..1000 {
        let r = call(sim, "GET", path, None).await;
        if pred(&r) {
            return r;
        }
        last = Some(r);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{what} never held on {path}: {:#}",
        last.map(|r| r.body).unwrap_or_default()
    );
}

/// Condition `t` of an object's `status.conditions`.
pub fn condition<'a>(r: &'a Resp, t: &str) -> Option<&'a Value> {
    r.body["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

/// Its status.
pub fn status(r: &Resp, t: &str) -> Option<String> {
    condition(r, t).and_then(|c| c["status"].as_str().map(str::to_string))
}

/// Its message.
pub fn message(r: &Resp, t: &str) -> String {
    condition(r, t)
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

pub fn rg_path(rg: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}")
}

pub async fn create_rg(sim: &Simulator, rg: &str) {
    let r = call(
        sim,
        "PUT",
        &format!("{}?api-version=2021-04-01", rg_path(rg)),
        Some(serde_json::json!({"location": "eastus"})),
    )
    .await;
    assert!(r.status == 201 || r.status == 200, "{r:?}");
}

/// Strips scheme and host from an absolute URL the simulator handed out.
pub fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map(|x| x.1).unwrap_or(url);
    rest.find('/')
        .map(|i| rest[i..].to_string())
        .unwrap_or_default()
}

/// Polls an `Azure-AsyncOperation` URL until it is terminal; returns the final status.
pub async fn wait_op(sim: &Simulator, async_url: &str) -> String {
    let path = path_of(async_url);
    for _ in 0..400 {
        let r = call(sim, "GET", &path, None).await;
        assert_eq!(r.status, 200, "{r:?}");
        let s = r.body["status"].as_str().unwrap().to_string();
        if s != "InProgress" {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("operation {async_url} never finished");
}

/// PUT and wait for the LRO (if any) to finish; asserts success.
pub async fn put_ok(sim: &Simulator, path: &str, body: Value) -> Value {
    let r = call(sim, "PUT", path, Some(body)).await;
    assert!(
        r.status == 200 || r.status == 201 || r.status == 202,
        "PUT {path}: {r:?}"
    );
    if let Some(op) = r.header("azure-asyncoperation") {
        assert_eq!(wait_op(sim, &op).await, "Succeeded");
    } else if r.status == 202 {
        let loc = r.header("location").unwrap();
        wait_location(sim, &loc).await;
    }
    let g = call(sim, "GET", path, None).await;
    assert_eq!(g.status, 200, "{g:?}");
    g.body
}

/// Polls a Location URL until it stops answering 202; returns the final response.
pub async fn wait_location(sim: &Simulator, url: &str) -> Resp {
    let path = path_of(url);
    for _ in 0..400 {
        let r = call(sim, "GET", &path, None).await;
        if r.status != 202 {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("location {url} never finished");
}

/// DELETE and wait for completion; returns the first response.
pub async fn delete_wait(sim: &Simulator, path: &str) -> Resp {
    let r = call(sim, "DELETE", path, None).await;
    if let Some(op) = r.header("azure-asyncoperation") {
        wait_op(sim, &op).await;
    } else if r.status == 202 {
        wait_location(sim, &r.header("location").unwrap()).await;
    }
    r
}

/// Path to the shared reference data, or None (test skipped) when absent outside CI.
pub fn reference_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference");
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!("reference data missing at {} and CI is set", dir.display());
    }
    println!("skipped: no ../shared");
    None
}

pub fn sub_path(p: &str) -> String {
    format!("/subscriptions/{SUB}{p}")
}
