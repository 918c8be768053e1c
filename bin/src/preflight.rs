//! `hcp-workflow preflight`: every prerequisite of a cluster, checked read-only against the
//! APIs the run will use, before anything is journaled. The checks themselves
//! live in `hcp_activities::preflight`; this module builds their inputs from the cluster
//! file, prints the report and picks the exit code. `start` runs the same checks
//! ([`run_for`]) before journaling.

use crate::cluster::Workflow;
use crate::reach::ReachArgs;
use crate::services::OutputFormat;
use anyhow::Result;
use clap::Args;
use hcp_activities::preflight::{self, CheckResult, Inputs, Report, Status};
use hcp_activities::steps::Clients;
use hcp_workflows::config::{self, ClusterConfig};
use hcp_workflows::layout::{CLUSTERS_NAMESPACE, COMPONENTS, Layout};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// `preflight`.
#[derive(Args, Debug)]
pub struct PreflightArgs {
    /// The cluster file (see examples/cluster.yaml).
    #[arg(long)]
    config: PathBuf,
    /// Whose prerequisites: `create-cluster` (default: everything) or `delete-cluster`
    /// (credentials, the permissions of the deletes, the management cluster).
    #[arg(long, value_enum, default_value = "create-cluster")]
    workflow: Workflow,
    /// delete-cluster: also the permissions to delete persistent resources.
    #[arg(long)]
    purge_persistent: bool,
    /// Limit of each check, in seconds (checks run concurrently).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    timeout: u64,
}

/// The per-check limit `start` uses.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// `Inputs` of the checks, from the cluster file and its layout. `managed_by` is
/// `privateLink.managedBy` (resolved by `start`, as written for `preflight`).
pub fn inputs(
    cfg: &ClusterConfig,
    layout: &Layout,
    workflow: Workflow,
    managed_by: config::PrivateLinkManager,
) -> Inputs {
    let private_link = cfg.topology.uses_private_link().then(|| {
        let mc = &cfg.management_cluster;
        preflight::PrivateLinkInputs {
            managed_by: managed_by.as_str().to_string(),
            mgmt_azure: layout.mgmt_azure.clone(),
            mgmt_subscription: mc
                .subscription
                .clone()
                .unwrap_or_else(|| cfg.subscription.clone()),
            lb_rg: layout.mgmt_lb_rg.clone(),
            vnet_id: layout.mgmt_vnet_id.clone(),
            nat_subnet: match &layout.nat_subnet_create {
                None => preflight::NatSubnet::Existing(layout.nat_subnet_id.clone()),
                Some(cidr) => preflight::NatSubnet::Create {
                    id: layout.nat_subnet_id.clone(),
                    cidr: cidr.clone(),
                },
            },
            pls_id: layout.pls_id.clone(),
        }
    });
    let byo_identities = match cfg.read_workload_identities() {
        Ok(Some(w)) => Some(
            COMPONENTS
                .iter()
                .map(|c| {
                    (
                        c.component.name().to_string(),
                        w.get(c.component).client_id.clone(),
                    )
                })
                .collect(),
        ),
        _ => None,
    };
    Inputs {
        workflow: match workflow.def().preflight {
            hcp_workflows::workflow::PreflightKind::Create => preflight::Workflow::Create,
            hcp_workflows::workflow::PreflightKind::Delete => preflight::Workflow::Delete,
            hcp_workflows::workflow::PreflightKind::Update => preflight::Workflow::Update,
        },
        azure: layout.azure.clone(),
        mgmt: layout.mgmt.clone(),
        owner: layout.owner.clone(),
        namespace: CLUSTERS_NAMESPACE.to_string(),
        subscription: cfg.subscription.clone(),
        location: cfg.location.clone(),
        base_domain: cfg.base_domain.clone(),
        dns_zone_resource_group: cfg.dns_zone_resource_group.clone(),
        storage_account_id: layout.storage_account_id.clone(),
        persistent_rg: layout.persistent_rg.clone(),
        pools: cfg
            .node_pools
            .iter()
            .map(|p| preflight::Pool {
                name: p.name.clone(),
                vm_size: p.vm_size.clone(),
                replicas: p.desired_replicas(),
                zone: p.zone.clone(),
                replaces: None,
            })
            .collect(),
        network_created: layout.network_created,
        byo_network: match &cfg.network {
            config::Network::Existing(e) => Some(preflight::ByoNetwork {
                vnet_id: e.vnet_id.clone(),
                subnet_id: e.subnet_id.clone(),
                nsg_id: e.nsg_id.clone(),
            }),
            config::Network::Create(_) => None,
        },
        byo_subjects: COMPONENTS
            .iter()
            .map(|c| {
                (
                    c.component.name().to_string(),
                    c.subjects
                        .iter()
                        .map(|s| format!("system:serviceaccount:{s}"))
                        .collect(),
                )
            })
            .collect(),
        issuer_url: layout.issuer_url.clone(),
        byo_identities,
        oidc_existing: match &cfg.oidc_issuer {
            config::OidcIssuer::Existing(e) => {
                Some(hcp_activities::steps::cluster::ExistingIssuerKey {
                    key_file: e.signing_key.clone(),
                    issuer_url: e.url.clone(),
                    azure: layout.azure.clone(),
                })
            }
            config::OidcIssuer::Create(_) => None,
        },
        release: cfg.release_minor(),
        private_link,
        aro: layout.aro.as_ref().map(|a| preflight::aro::AroInputs {
            key_vault: a.key_vault.clone(),
            key_vault_id: a.key_vault_id.clone(),
            existing: a.key_vault_existing,
            aks_cluster_id: a.aks_cluster_id.clone(),
            aks_azure: layout.mgmt_azure.clone(),
        }),
    }
}

