//! `metadata.managedFields`: field ownership and server-side apply, after
//! sigs.k8s.io/structured-merge-diff (`merge/update.go`) as the API server's field manager
//! (k8s.io/apimachinery/pkg/util/managedfields) uses it.
//!
//! A field set is the set of owned paths; a path is a list of `fieldsV1` elements
//! (`f:name`, `k:{"name":"x"}` for an item of a keyed list, `v:"x"` for a set element,
//! `i:0`), so the `fieldsV1` JSON is the set written as a tree (`.` marks an owned node that
//! also has owned children, as for a keyed list item).
//!
//! Merge semantics: maps are granular; lists are atomic unless the CRD schema says
//! `x-kubernetes-list-type: map` (merged by `x-kubernetes-list-map-keys`) or `set`. Kinds
//! without a schema (the built-ins) use the few keyed lists of [`builtin_list_type`]
//! (`metadata.finalizers` as a set, `metadata.ownerReferences` by `uid`, containers / env /
//! volumes by `name`, container ports by `containerPort`+`protocol`, Service ports by
//! `port`+`protocol`); every other list of theirs is atomic.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

pub(crate) type Path = Vec<String>;
pub(crate) type FieldSet = BTreeSet<Path>;

/// The manager the simulated controllers write as.
pub(crate) const OPERATOR: &str = "hypershift-operator";

/// Which part of an object a write covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Everything but `status` (a kind with a status subresource).
    Main,
    /// Only `status` (the `/status` subresource).
    Status,
    /// The whole object (a kind without a status subresource).
    All,
}

/// The schema context of one kind.
#[derive(Clone)]
pub(crate) struct Ctx<'a> {
    /// The CRD's `openAPIV3Schema`, `None` for built-in kinds.
    pub schema: Option<&'a Value>,
    pub plural: &'a str,
    pub api_version: String,
}

#[derive(Debug, Clone, PartialEq)]
enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// Keyed lists of the built-in kinds (they carry no schema here).
fn builtin_list_type(plural: &str, names: &[String]) -> ListType {
    let last = names.last().map(String::as_str).unwrap_or_default();
    let parent = names
        .len()
        .checked_sub(2)
        .and_then(|i| names.get(i))
        .map(String::as_str)
        .unwrap_or_default();
    let keys = |k: &[&str]| ListType::Map(k.iter().map(|s| s.to_string()).collect());
    match (plural, parent, last) {
        ("services", "spec", "ports") if names.len() == 2 => keys(&["port", "protocol"]),
        (_, _, "containers" | "initContainers" | "env" | "volumes" | "volumeMounts") => {
            keys(&["name"])
        }
        (_, "containers" | "initContainers", "ports") => keys(&["containerPort", "protocol"]),
        _ => ListType::Atomic,
    }
}

fn list_type(ctx: &Ctx, node: Option<&Value>, names: &[String]) -> ListType {
    match names {
        [m, f] if m == "metadata" && f == "finalizers" => return ListType::Set,
        [m, f] if m == "metadata" && f == "ownerReferences" => {
            return ListType::Map(vec!["uid".into()]);
        }
        [m, ..] if m == "metadata" => return ListType::Atomic,
        _ => {}
    }
    let Some(node) = node else {
        return if ctx.schema.is_none() {
            builtin_list_type(ctx.plural, names)
        } else {
            ListType::Atomic
        };
    };
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => ListType::Map(
            node.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        ),
        Some("set") => ListType::Set,
        _ => ListType::Atomic,
    }
}

fn atomic_map(ctx: &Ctx, node: Option<&Value>, names: &[String]) -> bool {
    if let Some(n) = node {
        return n.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
    }
    // LabelSelector is a `+structType=atomic` struct in the built-in APIs.
    ctx.schema.is_none() && ctx.plural == "deployments" && names == ["spec", "selector"]
}

fn child<'a>(node: Option<&'a Value>, names: &[String], key: &str) -> Option<&'a Value> {
    // metadata is ObjectMeta, not described by CRD schemas.
    if names.is_empty() && key == "metadata" {
        return None;
    }
    let n = node?;
    n.get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
}

fn items(node: Option<&Value>) -> Option<&Value> {
    node?.get("items")
}

