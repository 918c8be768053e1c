//! HTTP-level tests of the UI on the router itself (tower `oneshot`, no socket): pages
//! render journal data escaped, tokens and CSRF are enforced, actions reach the run's inbox
//! with who and why, and `/metrics` exposes the `hcp_workflow_` series.
#![allow(clippy::unwrap_used)]

use super::{UiConfig, gantt, pages, router, state};
use crate::views::model::{self, LedgerRow};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use hcp_runtime::testkit::{self, World};
use hcp_runtime::{
    Engine, JournalStore, MemoryStore, OperatorCommand, RunId, RunState, StartOptions,
};
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
        public_host: None,
    }
}

async fn get(app: &axum::Router, uri: &str, auth: Option<&str>) -> (StatusCode, String) {
    let mut req = Request::get(uri).header(header::HOST, "127.0.0.1:8080");
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

    // The resources table: each id with a copy button of the bare id.
    assert!(html.contains("id=\"ledger\""), "resources card");
    assert!(
        html.contains("<code class=\"id\">"),
        "ids in their own element"
    );
    // The timeline: a total in its header, zoom links that keep the live refresh zoomed.
    assert!(html.contains("id=\"timeline-total\""), "total duration");
    assert!(html.contains("id=\"zoom-unwind\""), "a zoom on the unwind");
    let (s, zoomed) = get(&app, &format!("/runs/{run}?zoom=unwind"), None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        zoomed.contains("id=\"timeline-window\""),
        "says what it shows"
    );
    assert!(
        zoomed.contains(&format!("/runs/{run}/live?v=")) && zoomed.contains("&amp;zoom=unwind\""),
        "the live refresh keeps the zoom"
    );
    let (s, _) = get(&app, &format!("/runs/{run}?from=x&to=-3"), None).await;
    assert_eq!(s, StatusCode::OK, "a bad zoom shows the whole run");

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
                .header(header::HOST, "localhost:8080")
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
                .header(header::HOST, "localhost:8080")
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
    assert_eq!(
        UiConfig::check(lo, Some(" \t ".into()), false, None).err(),
        Some(super::UiConfigError::EmptyToken)
    );
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

/// A memory journal with a rolled-back run (`c` failed with `InvalidParameter`) and a
/// succeeded one.
async fn finished_runs() -> (Arc<dyn JournalStore>, RunId, RunId) {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let w = World::new(testkit::scratch_dir("ui-finished"));
    let e = Engine::new(store.clone(), testkit::registry(&w));
    let ok = e
        .start(&testkit::sample_dag_for("ok-"), StartOptions::default())
        .await
        .unwrap()
        .run_id;
    e.drive(ok, std::future::pending()).await.unwrap();
    w.faults().fail.insert("c".into());
    let bad = e
        .start(&testkit::sample_dag_for("bad-"), StartOptions::default())
        .await
        .unwrap()
        .run_id;
    e.drive(bad, std::future::pending()).await.unwrap();
    (store, ok, bad)
}

#[tokio::test]
async fn the_list_counts_runs_per_state_and_keeps_cells_short() {
    let (store, run) = stuck_run().await;
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, html) = get(&app, "/", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("id=\"state-counts\""), "{html}");
    assert!(
        html.contains("href=\"/?state=needs-operator&amp;workflow=&amp;cluster=&amp;q=\""),
        "each count links to the list filtered by its state: {html}"
    );
    assert!(
        html.contains("data-state=\"needs-operator\" title=\"show only needs-operator runs\">needs-operator <b>1</b>"),
        "{html}"
    );
    assert!(html.contains("all <b>1</b>"), "{html}");
    let short = &run.to_string()[28..];
    assert!(
        html.contains(&format!("<td class=\"mono runid\" data-label=\"Run\"><a href=\"/runs/{run}\" title=\"{run}\">{short}</a>")),
        "the short id, the full one on hover: {html}"
    );
    assert!(
        html.contains("<span class=\"clip\" tabindex=\"0\" role=\"button\" aria-expanded=\"false\" title=\"undo of b1 gave up"),
        "the blocked-on cell is clipped, its full text in the title: {html}"
    );
    // Filtered by a state without runs: that state's pill stays, with 0.
    let (_, html) = get(&app, "/?state=succeeded", None).await;
    assert!(html.contains("succeeded <b>0</b>"), "{html}");
    assert!(html.contains("No runs match"));
    assert!(
        html.contains("needs-operator <b>1</b>"),
        "other counts stay"
    );
    let (s, _) = get(&app, "/?state=bogus", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn search_finds_finished_runs_by_failed_step_and_error_code() {
    let (store, ok, bad) = finished_runs().await;
    let app = router(state(store, cfg(None, false)).unwrap());
    let has = |html: &str, run: RunId| html.contains(&format!("data-run=\"{run}\""));
    for (q, want_bad, want_ok) in [
        ("InvalidParameter", true, false),
        ("invalidparameter+c", true, false),
        ("c+failed", true, false),
        ("rolled-back", true, false),
        ("every+step+succeeded", false, true),
        ("succeeded", false, true),
        (&bad.to_string()[28..], true, false),
        (&ok.to_string()[..], false, true),
        ("sample", true, true),
        ("InvalidParameter+zzz", false, false),
    ] {
        let (s, html) = get(&app, &format!("/?q={q}"), None).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(has(&html, bad), want_bad, "q={q} rolled-back run: {html}");
        assert_eq!(has(&html, ok), want_ok, "q={q} succeeded run: {html}");
    }
    // The counts follow the search.
    let (_, html) = get(&app, "/?q=InvalidParameter", None).await;
    assert!(html.contains("rolled-back <b>1</b>"), "{html}");
    assert!(!html.contains("succeeded <b>"), "{html}");
}

fn ledger_row(
    id: &str,
    kind: &str,
    action: &str,
    persistent: bool,
    note: Option<&str>,
) -> LedgerRow {
    LedgerRow {
        id: id.into(),
        kind: kind.into(),
        resource_type: "Microsoft.Network/privateLinkServices".into(),
        action: action.into(),
        node: "pls.service".into(),
        phase: "action".into(),
        at: Some("2025-01-01T00:00:00.000Z".into()),
        persistent,
        note: note.map(str::to_string),
    }
}

/// The stuck run's page with a synthetic ledger, as the run page renders it for `target`.
async fn page_with_ledger(target: &str, tenant: Option<&str>, ledger: Vec<LedgerRow>) -> String {
    let (store, run) = stuck_run().await;
    let st = state(store.clone(), cfg(None, false)).unwrap();
    let rec = store.load_run(run).await.unwrap().unwrap();
    let mut d = model::detail(&rec, hcp_runtime::Clock::now(&hcp_runtime::SystemClock));
    d.target = Some(target.into());
    if let Some(t) = tenant {
        d.labels.insert("tenant".into(), t.into());
    }
    d.ledger = ledger;
    let ctx = pages::run_ctx(&st, d, Vec::new(), gantt::Zoom::All);
    st.templates
        .get_template("run.html")
        .unwrap()
        .render(ctx)
        .unwrap()
}

#[tokio::test]
async fn azure_resources_link_to_the_portal_with_a_copy_button_and_badges() {
    const PLS: &str =
        "/subscriptions/1111/resourceGroups/rg/providers/Microsoft.Network/privateLinkServices/pls";
    const VNET: &str = "/subscriptions/1111/resourceGroups/shared/providers/Microsoft.Network/virtualNetworks/vnet";
    const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
    let html = page_with_ledger(
        "azure/public",
        Some(TENANT),
        vec![
            ledger_row(
                PLS,
                "azure",
                "resolved",
                false,
                Some("resolved by alice@host: deleted it in the portal"),
            ),
            ledger_row(VNET, "azure", "adopted", true, None),
            ledger_row("hypershift/demo", "kubernetes", "created", false, None),
        ],
    )
    .await;
    // The portal link of the run's cloud, with its tenant.
    assert!(
        html.contains(&format!("<a class=\"portal\" href=\"https:&#x2f;&#x2f;portal.azure.com&#x2f;#@{TENANT}&#x2f;resource&#x2f;subscriptions")),
        "{html}"
    );
    let copy = |id: &str| {
        format!(
            "<button type=\"button\" class=\"copy\" data-copy=\"{}\"",
            id.replace('/', "&#x2f;")
        )
    };
    // Each id alone in its <code>, and its copy button copies exactly it.
    for id in [PLS, VNET, "hypershift/demo"] {
        let escaped = id.replace('/', "&#x2f;");
        assert!(
            html.contains(&format!("<code class=\"id\">{escaped}</code>")),
            "{id}: {html}"
        );
        assert!(html.contains(&copy(id)), "{id}: {html}");
    }
    assert_eq!(
        html.matches("class=\"portal\"").count(),
        2,
        "only ARM ids link to the portal"
    );
    // "persistent" is a badge outside the copied id.
    assert_eq!(
        html.matches("<span class=\"badge persistent\"").count(),
        1,
        "{html}"
    );
    assert!(!html.contains("(persistent)"));
    // Resolved by hand: still listed, marked, with who and the note.
    assert!(
        html.contains("<tr class=\"ledger-resolved resolved\" data-kind=\"azure\">"),
        "{html}"
    );
    assert!(
        html.contains("<span class=\"act resolved\">resolved</span>"),
        "{html}"
    );
    assert!(
        html.contains("<div class=\"note resolved-note\">resolved by alice@host: deleted it in the portal <small>"),
        "{html}"
    );

    // Sovereign clouds use their own portal; a custom cloud or a simulator has none.
    let html = page_with_ledger(
        "azure/usGovernment",
        None,
        vec![ledger_row(PLS, "azure", "created", false, None)],
    )
    .await;
    assert!(
        html.contains(
            "href=\"https:&#x2f;&#x2f;portal.azure.us&#x2f;#&#x2f;resource&#x2f;subscriptions"
        ),
        "{html}"
    );
    let html = page_with_ledger(
        "azure/china",
        Some(TENANT),
        vec![ledger_row(PLS, "azure", "created", false, None)],
    )
    .await;
    assert!(
        html.contains(&format!(
            "href=\"https:&#x2f;&#x2f;portal.azure.cn&#x2f;#@{TENANT}&#x2f;resource"
        )),
        "{html}"
    );
    for target in ["azure/custom", "simulator/in-process"] {
        let html = page_with_ledger(
            target,
            Some(TENANT),
            vec![ledger_row(PLS, "azure", "created", false, None)],
        )
        .await;
        assert!(!html.contains("class=\"portal\""), "{target}: {html}");
        assert!(
            html.contains(&copy(PLS)),
            "{target}: the id is still copyable"
        );
    }
}

/// DNS rebinding: a page of `evil.example` whose name now resolves to 127.0.0.1 sends
/// `Host: evil.example`; it gets nothing, and its POSTs are refused even when actions need
/// no token. `localhost`, IP addresses and `--public-url`'s host are served.
#[tokio::test]
async fn a_foreign_host_name_is_refused_before_anything_is_read() {
    let (store, run) = stuck_run().await;
    let app = router(state(store.clone(), cfg(None, true)).unwrap());
    for host in ["evil.example", "evil.example:8080", "127.0.0.1.nip.io:8080"] {
        let r = app
            .clone()
            .oneshot(
                Request::get(format!("/runs/{run}"))
                    .header(header::HOST, host)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST, "{host}");
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        assert!(!String::from_utf8_lossy(&body).contains(&run.to_string()));
        let r = app
            .clone()
            .oneshot(
                Request::post(format!("/runs/{run}/actions"))
                    .header(header::HOST, host)
                    .header(header::ORIGIN, format!("http://{host}"))
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(Body::from("action=cancel&reason=x"))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST, "POST {host}");
    }
    let rec = store.load_run(run).await.unwrap().unwrap();
    assert!(rec.commands.is_empty(), "a rebinding POST queued a command");
    for host in ["127.0.0.1:8080", "localhost:8080", "[::1]:8080", "10.1.2.3"] {
        let r = app
            .clone()
            .oneshot(
                Request::get("/")
                    .header(header::HOST, host)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{host}");
    }
    let mut c = cfg(Some("t0ken"), false);
    c.public_host = super::auth::url_host("https://HCP.example.com:8443/ui");
    assert_eq!(c.public_host.as_deref(), Some("hcp.example.com"));
    assert!(super::auth::host_allowed(&c, "hcp.example.com:8443"));
    assert!(!super::auth::host_allowed(&c, "evil.example"));
}

/// The clusters page shows each cluster's own state (escaped), the run it
/// exists by and its latest run.
#[tokio::test]
async fn the_clusters_page_shows_each_clusters_state_and_latest_run() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let w = World::new(testkit::scratch_dir("ui-clusters"));
    let e = Engine::new(store.clone(), testkit::registry(&w));
    let labels = |c: &str| StartOptions {
        labels: [("cluster".to_string(), c.to_string())].into(),
        ..Default::default()
    };
    // What a run does to its cluster is its workflow's to say: this one is a create.
    let mut create = testkit::sample_dag_for("ok-");
    create.workflow = hcp_workflows::create_cluster::WORKFLOW.to_string();
    let ok = e.start(&create, labels("<i>up</i>")).await.unwrap().run_id;
    e.drive(ok, std::future::pending()).await.unwrap();
    w.faults().fail.insert("c".into());
    let bad = e
        .start(&testkit::sample_dag_for("bad-"), labels("down"))
        .await
        .unwrap()
        .run_id;
    e.drive(bad, std::future::pending()).await.unwrap();
    let app = router(state(store, cfg(None, false)).unwrap());
    let (status, html) = get(&app, "/clusters", None).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(!html.contains("<i>up</i>"), "escaped: {html}");
    assert!(
        html.contains("&lt;i&gt;up&lt;&#x2f;i&gt;") || html.contains("&lt;i&gt;up&lt;/i&gt;"),
        "{html}"
    );
    assert!(html.contains(r#"data-status="exists""#), "{html}");
    assert!(html.contains(r#"data-status="absent""#), "{html}");
    assert!(html.contains(&format!("/runs/{ok}")), "{html}");
    assert!(html.contains(&format!("/runs/{bad}")), "{html}");
    assert!(html.contains("rolled-back"), "{html}");
    let (_, home) = get(&app, "/", None).await;
    assert!(
        home.contains(r#"href="/clusters""#),
        "linked from every page"
    );
}

/// Once a run finished, the search still finds it by who started it, by its
/// stuck undo's step and error code, by who resolved it and by the cancel reason.
#[tokio::test]
async fn search_finds_runs_by_starter_stuck_undo_resolver_and_cancel_reason() {
    let (store, stuck) = stuck_run().await;
    let w = World::new(testkit::scratch_dir("ui-audit-search"));
    let e = Engine::new(store.clone(), testkit::registry(&w));
    // The stuck undo (b1) is resolved by alice, and the run finishes rolled back.
    let b1 = e
        .view(stuck)
        .await
        .unwrap()
        .dag
        .nodes
        .iter()
        .find(|n| n.name.ends_with("b1"))
        .unwrap()
        .name
        .clone();
    e.submit(
        stuck,
        OperatorCommand::Resolve { step: b1.clone() },
        "alice@bastion",
        "deleted in the portal",
    )
    .await
    .unwrap();
    e.drive(stuck, std::future::pending()).await.unwrap();
    assert_eq!(e.view(stuck).await.unwrap().state(), RunState::RolledBack);
    // Another run, started by bob and cancelled by carol for a reason.
    let w2 = World::new(testkit::scratch_dir("ui-audit-search-2"));
    w2.faults().fail.insert("c".into());
    let e2 = Engine::new(store.clone(), testkit::registry(&w2));
    // Its steps share no name with the stuck run's (a sample run's `b1` interrupted by the
    // cancel would be journaled as failed, and match the search for the stuck undo's step).
    let cancelled = e2
        .start(
            &testkit::noop_dag(3),
            StartOptions {
                labels: [("started-by".to_string(), "bob@laptop".to_string())].into(),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .run_id;
    e2.submit(
        cancelled,
        OperatorCommand::Cancel,
        "carol@ops",
        "wrong-subscription",
    )
    .await
    .unwrap();
    e2.drive(cancelled, std::future::pending()).await.unwrap();
    let app = router(state(store, cfg(None, false)).unwrap());
    let has = |html: &str, run: RunId| html.contains(&format!("data-run=\"{run}\""));
    for (q, want_stuck, want_cancelled) in [
        ("alice", true, false),
        ("deleted+in+the+portal", true, false),
        (b1.as_str(), true, false),
        ("bob", false, true),
        ("carol", false, true),
        ("wrong-subscription", false, true),
        ("zzz-nobody", false, false),
    ] {
        let (s, html) = get(&app, &format!("/?q={q}"), None).await;
        assert_eq!(s, StatusCode::OK);
        // The search also finds runs by id: a random run id may contain `b1` (hex).
        let by_id = |run: RunId| run.to_string().contains(q);
        assert_eq!(
            has(&html, stuck),
            want_stuck || by_id(stuck),
            "q={q}: {html}"
        );
        assert_eq!(
            has(&html, cancelled),
            want_cancelled || by_id(cancelled),
            "q={q}: {html}"
        );
    }
}

#[tokio::test]
async fn a_succeeded_run_shows_how_to_reach_the_cluster_escaped() {
    let (store, _, _) = finished_runs().await;
    let st = state(store.clone(), cfg(None, false)).unwrap();
    let runs = store
        .list_runs(&hcp_runtime::RunFilter::default())
        .await
        .unwrap();
    let ok = runs
        .iter()
        .find(|r| r.state == RunState::Succeeded)
        .unwrap();
    let rec = store.load_run(ok.id).await.unwrap().unwrap();
    let mut d = model::detail(&rec, hcp_runtime::Clock::now(&hcp_runtime::SystemClock));
    assert!(d.access.is_none(), "the sample saga reads no cluster");
    d.access = Some(model::AccessView {
        api_server: Some("https://api-demo.hcp.example.com:443".into()),
        kubeconfig_secret: Some("clusters/demo-admin-kubeconfig".into()),
        kubeconfig_command: Some("kubectl get secret -n clusters demo-admin-kubeconfig -o jsonpath='{.data.kubeconfig}' | base64 -d > demo.kubeconfig".into()),
        console: "https://console-openshift-console.apps.demo.hcp.example.com<b>".into(),
        reach: None,
        topology: None,
    });
    let ctx = pages::run_ctx(&st, d, Vec::new(), gantt::Zoom::All);
    let page = st
        .templates
        .get_template("run.html")
        .unwrap()
        .render(ctx)
        .unwrap();
    assert!(page.contains(r#"id="access""#), "{page}");
    assert!(page.contains("How to reach the cluster"), "{page}");
    assert!(page.contains("api-demo.hcp.example.com:443"), "{page}");
    assert!(page.contains("demo-admin-kubeconfig"), "{page}");
    assert!(
        page.contains("base64 -d &gt; demo.kubeconfig"),
        "the command, escaped: {page}"
    );
    assert!(!page.contains("demo.hcp.example.com<b>"), "escaped: {page}");
}

#[tokio::test]
async fn the_newest_verify_of_each_cluster_is_on_the_clusters_page_and_in_metrics() {
    let (store, _run) = stuck_run().await;
    let report = |ok: bool, items: serde_json::Value| hcp_runtime::NewReport {
        kind: crate::services::reports::VERIFY.into(),
        subject: crate::services::reports::cluster_subject("<b>demo</b>"),
        at: hcp_runtime::Timestamp(1_800_000_000_000),
        ok,
        by: "alice@bastion".into(),
        data: serde_json::json!({ "cluster": "<b>demo</b>", "ok": ok, "items": items }).to_string(),
        keep: 10,
    };
    let ok_row = serde_json::json!({"check": "exists", "resource": "/r/1", "verdict": "ok", "expected": "x", "found": "x"});
    store
        .record_report(report(true, serde_json::json!([ok_row])))
        .await
        .unwrap();
    // The newer one drifted: it is the one shown.
    let drifted = serde_json::json!({"check": "pls.visibility", "resource": "/r/pls<i>", "verdict": "drifted",
        "expected": "[a]", "found": "[a, b]", "fix": "hcp-workflow start repair-cluster --config FILE"});
    store
        .record_report(report(false, serde_json::json!([ok_row, drifted])))
        .await
        .unwrap();
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, text) = get(&app, "/metrics", None).await;
    assert_eq!(s, StatusCode::OK);
    for line in [
        "hcp_workflow_drift{cluster=\"<b>demo</b>\",kind=\"pls.visibility\"} 1",
        "hcp_workflow_drift{cluster=\"<b>demo</b>\",kind=\"exists\"} 0",
        "hcp_workflow_verify_ok{cluster=\"<b>demo</b>\"} 0",
        "hcp_workflow_verify_last_timestamp_seconds{cluster=\"<b>demo</b>\"} 1800000000.0",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    let (s, page) = get(&app, "/clusters", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(page.contains("data-verified=\"drift\""), "{page}");
    assert!(page.contains("1 not ok"), "{page}");
    assert!(page.contains("data-check=\"pls.visibility\""), "{page}");
    assert!(page.contains("pls&lt;i&gt;"), "escaped: {page}");
    assert!(!page.contains("/r/pls<i>"), "{page}");
    assert!(page.contains("alice@bastion"), "{page}");
}

#[tokio::test]
async fn metrics_sum_every_workers_arm_budget() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let now = hcp_runtime::Clock::now(&hcp_runtime::SystemClock);
    for (w, used, waited) in [("w1", 10, 1500), ("w2", 5, 500)] {
        store
            .record_report(hcp_runtime::NewReport {
                kind: crate::services::reports::BUDGET.into(),
                subject: format!("worker/{w}"),
                at: now,
                ok: true,
                by: w.into(),
                data: serde_json::json!([{"subscription": "s1", "class": "write",
                    "stats": {"used": used, "waited_ms": waited, "deferred": 1, "throttled": 0, "leased": 20}}])
                .to_string(),
                keep: 1,
            })
            .await
            .unwrap();
    }
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, text) = get(&app, "/metrics", None).await;
    assert_eq!(s, StatusCode::OK);
    for line in [
        "hcp_workflow_arm_budget_tokens_used_total{subscription=\"s1\",class=\"write\"} 15.0",
        "hcp_workflow_arm_budget_waited_seconds_total{subscription=\"s1\",class=\"write\"} 2.0",
        "hcp_workflow_arm_budget_deferred_total{subscription=\"s1\",class=\"write\"} 2.0",
        "hcp_workflow_arm_budget_leased_tokens_total{subscription=\"s1\",class=\"write\"} 40.0",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

/// A cluster deleted after its last verify has no drift series: the verify describes what
/// no longer exists, and its drift alert would fire forever.
#[tokio::test]
async fn metrics_drop_the_verify_of_a_cluster_deleted_since() {
    let store: Arc<dyn JournalStore> = Arc::new(MemoryStore::new());
    let w = World::new(testkit::scratch_dir("ui-deleted-verify"));
    let e = Engine::new(store.clone(), testkit::registry(&w));
    let labels = |c: &str| StartOptions {
        labels: [("cluster".to_string(), c.to_string())].into(),
        ..Default::default()
    };
    let verify = |c: &str| {
        hcp_runtime::NewReport {
        kind: crate::services::reports::VERIFY.into(),
        subject: crate::services::reports::cluster_subject(c),
        at: hcp_runtime::Timestamp(1_000),
        ok: false,
        by: "alice@bastion".into(),
        data: serde_json::json!({ "cluster": c, "ok": false, "items": [
            {"check": "pls.visibility", "resource": "/r/pls", "verdict": "drifted", "expected": "[a]", "found": "[a, b]"}
        ]})
        .to_string(),
        keep: 10,
    }
    };
    for c in ["gone", "kept"] {
        let mut create = testkit::sample_dag_for(&format!("{c}-"));
        create.workflow = hcp_workflows::create_cluster::WORKFLOW.to_string();
        let id = e.start(&create, labels(c)).await.unwrap().run_id;
        e.drive(id, std::future::pending()).await.unwrap();
        store.record_report(verify(c)).await.unwrap();
    }
    let mut delete = testkit::sample_dag_for("gone-del-");
    delete.workflow = hcp_workflows::delete_cluster::WORKFLOW.to_string();
    let id = e.start(&delete, labels("gone")).await.unwrap().run_id;
    e.drive(id, std::future::pending()).await.unwrap();
    let app = router(state(store, cfg(None, false)).unwrap());
    let (s, text) = get(&app, "/metrics", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        text.contains("hcp_workflow_drift{cluster=\"kept\",kind=\"pls.visibility\"} 1"),
        "{text}"
    );
    assert!(!text.contains("cluster=\"gone\""), "{text}");
}
