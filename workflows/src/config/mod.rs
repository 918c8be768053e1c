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
//! choices work as one-key maps), which has no positions: type, unknown-key, unknown-value
//! and missing-key errors find theirs in a second pass over the text (`locate`), which
//! follows the error's field path. YAML syntax errors carry the line and column in their
//! message. Semantic problems name the field path only.

mod arm_id;
mod error;
mod files;
mod locate;
mod model;
mod names;
mod regions;
mod validate;

pub use arm_id::{ArmKind, ArmResourceId};
pub use error::{ConfigError, ConfigErrors, FileError};
pub use files::{IdentityComponent, WorkloadIdentities, WorkloadIdentity};
pub use model::{
    AuthMode, AutoScaling, AvailabilityPolicy, Cloud, CloudEndpoints, ClusterConfig, ControlPlane,
    CustomCloud, DEFAULT_OIDC_CONTAINER, DEFAULT_OS_DISK_SIZE_GIB, DEFAULT_SUBNET_CIDR,
    DEFAULT_VM_SIZE, DEFAULT_VNET_CIDR, Etcd, Identities, IdentitiesAroHcp, IdentitiesCreate,
    IdentitiesExisting, ImageContentSource, ImageGeneration, ImageType, KeyVault,
    ManagementCluster, ManagementPlatform, MarketplaceImage, NatSubnet, Network, NetworkCreate,
    NetworkExisting, NodePool, NodePoolImage, OidcIssuer, OidcIssuerCreate, OidcIssuerExisting,
    PrivateLink, PrivateLinkManager, Topology, Upgrade, WaitBudgets,
};
pub use names::{
    MAX_NAME_LEN, MAX_NAME_PLUS_INFRA_ID, derive_key_vault, derive_storage_account,
    generate_infra_id,
};
pub use regions::{CHINA_REGIONS, PUBLIC_REGIONS, US_GOVERNMENT_REGIONS, regions_for};
pub use validate::{drain_timeout, kms_key};

use serde_path_to_error::Segment;
use std::path::Path;

/// Reads, parses and validates the cluster file at `path`; relative paths inside it are
/// resolved against its directory.
///
/// # Errors
/// Every problem found (or the one reason the file could not be read or parsed).
pub fn load(path: &Path) -> Result<ClusterConfig, ConfigErrors> {
    let bytes = hcp_activities::files::read_regular(path, hcp_activities::files::MAX_INPUT_FILE)
        .map_err(|e| {
            ConfigErrors::one("", "file", format!("cannot read {}: {e}", path.display()))
        })?;
    // A byte-order mark (Windows editors add one) is not part of the YAML.
    let bytes = bytes
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(&bytes);
    // Never quote the bytes: a file that is not text may be a secret (a `.env`).
    let text = std::str::from_utf8(bytes).map_err(|e| {
        ConfigErrors::one(
            "",
            "file",
            format!(
                "{} is not UTF-8 text (invalid byte at offset {}); give the cluster YAML file",
                path.display(),
                e.valid_up_to()
            ),
        )
    })?;
    let base_dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    parse_str(text, base_dir)
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
        let steps = path_steps(e.path());
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
        let mut message = plain_words(&message);
        // A wait budget is a duration written as text: `45` alone says nothing of its unit.
        if path.starts_with("waitBudgets.") && message.contains("got the number") {
            message = format!(
                "expected a duration like `45m` or `1h30m`, got {}",
                message
                    .split("got ")
                    .nth(1)
                    .and_then(|g| g.split(';').next())
                    .unwrap_or("a number")
            );
        }
        // An unknown key is pointed at itself; anything else at its value (a missing key:
        // the map that lacks it).
        let target = match rule {
            "unknown-field" => locate::Target::Key,
            _ => locate::Target::Value,
        };
        let position = locate::locate(yaml, &steps, target);
        ConfigErrors(vec![ConfigError::new(path, rule, message).at(position)])
    })
}

