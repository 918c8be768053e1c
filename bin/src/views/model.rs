//! The inspector's data model: what `list`, `show`, `history`, `why`, `inventory` and the
//! web UI display, computed once from the journal and rendered three ways (text, JSON, HTML).
//!
//! Everything here is a pure function of stored records and a `now` instant, so the same
//! journal always renders the same way (golden tests pin that) and the views never write.
//! The journal is folded here with the engine's own state machine ([`RunView::apply`]); a
//! run whose journal does not fold is still shown (summary, raw events) with the reason.

use hcp_runtime::ledger::{self, LedgerAction, LedgerEntry};
use hcp_runtime::store::{CommandRecord, RunRecord, StoredEvent};
use hcp_runtime::{
    Event, NodeStatus, OperatorCommand, RunState, RunSummary, RunView, SagaDag, StepError,
    Timestamp, UnwindCause,
};
use hcp_workflows::cluster_state::Status;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A run's journal, decoded and folded.
#[derive(Debug, Clone)]
pub struct Folded {
    /// The folded view.
    pub view: RunView,
    /// Every event, decoded, with its stored metadata.
    pub events: Vec<(StoredEvent, Event)>,
}

/// Decode and fold a run's journal (the same rules the engine applies on recovery).
///
/// # Errors
/// A message naming the first event that does not decode or does not fit.
pub fn fold(rec: &RunRecord) -> Result<Folded, String> {
    let dag: SagaDag =
        serde_json::from_str(&rec.dag).map_err(|e| format!("its saga DAG does not decode: {e}"))?;
    let mut view = RunView::new(dag);
    let mut events = Vec::with_capacity(rec.events.len());
    for e in &rec.events {
        let ev: Event = serde_json::from_str(&e.data).map_err(|err| {
            format!(
                "journal event #{} ({}) does not decode: {err}",
                e.seq, e.kind
            )
        })?;
        view.apply(&ev, e.at).map_err(|err| {
            format!(
                "journal event #{} does not fit the state machine: {err}",
                e.seq
            )
        })?;
        events.push((e.clone(), ev));
    }
    Ok(Folded { view, events })
}

/// RFC 3339 text of a timestamp (what JSON and text output show).
pub fn ts(t: Timestamp) -> String {
    t.to_rfc3339()
}

/// Serialize epoch milliseconds as RFC 3339 (the one time format of the JSON output).
fn rfc3339_ms<S: serde::Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&ts(Timestamp(*ms)))
}

/// A compact human duration: `850ms`, `42s`, `3m10s`, `2h05m`, `3d04h`.
pub fn human_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Age of `t` as seen at `now`: `42s`, `5m`, `3h`, `2d` (list columns).
pub fn age(now: Timestamp, t: Timestamp) -> String {
    let s = now.0.saturating_sub(t.0).max(0) / 1000;
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `∞` for an unlimited policy (max 0), else the number.
pub fn max_text(max: u32) -> String {
    if max == 0 {
        "∞".into()
    } else {
        max.to_string()
    }
}

/// A step error as shown (kind, provider code, class, message).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ErrorView {
    /// Stable kind (`throttled`, `conflict`, …).
    pub kind: String,
    /// Provider code (Azure `AnotherOperationInProgress`, …).
    pub code: Option<String>,
    /// Whether another attempt may succeed.
    pub retryable: bool,
    /// The message.
    pub message: String,
    /// One line: `[kind code, retryable] message`.
    pub text: String,
}

impl From<&StepError> for ErrorView {
    fn from(e: &StepError) -> Self {
        Self {
            kind: e.kind.clone(),
            code: e.code.clone(),
            retryable: e.retryable,
            message: e.message.clone(),
            text: e.to_string(),
        }
    }
}

/// One row of `list`.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// Run id (`run_id` in JSON, as everywhere a run is named).
    #[serde(rename = "run_id")]
    pub id: String,
    /// The distinctive short form of the id (its last 8 hex digits), which every command
    /// taking a RUN accepts.
    pub short_id: String,
    /// Workflow name.
    pub workflow: String,
    /// The `cluster` label.
    pub cluster: Option<String>,
    /// State.
    pub state: RunState,
    /// Stage of the current step (needs the run's DAG; `None` when nothing is current).
    pub stage: Option<String>,
    /// The step operators should look at.
    pub step: Option<String>,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Last journal write (RFC 3339).
    pub updated_at: String,
    /// Age at render time (`5m`).
    pub age: String,
    /// One line: what the run waits for.
    pub blocked_on: String,
    /// Lease holder, if any.
    pub lease_owner: Option<String>,
    /// Whether the run is finished for good.
    pub terminal: bool,
    /// The world its steps talk to (`azure/public`, `simulator/in-process`, …).
    pub target: Option<String>,
    /// Set when the run has been due for over a minute and no worker holds it: who should
    /// run it, and the command that starts one.
    pub no_worker: Option<String>,
    /// Who started it (the `started-by` audit label; runs of older binaries have none).
    pub started_by: Option<String>,
}

/// How long a run may be due with nobody holding it before views say "no worker": a
/// worker polls every half second and renews leases every few seconds, so a minute means
/// none is running for the run's target.
pub const NO_WORKER_AFTER_MS: i64 = 60_000;

/// [`NO_WORKER_AFTER_MS`], or `HCP_NO_WORKER_AFTER_MS` (tests shorten the minute); read
/// once per process, not per row.
fn no_worker_after_ms() -> i64 {
    static AFTER: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *AFTER.get_or_init(|| {
        std::env::var("HCP_NO_WORKER_AFTER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(NO_WORKER_AFTER_MS)
    })
}

/// Whether a worker holds `s`'s lease and it has not lapsed at `now`.
pub fn lease_live(s: &RunSummary, now: Timestamp) -> bool {
    s.lease_owner.is_some() && s.lease_expires_at.is_some_and(|t| t >= now)
}

/// "no worker …" when `s` has been due for over a minute and no live lease holds it (no
/// worker for its target runs, or every one is busy or dead).
pub fn no_worker(s: &RunSummary, now: Timestamp) -> Option<String> {
    // A paused run with a deadline is due at its deadline (then a worker unwinds it).
    let paused_with_deadline = s.state == RunState::NeedsOperator && s.wake_at.is_some();
    if !paused_with_deadline
        && !matches!(
            s.state,
            RunState::Pending | RunState::Running | RunState::Waiting | RunState::Unwinding
        )
    {
        return None;
    }
    let due = s.wake_at.or(s.commands_pending.then_some(s.updated_at))?;
    if lease_live(s, now) || now.0 - due.0 <= no_worker_after_ms() {
        return None;
    }
    let target = s.target.as_deref();
    Some(format!(
        "no worker: waiting for a worker for {} for {}; start one: {}",
        crate::target::describe(target),
        human_duration(now.0 - due.0),
        crate::target::worker_command(target)
    ))
}

/// A `list` row from a summary (`stage` from the DAG when the caller loaded it).
pub fn run_row(s: &RunSummary, stage: Option<String>, now: Timestamp) -> RunRow {
    let no_worker = no_worker(s, now);
    // Only a worker for the run's target takes it: say which.
    let blocked_on = match (s.state, &s.target) {
        (RunState::Pending, Some(t)) => format!(
            "waiting for a worker for {}",
            crate::target::describe(Some(t))
        ),
        _ => s.blocked_on.clone(),
    };
    RunRow {
        id: s.id.to_string(),
        short_id: crate::runref::short(&s.id.to_string()).to_string(),
        workflow: s.workflow.clone(),
        cluster: s.labels.get("cluster").cloned(),
        state: s.state,
        stage,
        step: s.current_step.clone(),
        created_at: ts(s.created_at),
        updated_at: ts(s.updated_at),
        age: age(now, s.created_at),
        blocked_on,
        lease_owner: s.lease_owner.clone(),
        terminal: s.state.is_terminal(),
        target: s.target.clone(),
        no_worker,
        started_by: s.labels.get("started-by").cloned(),
    }
}

/// The step names of a stored DAG, in order (empty if it does not parse).
pub fn step_names(dag_text: &str) -> Vec<String> {
    serde_json::from_str::<SagaDag>(dag_text)
        .map(|d| d.nodes.into_iter().map(|n| n.name).collect())
        .unwrap_or_default()
}

/// The stage a step belongs to, from the persisted DAG text.
pub fn stage_of(dag_text: &str, step: &str) -> Option<String> {
    let dag: SagaDag = serde_json::from_str(dag_text).ok()?;
    dag.node(step).map(|n| n.stage.clone())
}

/// One step of `show`.
#[derive(Debug, Clone, Serialize)]
pub struct StepView {
    /// Node name.
    pub name: String,
    /// Stage.
    pub stage: String,
    /// Registered action.
    pub action: String,
    /// Status name (`succeeded`, `undo-failed`, …).
    pub state: String,
    /// Action attempts so far.
    pub attempts: u32,
    /// Action attempt budget (0 = unlimited).
    pub max_attempts: u32,
    /// Undo attempts so far.
    pub undo_attempts: u32,
    /// Undo attempt budget (0 = unlimited).
    pub undo_max_attempts: u32,
    /// First start.
    pub started_at: Option<String>,
    /// Forward completion.
    pub finished_at: Option<String>,
    /// Forward duration (to `now` while active).
    pub duration_ms: Option<i64>,
    /// First undo start.
    pub undo_started_at: Option<String>,
    /// Undo completion.
    pub undone_at: Option<String>,
    /// Most recent error.
    pub last_error: Option<ErrorView>,
    /// Whether this is the run's current step.
    pub current: bool,
    /// Whether the action declares an undo.
    pub has_undo: bool,
    /// Set on a pivot: why it cannot be undone (`⚑ pivot: …`).
    pub pivot: Option<String>,
}

/// A stage and its steps, in DAG order.
#[derive(Debug, Clone, Serialize)]
pub struct StageView {
    /// Stage name.
    pub name: String,
    /// Its steps.
    pub steps: Vec<StepView>,
}

/// The pending-step card: everything about the step the run waits on.
#[derive(Debug, Clone, Serialize)]
pub struct PendingCard {
    /// Node name.
    pub step: String,
    /// `action` or `undo`.
    pub phase: String,
    /// Status name.
    pub state: String,
    /// The attempt in flight, or the one due next.
    pub attempt: u32,
    /// The budget for that phase (0 = unlimited).
    pub max_attempts: u32,
    /// `3/5` or `2/∞`.
    pub attempt_text: String,
    /// Most recent error.
    pub last_error: Option<ErrorView>,
    /// When the next attempt is due.
    pub next_retry_at: Option<String>,
    /// What the step waits for, in words.
    pub waits_for: String,
    /// Until when (durable waits).
    pub wait_until: Option<String>,
    /// Since when it is in this state.
    pub since: Option<String>,
    /// Lease holder.
    pub lease_owner: Option<String>,
    /// Lease expiry.
    pub lease_expires_at: Option<String>,
}

/// One entry of the undo stack.
#[derive(Debug, Clone, Serialize)]
pub struct UndoItem {
    /// Node name.
    pub step: String,
    /// Status name.
    pub state: String,
    /// When its undo finished (done entries).
    pub at: Option<String>,
    /// How: `undone`, `nothing to undo`, `resolved by alice: note`, or what it waits for.
    pub note: String,
}

/// What unwinding did and will do.
#[derive(Debug, Clone, Serialize)]
pub struct UndoStack {
    /// Whether the run is unwinding (or finished unwinding).
    pub unwinding: bool,
    /// Why it unwinds.
    pub cause: Option<String>,
    /// Undone so far, in the order it happened.
    pub done: Vec<UndoItem>,
    /// Still to undo, in the order the engine will (reverse dependency order).
    pub next: Vec<UndoItem>,
}

/// One ledger line.
#[derive(Debug, Clone, Serialize)]
pub struct LedgerRow {
    /// Azure resource id, `namespace/name`, or a path.
    pub id: String,
    /// `azure`, `kubernetes`, `file`.
    pub kind: String,
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// `created`, `adopted`, `deleted`, `gone`, `kept`.
    pub action: String,
    /// Node that did it.
    pub node: String,
    /// `action` or `undo`.
    pub phase: String,
    /// When.
    pub at: Option<String>,
    /// Outlives the cluster.
    pub persistent: bool,
    /// Note.
    pub note: Option<String>,
}

impl From<&LedgerEntry> for LedgerRow {
    fn from(e: &LedgerEntry) -> Self {
        Self {
            id: e.record.id.clone(),
            kind: e.record.kind.clone(),
            resource_type: e.record.resource_type.clone(),
            action: e.record.action.as_str().into(),
            node: e.node.clone(),
            phase: e.phase.clone(),
            at: e.at.map(ts),
            persistent: e.record.persistent,
            note: e.record.note.clone(),
        }
    }
}

/// An operator command as shown.
#[derive(Debug, Clone, Serialize)]
pub struct CommandRow {
    /// Store id (`command_id` in JSON, as `cancel`/`retry`/… print it).
    #[serde(rename = "command_id")]
    pub id: i64,
    /// `resolve --step b1`, …
    pub command: String,
    /// Who.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When requested.
    pub requested_at: String,
    /// When a worker applied it.
    pub applied_at: Option<String>,
    /// The journaled outcome (`applied` or why it was refused), once applied.
    pub outcome: Option<String>,
}

/// One bar of the timeline: an attempt, an undo attempt, or a wait between attempts.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    /// Node name.
    pub node: String,
    /// `action` or `undo`.
    pub phase: String,
    /// `attempt` or `wait`.
    pub kind: String,
    /// Attempt number of the phase.
    pub attempt: u32,
    /// `ok`, `failed`, `retry`, `wait`, `interrupted`, `running`, `resolved`, `skipped`.
    pub outcome: String,
    /// Start (ms since the epoch; `start_at`, RFC 3339, in JSON like every other time).
    #[serde(rename = "start_at", serialize_with = "rfc3339_ms")]
    pub start_ms: i64,
    /// End (ms since the epoch, `now` for open spans; `end_at`, RFC 3339, in JSON).
    #[serde(rename = "end_at", serialize_with = "rfc3339_ms")]
    pub end_ms: i64,
    /// Error or wait reason.
    pub detail: Option<String>,
}