/// Fields the field manager never tracks (`managedfields/internal/stripmeta.go`).
fn ignored(names: &[String], key: &str, scope: Scope) -> bool {
    match names {
        [] => match key {
            "apiVersion" | "kind" => true,
            "status" => scope == Scope::Main,
            _ => scope == Scope::Status,
        },
        [m] if m == "metadata" => matches!(
            key,
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "managedFields"
                | "selfLink"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "generateName"
        ),
        _ => false,
    }
}

fn key_elem(item: &Value, keys: &[String]) -> String {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let parts: Vec<String> = sorted
        .into_iter()
        .filter_map(|k| item.get(k).map(|v| format!("{}:{}", json!(k), v)))
        .collect();
    format!("k:{{{}}}", parts.join(","))
}

/// The set of paths `v` sets (`TypedValue.ToFieldSet`).
pub(crate) fn field_set(ctx: &Ctx, v: &Value, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    walk(
        ctx,
        v,
        ctx.schema,
        &mut Vec::new(),
        &mut Vec::new(),
        scope,
        &mut out,
    );
    out
}

fn walk(
    ctx: &Ctx,
    v: &Value,
    node: Option<&Value>,
    names: &mut Vec<String>,
    path: &mut Path,
    scope: Scope,
    out: &mut FieldSet,
) {
    match v {
        Value::Object(m) if path.is_empty() || !atomic_map(ctx, node, names) => {
            if m.is_empty() && !path.is_empty() {
                out.insert(path.clone());
            }
            for (k, c) in m {
                if ignored(names, k, scope) || c.is_null() {
                    continue;
                }
                let sub = child(node, names, k);
                path.push(format!("f:{k}"));
                names.push(k.clone());
                walk(ctx, c, sub, names, path, scope, out);
                names.pop();
                path.pop();
            }
        }
        Value::Array(a) => match list_type(ctx, node, names) {
            ListType::Set => {
                if a.is_empty() {
                    out.insert(path.clone());
                }
                for item in a {
                    let mut p = path.clone();
                    p.push(format!("v:{item}"));
                    out.insert(p);
                }
            }
            ListType::Map(keys) if a.iter().all(Value::is_object) => {
                if a.is_empty() {
                    out.insert(path.clone());
                }
                let inode = items(node);
                for item in a {
                    path.push(key_elem(item, &keys));
                    out.insert(path.clone());
                    if let Value::Object(m) = item {
                        for (k, c) in m {
                            if c.is_null() {
                                continue;
                            }
                            let sub = child(inode, &[], k).or_else(|| {
                                inode
                                    .and_then(|n| n.get("properties"))
                                    .and_then(|p| p.get(k))
                            });
                            path.push(format!("f:{k}"));
                            names.push(k.clone());
                            walk(ctx, c, sub, names, path, scope, out);
                            names.pop();
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
            _ => {
                out.insert(path.clone());
            }
        },
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

fn elem_matches(elem: &str, item: &Value) -> bool {
    if let Some(k) = elem.strip_prefix("k:") {
        let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(k) else {
            return false;
        };
        keys.iter().all(|(k, v)| item.get(k) == Some(v))
    } else if let Some(v) = elem.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item)
    } else {
        false
    }
}

fn step<'a>(v: &'a Value, elem: &str) -> Option<&'a Value> {
    if let Some(f) = elem.strip_prefix("f:") {
        return v.get(f);
    }
    if let Some(i) = elem.strip_prefix("i:") {
        return v.get(i.parse::<usize>().ok()?);
    }
    v.as_array()?.iter().find(|item| elem_matches(elem, item))
}

fn get_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, e| step(cur, e))
}

fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for e in parent {
        let next = if let Some(f) = e.strip_prefix("f:") {
            cur.get_mut(f)
        } else if let Some(i) = e.strip_prefix("i:") {
            match i.parse::<usize>() {
                Ok(i) => cur.get_mut(i),
                Err(_) => None,
            }
        } else {
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|item| elem_matches(e, item)))
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(a) = cur.as_array_mut() {
        a.retain(|item| !elem_matches(last, item));
    }
}

/// After removing `path`, removes the maps it leaves empty on the way up (structured-merge-diff
/// `removingWalker.doMap` keeps a map only when something is left in it, so a struct whose
/// last owned field the manager stopped applying goes with it — `spec.autoScaling` when a
/// NodePool goes back to `replicas`). Top-level fields (`spec`) stay, and so does an empty
/// map someone owns as such (`owned`).
fn prune_emptied(v: &mut Value, path: &[String], owned: impl Fn(&[String]) -> bool) {
    for i in (2..path.len()).rev() {
        let parent = &path[..i];
        if !parent.last().is_some_and(|e| e.starts_with("f:")) || owned(parent) {
            return;
        }
        match get_at(v, parent) {
            Some(Value::Object(m)) if m.is_empty() => remove_at(v, parent),
            _ => return,
        }
    }
}

