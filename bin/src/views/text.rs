//! Human-readable rendering of the inspector's model (what golden files lock).
//!
//! Plain columns sized to their content, no colour and no terminal tricks, so the output is
//! the same in a terminal, a pipe, a CI log or a bug report.

use super::model::{HistoryRow, InventoryRow, RunDetail, RunRow, human_duration, max_text};
use std::fmt::Write as _;

fn width<'a>(header: &str, items: impl Iterator<Item = &'a str>) -> usize {
    items
        .map(|s| s.chars().count())
        .chain(std::iter::once(header.chars().count()))
        .max()
        .unwrap_or(0)
}

fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n >= w {
        s.to_string()
    } else {
        format!("{s}{}", " ".repeat(w - n))
    }
}

fn trim_end_lines(s: String) -> String {
    let mut out: String = s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n");
    out.push('\n');
    out
}

/// `list`.
pub fn list(rows: &[RunRow]) -> String {
    if rows.is_empty() {
        return "no runs match\n".into();
    }
    let cl = |r: &RunRow| r.cluster.clone().unwrap_or_else(|| "-".into());
    let st = |r: &RunRow| match (&r.stage, &r.step) {
        (Some(g), Some(s)) => format!("{g}/{s}"),
        (None, Some(s)) => s.clone(),
        _ => "-".into(),
    };
    let clusters: Vec<String> = rows.iter().map(cl).collect();
    let steps: Vec<String> = rows.iter().map(st).collect();
    let ww = width("WORKFLOW", rows.iter().map(|r| r.workflow.as_str()));
    let cw = width("CLUSTER", clusters.iter().map(String::as_str));
    let sw = width("STATE", rows.iter().map(|r| r.state.as_str()));
    let pw = width("STAGE/STEP", steps.iter().map(String::as_str));
    // Who started each run, when any run says.
    let by: Vec<String> = rows
        .iter()
        .map(|r| r.started_by.clone().unwrap_or_else(|| "-".into()))
        .collect();
    let show_by = rows.iter().any(|r| r.started_by.is_some());
    let bw = width("STARTED BY", by.iter().map(String::as_str));
    let by_col = |s: &str| {
        if show_by {
            format!("  {}", pad(s, bw))
        } else {
            String::new()
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  {}  {}{}  {}  {}  {:>5}  BLOCKED ON",
        pad("RUN", 8),
        pad("WORKFLOW", ww),
        pad("CLUSTER", cw),
        by_col("STARTED BY"),
        pad("STATE", sw),
        pad("STAGE/STEP", pw),
        "AGE"
    );
    for (i, r) in rows.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}  {}  {}{}  {}  {}  {:>5}  {}",
            pad(&r.short_id, 8),
            pad(&r.workflow, ww),
            pad(&clusters[i], cw),
            by_col(&by[i]),
            crate::style::paint_state(&pad(r.state.as_str(), sw), r.state.as_str()),
            pad(&steps[i], pw),
            r.age,
            r.no_worker.as_deref().unwrap_or(&r.blocked_on)
        );
    }
    trim_end_lines(out)
}

/// `show`.
pub fn show(d: &RunDetail) -> String {
    let mut o = String::new();
    show_summary(&mut o, d);
    show_steps(&mut o, d);
    show_pending(&mut o, d);
    show_undo(&mut o, d);
    show_resources(&mut o, d);
    show_commands(&mut o, d);
    let _ = writeln!(o, "\nWHY\n  {}", d.why.text);
    trim_end_lines(o)
}

