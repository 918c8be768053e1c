//! `hcp-workflow ui`: the operator web UI, served by the binary itself.
//!
//! Server-rendered HTML (axum + minijinja templates with HTML autoescape) plus a vendored
//! htmx for live refresh, so running it needs no Node toolchain and no build step. It only
//! *reads* the journal and *writes operator commands* to the run's inbox through
//! [`Engine::submit`] — the same path as the CLI — so it works beside any number of workers,
//! and every action is journaled with who (`ui:<peer>` or `--operator`), when and why.
//!
//! # Security
//! - Loopback by default. A non-loopback `--listen` without a token refuses to start.
//! - With a token (`--token` / `HCP_WORKFLOW_UI_TOKEN`) every request must carry it, as
//!   `Authorization: Bearer …` or the cookie `/login?token=…` sets (`HttpOnly`,
//!   `SameSite=Strict`); compared in constant time. Missing: 401; wrong: 403.
//! - Actions need the token even on loopback, unless `--allow-actions-without-token`.
//! - Every POST carries a per-process random CSRF token (constant-time compared) and, when
//!   the browser sends one, an `Origin` matching the `Host`.
//! - Templates autoescape everything; pages render journal data only (never environment,
//!   configuration or secrets — the journal holds none by design). A strict
//!   Content-Security-Policy allows scripts and styles from this origin only.

mod auth;
mod gantt;
pub(crate) mod metrics;
mod pages;
mod resources;
#[cfg(test)]
mod tests;

use anyhow::{Context, Result};
use axum::Router;
use axum::routing::{get, post};
use hcp_runtime::{Engine, JournalStore};
use std::net::SocketAddr;
use std::sync::Arc;

/// The environment variable holding the UI token.
pub const TOKEN_ENV: &str = "HCP_WORKFLOW_UI_TOKEN";

#[derive(clap::Args, Debug)]
pub struct UiArgs {
    /// Address to listen on (port 0 picks a free one). Non-loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Token every request must carry (Authorization: Bearer, or the cookie /login?token= sets).
    #[arg(long, env = TOKEN_ENV, hide_env_values = true)]
    token: Option<String>,
    /// Allow cancel/retry/resolve/resume without a token (loopback, single-user machines).
    #[arg(long)]
    allow_actions_without_token: bool,
    /// Name journaled as the author of actions (default: `ui:<client address>`).
    #[arg(long)]
    operator: Option<String>,
    /// The URL people open when the UI sits behind a proxy or a DNS name
    /// (`https://hcp.example.com/`): its host name is accepted in `Host` besides
    /// `localhost` and IP addresses. Any other host name is refused (DNS rebinding).
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    #[command(flatten)]
    grace: crate::services::GraceArgs,
}

/// Why `ui` refuses to start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UiConfigError {
    /// A non-loopback address without a token would expose the journal and its actions.
    #[error(
        "refusing to serve on {0} without a token: anyone who can reach it could read every run and cancel them; \
         set --token or {TOKEN_ENV}, or listen on 127.0.0.1"
    )]
    NonLoopbackWithoutToken(SocketAddr),
    /// An empty token would match an empty header.
    #[error(
        "--token: the UI token is empty or only whitespace; set a long random value (e.g. `openssl rand -hex 32`)"
    )]
    EmptyToken,
}

/// The UI's settings, checked.
#[derive(Debug, Clone)]
pub struct UiConfig {
    /// Required token, if any.
    pub token: Option<String>,
    /// Actions allowed without a token.
    pub allow_actions_without_token: bool,
    /// Journaled author of actions.
    pub operator: Option<String>,
    /// The host name of `--public-url`, accepted in `Host` besides `localhost` and IP
    /// addresses.
    pub public_host: Option<String>,
}

impl UiConfig {
    /// Check the settings against the listen address.
    ///
    /// # Errors
    /// [`UiConfigError`] when serving would be unsafe.
    pub fn check(
        listen: SocketAddr,
        token: Option<String>,
        allow_actions_without_token: bool,
        operator: Option<String>,
    ) -> Result<Self, UiConfigError> {
        if token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(UiConfigError::EmptyToken);
        }
        if !listen.ip().is_loopback() && token.is_none() {
            return Err(UiConfigError::NonLoopbackWithoutToken(listen));
        }
        Ok(Self {
            token,
            allow_actions_without_token,
            operator,
            public_host: None,
        })
    }

    /// Whether actions are allowed (a token is set, so every request carries it, or the
    /// operator explicitly allowed actions without one).
    pub fn actions_enabled(&self) -> bool {
        self.token.is_some() || self.allow_actions_without_token
    }
}

/// Shared by every request.
#[derive(Debug)]
pub struct AppState {
    /// The journal.
    pub store: Arc<dyn JournalStore>,
    /// For [`Engine::submit`] (no actions registered: this process executes nothing).
    pub engine: Engine,
    /// Settings.
    pub config: UiConfig,
    /// Per-process CSRF token embedded in forms.
    pub csrf: String,
    /// Templates.
    pub templates: minijinja::Environment<'static>,
    /// Per-run contributions to /metrics, recomputed when a run's journal changes.
    pub metrics: metrics::Cache,
}

/// `text` escaped for HTML, each `quoted` part as `<code>quoted</code>` (an unpaired
/// backtick is dropped).
pub(crate) fn prose_html(text: &str) -> String {
    let escape = |s: &str| {
        let mut o = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '&' => o.push_str("&amp;"),
                '<' => o.push_str("&lt;"),
                '>' => o.push_str("&gt;"),
                '"' => o.push_str("&quot;"),
                '\'' => o.push_str("&#x27;"),
                c => o.push(c),
            }
        }
        o
    };
    let parts: Vec<&str> = text.split('`').collect();
    let paired = parts.len() % 2 == 1;
    let mut out = String::with_capacity(text.len() + 16);
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if i % 2 == 1 && (paired || !last) {
            out.push_str("<code>");
            out.push_str(&escape(part));
            out.push_str("</code>");
        } else {
            out.push_str(&escape(part));
        }
    }
    out
}