/// The release row: what the topology and identity mode need (the rule of
/// `workflows/src/config/validate.rs`, which already refused a file breaking it).
fn release_row(cfg: &ClusterConfig) -> CheckResult {
    let need = if cfg.topology.uses_private_link() {
        (
            (4, 22),
            format!("topology {:?} (Azure private topology)", cfg.topology),
        )
    } else {
        (
            (4, 19),
            "Azure workload identities (AzureWorkloadIdentities)".to_string(),
        )
    };
    let target = format!("release {}", cfg.release_image);
    match cfg.release_minor() {
        Some(r) if r >= need.0 => CheckResult::pass(
            "config.release",
            target,
            format!(
                "{}.{} ≥ {}.{} needed by {}",
                r.0, r.1, need.0.0, need.0.1, need.1
            ),
        ),
        Some(r) => CheckResult::fail(
            "config.release",
            target,
            format!(
                "{}.{} < {}.{} needed by {}",
                r.0, r.1, need.0.0, need.0.1, need.1
            ),
            format!("use a {}.{} or newer release", need.0.0, need.0.1),
        ),
        None => CheckResult::warn(
            "config.release",
            target,
            "the release's version is unknown (pinned by digest without releaseVersion)",
            Some("set releaseVersion".into()),
        ),
    }
}

/// Run every check that applies to `workflow` against `dag` (the workflow's DAG: the
/// permissions are derived from it).
#[allow(clippy::too_many_arguments)]
pub async fn run_for(
    cfg: &ClusterConfig,
    layout: &Layout,
    dag: &hcp_runtime::SagaDag,
    clients: &Arc<Clients>,
    workflow: Workflow,
    managed_by: config::PrivateLinkManager,
    timeout: Duration,
    applied: Option<&serde_json::Value>,
) -> Report {
    let mut inputs = inputs(cfg, layout, workflow, managed_by);
    if let Some(applied) = applied {
        // An update needs quota and VM sizes only for the machines it adds.
        inputs.pools = hcp_workflows::update_cluster::added_machines(applied, cfg)
            .into_iter()
            .map(
                |(name, vm_size, replicas, zone, replaces)| preflight::Pool {
                    name,
                    vm_size,
                    replicas,
                    zone,
                    replaces,
                },
            )
            .collect();
    }
    let mut report = preflight::run(
        clients.clone(),
        &inputs,
        dag,
        &preflight::Options {
            per_check_timeout: timeout,
        },
    )
    .await;
    if workflow.def().preflight == hcp_workflows::workflow::PreflightKind::Create {
        report.rows.insert(0, release_row(cfg));
    }
    if let Some(applied) = applied {
        let rows = hcp_workflows::update_cluster::release_checks(applied, cfg);
        report.rows.splice(0..0, rows);
    }
    report
}

