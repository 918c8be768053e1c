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

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

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
    let authed = req.header("authorization").is_some() || req.q("sig").is_some();
    let now = sim.now_ms();
    let mut st = lock(&sim.inner.state);
    let Some(acct) = arm::find_storage_account(&st, account) else {
        return error_response(
            404,
            "ResourceNotFound",
            "The specified resource does not exist.",
        );
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
    match req.method {
        Method::PUT => {
            if !authed {
                return error_response(
                    401,
                    "NoAuthenticationInformation",
                    "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.",
                );
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
            let data = STANDARD.decode(&b.data_b64).unwrap_or_default();
            let len = data.len();
            let mut resp = if req.method == Method::HEAD {
                status(200)
            } else {
                Response::new(Body::from(data))
            };
            if let Ok(v) = HeaderValue::from_str(&b.content_type) {
                resp.headers_mut().insert("content-type", v);
            }
            set_header(&mut resp, "content-length", &len.to_string());
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
