//! Schema and code compatibility: `migrate`, `compat`, and the rule every
//! other command opens a journal by.
//!
//! # When a journal's schema changes
//! - **`migrate` creates and upgrades it, and nothing else does**, with one exception: a
//!   SQLite journal that does not exist yet (or holds no hcp-workflow schema) is created by
//!   the first command that writes to it (`start`, `selftest`, `worker`, an operator
//!   command), so the quick start needs no extra step. A Postgres database is the team's:
//!   only `migrate` (a deployment's migrate Job, directly against the server, never through
//!   a pooler) creates or upgrades its schema.
//! - Every other command refuses (exit 2, naming both versions and what to run) a journal
//!   whose schema is older than this binary's (`migrate` upgrades it; workers of the older
//!   binary keep running on it: migrations only add) or newer (a newer binary migrated it).
//! - `bench` makes its own scratch journals: it migrates like `migrate`.
//!
//! `compat` lists the unfinished runs whose persisted DAG names an action this binary does
//! not know, before its workers replace the running ones (exit 3 if any).

use crate::output::{self, Refused};
use crate::services::OutputFormat;
use crate::services::schema::{allow_migrating, mismatch, pooled, status};
use anyhow::{Context, Result};
use hcp_persistence::SchemaVerdict;

/// The exit code of `compat` when some unfinished run needs an action this binary does not
/// know.
pub const INCOMPATIBLE: u8 = 3;

/// `hcp-workflow migrate`: create or upgrade the schema, saying from which version to which.
pub async fn migrate(url: &str, out: OutputFormat) -> Result<u8> {
    if url == "memory:" {
        return Err(Refused::input(
            "--database memory: keeps nothing, so there is nothing to migrate: give sqlite://PATH or postgres://…",
        ));
    }
    if pooled(url) {
        return Err(Refused::input(
            "--database: migrations run directly against the server, never through a transaction pooler (they hold a session lock the pooler cannot keep): give the server's own URL, without pooler=transaction",
        ));
    }
    let before = status(url).await?;
    let shown = crate::services::store::shown_url(url);
    if before.verdict() == SchemaVerdict::Newer {
        return Err(mismatch(
            format!(
                "the journal at {shown} has schema version {}, newer than this binary knows ({}): nothing was changed; run the newer binary's migrate",
                before.applied.unwrap_or_default(),
                before.latest
            ),
            &before,
        ));
    }
    allow_migrating();
    crate::services::open_store(url).await?;
    let after = status(url).await?;
    let to = after.applied.unwrap_or_default();
    let changed = before.applied != after.applied;
    match out {
        OutputFormat::Json => output::document(
            "Migration",
            &serde_json::json!({
                "database": shown, "backend": after.backend,
                "from": before.applied, "to": to, "changed": changed,
            }),
        ),
        OutputFormat::Text => match before.applied {
            None => println!("created the journal at {shown}: schema version {to}"),
            Some(from) if changed => {
                println!("migrated the journal at {shown} from schema version {from} to {to}")
            }
            Some(_) => println!("the journal at {shown} is up to date: schema version {to}"),
        },
    }
    Ok(0)
}

#[derive(clap::Args, Debug)]
pub struct CompatArgs {}

/// One unfinished run this binary cannot execute.
#[derive(serde::Serialize, Debug)]
struct Incompatible {
    run_id: String,
    short_id: String,
    workflow: String,
    cluster: Option<String>,
    state: hcp_runtime::RunState,
    /// Steps whose action this binary does not know.
    unknown_steps: Vec<UnknownStep>,
    /// Why this binary cannot read the run's journal, if it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    unreadable: Option<String>,
}

#[derive(serde::Serialize, Debug)]
struct UnknownStep {
    step: String,
    action: String,
}

