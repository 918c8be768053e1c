//! `hcp-workflow`: the command line over the saga engine.
//!
//! A thin binary: argument parsing, output formatting and process concerns (signals, exit
//! codes, logging) live here; everything else is in the library crates.
//!
//! Exit codes: 0 success; 1 the run ended badly (rolled back, cancelled, needs an operator,
//! parked) or a command failed; 2 invalid input or a refused operator command (nothing was
//! journaled or created: an unknown run or step, a command the run's state does not allow,
//! no journal where a read-only command expected one); 130 a follower (`start`, `drive`,
//! `watch`, `selftest`) stopped by Ctrl-C or SIGTERM (the run itself goes on safely).
//!
//! Output: a closed pipe (`hcp-workflow list | head -1`) ends the process quietly, as for
//! other Unix tools (SIGPIPE is reset to its default); colour only on a terminal and never
//! with `NO_COLOR` (see [`style`]).

mod absent;
mod bench;
mod cluster;
mod complete;
mod defaults;
mod deploy;
mod drive;
mod follow;
mod health;
mod kubeconfig;
mod migrate;
mod notify;
mod ops;
mod output;
mod plan;
mod preflight;
mod reach;
mod reference;
mod release;
mod runref;
mod services;
mod standing;
mod start;
pub mod style;
mod target;
mod telemetry;
mod ui;
mod verify;
mod views;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use services::store::{DEFAULT_DATABASE, NoJournal, Unmigrated};
use services::{OutputFormat, VERSION};

#[derive(Parser, Debug)]
#[command(
    name = "hcp-workflow",
    version = VERSION,
    about = "Create and delete self-managed Azure HyperShift hosted clusters as durable, crash-safe sagas",
    after_help = "Examples:\n  hcp-workflow selftest\n  hcp-workflow list --output json\n  hcp-workflow worker --database postgres://postgres@127.0.0.1/hcp"
)]
struct Cli {
    /// Journal database: `sqlite://PATH`, `postgres://…`, or `memory:` (nothing is kept).
    #[arg(long, global = true, help_heading = "Global options", env = "HCP_WORKFLOW_DATABASE_URL", hide_env_values = true, default_value = DEFAULT_DATABASE)]
    database: String,
    /// Output format for commands that print data. `json`: one versioned document
    /// (`apiVersion: hcp-workflow/v1`, `kind`), or NDJSON events for `start`, `drive`,
    /// `selftest` and `watch`; errors too (docs/reference/json-output.md).
    #[arg(long, short = 'o', global = true, help_heading = "Global options", value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
    /// Log format (logs go to stderr; `RUST_LOG` sets the level, default `warn`, with a
    /// worker's one line per run picked up and let go at `info`).
    #[arg(long, global = true, help_heading = "Global options", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(flatten)]
    reach: reach::ReachArgs,
    /// The share of ARM's documented per-subscription buckets (reads 250 at 25/s, writes and
    /// deletes 200 at 10/s) this process's runs may use: `0.5` (the default: half is left to
    /// the guest clusters and everything else in the subscription), `SUBSCRIPTION=0.8` for
    /// one subscription (repeatable), or `off`. On Postgres every worker shares one budget.
    #[arg(long, global = true, help_heading = "Global options", env = "HCP_ARM_SHARE", value_name = "SHARE|SUBSCRIPTION=SHARE|off", value_delimiter = ',', value_parser = parse_arm_share)]
    arm_share: Vec<ArmShare>,
    #[command(subcommand)]
    command: Command,
}

/// One `--arm-share` value.
#[derive(Debug, Clone, PartialEq)]
enum ArmShare {
    Off,
    All(f64),
    One(String, f64),
}

fn parse_arm_share(s: &str) -> Result<ArmShare, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("off") {
        return Ok(ArmShare::Off);
    }
    let share = |v: &str| -> Result<f64, String> {
        match v.trim().parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
            _ => Err(format!(
                "{v:?} is not a share: give a number above 0 and at most 1 (0.5 leaves half of each ARM bucket to the rest of the subscription), SUBSCRIPTION=SHARE, or off"
            )),
        }
    };
    match s.split_once('=') {
        Some((sub, v)) if !sub.trim().is_empty() => {
            Ok(ArmShare::One(sub.trim().to_ascii_lowercase(), share(v)?))
        }
        _ => share(s).map(ArmShare::All),
    }
}

