//! What kubectl needs beyond the verbs: OpenAPI documents (`/openapi/v2`, `/openapi/v3`,
//! `/openapi/v3/{api/v1,apis/<group>/<version>}`) built from the loaded CRD schemas and
//! minimal built-in schemas, server-side tables (`Accept: application/json;as=Table;
//! v=v1;g=meta.k8s.io`) from the CRDs' `additionalPrinterColumns` (and the built-in
//! printers' usual columns), and discovery names (`shortNames`, `categories`).
//!
//! The v3 group-version documents carry a PATCH operation per kind with the
//! `fieldValidation`, `fieldManager`, `dryRun` and `force` query parameters: kubectl
//! (k8s.io/kubectl/pkg/util/openapi, `QueryParamVerifierV3.HasSupport`) looks for
//! `fieldValidation` there to decide that the server validates (`--validate=strict`).

use std::time::{Duration, UNIX_EPOCH};

use axum::response::Response;
use serde_json::{Map, Value, json};

use super::{KINDS, Kind, group_served, status_response};
use crate::http::{Req, json as json_resp};
use crate::sim::Simulator;

/// Whether the client asked for a `meta.k8s.io` Table.
pub(crate) fn wants_table(req: &Req) -> bool {
    req.header("accept")
        .is_some_and(|a| a.split(',').any(|t| t.contains("as=Table")))
}

/// `shortNames` and `categories` of a kind: from its CRD when loaded, else as the built-in
/// API (or the HyperShift CRDs) declare them.
pub(crate) fn names(sim: &Simulator, kind: &Kind) -> (Vec<String>, Vec<String>) {
    if let Some(crd) = sim.inner.crds.crd(&kind.key()) {
        let list = |p: &str| -> Vec<String> {
            crd.pointer(p)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        return (
            list("/spec/names/shortNames"),
            list("/spec/names/categories"),
        );
    }
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match kind.plural {
        "namespaces" => (v(&["ns"]), vec![]),
        "services" => (v(&["svc"]), v(&["all"])),
        "configmaps" => (v(&["cm"]), vec![]),
        "events" => (v(&["ev"]), vec![]),
        "deployments" => (v(&["deploy"]), v(&["all"])),
        "hostedclusters" => (v(&["hc", "hcs"]), vec![]),
        "nodepools" => (v(&["np", "nps"]), vec![]),
        "azureprivatelinkservices" => (v(&["azpls"]), vec![]),
        _ => (vec![], vec![]),
    }
}

// --- JSONPath (the subset printer columns use) -------------------------------------------

#[derive(Debug)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter {
        field: Vec<String>,
        neg: bool,
        value: String,
    },
}

fn parse_jsonpath(p: &str) -> Vec<Step> {
    let p = p.trim().trim_start_matches('{').trim_end_matches('}');
    let mut steps = Vec::new();
    let mut rest = p.trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                steps.push(Step::Field(r[..end].to_string()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { break };
            let inner = &r[..end];
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse() {
                steps.push(Step::Index(i));
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (lhs, neg, rhs) = match f.split_once("!=") {
                    Some((l, r)) => (l, true, r),
                    None => match f.split_once("==") {
                        Some((l, r)) => (l, false, r),
                        None => (f, false, ""),
                    },
                };
                steps.push(Step::Filter {
                    field: lhs.trim().split('.').map(str::to_string).collect(),
                    neg,
                    value: rhs.trim().trim_matches('"').trim_matches('\'').to_string(),
                });
            }
        } else {
            break;
        }
    }
    steps
}

