//! A worker as a service: its probe and metrics endpoints, and its drain
//! on SIGTERM.
//!
//! `worker --listen-health ADDR` serves, on a port of its own and without a token (it
//! serves no action and no journal page):
//! - `GET /healthz`: 200 while the process answers (liveness: it never looks at the
//!   database, so a database outage does not get every worker restarted);
//! - `GET /readyz`: 200 when the journal answers a read within 2 s **and** this worker's
//!   bulk lease renewal succeeded less than a lease TTL ago; 503 otherwise, and while it
//!   starts or drains. A JSON body says which check failed;
//! - `GET /metrics`: Prometheus text: the journal's figures, the same as `ui`'s `/metrics`
//!   (`hcp_workflow_*`, identical on every worker and UI: aggregate them with `max`, or
//!   scrape one), this worker's own (`hcp_workflow_worker_*`: runs held, lease renewals,
//!   drain, this process's ARM budget counters) and the process's (`process_*`).
//!
//! `--grace DURATION` bounds the drain of `worker` and `ui` on SIGTERM or Ctrl-C: see
//! [`hcp_runtime::Engine::run_worker_draining`].

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hcp_runtime::{Engine, JournalStore};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// How long `/readyz` waits for the journal to answer.
const JOURNAL_CHECK: Duration = Duration::from_secs(2);

/// `worker`'s service options.
#[derive(clap::Args, Debug)]
pub struct WorkerServiceArgs {
    /// Serve `/healthz`, `/readyz` and `/metrics` on ADDR (`127.0.0.1:9464`; `0.0.0.0:9464`
    /// in a pod; port 0 picks a free one). No token: it serves no action. Default: off.
    #[arg(long, value_name = "ADDR", env = "HCP_WORKFLOW_LISTEN_HEALTH")]
    pub listen_health: Option<SocketAddr>,
    #[command(flatten)]
    pub grace: crate::services::GraceArgs,
}

/// What the endpoints read.
struct Served {
    engine: Engine,
    store: Arc<dyn JournalStore>,
    cache: crate::ui::metrics::Cache,
    started: std::time::SystemTime,
}

/// The endpoints' server, stopped when dropped.
#[derive(Debug)]
pub struct Endpoints {
    task: tokio::task::JoinHandle<()>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Drop for Endpoints {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bind `--listen-health` (if given) and serve the endpoints for `engine`'s worker. A
/// bind failure is refused (exit 2) before the worker starts.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(a: &WorkerServiceArgs, engine: &Engine) -> Result<Option<Endpoints>> {
    let Some(listen) = a.listen_health else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        crate::output::Refused::input(format!(
            "--listen-health {listen}: cannot listen there ({e}); pick a free port (0 picks one) or another address"
        ))
    })?;
    let addr = listener
        .local_addr()
        .context("the health endpoints' address")?;
    let app = router(Arc::new(Served {
        engine: engine.clone(),
        store: engine.store().clone(),
        cache: crate::ui::metrics::Cache::default(),
        started: std::time::SystemTime::now(),
    }));
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the health endpoints stopped");
        }
    });
    Ok(Some(Endpoints { task, addr }))
}

