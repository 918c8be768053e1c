//! The one follower of a run, shared by `start`, `drive`, `watch` (and `selftest`): live
//! progress (one line per step transition, bars on a terminal, NDJSON events with
//! `--output json`, one line per finished step with `--compact`) and one outcome block.
//!
//! Every line says when its step moved as the journal recorded it (the time since the run
//! was created) and, once a step ended, how long it took: a follower that comes late
//! (`watch` of a run half done, `drive` after a Ctrl-C) replays the finished steps with
//! their own times, not with the time it happens to read them.

use crate::output;
use crate::services::OutputFormat;
use anyhow::{Result, bail};
use hcp_runtime::{JournalStore, NodeState, NodeStatus, RunExit, RunState, RunView, Timestamp};
use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// The follower's own flags, the same on `start`, `drive` and `watch`.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct FollowArgs {
    /// One line per step as it ends (succeeded, failed, undone), no progress bars, even on
    /// a terminal: for narrow terminals, logs and screen readers.
    #[arg(long)]
    pub compact: bool,
}

/// Follow `run` to its end with live progress: drive it in this process, or, when another
/// process already executes this SQLite journal, watch it while that process runs it.
/// Exit code: 0 succeeded, 1 ended otherwise, 130 when interrupted (the run is fine).
pub(crate) async fn drive(
    e: &hcp_runtime::Engine,
    run: hcp_runtime::RunId,
    target: Option<&str>,
    out: OutputFormat,
    f: FollowArgs,
) -> Result<u8> {
    let created_at = e
        .store()
        .load_run(run)
        .await?
        .map(|r| r.summary.created_at)
        .unwrap_or_else(|| crate::services::clock().now());
    let progress = Progress::new(out, run, created_at, f.compact);
    let ticker = progress.tick(e, run, Duration::from_millis(150));
    let interrupted = match e.drive(run, crate::services::shutdown_signal()).await {
        Ok(exit) => matches!(exit, RunExit::Shutdown),
        Err(hcp_runtime::EngineError::Store(hcp_runtime::StoreError::ExecutorBusy(msg))) => {
            if out == OutputFormat::Text {
                progress.eprintln(&format!(
                    "another process executes this journal ({msg}); following run {run} while it runs it"
                ));
            }
            watch_until_settled(e, run).await?
        }
        Err(err) => {
            ticker.abort();
            progress.finish();
            return Err(err.into());
        }
    };
    ticker.abort();
    // The ticker may still be inside an update: wait for it, so nothing is drawn after
    // the bars are cleared.
    let _ = ticker.await;
    let view = e.view(run).await?;
    progress.update(&view);
    progress.finish();
    report(e.store(), run, &view, interrupted, target, out).await
}

/// `watch`: follow a run another process (or nobody yet) executes, by reading its journal
/// every `interval` (sooner on this process's wake-ups), until it ends. The same lines,
/// bars and outcome as `start`. `interrupt` is notified on Ctrl-C by the caller: a
/// `Notify` keeps the permit while the loop reads the journal, so an interrupt is never
/// missed between two waits.
pub(crate) async fn watch(
    store: &Arc<dyn JournalStore>,
    db: &str,
    run: hcp_runtime::RunId,
    out: OutputFormat,
    f: FollowArgs,
    interval: Duration,
    interrupt: &tokio::sync::Notify,
) -> Result<u8> {
    let mut wake = store.subscribe();
    let Some(rec) = store.load_run(run).await? else {
        bail!(
            "run {run} not found in {}",
            crate::services::store::shown_url(db)
        );
    };
    let target = rec.summary.target.clone();
    let first = crate::views::model::fold(&rec).map_err(|e| anyhow::anyhow!("run {run}: {e}"))?;
    let state = first.view.state();
    match out {
        OutputFormat::Json => output::event(
            "started",
            &serde_json::json!({
                "at": crate::services::clock().now().to_rfc3339(), "run_id": run,
                "short_id": crate::runref::short(&run.to_string()),
                "workflow": first.view.dag.workflow,
                "cluster": rec.summary.labels.get("cluster"), "state": state,
                "blocked_on": rec.summary.blocked_on,
            }),
        ),
        OutputFormat::Text => println!(
            "run {run} ({}) {}",
            first.view.dag.workflow,
            crate::runref::state_phrase(state)
        ),
    }
    let progress = Progress::new(out, run, rec.summary.created_at, f.compact);
    loop {
        let Some(rec) = store.load_run(run).await? else {
            bail!(
                "run {run} not found in {}",
                crate::services::store::shown_url(db)
            );
        };
        let view = crate::views::model::fold(&rec)
            .map_err(|e| anyhow::anyhow!("run {run}: {e}"))?
            .view;
        progress.update(&view);
        let state = view.state();
        if state.is_terminal() {
            progress.finish();
            return report(store, run, &view, false, target.as_deref(), out).await;
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            r = wake.changed() => {
                if r.is_err() {
                    tokio::time::sleep(interval).await;
                }
            }
            () = interrupt.notified() => {
                progress.finish();
                eprintln!(
                    "stopped watching; run {run} {} and goes on",
                    crate::runref::state_phrase(state)
                );
                // Interrupted, the run is fine: 130, whichever listener saw the signal.
                return Ok(130);
            }
        }
    }
}

