//! Kubernetes object storage: resource versions, metadata, finalizers, watch events.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Kind;
use super::fields::{self, Ctx, OPERATOR, Scope};
use crate::sim::Simulator;
use crate::state::{KubeEntry, KubeEvent, State};
use crate::util;

/// Watch events kept for watchers that resume from a resourceVersion.
const HISTORY: usize = 10_000;

pub(crate) fn key(kind_key: &str, ns: &str, name: &str) -> String {
    format!("{kind_key}|{ns}|{name}")
}

/// Bumps the global resourceVersion and stamps it on `obj`.
pub(crate) fn bump_rv(st: &mut State, obj: &mut Value) -> u64 {
    st.kube_rv += 1;
    let rv = st.kube_rv;
    util::obj_mut(obj, "metadata").insert("resourceVersion".into(), json!(rv.to_string()));
    rv
}

/// Records and broadcasts a watch event (called with the state locked, so watchers that
/// snapshot history under the same lock see every event exactly once).
pub(crate) fn emit(
    sim: &Simulator,
    st: &mut State,
    etype: &'static str,
    kind_key: &str,
    ns: &str,
    obj: Arc<Value>,
) {
    let rv = st.kube_rv;
    let ev = Arc::new(KubeEvent {
        rv,
        kind_key: kind_key.to_string(),
        namespace: ns.to_string(),
        etype,
        object: obj,
    });
    st.kube_events.push_back(ev.clone());
    while st.kube_events.len() > HISTORY {
        if let Some(old) = st.kube_events.pop_front() {
            st.kube_history_floor = old.rv;
        }
    }
    let _ = sim.inner.events.send(ev);
}

pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn set_finalizers(obj: &mut Value, f: &[String]) {
    let m = util::obj_mut(obj, "metadata");
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(f));
    }
}

pub(crate) fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// Who a write is recorded for in `managedFields`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum By<'a> {
    /// An Update by this manager (a controller writes spec/metadata and status alike;
    /// status changes are recorded against the `status` subresource).
    Update(&'a str),
    /// `managedFields` are already computed (API writes) or the write is the server's own
    /// (deletion bookkeeping): keep them as they are.
    Prepared,
}

/// The field-manager schema context of `kind`.
pub(crate) fn ctx<'a>(sim: &'a Simulator, kind: &'a Kind) -> Ctx<'a> {
    Ctx {
        schema: sim.inner.crds.schema(&kind.key()),
        plural: kind.plural,
        api_version: kind.api_version(),
    }
}

/// Records a controller's write of `new` (`old` before it) in `managedFields`.
fn record(sim: &Simulator, kind: &Kind, old: Option<&Value>, new: &mut Value, manager: &str) {
    let c = ctx(sim, kind);
    let now = util::rfc3339_secs(sim.now_ms());
    if kind.status_sub && old.is_some() {
        fields::record_update(&c, old, new, manager, Scope::Main, &now);
        let mid = new.clone();
        // Status changes are a `/status` write of the same manager.
        let mut old_status = mid.clone();
        if let (Some(o), Some(m)) = (old, old_status.as_object_mut()) {
            match o.get("status") {
                Some(s) => m.insert("status".into(), s.clone()),
                None => m.remove("status"),
            };
        }
        fields::record_update(&c, Some(&old_status), new, manager, Scope::Status, &now);
    } else {
        fields::record_update(&c, old, new, manager, Scope::All, &now);
    }
}

/// Inserts a new object (metadata filled) and emits ADDED, recorded as written by the
/// simulated operator.
pub(crate) fn create(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    kind: &Kind,
    ns: &str,
    obj: Value,
) -> Arc<Value> {
    create_by(sim, st, now, kind, ns, obj, By::Update(OPERATOR), false)
}

