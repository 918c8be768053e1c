//! Generic PUT / GET / DELETE / LIST / POST handling; per-type rules live in `prepare`.

use std::time::Duration;

use axum::response::Response;
use serde_json::{Value, json};

use super::ops::{self, Headers};
use super::path::ResId;
use super::types::{self, DelMode, PutMode, TypeSpec};
use super::{ArmError, Ctx, prepare, render, store};
use crate::http::{Req, empty, json as json_resp, set_header};
use crate::sim::{Simulator, lock};
use crate::state::{ArmResource, OpKind, Prov};

/// Marks an identity busy with a federated-credential write for the modelled write time.
pub(crate) struct FicGuard {
    sim: Simulator,
    key: String,
}

impl FicGuard {
    pub(crate) async fn acquire(sim: &Simulator, identity_id: &str) -> Result<FicGuard, ArmError> {
        let key = identity_id.to_ascii_lowercase();
        if !lock(&sim.inner.fic_busy).insert(key.clone()) {
            return Err(ArmError::new(
                409,
                "ConcurrentFederatedIdentityCredentialsWritesForSingleManagedIdentity",
                format!(
                    "Too many Federated Identity Credentials are written concurrently for the managed identity '{identity_id}'. \
                     Concurrent Federated Identity Credentials writes under the same managed identity are not supported."
                ),
            ));
        }
        let guard = FicGuard {
            sim: sim.clone(),
            key,
        };
        let ms = sim.scaled(sim.config().latency.fic_write);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(guard)
    }
}

impl Drop for FicGuard {
    fn drop(&mut self) {
        lock(&self.sim.inner.fic_busy).remove(&self.key);
    }
}

fn not_found(rid: &ResId) -> ArmError {
    match rid.spec.rtype {
        types::RG => ArmError::new(
            404,
            "ResourceGroupNotFound",
            format!("Resource group '{}' could not be found.", rid.name),
        ),
        types::ROLE => ArmError::new(
            404,
            "RoleAssignmentNotFound",
            format!("The role assignment '{}' is not found.", rid.name),
        ),
        _ => ArmError::new(
            404,
            "ResourceNotFound",
            format!(
                "The Resource '{}/{}' under resource group '{}' was not found.",
                rid.spec.rtype,
                rid.name,
                rid.rg.as_deref().unwrap_or("")
            ),
        ),
    }
}

/// Fails when the resource group of `rid` is missing (404) or, for writes, being deleted.
fn check_group(ctx: &Ctx<'_>, rid: &ResId, write: bool) -> Result<(), ArmError> {
    let Some(rg_id) = rid.rg_id() else {
        return Ok(());
    };
    if rid.spec.rtype == types::RG {
        return Ok(());
    }
    match ctx.st.arm.get(&rg_id.to_ascii_lowercase()) {
        None => Err(ArmError::new(
            404,
            "ResourceGroupNotFound",
            format!(
                "Resource group '{}' could not be found.",
                rid.rg.as_deref().unwrap_or_default()
            ),
        )),
        Some(rg) if write && rg.prov == Prov::Deleting => Err(ArmError::new(
            409,
            "ResourceGroupBeingDeleted",
            format!(
                "The resource group '{}' is in deprovisioning state and cannot perform this operation.",
                rg.name
            ),
        )),
        Some(_) => Ok(()),
    }
}

fn check_parent(ctx: &Ctx<'_>, rid: &ResId) -> Result<(), ArmError> {
    let parent = store::real_parent_key(&rid.parent);
    let is_scope = rid.rg_id().is_some_and(|g| g.eq_ignore_ascii_case(&parent))
        || parent.eq_ignore_ascii_case(&format!("/subscriptions/{}", rid.sub));
    // Role assignments may be scoped to any resource; the scope itself is not validated.
    if is_scope || rid.spec.rtype == types::ROLE || rid.spec.rtype == types::RG {
        return Ok(());
    }
    if ctx.st.arm.contains_key(&parent) {
        Ok(())
    } else {
        Err(ArmError::new(
            404,
            "ParentResourceNotFound",
            format!(
                "Can not perform requested operation on nested resource. Parent resource '{}' not found.",
                rid.parent
            ),
        ))
    }
}