/// Everything `show` prints about a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    /// Run id (`run_id` in JSON, as everywhere a run is named).
    #[serde(rename = "run_id")]
    pub id: String,
    /// The distinctive short form of the id (its last 8 hex digits).
    pub short_id: String,
    /// Workflow.
    pub workflow: String,
    /// Workflow version.
    pub version: u32,
    /// The `cluster` label.
    pub cluster: Option<String>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// State.
    pub state: RunState,
    /// Whether finished for good.
    pub terminal: bool,
    /// Blocked-on line.
    pub blocked_on: String,
    /// Created.
    pub created_at: String,
    /// Last journal write.
    pub updated_at: String,
    /// Current step.
    pub step: Option<String>,
    /// Its stage.
    pub stage: Option<String>,
    /// Lease holder.
    pub lease_owner: Option<String>,
    /// Lease epoch.
    pub lease_epoch: i64,
    /// Lease expiry.
    pub lease_expires_at: Option<String>,
    /// Whether the lease has lapsed at render time.
    pub lease_expired: bool,
    /// Parked reason.
    pub parked: Option<String>,
    /// Why the journal does not fold (then the step sections are empty).
    pub unreadable: Option<String>,
    /// Stages and steps.
    pub stages: Vec<StageView>,
    /// The pending-step card.
    pub pending: Option<PendingCard>,
    /// The failure that matters for this run (the forward failure that started an unwind,
    /// or the cancel), with a hint that fits the run's state; `None` when nothing failed.
    pub failure: Option<FailureCard>,
    /// The undo stack.
    pub undo: UndoStack,
    /// The resource ledger.
    pub ledger: Vec<LedgerRow>,
    /// Operator commands.
    pub commands: Vec<CommandRow>,
    /// Timeline bars.
    pub spans: Vec<Span>,
    /// The `why` paragraph.
    pub why: Why,
    /// The run's target (`azure/public`, `simulator/in-process`, …).
    pub target: Option<String>,
    /// Set when no worker has held the run for over a minute while it is due.
    pub no_worker: Option<String>,
    /// The run's failure policy (`unwind`, `pause`, `pause=24h`), as journaled with it.
    pub on_failure: String,
    /// Every step is a pivot: the run only goes forward (a delete).
    pub forward_only: bool,
    /// Set while the run is paused after a step failed for good.
    pub paused: Option<PausedView>,
    /// A succeeded create or update: how to reach the cluster (API server, kubeconfig
    /// Secret and the command that fetches it, console), as its last step read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<AccessView>,
}

/// How to reach a cluster (`hcp_activities::steps::cluster::Access`, as a step recorded it).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct AccessView {
    /// `https://host:port` of the API server, once HyperShift reported it.
    pub api_server: Option<String>,
    /// `namespace/name` of the admin kubeconfig Secret on the management cluster.
    pub kubeconfig_secret: Option<String>,
    /// The command that writes it to a file.
    pub kubeconfig_command: Option<String>,
    /// The web console.
    pub console: String,
    /// Where those names resolve, when that is not everywhere (a private topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<String>,
    /// The topology the run left the cluster in (its cluster file's), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<String>,
}

impl AccessView {
    /// The `access` a succeeded run's steps recorded (the newest, in DAG order).
    pub fn of(v: &RunView) -> Option<Self> {
        if v.state() != RunState::Succeeded {
            return None;
        }
        let outputs = v.outputs();
        let mut access: Self = v
            .dag
            .nodes
            .iter()
            .rev()
            .filter_map(|n| outputs.get(&n.name))
            .find_map(|o| serde_json::from_value(o.get("access")?.clone()).ok())?;
        access.topology = v
            .dag
            .record
            .as_ref()
            .and_then(|r| r.get("topology"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        Some(access)
    }

    /// What the names of a Private cluster are, after the line that shows them: they are
    /// the same names a PublicAndPrivate cluster publishes (HyperShift's `spec.services`
    /// are immutable), but no public record answers them any more (a switch to Private
    /// deletes those), so shown bare they read as reachable from anywhere.
    fn private_note(&self) -> &'static str {
        if self.topology.as_deref() == Some("Private") {
            " (private: no public DNS record; resolves only inside the guest VNet)"
        } else {
            ""
        }
    }

    /// The lines `start` and `show` print; for cluster `cluster`, with the one command
    /// that writes its kubeconfig to a file (instead of the `kubectl … | base64 -d`
    /// pipeline) with the flags that reach `target`.
    pub fn lines_for(&self, cluster: Option<&str>, target: Option<&str>) -> Vec<String> {
        let mut out = vec![match &self.api_server {
            Some(url) => format!("API server  {url}{}", self.private_note()),
            None => "API server  (not reported by the HostedCluster yet)".to_string(),
        }];
        match (&self.kubeconfig_secret, &self.kubeconfig_command) {
            (Some(sec), Some(cmd)) => {
                out.push(format!(
                    "kubeconfig  Secret {sec} on the management cluster:"
                ));
                out.push(format!("            {cmd}"));
                if let Some(c) = cluster {
                    out.push(format!(
                        "            or: {}",
                        crate::target::command(
                            target,
                            &format!("kubeconfig cluster/{c} --output-file {c}.kubeconfig")
                        )
                    ));
                }
            }
            _ => out.push("kubeconfig  (not reported by the HostedCluster yet)".to_string()),
        }
        out.push(format!(
            "console     {}{}",
            self.console,
            self.private_note()
        ));
        if let Some(r) = &self.reach {
            out.push(format!("reach       {r}"));
        }
        out
    }
}

/// A paused run, as every view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PausedView {
    /// The step that failed for good.
    pub step: String,
    /// `policy` (its on-failure policy) or `past-pivot`.
    pub cause: String,
    /// The pivot it cannot unwind past.
    pub pivot: Option<String>,
    /// When it unwinds by itself unless retried (RFC 3339).
    pub unwinds_at: Option<String>,
    /// When it paused (RFC 3339).
    pub since: String,
    /// One line: `paused by policy: on-failure=pause (unwinds at … unless retried)`.
    pub text: String,
    /// [`PausedView::text`] without its deadline (`paused by policy: on-failure=pause`),
    /// for a page that shows [`PausedView::unwinds_at`] beside it.
    pub reason: String,
}

impl PausedView {
    fn of(v: &RunView) -> Option<Self> {
        let p = v.paused.as_ref()?;
        let (cause, pivot, text) = match &p.cause {
            _ if v.dag.forward_only() => (
                "forward-only",
                None,
                "stopped: a delete only goes forward; `retry` continues it".to_string(),
            ),
            hcp_runtime::PauseCause::Policy => ("policy", None, p.policy_text(v.dag.on_failure)),
            hcp_runtime::PauseCause::PastPivot { pivot } if *pivot == p.step => (
                "past-pivot",
                Some(pivot.clone()),
                format!(
                    "paused at the pivot {pivot}: it failed once started, and cannot be undone"
                ),
            ),
            hcp_runtime::PauseCause::PastPivot { pivot } => (
                "past-pivot",
                Some(pivot.clone()),
                format!("paused past the pivot {pivot}: it cannot be undone"),
            ),
        };
        let reason = match &p.cause {
            hcp_runtime::PauseCause::Policy if !v.dag.forward_only() => {
                format!("paused by policy: on-failure={}", v.dag.on_failure)
            }
            _ => text.clone(),
        };
        Some(Self {
            step: p.step.clone(),
            cause: cause.into(),
            pivot,
            unwinds_at: p.unwind_at.map(ts),
            since: ts(p.since),
            text,
            reason,
        })
    }
}