fn router(st: Arc<Served>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(st)
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// One readiness check's outcome.
#[derive(serde::Serialize)]
struct Check {
    ok: bool,
    detail: String,
}

async fn readyz(State(st): State<Arc<Served>>) -> Response {
    let h = st.engine.health();
    let now = Instant::now();
    let journal = match tokio::time::timeout(
        JOURNAL_CHECK,
        st.store.list_runs(&hcp_runtime::RunFilter {
            limit: 1,
            ..Default::default()
        }),
    )
    .await
    {
        Ok(Ok(_)) => Check {
            ok: true,
            detail: "the journal answers".into(),
        },
        Ok(Err(e)) => Check {
            ok: false,
            detail: format!("the journal does not answer: {e}"),
        },
        Err(_) => Check {
            ok: false,
            detail: format!(
                "the journal did not answer within {}s",
                JOURNAL_CHECK.as_secs()
            ),
        },
    };
    let leases = match (h.working, h.last_renewal) {
        (false, _) => Check {
            ok: false,
            detail: if h.draining {
                "stopped".into()
            } else {
                "starting: the worker has not claimed the journal yet".into()
            },
        },
        (true, None) => Check {
            ok: false,
            detail: "starting: no lease renewal yet".into(),
        },
        (true, Some(t)) if h.leases_renew(now) => Check {
            ok: true,
            detail: format!(
                "leases renewed {:.1}s ago",
                now.saturating_duration_since(t).as_secs_f64()
            ),
        },
        (true, Some(t)) => Check {
            ok: false,
            detail: format!(
                "no lease renewal succeeded for {:.0}s (the lease TTL is {}s){}",
                now.saturating_duration_since(t).as_secs_f64(),
                h.lease_ttl.as_secs(),
                h.last_renewal_error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
        },
    };
    let ready = journal.ok && leases.ok && !h.draining;
    let body = serde_json::json!({
        "ready": ready,
        "worker": st.engine.worker_id(),
        "draining": h.draining,
        "held_runs": h.held_runs,
        "checks": {"journal": journal, "leases": leases},
    });
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(body)).into_response()
}

async fn metrics(State(st): State<Arc<Served>>) -> Response {
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

async fn render(st: &Served) -> Result<String> {
    let mut root = Registry::default();
    crate::ui::metrics::register(
        root.sub_registry_with_prefix("hcp_workflow"),
        &st.store,
        &st.cache,
    )
    .await?;
    worker_figures(
        root.sub_registry_with_prefix("hcp_workflow_worker"),
        &st.engine,
    );
    process_figures(&mut root, st.started);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &root)?;
    Ok(out)
}

fn gauge(reg: &mut Registry, name: &str, help: &str, v: i64) {
    let g = Gauge::<i64>::default();
    g.set(v);
    reg.register(name, help, g);
}

fn counter(reg: &mut Registry, name: &str, help: &str, v: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(v);
    reg.register(name, help, c);
}

fn fgauge(reg: &mut Registry, name: &str, help: &str, v: f64) {
    let g = Gauge::<f64, AtomicU64>::default();
    g.set(v);
    reg.register(name, help, g);
}

/// This worker's own figures (`hcp_workflow_worker_*`).
fn worker_figures(reg: &mut Registry, e: &Engine) {
    let h = e.health();
    let info = Family::<Vec<(String, String)>, Gauge>::default();
    info.get_or_create(&vec![
        ("worker_id".into(), e.worker_id().to_string()),
        ("version".into(), env!("CARGO_PKG_VERSION").to_string()),
        ("backend".into(), e.store().backend().to_string()),
    ])
    .set(1);
    reg.register(
        "info",
        "This worker: its id, version and journal backend",
        info,
    );
    gauge(
        reg,
        "held_runs",
        "Runs this worker drives now",
        i64::try_from(h.held_runs).unwrap_or(i64::MAX),
    );
    gauge(
        reg,
        "draining",
        "1 while the worker drains on SIGTERM (no new run or step)",
        i64::from(h.draining),
    );
    gauge(
        reg,
        "leases_renew",
        "1 when this worker's last lease renewal succeeded less than a lease TTL ago",
        i64::from(h.working && h.leases_renew(Instant::now())),
    );
    if let Some(t) = h.last_renewal {
        fgauge(
            reg,
            "last_lease_renewal_age_seconds",
            "Time since this worker's last successful lease renewal",
            Instant::now().saturating_duration_since(t).as_secs_f64(),
        );
    }
    fgauge(
        reg,
        "lease_ttl_seconds",
        "The lease duration (renewed every third of it)",
        h.lease_ttl.as_secs_f64(),
    );
    counter(
        reg,
        "lease_renewals",
        "Successful bulk lease renewals",
        h.renewals,
    );
    counter(
        reg,
        "lease_renewal_failures",
        "Failed bulk lease renewals",
        h.renewal_failures,
    );
    counter(reg, "runs_leased", "Runs this worker leased", h.runs_leased);
    counter(
        reg,
        "leases_lost",
        "Runs whose lease another worker took over while this one drove them",
        h.leases_lost,
    );
    counter(
        reg,
        "acquire_failures",
        "Failed attempts to lease due runs",
        h.acquire_failures,
    );
    counter(
        reg,
        "runs_cut_short",
        "Runs released at shutdown with a step still in flight when the grace period ended",
        h.cut_short,
    );
    // This process's ARM budget, live (the journal's `arm_budget_*` sum every worker's
    // reports, 15 s behind).
    let stats = hcp_activities::azure::budget::global().stats();
    let fams: [(&str, &str); 5] = [
        (
            "arm_budget_tokens_used",
            "ARM requests this worker sent through its budget",
        ),
        (
            "arm_budget_waited_seconds",
            "Time this worker's ARM requests waited for the budget",
        ),
        (
            "arm_budget_deferred",
            "ARM requests of this worker sent back to wait for their turn",
        ),
        (
            "arm_budget_throttled",
            "429 answers ARM gave this worker anyway",
        ),
        (
            "arm_budget_leased_tokens",
            "Tokens this worker leased from the journal's shared bucket (Postgres)",
        ),
    ];
    for (i, (name, help)) in fams.iter().enumerate() {
        let fam = Family::<Vec<(String, String)>, Counter<f64, AtomicU64>>::default();
        for (k, s) in &stats {
            let v = match i {
                0 => s.used as f64,
                1 => s.waited_ms as f64 / 1000.0,
                2 => s.deferred as f64,
                3 => s.throttled as f64,
                _ => s.leased as f64,
            };
            fam.get_or_create(&vec![
                ("subscription".into(), k.subscription.clone()),
                ("class".into(), k.class.as_str().to_string()),
            ])
            .inc_by(v);
        }
        reg.register(*name, *help, fam);
    }
}

/// The process's figures (`process_*`, as Prometheus client libraries name them), from
/// `/proc` where there is one.
fn process_figures(reg: &mut Registry, started: std::time::SystemTime) {
    if let Ok(d) = started.duration_since(std::time::UNIX_EPOCH) {
        fgauge(
            reg,
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch",
            d.as_secs_f64(),
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<i64>().ok());
    if let Some(kb) = rss_kb {
        gauge(
            reg,
            "process_resident_memory_bytes",
            "Resident memory size",
            kb.saturating_mul(1024),
        );
    }
    // utime and stime (fields 14 and 15) in clock ticks: USER_HZ, 100 on Linux.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let ticks: Option<u64> = stat.rsplit_once(')').and_then(|(_, rest)| {
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    });
    if let Some(t) = ticks {
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(t as f64 / 100.0);
        reg.register("process_cpu_seconds", "User and system CPU time spent", c);
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        gauge(
            reg,
            "process_open_fds",
            "Open file descriptors",
            i64::try_from(fds.count()).unwrap_or(i64::MAX),
        );
    }
}

/// Say on stderr what a worker does on SIGTERM (once the signal came).
pub fn announce_drain(e: &Engine, grace: Duration) {
    let held = e.health().held_runs;
    if grace.is_zero() || held == 0 {
        eprintln!(
            "worker {} stopping: releasing its {held} run(s) now",
            e.worker_id()
        );
    } else {
        eprintln!(
            "worker {} draining for at most {}: it leases nothing more and starts no new step; each of its {held} run(s) is released once its steps in flight end (what is still in flight then runs again elsewhere)",
            e.worker_id(),
            humantime::format_duration(grace)
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::services::parse_grace;
    use std::time::Duration;

    #[test]
    fn grace_is_a_bounded_duration() {
        assert_eq!(parse_grace("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_grace("0s"), Ok(Duration::ZERO));
        assert!(parse_grace("2h").is_err_and(|e| e.contains("at most 1h")));
        assert!(parse_grace("soon").is_err_and(|e| e.contains("like 20s")));
    }
}