fn eval_jsonpath<'a>(v: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut cur = vec![v];
    for s in steps {
        let mut next = Vec::new();
        for c in cur {
            match s {
                Step::Field(f) => next.extend(c.get(f)),
                Step::Index(i) => next.extend(c.get(*i)),
                Step::All => match c {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter { field, neg, value } => {
                    if let Value::Array(a) = c {
                        next.extend(a.iter().filter(|item| {
                            let got = field.iter().try_fold(*item, |x, f| x.get(f));
                            let s = match got {
                                Some(Value::String(s)) => Some(s.clone()),
                                Some(other) => Some(other.to_string()),
                                None => None,
                            };
                            match s {
                                Some(s) => (s == *value) != *neg,
                                None => *neg && !value.is_empty(),
                            }
                        }));
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

// --- Tables ------------------------------------------------------------------------------

/// `duration.HumanDuration`, as the `Age` column shows it.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s < 120 {
        format!("{s}s")
    } else if s < 600 {
        if s.is_multiple_of(60) {
            format!("{}m", s / 60)
        } else {
            format!("{}m{}s", s / 60, s % 60)
        }
    } else if s < 3 * 3600 {
        format!("{}m", s / 60)
    } else if s < 8 * 3600 {
        let m = (s / 60) % 60;
        if m == 0 {
            format!("{}h", s / 3600)
        } else {
            format!("{}h{m}m", s / 3600)
        }
    } else if s < 48 * 3600 {
        format!("{}h", s / 3600)
    } else {
        format!("{}d", s / 86400)
    }
}

fn age(sim: &Simulator, ts: Option<&str>) -> Value {
    let Some(t) = ts.and_then(|t| humantime::parse_rfc3339_weak(t).ok()) else {
        return json!("<unknown>");
    };
    let then = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default();
    json!(human_duration(Duration::from_millis(
        sim.now_ms().saturating_sub(then)
    )))
}

struct Column {
    name: String,
    ctype: String,
    format: String,
    description: String,
    priority: i64,
    path: Option<String>,
}

fn col(name: &str, ctype: &str, path: Option<&str>) -> Column {
    Column {
        name: name.into(),
        ctype: ctype.into(),
        format: if name == "Name" {
            "name".into()
        } else {
            String::new()
        },
        description: String::new(),
        priority: 0,
        path: path.map(str::to_string),
    }
}

fn columns(sim: &Simulator, kind: &Kind) -> Vec<Column> {
    let mut cols = vec![col("Name", "string", Some(".metadata.name"))];
    if let Some(v) = sim.inner.crds.version(&kind.key()) {
        let printer = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if printer.is_empty() {
            cols.push(col("Age", "date", Some(".metadata.creationTimestamp")));
        }
        for c in printer {
            let s = |k: &str| {
                c.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            cols.push(Column {
                name: s("name"),
                ctype: s("type"),
                format: s("format"),
                description: s("description"),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path: Some(s("jsonPath")),
            });
        }
        return cols;
    }
    let extra: &[(&str, &str)] = match kind.plural {
        "namespaces" => &[("Status", "string")],
        "secrets" => &[("Type", "string"), ("Data", "string")],
        "configmaps" => &[("Data", "string")],
        "services" => &[
            ("Type", "string"),
            ("Cluster-IP", "string"),
            ("External-IP", "string"),
            ("Port(s)", "string"),
        ],
        "deployments" => &[
            ("Ready", "string"),
            ("Up-to-date", "string"),
            ("Available", "string"),
        ],
        _ => &[],
    };
    for (n, t) in extra {
        cols.push(col(n, t, None));
    }
    cols.push(col("Age", "date", Some(".metadata.creationTimestamp")));
    cols
}

/// A built-in printer's cell.
fn builtin_cell(kind: &Kind, name: &str, o: &Value) -> Value {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let count = |p: &str| o.pointer(p).and_then(Value::as_object).map_or(0, Map::len);
    let i = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    match (kind.plural, name) {
        ("namespaces", "Status") => json!(s("/status/phase")),
        ("secrets", "Type") => json!(s("/type")),
        ("secrets" | "configmaps", "Data") => json!(count("/data") + count("/binaryData")),
        ("services", "Type") => json!(s("/spec/type")),
        ("services", "Cluster-IP") => json!(s("/spec/clusterIP")),
        ("services", "External-IP") => {
            let ips: Vec<String> = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.get("ip").and_then(Value::as_str))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            json!(if ips.is_empty() {
                "<none>".to_string()
            } else {
                ips.join(",")
            })
        }
        ("services", "Port(s)") => {
            let ports: Vec<String> = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|p| {
                            format!(
                                "{}/{}",
                                p.get("port").and_then(Value::as_i64).unwrap_or(0),
                                p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!(if ports.is_empty() {
                "<none>".to_string()
            } else {
                ports.join(",")
            })
        }
        ("deployments", "Ready") => json!(format!(
            "{}/{}",
            i("/status/readyReplicas"),
            i("/spec/replicas")
        )),
        ("deployments", "Up-to-date") => json!(i("/status/updatedReplicas")),
        ("deployments", "Available") => json!(i("/status/availableReplicas")),
        _ => Value::Null,
    }
}

/// A `meta.k8s.io/v1` Table of `objs` (rows carry `PartialObjectMetadata`, the default
/// `includeObject=Metadata`).
pub(crate) fn table(sim: &Simulator, kind: &Kind, objs: &[Value], _rv: Option<&str>) -> Value {
    let cols = columns(sim, kind);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": if c.ctype == "date" { "string" } else { c.ctype.as_str() },
                "format": c.format, "description": c.description, "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols
                .iter()
                .map(|c| match &c.path {
                    Some(p) => {
                        let found = eval_jsonpath(o, &parse_jsonpath(p))
                            .into_iter()
                            .next()
                            .cloned();
                        match (c.ctype.as_str(), found) {
                            ("date", Some(Value::String(t))) => age(sim, Some(&t)),
                            (_, Some(v)) => v,
                            (_, None) => Value::Null,
                        }
                    }
                    None => builtin_cell(kind, &c.name, o),
                })
                .collect();
            json!({
                "cells": cells,
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                    "metadata": o.get("metadata").cloned().unwrap_or(json!({}))},
            })
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": defs, "rows": rows})
}

// --- OpenAPI -----------------------------------------------------------------------------

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn object_meta_schema() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    let map = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string"}, "description": d});
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": s("Name must be unique within a namespace."),
            "generateName": s("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "namespace": s("Namespace defines the space within which each name must be unique."),
            "uid": s("UID is the unique in time and space value for this object."),
            "resourceVersion": s("An opaque value that represents the internal version of this object."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "creationTimestamp": s("CreationTimestamp is a timestamp representing the server time when this object was created."),
            "deletionTimestamp": s("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."),
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "labels": map("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
            "annotations": map("Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata."),
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set",
                "description": "Must be empty before the object is deleted from the registry."},
            "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."},
        },
    })
}

/// Minimal schemas of the built-in kinds (enough for `kubectl explain` and validation of
/// the fields this simulator gives meaning to; unknown nested fields are preserved).
pub(crate) fn builtin_schema(kind: &Kind) -> Value {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let strmap = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let mut props = json!({
        "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
        "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
        "metadata": {"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata.", "default": {}},
    });
    let (desc, extra) = match kind.plural {
        "namespaces" => (
            "Namespace provides a scope for Names.",
            json!({"spec": open, "status": open}),
        ),
        "secrets" => (
            "Secret holds secret data of a certain type.",
            json!({"data": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
                "stringData": strmap, "type": {"type": "string"}, "immutable": {"type": "boolean"}}),
        ),
        "configmaps" => (
            "ConfigMap holds configuration data for pods to consume.",
            json!({"data": strmap, "binaryData": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
                "immutable": {"type": "boolean"}}),
        ),
        "services" => (
            "Service is a named abstraction of software service.",
            json!({"spec": open, "status": open}),
        ),
        "deployments" => (
            "Deployment enables declarative updates for Pods and ReplicaSets.",
            json!({"spec": open, "status": open}),
        ),
        _ => ("", json!({"spec": open, "status": open})),
    };
    if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    json!({"type": "object", "description": desc, "properties": props})
}

/// The OpenAPI definition name of a kind (the Go package path the real server uses for
/// built-ins; the reversed group for custom resources, as the CRD publisher builds it).
fn def_name(kind: &Kind) -> String {
    match kind.group {
        "" => format!("io.k8s.api.core.v1.{}", kind.kind),
        "apps" => format!("io.k8s.api.apps.v1.{}", kind.kind),
        "admissionregistration.k8s.io" => {
            format!("io.k8s.api.admissionregistration.v1.{}", kind.kind)
        }
        g => {
            let rev: Vec<&str> = g.split('.').rev().collect();
            format!("{}.{}.{}", rev.join("."), kind.version, kind.kind)
        }
    }
}

fn kind_schema(sim: &Simulator, kind: &Kind) -> Value {
    let mut s = match sim.inner.crds.schema(&kind.key()) {
        Some(crd) => {
            let mut s = crd.clone();
            if let Some(p) = s.get_mut("properties").and_then(Value::as_object_mut) {
                p.insert(
                    "metadata".into(),
                    json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "description": "Standard object's metadata."}),
                );
            }
            s
        }
        None => builtin_schema(kind),
    };
    s["x-kubernetes-group-version-kind"] =
        json!([{"group": kind.group, "version": kind.version, "kind": kind.kind}]);
    s
}

