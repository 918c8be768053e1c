//! `--state FILE`: a restarted simulator continues with the same world.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::*;
use hcp_simulator::Simulator;
use serde_json::json;

#[tokio::test]
async fn state_file_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sim.json");
    let mut cfg = config();
    cfg.state_file = Some(file.clone());
    let ident = format!(
        "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/keep?api-version=2024-11-30",
        rg_path("rg")
    );
    let (client_id, vnet_op) = {
        let sim = Simulator::new(cfg.clone()).unwrap();
        create_rg(&sim, "rg").await;
        let r = call(&sim, "PUT", &ident, Some(json!({"location": "eastus"}))).await;
        let vnet = format!(
            "{}/providers/Microsoft.Network/virtualNetworks/v?{NET}",
            rg_path("rg")
        );
        let v = call(&sim, "PUT", &vnet, Some(json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}}))).await;
        call(
            &sim,
            "POST",
            "/api/v1/namespaces",
            Some(json!({"metadata": {"name": "persisted"}})),
        )
        .await;
        (
            r.body["properties"]["clientId"]
                .as_str()
                .unwrap()
                .to_string(),
            v.header("azure-asyncoperation").unwrap(),
        )
    };
    assert!(file.exists());
    // A new process (here: a new instance) loads the file.
    let sim = Simulator::new(cfg).unwrap();
    let r = call(&sim, "GET", &ident, None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["properties"]["clientId"], client_id.as_str());
    // The operation started before the restart can still be polled to completion.
    assert_eq!(wait_op(&sim, &vnet_op).await, "Succeeded");
    assert_eq!(
        call(&sim, "GET", "/api/v1/namespaces/persisted", None)
            .await
            .status,
        200
    );
    // New ids do not repeat old ones.
    let r2 = call(
        &sim,
        "PUT",
        &ident.replace("/keep?", "/new?"),
        Some(json!({"location": "eastus"})),
    )
    .await;
    assert_ne!(r2.body["properties"]["clientId"], client_id.as_str());
    // Watchers resuming from before the restart are told to re-list.
    let w = call(
        &sim,
        "GET",
        "/api/v1/namespaces?watch=true&resourceVersion=1&timeoutSeconds=1",
        None,
    )
    .await;
    assert!(w.text.contains("\"code\":410"), "{}", w.text);
}
