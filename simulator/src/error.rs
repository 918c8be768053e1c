//! Errors of the simulator's public API (start-up, persistence, configuration).
//!
//! Protocol errors (an ARM 409, a Kubernetes 422, ...) are not Rust errors: they are
//! responses the simulator deliberately sends, built in the per-surface modules.

use std::path::PathBuf;

/// What can go wrong starting, persisting or serving the simulator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `--state` file exists but could not be read.
    #[error("cannot read state file {path}")]
    ReadState {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `--state` file is not a state this simulator wrote.
    #[error("state file {path} is not valid simulator state")]
    ParseState {
        /// The state file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// Writing the `--state` file (temp file + rename) failed.
    #[error("cannot write state file {path}")]
    WriteState {
        /// The state file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A CRD in `--crds DIR` could not be read or understood.
    #[error("cannot load CRD {path}: {message}")]
    Crd {
        /// The CRD file.
        path: PathBuf,
        /// What was wrong with it.
        message: String,
    },
    /// The configuration is inconsistent (e.g. a non-positive time scale).
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    /// Binding or serving the listener failed.
    #[error("serving failed")]
    Serve(#[source] std::io::Error),
}