/// The `why` answer: a paragraph and the commands it suggests.
#[derive(Debug, Clone, Serialize)]
pub struct Why {
    /// One paragraph.
    pub text: String,
    /// The paragraph as a page shows it beside the failure card and the run's summary,
    /// which already say the failure's hint and the paused run's deadline: without them
    /// (`None`: the page shows `text`).
    pub lead: Option<String>,
    /// Suggested operator actions, most useful first.
    pub actions: Vec<Suggestion>,
}

/// A suggested operator action (the UI turns these into buttons).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Suggestion {
    /// `cancel`, `retry`, `resolve`, `resume`.
    pub action: String,
    /// The step it applies to.
    pub step: Option<String>,
    /// The exact command line.
    pub command: String,
    /// What it does.
    pub explain: String,
}

fn unwind_cause_text(c: &UnwindCause) -> String {
    match c {
        UnwindCause::NodeFailed { node } => format!("step {node} failed"),
        UnwindCause::Cancelled { by, reason } if reason.is_empty() => {
            format!("{by} cancelled it")
        }
        UnwindCause::Cancelled { by, reason } => format!("{by} cancelled it: {reason}"),
        UnwindCause::PauseExpired { node, deadline } => format!(
            "step {node} failed and nobody retried it before its pause ran out at {deadline}"
        ),
    }
}

fn command_text(json: &str) -> String {
    serde_json::from_str::<OperatorCommand>(json)
        .map(|c| c.to_string())
        .unwrap_or_else(|_| json.to_string())
}

/// Build the `show` model.
pub fn detail(rec: &RunRecord, now: Timestamp) -> RunDetail {
    let s = &rec.summary;
    let folded = fold(rec);
    let lease_expired = s.lease_expires_at.is_some_and(|t| t <= now);
    let mut d = RunDetail {
        id: s.id.to_string(),
        short_id: crate::runref::short(&s.id.to_string()).to_string(),
        workflow: s.workflow.clone(),
        version: s.workflow_version,
        cluster: s.labels.get("cluster").cloned(),
        labels: s.labels.clone(),
        state: s.state,
        terminal: s.state.is_terminal(),
        blocked_on: s.blocked_on.clone(),
        created_at: ts(s.created_at),
        updated_at: ts(s.updated_at),
        step: s.current_step.clone(),
        stage: None,
        lease_owner: s.lease_owner.clone(),
        lease_epoch: s.lease_epoch,
        lease_expires_at: s.lease_expires_at.map(ts),
        lease_expired,
        parked: None,
        unreadable: None,
        stages: Vec::new(),
        pending: None,
        failure: None,
        undo: UndoStack {
            unwinding: false,
            cause: None,
            done: Vec::new(),
            next: Vec::new(),
        },
        ledger: Vec::new(),
        commands: Vec::new(),
        spans: Vec::new(),
        why: Why {
            text: String::new(),
            lead: None,
            actions: Vec::new(),
        },
        target: s.target.clone(),
        no_worker: no_worker(s, now),
        on_failure: "unwind".into(),
        forward_only: false,
        paused: None,
        access: None,
    };
    let f = match folded {
        Ok(f) => f,
        Err(reason) => {
            d.unreadable = Some(reason.clone());
            d.commands = commands(&rec.commands, &[]);
            d.why = why_unreadable(s, &reason);
            return d;
        }
    };
    let v = &f.view;
    // The folded view is the truth for state and current step (the summary is a cache of it).
    d.state = v.state();
    d.terminal = d.state.is_terminal();
    d.blocked_on = v.blocked_on();
    d.step = v.current_step().map(str::to_string);
    d.stage = d
        .step
        .as_deref()
        .and_then(|n| v.dag.node(n))
        .map(|n| n.stage.clone());
    d.parked = v.parked.clone();
    d.on_failure = v.dag.on_failure.to_string();
    d.forward_only = v.dag.forward_only();
    d.paused = PausedView::of(v);
    d.access = AccessView::of(v);
    let current = d.step.clone();
    let mut by_stage: Vec<StageView> = v
        .dag
        .stages
        .iter()
        .map(|name| StageView {
            name: name.clone(),
            steps: Vec::new(),
        })
        .collect();
    for (spec, st) in v.dag.nodes.iter().zip(&v.nodes) {
        let duration_ms = st.started_at.map(|a| {
            let end = st
                .finished_at
                .unwrap_or(if st.status.forward_active() { now } else { a });
            end.0 - a.0
        });
        let step = StepView {
            name: spec.name.clone(),
            stage: spec.stage.clone(),
            action: spec.action.clone(),
            state: st.status.name().into(),
            attempts: st.attempts,
            max_attempts: spec.retry.max_attempts,
            undo_attempts: st.undo_attempts,
            undo_max_attempts: spec.undo_retry.max_attempts,
            started_at: st.started_at.map(ts),
            finished_at: st.finished_at.map(ts),
            duration_ms,
            undo_started_at: st.undo_started_at.map(ts),
            undone_at: st.undone_at.map(ts),
            last_error: st.last_error.as_ref().map(ErrorView::from),
            current: current.as_deref() == Some(spec.name.as_str()),
            has_undo: spec.has_undo,
            pivot: spec.pivot.clone(),
        };
        match by_stage.iter_mut().find(|g| g.name == spec.stage) {
            Some(g) => g.steps.push(step),
            None => by_stage.push(StageView {
                name: spec.stage.clone(),
                steps: vec![step],
            }),
        }
    }
    by_stage.retain(|g| !g.steps.is_empty());
    d.stages = by_stage;
    let last_at = last_event_at(&f.events);
    d.pending = current
        .as_deref()
        .and_then(|step| pending_card(v, step, s, last_at.get(step).copied()));
    d.undo = undo_stack(&f);
    d.ledger = ledger::ledger_of(v).iter().map(LedgerRow::from).collect();
    d.commands = commands(&rec.commands, &f.events);
    d.spans = spans(&f.events, now);
    // The driver's summary line counts the polls that changed nothing (they are not
    // journaled, so the fold cannot): keep it while it describes the same step.
    if hcp_runtime::journal::quiet_polls_in(&s.blocked_on) > 0
        && s.current_step.as_deref() == v.current_step()
    {
        d.blocked_on = s.blocked_on.clone();
    }
    d.failure = failure_card(&d, v, &f.events);
    d.why = why(&d, v, s, &last_at, now);
    if let Some(nw) = &d.no_worker
        && s.state != RunState::Pending
    {
        let worker = crate::target::worker_command(s.target.as_deref());
        // `nw` starts with its own "no worker: " label (for `list`'s column): said once.
        let nw = nw.strip_prefix("no worker: ").unwrap_or(nw);
        d.why.text = format!("No worker is running it: {nw}. {}", d.why.text);
        if let Some(l) = &mut d.why.lead {
            *l = format!("No worker is running it: {nw}. {l}");
        }
        d.why.actions.insert(
            0,
            suggest(
                "worker",
                None,
                worker,
                "start a worker that reaches this run's target",
            ),
        );
    }
    d
}

/// The one failure card of `show`, `why` and the run page.
#[derive(Debug, Clone, Serialize)]
pub struct FailureCard {
    /// The step that failed for good (absent for a cancel).
    pub step: Option<String>,
    /// The Azure / Kubernetes error code (`PrivateLinkServiceNotFound`, `Conflict`, …).
    pub code: Option<String>,
    /// Stable kind (`validation`, `conflict`, …) or `cancelled`.
    pub kind: String,
    /// The message.
    pub message: String,
    /// When (RFC 3339).
    pub at: String,
    /// What to do now, for this run's state.
    pub hint: String,
}

/// `step X failed: CODE message` (or the cancel) in one line.
fn failure_text(f: &FailureCard) -> String {
    match (&f.step, &f.code) {
        (Some(step), Some(code)) => format!("step {step} failed: {code} {}", f.message),
        (Some(step), None) => format!("step {step} failed: {}", f.message),
        (None, _) => f.message.clone(),
    }
}

/// The failure card: the forward failure (or cancel) that started the unwind, and a hint
/// that is true for the state the run is in now.
fn failure_card(
    d: &RunDetail,
    v: &RunView,
    events: &[(StoredEvent, Event)],
) -> Option<FailureCard> {
    let id = &d.id;
    let failed_node = v.paused.as_ref().map(|p| p.step.clone());
    let cause = match (&v.unwinding, failed_node) {
        (Some(c), _) => c.clone(),
        (None, Some(node)) => UnwindCause::NodeFailed { node },
        (None, None) => return None,
    };
    let (step, code, kind, message, at) = match &cause {
        UnwindCause::NodeFailed { node } | UnwindCause::PauseExpired { node, .. } => {
            let (at, err) = events.iter().rev().find_map(|(se, e)| match e {
                Event::NodeFailed { node: n, error, .. } if n == node => Some((se.at, error)),
                _ => None,
            })?;
            (
                Some(node.clone()),
                err.code.clone(),
                err.kind.clone(),
                err.message.clone(),
                ts(at),
            )
        }
        UnwindCause::Cancelled { by, reason } => {
            let at = events
                .iter()
                .find_map(|(se, e)| matches!(e, Event::UnwindStarted { .. }).then_some(se.at))
                .map(ts)
                .unwrap_or_else(|| d.updated_at.clone());
            (
                None,
                None,
                "cancelled".to_string(),
                if reason.is_empty() {
                    format!("cancelled by {by}")
                } else {
                    format!("cancelled by {by}: {reason}")
                },
                at,
            )
        }
    };
    let hint = match d.state {
        RunState::NeedsOperator if v.paused.is_some() => paused_hint(v, id),
        RunState::RolledBack | RunState::Cancelled => {
            // What the ledger proves, not a stock sentence.
            let summary = ledger::UnwindSummary::of(v);
            let first = if summary.complete() {
                "Every step this run started was undone; nothing of it is left to clean up."
                    .to_string()
            } else {
                let mut s = summary.sentence();
                if let Some(c) = s.get(..1) {
                    s = c.to_uppercase() + &s[1..];
                }
                format!("{s}.")
            };
            format!(
                "{first} Fix the cause, then start a new run{} (a finished run is never retried).",
                d.cluster
                    .as_ref()
                    .map(|c| format!(" for cluster {c}"))
                    .unwrap_or_default()
            )
        }
        RunState::NeedsOperator => {
            let stuck = d
                .stages
                .iter()
                .flat_map(|g| g.steps.iter())
                .find(|s| s.state == "undo-failed")
                .map(|s| s.name.clone());
            match stuck {
                Some(st) => format!(
                    "The unwind is stuck on the undo of {st}: fix what blocks it, then `{}`; if you removed the resource by hand, `{}`.",
                    cli(&format!("retry {id} --step {st}")),
                    cli(&format!("resolve {id} --step {st} --note '…'"))
                ),
                None => format!("An operator must act: `{}`.", cli(&format!("why {id}"))),
            }
        }
        RunState::Unwinding => format!(
            "Unwinding now: the started steps are being undone in reverse order. Follow it with `{}`.",
            cli(&format!("watch {id}"))
        ),
        RunState::Failed => format!(
            "Parked while unwinding: `{}` once the binary knows its steps.",
            cli(&format!("resume {id}"))
        ),
        _ => format!(
            "`{}` says what the run waits for.",
            cli(&format!("why {id}"))
        ),
    };
    Some(FailureCard {
        step,
        code,
        kind,
        message,
        at,
        hint,
    })
}

