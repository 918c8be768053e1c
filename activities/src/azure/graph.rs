//! A small Microsoft Graph v1.0 client: Entra applications and service principals.
//!
//! Built like [`super::ArmClient`] (the shared `rest` layer): bearer token for the cloud's
//! Graph scope ([`Cloud::graph_scope`]), the process's [`Transport`] (simulator mode keeps
//! `https://graph.microsoft.com` URLs and routes on `x-ms-original-host`), a short
//! in-memory retry for 429/5xx honouring `Retry-After`, and no request to any host but the
//! cloud's Graph host. Errors are [`GraphError`]s, classified
//! ([`super::error::classify_graph`]): 429 throttled, 5xx transient, 404 not found, 403
//! `Authorization_RequestDenied` permanent with a hint naming `Application.ReadWrite.OwnedBy`.
//!
//! The wire contract (learn.microsoft.com/graph/api/…): `application-upsert` and
//! `serviceprincipal-upsert` (`PATCH …(uniqueName='…')` / `…(appId='…')` with
//! `Prefer: create-if-missing`: 201 + the object when created, 204 when it existed),
//! `application-get`, `application-update` (`keyCredentials` replaces the whole list; on
//! GET each `key` is null), `application-delete` (soft delete) and
//! `directory-deleteditems-delete` (permanent), `application-list-owners`,
//! `serviceprincipal-get`, `serviceprincipal-delete`.

use std::sync::Arc;

use azure_core::credentials::TokenCredential;
use azure_core::http::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::cloud::Cloud;
use super::error::{Service, ServiceError};
use super::rest::{HostRule, Raw, Rest};
use super::transport::{Transport, TransportError};

/// A failed Graph request (see [`ServiceError`]; its `service` is [`Service::Graph`]).
pub type GraphError = ServiceError;

/// Pages followed by a list before giving up (a loop guard).
const MAX_PAGES: usize = 100;

/// A Graph or Key Vault client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientSetupError {
    /// The HTTP transport could not be built.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The cloud names no endpoint for the service (a custom cloud without `graph` or
    /// `key-vault-suffix`).
    #[error(
        "the custom cloud names no {0} endpoint: set it in the cluster configuration's cloud section"
    )]
    NoEndpoint(&'static str),
}

fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One `keyCredential` of an application (microsoft.graph.keyCredential).
///
/// Fields Graph returns that are not modelled are kept in `extra`, so writing the list
/// back (`keyCredentials` replaces the whole list) keeps them as they were.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyCredential {
    /// `AsymmetricX509Cert`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `Verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<String>,
    /// Base64 DER of the certificate when writing; null on GET.
    #[serde(default)]
    pub key: Option<String>,
    /// Display name (we write the certificate's subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Base64 of the SHA-1 thumbprint bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_key_identifier: Option<String>,
    /// Validity start (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_date_time: Option<String>,
    /// Validity end (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_date_time: Option<String>,
    /// Unique id of the key (a UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// Anything else Graph returned.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An Entra application (microsoft.graph.application), the fields we use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Application {
    /// Object id.
    #[serde(default)]
    pub id: String,
    /// Application (client) id.
    #[serde(default)]
    pub app_id: String,
    /// Immutable tenant-unique key we create it by.
    #[serde(default)]
    pub unique_name: Option<String>,
    /// Display name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Free-form tags (we write our ownership here as `key=value`).
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
    /// Notes.
    #[serde(default)]
    pub notes: Option<String>,
    /// Certificate credentials.
    #[serde(default, deserialize_with = "null_default")]
    pub key_credentials: Vec<KeyCredential>,
}

/// A service principal (microsoft.graph.servicePrincipal), the fields we use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePrincipal {
    /// Object id (what role assignments name as `principalId`).
    #[serde(default)]
    pub id: String,
    /// The application's client id.
    #[serde(default)]
    pub app_id: String,
    /// Display name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// `Application`, `ManagedIdentity`, …
    #[serde(default)]
    pub service_principal_type: Option<String>,
    /// Free-form tags.
    #[serde(default, deserialize_with = "null_default")]
    pub tags: Vec<String>,
}

