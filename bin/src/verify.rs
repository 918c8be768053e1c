//! `hcp-workflow verify`: compare what the journal says a cluster is with what
//! exists in Azure and on the management cluster. Read-only: GETs and lists only, nothing
//! journaled. Exit 0 when everything is as the journal says, 3 when something drifted, is
//! missing or foreign, 2 when it could not check.

use crate::output::{self, Refused};
use crate::services::OutputFormat;
use anyhow::Result;
use hcp_activities::steps::Clients;
use hcp_activities::verify::{Expected, Row, Verdict};
use hcp_runtime::{JournalStore, RunFilter};
use std::sync::Arc;

/// Exit code when a check found drift (terraform's `-detailed-exitcode` uses 2 for that;
/// here 2 already means "could not", so drift is 3).
pub const EXIT_DRIFT: u8 = 3;

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// A run (id or unique prefix: its cluster is verified), or `cluster/<name>`.
    #[arg(value_name = "RUN|cluster/NAME", required_unless_present = "all", add = crate::complete::runs())]
    target: Option<String>,
    /// Every cluster that exists in this journal.
    #[arg(long, conflicts_with = "target")]
    all: bool,
    /// Also print the checks that are ok (text output; JSON always has every row).
    #[arg(long)]
    show_ok: bool,
}

/// A cluster as the run that applied its configuration left it.
pub(crate) struct Applied {
    pub(crate) infra: String,
    run: String,
    doc: serde_json::Value,
    /// Who made its private link, as its create recorded it.
    private_link: Option<hcp_workflows::config::PrivateLinkManager>,
}

impl Applied {
    /// The applied run of `standing` and its configuration: the cluster exists, or (with
    /// `even_if_gone`) any cluster whose runs applied one (what a deleted cluster's
    /// leftovers are tagged with).
    fn of(standing: crate::standing::Standing, even_if_gone: bool) -> Option<Self> {
        let run = if even_if_gone {
            standing.state.applied_by.as_ref()
        } else {
            standing.state.exists_by()
        }?;
        Some(Applied {
            infra: run
                .labels
                .get("infra-id")
                .cloned()
                .or_else(|| standing.state.infra_id.clone())
                .unwrap_or_default(),
            run: run.id.to_string(),
            private_link: standing.state.private_link,
            doc: standing.applied?,
        })
    }
}

/// Cluster `name` as the run that applied its configuration left it. `None` when it does
/// not exist, or, with `even_if_gone`, when no run ever applied (and journaled) one.
async fn applied(
    store: &Arc<dyn JournalStore>,
    name: &str,
    even_if_gone: bool,
) -> Result<Option<Applied>> {
    let mut standing = crate::standing::load(store, name, None).await?;
    if even_if_gone && standing.applied.is_none() {
        // A deleted cluster has no standing configuration: its last applied one then.
        if let Some(r) = &standing.state.applied_by {
            standing.applied =
                hcp_workflows::cluster_state::applied_document(store.as_ref(), r.id).await?;
        }
    }
    Ok(Applied::of(standing, even_if_gone))
}

/// A resource a deleted cluster left, as `inventory --orphans --live` lists it.
#[derive(serde::Serialize)]
struct LiveOrphan {
    cluster: String,
    infra_id: String,
    #[serde(flatten)]
    leftover: hcp_activities::verify::Leftover,
}

