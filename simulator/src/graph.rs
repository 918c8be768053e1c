//! Simulated Microsoft Graph v1.0: applications, service principals, deleted items.
//!
//! Modelled on the Microsoft Graph v1.0 reference (learn.microsoft.com/graph/api/…):
//! "Upsert application" (`application-upsert`), "Get application" (`application-get`),
//! "Update application" (`application-update`), "Delete application"
//! (`application-delete`), "Create application" (`application-post-applications`), "List
//! owners of an application" (`application-list-owners`), "Upsert servicePrincipal"
//! (`serviceprincipal-upsert`), "Create servicePrincipal"
//! (`serviceprincipal-post-serviceprincipals`), "List servicePrincipals"
//! (`serviceprincipal-list`), "Delete servicePrincipal" (`serviceprincipal-delete`), "Get
//! deleted item" / "Permanently delete an item" / "Restore deleted item"
//! (`directory-deleteditems-get`, `directory-deleteditems-delete`,
//! `directory-deleteditems-restore`), the `keyCredential` resource type
//! (`resources/keycredential`), the "Microsoft Graph error responses and resource types"
//! page (`errors`: `{"error":{"code","message","innerError":{"date","request-id",
//! "client-request-id"}}}`) and the permissions reference (`permissions-reference`:
//! `Application.ReadWrite.OwnedBy`, `Application.ReadWrite.All`, `Application.Read.All`).
//!
//! Hosts: `graph.microsoft.com`, `graph.microsoft.us`, `dod-graph.microsoft.us`,
//! `microsoftgraph.chinacloudapi.cn` (or the path prefix `/_graph` for plain-http scripts).
//!
//! | Request | Answer |
//! |---|---|
//! | `PATCH /v1.0/applications(uniqueName='{u}')` + `Prefer: create-if-missing` | 201 + application (created; the caller's service principal becomes its owner), 204 (existed: updated); without the header and missing: 404 `Request_ResourceNotFound` |
//! | `POST /v1.0/applications` | 201 + application |
//! | `GET /v1.0/applications/{id}`, `…(uniqueName='{u}')`, `…(appId='{a}')` | 200 / 404 |
//! | `GET /v1.0/applications[?$filter=…]` | `{"value":[…]}` |
//! | `PATCH /v1.0/applications/{id}` (also by alternate key) | 204; `keyCredentials` replaces the whole list |
//! | `DELETE /v1.0/applications/{id}` (also by alternate key) | 204; the object moves to deleted items, its service principal goes too |
//! | `GET /v1.0/applications/{id}/owners` | `{"value":[{"@odata.type":"#microsoft.graph.servicePrincipal","id":…}]}` |
//! | `PATCH /v1.0/servicePrincipals(appId='{a}')` + `Prefer: create-if-missing` | 201 / 204 |
//! | `POST /v1.0/servicePrincipals` `{"appId":…}` | 201; 409 `Request_MultipleObjectsWithSameKeyValue` when one exists |
//! | `GET /v1.0/servicePrincipals/{id}`, `…(appId='{a}')` | 200 / 404 |
//! | `GET /v1.0/servicePrincipals?$filter=appId eq '{a}'` | `{"value":[…]}` |
//! | `PATCH`/`DELETE /v1.0/servicePrincipals/{id}` (also by appId) | 204 |
//! | `GET`/`DELETE /v1.0/directory/deletedItems/{id}`, `POST …/{id}/restore` | 200 / 204 / 200 |
//! | `GET /v1.0/directory/deletedItems/microsoft.graph.application` | `{"value":[…]}` |
//!
//! `beta` is served like `v1.0`. `$filter` understands `eq` on `appId`, `displayName`,
//! `uniqueName` (applications) and `servicePrincipalType` (service principals), joined
//! with `and`; other clauses answer 400 `Request_UnsupportedQuery`.
//!
//! **Authentication and permissions.** A missing or malformed bearer token answers 401
//! `InvalidAuthenticationToken` ("Access token is empty." / "CompactToken parsing failed
//! with error code: 80049217"), a token for another audience 401 "Access token validation
//! failure. Invalid audience.". The caller's application permissions are the token's
//! `roles` claim: `Application.ReadWrite.All`/`Directory.ReadWrite.All` allow everything;
//! `Application.Read.All`/`Directory.Read.All` allow reads; `Application.ReadWrite.OwnedBy`
//! allows creating applications and service principals (the caller's service principal
//! becomes their owner) and reading, updating and deleting the objects it owns — anything
//! else, and any call without a permission, answers 403 `Authorization_RequestDenied`
//! "Insufficient privileges to complete the operation.". With only `OwnedBy`, lists show
//! the owned objects.
//!
//! **keyCredentials** (`PATCH` replaces the list): `type` `AsymmetricX509Cert`, `usage`
//! `Verify` or `Sign`, `key` the base64 DER certificate (parsed: a key that is not an X.509
//! certificate answers 400); `startDateTime`/`endDateTime` default to the certificate's
//! validity, and an `endDateTime` after the certificate's `notAfter` answers 400 "Key
//! credential end date is invalid."; `customKeyIdentifier` defaults to the base64 SHA-1
//! thumbprint, `displayName` to the certificate subject, `keyId` to a new UUID. A credential
//! resubmitted with its `keyId` and a null `key` keeps its certificate. Reads return `key`
//! as null, as Graph does.
//!
//! **Managed identities.** Every user-assigned identity in the simulated ARM appears as a
//! service principal (`servicePrincipalType: ManagedIdentity`, `appId` = its `clientId`,
//! `id` = its `principalId`, `alternativeNames` = `isExplicit=True` and its resource id). They
//! are read-only here and owned by nobody.
//!
//! Kept simple: no paging (`@odata.nextLink`), no `$select`/`$expand`, no password
//! credentials, application deletion removes its service principal at once, and the exact
//! text of the 400 validation messages is ours where the documentation gives none (codes are
//! Graph's).

use std::collections::BTreeMap;

use axum::http::Method;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::arm::{store as arm_store, types};
use crate::http::{ErrorCode, Req, empty, json as json_resp, set_header};
use crate::sim::{Simulator, lock};
use crate::state::State;
use crate::util::{self, str_at};