/// Size this process's ARM budget from `--arm-share`.
fn configure_budget(shares: &[ArmShare]) {
    let mut cfg = hcp_activities::azure::budget::BudgetConfig::default();
    for s in shares {
        match s {
            ArmShare::Off => cfg.enabled = false,
            ArmShare::All(f) => cfg.share = *f,
            ArmShare::One(sub, f) => {
                cfg.shares.insert(sub.clone(), *f);
            }
        }
    }
    hcp_activities::azure::budget::global().configure(cfg);
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Start a cluster workflow and follow it live (Ctrl-C leaves it safely resumable).
    #[command(
        after_help = "Examples:\n  hcp-workflow start create-cluster --simulate --config examples/cluster.yaml\n  hcp-workflow start delete-cluster --config cluster.yaml --purge-persistent\n  hcp-workflow start create-cluster --config cluster.yaml --detach --idempotency-key prod-eu-1"
    )]
    Start(start::StartArgs),
    /// Execute one existing run in the foreground until it ends, with live progress (after
    /// Ctrl-C on `start`, say). The run's target must be the one this process reaches.
    #[command(after_help = "Example:\n  hcp-workflow --simulate drive 0199a3b2-…")]
    Drive(drive::DriveArgs),
    /// Show what a workflow would do: the steps, the resources, the undo plan. Touches nothing.
    #[command(
        after_help = "Example:\n  hcp-workflow plan create-cluster --config examples/cluster.yaml"
    )]
    Plan(plan::PlanArgs),
    /// Check a cluster's prerequisites read-only against the APIs the run will use
    /// (credentials, providers, permissions derived from the DAG, quotas, VM sizes, DNS
    /// zone, names, the management cluster and the HyperShift operator, the file's
    /// references), concurrently. Creates, changes and journals nothing. Exit 0 when no
    /// check fails, 2 otherwise.
    #[command(
        after_help = "Examples:\n  hcp-workflow preflight --config cluster.yaml\n  hcp-workflow --simulate preflight --config examples/cluster.yaml --output json\n  hcp-workflow preflight --config cluster.yaml --workflow delete-cluster"
    )]
    Preflight(preflight::PreflightArgs),
    /// Run and recover runs until SIGTERM or Ctrl-C, then drain (`--grace`): the steps in
    /// flight end, every run is released.
    #[command(
        after_help = "Examples:\n  hcp-workflow worker --database postgres://postgres@127.0.0.1/hcp\n  hcp-workflow worker --listen-health 0.0.0.0:9464 --grace 45s"
    )]
    Worker(ops::WorkerArgs),
    /// Run the engine self-test saga (five steps with side effects in a scratch directory)
    /// and follow it to the end.
    #[command(after_help = "Example:\n  hcp-workflow selftest --fail c   # watch it unwind")]
    Selftest(ops::SelftestArgs),
    /// List runs.
    #[command(
        after_help = "Example:\n  hcp-workflow list --state needs-operator --cluster demo --since 2h --output json"
    )]
    List(views::ListArgs),
    /// Show one run: the stage/step tree, the pending step, the undo stack, the resources.
    #[command(after_help = "Example:\n  hcp-workflow show 6f1c…")]
    Show(views::ShowArgs),
    /// Print a run's journal.
    #[command(after_help = "Example:\n  hcp-workflow history 6f1c… --step b1 --failed")]
    History(views::HistoryArgs),
    /// Explain in one paragraph what a run is blocked on and what an operator can do.
    #[command(after_help = "Example:\n  hcp-workflow why 6f1c…")]
    Why(views::ShowArgs),
    /// Follow a run live until it ends (exit 0 if it succeeded, 1 otherwise).
    #[command(after_help = "Example:\n  hcp-workflow watch 6f1c…")]
    Watch(follow::WatchArgs),
    /// Write a hosted cluster's admin kubeconfig (from its `<name>-admin-kubeconfig`
    /// Secret on the management cluster, as HyperShift publishes it) to stdout or a file
    /// (mode 0600). Read-only. Exit 2 when the cluster does not exist or has no kubeconfig
    /// yet.
    #[command(
        after_help = "Examples:\n  hcp-workflow kubeconfig cluster/demo > demo.kubeconfig\n  hcp-workflow --simulate kubeconfig cluster/demo --output-file demo.kubeconfig\n  KUBECONFIG=demo.kubeconfig oc get nodes"
    )]
    Kubeconfig(kubeconfig::KubeconfigArgs),
    /// Resources per cluster from every run's ledger; `--orphans`: left by failed runs.
    #[command(
        after_help = "Examples:\n  hcp-workflow inventory --cluster demo --orphans\n  hcp-workflow inventory --orphans --live   # ask Azure what deleted clusters left"
    )]
    Inventory(views::InventoryArgs),
    /// Each cluster's own state: exists or deleted, the run it exists by, and its latest
    /// run with that run's outcome.
    #[command(after_help = "Example:\n  hcp-workflow clusters --cluster demo")]
    Clusters(views::ClustersArgs),
    /// Is what the journal says still true? Read-only checks of a cluster against Azure
    /// and the management cluster: every resource of its ledger exists and carries its
    /// marks, identities, the private link, DNS, the HostedCluster and its NodePools, and
    /// nothing foreign in its own resource groups. Exit 0: everything ok; 3: drift found;
    /// 2: it could not check.
    #[command(
        after_help = "Examples:\n  hcp-workflow verify cluster/demo\n  hcp-workflow verify 6f1c… --output json\n  hcp-workflow verify --all"
    )]
    Verify(verify::VerifyArgs),
    /// Serve the operator web UI (run list, run pages, actions, /metrics).
    #[command(
        after_help = "Example:\n  hcp-workflow ui --listen 127.0.0.1:8080\n  HCP_WORKFLOW_UI_TOKEN=… hcp-workflow ui --listen 0.0.0.0:8080"
    )]
    Ui(ui::UiArgs),
    /// Cancel a run: it unwinds (every started step is undone).
    #[command(after_help = "Example:\n  hcp-workflow cancel 6f1c… --reason 'wrong region'")]
    Cancel(ops::CommandArgs),
    /// Retry a waiting, backing-off or stuck step now.
    #[command(after_help = "Example:\n  hcp-workflow retry 6f1c… --step pls.service")]
    Retry(ops::RetryArgs),
    /// Mark a stuck undo as done by hand (after cleaning up yourself).
    #[command(
        after_help = "Example:\n  hcp-workflow resolve 6f1c… --step pls.service --note 'deleted in the portal'"
    )]
    Resolve(ops::ResolveArgs),
    /// Resume a parked run (after upgrading) or retry every stuck undo.
    #[command(after_help = "Example:\n  hcp-workflow resume 6f1c…")]
    Resume(ops::CommandArgs),
    /// Create or upgrade the journal's schema, and say from which version to which. The
    /// only command that upgrades one (other commands refuse a schema older or newer than
    /// they know, exit 2); only it creates a Postgres schema (a SQLite journal is created by
    /// the first command that writes to it). For a deployment's migrate Job: directly
    /// against the server, never through a pooler.
    #[command(after_help = "Example:\n  hcp-workflow --database postgres://hcp@db/hcp migrate")]
    Migrate,
    /// Before deploying this binary: list the unfinished runs whose persisted DAG names a
    /// step action it does not know (its workers would park them). Exit 0: none; 3: some;
    /// 2: no journal, or a schema this binary does not use (run `migrate` first).
    #[command(
        after_help = "Examples:\n  hcp-workflow --database postgres://hcp@db/hcp compat\n  hcp-workflow compat --output json"
    )]
    Compat(migrate::CompatArgs),
    /// Kubernetes manifests for running hcp-workflow as a team's service.
    #[command(subcommand)]
    Deploy(deploy::DeployCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The simulated Azure + management cluster.
    #[command(subcommand)]
    Simulator(SimulatorCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell). It completes
    /// subcommands and flags, `--state` values, and run ids and `cluster/<name>` from the
    /// journal (`--database`, as the command line being completed gives it) by calling
    /// hcp-workflow back at each Tab.
    #[command(
        after_help = "Examples:\n  hcp-workflow completion bash > /etc/bash_completion.d/hcp-workflow\n  hcp-workflow completion zsh > \"${fpath[1]}/_hcp-workflow\"\n  hcp-workflow completion fish > ~/.config/fish/completions/hcp-workflow.fish"
    )]
    Completion(CompletionArgs),
    /// Print the man page (roff), or write one page per command into a directory.
    #[command(
        after_help = "Examples:\n  hcp-workflow man | man -l -\n  hcp-workflow man --out-dir /usr/local/share/man/man1"
    )]
    Man(ManArgs),
    /// Print one of the book's generated reference pages (docs/reference/).
    #[command(hide = true)]
    Reference(ReferenceArgs),
}