/// `inventory --orphans --live`: for every deleted cluster (or `cluster`), what Azure still
/// holds tagged with its name and infra id, beyond what its ledger says was kept on
/// purpose (the persistent resources). Exit 0 when nothing is left, 3 when something is,
/// 2 when it could not look.
pub async fn live_orphans(
    db: &str,
    reach_args: &crate::reach::ReachArgs,
    out: OutputFormat,
    cluster: Option<String>,
) -> Result<u8> {
    let store = crate::services::open_existing_store_read_only(db).await?;
    let runs = crate::views::folded_runs(&store, cluster.clone()).await?;
    let rows = crate::views::model::clusters(&runs);
    if let Some(c) = &cluster
        && let Some(r) = rows
            .iter()
            .find(|r| &r.cluster == c && r.status == hcp_workflows::cluster_state::Status::Exists)
    {
        return Err(Refused::input(format!(
            "cluster {} exists: `--live` looks for what deleted clusters left; to compare a live cluster with its journal, run `hcp-workflow verify cluster/{}`",
            r.cluster, r.cluster
        )));
    }
    let kept: std::collections::BTreeSet<String> = crate::views::model::inventory(&runs, false)
        .into_iter()
        .map(|r| r.id.to_ascii_lowercase())
        .collect();
    let mut found = Vec::new();
    let mut failed = false;
    for row in rows
        .iter()
        .filter(|r| r.status == hcp_workflows::cluster_state::Status::Deleted)
    {
        let Some(ap) = applied(&store, &row.cluster, true).await? else {
            continue;
        };
        let Ok(cfg) = hcp_workflows::verify::config_from_applied(&ap.doc) else {
            continue;
        };
        let (reach, _sim) = crate::reach::reach_for(reach_args, db, Some(&cfg)).await?;
        let simulated = !matches!(reach, hcp_activities::steps::Reach::Direct);
        let layout = hcp_workflows::layout::Layout::new(&cfg, &ap.infra, simulated);
        let clients = Clients::new(reach);
        let mgmt_sub = layout
            .mgmt_lb_rg
            .split('/')
            .nth(2)
            .unwrap_or_default()
            .to_string();
        let mut subs = vec![layout.sub.clone()];
        if !mgmt_sub.is_empty() && !mgmt_sub.eq_ignore_ascii_case(&layout.sub) {
            subs.push(mgmt_sub);
        }
        for (sub, env) in subs.iter().zip([&layout.azure, &layout.mgmt_azure]) {
            match hcp_activities::verify::tagged_leftovers(
                &clients,
                env,
                sub,
                &row.cluster,
                &ap.infra,
            )
            .await
            {
                Ok(left) => found.extend(
                    left.into_iter()
                        .filter(|l| !kept.contains(&l.id.to_ascii_lowercase()))
                        .map(|leftover| LiveOrphan {
                            cluster: row.cluster.clone(),
                            infra_id: ap.infra.clone(),
                            leftover,
                        }),
                ),
                Err(e) => {
                    eprintln!("error: cluster {}: {e}", row.cluster);
                    failed = true;
                }
            }
        }
    }
    match out {
        OutputFormat::Json => output::list("LiveOrphans", &found),
        OutputFormat::Text => {
            if found.is_empty() {
                println!("Nothing tagged as a deleted cluster's is left in Azure.");
            } else {
                println!(
                    "{} resource(s) still tagged as a deleted cluster's:",
                    found.len()
                );
                for o in &found {
                    println!(
                        "  {} ({}) — cluster {} infra id {}",
                        o.leftover.id, o.leftover.resource_type, o.cluster, o.infra_id
                    );
                }
                println!(
                    "hcp-workflow never deletes these on its own: check who made each, then remove it (`az resource delete --ids …`)."
                );
            }
        }
    }
    Ok(if failed {
        2
    } else if found.is_empty() {
        0
    } else {
        EXIT_DRIFT
    })
}

/// The clusters `a` names.
async fn names(store: &Arc<dyn JournalStore>, db: &str, a: &VerifyArgs) -> Result<Vec<String>> {
    if a.all {
        let runs = crate::views::folded_runs(store, None).await?;
        return Ok(crate::views::model::clusters(&runs)
            .into_iter()
            .filter(|c| c.status == hcp_workflows::cluster_state::Status::Exists)
            .map(|c| c.cluster)
            .collect());
    }
    let t = a.target.clone().unwrap_or_default();
    Ok(vec![cluster_of(store, db, &t).await?])
}

/// The cluster `target` names: `cluster/<name>`, or a run (id or unique prefix) of it.
pub(crate) async fn cluster_of(store: &Arc<dyn JournalStore>, db: &str, t: &str) -> Result<String> {
    if let Some(name) = t.strip_prefix("cluster/") {
        return Ok(name.to_string());
    }
    let run = crate::views::resolve(store, t, db).await?;
    let Some(rec) = store.load_run(run).await? else {
        return Err(Refused::input(format!("run {t}: not found")));
    };
    match rec.summary.labels.get("cluster") {
        Some(c) => Ok(c.clone()),
        None => Err(Refused::input(format!(
            "run {t} is not a cluster's run (no cluster label): give `cluster/<name>` or a create/update/delete run"
        ))),
    }
}

