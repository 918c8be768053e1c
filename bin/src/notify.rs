//! `worker --notify URL`: a JSON event POSTed when a run needs someone.
//!
//! Events: `needs-operator` (an undo gave up), `stalled` (a wait ran past its budget),
//! `paused` (a step failed for good under `on-failure: pause`, or at a pivot), `failed`
//! (rolled back, or parked), `cancelled`, `succeeded`, and `no-worker` (due for over a
//! minute with no worker of its target holding it).
//!
//! A notifier runs in every worker given `--notify`, as its own task: it reads run
//! summaries, never holds a lease and never waits in a run's path. Each transition is
//! sent once even with several workers: its key (`notify/<run>/<event>/<when>`, `<when>`
//! being the run's last journal write, or the time it became due for `no-worker`) is
//! claimed through the journal ([`JournalStore::claim_schedule`], an atomic
//! compare-and-set across processes) with a two-minute hold, and what was sent is kept as
//! a `notification` report of the run. The claimant sends (three tries per URL, backing
//! off) and records the report; a worker that finds the key claimed by another looks
//! again after the hold, and then finds the report, or, if the claimant died before
//! sending, sends it itself.
//!
//! Ongoing conditions (needs-operator, stalled, paused, parked, no-worker) are sent whenever
//! first seen; outcomes (succeeded, failed by a rollback, cancelled) only when they
//! happened at most [`LOOKBACK`] before the notifier started, so the first worker started
//! with `--notify` on an old journal does not announce its history.
//!
//! Webhook URLs carry their token in the path (Slack: `/services/T…/B…/…`): they are shown
//! and journaled as `scheme://host/…` only.

use crate::output::Refused;
use crate::views::model;
use anyhow::Result;
use hcp_runtime::{
    JournalStore, NewReport, ReportFilter, RunFilter, RunId, RunState, RunSummary, Timestamp,
};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// How long a claimant holds a notification's key before another worker may send it.
pub const HOLD: Duration = Duration::from_secs(120);
/// Outcomes older than this when the notifier starts are not announced.
pub const LOOKBACK: Duration = Duration::from_secs(600);
/// Tries per URL.
pub const TRIES: u32 = 3;

/// One `--notify` URL. Its text is never shown: [`Webhook::shown`] is.
#[derive(Clone)]
pub struct Webhook {
    url: reqwest::Url,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl Webhook {
    /// `scheme://host[:port]/…`: the URL without its path, query or credentials, which may
    /// hold a token.
    pub fn shown(&self) -> String {
        shown(&self.url)
    }
}

fn shown(u: &reqwest::Url) -> String {
    let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!("{}://{}{port}/…", u.scheme(), u.host_str().unwrap_or("?"))
}

/// A `--notify` value as given, before [`parse`] checks it: its `Debug` shows nothing of
/// it (the argument structs derive `Debug`, and the URL holds a token).
#[derive(Clone)]
pub struct Raw(String);

impl Raw {
    /// clap's value parser: takes any text ([`parse`] checks it, naming the flag, without
    /// echoing it as clap's own error would).
    pub fn parse(s: &str) -> Result<Self, std::convert::Infallible> {
        Ok(Self(s.to_string()))
    }
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Raw(…)")
    }
}

