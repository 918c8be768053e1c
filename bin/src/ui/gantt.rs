//! Lays the timeline out: one row per step, one bar per attempt, undo attempt and wait,
//! positioned by journal timestamps. The template draws the result as inline SVG (no
//! script, no inline styles: the page's CSP forbids both).

use crate::views::model::{RunDetail, Span, human_duration};
use serde::Serialize;

/// Width of the drawing, in SVG units.
const WIDTH: f64 = 1000.0;
/// Left column for step names.
const LABEL: f64 = 220.0;
/// Row height.
const ROW: f64 = 22.0;
/// Narrowest visible bar.
const MIN_BAR: f64 = 2.0;

#[derive(Debug, Serialize)]
pub struct Bar {
    pub x: String,
    pub y: String,
    pub w: String,
    pub h: String,
    /// CSS class: `bar action ok`, `bar undo failed`, `bar wait`, …
    pub class: String,
    /// Tooltip.
    pub title: String,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub name: String,
    pub y: String,
    pub text_y: String,
}

#[derive(Debug, Serialize)]
pub struct Tick {
    pub x: String,
    pub label: String,
}

#[derive(Debug, Serialize)]
pub struct Gantt {
    pub width: String,
    pub height: String,
    pub label_width: String,
    pub axis_y: String,
    pub rows: Vec<Row>,
    pub bars: Vec<Bar>,
    pub ticks: Vec<Tick>,
    pub empty: bool,
}

fn n(v: f64) -> String {
    format!("{v:.1}")
}

fn title(s: &Span) -> String {
    let what = match (s.kind.as_str(), s.phase.as_str()) {
        ("wait", "undo") => "undo waiting".to_string(),
        ("wait", _) => "waiting".to_string(),
        (_, "undo") => format!("undo attempt {}", s.attempt),
        _ => format!("attempt {}", s.attempt),
    };
    let mut t = format!(
        "{}: {what}, {} ({})",
        s.node,
        s.outcome,
        human_duration(s.end_ms - s.start_ms)
    );
    if let Some(d) = &s.detail {
        t.push_str(" — ");
        t.push_str(d);
    }
    t
}

/// Lay out the run's spans.
pub fn layout(d: &RunDetail) -> Gantt {
    let names: Vec<&str> = d
        .stages
        .iter()
        .flat_map(|g| g.steps.iter().map(|s| s.name.as_str()))
        .collect();
    let t0 = d.spans.iter().map(|s| s.start_ms).min().unwrap_or(0);
    let t1 = d
        .spans
        .iter()
        .map(|s| s.end_ms)
        .max()
        .unwrap_or(0)
        .max(t0 + 1);
    let scale = (WIDTH - LABEL - 10.0) / (t1 - t0) as f64;
    let row_of = |node: &str| names.iter().position(|n| *n == node).unwrap_or(0);
    let bars = d
        .spans
        .iter()
        .map(|s| {
            let x = LABEL + (s.start_ms - t0) as f64 * scale;
            let w = ((s.end_ms - s.start_ms) as f64 * scale).max(MIN_BAR);
            let r = row_of(&s.node) as f64;
            let (y, h) = if s.kind == "wait" {
                (r * ROW + 9.0, 4.0)
            } else {
                (r * ROW + 4.0, 14.0)
            };
            Bar {
                x: n(x),
                y: n(y),
                w: n(w),
                h: n(h),
                class: format!("bar {} {} {}", s.phase, s.kind, s.outcome),
                title: title(s),
            }
        })
        .collect();
    let rows = names
        .iter()
        .enumerate()
        .map(|(i, name)| Row {
            name: name.to_string(),
            y: n(i as f64 * ROW),
            text_y: n(i as f64 * ROW + 15.0),
        })
        .collect();
    let axis_y = names.len() as f64 * ROW + 4.0;
    let ticks = (0..=4)
        .map(|i| {
            let frac = f64::from(i) / 4.0;
            Tick {
                x: n(LABEL + frac * (WIDTH - LABEL - 10.0)),
                label: format!("+{}", human_duration(((t1 - t0) as f64 * frac) as i64)),
            }
        })
        .collect();
    Gantt {
        width: n(WIDTH),
        height: n(axis_y + 18.0),
        label_width: n(LABEL),
        axis_y: n(axis_y),
        rows,
        bars,
        ticks,
        empty: d.spans.is_empty(),
    }
}