/// The actions a worker of this binary runs (as `worker` registers them).
fn known_actions() -> Result<hcp_runtime::Registry> {
    let scratch = std::env::temp_dir().join("hcp-workflow-compat-unused");
    let mut r = hcp_runtime::testkit::registry(&hcp_runtime::testkit::World::new(scratch));
    let clients = hcp_activities::steps::Clients::new(hcp_activities::steps::Reach::Direct);
    crate::release::register(&mut r, &clients)?;
    Ok(r)
}

/// `hcp-workflow compat`: the unfinished runs this binary's workers could not execute.
/// Exit 0: none; [`INCOMPATIBLE`]: some (listed); 2: no journal, or a schema this binary
/// does not use.
pub async fn compat(url: &str, out: OutputFormat, _a: CompatArgs) -> Result<u8> {
    let store = crate::services::open_existing_store_read_only(url).await?;
    let registry = known_actions()?;
    let st = status(url).await?;
    let runs = store
        .list_runs(&hcp_runtime::RunFilter::default())
        .await
        .context("listing the runs")?;
    let unfinished: Vec<_> = runs
        .into_iter()
        .filter(|r| !r.state.is_terminal())
        .collect();
    let mut bad = Vec::new();
    for s in &unfinished {
        let Some(rec) = store.load_run(s.id).await.context("loading a run")? else {
            continue;
        };
        let mut unknown = Vec::new();
        let mut unreadable = None;
        match serde_json::from_str::<hcp_runtime::SagaDag>(&rec.dag) {
            Ok(dag) => {
                for n in &dag.nodes {
                    if !registry.contains(&n.action) {
                        unknown.push(UnknownStep {
                            step: n.name.clone(),
                            action: n.action.clone(),
                        });
                    }
                }
                if let Err(why) = crate::views::model::fold(&rec) {
                    unreadable = Some(why);
                }
            }
            Err(e) => unreadable = Some(format!("its saga DAG does not decode: {e}")),
        }
        if unknown.is_empty() && unreadable.is_none() {
            continue;
        }
        let id = s.id.to_string();
        bad.push(Incompatible {
            short_id: crate::runref::short(&id).to_string(),
            run_id: id,
            workflow: s.workflow.clone(),
            cluster: s.labels.get("cluster").cloned(),
            state: s.state,
            unknown_steps: unknown,
            unreadable,
        });
    }
    let shown = crate::services::store::shown_url(url);
    match out {
        OutputFormat::Json => output::document(
            "CompatReport",
            &serde_json::json!({
                "database": shown,
                "binary": {"version": crate::services::VERSION, "schema": st.latest},
                "journal": {"backend": st.backend, "schema": st.applied},
                "unfinished_runs": unfinished.len(),
                "compatible": bad.is_empty(),
                "items": bad,
            }),
        ),
        OutputFormat::Text => {
            if bad.is_empty() {
                println!(
                    "compatible: this binary ({}) can execute all {} unfinished run(s) in {shown} (schema version {})",
                    crate::services::VERSION,
                    unfinished.len(),
                    st.latest
                );
            } else {
                println!(
                    "not compatible: {} of {} unfinished run(s) in {shown} name steps this binary ({}) does not know:",
                    bad.len(),
                    unfinished.len(),
                    crate::services::VERSION
                );
                for b in &bad {
                    let steps: Vec<String> = b
                        .unknown_steps
                        .iter()
                        .map(|u| format!("{} (action {})", u.step, u.action))
                        .collect();
                    println!(
                        "  run {} ({}, cluster {}, {}): {}",
                        b.short_id,
                        b.workflow,
                        b.cluster.as_deref().unwrap_or("-"),
                        b.state,
                        b.unreadable.clone().unwrap_or_else(|| steps.join(", "))
                    );
                }
                println!(
                    "a worker of this binary would park them; let workers of the binary that started them finish them first (or cancel them), then run compat again"
                );
            }
        }
    }
    Ok(if bad.is_empty() { 0 } else { INCOMPATIBLE })
}