fn gv_kinds(sim: &Simulator, group: &str, version: &str) -> Vec<&'static Kind> {
    KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version && group_served(sim, k.group))
        .collect()
}

fn query_param(name: &str, desc: &str) -> Value {
    json!({"name": name, "in": "query", "description": desc, "schema": {"type": "string", "uniqueItems": true}})
}

/// One OpenAPI v3 document for a group-version.
fn v3_doc(sim: &Simulator, group: &str, version: &str) -> Value {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    schemas.insert(OBJECT_META.into(), object_meta_schema());
    for k in gv_kinds(sim, group, version) {
        let name = def_name(k);
        schemas.insert(name.clone(), kind_schema(sim, k));
        let base = if group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if k.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", k.plural)
        } else {
            format!("{base}/{}/{{name}}", k.plural)
        };
        let gvk = json!({"group": k.group, "version": k.version, "kind": k.kind});
        let body_ref = json!({"$ref": format!("#/components/schemas/{name}")});
        let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": body_ref}}}});
        paths.insert(
            path,
            json!({
                "get": {"operationId": format!("read{}", k.kind), "x-kubernetes-action": "get",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok},
                "put": {"operationId": format!("replace{}", k.kind), "x-kubernetes-action": "put",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok,
                    "parameters": [query_param("dryRun", "When present, indicates that modifications should not be persisted."),
                        query_param("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
                        query_param("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.")]},
                "patch": {"operationId": format!("patch{}", k.kind), "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok,
                    "parameters": [query_param("dryRun", "When present, indicates that modifications should not be persisted."),
                        query_param("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
                        query_param("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields."),
                        {"name": "force", "in": "query", "description": "Force is going to \"force\" Apply requests.", "schema": {"type": "boolean", "uniqueItems": true}}]},
                "delete": {"operationId": format!("delete{}", k.kind), "x-kubernetes-action": "delete",
                    "x-kubernetes-group-version-kind": gvk, "responses": ok},
            }),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.31.0-hcp-simulator"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// Rewrites `#/components/schemas/` references to the v2 `#/definitions/` form.
fn v2_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                *r = r.replace("#/components/schemas/", "#/definitions/");
            }
            m.values_mut().for_each(v2_refs);
        }
        Value::Array(a) => a.iter_mut().for_each(v2_refs),
        _ => {}
    }
}