/// Parse the `--notify` values (a comma-separated HCP_WORKFLOW_NOTIFY arrives split).
///
/// # Errors
/// An input error naming `--notify` and the fix; the value is shown without its path.
pub fn parse(values: &[Raw]) -> Result<Vec<Webhook>> {
    let mut out = Vec::new();
    for v in values.iter().map(|v| v.0.trim()).filter(|v| !v.is_empty()) {
        let url = reqwest::Url::parse(v).map_err(|e| {
            // The value itself is not shown: a mistyped webhook URL still holds its token.
            Refused::input(format!(
                "--notify: a value is not a URL ({e}); give an http:// or https:// URL such as a Slack incoming webhook (https://hooks.slack.com/services/…)"
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(Refused::input(format!(
                "--notify {}: only http:// and https:// URLs with a host are supported; give one such as https://hooks.slack.com/services/…",
                shown(&url)
            )));
        }
        out.push(Webhook { url });
    }
    Ok(out)
}

/// What happened to a run, as an event name.
fn outcome_event(state: RunState) -> Option<&'static str> {
    match state {
        RunState::Succeeded => Some("succeeded"),
        RunState::RolledBack | RunState::Failed => Some("failed"),
        RunState::Cancelled => Some("cancelled"),
        // Refined to paused / stalled after loading the run.
        RunState::NeedsOperator => Some("needs-operator"),
        RunState::Pending | RunState::Running | RunState::Waiting | RunState::Unwinding => None,
    }
}

/// A transition seen in a summary, before the run is loaded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Seen {
    run: RunId,
    /// `state` (refined later) or `no-worker`.
    what: String,
    /// Milliseconds: the last journal write, or when it became due.
    when: i64,
}

/// The transitions `s` shows at `now`.
fn transitions(s: &RunSummary, now: Timestamp, started: Timestamp) -> Vec<Seen> {
    let mut out = Vec::new();
    if let Some(ev) = outcome_event(s.state) {
        // Outcomes from before this notifier (less the lookback) are history.
        let ongoing = matches!(s.state, RunState::NeedsOperator | RunState::Failed);
        if ongoing || s.updated_at.0 >= started.0 - LOOKBACK.as_millis() as i64 {
            out.push(Seen {
                run: s.id,
                what: ev.to_string(),
                when: s.updated_at.0,
            });
        }
    }
    if model::no_worker(s, now).is_some() {
        let due = s
            .wake_at
            .or(s.commands_pending.then_some(s.updated_at))
            .map_or(s.updated_at.0, |t| t.0);
        out.push(Seen {
            run: s.id,
            what: "no-worker".into(),
            when: due,
        });
    }
    out
}

/// The notifier of one worker.
#[derive(Debug)]
pub struct Notifier {
    store: Arc<dyn JournalStore>,
    me: String,
    hooks: Arc<Vec<Webhook>>,
    client: reqwest::Client,
    started: Timestamp,
    poll: Duration,
    backoff: Duration,
    /// Transitions this process has dealt with (sent, or found sent).
    done: HashSet<Seen>,
}

impl Notifier {
    /// A notifier for `hooks`, journaling as worker `me`.
    ///
    /// # Errors
    /// The HTTP client cannot be built (TLS setup).
    pub fn new(store: Arc<dyn JournalStore>, me: &str, hooks: Vec<Webhook>) -> Result<Self> {
        hcp_activities::tls::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .user_agent(concat!("hcp-workflow/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the notification HTTP client: {e}"))?;
        let ms = |k: &str, d: u64| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(Duration::from_millis(d), Duration::from_millis)
        };
        Ok(Self {
            store,
            me: me.to_string(),
            hooks: Arc::new(hooks),
            client,
            started: crate::services::clock().now(),
            // Tests shorten both.
            poll: ms("HCP_NOTIFY_POLL_MS", 5_000),
            backoff: ms("HCP_NOTIFY_BACKOFF_MS", 2_000),
            done: HashSet::new(),
        })
    }

    /// Look for transitions until the task is aborted.
    pub async fn run(mut self) {
        loop {
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "notifications: cannot read the journal now; trying again");
            }
            tokio::time::sleep(self.poll).await;
        }
    }

    async fn tick(&mut self) -> Result<(), hcp_runtime::StoreError> {
        let now = crate::services::clock().now();
        let mut runs = self
            .store
            .list_runs(&RunFilter {
                states: vec![
                    RunState::Pending,
                    RunState::Running,
                    RunState::Waiting,
                    RunState::Unwinding,
                    RunState::NeedsOperator,
                    RunState::Failed,
                ],
                ..Default::default()
            })
            .await?;
        // Outcomes: runs created in the last 30 days (a run lasts hours; a paused one, days).
        runs.extend(
            self.store
                .list_runs(&RunFilter {
                    states: vec![
                        RunState::Succeeded,
                        RunState::RolledBack,
                        RunState::Cancelled,
                    ],
                    since: Some(Timestamp(now.0 - 30 * 24 * 3600 * 1000)),
                    ..Default::default()
                })
                .await?,
        );
        for s in &runs {
            for seen in transitions(s, now, self.started) {
                if self.done.contains(&seen) {
                    continue;
                }
                if self.consider(s, &seen, now).await? {
                    self.done.insert(seen);
                }
            }
        }
        // Forget what can no longer show up (finished long ago): the set stays small.
        let horizon = now.0 - 2 * LOOKBACK.as_millis() as i64;
        let live: HashSet<RunId> = runs
            .iter()
            .filter(|s| !s.state.is_terminal() || s.updated_at.0 >= horizon)
            .map(|s| s.id)
            .collect();
        self.done.retain(|d| live.contains(&d.run));
        Ok(())
    }

    /// Deal with one transition: `Ok(true)` when it is done (sent by us or another
    /// worker), `Ok(false)` to look again later (another worker holds its key).
    async fn consider(
        &mut self,
        s: &RunSummary,
        seen: &Seen,
        now: Timestamp,
    ) -> Result<bool, hcp_runtime::StoreError> {
        let Some(rec) = self.store.load_run(s.id).await? else {
            return Ok(true);
        };
        // The run may have moved since the summary was read: its own summary decides.
        let d = model::detail(&rec, now);
        let event = match seen.what.as_str() {
            "needs-operator" if d.paused.is_some() => "paused",
            "needs-operator" if d.pending.as_ref().is_some_and(|p| p.state == "stalled") => {
                "stalled"
            }
            other => other,
        }
        .to_string();
        let key = format!("notify/{}/{event}/{}", s.id, seen.when);
        let subject = format!("run/{}", s.id);
        let sent = self
            .store
            .list_reports(&ReportFilter {
                kind: crate::services::reports::NOTIFICATION.into(),
                subject: Some(subject.clone()),
                ..Default::default()
            })
            .await?;
        if sent.iter().any(|r| {
            serde_json::from_str::<serde_json::Value>(&r.data)
                .is_ok_and(|v| v["key"].as_str() == Some(key.as_str()))
        }) {
            return Ok(true);
        }
        let hold = Timestamp(now.0 + HOLD.as_millis() as i64);
        if !self.store.claim_schedule(&key, &self.me, now, hold).await? {
            return Ok(false);
        }
        let body = payload(&rec.summary, &d, &event, &key, now);
        let (store, me, hooks, client, backoff) = (
            self.store.clone(),
            self.me.clone(),
            self.hooks.clone(),
            self.client.clone(),
            self.backoff,
        );
        // Delivery runs on its own: a slow receiver delays neither runs nor other events.
        tokio::spawn(async move {
            let mut delivered = Vec::new();
            for h in hooks.iter() {
                let outcome = deliver(&client, h, &body, &key, backoff).await;
                match &outcome {
                    Ok(status) => {
                        tracing::info!(run_id = %body["run_id"].as_str().unwrap_or_default(), event = %body["event"].as_str().unwrap_or_default(), to = %h.shown(), status, "notification sent");
                    }
                    Err(e) => {
                        tracing::warn!(run_id = %body["run_id"].as_str().unwrap_or_default(), event = %body["event"].as_str().unwrap_or_default(), to = %h.shown(), error = %e, "notification not delivered after {TRIES} tries; giving up");
                    }
                }
                delivered.push(serde_json::json!({
                    "to": h.shown(),
                    "ok": outcome.is_ok(),
                    "detail": match outcome { Ok(s) => format!("HTTP {s}"), Err(e) => e },
                }));
            }
            let ok = delivered.iter().all(|d| d["ok"] == true);
            let report = NewReport {
                kind: crate::services::reports::NOTIFICATION.into(),
                subject,
                at: crate::services::clock().now(),
                ok,
                by: me,
                data: serde_json::json!({"key": key, "event": body, "deliveries": delivered})
                    .to_string(),
                keep: 200,
            };
            if let Err(e) = store.record_report(report).await {
                tracing::warn!(error = %e, "cannot journal a sent notification; another worker may send it again after {}s", HOLD.as_secs());
            }
        });
        Ok(true)
    }
}

