//! Page handlers: the run list, the run page (and its live fragment), the confirmation page
//! and the action endpoint.
//!
//! Pages are built from the same model as the CLI views (`crate::views::model`); the only
//! write is [`hcp_runtime::Engine::submit`], after the confirmation page and the checks in
//! [`super::auth::check_action`].

use super::auth::{Refusal, check_action};
use super::{AppState, gantt, resources};
use crate::views::{self, model};
use axum::extract::{ConnectInfo, Extension, Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use futures::StreamExt;
use hcp_runtime::{EngineError, OperatorCommand, RunFilter, RunId, RunState};
use minijinja::context;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;

fn render(st: &AppState, name: &str, ctx: minijinja::Value) -> Response {
    match st.templates.get_template(name).and_then(|t| t.render(ctx)) {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            // The chain names the innermost template and line (includes nest errors).
            let mut msg = format!("template {name} failed: {e}");
            let mut src = std::error::Error::source(&e);
            while let Some(inner) = src {
                msg.push_str(&format!(": {inner}"));
                src = inner.source();
            }
            tracing::error!("{msg}");
            (StatusCode::INTERNAL_SERVER_ERROR, msg).into_response()
        }
    }
}

fn message(st: &AppState, status: StatusCode, title: &str, text: &str) -> Response {
    let mut r = render(
        st,
        "message.html",
        context! { title => title, text => text, status => status.as_u16() },
    );
    *r.status_mut() = status;
    r
}

/// Filters of the run list (empty fields match everything).
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    state: String,
    #[serde(default)]
    workflow: String,
    #[serde(default)]
    cluster: String,
    /// Free-text search over id, workflow, cluster, labels, step and blocked-on.
    #[serde(default)]
    q: String,
}