/// What to do about a paused run: the exact `retry` and `cancel` commands, and what each
/// does to the work it kept.
fn paused_hint(v: &RunView, id: &str) -> String {
    let Some(p) = &v.paused else {
        return String::new();
    };
    let retry = cli(&format!("retry {id}"));
    let cancel = cli(&format!("cancel {id} --reason '…'"));
    if v.dag.forward_only() {
        return format!(
            "Nothing was undone, and a delete never undoes anything: the steps that ran are deleted for good. Fix the cause, then `{retry}` continues the delete from {}; `{cancel}` stops it here for good (nothing is undone).",
            p.step
        );
    }
    // The deadline is not repeated here: the paused line every view shows says it.
    match &p.cause {
        hcp_runtime::PauseCause::Policy => format!(
            "Paused by policy: on-failure={}; nothing was undone. Fix the cause, then `{retry}` re-runs {} with a fresh retry budget and goes on; or `{cancel}` unwinds every started step.",
            v.dag.on_failure, p.step
        ),
        hcp_runtime::PauseCause::PastPivot { pivot } => format!(
            "Paused past the pivot {pivot}, which cannot be undone; nothing was undone. Fix the cause, then `{retry}` re-runs {} and goes on; or `{cancel}` undoes only the steps that came after the pivot and keeps the rest.",
            p.step
        ),
    }
}

/// Per node, the time of its latest event (for "since when").
fn last_event_at(events: &[(StoredEvent, Event)]) -> HashMap<String, Timestamp> {
    let mut m = HashMap::new();
    for (se, ev) in events {
        if let Some(n) = ev.node() {
            m.insert(n.to_string(), se.at);
        }
    }
    m
}