#[derive(clap::Args, Debug)]
struct ReferenceArgs {
    #[arg(value_enum)]
    page: reference::Page,
}

#[derive(clap::Args, Debug)]
struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
struct ManArgs {
    /// Write `hcp-workflow.1` and a `hcp-workflow-COMMAND.1` page per command here instead
    /// of printing the main page.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum SimulatorCommand {
    /// Serve simulated ARM, Entra ID, blob storage and a Kubernetes management cluster with
    /// a simulated HyperShift operator; prints the endpoints and the settings to use.
    #[command(
        after_help = "Preflight failures: --scenario FILE.json (or PUT /_sim/scenario) makes the read APIs answer them — {\"unregistered_providers\": [\"Microsoft.Compute\"], \"unregistered_features\": [\"Microsoft.Compute/EncryptionAtHost\"], \"denied_actions\": [{\"action\": \"Microsoft.Network/privateLinkServices/write\", \"scope\": \"/subscriptions/…/resourceGroups/hcp-management\"}], \"usage\": {\"PublicIPAddresses\": 1000}, \"restricted_sizes\": [{\"size\": \"Standard_D4s_v5\", \"zones\": [\"1\"]}], \"taken_storage_account_names\": [\"…\"], \"denied_kube\": [\"create hypershift.openshift.io/hostedclusters\"], \"no_hypershift_crds\": true, \"invalid_client_secret\": true, \"no_operator\": true, \"no_self_subject_review\": true}; no DNS zone: --no-dns-zones; no Route API: --management-platform aks with {\"aks\": {\"route_crd\": false}} (a bare AKS cluster); the AKS add-ons off: {\"aks\": {\"key_vault_secrets_provider_disabled\": true, \"oidc_issuer_disabled\": true, \"workload_identity_webhook_absent\": true}}; old operator: --hypershift-version 4.21.\n\nThe simulated HyperShift install is set by the global --private-platform azure|none (default none: the operator runs without `--private-platform Azure`, hcp-workflow makes the private link; azure: HyperShift's own private-link controllers make it) and --management-platform openshift|aks (default openshift; aks is an AKS cluster installed the way HyperShift's AKS how-to installs it, contrib/managed-azure/setup_install_ho_on_aks.sh: the Route CRD applied before the operator, the Key Vault secrets provider, OIDC issuer and workload identity on), and the operator's version by --hypershift-version 4.NN (default 4.22: releases up to 4.22 are accepted; before 4.22 the operator does not know the Azure private topology; 4.22's control-plane operator leaves its finalizer on the AzurePrivateLinkService after its cleanup, 4.23 — HyperShift main — removes it itself).\n\nFault rules: POST /_sim/faults with a JSON rule (answers {\"id\": \"fault-N\"}; GET lists them, DELETE /_sim/faults clears them). Every field is optional, but one of status, latency_ms, drop_connection or fail_async is needed: {\"method\": \"PUT\", \"path\": \"*/privateLinkServices/*\", \"resource_type\": \"Microsoft.Network/privateLinkServices\", \"nth\": 3, \"probability\": 0.2, \"times\": 1, \"status\": 429, \"error_code\": \"TooManyRequests\", \"message\": \"…\", \"retry_after\": 2, \"latency_ms\": 100, \"drop_connection\": false, \"fail_async\": false}. method, path (substring or * glob) and resource_type (ARM type or Kubernetes group/plural) must all match; nth fires from the nth match (once unless times), probability on each match (seeded), times bounds the firings; status answers an error with error_code, message and Retry-After; latency_ms delays the request; drop_connection aborts it; fail_async lets an ARM long-running operation start and end Failed. Rules are checked in order; the first that fires wins. Example: curl -X POST $SIM/_sim/faults -d '{\"method\":\"PUT\",\"resource_type\":\"Microsoft.Network/publicIPAddresses\",\"status\":409,\"error_code\":\"PublicIPCountLimitReached\"}'\n\nExample:\n  hcp-workflow simulator serve --listen 127.0.0.1:8443 --state /tmp/sim.json --crds ../shared/reference/hypershift\n  hcp-workflow simulator serve --private-platform azure --management-platform openshift"
    )]
    Serve(SimServeArgs),
}

