//! Changing an object that exists, in place: what the day-2 steps share. Every write is a
//! merge patch on an object carrying our ownership labels ([`Mgmt::patch_ours`]) or a PUT
//! on an ARM resource carrying our tags; what a step changes is recorded in its ledger as
//! `updated`, never as created. The state a step found before its first write is
//! checkpointed (`before`), and its undo puts it back.

use super::env::Owner;
use crate::kube::mgmt::{Kind, Mgmt};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{StepContext, StepError};
use serde_json::{Map, Value, json};

/// Error kind of a refusal HyperShift or Azure reports in a condition (permanent).
pub const REFUSED: &str = "refused";
/// Error kind of a compute quota refusal (permanent: more quota is an operator's act).
pub const QUOTA: &str = "quota";

pub(super) fn k8s(
    kind: Kind,
    ns: &str,
    name: &str,
    action: LedgerAction,
    note: Option<String>,
) -> LedgerRecord {
    LedgerRecord {
        kind: "kubernetes".into(),
        resource_type: kind.type_name().into(),
        id: format!("{ns}/{name}"),
        action,
        persistent: false,
        note,
    }
}

pub(super) fn azure(
    resource_type: &str,
    id: &str,
    action: LedgerAction,
    note: Option<String>,
) -> LedgerRecord {
    LedgerRecord {
        kind: "azure".into(),
        resource_type: resource_type.into(),
        id: id.into(),
        action,
        persistent: false,
        note,
    }
}

/// The object `kind ns/name`, which must exist and be ours (else a permanent error: an
/// update never adopts, and never writes what another owner made).
pub(super) async fn ours_object(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    owner: &Owner,
) -> Result<kube::api::DynamicObject, StepError> {
    let Some(obj) = m.get(kind, ns, name).await? else {
        return Err(StepError::permanent(
            "not-found",
            format!(
                "{} {ns}/{name} does not exist: update-cluster changes a cluster that exists (was it deleted by hand? `hcp-workflow verify` compares the journal with what exists)",
                kind.type_name()
            ),
        ));
    };
    let labels = obj.metadata.labels.clone().unwrap_or_default();
    let labels = serde_json::to_value(&labels).unwrap_or_default();
    if !owner.owns(Some(&labels)) {
        return Err(StepError::permanent(
            "not-ours",
            format!(
                "{} {ns}/{name} does not carry this cluster's hcp-workflow labels: it is not ours to change",
                kind.type_name()
            ),
        ));
    }
    Ok(obj)
}

/// [`ours_object`]'s body (everything but its metadata).
pub(super) async fn ours(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    owner: &Owner,
) -> Result<Value, StepError> {
    Ok(ours_object(m, kind, ns, name, owner).await?.data)
}

pub(super) fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// Condition `ctype` of an object's `status.conditions`: `(status, reason, message)`.
pub(super) fn condition<'a>(obj: &'a Value, ctype: &str) -> Option<(&'a str, &'a str, &'a str)> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
        .map(|c| {
            (
                c.get("status").and_then(Value::as_str).unwrap_or("Unknown"),
                c.get("reason").and_then(Value::as_str).unwrap_or_default(),
                c.get("message").and_then(Value::as_str).unwrap_or_default(),
            )
        })
}

/// A permanent refusal when HyperShift reports `ctype=False` on `obj` (`what` names what
/// it refused).
pub(super) fn refused_if_false(obj: &Value, ctype: &str, what: &str) -> Result<(), StepError> {
    match condition(obj, ctype).filter(|c| c.0 == "False") {
        Some((_, reason, msg)) => Err(StepError::permanent(
            REFUSED,
            format!("HyperShift refused {what} ({ctype}=False, {reason}): {msg}"),
        )),
        None => Ok(()),
    }
}

/// Sets `spec.release.image` of our `kind ns/name`; the wait reason that says so.
pub(super) async fn set_release(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    image: &str,
) -> Result<String, StepError> {
    m.patch_ours(
        kind,
        ns,
        name,
        &json!({"spec": {"release": {"image": image}}}),
    )
    .await?;
    Ok(format!(
        "{} {ns}/{name} set to release {image}",
        kind.type_name()
    ))
}

pub(super) fn is_true(obj: &Value, ctype: &str) -> bool {
    condition(obj, ctype).is_some_and(|c| c.0 == "True")
}

/// A merge patch (RFC 7386) that turns `from` into `to`: keys of `to` set (objects
/// recursively), keys only in `from` set to `null`.
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = Map::new();
            for (k, vb) in b {
                match a.get(k) {
                    Some(va) if va == vb => {}
                    Some(va) => {
                        out.insert(k.clone(), merge_patch(va, vb));
                    }
                    None => {
                        out.insert(k.clone(), vb.clone());
                    }
                }
            }
            for k in a.keys() {
                if !b.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}

/// Whether every field `want` sets has that value in `have` (objects recursively; what
/// HyperShift defaults beside them is not a difference).
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| wv.is_null() || h.get(k).is_some_and(|hv| contains(hv, wv))),
        _ => have == want,
    }
}

pub(super) const BEFORE_KEY: &str = "before";

/// In an undo: what the action found before its first write (its checkpoint's `before`);
/// `None` when it never wrote.
pub(super) fn before_of<T: serde::de::DeserializeOwned>(
    ctx: &StepContext,
) -> Result<Option<T>, StepError> {
    action_checkpoint_member(ctx, BEFORE_KEY)
}

/// In an undo: member `key` of the action's checkpoint.
pub(super) fn action_checkpoint_member<T: serde::de::DeserializeOwned>(
    ctx: &StepContext,
    key: &str,
) -> Result<Option<T>, StepError> {
    let Some(Value::Object(cp)) = ctx.action_checkpoint::<Value>()? else {
        return Ok(None);
    };
    Ok(cp
        .get(key)
        .and_then(|b| serde_json::from_value::<T>(b.clone()).ok()))
}
