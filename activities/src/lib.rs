//! # hcp-activities: Azure and Kubernetes steps for hcp-workflow
//!
//! Every step the cluster workflows take, as idempotent, classified, journal-friendly
//! activities built on `azure_core`/`azure_identity` (a hand-written ARM client) and
//! kube-rs. Long-running work never sleeps in memory: an Azure operation URL is saved as a
//! step checkpoint and polled through the engine's durable `Wait`.
//!
//! - [`azure`]: clouds, credentials, the ARM client, typed ARM errors and their
//!   classification, durable long-running operations, resource models, names.
//! - [`kube`]: management-cluster client, server-side apply, conditions, deletion.
//! - [`oidc`]: the service-account issuer key and documents.
//! - [`preflight`]: read-only checks of a cluster's prerequisites (`hcp-workflow preflight`).
//! - [`secret`]: a secret wrapper that cannot be serialized or printed.
//! - [`steps`]: the engine [`hcp_runtime::Action`]s the workflows are made of.
//!
//! **Architecture invariant:** nothing here shares request/response types with
//! `hcp-simulator`; the models are written from the real API contracts.

pub mod azure;
pub mod files;
pub mod kube;
pub mod oidc;
pub mod preflight;
pub mod secret;
pub mod steps;
pub mod tls;
pub mod verify;
