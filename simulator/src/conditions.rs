//! Conditions and finalizer-driven cleanup on the simulated HyperShift objects, and reading
//! the objects of a kind: what the HostedCluster and NodePool controllers share.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::state::State;
use crate::util::{self};

pub(crate) fn set_condition(
    obj: &mut Value,
    ctype: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: u64,
) -> bool {
    let status = if status { "True" } else { "False" };
    set_condition_status(obj, ctype, status, reason, message, now)
}

/// Whether `obj` already has condition `ctype` as [`set_condition_status`] would set it
/// (nothing to write): checked on the stored object, so a controller run before every
/// request copies an object only when it changes it.
pub(crate) fn condition_is(
    obj: &Value,
    ctype: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> bool {
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
        })
        .is_some_and(|c| {
            c.get("status").and_then(Value::as_str) == Some(status)
                && c.get("reason").and_then(Value::as_str) == Some(reason)
                && c.get("message").and_then(Value::as_str) == Some(message)
                && c.get("observedGeneration").and_then(Value::as_i64) == Some(generation)
        })
}

/// Sets condition `ctype` (any status, e.g. `Unknown`) like a controller's
/// `meta.SetStatusCondition` (and HyperShift's NodePool `SetStatusCondition`): a new
/// condition is added; an existing one gets the reason, message and `observedGeneration`,
/// and a new `lastTransitionTime` only when its status changes. Returns whether anything
/// changed.
pub(crate) fn set_condition_status(
    obj: &mut Value,
    ctype: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: u64,
) -> bool {
    if condition_is(obj, ctype, status, reason, message) {
        return false;
    }
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let st = util::obj_mut(obj, "status");
    let conds = st.entry("conditions").or_insert_with(|| json!([]));
    let Value::Array(conds) = conds else {
        return false;
    };
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
    {
        // Same status: the transition time stays.
        Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => {
            c["reason"] = json!(reason);
            c["message"] = json!(message);
            c["observedGeneration"] = json!(generation);
        }
        found => {
            let cond = json!({
                "type": ctype, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": util::rfc3339_secs(now), "observedGeneration": generation,
            });
            match found {
                Some(c) => *c = cond,
                None => conds.push(cond),
            }
        }
    }
    true
}

/// Whether condition `ctype` is `True`.
pub(crate) fn condition_true(obj: &Value, ctype: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(ctype)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Whether the HostedCluster asks for HyperShift's cloud cleanup on deletion
/// (`guest_cloud::CLEANUP_ANNOTATION` = `"true"`).
pub(crate) fn cleanup_requested(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(crate::guest_cloud::CLEANUP_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// `(namespace, name, object)` of every stored object of `kind_key`, copied (for a loop
/// that writes the state as it goes).
pub(crate) fn objects(st: &State, kind_key: &str) -> Vec<(String, String, Arc<Value>)> {
    entries(st, kind_key, None)
        .map(|e| (e.namespace.clone(), e.name.clone(), e.object.clone()))
        .collect()
}

/// The stored objects of `kind_key` (in `namespace`, if given), borrowed, in key order.
/// The store is keyed `kind|namespace|name` ([`store::key`]), so this is a range of it,
/// not a scan: every request ticks the controllers, and with fifty clusters copying every
/// NodePool for each HostedCluster took most of the simulator's CPU (the fifty-cluster benchmark).
pub(crate) fn entries<'a>(
    st: &'a State,
    kind_key: &str,
    namespace: Option<&str>,
) -> impl Iterator<Item = &'a crate::state::KubeEntry> + 'a {
    let prefix = match namespace {
        Some(ns) => format!("{kind_key}|{ns}|"),
        None => format!("{kind_key}|"),
    };
    st.kube
        .range(prefix.clone()..)
        .take_while(move |(k, _)| k.starts_with(&prefix))
        .map(|(_, e)| e)
}