/// One owner of an application (microsoft.graph.directoryObject).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryObject {
    /// Object id.
    #[serde(default)]
    pub id: String,
    /// `#microsoft.graph.servicePrincipal`, `#microsoft.graph.user`, …
    #[serde(rename = "@odata.type", default)]
    pub odata_type: Option<String>,
}

/// What an upsert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upserted<T> {
    /// 201: the object did not exist and this request created it.
    pub created: bool,
    /// The object as Graph returned it (after a 204, as read back).
    pub value: T,
}

/// Microsoft Graph client: cheap to clone.
#[derive(Debug, Clone)]
pub struct GraphClient {
    rest: Arc<Rest>,
    endpoint: String,
}

/// An OData key literal: quotes doubled, anything outside a safe set percent-encoded.
fn key_literal(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\'' => out.push_str("''"),
            c if c.is_ascii_alphanumeric() || "-._~".contains(c) => out.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    out
}

/// An object id in a path segment (ids are GUIDs; anything else is encoded).
fn segment(v: &str) -> String {
    key_literal(v).replace("''", "%27%27")
}

impl GraphClient {
    /// A client for `cloud`'s Graph endpoint, authenticating with `credential` (scope
    /// [`Cloud::graph_scope`]) through `transport`.
    ///
    /// # Errors
    /// The transport could not be built, or the cloud names no Graph endpoint.
    pub fn new(
        cloud: &Cloud,
        credential: Arc<dyn TokenCredential>,
        transport: &Transport,
    ) -> Result<Self, ClientSetupError> {
        let (Some(endpoint), Some(host), Some(scope)) =
            (cloud.graph(), cloud.graph_host(), cloud.graph_scope())
        else {
            return Err(ClientSetupError::NoEndpoint("Microsoft Graph"));
        };
        let rest = Rest::new(
            cloud,
            credential,
            transport,
            scope,
            Service::Graph,
            HostRule::Exact(host.to_ascii_lowercase()),
        )?;
        Ok(Self {
            rest: Arc::new(rest),
            endpoint: endpoint.to_string(),
        })
    }

