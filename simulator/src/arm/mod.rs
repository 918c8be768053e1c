//! Simulated Azure Resource Manager.
//!
//! Resources are stored as JSON ([`crate::state::ArmResource`]) with per-type logic for
//! validation, generated fields and rendering, written from the real API contract
//! (DOMAIN.md and the reference examples) rather than shared with the client code.
//! Child resources (subnets, PLS connections, federated credentials, DNS links/records,
//! containers) are stored separately and folded into their parent when it is rendered.
//!
//! Code map: [`path`] parses URLs, [`types`] lists types and api-versions, [`handlers`]
//! implements PUT/GET/DELETE/LIST/POST, [`prepare`] validates and fills PUT bodies,
//! [`render`] produces response bodies, [`ops`] runs long-running operations, [`store`]
//! holds lookups, cascading removal and IP allocation, [`schema`] validates request
//! bodies against the Azure REST API specs.
//!
//! Conformance with the official clients:
//! - Request bodies: every PUT/PATCH body is validated against its operation's schema from
//!   the specs directory (`SimConfig::specs_dir`, `simulator serve --specs DIR`): 400
//!   `InvalidRequestContent` naming the property path ([`schema`]); without specs, the
//!   hand-written required-property checks of [`schema::fallback`] and `prepare` run.
//! - PATCH: tags updates of the tracked types we model ([`handlers::patch`]; tags replace,
//!   per `ResourceGroupPatchable`, `TagsObject`, `IdentityUpdate`, …).
//! - api-versions: the versions Azure serves per provider, including the Python SDKs'
//!   defaults ([`types`]).
//! - `If-Match` / `If-None-Match: *` on PUT/PATCH/DELETE of resources with etags: 412
//!   `PreconditionFailed` ([`handlers::check_preconditions`]).
//! - A Private DNS zone with virtual network links: DELETE answers 409
//!   `CannotDeleteResource` (`prepare::pre_delete`).
//! - Role assignments naming `properties.principalType` skip the `PrincipalNotFound`
//!   replication window (`prepare`).
//! - Storage `checkNameAvailability` (served by `crate::preflight`) and the generic resource
//!   list with `$filter=tagName/tagValue` ([`handlers::list_resources`]) were already there.
//! - Kept: the Private DNS PATCH answers 200 with the zone at once (Azure: 202 + polling),
//!   which the SDK pollers accept as a completed operation; a body is validated against the
//!   spec version in the directory whatever api-version the request names (the excerpts
//!   hold one version per provider).

mod handlers;
mod ops;
pub(crate) mod path;
mod prepare;
mod render;
mod schema;
pub(crate) mod store;
pub(crate) mod types;

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::http::{Req, json as json_resp, set_header};
use crate::sim::{InventoryItem, Simulator, lock};
use crate::state::State;

pub(crate) use prepare::privatelink::pls_referencing_frontend as prepare_pls_referencing_frontend;
pub(crate) use prepare::privatelink::pls_referencing_lb as prepare_pls_referencing_lb;
pub(crate) use store::find_storage_account;

/// An ARM error answer: `{"error":{"code","message"}}` plus `x-ms-error-code`.
#[derive(Debug, Clone)]
pub(crate) struct ArmError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl ArmError {
    pub(crate) fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_string(),
            message: message.into(),
        }
    }
    pub(crate) fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(400, code, message)
    }
}

impl IntoResponse for ArmError {
    fn into_response(self) -> Response {
        error_response(self.status, &self.code, &self.message)
    }
}

/// ARM error response.
pub(crate) fn error_response(status: u16, code: &str, message: &str) -> Response {
    let mut resp = json_resp(
        status,
        &json!({"error": {"code": code, "message": message, "details": []}}),
    );
    set_header(&mut resp, "x-ms-error-code", code);
    resp
}

/// Per-request context handed to the handlers (state locked for the whole request).
pub(crate) struct Ctx<'a> {
    pub sim: &'a Simulator,
    pub st: &'a mut State,
    pub now: u64,
}

impl Ctx<'_> {
    pub(crate) fn uuid(&mut self) -> String {
        crate::util::uuid(self.st, self.sim.config().seed).to_string()
    }
    pub(crate) fn cfg(&self) -> &crate::config::SimConfig {
        self.sim.config()
    }
}

/// The ARM resource type a request addresses (for fault matching).
pub(crate) fn classify_type(req: &Req) -> Option<String> {
    match path::parse(&req.segments, req.method == Method::POST).ok()? {
        path::Target::RgList { .. } => Some(types::RG.to_string()),
        path::Target::GenericList { .. } => Some("Microsoft.Resources/resources".to_string()),
        path::Target::Resource(r) | path::Target::Action { res: r, .. } => {
            Some(r.spec.rtype.to_string())
        }
        path::Target::Collection { spec, .. } => Some(spec.rtype.to_string()),
        path::Target::Operation { .. } => Some("Microsoft.Resources/operations".to_string()),
    }
}

