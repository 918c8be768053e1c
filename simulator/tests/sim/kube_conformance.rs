//! Kubernetes API behaviours real clients rely on: server-side apply with
//! managedFields and conflicts, delete preconditions and answers, dryRun, paging,
//! selectors, OpenAPI and tables for kubectl.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use hcp_simulator::Simulator;
use serde_json::{Value, json};

const CM: &str = "/api/v1/namespaces/default/configmaps";

async fn apply(sim: &Simulator, name: &str, body: Value, manager: &str, force: bool) -> Resp {
    call_with(
        sim,
        "PATCH",
        &format!("{CM}/{name}?fieldManager={manager}&force={force}"),
        Some(body),
        &[("content-type", "application/apply-patch+yaml")],
    )
    .await
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn apply_conflicts_force_and_removal() {
    let sim = sim();
    assert_eq!(
        apply(&sim, "c", cm("c", json!({"x": "1", "y": "2"})), "A", false)
            .await
            .status,
        201
    );
    let r = apply(&sim, "c", cm("c", json!({"x": "9", "y": "8"})), "B", false).await;
    assert_eq!(
        (r.status, r.body["reason"].as_str()),
        (409, Some("Conflict"))
    );
    assert_eq!(
        r.body["message"],
        "Apply failed with 2 conflicts: conflicts with \"A\":\n- .data.x\n- .data.y"
    );
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldManagerConflict", "message": "conflict with \"A\"", "field": ".data.x"})
    );
    // An Update manager is named with its apiVersion (printManager).
    call_with(
        &sim,
        "PATCH",
        &format!("{CM}/c?fieldManager=editor"),
        Some(json!({"data": {"z": "3"}})),
        &[("content-type", "application/merge-patch+json")],
    )
    .await;
    let r = apply(&sim, "c", cm("c", json!({"z": "4"})), "B", false).await;
    assert_eq!(
        r.body["message"],
        "Apply failed with 1 conflict: conflict with \"editor\" using v1: .data.z"
    );
    let r = apply(&sim, "c", cm("c", json!({"x": "9"})), "B", true).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"], json!({"x": "9", "y": "2", "z": "3"}));
    // A stops applying y (it no longer owns x): y goes, x stays B's.
    let r = apply(&sim, "c", cm("c", json!({})), "A", false).await;
    assert_eq!(r.body["data"], json!({"x": "9", "z": "3"}));
    let managers: Vec<(String, String)> = r.body["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["operation"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(managers.contains(&("B".into(), "Apply".into())));
    assert!(managers.contains(&("editor".into(), "Update".into())));
    // An applied empty map is itself owned (`f:data: {}`), as structured-merge-diff records
    // it.
    let a = r.body["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["manager"] == "A")
        .unwrap()
        .clone();
    assert_eq!(a["fieldsV1"], json!({"f:data": {}}));
}

#[tokio::test]
async fn delete_preconditions_answers_and_dry_run() {
    let sim = sim();
    let c = call(&sim, "POST", CM, Some(cm("c", json!({"a": "b"})))).await;
    let uid = c.body["metadata"]["uid"].as_str().unwrap().to_string();
    let r = call(
        &sim,
        "DELETE",
        &format!("{CM}/c"),
        Some(json!({"preconditions": {"uid": "other"}})),
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.body["message"],
        format!(
            "Operation cannot be fulfilled on configmaps \"c\": Precondition failed: UID in precondition: other, UID in object meta: {uid}"
        )
    );
    let r = call(&sim, "DELETE", &format!("{CM}/c?dryRun=All"), None).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        call(&sim, "GET", &format!("{CM}/c"), None).await.status,
        200
    );
    let r = call(
        &sim,
        "DELETE",
        &format!("{CM}/c"),
        Some(json!({"preconditions": {"uid": uid}})),
    )
    .await;
    assert_eq!(
        (r.body["kind"].as_str(), r.body["status"].as_str()),
        (Some("Status"), Some("Success"))
    );
    assert_eq!(r.body["details"]["uid"], uid.as_str());
    let r = call(
        &sim,
        "POST",
        &format!("{CM}?dryRun=All"),
        Some(cm("d", json!({}))),
    )
    .await;
    assert_eq!(r.status, 201);
    assert_eq!(
        call(&sim, "GET", &format!("{CM}/d"), None).await.status,
        404
    );
}

#[tokio::test]
async fn paging_and_selectors() {
    let sim = sim();
    for (n, env) in [("a", "prod"), ("b", "dev"), ("c", "")] {
        let mut o = cm(n, json!({}));
        if !env.is_empty() {
            o["metadata"]["labels"] = json!({"env": env});
        }
        call(&sim, "POST", CM, Some(o)).await;
    }
    let r = call(&sim, "GET", &format!("{CM}?limit=2"), None).await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    assert_eq!(r.body["metadata"]["remainingItemCount"], 1);
    let token = r.body["metadata"]["continue"].as_str().unwrap().to_string();
    let r = call(&sim, "GET", &format!("{CM}?limit=2&continue={token}"), None).await;
    assert_eq!(r.body["items"][0]["metadata"]["name"], "c");
    assert!(r.body["metadata"].get("continue").is_none());
    let names = |r: &Resp| -> Vec<String> {
        r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let r = call(
        &sim,
        "GET",
        &format!("{CM}?labelSelector=env%20notin%20(prod)"),
        None,
    )
    .await;
    assert_eq!(names(&r), ["b", "c"]);
    let r = call(&sim, "GET", &format!("{CM}?labelSelector=!env"), None).await;
    assert_eq!(names(&r), ["c"]);
    let r = call(&sim, "GET", &format!("{CM}?fieldSelector=data.x%3Dy"), None).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["message"], "field label not supported: data.x");
}

#[tokio::test]
async fn openapi_and_tables_for_kubectl() {
    let sim = sim();
    let r = call(&sim, "GET", "/openapi/v3", None).await;
    let url = r.body["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = call(&sim, "GET", &url, None).await;
    let patch = &doc.body["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"]["kind"],
        "ConfigMap"
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    let t = call_with(
        &sim,
        "GET",
        "/api/v1/namespaces",
        None,
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
    )
    .await;
    assert_eq!(t.body["kind"], "Table");
    assert_eq!(t.body["columnDefinitions"][1]["name"], "Status");
    assert_eq!(t.body["rows"][0]["cells"][1], "Active");
    let d = call(&sim, "GET", "/api/v1", None).await;
    let ns = d.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "namespaces")
        .unwrap()
        .clone();
    assert_eq!(ns["shortNames"], json!(["ns"]));
}

/// kube-rs (what activities/src/kube uses) parses the apply conflict as
/// `kube::Error::Api` with code 409, reason `Conflict` and `FieldManagerConflict` causes,
/// and an immediate delete of a ConfigMap as a `Status` (`Either::Right`).
#[tokio::test]
async fn kube_rs_sees_apply_conflicts_and_delete_statuses() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};

    let sim = sim();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(sim.clone().serve(listener));
    let client = kube::Client::try_from(kube::Config::new(base.parse().unwrap())).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.patch(
        "c",
        &PatchParams::apply("a"),
        &Patch::Apply(cm("c", json!({"k": "1"}))),
    )
    .await
    .unwrap();
    let err = api
        .patch(
            "c",
            &PatchParams::apply("b"),
            &Patch::Apply(cm("c", json!({"k": "2"}))),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err:?}")
    };
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    let causes = s.details.unwrap().causes;
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.k");
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let err = api.delete("c", &wrong).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    let gone = api.delete("c", &DeleteParams::default()).await.unwrap();
    assert!(gone.is_right());
}