/// One cluster's report, as printed and as recorded ([`crate::services::reports::VERIFY`] reports).
#[derive(serde::Serialize)]
pub(crate) struct Report {
    cluster: String,
    infra_id: String,
    applied_by_run: String,
    ok: bool,
    counts: std::collections::BTreeMap<&'static str, usize>,
    items: Vec<Row>,
}

/// How many verifies of one cluster the journal keeps (the oldest go).
pub const KEEP: usize = 100;

/// Cluster `name` as its newest succeeded create or update applied it: that run and the
/// cluster file it applied.
async fn applied_config(
    store: &Arc<dyn JournalStore>,
    db: &str,
    name: &str,
) -> Result<(Applied, hcp_workflows::config::ClusterConfig)> {
    if let Some((ap, cfg)) = applied_config_opt(store, name).await? {
        return Ok((ap, cfg));
    }
    let standing = crate::standing::load(store, name, None).await?;
    if let Some(sentence) = crate::standing::partially_deleted(&standing.state, None) {
        return Err(Refused::input(format!(
            "cluster/{name}: nothing whole to verify: {sentence}"
        )));
    }
    Err(Refused::input(format!(
        "cluster/{name}: no succeeded create or update of it in {} (deleted since, never created, or created before applied configurations were journaled); `hcp-workflow clusters` lists what exists",
        crate::services::store::shown_url(db)
    )))
}

/// [`applied_config`], `None` when the cluster does not exist by the journal.
pub(crate) async fn applied_config_opt(
    store: &Arc<dyn JournalStore>,
    name: &str,
) -> Result<Option<(Applied, hcp_workflows::config::ClusterConfig)>> {
    let Some(ap) = applied(store, name, false).await? else {
        return Ok(None);
    };
    let cfg = hcp_workflows::verify::config_from_applied(&ap.doc)
        .map_err(|e| Refused::input(format!("cluster/{name}: {e}")))?;
    Ok(Some((ap, cfg)))
}

/// Who made cluster `cfg`'s private link. With `privateLink.managedBy: auto` (the default)
/// the file does not say: its create decided from the operator's install and recorded the
/// answer as the run's `private-link` label, and that record (from the cluster's state)
/// is what verify checks against.
fn private_link_mode(
    recorded: Option<hcp_workflows::config::PrivateLinkManager>,
    cfg: &hcp_workflows::config::ClusterConfig,
) -> Result<hcp_workflows::config::PrivateLinkManager> {
    use hcp_workflows::config::PrivateLinkManager;
    if cfg.private_link.managed_by != PrivateLinkManager::Auto || !cfg.topology.uses_private_link()
    {
        return Ok(cfg.private_link.managed_by);
    }
    recorded.ok_or_else(|| {
        Refused::input(format!(
            "cluster/{}: privateLink.managedBy is `auto` and no create of it recorded who made its private link, so its private-link checks cannot be chosen; set privateLink.managedBy to `hypershift` or `hcp-workflow` in the file and run `hcp-workflow start update-cluster --config <file>`",
            cfg.name
        ))
    })
}

/// The principal a role-assignment node of run `run` recorded writing its assignment for
/// (`None` for any other node, or a run made before it was recorded).
fn recorded_principal(
    runs: &[(hcp_runtime::RunSummary, crate::views::model::Folded)],
    run: &str,
    node: &str,
) -> Option<hcp_activities::steps::identity::AssignedPrincipal> {
    let (_, f) = runs.iter().find(|(s, _)| s.id.to_string() == run)?;
    let out = f.view.outputs().remove(node)?;
    serde_json::from_value(out.get("principal")?.clone()).ok()
}

