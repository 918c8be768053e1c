//! The cluster configuration file: one YAML document describing one hosted cluster.
//!
//! Why it is loaded in two passes: serde turns YAML into [`ClusterConfig`] (syntax errors,
//! unknown keys and wrong types stop there, with the field path), then semantic validation checks
//! every Azure/HyperShift rule and reports *all* problems at once as [`ConfigErrors`], one per
//! line (`nodePools[1].replicas: must be ≥ 0 (got -1)`). Only a file that passes both is
//! returned, with its relative paths resolved against the file's directory.
//!
//! The file holds no secrets, only paths: [`ClusterConfig::read_pull_secret`] and friends
//! read the referenced files when a step needs them.
//!
//! `examples/cluster.yaml` documents every key; `examples/cluster.schema.json` is
//! [`json_schema`]'s output, checked in so editors can validate and complete the file
//! (`# yaml-language-server: $schema=…`). Regenerate it with
//! `UPDATE_SCHEMA=1 cargo test -p hcp-workflows --test config_schema`.
//!
//! # Caveats
//! YAML is first read into a generic value (so that `create: {…}` / `existing: {…}`
//! choices work as one-key maps), so type and unknown-key errors carry a field path but no
//! line number; YAML syntax errors carry the line and column.

mod arm_id;
mod error;
mod files;
mod model;
mod names;
mod regions;
mod validate;

pub use arm_id::{ArmKind, ArmResourceId};
pub use error::{ConfigError, ConfigErrors, FileError};
pub use files::{IdentityComponent, WorkloadIdentities, WorkloadIdentity};
pub use model::{
    AuthMode, Cloud, CloudEndpoints, ClusterConfig, CustomCloud, DEFAULT_OIDC_CONTAINER,
    DEFAULT_OS_DISK_SIZE_GIB, DEFAULT_SUBNET_CIDR, DEFAULT_VM_SIZE, DEFAULT_VNET_CIDR, Identities,
    IdentitiesCreate, IdentitiesExisting, ImageGeneration, ImageType, ManagementCluster,
    MarketplaceImage, NatSubnet, Network, NetworkCreate, NetworkExisting, NodePool, NodePoolImage,
    OidcIssuer, OidcIssuerCreate, OidcIssuerExisting, PrivateLink, PrivateLinkManager, Topology,
    WaitBudgets,
};
pub use names::{MAX_NAME_LEN, MAX_NAME_PLUS_INFRA_ID, derive_storage_account, generate_infra_id};
pub use regions::{CHINA_REGIONS, PUBLIC_REGIONS, US_GOVERNMENT_REGIONS, regions_for};

use serde_path_to_error::Segment;
use std::path::Path;

/// Reads, parses and validates the cluster file at `path`; relative paths inside it are
/// resolved against its directory.
///
/// # Errors
/// Every problem found (or the one reason the file could not be read or parsed).
pub fn load(path: &Path) -> Result<ClusterConfig, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigErrors::one("", "file", format!("cannot read {}: {e}", path.display()))
    })?;
    let base_dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    parse_str(&text, base_dir)
}

/// Parses and validates a cluster file's text; relative paths are resolved against
/// `base_dir` (and the referenced files must exist there).
///
/// # Errors
/// Every semantic problem found, or the first syntax/type/unknown-key error.
pub fn parse_str(yaml: &str, base_dir: &Path) -> Result<ClusterConfig, ConfigErrors> {
    let config = deserialize(yaml)?;
    let errors = validate::validate(&config, base_dir);
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    Ok(resolve_paths(config, base_dir))
}

/// JSON Schema (draft 2020-12) of the cluster file, generated from [`ClusterConfig`].
/// It checks shape and simple formats; [`parse_str`] checks the rest.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(ClusterConfig).to_value()
}

fn deserialize(yaml: &str) -> Result<ClusterConfig, ConfigErrors> {
    let mut doc: serde_norway::Value = serde_norway::from_str(yaml)
        .map_err(|e| ConfigErrors::one("", "syntax", format!("YAML syntax error: {e}")))?;
    if doc.is_null() {
        return Err(ConfigErrors::one("", "syntax", "the file is empty"));
    }
    doc.apply_merge()
        .map_err(|e| ConfigErrors::one("", "syntax", format!("YAML merge error: {e}")))?;
    // serde_norway only accepts `!tag` enums; a JSON value accepts the one-key maps
    // (`create: {…}`) the file uses, and the unit variants as plain strings (`auto`).
    let json = serde_json::to_value(&doc).map_err(|e| {
        ConfigErrors::one(
            "",
            "syntax",
            format!("unsupported YAML (keys must be strings): {e}"),
        )
    })?;
    serde_path_to_error::deserialize(json).map_err(|e| {
        let path = render_path(e.path());
        let message = e.into_inner().to_string();
        let rule = if message.starts_with("unknown field") {
            "unknown-field"
        } else if message.starts_with("missing field") {
            "missing-field"
        } else if message.starts_with("unknown variant") {
            "unknown-variant"
        } else {
            "type"
        };
        let message = plain_words(&message);
        ConfigErrors::one(path, rule, message)
    })
}