/// The group-versions served.
fn group_versions(sim: &Simulator) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for k in KINDS.iter().filter(|k| group_served(sim, k.group)) {
        if !out.contains(&(k.group, k.version)) {
            out.push((k.group, k.version));
        }
    }
    out
}

/// `/openapi/...`; `None` when the path is not an OpenAPI path.
pub(crate) fn handle(sim: &Simulator, req: &Req) -> Option<Response> {
    let s: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["openapi", "v2"] => {
            // client-go asks for the protobuf form first; a JSON-only server answers 406
            // when JSON is not acceptable at all.
            let accept = req.header("accept").unwrap_or("application/json");
            if !accept.contains("json") && !accept.contains("*/*") {
                return Some(status_response(
                    406,
                    "NotAcceptable",
                    "only the following media types are accepted: application/json",
                ));
            }
            let mut defs = Map::new();
            for (g, v) in group_versions(sim) {
                if let Some(schemas) = v3_doc(sim, g, v)
                    .pointer("/components/schemas")
                    .and_then(Value::as_object)
                {
                    defs.extend(schemas.clone());
                }
            }
            let mut doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.31.0-hcp-simulator"},
                "paths": {}, "definitions": defs});
            v2_refs(&mut doc);
            Some(json_resp(200, &doc))
        }
        ["openapi", "v3"] => {
            let mut paths = Map::new();
            for (g, v) in group_versions(sim) {
                let p = if g.is_empty() {
                    format!("api/{v}")
                } else {
                    format!("apis/{g}/{v}")
                };
                paths.insert(
                    p.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{p}")}),
                );
            }
            Some(json_resp(200, &json!({"paths": paths})))
        }
        ["openapi", "v3", "api", v] => Some(gv_response(sim, "", v)),
        ["openapi", "v3", "apis", g, v] => Some(gv_response(sim, g, v)),
        ["openapi", ..] => Some(status_response(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
        _ => None,
    }
}

fn gv_response(sim: &Simulator, group: &str, version: &str) -> Response {
    if gv_kinds(sim, group, version).is_empty() {
        return status_response(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    json_resp(200, &v3_doc(sim, group, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_filters() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Available", "status": "True"}]}});
        let r = eval_jsonpath(
            &o,
            &parse_jsonpath(".status.conditions[?(@.type==\"Available\")].status"),
        );
        assert_eq!(r, vec![&json!("True")]);
        let r = eval_jsonpath(&o, &parse_jsonpath(".status.conditions[0].type"));
        assert_eq!(r, vec![&json!("A")]);
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(Duration::from_secs(5)), "5s");
        assert_eq!(human_duration(Duration::from_secs(150)), "2m30s");
        assert_eq!(human_duration(Duration::from_secs(3 * 86400)), "3d");
    }
}
