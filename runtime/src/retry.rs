//! Retry policies and the delay schedule.
//!
//! The engine computes every delay itself and journals the resulting `next_at`, so a restart
//! continues the same schedule (RUSTSEC-2025-0012: the `backoff` crate is unmaintained, and
//! an in-memory retry loop around a side effect would not survive a crash anyway).

use crate::error::StepError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Per-node retry policy (one for the action, one for the undo).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Delay before the second attempt.
    pub initial_interval_ms: u64,
    /// Multiplier applied per further attempt (≥ 1.0).
    pub coefficient: f64,
    /// Upper bound on the computed delay (a server's Retry-After may exceed it).
    pub max_interval_ms: u64,
    /// Attempts in total, including the first. `0` means unlimited.
    pub max_attempts: u32,
    /// Each attempt is abandoned (and counted as a retryable `timeout`) after this long.
    pub attempt_timeout_ms: u64,
    /// Error kinds that are permanent for this node even when reported retryable.
    #[serde(default)]
    pub non_retryable: Vec<String>,
    /// How long this phase may keep waiting (durable polls), counted from its first wait,
    /// before an operator must decide. A forward step past it stalls (the run needs an
    /// operator: `retry` gives a fresh budget, `cancel` unwinds; it never unwinds on its
    /// own); an undo past it gives up like an undo out of retries. `0`: no budget.
    #[serde(default = "default_wait_budget_ms")]
    pub wait_budget_ms: u64,
    /// How long this phase may keep getting "not now" answers (throttled, transient:
    /// [`is_soft`]), counted from the first one, before it gives up. Those answers do not
    /// use up `max_attempts`, which are meant for real failures: a subscription throttled
    /// for twenty minutes by a fleet of clusters is not a reason to unwind an hour of work.
    #[serde(default = "default_transient_budget_ms")]
    pub transient_budget_ms: u64,
}

/// 30 minutes: ARM's throttling windows are per minute to per hour; a service that is
/// still refusing after half an hour needs a person.
pub const DEFAULT_TRANSIENT_BUDGET: Duration = Duration::from_secs(30 * 60);

fn default_transient_budget_ms() -> u64 {
    duration_ms(DEFAULT_TRANSIENT_BUDGET)
}

/// Whether an error kind says "not now" rather than "no": the service throttled us or was
/// unreachable or failing (429, 5xx, a dropped connection). Such answers are retried within
/// [`RetryPolicy::transient_budget_ms`] and never use up the attempts of
/// [`RetryPolicy::max_attempts`].
pub fn is_soft(kind: &str) -> bool {
    kind == crate::error::kind::THROTTLED || kind == crate::error::kind::TRANSIENT
}

/// Full jitter ("Exponential Backoff And Jitter", AWS Architecture Blog, 2015): a delay
/// drawn uniformly from `[floor, delay]`, where `floor` is the server's `Retry-After` (never
/// retry before it) or zero. Many runs throttled together otherwise retry in lockstep and
/// are throttled together again. When the server's wait is the whole delay, up to a fifth
/// is added on top, so they still spread out. `unit` is a uniform draw from `[0, 1)`; the
/// driver journals the result as the attempt's `next_at`, so a restart keeps it.
pub fn jittered(delay: Duration, retry_after: Option<Duration>, unit: f64) -> Duration {
    let unit = unit.clamp(0.0, 1.0);
    let floor = retry_after.unwrap_or_default().min(delay);
    if delay > floor {
        floor + (delay - floor).mul_f64(unit)
    } else {
        delay + delay.mul_f64(0.2 * unit)
    }
}

/// 30 minutes: the longest an ARM long-running operation is expected to take.
pub const DEFAULT_WAIT_BUDGET: Duration = Duration::from_secs(30 * 60);

fn default_wait_budget_ms() -> u64 {
    duration_ms(DEFAULT_WAIT_BUDGET)
}

impl Default for RetryPolicy {
    /// 1 s, ×2, capped at 60 s, 10 attempts, 5 min per attempt: roughly ten minutes of
    /// trying, which covers ARM throttling windows and identity replication delays.
    fn default() -> Self {
        Self {
            initial_interval_ms: 1_000,
            coefficient: 2.0,
            max_interval_ms: 60_000,
            max_attempts: 10,
            attempt_timeout_ms: 300_000,
            non_retryable: Vec::new(),
            wait_budget_ms: default_wait_budget_ms(),
            transient_budget_ms: default_transient_budget_ms(),
        }
    }
}

