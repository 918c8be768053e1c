//! Request-body validation against the Azure REST API specs (Swagger 2.0).
//!
//! With [`crate::config::SimConfig::specs_dir`] set (`simulator serve --specs DIR`), every
//! ARM PUT/PATCH body is checked against the body parameter's schema of the operation whose
//! path template matches the request (the files under `DIR` are laid out as in
//! Azure/azure-rest-api-specs, e.g.
//! `specification/network/resource-manager/Microsoft.Network/stable/2023-11-01/networkSecurityGroup.json`),
//! whatever api-version the request names. A body Azure would refuse answers 400
//! `InvalidRequestContent` with the message ARM's deserializer gives, naming the property
//! path (`Required property 'access' not found in JSON. Path 'properties.securityRules[0].properties'`).
//!
//! Why a small validator over `serde_json::Value` rather than the `jsonschema` crate (which
//! the simulator uses for CRDs): Swagger 2.0 schemas are not a JSON Schema draft that crate
//! implements, and what matters here is Swagger/AutoRest specific — relative `$ref`s across
//! files (`./network.json#/definitions/Resource`, `../../../../../common-types/…`),
//! `readOnly` properties that a request may carry (ignored, as ARM does), `x-ms-enum`
//! `modelAsString` (open enums), `x-ms-discriminator-value` subtypes. The subset used by
//! the specs is: `$ref`, `allOf`, `type`, `properties`, `required`, `items`,
//! `additionalProperties`, `enum`. `x-ms-client-flatten` only changes generated client
//! models, not the wire format (`properties` stays nested), so it needs nothing.
//! A `$ref` to a file or definition not present (the shared excerpts omit some) accepts
//! anything. `null` is accepted for optional properties, as ARM's deserializer does.
//!
//! Without a specs directory, [`fallback`] checks the required properties of the nested
//! items of the types we model that have no other check (NSG security rules, load
//! balancer rules and probes), from the same specs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use super::{ArmError, types};

/// One operation with a body: its path template and body schema.
#[derive(Debug)]
struct Op {
    method: String,
    template: Vec<String>,
    file: String,
    schema: Value,
}

/// The spec files of a directory, indexed by relative path, and their body operations.
#[derive(Debug, Default)]
pub(crate) struct SpecSet {
    files: HashMap<String, Value>,
    ops: Vec<Op>,
}

static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<SpecSet>>>> = OnceLock::new();

/// The specs of `dir`, loaded once per process (files that do not parse are skipped with a
/// warning; an unreadable directory yields an empty set).
pub(crate) fn specs(dir: &Path) -> Arc<SpecSet> {
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut c = crate::sim::lock(cache);
    c.entry(dir.to_path_buf())
        .or_insert_with(|| Arc::new(SpecSet::load(dir)))
        .clone()
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        tracing::warn!(dir = %dir.display(), "specs: unreadable directory");
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "json")
            && let Ok(rel) = p.strip_prefix(root)
        {
            let key = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push((key, p));
        }
    }
}

impl SpecSet {
    fn load(dir: &Path) -> SpecSet {
        let mut paths = Vec::new();
        walk(dir, dir, &mut paths);
        paths.sort();
        let mut set = SpecSet::default();
        for (key, p) in paths {
            let parsed = std::fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(v) => {
                    set.files.insert(key, v);
                }
                Err(e) => tracing::warn!(file = %p.display(), error = %e, "specs: skipped"),
            }
        }
        let mut ops = Vec::new();
        for (file, doc) in &set.files {
            let Some(paths) = doc.get("paths").and_then(Value::as_object) else {
                continue;
            };
            for (template, item) in paths {
                for method in ["put", "patch"] {
                    let Some(op) = item.get(method) else { continue };
                    let params = op
                        .get("parameters")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .chain(
                            item.get("parameters")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten(),
                        );
                    for p in params {
                        let (pfile, p) = match p.get("$ref").and_then(Value::as_str) {
                            Some(r) => match set.resolve(file, r) {
                                Some((f, v)) => (f, v),
                                None => continue,
                            },
                            None => (file.clone(), p),
                        };
                        if p.get("in").and_then(Value::as_str) == Some("body")
                            && let Some(schema) = p.get("schema")
                        {
                            ops.push(Op {
                                method: method.to_ascii_uppercase(),
                                template: template
                                    .split('/')
                                    .filter(|s| !s.is_empty())
                                    .map(str::to_string)
                                    .collect(),
                                file: pfile,
                                schema: schema.clone(),
                            });
                        }
                    }
                }
            }
        }
        // Most literal segments first: `…/virtualNetworkLinks/{name}` before the record
        // set template `…/{recordType}/{relativeRecordSetName}`.
        ops.sort_by_key(|o| {
            std::cmp::Reverse(o.template.iter().filter(|s| !s.starts_with('{')).count())
        });
        set.ops = ops;
        set
    }

    /// Resolves `r` (`[file]#/pointer`) seen in `file`: the target's file and value.
    fn resolve<'a>(&'a self, file: &str, r: &str) -> Option<(String, &'a Value)> {
        let (f, pointer) = r.split_once('#').unwrap_or((r, ""));
        let target = if f.is_empty() {
            file.to_string()
        } else {
            let mut parts: Vec<&str> = file.split('/').collect();
            parts.pop();
            for seg in f.split('/') {
                match seg {
                    "" | "." => {}
                    ".." => {
                        parts.pop();
                    }
                    s => parts.push(s),
                }
            }
            parts.join("/")
        };
        let doc = self.files.get(&target)?;
        let v = if pointer.is_empty() {
            doc
        } else {
            doc.pointer(pointer)?
        };
        Some((target, v))
    }

    fn find(&self, method: &str, segments: &[String]) -> Option<&Op> {
        self.ops
            .iter()
            .find(|o| o.method == method && template_matches(&o.template, segments))
    }

    /// Subtypes of the definition `file#/definitions/name` selected by `value` of its
    /// discriminator (`x-ms-discriminator-value`, else the subtype's name).
    fn subtype(&self, file: &str, name: &str, value: &str) -> Option<(String, &Value)> {
        for (f, doc) in &self.files {
            let Some(defs) = doc.get("definitions").and_then(Value::as_object) else {
                continue;
            };
            for (dname, def) in defs {
                let tag = def
                    .get("x-ms-discriminator-value")
                    .and_then(Value::as_str)
                    .unwrap_or(dname);
                if tag != value {
                    continue;
                }
                let extends = def
                    .get("allOf")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.get("$ref").and_then(Value::as_str))
                    .any(|r| {
                        let (rf, ptr) = r.split_once('#').unwrap_or((r, ""));
                        ptr == format!("/definitions/{name}")
                            && self
                                .resolve(f, &format!("{rf}#"))
                                .is_some_and(|(t, _)| t == file)
                    });
                if extends {
                    return Some((f.clone(), def));
                }
            }
        }
        None
    }
}