/// The path as steps through the file: a one-key choice (`create: {…}`) is a map key
/// there; an unknown segment ends the walk (the node before it is reported).
fn path_steps(path: &serde_path_to_error::Path) -> Vec<locate::Step> {
    path.iter()
        .map_while(|segment| match segment {
            Segment::Seq { index } => Some(locate::Step::Index(*index)),
            Segment::Map { key } => Some(locate::Step::Key(key.clone())),
            Segment::Enum { variant } => Some(locate::Step::Key(variant.clone())),
            Segment::Unknown => None,
        })
        .collect()
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
    if let Some((got, want)) = message
        .strip_prefix("invalid type: ")
        .and_then(|rest| rest.rsplit_once(", expected "))
    {
        return wrong_type(got, want);
    }
    message.to_string()
}

/// `invalid type: string "two", expected i64` in the file's words: what YAML node the key
/// needs, and what was written instead.
fn wrong_type(got: &str, want: &str) -> String {
    let needed = match want {
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" => {
            "a whole number".to_string()
        }
        "f32" | "f64" => "a number".to_string(),
        "a string" => "text".to_string(),
        "a boolean" => "`true` or `false`".to_string(),
        "a sequence" => "a list (`- item` lines, or `[]`)".to_string(),
        "a map" => "a map (`key: value` lines, or `{}`)".to_string(),
        w if w.starts_with("struct ") => "a map (`key: value` lines, or `{}`)".to_string(),
        // An enum: a bare name (`Public`, `auto`) or a one-key choice (`create: {}`).
        "string or map" => {
            "one of the names this key takes, or a one-key choice such as `create: {}`".to_string()
        }
        other => other.to_string(),
    };
    let unquote = |s: &str| s.trim_matches('`').to_string();
    let written = if let Some(s) = got.strip_prefix("string ") {
        // Quoted only when short and not `KEY=value`-shaped: a wrong file (a `.env`, a
        // key) must not have its content printed, and that content is what lands here.
        let inner = s.trim_matches('"');
        if inner.chars().count() <= 24 && !inner.contains('=') {
            format!("the text {s}")
        } else {
            format!(
                "a text of {} characters (not shown: it may be a secret; is this the cluster file?)",
                inner.chars().count()
            )
        }
    } else if let Some(n) = got
        .strip_prefix("integer ")
        .or_else(|| got.strip_prefix("floating point "))
    {
        format!("the number {}", unquote(n))
    } else if let Some(b) = got.strip_prefix("boolean ") {
        format!("`{}`", unquote(b))
    } else {
        match got {
            "map" => "a map".to_string(),
            "sequence" => "a list".to_string(),
            "unit value" | "null" => "nothing (an empty value)".to_string(),
            other => other.to_string(),
        }
    };
    // `releaseVersion: 4.22` is a number to YAML.
    let scalar =
        !matches!(got, "map" | "sequence" | "unit value" | "null") && !got.starts_with("string ");
    let hint = if want == "a string" && scalar {
        "; put it in quotes to keep it as text"
    } else {
        ""
    };
    format!("expected {needed}, got {written}{hint}")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid file with `line` (1-based) replaced; shape errors stop before any referenced
    /// file is read, so no base directory is needed.
    fn with_line(line: usize, text: &str) -> String {
        let mut lines: Vec<&str> = VALID.lines().collect();
        lines[line - 1] = text;
        lines.join("\n") + "\n"
    }

    const VALID: &str = "\
name: demo
subscription: 11111111-2222-3333-4444-555555555555
tenant: 99999999-8888-7777-6666-555555555555
location: eastus
baseDomain: hcp.example.com
releaseImage: quay.io/openshift-release-dev/ocp-release:4.22.0-multi
persistentResourceGroup: hcp-persistent
topology: Public
managementCluster: {}
nodePools:
  - name: workers
    replicas: 2
