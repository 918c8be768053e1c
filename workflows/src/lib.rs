//! # hcp-workflows: the create-cluster and delete-cluster sagas
//!
//! - [`config`]: the cluster YAML file, its JSON Schema and its validation.
//! - [`layout`]: every name and id derived from a config and infra id.
//! - [`create_cluster`], [`delete_cluster`]: the DAGs (one file per workflow, like omicron's
//!   sagas), built from a validated config and persisted with each run.
//! - [`cluster_state`]: what a cluster is now (exists, partially deleted, deleted…), read
//!   from its runs by one rule.
//! - [`plan`]: what a DAG will create and how it would unwind, touching nothing.
//! - [`workflow`]: each workflow as one self-describing unit ([`workflow::WorkflowDef`]):
//!   what `start`, `plan`, `preflight` and `drive` use instead of knowing workflows by name.
//! - [`registry`]: every action a worker must know to run or recover these workflows.

pub mod applied;
pub mod budgets;
pub mod cluster_state;
pub mod config;
pub mod create_cluster;
pub mod delete_cluster;
pub mod layout;
pub mod plan;
pub mod repair_cluster;
pub mod update_cluster;
pub mod verify;
pub mod workflow;

use hcp_activities::steps::Clients;
use hcp_runtime::{Registry, RegistryError};
use std::sync::Arc;

/// Register the cluster actions on `r` (a worker also registers the self-test actions).
///
/// # Errors
/// A duplicate action name.
pub fn register(r: &mut Registry, clients: &Arc<Clients>) -> Result<(), RegistryError> {
    hcp_activities::steps::register(r, clients)
}
