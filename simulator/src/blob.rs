//! Minimal Azure Blob data plane for OIDC documents.
//!
//! Why our own instead of Azurite: the simulator must be one process with one state file
//! (crash tests kill the worker, not the cloud), and blobs must live in containers that
//! were created through *ARM* (`…/blobServices/default/containers/{c}`), which Azurite
//! knows nothing about. The subset is small: Put Blob (BlockBlob), Get Blob, Head Blob,
//! Delete Blob, with ETag/Last-Modified and XML errors with `x-ms-error-code`.
//!
//! Addressing: `Host: {account}.blob.core.windows.net` + `/{container}/{blob...}`, or
//! `/_blob/{account}/{container}/{blob...}` for plain-HTTP clients. Writes need an
//! `Authorization` header or a SAS (`sig=` in the query); anonymous reads are allowed when
//! the container's `publicAccess` is `Container` or `Blob`, as for the public OIDC issuer.
//!
//! What is modelled from the Blob service documentation:
//! - **Shared Key** (<https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key>):
//!   `Authorization: SharedKey {account}:{signature}` is verified — the string-to-sign of
//!   version 2015-02-21 and later (verb, the eleven standard headers with an empty
//!   `Content-Length` for 0, canonicalized `x-ms-*` headers in the service's header
//!   collation, canonicalized resource with decoded, lower-cased, sorted query parameters),
//!   HMAC-SHA256 with either account key of `listKeys`. A wrong signature answers 403
//!   `AuthenticationFailed` with the service's XML body (`AuthenticationErrorDetail`).
//!   `x-ms-original-host` (added by the clients' simulator transports after signing) is not
//!   part of the signed headers. `SharedKeyLite` answers 403 too (not simulated).
//! - Kept: Bearer tokens (Entra) and SAS (`sig=`) are accepted without verification — no
//!   client of ours uses them for writes and the token service is simulated anyway.
//! - **Ranges** (<https://learn.microsoft.com/rest/api/storageservices/specifying-the-range-header-for-blob-service-operations>):
//!   `x-ms-range` (preferred) or `Range`, `bytes=a-b` / `bytes=a-`, answer 206 with
//!   `Content-Range`; a start beyond the blob (any range of an empty blob) answers 416
//!   `InvalidRange` with `Content-Range: bytes */{size}`; a malformed range is ignored (200).
//! - **Conditional requests** (<https://learn.microsoft.com/rest/api/storageservices/specifying-conditional-headers-for-blob-service-operations>):
//!   `If-Match` / `If-None-Match` against the blob's ETag: Put Blob with `If-None-Match: *`
//!   on an existing blob answers 409 `BlobAlreadyExists`; a failed `If-Match` (or a matching
//!   `If-None-Match` on writes) 412 `ConditionNotMet`; reads with a matching
//!   `If-None-Match` 304. Kept: `If-Modified-Since`/`If-Unmodified-Since` are not evaluated
//!   (no client of ours or test sends them).

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::arm;
use crate::http::{Req, set_header};
use crate::sim::{Simulator, lock};
use crate::state::Blob;
use crate::util;

