//! Kubernetes verbs: get, list, create, replace, patch, delete.
//!
//! Defaulting done here: Secret `stringData` is folded into base64 `data` and `type`
//! defaults to `Opaque`; Services get a `clusterIP` and `type: ClusterIP`; Namespaces get
//! `status.phase: Active` and the `kubernetes` finalizer.

// Errors here are finished HTTP responses, produced at most once per request and returned
// straight to the client; boxing them would only add an allocation.
#![allow(clippy::result_large_err)]

use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::{Kind, status_response, status_with_details, store, with_state};
use crate::http::{Req, json as json_resp};
use crate::sim::Simulator;
use crate::state::State;
use crate::util::{self, str_at};

pub(crate) fn get(sim: &Simulator, kind: &Kind, ns: &str, name: &str) -> Response {
    with_state(sim, |st, _| match store::get(st, &kind.key(), ns, name) {
        Some(o) => json_resp(200, o),
        None => not_found(kind, name),
    })
}

fn not_found(kind: &Kind, name: &str) -> Response {
    let res = if kind.group.is_empty() {
        kind.plural.to_string()
    } else {
        format!("{}.{}", kind.plural, kind.group)
    };
    status_with_details(
        404,
        "NotFound",
        &format!("{res} \"{name}\" not found"),
        json!({"name": name, "group": kind.group, "kind": kind.plural}),
    )
}

/// `labelSelector` (`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated) and
/// `fieldSelector` (`metadata.name`, `metadata.namespace`, with `=`/`==`/`!=`).
pub(crate) fn selectors_match(req: &Req, obj: &Value) -> bool {
    let labels = obj
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    let label = |k: &str| labels.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(sel) = req.q("labelSelector") {
        for term in sel.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let ok = if let Some((k, v)) = term.split_once("!=") {
                label(k.trim()).as_deref() != Some(v.trim())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                label(k.trim()).as_deref() == Some(v.trim())
            } else if let Some(k) = term.strip_prefix('!') {
                label(k.trim()).is_none()
            } else {
                label(term).is_some()
            };
            if !ok {
                return false;
            }
        }
    }
    if let Some(sel) = req.q("fieldSelector") {
        for term in sel.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (k, v, neg) = if let Some((k, v)) = term.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, v, false)
            } else {
                continue;
            };
            let actual = match k.trim() {
                "metadata.name" => str_at(obj, "/metadata/name"),
                "metadata.namespace" => str_at(obj, "/metadata/namespace"),
                _ => None,
            };
            if (actual == Some(v.trim())) == neg {
                return false;
            }
        }
    }
    true
}

pub(crate) fn list(sim: &Simulator, req: &Req, kind: &Kind, ns: Option<&str>) -> Response {
    with_state(sim, |st, _| {
        let key = kind.key();
        let mut entries: Vec<_> = st
            .kube
            .values()
            .filter(|e| e.kind_key == key && ns.is_none_or(|n| e.namespace == n))
            .collect();
        entries.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let items: Vec<Value> = entries
            .into_iter()
            .map(|e| e.object.clone())
            .filter(|o| selectors_match(req, o))
            .collect();
        json_resp(
            200,
            &json!({
                "kind": format!("{}List", kind.kind),
                "apiVersion": kind.api_version(),
                "metadata": {"resourceVersion": st.kube_rv.to_string()},
                "items": items,
            }),
        )
    })
}

fn parse_body(req: &Req) -> Result<Value, Response> {
    let v: Result<Value, String> = serde_json::from_slice(&req.body).or_else(|e| {
        // Server-side apply bodies may be YAML.
        let text = String::from_utf8_lossy(&req.body);
        serde_norway::from_str::<Value>(&text).map_err(|_| e.to_string())
    });
    match v {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(status_response(
            400,
            "BadRequest",
            "the body of the request must be an object",
        )),
        Err(e) => Err(status_response(
            400,
            "BadRequest",
            &format!("the body of the request was in an unknown format: {e}"),
        )),
    }
}

