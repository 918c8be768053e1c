//! Lays the timeline out: one row per step, one bar per attempt, undo attempt and wait,
//! positioned by journal timestamps. The template draws the result as inline SVG (no
//! inline script or styles: the page's CSP forbids both).
//!
//! Step names sit in a fixed column left of the bars (truncated, full name on hover), so
//! a label never overlaps a bar. The axis has round ticks (1, 2, 5 × 10ⁿ of a unit). A
//! [`Zoom`] shows a window of the run: the forward steps, the unwind, or any range (the
//! zoom links, or a range dragged on the chart, which `app.js` turns into `?from=&to=`),
//! so a long unwind does not squeeze the forward steps into a pixel.

use crate::views::model::{RunDetail, Span, human_duration};
use serde::{Deserialize, Serialize};

/// Width of the drawing, in SVG units.
const WIDTH: f64 = 1000.0;
/// Left column for step names (bars start right of it).
const LABEL: f64 = 230.0;
/// Gap between the bars' right end and the drawing's edge.
const PAD: f64 = 12.0;
/// Right end of the bars.
const PLOT_END: f64 = WIDTH - PAD;
/// Height of the axis band above the rows.
const AXIS: f64 = 20.0;
/// Row height.
const ROW: f64 = 22.0;
/// Narrowest visible bar.
const MIN_BAR: f64 = 2.0;
/// Characters of a step name that fit the label column (11 px monospace).
const LABEL_CHARS: usize = 31;
/// Aim for at most this many ticks.
const MAX_TICKS: i64 = 8;
/// The narrowest window a zoom shows (ms).
const MIN_WINDOW_MS: i64 = 5;

/// Round tick intervals (ms): 1, 2, 5 × 10ⁿ of milliseconds, seconds, minutes and hours
/// (with 30 s, 30 min, 3 h, 6 h and 12 h where a clock has them).
const STEPS: [i64; 27] = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 60_000,
    120_000, 300_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000,
    43_200_000, 86_400_000,
];

/// The timeline's query parameters (`?zoom=forward`, `?from=1000&to=5000`; ms since the
/// run's first attempt). Anything unparseable shows the whole run.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ZoomQuery {
    #[serde(default)]
    pub zoom: Option<String>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
}

/// Which part of the run the timeline shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoom {
    /// Everything.
    All,
    /// From the first to the last forward attempt.
    Forward,
    /// From the first to the last undo attempt.
    Unwind,
    /// A range, in ms since the run's first attempt.
    Range(i64, i64),
}

impl Zoom {
    /// From the query (`zoom` wins over `from`/`to`).
    pub fn from_query(q: &ZoomQuery) -> Self {
        match q.zoom.as_deref().map(str::trim) {
            Some("forward") => return Self::Forward,
            Some("unwind") => return Self::Unwind,
            Some("all") => return Self::All,
            _ => {}
        }
        let num = |s: &Option<String>| s.as_deref().and_then(|v| v.trim().parse::<i64>().ok());
        match (num(&q.from), num(&q.to)) {
            (Some(a), Some(b)) if b > a => Self::Range(a, b),
            _ => Self::All,
        }
    }