/// The permission the caller holds when the scenario names none.
pub(crate) const DEFAULT_PERMISSION: &str = "Application.ReadWrite.OwnedBy";

/// The hosts Microsoft Graph answers on (global, US Gov L4 and L5, China).
pub(crate) const HOSTS: &[&str] = &[
    "graph.microsoft.com",
    "graph.microsoft.us",
    "dod-graph.microsoft.us",
    "microsoftgraph.chinacloudapi.cn",
];

/// Microsoft Graph's well-known application id (a token audience equivalent to its URL).
const GRAPH_APP_ID: &str = "00000003-0000-0000-c000-000000000000";

/// Whether a token audience is Microsoft Graph's.
pub(crate) fn is_graph_audience(aud: &str) -> bool {
    let a = aud.trim_end_matches('/').to_ascii_lowercase();
    a == GRAPH_APP_ID || HOSTS.iter().any(|h| a == format!("https://{h}"))
}

/// The directory objects of the simulated tenant.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct GraphState {
    /// Applications by object id (lower-case); `keyCredentials[].key` is kept here.
    #[serde(default)]
    pub applications: BTreeMap<String, Value>,
    /// Service principals of applications by object id (managed identities are computed
    /// from ARM, not stored).
    #[serde(default)]
    pub service_principals: BTreeMap<String, Value>,
    /// Soft-deleted objects (`directory/deletedItems`) by id, with their `@odata.type`.
    #[serde(default)]
    pub deleted: BTreeMap<String, Value>,
    /// Owners (service principal objects: `{"id","appId"}`) by owned object id.
    #[serde(default)]
    pub owners: BTreeMap<String, Vec<Value>>,
}

// --- Functions for the rest of the simulator --------------------------------------------

/// The object id of the service principal of `app_id` in the tenant: one created through
/// Graph for an application, else the `principalId` of the user-assigned identity whose
/// `clientId` it is. `None` when the tenant has none.
pub(crate) fn service_principal_object_id(st: &State, app_id: &str) -> Option<String> {
    st.graph
        .service_principals
        .values()
        .find(|sp| str_at(sp, "/appId").is_some_and(|a| a.eq_ignore_ascii_case(app_id)))
        .and_then(|sp| str_at(sp, "/id").map(str::to_string))
        .or_else(|| {
            identity_by_client_id(st, app_id)
                .and_then(|i| str_at(&i.body, "/properties/principalId").map(str::to_string))
        })
}

/// Hex (upper-case, as Azure displays them) SHA-1 thumbprints of the certificates in the
/// `keyCredentials` of the application whose `appId` is `app_id`; `None` when there is no
/// such application.
pub(crate) fn app_key_thumbprints(st: &State, app_id: &str) -> Option<Vec<String>> {
    let app = app_by_app_id(st, app_id)?;
    Some(
        app.get("keyCredentials")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|k| str_at(k, "/key"))
            .filter_map(|k| STANDARD.decode(k).ok())
            .map(|der| crate::keyvault::sha1_hex(&der))
            .collect(),
    )
}

/// Whether `client_id` is a principal made inside the simulated tenant (an application
/// registered through Graph, or a user-assigned identity) rather than the principal the
/// client runs as.
pub(crate) fn is_directory_principal(st: &State, client_id: &str) -> bool {
    app_by_app_id(st, client_id).is_some() || identity_by_client_id(st, client_id).is_some()
}

fn app_by_app_id<'a>(st: &'a State, app_id: &str) -> Option<&'a Value> {
    st.graph
        .applications
        .values()
        .find(|a| str_at(a, "/appId").is_some_and(|x| x.eq_ignore_ascii_case(app_id)))
}

fn identity_by_client_id<'a>(
    st: &'a State,
    client_id: &str,
) -> Option<&'a crate::state::ArmResource> {
    arm_store::of_type(st, types::IDENTITY)
        .into_iter()
        .find(|i| {
            str_at(&i.body, "/properties/clientId")
                .is_some_and(|c| c.eq_ignore_ascii_case(client_id))
        })
}

// --- Errors --------------------------------------------------------------------------------

#[derive(Debug)]
struct GErr {
    status: u16,
    code: &'static str,
    message: String,
}

impl GErr {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }
    fn denied() -> Self {
        Self::new(
            403,
            "Authorization_RequestDenied",
            "Insufficient privileges to complete the operation.",
        )
    }
    fn not_found(key: &str) -> Self {
        Self::new(
            404,
            "Request_ResourceNotFound",
            format!(
                "Resource '{key}' does not exist or one of its queried reference-property objects are not present."
            ),
        )
    }
    fn bad(message: impl Into<String>) -> Self {
        Self::new(400, "Request_BadRequest", message)
    }
}

/// A Graph error body (for fault rules and the handlers).
pub(crate) fn error_response(status: u16, code: &str, message: &str) -> Response {
    error_with(status, code, message, None)
}

fn error_with(status: u16, code: &str, message: &str, client_request_id: Option<&str>) -> Response {
    let rid = uuid::Uuid::new_v4().to_string();
    let crid = client_request_id.map_or_else(|| rid.clone(), str::to_string);
    let date = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut resp = json_resp(
        status,
        &json!({"error": {"code": code, "message": message,
            "innerError": {"date": date, "request-id": rid, "client-request-id": crid}}}),
    );
    set_header(&mut resp, "request-id", &rid);
    set_header(&mut resp, "client-request-id", &crid);
    resp.extensions_mut().insert(ErrorCode(code.to_string()));
    resp
}

// --- Caller --------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Caller {
    oid: String,
    appid: String,
    all: bool,
    read_all: bool,
    owned_by: bool,
}