/// The object a create would store: server-set metadata filled in.
pub(crate) fn prepare_create(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    kind: &Kind,
    ns: &str,
    obj: &mut Value,
    by: By,
) {
    let uid = util::uuid(st, sim.config().seed).to_string();
    {
        let m = util::obj_mut(obj, "metadata");
        m.insert("uid".into(), json!(uid));
        m.insert("creationTimestamp".into(), json!(util::rfc3339_secs(now)));
        m.insert("generation".into(), json!(1));
        m.remove("deletionTimestamp");
        m.remove("resourceVersion");
        if kind.namespaced {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
    }
    obj["apiVersion"] = json!(kind.api_version());
    obj["kind"] = json!(kind.kind);
    if let By::Update(manager) = by {
        util::obj_mut(obj, "metadata").remove("managedFields");
        fields::record_update(
            &ctx(sim, kind),
            None,
            obj,
            manager,
            Scope::All,
            &util::rfc3339_secs(now),
        );
    }
}

/// Inserts a new object and emits ADDED (with `dry_run`, only returns what would be
/// stored).
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_by(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    kind: &Kind,
    ns: &str,
    mut obj: Value,
    by: By,
    dry_run: bool,
) -> Arc<Value> {
    prepare_create(sim, st, now, kind, ns, &mut obj, by);
    if dry_run {
        return Arc::new(obj);
    }
    insert_new(sim, st, kind, ns, obj)
}

fn insert_new(
    sim: &Simulator,
    st: &mut State,
    kind: &Kind,
    ns: &str,
    mut obj: Value,
) -> Arc<Value> {
    let name = util::str_at(&obj, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    bump_rv(st, &mut obj);
    let seq = st.next_seq();
    let obj = Arc::new(obj);
    st.kube.insert(
        key(&kind.key(), ns, &name),
        KubeEntry {
            kind_key: kind.key(),
            namespace: ns.to_string(),
            name,
            object: obj.clone(),
            created_seq: seq,
        },
    );
    emit(sim, st, "ADDED", &kind.key(), ns, obj.clone());
    obj
}

/// Stores a modified object: bumps resourceVersion (and generation if `spec` changed) and
/// emits MODIFIED — or removes it and emits DELETED when it is being deleted and has no
/// finalizers left. Returns the object as stored (or as last seen, when removed).
pub(crate) fn update(
    sim: &Simulator,
    st: &mut State,
    kind: &Kind,
    ns: &str,
    obj: Value,
) -> Arc<Value> {
    update_by(sim, st, kind, ns, obj, By::Update(OPERATOR), false)
}

/// [`update`] recorded for `by`; with `dry_run`, only returns what would be stored.
pub(crate) fn update_by(
    sim: &Simulator,
    st: &mut State,
    kind: &Kind,
    ns: &str,
    mut obj: Value,
    by: By,
    dry_run: bool,
) -> Arc<Value> {
    let name = util::str_at(&obj, "/metadata/name")
        .unwrap_or_default()
        .to_string();
    let k = key(&kind.key(), ns, &name);
    let old = st.kube.get(&k).map(|e| e.object.clone());
    if let By::Update(manager) = by {
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            match old
                .as_ref()
                .and_then(|o| o.pointer("/metadata/managedFields"))
            {
                Some(mf) => m.insert("managedFields".into(), mf.clone()),
                None => m.remove("managedFields"),
            };
        }
        record(sim, kind, old.as_deref(), &mut obj, manager);
    }
    if let Some(old) = &old
        && old.get("spec") != obj.get("spec")
    {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        util::obj_mut(&mut obj, "metadata").insert("generation".into(), json!(g + 1));
    }
    if dry_run {
        return Arc::new(obj);
    }
    bump_rv(st, &mut obj);
    let obj = Arc::new(obj);
    if is_deleting(&obj) && finalizers(&obj).is_empty() && kind.plural != "namespaces" {
        st.kube.remove(&k);
        emit(sim, st, "DELETED", &kind.key(), ns, obj.clone());
        return obj;
    }
    if let Some(e) = st.kube.get_mut(&k) {
        e.object = obj.clone();
    }
    emit(sim, st, "MODIFIED", &kind.key(), ns, obj.clone());
    obj
}

/// Removes an object outright (no finalizers) and emits DELETED.
pub(crate) fn remove(
    sim: &Simulator,
    st: &mut State,
    kind_key: &str,
    ns: &str,
    name: &str,
) -> Option<Value> {
    let mut obj = Arc::unwrap_or_clone(st.kube.remove(&key(kind_key, ns, name))?.object);
    bump_rv(st, &mut obj);
    let obj = Arc::new(obj);
    emit(sim, st, "DELETED", kind_key, ns, obj.clone());
    Some(Arc::unwrap_or_clone(obj))
}

/// Marks an object deleted: removed at once without finalizers, otherwise gets a
/// deletionTimestamp and waits for its finalizers to be removed.
pub(crate) fn delete(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    kind: &Kind,
    ns: &str,
    name: &str,
) -> Option<Value> {
    let k = key(&kind.key(), ns, name);
    let mut obj = Value::clone(&st.kube.get(&k)?.object);
    let is_ns = kind.plural == "namespaces";
    if finalizers(&obj).is_empty() && !is_ns {
        return remove(sim, st, &kind.key(), ns, name);
    }
    if is_deleting(&obj) {
        return Some(obj);
    }
    let m = util::obj_mut(&mut obj, "metadata");
    m.insert("deletionTimestamp".into(), json!(util::rfc3339_secs(now)));
    m.insert("deletionGracePeriodSeconds".into(), json!(0));
    if is_ns {
        util::obj_mut(&mut obj, "status").insert("phase".into(), json!("Terminating"));
    }
    Some(Arc::unwrap_or_clone(update_by(
        sim,
        st,
        kind,
        ns,
        obj,
        By::Prepared,
        false,
    )))
}

pub(crate) fn get<'a>(st: &'a State, kind_key: &str, ns: &str, name: &str) -> Option<&'a Value> {
    st.kube.get(&key(kind_key, ns, name)).map(|e| &*e.object)
}

/// The stored object, shared: a reader that goes on to change the state keeps it without
/// copying it.
pub(crate) fn get_shared(st: &State, kind_key: &str, ns: &str, name: &str) -> Option<Arc<Value>> {
    st.kube
        .get(&key(kind_key, ns, name))
        .map(|e| e.object.clone())
}
