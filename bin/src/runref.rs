//! Run references people can type: wherever a command takes a RUN it accepts
//!
//! - the full id (`0199a3b2-7c4e-7f00-8d1e-5b2a9c3f4e10`);
//! - any unique prefix or suffix of it, with or without dashes (`5b2a9c3f4e10`, `4e10`):
//!   every UUIDv7 of one day shares its first 8 characters, so the short form shown by
//!   `list` is the *last* 8 ([`short`]);
//! - `cluster/<name>`: that cluster's latest run (of any workflow).
//!
//! An unknown or ambiguous reference is bad input (exit 2) and names the fix.

use hcp_runtime::{JournalStore, RunFilter, RunId, RunSummary};
use std::sync::Arc;

/// Why a reference names no single run.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    /// Nothing matches.
    #[error(
        "no run matches `{reference}`{where_}: `hcp-workflow list` shows the runs (a RUN is a full id, a unique prefix or suffix of one, or cluster/<name>)"
    )]
    NotFound {
        /// What was typed.
        reference: String,
        /// ` in <journal>`.
        where_: String,
    },
    /// A full run id this journal does not hold.
    #[error("no run {id}{where_}: `hcp-workflow list` shows the runs (is --database right?)")]
    NoSuchRun {
        /// The id.
        id: String,
        /// ` in <journal>`.
        where_: String,
    },
    /// Several runs match.
    #[error("`{reference}` matches {count} runs ({}): type more characters of the id", .candidates.join(", "))]
    Ambiguous {
        /// What was typed.
        reference: String,
        /// How many.
        count: usize,
        /// Up to five of them (full ids).
        candidates: Vec<String>,
    },
    /// Not an id, prefix, suffix or cluster reference.
    #[error(
        "`{0}` is not a run reference: use a run id (or a unique prefix or suffix of one, hex digits and dashes) or cluster/<name>"
    )]
    Malformed(String),
    /// The journal could not be read.
    #[error("reading the journal: {0}")]
    Store(String),
}

/// The short form of a run id shown in lists: its last 8 hex digits (the random part of a
/// UUIDv7; the first 8 are the same for every run of a day).
pub fn short(id: &str) -> &str {
    let n = id.len();
    if n > 8 && id.is_char_boundary(n - 8) {
        &id[n - 8..]
    } else {
        id
    }
}

/// Resolves `reference` against the journal.
///
/// # Errors
/// [`RefError`]: unknown, ambiguous, malformed, or the journal unreadable.
pub async fn resolve(
    store: &Arc<dyn JournalStore>,
    reference: &str,
    journal: &str,
) -> Result<RunId, RefError> {
    let r = reference.trim();
    let not_found = || RefError::NotFound {
        reference: r.to_string(),
        where_: if journal.is_empty() {
            String::new()
        } else {
            format!(" in {journal}")
        },
    };
    if let Ok(id) = r.parse::<RunId>() {
        // A full id must name a run of this journal too (a wrong --database is the usual
        // cause): the same exit 2 as any other reference that matches nothing.
        return match store.load_run(id).await {
            Ok(Some(_)) => Ok(id),
            Ok(None) => Err(RefError::NoSuchRun {
                id: id.to_string(),
                where_: if journal.is_empty() {
                    String::new()
                } else {
                    format!(" in {journal}")
                },
            }),
            Err(e) => Err(RefError::Store(e.to_string())),
        };
    }
    if let Some(cluster) = r.strip_prefix("cluster/") {
        let filter = RunFilter {
            label: Some(("cluster".to_string(), cluster.to_string())),
            limit: 1,
            ..Default::default()
        };
        let runs = store
            .list_runs(&filter)
            .await
            .map_err(|e| RefError::Store(e.to_string()))?;
        return runs.first().map(|s| s.id).ok_or_else(not_found);
    }
    let needle: String = r.chars().filter(|c| *c != '-').collect();
    if needle.is_empty() || !needle.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(RefError::Malformed(r.to_string()));
    }
    let needle = needle.to_ascii_lowercase();
    let runs = store
        .list_runs(&RunFilter::default())
        .await
        .map_err(|e| RefError::Store(e.to_string()))?;
    pick(&runs, &needle, r).ok_or_else(not_found)?
}

fn pick(runs: &[RunSummary], needle: &str, reference: &str) -> Option<Result<RunId, RefError>> {
    let hits: Vec<&RunSummary> = runs
        .iter()
        .filter(|s| {
            let hex: String = s.id.to_string().chars().filter(|c| *c != '-').collect();
            hex.starts_with(needle) || hex.ends_with(needle)
        })
        .collect();
    match hits.as_slice() {
        [] => None,
        [one] => Some(Ok(one.id)),
        many => Some(Err(RefError::Ambiguous {
            reference: reference.to_string(),
            count: many.len(),
            candidates: many.iter().take(5).map(|s| s.id.to_string()).collect(),
        })),
    }
}

