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

use super::{Kind, fields, status_response, status_with_details, store, with_state};
use crate::http::{Req, json as json_resp};
use crate::sim::Simulator;
use crate::state::State;
use crate::util::{self, str_at};

pub(crate) fn get(sim: &Simulator, req: &Req, kind: &Kind, ns: &str, name: &str) -> Response {
    with_state(sim, |st, _| match store::get(st, &kind.key(), ns, name) {
        Some(o) if super::openapi::wants_table(req) => json_resp(
            200,
            &super::openapi::table(sim, kind, std::slice::from_ref(o), None),
        ),
        Some(o) => json_resp(200, o),
        None => not_found(kind, name),
    })
}

fn not_found(kind: &Kind, name: &str) -> Response {
    status_with_details(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", resource_name(kind)),
        json!({"name": name, "group": kind.group, "kind": kind.plural}),
    )
}

/// `plural` or `plural.group`, as API errors name a resource.
fn resource_name(kind: &Kind) -> String {
    if kind.group.is_empty() {
        kind.plural.to_string()
    } else {
        format!("{}.{}", kind.plural, kind.group)
    }
}

fn bad_request(message: &str) -> Response {
    status_response(400, "BadRequest", message)
}

/// One label selector requirement.
#[derive(Debug, Clone)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// Splits a selector on the commas outside `( )`.
fn split_terms(sel: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in sel.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Parses a `labelSelector` (equality- and set-based: `k=v`, `k==v`, `k!=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`), as `labels.Parse` does.
fn parse_labels(sel: &str) -> Result<Vec<LabelReq>, String> {
    let set = |rest: &str| -> Result<Vec<String>, String> {
        let inner = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| format!("unable to parse requirement: found '{rest}', expected: '('"))?;
        Ok(inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect())
    };
    split_terms(sel)
        .into_iter()
        .map(|t| {
            if let Some((k, rest)) = t.split_once(" notin ") {
                return Ok(LabelReq::NotIn(k.trim().into(), set(rest)?));
            }
            if let Some((k, rest)) = t.split_once(" in ") {
                return Ok(LabelReq::In(k.trim().into(), set(rest)?));
            }
            if let Some((k, v)) = t.split_once("!=") {
                return Ok(LabelReq::NotEq(k.trim().into(), v.trim().into()));
            }
            if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                return Ok(LabelReq::Eq(k.trim().into(), v.trim().into()));
            }
            if let Some(k) = t.strip_prefix('!') {
                return Ok(LabelReq::NotExists(k.trim().into()));
            }
            if t.contains(' ') || t.contains('(') {
                return Err(format!("unable to parse requirement: {t}"));
            }
            Ok(LabelReq::Exists(t))
        })
        .collect()
}

/// Field selectors each kind supports beyond `metadata.name` / `metadata.namespace`
/// (the built-ins' `AddFieldLabelConversionFunc`s; custom resources support only these
/// two unless the CRD declares `selectableFields`, which the HyperShift CRDs do not).
fn field_supported(kind: &Kind, field: &str) -> bool {
    matches!(field, "metadata.name" | "metadata.namespace")
        || matches!(
            (kind.plural, field),
            ("secrets", "type")
                | ("namespaces", "status.phase")
                | ("services", "spec.clusterIP" | "spec.type")
        )
}

/// Parses a `fieldSelector` into `(field, value, negated)` terms; an unsupported field is
/// refused as the API server does (400 `field label not supported: X`).
fn parse_fields(kind: &Kind, sel: &str) -> Result<Vec<(String, String, bool)>, String> {
    sel.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            let (k, v, neg) = if let Some((k, v)) = t.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                (k, v, false)
            } else {
                return Err(format!("invalid selector: '{t}'; can't understand '{t}'"));
            };
            let k = k.trim();
            if !field_supported(kind, k) {
                return Err(format!("field label not supported: {k}"));
            }
            Ok((k.to_string(), v.trim().to_string(), neg))
        })
        .collect()
}

/// Parsed `labelSelector` and `fieldSelector` of a list or watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selectors {
    labels: Vec<LabelReq>,
    fields: Vec<(String, String, bool)>,
}