/// The outcome of a followed run, the same for every follower: the outcome line (✓/✗, the
/// run's own duration), the run line, then what was undone and why, what was kept and the
/// commands that go on, or the ledger and how to reach the cluster. With `--output json`
/// one `finished` event. Exit code: 0 succeeded, 130 interrupted before the end, else 1.
pub(crate) async fn report(
    store: &Arc<dyn JournalStore>,
    run: hcp_runtime::RunId,
    view: &RunView,
    interrupted: bool,
    target: Option<&str>,
    out: OutputFormat,
) -> Result<u8> {
    let state = view.state();
    let rec = store.load_run(run).await?;
    let now = crate::services::clock().now();
    // A run that ended took until its last event, whenever it is looked at; one that goes
    // on has taken until now.
    let ended_at = rec
        .as_ref()
        .filter(|_| state.is_terminal() || view.paused.is_some())
        .and_then(|r| r.events.last().map(|e| e.at))
        .unwrap_or(now);
    let elapsed = rec
        .as_ref()
        .map(|r| {
            Duration::from_millis(u64::try_from(ended_at.0 - r.summary.created_at.0).unwrap_or(0))
        })
        .unwrap_or_default();
    let ledger = hcp_runtime::ledger::ledger_of(view);
    match out {
        // Stopped following: no `finished` line (the run goes on; exit 130).
        OutputFormat::Json if interrupted && !state.is_terminal() => {}
        OutputFormat::Json => {
            let failure = rec
                .as_ref()
                .and_then(|r| crate::views::model::detail(r, now).failure);
            let ledger: Vec<crate::views::model::LedgerRow> = ledger
                .iter()
                .map(crate::views::model::LedgerRow::from)
                .collect();
            output::event(
                "finished",
                &serde_json::json!({
                    "run_id": run, "short_id": crate::runref::short(&run.to_string()),
                    "workflow": view.dag.workflow, "state": state,
                    "blocked_on": view.blocked_on(), "elapsed_ms": elapsed.as_millis() as u64,
                    "failure": failure, "ledger": ledger,
                    "access": crate::views::model::AccessView::of(view),
                }),
            )
        }
        OutputFormat::Text => {
            let color = crate::style::stdout_color();
            let cause = match &view.unwinding {
                Some(hcp_runtime::UnwindCause::NodeFailed { node }) => {
                    Some(format!("{node} failed"))
                }
                Some(hcp_runtime::UnwindCause::Cancelled { by, .. }) => {
                    Some(format!("cancelled by {by}"))
                }
                Some(hcp_runtime::UnwindCause::PauseExpired { node, deadline }) => Some(format!(
                    "{node} failed; paused until {deadline} and nobody retried it"
                )),
                None => None,
            };
            if let Some(p) = view.paused.as_ref().filter(|_| !interrupted) {
                for line in paused_outcome(view, p, run, elapsed, target) {
                    println!("{}", paint_mark(&line, color));
                }
            } else if !interrupted || state.is_terminal() {
                let line = outcome_line(
                    &view.dag.workflow,
                    state,
                    elapsed,
                    cause.as_deref(),
                    &hcp_runtime::ledger::UnwindSummary::of(view),
                );
                println!("{}", paint_mark(&line, color));
            }
            println!("run {run} {}", crate::runref::state_phrase(state));
            if interrupted && !state.is_terminal() {
                // What the ledger says so far, not a stock sentence.
                let undone = view
                    .nodes
                    .iter()
                    .filter(|n| matches!(n.status, NodeStatus::Undone { .. }))
                    .count();
                let so_far = if view.unwinding.is_some() {
                    format!(
                        "it was unwinding ({undone} of {} steps undone so far) and resumes the unwind where it stopped",
                        unwind_total(view)
                    )
                } else {
                    "nothing was undone".to_string()
                };
                println!(
                    "stopped following; run {run} is safely resumable ({so_far}). Continue it: {}   or let a worker run it: {}   watch it: hcp-workflow{} watch {run}",
                    crate::target::command(target, &format!("drive {run}")),
                    crate::target::worker_command(target),
                    crate::target::database_flag()
                );
            } else if state != RunState::Succeeded {
                match &view.unwinding {
                    Some(hcp_runtime::UnwindCause::NodeFailed { node }) => {
                        let err = view
                            .node(node)
                            .and_then(|n| n.last_error.as_ref())
                            .map(ToString::to_string)
                            .unwrap_or_default();
                        println!("unwound because {node} failed: {err}");
                    }
                    Some(hcp_runtime::UnwindCause::Cancelled { by, reason }) => {
                        println!("unwound because {by} cancelled it: {reason}");
                    }
                    Some(hcp_runtime::UnwindCause::PauseExpired { node, deadline }) => {
                        let err = view
                            .node(node)
                            .and_then(|n| n.last_error.as_ref())
                            .map(ToString::to_string)
                            .unwrap_or_default();
                        println!(
                            "unwound because {node} failed and nobody retried it before the pause's deadline {deadline}: {err}"
                        );
                    }
                    None => {}
                }
                println!("blocked on: {}", view.blocked_on());
                println!(
                    "details: {}",
                    crate::target::command(None, &format!("show {run}"))
                );
            } else {
                let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                for e in &ledger {
                    *counts.entry(e.record.action.as_str()).or_default() += 1;
                }
                let summary: Vec<String> = counts.iter().map(|(a, n)| format!("{n} {a}")).collect();
                println!(
                    "resource ledger: {} ({})",
                    if summary.is_empty() {
                        "empty".to_string()
                    } else {
                        summary.join(", ")
                    },
                    crate::target::command(None, &format!("show {run}"))
                );
                if let Some(a) = crate::views::model::AccessView::of(view) {
                    println!("How to reach the cluster:");
                    let cluster = rec.as_ref().and_then(|r| r.summary.labels.get("cluster"));
                    for l in a.lines_for(cluster.map(String::as_str), target) {
                        println!("  {l}");
                    }
                }
            }
        }
    }
    Ok(match state {
        RunState::Succeeded => 0,
        _ if interrupted && !state.is_terminal() => 130,
        _ => 1,
    })
}