pub(crate) fn handle(sim: &Simulator, req: &Req, account: &str, rest: &[String]) -> Response {
    if rest.len() < 2 {
        return error_response(
            400,
            "InvalidUri",
            "The requested URI does not represent any resource on the server (container-level operations are not simulated).",
        );
    }
    let container = rest[0].to_ascii_lowercase();
    let blob_name = rest[1..].join("/");
    let now = sim.now_ms();
    let mut st = lock(&sim.inner.state);
    let Some(acct) = arm::find_storage_account(&st, account) else {
        return error_response(
            404,
            "ResourceNotFound",
            "The specified resource does not exist.",
        );
    };
    let authed = match req.header("authorization") {
        None => req.q("sig").is_some(),
        Some(h) => {
            if let Some(cred) = h.strip_prefix("SharedKey ") {
                let keys: Vec<String> = ["/key1", "/key2"]
                    .iter()
                    .filter_map(|k| util::str_at(&acct.internal, k).map(str::to_string))
                    .collect();
                if let Err(resp) = verify_shared_key(req, account, cred, &keys) {
                    return *resp;
                }
            } else if h.starts_with("SharedKeyLite ") {
                return auth_failed("SharedKeyLite authorization is not simulated.");
            }
            true
        }
    };
    let cid = format!(
        "{}/blobservices/default/containers/{}",
        acct.id.to_ascii_lowercase(),
        container
    );
    let public = match st.arm.get(&cid) {
        None => {
            return error_response(
                404,
                "ContainerNotFound",
                "The specified container does not exist.",
            );
        }
        Some(c) => {
            let access = util::str_at(&c.body, "/properties/publicAccess").unwrap_or("None");
            access.eq_ignore_ascii_case("Container") || access.eq_ignore_ascii_case("Blob")
        }
    };
    let key = format!(
        "{}/{}/{}",
        account.to_ascii_lowercase(),
        container,
        blob_name
    );
    let current_etag = st.blobs.get(&key).map(|b| b.etag.clone());
    match req.method {
        Method::PUT => {
            if !authed {
                return error_response(
                    401,
                    "NoAuthenticationInformation",
                    "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.",
                );
            }
            if let Some(resp) = write_conditions(req, current_etag.as_deref(), true) {
                return resp;
            }
            match req.header("x-ms-blob-type") {
                Some(t) if t.eq_ignore_ascii_case("BlockBlob") => {}
                _ => {
                    return error_response(
                        400,
                        "MissingRequiredHeader",
                        "An HTTP header that's mandatory for this request is not specified: x-ms-blob-type (only BlockBlob is simulated).",
                    );
                }
            }
            let etag = format!(
                "\"0x{:X}\"",
                util::uuid(&mut st, sim.config().seed).as_u128() as u64
            );
            let content_type = req
                .header("x-ms-blob-content-type")
                .or_else(|| req.header("content-type"))
                .unwrap_or("application/octet-stream")
                .to_string();
            st.blobs.insert(
                key,
                Blob {
                    content_type,
                    data_b64: STANDARD.encode(&req.body),
                    etag: etag.clone(),
                    modified_ms: now,
                },
            );
            let mut resp = status(201);
            set_header(&mut resp, "etag", &etag);
            set_header(&mut resp, "last-modified", &util::http_date(now));
            set_header(&mut resp, "x-ms-request-server-encrypted", "true");
            resp
        }
        Method::GET | Method::HEAD => {
            if !authed && !public {
                // Azure hides private blobs from anonymous callers behind a 404.
                return error_response(
                    404,
                    "ResourceNotFound",
                    "The specified resource does not exist.",
                );
            }
            let Some(b) = st.blobs.get(&key) else {
                return error_response(404, "BlobNotFound", "The specified blob does not exist.");
            };
            if let Some(resp) = write_conditions(req, Some(&b.etag), false) {
                return resp;
            }
            let data = STANDARD.decode(&b.data_b64).unwrap_or_default();
            let total = data.len();
            let range = req
                .header("x-ms-range")
                .or_else(|| req.header("range"))
                .and_then(parse_range);
            let (code, slice, content_range) = match range {
                None => (200, data, None),
                Some((start, _)) if start >= total => {
                    let mut resp = error_response(
                        416,
                        "InvalidRange",
                        "The range specified is invalid for the current size of the resource.",
                    );
                    set_header(&mut resp, "content-range", &format!("bytes */{total}"));
                    return resp;
                }
                Some((start, end)) => {
                    let end = end.map_or(total - 1, |e| e.min(total - 1));
                    let part = data
                        .get(start..=end)
                        .map(<[u8]>::to_vec)
                        .unwrap_or_default();
                    (206, part, Some(format!("bytes {start}-{end}/{total}")))
                }
            };
            let len = slice.len();
            let mut resp = if req.method == Method::HEAD {
                status(code)
            } else {
                let mut r = Response::new(Body::from(slice));
                *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
                r
            };
            if let Ok(v) = HeaderValue::from_str(&b.content_type) {
                resp.headers_mut().insert("content-type", v);
            }
            set_header(&mut resp, "content-length", &len.to_string());
            if let Some(cr) = content_range {
                set_header(&mut resp, "content-range", &cr);
            }
            set_header(&mut resp, "accept-ranges", "bytes");
            set_header(&mut resp, "etag", &b.etag);
            set_header(&mut resp, "last-modified", &util::http_date(b.modified_ms));
            set_header(&mut resp, "x-ms-blob-type", "BlockBlob");
            resp
        }
        Method::DELETE => {
            if !authed {
                return error_response(
                    401,
                    "NoAuthenticationInformation",
                    "Server failed to authenticate the request.",
                );
            }
            if current_etag.is_some()
                && let Some(resp) = write_conditions(req, current_etag.as_deref(), true)
            {
                return resp;
            }
            match st.blobs.remove(&key) {
                Some(_) => status(202),
                None => error_response(404, "BlobNotFound", "The specified blob does not exist."),
            }
        }
        _ => error_response(
            405,
            "UnsupportedHttpVerb",
            "The resource doesn't support the specified HTTP verb.",
        ),
    }
}