pub(crate) fn put(
    ctx: &mut Ctx<'_>,
    req: &Req,
    rid: &ResId,
    fail: Option<(String, String)>,
) -> Result<Response, ArmError> {
    let mut body = req
        .json_body()
        .map_err(|m| ArmError::bad_request("InvalidRequestContent", m))?;
    if body.is_null() {
        body = json!({});
    }
    let Value::Object(obj) = &mut body else {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "The request content must be a JSON object.",
        ));
    };
    for k in ["id", "type", "etag"] {
        obj.remove(k);
    }
    obj.remove("name");
    if rid.spec.tracked && !obj.get("location").is_some_and(Value::is_string) {
        return Err(ArmError::bad_request(
            "LocationRequired",
            "The location property is required for this definition.",
        ));
    }
    if let Some(t) = obj.get("tags")
        && !t.is_object()
    {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "tags must be an object of strings.",
        ));
    }
    check_group(ctx, rid, true)?;
    check_parent(ctx, rid)?;
    check_preconditions(ctx, req, rid, false)?;
    let key = rid.key();
    let existing = ctx.st.arm.get(&key).cloned();
    if let Some(e) = &existing
        && e.prov == Prov::Deleting
    {
        return Err(ArmError::new(
            409,
            "AnotherOperationInProgress",
            format!(
                "Another operation on this or dependent resource is in progress. Resource '{}' is being deleted.",
                e.id
            ),
        ));
    }
    let prepared = prepare::prepare(ctx, rid, body, existing.as_ref())?;
    let etag = match rid.spec.rtype {
        types::CONTAINER => format!("\"0x8D{:X}\"", ctx.now),
        types::ZONE | types::LINK | types::AREC => ctx.uuid(),
        _ => format!("W/\"{}\"", ctx.uuid()),
    };
    let created = existing.is_none();
    let mode = match (rid.spec.put, created) {
        (PutMode::AcceptedLocation, false) => PutMode::Sync,
        (m, _) => m,
    };
    // Microsoft.Network reports `Updating` for creates too; storage and Private DNS say
    // `Creating` for a new resource.
    let prov = match mode {
        PutMode::Sync => Prov::Succeeded,
        PutMode::AsyncBody => Prov::Updating,
        _ if created => Prov::Creating,
        _ => Prov::Updating,
    };
    let seq = match &existing {
        Some(e) => e.created_seq,
        None => ctx.st.next_seq(),
    };
    let op_id = if mode == PutMode::Sync {
        None
    } else {
        let dur = ctx.sim.scaled(ctx.cfg().latency.put_for(rid.spec.rtype));
        Some(ops::start(
            ctx,
            OpKind::Put {
                resource_id: rid.id.clone(),
            },
            dur,
            fail,
        ))
    };
    let res = ArmResource {
        id: existing
            .as_ref()
            .map(|e| e.id.clone())
            .unwrap_or_else(|| rid.id.clone()),
        rtype: rid.spec.rtype.to_string(),
        name: existing
            .as_ref()
            .map(|e| e.name.clone())
            .unwrap_or_else(|| rid.name.clone()),
        parent: rid.parent.to_ascii_lowercase(),
        body: prepared.body,
        etag,
        prov,
        created_seq: seq,
        created_ms: existing.as_ref().map(|e| e.created_ms).unwrap_or(ctx.now),
        op: op_id.clone(),
        internal: prepared.internal,
    };
    ctx.st.arm.insert(key.clone(), res);
    prepare::after_put(ctx, rid)?;
    let status = if created { 201 } else { 200 };
    let Some(op_id) = op_id else {
        return Ok(json_resp(status, &rendered(ctx, &key)));
    };
    let mut resp = match mode {
        PutMode::AsyncBody => json_resp(status, &rendered(ctx, &key)),
        _ => empty(202),
    };
    let h = match mode {
        PutMode::AcceptedLocation => Headers {
            async_op: false,
            location: true,
        },
        PutMode::AcceptedAsync => Headers {
            async_op: true,
            location: true,
        },
        _ => Headers {
            async_op: true,
            location: false,
        },
    };
    ops::add_headers(ctx, &mut resp, req, rid, &op_id, h);
    Ok(resp)
}