/// The names between backticks in a serde message (`a`, `b`, …) after `marker`.
fn backticked(message: &str, marker: &str) -> Vec<String> {
    message
        .split_once(marker)
        .map(|(_, rest)| {
            rest.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The closest of `candidates` to `given` (case-insensitive edit distance of at most a
/// third of the name, and at least 1), for "did you mean".
fn closest<'a>(given: &str, candidates: &'a [String]) -> Option<&'a str> {
    let g = given.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(&g, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

/// serde's wording turned into the file's: unknown keys and wrong-case values get "did
/// you mean", a one-key choice (`create` / `existing`) says to set exactly one.
fn plain_words(message: &str) -> String {
    let first = |m: &str| m.split('`').nth(1).unwrap_or_default().to_string();
    if message.starts_with("unknown field") {
        let given = first(message);
        let keys = backticked(message, "expected");
        return match closest(&given, &keys) {
            Some(k) => format!("unknown key `{given}`: did you mean `{k}`?"),
            None if keys.is_empty() => format!("unknown key `{given}`: this section takes no keys"),
            None => format!(
                "unknown key `{given}`; the keys here are {}",
                keys.join(", ")
            ),
        };
    }
    if message.starts_with("unknown variant") {
        let given = first(message);
        let values = backticked(message, "expected");
        let exact_but_case = values.iter().find(|v| v.eq_ignore_ascii_case(&given));
        let list = values
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(", ");
        return match exact_but_case
            .map(String::as_str)
            .or_else(|| closest(&given, &values))
        {
            Some(v) => format!(
                "`{given}` is not a valid value: did you mean `{v}`? (values are case-sensitive: {list})"
            ),
            None => format!("`{given}` is not a valid value; use one of {list}"),
        };
    }
    if message.contains("expected map with a single key") {
        return "set exactly one of the choices here (for example `create: {}` or `existing: {…}`), not both and not none"
            .to_string();
    }
    message.to_string()
}

/// `nodePools[1].replicas` style, matching the paths semantic validation reports.
fn render_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => push_key(&mut out, key),
            Segment::Enum { variant } => push_key(&mut out, variant),
            Segment::Unknown => push_key(&mut out, "?"),
        }
    }
    out
}

fn push_key(out: &mut String, key: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(key);
}

fn resolve_paths(mut config: ClusterConfig, base_dir: &Path) -> ClusterConfig {
    let resolve = |p: &Path| validate::resolve_path(base_dir, p);
    config.pull_secret = resolve(&config.pull_secret);
    config.ssh_key = resolve(&config.ssh_key);
    if let Identities::Existing(e) = &mut config.identities {
        e.file = resolve(&e.file);
    }
    if let OidcIssuer::Existing(e) = &mut config.oidc_issuer {
        e.signing_key = resolve(&e.signing_key);
    }
    if let Some(k) = &config.management_cluster.kubeconfig {
        config.management_cluster.kubeconfig = Some(resolve(k));
    }
    config
}

impl ClusterConfig {
    /// The pull secret's bytes (a `.dockerconfigjson`), read now. Wrap them in a secret type
    /// at once; never log or journal them.
    ///
    /// # Errors
    /// The file is missing, unreadable, or not a JSON object with an `auths` object.
    pub fn read_pull_secret(&self) -> Result<Vec<u8>, FileError> {
        let bytes = files::read(&self.pull_secret)?;
        files::check_pull_secret(&bytes).map_err(|reason| FileError::Invalid {
            path: self.pull_secret.clone(),
            reason,
        })?;
        Ok(bytes)
    }

    /// The SSH public key file's bytes, read now.
    ///
    /// # Errors
    /// The file is missing, unreadable, or not an OpenSSH public key.
    pub fn read_ssh_public_key(&self) -> Result<Vec<u8>, FileError> {
        let bytes = files::read(&self.ssh_key)?;
        files::check_ssh_public_key(&bytes).map_err(|reason| FileError::Invalid {
            path: self.ssh_key.clone(),
            reason,
        })?;
        Ok(bytes)
    }

    /// The existing workload identities, read now; `None` when they are to be created.
    ///
    /// # Errors
    /// The file is missing, unreadable, or lacks a component / has a bad client id.
    pub fn read_workload_identities(&self) -> Result<Option<WorkloadIdentities>, FileError> {
        let Identities::Existing(e) = &self.identities else {
            return Ok(None);
        };
        let bytes = files::read(&e.file)?;
        files::parse_workload_identities(&bytes)
            .map(Some)
            .map_err(|problems| FileError::Invalid {
                path: e.file.clone(),
                reason: problems.join("; "),
            })
    }
}
