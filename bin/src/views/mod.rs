//! The operator inspector on the command line: `list`, `show`, `history`, `why`, `watch` and
//! `inventory`.
//!
//! Every view is read-only over the journal: it loads stored records, folds them with the
//! engine's own state machine ([`model`]), and renders the result as text ([`text`]) or
//! JSON (the model serialized as is). The web UI (`crate::ui`) renders the very same model
//! as HTML, so the CLI and the browser never disagree about a run.
//!
//! Relative times (ages, durations, "… ago") are computed against one `now`, taken once per
//! command; the hidden `--now RFC3339` option fixes it, which is how the golden tests in
//! `bin/tests/views.rs` get byte-stable output from a journal with fixed timestamps.

pub mod model;
pub mod text;

use crate::output::{self, Refused};
use crate::services::OutputFormat;
use anyhow::{Context, Result, bail};
use clap::Args;
use futures::StreamExt;
use hcp_runtime::{JournalStore, RunFilter, RunId, RunState, Timestamp};
use std::sync::Arc;

/// `--now`: render relative times as of this instant.
#[derive(Args, Debug, Clone, Default)]
pub struct NowArg {
    /// Render relative times as of this RFC 3339 instant (reproducible output).
    #[arg(long, hide = true)]
    now: Option<String>,
}

impl NowArg {
    fn get(&self) -> Result<Timestamp> {
        match &self.now {
            None => Ok(crate::services::clock().now()),
            Some(s) => parse_instant(s).with_context(|| format!("--now {s}")),
        }
    }
}

fn parse_instant(s: &str) -> Result<Timestamp> {
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| anyhow::anyhow!("not an RFC 3339 time (e.g. 2025-06-01T12:00:00Z): {e}"))?;
    let ms = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| anyhow::anyhow!("before 1970"))?
        .as_millis();
    Ok(Timestamp(i64::try_from(ms).unwrap_or(i64::MAX)))
}

/// `--since`: a duration back from now (`30m`, `2h`, `7d`) or an RFC 3339 instant.
pub fn parse_since(s: &str, now: Timestamp) -> Result<Timestamp> {
    if let Ok(d) = humantime::parse_duration(s) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        return Ok(Timestamp(now.0.saturating_sub(ms)));
    }
    parse_instant(s).map_err(|_| {
        anyhow::anyhow!("--since {s}: use a duration such as 30m, 2h or 7d, or an RFC 3339 time")
    })
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only runs in these states (e.g. `needs-operator`); repeatable.
    #[arg(long, add = crate::complete::states())]
    state: Vec<String>,
    /// Only this workflow.
    #[arg(long)]
    workflow: Option<String>,
    /// Only runs of this cluster (the run's `cluster` label).
    #[arg(long, add = crate::complete::clusters())]
    cluster: Option<String>,
    /// Only runs created since: a duration back from now (`30m`, `2h`, `7d`) or an RFC 3339 time.
    #[arg(long)]
    since: Option<String>,
    #[command(flatten)]
    now: NowArg,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Run: its id, a unique prefix or suffix of it, or `cluster/<name>` (latest run).
    #[arg(add = crate::complete::runs())]
    run: String,
    #[command(flatten)]
    now: NowArg,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// Run: its id, a unique prefix or suffix of it, or `cluster/<name>` (latest run).
    #[arg(add = crate::complete::runs())]
    run: String,
    /// Only this step's events.
    #[arg(long)]
    step: Option<String>,
    /// Only failures (failed attempts, permanent failures, undos that gave up).
    #[arg(long)]
    failed: bool,
}

#[derive(Args, Debug)]
pub struct InventoryArgs {
    /// Only this cluster.
    #[arg(long, add = crate::complete::clusters())]
    pub(crate) cluster: Option<String>,
    /// Only resources created by runs that ended without success and deleted by no later run.
    #[arg(long)]
    pub(crate) orphans: bool,
    /// With `--orphans`: ask Azure, not the journal. For every deleted cluster, list what is
    /// still tagged with its name and infra id anywhere in its subscriptions (read-only;
    /// exit 3 when something is left).
    #[arg(long, requires = "orphans")]
    pub(crate) live: bool,
}

/// Parse `--state` values; `Err` carries the message for exit code 2.
fn parse_states(v: &[String]) -> Result<Vec<RunState>, String> {
    v.iter()
        .map(|s| {
            RunState::parse(s).ok_or_else(|| {
                let all: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
                format!(
                    "--state {s}: unknown state{}; use one of {}",
                    crate::runref::did_you_mean(s, &all),
                    all.join(", ")
                )
            })
        })
        .collect()
}