/// Subscription of an ARM path (throttling key).
pub(crate) fn subscription_of(req: &Req) -> Option<String> {
    match req.segments.as_slice() {
        [first, sub, ..] if first.eq_ignore_ascii_case("subscriptions") => Some(sub.clone()),
        _ => None,
    }
}

/// Serves one ARM request.
pub(crate) async fn handle(
    sim: &Simulator,
    req: &Req,
    fail_async: Option<(String, String)>,
) -> Response {
    let mut resp = match handle_inner(sim, req, fail_async).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    // Request ids are random: they must not consume the seeded id sequence.
    let rid = uuid::Uuid::new_v4().to_string();
    set_header(&mut resp, "x-ms-request-id", &rid);
    set_header(&mut resp, "x-ms-correlation-request-id", &rid);
    resp
}

async fn handle_inner(
    sim: &Simulator,
    req: &Req,
    fail_async: Option<(String, String)>,
) -> Result<Response, ArmError> {
    match req.header("authorization") {
        None => {
            return Err(ArmError::new(
                401,
                "AuthenticationFailed",
                "Authentication failed. The 'Authorization' header is missing.",
            ));
        }
        Some(h) if !h.starts_with("Bearer ") || h.len() <= 7 => {
            return Err(ArmError::new(
                401,
                "InvalidAuthenticationToken",
                "The access token is invalid.",
            ));
        }
        Some(_) => {}
    }
    // The read APIs of `hcp-workflow preflight`.
    if let Some(resp) = crate::preflight::handle_arm(sim, req) {
        return Ok(resp);
    }
    // Key Vault's provider-level operations (name check, deleted vaults, purge).
    if let Some(resp) = crate::keyvault::handle_arm(sim, req) {
        return Ok(resp);
    }
    let target = match path::parse(&req.segments, req.method == Method::POST) {
        Ok(t) => t,
        Err(path::PathError::NotFound) => {
            return Err(ArmError::new(
                404,
                "NotFound",
                format!(
                    "The requested path '{}' is not an ARM path the simulator serves.",
                    req.path
                ),
            ));
        }
        Err(path::PathError::UnknownType(t)) => {
            return Err(ArmError::new(
                404,
                "InvalidResourceType",
                format!("The resource type '{t}' could not be found."),
            ));
        }
    };
    check_api_version(req, &target)?;
    // The AKS management cluster is read-only to its callers (`crate::aks`).
    if let path::Target::Resource(r) = &target
        && let Some(e) = crate::aks::refuse_write(req, r.spec.rtype, &r.id)
    {
        return Err(e);
    }
    if let (&Method::PUT | &Method::PATCH, path::Target::Resource(r)) = (&req.method, &target)
        && let Ok(body) = req.json_body()
        && !body.is_null()
    {
        match &sim.config().specs_dir {
            Some(dir) => schema::validate(dir, req.method.as_str(), &req.segments, &body)?,
            None => schema::fallback(r.spec.rtype, &body)?,
        }
    }
    // Federated credential writes occupy their identity for a while; a second write
    // meanwhile is refused like Azure does. The wait happens before locking the state.
    let _fic_guard = match &target {
        path::Target::Resource(r)
            if r.spec.rtype == types::FIC && matches!(req.method, Method::PUT | Method::DELETE) =>
        {
            Some(handlers::FicGuard::acquire(sim, &r.parent).await?)
        }
        _ => None,
    };
    let now = sim.now_ms();
    let mut st = lock(&sim.inner.state);
    let mut ctx = Ctx {
        sim,
        st: &mut st,
        now,
    };
    match (&req.method, target) {
        (&Method::PUT, path::Target::Resource(r)) => handlers::put(&mut ctx, req, &r, fail_async),
        (&Method::GET, path::Target::Resource(r)) => handlers::get(&mut ctx, req, &r),
        (&Method::HEAD, path::Target::Resource(r)) => handlers::get(&mut ctx, req, &r).map(|r| {
            let status = r.status();
            let mut e = crate::http::empty(if status.is_success() {
                204
            } else {
                status.as_u16()
            });
            *e.headers_mut() = r.headers().clone();
            e
        }),
        (&Method::DELETE, path::Target::Resource(r)) => {
            handlers::delete(&mut ctx, req, &r, fail_async)
        }
        (&Method::PATCH, path::Target::Resource(r)) => handlers::patch(&mut ctx, req, &r),
        (
            &Method::GET,
            path::Target::Collection {
                sub,
                rg,
                parent,
                spec,
            },
        ) => handlers::list(&mut ctx, req, &sub, rg.as_deref(), &parent, spec),
        (&Method::GET, path::Target::RgList { sub }) => handlers::list_groups(&mut ctx, req, &sub),
        (&Method::GET, path::Target::GenericList { sub, rg }) => {
            handlers::list_resources(&mut ctx, req, &sub, rg.as_deref())
        }
        (&Method::POST, path::Target::Action { res, action }) => {
            handlers::action(&mut ctx, &res, &action)
        }
        (&Method::GET, path::Target::Operation { op_id, result, .. }) => {
            ops::get_operation(&mut ctx, req, &op_id, result)
        }
        (m, _) => Err(ArmError::new(
            405,
            "MethodNotAllowed",
            format!("The method {m} is not allowed on {}.", req.path),
        )),
    }
}