fn rendered(ctx: &Ctx<'_>, key: &str) -> Value {
    match ctx.st.arm.get(key) {
        Some(r) => render::render(ctx.sim, ctx.st, r, false),
        None => Value::Null,
    }
}

pub(crate) fn get(ctx: &mut Ctx<'_>, req: &Req, rid: &ResId) -> Result<Response, ArmError> {
    check_group(ctx, rid, false)?;
    let expand = req
        .q("$expand")
        .is_some_and(|e| e.to_ascii_lowercase().contains("networkinterfaces"));
    match ctx.st.arm.get(&rid.key()) {
        Some(r) => Ok(json_resp(200, &render::render(ctx.sim, ctx.st, r, expand))),
        None => Err(not_found(rid)),
    }
}

pub(crate) fn delete(
    ctx: &mut Ctx<'_>,
    req: &Req,
    rid: &ResId,
    fail: Option<(String, String)>,
) -> Result<Response, ArmError> {
    if rid.spec.rtype != types::RG
        && rid.rg.is_some()
        && !ctx
            .st
            .arm
            .contains_key(&rid.rg_id().unwrap_or_default().to_ascii_lowercase())
    {
        // Deleting inside a missing group: ARM answers 404 ResourceGroupNotFound.
        check_group(ctx, rid, false)?;
    }
    check_preconditions(ctx, req, rid, true)?;
    let key = rid.key();
    let Some(existing) = ctx.st.arm.get(&key).cloned() else {
        if rid.spec.missing_delete == 404 {
            return Err(not_found(rid));
        }
        if check_parent(ctx, rid).is_err() {
            return Err(not_found(rid));
        }
        return Ok(empty(204));
    };
    let h = match rid.spec.delete {
        DelMode::Sync => None,
        DelMode::Async => Some(Headers {
            async_op: true,
            location: true,
        }),
        DelMode::AsyncLocation => Some(Headers {
            async_op: false,
            location: true,
        }),
    };
    if existing.prov == Prov::Deleting
        && let (Some(h), Some(op_id)) = (h, existing.op.clone())
    {
        let mut resp = empty(202);
        ops::add_headers(ctx, &mut resp, req, rid, &op_id, h);
        return Ok(resp);
    }
    prepare::pre_delete(ctx, &existing)?;
    let Some(h) = h else {
        let body = if rid.spec.rtype == types::ROLE {
            Some(render::render(ctx.sim, ctx.st, &existing, false))
        } else {
            None
        };
        store::remove_tree(ctx.st, &key);
        return Ok(match body {
            Some(b) => json_resp(200, &b),
            None => empty(200),
        });
    };
    let dur = ctx.sim.scaled(ctx.cfg().latency.delete_for(rid.spec.rtype));
    let op_id = ops::start(
        ctx,
        OpKind::Delete {
            resource_id: existing.id.clone(),
        },
        dur,
        fail,
    );
    if let Some(r) = ctx.st.arm.get_mut(&key) {
        r.prov = Prov::Deleting;
        r.op = Some(op_id.clone());
    }
    let mut resp = empty(202);
    ops::add_headers(ctx, &mut resp, req, rid, &op_id, h);
    Ok(resp)
}