/// Verify cluster `name` (applied by `ap` as `cfg`) through `reach`. Read-only: GETs and
/// lists (and read-only POSTs) only.
async fn check(
    store: &Arc<dyn JournalStore>,
    name: &str,
    (ap, cfg): (Applied, hcp_workflows::config::ClusterConfig),
    reach: hcp_activities::steps::Reach,
) -> Result<Report> {
    let simulated = !matches!(reach, hcp_activities::steps::Reach::Direct);
    let layout = hcp_workflows::layout::Layout::new(&cfg, &ap.infra, simulated);
    let runs = crate::views::folded_runs(store, Some(name.to_string())).await?;
    let checked = [
        "azure",
        "kubernetes",
        hcp_activities::steps::aro_identity::KIND_ENTRA,
        hcp_activities::steps::aro_identity::KIND_KEY_VAULT,
    ];
    let expected: Vec<Expected> = crate::views::model::inventory(&runs, false)
        .into_iter()
        .filter(|r| checked.contains(&r.kind.as_str()) && r.action != "resolved")
        .map(|r| Expected {
            ours: r.action == "created" || r.action == "updated",
            principal: recorded_principal(&runs, &r.run, &r.node),
            kind: r.kind,
            resource_type: r.resource_type,
            id: r.id,
        })
        .collect();
    let link = private_link_mode(ap.private_link, &cfg)?;
    let input = hcp_workflows::verify::input(&cfg, &layout, link, expected);
    let clients = Clients::new(reach);
    let items = hcp_activities::verify::verify(&clients, &input).await;
    let mut counts = std::collections::BTreeMap::new();
    for r in &items {
        *counts.entry(r.verdict.as_str()).or_insert(0) += 1;
    }
    Ok(Report {
        cluster: name.to_string(),
        infra_id: ap.infra,
        applied_by_run: ap.run,
        ok: items.iter().all(|r| r.verdict == Verdict::Ok),
        counts,
        items,
    })
}

/// Keep `report` in the journal (`history`, `clusters`, the UI and `/metrics` read it).
async fn record(store: &Arc<dyn JournalStore>, report: &Report, by: &str) -> Result<()> {
    let data = serde_json::to_string(report)?;
    store
        .record_report(hcp_runtime::NewReport {
            kind: crate::services::reports::VERIFY.into(),
            subject: crate::services::reports::cluster_subject(&report.cluster),
            at: crate::services::clock().now(),
            ok: report.ok,
            by: by.to_string(),
            data,
            keep: KEEP,
        })
        .await?;
    Ok(())
}

pub async fn verify(
    db: &str,
    reach_args: &crate::reach::ReachArgs,
    out: OutputFormat,
    a: VerifyArgs,
) -> Result<u8> {
    let store = crate::services::open_existing_store_read_only(db).await?;
    let names = names(&store, db, &a).await?;
    if names.is_empty() {
        if out == OutputFormat::Text {
            println!(
                "No cluster exists in {}: nothing to verify.",
                crate::services::store::shown_url(db)
            );
        } else {
            output::list::<Report>("VerifyReportList", &[]);
        }
        return Ok(0);
    }
    let mut reports = Vec::new();
    let me = crate::services::identity::who();
    for name in &names {
        let applied = applied_config(&store, db, name).await?;
        let (reach, _sim) = crate::reach::reach_for(reach_args, db, Some(&applied.1)).await?;
        let mut report = check(&store, name, applied, reach).await?;
        // The fix lines are written without knowing this journal or world: pasted, they
        // must act on the journal and target this verify looked at.
        let target = crate::target::of_args(reach_args);
        for r in &mut report.items {
            if let Some(fix) = &mut r.fix {
                *fix = crate::target::with_flags(fix, target.as_deref());
            }
        }
        // A verify is recorded when the journal can be written; a read-only journal still
        // gets its report printed.
        if let Err(e) = record(&store, &report, &me).await {
            eprintln!(
                "warning: this verify of cluster {name} is not recorded in the journal: {e:#}"
            );
        }
        reports.push(report);
    }
    match out {
        OutputFormat::Json => {
            if a.all {
                output::list("VerifyReportList", &reports);
            } else if let Some(r) = reports.first() {
                output::document("VerifyReport", r);
            }
        }
        OutputFormat::Text => {
            for r in &reports {
                print!("{}", text(r, a.show_ok));
            }
        }
    }
    let all: Vec<&Row> = reports.iter().flat_map(|r| r.items.iter()).collect();
    Ok(if all.iter().any(|r| r.verdict == Verdict::Unknown) {
        2
    } else if all.iter().any(|r| r.verdict != Verdict::Ok) {
        EXIT_DRIFT
    } else {
        0
    })
}