/// The event's JSON: the run, cluster, state, reason and the `why` paragraph, with a
/// `text` line that Slack incoming webhooks (and most chat webhooks) show as is.
pub fn payload(
    s: &RunSummary,
    d: &model::RunDetail,
    event: &str,
    key: &str,
    now: Timestamp,
) -> serde_json::Value {
    let cluster = s.labels.get("cluster").cloned();
    let reason = match event {
        "no-worker" => model::no_worker(s, now).unwrap_or_else(|| s.blocked_on.clone()),
        _ => match &d.failure {
            Some(f) => match (&f.step, &f.code) {
                (Some(step), Some(code)) => format!("step {step} failed: {code} {}", f.message),
                (Some(step), None) => format!("step {step} failed: {}", f.message),
                (None, _) => f.message.clone(),
            },
            None => s.blocked_on.clone(),
        },
    };
    let what = match event {
        "succeeded" => "succeeded",
        "failed" if s.state == RunState::Failed => "is parked",
        "failed" => "failed and rolled back",
        "cancelled" => "was cancelled",
        "paused" => "is paused",
        "stalled" => "is stalled",
        "needs-operator" => "needs an operator",
        "no-worker" => "has no worker",
        _ => "changed",
    };
    let text = format!(
        "hcp-workflow: {} of {} (run {}) {what}: {}",
        s.workflow,
        cluster.as_deref().unwrap_or("-"),
        d.short_id,
        d.why.text
    );
    serde_json::json!({
        "apiVersion": crate::output::API_VERSION,
        "kind": "Notification",
        "text": text,
        "event": event,
        "run_id": s.id.to_string(),
        "short_id": d.short_id,
        "workflow": s.workflow,
        "cluster": cluster,
        "state": s.state,
        "reason": reason,
        "why": d.why.text,
        "step": s.current_step,
        "target": s.target,
        "at": model::ts(s.updated_at),
        "key": key,
    })
}

