//! HTTP-level tests of the UI on the router itself (tower `oneshot`, no socket): pages
//! render journal data escaped, tokens and CSRF are enforced, actions reach the run's inbox
//! with who and why, and `/metrics` exposes the `hcp_workflow_` series.
#![allow(clippy::unwrap_used)]

use super::{UiConfig, router, state};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use hcp_runtime::testkit::{self, World};
use hcp_runtime::{Engine, JournalStore, MemoryStore, RunId, StartOptions};
use http_body_util::BodyExt;
use std::sync::Arc;
use tower::ServiceExt;

/// A memory journal with one self-test run stuck unwinding (`b1`'s undo gave up, and the
/// failing step's message carries a `<script>`).
async fn stuck_run() -> (Arc<dyn JournalStore>, RunId) {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let w = World::new(testkit::scratch_dir("ui"));
    {
        let mut f = w.faults();
        f.fail.insert("c".into());
        f.stuck_undo.insert("b1".into());
    }
    let e = Engine::new(store.clone(), testkit::registry(&w));
    let run = e
        .start(
            &testkit::sample_dag_for("<script>alert(1)-"),
            StartOptions {
                labels: [("cluster".to_string(), "<b>demo</b>".to_string())].into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .run_id;
    let exit = e.drive(run, std::future::pending()).await.unwrap();
    assert_eq!(exit, hcp_runtime::RunExit::NeedsOperator);
    (store, run)
}

fn cfg(token: Option<&str>, allow: bool) -> UiConfig {
    UiConfig {
        token: token.map(str::to_string),
        allow_actions_without_token: allow,
        operator: None,
    }
}

async fn get(app: &axum::Router, uri: &str, auth: Option<&str>) -> (StatusCode, String) {
    let mut req = Request::get(uri);
    if let Some(a) = auth {
        req = req.header(header::AUTHORIZATION, format!("Bearer {a}"));
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn post(
    app: &axum::Router,
    uri: &str,
    form: &str,
    origin: Option<&str>,
) -> (StatusCode, String) {
    let mut req = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::HOST, "127.0.0.1:8080");
    if let Some(o) = origin {
        req = req.header(header::ORIGIN, o);
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::from(form.to_string())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn list_and_run_pages_show_the_stuck_undo_escaped() {
    let (store, run) = stuck_run().await;
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, html) = get(&app, "/", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains(&format!("href=\"/runs/{run}\"")), "{html}");
    assert!(html.contains("needs-operator"));
    assert!(
        html.contains("&lt;b&gt;demo&lt;&#x2f;b&gt;") || html.contains("&lt;b&gt;demo&lt;/b&gt;"),
        "cluster label escaped: {html}"
    );
    assert!(!html.contains("<b>demo</b>"));

    let (s, html) = get(&app, &format!("/runs/{run}"), None).await;
    assert_eq!(s, StatusCode::OK, "{html}");
    assert!(
        !html.contains("<script>alert(1)"),
        "journal strings are escaped"
    );
    assert!(html.contains("&lt;script&gt;alert(1)"), "and still shown");
    assert!(html.contains("id=\"pending\""), "pending-step card");
    assert!(html.contains("undo-failed"));
    assert!(
        html.contains("AnotherOperationInProgress"),
        "the error code"
    );
    assert!(
        html.contains(&format!("hcp-workflow resolve {run} --step b1")),
        "why names the command"
    );
    assert!(
        html.contains("/confirm?action=resolve&amp;step=b1"),
        "resolve leads to a confirmation page"
    );
    assert!(html.contains("<svg class=\"gantt\""), "timeline");
    assert!(
        html.contains("hx-get=\"/runs/"),
        "live refresh while not terminal"
    );
    assert!(html.contains("read-only"), "no token: actions are disabled");

    let (s, _) = get(&app, "/runs/not-a-uuid", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = get(&app, &format!("/runs/{}", uuid::Uuid::new_v4()), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, html) = get(&app, "/?state=needs-operator&q=zzz-no-match", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("No runs match"));
}

#[tokio::test]
async fn a_token_is_required_on_every_request_when_set() {
    let (store, run) = stuck_run().await;
    let app = router(state(store, cfg(Some("s3cret"), false)).unwrap());
    for uri in [
        "/",
        &format!("/runs/{run}"),
        "/metrics",
        "/assets/htmx.min.js",
    ] {
        let (s, _) = get(&app, uri, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{uri} without a token");
        let (s, _) = get(&app, uri, Some("wrong")).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{uri} with a wrong token");
        let (s, _) = get(&app, uri, Some("s3cret")).await;
        assert_eq!(s, StatusCode::OK, "{uri} with the token");
    }
    // /login sets an HttpOnly, SameSite=Strict cookie that then works alone.
    let resp = app
        .clone()
        .oneshot(
            Request::get("/login?token=s3cret")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let cookie = resp.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_string();
    let resp = app
        .clone()
        .oneshot(
            Request::get("/")
                .header(header::COOKIE, pair)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let (s, _) = get(&app, "/login?token=nope", None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn actions_need_a_token_csrf_and_same_origin() {
    let (store, run) = stuck_run().await;
    // No token, actions not allowed: refused even with a valid CSRF token.
    let st = state(store.clone(), cfg(None, false)).unwrap();
    let csrf = st.csrf.clone();
    let app = router(st);
    let form = format!("action=resolve&step=b1&note=gone&csrf={csrf}");
    let (s, html) = post(&app, &format!("/runs/{run}/actions"), &form, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(html.contains("Actions are disabled"), "{html}");

    let st = state(store.clone(), cfg(None, true)).unwrap();
    let csrf = st.csrf.clone();
    let app = router(st);
    // Missing or wrong CSRF token.
    let (s, _) = post(
        &app,
        &format!("/runs/{run}/actions"),
        "action=resolve&step=b1&note=gone",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, _) = post(
        &app,
        &format!("/runs/{run}/actions"),
        "action=resolve&step=b1&note=gone&csrf=abc",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    // Another site's form, even with a (leaked) CSRF token.
    let form = format!("action=resolve&step=b1&note=gone&csrf={csrf}");
    let (s, html) = post(
        &app,
        &format!("/runs/{run}/actions"),
        &form,
        Some("http://evil.example"),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert!(html.contains("another site"), "{html}");
    // Resolve needs a note.
    let (s, _) = post(
        &app,
        &format!("/runs/{run}/actions"),
        &format!("action=resolve&step=b1&note=&csrf={csrf}"),
        Some("http://127.0.0.1:8080"),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        store.pending_commands(run).await.unwrap().is_empty(),
        "nothing was queued"
    );
    // A command that does not apply is refused with the engine's explanation.
    let (s, html) = post(
        &app,
        &format!("/runs/{run}/actions"),
        &format!("action=resolve&step=a&note=x&csrf={csrf}"),
        Some("http://127.0.0.1:8080"),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(html.contains("only a step whose undo gave up"), "{html}");
    // Same origin, right token, a note: queued in the inbox with who and why.
    let (s, html) = post(
        &app,
        &format!("/runs/{run}/actions"),
        &format!("action=resolve&step=b1&note=deleted+%3Cby+hand%3E&csrf={csrf}"),
        Some("http://127.0.0.1:8080"),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{html}");
    assert!(html.contains("Queued"), "{html}");
    assert!(
        html.contains("deleted &lt;by hand&gt;"),
        "the note is echoed escaped"
    );
    let cmds = store.pending_commands(run).await.unwrap();
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].reason, "deleted <by hand>");
    assert_eq!(
        cmds[0].requested_by, "ui:unknown",
        "no socket in oneshot tests"
    );
    let cmd: hcp_runtime::OperatorCommand = serde_json::from_str(&cmds[0].command).unwrap();
    assert_eq!(
        cmd,
        hcp_runtime::OperatorCommand::Resolve { step: "b1".into() }
    );
}

#[tokio::test]
async fn the_confirmation_page_explains_and_carries_the_csrf_token() {
    let (store, run) = stuck_run().await;
    let st = state(store, cfg(Some("t"), false)).unwrap();
    let csrf = st.csrf.clone();
    let app = router(st);
    let (s, html) = get(
        &app,
        &format!("/runs/{run}/confirm?action=resolve&step=b1"),
        Some("t"),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains(&format!("name=\"csrf\" value=\"{csrf}\"")));
    assert!(html.contains("Mark the undo of b1 as done by hand"));
    assert!(html.contains("required"), "a note is required to resolve");
    let (s, _) = get(
        &app,
        &format!("/runs/{run}/confirm?action=explode"),
        Some("t"),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn metrics_expose_runs_retries_undos_and_stuck_runs() {
    let (store, _run) = stuck_run().await;
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, text) = get(&app, "/metrics", None).await;
    assert_eq!(s, StatusCode::OK);
    for line in [
        "hcp_workflow_runs{state=\"needs-operator\"} 1",
        "hcp_workflow_runs{state=\"succeeded\"} 0",
        "hcp_workflow_stuck_runs 1",
        "hcp_workflow_undos_total{outcome=\"gave_up\"} 1",
        "hcp_workflow_step_retries_total{phase=\"undo\"} 2",
        "hcp_workflow_step_duration_seconds_count{phase=\"action\"} 4",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    assert!(
        text.contains("hcp_workflow_step_duration_seconds_bucket"),
        "{text}"
    );
    // A second scrape uses the cache and says the same.
    let (_, again) = get(&app, "/metrics", None).await;
    let sorted = |t: &str| {
        let mut v: Vec<String> = t.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    assert_eq!(sorted(&text), sorted(&again));
}

#[test]
fn non_loopback_needs_a_token() {
    let any: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let lo: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    assert!(matches!(
        UiConfig::check(any, None, true, None),
        Err(super::UiConfigError::NonLoopbackWithoutToken(_))
    ));
    assert!(UiConfig::check(any, Some("x".into()), false, None).is_ok());
    assert!(UiConfig::check(lo, None, false, None).is_ok());
    assert!(UiConfig::check(lo, Some(String::new()), false, None).is_err());
}

#[tokio::test]
async fn the_live_fragment_answers_204_when_nothing_changed() {
    let (store, run) = stuck_run().await;
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, body) = get(&app, &format!("/runs/{run}/live"), None).await;
    assert_eq!(s, StatusCode::OK);
    // needs-operator is not terminal: the body polls itself with its version.
    let marker = format!("/runs/{run}/live?v=");
    let start = body.find(&marker).expect("live body polls") + marker.len();
    let v = &body[start..start + body[start..].find('"').unwrap()];
    let (s, again) = get(&app, &format!("/runs/{run}/live?v={v}"), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{again}");
    assert!(again.is_empty());
    let (s, _) = get(&app, &format!("/runs/{run}/live?v=stale"), None).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn metrics_count_runs_without_a_worker_and_the_oldest_wait() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let now = hcp_runtime::Clock::now(&hcp_runtime::SystemClock);
    // Journaled five minutes ago for the in-process simulator; nobody has leased it.
    store
        .create_run(hcp_runtime::store::NewRun {
            id: uuid::Uuid::now_v7(),
            workflow: "create-cluster".into(),
            workflow_version: 1,
            labels: [("cluster".to_string(), "demo".to_string())].into(),
            idempotency_key: None,
            exclusive_key: Some("cluster/s/demo".into()),
            target: Some("simulator/in-process".into()),
            dag: r#"{"workflow":"create-cluster","version":1,"stages":[],"nodes":[]}"#.into(),
            created_at: hcp_runtime::Timestamp(now.0 - 300_000),
        })
        .await
        .unwrap();
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, text) = get(&app, "/metrics", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        text.contains("hcp_workflow_runs_without_worker 1"),
        "{text}"
    );
    assert!(text.contains("hcp_workflow_oldest_wait_seconds"), "{text}");
    let (_, page) = get(&app, "/", None).await;
    assert!(page.contains("no worker"), "{page}");
    assert!(page.contains("--simulate worker"), "{page}");
}