/// `line` with its leading ✓ in green or ✗ in red when `color` (a terminal, no `NO_COLOR`).
pub(crate) fn paint_mark(line: &str, color: bool) -> String {
    if !color {
        return line.to_string();
    }
    for (mark, code) in [("✓", "32"), ("✗", "31")] {
        if let Some(rest) = line.strip_prefix(mark) {
            return format!("\x1b[{code}m{mark}\x1b[0m{rest}");
        }
    }
    line.to_string()
}

/// Poll the journal until `run` is finished, needs an operator or is parked (another
/// process drives it). `true` when interrupted by Ctrl-C/SIGTERM first.
async fn watch_until_settled(e: &hcp_runtime::Engine, run: hcp_runtime::RunId) -> Result<bool> {
    let stop = crate::services::shutdown_signal();
    tokio::pin!(stop);
    loop {
        let s = e.store().load_run(run).await?.map(|r| r.summary);
        if let Some(s) = s
            && (s.state.is_terminal()
                || (matches!(s.state, RunState::NeedsOperator | RunState::Failed)
                    && !s.commands_pending))
        {
            return Ok(false);
        }
        tokio::select! {
            () = &mut stop => return Ok(true),
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

/// Live progress of a followed run: one line per step transition (only each step's end
/// with `--compact`) and the failure line when an unwind starts, a bar per stage and the
/// current step on a terminal (not with `--compact`), or NDJSON events with `--output json`.
#[derive(Clone)]
pub(crate) struct Progress {
    inner: Arc<std::sync::Mutex<ProgressInner>>,
}

struct ProgressInner {
    out: OutputFormat,
    multi: Option<indicatif::MultiProgress>,
    bars: HashMap<String, indicatif::ProgressBar>,
    status: Option<indicatif::ProgressBar>,
    seen: HashMap<String, String>,
    /// The unwind's own bar (steps to undo), once it started.
    unwind: Option<indicatif::ProgressBar>,
    /// Steps the unwind has to undo (0 until it starts).
    unwind_total: u64,
    /// The run's creation (progress lines show the time since).
    created_at: hcp_runtime::Timestamp,
    run: String,
    /// [`Progress::finish`] ran: nothing more is drawn or printed.
    finished: bool,
    /// The pause line was printed (reset by a redrive).
    pause_announced: bool,
    /// `--compact`: only the line of each step's end, and no bars.
    compact: bool,
}

impl ProgressInner {
    /// Print one line: above the bars on stderr when they are drawn, else on stdout; a
    /// leading ✓/✗ coloured where that stream may be.
    fn print(&self, line: &str) {
        match &self.multi {
            Some(m) => {
                let _ = m.println(paint_mark(line, crate::style::stderr_color()));
            }
            None => println!("{}", paint_mark(line, crate::style::stdout_color())),
        }
    }

    /// `--output json`: one `progress` line per step transition, and one `unwinding` line
    /// the moment the unwind starts (NDJSON, see [`crate::output`]).
    fn json_events(&mut self, v: &RunView) {
        if let Some(cause) = &v.unwinding
            && self.unwind_total == 0
        {
            self.unwind_total = unwind_total(v);
            unwinding_event(&self.run, v, cause, self.unwind_total);
        }
        if let Some(pz) = &v.paused
            && !self.pause_announced
        {
            self.pause_announced = true;
            output::event(
                "progress",
                &serde_json::json!({
                    "run_id": self.run,
                    "at": crate::services::clock().now().to_rfc3339(),
                    "state": v.state(), "paused": true, "failed_step": pz.step,
                    "pause_cause": pz.cause, "on_failure": v.dag.on_failure.to_string(),
                    "unwinds_at": pz.unwind_at.map(|t| t.to_rfc3339()),
                    "error": v.node(&pz.step).and_then(|n| n.last_error.as_ref())
                        .map(crate::views::model::ErrorView::from),
                }),
            );
        }
        if v.paused.is_none() {
            self.pause_announced = false;
        }
        let now = crate::services::clock().now();
        for (spec, st) in v.dag.nodes.iter().zip(&v.nodes) {
            let s = st.status.name().to_string();
            let detail = status_detail(&st.status);
            let key = format!("{s}{detail}");
            if self.seen.get(&spec.name) != Some(&key) && s != "pending" {
                output::event(
                    "progress",
                    &serde_json::json!({
                        "run_id": self.run, "at": now.to_rfc3339(),
                        "elapsed_ms": now.0 - self.created_at.0,
                        "stage": spec.stage, "step": spec.name, "state": s,
                        "detail": detail.trim_start_matches([' ', '—', ':']).trim(),
                        "error": st.last_error.as_ref().map(crate::views::model::ErrorView::from),
                    }),
                );
                self.seen.insert(spec.name.clone(), key);
            }
        }
    }
}

impl Progress {
    pub(crate) fn new(
        out: OutputFormat,
        run: hcp_runtime::RunId,
        created_at: hcp_runtime::Timestamp,
        compact: bool,
    ) -> Self {
        let tty = std::io::stderr().is_terminal() && out == OutputFormat::Text && !compact;
        let progress = Self {
            inner: Arc::new(std::sync::Mutex::new(ProgressInner {
                out,
                multi: tty.then(indicatif::MultiProgress::new),
                bars: HashMap::new(),
                status: None,
                seen: HashMap::new(),
                unwind: None,
                unwind_total: 0,
                created_at,
                run: run.to_string(),
                finished: false,
                pause_announced: false,
                compact,
            })),
        };
        if tty && echoes_ctrl_c() {
            // indicatif keeps the cursor at the right edge of its last line, so the `^C` the
            // terminal echoes on Ctrl-C wraps onto a new line, and every redraw after it
            // (the drain's lines, the final clear) would count from one line too low and
            // leave the top bar on the screen. Take the cursor back up to where indicatif
            // knows it is, before anything is drawn again.
            let inner = progress.inner.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok()
                    && let Ok(p) = inner.lock()
                    && p.multi.is_some()
                    && !p.finished
                {
                    use std::io::Write;
                    let mut err = std::io::stderr().lock();
                    let _ = err.write_all(b"\r\x1b[2K\x1b[1A");
                    let _ = err.flush();
                }
            });
        }
        progress
    }

    pub(crate) fn update(&self, v: &RunView) {
        let Ok(mut p) = self.inner.lock() else { return };
        if p.finished {
            return;
        }
        if p.out == OutputFormat::Json {
            p.json_events(v);
            return;
        }
        if let Some(multi) = p.multi.clone()
            && p.bars.is_empty()
        {
            let style = indicatif::ProgressStyle::with_template(
                "{prefix:>14} [{bar:30}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            for stage in &v.dag.stages {
                let total = v.dag.nodes.iter().filter(|n| &n.stage == stage).count();
                let bar = multi.add(indicatif::ProgressBar::new(total as u64));
                bar.set_style(style.clone());
                bar.set_prefix(stage.clone());
                p.bars.insert(stage.clone(), bar);
            }
            // Ticked by `update`, never by a thread of indicatif's own: every redraw holds
            // this lock, so the Ctrl-C fix-up above cannot land between two of them.
            let status = multi.add(indicatif::ProgressBar::new_spinner());
            p.status = Some(status);
        }
        // Stage bars.
        for stage in &v.dag.stages {
            let (done, undone) = v
                .dag
                .nodes
                .iter()
                .zip(&v.nodes)
                .filter(|(n, _)| &n.stage == stage)
                .fold((0u64, 0u64), |(d, u), (_, s)| match s.status {
                    NodeStatus::Succeeded => (d + 1, u),
                    NodeStatus::Undone { .. } => (d, u + 1),
                    _ => (d, u),
                });
            if let Some(bar) = p.bars.get(stage) {
                // Only what stands counts: an undone step empties its bar again.
                bar.set_position(done);
                bar.set_message(if undone > 0 {
                    format!("({undone} undone)")
                } else {
                    String::new()
                });
            }
        }
        if let Some(s) = &p.status {
            s.set_message(format!("{} — {}", v.state(), v.blocked_on()));
            s.tick();
        }
        let mut lines = Vec::new();
        // The moment the run starts unwinding: say why, where the eye lands, and give the
        // unwind its own phase (and bar).
        if let Some(cause) = &v.unwinding
            && p.unwind_total == 0
        {
            let total = unwind_total(v);
            p.unwind_total = total;
            lines.push(failure_line(v, cause, total));
            if let Some(multi) = p.multi.clone() {
                let style = indicatif::ProgressStyle::with_template(
                    "{prefix:>14} [{bar:30}] {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("<- ");
                let bar = multi.add(indicatif::ProgressBar::new(total));
                bar.set_style(style);
                bar.set_prefix("unwind");
                p.unwind = Some(bar);
            }
        }
        if let Some(pz) = &v.paused
            && !p.pause_announced
        {
            p.pause_announced = true;
            lines.push(pause_line(v, pz));
        }
        if v.paused.is_none() {
            p.pause_announced = false;
        }
        if p.unwind_total > 0 {
            let undone = v
                .dag
                .nodes
                .iter()
                .zip(&v.nodes)
                .filter(|(spec, st)| {
                    spec.has_undo && matches!(st.status, NodeStatus::Undone { .. })
                })
                .count() as u64;
            if let Some(bar) = &p.unwind {
                bar.set_position(undone.min(p.unwind_total));
            }
        }
        // Transition lines, each at the time the journal recorded for it.
        let now = crate::services::clock().now();
        let width = v.dag.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
        // An undone step that kept what it adopted says so: an operator must know it is still there.
        let entries = if v.nodes.iter().any(|n| {
            matches!(
                n.status,
                NodeStatus::Undone {
                    skipped: false,
                    resolved: false
                }
            )
        }) {
            hcp_runtime::ledger::ledger_of(v)
        } else {
            Vec::new()
        };
        for (spec, st) in v.dag.nodes.iter().zip(&v.nodes) {
            let s = match st.status {
                NodeStatus::Undone { .. } if !spec.has_undo => "nothing to undo".to_string(),
                NodeStatus::Undone {
                    skipped: false,
                    resolved: false,
                } => {
                    let (d, k) = hcp_runtime::ledger::undo_counts(&entries, &spec.name);
                    hcp_runtime::ledger::undone_word(d, k)
                }
                _ => st.status.name().to_string(),
            };
            let detail = status_detail(&st.status);
            let key = format!("{s}{detail}");
            if p.seen.get(&spec.name) != Some(&key) && s != "pending" {
                p.seen.insert(spec.name.clone(), key);
                if p.compact && !ended(&st.status) {
                    continue;
                }
                let at = recorded_at(st, now);
                let took = took(st)
                    .map(|ms| format!(" in {}", crate::views::model::human_duration(ms)))
                    .unwrap_or_default();
                lines.push(crate::views::text::progress_line(
                    (at.0 - p.created_at.0).max(0),
                    &spec.stage,
                    &spec.name,
                    width,
                    &format!("{s}{took}"),
                    &detail,
                ));
            }
        }
        for l in lines {
            p.print(&l);
        }
    }

    /// Print `line` above the bars (or plainly, without them).
    /// Redraw from the journal's view of `run` every `period`, until the task is aborted.
    pub(crate) fn tick(
        &self,
        e: &hcp_runtime::Engine,
        run: hcp_runtime::RunId,
        period: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let (e, p) = (e.clone(), self.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(v) = e.view(run).await {
                    p.update(&v);
                }
                tokio::time::sleep(period).await;
            }
        })
    }

    /// A notice on stderr (not part of the run's step lines), drawn above the bars.
    pub(crate) fn eprintln(&self, line: &str) {
        if let Ok(p) = self.inner.lock() {
            match &p.multi {
                Some(m) => m.suspend(|| eprintln!("{line}")),
                None => eprintln!("{line}"),
            }
        }
    }

    /// Take the bars off the screen for good before the outcome is printed (a redraw after
    /// the outcome, e.g. when the last bar was dropped, moved the cursor up over the outcome
    /// block and painted stale bars on it). The transition lines printed above the bars
    /// stay; nothing is drawn again afterwards.
    pub(crate) fn finish(&self) {
        if let Ok(mut p) = self.inner.lock() {
            let mut bars: Vec<indicatif::ProgressBar> = p.bars.drain().map(|(_, b)| b).collect();
            bars.extend(p.status.take());
            bars.extend(p.unwind.take());
            for b in &bars {
                b.finish_and_clear();
            }
            if let Some(m) = p.multi.take() {
                let _ = m.clear();
                for b in &bars {
                    m.remove(b);
                }
                m.set_draw_target(indicatif::ProgressDrawTarget::hidden());
            }
            // Later updates (a ticker that has not stopped yet) print nothing.
            p.finished = true;
        }
    }
}

