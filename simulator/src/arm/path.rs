//! Parsing ARM paths into what they address.
//!
//! Shapes understood (segment names case-insensitive, as in ARM):
//! - `/subscriptions/{s}/resourcegroups` — list groups; `/subscriptions/{s}/resourcegroups/{rg}` — a group
//! - `{scope}/providers/{Namespace}/{type}/{name}[/{childType}/{childName}]...` — a resource,
//!   where `{scope}` is `/subscriptions/{s}` or `/subscriptions/{s}/resourceGroups/{rg}`
//! - the same ending in a type without name — a list; ending in an action (`listKeys`) — a POST action
//! - `{resource id}/providers/Microsoft.Authorization/roleAssignments/{guid}` — an extension resource
//! - `/subscriptions/{s}/providers/{Namespace}/locations/{loc}/operations/{id}` (status) and
//!   `.../operationResults/{id}` (location) — the LRO URLs this simulator hands out.

use super::types::{self, TypeSpec};

/// An addressed resource.
#[derive(Debug, Clone)]
pub(crate) struct ResId {
    /// Canonical id.
    pub id: String,
    pub sub: String,
    pub rg: Option<String>,
    pub spec: &'static TypeSpec,
    pub name: String,
    /// Canonical id of the parent (resource group, scope, or parent resource).
    pub parent: String,
}

impl ResId {
    pub(crate) fn key(&self) -> String {
        self.id.to_ascii_lowercase()
    }
    pub(crate) fn rg_id(&self) -> Option<String> {
        self.rg
            .as_ref()
            .map(|rg| format!("/subscriptions/{}/resourceGroups/{}", self.sub, rg))
    }
}

/// What an ARM path addresses.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    RgList {
        sub: String,
    },
    /// The generic resource list (`/subscriptions/{s}/resources`,
    /// `/subscriptions/{s}/resourceGroups/{g}/resources`): every top-level resource.
    GenericList {
        sub: String,
        rg: Option<String>,
    },
    Resource(ResId),
    /// Items of `spec` directly under `parent` (a scope or a parent resource).
    Collection {
        sub: String,
        rg: Option<String>,
        parent: String,
        spec: &'static TypeSpec,
    },
    Action {
        res: ResId,
        action: String,
    },
    Operation {
        namespace: String,
        op_id: String,
        result: bool,
    },
}