pub(crate) fn list(
    ctx: &mut Ctx<'_>,
    req: &Req,
    sub: &str,
    rg: Option<&str>,
    parent: &str,
    spec: &'static TypeSpec,
) -> Result<Response, ArmError> {
    let parent_key = parent.to_ascii_lowercase();
    let sub_key = format!("/subscriptions/{}", sub.to_ascii_lowercase());
    if let Some(rg) = rg {
        let rg_key = format!("{sub_key}/resourcegroups/{}", rg.to_ascii_lowercase());
        if !ctx.st.arm.contains_key(&rg_key) {
            return Err(ArmError::new(
                404,
                "ResourceGroupNotFound",
                format!("Resource group '{rg}' could not be found."),
            ));
        }
        let real = store::real_parent_key(&parent_key);
        if real != rg_key && spec.rtype != types::ROLE && !ctx.st.arm.contains_key(&real) {
            return Err(ArmError::new(
                404,
                "ParentResourceNotFound",
                format!("Parent resource '{parent}' not found."),
            ));
        }
    }
    let items: Vec<&ArmResource> = if spec.rtype == types::ROLE {
        role_assignments_at(ctx, &parent_key, req.q("$filter"))
    } else if parent_key == sub_key {
        let prefix = format!("{sub_key}/");
        store::of_type(ctx.st, spec.rtype)
            .into_iter()
            .filter(|r| r.parent.starts_with(&prefix))
            .collect()
    } else {
        store::children(ctx.st, &parent_key, spec.rtype)
    };
    let values: Vec<Value> = items
        .iter()
        .map(|r| render::render(ctx.sim, ctx.st, r, false))
        .collect();
    Ok(page(ctx, req, values))
}

/// Role assignments at, above and below a scope (ARM's default), or at/above only with
/// `$filter=atScope()`, optionally `principalId eq '...'`.
fn role_assignments_at<'a>(
    ctx: &'a Ctx<'_>,
    scope_key: &str,
    filter: Option<&str>,
) -> Vec<&'a ArmResource> {
    let filter = filter.unwrap_or("").to_ascii_lowercase();
    let at_scope = filter.contains("atscope()");
    let principal = filter
        .split("principalid eq '")
        .nth(1)
        .and_then(|s| s.split('\'').next())
        .map(str::to_string);
    store::of_type(ctx.st, types::ROLE)
        .into_iter()
        .filter(|r| {
            let p = &r.parent;
            let above = scope_key == p || scope_key.starts_with(&format!("{p}/"));
            let below = p.starts_with(&format!("{scope_key}/"));
            above || (!at_scope && below)
        })
        .filter(|r| {
            principal.as_ref().is_none_or(|pid| {
                crate::util::str_at(&r.body, "/properties/principalId")
                    .is_some_and(|x| x.eq_ignore_ascii_case(pid))
            })
        })
        .collect()
}

pub(crate) fn list_groups(ctx: &mut Ctx<'_>, req: &Req, sub: &str) -> Result<Response, ArmError> {
    let parent = format!("/subscriptions/{}", sub.to_ascii_lowercase());
    let values: Vec<Value> = store::children(ctx.st, &parent, types::RG)
        .iter()
        .map(|r| render::render(ctx.sim, ctx.st, r, false))
        .collect();
    Ok(page(ctx, req, values))
}