pullSecret: pull-secret.json
sshKey: id_ed25519.pub
";

    fn one_error(yaml: &str) -> ConfigError {
        let errors = match deserialize(yaml) {
            Ok(_) => panic!("accepted:\n{yaml}"),
            Err(e) => e.0,
        };
        assert_eq!(errors.len(), 1, "{errors:?}");
        errors.into_iter().next().unwrap_or_else(|| unreachable!())
    }

    #[test]
    fn the_valid_base_deserializes() {
        assert!(deserialize(VALID).is_ok());
    }

    #[test]
    fn shape_errors_name_line_and_column() {
        let cases = [
            (
                with_line(12, "    replicas: \"three\""),
                "nodePools[0].replicas (line 12, column 15): expected a whole number, got the text \"three\"",
            ),
            (
                with_line(10, "nodePools: 3").replace("  - name: workers\n    replicas: 2\n", ""),
                "nodePools (line 10, column 12): expected a list (`- item` lines, or `[]`), got the number 3",
            ),
            (
                with_line(1, "name: {first: demo}"),
                "name (line 1, column 7): expected text, got a map",
            ),
            (
                with_line(11, "  - name: 7"),
                "nodePools[0].name (line 11, column 11): expected text, got the number 7; put it in quotes to keep it as text",
            ),
            (
                with_line(9, "managementCluster: yes"),
                "managementCluster (line 9, column 20): expected a map (`key: value` lines, or `{}`), got the text \"yes\"",
            ),
            (
                with_line(8, "topology: 3"),
                "topology (line 8, column 11): expected one of the names this key takes, or a one-key choice such as `create: {}`, got the number 3",
            ),
            (
                with_line(1, "name:"),
                "name (line 1, column 6): expected text, got nothing (an empty value)",
            ),
            (
                with_line(8, "topology: Hidden"),
                "topology (line 8, column 11): `Hidden` is not a valid value; use one of `Public`, `PublicAndPrivate`, `Private`",
            ),
            (
                with_line(12, "    replica: 2"),
                "nodePools[0].replica (line 12, column 5): unknown key `replica`: did you mean `replicas`?",
            ),
            (
                with_line(11, "  - nme: workers"),
                "nodePools[0].nme (line 11, column 5): unknown key `nme`: did you mean `name`?",
            ),
            (
                VALID.to_string() + "waitBudgets:\n  hostedClusterAvailable: 45\n",
                "waitBudgets.hostedClusterAvailable (line 16, column 27): expected a duration like `45m` or `1h30m`, got the number 45",
            ),
            // A `.env` given as the cluster file: its line is never printed.
            (
                "AZURE_CLIENT_SECRET=s3cr3t-value-0123456789\n".to_string(),
                "line 1, column 1: expected a map (`key: value` lines, or `{}`), got a text of 43 characters (not shown: it may be a secret; is this the cluster file?)",
            ),
        ];
        for (yaml, want) in cases {
            assert_eq!(one_error(&yaml).to_string(), want, "\n{yaml}");
        }
    }

    #[test]
    fn a_missing_key_points_at_the_map_that_lacks_it() {
        let e =
            one_error(&VALID.replace("  - name: workers\n    replicas: 2\n", "  - replicas: 2\n"));
        assert_eq!(e.rule, "missing-field");
        assert_eq!((e.line, e.column), (Some(11), Some(5)));
        let e = one_error(&VALID.replace("name: demo\n", ""));
        assert_eq!(e.path, "");
        assert_eq!(e.to_string(), "line 1, column 1: missing field `name`");
    }

    #[test]
    fn the_position_is_in_machine_output_too() {
        let e = one_error(&with_line(12, "    replicas: two"));
        assert_eq!(
            serde_json::to_value(&e).unwrap_or_default(),
            serde_json::json!({
                "path": "nodePools[0].replicas",
                "rule": "type",
                "message": "expected a whole number, got the text \"two\"",
                "line": 12,
                "column": 15,
            })
        );
    }

    #[test]
    fn a_merged_key_points_at_the_map_it_is_merged_into() {
        let yaml = VALID.replace(
            "nodePools:\n  - name: workers\n    replicas: 2\n",
            "defaults: &d\n  replicas: many\nnodePools:\n  - name: workers\n    <<: *d\n",
        );
        // (The loader stops at the unknown `defaults` key first; the locator is asked
        // directly where the merged `replicas` of the item is.)
        let steps = [
            locate::Step::Key("nodePools".into()),
            locate::Step::Index(0),
            locate::Step::Key("replicas".into()),
        ];
        // A merged key is not written in the item: the item's map is reported.
        assert_eq!(
            locate::locate(&yaml, &steps, locate::Target::Value),
            Some((13, 5))
        );
    }
}