fn template_matches(t: &[String], s: &[String]) -> bool {
    match t.split_first() {
        None => s.is_empty(),
        // `{scope}` (role assignments) spans one or more segments.
        Some((x, rest)) if x == "{scope}" => (1..=s.len()).any(|n| template_matches(rest, &s[n..])),
        Some((x, rest)) if x.starts_with('{') => !s.is_empty() && template_matches(rest, &s[1..]),
        Some((x, rest)) => {
            s.first().is_some_and(|f| f.eq_ignore_ascii_case(x)) && template_matches(rest, &s[1..])
        }
    }
}

/// Validates the body of a `method` request to `segments` against `dir`'s specs.
pub(crate) fn validate(
    dir: &Path,
    method: &str,
    segments: &[String],
    body: &Value,
) -> Result<(), ArmError> {
    let set = specs(dir);
    let Some(op) = set.find(method, segments) else {
        return Ok(());
    };
    let mut errs = Vec::new();
    let v = Validator { set: &set };
    v.check(&op.file, &op.schema, None, body, "", &mut errs, false, 0);
    match errs.into_iter().next() {
        None => Ok(()),
        Some(e) => Err(invalid(&e)),
    }
}

fn invalid(e: &str) -> ArmError {
    ArmError::bad_request(
        "InvalidRequestContent",
        format!("The request content was invalid and could not be deserialized: '{e}'."),
    )
}

fn join(path: &str, prop: &str) -> String {
    if path.is_empty() {
        prop.to_string()
    } else {
        format!("{path}.{prop}")
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "Null",
        Value::Bool(_) => "Boolean",
        Value::Number(n) if n.is_f64() => "Float",
        Value::Number(_) => "Integer",
        Value::String(_) => "String",
        Value::Array(_) => "Array",
        Value::Object(_) => "Object",
    }
}

struct Validator<'a> {
    set: &'a SpecSet,
}

