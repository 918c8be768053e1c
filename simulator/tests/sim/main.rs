//! The simulator's integration tests: one test binary, a module per area (one binary links
//! the simulator once, where one per file linked it fourteen times).

#![allow(clippy::unwrap_used)]

mod arm;
mod arm_conformance;
mod aro_hcp;
mod common;
mod day2;
mod day2_config;
mod faults;
mod graph_keyvault;
mod guest;
mod kube;
mod kube_conformance;
mod privatelink_controllers;
mod real_clients;
mod reference;
mod state;