/// Whether the terminal echoes Ctrl-C as `^C` (`stty` says `echo` and `echoctl`; assumed
/// when it cannot be asked, as that is every terminal's default).
fn echoes_ctrl_c() -> bool {
    let Ok(tty) = std::fs::File::open("/dev/tty") else {
        return true;
    };
    match std::process::Command::new("stty")
        .arg("-a")
        .stdin(tty)
        .stderr(std::process::Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let flags: Vec<&str> = text.split([' ', ';', '\n']).collect();
            flags.contains(&"echo") && flags.contains(&"echoctl")
        }
        _ => true,
    }
}

/// Whether a step's line is the one `--compact` prints: it ended (for now) one way or the
/// other.
fn ended(s: &NodeStatus) -> bool {
    matches!(
        s,
        NodeStatus::Succeeded
            | NodeStatus::Failed { .. }
            | NodeStatus::Undone { .. }
            | NodeStatus::UndoFailed { .. }
            | NodeStatus::Kept { .. }
    )
}

/// When the journal says step `st` reached its status (`now` for a status the journal
/// keeps no time of, such as a wait's latest reason).
fn recorded_at(st: &NodeState, now: Timestamp) -> Timestamp {
    let t = match st.status {
        NodeStatus::Succeeded | NodeStatus::Failed { .. } => st.finished_at,
        NodeStatus::Running { attempt: 1 } => st.started_at,
        NodeStatus::UndoRunning { attempt: 1 } => st.undo_started_at,
        NodeStatus::Undone { .. } | NodeStatus::UndoFailed { .. } => st.undone_at,
        _ => None,
    };
    t.map_or(now, |t| Timestamp(t.0.min(now.0)))
}