#[derive(clap::Args, Debug)]
struct SimServeArgs {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8443")]
    listen: std::net::SocketAddr,
    /// Keep the simulated cloud's state in this file (survives restarts).
    #[arg(long)]
    state: Option<std::path::PathBuf>,
    /// Multiply every simulated Azure duration by this (1.0 = realistic minutes).
    #[arg(long)]
    time_scale: Option<f64>,
    /// Seed for generated ids and probabilistic faults.
    #[arg(long)]
    seed: Option<u64>,
    /// Validate HyperShift objects against the CRDs in this directory (422 when invalid).
    #[arg(long)]
    crds: Option<std::path::PathBuf>,
    /// Validate ARM PUT/PATCH bodies against the Azure REST API specs (Swagger 2.0, laid
    /// out as in Azure/azure-rest-api-specs) in this directory (400 when invalid).
    #[arg(long)]
    specs: Option<std::path::PathBuf>,
    /// A public Azure DNS zone that exists from the start (a cluster's baseDomain zone,
    /// which HyperShift needs): `<domain>[@[<subscription>/]<resourceGroup>]`; repeatable.
    /// Default: `hcp.example.com@11111111-2222-3333-4444-555555555555/hcp-dns`, the zone of
    /// examples/cluster.yaml.
    #[arg(long = "dns-zone", value_name = "ZONE", value_parser = hcp_simulator::DnsZoneSeed::parse)]
    dns_zones: Vec<hcp_simulator::DnsZoneSeed>,
    /// Start without any public DNS zone (to rehearse "no DNS zone for baseDomain").
    #[arg(long, conflicts_with = "dns_zones")]
    no_dns_zones: bool,
    /// A preflight failure scenario (JSON): providers not registered, actions denied to the
    /// caller, usages used up, VM sizes restricted, storage account names taken, Kubernetes
    /// verbs denied, no HyperShift CRDs. Changeable while serving: `PUT /_sim/scenario`.
    /// Shape: simulator/src/preflight.rs.
    #[arg(long, value_name = "FILE.json")]
    scenario: Option<std::path::PathBuf>,
}