fn pending_card(
    v: &RunView,
    step: &str,
    s: &RunSummary,
    since: Option<Timestamp>,
) -> Option<PendingCard> {
    let spec = v.dag.node(step)?;
    let st = v.node(step)?;
    let (phase, attempt, max) = match &st.status {
        NodeStatus::Running { attempt } | NodeStatus::Waiting { attempt, .. } => {
            ("action", *attempt, spec.retry.max_attempts)
        }
        NodeStatus::RetryScheduled { attempt, .. } => {
            ("action", attempt + 1, spec.retry.max_attempts)
        }
        NodeStatus::UndoRunning { attempt } | NodeStatus::UndoWaiting { attempt, .. } => {
            ("undo", *attempt, spec.undo_retry.max_attempts)
        }
        NodeStatus::UndoRetryScheduled { attempt, .. } => {
            ("undo", attempt + 1, spec.undo_retry.max_attempts)
        }
        NodeStatus::UndoFailed { .. } => ("undo", st.undo_attempts, spec.undo_retry.max_attempts),
        _ => ("action", st.attempts, spec.retry.max_attempts),
    };
    let lease = match (&s.lease_owner, s.lease_expires_at) {
        (Some(o), Some(t)) => format!("the worker {o} (lease until {t})"),
        (Some(o), None) => format!("the worker {o}"),
        _ => "a worker (none holds the run now)".into(),
    };
    let (waits_for, wait_until, next_retry_at) = match &st.status {
        NodeStatus::Running { .. } | NodeStatus::UndoRunning { .. } => (
            format!("the {phase} attempt in flight, run by {lease}"),
            None,
            None,
        ),
        NodeStatus::Waiting { until, reason, .. }
        | NodeStatus::UndoWaiting { until, reason, .. } => (
            format!("{reason} (polls again at {until})"),
            Some(ts(*until)),
            None,
        ),
        NodeStatus::RetryScheduled { next_at, .. }
        | NodeStatus::UndoRetryScheduled { next_at, .. } => (
            format!("its backoff to end, then {lease} retries"),
            None,
            Some(ts(*next_at)),
        ),
        NodeStatus::UndoFailed { .. } => (
            "an operator: the undo gave up; retry it, or resolve it after cleaning up by hand"
                .into(),
            None,
            None,
        ),
        NodeStatus::Stalled { reason, .. } => (
            format!(
                "an operator: {reason}; retry gives the wait a fresh budget, cancel unwinds the run"
            ),
            None,
            None,
        ),
        NodeStatus::Failed { .. } if v.paused.is_some() => (
            if v.dag.forward_only() {
                "an operator: the run stopped here and undoes nothing; retry re-runs this step and continues".into()
            } else {
                "an operator: the run is paused with its work kept; retry re-runs this step with a fresh budget, cancel unwinds".into()
            },
            None,
            None,
        ),
        other => (other.name().to_string(), None, None),
    };
    Some(PendingCard {
        step: step.to_string(),
        phase: phase.into(),
        state: st.status.name().into(),
        attempt,
        max_attempts: max,
        // After a give-up, "1/20" would read as 19 attempts to go.
        attempt_text: match &st.status {
            NodeStatus::UndoFailed { error } if !error.retryable => format!(
                "gave up after attempt {attempt}: the error is permanent (no retry would help without a fix)"
            ),
            NodeStatus::UndoFailed { .. } => {
                format!("gave up after {attempt} of {} attempts", max_text(max))
            }
            NodeStatus::Stalled { .. } => {
                format!("attempt {attempt}: its wait ran past its budget")
            }
            NodeStatus::Failed { .. } => format!(
                "failed for good at attempt {attempt} of {}{}",
                max_text(max),
                if st.redrives > 0 {
                    format!(
                        " (after {} redrive{})",
                        st.redrives,
                        if st.redrives == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            ),
            _ => format!("{attempt}/{}", max_text(max)),
        },
        last_error: st.last_error.as_ref().map(ErrorView::from),
        next_retry_at,
        waits_for,
        wait_until,
        since: since.map(ts),
        lease_owner: s.lease_owner.clone(),
        lease_expires_at: s.lease_expires_at.map(ts),
    })
}

fn undo_stack(f: &Folded) -> UndoStack {
    let v = &f.view;
    let mut resolved: HashMap<&str, (&str, &str)> = HashMap::new();
    let mut order: Vec<(Timestamp, i64, &str)> = Vec::new();
    for (se, ev) in &f.events {
        match ev {
            Event::UndoResolved { node, by, note } => {
                resolved.insert(node.as_str(), (by.as_str(), note.as_str()));
                order.push((se.at, se.seq, node.as_str()));
            }
            Event::NodeUndone { node, .. } | Event::NodeKept { node, .. } => {
                order.push((se.at, se.seq, node.as_str()))
            }
            _ => {}
        }
    }
    // What each undo did to the resources its step recorded: deleted, or kept because the
    // run adopted them (never its own to delete).
    let entries = ledger::ledger_of(v);
    let mut done = Vec::new();
    for (at, _, node) in &order {
        let Some(st) = v.node(node) else { continue };
        let note = match (&st.status, resolved.get(node)) {
            (_, Some((by, note))) => format!("resolved by {by}: {note}"),
            (NodeStatus::Undone { skipped: true, .. }, _) => "nothing to undo".to_string(),
            (NodeStatus::Kept { reason }, _) => format!("kept, never undone ({reason})"),
            _ => {
                let (d, k) = ledger::undo_counts(&entries, node);
                ledger::undone_word(d, k)
            }
        };
        done.push(UndoItem {
            step: node.to_string(),
            state: st.status.name().into(),
            at: Some(ts(*at)),
            note,
        });
    }
    // What is left, in the engine's order: a node is undone after every node that depends
    // on it, so the reverse of the DAG's topological order is a valid undo order.
    let deps = v.dag.dependents();
    let mut next = Vec::new();
    for (spec, st) in v.dag.nodes.iter().zip(&v.nodes).rev() {
        if !st.status.started()
            || matches!(
                st.status,
                NodeStatus::Undone { .. } | NodeStatus::Kept { .. }
            )
        {
            continue;
        }
        let blockers: Vec<&str> = deps
            .get(spec.name.as_str())
            .map(|ds| {
                ds.iter()
                    .copied()
                    .filter(|d| {
                        v.node(d).is_some_and(|n| {
                            n.status.started() && !matches!(n.status, NodeStatus::Undone { .. })
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let note = match &st.status {
            NodeStatus::UndoFailed { error } => {
                format!("stuck: the undo gave up ({error}); needs an operator")
            }
            NodeStatus::UndoRunning { attempt } => format!("undoing (attempt {attempt})"),
            NodeStatus::UndoRetryScheduled { next_at, .. } => {
                format!("undo retries at {next_at}")
            }
            NodeStatus::UndoWaiting { until, reason, .. } => {
                format!("undo waits until {until}: {reason}")
            }
            _ if spec.pivot.is_some() => format!(
                "⚑ pivot: {}; never undone",
                spec.pivot.as_deref().unwrap_or_default()
            ),
            _ if v
                .kept_by_pivot(v.index_of(&spec.name).unwrap_or(usize::MAX))
                .is_some() =>
            {
                "kept: at or before a pivot that succeeded; never undone".into()
            }
            _ if !spec.has_undo => "no undo declared: nothing to do".into(),
            _ if !blockers.is_empty() => format!("after {}", blockers.join(", ")),
            _ => "ready".into(),
        };
        next.push(UndoItem {
            step: spec.name.clone(),
            state: st.status.name().into(),
            at: None,
            note,
        });
    }
    let unwinding = v.unwinding.is_some();
    UndoStack {
        unwinding,
        cause: v.unwinding.as_ref().map(unwind_cause_text),
        done,
        next: if v.finished == Some(RunState::Succeeded) {
            Vec::new()
        } else {
            next
        },
    }
}

fn commands(cmds: &[CommandRecord], events: &[(StoredEvent, Event)]) -> Vec<CommandRow> {
    let outcomes: HashMap<i64, &str> = events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Operator {
                command_id,
                outcome,
                ..
            } => Some((*command_id, outcome.as_str())),
            _ => None,
        })
        .collect();
    cmds.iter()
        .map(|c| CommandRow {
            id: c.id,
            command: command_text(&c.command),
            by: c.requested_by.clone(),
            reason: c.reason.clone(),
            requested_at: ts(c.requested_at),
            applied_at: c.applied_at.map(ts),
            outcome: outcomes.get(&c.id).map(|s| s.to_string()),
        })
        .collect()
}

/// Timeline bars from the journal: one per attempt (action or undo) and per wait between
/// attempts, positioned by the journal's timestamps; bars still open end at `now`.
pub fn spans(events: &[(StoredEvent, Event)], now: Timestamp) -> Vec<Span> {
    let mut open: HashMap<String, Span> = HashMap::new();
    let mut out: Vec<Span> = Vec::new();
    let close = |open: &mut HashMap<String, Span>,
                 out: &mut Vec<Span>,
                 node: &str,
                 at: Timestamp,
                 outcome: &str,
                 detail: Option<String>| {
        if let Some(mut s) = open.remove(node) {
            s.end_ms = at.0;
            s.outcome = outcome.into();
            if detail.is_some() {
                s.detail = detail;
            }
            out.push(s);
        }
    };
    let mk = |node: &str,
              phase: &str,
              kind: &str,
              attempt: u32,
              at: Timestamp,
              detail: Option<String>| Span {
        node: node.into(),
        phase: phase.into(),
        kind: kind.into(),
        attempt,
        outcome: "running".into(),
        start_ms: at.0,
        end_ms: at.0,
        detail,
    };
    for (se, ev) in events {
        let at = se.at;
        match ev {
            Event::NodeStarted { node, attempt } => {
                close(&mut open, &mut out, node, at, "interrupted", None);
                open.insert(
                    node.clone(),
                    mk(node, "action", "attempt", *attempt, at, None),
                );
            }
            Event::UndoStarted { node, attempt } => {
                close(&mut open, &mut out, node, at, "interrupted", None);
                open.insert(
                    node.clone(),
                    mk(node, "undo", "attempt", *attempt, at, None),
                );
            }
            Event::NodeWaiting { node, reason, .. } | Event::UndoWaiting { node, reason, .. } => {
                let (phase, attempt) = open
                    .get(node)
                    .map(|s| (s.phase.clone(), s.attempt))
                    .unwrap_or(("action".into(), 0));
                close(&mut open, &mut out, node, at, "wait", Some(reason.clone()));
                open.insert(
                    node.clone(),
                    mk(node, &phase, "wait", attempt, at, Some(reason.clone())),
                );
            }
            Event::NodeRetryScheduled {
                node,
                error,
                attempt,
                ..
            }
            | Event::UndoRetryScheduled {
                node,
                error,
                attempt,
                ..
            } => {
                let phase = if matches!(ev, Event::UndoRetryScheduled { .. }) {
                    "undo"
                } else {
                    "action"
                };
                close(
                    &mut open,
                    &mut out,
                    node,
                    at,
                    "retry",
                    Some(error.to_string()),
                );
                open.insert(
                    node.clone(),
                    mk(
                        node,
                        phase,
                        "wait",
                        *attempt,
                        at,
                        Some(format!("backoff after {error}")),
                    ),
                );
            }
            Event::NodeSucceeded { node, .. } => close(&mut open, &mut out, node, at, "ok", None),
            Event::NodeFailed { node, error, .. } => close(
                &mut open,
                &mut out,
                node,
                at,
                "failed",
                Some(error.to_string()),
            ),
            Event::NodeUndone { node, skipped } => {
                if *skipped {
                    close(&mut open, &mut out, node, at, "interrupted", None);
                    let mut s = mk(
                        node,
                        "undo",
                        "attempt",
                        0,
                        at,
                        Some("nothing to undo".into()),
                    );
                    s.outcome = "skipped".into();
                    out.push(s);
                } else {
                    close(&mut open, &mut out, node, at, "ok", None);
                }
            }
            Event::UndoFailed { node, error, .. } => {
                close(
                    &mut open,
                    &mut out,
                    node,
                    at,
                    "failed",
                    Some(error.to_string()),
                );
                // The stuck undo waits for an operator: a bar that grows until resolved.
                open.insert(
                    node.clone(),
                    mk(
                        node,
                        "undo",
                        "wait",
                        0,
                        at,
                        Some("waiting for an operator".into()),
                    ),
                );
            }
            Event::UndoResolved { node, by, note } => {
                close(
                    &mut open,
                    &mut out,
                    node,
                    at,
                    "resolved",
                    Some(format!("resolved by {by}: {note}")),
                );
            }
            _ => {}
        }
    }
    let mut rest: Vec<Span> = open.into_values().collect();
    rest.sort_by(|a, b| a.start_ms.cmp(&b.start_ms).then(a.node.cmp(&b.node)));
    for mut s in rest {
        s.end_ms = now.0.max(s.start_ms);
        out.push(s);
    }
    out.sort_by(|a, b| a.start_ms.cmp(&b.start_ms).then(a.end_ms.cmp(&b.end_ms)));
    out
}

fn cli(args: &str) -> String {
    format!("hcp-workflow {args}")
}

fn suggest(action: &str, step: Option<&str>, command: String, explain: &str) -> Suggestion {
    Suggestion {
        action: action.into(),
        step: step.map(str::to_string),
        command,
        explain: explain.into(),
    }
}

fn why_unreadable(s: &RunSummary, reason: &str) -> Why {
    let id = s.id;
    Why {
        lead: None,
        text: format!(
            "Run {id} ({}) cannot be shown step by step: {reason}. A worker parks such a run \
             instead of acting on it. Upgrade to a binary that reads this journal and run `{}`, \
             or unwind it with `{}`.",
            s.workflow,
            cli(&format!("resume {id}")),
            cli(&format!("cancel {id} --reason '…'"))
        ),
        actions: vec![
            suggest(
                "resume",
                None,
                cli(&format!("resume {id}")),
                "try the run again",
            ),
            suggest(
                "cancel",
                None,
                cli(&format!("cancel {id} --reason '…'")),
                "unwind the run",
            ),
        ],
    }
}

fn why(
    d: &RunDetail,
    v: &RunView,
    s: &RunSummary,
    last_at: &HashMap<String, Timestamp>,
    now: Timestamp,
) -> Why {
    let cx = WhyCx::new(d, v, s, last_at, now);
    let mut actions = Vec::new();
    let mut lead = None;
    let text = match d.state {
        RunState::Succeeded | RunState::RolledBack | RunState::Cancelled => why_finished(&cx),
        RunState::Pending => why_pending(&cx, &mut actions),
        RunState::Failed => why_parked(&cx, &mut actions),
        RunState::NeedsOperator if v.paused.is_some() => why_paused(&cx, &mut actions, &mut lead),
        RunState::NeedsOperator if v.unwinding.is_none() => why_stalled(&cx, &mut actions),
        RunState::NeedsOperator => why_stuck_undo(&cx, &mut actions),
        RunState::Unwinding => why_unwinding(&cx, &mut actions),
        RunState::Running | RunState::Waiting => why_running(&cx, &mut actions),
    };
    Why {
        text,
        lead,
        actions,
    }
}

/// What every state's sentence in [`why`] reads: the run, its view and summary, when each
/// step last moved, the time, and the sentence parts they share.
struct WhyCx<'a> {
    d: &'a RunDetail,
    v: &'a RunView,
    s: &'a RunSummary,
    last_at: &'a HashMap<String, Timestamp>,
    now: Timestamp,
    /// `Run <id> (<workflow>, cluster <name>)`.
    head: String,
    /// Every step is a pivot (a delete): a cancel stops the run where it is, and what it
    /// deleted stays deleted.
    forward_only: bool,
    /// The `cancel` suggestion, in the words of this workflow.
    cancel: Suggestion,
    /// What a cancel does, as the end of a sentence.
    give_up: &'static str,
}

impl<'a> WhyCx<'a> {
    fn new(
        d: &'a RunDetail,
        v: &'a RunView,
        s: &'a RunSummary,
        last_at: &'a HashMap<String, Timestamp>,
        now: Timestamp,
    ) -> Self {
        let id = &d.id;
        let head = format!("Run {id} ({}", d.workflow);
        let head = match &d.cluster {
            Some(c) => format!("{head}, cluster {c})"),
            None => format!("{head})"),
        };
        let forward_only = v.dag.forward_only();
        let cancel = suggest(
            "cancel",
            None,
            cli(&format!("cancel {id} --reason '…'")),
            if forward_only {
                "stop here for good: nothing is undone, what is deleted stays deleted"
            } else {
                "stop and unwind: every started step is undone"
            },
        );
        let give_up = if forward_only {
            "to stop it here for good (a delete undoes nothing)"
        } else {
            "to give up and unwind"
        };
        WhyCx {
            d,
            v,
            s,
            last_at,
            now,
            head,
            forward_only,
            cancel,
            give_up,
        }
    }

    /// When `step` last moved (`<time>, <n> ago`), else when the run did.
    fn since(&self, step: &str) -> String {
        self.last_at
            .get(step)
            .map(|t| format!("{t}, {} ago", human_duration(self.now.0 - t.0)))
            .unwrap_or_else(|| self.d.updated_at.clone())
    }
}

/// `why`: a finished run: how it ended and what is left to do.
fn why_finished(cx: &WhyCx<'_>) -> String {
    let WhyCx { d, head, .. } = cx;
    let how = match (&d.state, &d.failure, &d.undo.cause) {
        (RunState::Succeeded, _, _) => "every step succeeded".to_string(),
        // The failure's hint (below) says what was undone.
        (_, Some(f), _) => format!("it unwound because {}", failure_text(f)),
        (_, None, Some(c)) => {
            format!("it unwound because {c}; every started step was undone")
        }
        _ => "every started step was undone".to_string(),
    };
    let mut next = match &d.failure {
        Some(f) if d.state != RunState::Succeeded => format!(" {}", f.hint),
        _ => " Nothing blocks it and nothing is left to do.".to_string(),
    };
    // Where the cluster's names resolve is what a user trips over next.
    if let Some(r) = d.access.as_ref().and_then(|a| a.reach.as_deref()) {
        next.push_str(&format!(" Reach: {r}"));
    }
    format!(
        "{head} {} at {}: {how}.{next}",
        crate::runref::state_phrase(d.state),
        d.updated_at
    )
}

/// `why`: a run no worker has picked up.
fn why_pending(cx: &WhyCx<'_>, actions: &mut Vec<Suggestion>) -> String {
    let WhyCx {
        d, s, head, cancel, ..
    } = cx;
    let worker = crate::target::worker_command(s.target.as_deref());
    actions.push(suggest(
        "worker",
        None,
        worker.clone(),
        "start a worker that reaches this run's target",
    ));
    format!(
        "{head} is pending since {}: no worker has picked it up yet. It runs against \
             {}, so only a worker for that target takes it; start one with `{worker}`; \
             to drop it instead: `{}`.",
        d.created_at,
        crate::target::describe(s.target.as_deref()),
        cancel.command
    )
}

/// `why`: a parked run (`onFailure: pause` after a failure it cannot retry).
fn why_parked(cx: &WhyCx<'_>, actions: &mut Vec<Suggestion>) -> String {
    let WhyCx {
        d, head, cancel, ..
    } = cx;
    let id = &d.id;
    actions.push(suggest(
        "resume",
        None,
        cli(&format!("resume {id}")),
        "try the parked run again",
    ));
    actions.push(cancel.clone());
    format!(
        "{head} is parked since {}: {}. Nothing runs until an operator acts: after \
             upgrading to a binary that knows its steps, `{}`; or unwind it with `{}`.",
        d.updated_at,
        d.parked.as_deref().unwrap_or("unknown reason"),
        actions[0].command,
        cancel.command
    )
}

/// `why`: a run paused for an operator, with a deadline.
fn why_paused(cx: &WhyCx<'_>, actions: &mut Vec<Suggestion>, lead: &mut Option<String>) -> String {
    let WhyCx { d, head, .. } = cx;
    let id = &d.id;
    let since = |step: &str| cx.since(step);
    let p = d.paused.as_ref();
    let step = p.map(|p| p.step.clone()).unwrap_or_default();
    actions.push(suggest(
        "retry",
        None,
        cli(&format!("retry {id}")),
        if d.forward_only {
            "re-run the failed deletion and continue the delete"
        } else {
            "re-run the failed step with a fresh retry budget, then go on"
        },
    ));
    actions.push(suggest(
        "cancel",
        None,
        cli(&format!("cancel {id} --reason '…'")),
        match p.and_then(|p| p.pivot.as_deref()) {
            _ if d.forward_only => {
                "stop here for good: nothing is undone, what is deleted stays deleted"
            }
            Some(_) => "undo only the steps after the pivot; keep the rest",
            None => "unwind: every started step is undone",
        },
    ));
    let failed = d
        .failure
        .as_ref()
        .map(failure_text)
        .unwrap_or_else(|| format!("{step} failed"));
    *lead = Some(format!(
        "{head} {} since {}: {failed}.",
        p.map(|p| p.reason.clone()).unwrap_or_default(),
        since(&step),
    ));
    format!(
        "{head} {} since {}: {failed}.{}",
        p.map(|p| p.text.clone()).unwrap_or_default(),
        since(&step),
        d.failure
            .as_ref()
            .map(|f| format!(" {}", f.hint))
            .unwrap_or_default()
    )
}

/// `why`: a run stopped for an operator before any unwind: a stalled or failed step.
fn why_stalled(cx: &WhyCx<'_>, actions: &mut Vec<Suggestion>) -> String {
    let WhyCx {
        d,
        v,
        head,
        cancel,
        forward_only,
        give_up,
        ..
    } = cx;
    let (forward_only, give_up) = (*forward_only, *give_up);
    let id = &d.id;
    let since = |step: &str| cx.since(step);
    // A forward wait ran past its budget (a stalled step).
    let stalled: Vec<(&str, &str)> = v
        .dag
        .nodes
        .iter()
        .zip(&v.nodes)
        .filter_map(|(spec, st)| match &st.status {
            NodeStatus::Stalled { reason, .. } => Some((spec.name.as_str(), reason.as_str())),
            _ => None,
        })
        .collect();
    let mut parts = Vec::new();
    for (step, reason) in &stalled {
        parts.push(format!("{step} {reason} (stalled at {})", since(step)));
        actions.push(suggest(
            "retry",
            Some(step),
            cli(&format!("retry {id} --step {step}")),
            "poll again with a fresh wait budget",
        ));
    }
    actions.push(cancel.clone());
    let first = stalled.first().map(|s| s.0).unwrap_or("the step");
    format!(
        "{head} needs an operator: {}. It waited past its budget and does not go on, \
             or unwind, by itself. Once the cause is fixed, give the wait a fresh budget with \
             `{}`; {}: `{}`.",
        parts.join("; "),
        cli(&format!("retry {id} --step {first}")),
        if forward_only {
            give_up
        } else {
            "to give up and unwind every started step"
        },
        cancel.command
    )
}

/// `why`: a run stopped for an operator during its unwind: an undo gave up.
fn why_stuck_undo(cx: &WhyCx<'_>, actions: &mut Vec<Suggestion>) -> String {
    let WhyCx { d, v, head, .. } = cx;
    let id = &d.id;
    let since = |step: &str| cx.since(step);
    let stuck: Vec<(&str, String, u32)> = v
        .dag
        .nodes
        .iter()
        .zip(&v.nodes)
        .filter_map(|(spec, st)| match &st.status {
            NodeStatus::UndoFailed { error } => {
                Some((spec.name.as_str(), error.to_string(), st.undo_attempts))
            }
            _ => None,
        })
        .collect();
    let mut parts = Vec::new();
    for (step, err, n) in &stuck {
        parts.push(format!(
            "the undo of {step} gave up after {n} attempt{} at {}: {err}",
            if *n == 1 { "" } else { "s" },
            since(step)
        ));
        actions.push(suggest(
            "resolve",
            Some(step),
            cli(&format!("resolve {id} --step {step} --note '…'")),
            "you removed or checked the resource by hand: mark this undo done",
        ));
        actions.push(suggest(
            "retry",
            Some(step),
            cli(&format!("retry {id} --step {step}")),
            "run the undo again with a fresh attempt budget",
        ));
    }
    actions.push(suggest(
        "resume",
        None,
        cli(&format!("resume {id}")),
        "retry every stuck undo",
    ));
    let first = stuck.first().map(|s| s.0).unwrap_or("the step");
    format!(
        "{head} is stuck while unwinding (it unwound because {}): {}. Unwinding cannot go on until an \
             operator acts. If you removed the resource yourself, record it with `{}`; to \
             try the undo again once the cause is fixed: `{}` (or `{}` for every stuck undo).",
        d.failure
            .as_ref()
            .map(failure_text)
            .or_else(|| d.undo.cause.clone())
            .unwrap_or_else(|| "of an earlier failure".into()),
        parts.join("; "),
        cli(&format!("resolve {id} --step {first} --note '…'")),
        cli(&format!("retry {id} --step {first}")),
        cli(&format!("resume {id}")),
    )
}

/// `why`: a run unwinding.
fn why_unwinding(cx: &WhyCx<'_>, actions: &mut Vec<Suggestion>) -> String {
    let WhyCx {
        d, v, head, now, ..
    } = cx;
    let now = *now;
    let id = &d.id;
    let since = |step: &str| cx.since(step);
    let step = d.step.clone().unwrap_or_default();
    let mut t = format!(
        "{head} is unwinding because {}: {}{}.",
        d.undo.cause.as_deref().unwrap_or("of an earlier failure"),
        d.blocked_on,
        since_unless_said(&d.blocked_on, &since(&step)),
    );
    if let Some(b) = v
        .node(&step)
        .filter(|n| matches!(n.status, NodeStatus::UndoWaiting { .. }))
        .and_then(|n| {
            let budget = v.dag.node(&step)?.undo_retry.wait_budget()?;
            Some(budget_text(n.undo_wait_since?, budget, now, "gives up"))
        })
    {
        t.push_str(&b);
    }
    if matches!(
        v.node(&step).map(|n| &n.status),
        Some(NodeStatus::UndoRetryScheduled { .. } | NodeStatus::UndoWaiting { .. })
    ) {
        let r = suggest(
            "retry",
            Some(&step),
            cli(&format!("retry {id} --step {step}")),
            "run the undo now instead of waiting",
        );
        t.push_str(&format!(" To try the undo now: `{}`.", r.command));
        actions.push(r);
    } else {
        t.push_str(" Nothing is needed from an operator; follow it with `");
        t.push_str(&cli(&format!("watch {id}")));
        t.push_str("`.");
    }
    t
}

/// `why`: a running or waiting run: what it is doing now.
fn why_running(cx: &WhyCx<'_>, actions: &mut Vec<Suggestion>) -> String {
    let WhyCx {
        d,
        v,
        s,
        head,
        cancel,
        now,
        give_up,
        ..
    } = cx;
    let (now, give_up) = (*now, *give_up);
    let id = &d.id;
    let since = |step: &str| cx.since(step);
    let step = d.step.clone().unwrap_or_default();
    let mut t = format!(
        "{head} is {}: {}{}.",
        d.state,
        d.blocked_on,
        since_unless_said(&d.blocked_on, &since(&step)),
    );
    match v.node(&step).map(|n| &n.status) {
        Some(NodeStatus::RetryScheduled { error, .. }) => {
            let r = suggest(
                "retry",
                Some(&step),
                cli(&format!("retry {id} --step {step}")),
                "run the next attempt now",
            );
            let code = error
                .code
                .as_deref()
                .map(|c| format!(" (Azure/Kubernetes code {c})"))
                .unwrap_or_default();
            t.push_str(&format!(
                " The last attempt failed{code}; the engine retries on its own. To retry \
                     now: `{}`; {give_up}: `{}`.",
                r.command, cancel.command
            ));
            actions.push(r);
        }
        Some(NodeStatus::Waiting { .. }) => {
            let r = suggest(
                "retry",
                Some(&step),
                cli(&format!("retry {id} --step {step}")),
                "check again now",
            );
            if let Some(b) = v.node(&step).and_then(|n| {
                let budget = v.dag.node(&step)?.retry.wait_budget()?;
                Some(budget_text(n.wait_since?, budget, now, "stalls"))
            }) {
                t.push_str(&b);
            }
            t.push_str(&format!(
                " It polls on a durable timer. To check now: `{}`; {give_up}: `{}`.",
                r.command, cancel.command
            ));
            actions.push(r);
        }
        _ => match (&s.lease_owner, d.lease_expired) {
            (Some(o), false) => t.push_str(&format!(
                " The worker {o} is executing it; nothing is needed. To stop it: `{}`.",
                cancel.command
            )),
            _ => t.push_str(&format!(
                " No worker holds it: start `{}` against this journal. To stop it: `{}`.",
                cli("worker"),
                cancel.command
            )),
        },
    }
    actions.push(cancel.clone());
    t
}

/// ` (since …)` after `line`, unless the line already says since when (a waiting step's
/// summary carries its own "waiting since").
fn since_unless_said(line: &str, since: &str) -> String {
    if line.contains(" since ") {
        String::new()
    } else {
        format!(" (since {since})")
    }
}

/// A wait's budget as `why` tells it: how much of it is spent and what happens when it
/// runs out (`then`: "stalls" for a forward wait, "gives up" for an undo).
fn budget_text(
    since: Timestamp,
    budget: std::time::Duration,
    now: Timestamp,
    then: &str,
) -> String {
    let budget_ms = i64::try_from(budget.as_millis()).unwrap_or(i64::MAX);
    let spent = (now.0 - since.0).max(0);
    format!(
        " Its wait budget is {}, {} of it spent: it {then} at {} if nothing changes.",
        human_duration(budget_ms),
        human_duration(spent),
        Timestamp(since.0.saturating_add(budget_ms)),
    )
}

/// One journal event as `history` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    /// Position in the journal.
    pub seq: i64,
    /// When (RFC 3339).
    pub at: String,
    /// Event kind.
    pub kind: String,
    /// Node.
    pub node: Option<String>,
    /// One-line summary.
    pub summary: String,
    /// The event as stored (decoded JSON, or the raw text when it does not decode).
    pub data: serde_json::Value,
    /// A failure event (retry scheduled, failed, undo failed).
    pub failure: bool,
}

/// Summarise one event in a line.
pub fn event_summary(ev: &Event) -> String {
    match ev {
        Event::NodeStarted { attempt, .. } => format!("attempt {attempt} starts"),
        Event::NodeCheckpoint { .. } => "checkpoint saved".into(),
        Event::NodeWaiting { until, reason, .. } => format!("waits until {until}: {reason}"),
        Event::NodeStalled { reason, .. } => format!("stalled: {reason}"),
        Event::NodeRetryScheduled {
            attempt,
            next_at,
            error,
            ..
        } => format!("attempt {attempt} failed: {error}; next at {next_at}"),
        Event::NodeSucceeded { .. } => "succeeded".into(),
        Event::NodeFailed { error, reason, .. } => format!("failed ({reason}): {error}"),
        Event::UnwindStarted { cause } => format!("unwinding: {}", unwind_cause_text(cause)),
        Event::UndoStarted { attempt, .. } => format!("undo attempt {attempt} starts"),
        Event::UndoCheckpoint { .. } => "undo checkpoint saved".into(),
        Event::UndoWaiting { until, reason, .. } => format!("undo waits until {until}: {reason}"),
        Event::UndoRetryScheduled {
            attempt,
            next_at,
            error,
            ..
        } => format!("undo attempt {attempt} failed: {error}; next at {next_at}"),
        Event::NodeUndone { skipped: true, .. } => "nothing to undo".into(),
        Event::NodeUndone { .. } => "undone".into(),
        Event::UndoFailed { error, reason, .. } => format!("undo gave up ({reason}): {error}"),
        Event::UndoResolved { by, note, .. } => format!("resolved by {by}: {note}"),
        Event::Operator {
            command_id,
            command,
            by,
            reason,
            outcome,
        } => {
            let why = if reason.is_empty() {
                String::new()
            } else {
                format!(" ({reason})")
            };
            format!("#{command_id} `{command}` by {by}{why}: {outcome}")
        }
        Event::RunPaused {
            step,
            cause,
            unwind_at,
        } => {
            let why = match cause {
                hcp_runtime::PauseCause::Policy => "by policy".to_string(),
                hcp_runtime::PauseCause::PastPivot { pivot } => format!("past the pivot {pivot}"),
            };
            let until = unwind_at
                .map(|t| format!("; unwinds at {t} unless retried"))
                .unwrap_or_default();
            format!("paused {why} after {step} failed: nothing undone{until}")
        }
        Event::NodeKept { reason, .. } => format!("kept, never undone ({reason})"),
        Event::RunParked { reason, .. } => format!("parked: {reason}"),
        Event::RunUnparked => "unparked".into(),
        Event::RunFinished { state } => format!("finished: {state}"),
    }
}

/// The journal as `history` shows it (`step`: only that node's events; `failed`: only
/// failures).
pub fn history(rec: &RunRecord, step: Option<&str>, failed: bool) -> Vec<HistoryRow> {
    // The history starts with the run's creation: who, when, with which file and binary
    // . Not a journal event (seq 0): the run row itself records it.
    let l = &rec.summary.labels;
    let created = (step.is_none() && !failed).then(|| {
        let by = l
            .get("started-by")
            .map_or_else(|| "an unrecorded user".to_string(), Clone::clone);
        let mut summary = format!("run created by {by} at {}", ts(rec.summary.created_at));
        if let Some(c) = l.get("config") {
            summary.push_str(&format!(" from {c}"));
            if let Some(h) = l.get("config-sha256") {
                summary.push_str(&format!(" (sha256 {h})"));
            }
        }
        if let Some(v) = l.get("version") {
            summary.push_str(&format!(" with hcp-workflow {v}"));
        }
        HistoryRow {
            seq: 0,
            at: ts(rec.summary.created_at),
            kind: "run_created".into(),
            node: None,
            summary,
            data: serde_json::json!({
                "started_by": l.get("started-by"), "config": l.get("config"),
                "config_sha256": l.get("config-sha256"), "version": l.get("version"),
                "workflow": rec.summary.workflow, "cluster": l.get("cluster"),
            }),
            failure: false,
        }
    });
    created
        .into_iter()
        .chain(
            rec.events
                .iter()
                .filter(|e| step.is_none_or(|s| e.node.as_deref() == Some(s)))
                .filter_map(|e| {
                    let decoded = serde_json::from_str::<Event>(&e.data).ok();
                    let failure = matches!(
                        decoded,
                        Some(
                            Event::NodeRetryScheduled { .. }
                                | Event::NodeFailed { .. }
                                | Event::UndoRetryScheduled { .. }
                                | Event::UndoFailed { .. }
                        )
                    );
                    if failed && !failure {
                        return None;
                    }
                    let data = serde_json::from_str(&e.data)
                        .unwrap_or_else(|_| serde_json::Value::String(e.data.clone()));
                    Some(HistoryRow {
                        seq: e.seq,
                        at: ts(e.at),
                        kind: e.kind.clone(),
                        node: e.node.clone(),
                        summary: decoded
                            .as_ref()
                            .map(event_summary)
                            .unwrap_or_else(|| "(does not decode)".into()),
                        data,
                        failure,
                    })
                }),
        )
        .collect()
}

/// One resource in the inventory.
#[derive(Debug, Clone, Serialize)]
pub struct InventoryRow {
    /// The `cluster` label of the run that last touched it (`-` when unlabelled).
    pub cluster: String,
    /// Resource id.
    pub id: String,
    /// `azure`, `kubernetes`, `file`.
    pub kind: String,
    /// Resource type.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// Last action: `created`, `adopted`, `kept`, or `resolved` (its undo gave up and an
    /// operator declared it done by hand: it may still exist).
    pub action: String,
    /// `resolved by alice@host: deleted in the portal`, or another ledger note.
    pub note: Option<String>,
    /// Outlives the cluster.
    pub persistent: bool,
    /// The run that last touched it (`run_id` in JSON, as everywhere a run is named).
    #[serde(rename = "run_id")]
    pub run: String,
    /// That run's state.
    pub run_state: RunState,
    /// The node that did it.
    pub node: String,
    /// When.
    pub at: Option<String>,
    /// A later run that adopted (and, unwinding, kept) it, when that is not the run that
    /// created it: the run above stays the creator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<String>,
    /// What that later run did: `adopted` or `kept`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_action: Option<String>,
    /// `--orphans`: created by a run that has not finished yet (its create or unwind is
    /// still going): not an orphan yet, but not cleaned up either.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unfinished: bool,
}

/// Resources per cluster from every run's ledger: what is still present (created, adopted
/// or kept and not deleted or found gone by a later entry of any run; resources whose
/// stuck undo an operator resolved by hand stay, as `resolved`, with who and their note).
/// With `orphans`: only resources *created* (or resolved by hand) by runs that ended
/// without success (rolled back, cancelled, parked, needing an operator) that no later run
/// deleted.
pub fn inventory(runs: &[(RunSummary, Folded)], orphans: bool) -> Vec<InventoryRow> {
    let mut all: Vec<(usize, LedgerEntry)> = Vec::new();
    for (i, (_, f)) in runs.iter().enumerate() {
        for e in ledger::ledger_of(&f.view) {
            all.push((i, e));
        }
    }
    // Journal time orders entries across runs; ties keep run order (oldest run first).
    all.sort_by_key(|(i, e)| (e.at.map(|t| t.0).unwrap_or(i64::MAX), *i));
    let mut last: BTreeMap<String, (usize, LedgerEntry)> = BTreeMap::new();
    // The run that created each resource (until a later entry says it went).
    let mut creator: BTreeMap<String, (usize, LedgerEntry)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (i, e) in all {
        if !last.contains_key(&e.record.id) {
            order.push(e.record.id.clone());
        }
        match e.record.action {
            LedgerAction::Created => {
                creator.insert(e.record.id.clone(), (i, e.clone()));
            }
            LedgerAction::Deleted | LedgerAction::Gone => {
                creator.remove(&e.record.id);
            }
            _ => {}
        }
        last.insert(e.record.id.clone(), (i, e));
    }
    // Adopted or kept by a later run: the creator stays the row's run.
    let attributed =
        |id: &str, (i, e): (usize, LedgerEntry)| match (&e.record.action, creator.get(id)) {
            (LedgerAction::Adopted | LedgerAction::Kept, Some((ci, ce))) if *ci != i => {
                let later = (
                    runs[i].0.id.to_string(),
                    e.record.action.as_str().to_string(),
                );
                (*ci, ce.clone(), Some(later))
            }
            _ => (i, e, None),
        };
    let ended_badly = |s: RunState| {
        matches!(
            s,
            RunState::RolledBack | RunState::Cancelled | RunState::Failed | RunState::NeedsOperator
        )
    };
    let mut rows: Vec<InventoryRow> = order
        .into_iter()
        .filter_map(|id| {
            let l = last.remove(&id)?;
            Some(attributed(&id, l))
        })
        .filter(|(i, e, _)| {
            let state = runs[*i].0.state;
            if orphans {
                // Resolved by hand counts: an auditor checks that it really went. A run
                // that has not finished holds what it created (listed as unfinished).
                matches!(
                    e.record.action,
                    LedgerAction::Created | LedgerAction::Resolved
                ) && (ended_badly(state) || !state.is_terminal())
            } else {
                matches!(
                    e.record.action,
                    LedgerAction::Created
                        | LedgerAction::Adopted
                        | LedgerAction::Updated
                        | LedgerAction::Kept
                        | LedgerAction::Resolved
                )
            }
        })
        .map(|(i, e, later)| {
            let s = &runs[i].0;
            let (last_run_id, last_action) = later.unzip();
            InventoryRow {
                last_run_id,
                last_action,
                unfinished: orphans && !s.state.is_terminal() && !ended_badly(s.state),
                cluster: s
                    .labels
                    .get("cluster")
                    .cloned()
                    .unwrap_or_else(|| "-".into()),
                id: e.record.id.clone(),
                kind: e.record.kind.clone(),
                resource_type: e.record.resource_type.clone(),
                action: e.record.action.as_str().into(),
                note: e.record.note.clone(),
                persistent: e.record.persistent,
                run: s.id.to_string(),
                run_state: s.state,
                node: e.node.clone(),
                at: e.at.map(ts),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    rows
}

/// A run as the cluster view names it.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRun {
    pub run_id: String,
    pub short_id: String,
    pub workflow: String,
    pub state: RunState,
    /// When the run was journaled.
    pub created_at: String,
    /// Its last change (when it finished, for a finished run).
    pub updated_at: String,
    /// [`ClusterRun::updated_at`] in epoch milliseconds, for comparisons.
    #[serde(skip)]
    pub updated_ms: i64,
}

impl ClusterRun {
    fn of(s: &RunSummary) -> Self {
        let id = s.id.to_string();
        ClusterRun {
            short_id: crate::runref::short(&id).to_string(),
            run_id: id,
            workflow: s.workflow.clone(),
            state: s.state,
            created_at: ts(s.created_at),
            updated_at: ts(s.updated_at),
            updated_ms: s.updated_at.0,
        }
    }
}

/// One row of `clusters`: the cluster's own state, not only its latest run's.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRow {
    pub cluster: String,
    /// What it is now, by [`hcp_workflows::cluster_state`]: `exists`, `partially-deleted`
    /// (a delete began and did not finish), `deleted`, `partial` (never created completely,
    /// resources recorded as still present) or `absent`.
    pub status: Status,
    /// The successful create it exists by (`exists` only).
    pub created_by: Option<ClusterRun>,
    /// The delete that removed it (`deleted`), or began to and did not finish
    /// (`partially-deleted`).
    pub deleted_by: Option<ClusterRun>,
    /// `partially-deleted`: the command that finishes the delete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<String>,
    /// Its latest run, whatever its outcome.
    pub last_run: ClusterRun,
    /// An unfinished run working on it now (at most one: one run per cluster).
    pub active_run: Option<ClusterRun>,
    /// Resources the journal records as still present (see `inventory`).
    pub resources: usize,
    /// Of those, how many outlive the cluster (persistent).
    pub persistent: usize,
    /// Its newest recorded `verify`, if any.
    pub verified: Option<Verified>,
}

/// A cluster's recorded verify as the views show it: when, by whom, and what was not ok.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// When (RFC 3339).
    pub at: String,
    /// Epoch milliseconds (for `/metrics`).
    #[serde(skip)]
    pub at_ms: i64,
    /// Who verified (`user@host`, or a worker's id).
    pub by: String,
    /// Everything was as the journal says.
    pub ok: bool,
    /// Verdict → rows.
    pub counts: BTreeMap<String, usize>,
    /// Check → rows that were not ok (every check that ran is here, 0 when ok).
    pub by_check: BTreeMap<String, usize>,
    /// The rows that were not ok, as verify printed them.
    pub drift: Vec<DriftRow>,
}

/// One check that was not ok.
#[derive(Debug, Clone, Serialize)]
pub struct DriftRow {
    pub verdict: String,
    pub check: String,
    pub resource: String,
    pub expected: String,
    pub found: String,
    pub fix: Option<String>,
}

/// The view of a recorded verify report, or `None` when its data does not read as one.
pub fn verified(r: &hcp_runtime::ReportRecord) -> Option<Verified> {
    let doc: serde_json::Value = serde_json::from_str(&r.data).ok()?;
    let text = |v: &serde_json::Value, k: &str| {
        v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string()
    };
    let mut by_check = BTreeMap::new();
    let mut drift = Vec::new();
    for item in doc.get("items")?.as_array()? {
        let verdict = text(item, "verdict");
        let check = text(item, "check");
        let n = by_check.entry(check.clone()).or_insert(0usize);
        if verdict != "ok" {
            *n += 1;
            drift.push(DriftRow {
                verdict,
                check,
                resource: text(item, "resource"),
                expected: text(item, "expected"),
                found: text(item, "found"),
                fix: item.get("fix").and_then(|f| f.as_str()).map(str::to_string),
            });
        }
    }
    let counts = doc
        .get("counts")
        .and_then(|c| c.as_object())
        .map(|c| {
            c.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0) as usize))
                .collect()
        })
        .unwrap_or_default();
    Some(Verified {
        at: ts(r.at),
        at_ms: r.at.0,
        by: r.by.clone(),
        ok: r.ok,
        counts,
        by_check,
        drift,
    })
}

/// Attach each cluster's newest verify (`latest`: subject `cluster/<name>` → report). A
/// verify recorded before the cluster's deletion describes what is gone: it is not shown
/// as the cluster's current state.
pub fn attach_verified(rows: &mut [ClusterRow], latest: &HashMap<String, Verified>) {
    for r in rows {
        r.verified = latest
            .get(&r.cluster)
            .filter(|v| describes(v, r.deleted_by.as_ref().map(|d| d.updated_ms)))
            .cloned();
    }
}

/// When the run that deleted the cluster (or began to) last moved: a verify older than
/// that describes what is gone. `None` for a cluster no delete decides.
pub fn deleted_at_ms(state: &hcp_workflows::cluster_state::ClusterState) -> Option<i64> {
    match state.status {
        Status::Deleted | Status::PartiallyDeleted => {
            state.decided_by.as_ref().map(|d| d.updated_at.0)
        }
        Status::Exists | Status::Partial | Status::Absent => None,
    }
}

/// Whether verify `v` still describes its cluster, deleted at `deleted_at_ms` if at all.
pub fn describes(v: &Verified, deleted_at_ms: Option<i64>) -> bool {
    deleted_at_ms.is_none_or(|d| v.at_ms > d)
}

/// The cluster view of `runs` (oldest first), one row per `cluster` label.
pub fn clusters(runs: &[(RunSummary, Folded)]) -> Vec<ClusterRow> {
    let present = inventory(runs, false);
    let mut names: Vec<String> = runs
        .iter()
        .filter_map(|(s, _)| s.labels.get("cluster").cloned())
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let mine: Vec<&RunSummary> = runs
            .iter()
            .map(|(s, _)| s)
            .filter(|s| s.labels.get("cluster") == Some(&name))
            .collect();
        // Its last run whatever the workflow (a run of one this binary does not know too).
        let Some(last) = mine.iter().max_by_key(|s| (s.created_at.0, s.id)) else {
            continue;
        };
        let rows: Vec<&InventoryRow> = present.iter().filter(|r| r.cluster == name).collect();
        let resources = rows.len();
        let persistent = rows.iter().filter(|r| r.persistent).count();
        let state = hcp_workflows::cluster_state::of_runs(
            &name,
            mine.iter().copied(),
            resources > persistent,
        );
        let decided = state.decided_by.as_ref().map(ClusterRun::of);
        let (created_by, deleted_by) = match state.status {
            Status::Exists => (decided, None),
            Status::Deleted | Status::PartiallyDeleted => (None, decided),
            Status::Partial | Status::Absent => (None, None),
        };
        let finish = crate::standing::finish_command(&state, None);
        let status = state.status;
        out.push(ClusterRow {
            cluster: name.clone(),
            status,
            finish,
            created_by,
            deleted_by,
            last_run: ClusterRun::of(last),
            active_run: state.active.as_ref().map(ClusterRun::of),
            resources,
            persistent,
            verified: None,
        });
    }
    out
}