/// The clusters that exist in `store` (their newest succeeded run created or changed
/// them) and whose runs target one of `served`, from the run summaries alone.
async fn served_clusters(store: &Arc<dyn JournalStore>, served: &[String]) -> Result<Vec<String>> {
    let runs = store.list_runs(&RunFilter::default()).await?;
    let mut by_cluster: std::collections::BTreeMap<&str, Vec<&hcp_runtime::RunSummary>> =
        std::collections::BTreeMap::new();
    for r in &runs {
        if let Some(name) = r.labels.get("cluster") {
            by_cluster.entry(name).or_default().push(r);
        }
    }
    let mut out = Vec::new();
    for (name, mine) in by_cluster {
        let state = hcp_workflows::cluster_state::of_runs(name, mine, false);
        // Only a cluster that exists, made for a world this worker reaches.
        let ours = state.exists_by().is_some_and(|r| {
            r.target
                .as_ref()
                .is_none_or(|t| served.iter().any(|s| s == t))
        });
        if ours {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// `worker --verify-every`: verify every cluster this worker serves once per `every`, on a
/// schedule kept in the journal (a restart does not verify again before it is due), each
/// due verify claimed by exactly one worker ([`JournalStore::claim_schedule`]). Runs until
/// the task is dropped; a failed round is logged and tried again at the next tick.
pub async fn verify_every(
    store: Arc<dyn JournalStore>,
    db: String,
    reach: hcp_activities::steps::Reach,
    served: Vec<String>,
    every: std::time::Duration,
    me: String,
) {
    let tick = (every / 4).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(30),
    );
    loop {
        if let Err(e) = verify_due(&store, &db, &reach, &served, every, &me).await {
            tracing::warn!(error = %format!("{e:#}"), "scheduled verify round failed; trying again at the next tick");
        }
        tokio::time::sleep(tick).await;
    }
}

async fn verify_due(
    store: &Arc<dyn JournalStore>,
    db: &str,
    reach: &hcp_activities::steps::Reach,
    served: &[String],
    every: std::time::Duration,
    me: &str,
) -> Result<()> {
    for name in served_clusters(store, served).await? {
        let now = crate::services::clock().now();
        let key = format!("verify/{name}");
        if !store.claim_schedule(&key, me, now, now.plus(every)).await? {
            continue;
        }
        let checked = match applied_config(store, db, &name).await {
            Ok(applied) => check(store, &name, applied, reach.clone()).await,
            Err(e) => Err(e),
        };
        match checked {
            Ok(report) => {
                record(store, &report, me).await?;
                let drift = report
                    .items
                    .iter()
                    .filter(|r| r.verdict != Verdict::Ok)
                    .count();
                if report.ok {
                    tracing::info!(cluster = %name, checks = report.items.len(), "verified: everything is as the journal says");
                } else {
                    tracing::warn!(cluster = %name, checks = report.items.len(), drift, "verified: drift found; `hcp-workflow verify cluster/{name}` shows it");
                }
            }
            Err(e) => {
                tracing::warn!(cluster = %name, error = %format!("{e:#}"), "scheduled verify could not check the cluster");
            }
        }
    }
    Ok(())
}

fn text(r: &Report, show_ok: bool) -> String {
    let mut s = format!(
        "Cluster {} (infra id {}, as applied by run {}): {} checks, {}\n",
        r.cluster,
        r.infra_id,
        crate::runref::short(&r.applied_by_run),
        r.items.len(),
        r.counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let shown: Vec<&Row> = r
        .items
        .iter()
        .filter(|x| show_ok || x.verdict != Verdict::Ok)
        .collect();
    let w = shown
        .iter()
        .map(|x| x.check.len())
        .max()
        .unwrap_or(5)
        .max(5);
    for x in shown {
        s.push_str(&format!(
            "{:<8} {:<w$} {}\n{:<8} {:<w$}   expected {}; found {}\n",
            x.verdict.as_str(),
            x.check,
            x.resource,
            "",
            "",
            x.expected,
            x.found
        ));
        if let Some(fix) = &x.fix {
            s.push_str(&format!("{:<8} {:<w$}   fix: {fix}\n", "", ""));
        }
    }
    if r.ok {
        s.push_str("Everything is as the journal says.\n");
    }
    s
}
