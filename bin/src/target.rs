//! Run targets: which world a run's steps talk to, which runs a worker leases, and the exact
//! command that starts a worker (or follows a run) for a target.
//!
//! A run records its target when it is journaled (`NewRun::target`): `azure/<cloud>` for
//! real Azure, `simulator/in-process` for `--simulate` (the simulated cloud lives in this
//! process and in `<db>.sim.json`), `simulator/<url>` for `--simulator URL`. A worker
//! leases only runs of the targets it serves (the store filters; see
//! `JournalStore::acquire_targeted`), so a worker pointed at the wrong world leaves a run
//! pending for the right one instead of failing it.

use crate::cluster::ReachArgs;
use hcp_activities::steps::Reach;
use std::sync::OnceLock;

/// The target of runs against the in-process simulator.
pub const IN_PROCESS: &str = "simulator/in-process";

/// The cloud names a real-Azure target carries (the config's `cloud` values).
pub const CLOUDS: [&str; 4] = ["public", "usGovernment", "china", "custom"];

/// The target of runs against the simulator at `url`.
fn simulator_at(url: &str) -> String {
    format!("simulator/{}", url.trim_end_matches('/'))
}

/// The target a run started by this process gets.
pub fn of_run(args: &ReachArgs, reach: &Reach, cloud: &str) -> String {
    match (reach, &args.simulator) {
        (Reach::Direct, _) => format!("azure/{cloud}"),
        (Reach::Simulator(_), Some(url)) => simulator_at(url),
        (Reach::Simulator(_), None) => IN_PROCESS.to_string(),
    }
}

/// The targets a worker started with `args` serves.
pub fn served(args: &ReachArgs) -> Vec<String> {
    match (&args.simulator, args.simulate) {
        (Some(url), _) => vec![simulator_at(url)],
        (None, true) => vec![IN_PROCESS.to_string()],
        (None, false) => CLOUDS.iter().map(|c| format!("azure/{c}")).collect(),
    }
}

/// The global flags that reach `target` (`--simulate`, `--simulator URL`, or none).
pub fn flags(target: Option<&str>) -> String {
    match target {
        Some(IN_PROCESS) => " --simulate".to_string(),
        Some(t) => match t.strip_prefix("simulator/") {
            Some(url) => format!(" --simulator {url}"),
            None => String::new(),
        },
        None => String::new(),
    }
}

/// Plain words for a target: "the in-process simulator", "real Azure (public cloud)".
pub fn describe(target: Option<&str>) -> String {
    match target {
        None => "any target".to_string(),
        Some(IN_PROCESS) => "the in-process simulator (--simulate)".to_string(),
        Some(t) => match (t.strip_prefix("simulator/"), t.strip_prefix("azure/")) {
            (Some(url), _) => format!("the simulator at {url}"),
            (_, Some(cloud)) => format!("real Azure ({cloud} cloud)"),
            _ => t.to_string(),
        },
    }
}

static DATABASE: OnceLock<String> = OnceLock::new();

/// Remember the journal this process uses, so suggested commands name it when it is not
/// the default.
pub fn set_database(db: &str) {
    if db != crate::DEFAULT_DATABASE {
        let _ = DATABASE.set(shown_url(db));
    }
}

/// A journal URL as it may be shown (suggested commands, the UI, errors): a password in it
/// becomes `***` (`postgres://app:***@db/hcp`); anything else is unchanged.
pub fn shown_url(db: &str) -> String {
    match url::Url::parse(db) {
        Ok(mut u) if u.password().is_some() => {
            if u.set_password(Some("***")).is_ok() {
                u.to_string()
            } else {
                db.to_string()
            }
        }
        _ => db.to_string(),
    }
}

/// ` --database URL` when this process does not use the default journal.
pub fn database_flag() -> String {
    DATABASE
        .get()
        .map(|d| format!(" --database {d}"))
        .unwrap_or_default()
}

/// `hcp-workflow [--database …] [--simulate | --simulator URL] <rest>`.
pub fn command(target: Option<&str>, rest: &str) -> String {
    format!("hcp-workflow{}{} {rest}", database_flag(), flags(target))
}

/// The command that starts a worker for runs of `target`.
pub fn worker_command(target: Option<&str>) -> String {
    command(target, "worker")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_urls_mask_the_password() {
        assert_eq!(
            shown_url("postgres://app:s3cret@db.example:5432/hcp?sslmode=require"),
            "postgres://app:***@db.example:5432/hcp?sslmode=require"
        );
        assert_eq!(
            shown_url("postgres://postgres@127.0.0.1/hcp"),
            "postgres://postgres@127.0.0.1/hcp"
        );
        assert_eq!(shown_url("sqlite:///tmp/j.db"), "sqlite:///tmp/j.db");
        assert_eq!(shown_url("memory:"), "memory:");
    }

    #[test]
    fn flags_and_words_round_trip_the_targets() {
        let sim = ReachArgs {
            simulate: true,
            ..Default::default()
        };
        assert_eq!(served(&sim), vec![IN_PROCESS.to_string()]);
        assert_eq!(flags(Some(IN_PROCESS)), " --simulate");
        let url = ReachArgs {
            simulator: Some("http://127.0.0.1:9/".into()),
            ..Default::default()
        };
        assert_eq!(
            served(&url),
            vec!["simulator/http://127.0.0.1:9".to_string()]
        );
        assert_eq!(
            flags(Some("simulator/http://127.0.0.1:9")),
            " --simulator http://127.0.0.1:9"
        );
        let real = ReachArgs::default();
        assert!(served(&real).contains(&"azure/china".to_string()));
        assert_eq!(flags(Some("azure/public")), "");
        assert_eq!(describe(Some("azure/public")), "real Azure (public cloud)");
    }
}