/// `show`: the run: its workflow, cluster, audit trail, state, lease and failure.
fn show_summary(o: &mut String, d: &RunDetail) {
    let _ = writeln!(o, "run        {}", d.id);
    let _ = writeln!(o, "workflow   {} v{}", d.workflow, d.version);
    if let Some(c) = &d.cluster {
        let _ = writeln!(o, "cluster    {c}");
    }
    // The audit trail has lines of its own.
    const AUDIT: [&str; 5] = [
        "cluster",
        "started-by",
        "config",
        "config-sha256",
        "version",
    ];
    let others: Vec<String> = d
        .labels
        .iter()
        .filter(|(k, _)| !AUDIT.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(o, "labels     {}", others.join(", "));
    }
    if let Some(c) = d.labels.get("config") {
        let _ = writeln!(
            o,
            "config     {c}{}",
            d.labels
                .get("config-sha256")
                .map(|h| format!(" (sha256 {h})"))
                .unwrap_or_default()
        );
    }
    if let Some(v) = d.labels.get("version") {
        let _ = writeln!(o, "binary     hcp-workflow {v}");
    }
    let _ = writeln!(
        o,
        "state      {}",
        crate::style::paint_state(d.state.as_str(), d.state.as_str())
    );
    let _ = writeln!(o, "blocked on {}", d.blocked_on);
    if let Some(p) = &d.paused {
        let _ = writeln!(o, "PAUSED     {} (since {})", p.text, p.since);
    }
    if let Some(a) = &d.access {
        let _ = writeln!(o, "\nHow to reach the cluster:");
        let cluster = d.labels.get("cluster").map(String::as_str);
        for l in a.lines_for(cluster, d.target.as_deref()) {
            let _ = writeln!(o, "  {l}");
        }
        let _ = writeln!(o);
    }
    if d.on_failure != "unwind" || d.forward_only {
        let _ = writeln!(
            o,
            "on-failure {}",
            if d.forward_only {
                "forward-only: every step is a pivot, nothing is ever undone".to_string()
            } else {
                d.on_failure.clone()
            }
        );
    }
    if let Some(nw) = &d.no_worker {
        let _ = writeln!(o, "           {nw}");
    }
    let _ = writeln!(
        o,
        "created    {}{}",
        d.created_at,
        d.labels
            .get("started-by")
            .map(|b| format!(" by {b}"))
            .unwrap_or_default()
    );
    let _ = writeln!(o, "updated    {}", d.updated_at);
    if let Some(f) = &d.failure {
        let what = match (&f.step, &f.code) {
            (Some(step), Some(code)) => format!("{step} failed: {code} {}", f.message),
            (Some(step), None) => format!("{step} failed: [{}] {}", f.kind, f.message),
            (None, _) => f.message.clone(),
        };
        let _ = writeln!(o, "FAILURE    {what}");
        let _ = writeln!(o, "           at {}", f.at);
        let _ = writeln!(o, "           {}", f.hint);
    }
    match (&d.lease_owner, &d.lease_expires_at) {
        (Some(owner), Some(exp)) => {
            let _ = writeln!(
                o,
                "lease      {owner} (epoch {}, expires {exp}{})",
                d.lease_epoch,
                if d.lease_expired { ", lapsed" } else { "" }
            );
        }
        (Some(owner), None) => {
            let _ = writeln!(o, "lease      {owner} (epoch {})", d.lease_epoch);
        }
        _ => {
            let _ = writeln!(o, "lease      none");
        }
    }
    if let Some(p) = &d.parked {
        let _ = writeln!(o, "parked     {p}");
    }
    if let Some(u) = &d.unreadable {
        let _ = writeln!(o, "\nthe journal cannot be folded: {u}");
    }
}