/// List rows for `filter`, with the stage of each active run's current step (loaded from
/// its DAG, a few runs at a time).
pub async fn rows(
    store: &Arc<dyn JournalStore>,
    filter: &RunFilter,
    now: Timestamp,
) -> Result<Vec<model::RunRow>> {
    let runs = store.list_runs(filter).await?;
    let rows = futures::stream::iter(runs)
        .map(|s| {
            let store = store.clone();
            async move {
                let stage = match &s.current_step {
                    Some(step) if !s.state.is_terminal() => store
                        .load_run(s.id)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|r| model::stage_of(&r.dag, step)),
                    _ => None,
                };
                model::run_row(&s, stage, now)
            }
        })
        .buffered(8)
        .collect::<Vec<_>>()
        .await;
    Ok(rows)
}

pub async fn list(db: &str, out: OutputFormat, a: ListArgs) -> Result<u8> {
    let states = parse_states(&a.state).map_err(Refused::input)?;
    let now = a.now.get().map_err(|e| Refused::input(format!("{e:#}")))?;
    let since = a
        .since
        .as_deref()
        .map(|s| parse_since(s, now))
        .transpose()
        .map_err(|e| Refused::input(e.to_string()))?;
    let store = crate::services::open_existing_store_read_only(db).await?;
    let filter = RunFilter {
        states,
        workflow: a.workflow,
        label: a.cluster.map(|c| ("cluster".to_string(), c)),
        since,
        ..Default::default()
    };
    let rows = rows(&store, &filter, now).await?;
    match out {
        OutputFormat::Json => output::list("RunList", &rows),
        OutputFormat::Text => print!("{}", text::list(&rows)),
    }
    Ok(0)
}

/// A bad RUN reference: printed by `main` with exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadRunRef(pub crate::runref::RefError);

/// The run `reference` names (see [`crate::runref`]); a bad reference is a [`BadRunRef`].
pub async fn resolve(store: &Arc<dyn JournalStore>, reference: &str, db: &str) -> Result<RunId> {
    crate::runref::resolve(store, reference, &crate::services::store::shown_url(db))
        .await
        .map_err(|e| match e {
            // Not the reference's fault: exit 1 like any other journal failure.
            crate::runref::RefError::Store(_) => anyhow::Error::new(e),
            e => BadRunRef(e).into(),
        })
}

async fn load(db: &str, run: &str) -> Result<hcp_runtime::store::RunRecord> {
    let store = crate::services::open_existing_store_read_only(db).await?;
    let run = resolve(&store, run, db).await?;
    match store.load_run(run).await? {
        Some(r) => Ok(r),
        None => bail!(
            "run {run} not found in {}",
            crate::services::store::shown_url(db)
        ),
    }
}

pub async fn show(db: &str, out: OutputFormat, a: ShowArgs) -> Result<u8> {
    let now = a.now.get().map_err(|e| Refused::input(format!("{e:#}")))?;
    let rec = load(db, &a.run).await?;
    let d = model::detail(&rec, now);
    match out {
        OutputFormat::Json => output::document("Run", &d),
        OutputFormat::Text => print!("{}", text::show(&d)),
    }
    Ok(0)
}

pub async fn history(db: &str, out: OutputFormat, a: HistoryArgs) -> Result<u8> {
    let rec = load(db, &a.run).await?;
    let step = match &a.step {
        Some(given) => {
            let names = model::step_names(&rec.dag);
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            Some(
                crate::runref::resolve_step(given, &refs)
                    .map_err(Refused::input)?
                    .to_string(),
            )
        }
        None => None,
    };
    let rows = model::history(&rec, step.as_deref(), a.failed);
    // A cluster's run: when the cluster was last verified, and what drifted.
    let verified = match rec.summary.labels.get("cluster") {
        Some(name) => {
            let store = crate::services::open_existing_store_read_only(db).await?;
            latest_verifies(&store, Some(name))
                .await
                .remove(name)
                .map(|v| (name.clone(), v))
        }
        None => None,
    };
    match out {
        OutputFormat::Json => output::document(
            "RunHistory",
            &serde_json::json!({
                "run_id": rec.summary.id.to_string(),
                "short_id": crate::runref::short(&rec.summary.id.to_string()),
                "items": rows,
                "cluster_verified": verified.as_ref().map(|(_, v)| v),
            }),
        ),
        OutputFormat::Text => {
            print!("{}", text::history(&rows));
            if let Some((name, v)) = &verified {
                print!("{}", text::verified(name, v));
            }
        }
    }
    Ok(0)
}

