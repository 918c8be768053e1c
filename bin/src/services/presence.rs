//! A worker's word in the journal that it is up and which targets it serves, renewed every
//! [`EVERY`]: on Postgres an idle worker holds no lease and no executor lock, so without it
//! `start --detach` could not tell that a worker will pick the run up.

use super::clock;
use super::reports::WORKER;
use hcp_runtime::{JournalStore, NewReport, ReportFilter};
use std::sync::Arc;
use std::time::Duration;

/// How often a worker renews its word.
pub const EVERY: Duration = Duration::from_secs(15);
/// A word older than this is not believed (the worker missed two renewals: it is gone).
const FRESH_MS: i64 = 45_000;

/// Say that worker `me` is up (`up`) or has stopped, serving `targets`.
pub async fn record(store: &Arc<dyn JournalStore>, me: &str, targets: &[String], up: bool) {
    let report = NewReport {
        kind: WORKER.into(),
        subject: format!("worker/{me}"),
        at: clock().now(),
        ok: up,
        by: me.to_string(),
        data: serde_json::json!({ "targets": targets, "pid": std::process::id() }).to_string(),
        keep: 1,
    };
    if let Err(e) = store.record_report(report).await {
        tracing::debug!(error = %e, "cannot record this worker's presence");
    }
}

/// [`record`] every [`EVERY`], until aborted.
pub async fn keep_recording(store: Arc<dyn JournalStore>, me: String, targets: Vec<String>) {
    loop {
        record(&store, &me, &targets, true).await;
        tokio::time::sleep(EVERY).await;
    }
}

/// The id of a worker that said lately that it is up and serves `target`.
pub async fn serving(store: &Arc<dyn JournalStore>, target: &str) -> Option<String> {
    let now = clock().now();
    let words = store
        .list_reports(&ReportFilter {
            kind: WORKER.into(),
            subject: None,
            latest_only: true,
            limit: 0,
        })
        .await
        .ok()?;
    words
        .iter()
        .filter(|r| r.ok && now.0.saturating_sub(r.at.0) < FRESH_MS)
        .find(|r| {
            serde_json::from_str::<serde_json::Value>(&r.data)
                .ok()
                .and_then(|d| {
                    d.get("targets")?
                        .as_array()
                        .map(|ts| ts.iter().any(|t| t.as_str() == Some(target)))
                })
                .unwrap_or(false)
        })
        .map(|r| r.by.clone())
}