/// `show`: the steps, stage by stage: state, attempts, timing and detail.
fn show_steps(o: &mut String, d: &RunDetail) {
    if !d.stages.is_empty() {
        let names = d
            .stages
            .iter()
            .flat_map(|g| g.steps.iter().map(|s| s.name.as_str()));
        let nw = width("", names).max(10);
        let states = d
            .stages
            .iter()
            .flat_map(|g| g.steps.iter().map(|s| s.state.as_str()));
        let sw = width("STATE", states);
        let _ = writeln!(
            o,
            "\nSTEPS\n  {}  {}  {:>8}  {:>8}  UNDO        LAST ERROR",
            pad("STAGE / STEP", nw + 2),
            pad("STATE", sw),
            "ATTEMPTS",
            "DURATION"
        );
        let pivots: Vec<&crate::views::model::StepView> = d
            .stages
            .iter()
            .flat_map(|g| g.steps.iter())
            .filter(|s| s.pivot.is_some())
            .collect();
        for g in &d.stages {
            let _ = writeln!(o, "  {}", g.name);
            for s in &g.steps {
                let attempts = if s.attempts == 0 {
                    "-".to_string()
                } else {
                    format!("{}/{}", s.attempts, max_text(s.max_attempts))
                };
                let undo = if s.pivot.is_some() {
                    "⚑ pivot".to_string()
                } else if s.undo_attempts > 0 {
                    format!("{}/{}", s.undo_attempts, max_text(s.undo_max_attempts))
                } else if !s.has_undo {
                    "none".into()
                } else {
                    "-".into()
                };
                let _ = writeln!(
                    o,
                    "  {}{}  {}  {:>8}  {:>8}  {}  {}",
                    if s.current { "> " } else { "  " },
                    pad(&s.name, nw),
                    pad(&s.state, sw),
                    attempts,
                    s.duration_ms
                        .map(human_duration)
                        .unwrap_or_else(|| "-".into()),
                    pad(&undo, 10),
                    s.last_error.as_ref().map(|e| e.text.as_str()).unwrap_or("")
                );
            }
        }
        if d.forward_only {
            let _ = writeln!(
                o,
                "  ⚑ every step is a pivot: {}",
                pivots
                    .first()
                    .and_then(|s| s.pivot.as_deref())
                    .unwrap_or_default()
            );
        }
        for s in pivots.iter().filter(|_| !d.forward_only) {
            let _ = writeln!(
                o,
                "  ⚑ pivot: {}: {}",
                s.name,
                s.pivot.as_deref().unwrap_or_default()
            );
        }
    }
}

/// `show`: the step a worker runs next or is waiting on.
fn show_pending(o: &mut String, d: &RunDetail) {
    if let Some(p) = &d.pending {
        let _ = writeln!(o, "\nPENDING STEP  {} ({})", p.step, p.phase);
        let _ = writeln!(o, "  state       {}", p.state);
        let _ = writeln!(o, "  attempt     {}", p.attempt_text);
        if let Some(since) = &p.since {
            let _ = writeln!(o, "  since       {since}");
        }
        let _ = writeln!(
            o,
            "  last error  {}",
            p.last_error
                .as_ref()
                .map(|e| e.text.as_str())
                .unwrap_or("none")
        );
        if let Some(code) = p.last_error.as_ref().and_then(|e| e.code.as_deref()) {
            let _ = writeln!(o, "  error code  {code}");
        }
        let _ = writeln!(
            o,
            "  next retry  {}",
            p.next_retry_at.as_deref().unwrap_or("-")
        );
        let _ = writeln!(o, "  waits for   {}", p.waits_for);
        let _ = writeln!(
            o,
            "  lease       {}",
            match (&p.lease_owner, &p.lease_expires_at) {
                (Some(w), Some(t)) => format!("{w} until {t}"),
                (Some(w), None) => w.clone(),
                _ => "none".into(),
            }
        );
    }
}