/// Merges an applied configuration into the live object (`TypedValue.Merge`).
fn merge(
    ctx: &Ctx,
    live: &mut Value,
    applied: &Value,
    node: Option<&Value>,
    names: &mut Vec<String>,
) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a))
            if names.is_empty() || !atomic_map(ctx, node, names) =>
        {
            for (k, av) in a {
                if av.is_null() {
                    continue;
                }
                let sub = child(node, names, k);
                names.push(k.clone());
                match l.get_mut(k) {
                    Some(lv) => merge(ctx, lv, av, sub, names),
                    None => {
                        l.insert(k.clone(), av.clone());
                    }
                }
                names.pop();
            }
        }
        (Value::Array(l), Value::Array(a)) => match list_type(ctx, node, names) {
            ListType::Map(keys) if a.iter().all(Value::is_object) => {
                let inode = items(node);
                for ai in a {
                    let elem = key_elem(ai, &keys);
                    match l.iter_mut().find(|li| elem_matches(&elem, li)) {
                        Some(li) => {
                            let mut inner = Vec::new();
                            // Item fields resolve against the item schema.
                            if let (Value::Object(lm), Value::Object(am)) = (li, ai) {
                                for (k, av) in am {
                                    if av.is_null() {
                                        continue;
                                    }
                                    let sub = inode
                                        .and_then(|n| n.get("properties"))
                                        .and_then(|p| p.get(k));
                                    inner.clone_from(names);
                                    inner.push(k.clone());
                                    match lm.get_mut(k) {
                                        Some(lv) => merge(ctx, lv, av, sub, &mut inner),
                                        None => {
                                            lm.insert(k.clone(), av.clone());
                                        }
                                    }
                                }
                            }
                        }
                        None => l.push(ai.clone()),
                    }
                }
            }
            ListType::Set => {
                for ai in a {
                    if !l.contains(ai) {
                        l.push(ai.clone());
                    }
                }
            }
            _ => *l = a.clone(),
        },
        (l, a) => *l = a.clone(),
    }
}

/// Paths of `new` that are added or whose (leaf) value changed relative to `old`.
fn changed(ctx: &Ctx, old: &Value, new: &Value, scope: Scope) -> (FieldSet, FieldSet) {
    let old_set = field_set(ctx, old, scope);
    let new_set = field_set(ctx, new, scope);
    let is_leaf = |set: &FieldSet, p: &Path| {
        !set.range(p.clone()..)
            .nth(1)
            .is_some_and(|q| q.starts_with(p))
    };
    let changed: FieldSet = new_set
        .iter()
        .filter(|p| {
            !old_set.contains(*p) || (is_leaf(&new_set, p) && get_at(old, p) != get_at(new, p))
        })
        .cloned()
        .collect();
    let removed: FieldSet = old_set.difference(&new_set).cloned().collect();
    (changed, removed)
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    set: FieldSet,
}

impl Entry {
    fn is(&self, name: &str, op: &str, sub: Option<&str>) -> bool {
        self.manager == name && self.operation == op && self.subresource.as_deref() == sub
    }
    /// How conflict messages name the manager (`printManager`).
    fn display(&self) -> String {
        if self.operation == "Update" {
            format!("{} using {}", json!(self.manager), self.api_version)
        } else {
            json!(self.manager).to_string()
        }
    }
}

fn set_from_json(v: &Value, path: &mut Path, out: &mut FieldSet) {
    if let Value::Object(m) = v {
        for (k, c) in m {
            if k == "." {
                out.insert(path.clone());
                continue;
            }
            path.push(k.clone());
            if c.as_object().is_some_and(Map::is_empty) {
                out.insert(path.clone());
            } else {
                set_from_json(c, path, out);
            }
            path.pop();
        }
    }
}

#[derive(Default)]
struct Node {
    owned: bool,
    children: BTreeMap<String, Node>,
}

fn node_json(n: &Node) -> Value {
    let mut m = Map::new();
    if n.owned && !n.children.is_empty() {
        m.insert(".".into(), json!({}));
    }
    for (k, c) in &n.children {
        m.insert(k.clone(), node_json(c));
    }
    Value::Object(m)
}