/// The generic resource list: `Resources_ListByResourceGroup`
/// (`GET /subscriptions/{s}/resourceGroups/{g}/resources`) and `Resources_List`
/// (`GET /subscriptions/{s}/resources`), modelled on
/// `specification/resources/resource-manager/Microsoft.Resources/stable/2021-04-01/resources.json`
/// in Azure/azure-rest-api-specs. Only top-level (tracked) resources are listed, as
/// `GenericResourceExpanded` (`id`, `name`, `type`, `location`, `tags`, and `managedBy` —
/// `GenericResource`'s "ID of the resource that manages this resource", e.g. a VM's OS
/// disk); child and
/// extension resources (subnets, record sets, role assignments) are not. `$filter`
/// supports what ARM documents for it: `tagName eq 'k'` (optionally `and tagValue eq 'v'`),
/// `resourceType eq 'ns/type'` and `name eq 'n'`; anything else answers 400 like ARM.
pub(crate) fn list_resources(
    ctx: &mut Ctx<'_>,
    req: &Req,
    sub: &str,
    rg: Option<&str>,
) -> Result<Response, ArmError> {
    let sub_key = format!("/subscriptions/{}", sub.to_ascii_lowercase());
    let rg_key = rg.map(|g| format!("{sub_key}/resourcegroups/{}", g.to_ascii_lowercase()));
    if let (Some(k), Some(g)) = (&rg_key, rg)
        && !ctx.st.arm.contains_key(k)
    {
        return Err(ArmError::new(
            404,
            "ResourceGroupNotFound",
            format!("Resource group '{g}' could not be found."),
        ));
    }
    let filter = GenericFilter::parse(req.q("$filter"))?;
    let group_prefix = format!("{sub_key}/resourcegroups/");
    let mut items: Vec<&ArmResource> = ctx
        .st
        .arm
        .values()
        .filter(|r| r.rtype != types::RG && r.rtype != types::ROLE)
        .filter(|r| match &rg_key {
            // Top-level: its parent is the group itself.
            Some(k) => &r.parent == k,
            None => {
                r.parent.starts_with(&group_prefix) && !r.parent[group_prefix.len()..].contains('/')
            }
        })
        .filter(|r| filter.matches(r))
        .collect();
    items.sort_by_key(|r| r.created_seq);
    let values: Vec<Value> = items
        .iter()
        .map(|r| {
            let mut v = json!({"id": r.id, "name": r.name, "type": r.rtype});
            if let Some(l) = r.body.get("location") {
                v["location"] = l.clone();
            }
            v["tags"] = r.body.get("tags").cloned().unwrap_or_else(|| json!({}));
            if let Some(m) = r.body.get("managedBy").filter(|m| m.is_string()) {
                v["managedBy"] = m.clone();
            }
            v
        })
        .collect();
    Ok(page(ctx, req, values))
}

/// The `$filter` forms of the generic resource list the simulator understands.
#[derive(Default)]
struct GenericFilter {
    tag_name: Option<String>,
    tag_value: Option<String>,
    rtype: Option<String>,
    name: Option<String>,
}

impl GenericFilter {
    fn parse(f: Option<&str>) -> Result<Self, ArmError> {
        let mut out = Self::default();
        let Some(f) = f.map(str::trim).filter(|f| !f.is_empty()) else {
            return Ok(out);
        };
        for clause in f.split(" and ") {
            let clause = clause.trim();
            let Some((key, value)) = clause.split_once(" eq ") else {
                return Err(invalid_filter(f));
            };
            let value = value.trim();
            let Some(value) = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .map(str::to_string)
            else {
                return Err(invalid_filter(f));
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "tagname" => out.tag_name = Some(value),
                "tagvalue" => out.tag_value = Some(value),
                "resourcetype" => out.rtype = Some(value),
                "name" => out.name = Some(value),
                _ => return Err(invalid_filter(f)),
            }
        }
        if out.tag_value.is_some() && out.tag_name.is_none() {
            return Err(invalid_filter(f));
        }
        Ok(out)
    }

    fn matches(&self, r: &ArmResource) -> bool {
        let tag_ok = match &self.tag_name {
            None => true,
            Some(k) => {
                let tags = r.body.get("tags").and_then(Value::as_object);
                let found = tags.and_then(|t| {
                    t.iter()
                        .find(|(tk, _)| tk.eq_ignore_ascii_case(k))
                        .map(|(_, v)| v)
                });
                match (&self.tag_value, found) {
                    (_, None) => false,
                    (None, Some(_)) => true,
                    (Some(want), Some(v)) => v.as_str() == Some(want.as_str()),
                }
            }
        };
        tag_ok
            && self
                .rtype
                .as_ref()
                .is_none_or(|t| t.eq_ignore_ascii_case(&r.rtype))
            && self
                .name
                .as_ref()
                .is_none_or(|n| n.eq_ignore_ascii_case(&r.name))
    }
}

fn invalid_filter(f: &str) -> ArmError {
    ArmError::bad_request(
        "InvalidFilterInQueryString",
        format!("Invalid $filter '{f}' specified in the query string."),
    )
}

