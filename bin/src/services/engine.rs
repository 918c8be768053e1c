//! Building this process's engine: its tunables (overridable by environment for tests and
//! operations), its crash hooks, its clock, and the ARM budget shared through the journal.

use super::clock::{clock, keep_clock_aligned};
use anyhow::Result;
use hcp_runtime::testkit::CrashHooks;
use hcp_runtime::{Engine, EngineConfig, EngineHooks, JournalStore, NoHooks};
use std::sync::Arc;
use std::time::Duration;

/// Engine tunables, overridable by environment for tests and operations.
fn config() -> EngineConfig {
    let mut c = EngineConfig::default();
    let ms = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis)
    };
    if let Some(d) = ms("HCP_LEASE_TTL_MS") {
        c.lease_ttl = d;
    }
    if let Some(d) = ms("HCP_POLL_MS") {
        c.poll_interval = d;
    }
    if let Some(d) = ms("HCP_HOLD_MS") {
        c.hold_threshold = d;
    }
    c
}

pub fn engine_with(
    store: Arc<dyn JournalStore>,
    registry: hcp_runtime::Registry,
    targets: Option<Vec<String>>,
) -> Engine {
    let hooks: Arc<dyn EngineHooks> = match CrashHooks::from_env() {
        Some(h) => Arc::new(h),
        None => Arc::new(NoHooks),
    };
    // An engine lives on: its clock keeps the journal database's time.
    keep_clock_aligned(&store);
    let mut c = config();
    c.targets = targets;
    // On Postgres, several workers run a subscription's requests: they share its ARM budget
    // through the journal. SQLite has one executor per file: in-process is all.
    if store.backend() == "postgres" {
        hcp_activities::azure::budget::global().share_through(Arc::new(
            hcp_activities::azure::budget::JournalTokens(store.clone()),
        ));
    }
    Engine::with(store, registry, clock(), hooks, c)
}

/// An engine knowing the cluster actions (reaching the world through `clients`), leasing
/// only runs of `targets` (and runs without a target).
pub fn cluster_engine(
    store: Arc<dyn JournalStore>,
    clients: &Arc<hcp_activities::steps::Clients>,
    targets: Option<Vec<String>>,
) -> Result<Engine> {
    let mut r = hcp_runtime::Registry::new();
    crate::release::register(&mut r, clients)?;
    Ok(engine_with(store, r, targets))
}
