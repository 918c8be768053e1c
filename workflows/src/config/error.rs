//! Errors of the cluster file: every problem found, each with the field path it concerns.
//!
//! Why a list: fixing a config file one error per run is slow, so validation collects every
//! problem ([`ConfigErrors`]); each line names the field (`nodePools[1].replicas: must be ≥ 0
//! (got -1)`) and a stable `rule` that tests and tools can match. Errors in the file's shape
//! (wrong type, unknown key or value, missing key) also name the line and column of the node
//! (`nodePools[0].replicas (line 13, column 15): …`). Configuration errors are
//! permanent: retrying cannot fix a file. [`FileError`] is what reading a referenced file at
//! use time can produce.

use serde::Serialize;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// One problem in a cluster file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigError {
    /// Field path, e.g. `nodePools[1].replicas`; empty for the whole file.
    pub path: String,
    /// Stable rule id, e.g. `uuid`, `unknown-field`, `subnet-within-vnet`.
    pub rule: String,
    /// What is wrong and, where known, how to fix it.
    pub message: String,
    /// 1-based line of the offending node in the file, when known (errors found while
    /// reading the file's shape: wrong types, unknown keys and values, missing keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// 1-based column of the offending node, with `line`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl ConfigError {
    pub(crate) fn new(
        path: impl Into<String>,
        rule: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.into(),
            rule: rule.into(),
            message: message.into(),
            line: None,
            column: None,
        }
    }

    /// The same error, at `line`:`column` of the file (1-based).
    pub(crate) fn at(mut self, position: Option<(usize, usize)>) -> Self {
        if let Some((line, column)) = position {
            self.line = Some(line);
            self.column = Some(column);
        }
        self
    }
}

impl fmt::Display for ConfigError {
    /// `path (line L, column C): message`; each part only when known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = match (self.line, self.column) {
            (Some(l), Some(c)) => Some(format!("line {l}, column {c}")),
            _ => None,
        };
        match (self.path.is_empty(), at) {
            (true, None) => f.write_str(&self.message),
            (false, None) => write!(f, "{}: {}", self.path, self.message),
            (true, Some(at)) => write!(f, "{at}: {}", self.message),
            (false, Some(at)) => write!(f, "{} ({at}): {}", self.path, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a cluster file, in field order (never empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(transparent)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    pub(crate) fn one(
        path: impl Into<String>,
        rule: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self(vec![ConfigError::new(path, rule, message)])
    }

    /// The problems.
    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }

    /// Always `false`: a configuration error needs an edited file, not another attempt.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

impl fmt::Display for ConfigErrors {
    /// One problem per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Reading a file the cluster file refers to (pull secret, SSH key, workload identities).
///
/// Messages name the file and the problem, never the file's content.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file does not exist.
    #[error("file {} not found", path.display())]
    NotFound {
        /// Resolved path.
        path: PathBuf,
    },
    /// The file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// Resolved path.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: io::Error,
    },
    /// The file was read but its content is not what it must be.
    #[error("{}: {reason}", path.display())]
    Invalid {
        /// Resolved path.
        path: PathBuf,
        /// What is wrong (never the content itself).
        reason: String,
    },
}

impl FileError {
    /// Only an interrupted or timed-out read (e.g. a network file system) may succeed when
    /// tried again; a missing or malformed file needs a human.
    pub fn is_retryable(&self) -> bool {
        match self {
            FileError::Io { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            ),
            FileError::NotFound { .. } | FileError::Invalid { .. } => false,
        }
    }
}