/// The sentence about a cluster that `why cluster/<name>` starts with.
pub fn cluster_sentence(c: &ClusterRow) -> String {
    let phrase = |r: &ClusterRun| {
        format!(
            "run {} ({}, {} at {})",
            r.short_id,
            r.workflow,
            crate::runref::state_phrase(r.state),
            r.updated_at
        )
    };
    let mut s = match c.status.as_str() {
        "exists" => format!(
            "Cluster {} exists: created by {}; {} resources recorded as present.",
            c.cluster,
            c.created_by.as_ref().map(phrase).unwrap_or_default(),
            c.resources
        ),
        "deleted" => format!(
            "Cluster {} was deleted by {}{}.",
            c.cluster,
            c.deleted_by.as_ref().map(phrase).unwrap_or_default(),
            if c.persistent > 0 {
                format!("; {} persistent resources kept", c.persistent)
            } else {
                String::new()
            }
        ),
        "partially-deleted" => format!(
            "Cluster {} is partially deleted: {} began deleting it and did not finish, so some of it may be gone; {} resources are recorded as still present. Finish the delete: {}.",
            c.cluster,
            c.deleted_by.as_ref().map(phrase).unwrap_or_default(),
            c.resources,
            c.finish.as_deref().unwrap_or("hcp-workflow why")
        ),
        "partial" => format!(
            "Cluster {} was never created completely, and {} of its resources are recorded as still present (`hcp-workflow inventory --cluster {}`).",
            c.cluster, c.resources, c.cluster
        ),
        _ => format!(
            "Cluster {} does not exist: no run of it succeeded, and nothing of it is recorded as present.",
            c.cluster
        ),
    };
    let last_is_decisive = c
        .created_by
        .as_ref()
        .or(c.deleted_by.as_ref())
        .is_some_and(|r| r.run_id == c.last_run.run_id);
    // The paragraph about the latest run follows and names it ("Run … is …"): when that
    // run is not the one the status rests on, say only that it came later.
    if !last_is_decisive && (c.created_by.is_some() || c.deleted_by.is_some()) {
        s.push_str(" Since then:");
    }
    s
}