/// `preflight`: the report; exit 0 when nothing fails, 2 otherwise. Journals nothing (the
/// journal is not even opened unless a delete needs the infra id a create recorded).
pub async fn preflight(
    db: &str,
    reach_args: &ReachArgs,
    out: OutputFormat,
    a: PreflightArgs,
) -> Result<u8> {
    let cfg = crate::cluster::load_config(&a.config)?;
    let infra = match &cfg.infra_id {
        Some(i) => i.clone(),
        None if !a.workflow.def().follows_create => cfg.infra_id_or_generate(),
        None => {
            return Err(crate::output::Refused::input(format!(
                "infraID: not set in {}; preflight reads no journal: set infraID to the cluster's infra id",
                a.config.display()
            )));
        }
    };
    // An in-process simulator (`--simulate`) keeps no state for a preflight unless the
    // journal's simulator state already exists: nothing is written.
    let sim_db = match db.strip_prefix("sqlite://") {
        Some(p)
            if std::path::Path::new(&format!("{}.sim.json", p.split('?').next().unwrap_or(p)))
                .exists() =>
        {
            db.to_string()
        }
        _ => "memory:".to_string(),
    };
    let (reach, _sim) = crate::reach::reach_for(reach_args, &sim_db, Some(&cfg)).await?;
    let simulated = !matches!(reach, hcp_activities::steps::Reach::Direct);
    let layout = Layout::new(&cfg, &infra, simulated);
    let dag = crate::cluster::build_dag(
        a.workflow,
        &cfg,
        &layout,
        hcp_workflows::delete_cluster::DeleteOptions {
            purge_persistent: a.purge_persistent,
            skip_cloud_cleanup: false,
        },
    )?;
    let clients = Clients::new(reach);
    let report = run_for(
        &cfg,
        &layout,
        &dag,
        &clients,
        a.workflow,
        cfg.private_link.managed_by,
        Duration::from_secs(a.timeout.max(1)),
        None,
    )
    .await;
    print_report(&report, out, &cfg.name);
    Ok(if report.failed() { 2 } else { 0 })
}

/// The report as JSON (`PreflightReport`, and the `details` of a start it refused).
pub fn report_json(report: &Report, cluster: &str) -> serde_json::Value {
    serde_json::json!({
        "cluster": cluster,
        "workflow": report.workflow,
        "ok": !report.failed(),
        "elapsed_ms": report.elapsed_ms,
        "items": report.rows,
    })
}

/// Print the report: a table (text) or one JSON document.
pub fn print_report(report: &Report, out: OutputFormat, cluster: &str) {
    match out {
        OutputFormat::Json => {
            crate::output::document("PreflightReport", &report_json(report, cluster))
        }
        OutputFormat::Text => {
            print!("{}", table(report.rows.iter()));
            let (p, w, f) = report.counts();
            println!(
                "{} checks for {} of {cluster}: {p} pass, {w} warn, {f} fail ({} ms)",
                report.rows.len(),
                report.workflow,
                report.elapsed_ms
            );
        }
    }
}