impl Validator<'_> {
    /// Checks `v` at `path` against `schema` (seen in `file`; `def` names the definition
    /// when `schema` is one, for discriminator lookups). `in_subtype`: reached through a
    /// subtype's `allOf`, so the discriminator is not dispatched again.
    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        file: &str,
        schema: &Value,
        def: Option<&str>,
        v: &Value,
        path: &str,
        errs: &mut Vec<String>,
        in_subtype: bool,
        depth: usize,
    ) {
        if depth > 64 || !errs.is_empty() || v.is_null() {
            return;
        }
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let Some((f, target)) = self.set.resolve(file, r) else {
                return;
            };
            let name = r.rsplit_once("/definitions/").map(|(_, n)| n);
            self.check(&f, target, name, v, path, errs, in_subtype, depth + 1);
            return;
        }
        if !in_subtype
            && let (Some(prop), Some(name)) =
                (schema.get("discriminator").and_then(Value::as_str), def)
            && let Some(tag) = v.get(prop).and_then(Value::as_str)
            && let Some((f, sub)) = self.set.subtype(file, name, tag)
        {
            self.check(&f, sub, None, v, path, errs, true, depth + 1);
            return;
        }
        for a in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.check(file, a, None, v, path, errs, in_subtype, depth + 1);
        }
        let ty = schema.get("type").and_then(Value::as_str);
        let ok = match ty {
            Some("object") => v.is_object(),
            Some("array") => v.is_array(),
            Some("string") => v.is_string(),
            Some("integer") => v.is_i64() || v.is_u64(),
            Some("number") => v.is_number(),
            Some("boolean") => v.is_boolean(),
            _ => true,
        };
        if !ok {
            errs.push(format!(
                "Invalid type. Expected {} but got {}. Path '{path}'",
                ty.unwrap_or_default(),
                kind(v)
            ));
            return;
        }
        if let (Some(allowed), Some(s)) = (schema.get("enum").and_then(Value::as_array), v.as_str())
        {
            let open = schema.pointer("/x-ms-enum/modelAsString") == Some(&Value::Bool(true));
            if !open
                && !allowed
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|a| a.eq_ignore_ascii_case(s))
            {
                errs.push(format!(
                    "Error converting value \"{s}\" to an allowed value of '{}'. Path '{path}'",
                    schema
                        .pointer("/x-ms-enum/name")
                        .and_then(Value::as_str)
                        .unwrap_or("enum")
                ));
                return;
            }
        }
        if let Some(items) = v.as_array()
            && let Some(item_schema) = schema.get("items")
        {
            for (i, it) in items.iter().enumerate() {
                self.check(
                    file,
                    item_schema,
                    None,
                    it,
                    &format!("{path}[{i}]"),
                    errs,
                    false,
                    depth + 1,
                );
            }
        }
        let Some(obj) = v.as_object() else { return };
        let props = schema.get("properties").and_then(Value::as_object);
        let lookup = |name: &str| {
            obj.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        };
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(name) = req.as_str() else { continue };
            let read_only = props
                .and_then(|p| p.get(name))
                .is_some_and(|p| self.read_only(file, p));
            if !read_only && lookup(name).is_none_or(Value::is_null) {
                errs.push(format!(
                    "Required property '{name}' not found in JSON. Path '{path}'"
                ));
                return;
            }
        }
        if let Some(props) = props {
            for (name, ps) in props {
                if let Some(val) = lookup(name)
                    && !self.read_only(file, ps)
                {
                    self.check(
                        file,
                        ps,
                        None,
                        val,
                        &join(path, name),
                        errs,
                        false,
                        depth + 1,
                    );
                }
            }
        }
        if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            for (k, val) in obj {
                if props.is_some_and(|p| p.keys().any(|n| n.eq_ignore_ascii_case(k))) {
                    continue;
                }
                self.check(file, ap, None, val, &join(path, k), errs, false, depth + 1);
            }
        }
    }

    /// `readOnly` on the property or on the definition it refers to.
    fn read_only(&self, file: &str, p: &Value) -> bool {
        if p.get("readOnly") == Some(&Value::Bool(true)) {
            return true;
        }
        p.get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.set.resolve(file, r))
            .is_some_and(|(_, t)| t.get("readOnly") == Some(&Value::Bool(true)))
    }
}

/// Required properties of nested items, checked without a specs directory, from
/// `networkSecurityGroup.json` (`SecurityRulePropertiesFormat`: protocol, access, priority,
/// direction) and `loadBalancer.json` (`LoadBalancingRulePropertiesFormat`: protocol,
/// frontendPort; `ProbePropertiesFormat`: protocol, port) of Microsoft.Network 2023-11-01.
const FALLBACK: &[(&str, &str, &[&str])] = &[
    (
        types::NSG,
        "securityRules",
        &["protocol", "access", "priority", "direction"],
    ),
    (
        types::LB,
        "loadBalancingRules",
        &["protocol", "frontendPort"],
    ),
    (types::LB, "probes", &["protocol", "port"]),
];

/// The hand-written checks used when no specs directory is configured.
pub(crate) fn fallback(rtype: &str, body: &Value) -> Result<(), ArmError> {
    for (t, array, required) in FALLBACK {
        if !t.eq_ignore_ascii_case(rtype) {
            continue;
        }
        let items = body
            .pointer(&format!("/properties/{array}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for (i, item) in items.enumerate() {
            for r in *required {
                if item
                    .pointer(&format!("/properties/{r}"))
                    .is_none_or(Value::is_null)
                {
                    return Err(invalid(&format!(
                        "Required property '{r}' not found in JSON. Path 'properties.{array}[{i}].properties'"
                    )));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &str) -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn scope_templates_span_segments() {
        let t = segs("/{scope}/providers/Microsoft.Authorization/roleAssignments/{n}");
        assert!(template_matches(
            &t,
            &segs(
                "/subscriptions/s/resourceGroups/g/providers/Microsoft.Authorization/roleAssignments/x"
            )
        ));
        assert!(!template_matches(
            &t,
            &segs("/subscriptions/s/resourceGroups/g")
        ));
    }

    #[test]
    fn fallback_names_the_missing_rule_property() {
        let body = serde_json::json!({"properties": {"securityRules": [
            {"name": "r", "properties": {"protocol": "Tcp", "priority": 100}}
        ]}});
        let e = fallback(types::NSG, &body)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(
            e.contains("'access'") && e.contains("securityRules[0].properties"),
            "{e}"
        );
    }
}