fn check_type_meta(kind: &Kind, obj: &Value, required: bool) -> Result<(), Response> {
    let av = obj.get("apiVersion").and_then(Value::as_str);
    let k = obj.get("kind").and_then(Value::as_str);
    if required && (av.is_none() || k.is_none()) {
        return Err(status_response(
            400,
            "BadRequest",
            "apiVersion and kind must be set",
        ));
    }
    if av.is_some_and(|a| a != kind.api_version()) || k.is_some_and(|x| x != kind.kind) {
        return Err(status_response(
            400,
            "BadRequest",
            &format!(
                "the API version/kind in the body ({}/{}) does not match the request ({}/{})",
                av.unwrap_or(""),
                k.unwrap_or(""),
                kind.api_version(),
                kind.kind
            ),
        ));
    }
    Ok(())
}

/// Drops `null` object fields, as the API server prunes nulls of non-nullable fields
/// before validating (clients serialising `Option::None` as null must not get 422).
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Defaulting and normalisation on every write.
fn normalize(st: &mut State, kind: &Kind, obj: &mut Value) {
    drop_nulls(obj);
    match kind.plural {
        "secrets" => {
            if let Some(Value::Object(sd)) =
                obj.as_object_mut().and_then(|o| o.remove("stringData"))
            {
                let data = util::obj_mut(obj, "data");
                for (k, v) in sd {
                    data.insert(k, json!(STANDARD.encode(v.as_str().unwrap_or_default())));
                }
            }
            if obj.get("type").is_none() {
                obj["type"] = json!("Opaque");
            }
        }
        "services" => {
            let spec = util::obj_mut(obj, "spec");
            util::default_field(spec, "type", json!("ClusterIP"));
            if !spec.contains_key("clusterIP") {
                let n = st.ip_next.entry("_clusterip".into()).or_insert(10);
                let ip = format!("10.96.{}.{}", (*n / 250) % 250, *n % 250 + 1);
                *n += 1;
                spec.insert("clusterIP".into(), json!(ip));
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            if obj.get("status").is_none() {
                obj["status"] = json!({"loadBalancer": {}});
            }
        }
        "namespaces" => {
            util::default_field(
                util::obj_mut(obj, "spec"),
                "finalizers",
                json!(["kubernetes"]),
            );
            if str_at(obj, "/status/phase").is_none() {
                util::obj_mut(obj, "status").insert("phase".into(), json!("Active"));
            }
        }
        _ => {}
    }
}

fn invalid(kind: &Kind, name: &str, errors: Vec<super::crd::FieldError>) -> Response {
    let summary: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.reason, "message": e.message, "field": e.field}))
        .collect();
    status_with_details(
        422,
        "Invalid",
        &format!(
            "{}.{} \"{name}\" is invalid: [{}]",
            kind.kind,
            kind.group,
            summary.join(", ")
        ),
        json!({"name": name, "group": kind.group, "kind": kind.kind, "causes": causes}),
    )
}