pub async fn why(db: &str, out: OutputFormat, a: ShowArgs) -> Result<u8> {
    let now = a.now.get().map_err(|e| Refused::input(format!("{e:#}")))?;
    let rec = load(db, &a.run).await?;
    let d = model::detail(&rec, now);
    // `cluster/<name>`: about the cluster first (is it up? by which run?), then about its
    // latest run.
    let cluster = match a.run.strip_prefix("cluster/") {
        Some(_) => match rec.summary.labels.get("cluster") {
            Some(name) => {
                let store = crate::services::open_existing_store_read_only(db).await?;
                let runs = folded_runs(&store, Some(name.clone())).await?;
                model::clusters(&runs).into_iter().next()
            }
            None => None,
        },
        None => None,
    };
    let text = match &cluster {
        Some(c) => format!("{} {}", model::cluster_sentence(c), d.why.text),
        None => d.why.text.clone(),
    };
    match out {
        OutputFormat::Json => output::document(
            "Why",
            &serde_json::json!({
                "run_id": d.id, "short_id": d.short_id, "state": d.state,
                "blocked_on": d.blocked_on, "step": d.step, "failure": d.failure,
                "why": text, "actions": d.why.actions, "cluster": cluster,
            }),
        ),
        OutputFormat::Text => println!("{text}"),
    }
    Ok(0)
}

#[derive(Args, Debug)]
pub struct ClustersArgs {
    /// Only this cluster.
    #[arg(long, add = crate::complete::clusters())]
    cluster: Option<String>,
}

/// Every run of `cluster` (or of all clusters), oldest first, folded; a run this binary
/// cannot read is left out with a warning.
pub async fn folded_runs(
    store: &Arc<dyn JournalStore>,
    cluster: Option<String>,
) -> Result<Vec<(hcp_runtime::RunSummary, model::Folded)>> {
    let filter = RunFilter {
        label: cluster.map(|c| ("cluster".to_string(), c)),
        ..Default::default()
    };
    let mut summaries = store.list_runs(&filter).await?;
    // Oldest first, so ledger entries with equal times resolve in run order.
    summaries.reverse();
    let mut runs = Vec::new();
    for s in summaries {
        let Some(rec) = store.load_run(s.id).await? else {
            continue;
        };
        match model::fold(&rec) {
            Ok(f) => runs.push((rec.summary, f)),
            Err(reason) => eprintln!("warning: run {} is left out: {reason}", s.id),
        }
    }
    Ok(runs)
}

/// `clusters`: each cluster's own state (exists, deleted, partial, absent), the run it
/// exists by, and its latest run with that run's outcome.
/// Each cluster's newest recorded verify, by cluster name. A journal that keeps no reports
/// (read-only, from before schema v3) has none.
pub async fn latest_verifies(
    store: &Arc<dyn JournalStore>,
    cluster: Option<&str>,
) -> std::collections::HashMap<String, model::Verified> {
    let filter = hcp_runtime::ReportFilter {
        kind: crate::services::reports::VERIFY.into(),
        subject: cluster.map(crate::services::reports::cluster_subject),
        latest_only: true,
        limit: 0,
    };
    match store.list_reports(&filter).await {
        Ok(reports) => reports
            .iter()
            .filter_map(|r| {
                let name = r.subject.strip_prefix("cluster/")?;
                Some((name.to_string(), model::verified(r)?))
            })
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "no verify reports to read");
            std::collections::HashMap::new()
        }
    }
}

pub async fn clusters(db: &str, out: OutputFormat, a: ClustersArgs) -> Result<u8> {
    let store = crate::services::open_existing_store_read_only(db).await?;
    let verified = latest_verifies(&store, a.cluster.as_deref()).await;
    let runs = folded_runs(&store, a.cluster).await?;
    let mut rows = model::clusters(&runs);
    model::attach_verified(&mut rows, &verified);
    match out {
        OutputFormat::Json => output::list("ClusterList", &rows),
        OutputFormat::Text => print!("{}", text::clusters(&rows)),
    }
    Ok(0)
}

pub async fn inventory(db: &str, out: OutputFormat, a: InventoryArgs) -> Result<u8> {
    let store = crate::services::open_existing_store_read_only(db).await?;
    let runs = folded_runs(&store, a.cluster).await?;
    let rows = model::inventory(&runs, a.orphans);
    match out {
        OutputFormat::Json => output::list("Inventory", &rows),
        OutputFormat::Text => print!("{}", text::inventory(&rows, a.orphans)),
    }
    Ok(0)
}
