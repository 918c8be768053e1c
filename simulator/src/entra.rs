//! Microsoft Entra token endpoint (`POST /{tenant}/oauth2/v2.0/token`).
//!
//! Supports the client-credentials grant with a `client_secret` or a `client_assertion`
//! (`urn:ietf:params:oauth:client-assertion-type:jwt-bearer`), which is what
//! azure_identity's `ClientSecretCredential`, `ClientAssertionCredential` and
//! `WorkloadIdentityCredential` send. Any secret or assertion is accepted; what is checked
//! is the protocol (grant type, client id, scope ending in `/.default`). The token is a
//! JWT-shaped string with an unverifiable signature, good for one hour.
//!
//! Claims, as Entra issues them for an app-only token (learn.microsoft.com/entra/identity-platform/access-token-claims-reference):
//! `aud` (the scope's resource), `iss`, `iat`/`nbf`/`exp`, `appid` (the client id), `tid`,
//! `sub`, `jti`, `idtyp: app`, and `oid` — the object id of the client's service principal
//! in the tenant, stable across tokens ([`object_id_for`]): the `principalId` of a
//! user-assigned identity whose `clientId` it is, the `id` of the service principal created
//! through the simulated Microsoft Graph for an application, else a fixed UUID derived from
//! tenant and client id (the principal hcp-workflow itself runs as). Tokens for Microsoft
//! Graph carry `roles`: the Graph application permissions granted to the caller (the
//! scenario's `graph_permissions`, default `Application.ReadWrite.OwnedBy`); applications and
//! identities made inside the simulation hold none, so their Graph tokens carry no `roles`.

use axum::http::Method;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;

use crate::http::{ErrorCode, Req, json};
use crate::sim::Simulator;
use crate::util;

/// Token lifetime in seconds (what Entra issues by default).
const TOKEN_LIFETIME: u64 = 3599;

pub(crate) fn handle(sim: &Simulator, req: &Req) -> Response {
    let tenant = req.segments.first().cloned().unwrap_or_default();
    let rest: Vec<&str> = req.segments.iter().skip(1).map(String::as_str).collect();
    match (&req.method, rest.as_slice()) {
        (&Method::POST, ["oauth2", "v2.0", "token"]) => token(sim, req, &tenant),
        (&Method::GET, ["v2.0", ".well-known", "openid-configuration"]) => {
            let base = req.base_url();
            json(
                200,
                &json!({
                    "token_endpoint": format!("{base}/{tenant}/oauth2/v2.0/token"),
                    "issuer": format!("{base}/{tenant}/v2.0"),
                    "authorization_endpoint": format!("{base}/{tenant}/oauth2/v2.0/authorize"),
                    "jwks_uri": format!("{base}/{tenant}/discovery/v2.0/keys"),
                    "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
                    "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
                    "tenant_region_scope": "NA",
                }),
            )
        }
        _ => error_response(
            404,
            "invalid_request",
            "AADSTS90002: no such endpoint on the simulated Entra",
        ),
    }
}