/// The unique step of `dag_steps` named `given` or ending in `.given` (`pls.service` for
/// `create-cluster.pls.service`). `Err` is the message for exit 2: no match says "did you
/// mean" with the closest names, several matches list them.
pub fn resolve_step<'a>(given: &str, dag_steps: &[&'a str]) -> Result<&'a str, String> {
    if let Some(exact) = dag_steps.iter().find(|s| **s == given) {
        return Ok(exact);
    }
    let suffix = format!(".{given}");
    let hits: Vec<&'a str> = dag_steps
        .iter()
        .copied()
        .filter(|s| s.ends_with(&suffix))
        .collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => {
            let mut scored: Vec<(usize, &str)> = dag_steps
                .iter()
                .map(|s| (distance(given, tail(s, given)), *s))
                .collect();
            scored.sort();
            let best = scored.first().map(|(d, _)| *d).unwrap_or(usize::MAX);
            let close: Vec<&str> = scored
                .iter()
                .filter(|(d, _)| *d == best && *d * 2 <= given.len())
                .take(3)
                .map(|(_, s)| *s)
                .collect();
            Err(if close.is_empty() {
                format!(
                    "--step {given}: no such step in this run (`hcp-workflow show RUN` lists them)"
                )
            } else {
                format!(
                    "--step {given}: no such step in this run; did you mean {}?",
                    close.join(" or ")
                )
            })
        }
        many => Err(format!(
            "--step {given}: matches {} steps ({}): give more of the name",
            many.len(),
            many.join(", ")
        )),
    }
}

/// The last as many dot-separated segments of `name` as `given` has.
fn tail<'a>(name: &'a str, given: &str) -> &'a str {
    let n = given.split('.').count();
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() <= n {
        return name;
    }
    let skip: usize = parts[..parts.len() - n].iter().map(|p| p.len() + 1).sum();
    &name[skip..]
}

/// Levenshtein distance (for "did you mean").
pub fn distance(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

/// "; did you mean X?" for the value of `all` closest to `given` (ignoring case, and `_` or
/// spaces for `-`), or nothing when none is close.
pub fn did_you_mean(given: &str, all: &[&str]) -> String {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', ' '], "-");
    let g = norm(given);
    let best = all.iter().map(|c| (distance(&g, &norm(c)), *c)).min();
    match best {
        Some((d, c)) if d * 3 <= g.len().max(3) => format!("; did you mean {c}?"),
        _ => String::new(),
    }
}

/// A run's state as the end of a sentence about it: `run … succeeded`, `… rolled back`,
/// `… needs an operator`, `… is running` (never "is succeeded").
pub fn state_phrase(s: hcp_runtime::RunState) -> &'static str {
    use hcp_runtime::RunState as S;
    match s {
        S::Pending => "is pending (no worker has picked it up)",
        S::Running => "is running",
        S::Waiting => "is waiting",
        S::Unwinding => "is unwinding",
        S::Succeeded => "succeeded",
        S::RolledBack => "rolled back",
        S::NeedsOperator => "needs an operator",
        S::Failed => "is parked",
        S::Cancelled => "was cancelled and unwound",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_is_the_last_eight() {
        assert_eq!(short("0199a3b2-7c4e-7f00-8d1e-5b2a9c3f4e10"), "9c3f4e10");
        assert_eq!(short("abc"), "abc");
    }

    #[test]
    fn step_suffix_and_did_you_mean() {
        let steps = [
            "create-cluster.pls.service",
            "create-cluster.pls.ensure",
            "create-cluster.pe.ensure",
        ];
        assert_eq!(
            resolve_step("pls.service", &steps),
            Ok("create-cluster.pls.service")
        );
        assert_eq!(
            resolve_step("create-cluster.pe.ensure", &steps),
            Ok("create-cluster.pe.ensure")
        );
        let e = resolve_step("ensure", &steps).expect_err("ambiguous");
        assert!(e.contains("matches 2 steps"), "{e}");
        let e = resolve_step("pls.servise", &steps).expect_err("misspelt");
        assert!(
            e.contains("did you mean create-cluster.pls.service?"),
            "{e}"
        );
        let e = resolve_step("zzzzzzzzzz", &steps).expect_err("unknown");
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn levenshtein() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "ab"), 2);
    }

    #[test]
    fn did_you_mean_ignores_case_and_underscores() {
        let all = ["needs-operator", "rolled-back", "running"];
        assert_eq!(
            did_you_mean("needs_operator", &all),
            "; did you mean needs-operator?"
        );
        assert_eq!(
            did_you_mean("Rolled_Back", &all),
            "; did you mean rolled-back?"
        );
        assert_eq!(did_you_mean("runing", &all), "; did you mean running?");
        assert_eq!(did_you_mean("zzzzzz", &all), "");
    }
}