fn validate(sim: &Simulator, kind: &Kind, obj: &Value) -> Result<(), Response> {
    let name = str_at(obj, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    sim.inner
        .crds
        .validate(&kind.key(), obj)
        .map_err(|errs| invalid(kind, &name, errs))
}

fn namespace_ok(st: &State, kind: &Kind, ns: &str) -> Result<(), Response> {
    if !kind.namespaced {
        return Ok(());
    }
    match store::get(st, "core/namespaces", "", ns) {
        None => Err(status_with_details(
            404,
            "NotFound",
            &format!("namespaces \"{ns}\" not found"),
            json!({"name": ns, "kind": "namespaces"}),
        )),
        Some(n) if store::is_deleting(n) => Err(status_response(
            403,
            "Forbidden",
            &format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// Creates `obj` (already type-checked); shared by POST and apply-to-missing.
fn create_obj(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    kind: &Kind,
    ns: &str,
    mut obj: Value,
) -> Result<Value, Response> {
    namespace_ok(st, kind, ns)?;
    if let Some(body_ns) = str_at(&obj, "/metadata/namespace")
        && kind.namespaced
        && body_ns != ns
    {
        return Err(status_response(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let name = match str_at(&obj, "/metadata/name") {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match str_at(&obj, "/metadata/generateName") {
            Some(prefix) => {
                let suffix: String = util::uuid(st, sim.config().seed)
                    .simple()
                    .to_string()
                    .chars()
                    .take(5)
                    .collect();
                let n = format!("{prefix}{suffix}");
                util::obj_mut(&mut obj, "metadata").insert("name".into(), json!(n));
                n
            }
            None => {
                return Err(status_response(
                    422,
                    "Invalid",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        },
    };
    if store::get(st, &kind.key(), ns, &name).is_some() {
        let res = if kind.group.is_empty() {
            kind.plural.to_string()
        } else {
            format!("{}.{}", kind.plural, kind.group)
        };
        return Err(status_with_details(
            409,
            "AlreadyExists",
            &format!("{res} \"{name}\" already exists"),
            json!({"name": name, "group": kind.group, "kind": kind.plural}),
        ));
    }
    if kind.status_sub
        && kind.plural != "namespaces"
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    normalize(st, kind, &mut obj);
    if kind.namespaced {
        util::obj_mut(&mut obj, "metadata").insert("namespace".into(), json!(ns));
    }
    obj["apiVersion"] = json!(kind.api_version());
    obj["kind"] = json!(kind.kind);
    validate(sim, kind, &obj)?;
    Ok(store::create(sim, st, now, kind, ns, obj))
}

pub(crate) fn create(sim: &Simulator, req: &Req, kind: &Kind, ns: &str) -> Response {
    let obj = match parse_body(req).and_then(|o| check_type_meta(kind, &o, false).map(|_| o)) {
        Ok(o) => o,
        Err(r) => return r,
    };
    with_state(sim, |st, now| {
        match create_obj(sim, st, now, kind, ns, obj) {
            Ok(o) => json_resp(201, &o),
            Err(r) => r,
        }
    })
}

/// How a write to an existing object is applied.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// The status subresource: only `status` changes.
    status_only: bool,
    /// Refuse with 409 when the body's `resourceVersion` is not the current one.
    check_rv: bool,
}

/// Applies a new version of an existing object: keeps server-owned metadata, keeps
/// `status` (or only takes `status`, for the status subresource), checks
/// `resourceVersion`, validates, stores.
fn write_existing(
    sim: &Simulator,
    st: &mut State,
    kind: &Kind,
    (ns, name): (&str, &str),
    mut new: Value,
    Mode {
        status_only,
        check_rv,
    }: Mode,
) -> Response {
    let Some(old) = store::get(st, &kind.key(), ns, name).cloned() else {
        return not_found(kind, name);
    };
    if check_rv
        && let Some(rv) = str_at(&new, "/metadata/resourceVersion")
        && Some(rv) != str_at(&old, "/metadata/resourceVersion")
    {
        let res = if kind.group.is_empty() {
            kind.plural.to_string()
        } else {
            format!("{}.{}", kind.plural, kind.group)
        };
        return status_with_details(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {res} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
            json!({"name": name, "group": kind.group, "kind": kind.plural}),
        );
    }
    if str_at(&new, "/metadata/name").is_some_and(|n| n != name) {
        return status_response(
            400,
            "BadRequest",
            "the name of the object does not match the name on the URL",
        );
    }
    let mut obj = if status_only {
        let mut o = old.clone();
        o["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        o
    } else {
        if kind.status_sub {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        // Server-owned metadata survives any client write.
        let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
        let m = util::obj_mut(&mut new, "metadata");
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
        ] {
            match old_meta.get(k) {
                Some(v) => m.insert(k.to_string(), v.clone()),
                None => m.remove(k),
            };
        }
        m.insert("name".into(), json!(name));
        new
    };
    normalize(st, kind, &mut obj);
    obj["apiVersion"] = json!(kind.api_version());
    obj["kind"] = json!(kind.kind);
    // Finalizers cannot be added to an object that is being deleted.
    if store::is_deleting(&old) {
        let before = store::finalizers(&old);
        let after: Vec<String> = store::finalizers(&obj)
            .into_iter()
            .filter(|f| before.contains(f))
            .collect();
        store::set_finalizers(&mut obj, &after);
    }
    if let Err(r) = validate(sim, kind, &obj) {
        return r;
    }
    json_resp(200, &store::update(sim, st, kind, ns, obj))
}

pub(crate) fn replace(
    sim: &Simulator,
    req: &Req,
    kind: &Kind,
    ns: &str,
    name: &str,
    status: bool,
) -> Response {
    let obj = match parse_body(req).and_then(|o| check_type_meta(kind, &o, false).map(|_| o)) {
        Ok(o) => o,
        Err(r) => return r,
    };
    with_state(sim, |st, _| {
        write_existing(
            sim,
            st,
            kind,
            (ns, name),
            obj,
            Mode {
                status_only: status,
                check_rv: true,
            },
        )
    })
}

pub(crate) fn patch(
    sim: &Simulator,
    req: &Req,
    kind: &Kind,
    ns: &str,
    name: &str,
    status: bool,
) -> Response {
    let ctype = req
        .header("content-type")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let patch = match ctype.as_str() {
        "application/json-patch+json" => {
            match serde_json::from_slice::<json_patch::Patch>(&req.body) {
                Ok(p) => Err(p),
                Err(e) => {
                    return status_response(400, "BadRequest", &format!("invalid JSON patch: {e}"));
                }
            }
        }
        "application/apply-patch+yaml"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json" => match parse_body(req) {
            Ok(v) => Ok(v),
            Err(r) => return r,
        },
        other => {
            return status_response(
                415,
                "UnsupportedMediaType",
                &format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other})"
                ),
            );
        }
    };
    let apply = ctype == "application/apply-patch+yaml";
    if apply {
        if req.q("fieldManager").is_none_or(str::is_empty) {
            return status_response(
                422,
                "Invalid",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            );
        }
        if let Ok(p) = &patch
            && let Err(r) = check_type_meta(kind, p, true)
        {
            return r;
        }
    }
    with_state(sim, |st, now| {
        let existing = store::get(st, &kind.key(), ns, name).cloned();
        let Some(old) = existing else {
            // Server-side apply creates missing objects.
            return match (apply, status, patch) {
                (true, false, Ok(mut obj)) => {
                    util::obj_mut(&mut obj, "metadata").insert("name".into(), json!(name));
                    match create_obj(sim, st, now, kind, ns, obj) {
                        Ok(o) => json_resp(201, &o),
                        Err(r) => r,
                    }
                }
                _ => not_found(kind, name),
            };
        };
        let mut new = old.clone();
        match patch {
            Err(p) => {
                if let Err(e) = json_patch::patch(&mut new, &p) {
                    return status_response(
                        422,
                        "Invalid",
                        &format!("the JSON patch could not be applied: {e}"),
                    );
                }
            }
            Ok(p) => {
                if let Some(Value::String(pn)) = p.pointer("/metadata/name")
                    && pn != name
                {
                    return status_response(
                        400,
                        "BadRequest",
                        "the name of the object does not match the name on the URL",
                    );
                }
                json_patch::merge(&mut new, &p);
            }
        }
        // A patch only conflicts when it names a resourceVersion explicitly.
        let check_rv =
            str_at(&new, "/metadata/resourceVersion") != str_at(&old, "/metadata/resourceVersion");
        write_existing(
            sim,
            st,
            kind,
            (ns, name),
            new,
            Mode {
                status_only: status,
                check_rv,
            },
        )
    })
}

pub(crate) fn delete(sim: &Simulator, kind: &Kind, ns: &str, name: &str) -> Response {
    with_state(sim, |st, now| {
        match store::delete(sim, st, now, kind, ns, name) {
            Some(o) => json_resp(200, &o),
            None => not_found(kind, name),
        }
    })
}
