//! CRD schema validation (`--crds DIR`): objects of a kind whose CRD was loaded must
//! validate against its `openAPIV3Schema`, else the write answers 422 `Invalid` like the
//! API server.
//!
//! # Caveats
//! Structural-schema defaulting and pruning, `x-kubernetes-validations` (CEL) and format
//! checks are not applied; required fields, types, enums, patterns and bounds are.

use std::collections::HashMap;
use std::path::Path;

use jsonschema::error::ValidationErrorKind;
use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// Compiled schemas by `<group>/<plural>`.
#[derive(Default)]
pub(crate) struct CrdSet {
    validators: HashMap<String, jsonschema::Validator>,
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
                let validator = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft4)
                    .should_validate_formats(false)
                    .build(schema)
                    .map_err(|e| {
                        err(
                            &path,
                            format!("schema of {plural}.{group} does not compile: {e}"),
                        )
                    })?;
                set.validators
                    .insert(format!("{group}/{plural}"), validator);
            }
        }
        Ok(set)
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
