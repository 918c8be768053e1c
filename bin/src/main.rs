//! `hcp-workflow`: the command line over the saga engine.
//!
//! A thin binary: argument parsing, output formatting and process concerns (signals, exit
//! codes, logging) live here; everything else is in the library crates.
//!
//! Exit codes: 0 success; 1 the run ended badly (rolled back, cancelled, needs an operator,
//! parked) or a command failed; 2 invalid input (nothing was journaled or created).

mod bench;
mod cluster;
mod ops;
mod preflight;
mod target;
mod telemetry;
mod ui;
mod views;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use hcp_runtime::JournalStore;
use std::sync::Arc;

/// Default journal: a SQLite file in the current directory.
pub const DEFAULT_DATABASE: &str = "sqlite://./hcp-workflow.db";

#[derive(Parser, Debug)]
#[command(
    name = "hcp-workflow",
    version,
    about = "Create and delete self-managed Azure HyperShift hosted clusters as durable, crash-safe sagas",
    after_help = "Examples:\n  hcp-workflow selftest\n  hcp-workflow list --output json\n  hcp-workflow worker --database postgres://postgres@127.0.0.1/hcp"
)]
struct Cli {
    /// Journal database: `sqlite://PATH`, `postgres://…`, or `memory:` (nothing is kept).
    #[arg(long, global = true, env = "HCP_WORKFLOW_DATABASE_URL", default_value = DEFAULT_DATABASE)]
    database: String,
    /// Output format for commands that print data.
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Text)]
    output: OutputFormat,
    /// Log format (logs go to stderr; `RUST_LOG` sets the level, default `warn`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(flatten)]
    reach: cluster::ReachArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
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
    Start(cluster::StartArgs),
    /// Execute one existing run in the foreground until it ends, with live progress (after
    /// Ctrl-C on `start`, say). The run's target must be the one this process reaches.
    #[command(after_help = "Example:\n  hcp-workflow --simulate drive 0199a3b2-…")]
    Drive(cluster::DriveArgs),
    /// Show what a workflow would do: the steps, the resources, the undo plan. Touches nothing.
    #[command(
        after_help = "Example:\n  hcp-workflow plan create-cluster --config examples/cluster.yaml"
    )]
    Plan(cluster::PlanArgs),
    /// Check a cluster's prerequisites read-only against the APIs the run will use
    /// (credentials, providers, permissions derived from the DAG, quotas, VM sizes, DNS
    /// zone, names, the management cluster and the HyperShift operator, the file's
    /// references), concurrently. Creates, changes and journals nothing. Exit 0 when no
    /// check fails, 2 otherwise.
    #[command(
        after_help = "Examples:\n  hcp-workflow preflight --config cluster.yaml\n  hcp-workflow --simulate preflight --config examples/cluster.yaml --output json\n  hcp-workflow preflight --config cluster.yaml --workflow delete-cluster"
    )]
    Preflight(preflight::PreflightArgs),
    /// Run and recover runs until SIGTERM or Ctrl-C.
    #[command(
        after_help = "Example:\n  hcp-workflow worker --database postgres://postgres@127.0.0.1/hcp"
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
    Watch(views::WatchArgs),
    /// Resources per cluster from every run's ledger; `--orphans`: left by failed runs.
    #[command(after_help = "Example:\n  hcp-workflow inventory --cluster demo --orphans")]
    Inventory(views::InventoryArgs),
    /// Serve the operator web UI (run list, run pages, actions, /metrics).
    #[command(
        after_help = "Example:\n  hcp-workflow ui --listen 127.0.0.1:8080\n  HCP_WORKFLOW_UI_TOKEN=… hcp-workflow ui --listen 0.0.0.0:8080"
    )]
    Ui(ui::UiArgs),
    /// Cancel a run: it unwinds (every started step is undone).
    #[command(after_help = "Example:\n  hcp-workflow cancel 6f1c… --reason 'wrong region'")]
    Cancel(ops::CommandArgs),
    /// Retry a waiting, backing-off or stuck step now.
    #[command(after_help = "Example:\n  hcp-workflow retry 6f1c… --step create-cluster.pls.ensure")]
    Retry(ops::RetryArgs),
    /// Mark a stuck undo as done by hand (after cleaning up yourself).
    #[command(
        after_help = "Example:\n  hcp-workflow resolve 6f1c… --step create-cluster.pls.ensure --note 'deleted in the portal'"
    )]
    Resolve(ops::ResolveArgs),
    /// Resume a parked run (after upgrading) or retry every stuck undo.
    #[command(after_help = "Example:\n  hcp-workflow resume 6f1c…")]
    Resume(ops::CommandArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The simulated Azure + management cluster.
    #[command(subcommand)]
    Simulator(SimulatorCommand),
}

