//! Storage: account keys through ARM, and the blob data plane with Shared Key.
//!
//! The OIDC issuer is a public blob container; its two documents are written with the
//! account key (Shared Key authorization) rather than an Entra token, because a freshly
//! created account grants the creator no data-plane role and role propagation takes
//! minutes. The key comes from `POST …/listKeys` straight into a [`Secret`] and is only
//! ever used to sign: the canonical request is HMAC-SHA256'd with it (the `hmac` and `sha2`
//! crates; nothing hand-rolled) as the Blob service documents for version 2015-02-21 and
//! later.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use azure_core::http::policies::{Policy, PolicyResult};
use azure_core::http::{Body, Context, Method, Pipeline, PipelineSendOptions, Request, Url};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::client::{ArmClient, MAX_RETRIES, decode};
use super::cloud::Cloud;
use super::error::{ArmError, ErrorClass};
use super::models::{API_STORAGE, StorageAccountKeys};
use super::transport::{Transport, TransportError};
use crate::secret::Secret;

/// Blob service version we speak.
pub const BLOB_VERSION: &str = "2023-11-03";

/// The account's first full-permission key (`key1` preferred).
///
/// # Errors
/// ARM errors of `listKeys` (e.g. `AuthorizationFailed` without
/// `Microsoft.Storage/storageAccounts/listKeys/action`); `NoAccountKey` when the answer has
/// no usable key.
pub async fn storage_account_key(
    arm: &ArmClient,
    account_id: &str,
) -> Result<Secret<String>, ArmError> {
    let path = format!("{}/listKeys", account_id.trim_end_matches('/'));
    let v = arm
        .post(&path, API_STORAGE, None)
        .await?
        .unwrap_or_default();
    let keys: StorageAccountKeys = decode(v, Some(account_id))?;
    let full = |k: &&super::models::StorageAccountKey| {
        k.permissions
            .as_deref()
            .is_none_or(|p| p.eq_ignore_ascii_case("full"))
    };
    let mut usable: Vec<_> = keys.keys.into_iter().filter(|k| full(&k)).collect();
    usable.sort_by_key(|k| k.key_name.as_deref() != Some("key1"));
    usable
        .into_iter()
        .map(|k| k.value)
        .find(|v| !v.expose().is_empty())
        .ok_or_else(|| {
            ArmError::local(
                "NoAccountKey",
                "listKeys returned no full-permission key (is shared key access disabled on the account?)",
                Some(account_id),
            )
        })
}

/// The Shared Key string-to-sign of a Blob request (service version ≥ 2015-02-21).
///
/// `headers` are all request headers (any case); `path` is the URL path as sent
/// (percent-encoded) and `query` its decoded pairs.
pub fn string_to_sign(
    method: &str,
    account: &str,
    path: &str,
    query: &[(String, String)],
    headers: &[(String, String)],
    content_length: u64,
) -> String {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .unwrap_or("")
    };
    let length = if content_length == 0 {
        String::new()
    } else {
        content_length.to_string()
    };
    let mut s = format!(
        "{method}\n{}\n{}\n{length}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n",
        get("content-encoding"),
        get("content-language"),
        get("content-md5"),
        get("content-type"),
        get("date"),
        get("if-modified-since"),
        get("if-match"),
        get("if-none-match"),
        get("if-unmodified-since"),
        get("range"),
    );
    let mut ms: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .filter(|(k, _)| k.starts_with("x-ms-"))
        .collect();
    ms.sort();
    for (k, v) in ms {
        let v = v.split_whitespace().collect::<Vec<_>>().join(" ");
        s.push_str(&format!("{k}:{v}\n"));
    }
    s.push('/');
    s.push_str(account);
    s.push_str(if path.is_empty() { "/" } else { path });
    let mut params: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (k, v) in query {
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

/// Base64 HMAC-SHA256 of `string_to_sign` with the base64 account `key`.
///
/// # Errors
/// The key is not base64.
pub fn sign(string_to_sign: &str, key: &Secret<String>) -> Result<String, ArmError> {
    let raw = STANDARD.decode(key.expose().trim()).map_err(|_| {
        ArmError::local(
            "InvalidAccountKey",
            "the storage account key is not base64",
            None,
        )
    })?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&raw)
        .map_err(|_| ArmError::local("InvalidAccountKey", "unusable storage account key", None))?;
    mac.update(string_to_sign.as_bytes());
    Ok(STANDARD.encode(mac.finalize().into_bytes()))
}

/// Signs each try (after the pipeline added its own `x-ms-*` headers).
struct SharedKeyPolicy {
    account: String,
    key: Secret<String>,
}

