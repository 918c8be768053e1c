//! Logging and optional OTLP trace export.
//!
//! Logs go to stderr (text or JSON). With the `otlp` feature and
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set, the engine's spans (`run` with `run_id`, `step` with
//! `node`, `phase`, `attempt`) are also exported over OTLP/HTTP.

use tracing_subscriber::layer::SubscriberExt;
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

/// Install the global subscriber. `json` selects JSON log lines.
pub fn init(json: bool) -> Guard {
    // sqlx warns on every slow pool acquire; under load that drowns real warnings.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx::pool=error"));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    #[cfg(feature = "otlp")]
    {
        if let Some((layer, provider)) = otlp_layer() {
            registry.with(layer).init();
            return Guard {
                provider: Some(provider),
            };
        }
    }
    registry.init();
    Guard::default()
}

use tracing_subscriber::Layer;

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
