//! CRD schema validation (`--crds DIR`): objects of a kind whose CRD was loaded must
//! validate against its `openAPIV3Schema`, else the write answers 422 `Invalid` like the
//! API server.
//!
//! Unknown fields are pruned as for a structural schema ([`CrdSet::prune`]; the API
//! server's `fieldValidation` decides whether that is silent, a warning or a 400).
//!
//! Defaults are applied as for a structural schema ([`default_with`]), on every create and
//! update.
//!
//! # Caveats
//! `x-kubernetes-validations` (CEL) and format checks are not applied; required fields,
//! types, enums, patterns and bounds are. The CEL rules a day-2
//! change meets are hand-written in [`validation_rules`] (applied with or without `--crds`).

use std::collections::HashMap;
use std::path::Path;

use jsonschema::error::ValidationErrorKind;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;

/// Compiled schemas by `<group>/<plural>`.
#[derive(Default)]
pub(crate) struct CrdSet {
    validators: HashMap<String, jsonschema::Validator>,
    /// The CRD documents by `<group>/<plural>` (names, printer columns, subresources).
    docs: HashMap<String, Value>,
    /// The served version's `openAPIV3Schema` by `<group>/<plural>`.
    schemas: HashMap<String, Value>,
}

impl std::fmt::Debug for CrdSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrdSet")
            .field("kinds", &self.validators.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One field error, as the API server reports it in `details.causes`.
#[derive(Debug, Clone)]
pub(crate) struct FieldError {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl CrdSet {
    /// Loads every `CustomResourceDefinition` document of every `*.yaml`/`*.yml` in `dir`.
    pub(crate) fn load(dir: &Path) -> Result<CrdSet, Error> {
        let err = |path: &Path, message: String| Error::Crd {
            path: path.to_path_buf(),
            message,
        };
        let entries = std::fs::read_dir(dir).map_err(|e| err(dir, e.to_string()))?;
        let mut set = CrdSet::default();
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or_default();
            if ext != "yaml" && ext != "yml" {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|e| err(&path, e.to_string()))?;
            for doc in serde_norway::Deserializer::from_str(&text) {
                let Ok(v) = Value::deserialize(doc) else {
                    continue;
                };
                if v.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                    continue;
                }
                let group = v
                    .pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let plural = v
                    .pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let versions = v
                    .pointer("/spec/versions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                // The version the simulator serves for this group (v1beta1 for HyperShift).
                let Some(schema) = versions
                    .iter()
                    .find(|ver| {
                        ver.get("name").and_then(Value::as_str)
                            == Some(super::served_version(group))
                    })
                    .and_then(|ver| ver.pointer("/schema/openAPIV3Schema"))
                else {
                    continue;
                };
                // OpenAPI's `nullable: true` is not JSON Schema: a nullable node also
                // accepts null (as the API server's structural validation does).
                let mut json_schema = schema.clone();
                allow_nullable(&mut json_schema);
                let validator = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft4)
                    .should_validate_formats(false)
                    .build(&json_schema)
                    .map_err(|e| {
                        err(
                            &path,
                            format!("schema of {plural}.{group} does not compile: {e}"),
                        )
                    })?;
                let key = format!("{group}/{plural}");
                set.schemas.insert(key.clone(), schema.clone());
                set.validators.insert(key.clone(), validator);
                set.docs.insert(key, v.clone());
            }
        }
        Ok(set)
    }

    /// The loaded CRD of `kind_key`.
    pub(crate) fn crd(&self, kind_key: &str) -> Option<&Value> {
        self.docs.get(kind_key)
    }

    /// The served version's `openAPIV3Schema` of `kind_key`.
    pub(crate) fn schema(&self, kind_key: &str) -> Option<&Value> {
        self.schemas.get(kind_key)
    }

    /// The served version entry (`spec.versions[]`) of the CRD of `kind_key`.
    pub(crate) fn version(&self, kind_key: &str) -> Option<&Value> {
        let crd = self.docs.get(kind_key)?;
        let group = crd.pointer("/spec/group").and_then(Value::as_str)?;
        crd.pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(super::served_version(group)))
    }

    /// Prunes fields `obj` has that the structural schema of `kind_key` does not declare
    /// (apiextensions `pruning.Prune`), returning their paths (`spec.foo`, as the API
    /// server's `unknown field "spec.foo"` warnings and strict errors name them).
    pub(crate) fn prune(&self, kind_key: &str, obj: &mut Value) -> Vec<String> {
        match self.schemas.get(kind_key) {
            Some(schema) => prune_with(schema, obj),
            None => Vec::new(),
        }
    }

    /// Validates `obj` if a schema for `kind_key` is loaded.
    pub(crate) fn validate(&self, kind_key: &str, obj: &Value) -> Result<(), Vec<FieldError>> {
        let Some(v) = self.validators.get(kind_key) else {
            return Ok(());
        };
        let errors: Vec<FieldError> = v
            .iter_errors(obj)
            .map(|e| {
                let path: Vec<String> = e
                    .instance_path()
                    .as_str()
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.replace("~1", "/").replace("~0", "~"))
                    .collect();
                let mut field = String::new();
                for seg in &path {
                    if seg.parse::<usize>().is_ok() {
                        field.push_str(&format!("[{seg}]"));
                    } else {
                        if !field.is_empty() {
                            field.push('.');
                        }
                        field.push_str(seg);
                    }
                }
                match e.kind() {
                    ValidationErrorKind::Required { property } => {
                        let prop = property.as_str().unwrap_or_default();
                        let f = if field.is_empty() {
                            prop.to_string()
                        } else {
                            format!("{field}.{prop}")
                        };
                        FieldError {
                            reason: "FieldValueRequired",
                            field: f,
                            message: "Required value".into(),
                        }
                    }
                    ValidationErrorKind::Enum { .. } => FieldError {
                        reason: "FieldValueNotSupported",
                        field,
                        message: format!("Unsupported value: {e}"),
                    },
                    _ => FieldError {
                        reason: "FieldValueInvalid",
                        field,
                        message: format!("Invalid value: {e}"),
                    },
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// Rewrites every schema node with `nullable: true` and a `type` to accept null too
/// (`"type": [T, "null"]`), recursively.
fn allow_nullable(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::String(t)) = m.get("type").cloned()
            {
                m.insert("type".into(), json!([t, "null"]));
            }
            m.values_mut().for_each(allow_nullable);
        }
        Value::Array(a) => a.iter_mut().for_each(allow_nullable),
        _ => {}
    }
}

