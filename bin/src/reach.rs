//! How this process reaches Azure and the management cluster: the real thing, a
//! simulator another process serves (`--simulator URL`), or one in this process
//! (`--simulate`, its state kept beside a SQLite journal).

use crate::output::Refused;
use anyhow::{Context, Result};
use clap::Args;
use hcp_activities::steps::Reach;
use hcp_workflows::config::{self, ClusterConfig};
use std::path::PathBuf;

/// Where Azure and the management cluster are.
#[derive(Args, Debug, Clone, Default)]
pub struct ReachArgs {
    /// Run against an in-process simulated Azure + management cluster (fast time scale; its
    /// state is kept beside a SQLite journal, `<db>.sim.json`, so a run can be resumed).
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        conflicts_with = "simulator"
    )]
    pub simulate: bool,
    /// Run against a running `hcp-workflow simulator serve` at this URL.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        value_name = "URL"
    )]
    pub simulator: Option<String>,
    /// Simulator only (`--simulate`, `simulator serve`): how the simulated HyperShift
    /// operator was installed. `azure`: with `--private-platform Azure` (HyperShift's own
    /// controllers make the PLS, PE and DNS); `none` (default): without (hcp-workflow makes
    /// them). Give the same value on every `--simulate` invocation of a run.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        value_name = "azure|none"
    )]
    pub private_platform: Option<hcp_simulator::PrivatePlatform>,
    /// Simulator only: the management cluster's platform. `openshift` (default) serves the
    /// Route API; `aks` does not, so HyperShift's control-plane private-link controllers
    /// never start.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        value_name = "openshift|aks"
    )]
    pub management_platform: Option<hcp_simulator::ManagementPlatform>,
    /// Simulator only: the simulated HyperShift operator's minor version (default 4.22).
    /// It accepts releases from 4.14 up to its own minor (newer ones get
    /// `ValidReleaseImage=False`), and only 4.22 knows the Azure private topology (an older
    /// one never gives a Private/PublicAndPrivate cluster its router IP).
    #[arg(long, global = true, help_heading = "Global options", value_name = "4.NN", value_parser = parse_hypershift_version)]
    pub hypershift_version: Option<String>,
}

pub(crate) fn parse_hypershift_version(s: &str) -> std::result::Result<String, String> {
    match hcp_simulator::minor_version(s) {
        Some((4, m)) if (14..=99).contains(&m) => Ok(format!("4.{m}")),
        _ => Err(format!(
            "`{s}`: expected a HyperShift minor version like 4.22"
        )),
    }
}

/// A running in-process simulator (kept alive while the process needs it).
#[derive(Debug)]
pub struct SimHandle {
    _task: tokio::task::JoinHandle<()>,
}

impl Drop for SimHandle {
    /// The simulator stops with its handle: nothing of this process reaches it any more,
    /// and it lets go of its state file for the next one.
    fn drop(&mut self) {
        self._task.abort();
    }
}

pub(crate) fn sim_state_path(db: &str) -> Option<PathBuf> {
    let path = db.strip_prefix("sqlite://")?;
    let path = path.split('?').next().unwrap_or(path);
    Some(PathBuf::from(format!("{path}.sim.json")))
}

/// `--simulate` keeps the simulated cloud in this process, and beside a SQLite
/// journal in `<db>.sim.json`. On Postgres there is no such file: a `--simulate` worker (or a
/// detached `--simulate` run, which only such a worker could run) would work in an empty
/// simulated cloud of its own, without the run's DNS zone or anything an earlier process
/// made, and every run would roll back at its first step. Refused, with the recipe that works.
pub fn refuse_simulate_without_shared_state(args: &ReachArgs, db: &str, what: &str) -> Result<()> {
    if args.simulate && args.simulator.is_none() && sim_state_path(db).is_none() && db != "memory:"
    {
        return Err(Refused::input(format!(
            "--simulate: {what} needs a simulated cloud that outlives this process, and with this journal ({}) the in-process simulator keeps its state nowhere (only a SQLite journal has a file beside it). Run one simulator for every process instead:\n  hcp-workflow simulator serve --listen 127.0.0.1:8443 --state sim.json --dns-zone <baseDomain>\n  hcp-workflow --database … --simulator http://127.0.0.1:8443 worker\n  hcp-workflow --database … --simulator http://127.0.0.1:8443 start create-cluster --config …\nnothing was journaled or created",
            db.split_once("://").map_or(db, |(scheme, _)| scheme)
        )));
    }
    Ok(())
}