#[derive(Subcommand, Debug)]
enum SimulatorCommand {
    /// Serve simulated ARM, Entra ID, blob storage and a Kubernetes management cluster with
    /// a simulated HyperShift operator; prints the endpoints and the settings to use.
    #[command(
        after_help = "Preflight failures (issue 13): --scenario FILE.json (or PUT /_sim/scenario) makes the read APIs answer them — {\"unregistered_providers\": [\"Microsoft.Compute\"], \"unregistered_features\": [\"Microsoft.Compute/EncryptionAtHost\"], \"denied_actions\": [{\"action\": \"Microsoft.Network/privateLinkServices/write\", \"scope\": \"/subscriptions/…/resourceGroups/hcp-management\"}], \"usage\": {\"PublicIPAddresses\": 1000}, \"restricted_sizes\": [{\"size\": \"Standard_D4s_v5\", \"zones\": [\"1\"]}], \"taken_storage_account_names\": [\"…\"], \"denied_kube\": [\"create hypershift.openshift.io/hostedclusters\"], \"no_hypershift_crds\": true}; no DNS zone: --no-dns-zones; no Route API: --management-platform aks; old operator: --hypershift-version 4.21.\n\nThe simulated HyperShift install is set by the global --private-platform azure|none (default none: the operator runs without `--private-platform Azure`, hcp-workflow makes the private link; azure: HyperShift's own private-link controllers make it) and --management-platform openshift|aks (default openshift; aks serves no Route API, so the control-plane operator's private-link controllers never start), and the operator's version by --hypershift-version 4.NN (default 4.22: releases up to 4.22 are accepted; before 4.22 the operator does not know the Azure private topology).\n\nExample:\n  hcp-workflow simulator serve --listen 127.0.0.1:8443 --state /tmp/sim.json --crds ../shared/reference/hypershift\n  hcp-workflow simulator serve --private-platform azure --management-platform openshift"
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

fn init_logging(format: LogFormat) -> telemetry::Guard {
    telemetry::init(format == LogFormat::Json)
}

/// Open the journal named by `--database`.
pub async fn open_store(url: &str) -> Result<Arc<dyn JournalStore>> {
    if url == "memory:" {
        // Nothing survives the process: for benchmarks of the engine's own overhead.
        return Ok(Arc::new(hcp_runtime::MemoryStore::new()));
    }
    hcp_persistence::open(url)
        .await
        .with_context(|| format!("opening the journal at {url}"))
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
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
    match rt.block_on(run(cli)) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> Result<u8> {
    let out = cli.output;
    let db = cli.database;
    target::set_database(&db);
    let reach = cli.reach;
    match cli.command {
        Command::Worker(a) => ops::worker(&db, &reach, a).await,
        Command::Start(a) => cluster::start(&db, &reach, out, a).await,
        Command::Drive(a) => cluster::drive(&db, &reach, out, a).await,
        Command::Plan(a) => cluster::plan(&db, &reach, out, a).await,
        Command::Preflight(a) => preflight::preflight(&db, &reach, out, a).await,
        Command::Selftest(a) => ops::selftest(&db, out, a).await,
        Command::List(a) => views::list(&db, out, a).await,
        Command::Show(a) => views::show(&db, out, a).await,
        Command::History(a) => views::history(&db, out, a).await,
        Command::Why(a) => views::why(&db, out, a).await,
        Command::Watch(a) => views::watch(&db, out, a).await,
        Command::Inventory(a) => views::inventory(&db, out, a).await,
        Command::Ui(a) => ui::serve(&db, a).await,
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
            };
            ops::command(&db, out, common, cmd).await
        }
        Command::Bench(b) => bench::run(&db, b).await,
        Command::Simulator(SimulatorCommand::Serve(a)) => {
            hcp_simulator::serve_cli(hcp_simulator::ServeOptions {
                listen: a.listen,
                state: a.state,
                time_scale: a.time_scale,
                seed: a.seed,
                crds: a.crds,
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
