//! `/metrics`: Prometheus text exposition computed from the journal at scrape time.
//!
//! The UI executes nothing, so it cannot count events as they happen; instead every figure
//! is derived from the journal, which makes the numbers identical whichever UI process is
//! scraped and correct across restarts. A run's contribution (step latencies, retries,
//! undos) is cached by its `updated_at` and recomputed only when its journal changed, so a
//! scrape costs one `list_runs` plus one load per changed run.
//!
//! Series (all prefixed `hcp_workflow_`): `runs{state}` (gauge), `stuck_runs` (gauge: runs
//! waiting for an operator — a stuck undo, a wait past its budget, or a parked run),
//! `runs_without_worker` (gauge: due for over a minute with no live lease holder),
//! `oldest_wait_seconds` (gauge: the oldest wait in progress), `step_duration_seconds{phase}`
//! (histogram of finished attempts), `step_retries_total{phase}`, `undos_total{outcome}`,
//! and from each cluster's newest recorded verify: `drift{cluster,kind}` (checks of that
//! kind not ok; 0 for a kind that was ok), `verify_ok{cluster}`,
//! `verify_last_timestamp_seconds{cluster}`; and summed over every worker's newest budget
//! report: `arm_budget_tokens_used_total`, `arm_budget_waited_seconds_total`,
//! `arm_budget_deferred_total`, `arm_budget_throttled_total`,
//! `arm_budget_leased_tokens_total`, each `{subscription,class}`.

use super::AppState;
use crate::views::model;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use hcp_runtime::{Event, RunId, RunState, Timestamp};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Latency buckets (seconds): from a fast API call to an hour-long control-plane rollout.
const BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0,
];

/// One run's contribution.
#[derive(Debug, Clone, Default)]
struct RunFigures {
    /// (phase, seconds) of finished attempts.
    latencies: Vec<(&'static str, f64)>,
    retries_action: u64,
    retries_undo: u64,
    /// outcome → count.
    undos: HashMap<&'static str, u64>,
    /// When the oldest wait still in progress began (action or undo), if any.
    oldest_wait_since: Option<Timestamp>,
}

/// Per-run figures keyed by the run's last journal write.
#[derive(Debug, Default)]
pub struct Cache {
    runs: Mutex<HashMap<RunId, (Timestamp, Arc<RunFigures>)>>,
}

fn figures(rec: &hcp_runtime::store::RunRecord) -> RunFigures {
    let mut f = RunFigures::default();
    let Ok(folded) = model::fold(rec) else {
        return f;
    };
    if !rec.summary.state.is_terminal() {
        f.oldest_wait_since = folded
            .view
            .nodes
            .iter()
            .filter_map(|n| match n.status {
                hcp_runtime::NodeStatus::Waiting { .. }
                | hcp_runtime::NodeStatus::Stalled { .. } => n.wait_since,
                hcp_runtime::NodeStatus::UndoWaiting { .. } => n.undo_wait_since,
                _ => None,
            })
            .min();
    }
    for s in model::spans(&folded.events, rec.summary.updated_at) {
        if s.kind == "attempt" && s.outcome != "running" && s.outcome != "skipped" {
            let phase = if s.phase == "undo" { "undo" } else { "action" };
            f.latencies
                .push((phase, (s.end_ms - s.start_ms).max(0) as f64 / 1000.0));
        }
    }
    for (_, ev) in &folded.events {
        match ev {
            Event::NodeRetryScheduled { .. } => f.retries_action += 1,
            Event::UndoRetryScheduled { .. } => f.retries_undo += 1,
            Event::NodeUndone { skipped: false, .. } => *f.undos.entry("undone").or_default() += 1,
            Event::NodeUndone { skipped: true, .. } => *f.undos.entry("skipped").or_default() += 1,
            Event::UndoFailed { .. } => *f.undos.entry("gave_up").or_default() += 1,
            Event::UndoResolved { .. } => *f.undos.entry("resolved").or_default() += 1,
            _ => {}
        }
    }
    f
}

/// Render the exposition text.
///
/// # Errors
/// Store errors.
pub async fn render(st: &AppState) -> anyhow::Result<String> {
    let mut reg = Registry::with_prefix("hcp_workflow");
    register(&mut reg, &st.store, &st.metrics).await?;
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg)?;
    Ok(out)
}

