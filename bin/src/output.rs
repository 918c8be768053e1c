//! `--output json`: one versioned shape for every command.
//!
//! The contract (docs/reference/json-output.md):
//! - A command that answers once (`list`, `show`, `why`, `history`, `inventory`, `plan`,
//!   `preflight`, `cancel`/`retry`/`resolve`/`resume`, `bench`) prints
//!   exactly **one JSON document** on stdout: `{"apiVersion": "hcp-workflow/v1", "kind": …}`
//!   followed by the kind's fields. Collections carry their rows in `items`. (`bench`
//!   prints its `BenchResult` on one line whatever `--output` says.)
//! - A command that follows a run (`start`, `drive`, `selftest`, `watch`) prints **NDJSON**:
//!   one compact document per line, each `{"apiVersion", "kind": "Event", "type": …}`, with
//!   `type` one of `started`, `progress`, `finished`, `error`.  Ctrl-C ends the stream
//!   without a `finished` line (exit 130; the run goes on).
//! - A failure is a document too: `{"apiVersion", "kind": "Error", "error": {"reason",
//!   "message", "exit_code"}}` on stdout (a follower prints it as an `error` event line),
//!   with the same exit code as in text mode. The message also goes to stderr as `error:
//!   …`, in both modes (stderr is for people, stdout for programs).
//! - The same entity has the same field names everywhere: a run is `run_id` (and
//!   `short_id`), a resource `id`/`kind`/`type`, an operator command `command_id`; every
//!   time is an RFC 3339 string (`…_at`, `at`); durations are `…_ms` integers.
//!
//! `apiVersion` changes only when a field is removed or changes meaning; new fields may be
//! added within `hcp-workflow/v1`.

use serde::Serialize;
use std::io::Write;

/// The schema version of every JSON document this binary prints.
pub const API_VERSION: &str = "hcp-workflow/v1";

/// A document: `apiVersion` and `kind` first, then the body's fields.
#[derive(Serialize)]
struct Doc<'a, T: Serialize> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'a str,
    #[serde(flatten)]
    body: &'a T,
}

/// A collection document's body.
#[derive(Serialize)]
struct Items<'a, T: Serialize> {
    items: &'a [T],
}

/// A follower's line: `kind: Event` and its `type`.
#[derive(Serialize)]
struct EventDoc<'a, T: Serialize> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    #[serde(rename = "type")]
    event_type: &'a str,
    #[serde(flatten)]
    body: &'a T,
}

/// What an `Error` document says.
#[derive(Serialize, Debug, Clone)]
pub struct ErrorBody {
    /// Stable reason: `InvalidInput`, `BadRunRef`, `NoJournal`, `Refused`, `Failed`.
    pub reason: String,
    /// The message, as text mode prints it.
    pub message: String,
    /// The process's exit code.
    pub exit_code: u8,
    /// Structured detail where there is some (a refused start's preflight report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

fn emit(line: String) {
    let mut out = std::io::stdout().lock();
    // A closed pipe ends the process by SIGPIPE (see `main`); other write errors have
    // nowhere better to go.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Serialize or say why not (a bug, never data from outside the process).
fn to_json<T: Serialize>(v: &T, pretty: bool) -> String {
    let r = if pretty {
        serde_json::to_string_pretty(v)
    } else {
        serde_json::to_string(v)
    };
    r.unwrap_or_else(|e| {
        format!(
            r#"{{"apiVersion":"{API_VERSION}","kind":"Error","error":{{"reason":"Failed","message":"cannot serialize the output: {e}","exit_code":1}}}}"#
        )
    })
}

/// Print one document of `kind` (pretty) on stdout.
pub fn document<T: Serialize>(kind: &str, body: &T) {
    emit(to_json(
        &Doc {
            api_version: API_VERSION,
            kind,
            body,
        },
        true,
    ));
}

/// Print one document of `kind` on one line (`bench`: one result a line, appendable to a
/// results file).
pub fn compact<T: Serialize>(kind: &str, body: &T) {
    emit(to_json(
        &Doc {
            api_version: API_VERSION,
            kind,
            body,
        },
        false,
    ));
}

/// Print one collection document of `kind` (its rows in `items`) on stdout.
pub fn list<T: Serialize>(kind: &str, items: &[T]) {
    document(kind, &Items { items });
}

/// Print one follower line (`kind: Event`, compact) on stdout.
pub fn event<T: Serialize>(event_type: &str, body: &T) {
    emit(to_json(
        &EventDoc {
            api_version: API_VERSION,
            kind: "Event",
            event_type,
            body,
        },
        false,
    ));
}

/// An `Error` document's body (and a follower's `error` line's).
#[derive(Serialize)]
pub struct ErrorDoc<'a> {
    /// What failed.
    pub error: &'a ErrorBody,
}

/// Print an `Error` document on stdout.
pub fn error(body: &ErrorBody) {
    document("Error", &ErrorDoc { error: body });
}

/// A refused command or invalid input, reported by `main` with exit code 2: as `error:
/// <message>` on stderr in text mode, as an `Error` document in JSON mode. Commands return
/// it instead of printing themselves, so that both modes say the same.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// `InvalidInput`, `Refused`, ….
    pub reason: &'static str,
    /// What was wrong and the fix (may span lines).
    pub message: String,
    /// Structured detail for the `Error` document (`details`).
    pub details: Option<serde_json::Value>,
}

impl Refused {
    /// Invalid input (a bad flag value, file, step name): nothing was done.
    pub fn input(message: impl Into<String>) -> anyhow::Error {
        Self {
            reason: "InvalidInput",
            message: message.into(),
            details: None,
        }
        .into()
    }

    /// A command the run's state or the journal does not allow: nothing was done.
    pub fn refused(message: impl Into<String>) -> anyhow::Error {
        Self {
            reason: "Refused",
            message: message.into(),
            details: None,
        }
        .into()
    }

    /// Like [`Refused::refused`], with structured `details`.
    pub fn refused_with(message: impl Into<String>, details: serde_json::Value) -> anyhow::Error {
        Self {
            reason: "Refused",
            message: message.into(),
            details: Some(details),
        }
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_lead_with_api_version_and_kind() {
        let body = serde_json::json!({"b": 1, "a": 2});
        let s = to_json(
            &Doc {
                api_version: API_VERSION,
                kind: "Thing",
                body: &body,
            },
            false,
        );
        assert!(
            s.starts_with(r#"{"apiVersion":"hcp-workflow/v1","kind":"Thing","#),
            "{s}"
        );
        let e = to_json(
            &EventDoc {
                api_version: API_VERSION,
                kind: "Event",
                event_type: "started",
                body: &body,
            },
            false,
        );
        assert!(
            e.starts_with(r#"{"apiVersion":"hcp-workflow/v1","kind":"Event","type":"started","#),
            "{e}"
        );
    }
}