fn check_api_version(req: &Req, target: &path::Target) -> Result<(), ArmError> {
    let Some(v) = req.q("api-version") else {
        return Err(ArmError::bad_request(
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    };
    let (ok, rtype, supported) = match target {
        path::Target::RgList { .. } | path::Target::GenericList { .. } => {
            let s = types::lookup(types::RG);
            (
                s.is_some_and(|s| s.api_versions.contains(&v)),
                types::RG,
                s.map(|s| s.api_versions).unwrap_or(&[]),
            )
        }
        path::Target::Resource(r) | path::Target::Action { res: r, .. } => (
            r.spec.api_versions.contains(&v),
            r.spec.rtype,
            r.spec.api_versions,
        ),
        path::Target::Collection { spec, .. } => (
            spec.api_versions.contains(&v),
            spec.rtype,
            spec.api_versions,
        ),
        path::Target::Operation { namespace, .. } => (
            types::provider_knows_version(namespace, v),
            "operations",
            &[][..],
        ),
    };
    if ok {
        return Ok(());
    }
    let list = supported.join(", ");
    if rtype == types::RG {
        Err(ArmError::bad_request(
            "InvalidApiVersionParameter",
            format!("The api-version '{v}' is invalid. The supported versions are '{list}'."),
        ))
    } else {
        Err(ArmError::bad_request(
            "NoRegisteredProviderFound",
            format!(
                "No registered resource provider found for API version '{v}' and type '{rtype}'. The supported api-versions are '{list}'."
            ),
        ))
    }
}

/// Completes due operations; returns whether anything changed.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    ops::tick(sim, st, now)
}

/// Inventory entries of every ARM resource.
pub(crate) fn inventory(st: &State) -> Vec<InventoryItem> {
    st.arm
        .values()
        .map(|r| InventoryItem {
            id: r.id.clone(),
            rtype: r.rtype.clone(),
            name: r.name.clone(),
            tags: r
                .body
                .get("tags")
                .cloned()
                .unwrap_or(Value::Object(Default::default())),
            created_seq: r.created_seq,
        })
        .collect()
}

/// Creates the management resource group and VNet the operator and PLS stage rely on.
pub(crate) fn seed_management(sim: &Simulator, st: &mut State, now: u64) {
    store::seed_management(sim, st, now);
}

/// An ARM call made by a simulated controller (HyperShift's operators calling Azure with
/// their own credentials) from the ticker, with the state already locked: the same
/// handlers as an HTTP request, logged in the request log with `actor`. `path_and_query`
/// is an ARM path with `?api-version=…`. Returns the HTTP status of the answer.
pub(crate) fn internal_call(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    actor: &str,
    method: Method,
    path_and_query: &str,
    body: Option<&Value>,
) -> Result<u16, ArmError> {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let req = Req {
        method: method.clone(),
        path: path.to_string(),
        path_and_query: path_and_query.to_string(),
        segments: path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        query: query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        headers: axum::http::HeaderMap::new(),
        body: body
            .map(|b| axum::body::Bytes::from(serde_json::to_vec(b).unwrap_or_default()))
            .unwrap_or_default(),
        host: "management.azure.com".to_string(),
    };
    let result = (|| {
        let target = path::parse(&req.segments, false)
            .map_err(|_| ArmError::new(404, "NotFound", format!("not an ARM path: {path}")))?;
        check_api_version(&req, &target)?;
        let path::Target::Resource(r) = target else {
            return Err(ArmError::new(405, "MethodNotAllowed", "resources only"));
        };
        let mut ctx = Ctx { sim, st, now };
        let resp = match method {
            Method::PUT => handlers::put(&mut ctx, &req, &r, None)?,
            Method::DELETE => handlers::delete(&mut ctx, &req, &r, None)?,
            _ => handlers::get(&mut ctx, &req, &r)?,
        };
        Ok(resp.status().as_u16())
    })();
    let (status, code, message) = match &result {
        Ok(s) => (*s, None, None),
        Err(e) => (e.status, Some(e.code.clone()), Some(e.message.clone())),
    };
    log_internal(sim, actor, &method, path_and_query, status, code, message);
    result
}

/// Records a call a simulated controller made (or was refused) in the request log.
pub(crate) fn log_internal(
    sim: &Simulator,
    actor: &str,
    method: &Method,
    path_and_query: &str,
    status: u16,
    error_code: Option<String>,
    error_message: Option<String>,
) {
    let seq = sim.next_request_seq();
    let mut log = lock(&sim.inner.log);
    log.push(crate::sim::RequestRecord {
        seq,
        method: method.to_string(),
        path: path_and_query.to_string(),
        status,
        error_code,
        actor: Some(actor.to_string()),
        error_message,
        at_ms: sim.now_ms(),
    });
}