/// A field set as `fieldsV1` JSON.
pub(crate) fn set_to_json(set: &FieldSet) -> Value {
    let mut root = Node::default();
    for p in set {
        let mut cur = &mut root;
        for e in p {
            cur = cur.children.entry(e.clone()).or_default();
        }
        cur.owned = true;
    }
    node_json(&root)
}

fn entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
                    let mut set = FieldSet::new();
                    if let Some(f) = e.get("fieldsV1") {
                        set_from_json(f, &mut Vec::new(), &mut set);
                    }
                    Entry {
                        manager: s("manager").unwrap_or_default(),
                        operation: s("operation").unwrap_or_else(|| "Update".into()),
                        api_version: s("apiVersion").unwrap_or_default(),
                        time: s("time"),
                        subresource: s("subresource"),
                        set,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn write_entries(obj: &mut Value, entries: Vec<Entry>) {
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "fieldsType": "FieldsV1", "fieldsV1": set_to_json(&e.set),
            });
            if let Some(t) = e.time {
                v["time"] = json!(t);
            }
            if let Some(s) = e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

fn subresource(scope: Scope) -> Option<&'static str> {
    (scope == Scope::Status).then_some("status")
}

/// Records an Update by `manager` of `scope` (`old` is `None` on create): it owns what it
/// added or changed, which no other manager owns any longer; removed fields are owned by
/// nobody (`Updater.Update`, which never conflicts).
pub(crate) fn record_update(
    ctx: &Ctx,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    scope: Scope,
    now: &str,
) {
    let mut list = old.map(entries).unwrap_or_default();
    let empty = json!({});
    let (changed, removed) = changed(ctx, old.unwrap_or(&empty), new, scope);
    if changed.is_empty() && removed.is_empty() {
        write_entries(new, list);
        return;
    }
    for e in &mut list {
        e.set
            .retain(|p| !changed.contains(p) && !removed.iter().any(|r| p.starts_with(r)));
    }
    let sub = subresource(scope);
    match list.iter_mut().find(|e| e.is(manager, "Update", sub)) {
        Some(e) => {
            e.set.extend(changed);
            e.time = Some(now.to_string());
            e.api_version.clone_from(&ctx.api_version);
        }
        None => list.push(Entry {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version: ctx.api_version.clone(),
            time: Some(now.to_string()),
            subresource: sub.map(str::to_string),
            set: changed,
        }),
    }
    write_entries(new, list);
}

/// One apply conflict: the manager as conflict messages name it, and the field path.
#[derive(Debug, Clone)]
pub(crate) struct Conflict {
    pub manager: String,
    pub sort_key: (String, String),
    pub path: String,
}