/// `show`: what an unwind would undo, skip or has given up on.
fn show_undo(o: &mut String, d: &RunDetail) {
    let u = &d.undo;
    if d.unreadable.is_none() && d.forward_only {
        let _ = writeln!(
            o,
            "\nUNDO STACK  none: this workflow only goes forward (every step is a pivot); nothing is ever undone"
        );
    } else if d.unreadable.is_none() {
        let started = d
            .stages
            .iter()
            .flat_map(|g| g.steps.iter())
            .any(|s| s.started_at.is_some());
        if u.unwinding && d.state.is_terminal() {
            let _ = writeln!(
                o,
                "\nUNDO STACK  unwound because {}; the run {}",
                u.cause.as_deref().unwrap_or("?"),
                crate::runref::state_phrase(d.state)
            );
        } else if u.unwinding {
            let _ = writeln!(
                o,
                "\nUNDO STACK  unwinding because {}",
                u.cause.as_deref().unwrap_or("?")
            );
        } else if d.state.is_terminal() {
            let _ = writeln!(
                o,
                "\nUNDO STACK  nothing will be undone: the run {} and is finished",
                d.state
            );
        } else if let Some(pivot) = d.paused.as_ref().and_then(|p| p.pivot.as_deref()) {
            let _ = writeln!(
                o,
                "\nUNDO STACK  not unwinding; a cancel now would undo only what came after the pivot {pivot}, in this order:"
            );
        } else {
            let _ = writeln!(
                o,
                "\nUNDO STACK  not unwinding; a cancel now would undo, in this order:"
            );
        }
        let all = u.done.iter().chain(&u.next).map(|i| i.step.as_str());
        let nw = width("", all);
        let mut n = 0;
        for (i, item) in u.done.iter().enumerate() {
            n += 1;
            let _ = writeln!(
                o,
                "  {} {n:>2}. {}  {}  {}",
                if i == 0 { "done" } else { "    " },
                pad(&item.step, nw),
                item.at.as_deref().unwrap_or(""),
                item.note
            );
        }
        if !d.state.is_terminal() {
            for (i, item) in u.next.iter().enumerate() {
                n += 1;
                let _ = writeln!(
                    o,
                    "  {} {n:>2}. {}  {}",
                    if i == 0 { "next" } else { "    " },
                    pad(&item.step, nw),
                    item.note
                );
            }
        }
        if n == 0 && !started {
            let _ = writeln!(o, "  (no step has started)");
        }
    }
}

/// `show`: what the run created, adopted, kept or deleted (its ledger).
fn show_resources(o: &mut String, d: &RunDetail) {
    let _ = writeln!(o, "\nRESOURCES");
    if d.ledger.is_empty() {
        let _ = writeln!(o, "  none recorded");
    } else {
        let aw = width("ACTION", d.ledger.iter().map(|r| r.action.as_str()));
        let tw = width("TYPE", d.ledger.iter().map(|r| r.resource_type.as_str()));
        let nw = width("NODE", d.ledger.iter().map(|r| r.node.as_str()));
        let _ = writeln!(
            o,
            "  {}  {}  {}  {}  ID",
            pad("ACTION", aw),
            pad("TYPE", tw),
            pad("NODE", nw),
            pad("PHASE", 6)
        );
        for r in &d.ledger {
            let _ = writeln!(
                o,
                "  {}  {}  {}  {}  {}{}",
                pad(&r.action, aw),
                pad(&r.resource_type, tw),
                pad(&r.node, nw),
                pad(&r.phase, 6),
                r.id,
                if r.persistent { " (persistent)" } else { "" }
            );
            // Why something was left in place is the one thing a reader must not guess.
            if r.action == "kept"
                && let Some(note) = r.note.as_deref().filter(|n| !n.is_empty())
            {
                let _ = writeln!(o, "      kept because: {note}");
            }
            // Resolved by hand: it may still exist; say who vouched for it.
            if r.action == "resolved"
                && let Some(note) = r.note.as_deref().filter(|n| !n.is_empty())
            {
                let _ = writeln!(o, "      {note} (nobody here saw it go)");
            }
        }
    }
}

