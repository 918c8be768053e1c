//! What a worker's engine knows about its own health: for readiness probes and metrics
//! (`hcp-workflow worker --listen-health`).
//!
//! The engine updates a [`WorkerHealth`] as its worker loop goes (each acquire, each bulk
//! lease renewal, the runs it holds, the drain on shutdown); [`crate::Engine::health`]
//! hands out a copy. Times are monotonic ([`Instant`]), never the engine's clock: a probe
//! asks "how long ago", which a clock moved by an operator (or a test) must not answer.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A copy of a worker's health (see [`crate::Engine::health`]).
#[derive(Debug, Clone, Default)]
pub struct WorkerHealth {
    /// The worker loop runs: it claimed the journal (the executor lock, on SQLite) and has
    /// not stopped yet.
    pub working: bool,
    /// Shutting down: it leases nothing more and starts no new step; the steps in flight
    /// end (within the grace period) and every run is released.
    pub draining: bool,
    /// Runs this worker drives now.
    pub held_runs: usize,
    /// The lease duration (renewals run every third of it).
    pub lease_ttl: Duration,
    /// When the last bulk lease renewal succeeded (it runs whether or not the worker holds
    /// a run, so it also says the journal takes this worker's writes).
    pub last_renewal: Option<Instant>,
    /// Successful bulk renewals.
    pub renewals: u64,
    /// Failed bulk renewals.
    pub renewal_failures: u64,
    /// The last renewal's error, until a renewal succeeds again.
    pub last_renewal_error: Option<String>,
    /// When the last acquire (lease due runs) answered.
    pub last_acquire: Option<Instant>,
    /// Failed acquires.
    pub acquire_failures: u64,
    /// Runs leased so far.
    pub runs_leased: u64,
    /// Runs whose lease another worker took over while this one drove them.
    pub leases_lost: u64,
    /// Runs released at shutdown with a step still in flight when the grace period ended
    /// (that attempt runs again elsewhere).
    pub cut_short: u64,
}

impl WorkerHealth {
    /// Whether this worker's leases renew: its last renewal succeeded less than a lease
    /// TTL before `now` (renewals run every third of the TTL, so two in a row failed or
    /// stalled before this turns false, and a live lease has not expired yet).
    pub fn leases_renew(&self, now: Instant) -> bool {
        self.last_renewal.is_some_and(|t| {
            now.saturating_duration_since(t) < self.lease_ttl.max(Duration::from_secs(1))
        })
    }
}

/// The engine's side of [`WorkerHealth`].
#[derive(Debug, Default)]
pub(crate) struct Tracker(Mutex<WorkerHealth>);

impl Tracker {
    /// Change the figures.
    pub(crate) fn update(&self, f: impl FnOnce(&mut WorkerHealth)) {
        let mut g = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g);
    }

    /// A copy of the figures.
    pub(crate) fn snapshot(&self) -> WorkerHealth {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}