/// How long a step that ended took, as recorded (its action, or its undo once undone).
fn took(st: &NodeState) -> Option<i64> {
    let (from, to) = match st.status {
        NodeStatus::Succeeded | NodeStatus::Failed { .. } => (st.started_at?, st.finished_at?),
        NodeStatus::Undone {
            skipped: false,
            resolved: false,
        }
        | NodeStatus::UndoFailed { .. } => (st.undo_started_at?, st.undone_at?),
        _ => return None,
    };
    Some((to.0 - from.0).max(0))
}

/// How many steps an unwind of `v` has to undo (those with an undo that started).
fn unwind_total(v: &RunView) -> u64 {
    v.dag
        .nodes
        .iter()
        .zip(&v.nodes)
        .filter(|(spec, st)| spec.has_undo && st.status.started())
        .count()
        .max(1) as u64
}

/// The NDJSON `progress` line that says an unwind started: the failed step and its error,
/// or who cancelled, and how many steps it undoes.
fn unwinding_event(run: &str, v: &RunView, cause: &hcp_runtime::UnwindCause, total: u64) {
    let (step, by) = match cause {
        hcp_runtime::UnwindCause::NodeFailed { node }
        | hcp_runtime::UnwindCause::PauseExpired { node, .. } => (Some(node.clone()), None),
        hcp_runtime::UnwindCause::Cancelled { by, .. } => (None, Some(by.clone())),
    };
    output::event(
        "progress",
        &serde_json::json!({
            "run_id": run,
            "at": crate::services::clock().now().to_rfc3339(),
            "state": v.state(), "unwinding": true, "failed_step": step, "cancelled_by": by,
            "error": v.unwind_error.as_ref().map(crate::views::model::ErrorView::from),
            "steps_to_undo": total,
        }),
    );
}

