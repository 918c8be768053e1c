//! Logging and optional OTLP trace export.
//!
//! Logs go to stderr (text or JSON). Text logs are coloured only when stderr is a terminal
//! and `NO_COLOR` is not set (see [`crate::style`]). With the `otlp` feature and
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set, the engine's spans (`run` with `run_id`, `step` with
//! `node`, `phase`, `attempt`) are also exported over OTLP/HTTP.
//!
//! A worker also follows the engine's `run` spans (one per leased run, from the lease to
//! the run leaving the worker) to log the runs it picks up and lets go: see
//! [`watch_runs`].

use hcp_runtime::RunId;
use std::sync::Mutex;
use tokio::sync::mpsc;
use tracing::span;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Flushes exported spans when dropped (at the end of `main`).
#[derive(Debug, Default)]
pub struct Guard {
    #[cfg(feature = "otlp")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        #[cfg(feature = "otlp")]
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// The `RUST_LOG` filter, default `warn` (sqlx's pool at `error`, kube's client off), but a
/// worker's one line per run picked up, finished, failed, paused or released at `info`
/// (`crate::services::RUN_LOG`).
fn env_filter() -> tracing_subscriber::EnvFilter {
    // sqlx warns on every slow pool acquire; under load that drowns real warnings. kube's
    // client logs every failed request at ERROR and returns the same error to us, which a
    // preflight row or a step's error then says with its fix: its raw line only repeats it.
    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "warn,{}=info,sqlx::pool=error,kube_client=off",
            crate::services::RUN_LOG
        ))
    })
}

/// Install the global subscriber. `json` selects JSON log lines.
pub fn init(json: bool) -> Guard {
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(crate::style::stderr_color());
    let fmt = if json {
        fmt.json().with_filter(env_filter()).boxed()
    } else {
        fmt.with_filter(env_filter()).boxed()
    };
    // Only the engine's `run` spans, whatever `RUST_LOG` says, for `watch_runs`.
    let runs = RunSpans.with_filter(
        tracing_subscriber::filter::filter_fn(|m| {
            m.is_span() && m.name() == "run" && m.target().starts_with("hcp_runtime")
        })
        .with_max_level_hint(tracing::level_filters::LevelFilter::INFO),
    );
    let registry = tracing_subscriber::registry().with(fmt).with(runs);
    #[cfg(feature = "otlp")]
    {
        if let Some((layer, provider)) = otlp_layer() {
            registry.with(layer.with_filter(env_filter())).init();
            return Guard {
                provider: Some(provider),
            };
        }
    }
    registry.init();
    Guard::default()
}

/// A run entering or leaving this process's engine (see [`watch_runs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMove {
    /// The engine leased the run and started driving it.
    PickedUp(RunId),
    /// The run's driver ended: the run finished, waits for an operator, is parked, or its
    /// lease was given back (a long wait, shutdown) or lost.
    Left(RunId),
}

static RUN_MOVES: Mutex<Option<mpsc::UnboundedSender<RunMove>>> = Mutex::new(None);

/// From now on, report every run the engine of this process picks up or lets go.
pub fn watch_runs() -> mpsc::UnboundedReceiver<RunMove> {
    let (tx, rx) = mpsc::unbounded_channel();
    if let Ok(mut g) = RUN_MOVES.lock() {
        *g = Some(tx);
    }
    rx
}

/// Stop reporting: the receiver of [`watch_runs`] ends after what was already sent.
pub fn stop_watching_runs() {
    if let Ok(mut g) = RUN_MOVES.lock() {
        *g = None;
    }
}

fn report(m: RunMove) {
    if let Ok(g) = RUN_MOVES.lock()
        && let Some(tx) = g.as_ref()
    {
        let _ = tx.send(m);
    }
}

/// The run id of an engine `run` span, kept in the span's extensions until it closes.
#[derive(Debug, Clone, Copy)]
struct RunSpanId(RunId);

/// Sees the engine's `run` spans open (a run leased) and close (the run left).
#[derive(Debug)]
struct RunSpans;

impl<S> Layer<S> for RunSpans
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut v = RunIdField(None);
        attrs.record(&mut v);
        let (Some(run), Some(span)) = (v.0, ctx.span(id)) else {
            return;
        };
        span.extensions_mut().insert(RunSpanId(run));
        report(RunMove::PickedUp(run));
    }

    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        let run = ctx
            .span(&id)
            .and_then(|s| s.extensions().get::<RunSpanId>().copied());
        if let Some(RunSpanId(run)) = run {
            report(RunMove::Left(run));
        }
    }
}

/// Picks the `run_id` field out of a span's attributes.
struct RunIdField(Option<RunId>);

impl tracing::field::Visit for RunIdField {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "run_id" {
            self.0 = value.parse().ok();
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "run_id" {
            self.0 = format!("{value:?}").trim_matches('"').parse().ok();
        }
    }
}

#[cfg(feature = "otlp")]
fn otlp_layer<S>() -> Option<(
    impl tracing_subscriber::Layer<S>,
    opentelemetry_sdk::trace::SdkTracerProvider,
)>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry::trace::TracerProvider as _;
    std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok()?;
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("warning: OTLP export disabled: {e}");
            return None;
        }
    };
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    let tracer = provider.tracer("hcp-workflow");
    opentelemetry::global::set_tracer_provider(provider.clone());
    Some((tracing_opentelemetry::layer().with_tracer(tracer), provider))
}
