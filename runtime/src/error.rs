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
