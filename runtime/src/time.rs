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

/// A clock set to the journal database's time.
///
/// Workers on several hosts write timestamps into one journal: when a wait began, when a
/// retry is due, when a timer fires. Measured on each host's own clock, a host that runs
/// ahead finds every wait another worker began that much older, and stalls a wait it takes
/// over as past its budget as soon as the skew exceeds the budget. Leases were already
/// decided by the database's clock; this clock puts the rest on the same time base. It is
/// the base clock moved by an offset, measured as the database's time minus the midpoint of
/// the two local readings taken around the query (`align`, run before the engine starts and
/// again every minute). The offset changes only when a measurement moves it by more than
/// [`AlignedClock::HYSTERESIS_MS`], so round-trip jitter never makes journal time jump back
/// and forth; a measurement whose round trip took longer than
/// [`AlignedClock::MAX_ROUND_TRIP_MS`] is not trusted. A store without a shared clock
/// (SQLite: one host; memory) leaves the offset at zero.
#[derive(Debug)]
pub struct AlignedClock {
    base: std::sync::Arc<dyn Clock>,
    offset_ms: std::sync::atomic::AtomicI64,
}

impl AlignedClock {
    /// A new measurement moves the offset only if it differs by more than this.
    pub const HYSTERESIS_MS: i64 = 250;
    /// Measurements with a longer round trip are discarded.
    pub const MAX_ROUND_TRIP_MS: i64 = 1_000;

    /// `base` moved by nothing until the first [`AlignedClock::align`].
    pub fn new(base: std::sync::Arc<dyn Clock>) -> Self {
        Self {
            base,
            offset_ms: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// The offset in use: reference time minus base time, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Measure the offset to `store`'s clock once and adopt it (see the type's docs).
    ///
    /// # Errors
    /// The store could not be read.
    pub async fn align(
        &self,
        store: &dyn crate::store::JournalStore,
    ) -> Result<Alignment, crate::store::StoreError> {
        let before = self.base.now();
        let Some(theirs) = store.server_now().await? else {
            return Ok(Alignment::NoClock);
        };
        let after = self.base.now();
        Ok(self.adopt(before, theirs, after))
    }

    /// What one reading `theirs` (taken between local `before` and `after`) gives, its
    /// offset adopted unless within the hysteresis.
    fn adopt(&self, before: Timestamp, theirs: Timestamp, after: Timestamp) -> Alignment {
        let round_trip_ms = after.0.saturating_sub(before.0);
        if !(0..=Self::MAX_ROUND_TRIP_MS).contains(&round_trip_ms) {
            return Alignment::Untrusted { round_trip_ms };
        }
        let midpoint = before.0.saturating_add(round_trip_ms / 2);
        let offset_ms = theirs.0.saturating_sub(midpoint);
        if offset_ms.saturating_sub(self.offset_ms()).abs() > Self::HYSTERESIS_MS {
            self.offset_ms
                .store(offset_ms, std::sync::atomic::Ordering::Relaxed);
        }
        Alignment::Measured { offset_ms }
    }
}

/// What one [`AlignedClock::align`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alignment {
    /// The store has no clock of its own (SQLite, memory): nothing to align to, ever.
    NoClock,
    /// The reading took too long to trust; the offset is unchanged (try again).
    Untrusted {
        /// The round trip it took.
        round_trip_ms: i64,
    },
    /// The reference's time minus this host's (adopted unless within the hysteresis).
    Measured {
        /// Reference minus base, in milliseconds.
        offset_ms: i64,
    },
}

impl Clock for AlignedClock {
    fn now(&self) -> Timestamp {
        let t = self.base.now();
        Timestamp(t.0.saturating_add(self.offset_ms()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed(i64);
    impl Clock for Fixed {
        fn now(&self) -> Timestamp {
            Timestamp(self.0)
        }
    }

    #[test]
    fn an_aligned_clock_runs_on_the_reference_time_and_ignores_jitter_and_slow_readings() {
        let c = AlignedClock::new(std::sync::Arc::new(Fixed(10_000)));
        assert_eq!(c.now(), Timestamp(10_000));
        // This host runs an hour ahead: the reference read between 10 000 and 10 020 says
        // 10 010 - 3 600 000.
        let m = c.adopt(
            Timestamp(10_000),
            Timestamp(10_010 - 3_600_000),
            Timestamp(10_020),
        );
        assert_eq!(
            m,
            Alignment::Measured {
                offset_ms: -3_600_000
            }
        );
        assert_eq!(c.now(), Timestamp(10_000 - 3_600_000));
        // A later reading 100 ms off (jitter within the hysteresis): the offset stays.
        assert_eq!(
            c.adopt(
                Timestamp(20_000),
                Timestamp(20_000 - 3_599_900),
                Timestamp(20_000)
            ),
            Alignment::Measured {
                offset_ms: -3_599_900
            }
        );
        assert_eq!(c.offset_ms(), -3_600_000);
        // A reading over a slow round trip is not trusted.
        assert_eq!(
            c.adopt(Timestamp(30_000), Timestamp(0), Timestamp(31_500)),
            Alignment::Untrusted {
                round_trip_ms: 1_500
            }
        );
        assert_eq!(c.offset_ms(), -3_600_000);
        // The clocks were fixed meanwhile: a real change is adopted.
        assert_eq!(
            c.adopt(Timestamp(40_000), Timestamp(40_005), Timestamp(40_010)),
            Alignment::Measured { offset_ms: 0 }
        );
        assert_eq!(c.now(), Timestamp(10_000));
    }

    #[test]
    fn rfc3339_rendering() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(1_795_000_000_123).to_rfc3339(),
            "2026-11-18T11:06:40.123Z"
        );
    }
}