/// Why a path could not be understood.
#[derive(Debug, Clone)]
pub(crate) enum PathError {
    /// Not an ARM shape at all.
    NotFound,
    /// Provider/type this simulator does not serve.
    UnknownType(String),
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

pub(crate) fn parse(segs: &[String], post: bool) -> Result<Target, PathError> {
    if segs.len() < 2 || !eq(&segs[0], "subscriptions") {
        return Err(PathError::NotFound);
    }
    let sub = segs[1].clone();
    let mut i = 2;
    let mut rg = None;
    let mut scope = format!("/subscriptions/{sub}");
    if segs.len() == 2 {
        return Err(PathError::NotFound);
    }
    if segs.len() == 3 && eq(&segs[2], "resources") {
        return Ok(Target::GenericList { sub, rg: None });
    }
    if eq(&segs[i], "resourcegroups") {
        let Some(name) = segs.get(i + 1) else {
            return Ok(Target::RgList { sub });
        };
        rg = Some(name.clone());
        scope = format!("/subscriptions/{sub}/resourceGroups/{name}");
        i += 2;
        if i + 1 == segs.len() && eq(&segs[i], "resources") {
            return Ok(Target::GenericList { sub, rg });
        }
        if i == segs.len() {
            let spec = types::lookup(types::RG).ok_or(PathError::NotFound)?;
            return Ok(Target::Resource(ResId {
                id: scope,
                sub: sub.clone(),
                rg,
                spec,
                name: name.clone(),
                parent: format!("/subscriptions/{sub}"),
            }));
        }
    }
    // A role assignment may sit on any resource, including types this simulator does not
    // serve: everything before `providers/Microsoft.Authorization/roleAssignments` is then
    // an opaque scope.
    if let Some(e) = (i..segs.len().saturating_sub(2)).rev().find(|&e| {
        eq(&segs[e], "providers")
            && eq(&segs[e + 1], "Microsoft.Authorization")
            && eq(&segs[e + 2], "roleAssignments")
    }) && e > i
        && types::lookup(&format!(
            "{}/{}",
            segs.get(i + 1).map(String::as_str).unwrap_or(""),
            segs.get(i + 2).map(String::as_str).unwrap_or("")
        ))
        .is_none()
    {
        scope = format!("{scope}/{}", segs[i..e].join("/"));
        i = e;
    }
    // One or more provider chains (`providers/{ns}/{type}/{name}...`); a chain after a
    // named resource makes that resource the scope of an extension resource.
    loop {
        if !eq(&segs[i], "providers") || i + 2 > segs.len() - 1 {
            return Err(PathError::NotFound);
        }
        let ns = &segs[i + 1];
        i += 2;
        // Operation URLs.
        if rg.is_none()
            && segs.len() == i + 4
            && eq(&segs[i], "locations")
            && (eq(&segs[i + 2], "operations") || eq(&segs[i + 2], "operationResults"))
        {
            return Ok(Target::Operation {
                namespace: ns.clone(),
                op_id: segs[i + 3].clone(),
                result: eq(&segs[i + 2], "operationResults"),
            });
        }
        let mut type_path = ns.clone();
        let mut id = scope.clone();
        let mut parent = scope.clone();
        let mut canonical_ns_done = false;
        while i < segs.len() {
            let t = &segs[i];
            if eq(t, "providers") && i > 0 {
                break;
            }
            let candidate = format!("{type_path}/{t}");
            let Some(spec) = types::lookup(&candidate) else {
                // An action on the resource addressed so far?
                if post && i + 1 == segs.len() && id != scope {
                    let spec = types::lookup(&type_path)
                        .ok_or_else(|| PathError::UnknownType(type_path.clone()))?;
                    if let Some(action) = spec.actions.iter().find(|a| eq(a, t)) {
                        let name = id.rsplit('/').next().unwrap_or_default().to_string();
                        return Ok(Target::Action {
                            res: ResId {
                                id,
                                sub,
                                rg,
                                spec,
                                name,
                                parent,
                            },
                            action: (*action).to_string(),
                        });
                    }
                }
                return Err(PathError::UnknownType(candidate));
            };
            type_path = spec.rtype.to_string();
            let canon_seg = spec.rtype.rsplit('/').next().unwrap_or(t);
            // The resource addressed so far (the scope, for the first type of a chain)
            // is the parent of what this segment addresses.
            let container = id.clone();
            if !canonical_ns_done {
                let canon_ns = spec.rtype.split('/').next().unwrap_or(ns);
                id = format!("{id}/providers/{canon_ns}");
                canonical_ns_done = true;
            }
            match segs.get(i + 1) {
                None => {
                    return Ok(Target::Collection {
                        sub,
                        rg,
                        parent: container,
                        spec,
                    });
                }
                Some(name) => {
                    // DNS record set names are case-insensitive and stored lower-case.
                    let name = if spec.rtype == types::AREC || spec.rtype == types::PUBLIC_AREC {
                        name.to_ascii_lowercase()
                    } else {
                        name.clone()
                    };
                    let name = &name;
                    parent = container;
                    id = format!("{id}/{canon_seg}/{name}");
                    i += 2;
                    if i == segs.len() {
                        return Ok(Target::Resource(ResId {
                            id,
                            sub,
                            rg,
                            spec,
                            name: name.clone(),
                            parent,
                        }));
                    }
                }
            }
        }
        // Extension resource: the resource addressed so far becomes the scope.
        scope = id;
    }
}