/// Decide how this process reaches the world; start the in-process simulator if asked.
pub async fn reach(args: &ReachArgs, db: &str) -> Result<(Reach, Option<SimHandle>)> {
    reach_for(args, db, None).await
}

/// [`reach`] for a cluster: an in-process simulator (`--simulate`) also gets the public
/// DNS zone of the cluster's `baseDomain` (in its subscription, in `dnsZoneResourceGroup`
/// or `hcp-dns`), which HyperShift requires to exist and never creates.
pub async fn reach_for(
    args: &ReachArgs,
    db: &str,
    cluster: Option<&ClusterConfig>,
) -> Result<(Reach, Option<SimHandle>)> {
    if let Some(url) = &args.simulator {
        return Ok((
            Reach::Simulator(url.trim_end_matches('/').to_string()),
            None,
        ));
    }
    if !args.simulate {
        return Ok((Reach::Direct, None));
    }
    let state_file = sim_state_path(db);
    if state_file.is_none() && db != "memory:" {
        // Only a SQLite journal has a file beside it to keep the simulated cloud in.
        eprintln!(
            "warning: --simulate with this journal ({}) keeps the simulated Azure and management cluster only in this process: a later command (a delete, a resume, another worker) finds none of what this run creates. To keep it, run `hcp-workflow simulator serve --state sim.json` and pass `--simulator http://127.0.0.1:8443` to every command instead of --simulate.",
            db.split_once("://").map_or(db, |(scheme, _)| scheme)
        );
    }
    let mut cfg = hcp_simulator::SimConfig {
        state_file,
        dns_zones: cluster.map(dns_zone_seed).into_iter().collect(),
        ..Default::default()
    };
    if let Some(p) = args.private_platform {
        cfg.private_platform = p;
    }
    // A cluster file for an AKS management cluster (`managementCluster.platform: aks`,
    // the ARO HCP model) gets a simulated AKS cluster unless the flag says otherwise.
    if let Some(c) = cluster
        && c.management_cluster.platform == hcp_workflows::config::ManagementPlatform::Aks
    {
        // (Installed the way HyperShift's AKS how-to installs it, the Route CRD applied
        // first, as the simulator's AKS is by default.)
        cfg.management_platform = hcp_simulator::ManagementPlatform::Aks;
    }
    if let Some(p) = args.management_platform {
        cfg.management_platform = p;
    }
    if let Some(v) = &args.hypershift_version {
        cfg.hypershift_version = v.clone();
    }
    if let Ok(v) = std::env::var("HCP_SIM_TIME_SCALE")
        && let Ok(f) = v.parse::<f64>()
    {
        cfg.time_scale = f;
    }
    let sim = hcp_simulator::Simulator::new(cfg).context("starting the in-process simulator")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the in-process simulator")?;
    let base = format!("http://{}", listener.local_addr()?);
    let task = tokio::spawn(async move {
        if let Err(e) = sim.serve(listener).await {
            tracing::error!(error = %e, "in-process simulator stopped");
        }
    });
    Ok((Reach::Simulator(base), Some(SimHandle { _task: task })))
}

/// The public DNS zone of a cluster file's `baseDomain`, as a user has it before a create
/// (seeded in the in-process simulator: `--simulate`, `bench cluster`).
pub fn dns_zone_seed(c: &ClusterConfig) -> hcp_simulator::DnsZoneSeed {
    hcp_simulator::DnsZoneSeed {
        subscription: c.subscription.clone(),
        resource_group: c
            .dns_zone_resource_group
            .clone()
            .unwrap_or_else(|| hcp_simulator::DEFAULT_DNS_ZONE_RESOURCE_GROUP.into()),
        domain: c.base_domain.clone(),
    }
}

/// The cluster's exclusive key: at most one unfinished run of any workflow per key.
///
pub(crate) fn cloud_name(cfg: &ClusterConfig) -> &'static str {
    match cfg.cloud {
        config::Cloud::Public => "public",
        config::Cloud::UsGovernment => "usGovernment",
        config::Cloud::China => "china",
        config::Cloud::Custom(_) => "custom",
    }
}
