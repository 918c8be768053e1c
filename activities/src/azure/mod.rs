//! Azure: clouds, credentials, ARM client, errors, long-running operations, models.
//!
//! Layers, bottom up:
//! - [`cloud`] and [`transport`]: where requests go (Azure or the simulator);
//! - [`credential`]: which identity we act as ([`credential::AuthMode`]);
//! - [`client`]: [`client::ArmClient`], a thin ARM client on an azure_core pipeline with a
//!   short in-memory retry, returning long-running operations as journal-able data;
//! - [`error`]: [`error::ArmError`], classified per DOMAIN.md §6 and convertible into the
//!   engine's `StepError`;
//! - [`durable`]: the engine-facing helpers (`ensure`, `delete`) that own the journal
//!   contract for ARM resources (checkpointed operations, ownership tags);
//! - [`roles`], [`privatelink`], [`storage`]: the operations with Azure quirks of their
//!   own (role assignment GUIDs, private link teardown, listKeys and Shared Key blobs);
//! - [`graph`] and [`keyvault`]: Microsoft Graph (Entra applications and service
//!   principals) and Key Vault (the vault over ARM; certificates and secrets over its
//!   data plane), on the same pipeline, retry and host rules as ARM;
//! - [`models`] and [`names`]: typed resource models with their pinned api-versions, and
//!   every deterministic name of DOMAIN.md §3.

pub mod budget;
pub mod client;
pub mod cloud;
pub mod credential;
pub mod durable;
pub mod error;
pub mod graph;
pub mod keyvault;
pub mod models;
pub mod names;
pub mod privatelink;
mod rest;
pub mod roles;
pub mod storage;
pub mod transport;

pub use client::{
    ArmClient, DeleteResponse, Operation, OperationKind, OperationStatus, PutResponse,
};
pub use cloud::Cloud;
pub use credential::{AuthMode, CredentialError, credential};
pub use error::{ArmError, ArmErrorDetail, ErrorClass, Service, ServiceError};
pub use graph::GraphClient;
pub use keyvault::KeyVaultClient;
pub use transport::Transport;