/// Whether an `If-Match` / `If-None-Match` value names `etag` (`*` names any blob).
fn etag_listed(header: &str, etag: Option<&str>) -> bool {
    let Some(etag) = etag else { return false };
    let norm = |t: &str| {
        t.trim()
            .trim_start_matches("W/")
            .trim_matches('"')
            .to_ascii_lowercase()
    };
    header
        .split(',')
        .any(|t| t.trim() == "*" || norm(t) == norm(etag))
}

/// Evaluates `If-Match` / `If-None-Match` against the blob's current ETag (`None`: no
/// blob). `write`: Put/Delete Blob (a matching `If-None-Match` fails with 412, or 409
/// `BlobAlreadyExists` for `*`), else a read (a matching `If-None-Match` answers 304).
fn write_conditions(req: &Req, etag: Option<&str>, write: bool) -> Option<Response> {
    let not_met = || {
        error_response(
            412,
            "ConditionNotMet",
            "The condition specified using HTTP conditional header(s) is not met.",
        )
    };
    if let Some(m) = req.header("if-match")
        && !etag_listed(m, etag)
    {
        return Some(not_met());
    }
    if let Some(m) = req.header("if-none-match")
        && etag_listed(m, etag)
    {
        if !write {
            let mut resp = status(304);
            if let Some(e) = etag {
                set_header(&mut resp, "etag", e);
            }
            return Some(resp);
        }
        if m.trim() == "*" {
            return Some(error_response(
                409,
                "BlobAlreadyExists",
                "The specified blob already exists.",
            ));
        }
        return Some(not_met());
    }
    None
}

/// `bytes=start-[end]` (a single range; anything else is ignored as Azure does).
fn parse_range(h: &str) -> Option<(usize, Option<usize>)> {
    let spec = h.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let start: usize = a.trim().parse().ok()?;
    let end = match b.trim() {
        "" => None,
        e => {
            let e: usize = e.parse().ok()?;
            if e < start {
                return None;
            }
            Some(e)
        }
    };
    Some((start, end))
}

/// 403 `AuthenticationFailed`, the Blob service's answer to a bad signature.
fn auth_failed(detail: &str) -> Response {
    let rid = uuid::Uuid::new_v4();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let message = format!(
        "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.\nRequestId:{rid}\nTime:{}",
        util::rfc3339(now_ms)
    );
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthenticationFailed</Code><Message>{}</Message><AuthenticationErrorDetail>{}</AuthenticationErrorDetail></Error>",
        xml_escape(&message),
        xml_escape(detail)
    );
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::FORBIDDEN;
    set_header(&mut resp, "content-type", "application/xml");
    set_header(&mut resp, "x-ms-error-code", "AuthenticationFailed");
    resp
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}

/// Verifies `SharedKey {account}:{signature}` (`cred` is what follows `SharedKey `)
/// against each account key; the 403 answer when none matches.
fn verify_shared_key(
    req: &Req,
    account: &str,
    cred: &str,
    keys: &[String],
) -> Result<(), Box<Response>> {
    let Some((name, sig)) = cred.trim().split_once(':') else {
        return Err(Box::new(auth_failed(
            "The Authorization header is not of the form SharedKey {account}:{signature}.",
        )));
    };
    if !name.eq_ignore_ascii_case(account) {
        return Err(Box::new(auth_failed(&format!(
            "The account name '{name}' in the Authorization header does not match the addressed account '{account}'."
        ))));
    }
    let Ok(sig) = STANDARD.decode(sig.trim()) else {
        return Err(Box::new(auth_failed(
            "The MAC signature is not valid base64.",
        )));
    };
    let candidates = strings_to_sign(req, account);
    for key in keys {
        let Ok(raw) = STANDARD.decode(key) else {
            continue;
        };
        for sts in &candidates {
            let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&raw) else {
                continue;
            };
            mac.update(sts.as_bytes());
            if mac.verify_slice(&sig).is_ok() {
                return Ok(());
            }
        }
    }
    let first = candidates.first().cloned().unwrap_or_default();
    Err(Box::new(auth_failed(&format!(
        "The MAC signature found in the HTTP request '{}' is not the same as any computed signature. Server used following string to sign: '{}'.",
        cred.split_once(':').map(|(_, s)| s).unwrap_or_default(),
        first
    ))))
}

