//! Run targets: which world a run's steps talk to, which runs a worker leases, and the exact
//! command that starts a worker (or follows a run) for a target.
//!
//! A run records its target when it is journaled (`NewRun::target`): `azure/<cloud>` for
//! real Azure, `simulator/in-process` for `--simulate` (the simulated cloud lives in this
//! process and in `<db>.sim.json`), `simulator/<url>` for `--simulator URL`. A worker
//! leases only runs of the targets it serves (the store filters; see
//! `JournalStore::acquire_targeted`), so a worker pointed at the wrong world leaves a run
//! pending for the right one instead of failing it.

use crate::reach::ReachArgs;
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

/// The target the reach flags `args` name, as far as flags go: `None` for real Azure
/// (no flag reaches it; its cloud comes from the cluster file).
pub fn of_args(args: &ReachArgs) -> Option<String> {
    match (&args.simulator, args.simulate) {
        (Some(url), _) => Some(simulator_at(url)),
        (None, true) => Some(IN_PROCESS.to_string()),
        (None, false) => None,
    }
}

/// The in-process simulator's own options as given (` --private-platform azure`, …):
/// every `--simulate` invocation of a run must repeat them, so a pasted hint that drops
/// them would act on another simulated install.
fn simulator_options(args: &ReachArgs) -> String {
    let mut s = String::new();
    if let Some(p) = args.private_platform {
        s.push_str(match p {
            hcp_simulator::PrivatePlatform::Azure => " --private-platform azure",
            hcp_simulator::PrivatePlatform::None => " --private-platform none",
        });
    }
    if let Some(m) = args.management_platform {
        s.push_str(match m {
            hcp_simulator::ManagementPlatform::OpenShift => " --management-platform openshift",
            hcp_simulator::ManagementPlatform::Aks => " --management-platform aks",
        });
    }
    if let Some(v) = &args.hypershift_version {
        s.push_str(&format!(" --hypershift-version {v}"));
    }
    s
}

static SIMULATOR_OPTIONS: OnceLock<String> = OnceLock::new();

/// Remember the reach flags this process was given, so suggested commands for the
/// in-process simulator repeat its options (see [`flags`]).
pub fn set_reach(args: &ReachArgs) {
    if args.simulate && args.simulator.is_none() {
        let _ = SIMULATOR_OPTIONS.set(simulator_options(args));
    }
}

/// The global flags that reach `target` (`--simulate`, `--simulator URL`, or none). The
/// in-process simulator's flags carry the options this process was started with.
pub fn flags(target: Option<&str>) -> String {
    match target {
        Some(IN_PROCESS) => format!(
            " --simulate{}",
            SIMULATOR_OPTIONS.get().map(String::as_str).unwrap_or("")
        ),
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
    if db != crate::services::store::DEFAULT_DATABASE {
        let _ = DATABASE.set(crate::services::store::shown_url(db));
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

/// `text` with every `hcp-workflow <subcommand>` it suggests carrying the journal and
/// target flags of `target` (texts written without knowing them: verify's fix lines).
pub fn with_flags(text: &str, target: Option<&str>) -> String {
    const COMMANDS: [&str; 12] = [
        "start",
        "plan",
        "preflight",
        "verify",
        "inventory",
        "worker",
        "drive",
        "watch",
        "why",
        "show",
        "clusters",
        "history",
    ];
    let prefix = command(target, "");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("hcp-workflow ") {
        let after = &rest[i + "hcp-workflow ".len()..];
        out.push_str(&rest[..i]);
        let word = after.split([' ', '`', ')', ';', ',']).next().unwrap_or("");
        if COMMANDS.contains(&word) && !after.starts_with("--") {
            out.push_str(&prefix);
        } else {
            out.push_str("hcp-workflow ");
        }
        rest = after;
    }
    out.push_str(rest);
    out
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
            crate::services::store::shown_url(
                "postgres://app:s3cret@db.example:5432/hcp?sslmode=require"
            ),
            "postgres://app:***@db.example:5432/hcp?sslmode=require"
        );
        assert_eq!(
            crate::services::store::shown_url("postgres://postgres@127.0.0.1/hcp"),
            "postgres://postgres@127.0.0.1/hcp"
        );
        assert_eq!(
            crate::services::store::shown_url("sqlite:///tmp/j.db"),
            "sqlite:///tmp/j.db"
        );
        assert_eq!(crate::services::store::shown_url("memory:"), "memory:");
    }

    #[test]
    fn suggested_commands_in_a_text_get_the_target_flags() {
        let t = "run hcp-workflow start repair-cluster --config FILE; not hcp-workflow's (`hcp-workflow preflight`), hcp-workflow.io/cluster";
        assert_eq!(
            with_flags(t, Some("simulator/http://127.0.0.1:9")),
            "run hcp-workflow --simulator http://127.0.0.1:9 start repair-cluster --config FILE; not hcp-workflow's (`hcp-workflow --simulator http://127.0.0.1:9 preflight`), hcp-workflow.io/cluster"
        );
        assert_eq!(with_flags(t, None), t);
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