/// Register every figure computed from the journal in `reg` (the UI's `/metrics`, and the
/// worker's beside its own figures: `crate::health`). `cache` keeps each run's
/// contribution between scrapes.
///
/// # Errors
/// Store errors.
pub async fn register(
    reg: &mut Registry,
    store: &Arc<dyn hcp_runtime::JournalStore>,
    cache: &Cache,
) -> anyhow::Result<()> {
    let st = Journal {
        store,
        metrics: cache,
    };
    let runs = st
        .store
        .list_runs(&hcp_runtime::RunFilter::default())
        .await?;
    let mut by_state: HashMap<RunState, i64> = HashMap::new();
    let mut stuck = 0i64;
    let mut without_worker = 0i64;
    let now = crate::services::clock().now();
    let mut contributions = Vec::with_capacity(runs.len());
    for s in &runs {
        *by_state.entry(s.state).or_default() += 1;
        // Waiting for an operator: a stuck undo, a wait past its budget (both
        // needs-operator), or a parked run.
        if matches!(s.state, RunState::NeedsOperator | RunState::Failed) {
            stuck += 1;
        }
        if model::no_worker(s, now).is_some() {
            without_worker += 1;
        }
        let cached = st.metrics.runs.lock().ok().and_then(|m| {
            m.get(&s.id)
                .filter(|(t, _)| *t == s.updated_at)
                .map(|(_, f)| f.clone())
        });
        let fig = match cached {
            Some(f) => f,
            None => {
                let Some(rec) = st.store.load_run(s.id).await? else {
                    continue;
                };
                let f = Arc::new(figures(&rec));
                if let Ok(mut m) = st.metrics.runs.lock() {
                    m.insert(s.id, (s.updated_at, f.clone()));
                }
                f
            }
        };
        contributions.push(fig);
    }
    if let Ok(mut m) = st.metrics.runs.lock() {
        let live: std::collections::HashSet<RunId> = runs.iter().map(|s| s.id).collect();
        m.retain(|id, _| live.contains(id));
    }

    let runs_gauge = Family::<Vec<(String, String)>, Gauge>::default();
    for state in RunState::ALL {
        runs_gauge
            .get_or_create(&vec![("state".into(), state.as_str().into())])
            .set(by_state.get(&state).copied().unwrap_or(0));
    }
    reg.register("runs", "Runs by state", runs_gauge);
    let stuck_gauge = Gauge::<i64>::default();
    stuck_gauge.set(stuck);
    reg.register(
        "stuck_runs",
        "Runs waiting for an operator (a stuck undo, a wait past its budget, or parked)",
        stuck_gauge,
    );
    let nw_gauge = Gauge::<i64>::default();
    nw_gauge.set(without_worker);
    reg.register(
        "runs_without_worker",
        "Unfinished runs due for over a minute that no live worker holds",
        nw_gauge,
    );
    let oldest = contributions
        .iter()
        .filter_map(|f| f.oldest_wait_since)
        .min()
        .map_or(0.0, |t| (now.0 - t.0).max(0) as f64 / 1000.0);
    let oldest_gauge = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    oldest_gauge.set(oldest);
    reg.register(
        "oldest_wait_seconds",
        "Age of the oldest wait (poll) still in progress among unfinished runs",
        oldest_gauge,
    );
    let latency = Family::<Vec<(String, String)>, Histogram>::new_with_constructor(
        (|| Histogram::new(BUCKETS)) as fn() -> Histogram,
    );
    let retries = Family::<Vec<(String, String)>, Counter>::default();
    let undos = Family::<Vec<(String, String)>, Counter>::default();
    for phase in ["action", "undo"] {
        let _ = latency.get_or_create(&vec![("phase".into(), phase.into())]);
    }
    for f in &contributions {
        for (phase, secs) in &f.latencies {
            latency
                .get_or_create(&vec![("phase".into(), (*phase).into())])
                .observe(*secs);
        }
        retries
            .get_or_create(&vec![("phase".into(), "action".into())])
            .inc_by(f.retries_action);
        retries
            .get_or_create(&vec![("phase".into(), "undo".into())])
            .inc_by(f.retries_undo);
        for (outcome, n) in &f.undos {
            undos
                .get_or_create(&vec![("outcome".into(), (*outcome).into())])
                .inc_by(*n);
        }
    }
    for outcome in ["undone", "skipped", "gave_up", "resolved"] {
        let _ = undos.get_or_create(&vec![("outcome".into(), outcome.into())]);
    }
    for phase in ["action", "undo"] {
        let _ = retries.get_or_create(&vec![("phase".into(), phase.into())]);
    }
    reg.register(
        "step_duration_seconds",
        "Duration of finished step attempts (action or undo), from the journal",
        latency,
    );
    reg.register(
        "step_retries",
        "Failed attempts that were scheduled for a retry",
        retries,
    );
    reg.register(
        "undos",
        "Undo outcomes (undone, skipped, gave_up, resolved)",
        undos,
    );
    // Each cluster's newest recorded verify; none for a cluster deleted since (it would
    // report drift of what no longer exists, and fire drift alerts forever).
    let mut by_cluster: HashMap<&str, Vec<&hcp_runtime::RunSummary>> = HashMap::new();
    for r in &runs {
        if let Some(c) = r.labels.get("cluster") {
            by_cluster.entry(c.as_str()).or_default().push(r);
        }
    }
    let verified: Vec<_> = crate::views::latest_verifies(st.store, None)
        .await
        .into_iter()
        .filter(|(cluster, v)| {
            let deleted = by_cluster.get(cluster.as_str()).and_then(|rs| {
                let state =
                    hcp_workflows::cluster_state::of_runs(cluster, rs.iter().copied(), false);
                crate::views::model::deleted_at_ms(&state)
            });
            crate::views::model::describes(v, deleted)
        })
        .collect();
    let drift = Family::<Vec<(String, String)>, Gauge>::default();
    let verify_ok = Family::<Vec<(String, String)>, Gauge>::default();
    let verify_at =
        Family::<Vec<(String, String)>, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    for (cluster, v) in &verified {
        for (kind, n) in &v.by_check {
            drift
                .get_or_create(&vec![
                    ("cluster".into(), cluster.clone()),
                    ("kind".into(), kind.clone()),
                ])
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        let c = vec![("cluster".into(), cluster.clone())];
        verify_ok.get_or_create(&c).set(i64::from(v.ok));
        verify_at.get_or_create(&c).set(v.at_ms as f64 / 1000.0);
    }
    reg.register(
        "drift",
        "Checks of the newest verify of each cluster that were not ok (drifted, missing, foreign or unknown), by check kind",
        drift,
    );
    reg.register(
        "verify_ok",
        "1 when the newest verify of the cluster found everything as the journal says",
        verify_ok,
    );
    reg.register(
        "verify_last_timestamp_seconds",
        "When the cluster was last verified (Unix time)",
        verify_at,
    );
    // Every worker's ARM budget counters (its newest report of the last ten
    // minutes), summed per subscription and class.
    let budget = st
        .store
        .list_reports(&hcp_runtime::ReportFilter {
            kind: crate::services::reports::BUDGET.into(),
            subject: None,
            latest_only: true,
            limit: 0,
        })
        .await
        .unwrap_or_default();
    let families: [(&str, &str, &str, f64); 5] = [
        (
            "arm_budget_tokens_used",
            "used",
            "ARM requests sent through hcp-workflow's budget",
            1.0,
        ),
        (
            "arm_budget_waited_seconds",
            "waited_ms",
            "Time ARM requests waited for the budget",
            1000.0,
        ),
        (
            "arm_budget_deferred",
            "deferred",
            "ARM requests sent back to wait for their turn (a journaled, soft retry)",
            1.0,
        ),
        (
            "arm_budget_throttled",
            "throttled",
            "429 answers ARM gave anyway",
            1.0,
        ),
        (
            "arm_budget_leased_tokens",
            "leased",
            "Tokens leased from the journal's shared bucket (Postgres)",
            1.0,
        ),
    ];
    let mut sums: HashMap<(String, String), [f64; 5]> = HashMap::new();
    for r in budget.iter().filter(|r| now.0 - r.at.0 <= 600_000) {
        let Ok(serde_json::Value::Array(rows)) = serde_json::from_str::<serde_json::Value>(&r.data)
        else {
            continue;
        };
        for row in rows {
            let key = (
                row["subscription"].as_str().unwrap_or("").to_string(),
                row["class"].as_str().unwrap_or("").to_string(),
            );
            let e = sums.entry(key).or_insert([0.0; 5]);
            for (i, (_, field, _, div)) in families.iter().enumerate() {
                e[i] += row["stats"][*field].as_f64().unwrap_or(0.0) / div;
            }
        }
    }
    for (i, (name, _, help, _)) in families.iter().enumerate() {
        let fam =
            Family::<Vec<(String, String)>, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        for ((sub, class), v) in &sums {
            fam.get_or_create(&vec![
                ("subscription".into(), sub.clone()),
                ("class".into(), class.clone()),
            ])
            .inc_by(v[i]);
        }
        reg.register(*name, *help, fam);
    }
    Ok(())
}

/// The journal and the per-run cache, as [`register`] reads them.
struct Journal<'a> {
    store: &'a Arc<dyn hcp_runtime::JournalStore>,
    metrics: &'a Cache,
}

/// `GET /metrics`.
pub async fn handler(State(st): State<Arc<AppState>>) -> Response {
    match render(&st).await {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cannot read the journal: {e:#}"),
        )
            .into_response(),
    }
}
