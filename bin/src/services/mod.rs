//! The per-process services every command shares: opening the journal, the engine and its
//! clock, who acts, the output format, the stop signal, and the journal's report kinds.
//! Nothing here knows a command: the commands depend on this module, never the reverse.

pub mod clock;
pub mod engine;
pub mod identity;
pub mod presence;
pub mod schema;
pub mod store;

pub use clock::clock;
use std::time::Duration;
pub use store::{open_existing_store, open_existing_store_read_only, open_store};

/// The kinds of report the journal keeps beside runs (`record_report`), one name each.
pub mod reports {
    /// A worker's ARM budget counters, for `/metrics`.
    pub const BUDGET: &str = "arm-budget";
    /// A `verify` of a cluster.
    pub const VERIFY: &str = "verify";
    /// A notification sent for a run (subject `run/<id>`).
    pub const NOTIFICATION: &str = "notification";
    /// A worker's word that it is up and which targets it serves (subject `worker/<id>`).
    pub const WORKER: &str = "worker";

    /// The subject of a cluster's reports (its verifies): `cluster/<name>`.
    pub fn cluster_subject(name: &str) -> String {
        format!("cluster/{name}")
    }
}

/// The log target of a worker's run lines: shown at info by default (`RUST_LOG` unset),
/// see `telemetry::env_filter`.
pub const RUN_LOG: &str = "hcp_workflow::runs";

/// `--output`: for people, or one JSON document per command.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}

/// SIGTERM or Ctrl-C. SIGTERM's handler is installed when this is called, not when the
/// future is first polled: a server prints its address and then selects on this, and a
/// SIGTERM sent by whoever read the address in between must stop it cleanly rather than
/// kill it with the default action.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The default of `--grace`: below Kubernetes' default `terminationGracePeriodSeconds` (30 s)
/// with room to release the leases and exit.
pub const DEFAULT_GRACE: &str = "20s";

/// `--grace`, for `worker` and `ui`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct GraceArgs {
    /// On SIGTERM or Ctrl-C, how long to drain: `worker` leases nothing more and starts no
    /// new step, lets the steps in flight end and journals them, releasing each run as its
    /// last step ends; `ui` answers the requests in progress. What is still in flight then
    /// is dropped (a worker's step runs again elsewhere). `0s`: stop at once.
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_GRACE, value_parser = parse_grace)]
    pub grace: Duration,
}

/// `--grace`'s value: a humantime duration up to an hour.
pub fn parse_grace(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| {
        format!("{s:?} is not a duration ({e}); write it like 20s or 2m (0s stops at once)")
    })?;
    if d > Duration::from_secs(3600) {
        return Err(format!(
            "{s:?} is too long: a drain waits for the steps in flight, which take seconds to minutes; give at most 1h"
        ));
    }
    Ok(d)
}

/// `--version`: the crate version, the git commit built (`-dirty` when the tree had
/// changes) and the UTC build date, stamped by `build.rs`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("HCP_GIT_COMMIT"),
    " ",
    env!("HCP_BUILD_DATE"),
    ")"
);
