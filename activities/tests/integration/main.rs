//! The activities' integration tests against the in-process simulator: one test binary, a
//! module per area. The ARM budget tests stay binaries of their own: they set the
//! process-wide budget.

#[macro_use]
#[path = "../azure_support/mod.rs"]
mod azure_support;
mod aro_identity;
mod azure_arm;
mod azure_clients;
mod azure_models;
mod crd_validation;
mod kube_mgmt;
mod kube_target;
mod oidc;
mod undo_ownership;