fn authenticate(sim: &Simulator, req: &Req) -> Result<Caller, GErr> {
    let Some(token) = crate::entra::bearer_token(req) else {
        return Err(GErr::new(
            401,
            "InvalidAuthenticationToken",
            "Access token is empty.",
        ));
    };
    let _ = token;
    let Some(claims) = crate::entra::bearer_claims(req) else {
        return Err(GErr::new(
            401,
            "InvalidAuthenticationToken",
            "CompactToken parsing failed with error code: 80049217",
        ));
    };
    let aud = str_at(&claims, "/aud").unwrap_or_default();
    if !is_graph_audience(aud) {
        return Err(GErr::new(
            401,
            "InvalidAuthenticationToken",
            "Access token validation failure. Invalid audience.",
        ));
    }
    if claims
        .get("exp")
        .and_then(Value::as_u64)
        .is_some_and(|exp| exp * 1000 < sim.now_ms())
    {
        return Err(GErr::new(
            401,
            "InvalidAuthenticationToken",
            "Lifetime validation failed, the token is expired.",
        ));
    }
    let roles: Vec<String> = claims
        .get("roles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let has = |r: &str| roles.iter().any(|x| x.eq_ignore_ascii_case(r));
    let all = has("Application.ReadWrite.All") || has("Directory.ReadWrite.All");
    Ok(Caller {
        oid: str_at(&claims, "/oid")
            .unwrap_or_default()
            .to_ascii_lowercase(),
        appid: str_at(&claims, "/appid").unwrap_or_default().to_string(),
        all,
        read_all: all || has("Application.Read.All") || has("Directory.Read.All"),
        owned_by: has(DEFAULT_PERMISSION),
    })
}

impl Caller {
    fn any(&self) -> bool {
        self.read_all || self.owned_by
    }
    fn owns(&self, st: &State, object_id: &str) -> bool {
        st.graph
            .owners
            .get(&object_id.to_ascii_lowercase())
            .is_some_and(|o| {
                o.iter()
                    .any(|x| str_at(x, "/id") == Some(self.oid.as_str()))
            })
    }
    fn can_read(&self, st: &State, id: &str) -> bool {
        self.read_all || (self.owned_by && self.owns(st, id))
    }
    fn can_write(&self, st: &State, id: &str) -> bool {
        self.all || (self.owned_by && self.owns(st, id))
    }
    fn can_create(&self) -> bool {
        self.all || self.owned_by
    }
    fn owner_entry(&self) -> Value {
        json!({"id": self.oid, "appId": self.appid})
    }
}

// --- Routing -------------------------------------------------------------------------------

/// How a path segment addresses an object: `{id}` or `(prop='value')`.
#[derive(Debug, Clone)]
enum Key {
    Id(String),
    Alt(&'static str, String),
}

/// Splits `applications(uniqueName='x')` into the collection and its alternate key.
fn split_alt(seg: &str) -> (&str, Option<(String, String)>) {
    let Some(open) = seg.find('(') else {
        return (seg, None);
    };
    let coll = &seg[..open];
    let inner = seg[open + 1..].trim_end_matches(')');
    let Some((prop, val)) = inner.split_once('=') else {
        // `applications('id')`: the id form.
        let v = inner.trim_matches('\'').replace("''", "'");
        return (coll, Some(("id".to_string(), v)));
    };
    let v = val.trim();
    let v = v
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(v)
        .replace("''", "'");
    (coll, Some((prop.trim().to_string(), v)))
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Serves one Graph request.
pub(crate) fn handle(sim: &Simulator, req: &Req) -> Response {
    let crid = req.header("client-request-id").map(str::to_string);
    let mut resp = match route(sim, req) {
        Ok(r) => r,
        Err(e) => error_with(e.status, e.code, &e.message, crid.as_deref()),
    };
    if !resp.headers().contains_key("request-id") {
        let rid = uuid::Uuid::new_v4().to_string();
        set_header(&mut resp, "request-id", &rid);
        set_header(
            &mut resp,
            "client-request-id",
            crid.as_deref().unwrap_or(&rid),
        );
    }
    resp
}

fn route(sim: &Simulator, req: &Req) -> Result<Response, GErr> {
    let mut segs: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    if segs.first() == Some(&"_graph") {
        segs.remove(0);
    }
    let Some(version) = segs.first().copied() else {
        return Err(GErr::new(
            400,
            "BadRequest",
            "Invalid version: the request URL must start with /v1.0 or /beta.",
        ));
    };
    if version != "v1.0" && version != "beta" {
        return Err(GErr::new(
            400,
            "BadRequest",
            format!("Invalid version: {version}"),
        ));
    }
    let rest = &segs[1..];
    let caller = authenticate(sim, req)?;
    if !caller.any() {
        return Err(GErr::denied());
    }
    let now = sim.now_ms();
    let mut st = lock(&sim.inner.state);
    let mut ctx = GCtx {
        sim,
        st: &mut st,
        now,
        caller,
        req,
    };
    let m = &req.method;
    let Some(first) = rest.first() else {
        return Err(GErr::new(
            400,
            "BadRequest",
            "Resource not found for the segment ''.",
        ));
    };
    let (coll, alt) = split_alt(first);
    let key = |i: usize| -> Option<Key> {
        match (&alt, rest.get(i)) {
            (Some((p, v)), _) if i == 1 => Some(match p.to_ascii_lowercase().as_str() {
                "uniquename" => Key::Alt("uniqueName", v.clone()),
                "appid" => Key::Alt("appId", v.clone()),
                _ => Key::Id(v.clone()),
            }),
            (None, Some(id)) => Some(Key::Id((*id).to_string())),
            _ => None,
        }
    };
    // Index of the segment after the addressed object.
    let after = if alt.is_some() { 1 } else { 2 };
    if eq(coll, "applications") {
        match (m, key(1), rest.get(after).copied(), rest.len() > after + 1) {
            (&Method::GET, None, None, _) if alt.is_none() && rest.len() == 1 => ctx.list_apps(),
            (&Method::POST, None, None, _) if alt.is_none() && rest.len() == 1 => {
                ctx.create_app(None)
            }
            (&Method::GET, Some(k), None, false) => ctx.get_app(&k),
            (&Method::PATCH, Some(k), None, false) => ctx.patch_app(&k),
            (&Method::DELETE, Some(k), None, false) => ctx.delete_app(&k),
            (&Method::GET, Some(k), Some(o), false) if eq(o, "owners") => ctx.app_owners(&k),
            _ => Err(unsupported(req)),
        }
    } else if eq(coll, "servicePrincipals") {
        match (m, key(1), rest.get(after).copied(), rest.len() > after + 1) {
            (&Method::GET, None, None, _) if alt.is_none() && rest.len() == 1 => ctx.list_sps(),
            (&Method::POST, None, None, _) if alt.is_none() && rest.len() == 1 => ctx.post_sp(),
            (&Method::GET, Some(k), None, false) => ctx.get_sp(&k),
            (&Method::PATCH, Some(k), None, false) => ctx.patch_sp(&k),
            (&Method::DELETE, Some(k), None, false) => ctx.delete_sp(&k),
            (&Method::GET, Some(k), Some(o), false) if eq(o, "owners") => ctx.sp_owners(&k),
            _ => Err(unsupported(req)),
        }
    } else if eq(coll, "directory") && rest.get(1).is_some_and(|s| eq(s, "deletedItems")) {
        match (m, rest.get(2).copied(), rest.get(3).copied(), rest.len()) {
            (&Method::GET, Some(t), None, 3) if t.starts_with("microsoft.graph.") => {
                ctx.list_deleted(t)
            }
            (&Method::GET, Some(id), None, 3) => ctx.get_deleted(id),
            (&Method::DELETE, Some(id), None, 3) => ctx.purge_deleted(id),
            (&Method::POST, Some(id), Some(r), 4) if eq(r, "restore") => ctx.restore_deleted(id),
            _ => Err(unsupported(req)),
        }
    } else {
        Err(unsupported(req))
    }
}

fn unsupported(req: &Req) -> GErr {
    GErr::new(
        400,
        "BadRequest",
        format!(
            "Unsupported request: {} {} (not modelled by the simulated Microsoft Graph).",
            req.method, req.path
        ),
    )
}

struct GCtx<'a> {
    sim: &'a Simulator,
    st: &'a mut State,
    now: u64,
    caller: Caller,
    req: &'a Req,
}

const ODATA: &str = "https://graph.microsoft.com/v1.0/$metadata";

/// Writable properties of `microsoft.graph.application` (v1.0 resource type).
const APP_WRITABLE: &[&str] = &[
    "addIns",
    "api",
    "appRoles",
    "defaultRedirectUri",
    "description",
    "displayName",
    "groupMembershipClaims",
    "identifierUris",
    "info",
    "isDeviceOnlyAuthSupported",
    "isFallbackPublicClient",
    "keyCredentials",
    "notes",
    "optionalClaims",
    "parentalControlSettings",
    "publicClient",
    "requiredResourceAccess",
    "samlMetadataUrl",
    "serviceManagementReference",
    "servicePrincipalLockConfiguration",
    "signInAudience",
    "spa",
    "tags",
    "tokenEncryptionKeyId",
    "uniqueName",
    "web",
];
const APP_READONLY: &[&str] = &[
    "id",
    "appId",
    "createdDateTime",
    "deletedDateTime",
    "publisherDomain",
    "applicationTemplateId",
    "passwordCredentials",
];
/// Writable properties of `microsoft.graph.servicePrincipal`.
const SP_WRITABLE: &[&str] = &[
    "accountEnabled",
    "alternativeNames",
    "appRoleAssignmentRequired",
    "description",
    "displayName",
    "homepage",
    "keyCredentials",
    "loginUrl",
    "logoutUrl",
    "notes",
    "notificationEmailAddresses",
    "preferredSingleSignOnMode",
    "preferredTokenSigningKeyThumbprint",
    "replyUrls",
    "servicePrincipalNames",
    "tags",
    "appId",
];
const SP_READONLY: &[&str] = &[
    "id",
    "deletedDateTime",
    "appOwnerOrganizationId",
    "servicePrincipalType",
    "appDisplayName",
    "passwordCredentials",
];

impl GCtx<'_> {
    fn uuid(&mut self) -> String {
        util::uuid(self.st, self.sim.config().seed).to_string()
    }

    fn body(&self) -> Result<Map<String, Value>, GErr> {
        match self.req.json_body() {
            Ok(Value::Object(m)) => Ok(m),
            Ok(Value::Null) => Ok(Map::new()),
            Ok(_) => Err(GErr::new(
                400,
                "BadRequest",
                "The request body must be a JSON object.",
            )),
            Err(e) => Err(GErr::new(400, "BadRequest", e)),
        }
    }

    fn create_if_missing(&self) -> bool {
        self.req
            .header("prefer")
            .is_some_and(|p| p.split(',').any(|x| eq(x.trim(), "create-if-missing")))
    }

    // --- applications --------------------------------------------------------------

    fn find_app(&self, k: &Key) -> Option<String> {
        let apps = &self.st.graph.applications;
        match k {
            Key::Id(id) => apps
                .contains_key(&id.to_ascii_lowercase())
                .then(|| id.to_ascii_lowercase()),
            Key::Alt(prop, v) => apps
                .iter()
                .find(|(_, a)| str_at(a, &format!("/{prop}")).is_some_and(|x| x == v))
                .map(|(id, _)| id.clone()),
        }
    }

    fn key_text(k: &Key) -> String {
        match k {
            Key::Id(id) => id.clone(),
            Key::Alt(_, v) => v.clone(),
        }
    }

    fn render_app(&self, id: &str) -> Value {
        let mut a = self
            .st
            .graph
            .applications
            .get(id)
            .cloned()
            .unwrap_or(Value::Null);
        strip_keys(&mut a);
        a
    }

    fn get_app(&mut self, k: &Key) -> Result<Response, GErr> {
        let id = self
            .find_app(k)
            .ok_or_else(|| GErr::not_found(&Self::key_text(k)))?;
        if !self.caller.can_read(self.st, &id) {
            return Err(GErr::denied());
        }
        let mut v = self.render_app(&id);
        v["@odata.context"] = json!(format!("{ODATA}#applications/$entity"));
        Ok(json_resp(200, &v))
    }

    fn list_apps(&mut self) -> Result<Response, GErr> {
        let filter = Filter::parse(
            self.req.q("$filter"),
            &["appId", "displayName", "uniqueName"],
            "application",
        )?;
        let ids: Vec<String> = self.st.graph.applications.keys().cloned().collect();
        let values: Vec<Value> = ids
            .iter()
            .filter(|id| self.caller.can_read(self.st, id))
            .map(|id| self.render_app(id))
            .filter(|a| filter.matches(a))
            .collect();
        Ok(json_resp(
            200,
            &json!({"@odata.context": format!("{ODATA}#applications"), "value": values}),
        ))
    }

    fn create_app(&mut self, unique_name: Option<&str>) -> Result<Response, GErr> {
        if !self.caller.can_create() {
            return Err(GErr::denied());
        }
        let body = self.body()?;
        let display = body
            .get("displayName")
            .and_then(Value::as_str)
            .unwrap_or("");
        if display.trim().is_empty() {
            return Err(GErr::bad(
                "Invalid value specified for property 'displayName' of resource 'Application'.",
            ));
        }
        let unique = match (unique_name, body.get("uniqueName").and_then(Value::as_str)) {
            (Some(u), Some(b)) if u != b => {
                return Err(GErr::bad(
                    "The uniqueName in the request body does not match the one in the request URL.",
                ));
            }
            (Some(u), _) => Some(u.to_string()),
            (None, b) => b.map(str::to_string),
        };
        if let Some(u) = &unique
            && self.find_app(&Key::Alt("uniqueName", u.clone())).is_some()
        {
            return Err(GErr::new(
                409,
                "Request_MultipleObjectsWithSameKeyValue",
                format!(
                    "Another object with the same value for property uniqueName already exists: '{u}'."
                ),
            ));
        }
        let id = self.uuid();
        let app_id = self.uuid();
        let mut app = json!({
            "id": id,
            "deletedDateTime": null,
            "appId": app_id,
            "applicationTemplateId": null,
            "createdDateTime": util::rfc3339_secs(self.now),
            "description": null,
            "displayName": display,
            "identifierUris": [],
            "keyCredentials": [],
            "notes": null,
            "passwordCredentials": [],
            "publisherDomain": format!(
                "{}.onmicrosoft.com",
                self.sim.config().tenant_id.chars().take(8).collect::<String>()
            ),
            "requiredResourceAccess": [],
            "signInAudience": "AzureADMyOrg",
            "tags": [],
            "uniqueName": unique,
        });
        self.apply(
            &mut app,
            body,
            APP_WRITABLE,
            APP_READONLY,
            "application",
            true,
        )?;
        self.st.graph.applications.insert(id.clone(), app);
        self.st
            .graph
            .owners
            .insert(id.clone(), vec![self.caller.owner_entry()]);
        let mut v = self.render_app(&id);
        v["@odata.context"] = json!(format!("{ODATA}#applications/$entity"));
        let mut resp = json_resp(201, &v);
        set_header(
            &mut resp,
            "location",
            &format!(
                "https://graph.microsoft.com/v2/{}/directoryObjects/{id}/Microsoft.DirectoryServices.Application",
                self.sim.config().tenant_id
            ),
        );
        Ok(resp)
    }

    fn patch_app(&mut self, k: &Key) -> Result<Response, GErr> {
        let Some(id) = self.find_app(k) else {
            return match k {
                Key::Alt("uniqueName", u) if self.create_if_missing() => {
                    let u = u.clone();
                    self.create_app(Some(&u))
                }
                _ => Err(GErr::not_found(&Self::key_text(k))),
            };
        };
        if !self.caller.can_write(self.st, &id) {
            return Err(GErr::denied());
        }
        let body = self.body()?;
        if let Some(u) = body.get("uniqueName")
            && self
                .st
                .graph
                .applications
                .get(&id)
                .and_then(|a| a.get("uniqueName"))
                != Some(u)
            && !self
                .st
                .graph
                .applications
                .get(&id)
                .and_then(|a| a.get("uniqueName"))
                .is_none_or(Value::is_null)
        {
            return Err(GErr::bad(
                "Property 'uniqueName' cannot be changed once it is set.",
            ));
        }
        let mut app = self
            .st
            .graph
            .applications
            .get(&id)
            .cloned()
            .unwrap_or(Value::Null);
        self.apply(
            &mut app,
            body,
            APP_WRITABLE,
            APP_READONLY,
            "application",
            false,
        )?;
        self.st.graph.applications.insert(id, app);
        Ok(empty(204))
    }

    fn delete_app(&mut self, k: &Key) -> Result<Response, GErr> {
        let id = self
            .find_app(k)
            .ok_or_else(|| GErr::not_found(&Self::key_text(k)))?;
        if !self.caller.can_write(self.st, &id) {
            return Err(GErr::denied());
        }
        if let Some(mut app) = self.st.graph.applications.remove(&id) {
            let app_id = str_at(&app, "/appId").unwrap_or_default().to_string();
            app["deletedDateTime"] = json!(util::rfc3339_secs(self.now));
            app["@odata.type"] = json!("#microsoft.graph.application");
            self.st.graph.deleted.insert(id, app);
            let sps: Vec<String> = self
                .st
                .graph
                .service_principals
                .iter()
                .filter(|(_, sp)| str_at(sp, "/appId") == Some(app_id.as_str()))
                .map(|(k, _)| k.clone())
                .collect();
            for sp in sps {
                self.st.graph.service_principals.remove(&sp);
                self.st.graph.owners.remove(&sp);
            }
        }
        Ok(empty(204))
    }

    fn app_owners(&mut self, k: &Key) -> Result<Response, GErr> {
        let id = self
            .find_app(k)
            .ok_or_else(|| GErr::not_found(&Self::key_text(k)))?;
        if !self.caller.can_read(self.st, &id) {
            return Err(GErr::denied());
        }
        Ok(self.owners_of(&id))
    }

    fn owners_of(&self, id: &str) -> Response {
        let values: Vec<Value> = self
            .st
            .graph
            .owners
            .get(id)
            .into_iter()
            .flatten()
            .map(|o| {
                let oid = str_at(o, "/id").unwrap_or_default();
                let known = self.st.graph.service_principals.get(oid).cloned();
                let mut v = known.unwrap_or_else(|| {
                    json!({"id": oid, "appId": str_at(o, "/appId"), "servicePrincipalType": "Application"})
                });
                strip_keys(&mut v);
                v["@odata.type"] = json!("#microsoft.graph.servicePrincipal");
                v
            })
            .collect();
        json_resp(
            200,
            &json!({"@odata.context": format!("{ODATA}#directoryObjects"), "value": values}),
        )
    }

    /// Applies a PATCH/POST body: writable properties replace, read-only and unknown ones
    /// are refused, `keyCredentials` are validated and completed.
    fn apply(
        &mut self,
        obj: &mut Value,
        body: Map<String, Value>,
        writable: &[&str],
        readonly: &[&str],
        type_name: &str,
        creating: bool,
    ) -> Result<(), GErr> {
        for (k, v) in body {
            if k.starts_with('@') {
                continue;
            }
            if let Some(w) = writable.iter().find(|w| eq(w, &k)) {
                if *w == "keyCredentials" {
                    let old = obj.get("keyCredentials").cloned().unwrap_or(json!([]));
                    let creds = self.key_credentials(&v, &old)?;
                    obj["keyCredentials"] = creds;
                } else if *w == "appId" {
                    // Only on creation (the application the principal is for).
                    if !creating && obj.get("appId") != Some(&v) {
                        return Err(GErr::bad(
                            "Property 'appId' is read-only and cannot be set.",
                        ));
                    }
                } else {
                    obj[*w] = v;
                }
            } else if let Some(r) = readonly.iter().find(|r| eq(r, &k)) {
                return Err(GErr::bad(format!(
                    "Property '{r}' is read-only and cannot be set."
                )));
            } else {
                return Err(GErr::new(
                    400,
                    "BadRequest",
                    format!(
                        "The property '{k}' does not exist on type 'microsoft.graph.{type_name}'. Make sure to only use property names that are defined by the type or mark the type as open type."
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Validates a `keyCredentials` list (resource type `keyCredential`) and fills in what
    /// Graph derives from the certificate.
    fn key_credentials(&mut self, v: &Value, old: &Value) -> Result<Value, GErr> {
        let Some(items) = v.as_array() else {
            return Err(GErr::bad(
                "Invalid value specified for property 'keyCredentials' of resource 'Application'.",
            ));
        };
        let invalid = |p: &str| {
            GErr::bad(format!(
                "Invalid value specified for property '{p}' of resource 'KeyCredential'."
            ))
        };
        let mut out = Vec::new();
        let mut seen_ids = Vec::new();
        for item in items {
            let Value::Object(m) = item else {
                return Err(invalid("keyCredentials"));
            };
            let mut c = m.clone();
            let ktype = c.get("type").and_then(Value::as_str).unwrap_or("");
            if !eq(ktype, "AsymmetricX509Cert") {
                return Err(invalid("type"));
            }
            let usage = c.get("usage").and_then(Value::as_str).unwrap_or("");
            if !(eq(usage, "Verify") || eq(usage, "Sign")) {
                return Err(invalid("usage"));
            }
            let key_id = match c.get("keyId").and_then(Value::as_str) {
                Some(k) if uuid::Uuid::parse_str(k).is_ok() => k.to_ascii_lowercase(),
                Some(_) => return Err(invalid("keyId")),
                None => self.uuid(),
            };
            if seen_ids.contains(&key_id) {
                return Err(GErr::bad(format!(
                    "Key credential keyId '{key_id}' appears more than once."
                )));
            }
            seen_ids.push(key_id.clone());
            let key_b64 = match c.get("key").and_then(Value::as_str) {
                Some(k) => k.to_string(),
                None => old
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|o| str_at(o, "/keyId") == Some(key_id.as_str()))
                    .and_then(|o| str_at(o, "/key").map(str::to_string))
                    .ok_or_else(|| invalid("key"))?,
            };
            let der = STANDARD
                .decode(key_b64.trim())
                .map_err(|_| invalid("key"))?;
            let info = crate::keyvault::cert_info(&der).ok_or_else(|| invalid("key"))?;
            let end = match c.get("endDateTime").and_then(Value::as_str) {
                Some(e) => {
                    let t = humantime::parse_rfc3339_weak(e.trim_end_matches('Z'))
                        .map_err(|_| invalid("endDateTime"))?;
                    let secs = t
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs() as i64)
                        .unwrap_or(0);
                    if secs > info.not_after + 1 {
                        return Err(GErr::bad("Key credential end date is invalid."));
                    }
                    e.to_string()
                }
                None => util::rfc3339_secs(info.not_after.max(0) as u64 * 1000),
            };
            let start = c
                .get("startDateTime")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| util::rfc3339_secs(info.not_before.max(0) as u64 * 1000));
            c.insert("type".into(), json!("AsymmetricX509Cert"));
            c.insert("keyId".into(), json!(key_id));
            c.insert("key".into(), json!(STANDARD.encode(&der)));
            c.insert("startDateTime".into(), json!(start));
            c.insert("endDateTime".into(), json!(end));
            if c.get("customKeyIdentifier").is_none_or(Value::is_null) {
                c.insert(
                    "customKeyIdentifier".into(),
                    json!(STANDARD.encode(crate::keyvault::sha1(&der))),
                );
            }
            if c.get("displayName").is_none_or(Value::is_null) {
                c.insert("displayName".into(), json!(info.subject));
            }
            out.push(Value::Object(c));
        }
        Ok(Value::Array(out))
    }

    // --- service principals --------------------------------------------------------

    /// Every service principal: stored ones, then the managed identities'.
    fn all_sps(&self) -> Vec<Value> {
        let mut v: Vec<Value> = self.st.graph.service_principals.values().cloned().collect();
        v.extend(managed_identity_sps(self.st));
        v
    }

    fn find_sp(&self, k: &Key) -> Option<Value> {
        self.all_sps().into_iter().find(|sp| match k {
            Key::Id(id) => str_at(sp, "/id").is_some_and(|x| eq(x, id)),
            Key::Alt(prop, v) => str_at(sp, &format!("/{prop}")).is_some_and(|x| eq(x, v)),
        })
    }

    fn render_sp(sp: &Value) -> Value {
        let mut v = sp.clone();
        strip_keys(&mut v);
        v
    }

    fn get_sp(&mut self, k: &Key) -> Result<Response, GErr> {
        let sp = self
            .find_sp(k)
            .ok_or_else(|| GErr::not_found(&Self::key_text(k)))?;
        let id = str_at(&sp, "/id").unwrap_or_default().to_string();
        if !self.caller.can_read(self.st, &id) {
            return Err(GErr::denied());
        }
        let mut v = Self::render_sp(&sp);
        v["@odata.context"] = json!(format!("{ODATA}#servicePrincipals/$entity"));
        Ok(json_resp(200, &v))
    }

    fn list_sps(&mut self) -> Result<Response, GErr> {
        let filter = Filter::parse(
            self.req.q("$filter"),
            &["appId", "displayName", "servicePrincipalType"],
            "servicePrincipal",
        )?;
        let values: Vec<Value> = self
            .all_sps()
            .iter()
            .filter(|sp| {
                self.caller
                    .can_read(self.st, str_at(sp, "/id").unwrap_or_default())
            })
            .filter(|sp| filter.matches(sp))
            .map(Self::render_sp)
            .collect();
        Ok(json_resp(
            200,
            &json!({"@odata.context": format!("{ODATA}#servicePrincipals"), "value": values}),
        ))
    }

    fn post_sp(&mut self) -> Result<Response, GErr> {
        let body = self.body()?;
        let app_id = body
            .get("appId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if self.find_sp(&Key::Alt("appId", app_id.clone())).is_some() {
            return Err(GErr::new(
                409,
                "Request_MultipleObjectsWithSameKeyValue",
                format!(
                    "The service principal cannot be created, updated, or restored because the service principal name {app_id} is already in use."
                ),
            ));
        }
        self.create_sp(&app_id, body)
    }

    fn create_sp(&mut self, app_id: &str, body: Map<String, Value>) -> Result<Response, GErr> {
        let Some((app_obj, app)) = self
            .st
            .graph
            .applications
            .iter()
            .find(|(_, a)| str_at(a, "/appId").is_some_and(|x| eq(x, app_id)))
            .map(|(k, a)| (k.clone(), a.clone()))
        else {
            if !self.caller.can_create() {
                return Err(GErr::denied());
            }
            return Err(GErr::bad(format!(
                "The appId '{app_id}' of the service principal does not reference a valid application object."
            )));
        };
        if !self.caller.can_write(self.st, &app_obj) {
            return Err(GErr::denied());
        }
        let id = self.uuid();
        let display = str_at(&app, "/displayName").unwrap_or_default().to_string();
        let mut sp = json!({
            "id": id,
            "deletedDateTime": null,
            "accountEnabled": true,
            "alternativeNames": [],
            "appDisplayName": display,
            "appId": str_at(&app, "/appId"),
            "appOwnerOrganizationId": self.sim.config().tenant_id,
            "appRoleAssignmentRequired": false,
            "description": null,
            "displayName": display,
            "keyCredentials": [],
            "notes": null,
            "passwordCredentials": [],
            "servicePrincipalNames": [str_at(&app, "/appId")],
            "servicePrincipalType": "Application",
            "signInAudience": str_at(&app, "/signInAudience").unwrap_or("AzureADMyOrg"),
            "tags": [],
        });
        self.apply(
            &mut sp,
            body,
            SP_WRITABLE,
            SP_READONLY,
            "servicePrincipal",
            true,
        )?;
        self.st
            .graph
            .service_principals
            .insert(id.clone(), sp.clone());
        self.st
            .graph
            .owners
            .insert(id, vec![self.caller.owner_entry()]);
        let mut v = Self::render_sp(&sp);
        v["@odata.context"] = json!(format!("{ODATA}#servicePrincipals/$entity"));
        Ok(json_resp(201, &v))
    }

    fn patch_sp(&mut self, k: &Key) -> Result<Response, GErr> {
        let Some(sp) = self.find_sp(k) else {
            return match k {
                Key::Alt("appId", a) if self.create_if_missing() => {
                    let a = a.clone();
                    let body = self.body()?;
                    self.create_sp(&a, body)
                }
                _ => Err(GErr::not_found(&Self::key_text(k))),
            };
        };
        let id = str_at(&sp, "/id").unwrap_or_default().to_ascii_lowercase();
        if !self.st.graph.service_principals.contains_key(&id)
            || !self.caller.can_write(self.st, &id)
        {
            // Managed identities' principals are the platform's: nobody updates them here.
            return Err(GErr::denied());
        }
        let body = self.body()?;
        let mut sp = sp;
        self.apply(
            &mut sp,
            body,
            SP_WRITABLE,
            SP_READONLY,
            "servicePrincipal",
            false,
        )?;
        self.st.graph.service_principals.insert(id, sp);
        Ok(empty(204))
    }

    fn delete_sp(&mut self, k: &Key) -> Result<Response, GErr> {
        let sp = self
            .find_sp(k)
            .ok_or_else(|| GErr::not_found(&Self::key_text(k)))?;
        let id = str_at(&sp, "/id").unwrap_or_default().to_ascii_lowercase();
        if !self.st.graph.service_principals.contains_key(&id)
            || !self.caller.can_write(self.st, &id)
        {
            return Err(GErr::denied());
        }
        if let Some(mut sp) = self.st.graph.service_principals.remove(&id) {
            sp["deletedDateTime"] = json!(util::rfc3339_secs(self.now));
            sp["@odata.type"] = json!("#microsoft.graph.servicePrincipal");
            self.st.graph.deleted.insert(id, sp);
        }
        Ok(empty(204))
    }

    fn sp_owners(&mut self, k: &Key) -> Result<Response, GErr> {
        let sp = self
            .find_sp(k)
            .ok_or_else(|| GErr::not_found(&Self::key_text(k)))?;
        let id = str_at(&sp, "/id").unwrap_or_default().to_ascii_lowercase();
        if !self.caller.can_read(self.st, &id) {
            return Err(GErr::denied());
        }
        Ok(self.owners_of(&id))
    }

    // --- deleted items -------------------------------------------------------------

    fn deleted(&self, id: &str) -> Result<(String, Value), GErr> {
        let key = id.to_ascii_lowercase();
        match self.st.graph.deleted.get(&key) {
            Some(v) => Ok((key, v.clone())),
            None => Err(GErr::not_found(id)),
        }
    }

    fn get_deleted(&mut self, id: &str) -> Result<Response, GErr> {
        let (key, mut v) = self.deleted(id)?;
        if !self.caller.can_read(self.st, &key) {
            return Err(GErr::denied());
        }
        strip_keys(&mut v);
        v["@odata.context"] = json!(format!("{ODATA}#directoryObjects/$entity"));
        Ok(json_resp(200, &v))
    }

    fn list_deleted(&mut self, t: &str) -> Result<Response, GErr> {
        let want = format!("#{t}");
        let values: Vec<Value> = self
            .st
            .graph
            .deleted
            .iter()
            .filter(|(_, v)| str_at(v, "/@odata.type").is_some_and(|x| eq(x, &want)))
            .filter(|(k, _)| self.caller.can_read(self.st, k))
            .map(|(_, v)| {
                let mut v = v.clone();
                strip_keys(&mut v);
                v
            })
            .collect();
        Ok(json_resp(200, &json!({"value": values})))
    }

    fn purge_deleted(&mut self, id: &str) -> Result<Response, GErr> {
        let (key, _) = self.deleted(id)?;
        if !self.caller.can_write(self.st, &key) {
            return Err(GErr::denied());
        }
        self.st.graph.deleted.remove(&key);
        self.st.graph.owners.remove(&key);
        Ok(empty(204))
    }

    fn restore_deleted(&mut self, id: &str) -> Result<Response, GErr> {
        let (key, mut v) = self.deleted(id)?;
        if !self.caller.can_write(self.st, &key) {
            return Err(GErr::denied());
        }
        let is_app = str_at(&v, "/@odata.type") == Some("#microsoft.graph.application");
        if let Value::Object(m) = &mut v {
            m.remove("@odata.type");
            m.insert("deletedDateTime".into(), Value::Null);
        }
        self.st.graph.deleted.remove(&key);
        if is_app {
            self.st.graph.applications.insert(key.clone(), v);
        } else {
            self.st.graph.service_principals.insert(key.clone(), v);
        }
        let mut out = if is_app {
            self.render_app(&key)
        } else {
            Self::render_sp(
                self.st
                    .graph
                    .service_principals
                    .get(&key)
                    .unwrap_or(&Value::Null),
            )
        };
        out["@odata.context"] = json!(format!("{ODATA}#directoryObjects/$entity"));
        Ok(json_resp(200, &out))
    }
}

/// Service principals of the user-assigned identities in ARM.
fn managed_identity_sps(st: &State) -> Vec<Value> {
    arm_store::of_type(st, types::IDENTITY)
        .into_iter()
        .filter_map(|i| {
            let client = str_at(&i.body, "/properties/clientId")?;
            let principal = str_at(&i.body, "/properties/principalId")?;
            let tenant = str_at(&i.body, "/properties/tenantId").unwrap_or_default();
            Some(json!({
                "id": principal,
                "deletedDateTime": null,
                "accountEnabled": true,
                "alternativeNames": ["isExplicit=True", i.id],
                "appDisplayName": null,
                "appId": client,
                "appOwnerOrganizationId": tenant,
                "appRoleAssignmentRequired": false,
                "displayName": i.name,
                "keyCredentials": [],
                "passwordCredentials": [],
                "servicePrincipalNames": [client, format!("https://identity.azure.net/{}", i.id)],
                "servicePrincipalType": "ManagedIdentity",
                "signInAudience": null,
                "tags": [],
            }))
        })
        .collect()
}

/// Graph never returns a key credential's `key`.
fn strip_keys(v: &mut Value) {
    if let Some(creds) = v.get_mut("keyCredentials").and_then(Value::as_array_mut) {
        for c in creds {
            c["key"] = Value::Null;
        }
    }
}

/// A `$filter` of `prop eq 'value'` clauses joined with `and`.
struct Filter(Vec<(String, String)>);

impl Filter {
    fn parse(f: Option<&str>, allowed: &[&str], resource: &str) -> Result<Self, GErr> {
        let mut out = Vec::new();
        let Some(f) = f.map(str::trim).filter(|f| !f.is_empty()) else {
            return Ok(Self(out));
        };
        for clause in f.split(" and ") {
            let (prop, value) = clause
                .trim()
                .split_once(" eq ")
                .map(|(p, v)| (p.trim(), v.trim()))
                .unwrap_or((clause.trim(), ""));
            let Some(p) = allowed.iter().find(|a| eq(a, prop)) else {
                return Err(GErr::new(
                    400,
                    "Request_UnsupportedQuery",
                    format!(
                        "Unsupported or invalid query filter clause specified for property '{prop}' of resource '{resource}'."
                    ),
                ));
            };
            let Some(v) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) else {
                return Err(GErr::new(
                    400,
                    "BadRequest",
                    format!("Invalid filter clause: {clause}"),
                ));
            };
            out.push(((*p).to_string(), v.replace("''", "'")));
        }
        Ok(Self(out))
    }

    fn matches(&self, v: &Value) -> bool {
        self.0
            .iter()
            .all(|(p, want)| str_at(v, &format!("/{p}")).is_some_and(|x| eq(x, want)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_keys_parse() {
        let (c, k) = split_alt("applications(uniqueName='hcp-a''b')");
        assert_eq!(c, "applications");
        assert_eq!(k, Some(("uniqueName".to_string(), "hcp-a'b".to_string())));
        let (c, k) = split_alt("servicePrincipals(appId='x')");
        assert_eq!(c, "servicePrincipals");
        assert_eq!(k, Some(("appId".to_string(), "x".to_string())));
        assert_eq!(split_alt("applications").1, None);
    }

    #[test]
    fn graph_audiences() {
        assert!(is_graph_audience("https://graph.microsoft.com"));
        assert!(is_graph_audience("https://graph.microsoft.com/"));
        assert!(is_graph_audience("https://microsoftgraph.chinacloudapi.cn"));
        assert!(is_graph_audience(GRAPH_APP_ID));
        assert!(!is_graph_audience("https://management.azure.com"));
    }
}