/// Words a search finds a run by beyond its list row: every label (who
/// started it, its config), failed steps and undos with their error codes, who resolved an
/// undo and their note, who cancelled and why, and every operator command's author and
/// reason. They stay findable after the run finished.
pub fn journal_words(rec: &RunRecord) -> Vec<String> {
    let mut w: Vec<String> = rec.summary.labels.values().cloned().collect();
    for e in &rec.events {
        let Ok(ev) = serde_json::from_str::<Event>(&e.data) else {
            continue;
        };
        match ev {
            Event::NodeFailed { node, error, .. } | Event::UndoFailed { node, error, .. } => {
                w.push(node);
                w.extend(error.code);
                w.push(error.kind);
            }
            Event::UndoResolved { node, by, note } => w.extend([node, by, note]),
            Event::UnwindStarted {
                cause: UnwindCause::Cancelled { by, reason },
            } => w.extend([by, reason]),
            Event::Operator { by, reason, .. } => w.extend([by, reason]),
            _ => {}
        }
    }
    w
}

#[cfg(test)]
mod paused_tests {
    use super::*;

    fn summary(state: RunState, wake_at: Option<Timestamp>) -> RunSummary {
        RunSummary {
            id: uuid::Uuid::nil(),
            workflow: "create-cluster".into(),
            workflow_version: 1,
            labels: Default::default(),
            idempotency_key: None,
            exclusive_key: None,
            target: None,
            state,
            blocked_on: String::new(),
            current_step: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            wake_at,
            lease_owner: None,
            lease_epoch: 0,
            lease_expires_at: None,
            commands_pending: false,
        }
    }

    /// A paused run whose deadline passed with no worker running says so (nothing else
    /// would unwind it); one without a deadline waits for an operator, not a worker.
    #[test]
    fn a_paused_run_past_its_deadline_names_the_missing_worker() {
        let now = Timestamp(10 * 60_000);
        let due = summary(RunState::NeedsOperator, Some(Timestamp(0)));
        assert!(no_worker(&due, now).is_some_and(|s| s.starts_with("no worker")));
        let future = summary(RunState::NeedsOperator, Some(Timestamp(20 * 60_000)));
        assert_eq!(no_worker(&future, now), None);
        let forever = summary(RunState::NeedsOperator, None);
        assert_eq!(no_worker(&forever, now), None);
    }
}
