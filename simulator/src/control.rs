//! `/_sim/...` control and observation endpoints (see the crate docs for shapes).

use axum::http::Method;
use axum::response::Response;
use serde_json::json;

use crate::faults::FaultRule;
use crate::http::{Req, empty, json};
use crate::sim::{Simulator, lock};

pub(crate) fn handle(sim: &Simulator, req: &Req) -> Response {
    let segs: Vec<&str> = req.segments.iter().skip(1).map(String::as_str).collect();
    match (&req.method, segs.as_slice()) {
        (&Method::GET, ["inventory"]) => json(200, &json!(sim.inventory())),
        // The CAPI Machines and what CAPZ made of them: Microsoft.Compute is no ARM surface
        // here, so this is how a test sees which VM size a machine really runs.
        (&Method::GET, ["machines"]) => {
            let st = lock(&sim.inner.state);
            let list: Vec<_> = st
                .machines
                .iter()
                .flat_map(|(pool, ms)| {
                    ms.iter().map(move |m| {
                        json!({
                            "nodePool": pool, "name": m.name, "size": m.size,
                            "version": m.version, "template": m.template, "vm": m.vm,
                            "joined": m.joined, "deleting": m.deleting_ms.is_some(),
                        })
                    })
                })
                .collect();
            json(200, &json!(list))
        }
        (&Method::GET, ["requests"]) => {
            let since: u64 = req.q("since").and_then(|s| s.parse().ok()).unwrap_or(0);
            let log: Vec<_> = sim
                .requests()
                .into_iter()
                .filter(|r| r.seq > since)
                .collect();
            json(200, &json!(log))
        }
        (&Method::DELETE, ["requests"]) => {
            lock(&sim.inner.log).clear();
            empty(204)
        }
        (&Method::GET, ["dns"]) => match req.q("name") {
            Some(name) => json(200, &sim.resolve(req.q("vnet"), name)),
            None => json(400, &json!({ "error": "query parameter name is required" })),
        },
        (&Method::GET, ["faults"]) => json(200, &json!(lock(&sim.inner.faults).list())),
        (&Method::POST, ["faults"]) => match serde_json::from_slice::<FaultRule>(&req.body) {
            Ok(rule) => match sim.add_fault(rule) {
                Ok(id) => json(201, &json!({ "id": id })),
                Err(e) => json(400, &json!({ "error": e })),
            },
            Err(e) => json(400, &json!({ "error": format!("invalid fault rule: {e}") })),
        },
        (&Method::DELETE, ["faults"]) => {
            sim.clear_faults();
            empty(204)
        }
        (&Method::DELETE, ["faults", id]) => {
            if lock(&sim.inner.faults).remove(id) {
                empty(204)
            } else {
                json(404, &json!({ "error": format!("no fault rule {id}") }))
            }
        }
        (&Method::GET, ["scenario"]) => json(200, &json!(*lock(&sim.inner.scenario))),
        (&Method::PUT, ["scenario"]) => {
            match serde_json::from_slice::<crate::preflight::Scenario>(&req.body) {
                Ok(s) => {
                    *lock(&sim.inner.scenario) = s;
                    empty(204)
                }
                Err(e) => json(400, &json!({ "error": format!("invalid scenario: {e}") })),
            }
        }
        (&Method::GET, ["info"]) => {
            let c = sim.config();
            json(
                200,
                &json!({
                    "time_scale": c.time_scale,
                    "seed": c.seed,
                    "tenant_id": c.tenant_id,
                    "management_subscription": c.management_subscription,
                    "management_resource_group": c.management_resource_group,
                    "management_vnet": c.management_vnet,
                    "management_location": c.management_location,
                    "state_file": c.state_file,
                    "crds_dir": c.crds_dir,
                    "list_page_size": c.list_page_size,
                }),
            )
        }
        _ => json(
            404,
            &json!({ "error": format!("no control endpoint {} {}", req.method, req.path) }),
        ),
    }
}