fn opt(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// One state pill above the run list: how many runs are in that state, and the link that
/// shows only those.
#[derive(Debug, Serialize)]
pub struct StateCount {
    /// `needs-operator`, …
    pub state: &'static str,
    /// Runs in that state among those the other filters select.
    pub count: usize,
    /// Query string of the list filtered to that state.
    pub query: String,
    /// Whether the list is filtered to that state now.
    pub active: bool,
}

/// The rows the list shows, and the per-state counts of the runs matching every filter but
/// the state one.
#[derive(Debug)]
pub struct Listing {
    pub rows: Vec<model::RunRow>,
    /// Per state, in [`RunState::ALL`] order.
    pub counts: Vec<(RunState, usize)>,
    /// Runs matching every filter but the state one.
    pub total: usize,
}

/// Whether `r` matches the free-text search `needle`: every word of it appears in one of
/// the row's fields (id, short id, workflow, cluster, state, stage, step, target, and what
/// it is blocked on, which for a finished run names the failed step and its error code).
pub fn search_matches(r: &model::RunRow, needle: &str) -> bool {
    search_matches_with(r, &[], needle)
}

/// [`search_matches`] over the row and `more` words (see [`model::journal_words`]).
pub fn search_matches_with(r: &model::RunRow, more: &[String], needle: &str) -> bool {
    let fields = [
        r.started_by.as_deref(),
        Some(r.id.as_str()),
        Some(r.short_id.as_str()),
        Some(r.workflow.as_str()),
        r.cluster.as_deref(),
        Some(r.state.as_str()),
        r.stage.as_deref(),
        r.step.as_deref(),
        Some(r.blocked_on.as_str()),
        r.no_worker.as_deref(),
        r.target.as_deref(),
    ];
    let fields: Vec<String> = fields
        .into_iter()
        .flatten()
        .chain(more.iter().map(String::as_str))
        .map(str::to_lowercase)
        .collect();
    needle
        .to_lowercase()
        .split_whitespace()
        .all(|w| fields.iter().any(|f| f.contains(w)))
}

async fn list_rows(st: &AppState, q: &ListQuery) -> Result<Listing, Response> {
    let state = match opt(&q.state) {
        None => None,
        Some(s) => match RunState::parse(&s) {
            Some(x) => Some(x),
            None => {
                return Err(message(
                    st,
                    StatusCode::BAD_REQUEST,
                    "Unknown state",
                    &format!("There is no run state named {s:?}."),
                ));
            }
        },
    };
    // Every state is loaded (the pills count them); the state filter applies after.
    let filter = RunFilter {
        workflow: opt(&q.workflow),
        label: opt(&q.cluster).map(|c| ("cluster".to_string(), c)),
        ..Default::default()
    };
    let rows = views::rows(&st.store, &filter, crate::services::clock().now())
        .await
        .map_err(|e| {
            message(
                st,
                StatusCode::SERVICE_UNAVAILABLE,
                "Journal unavailable",
                &format!("{e:#}"),
            )
        })?;
    let needle = q.q.trim();
    // A row that does not match on its own fields is looked up in its journal (who started
    // it, stuck undos and their codes, resolvers, cancel reasons), a few runs at a time.
    let rows: Vec<model::RunRow> = futures::stream::iter(rows)
        .map(|r| async move {
            if search_matches(&r, needle) {
                return Some(r);
            }
            let id: RunId = r.id.parse().ok()?;
            let rec = st.store.load_run(id).await.ok()??;
            search_matches_with(&r, &model::journal_words(&rec), needle).then_some(r)
        })
        .buffered(8)
        .filter_map(|r| async move { r })
        .collect()
        .await;
    let counts = RunState::ALL
        .iter()
        .map(|s| (*s, rows.iter().filter(|r| r.state == *s).count()))
        .collect();
    let total = rows.len();
    let rows = rows
        .into_iter()
        .filter(|r| state.is_none_or(|s| r.state == s))
        .collect();
    Ok(Listing {
        rows,
        counts,
        total,
    })
}

fn list_query(state: &str, q: &ListQuery) -> String {
    format!(
        "state={}&workflow={}&cluster={}&q={}",
        urlencode(state),
        urlencode(&q.workflow),
        urlencode(&q.cluster),
        urlencode(&q.q)
    )
}

fn list_ctx(st: &AppState, q: &ListQuery, l: Listing) -> minijinja::Value {
    let states: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
    let f_state = q.state.trim();
    // Every state with runs, and the one filtered on even when it has none.
    let counts: Vec<StateCount> = l
        .counts
        .iter()
        .filter(|(s, c)| *c > 0 || s.as_str() == f_state)
        .map(|(s, c)| StateCount {
            state: s.as_str(),
            count: *c,
            query: list_query(s.as_str(), q),
            active: s.as_str() == f_state,
        })
        .collect();
    let active = l.rows.iter().any(|r| !r.terminal);
    context! {
        rows => l.rows,
        counts => counts,
        total => l.total,
        all_query => list_query("", q),
        states => states,
        f_state => f_state,
        f_workflow => q.workflow.trim(),
        f_cluster => q.cluster.trim(),
        f_q => q.q.trim(),
        query => list_query(&q.state, q),
        live => active,
        actions_enabled => st.config.actions_enabled(),
    }
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.trim().bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `GET /`.
pub async fn runs(State(st): State<Arc<AppState>>, Query(q): Query<ListQuery>) -> Response {
    match list_rows(&st, &q).await {
        Ok(l) => render(&st, "runs.html", list_ctx(&st, &q, l)),
        Err(r) => r,
    }
}

/// `GET /clusters`: each cluster's own state (see `hcp-workflow clusters`).
pub async fn clusters(State(st): State<Arc<AppState>>) -> Response {
    let verified = views::latest_verifies(&st.store, None).await;
    match views::folded_runs(&st.store, None).await {
        Ok(runs) => {
            let mut rows = model::clusters(&runs);
            model::attach_verified(&mut rows, &verified);
            render(&st, "clusters.html", context! { rows => rows })
        }
        Err(e) => message(
            &st,
            StatusCode::INTERNAL_SERVER_ERROR,
            "Journal unreadable",
            &format!("{e:#}"),
        ),
    }
}

/// `GET /fragments/runs`: the table alone (htmx polling).
pub async fn runs_fragment(
    State(st): State<Arc<AppState>>,
    Query(q): Query<ListQuery>,
) -> Response {
    match list_rows(&st, &q).await {
        Ok(l) => render(&st, "runs_table.html", list_ctx(&st, &q, l)),
        Err(r) => r,
    }
}

async fn load_detail(
    st: &AppState,
    id: &str,
) -> Result<(model::RunDetail, Vec<model::HistoryRow>), Response> {
    let run: RunId = id.parse().map_err(|_| {
        message(
            st,
            StatusCode::BAD_REQUEST,
            "Not a run id",
            &format!("{id:?} is not a run id (a UUID)."),
        )
    })?;
    let rec = match st.store.load_run(run).await {
        Ok(Some(r)) => r,
        Ok(None) => {
            return Err(message(
                st,
                StatusCode::NOT_FOUND,
                "No such run",
                &format!("Run {run} is not in this journal."),
            ));
        }
        Err(e) => {
            return Err(message(
                st,
                StatusCode::SERVICE_UNAVAILABLE,
                "Journal unavailable",
                &e.to_string(),
            ));
        }
    };
    let d = model::detail(&rec, crate::services::clock().now());
    let events = model::history(&rec, None, false);
    Ok((d, events))
}

/// Journal rows a run page carries at most (newest last): the page's size, and every live
/// refresh's, stays bounded however long the journal grows; `history` shows them all.
pub const MAX_PAGE_EVENTS: usize = 200;

/// What the run body shows changes exactly when this does: the journal (its last write),
/// the lease, and the no-worker verdict (which changes with time alone).
fn version(d: &model::RunDetail) -> String {
    format!(
        "{}|{}|{}|{}|{}",
        d.updated_at,
        d.lease_owner.as_deref().unwrap_or("-"),
        d.lease_epoch,
        d.lease_expired,
        d.no_worker.is_some()
    )
}

pub(super) fn run_ctx(
    st: &AppState,
    d: model::RunDetail,
    mut events: Vec<model::HistoryRow>,
    zoom: gantt::Zoom,
) -> minijinja::Value {
    let g = gantt::layout(&d, zoom);
    let live = !d.terminal;
    let events_total = events.len();
    if events_total > MAX_PAGE_EVENTS {
        events.drain(..events_total - MAX_PAGE_EVENTS);
    }
    let version = version(&d);
    // Serialized now: the rows borrow `d`, which the context takes.
    let resources = minijinja::Value::from_serialize(resources::of(&d));
    context! {
        d => d,
        gantt => g,
        resources => resources,
        events => events,
        events_total => events_total,
        version => version,
        live => live,
        actions_enabled => st.config.actions_enabled(),
    }
}

/// `GET /runs/{id}` (`?zoom=forward|unwind` or `?from=&to=` zoom the timeline).
pub async fn run(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(z): Query<gantt::ZoomQuery>,
) -> Response {
    match load_detail(&st, &id).await {
        Ok((d, ev)) => render(
            &st,
            "run.html",
            run_ctx(&st, d, ev, gantt::Zoom::from_query(&z)),
        ),
        Err(r) => r,
    }
}

/// The version of the run body the page already shows (`?v=`), and the timeline's zoom.
#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    #[serde(default)]
    v: Option<String>,
    #[serde(default)]
    zoom: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    to: Option<String>,
}

/// `GET /runs/{id}/live`: the run body alone (htmx polling while the run is active). When
/// nothing changed since the version the page shows, `204 No Content` (htmx keeps the page
/// as it is): a refresh sends only what changed, and at most [`MAX_PAGE_EVENTS`] events.
pub async fn run_live(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<LiveQuery>,
) -> Response {
    match load_detail(&st, &id).await {
        Ok((d, _)) if q.v.as_deref() == Some(version(&d).as_str()) => {
            StatusCode::NO_CONTENT.into_response()
        }
        Ok((d, ev)) => {
            let z = gantt::ZoomQuery {
                zoom: q.zoom,
                from: q.from,
                to: q.to,
            };
            render(
                &st,
                "run_body.html",
                run_ctx(&st, d, ev, gantt::Zoom::from_query(&z)),
            )
        }
        Err(r) => r,
    }
}

#[derive(Debug, Deserialize)]
pub struct ConfirmQuery {
    action: String,
    #[serde(default)]
    step: String,
}

/// What an action does, in words (the confirmation page says it before anything happens).
fn describe(action: &str, step: Option<&str>) -> Option<String> {
    Some(match (action, step) {
        ("cancel", _) => "Cancel the run: it stops going forward and unwinds — every step that \
            started is undone, in reverse order. This cannot be taken back."
            .into(),
        ("retry", Some(s)) => format!(
            "Retry step {s} now: a waiting or backing-off step runs its next attempt at once; a \
             stuck undo runs again with a fresh attempt budget."
        ),
        ("retry", None) => "Retry every waiting, backing-off or stuck step of the run now.".into(),
        ("resolve", Some(s)) => format!(
            "Mark the undo of {s} as done by hand. Do this only after you removed (or checked) \
             what the step created yourself: the run will continue unwinding as if the undo \
             had succeeded. Your note is journaled."
        ),
        ("resume", _) => "Resume the run: a parked run is tried again, and every stuck undo \
            is retried."
            .into(),
        _ => return None,
    })
}

fn command_for(action: &str, step: Option<String>) -> Option<OperatorCommand> {
    match action {
        "cancel" => Some(OperatorCommand::Cancel),
        "retry" => Some(OperatorCommand::Retry { step }),
        "resolve" => step.map(|step| OperatorCommand::Resolve { step }),
        "resume" => Some(OperatorCommand::Resume),
        _ => None,
    }
}

/// The CLI command the confirmed action is the same as. Operator commands go to the run's
/// inbox in the journal, so the journal is the flag that matters: it names the one this UI
/// serves (a pasted command without it would act on the default journal).
fn cli_for(run: &str, action: &str, step: Option<&str>) -> String {
    let rest = match (action, step) {
        ("resolve", Some(s)) => format!("resolve {run} --step {s} --note '…'"),
        ("retry", Some(s)) => format!("retry {run} --step {s}"),
        ("cancel", _) => format!("cancel {run} --reason '…'"),
        (a, _) => format!("{a} {run}"),
    };
    crate::target::command(None, &rest)
}

/// `GET /runs/{id}/confirm?action=…&step=…`: say what will happen, ask for a note.
pub async fn confirm(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<ConfirmQuery>,
) -> Response {
    let step = opt(&q.step);
    let Some(text) = describe(&q.action, step.as_deref()) else {
        return message(
            &st,
            StatusCode::BAD_REQUEST,
            "Unknown action",
            "Actions are cancel, retry, resolve (with a step) and resume.",
        );
    };
    if command_for(&q.action, step.clone()).is_none() {
        return message(
            &st,
            StatusCode::BAD_REQUEST,
            "Missing step",
            "Resolve needs the step whose undo gave up.",
        );
    }
    let (d, _) = match load_detail(&st, &id).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    render(
        &st,
        "confirm.html",
        context! {
            d => d,
            action => q.action,
            step => step,
            text => text,
            note_required => q.action == "resolve",
            cli => cli_for(&id, &q.action, step.as_deref()),
            csrf => st.csrf.clone(),
            actions_enabled => st.config.actions_enabled(),
            refusal => (!st.config.actions_enabled()).then(|| Refusal::ActionsDisabled.message()),
        },
    )
}

#[derive(Debug, Deserialize)]
pub struct ActionForm {
    action: String,
    #[serde(default)]
    step: String,
    #[serde(default)]
    note: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /runs/{id}/actions`: check, then queue the command in the run's inbox.
pub async fn action(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(f): Form<ActionForm>,
) -> Response {
    if let Err(refusal) = check_action(&st, &headers, &f.csrf) {
        return message(&st, StatusCode::FORBIDDEN, "Refused", &refusal.message());
    }
    let Ok(run) = id.parse::<RunId>() else {
        return message(
            &st,
            StatusCode::BAD_REQUEST,
            "Not a run id",
            "Not a run id.",
        );
    };
    let step = opt(&f.step);
    let Some(cmd) = command_for(&f.action, step) else {
        return message(
            &st,
            StatusCode::BAD_REQUEST,
            "Unknown action",
            "Actions are cancel, retry, resolve (with a step) and resume.",
        );
    };
    let note = f.note.trim().to_string();
    if matches!(cmd, OperatorCommand::Resolve { .. }) && note.is_empty() {
        return message(
            &st,
            StatusCode::BAD_REQUEST,
            "A note is required",
            "Say what you did by hand: the note is journaled with the resolution.",
        );
    }
    let who = match (&st.config.operator, peer) {
        (Some(name), _) => name.clone(),
        (None, Some(Extension(ConnectInfo(addr)))) => format!("ui:{addr}"),
        (None, None) => "ui:unknown".into(),
    };
    let (status, ok, text, command_id) = match st.engine.submit(run, cmd.clone(), &who, &note).await
    {
        Ok(cid) => (
            StatusCode::OK,
            true,
            format!(
                "Queued `{cmd}` as command #{cid} by {who}. The worker holding the run applies \
                 it and journals who, when and why; this page follows the run."
            ),
            Some(cid),
        ),
        Err(EngineError::CommandRefused(why)) => (
            StatusCode::CONFLICT,
            false,
            format!("`{cmd}` was refused: {why}"),
            None,
        ),
        Err(EngineError::NotFound(_)) => (
            StatusCode::NOT_FOUND,
            false,
            format!("Run {run} is not in this journal."),
            None,
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            false,
            format!("The journal could not take the command: {e}"),
            None,
        ),
    };
    let mut r = render(
        &st,
        "outcome.html",
        context! {
            run => run.to_string(),
            ok => ok,
            text => text,
            command => cmd.to_string(),
            command_id => command_id,
            by => who,
            note => note,
        },
    );
    *r.status_mut() = status;
    r
}

/// `GET /assets/htmx.min.js` (vendored, 0BSD).
pub async fn htmx() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_str!("../../assets/htmx.min.js"),
    )
        .into_response()
}

/// `GET /assets/app.js`: the copy buttons (same origin, as the CSP requires).
pub async fn app_js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/app.js"),
    )
        .into_response()
}

/// `GET /assets/app.css`.
pub async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../assets/app.css"),
    )
        .into_response()
}