/// One page of `values` (`$skipToken` = offset), with `nextLink` when more remain.
fn page(ctx: &Ctx<'_>, req: &Req, values: Vec<Value>) -> Response {
    let size = ctx.cfg().list_page_size;
    let skip: usize = req
        .q("$skipToken")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let total = values.len();
    let chunk: Vec<Value> = values.into_iter().skip(skip).take(size).collect();
    let mut body = json!({ "value": chunk });
    if skip + size < total {
        let mut query: Vec<(String, String)> = req
            .query
            .iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("$skipToken"))
            .cloned()
            .collect();
        query.push(("$skipToken".to_string(), (skip + size).to_string()));
        let qs = serde_urlencoded::to_string(&query).unwrap_or_default();
        body["nextLink"] = Value::String(format!("{}{}?{qs}", req.base_url(), req.path));
    }
    json_resp(200, &body)
}

pub(crate) fn action(ctx: &mut Ctx<'_>, rid: &ResId, action: &str) -> Result<Response, ArmError> {
    check_group(ctx, rid, false)?;
    let Some(r) = ctx.st.arm.get(&rid.key()) else {
        return Err(not_found(rid));
    };
    match (rid.spec.rtype, action) {
        (types::STORAGE_ACCOUNT, "listKeys") => {
            let created = crate::util::rfc3339(r.created_ms);
            let keys: Vec<Value> = ["key1", "key2"]
                .iter()
                .map(|k| {
                    json!({
                        "keyName": k,
                        "value": crate::util::str_at(&r.internal, &format!("/{k}")).unwrap_or_default(),
                        "permissions": "FULL",
                        "creationTime": created,
                    })
                })
                .collect();
            let mut resp = json_resp(200, &json!({ "keys": keys }));
            set_header(&mut resp, "cache-control", "no-cache");
            Ok(resp)
        }
        _ => Err(ArmError::new(
            404,
            "InvalidResourceType",
            format!("Action '{action}' is not supported."),
        )),
    }
}

/// `If-Match` / `If-None-Match` on a write to a resource that carries an etag (network
/// resources, Private and public DNS zones, links and record sets, containers): a stale
/// `If-Match` (or one naming a missing resource) and `If-None-Match: *` on an existing
/// resource answer 412 `PreconditionFailed`, as the etag sections of the Network and DNS
/// REST references document (e.g. `RecordSets_CreateOrUpdate`: "Omit this value to always
/// overwrite the current record set… Set to '*' to allow a new record set to be created,
/// but to prevent updating an existing record set").
pub(crate) fn check_preconditions(
    ctx: &Ctx<'_>,
    req: &Req,
    rid: &ResId,
    delete: bool,
) -> Result<(), ArmError> {
    if !rid.spec.etag {
        return Ok(());
    }
    let current = ctx.st.arm.get(&rid.key()).map(|r| r.etag.as_str());
    // Clients quote etags in headers (`"guid"`) that bodies carry bare, or weak (`W/"…"`).
    let norm = |t: &str| {
        t.trim()
            .trim_start_matches("W/")
            .trim_matches('"')
            .to_string()
    };
    let listed = |h: &str| {
        current.is_some_and(|cur| {
            h.split(',')
                .any(|t| t.trim() == "*" || norm(t) == norm(cur))
        })
    };
    if let Some(h) = req.header("if-match")
        && !(delete && current.is_none())
        && !listed(h)
    {
        return Err(ArmError::new(
            412,
            "PreconditionFailed",
            format!(
                "The condition '{h}' in the If-Match header was not satisfied by resource '{}'; its current etag is '{}'.",
                rid.id,
                current.unwrap_or("(none: the resource does not exist)")
            ),
        ));
    }
    if !delete
        && let Some(h) = req.header("if-none-match")
        && h.trim() == "*"
        && current.is_some()
    {
        return Err(ArmError::new(
            412,
            "PreconditionFailed",
            format!(
                "The condition 'If-None-Match: *' was not satisfied: resource '{}' already exists.",
                rid.id
            ),
        ));
    }
    Ok(())
}

