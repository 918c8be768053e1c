//! `plan`: what a start would do, step by step, for the cluster and the file as they are,
//! with the differences an update would apply; nothing is journaled.

use crate::cluster::{Workflow, build, failure_policy, known_resources, load_config, no_cluster};
use crate::output::{self, Refused};
use crate::reach::ReachArgs;
use crate::services::OutputFormat;
use anyhow::Result;
use clap::Args;
use hcp_workflows::config::{self, ClusterConfig};
use hcp_workflows::delete_cluster::DeleteOptions;
use hcp_workflows::layout::Layout;
use hcp_workflows::plan;
use std::collections::HashMap;
use std::path::PathBuf;

/// `plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The workflow whose steps to show.
    #[arg(value_enum)]
    workflow: Workflow,
    /// The cluster file.
    #[arg(long)]
    config: PathBuf,
    /// delete-cluster: include persistent resources.
    #[arg(long)]
    purge_persistent: bool,
    /// delete-cluster: without the guest's cloud cleanup (see `start --help`).
    #[arg(long)]
    skip_cloud_cleanup: bool,
    /// The failure policy to plan with (see `start --help`).
    #[arg(long, value_name = "unwind|pause[=DURATION]")]
    on_failure: Option<String>,
}

/// `plan`: print the steps and the undo plan; touches nothing (not even the journal,
/// unless a delete needs the infra id a create run recorded).
pub async fn plan(db: &str, reach_args: &ReachArgs, out: OutputFormat, a: PlanArgs) -> Result<u8> {
    let cfg = load_config(&a.config)?;
    let def = a.workflow.def();
    let policy = failure_policy(a.workflow, a.on_failure.as_deref(), &cfg)?;
    // What the journal knows (like `terraform plan` against its state): never creates a
    // journal to find out. A workflow that follows a create needs its infra id, so a
    // journal that cannot be read is an error there.
    let needs_journal = def.follows_create && cfg.infra_id.is_none();
    let store = match crate::services::open_existing_store(db).await {
        Ok(st) => Some(st),
        Err(e) if needs_journal && !e.is::<crate::services::store::NoJournal>() => return Err(e),
        Err(_) => None,
    };
    let standing = match &store {
        Some(st) => match crate::standing::of_file(st, &cfg, def).await {
            Ok(s) => s,
            Err(e) if needs_journal => return Err(e),
            Err(_) => crate::standing::Standing::absent(&cfg.name),
        },
        None => crate::standing::Standing::absent(&cfg.name),
    };
    let infra = match cfg.infra_id.as_ref().or(standing.state.infra_id.as_ref()) {
        Some(i) => i.clone(),
        None if !def.follows_create => format!("{}-<generated>", cfg.name),
        None => {
            return Err(Refused::input(format!(
                "infraID: not set in {} and no create-cluster run of `{}` in the journal; set infraID",
                a.config.display(),
                cfg.name
            )));
        }
    };
    if cfg.topology.uses_private_link()
        && cfg.private_link.managed_by == config::PrivateLinkManager::Auto
    {
        eprintln!(
            "note: privateLink.managedBy: auto is resolved when the run starts (from the args of Deployment hypershift/operator); this plan shows hcp-workflow's own private link stages — set managedBy: hypershift to see HyperShift's"
        );
    }
    let doc = hcp_workflows::applied::document(&cfg);
    // The workflow's own admission: `plan` refuses only what leaves nothing to plan (no
    // cluster), and shows the rest (a refused update, a file that differs) below.
    let admission = (def.admit)(&hcp_workflows::workflow::Admit {
        cfg: &cfg,
        state: &standing.state,
        applied: standing.applied.as_ref(),
        file: def.applies_config.then_some(&doc),
    });
    if matches!(admission, hcp_workflows::workflow::Admission::NoCluster) {
        return Err(no_cluster(
            &standing,
            &a.config,
            db,
            crate::target::of_args(reach_args).as_deref(),
            def,
        ));
    }
    let last = standing
        .applied_run()
        .filter(|_| def.applies_config)
        .map(|(run, applied)| (run, applied.clone()));
    let update = if def.updates {
        last.as_ref()
            .map(|(_, applied)| hcp_workflows::update_cluster::classify(applied, &doc))
    } else {
        None
    };
    let simulated = reach_args.simulate || reach_args.simulator.is_some();
    let layout = Layout::new(&cfg, &infra, simulated);
    let mut dag = build(
        a.workflow,
        &cfg,
        &layout,
        DeleteOptions {
            purge_persistent: a.purge_persistent,
            skip_cloud_cleanup: a.skip_cloud_cleanup,
        },
        last.as_ref()
            .map(|(_, applied)| applied)
            .filter(|_| def.updates),
    )?;
    dag.on_failure = policy;
    let consequences = match &update {
        Some(u) => Some(u.consequences(&cfg.name, &dag)),
        None if def.applies_config && def.follows_create => {
            Some(hcp_workflows::update_cluster::Consequences::of_dag(&dag))
        }
        None => None,
    };
    let mut p = plan::plan(&dag);
    p.cluster = Some(cfg.name.clone());
    p.infra_id = Some(infra.clone());
    let known = match &store {
        Some(st) => known_resources(st, &cfg.name).await.unwrap_or_default(),
        None => HashMap::new(),
    };
    // What the file would change on the cluster as its last create (or update) left it.
    let drift = last
        .as_ref()
        .map(|(run, applied)| (*run, hcp_workflows::applied::diff(applied, &doc)));
    match out {
        OutputFormat::Json => {
            let mut v = serde_json::to_value(&p)?;
            v["existing"] = serde_json::to_value(&known)?;
            if let Some((run, changes)) = &drift {
                v["applied_by_run"] = serde_json::to_value(run)?;
                v["differences"] = serde_json::to_value(changes)?;
            }
            if let Some(c) = &consequences {
                v["consequences"] = serde_json::to_value(c)?;
                v["summary"] = serde_json::Value::String(c.summary());
            }
            if let Some(u) = &update {
                v["refused"] = serde_json::to_value(&u.refused)?;
                v["nothing_to_change"] = serde_json::Value::Bool(u.is_empty());
            }
            output::document("Plan", &v);
        }
        OutputFormat::Text => {
            if let (Some(u), Some((run, _))) = (&update, &drift) {
                print_update_plan(u, *run, &cfg);
                if u.is_empty() || !u.refused.is_empty() {
                    return Ok(0);
                }
                println!();
            }
            let lookup = |r: &str| known.get(&r.to_ascii_lowercase()).cloned();
            print!("{}", p.render_with(&lookup));
            if let Some(c) = consequences.as_ref().filter(|c| !c.harmless()) {
                println!(
                    "\n`start {}` deletes, replaces or cannot undo this, and asks first (or needs --yes):\n{}",
                    def.name,
                    c.render()
                );
            }
            if !known.is_empty() && !def.updates {
                println!(
                    "\n{} of these resources exist already (journal {}); their steps adopt them.",
                    known.len(),
                    crate::services::store::shown_url(db)
                );
            }
            match (&drift, &def.on_existing) {
                _ if def.updates => {}
                (Some((run, changes)), Some(words)) if !changes.is_empty() => {
                    println!(
                        "\nThe cluster exists (made by run {}) and differs from this file in {} place{}:",
                        crate::runref::short(&run.to_string()),
                        changes.len(),
                        if changes.len() == 1 { "" } else { "s" }
                    );
                    for c in changes {
                        println!("  {c}");
                    }
                    println!(
                        "`start {}` refuses this: {}. To change the cluster: {}",
                        def.name,
                        words.refuses,
                        crate::target::command(
                            None,
                            &format!("plan update-cluster --config {}", a.config.display())
                        )
                    );
                }
                (Some((run, _)), Some(words)) => println!(
                    "\nThe cluster exists (made by run {}) exactly as this file says: {}.",
                    crate::runref::short(&run.to_string()),
                    words.same
                ),
                _ => {}
            }
        }
    }
    Ok(0)
}

/// `plan update-cluster`'s head: every change, what is refused and why.
pub(crate) fn print_update_plan(
    u: &hcp_workflows::update_cluster::UpdatePlan,
    run: hcp_runtime::RunId,
    cfg: &ClusterConfig,
) {
    let run = run.to_string();
    let short = crate::runref::short(&run);
    if u.is_empty() {
        println!(
            "Nothing to change: cluster {} is as this file says (applied by run {short}).",
            cfg.name
        );
        return;
    }
    println!(
        "Cluster {} (applied by run {short}) differs from this file in {} place{}:",
        cfg.name,
        u.changes.len(),
        if u.changes.len() == 1 { "" } else { "s" }
    );
    for c in &u.changes {
        let refused = u.refused.iter().any(|r| r.path == c.path);
        println!("  {} {c}", if refused { "✗" } else { "~" });
    }
    if !u.refused.is_empty() {
        println!(
            "\n`start update-cluster` refuses this file (exit 2): {} change{} cannot be made in place:",
            u.refused.len(),
            if u.refused.len() == 1 { "" } else { "s" }
        );
        for r in &u.refused {
            println!("  {}: {}\n    fix: {}", r.path, r.why, r.fix);
        }
    }
}
