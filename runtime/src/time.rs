//! Wall-clock time as the journal sees it.
//!
//! Journal timestamps must survive a restart and be comparable across worker processes, so
//! they are wall-clock milliseconds since the Unix epoch ([`Timestamp`]). The engine never
//! calls `SystemTime::now()` directly: it asks a [`Clock`], so tests can run the engine under
//! paused tokio time ([`TokioClock`]) and see retry and wait schedules advance instantly.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// `self + d`, saturating.
    pub fn plus(self, d: Duration) -> Timestamp {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// How long from `now` until `self` (zero if already past).
    pub fn duration_since(self, now: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(now.0)).unwrap_or(0))
    }

    /// RFC 3339 rendering (UTC, millisecond precision) for humans and logs.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0.div_euclid(1000);
        let ms = self.0.rem_euclid(1000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            sod / 3600,
            (sod % 3600) / 60,
            sod % 60
        )
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Source of journal time.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Current wall-clock time.
    fn now(&self) -> Timestamp;
}

/// The real wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Timestamp(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// Wall time anchored at creation and advanced by tokio's clock, so that
/// `tokio::time::pause()` + auto-advance moves journal time too (tests only need this,
/// but it is harmless in production for short-lived processes).
#[derive(Debug, Clone)]
pub struct TokioClock {
    base: Timestamp,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Anchor at the current system time.
    pub fn new() -> Self {
        Self {
            base: SystemClock.now(),
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.base.plus(self.start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_rendering() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(1_795_000_000_123).to_rfc3339(),
            "2026-11-18T11:06:40.123Z"
        );
    }
}