    /// The query string that selects this zoom (empty for the whole run).
    pub fn query(self) -> String {
        match self {
            Self::All => String::new(),
            Self::Forward => "zoom=forward".into(),
            Self::Unwind => "zoom=unwind".into(),
            Self::Range(a, b) => format!("from={a}&to={b}"),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Bar {
    pub x: String,
    pub y: String,
    pub w: String,
    pub h: String,
    /// CSS class: `bar action attempt ok`, `bar undo attempt failed`, `bar action wait`, …
    pub class: String,
    /// Tooltip.
    pub title: String,
}

#[derive(Debug, Serialize)]
pub struct Row {
    /// The step name as drawn (truncated to the label column).
    pub name: String,
    /// The full step name (tooltip).
    pub full: String,
    pub y: String,
    pub text_y: String,
}

#[derive(Debug, Serialize)]
pub struct Tick {
    pub x: String,
    pub label: String,
}

/// A zoom link above the chart.
#[derive(Debug, Serialize)]
pub struct ZoomLink {
    /// Link text.
    pub label: String,
    /// What it shows (tooltip).
    pub title: String,
    /// Query string (`zoom=forward`, `from=…&to=…`, empty for the whole run).
    pub query: String,
    /// Whether this is what the chart shows now.
    pub active: bool,
    /// `id` attribute (tests click on these).
    pub id: String,
}

#[derive(Debug, Serialize)]
pub struct Gantt {
    pub width: String,
    pub height: String,
    pub label_width: String,
    /// Right end of the bars.
    pub plot_end: String,
    /// Top of the first row (below the tick labels).
    pub rows_top: String,
    /// The prefix every step name shares, left out of the labels (`create-cluster.`).
    pub prefix: String,
    pub rows: Vec<Row>,
    pub bars: Vec<Bar>,
    pub ticks: Vec<Tick>,
    pub empty: bool,
    /// Wall-clock time from the first attempt to the last (or now): `4m12s`.
    pub total: String,
    /// Forward phase, when there was one: `1m05s`.
    pub forward: Option<String>,
    /// Unwind phase, when there was one: `3m07s`.
    pub unwind: Option<String>,
    /// Where the unwind started, when it is in view.
    pub unwind_x: Option<String>,
    /// The window shown, when zoomed: `+1m – +3m of 12m10s`.
    pub window: Option<String>,
    /// The query string of the zoom shown (kept by the live refresh).
    pub query: String,
    /// Window shown, in ms since the first attempt (the drag-to-zoom script reads these).
    pub from_ms: i64,
    pub to_ms: i64,
    pub links: Vec<ZoomLink>,
}

fn n(v: f64) -> String {
    format!("{v:.1}")
}

/// An offset on the axis: `0`, `+500ms`, `+1.5s`, `+20s`, `+1m30s`, `+2h`, `+1h30m`.
pub fn offset_label(ms: i64) -> String {
    if ms <= 0 {
        return "0".into();
    }
    if ms < 1000 {
        return format!("+{ms}ms");
    }
    if ms % 1000 != 0 && ms < 60_000 {
        let s = format!("{:.3}", ms as f64 / 1000.0);
        let s = s.trim_end_matches('0').trim_end_matches('.');
        return format!("+{s}s");
    }
    let total_s = ms / 1000;
    let (d, h, m, s) = (
        total_s / 86_400,
        (total_s % 86_400) / 3600,
        (total_s % 3600) / 60,
        total_s % 60,
    );
    let mut out = String::from("+");
    for (v, unit) in [(d, "d"), (h, "h"), (m, "m"), (s, "s")] {
        if v > 0 {
            out.push_str(&format!("{v}{unit}"));
        }
    }
    out
}

/// The round tick interval for a window of `span` ms: the smallest of [`STEPS`] giving at
/// most [`MAX_TICKS`] ticks.
pub fn tick_step(span: i64) -> i64 {
    let span = span.max(1);
    STEPS
        .iter()
        .copied()
        .find(|s| span / s < MAX_TICKS)
        .unwrap_or_else(|| {
            // Beyond days: whole multiples of a day, still 1/2/5 × 10ⁿ.
            let day = 86_400_000;
            let mut m = 1;
            loop {
                for k in [1, 2, 5] {
                    if span / (k * m * day) < MAX_TICKS {
                        return k * m * day;
                    }
                }
                m *= 10;
            }
        })
}

/// Fit `name` to the label column: its end is what tells steps apart (and what `--step`
/// takes), so a long name loses its beginning, marked with `…`.
fn truncate(name: &str) -> String {
    let n = name.chars().count();
    if n <= LABEL_CHARS {
        return name.to_string();
    }
    let mut s = String::from("…");
    s.extend(name.chars().skip(n - (LABEL_CHARS - 1)));
    s
}

/// The dotted prefix every step name shares (`create-cluster.`), which the labels leave
/// out (the axis corner names it once); empty when there is none.
pub fn common_prefix<'a>(names: &[&'a str]) -> &'a str {
    let Some((first, rest)) = names.split_first() else {
        return "";
    };
    if rest.is_empty() {
        return "";
    }
    let mut len = first.len();
    for n in rest {
        len = len.min(
            first
                .bytes()
                .zip(n.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    // Cut after the last dot of the shared part, and keep every name non-empty.
    match first[..len].rfind('.') {
        Some(dot) if names.iter().all(|n| n.len() > dot + 1) => &first[..=dot],
        _ => "",
    }
}

fn title(s: &Span, t0: i64) -> String {
    let what = match (s.kind.as_str(), s.phase.as_str()) {
        ("wait", "undo") => "undo waiting".to_string(),
        ("wait", _) => "waiting".to_string(),
        (_, "undo") => format!("undo attempt {}", s.attempt),
        _ => format!("attempt {}", s.attempt),
    };
    let mut t = format!(
        "{}: {what}, {} ({}, at {})",
        s.node,
        s.outcome,
        human_duration(s.end_ms - s.start_ms),
        offset_label(s.start_ms - t0)
    );
    if let Some(d) = &s.detail {
        t.push_str(" — ");
        t.push_str(d);
    }
    t
}

/// First start and last end of the spans of `phase` (ms since `t0`).
fn phase_range(d: &RunDetail, phase: &str, t0: i64) -> Option<(i64, i64)> {
    let mut it = d.spans.iter().filter(|s| s.phase == phase);
    let first = it.next()?;
    let (a, b) = it.fold((first.start_ms, first.end_ms), |(a, b), s| {
        (a.min(s.start_ms), b.max(s.end_ms))
    });
    Some((a - t0, b - t0))
}

/// `(a, b)` widened to at least [`MIN_WINDOW_MS`], padded by 2 % each side, kept inside
/// `[0, total]`.
fn fit(a: i64, b: i64, total: i64, pad: bool) -> (i64, i64) {
    let (mut a, mut b) = (a.max(0), b.min(total));
    if pad {
        let p = (b - a) / 50;
        a = (a - p).max(0);
        b = (b + p).min(total);
    }
    if b - a < MIN_WINDOW_MS {
        let c = (a + b) / 2;
        a = (c - MIN_WINDOW_MS / 2).max(0);
        b = (a + MIN_WINDOW_MS).min(total.max(MIN_WINDOW_MS));
        a = (b - MIN_WINDOW_MS).max(0);
    }
    (a, b)
}

/// Lay out the run's spans, showing the part `zoom` selects.
pub fn layout(d: &RunDetail, zoom: Zoom) -> Gantt {
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
    let total = t1 - t0;
    let forward = phase_range(d, "action", t0);
    let unwind = phase_range(d, "undo", t0);
    // Named zooms track a live run; a phase that has not happened shows everything.
    let zoom = match zoom {
        Zoom::Forward if forward.is_none() => Zoom::All,
        Zoom::Unwind if unwind.is_none() => Zoom::All,
        z => z,
    };
    let (from, to) = match zoom {
        Zoom::All => (0, total),
        Zoom::Forward => forward.map_or((0, total), |(a, b)| fit(a, b, total, true)),
        Zoom::Unwind => unwind.map_or((0, total), |(a, b)| fit(a, b, total, true)),
        Zoom::Range(a, b) => fit(a, b, total, false),
    };
    let (zoom, from, to) = if zoom != Zoom::All && from == 0 && to >= total {
        (Zoom::All, 0, total)
    } else {
        (zoom, from, to)
    };
    let span = (to - from).max(1);
    let scale = (PLOT_END - LABEL) / span as f64;
    let x_of = |t: i64| LABEL + (t - from) as f64 * scale;
    let row_of = |node: &str| names.iter().position(|n| *n == node).unwrap_or(0);
    let bars = d
        .spans
        .iter()
        .filter_map(|s| {
            let (a, b) = (s.start_ms - t0, s.end_ms - t0);
            if b < from || a > to {
                return None;
            }
            let (a, b) = (a.max(from), b.min(to));
            let w = ((b - a) as f64 * scale).max(MIN_BAR);
            let x = x_of(a).min(PLOT_END - w);
            let r = row_of(&s.node) as f64;
            let (y, h) = if s.kind == "wait" {
                (AXIS + r * ROW + 9.0, 4.0)
            } else {
                (AXIS + r * ROW + 4.0, 14.0)
            };
            Some(Bar {
                x: n(x),
                y: n(y),
                w: n(w),
                h: n(h),
                class: format!("bar {} {} {}", s.phase, s.kind, s.outcome),
                title: title(s, t0),
            })
        })
        .collect();
    let prefix = common_prefix(&names);
    let rows = names
        .iter()
        .enumerate()
        .map(|(i, name)| Row {
            name: truncate(&name[prefix.len()..]),
            full: name.to_string(),
            y: n(AXIS + i as f64 * ROW),
            text_y: n(AXIS + i as f64 * ROW + 15.0),
        })
        .collect();
    let step = tick_step(span);
    let first = (from + step - 1).div_euclid(step) * step;
    let ticks = (0..)
        .map(|k| first + k * step)
        .take_while(|t| *t <= to)
        .map(|t| Tick {
            x: n(x_of(t)),
            label: offset_label(t),
        })
        .collect();
    let unwind_x = unwind
        .map(|(a, _)| a)
        .filter(|a| *a > from && *a < to)
        .map(|a| n(x_of(a)));
    let window = (zoom != Zoom::All).then(|| {
        // To a tenth of a tick: `+9.2s – +19.6s`, not `+9.058s – +19.676s`.
        let unit = (step / 10).max(1);
        let round = |t: i64| (t + unit / 2) / unit * unit;
        format!(
            "{} – {} of {}",
            offset_label(round(from)),
            offset_label(round(to)),
            human_duration(total)
        )
    });
    let mut links = vec![ZoomLink {
        label: "whole run".into(),
        title: format!("all of it: {}", human_duration(total)),
        query: Zoom::All.query(),
        active: zoom == Zoom::All,
        id: "zoom-all".into(),
    }];
    if let Some((a, b)) = forward {
        links.push(ZoomLink {
            label: "forward".into(),
            title: format!("the forward steps: {}", human_duration(b - a)),
            query: Zoom::Forward.query(),
            active: zoom == Zoom::Forward,
            id: "zoom-forward".into(),
        });
    }
    if let Some((a, b)) = unwind {
        links.push(ZoomLink {
            label: "unwind".into(),
            title: format!("the unwind: {}", human_duration(b - a)),
            query: Zoom::Unwind.query(),
            active: zoom == Zoom::Unwind,
            id: "zoom-unwind".into(),
        });
    }
    if span > MIN_WINDOW_MS {
        let (c, q) = ((from + to) / 2, span / 4);
        let (a, b) = fit(c - q, c + q, total, false);
        links.push(ZoomLink {
            label: "zoom in".into(),
            title: "the middle half of this window".into(),
            query: Zoom::Range(a, b).query(),
            active: false,
            id: "zoom-in".into(),
        });
    }
    if zoom != Zoom::All {
        let (a, b) = fit(from - span / 2, to + span / 2, total, false);
        let out = if a == 0 && b >= total {
            Zoom::All
        } else {
            Zoom::Range(a, b)
        };
        links.push(ZoomLink {
            label: "zoom out".into(),
            title: "twice this window".into(),
            query: out.query(),
            active: false,
            id: "zoom-out".into(),
        });
        if from > 0 {
            let a = (from - span / 2).max(0);
            links.push(ZoomLink {
                label: "◀ earlier".into(),
                title: "move the window back by half its width".into(),
                query: Zoom::Range(a, a + span).query(),
                active: false,
                id: "zoom-earlier".into(),
            });
        }
        if to < total {
            let b = (to + span / 2).min(total);
            links.push(ZoomLink {
                label: "later ▶".into(),
                title: "move the window on by half its width".into(),
                query: Zoom::Range(b - span, b).query(),
                active: false,
                id: "zoom-later".into(),
            });
        }
    }
    let height = AXIS + names.len() as f64 * ROW + 4.0;
    Gantt {
        width: n(WIDTH),
        height: n(height),
        label_width: n(LABEL),
        plot_end: n(PLOT_END),
        rows_top: n(AXIS),
        prefix: prefix.to_string(),
        rows,
        bars,
        ticks,
        empty: d.spans.is_empty(),
        total: human_duration(total),
        forward: forward.map(|(a, b)| human_duration(b - a)),
        unwind: unwind.map(|(a, b)| human_duration(b - a)),
        unwind_x,
        window,
        query: zoom.query(),
        from_ms: from,
        to_ms: to,
        links,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(700), 100);
        assert_eq!(tick_step(9_000), 2_000);
        assert_eq!(tick_step(60_000), 10_000);
        assert_eq!(tick_step(15 * 60_000), 120_000);
        assert_eq!(tick_step(3 * 3_600_000), 1_800_000);
        assert_eq!(tick_step(100 * 86_400_000), 20 * 86_400_000);
        for span in [1, 50, 999, 12_345, 777_777, 9_999_999, 123_456_789] {
            let s = tick_step(span);
            assert!(span / s < MAX_TICKS, "{span}: {s}");
        }
    }

    #[test]
    fn offsets_read_like_durations() {
        assert_eq!(offset_label(0), "0");
        assert_eq!(offset_label(500), "+500ms");
        assert_eq!(offset_label(1_500), "+1.5s");
        assert_eq!(offset_label(20_000), "+20s");
        assert_eq!(offset_label(90_000), "+1m30s");
        assert_eq!(offset_label(7_200_000), "+2h");
        assert_eq!(offset_label(5_400_000), "+1h30m");
    }

    #[test]
    fn zoom_queries_round_trip() {
        for z in [
            Zoom::All,
            Zoom::Forward,
            Zoom::Unwind,
            Zoom::Range(1000, 5000),
        ] {
            let mut q = ZoomQuery::default();
            for kv in z.query().split('&').filter(|s| !s.is_empty()) {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                match k {
                    "zoom" => q.zoom = Some(v.into()),
                    "from" => q.from = Some(v.into()),
                    "to" => q.to = Some(v.into()),
                    _ => {}
                }
            }
            assert_eq!(Zoom::from_query(&q), z);
        }
        let bad = ZoomQuery {
            zoom: None,
            from: Some("x".into()),
            to: Some("9".into()),
        };
        assert_eq!(Zoom::from_query(&bad), Zoom::All);
        let backwards = ZoomQuery {
            zoom: None,
            from: Some("9".into()),
            to: Some("1".into()),
        };
        assert_eq!(Zoom::from_query(&backwards), Zoom::All);
    }

    #[test]
    fn long_names_are_cut_to_the_label_column() {
        assert_eq!(truncate("a"), "a");
        let long = "x".repeat(60);
        let t = truncate(&format!("{long}.tail"));
        assert_eq!(t.chars().count(), LABEL_CHARS);
        assert!(t.starts_with('…') && t.ends_with(".tail"), "{t}");
        assert_eq!(
            common_prefix(&[
                "create-cluster.a.x",
                "create-cluster.b",
                "create-cluster.a.y"
            ]),
            "create-cluster."
        );
        assert_eq!(common_prefix(&["a", "b1", "b2"]), "");
        assert_eq!(common_prefix(&["w.a"]), "", "one step keeps its name");
        assert_eq!(common_prefix(&["w.a.b", "w.a."]), "", "no empty label");
        assert_eq!(common_prefix(&[]), "");
    }
}
