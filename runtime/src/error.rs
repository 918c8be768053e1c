//! Step errors: what an action or undo reports when it does not succeed.
//!
//! A [`StepError`] is journaled, so it is plain serializable data: a retryable flag, a
//! stable `kind` (used by [`crate::RetryPolicy::non_retryable`]), an optional provider code
//! (e.g. the Azure error code `AuthorizationFailed`), a human message and an optional
//! server-requested delay (`Retry-After`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Well-known error kinds. Activities may use others; these are the ones the engine itself
/// produces or that retry policies commonly name.
pub mod kind {
    /// The attempt exceeded its per-attempt timeout.
    pub const TIMEOUT: &str = "timeout";
    /// The service asked us to slow down (HTTP 429).
    pub const THROTTLED: &str = "throttled";
    /// A transient server or network failure (5xx, connection reset).
    pub const TRANSIENT: &str = "transient";
    /// A conflicting operation is in progress; try again later.
    pub const CONFLICT: &str = "conflict";
    /// Input was rejected as invalid; retrying cannot help.
    pub const VALIDATION: &str = "validation";
    /// The caller is not allowed to do this.
    pub const AUTHORIZATION: &str = "authorization";
    /// A quota or limit was reached.
    pub const QUOTA: &str = "quota";
    /// The workflow definition is wrong (missing dependency output, bad input shape).
    pub const DEFINITION: &str = "definition";
    /// The run was cancelled by an operator while this attempt was in flight.
    pub const CANCELLED: &str = "cancelled";
    /// The attempt was interrupted by a process crash or lease loss and will be re-run.
    pub const INTERRUPTED: &str = "interrupted";
    /// A wait ran past its budget.
    pub const WAIT_BUDGET: &str = "wait_budget_exceeded";
}

/// An action's or undo's failure, classified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct StepError {
    /// Whether another attempt may succeed.
    pub retryable: bool,
    /// Stable classification (see [`kind`]).
    pub kind: String,
    /// Provider error code, e.g. `QuotaExceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Human-readable explanation, including what to do where known.
    pub message: String,
    /// Minimum delay before the next attempt, as requested by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl StepError {
    /// A failure another attempt may fix.
    pub fn retryable(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            retryable: true,
            kind: kind.into(),
            code: None,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// A failure no retry can fix.
    pub fn permanent(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            retryable: false,
            ..Self::retryable(kind, message)
        }
    }

    /// Attach a provider error code.
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// Attach a server-requested minimum delay.
    pub fn with_retry_after(mut self, d: Duration) -> Self {
        self.retry_after_ms = Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// Server-requested minimum delay, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after_ms.map(Duration::from_millis)
    }

    /// The error as it may be journaled: its text comes from outside (an Azure or
    /// Kubernetes answer), so NUL and other control characters are dropped (Postgres
    /// refuses a NUL in `text`, which wedged a run whose error carried one) and the message
    /// is cut at [`MAX_MESSAGE_BYTES`] (a 4 MiB error message was once journaled whole, on
    /// every attempt). The driver applies it to every attempt's error before it is staged.
    #[must_use]
    pub fn bounded(mut self) -> Self {
        self.message = bound_text(&self.message, MAX_MESSAGE_BYTES);
        self.kind = bound_text(&self.kind, MAX_CODE_BYTES);
        self.code = self.code.map(|c| bound_text(&c, MAX_CODE_BYTES));
        self
    }
}

/// The longest step error message journaled: enough for an Azure error with its details
/// and our hint (those run to a few hundred bytes), small enough that a run with
/// hundreds of attempts stays a few MB.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// The longest error kind or provider code journaled (Azure codes are short identifiers).
pub const MAX_CODE_BYTES: usize = 256;

/// `text` without NUL and other control characters (newline and tab stay), cut to at most
/// `max` bytes on a character boundary, saying how much was cut.
pub fn bound_text(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect();
    if clean.len() <= max {
        return clean;
    }
    let mut end = max.saturating_sub(40);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes cut)", &clean[..end], clean.len() - end)
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}", self.kind)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        write!(
            f,
            ", {}] {}",
            if self.retryable {
                "retryable"
            } else {
                "permanent"
            },
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_drops_control_characters_and_cuts_long_messages() {
        let e = StepError::permanent(
            "validation",
            format!("a\u{0}b\u{7}c\nd\te{}", "x".repeat(10_000)),
        )
        .with_code("Code\u{0}X")
        .bounded();
        assert!(e.message.starts_with("abc\nd\te"), "{}", &e.message[..20]);
        assert!(e.message.len() <= MAX_MESSAGE_BYTES, "{}", e.message.len());
        assert!(
            e.message.ends_with("more bytes cut)"),
            "{}",
            &e.message[e.message.len() - 40..]
        );
        assert_eq!(e.code.as_deref(), Some("CodeX"));
        // Multi-byte characters are never split.
        let s = bound_text(&"é".repeat(5000), 100);
        assert!(s.len() <= 100 + 40, "{}", s.len());
        assert_eq!(bound_text("short", 100), "short");
    }
}