/// A path as `fieldpath.Path.String()` prints it: `.spec.ports[port=80,protocol="TCP"]`.
pub(crate) fn path_string(p: &Path) -> String {
    let mut s = String::new();
    for e in p {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                Ok(Value::Object(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                _ => vec![k.to_string()],
            };
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = e.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// Server-side apply of `applied` by `manager` onto `old` (`Updater.Apply`): merges,
/// refuses changes to fields other managers own unless `force` (which takes them over),
/// and removes the fields `manager` applied before and no longer applies when nobody else
/// owns them. `old` is `None` when the apply creates the object.
pub(crate) fn apply(
    ctx: &Ctx,
    old: Option<&Value>,
    applied: &Value,
    manager: &str,
    scope: Scope,
    force: bool,
    now: &str,
) -> Result<Value, Vec<Conflict>> {
    let empty = json!({});
    let base = old.unwrap_or(&empty);
    let mut list = old.map(entries).unwrap_or_default();
    let applied_set = field_set(ctx, applied, scope);
    let mut new = base.clone();
    if old.is_some() {
        merge(ctx, &mut new, applied, ctx.schema, &mut Vec::new());
    } else {
        new = applied.clone();
    }
    let (changed, _) = changed(ctx, base, &new, scope);
    let sub = subresource(scope);
    let mut conflicts = Vec::new();
    for e in &list {
        if e.is(manager, "Apply", sub) {
            continue;
        }
        for p in e.set.intersection(&changed) {
            conflicts.push(Conflict {
                manager: e.display(),
                sort_key: (e.manager.clone(), e.operation.clone()),
                path: path_string(p),
            });
        }
    }
    if !conflicts.is_empty() {
        if !force {
            conflicts.sort_by(|a, b| a.sort_key.cmp(&b.sort_key));
            return Err(conflicts);
        }
        for e in &mut list {
            if !e.is(manager, "Apply", sub) {
                e.set.retain(|p| !changed.contains(p));
            }
        }
    }
    let prev = list
        .iter()
        .find(|e| e.is(manager, "Apply", sub))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    let mut gone: Vec<&Path> = prev.difference(&applied_set).collect();
    gone.sort_by_key(|p| p.len());
    for p in gone {
        let owned_elsewhere = list
            .iter()
            .any(|e| !e.is(manager, "Apply", sub) && e.set.iter().any(|q| q.starts_with(p)))
            || applied_set.iter().any(|q| q.starts_with(p));
        if !owned_elsewhere {
            remove_at(&mut new, p);
            prune_emptied(&mut new, p, |q| {
                applied_set.contains(q) || list.iter().any(|e| e.set.contains(q))
            });
        }
    }
    match list.iter_mut().find(|e| e.is(manager, "Apply", sub)) {
        Some(e) => {
            e.set = applied_set;
            e.time = Some(now.to_string());
            e.api_version.clone_from(&ctx.api_version);
        }
        None => list.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: ctx.api_version.clone(),
            time: Some(now.to_string()),
            subresource: sub.map(str::to_string),
            set: applied_set,
        }),
    }
    if new.get("metadata").is_none() {
        new["metadata"] = json!({});
    }
    write_entries(&mut new, list);
    Ok(new)
}

/// The conflict message and causes of a 409 (`managedfields/internal/conflict.go`:
/// `NewConflictError`, `getConflictMessage`).
pub(crate) fn conflict_status(conflicts: &[Conflict]) -> (String, Vec<Value>) {
    let causes = conflicts
        .iter()
        .map(|c| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.manager), "field": c.path})
        })
        .collect();
    let message = if let [c] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager, c.path
        )
    } else {
        let mut lines = Vec::new();
        let mut last: Option<&str> = None;
        for c in conflicts {
            if last != Some(c.manager.as_str()) {
                lines.push(format!("conflicts with {}:", c.manager));
                last = Some(&c.manager);
            }
            lines.push(format!("- {}", c.path));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    (message, causes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx<'static> {
        Ctx {
            schema: None,
            plural: "configmaps",
            api_version: "v1".into(),
        }
    }

    #[test]
    fn fields_v1_round_trips() {
        let obj =
            json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["x"]}, "data": {"k": "v"}});
        let set = field_set(&ctx(), &obj, Scope::All);
        let j = set_to_json(&set);
        assert_eq!(
            j,
            json!({"f:data": {"f:k": {}}, "f:metadata": {"f:finalizers": {"v:\"x\"": {}}, "f:labels": {"f:a": {}}}})
        );
        let mut back = FieldSet::new();
        set_from_json(&j, &mut Vec::new(), &mut back);
        assert_eq!(back, set);
    }

    #[test]
    fn apply_conflicts_and_force() {
        let c = ctx();
        let a = apply(
            &c,
            None,
            &json!({"data": {"x": "1", "y": "2"}}),
            "A",
            Scope::All,
            false,
            "t",
        )
        .unwrap_or_default();
        let err = apply(
            &c,
            Some(&a),
            &json!({"data": {"x": "9"}}),
            "B",
            Scope::All,
            false,
            "t",
        );
        let Err(conf) = err else {
            panic!("expected a conflict")
        };
        let (msg, _) = conflict_status(&conf);
        assert_eq!(
            msg,
            "Apply failed with 1 conflict: conflict with \"A\": .data.x"
        );
        let forced = apply(
            &c,
            Some(&a),
            &json!({"data": {"x": "9"}}),
            "B",
            Scope::All,
            true,
            "t",
        )
        .unwrap_or_default();
        assert_eq!(forced.pointer("/data/x"), Some(&json!("9")));
        // A stops applying y: removed, nobody else owns it.
        let again = apply(
            &c,
            Some(&forced),
            &json!({"data": {}}),
            "A",
            Scope::All,
            false,
            "t",
        )
        .unwrap_or_default();
        assert_eq!(again.pointer("/data/y"), None);
        assert_eq!(again.pointer("/data/x"), Some(&json!("9")));
    }
}
