//! Who may talk to the UI: the token check, the login cookie, CSRF and Origin checks, and
//! the security headers every response carries.
//!
//! Tokens are compared with `subtle`'s constant-time equality so response timing does not
//! leak how much of a guess was right.

use super::AppState;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// Name of the login cookie.
pub const COOKIE: &str = "hcp_ui_token";

/// Constant-time string equality.
pub fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

fn presented_token(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(t) = v.strip_prefix("Bearer ")
    {
        return Some(t.trim().to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

fn plain(status: StatusCode, msg: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        msg.to_string(),
    )
        .into_response()
}

/// Middleware: when a token is configured, every request (but `/login`) must carry it.
pub async fn require_token(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let Some(expected) = st.config.token.as_deref() else {
        return next.run(req).await;
    };
    if req.uri().path() == "/login" {
        return next.run(req).await;
    }
    match presented_token(req.headers()) {
        None => {
            let mut r = plain(
                StatusCode::UNAUTHORIZED,
                "401: this UI needs its token. Open /login?token=<token> once (it sets a cookie), \
                 or send `Authorization: Bearer <token>`.",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
        Some(t) if same(&t, expected) => next.run(req).await,
        Some(_) => plain(StatusCode::FORBIDDEN, "403: wrong token"),
    }
}

#[derive(serde::Deserialize)]
pub struct LoginQuery {
    token: Option<String>,
}

/// `/login?token=…`: set the cookie and go to the run list.
pub async fn login(State(st): State<Arc<AppState>>, Query(q): Query<LoginQuery>) -> Response {
    let Some(expected) = st.config.token.as_deref() else {
        return (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    };
    match q.token.as_deref() {
        Some(t) if same(t, expected) => {
            let cookie = format!("{COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict");
            match HeaderValue::from_str(&cookie) {
                Ok(c) => (
                    StatusCode::SEE_OTHER,
                    [
                        (header::LOCATION, HeaderValue::from_static("/")),
                        (header::SET_COOKIE, c),
                    ],
                )
                    .into_response(),
                Err(_) => plain(
                    StatusCode::BAD_REQUEST,
                    "400: the token is not a valid cookie value",
                ),
            }
        }
        Some(_) => plain(StatusCode::FORBIDDEN, "403: wrong token"),
        None => plain(StatusCode::UNAUTHORIZED, "401: use /login?token=<token>"),
    }
}

/// Why a POST is refused before it reaches the journal.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Actions need a token here.
    ActionsDisabled,
    /// The form's CSRF token is missing or wrong.
    Csrf,
    /// The browser says the form came from another origin.
    Origin(String),
}

impl Refusal {
    /// What the operator reads.
    pub fn message(&self) -> String {
        match self {
            Self::ActionsDisabled => {
                "Actions are disabled: this UI runs without a token. Restart it with \
                --token (or HCP_WORKFLOW_UI_TOKEN), or with --allow-actions-without-token on a \
                single-user machine; or use the CLI command shown on the run page."
                    .into()
            }
            Self::Csrf => {
                "The form's anti-forgery token is missing or stale (the UI was restarted?): \
                reload the run page and try again."
                    .into()
            }
            Self::Origin(o) => format!(
                "Refused: the request comes from another site ({o}). Actions can only be submitted from this UI's own pages."
            ),
        }
    }
}

/// Check an action POST: actions enabled, CSRF token, and Origin (when present) equal to
/// this server's own origin.
pub fn check_action(st: &AppState, headers: &HeaderMap, csrf: &str) -> Result<(), Refusal> {
    if !st.config.actions_enabled() {
        return Err(Refusal::ActionsDisabled);
    }
    if !same(csrf, &st.csrf) {
        return Err(Refusal::Csrf);
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("?");
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let ok = !host.is_empty()
            && host_allowed(&st.config, host)
            && (origin == format!("http://{host}") || origin == format!("https://{host}"));
        if !ok {
            return Err(Refusal::Origin(origin.to_string()));
        }
    }
    Ok(())
}

/// The host name of a `Host` header or URL authority (`name[:port]`, `[v6]:port`),
/// lower-cased, without the port.
fn host_name(authority: &str) -> String {
    let a = authority.trim();
    let name = if let Some(rest) = a.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        a.rsplit_once(':').map_or(a, |(h, p)| {
            if p.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                a
            }
        })
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The host name of an http(s) URL (`--public-url`), or `None`.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let h = host_name(authority);
    (!h.is_empty()).then_some(h)
}

/// Whether the UI answers to `Host: authority`: `localhost`, an IP address (a page can
/// only reach an address literal it was given, so no rebinding), or `--public-url`'s
/// host. Any other name may be an attacker's domain re-pointed at 127.0.0.1 (DNS
/// rebinding): the browser would then treat our pages as that domain's and let its
/// scripts read them.
pub fn host_allowed(config: &super::UiConfig, authority: &str) -> bool {
    let h = host_name(authority);
    h == "localhost"
        || h.ends_with(".localhost")
        || h.parse::<std::net::IpAddr>().is_ok()
        || config.public_host.as_deref() == Some(h.as_str())
}

/// Middleware: refuse a request whose `Host` this UI does not answer to (421, no content).
pub async fn require_known_host(
    State(st): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or("");
    if host.is_empty() || !host_allowed(&st.config, host) {
        return plain(
            StatusCode::MISDIRECTED_REQUEST,
            "421: this UI answers only to localhost, IP addresses and its --public-url",
        );
    }
    next.run(req).await
}

/// Middleware: security headers on every response.
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: with `no-referrer` browsers send `Origin: null` on
    // form posts, which the Origin check would (rightly) refuse.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