/// Prunes `obj` against a root object schema (see [`CrdSet::prune`]); `apiVersion`, `kind`
/// and `metadata` are always kept.
pub(crate) fn prune_with(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    if let Some(m) = obj.as_object_mut() {
        for (k, v) in m.iter_mut() {
            if k == "apiVersion" || k == "kind" || k == "metadata" {
                continue;
            }
            if let Some(s) = schema.pointer(&format!("/properties/{k}")) {
                prune_value(s, v, k, &mut pruned);
            }
        }
        let before: Vec<String> = m.keys().cloned().collect();
        m.retain(|k, _| {
            k == "apiVersion"
                || k == "kind"
                || k == "metadata"
                || schema.pointer(&format!("/properties/{k}")).is_some()
                || preserves(schema)
        });
        for k in before {
            if !m.contains_key(&k) {
                pruned.push(k);
            }
        }
    }
    pruned.sort();
    pruned
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

/// Structural pruning of one value against its schema node.
fn prune_value(schema: &Value, v: &mut Value, path: &str, pruned: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keep_unknown =
                preserves(schema) || schema.get("additionalProperties") == Some(&Value::Bool(true));
            let embedded = schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
            let mut drop = Vec::new();
            for (k, child) in m.iter_mut() {
                let sub = format!("{path}.{k}");
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    prune_value(s, child, &sub, pruned);
                } else if let Some(s) = additional {
                    prune_value(s, child, &sub, pruned);
                } else if !(keep_unknown
                    || (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata")))
                {
                    drop.push(k.clone());
                }
            }
            for k in drop {
                m.remove(&k);
                pruned.push(format!("{path}.{k}"));
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for (i, item) in a.iter_mut().enumerate() {
                    prune_value(items, item, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// A failed CEL rule on an object, as the API server reports it:
/// `<path>: Invalid value: "object": <message>` (reason `FieldValueInvalid`).
fn rule(field: &str, message: &str) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: field.to_string(),
        message: format!("Invalid value: \"object\": {message}"),
    }
}

/// The CEL rules (`x-kubernetes-validations`) of HyperShift's CRDs that a day-2 change meets,
/// evaluated by hand (release-4.22). `old` is the stored object on an update (replace,
/// patch, apply of an existing object) and `None` on a create: transition rules (those
/// reading `oldSelf`) are evaluated only on an update, and only where the old object has
/// the field the rule sits on, as the API server does.
///
/// - NodePool (`api/hypershift/v1beta1/nodepool_types.go`): on `NodePoolSpec`, "Both
///   replicas or autoScaling should not be set" (`!has(self.replicas) ||
///   !has(self.autoScaling)`) and "Scale-from-zero (autoScaling.min=0) is currently only
///   supported for AWS platform"; on `NodePoolAutoScaling`, "max must be equal or greater
///   than min".
/// - HostedCluster: [`hosted_cluster_transition_rules`].
pub(crate) fn validation_rules(
    kind_key: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    if kind_key == format!("{}/hostedclusters", crate::kube::HYPERSHIFT) {
        return old.map_or_else(Vec::new, |old| hosted_cluster_transition_rules(obj, old));
    }
    if kind_key != format!("{}/nodepools", crate::kube::HYPERSHIFT) {
        return Vec::new();
    }
    let Some(spec) = obj.get("spec") else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    let auto = spec.get("autoScaling").filter(|a| !a.is_null());
    let has_replicas = spec.get("replicas").is_some_and(|r| !r.is_null());
    if has_replicas && auto.is_some() {
        errs.push(rule(
            "spec",
            "Both replicas or autoScaling should not be set",
        ));
    }
    if let Some(a) = auto {
        let min = a.get("min").and_then(Value::as_i64).unwrap_or(0);
        let max = a.get("max").and_then(Value::as_i64).unwrap_or(0);
        let aws = spec.pointer("/platform/type").and_then(Value::as_str) == Some("AWS");
        if min <= 0 && !aws {
            errs.push(rule(
                "spec",
                "Scale-from-zero (autoScaling.min=0) is currently only supported for AWS platform",
            ));
        }
        if max < min {
            errs.push(rule(
                "spec.autoScaling",
                "max must be equal or greater than min",
            ));
        }
    }
    errs
}

/// Whether CEL's `has(o.<field>)` holds on a JSON object (a JSON `null` is no value: the API
/// server prunes nulls of non-nullable fields before validation).
fn has(o: &Value, field: &str) -> bool {
    o.get(field).is_some_and(|v| !v.is_null())
}

/// The HostedCluster's transition rules (`oldSelf`) a day-2 change meets, messages verbatim:
/// - on `AzurePlatformSpec` (`api/hypershift/v1beta1/azure.go`, path
///   `spec.platform.azure`): `has(self.private) == has(oldSelf.private)` "private cannot be
///   added or removed after cluster creation"; `!has(oldSelf.topology) ||
///   has(self.topology)` "topology cannot be removed once set"; `!has(self.topology) ||
///   !has(oldSelf.topology) || (self.topology == 'Public') == (oldSelf.topology ==
///   'Public')` "transitions between Public and non-Public topology are not supported"
///   (PublicAndPrivate ↔ Private is allowed);
/// - on `HostedClusterSpec` (`api/hypershift/v1beta1/hostedcluster_types.go`, path `spec`):
///   `self.platform.type != "IBMCloud" ? self.services == oldSelf.services : true`
///   "Services is immutable. Changes might result in unpredictable and disruptive
///   behavior." (`services` is an atomic list: compared in order).
///
/// Where CEL would fail to evaluate (a field missing on both sides, which the CRD schema
/// requires anyway) the rule passes here.
pub(crate) fn hosted_cluster_transition_rules(obj: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (Some(spec), Some(old_spec)) = (obj.get("spec"), old.get("spec")) else {
        return errs;
    };
    if let (Some(az), Some(old_az)) = (
        spec.pointer("/platform/azure").filter(|v| v.is_object()),
        old_spec
            .pointer("/platform/azure")
            .filter(|v| v.is_object()),
    ) {
        const AZ: &str = "spec.platform.azure";
        if has(az, "private") != has(old_az, "private") {
            errs.push(rule(
                AZ,
                "private cannot be added or removed after cluster creation",
            ));
        }
        if has(old_az, "topology") && !has(az, "topology") {
            errs.push(rule(AZ, "topology cannot be removed once set"));
        }
        if has(az, "topology") && has(old_az, "topology") {
            let public = |a: &Value| a.get("topology").and_then(Value::as_str) == Some("Public");
            if public(az) != public(old_az) {
                errs.push(rule(
                    AZ,
                    "transitions between Public and non-Public topology are not supported",
                ));
            }
        }
    }
    let ibm = spec.pointer("/platform/type").and_then(Value::as_str) == Some("IBMCloud");
    if !ibm && spec.get("services") != old_spec.get("services") {
        errs.push(rule(
            "spec",
            "Services is immutable. Changes might result in unpredictable and disruptive behavior.",
        ));
    }
    errs
}

/// Structural-schema defaulting (apiextensions `structuraldefaulting.Default`, what the API
/// server does to a custom resource on every create and update, after pruning): each
/// property with a `default` that the object lacks gets it, inside every object that is
/// there (a default is not applied to a parent that is absent), and defaults are then
/// defaulted in turn. `null` values were dropped before (`drop_nulls_with`).
pub(crate) fn default_with(schema: &Value, obj: &mut Value) {
    match obj {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    if !m.contains_key(k)
                        && let Some(d) = s.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                    if let Some(child) = m.get_mut(k) {
                        default_with(s, child);
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let declared = schema.get("properties").and_then(Value::as_object);
                for (k, child) in m.iter_mut() {
                    if declared.is_none_or(|p| !p.contains_key(k)) {
                        default_with(additional, child);
                    }
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for item in a {
                    default_with(items, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hc(azure: Value, services: Value) -> Value {
        json!({"spec": {"platform": {"type": "Azure", "azure": azure}, "services": services}})
    }

    fn kas(t: &str) -> Value {
        json!([{"service": "APIServer", "servicePublishingStrategy": {"type": t}}])
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    const HCS: &str = "hypershift.openshift.io/hostedclusters";

    /// A default fills an absent field inside an object that is there, and defaults
    /// inside the default apply in turn; an absent parent gets nothing.
    #[test]
    fn defaults_fill_absent_fields_of_present_objects_only() {
        let schema = json!({"properties": {"spec": {"properties": {
            "arch": {"type": "string", "default": "amd64"},
            "management": {"properties": {
                "replace": {"type": "object", "default": {"strategy": "RollingUpdate"},
                    "properties": {"strategy": {"type": "string"},
                        "rollingUpdate": {"type": "object", "default": {"maxSurge": 1}}}},
                "upgradeType": {"type": "string"}}},
            "pools": {"type": "array", "items": {"properties": {"size": {"type": "integer", "default": 3}}}},
            "absent": {"properties": {"x": {"type": "string", "default": "y"}}}}}}});
        let mut obj =
            json!({"spec": {"management": {"upgradeType": "Replace"}, "pools": [{}, {"size": 5}]}});
        default_with(&schema, &mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"arch": "amd64",
                "management": {"upgradeType": "Replace",
                    "replace": {"strategy": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
                "pools": [{"size": 3}, {"size": 5}]}})
        );
    }

    #[test]
    fn hosted_cluster_rules_apply_only_on_update() {
        let old = hc(json!({"topology": "Public"}), kas("Route"));
        let new = hc(
            json!({"topology": "Private", "private": {}}),
            kas("LoadBalancer"),
        );
        assert!(validation_rules(HCS, &new, None).is_empty());
        assert_eq!(validation_rules(HCS, &new, Some(&old)).len(), 3);
        assert!(validation_rules(HCS, &old, Some(&old)).is_empty());
    }

    #[test]
    fn private_cannot_be_added_or_removed() {
        let with = hc(
            json!({"topology": "Private", "private": {"type": "PrivateLink"}}),
            kas("Route"),
        );
        let without = hc(json!({"topology": "Private"}), kas("Route"));
        let want = vec![
            "spec.platform.azure: Invalid value: \"object\": private cannot be added or removed after cluster creation".to_string(),
        ];
        assert_eq!(
            messages(&validation_rules(HCS, &without, Some(&with))),
            want
        );
        assert_eq!(
            messages(&validation_rules(HCS, &with, Some(&without))),
            want
        );
        let changed = hc(
            json!({"topology": "Private", "private": {"type": "Swift"}}),
            kas("Route"),
        );
        assert!(validation_rules(HCS, &changed, Some(&with)).is_empty());
        let null = hc(
            json!({"topology": "Private", "private": null}),
            kas("Route"),
        );
        assert!(validation_rules(HCS, &null, Some(&without)).is_empty());
    }

    #[test]
    fn topology_cannot_be_removed() {
        let old = hc(json!({"topology": "Private"}), kas("Route"));
        let new = hc(json!({}), kas("Route"));
        assert_eq!(
            messages(&validation_rules(HCS, &new, Some(&old))),
            vec![
                "spec.platform.azure: Invalid value: \"object\": topology cannot be removed once set"
            ]
        );
        // Setting it where it was unset is allowed (the default is Public).
        assert!(validation_rules(HCS, &old, Some(&new)).is_empty());
    }

    #[test]
    fn public_and_non_public_do_not_transition() {
        let t = |topology: &str| hc(json!({"topology": topology}), kas("Route"));
        let refused = vec![
            "spec.platform.azure: Invalid value: \"object\": transitions between Public and non-Public topology are not supported".to_string(),
        ];
        for (from, to) in [
            ("Public", "Private"),
            ("Public", "PublicAndPrivate"),
            ("Private", "Public"),
            ("PublicAndPrivate", "Public"),
        ] {
            assert_eq!(
                messages(&validation_rules(HCS, &t(to), Some(&t(from)))),
                refused,
                "{from} -> {to}"
            );
        }
        for (from, to) in [
            ("PublicAndPrivate", "Private"),
            ("Private", "PublicAndPrivate"),
        ] {
            assert!(
                validation_rules(HCS, &t(to), Some(&t(from))).is_empty(),
                "{from} -> {to}"
            );
        }
    }

    #[test]
    fn services_are_immutable_but_on_ibm_cloud() {
        let old = hc(json!({"topology": "Public"}), kas("Route"));
        let new = hc(json!({"topology": "Public"}), kas("LoadBalancer"));
        let err = validation_rules(HCS, &new, Some(&old));
        assert_eq!(
            messages(&err),
            vec![
                "spec: Invalid value: \"object\": Services is immutable. Changes might result in unpredictable and disruptive behavior."
            ]
        );
        assert_eq!(err[0].reason, "FieldValueInvalid");
        let ibm = |s: Value| json!({"spec": {"platform": {"type": "IBMCloud"}, "services": s}});
        assert!(
            validation_rules(HCS, &ibm(kas("LoadBalancer")), Some(&ibm(kas("Route")))).is_empty()
        );
    }

    #[test]
    fn node_pool_rules_are_unchanged() {
        let np = json!({"spec": {"replicas": 2, "autoScaling": {"min": 1, "max": 2}}});
        let kind = "hypershift.openshift.io/nodepools";
        assert_eq!(validation_rules(kind, &np, None).len(), 1);
        assert_eq!(validation_rules(kind, &np, Some(&np)).len(), 1);
    }
}