/// The strings-to-sign a correctly signing client may have used: the canonicalized
/// resource is `/{account}{path}` with the path as sent; for the path-style
/// `/_blob/{account}/…` addressing the client signed its own `https://{account}.blob…`
/// URL, so the path without that prefix is tried too. The `Date` line is empty when the
/// client also sent `x-ms-date` (the documented form), or carries `Date`.
fn strings_to_sign(req: &Req, account: &str) -> Vec<String> {
    let mut paths = vec![req.path.clone()];
    let prefix = format!("/_blob/{account}");
    if let Some(p) = req
        .path
        .get(..prefix.len())
        .filter(|p| p.eq_ignore_ascii_case(&prefix))
        .and_then(|_| req.path.get(prefix.len()..))
    {
        paths.push(if p.is_empty() {
            "/".into()
        } else {
            p.to_string()
        });
    }
    let date = req.header("date").unwrap_or("");
    let mut dates = vec![date];
    if !date.is_empty() && req.header("x-ms-date").is_some() {
        dates.push("");
    }
    let mut out = Vec::new();
    for p in &paths {
        for d in &dates {
            out.push(string_to_sign(req, account, p, d));
        }
    }
    out
}

/// The Shared Key string-to-sign (Blob service, version 2015-02-21 and later).
fn string_to_sign(req: &Req, account: &str, path: &str, date: &str) -> String {
    let h = |name: &str| req.header(name).unwrap_or("").trim().to_string();
    let length = match h("content-length").as_str() {
        "0" => String::new(),
        l => l.to_string(),
    };
    let mut s = format!(
        "{}\n{}\n{}\n{length}\n{}\n{}\n{date}\n{}\n{}\n{}\n{}\n{}\n",
        req.method.as_str(),
        h("content-encoding"),
        h("content-language"),
        h("content-md5"),
        h("content-type"),
        h("if-modified-since"),
        h("if-match"),
        h("if-none-match"),
        h("if-unmodified-since"),
        h("range"),
    );
    let mut ms: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_ascii_lowercase(), v))
        .filter(|(k, _)| k.starts_with("x-ms-") && k != crate::http::ORIGINAL_HOST_HEADER)
        .map(|(k, v)| {
            let v = String::from_utf8_lossy(v.as_bytes()).trim().to_string();
            (k, v)
        })
        .collect();
    ms.sort_by(|a, b| header_collation(&a.0, &b.0));
    for (k, v) in ms {
        s.push_str(&format!("{k}:{v}\n"));
    }
    s.push('/');
    s.push_str(account);
    s.push_str(if path.is_empty() { "/" } else { path });
    let mut params: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (k, v) in &req.query {
        params
            .entry(k.to_ascii_lowercase())
            .or_default()
            .push(v.clone());
    }
    for (k, mut vs) in params {
        vs.sort();
        s.push_str(&format!("\n{k}:{}", vs.join(",")));
    }
    s
}

/// The order the Blob service sorts canonicalized headers in: a two-level collation in
/// which `-` only breaks ties. This is the comparison of azure-storage-blob's
/// `_shared/authentication.py` (`compare`, tables `table_lv0`/`table_lv4`, which mirror
/// the service), reduced to the characters of header names: at level 0 letters and digits
/// weigh in their order and `-` is ignored; at level 4 only `-` weighs.
fn header_collation(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn lv0(c: u8) -> u32 {
        match c {
            b'0'..=b'9' => 0xd00 + u32::from(c),
            b'a'..=b'z' => 0xe00 + u32::from(c - b'a'),
            b'A'..=b'Z' => 0xe00 + u32::from(c - b'A'),
            b'-' => 0,
            _ => 0x700 + u32::from(c),
        }
    }
    fn lv4(c: u8) -> u32 {
        if c == b'-' { 0x8212 } else { 0 }
    }
    let (l, r) = (a.as_bytes(), b.as_bytes());
    let tables: [fn(u8) -> u32; 2] = [lv0, lv4];
    let (mut level, mut i, mut j) = (0, 0, 0);
    while level < tables.len() {
        if level == tables.len() - 1 && i != j {
            return if i > j {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let w1 = l.get(i).map_or(1, |c| tables[level](*c));
        let w2 = r.get(j).map_or(1, |c| tables[level](*c));
        if w1 == 1 && w2 == 1 {
            i = 0;
            j = 0;
            level += 1;
        } else if w1 == w2 {
            i += 1;
            j += 1;
        } else if w1 == 0 {
            i += 1;
        } else if w2 == 0 {
            j += 1;
        } else {
            return w1.cmp(&w2);
        }
    }
    Ordering::Equal
}

fn status(code: u16) -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    set_header(&mut resp, "x-ms-version", "2023-11-03");
    resp
}

/// Storage XML error body with `x-ms-error-code`.
pub(crate) fn error_response(code: u16, error_code: &str, message: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{error_code}</Code><Message>{message}</Message></Error>"
    );
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    set_header(&mut resp, "content-type", "application/xml");
    set_header(&mut resp, "x-ms-error-code", error_code);
    resp
}