/// `completion` and `man`: they need neither a journal, nor logging, nor a runtime.
fn generate(command: &Command) -> Option<Result<u8>> {
    use std::io::Write;
    let cmd = Cli::command();
    match command {
        Command::Completion(a) => {
            let mut buf = Vec::new();
            let shell: &dyn clap_complete::env::EnvCompleter = match a.shell {
                clap_complete::Shell::Bash => &clap_complete::env::Bash,
                clap_complete::Shell::Zsh => &clap_complete::env::Zsh,
                clap_complete::Shell::Fish => &clap_complete::env::Fish,
                clap_complete::Shell::Elvish => &clap_complete::env::Elvish,
                _ => &clap_complete::env::Powershell,
            };
            // The script calls this binary back at each Tab (so values come from the
            // journal): by its name on PATH, or by the path it was run by.
            let completer = match std::env::args().next() {
                Some(a0) if a0.contains('/') => {
                    std::env::current_exe().map_or(a0, |p| p.to_string_lossy().into_owned())
                }
                _ => "hcp-workflow".to_string(),
            };
            Some(
                shell
                    .write_registration(
                        complete::VAR,
                        "hcp-workflow",
                        "hcp-workflow",
                        &completer,
                        &mut buf,
                    )
                    .and_then(|()| std::io::stdout().write_all(&buf))
                    .map(|()| 0)
                    .context("writing the completion script"),
            )
        }
        Command::Man(a) => Some(match &a.out_dir {
            Some(dir) => std::fs::create_dir_all(dir)
                .and_then(|()| clap_mangen::generate_to(cmd, dir))
                .map(|()| {
                    eprintln!("wrote the man pages to {}", dir.display());
                    0
                })
                .with_context(|| format!("writing the man pages to {}", dir.display())),
            None => {
                let mut buf = Vec::new();
                clap_mangen::Man::new(cmd)
                    .render(&mut buf)
                    .and_then(|()| std::io::stdout().write_all(&buf))
                    .map(|()| 0)
                    .context("writing the man page")
            }
        }),
        Command::Reference(a) => Some(
            std::io::stdout()
                .write_all(reference::page(a.page, &cmd).as_bytes())
                .map(|()| 0)
                .context("writing the reference page"),
        ),
        _ => None,
    }
}

fn init_logging(format: LogFormat) -> telemetry::Guard {
    telemetry::init(format == LogFormat::Json)
}