/// `‖ <step> failed: <error> — paused …: nothing undone`, printed the moment a run pauses.
fn pause_line(v: &RunView, p: &hcp_runtime::Paused) -> String {
    let err = v
        .node(&p.step)
        .and_then(|n| n.last_error.as_ref())
        .map(|e| format!(": {e}"))
        .unwrap_or_default();
    let why = match &p.cause {
        _ if v.dag.forward_only() => "a delete only goes forward".to_string(),
        hcp_runtime::PauseCause::Policy => format!("on-failure={}", v.dag.on_failure),
        hcp_runtime::PauseCause::PastPivot { pivot } => format!("past the pivot {pivot}"),
    };
    format!(
        "‖ {} failed{err} — paused ({why}): nothing was undone",
        p.step
    )
}

/// `✗ <step> failed: <code> <message> — unwinding N steps` (or the cancel), printed the
/// moment the unwind starts.
fn failure_line(v: &RunView, cause: &hcp_runtime::UnwindCause, total: u64) -> String {
    let steps = if total == 1 { "step" } else { "steps" };
    match cause {
        hcp_runtime::UnwindCause::NodeFailed { node } => {
            let err = v.node(node).and_then(|n| match &n.status {
                NodeStatus::Failed { error } => Some(error),
                _ => n.last_error.as_ref(),
            });
            let what = match err {
                Some(e) => format!(
                    "{}{}",
                    e.code
                        .as_deref()
                        .map(|c| format!("{c} "))
                        .unwrap_or_default(),
                    e.message
                ),
                None => "failed for good".to_string(),
            };
            format!("✗ {node} failed: {what} — unwinding {total} {steps}")
        }
        hcp_runtime::UnwindCause::PauseExpired { node, deadline } => format!(
            "✗ the pause after {node} failed ran out at {deadline} with nobody acting — unwinding {total} {steps}"
        ),
        hcp_runtime::UnwindCause::Cancelled { by, reason } => format!(
            "✗ cancelled by {by}{} — unwinding {total} {steps}",
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            }
        ),
    }
}