impl std::fmt::Debug for SharedKeyPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedKeyPolicy")
            .field("account", &self.account)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Policy for SharedKeyPolicy {
    async fn send(
        &self,
        ctx: &Context,
        request: &mut Request,
        next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        request.insert_header("x-ms-date", httpdate::fmt_http_date(SystemTime::now()));
        request.insert_header("x-ms-version", BLOB_VERSION);
        let url = request.url().clone();
        let query: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.as_str().to_string()))
            .collect();
        let length = match request.body() {
            Body::Bytes(b) => b.len() as u64,
            #[allow(unreachable_patterns)]
            _ => 0,
        };
        let sts = string_to_sign(
            request.method().as_str(),
            &self.account,
            url.path(),
            &query,
            &headers,
            length,
        );
        let sig = sign(&sts, &self.key).map_err(|e| {
            azure_core::Error::with_message(azure_core::error::ErrorKind::Credential, e.message)
        })?;
        request.insert_header("authorization", format!("SharedKey {}:{sig}", self.account));
        next[0].send(ctx, request, &next[1..]).await
    }
}

/// Blob data-plane client for one storage account, authorized with its key.
#[derive(Debug, Clone)]
pub struct BlobClient {
    pipeline: Pipeline,
    endpoint: String,
    account: String,
}

impl BlobClient {
    /// A client for `account` in `cloud`, through `transport`, signing with `key`.
    ///
    /// # Errors
    /// The transport could not be built.
    pub fn new(
        cloud: &Cloud,
        transport: &Transport,
        account: &str,
        key: Secret<String>,
    ) -> Result<Self, TransportError> {
        let options = transport.client_options(cloud)?;
        let sign: Arc<dyn Policy> = Arc::new(SharedKeyPolicy {
            account: account.to_string(),
            key,
        });
        Ok(Self {
            pipeline: Pipeline::new(
                Some(env!("CARGO_PKG_NAME")),
                Some(env!("CARGO_PKG_VERSION")),
                options,
                Vec::new(),
                vec![sign],
                None,
            ),
            endpoint: cloud.blob_endpoint(account),
            account: account.to_string(),
        })
    }

    /// URL of a blob.
    pub fn url(&self, container: &str, blob: &str) -> String {
        format!(
            "{}/{}/{}",
            self.endpoint,
            container.trim_matches('/'),
            blob.trim_start_matches('/')
        )
    }