/// The templates, compiled into the binary.
fn templates(actions_enabled: bool) -> Result<minijinja::Environment<'static>> {
    let mut env = minijinja::Environment::new();
    // Autoescape every template (the default only covers *.html names; be explicit).
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    // A misspelt variable fails loudly when printed instead of rendering as nothing.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
    env.add_global("actions_enabled", actions_enabled);
    env.add_filter("duration", |ms: i64| {
        crate::views::model::human_duration(ms)
    });
    // The views' sentences quote commands and names in backticks (the terminal's
    // convention): on a page they become <code>, never literal backticks.
    env.add_filter("prose", |text: String| {
        minijinja::Value::from_safe_string(prose_html(&text))
    });
    // In an attribute (a tooltip) there is no markup: the backticks are dropped.
    env.add_filter("plain", |text: String| text.replace('`', ""));
    for (name, src) in [
        ("base.html", include_str!("../../templates/base.html")),
        ("runs.html", include_str!("../../templates/runs.html")),
        (
            "clusters.html",
            include_str!("../../templates/clusters.html"),
        ),
        (
            "runs_table.html",
            include_str!("../../templates/runs_table.html"),
        ),
        ("run.html", include_str!("../../templates/run.html")),
        (
            "run_body.html",
            include_str!("../../templates/run_body.html"),
        ),
        ("confirm.html", include_str!("../../templates/confirm.html")),
        ("outcome.html", include_str!("../../templates/outcome.html")),
        ("message.html", include_str!("../../templates/message.html")),
    ] {
        env.add_template(name, src)
            .with_context(|| format!("template {name}"))?;
    }
    Ok(env)
}

/// A random 32-byte token, hex-encoded.
fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Build the application state.
///
/// # Errors
/// A template that does not compile (a build defect).
pub fn state(store: Arc<dyn JournalStore>, config: UiConfig) -> Result<Arc<AppState>> {
    let engine = Engine::new(store.clone(), hcp_runtime::Registry::new());
    Ok(Arc::new(AppState {
        store,
        engine,
        templates: templates(config.actions_enabled())?,
        config,
        csrf: random_token(),
        metrics: metrics::Cache::default(),
    }))
}

/// The router (every route behind the token check and the security headers).
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(pages::runs))
        .route("/fragments/runs", get(pages::runs_fragment))
        .route("/clusters", get(pages::clusters))
        .route("/runs/{id}", get(pages::run))
        .route("/runs/{id}/live", get(pages::run_live))
        .route("/runs/{id}/confirm", get(pages::confirm))
        .route("/runs/{id}/actions", post(pages::action))
        .route("/metrics", get(metrics::handler))
        .route("/assets/htmx.min.js", get(pages::htmx))
        .route("/assets/app.css", get(pages::css))
        .route("/assets/app.js", get(pages::app_js))
        .route("/login", get(auth::login))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_known_host,
        ))
        .layer(axum::middleware::from_fn(auth::security_headers))
        .with_state(state)
}

/// `hcp-workflow ui`.
pub async fn serve(db: &str, a: UiArgs) -> Result<u8> {
    let mut config =
        match UiConfig::check(a.listen, a.token, a.allow_actions_without_token, a.operator) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(2);
            }
        };
    if let Some(u) = &a.public_url {
        match auth::url_host(u) {
            Some(h) => config.public_host = Some(h),
            None => {
                eprintln!(
                    "error: --public-url: `{u}` is not an http(s) URL with a host name; give the address people open, e.g. https://hcp.example.com/"
                );
                return Ok(2);
            }
        }
    }
    // Read-only until someone acts: an unmigrated database is refused, never migrated.
    let store = crate::services::open_existing_store(db).await?;
    // The inspector lives on: its "since" and "ago" keep the journal database's time.
    crate::services::clock::keep_clock_aligned(&store);
    let actions = if config.actions_enabled() {
        "actions enabled"
    } else {
        "read-only: actions need --token or --allow-actions-without-token"
    };
    // Armed before the address is printed: whoever reads it may send SIGTERM at once.
    let stop_signal = crate::services::shutdown_signal();
    let listener = tokio::net::TcpListener::bind(a.listen)
        .await
        .with_context(|| format!("binding {}", a.listen))?;
    let addr = listener.local_addr()?;
    let app = router(state(store, config)?);
    // The first line of stdout is the URL (tests and scripts read it).
    println!("serving the hcp-workflow UI on http://{addr}/ ({actions})");
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    // SIGTERM or Ctrl-C: accept nothing more, answer the requests in
    // progress for at most `--grace`, then exit 0.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = stopped.await;
    });
    let mut server = tokio::spawn(std::future::IntoFuture::into_future(server));
    tokio::select! {
        r = &mut server => {
            r.context("the UI server")?.context("serving the UI")?;
            return Ok(0);
        }
        () = stop_signal => {}
    }
    let grace = a.grace.grace;
    let _ = stop.send(());
    match tokio::time::timeout(grace, &mut server).await {
        Ok(r) => r.context("the UI server")?.context("serving the UI")?,
        Err(_) => {
            server.abort();
            eprintln!(
                "ui: requests still in progress after {}: closed",
                humantime::format_duration(grace)
            );
        }
    }
    eprintln!("ui stopped");
    Ok(0)
}
