//! Long-running operations: creation, polling URLs, completion.
//!
//! Completion is lazy: [`tick`] (run before every request and by the background ticker)
//! finishes every operation whose time has come. Status URL answers
//! `{"id","name","status":"InProgress|Succeeded|Failed","startTime","endTime","error"}`;
//! the Location URL answers 202 while running, then 200 with the resource (PUT) or an
//! empty 200 (DELETE), or the operation's error status and body.

use axum::response::Response;
use serde_json::{Value, json};

use super::path::ResId;
use super::{ArmError, Ctx, render, store, types};
use crate::http::{Req, empty, json as json_resp, set_header};
use crate::sim::Simulator;
use crate::state::{OpKind, OpOutcome, Operation, Prov, State};
use crate::util;

/// Starts an operation against `rid`; returns its id.
pub(crate) fn start(
    ctx: &mut Ctx<'_>,
    kind: OpKind,
    duration_ms: u64,
    fail: Option<(String, String)>,
) -> String {
    let id = ctx.uuid();
    let op = Operation {
        id: id.clone(),
        kind,
        start_ms: ctx.now,
        done_ms: ctx.now + duration_ms,
        outcome: None,
        inject_failure: fail,
    };
    ctx.st.ops.insert(id.clone(), op);
    id
}

/// Which polling headers an LRO response carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Headers {
    pub async_op: bool,
    pub location: bool,
}

/// Adds `Azure-AsyncOperation` / `Location` / `Retry-After` headers.
pub(crate) fn add_headers(
    ctx: &Ctx<'_>,
    resp: &mut Response,
    req: &Req,
    rid: &ResId,
    op_id: &str,
    h: Headers,
) {
    let ns = rid
        .spec
        .rtype
        .split('/')
        .next()
        .unwrap_or("Microsoft.Resources");
    let loc = ctx
        .st
        .arm
        .get(&rid.key())
        .and_then(|r| util::str_at(&r.body, "/location"))
        .unwrap_or(&ctx.cfg().management_location)
        .to_ascii_lowercase()
        .replace(' ', "");
    let api = req.q("api-version").unwrap_or(rid.spec.api_versions[0]);
    let base = format!(
        "{}/subscriptions/{}/providers/{ns}/locations/{loc}",
        req.base_url(),
        rid.sub
    );
    if h.async_op {
        set_header(
            resp,
            "azure-asyncoperation",
            &format!("{base}/operations/{op_id}?api-version={api}"),
        );
    }
    if h.location {
        set_header(
            resp,
            "location",
            &format!("{base}/operationResults/{op_id}?api-version={api}"),
        );
    }
    retry_after(ctx, resp);
}

fn retry_after(ctx: &Ctx<'_>, resp: &mut Response) {
    let ms = ctx.sim.scaled(ctx.cfg().latency.poll_interval);
    // `Retry-After` is whole seconds; `retry-after-ms` (which azure_core prefers) keeps
    // scaled-down intervals short.
    set_header(resp, "retry-after", &ms.div_ceil(1000).max(1).to_string());
    set_header(resp, "retry-after-ms", &ms.to_string());
}

/// Finishes due operations.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let due: Vec<String> = st
        .ops
        .values()
        .filter(|o| o.outcome.is_none() && o.done_ms <= now)
        .map(|o| o.id.clone())
        .collect();
    for id in &due {
        let Some(op) = st.ops.get(id).cloned() else {
            continue;
        };
        let outcome = complete(sim, st, &op);
        if let Some(o) = st.ops.get_mut(id) {
            o.outcome = Some(outcome);
        }
    }
    !due.is_empty()
}

fn complete(sim: &Simulator, st: &mut State, op: &Operation) -> OpOutcome {
    let failure = op
        .inject_failure
        .clone()
        .map(|(code, message)| OpOutcome::Failed {
            status: 409,
            code,
            message,
        });
    match &op.kind {
        OpKind::Put { resource_id } => {
            let key = resource_id.to_ascii_lowercase();
            if let Some(r) = st.arm.get_mut(&key)
                && r.op.as_deref() == Some(op.id.as_str())
            {
                r.op = None;
                r.prov = if failure.is_some() {
                    Prov::Failed
                } else {
                    Prov::Succeeded
                };
            }
            failure.unwrap_or(OpOutcome::Succeeded)
        }
        OpKind::Delete { resource_id } => {
            let key = resource_id.to_ascii_lowercase();
            let Some(res) = st.arm.get(&key).cloned() else {
                return OpOutcome::Succeeded;
            };
            let blocked = match failure {
                Some(f) => Some(f),
                None if res.rtype == types::RG => super::prepare::rg_delete_blocker(sim, st, &key)
                    .map(|e| OpOutcome::Failed {
                        status: e.status,
                        code: e.code,
                        message: e.message,
                    }),
                None => None,
            };
            if let Some(f) = blocked {
                if let Some(r) = st.arm.get_mut(&key) {
                    r.op = None;
                    r.prov = if res.rtype == types::RG {
                        Prov::Succeeded
                    } else {
                        Prov::Failed
                    };
                }
                return f;
            }
            store::remove_tree(st, &key);
            OpOutcome::Succeeded
        }
    }
}

/// `GET` of an operation status or result URL.
pub(crate) fn get_operation(
    ctx: &mut Ctx<'_>,
    req: &Req,
    op_id: &str,
    result: bool,
) -> Result<Response, ArmError> {
    let Some(op) = ctx.st.ops.get(op_id).cloned() else {
        return Err(ArmError::new(
            404,
            "OperationNotFound",
            format!("The operation '{op_id}' was not found."),
        ));
    };
    let status = match &op.outcome {
        None => "InProgress",
        Some(OpOutcome::Succeeded) => "Succeeded",
        Some(OpOutcome::Failed { .. }) => "Failed",
    };
    if !result {
        let mut body = json!({
            "id": req.path,
            "name": op.id,
            "status": status,
            "startTime": util::rfc3339(op.start_ms),
        });
        if op.outcome.is_some() {
            body["endTime"] = Value::String(util::rfc3339(op.done_ms));
        }
        if let Some(OpOutcome::Failed { code, message, .. }) = &op.outcome {
            body["error"] = json!({"code": code, "message": message});
        }
        let mut resp = json_resp(200, &body);
        if op.outcome.is_none() {
            retry_after(ctx, &mut resp);
        }
        return Ok(resp);
    }
    match &op.outcome {
        None => {
            let mut resp = empty(202);
            set_header(
                &mut resp,
                "location",
                &format!("{}{}", req.base_url(), req.path_and_query),
            );
            retry_after(ctx, &mut resp);
            Ok(resp)
        }
        Some(OpOutcome::Failed {
            status,
            code,
            message,
        }) => Err(ArmError::new(*status, code, message.clone())),
        Some(OpOutcome::Succeeded) => match &op.kind {
            OpKind::Delete { .. } => Ok(empty(200)),
            OpKind::Put { resource_id } => {
                match ctx.st.arm.get(&resource_id.to_ascii_lowercase()) {
                    Some(r) => {
                        let body = render::render(ctx.sim, ctx.st, r, false);
                        Ok(json_resp(200, &body))
                    }
                    None => Ok(empty(200)),
                }
            }
        },
    }
}