    async fn send(
        &self,
        method: Method,
        container: &str,
        blob: &str,
        body: Option<(Vec<u8>, &str)>,
    ) -> Result<(u16, Vec<u8>), ArmError> {
        let target = self.url(container, blob);
        let url = Url::parse(&target).map_err(|e| {
            ArmError::local("InvalidUrl", format!("bad blob URL: {e}"), Some(&target))
        })?;
        let mut attempt = 0;
        loop {
            let mut req = Request::new(url.clone(), method);
            if let Some((bytes, content_type)) = &body {
                req.insert_header("x-ms-blob-type", "BlockBlob");
                req.insert_header("content-type", content_type.to_string());
                req.set_body(bytes.clone());
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
            let err = match result {
                Ok(rsp) => {
                    let status = u16::from(rsp.status());
                    let headers = rsp.headers().clone();
                    let bytes = rsp.into_body().as_ref().to_vec();
                    if (200..300).contains(&status) || status == 404 {
                        return Ok((status, bytes));
                    }
                    ArmError::from_response(status, &headers, &bytes, Some(&target))
                }
                Err(e) => ArmError::from_core(&e, Some(&target)),
            };
            if attempt >= MAX_RETRIES
                || !matches!(err.class, ErrorClass::Transient | ErrorClass::Throttled)
                || err.retry_after.is_some_and(|d| d > Duration::from_secs(1))
            {
                return Err(err);
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
        }
    }

    /// Uploads a block blob (create or replace).
    ///
    /// # Errors
    /// Storage errors (`ContainerNotFound`, `AuthenticationFailed`, …), classified.
    pub async fn put(
        &self,
        container: &str,
        blob: &str,
        bytes: Vec<u8>,
        content_type: &str,
    ) -> Result<(), ArmError> {
        let (status, body) = self
            .send(Method::Put, container, blob, Some((bytes, content_type)))
            .await?;
        if status == 404 {
            return Err(ArmError::from_response(
                404,
                &azure_core::http::headers::Headers::new(),
                &body,
                Some(&self.url(container, blob)),
            ));
        }
        tracing::debug!(account = %self.account, %container, %blob, "blob written");
        Ok(())
    }

    /// Downloads a blob; `None` when it (or its container) does not exist.
    ///
    /// # Errors
    /// Storage errors other than 404, classified.
    pub async fn get(&self, container: &str, blob: &str) -> Result<Option<Vec<u8>>, ArmError> {
        let (status, body) = self.send(Method::Get, container, blob, None).await?;
        Ok((status != 404).then_some(body))
    }
}

/// An anonymous GET of a public document (an existing OIDC issuer's JWKS), through the same
/// transport as ARM (so simulator runs reach the simulated blob endpoint). `Ok(None)` on 404.
///
/// # Errors
/// `InvalidUrl`, a transport failure, or any status other than 2xx/404, classified.
pub async fn get_public(
    cloud: &Cloud,
    transport: &Transport,
    url: &str,
) -> Result<Option<Vec<u8>>, ArmError> {
    let parsed = Url::parse(url)
        .map_err(|e| ArmError::local("InvalidUrl", format!("bad URL {url}: {e}"), Some(url)))?;
    let options = transport
        .client_options(cloud)
        .map_err(|e| ArmError::local("Transport", e.to_string(), Some(url)))?;
    let pipeline = Pipeline::new(
        Some(env!("CARGO_PKG_NAME")),
        Some(env!("CARGO_PKG_VERSION")),
        options,
        Vec::new(),
        Vec::new(),
        None,
    );
    let mut req = Request::new(parsed, Method::Get);
    let rsp = pipeline
        .send(
            &Context::new(),
            &mut req,
            Some(PipelineSendOptions {
                skip_checks: true,
                ..Default::default()
            }),
        )
        .await
        .map_err(|e| ArmError::from_core(&e, Some(url)))?;
    let status = u16::from(rsp.status());
    let headers = rsp.headers().clone();
    let bytes = rsp.into_body().as_ref().to_vec();
    match status {
        200..=299 => Ok(Some(bytes)),
        404 => Ok(None),
        _ => Err(ArmError::from_response(status, &headers, &bytes, Some(url))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Azure Storage emulator's published account key (not a secret).
    const EMULATOR_KEY: &str =
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The example of "Authorize with Shared Key" (Microsoft Learn): Get Container
    /// Metadata, `GET https://myaccount.blob.core.windows.net/mycontainer?restype=container&comp=metadata&timeout=20`.
    #[test]
    fn documented_example_string_to_sign() {
        let q = vec![
            ("restype".to_string(), "container".to_string()),
            ("comp".to_string(), "metadata".to_string()),
            ("timeout".to_string(), "20".to_string()),
        ];
        let s = string_to_sign(
            "GET",
            "myaccount",
            "/mycontainer",
            &q,
            &h(&[
                ("x-ms-version", "2009-09-19"),
                ("x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT"),
                ("User-Agent", "not signed"),
            ]),
            0,
        );
        assert_eq!(
            s,
            "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n/myaccount/mycontainer\ncomp:metadata\nrestype:container\ntimeout:20"
        );
        // Reference value computed independently (Python's hmac + hashlib).
        let sig = sign(&s, &Secret::new(EMULATOR_KEY.to_string())).unwrap_or_default();
        assert_eq!(sig, "m649E40iEJ3QQyCg9/WI2Fa9zS+RB/2rEBcLJb0CKs0=");
    }

    #[test]
    fn put_blob_string_to_sign() {
        let s = string_to_sign(
            "PUT",
            "myaccount",
            "/mycontainer/.well-known/openid-configuration",
            &[],
            &h(&[
                ("Content-Type", "application/json"),
                ("x-ms-blob-type", "BlockBlob"),
                ("x-ms-version", BLOB_VERSION),
                ("x-ms-date", "Fri, 26 Jun 2015 23:39:12 GMT"),
            ]),
            11,
        );
        assert_eq!(
            s,
            "PUT\n\n\n11\n\napplication/json\n\n\n\n\n\n\nx-ms-blob-type:BlockBlob\nx-ms-date:Fri, 26 Jun 2015 23:39:12 GMT\nx-ms-version:2023-11-03\n/myaccount/mycontainer/.well-known/openid-configuration"
        );
        let sig = sign(&s, &Secret::new(EMULATOR_KEY.to_string())).unwrap_or_default();
        assert_eq!(sig, "EN1C2nDtRpdleB9vNPxfMT2bqgvyVeabjORgOutCimM=");
        assert!(sign(&s, &Secret::new("not base64!".to_string())).is_err());
    }
}