impl Selectors {
    /// Parses the request's selectors; a malformed or unsupported one is a 400 Status.
    pub(crate) fn parse(req: &Req, kind: &Kind) -> Result<Selectors, Response> {
        let labels = match req.q("labelSelector") {
            Some(s) => parse_labels(s).map_err(|e| bad_request(&e))?,
            None => Vec::new(),
        };
        let fields = match req.q("fieldSelector") {
            Some(s) => parse_fields(kind, s).map_err(|e| bad_request(&e))?,
            None => Vec::new(),
        };
        Ok(Selectors { labels, fields })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let label = |k: &str| {
            obj.pointer("/metadata/labels")
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
        };
        let labels_ok = self.labels.iter().all(|r| match r {
            LabelReq::Eq(k, v) => label(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => label(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => label(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            LabelReq::Exists(k) => label(k).is_some(),
            LabelReq::NotExists(k) => label(k).is_none(),
        });
        labels_ok
            && self.fields.iter().all(|(k, v, neg)| {
                let ptr = format!("/{}", k.replace('.', "/"));
                let actual = str_at(obj, &ptr).unwrap_or_default();
                (actual == v) != *neg
            })
    }
}

/// A `continue` token: base64 of the JSON the API server's etcd3 store encodes
/// (`{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`); opaque to clients.
fn continue_token(rv: u64, start: &str) -> String {
    STANDARD.encode(
        json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start}\u{0}")}).to_string(),
    )
}

fn parse_continue(tok: &str) -> Result<String, Response> {
    let bad = || {
        bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = STANDARD.decode(tok).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    v.get("start")
        .and_then(Value::as_str)
        .map(|s| s.trim_end_matches('\u{0}').to_string())
        .ok_or_else(bad)
}

pub(crate) fn list(sim: &Simulator, req: &Req, kind: &Kind, ns: Option<&str>) -> Response {
    let sel = match Selectors::parse(req, kind) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let limit = req
        .q("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let start = match req.q("continue").filter(|c| !c.is_empty()) {
        Some(c) => match parse_continue(c) {
            Ok(s) => Some(s),
            Err(r) => return r,
        },
        None => None,
    };
    with_state(sim, |st, _| {
        let key = kind.key();
        let mut entries: Vec<_> = st
            .kube
            .values()
            .filter(|e| e.kind_key == key && ns.is_none_or(|n| e.namespace == n))
            .collect();
        entries.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let matching: Vec<_> = entries
            .into_iter()
            .filter(|e| {
                start
                    .as_ref()
                    .is_none_or(|s| format!("{}/{}", e.namespace, e.name) > *s)
            })
            .filter(|e| sel.matches(&e.object))
            .collect();
        let page = limit.unwrap_or(usize::MAX).min(matching.len());
        let items: Vec<Value> = matching[..page]
            .iter()
            .map(|e| Value::clone(&e.object))
            .collect();
        let mut meta = json!({"resourceVersion": st.kube_rv.to_string()});
        // More left after the page: a continue token (and, without selectors, the count of
        // what is left: `remainingItemCount`).
        let remaining = matching.len() - page;
        if remaining > 0
            && let Some(last) = page.checked_sub(1).and_then(|i| matching.get(i))
        {
            let last_key = format!("{}/{}", last.namespace, last.name);
            meta["continue"] = json!(continue_token(st.kube_rv, &last_key));
            if sel.is_empty() {
                meta["remainingItemCount"] = json!(remaining);
            }
        }
        if super::openapi::wants_table(req) {
            let mut t = super::openapi::table(sim, kind, &items, None);
            t["metadata"] = meta;
            return json_resp(200, &t);
        }
        json_resp(
            200,
            &json!({
                "kind": format!("{}List", kind.kind),
                "apiVersion": kind.api_version(),
                "metadata": meta,
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

/// Drops `null` object fields of non-nullable fields, as the API server does before
/// validating (apiextensions' structural defaulting prunes nulls unless the schema says
/// `nullable: true`): `schema` is the object's structural schema, when its CRD is loaded.
/// A nullable field's null is kept (HyperShift's `status.version.history[].completionTime`
/// of a rollout in progress is required and null).
fn drop_nulls_with(schema: Option<&Value>, v: &mut Value) {
    let Some(schema) = schema else {
        drop_nulls(v);
        return;
    };
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let child = |k: &str| props.and_then(|p| p.get(k)).or(additional);
            m.retain(|k, x| {
                !x.is_null()
                    || child(k).is_some_and(|s| s.get("nullable") == Some(&Value::Bool(true)))
            });
            for (k, x) in m.iter_mut() {
                match child(k) {
                    Some(s) => drop_nulls_with(Some(s), x),
                    None => drop_nulls(x),
                }
            }
        }
        Value::Array(a) => {
            let items = schema.get("items");
            for x in a.iter_mut() {
                match items {
                    Some(s) => drop_nulls_with(Some(s), x),
                    None => drop_nulls(x),
                }
            }
        }
        _ => {}
    }
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
fn normalize(st: &mut State, kind: &Kind, obj: &mut Value, schema: Option<&Value>) {
    drop_nulls_with(schema, obj);
    // The API server defaults a custom resource from its CRD's structural schema before it
    // validates and stores it (what HyperShift's controllers then read: e.g. a NodePool's
    // `spec.management.replace`, which `validateManagement` requires).
    match schema {
        Some(s) => super::crd::default_with(s, obj),
        None if kind.group == super::HYPERSHIFT => builtin_crd_defaults(kind, obj),
        None => {}
    }
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

/// 422 `Invalid` as the API server words it (`apimachinery` `errors.NewInvalid`: "<Kind>.<group>
/// \"<name>\" is invalid: " + the field errors' aggregate, which is the error itself when
/// there is one and "[e1, e2]" otherwise, `utilerrors.NewAggregate`).
fn invalid(kind: &Kind, name: &str, errors: Vec<super::crd::FieldError>) -> Response {
    let summary: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    let aggregate = match summary.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", summary.join(", ")),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.reason, "message": e.message, "field": e.field}))
        .collect();
    status_with_details(
        422,
        "Invalid",
        &format!(
            "{}.{} \"{name}\" is invalid: {aggregate}",
            kind.kind, kind.group
        ),
        json!({"name": name, "group": kind.group, "kind": kind.kind, "causes": causes}),
    )
}

/// Without `--crds`, the defaults of HyperShift's CRDs that its controllers depend on
/// (`nodepools-Default.crd.yaml`: `spec.arch: amd64`, and `spec.management.replace` a
/// RollingUpdate with `maxSurge: 1`, `maxUnavailable: 0` when `management` is there).
fn builtin_crd_defaults(kind: &Kind, obj: &mut Value) {
    if kind.plural != "nodepools" {
        return;
    }
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    util::default_field(spec, "arch", json!("amd64"));
    if let Some(m) = spec.get_mut("management").and_then(Value::as_object_mut) {
        util::default_field(
            m,
            "replace",
            json!({"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}, "strategy": "RollingUpdate"}),
        );
    }
}

/// Schema validation and the hand-written CEL rules; `old` is the stored object on an
/// update (transition rules, `oldSelf`), `None` on a create.
fn validate(
    sim: &Simulator,
    kind: &Kind,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), Response> {
    let name = str_at(obj, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let mut errs = sim
        .inner
        .crds
        .validate(&kind.key(), obj)
        .err()
        .unwrap_or_default();
    errs.extend(super::crd::validation_rules(&kind.key(), obj, old));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(invalid(kind, &name, errs))
    }
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

/// The field manager of a write: the `fieldManager` parameter, else the user agent up to
/// its first `/` (`prefixFromUserAgent` in the API server's field manager).
fn manager_name(req: &Req) -> String {
    match req.q("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => req
            .header("user-agent")
            .unwrap_or_default()
            .split('/')
            .next()
            .unwrap_or_default()
            .chars()
            .take(128)
            .collect(),
    }
}

/// `dryRun=All`: everything but persisting.
fn dry_run(req: &Req) -> Result<bool, Response> {
    match req.q("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(v) => Err(status_response(
            400,
            "BadRequest",
            &format!("Invalid dry run value: {v}, valid values are: All"),
        )),
    }
}

/// Prunes unknown fields of a custom resource body and applies `fieldValidation`:
/// `Strict` refuses them (400, `strict decoding error: unknown field "spec.foo"`), `Warn`
/// (the default) answers with `Warning` headers, `Ignore` drops them silently.
fn prune_body(
    sim: &Simulator,
    req: &Req,
    kind: &Kind,
    obj: &mut Value,
) -> Result<Vec<String>, Response> {
    // Custom resources against their CRD's structural schema; built-in kinds against
    // their (minimal) OpenAPI schema, as the API server's strict decoding of their types.
    let pruned = match sim.inner.crds.schema(&kind.key()) {
        Some(_) => sim.inner.crds.prune(&kind.key(), obj),
        None if kind.group != super::HYPERSHIFT => {
            super::crd::prune_with(&super::openapi::builtin_schema(kind), obj)
        }
        None => Vec::new(),
    };
    if pruned.is_empty() {
        return Ok(Vec::new());
    }
    let quoted: Vec<String> = pruned
        .iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    match req.q("fieldValidation").unwrap_or("Warn") {
        "Strict" => Err(bad_request(&format!(
            "{k} in version \"{v}\" cannot be handled as a {k}: strict decoding error: {}",
            quoted.join(", "),
            k = kind.kind,
            v = kind.version,
        ))),
        "Ignore" => Ok(Vec::new()),
        _ => Ok(quoted),
    }
}

/// Adds `Warning: 299 - "..."` headers (RFC 7234 warn-code 299, as the API server sends).
fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let v = format!("299 - {}", json!(w));
        if let Ok(h) = axum::http::HeaderValue::from_str(&v) {
            resp.headers_mut().append("warning", h);
        }
    }
    resp
}

/// Creates `obj` (already type-checked); shared by POST and apply-to-missing.
#[allow(clippy::too_many_arguments)]
fn create_obj(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    kind: &Kind,
    ns: &str,
    mut obj: Value,
    by: store::By,
    dry_run: bool,
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
        return Err(status_with_details(
            409,
            "AlreadyExists",
            &format!("{} \"{name}\" already exists", resource_name(kind)),
            json!({"name": name, "group": kind.group, "kind": kind.plural}),
        ));
    }
    if kind.status_sub
        && kind.plural != "namespaces"
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    normalize(st, kind, &mut obj, sim.inner.crds.schema(&kind.key()));
    if kind.namespaced {
        util::obj_mut(&mut obj, "metadata").insert("namespace".into(), json!(ns));
    }
    obj["apiVersion"] = json!(kind.api_version());
    obj["kind"] = json!(kind.kind);
    validate(sim, kind, &obj, None)?;
    Ok(std::sync::Arc::unwrap_or_clone(store::create_by(
        sim, st, now, kind, ns, obj, by, dry_run,
    )))
}

/// The body of a create or a replace (POST/PUT of a whole object): parsed and type-checked,
/// `dryRun`, unknown fields pruned (their warnings), and the field manager.
fn full_body(
    sim: &Simulator,
    req: &Req,
    kind: &Kind,
) -> Result<(Value, bool, Vec<String>, String), Response> {
    let mut obj = parse_body(req).and_then(|o| check_type_meta(kind, &o, false).map(|_| o))?;
    let dry = dry_run(req)?;
    let warnings = prune_body(sim, req, kind, &mut obj)?;
    Ok((obj, dry, warnings, manager_name(req)))
}

pub(crate) fn create(sim: &Simulator, req: &Req, kind: &Kind, ns: &str) -> Response {
    let (obj, dry, warnings, manager) = match full_body(sim, req, kind) {
        Ok(b) => b,
        Err(r) => return r,
    };
    with_state(sim, |st, now| {
        let resp = match create_obj(
            sim,
            st,
            now,
            kind,
            ns,
            obj,
            store::By::Update(&manager),
            dry,
        ) {
            Ok(o) => json_resp(201, &o),
            Err(r) => r,
        };
        with_warnings(resp, &warnings)
    })
}

/// How a write to an existing object is applied.
#[derive(Debug, Clone, Copy)]
struct Mode<'a> {
    /// The status subresource: only `status` changes.
    status_only: bool,
    /// Refuse with 409 when the body's `resourceVersion` is not the current one.
    check_rv: bool,
    /// The Update manager to record, or `None` when `managedFields` of the body were
    /// computed by server-side apply.
    manager: Option<&'a str>,
    dry_run: bool,
}

fn scope_of(kind: &Kind, status_only: bool) -> fields::Scope {
    if status_only {
        fields::Scope::Status
    } else if kind.status_sub {
        fields::Scope::Main
    } else {
        fields::Scope::All
    }
}

fn conflict(kind: &Kind, name: &str, why: &str) -> Response {
    status_with_details(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            resource_name(kind)
        ),
        json!({"name": name, "group": kind.group, "kind": kind.plural}),
    )
}

/// Applies a new version of an existing object: keeps server-owned metadata, keeps
/// `status` (or only takes `status`, for the status subresource), checks
/// `resourceVersion`, records the field manager, validates, stores.
fn write_existing(
    sim: &Simulator,
    st: &mut State,
    kind: &Kind,
    (ns, name): (&str, &str),
    mut new: Value,
    Mode {
        status_only,
        check_rv,
        manager,
        dry_run,
    }: Mode,
) -> Response {
    let Some(old) = store::get(st, &kind.key(), ns, name).cloned() else {
        return not_found(kind, name);
    };
    if check_rv
        && let Some(rv) = str_at(&new, "/metadata/resourceVersion")
        && Some(rv) != str_at(&old, "/metadata/resourceVersion")
    {
        return conflict(
            kind,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        );
    }
    if str_at(&new, "/metadata/name").is_some_and(|n| n != name) {
        return status_response(
            400,
            "BadRequest",
            "the name of the object does not match the name on the URL",
        );
    }
    let new_managed = new.pointer("/metadata/managedFields").cloned();
    let mut obj = if status_only {
        let mut o = old.clone();
        o["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        if let Some(o) = o.as_object_mut()
            && o.get("status").is_some_and(Value::is_null)
        {
            o.remove("status");
        }
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
    normalize(st, kind, &mut obj, sim.inner.crds.schema(&kind.key()));
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
    // managedFields: computed by apply, else recorded for this Update.
    {
        let managed = match manager {
            None => new_managed,
            Some(_) => old.pointer("/metadata/managedFields").cloned(),
        };
        let m = util::obj_mut(&mut obj, "metadata");
        match managed {
            Some(mf) => m.insert("managedFields".into(), mf),
            None => m.remove("managedFields"),
        };
    }
    if let Some(mgr) = manager {
        let now = util::rfc3339_secs(sim.now_ms());
        let ctx = store::ctx(sim, kind);
        fields::record_update(
            &ctx,
            Some(&old),
            &mut obj,
            mgr,
            scope_of(kind, status_only),
            &now,
        );
    }
    if let Err(r) = validate(sim, kind, &obj, Some(&old)) {
        return r;
    }
    json_resp(
        200,
        &store::update_by(sim, st, kind, ns, obj, store::By::Prepared, dry_run),
    )
}

pub(crate) fn replace(
    sim: &Simulator,
    req: &Req,
    kind: &Kind,
    ns: &str,
    name: &str,
    status: bool,
) -> Response {
    let (obj, dry, warnings, manager) = match full_body(sim, req, kind) {
        Ok(b) => b,
        Err(r) => return r,
    };
    with_state(sim, |st, _| {
        let resp = write_existing(
            sim,
            st,
            kind,
            (ns, name),
            obj,
            Mode {
                status_only: status,
                check_rv: true,
                manager: Some(&manager),
                dry_run: dry,
            },
        );
        with_warnings(resp, &warnings)
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
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other})"
                ),
            );
        }
    };
    let dry = match dry_run(req) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let apply = ctype.starts_with("application/apply-patch");
    let force = req.q("force") == Some("true");
    if force && !apply {
        return status_response(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
        );
    }
    let mut patch = patch;
    let mut warnings = Vec::new();
    if apply {
        if req.q("fieldManager").is_none_or(str::is_empty) {
            return status_response(
                422,
                "Invalid",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            );
        }
        if let Ok(p) = &mut patch {
            if let Err(r) = check_type_meta(kind, p, true) {
                return r;
            }
            match prune_body(sim, req, kind, p) {
                Ok(w) => warnings = w,
                Err(r) => return r,
            }
            drop_nulls(p);
            if let Some(m) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
        }
    } else if let Ok(p) = &mut patch {
        match prune_body(sim, req, kind, p) {
            Ok(w) => warnings = w,
            Err(r) => return r,
        }
    }
    let manager = manager_name(req);
    let resp = with_state(sim, |st, now| {
        let now_s = util::rfc3339_secs(now);
        let ctx = store::ctx(sim, kind);
        let scope = scope_of(kind, status);
        let existing = store::get(st, &kind.key(), ns, name).cloned();
        let Some(old) = existing else {
            // Server-side apply creates missing objects.
            return match (apply, status, patch) {
                (true, false, Ok(mut obj)) => {
                    util::obj_mut(&mut obj, "metadata").insert("name".into(), json!(name));
                    let applied =
                        match fields::apply(&ctx, None, &obj, &manager, scope, force, &now_s) {
                            Ok(o) => o,
                            Err(c) => return apply_conflict(&c),
                        };
                    match create_obj(sim, st, now, kind, ns, applied, store::By::Prepared, dry) {
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
                if apply {
                    new = match fields::apply(&ctx, Some(&old), &p, &manager, scope, force, &now_s)
                    {
                        Ok(o) => o,
                        Err(c) => return apply_conflict(&c),
                    };
                } else {
                    json_patch::merge(&mut new, &p);
                }
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
                manager: (!apply).then_some(manager.as_str()),
                dry_run: dry,
            },
        )
    });
    with_warnings(resp, &warnings)
}

/// 409 for apply conflicts: `Status` with `reason: Conflict`, the field manager's message
/// and one `FieldManagerConflict` cause per field (`errors.NewApplyConflict`).
fn apply_conflict(conflicts: &[fields::Conflict]) -> Response {
    let (message, causes) = fields::conflict_status(conflicts);
    status_with_details(409, "Conflict", &message, json!({"causes": causes}))
}

/// Kinds whose registry returns the deleted object on an immediate delete
/// (`genericregistry.Store.ReturnDeletedObject`: Services and Namespaces among ours);
/// the others (Secrets, ConfigMaps, Deployments, custom resources) answer a `Status`
/// `Success` with the object's name, group, resource and uid (`Store.finalizeDelete`).
fn returns_deleted_object(kind: &Kind) -> bool {
    matches!(kind.plural, "services" | "namespaces")
}

pub(crate) fn delete(sim: &Simulator, req: &Req, kind: &Kind, ns: &str, name: &str) -> Response {
    let dry = match dry_run(req) {
        Ok(d) => d,
        Err(r) => return r,
    };
    // DeleteOptions may come as the body (kubectl, client-go) or not at all.
    let opts = if req.body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice::<Value>(&req.body) {
            Ok(v) => v,
            Err(e) => {
                return bad_request(&format!(
                    "the body of the request was in an unknown format: {e}"
                ));
            }
        }
    };
    let dry = dry
        || opts
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    with_state(sim, |st, now| {
        let Some(obj) = store::get(st, &kind.key(), ns, name).cloned() else {
            return not_found(kind, name);
        };
        // Preconditions (`storage.Preconditions.Check`; the conflict is
        // `errors.NewConflict` around it).
        if let Some(uid) = opts.pointer("/preconditions/uid").and_then(Value::as_str) {
            let actual = str_at(&obj, "/metadata/uid").unwrap_or_default();
            if uid != actual {
                return conflict(
                    kind,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                    ),
                );
            }
        }
        if let Some(rv) = opts
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
        {
            let actual = str_at(&obj, "/metadata/resourceVersion").unwrap_or_default();
            if rv != actual {
                return conflict(
                    kind,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {actual}"
                    ),
                );
            }
        }
        let immediate = store::finalizers(&obj).is_empty() && kind.plural != "namespaces";
        let result = if dry {
            if immediate {
                obj.clone()
            } else {
                let mut o = obj.clone();
                if !store::is_deleting(&o) {
                    let m = util::obj_mut(&mut o, "metadata");
                    m.insert("deletionTimestamp".into(), json!(util::rfc3339_secs(now)));
                    m.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
                o
            }
        } else {
            match store::delete(sim, st, now, kind, ns, name) {
                Some(o) => o,
                None => return not_found(kind, name),
            }
        };
        if immediate && !returns_deleted_object(kind) {
            return json_resp(
                200,
                &json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "group": kind.group, "kind": kind.plural,
                        "uid": str_at(&obj, "/metadata/uid").unwrap_or_default()},
                }),
            );
        }
        json_resp(200, &result)
    })
}