/// `show`: the operator commands sent to the run and what became of them.
fn show_commands(o: &mut String, d: &RunDetail) {
    if !d.commands.is_empty() {
        let _ = writeln!(o, "\nOPERATOR COMMANDS");
        for c in &d.commands {
            let why = if c.reason.is_empty() {
                String::new()
            } else {
                format!(": {:?}", c.reason)
            };
            let status = match (&c.applied_at, &c.outcome) {
                (Some(t), Some(out)) => format!("{out} at {t}"),
                (Some(t), None) => format!("applied at {t}"),
                _ => "queued".into(),
            };
            let _ = writeln!(
                o,
                "  #{} {} `{}` by {}{why} ({status})",
                c.id, c.requested_at, c.command, c.by
            );
        }
    }
}

/// `history`.
pub fn history(rows: &[HistoryRow]) -> String {
    if rows.is_empty() {
        return "no events match\n".into();
    }
    let kw = width("KIND", rows.iter().map(|r| r.kind.as_str()));
    let nw = width(
        "NODE",
        rows.iter().map(|r| r.node.as_deref().unwrap_or("-")),
    );
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:>4}  {}  {}  {}  WHAT",
        "SEQ",
        pad("AT", 24),
        pad("KIND", kw),
        pad("NODE", nw)
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:>4}  {}  {}  {}  {}",
            r.seq,
            pad(&r.at, 24),
            pad(&r.kind, kw),
            pad(r.node.as_deref().unwrap_or("-"), nw),
            r.summary
        );
    }
    trim_end_lines(o)
}

