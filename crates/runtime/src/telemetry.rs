//! Logs and traces (docs/deployment.md#logs-and-traces).
//!
//! Logs go to stderr as text or, with `--log-format json`, one JSON object per
//! line; `RUST_LOG` overrides [`DEFAULT_FILTER`]. When the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans are also exported by OTLP/HTTP
//! and every call carries a W3C `traceparent`: the gateway's HTTP and gRPC
//! requests, its calls to K and P ([`inject`]) and the shards' handling of
//! them ([`server_span`]) form one trace. Unset, none of that is installed
//! and [`inject`] does nothing.

use std::{
    str::FromStr,
    sync::atomic::{AtomicBool, Ordering},
};

use opentelemetry::{propagation::Injector, trace::TracerProvider as _};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider, Resource};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, EnvFilter};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// For people: `2026-11-30T00:00:00Z  INFO message key=value`.
    #[default]
    Text,
    /// For log pipelines: one JSON object per line, with the fields
    /// `timestamp`, `level`, `target`, `fields` (`message` and the event's own)
    /// and `span`/`spans` (the spans it happened in).
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!("unknown log format {other:?}: use text or json")),
        }
    }
}

/// What is logged unless `RUST_LOG` says otherwise. tonic reports a refused
/// TLS handshake (no client certificate, a certificate from another CA, a
/// plaintext client) only at debug level, on its `io_stream` target; an
/// operator turning mutual TLS on needs to see those, so that target is on.
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,tonic::transport::server::io_stream=debug";

/// Whether spans are exported, so trace context is worth propagating.
static TRACING: AtomicBool = AtomicBool::new(false);

/// Keeps the span exporter alive; dropping it sends the spans not sent yet.
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(traces) = self.traces.take() {
            if let Err(error) = traces.shutdown() {
                eprintln!("could not send the last spans: {error}");
            }
        }
    }
}

/// Sets up logging, and span export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
/// for the part called `service` (`OTEL_SERVICE_NAME` overrides it). Call it
/// before the tokio runtime starts. Safe to call twice (tests, `pastebin up`):
/// the second call sets nothing up.
pub fn init(service: &str, format: LogFormat) -> Telemetry {
    let traces = std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").and_then(|_| match span_exporter(service) {
        Ok(traces) => Some(traces),
        Err(error) => {
            eprintln!("OTEL_EXPORTER_OTLP_ENDPOINT is set but spans cannot be exported: {error}");
            None
        }
    });
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
    });
    let json = (format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_current_span(true)
            .with_span_list(true)
    });
    let spans = traces.as_ref().map(|traces| tracing_opentelemetry::layer().with_tracer(traces.tracer("pastebin")));
    let installed = tracing_subscriber::registry().with(filter).with(text).with(json).with(spans).try_init().is_ok();
    if installed && traces.is_some() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        TRACING.store(true, Ordering::Relaxed);
    }
    Telemetry { traces: traces.filter(|_| installed) }
}

fn span_exporter(service: &str) -> anyhow::Result<SdkTracerProvider> {
    // Endpoint, protocol (http/protobuf or http/json), headers and timeout
    // come from the standard OTEL_EXPORTER_OTLP_* variables.
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().build()?;
    let resource = match std::env::var_os("OTEL_SERVICE_NAME") {
        Some(_) => Resource::builder().build(),
        None => Resource::builder().with_service_name(service.to_owned()).build(),
    };
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

/// The span a server runs one request in, when traces are exported (else
/// none, at no cost): `name` is the route or gRPC method (never a path
/// holding a paste id), and its parent is the caller's `traceparent`, if any.
pub fn server_span(name: &str, headers: &http::HeaderMap) -> tracing::Span {
    if !TRACING.load(Ordering::Relaxed) {
        return tracing::Span::none();
    }
    let span = tracing::info_span!("request", otel.name = name, otel.kind = "server");
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(headers))
    });
    // Fails only when the span is disabled by the filter: then there is nothing to link.
    let _ = span.set_parent(parent);
    span
}

/// Writes the current span's `traceparent` into an outgoing gRPC call.
pub fn inject(metadata: &mut tonic::metadata::MetadataMap) {
    if !TRACING.load(Ordering::Relaxed) {
        return;
    }
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut MetadataInjector(metadata))
    });
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        let key = tonic::metadata::MetadataKey::from_bytes(key.as_bytes());
        if let (Ok(key), Ok(value)) = (key, tonic::metadata::MetadataValue::try_from(value)) {
            self.0.insert(key, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_formats_parse_and_a_wrong_one_says_which_exist() {
        assert_eq!("json".parse(), Ok(LogFormat::Json));
        assert_eq!("text".parse(), Ok(LogFormat::Text));
        assert!("xml".parse::<LogFormat>().unwrap_err().contains("text or json"));
    }
}