fn token(sim: &Simulator, req: &Req, tenant: &str) -> Response {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&req.body).unwrap_or_default();
    let get = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    match get("grant_type") {
        Some("client_credentials") => {}
        Some(other) => {
            return error_response(
                400,
                "unsupported_grant_type",
                &format!("AADSTS70003: grant type '{other}' is not supported by the simulator"),
            );
        }
        None => {
            return error_response(
                400,
                "invalid_request",
                "AADSTS900144: The request body must contain the following parameter: 'grant_type'.",
            );
        }
    }
    let Some(client_id) = get("client_id") else {
        return error_response(
            400,
            "invalid_request",
            "AADSTS900144: The request body must contain the following parameter: 'client_id'.",
        );
    };
    let Some(scope) = get("scope") else {
        return error_response(
            400,
            "invalid_scope",
            "AADSTS900144: The request body must contain the following parameter: 'scope'.",
        );
    };
    if !scope.split(' ').all(|s| s.ends_with("/.default")) {
        return error_response(
            400,
            "invalid_scope",
            &format!(
                "AADSTS1002012: The provided value for scope {scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI)."
            ),
        );
    }
    let has_secret = get("client_secret").is_some();
    if let Some(refused) = crate::preflight::token_refusal(sim, client_id, has_secret) {
        return refused;
    }
    let has_assertion = get("client_assertion").is_some()
        && get("client_assertion_type")
            == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
    if !has_secret && !has_assertion {
        return error_response(
            401,
            "invalid_client",
            "AADSTS7000216: 'client_assertion', 'client_secret' or 'request' is required for the 'client_credentials' grant type.",
        );
    }
    let now = sim.now_ms();
    let jti = uuid::Uuid::new_v4();
    let aud = scope.trim_end_matches("/.default");
    let (oid, directory_principal) = {
        let st = crate::sim::lock(&sim.inner.state);
        (
            object_id_for(&st, tenant, client_id),
            crate::graph::is_directory_principal(&st, client_id),
        )
    };
    let header = json!({"typ": "JWT", "alg": "RS256", "kid": "hcp-simulator"});
    let mut claims = json!({
        "aud": aud,
        "iss": format!("https://sts.windows.net/{tenant}/"),
        "iat": now / 1000,
        "nbf": now / 1000,
        "exp": now / 1000 + TOKEN_LIFETIME,
        "appid": client_id,
        "tid": tenant,
        "oid": oid,
        "sub": oid,
        "idtyp": "app",
        "jti": jti,
    });
    if crate::graph::is_graph_audience(aud) && !directory_principal {
        let roles = crate::preflight::scenario(sim)
            .graph_permissions
            .unwrap_or_else(|| vec![crate::graph::DEFAULT_PERMISSION.to_string()]);
        if !roles.is_empty() {
            claims["roles"] = json!(roles);
        }
    }
    let enc = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let token = format!(
        "{}.{}.{}",
        enc(&header),
        enc(&claims),
        URL_SAFE_NO_PAD.encode("hcp-simulator-unsigned")
    );
    json(
        200,
        &json!({
            "token_type": "Bearer",
            "expires_in": TOKEN_LIFETIME,
            "ext_expires_in": TOKEN_LIFETIME,
            "access_token": token,
        }),
    )
}

/// OAuth 2.0 error body as Entra sends it.
pub(crate) fn error_response(status: u16, code: &str, message: &str) -> Response {
    let mut resp = json(
        status,
        &json!({
            "error": code,
            "error_description": message,
            "error_codes": [],
            "timestamp": util::rfc3339_secs(0),
            "trace_id": "00000000-0000-0000-0000-000000000000",
            "correlation_id": "00000000-0000-0000-0000-000000000000",
        }),
    );
    resp.extensions_mut().insert(ErrorCode(code.to_string()));
    resp
}

/// The object id of `client_id`'s service principal in the tenant, as Entra puts it in the
/// token's `oid` (see the module docs): stable for a client id.
pub(crate) fn object_id_for(st: &crate::state::State, tenant: &str, client_id: &str) -> String {
    if let Some(id) = crate::graph::service_principal_object_id(st, client_id) {
        return id;
    }
    let ns = uuid::Uuid::from_u64_pair(0x6863_702d_7369_6d00, 0x6f69_6400_0000_0000);
    let key = format!(
        "{}/{}",
        tenant.to_ascii_lowercase(),
        client_id.to_ascii_lowercase()
    );
    uuid::Uuid::new_v5(&ns, key.as_bytes()).to_string()
}

/// The claims of the request's bearer token (`Authorization: Bearer <jwt>`), read without
/// verifying the signature (the simulator signs nothing). `None` without a bearer token or
/// when it is not a JWT.
pub(crate) fn bearer_claims(req: &Req) -> Option<serde_json::Value> {
    let token = bearer_token(req)?;
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .filter(serde_json::Value::is_object)
}

/// The raw bearer token of the request, if any.
pub(crate) fn bearer_token(req: &Req) -> Option<&str> {
    let a = req.header("authorization")?;
    let (scheme, token) = a.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}
