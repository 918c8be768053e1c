//! The engines' clock in this process: the host's, kept at the journal database's time when
//! the journal has a clock to share (Postgres), so that workers whose host clocks disagree
//! still agree on when a wait began or a retry is due.

use hcp_runtime::{AlignedClock, Alignment, JournalStore, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// The engines' clock in this process: the host's, set to the journal database's time when
/// the journal has one to share (Postgres: `align_clock`), so that workers
/// whose host clocks disagree still agree on when a wait began or a retry is due.
pub fn clock() -> Arc<dyn hcp_runtime::Clock> {
    process_clock()
}

fn process_clock() -> Arc<AlignedClock> {
    static CLOCK: std::sync::OnceLock<Arc<AlignedClock>> = std::sync::OnceLock::new();
    CLOCK
        .get_or_init(|| Arc::new(AlignedClock::new(host_clock())))
        .clone()
}

/// The host's clock, or, in a debug build only, the host's moved by `HCP_CLOCK_OFFSET_MS`
/// (tests of a worker whose host clock runs ahead).
fn host_clock() -> Arc<dyn hcp_runtime::Clock> {
    #[derive(Debug)]
    struct Offset(i64);
    impl hcp_runtime::Clock for Offset {
        fn now(&self) -> hcp_runtime::Timestamp {
            let t = hcp_runtime::Clock::now(&SystemClock);
            hcp_runtime::Timestamp(t.0.saturating_add(self.0))
        }
    }
    if cfg!(debug_assertions)
        && let Some(ms) = std::env::var("HCP_CLOCK_OFFSET_MS")
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
    {
        return Arc::new(Offset(ms));
    }
    Arc::new(SystemClock)
}

/// Set when this process's journal said it has no clock of its own (SQLite, memory).
static CLOCKLESS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How often the offset to the journal database's clock is measured again.
const REALIGN_EVERY: Duration = Duration::from_secs(60);

/// An offset (or a change of it) at least this large is said in the log.
const SAY_OFFSET_FROM_MS: u64 = 5_000;

/// Set this process's engine clock to `store`'s clock, before any engine uses it: once per
/// process once a reading succeeded (a command that opens its journal twice measures once).
/// Nothing happens for a journal without a clock of its own (SQLite, memory). A failed
/// reading leaves the host's clock in use: leases are decided by the database's clock
/// anyway. Processes that live on (engines, `watch`, `ui`) keep it set with
/// [`keep_clock_aligned`]; a one-shot command needs no more than this one reading.
pub async fn align_clock(store: &Arc<dyn JournalStore>) {
    static MEASURED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if MEASURED.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let clock = process_clock();
    // A reading over a slow round trip is not trusted: try again at once, a few times.
    let mut found = clock.align(store.as_ref()).await;
    for _ in 0..2 {
        if !matches!(found, Ok(Alignment::Untrusted { .. })) {
            break;
        }
        found = clock.align(store.as_ref()).await;
    }
    CLOCKLESS.store(
        matches!(found, Ok(Alignment::NoClock)),
        std::sync::atomic::Ordering::SeqCst,
    );
    if matches!(found, Ok(Alignment::Measured { .. })) {
        MEASURED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    match found {
        Ok(Alignment::NoClock) => {}
        Ok(Alignment::Measured { offset_ms }) if offset_ms.unsigned_abs() >= SAY_OFFSET_FROM_MS => {
            tracing::warn!(
                offset_ms,
                "this host's clock is {:.1} s {} the journal database's: the engine keeps the database's time (fix the host's time sync)",
                offset_ms.unsigned_abs() as f64 / 1e3,
                if offset_ms < 0 { "ahead of" } else { "behind" }
            );
        }
        Ok(Alignment::Measured { .. }) => {}
        Ok(Alignment::Untrusted { round_trip_ms }) => {
            tracing::warn!(
                round_trip_ms,
                "the journal database's clock could not be read quickly enough to trust; the engine uses this host's until the next try"
            );
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read the journal database's clock; the engine uses this host's until the next try");
        }
    }
}

/// Measure the offset to `store`'s clock again every [`REALIGN_EVERY`], for as long as this
/// process lives (one task per process, started by the first call; none for a journal
/// without a clock, or outside a Tokio runtime).
pub fn keep_clock_aligned(store: &Arc<dyn JournalStore>) {
    static REALIGNING: std::sync::Once = std::sync::Once::new();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if CLOCKLESS.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    REALIGNING.call_once(|| {
        let clock = process_clock();
        let store = store.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(REALIGN_EVERY).await;
                let was = clock.offset_ms();
                match clock.align(store.as_ref()).await {
                    Ok(_) if clock.offset_ms().abs_diff(was) >= SAY_OFFSET_FROM_MS => tracing::warn!(
                        offset_ms = clock.offset_ms(),
                        was_ms = was,
                        "this host's clock moved against the journal database's by {:.1} s: the engine keeps the database's time",
                        clock.offset_ms().abs_diff(was) as f64 / 1e3
                    ),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "measuring the journal database's clock failed");
                    }
                }
            }
        });
    });
}