/// `PATCH` of a tracked resource — the tags update each type's spec defines:
/// `ResourceGroups_Update` (`ResourceGroupPatchable`, resources.json 2021-04-01),
/// `UserAssignedIdentities_Update` (`IdentityUpdate`, ManagedIdentity.json 2024-11-30),
/// `StorageAccounts_Update` (`StorageAccountUpdateParameters`, storage.json 2024-01-01),
/// the Microsoft.Network `*_UpdateTags` operations (`TagsObject`, network.json 2023-11-01),
/// `PrivateZones_Update` / `VirtualNetworkLinks_Update` (`PrivateZone` / `VirtualNetworkLink`,
/// privatedns.json 2024-06-01) and public DNS `Zones_Update` (`ZoneUpdate`, dns.json
/// 2018-05-01). In all of them `tags` present replaces the whole tag set (absent keeps it);
/// the other writable members given (storage `sku`/`kind`/`properties.*`, group
/// `managedBy`/`properties`, identity `location`, DNS `properties.*`) are merged one level
/// deep. Answers 200 with the resource (Private DNS answers 202 + polling in Azure; a
/// final 200 is what its pollers accept as done).
pub(crate) fn patch(ctx: &mut Ctx<'_>, req: &Req, rid: &ResId) -> Result<Response, ArmError> {
    const PATCHABLE: &[&str] = &[
        types::RG,
        types::IDENTITY,
        types::STORAGE_ACCOUNT,
        types::NSG,
        types::VNET,
        types::PIP,
        types::LB,
        types::PLS,
        types::PE,
        types::NIC,
        types::ZONE,
        types::LINK,
        types::PUBLIC_ZONE,
        types::VAULT,
    ];
    if !PATCHABLE.contains(&rid.spec.rtype) {
        return Err(ArmError::new(
            405,
            "MethodNotAllowed",
            format!(
                "The method PATCH is not allowed on resources of type '{}'.",
                rid.spec.rtype
            ),
        ));
    }
    let body = req
        .json_body()
        .map_err(|m| ArmError::bad_request("InvalidRequestContent", m))?;
    let Value::Object(patch) = body else {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "The request content must be a JSON object.",
        ));
    };
    if let Some(t) = patch.get("tags")
        && !(t.is_object()
            && t.as_object()
                .is_some_and(|m| m.values().all(Value::is_string)))
    {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "The request content was invalid and could not be deserialized: 'tags must be an object of strings. Path 'tags''.",
        ));
    }
    check_group(ctx, rid, true)?;
    let key = rid.key();
    let Some(existing) = ctx.st.arm.get(&key) else {
        return Err(not_found(rid));
    };
    if existing.prov == Prov::Deleting {
        return Err(ArmError::new(
            409,
            "AnotherOperationInProgress",
            format!(
                "Another operation on this or dependent resource is in progress. Resource '{}' is being deleted.",
                existing.id
            ),
        ));
    }
    check_preconditions(ctx, req, rid, false)?;
    let network = rid.spec.rtype.starts_with("Microsoft.Network/")
        && !matches!(
            rid.spec.rtype,
            types::ZONE | types::LINK | types::PUBLIC_ZONE
        );
    let mut body = existing.body.clone();
    for (k, v) in patch {
        match k.as_str() {
            "tags" => {
                body["tags"] = v;
            }
            // Network's TagsObject has nothing else; read-only envelope fields are ignored.
            _ if network => {}
            "id" | "name" | "type" | "etag" | "location" => {}
            "properties" => {
                if let Value::Object(p) = v {
                    let target = super::prepare::props(&mut body);
                    for (pk, pv) in p {
                        target.insert(pk, pv);
                    }
                }
            }
            "sku" | "kind" | "managedBy" if rid.spec.rtype != types::IDENTITY => {
                body[k.as_str()] = v;
            }
            _ => {}
        }
    }
    let etag = match rid.spec.rtype {
        types::ZONE | types::LINK => ctx.uuid(),
        _ => format!("W/\"{}\"", ctx.uuid()),
    };
    if let Some(r) = ctx.st.arm.get_mut(&key) {
        r.body = body;
        r.etag = etag;
    }
    Ok(json_resp(200, &rendered(ctx, &key)))
}