fn main() -> std::process::ExitCode {
    // A closed stdout (`hcp-workflow list | head -1`) ends the process like any Unix tool,
    // instead of println! panicking on EPIPE (exit 101).
    sigpipe::reset();
    // A shell asking for completions (`COMPLETE=bash hcp-workflow -- …`, set by the script
    // `completion SHELL` prints): answer and exit before anything else runs.
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(complete::VAR)
        .bin("hcp-workflow")
        .complete();
    let defaults = match defaults::load() {
        Ok(d) => d,
        Err(message) => {
            eprintln!("error: {message}\nnothing was done");
            return std::process::ExitCode::from(2);
        }
    };
    let mut cmd = <Cli as clap::CommandFactory>::command();
    if let Some(d) = &defaults {
        cmd = defaults::apply(cmd, d);
    }
    let matches = match cmd.try_get_matches() {
        Ok(m) => m,
        Err(e) => return usage_error(e),
    };
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    // `--simulate` given, a `simulator:` from the config file is not meant.
    if cli.reach.simulate
        && matches.value_source("simulator") == Some(clap::parser::ValueSource::DefaultValue)
    {
        cli.reach.simulator = None;
    }
    if let Some(r) = generate(&cli.command) {
        return match r {
            Ok(code) => std::process::ExitCode::from(code),
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::from(1)
            }
        };
    }
    let _telemetry = init_logging(cli.log_format);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let out = cli.output;
    let follower = matches!(
        cli.command,
        Command::Start(_) | Command::Drive(_) | Command::Selftest(_) | Command::Watch(_)
    );
    match rt.block_on(run(cli)) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            let (reason, code) = classify(&e);
            let mut message = chain_text(&e);
            if reason == "ReadOnlyJournal" {
                message.push_str(
                    "\nthe journal cannot be written by this process (a read-only file, directory or mount): nothing was done; run it as the journal's owner, or fix the permissions (list, show, why, history, watch, inventory and clusters still work)",
                );
            }
            eprintln!("error: {message}");
            if out == OutputFormat::Json {
                let body = output::ErrorBody {
                    reason: reason.to_string(),
                    message,
                    exit_code: code,
                    details: e
                        .downcast_ref::<output::Refused>()
                        .and_then(|r| r.details.clone()),
                };
                if follower {
                    output::event("error", &output::ErrorDoc { error: &body });
                } else {
                    output::error(&body);
                }
            }
            std::process::ExitCode::from(code)
        }
    }
}

/// An error and its causes, `outer: inner: …`, each cause once: library errors that put
/// their source's text in their own message too (`journal store error: <source>`) would
/// otherwise print it twice.
fn chain_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

/// The `reason` and exit code of an error: 2 for invalid input and refused commands
/// (nothing was done), 1 for everything else.
fn classify(e: &anyhow::Error) -> (&'static str, u8) {
    if let Some(r) = e.downcast_ref::<output::Refused>() {
        (r.reason, 2)
    } else if e.is::<NoJournal>() || e.is::<Unmigrated>() {
        ("NoJournal", 2)
    } else if e.is::<views::BadRunRef>() {
        ("BadRunRef", 2)
    } else if e
        .chain()
        .any(|c| c.to_string().contains("readonly database"))
    {
        // SQLite's "attempt to write a readonly database": refused by the file system, and
        // nothing was written (the transaction did not happen).
        ("ReadOnlyJournal", 2)
    } else {
        ("Failed", 1)
    }
}

/// A command line clap refuses (exit 2). With `--output json` the refusal is an `Error`
/// document too; `--help` and `--version` print as usual.
fn usage_error(e: clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let args: Vec<String> = std::env::args().collect();
    let json = args.iter().any(|a| a == "--output=json" || a == "-ojson")
        || args
            .windows(2)
            .any(|w| (w[0] == "--output" || w[0] == "-o") && w[1] == "json");
    if !json {
        e.exit();
    }
    let _ = e.print();
    let message = e.render().to_string();
    let message = message.trim_end().trim_start_matches("error: ");
    output::error(&output::ErrorBody {
        reason: "InvalidInput".to_string(),
        message: message.to_string(),
        exit_code: 2,
        details: None,
    });
    std::process::ExitCode::from(2)
}

