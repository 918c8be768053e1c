//! `drive`: this process executes a run already journaled (another `start --detach` left
//! it, or its worker went away), following it live.

use crate::output::Refused;
use crate::reach::{ReachArgs, reach};
use crate::services::OutputFormat;
use crate::start::refuse_foreign_executor;
use anyhow::Result;
use clap::Args;
use hcp_activities::steps::Clients;

/// `drive`.
#[derive(Args, Debug)]
pub struct DriveArgs {
    /// The run to execute in the foreground (as `start` does), until it ends: its id, a
    /// unique prefix or suffix of it, or `cluster/<name>`.
    #[arg(add = crate::complete::runs())]
    pub run: String,
    #[command(flatten)]
    pub follow: crate::follow::FollowArgs,
}

/// `drive`: execute one existing run in the foreground until it ends, as `start` does.
pub async fn drive(
    db: &str,
    reach_args: &ReachArgs,
    out: OutputFormat,
    a: DriveArgs,
) -> Result<u8> {
    let store = crate::services::open_existing_store(db).await?;
    let run = crate::views::resolve(&store, &a.run, db).await?;
    let Some(rec) = store.load_run(run).await? else {
        return Err(Refused::refused(format!(
            "no run {run} in {}",
            crate::services::store::shown_url(db)
        )));
    };
    let run_target = rec.summary.target.clone();
    let served = crate::target::served(reach_args);
    if let Some(t) = &run_target
        && !served.contains(t)
    {
        return Err(Refused::refused(format!(
            "run {} targets {}, and this process reaches {}; drive it with: {}",
            run,
            crate::target::describe(Some(t)),
            crate::target::describe(served.first().map(String::as_str)),
            crate::target::command(Some(t), &format!("drive {}", run))
        )));
    }
    if let Some(t) = &run_target {
        refuse_foreign_executor(&store, t, "nothing was done").await?;
    }
    let (reach, _sim) = reach(reach_args, db).await?;
    let clients = Clients::new(reach);
    let e = crate::services::engine::cluster_engine(store, &clients, Some(served))?;
    crate::follow::drive(&e, run, run_target.as_deref(), out, a.follow).await
}