/// The outcome block of a run that paused after a step failed for good: what was kept,
/// why it did not unwind, and the exact commands.
fn paused_outcome(
    v: &RunView,
    p: &hcp_runtime::Paused,
    run: hcp_runtime::RunId,
    elapsed: Duration,
    target: Option<&str>,
) -> Vec<String> {
    let t = human_elapsed(elapsed);
    let retry = crate::target::command(None, &format!("retry {run}"));
    let cancel = crate::target::command(None, &format!("cancel {run}"));
    let err = v
        .node(&p.step)
        .and_then(|n| n.last_error.as_ref())
        .map(|e| format!(": {e}"))
        .unwrap_or_default();
    let done = v
        .nodes
        .iter()
        .filter(|n| n.status == NodeStatus::Succeeded)
        .count();
    let total = v.nodes.len();
    if v.dag.forward_only() {
        return vec![
            format!(
                "✗ Deletion stopped after {t}: partially deleted: {done} of {total} deletions done; the cluster is no longer usable; `retry` continues the delete."
            ),
            format!("{} failed{err}", p.step),
            "nothing is ever undone by a delete (every deletion is a pivot)".into(),
            format!("continue the delete once the cause is fixed: {retry}"),
        ];
    }
    let mut lines = vec![match &p.cause {
        hcp_runtime::PauseCause::Policy => format!(
            "‖ {} paused after {t}: {} failed; nothing was undone ({done} of {total} steps done and kept), paused by policy: on-failure={}.",
            verb_of(&v.dag.workflow),
            p.step,
            v.dag.on_failure
        ),
        hcp_runtime::PauseCause::PastPivot { pivot } if *pivot == p.step => format!(
            "‖ {} paused after {t}: the pivot {pivot} failed once started (its effect may have happened and cannot be undone); nothing was undone.",
            verb_of(&v.dag.workflow),
        ),
        hcp_runtime::PauseCause::PastPivot { pivot } => format!(
            "‖ {} paused after {t}: {} failed past the pivot {pivot}, which cannot be undone; nothing was undone.",
            verb_of(&v.dag.workflow),
            p.step
        ),
    }];
    lines.push(format!("{} failed{err}", p.step));
    if let Some(at) = p.unwind_at {
        lines.push(format!(
            "it unwinds by itself at {at} unless retried (a worker must be running: {})",
            crate::target::worker_command(target)
        ));
    }
    lines.push(format!(
        "fix the cause, then re-run the failed step and go on: {retry}"
    ));
    lines.push(match &p.cause {
        hcp_runtime::PauseCause::PastPivot { pivot } if *pivot == p.step => {
            format!("or undo every step that can be (the pivot itself stays): {cancel}")
        }
        hcp_runtime::PauseCause::PastPivot { pivot } => {
            format!("or undo only what came after the pivot {pivot}: {cancel}")
        }
        hcp_runtime::PauseCause::Policy => format!("or unwind everything it made: {cancel}"),
    });
    lines
}

