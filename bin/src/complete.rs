//! Shell completion with values (clap_complete's dynamic engine): the shell calls the
//! binary itself (`COMPLETE=bash hcp-workflow -- <words>`) at each Tab, so besides
//! subcommands and flags it completes `--state` values, run ids and `cluster/<name>` from
//! the journal the words name (`--database`, else `HCP_WORKFLOW_DATABASE_URL`, the config
//! file's `database:`, else the default), read only.
//!
//! A completion must never hang the shell or touch the journal: a journal that does not
//! exist, is not migrated, or does not answer within a second gives no candidates, and
//! nothing is printed but the candidates.

use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use hcp_runtime::{RunFilter, RunState};
use std::time::Duration;

/// The environment variable the shell's registration sets for a completion request.
pub const VAR: &str = "COMPLETE";

/// `--state`: every run state, with what it means.
pub fn states() -> ArgValueCandidates {
    ArgValueCandidates::new(|| {
        RunState::ALL
            .iter()
            .map(|s| CompletionCandidate::new(s.as_str()))
            .collect::<Vec<_>>()
    })
}

/// A run argument: the journal's run ids (newest first, with their workflow, cluster and
/// state as help) and `cluster/<name>` of each cluster.
pub fn runs() -> ArgValueCandidates {
    ArgValueCandidates::new(|| {
        let runs = journal_runs();
        let mut out: Vec<CompletionCandidate> = clusters_of(&runs)
            .into_iter()
            .map(|c| {
                CompletionCandidate::new(format!("cluster/{c}"))
                    .help(Some(format!("the latest run of cluster {c}").into()))
            })
            .collect();
        out.extend(runs.iter().map(|r| {
            CompletionCandidate::new(r.id.to_string()).help(Some(
                format!(
                    "{} {}{}",
                    r.workflow,
                    r.state.as_str(),
                    r.labels
                        .get("cluster")
                        .map(|c| format!(", cluster {c}"))
                        .unwrap_or_default()
                )
                .into(),
            ))
        }));
        out
    })
}

/// `--cluster NAME`: the journal's cluster names.
pub fn clusters() -> ArgValueCandidates {
    ArgValueCandidates::new(|| {
        clusters_of(&journal_runs())
            .into_iter()
            .map(CompletionCandidate::new)
            .collect::<Vec<_>>()
    })
}

fn clusters_of(runs: &[hcp_runtime::RunSummary]) -> Vec<String> {
    let mut names: Vec<String> = runs
        .iter()
        .filter_map(|r| r.labels.get("cluster").cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The journal the words being completed name: `--database URL` (or `--database=URL`)
/// among them, else the environment, the config file, or the default.
fn database() -> String {
    let words: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    let given = words.iter().enumerate().find_map(|(i, w)| {
        w.strip_prefix("--database=")
            .map(str::to_string)
            .or_else(|| {
                (w == "--database")
                    .then(|| words.get(i + 1).cloned())
                    .flatten()
            })
    });
    given
        .filter(|d| !d.is_empty())
        .or_else(|| {
            std::env::var("HCP_WORKFLOW_DATABASE_URL")
                .ok()
                .filter(|d| !d.is_empty())
        })
        .or_else(|| {
            crate::defaults::load()
                .ok()
                .flatten()
                .and_then(|d| d.database)
        })
        .unwrap_or_else(|| crate::services::store::DEFAULT_DATABASE.to_string())
}

/// Every run of that journal, newest first; none when it cannot be read at once.
fn journal_runs() -> Vec<hcp_runtime::RunSummary> {
    let db = database();
    if db == "memory:" || crate::services::store::missing_sqlite_file(&db).is_some() {
        return Vec::new();
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    rt.block_on(async {
        let read = async {
            if !hcp_persistence::is_migrated(&db).await.ok()? {
                return None;
            }
            // Never upgrade a journal from a Tab: a schema this binary does not use is
            // left alone (and completes nothing).
            crate::services::schema::gate(&db).await.ok()?;
            let (store, _) = hcp_persistence::open_for_reading(&db).await.ok()?;
            store.list_runs(&RunFilter::default()).await.ok()
        };
        tokio::time::timeout(Duration::from_secs(1), read)
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    })
}
