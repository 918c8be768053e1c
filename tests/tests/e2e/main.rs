//! The end-to-end tests: one test binary whose modules each drive the real `hcp-workflow`
//! binary, simulators, PostgreSQL, tmux, Chromium and the official clients as processes
//! (one binary links once, where one per file linked the test support 45 times).
//!
//! Run one module: `cargo test -p hcp-e2e-tests --test e2e -- team_service::`.

mod arm_budget;
mod aro_hcp;
mod audit;
mod cluster;
mod cluster_config;
mod cluster_crash;
mod completion;
mod containers;
mod crash;
mod deploy_manifests;
mod desired_state;
mod exit_codes;
mod failure_policy;
mod follower;
mod hostile_answers;
mod hostile_input;
mod identity_chain;
mod journal_files;
mod kubeconfig;
mod multi_worker;
mod no_silent_hangs;
mod notify;
mod official_clients;
mod operator_ux;
mod oracle;
mod ownership;
mod preflight;
mod private_link_modes;
mod release_and_pools_on_4_22;
mod reliability;
mod repair_cluster;
mod resolved_inventory;
mod safety;
mod shared_and_cleanup;
mod team_service;
mod terminal;
mod topology;
mod truthful_outcomes;
mod ui_hosts;
mod update_cluster;
mod update_cluster_saga;
mod update_confirmation;
mod update_topology;
mod verify;
mod verify_schedule;