/// POST `body` to `h`, up to [`TRIES`] times (network errors, 429 and 5xx are retried,
/// after `backoff`, then three times that). `Ok(status)` on a 2xx; `Err` says why not
/// (without the URL).
async fn deliver(
    client: &reqwest::Client,
    h: &Webhook,
    body: &serde_json::Value,
    key: &str,
    backoff: Duration,
) -> Result<u16, String> {
    let text = body.to_string();
    let mut last = String::new();
    for attempt in 1..=TRIES {
        let r = client
            .post(h.url.clone())
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(text.clone())
            .send()
            .await;
        match r {
            Ok(resp) if resp.status().is_success() => return Ok(resp.status().as_u16()),
            Ok(resp) => {
                let st = resp.status();
                last = format!("HTTP {}", st.as_u16());
                if !(st.is_server_error() || st.as_u16() == 429) {
                    return Err(format!("{last} (not retried)"));
                }
            }
            // reqwest's errors name the URL: drop it.
            Err(e) => last = e.without_url().to_string(),
        }
        if attempt < TRIES {
            tokio::time::sleep(backoff * 3u32.pow(attempt - 1)).await;
        }
    }
    Err(last)
}

/// Start `hooks`' notifier for a worker; `None` without hooks.
///
/// # Errors
/// See [`Notifier::new`].
pub fn spawn(
    store: Arc<dyn JournalStore>,
    me: &str,
    hooks: Vec<Webhook>,
) -> Result<Option<tokio::task::JoinHandle<()>>> {
    if hooks.is_empty() {
        return Ok(None);
    }
    eprintln!(
        "worker {me} notifies {} of runs that need an operator, stall, pause, fail, succeed or have no worker",
        hooks
            .iter()
            .map(Webhook::shown)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let n = Notifier::new(store, me, hooks)?;
    Ok(Some(tokio::spawn(n.run())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_never_shown_whole() {
        let raw = |v: &str| Raw(v.to_string());
        let hooks = parse(&[
            raw("https://hooks.slack.com/services/T000/B000/XXXXSECRET"),
            raw(" "),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0].shown(), "https://hooks.slack.com/…");
        assert!(!format!("{hooks:?}").contains("SECRET"));
        assert!(!format!("{:?}", raw("https://h/SECRET")).contains("SECRET"));
        let e = parse(&[raw("ftp://x/SECRET")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("--notify ftp://x/…"), "{e}");
        assert!(!e.contains("SECRET"));
        let e = parse(&[raw("not a url SECRET")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("--notify") && !e.contains("SECRET"), "{e}");
    }
}