/// Rows as a table: status, check, target, detail; a fix on its own line below.
pub fn table<'a>(rows: impl Iterator<Item = &'a CheckResult>) -> String {
    let rows: Vec<&CheckResult> = rows.collect();
    let w = rows.iter().map(|r| r.check.len()).max().unwrap_or(5).max(5);
    let mut s = format!("{:<6} {:<w$} {}\n", "STATUS", "CHECK", "TARGET — DETAIL");
    for r in rows {
        let status = match r.status {
            Status::Pass => "pass",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        s.push_str(&format!(
            "{status:<6} {:<w$} {} — {}\n",
            r.check, r.target, r.detail
        ));
        if let Some(fix) = &r.fix
            && r.status != Status::Pass
        {
            s.push_str(&format!("{:<6} {:<w$}   fix: {fix}\n", "", ""));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcp_activities::steps::permissions;

    fn example() -> ClusterConfig {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
        match config::load(&p) {
            Ok(c) => c,
            Err(e) => panic!("examples/cluster.yaml: {e:?}"),
        }
    }

    /// Every action of every DAG has a permission entry, and the permissions derived from
    /// the create DAG cover the scopes the run writes in.
    #[test]
    fn permissions_are_derived_from_every_dag() {
        let mut cfg = example();
        let layout = Layout::new(&cfg, "demo-x7k2p", true);
        let mut dags = Vec::new();
        for m in [
            config::PrivateLinkManager::HcpWorkflow,
            config::PrivateLinkManager::Hypershift,
        ] {
            cfg.private_link.managed_by = m;
            for (wf, purge) in [
                (Workflow::of(&hcp_workflows::create_cluster::DEF), false),
                (Workflow::of(&hcp_workflows::delete_cluster::DEF), false),
                (Workflow::of(&hcp_workflows::delete_cluster::DEF), true),
            ] {
                let dag = crate::cluster::build_dag(
                    wf,
                    &cfg,
                    &layout,
                    hcp_workflows::delete_cluster::DeleteOptions {
                        purge_persistent: purge,
                        skip_cloud_cleanup: false,
                    },
                );
                match dag {
                    Ok(d) => dags.push(d),
                    Err(e) => panic!("{e}"),
                }
            }
            // update-cluster with every kind of change.
            let mut applied = hcp_workflows::applied::document(&cfg);
            applied["releaseImage"] =
                serde_json::json!("quay.io/openshift-release-dev/ocp-release:4.22.0-multi");
            applied["allowedSubscriptions"] =
                serde_json::json!(["22222222-3333-4444-5555-666666666666"]);
            if let Some(pools) = applied["nodePools"].as_array_mut() {
                pools[0]["replicas"] = serde_json::json!(7);
                pools[0]["vmSize"] = serde_json::json!("Standard_D8s_v5");
                pools.push(serde_json::json!({"name": "old", "replicas": 1}));
            }
            let mut upd = cfg.clone();
            upd.release_image = "quay.io/openshift-release-dev/ocp-release:4.22.3-multi".into();
            let def = &hcp_workflows::update_cluster::DEF;
            let dag = def
                .dag(
                    &upd,
                    &layout,
                    hcp_workflows::workflow::BuildOptions {
                        applied: Some(&applied),
                        ..Default::default()
                    },
                    def.default_on_failure,
                )
                .unwrap_or_else(|e| panic!("{e}"));
            use hcp_activities::steps::{cluster, hosted_cluster, node_pool, pls_access};
            use hcp_runtime::Action;
            for action in [
                node_pool::UpdateNodePool::NAME,
                hosted_cluster::UpgradeControlPlane::NAME,
                node_pool::UpgradeNodePool::NAME,
                pls_access::SetPlsVisibility::NAME,
                pls_access::PruneConnections::NAME,
                cluster::DeleteObject::NAME,
            ] {
                assert!(
                    dag.nodes.iter().any(|n| n.action == action),
                    "{action} in {:?}",
                    dag.nodes.iter().map(|n| &n.name).collect::<Vec<_>>()
                );
            }
            dags.push(dag);
        }
        for d in &dags {
            assert_eq!(
                permissions::unknown_actions(d),
                Vec::<String>::new(),
                "{}",
                d.workflow
            );
        }
        let needed = permissions::needed(&dags[0]);
        let has = |scope: &str, action: &str| {
            needed
                .iter()
                .any(|n| n.scope.eq_ignore_ascii_case(scope) && n.action == action)
        };
        assert!(has(
            &layout.mgmt_lb_rg,
            "Microsoft.Network/privateLinkServices/write"
        ));
        assert!(has(
            &layout.managed_rg,
            "Microsoft.Authorization/roleAssignments/write"
        ));
        assert!(has(
            &layout.persistent_rg,
            "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/write"
        ));
        assert!(has(
            &layout.vnet_rg,
            "Microsoft.Network/virtualNetworks/write"
        ));
    }
}