    /// The Graph endpoint, e.g. `https://graph.microsoft.com`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v1.0/{path}", self.endpoint)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&'static str, &str)],
    ) -> Result<Raw, GraphError> {
        let bytes = match body {
            Some(b) => Some(serde_json::to_vec(b).map_err(|e| {
                ServiceError::local(
                    Service::Graph,
                    "InvalidRequest",
                    format!("body not serializable: {e}"),
                    Some(path),
                )
            })?),
            None => None,
        };
        self.rest
            .send(
                method,
                &self.url(path),
                bytes.as_deref(),
                headers,
                Some(path),
            )
            .await
    }

    async fn get_opt<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, GraphError> {
        let raw = self.send(Method::Get, path, None, &[]).await?;
        match raw.status {
            404 => Ok(None),
            200..=299 => raw.decode(Service::Graph, Some(path)).map(Some),
            _ => Err(raw.error(Service::Graph, Some(path))),
        }
    }

    /// DELETE; `false` when it did not exist (404).
    async fn delete(&self, path: &str) -> Result<bool, GraphError> {
        let raw = self.send(Method::Delete, path, None, &[]).await?;
        match raw.status {
            404 => Ok(false),
            200..=299 => Ok(true),
            _ => Err(raw.error(Service::Graph, Some(path))),
        }
    }

    async fn upsert<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<Upserted<T>, GraphError> {
        let raw = self
            .send(
                Method::Patch,
                path,
                Some(body),
                &[("prefer", "create-if-missing")],
            )
            .await?;
        match raw.status {
            201 => Ok(Upserted {
                created: true,
                value: raw.decode(Service::Graph, Some(path))?,
            }),
            200..=299 => match self.get_opt(path).await? {
                Some(value) => Ok(Upserted {
                    created: false,
                    value,
                }),
                None => Err(ServiceError::local(
                    Service::Graph,
                    "InvalidResponse",
                    "the upsert answered that the object exists, but reading it back found nothing",
                    Some(path),
                )),
            },
            _ => Err(raw.error(Service::Graph, Some(path))),
        }
    }

    /// Path of an application by its `uniqueName`.
    pub fn application_path(unique_name: &str) -> String {
        format!("applications(uniqueName='{}')", key_literal(unique_name))
    }

    /// Creates the application with `uniqueName` if missing, else updates it with `body`
    /// (`PATCH /applications(uniqueName='…')`, `Prefer: create-if-missing`). `body` holds
    /// `displayName`, `tags`, `notes`, … (not `uniqueName`: it is in the URL).
    ///
    /// Callers that must not change an existing application read it first
    /// ([`Self::get_application_by_unique_name`]).
    ///
    /// # Errors
    /// Graph errors, classified.
    pub async fn upsert_application(
        &self,
        unique_name: &str,
        body: &Value,
    ) -> Result<Upserted<Application>, GraphError> {
        self.upsert(&Self::application_path(unique_name), body)
            .await
    }

    /// The application with `uniqueName`; `None` when there is none.
    ///
    /// # Errors
    /// Graph errors, classified (403: the caller may not read it).
    pub async fn get_application_by_unique_name(
        &self,
        unique_name: &str,
    ) -> Result<Option<Application>, GraphError> {
        self.get_opt(&Self::application_path(unique_name)).await
    }

    /// The application with object id `id`; `None` when there is none.
    ///
    /// # Errors
    /// Graph errors, classified.
    pub async fn get_application(&self, id: &str) -> Result<Option<Application>, GraphError> {
        self.get_opt(&format!("applications/{}", segment(id))).await
    }

    /// The application with client id `app_id`; `None` when there is none.
    ///
    /// # Errors
    /// Graph errors, classified.
    pub async fn get_application_by_app_id(
        &self,
        app_id: &str,
    ) -> Result<Option<Application>, GraphError> {
        self.get_opt(&format!("applications(appId='{}')", key_literal(app_id)))
            .await
    }

    /// Replaces the application's `keyCredentials` with `keys` (existing keys are sent back
    /// as read, `key` null, identified by `keyId`).
    ///
    /// # Errors
    /// Graph errors, classified (404: the application is gone).
    pub async fn set_key_credentials(
        &self,
        id: &str,
        keys: &[KeyCredential],
    ) -> Result<(), GraphError> {
        let path = format!("applications/{}", segment(id));
        let body = serde_json::json!({ "keyCredentials": keys });
        let raw = self.send(Method::Patch, &path, Some(&body), &[]).await?;
        if raw.is_success() {
            Ok(())
        } else {
            Err(raw.error(Service::Graph, Some(&path)))
        }
    }

    /// Deletes the application (it moves to deleted items); `false` when it did not exist.
    ///
    /// # Errors
    /// Graph errors, classified.
    pub async fn delete_application(&self, id: &str) -> Result<bool, GraphError> {
        self.delete(&format!("applications/{}", segment(id))).await
    }

    /// Permanently deletes a deleted directory object (`DELETE
    /// /directory/deletedItems/{id}`), freeing its `uniqueName`; `false` when there is
    /// no such deleted item.
    ///
    /// # Errors
    /// Graph errors, classified.
    pub async fn purge_deleted_item(&self, id: &str) -> Result<bool, GraphError> {
        self.delete(&format!("directory/deletedItems/{}", segment(id)))
            .await
    }

    /// The application's owners.
    ///
    /// # Errors
    /// Graph errors, classified (404: the application is gone).
    pub async fn list_owners(&self, id: &str) -> Result<Vec<DirectoryObject>, GraphError> {
        let path = format!("applications/{}/owners", segment(id));
        let mut url = self.url(&path);
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let raw = self
                .rest
                .send(Method::Get, &url, None, &[], Some(&path))
                .await?;
            if !raw.is_success() {
                return Err(raw.error(Service::Graph, Some(&path)));
            }
            #[derive(Deserialize)]
            struct Page {
                #[serde(default, deserialize_with = "null_default")]
                value: Vec<DirectoryObject>,
                #[serde(rename = "@odata.nextLink", default)]
                next: Option<String>,
            }
            let page: Page = raw.decode(Service::Graph, Some(&path))?;
            out.extend(page.value);
            match page.next {
                Some(n) if !n.is_empty() => url = n,
                _ => return Ok(out),
            }
        }
        Err(ServiceError::local(
            Service::Graph,
            "TooManyPages",
            format!("more than {MAX_PAGES} pages listing {path}"),
            Some(&path),
        ))
    }

    /// Path of a service principal by its application's client id.
    pub fn service_principal_path(app_id: &str) -> String {
        format!("servicePrincipals(appId='{}')", key_literal(app_id))
    }

    /// Creates the service principal of `app_id` if missing (`PATCH
    /// /servicePrincipals(appId='…')`, `Prefer: create-if-missing`), else updates it with
    /// `body`.
    ///
    /// # Errors
    /// Graph errors, classified (a 400 "does not reference a valid application object"
    /// right after the application was created is retryable: replication).
    pub async fn upsert_service_principal(
        &self,
        app_id: &str,
        body: &Value,
    ) -> Result<Upserted<ServicePrincipal>, GraphError> {
        self.upsert(&Self::service_principal_path(app_id), body)
            .await
    }

    /// The service principal of `app_id`; `None` when there is none.
    ///
    /// # Errors
    /// Graph errors, classified.
    pub async fn get_service_principal_by_app_id(
        &self,
        app_id: &str,
    ) -> Result<Option<ServicePrincipal>, GraphError> {
        self.get_opt(&Self::service_principal_path(app_id)).await
    }

    /// Deletes a service principal; `false` when it did not exist.
    ///
    /// # Errors
    /// Graph errors, classified.
    pub async fn delete_service_principal(&self, id: &str) -> Result<bool, GraphError> {
        self.delete(&format!("servicePrincipals/{}", segment(id)))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_literals_are_quoted_and_encoded() {
        assert_eq!(key_literal("cpo-demo-abc12"), "cpo-demo-abc12");
        assert_eq!(key_literal("o'neil"), "o''neil");
        assert_eq!(key_literal("a b/c"), "a%20b%2Fc");
        assert_eq!(
            GraphClient::application_path("x"),
            "applications(uniqueName='x')"
        );
        assert_eq!(
            GraphClient::service_principal_path("0000"),
            "servicePrincipals(appId='0000')"
        );
        assert_eq!(segment("a'b"), "a%27%27b");
    }

    #[test]
    fn models_tolerate_nulls_and_keep_unknown_key_fields() {
        let app: Application = serde_json::from_value(json!({
            "id": "o1", "appId": "a1", "uniqueName": "u", "tags": null,
            "keyCredentials": [{"type": "AsymmetricX509Cert", "usage": "Verify", "key": null,
                "keyId": "k1", "customKeyIdentifier": "AAEC", "hasExtendedValue": null}]
        }))
        .unwrap_or_default();
        assert_eq!(app.app_id, "a1");
        assert!(app.tags.is_empty());
        assert_eq!(app.key_credentials.len(), 1);
        let back = serde_json::to_value(&app.key_credentials[0]).unwrap_or_default();
        assert_eq!(back["key"], Value::Null);
        assert!(back.get("hasExtendedValue").is_some());
        assert_eq!(back["type"], "AsymmetricX509Cert");
        let owners: Vec<DirectoryObject> = serde_json::from_value(json!([
            {"@odata.type": "#microsoft.graph.servicePrincipal", "id": "sp"}
        ]))
        .unwrap_or_default();
        assert_eq!(
            owners[0].odata_type.as_deref(),
            Some("#microsoft.graph.servicePrincipal")
        );
    }
}
