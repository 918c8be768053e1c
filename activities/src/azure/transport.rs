//! How Azure requests leave the process: straight to Azure, or to the simulator.
//!
//! azure_identity only accepts an https authority host and azure_core's bearer-token
//! policy refuses plain http, so simulator runs keep the real `https://…` URLs throughout
//! the pipeline (and in journaled operation URLs); only the last hop, the
//! [`HttpClient`], swaps scheme and host for the simulator's base URL and passes the host
//! it meant in `x-ms-original-host`. The simulator uses that header to route (ARM, Entra,
//! blob) and to hand out `https://{that host}/…` links, so everything above the transport
//! is identical in both modes.

use std::collections::HashMap;
use std::sync::Arc;

use azure_core::error::ErrorKind;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::{AsyncRawResponse, Body, ClientOptions, HttpClient, Request, RetryOptions};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use super::cloud::Cloud;

/// Header telling the simulator which host a redirected request was meant for.
pub const ORIGINAL_HOST_HEADER: &str = "x-ms-original-host";

/// Where Azure requests are sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", rename_all_fields = "kebab-case")]
pub enum Transport {
    /// To Azure itself, with azure_core's default (reqwest, rustls) client.
    #[default]
    Direct,
    /// To an hcp-simulator at `base` (e.g. `http://127.0.0.1:8080`), keeping the https
    /// URLs in the pipeline and sending the intended host in `x-ms-original-host`.
    Simulator {
        /// Scheme, host and port of the simulator.
        base: String,
    },
}

/// The transport could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the HTTP transport: {0}")]
pub struct TransportError(String);

impl Transport {
    /// The azure_core transport for this mode (`None`: azure_core's default client).
    ///
    /// # Errors
    /// The HTTP client could not be built (TLS setup).
    pub fn azure_transport(&self) -> Result<Option<azure_core::http::Transport>, TransportError> {
        crate::tls::install_crypto_provider();
        match self {
            Transport::Direct => Ok(None),
            Transport::Simulator { base } => {
                let client = reqwest::Client::builder()
                    .build()
                    .map_err(|e| TransportError(e.to_string()))?;
                Ok(Some(azure_core::http::Transport::new(Arc::new(
                    SimulatorClient {
                        base: base.trim_end_matches('/').to_string(),
                        client,
                    },
                ))))
            }
        }
    }

    /// Client options for azure_core pipelines and azure_identity credentials: this
    /// transport, the cloud's authority host, and no retries (callers retry briefly
    /// themselves and leave long waits to the engine).
    ///
    /// # Errors
    /// See [`Self::azure_transport`].
    pub fn client_options(&self, cloud: &Cloud) -> Result<ClientOptions, TransportError> {
        Ok(ClientOptions {
            transport: self.azure_transport()?,
            cloud: Some(Arc::new(cloud.configuration())),
            retry: RetryOptions::none(),
            ..ClientOptions::default()
        })
    }
}

/// Sends each request to the simulator: same path and query, `x-ms-original-host` set.
#[derive(Debug)]
struct SimulatorClient {
    base: String,
    client: reqwest::Client,
}

fn io_error(
    e: impl std::error::Error + Send + Sync + 'static,
    what: &'static str,
) -> azure_core::Error {
    azure_core::Error::with_error(ErrorKind::Io, e, what)
}

#[async_trait::async_trait]
impl HttpClient for SimulatorClient {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let url = request.url();
        let mut host = url.host_str().unwrap_or_default().to_string();
        if let Some(port) = url.port() {
            host = format!("{host}:{port}");
        }
        let mut target = format!("{}{}", self.base, url.path());
        if let Some(q) = url.query() {
            target.push('?');
            target.push_str(q);
        }
        let method = reqwest::Method::from_bytes(request.method().as_str().as_bytes())
            .map_err(|e| azure_core::Error::with_error(ErrorKind::DataConversion, e, "method"))?;
        let mut req = self
            .client
            .request(method, &target)
            .header(ORIGINAL_HOST_HEADER, host);
        for (name, value) in request.headers().iter() {
            req = req.header(name.as_str(), value.as_str());
        }
        match request.body() {
            Body::Bytes(b) => {
                if !b.is_empty() {
                    req = req.body(b.clone());
                }
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(azure_core::Error::with_message(
                    ErrorKind::Other,
                    "the simulator transport sends in-memory bodies only",
                ));
            }
        }
        let rsp = req
            .send()
            .await
            .map_err(|e| io_error(e, "simulator transport"))?;
        let status = rsp.status().as_u16();
        let headers: HashMap<HeaderName, HeaderValue> = rsp
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::from(k.as_str().to_owned()),
                    HeaderValue::from(v.to_str().ok()?.to_owned()),
                ))
            })
            .collect();
        let body = Box::pin(
            rsp.bytes_stream()
                .map_err(|e| io_error(e, "simulator response body")),
        );
        Ok(AsyncRawResponse::new(
            status.into(),
            Headers::from(headers),
            body,
        ))
    }
}