/// The noun of a workflow's outcome line (`Creation`), as its definition declares it.
fn verb_of(workflow: &str) -> &'static str {
    hcp_workflows::workflow::lookup(workflow).map_or("Run", |w| w.noun)
}

/// The one-line outcome with the elapsed time (terraform's "Creation complete after 8s").
fn outcome_line(
    workflow: &str,
    state: RunState,
    elapsed: Duration,
    why: Option<&str>,
    unwound: &hcp_runtime::ledger::UnwindSummary,
) -> String {
    let t = human_elapsed(elapsed);
    let verb = verb_of(workflow);
    match state {
        RunState::Succeeded => format!("✓ {verb} complete after {t}."),
        RunState::RolledBack => format!(
            "✗ {verb} failed after {t}; rolled back: {}{}.",
            unwound.sentence(),
            why.map(|w| format!(" ({w})")).unwrap_or_default()
        ),
        RunState::Cancelled if unwound.forward_only => {
            format!("✗ {verb} cancelled after {t}; {}.", unwound.sentence())
        }
        RunState::Cancelled if unwound.complete() => {
            format!("✗ {verb} cancelled after {t}; every started step was undone.")
        }
        RunState::Cancelled => {
            format!(
                "✗ {verb} cancelled after {t}; unwound: {}.",
                unwound.sentence()
            )
        }
        RunState::NeedsOperator => format!("! {verb} needs an operator after {t}."),
        RunState::Failed => format!("! {verb} parked after {t}."),
        other => format!("{verb} is {other} after {t}."),
    }
}

fn human_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// What a step's status adds to its progress line: the retry and its error, the failure,
/// or what it waits for (empty otherwise).
pub(crate) fn status_detail(status: &NodeStatus) -> String {
    match status {
        NodeStatus::RetryScheduled { error, next_at, .. }
        | NodeStatus::UndoRetryScheduled { error, next_at, .. } => {
            format!(" — retry at {next_at}: {error}")
        }
        NodeStatus::Failed { error } | NodeStatus::UndoFailed { error } => format!(" — {error}"),
        NodeStatus::Waiting { reason, .. } | NodeStatus::UndoWaiting { reason, .. } => {
            format!(" — {reason}")
        }
        NodeStatus::Kept { reason } => format!(" — never undone ({reason})"),
        _ => String::new(),
    }
}

#[derive(clap::Args, Debug)]
/// `watch`.
pub struct WatchArgs {
    /// Run: its id, a unique prefix or suffix of it, or `cluster/<name>` (latest run).
    #[arg(add = crate::complete::runs())]
    run: String,
    /// How often to look at the journal, in milliseconds (wake-ups from this process come sooner).
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    #[command(flatten)]
    follow: FollowArgs,
}

/// `watch`: follow a run until it finishes, with the follower of `start` and `drive` (the
/// same lines, bars on a terminal, outcome and NDJSON events). Works while another process
/// executes the run: it polls the journal (and wakes sooner on this process's hints, or
/// Postgres notifications). `interrupt` is notified on Ctrl-C by the caller.
pub async fn watch_command(
    db: &str,
    out: OutputFormat,
    a: WatchArgs,
    interrupt: &tokio::sync::Notify,
) -> Result<u8> {
    let store = crate::services::open_existing_store_read_only(db).await?;
    crate::services::clock::keep_clock_aligned(&store);
    let run = crate::views::resolve(&store, &a.run, db).await?;
    let interval = Duration::from_millis(a.interval_ms.max(50));
    watch(&store, db, run, out, a.follow, interval, interrupt).await
}