/// `watch`, exiting 130 when Ctrl-C stops it before the run ends (the run goes on).
async fn watch(db: &str, out: OutputFormat, a: follow::WatchArgs) -> Result<u8> {
    let interrupt = tokio::sync::Notify::new();
    let follow = follow::watch_command(db, out, a, &interrupt);
    tokio::pin!(follow);
    tokio::select! {
        biased;
        r = tokio::signal::ctrl_c() => {
            if r.is_err() {
                return follow.await;
            }
            // Let `watch` say where the run is; its answer to the interrupt becomes 130.
            interrupt.notify_one();
            match tokio::time::timeout(std::time::Duration::from_secs(3), &mut follow).await {
                Ok(Ok(0)) => Ok(0),
                // Interrupted while reading the journal: say so, but the answer to Ctrl-C
                // stays 130 (the run itself goes on).
                Ok(Err(e)) => {
                    eprintln!("warning: after the interrupt: {e:#}");
                    Ok(130)
                }
                Ok(Ok(_)) => Ok(130),
                Err(_) => {
                    eprintln!("stopped watching; the run goes on");
                    Ok(130)
                }
            }
        }
        r = &mut follow => r,
    }
}

async fn run(cli: Cli) -> Result<u8> {
    let out = cli.output;
    let db = cli.database;
    target::set_database(&db);
    configure_budget(&cli.arm_share);
    let reach = cli.reach;
    target::set_reach(&reach);
    match cli.command {
        Command::Worker(a) => ops::worker(&db, &reach, a).await,
        Command::Start(a) => start::start(&db, &reach, out, a).await,
        Command::Drive(a) => drive::drive(&db, &reach, out, a).await,
        Command::Plan(a) => plan::plan(&db, &reach, out, a).await,
        Command::Preflight(a) => preflight::preflight(&db, &reach, out, a).await,
        Command::Selftest(a) => ops::selftest(&db, out, a).await,
        Command::List(a) => views::list(&db, out, a).await,
        Command::Show(a) => views::show(&db, out, a).await,
        Command::History(a) => views::history(&db, out, a).await,
        Command::Why(a) => views::why(&db, out, a).await,
        Command::Watch(a) => watch(&db, out, a).await,
        Command::Inventory(a) if a.live => verify::live_orphans(&db, &reach, out, a.cluster).await,
        Command::Inventory(a) => views::inventory(&db, out, a).await,
        Command::Clusters(a) => views::clusters(&db, out, a).await,
        Command::Verify(a) => verify::verify(&db, &reach, out, a).await,
        Command::Kubeconfig(a) => kubeconfig::kubeconfig(&db, &reach, a).await,
        Command::Ui(a) => ui::serve(&db, a).await,
        Command::Migrate => migrate::migrate(&db, out).await,
        Command::Compat(a) => migrate::compat(&db, out, a).await,
        Command::Cancel(a) => ops::command(&db, out, a, hcp_runtime::OperatorCommand::Cancel).await,
        Command::Resume(a) => ops::command(&db, out, a, hcp_runtime::OperatorCommand::Resume).await,
        Command::Retry(a) => {
            let cmd = hcp_runtime::OperatorCommand::Retry {
                step: a.step.clone(),
            };
            ops::command(&db, out, a.common, cmd).await
        }
        Command::Resolve(a) => {
            let cmd = hcp_runtime::OperatorCommand::Resolve {
                step: a.step.clone(),
            };
            let common = ops::CommandArgs {
                run: a.run,
                reason: Some(a.note),
                wait: a.wait,
            };
            ops::command(&db, out, common, cmd).await
        }
        Command::Bench(b) => {
            // Its scratch journals: created and upgraded as `migrate` does.
            services::schema::allow_migrating();
            bench::run(&db, b).await
        }
        Command::Deploy(d) => deploy::run(out, d),
        // Handled in `main`, before the runtime starts.
        Command::Completion(_) | Command::Man(_) | Command::Reference(_) => Ok(0),
        Command::Simulator(SimulatorCommand::Serve(a)) => {
            hcp_simulator::serve_cli(hcp_simulator::ServeOptions {
                listen: a.listen,
                state: a.state,
                time_scale: a.time_scale,
                seed: a.seed,
                crds: a.crds,
                specs: a.specs,
                private_platform: reach.private_platform,
                management_platform: reach.management_platform,
                hypershift_version: reach.hypershift_version.clone(),
                scenario: a.scenario,
                dns_zones: if a.no_dns_zones {
                    Some(Vec::new())
                } else if a.dns_zones.is_empty() {
                    None
                } else {
                    Some(a.dns_zones)
                },
            })
            .await?;
            Ok(0)
        }
    }
}