/// `inventory`.
pub fn inventory(all: &[InventoryRow], orphans: bool) -> String {
    // `--orphans`: what unfinished runs hold is not orphaned (yet), and is not "deleted"
    // either: said apart, per run.
    let (held, rows): (Vec<&InventoryRow>, Vec<&InventoryRow>) =
        all.iter().partition(|r| r.unfinished);
    let mut held_by: Vec<(&str, hcp_runtime::RunState, usize)> = Vec::new();
    for r in &held {
        match held_by.iter_mut().find(|(run, _, _)| *run == r.run) {
            Some(h) => h.2 += 1,
            None => held_by.push((r.run.as_str(), r.run_state, 1)),
        }
    }
    let held_text: String = held_by
        .iter()
        .map(|(run, state, n)| {
            format!(
                "run {} ({state}) still holds {n} resource{} it created: it has not finished; watch it: hcp-workflow watch {run}\n",
                crate::runref::short(run),
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect();
    if rows.is_empty() {
        return if orphans && held_by.is_empty() {
            "no orphaned resources: every resource created by a run that did not succeed was deleted\n".into()
        } else if orphans {
            format!("no orphaned resources among finished runs; not finished yet:\n{held_text}")
        } else {
            "no resources recorded\n".into()
        };
    }
    let aw = width("ACTION", rows.iter().map(|r| r.action.as_str()));
    let tw = width("TYPE", rows.iter().map(|r| r.resource_type.as_str()));
    let sw = width("RUN STATE", rows.iter().map(|r| r.run_state.as_str()));
    let mut o = String::new();
    let mut cluster: Option<&str> = None;
    for r in rows.iter().copied() {
        if cluster != Some(r.cluster.as_str()) {
            if cluster.is_some() {
                o.push('\n');
            }
            let _ = writeln!(o, "cluster {}", r.cluster);
            let _ = writeln!(
                o,
                "  {}  {}  {}  {}  ID",
                pad("ACTION", aw),
                pad("TYPE", tw),
                pad("RUN", 8),
                pad("RUN STATE", sw)
            );
            cluster = Some(r.cluster.as_str());
        }
        let _ = writeln!(
            o,
            "  {}  {}  {}  {}  {}{}{}",
            pad(&r.action, aw),
            pad(&r.resource_type, tw),
            pad(crate::runref::short(&r.run), 8),
            pad(r.run_state.as_str(), sw),
            r.id,
            if r.persistent { " (persistent)" } else { "" },
            match (&r.note, r.action.as_str(), &r.last_run_id, &r.last_action) {
                (Some(n), "resolved", _, _) => format!("  ({n})"),
                (_, _, Some(run), Some(what)) =>
                    format!("  ({what} by run {})", crate::runref::short(run)),
                _ => String::new(),
            }
        );
    }
    if !held_text.is_empty() {
        o.push_str("\nnot finished yet:\n");
        o.push_str(&held_text);
    }
    trim_end_lines(o)
}

/// `clusters`: one line per cluster.
pub fn clusters(rows: &[crate::views::model::ClusterRow]) -> String {
    if rows.is_empty() {
        return "no clusters: no run in this journal names one\n".into();
    }
    let cw = width("CLUSTER", rows.iter().map(|r| r.cluster.as_str()));
    // The status in words ("partially deleted"); JSON keeps the token.
    let words = |r: &crate::views::model::ClusterRow| r.status.words().to_string();
    let statuses: Vec<String> = rows.iter().map(words).collect();
    let sw = width("STATUS", statuses.iter().map(String::as_str));
    let by = |r: &crate::views::model::ClusterRow| {
        r.created_by
            .as_ref()
            .or(r.deleted_by.as_ref())
            .map(|c| format!("{} {}", c.short_id, c.updated_at))
            .unwrap_or_else(|| "-".into())
    };
    let bys: Vec<String> = rows.iter().map(by).collect();
    let bw = width("BY RUN", bys.iter().map(String::as_str));
    let lasts: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r.last_run.short_id, r.last_run.workflow, r.last_run.state
            )
        })
        .collect();
    let lw = width("LAST RUN", lasts.iter().map(String::as_str));
    let ress: Vec<String> = rows
        .iter()
        .map(|r| {
            if r.persistent > 0 {
                format!("{} ({} persistent)", r.resources, r.persistent)
            } else {
                r.resources.to_string()
            }
        })
        .collect();
    let rw = width("RESOURCES", ress.iter().map(String::as_str));
    let mut o = format!(
        "{}  {}  {}  {}  {}  VERIFIED\n",
        pad("CLUSTER", cw),
        pad("STATUS", sw),
        pad("BY RUN", bw),
        pad("LAST RUN", lw),
        pad("RESOURCES", rw)
    );
    for ((((r, st), b), l), res) in rows.iter().zip(&statuses).zip(&bys).zip(&lasts).zip(&ress) {
        let verified = match &r.verified {
            None => "-".to_string(),
            Some(v) if v.ok => format!("ok at {}", v.at),
            Some(v) => format!("{} not ok at {}", v.drift.len(), v.at),
        };
        let _ = writeln!(
            o,
            "{}  {}  {}  {}  {}  {}",
            pad(&r.cluster, cw),
            pad(st, sw),
            pad(b, bw),
            pad(l, lw),
            pad(res, rw),
            verified
        );
    }
    o
}

/// The lines `history` adds about a cluster's newest verify.
pub fn verified(cluster: &str, v: &crate::views::model::Verified) -> String {
    let mut o = format!(
        "\nCluster {cluster} was last verified at {} by {}: {}\n",
        v.at,
        v.by,
        if v.ok {
            "everything was as the journal says".to_string()
        } else {
            format!(
                "{} check(s) not ok (`hcp-workflow verify cluster/{cluster}` checks again)",
                v.drift.len()
            )
        }
    );
    for d in &v.drift {
        let _ = writeln!(o, "  {:<8} {} {}", d.verdict, d.check, d.resource);
        let _ = writeln!(o, "           expected {}; found {}", d.expected, d.found);
    }
    o
}

/// One step transition as `start`, `drive`, `selftest` and `watch` print it: the time
/// since the run was created, the stage, the step (padded to `width`), its state and
/// detail. `  +1m02s  network        create-cluster.network.vnet   succeeded`.
pub fn progress_line(
    since_ms: i64,
    stage: &str,
    step: &str,
    width: usize,
    state: &str,
    detail: &str,
) -> String {
    let at = format!("+{}", crate::views::model::human_duration(since_ms));
    format!("  {at:>7}  {stage:<14} {step:<width$} {state}{detail}")
}