/// What to do after a failed attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum RetryDecision {
    /// Try again after this delay.
    RetryAfter(Duration),
    /// Give up: the error is permanent, or the attempts are used up.
    GiveUp {
        /// Why we give up, for the journal.
        reason: String,
    },
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn no_retry() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// Builder: attempts in total.
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// Builder: initial delay, coefficient and cap.
    pub fn with_backoff(mut self, initial: Duration, coefficient: f64, max: Duration) -> Self {
        self.initial_interval_ms = duration_ms(initial);
        self.coefficient = coefficient.max(1.0);
        self.max_interval_ms = duration_ms(max);
        self
    }

    /// Builder: per-attempt timeout.
    pub fn with_attempt_timeout(mut self, t: Duration) -> Self {
        self.attempt_timeout_ms = duration_ms(t);
        self
    }

    /// Builder: error kinds that are never retried on this node.
    pub fn with_non_retryable<I: IntoIterator<Item = S>, S: Into<String>>(
        mut self,
        kinds: I,
    ) -> Self {
        self.non_retryable = kinds.into_iter().map(Into::into).collect();
        self
    }

    /// Builder: how long the phase may keep waiting (see [`RetryPolicy::wait_budget_ms`]).
    pub fn with_wait_budget(mut self, budget: Duration) -> Self {
        self.wait_budget_ms = duration_ms(budget);
        self
    }

    /// The wait budget, `None` when unbounded.
    pub fn wait_budget(&self) -> Option<Duration> {
        (self.wait_budget_ms > 0).then(|| Duration::from_millis(self.wait_budget_ms))
    }

    /// Per-attempt timeout.
    pub fn attempt_timeout(&self) -> Duration {
        Duration::from_millis(self.attempt_timeout_ms)
    }

    /// The backoff delay after failed attempt number `attempt` (1-based), without Retry-After.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(64);
        let raw = (self.initial_interval_ms as f64) * self.coefficient.max(1.0).powi(exp as i32);
        let capped = raw.min(self.max_interval_ms as f64).max(0.0);
        Duration::from_millis(capped as u64)
    }

    /// Decide what follows failed attempt number `attempt` (1-based) with `error`.
    ///
    /// The delay is the exponential backoff, raised to the server's Retry-After when that is
    /// longer (a throttled caller that retries early only burns more of its quota).
    pub fn decide(&self, attempt: u32, error: &StepError) -> RetryDecision {
        self.decide_counting(attempt, attempt, Duration::ZERO, error)
    }

    /// [`RetryPolicy::decide`] with "not now" answers counted apart: `hard` is the number of
    /// attempts that failed for real (this one included, when it did), `soft` the number of
    /// soft failures ([`is_soft`], this one included, when it is one), and `soft_for` how
    /// long the phase has been getting them. A soft failure is retried until
    /// `transient_budget_ms` is spent, after `Retry-After` when the server gave one (exactly
    /// that: an exponential delay on top would wait 60 s where ARM asked for 1 s), else
    /// after the exponential backoff of `soft`. A real failure uses up `max_attempts`.
    pub fn decide_counting(
        &self,
        hard: u32,
        soft: u32,
        soft_for: Duration,
        error: &StepError,
    ) -> RetryDecision {
        if error.retryable
            && is_soft(&error.kind)
            && !self.non_retryable.iter().any(|k| k == &error.kind)
        {
            let budget = Duration::from_millis(self.transient_budget_ms);
            if soft_for >= budget {
                return RetryDecision::GiveUp {
                    reason: format!(
                        "{} answers for {}s, past the transient budget of {}s",
                        error.kind,
                        soft_for.as_secs(),
                        budget.as_secs()
                    ),
                };
            }
            return RetryDecision::RetryAfter(
                error
                    .retry_after()
                    .unwrap_or_else(|| self.backoff(soft.max(1))),
            );
        }
        let attempt = hard;
        if !error.retryable {
            return RetryDecision::GiveUp {
                reason: "permanent error".into(),
            };
        }
        if self.non_retryable.iter().any(|k| k == &error.kind) {
            return RetryDecision::GiveUp {
                reason: format!("error kind `{}` is not retried on this step", error.kind),
            };
        }
        if self.max_attempts != 0 && attempt >= self.max_attempts {
            return RetryDecision::GiveUp {
                reason: format!("retries exhausted after {attempt} attempts"),
            };
        }
        let mut delay = self.backoff(attempt);
        if let Some(ra) = error.retry_after() {
            delay = delay.max(ra);
        }
        RetryDecision::RetryAfter(delay)
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_capped_and_retry_after_raises() {
        let p = RetryPolicy::default()
            .with_backoff(Duration::from_millis(100), 2.0, Duration::from_millis(700))
            .with_max_attempts(6);
        assert_eq!(p.backoff(1), Duration::from_millis(100));
        assert_eq!(p.backoff(2), Duration::from_millis(200));
        assert_eq!(p.backoff(3), Duration::from_millis(400));
        assert_eq!(p.backoff(4), Duration::from_millis(700));
        let e = StepError::retryable("conflict", "409");
        assert_eq!(
            p.decide(1, &e),
            RetryDecision::RetryAfter(Duration::from_millis(100))
        );
        let e = e.with_retry_after(Duration::from_secs(3));
        assert_eq!(
            p.decide(1, &e),
            RetryDecision::RetryAfter(Duration::from_secs(3))
        );
        assert!(matches!(p.decide(6, &e), RetryDecision::GiveUp { .. }));
    }

    /// Every 429 used up an attempt, and the 7th waited 60 s although ARM said
    /// 1 s. Soft answers now keep the attempts for real failures, are bounded in time, and
    /// wait exactly the Retry-After.
    #[test]
    fn throttled_and_transient_answers_spend_time_not_attempts() {
        let p = RetryPolicy::default().with_max_attempts(3).with_backoff(
            Duration::from_secs(1),
            2.0,
            Duration::from_secs(60),
        );
        let throttled = StepError::retryable(crate::error::kind::THROTTLED, "429")
            .with_retry_after(Duration::from_secs(1));
        // The 50th throttled answer, two minutes in: still retried, after exactly 1 s.
        assert_eq!(
            p.decide_counting(0, 50, Duration::from_secs(120), &throttled),
            RetryDecision::RetryAfter(Duration::from_secs(1))
        );
        let transient = StepError::retryable(crate::error::kind::TRANSIENT, "503");
        assert_eq!(
            p.decide_counting(0, 3, Duration::from_secs(10), &transient),
            RetryDecision::RetryAfter(Duration::from_secs(4))
        );
        // Past the transient budget: give up, saying why.
        let RetryDecision::GiveUp { reason } =
            p.decide_counting(0, 500, DEFAULT_TRANSIENT_BUDGET, &transient)
        else {
            panic!("a transient answer past its budget must give up");
        };
        assert!(reason.contains("transient budget"), "{reason}");
        // Real failures still count: the 3rd conflict gives up whatever came before.
        let conflict = StepError::retryable(crate::error::kind::CONFLICT, "409");
        assert!(matches!(
            p.decide_counting(3, 40, Duration::from_secs(60), &conflict),
            RetryDecision::GiveUp { .. }
        ));
        assert!(matches!(
            p.decide_counting(2, 40, Duration::from_secs(60), &conflict),
            RetryDecision::RetryAfter(_)
        ));
    }

    #[test]
    fn full_jitter_stays_between_retry_after_and_the_delay() {
        let d = Duration::from_secs(8);
        assert_eq!(jittered(d, None, 0.0), Duration::ZERO);
        assert_eq!(jittered(d, None, 0.5), Duration::from_secs(4));
        assert_eq!(
            jittered(d, Some(Duration::from_secs(2)), 0.0),
            Duration::from_secs(2)
        );
        assert_eq!(
            jittered(d, Some(Duration::from_secs(2)), 0.5),
            Duration::from_secs(5)
        );
        // The server's wait is the whole delay: never earlier, up to a fifth later.
        let ra = Duration::from_secs(10);
        assert_eq!(jittered(ra, Some(ra), 0.0), ra);
        assert_eq!(jittered(ra, Some(ra), 0.5), Duration::from_secs(11));
        // Many runs draw many delays: they spread instead of retrying in lockstep.
        let draws: std::collections::BTreeSet<u128> = (0..100)
            .map(|i| jittered(d, None, f64::from(i) / 100.0).as_millis())
            .collect();
        assert!(draws.len() > 90);
    }

    #[test]
    fn permanent_and_non_retryable_kinds_give_up() {
        let p = RetryPolicy::default().with_non_retryable(["quota"]);
        assert!(matches!(
            p.decide(1, &StepError::permanent("validation", "bad")),
            RetryDecision::GiveUp { .. }
        ));
        assert!(matches!(
            p.decide(1, &StepError::retryable("quota", "over")),
            RetryDecision::GiveUp { .. }
        ));
        let unlimited = RetryPolicy::default().with_max_attempts(0);
        assert!(matches!(
            unlimited.decide(10_000, &StepError::retryable("transient", "x")),
            RetryDecision::RetryAfter(_)
        ));
    }
}
