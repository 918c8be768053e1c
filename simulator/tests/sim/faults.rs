//! Fault rules (each kind), throttling, request log, control endpoints.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use hcp_simulator::{FaultRule, Simulator, ThrottleConfig};
use serde_json::json;

fn rg_get() -> String {
    format!("{}?api-version=2021-04-01", rg_path("rg"))
}

#[tokio::test]
async fn status_fault_on_nth_call_with_retry_after() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    let r = call(&sim, "POST", "/_sim/faults", Some(json!({"method": "GET", "path": "/resourceGroups/rg", "nth": 2, "status": 503, "error_code": "ServerBusy", "retry_after": 7}))).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.body["id"], "fault-1");
    assert_eq!(call(&sim, "GET", &rg_get(), None).await.status, 200);
    let hit = call(&sim, "GET", &rg_get(), None).await;
    assert_eq!(hit.status, 503);
    assert_eq!(hit.code().as_deref(), Some("ServerBusy"));
    assert_eq!(hit.body["error"]["code"], "ServerBusy");
    assert_eq!(hit.header("retry-after").as_deref(), Some("7"));
    assert_eq!(call(&sim, "GET", &rg_get(), None).await.status, 200);
    let log = sim.requests();
    let codes: Vec<_> = log
        .iter()
        .map(|r| (r.method.as_str(), r.status, r.error_code.clone()))
        .collect();
    assert_eq!(
        codes[1..],
        [
            ("GET", 200, None),
            ("GET", 503, Some("ServerBusy".into())),
            ("GET", 200, None)
        ]
    );
    assert!(log.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(log[1].path.contains("api-version=2021-04-01"));
}

#[tokio::test]
async fn fault_by_resource_type_and_times() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    sim.add_fault(FaultRule {
        resource_type: Some("Microsoft.Network/privateLinkServices".into()),
        status: Some(429),
        times: Some(2),
        retry_after: Some(1),
        ..Default::default()
    })
    .unwrap();
    let pls = format!(
        "{}/providers/Microsoft.Network/privateLinkServices/p?{NET}",
        rg_path("rg")
    );
    assert_eq!(call(&sim, "GET", &pls, None).await.status, 429);
    assert_eq!(call(&sim, "GET", &rg_get(), None).await.status, 200);
    assert_eq!(call(&sim, "GET", &pls, None).await.status, 429);
    assert_eq!(call(&sim, "GET", &pls, None).await.status, 404);
    // Kubernetes faults answer with a Status body.
    sim.add_fault(FaultRule {
        resource_type: Some("hypershift.openshift.io/hostedclusters".into()),
        status: Some(500),
        ..Default::default()
    })
    .unwrap();
    let k = call(
        &sim,
        "GET",
        "/apis/hypershift.openshift.io/v1beta1/namespaces/default/hostedclusters/x",
        None,
    )
    .await;
    assert_eq!(k.status, 500);
    assert_eq!(k.body["kind"], "Status");
    sim.clear_faults();
    assert_eq!(
        call(
            &sim,
            "GET",
            "/apis/hypershift.openshift.io/v1beta1/namespaces/default/hostedclusters/x",
            None
        )
        .await
        .status,
        404
    );
}

#[tokio::test]
async fn probability_faults_are_seeded() {
    let run = || async {
        let sim = sim();
        create_rg(&sim, "rg").await;
        sim.add_fault(FaultRule {
            path: Some("*/resourceGroups/rg*".into()),
            probability: Some(0.5),
            status: Some(500),
            ..Default::default()
        })
        .unwrap();
        let mut v = Vec::new();
        for _ in 0..30 {
            v.push(call(&sim, "GET", &rg_get(), None).await.status);
        }
        v
    };
    let a = run().await;
    let b = run().await;
    assert_eq!(a, b, "same seed, same faults");
    assert!(a.contains(&500) && a.contains(&200));
}

#[tokio::test]
async fn latency_fault_delays_then_processes() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    sim.add_fault(FaultRule {
        method: Some("GET".into()),
        latency_ms: Some(150),
        ..Default::default()
    })
    .unwrap();
    let t = Instant::now();
    let r = call(&sim, "GET", &rg_get(), None).await;
    assert_eq!(r.status, 200);
    assert!(t.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn drop_connection_fault_aborts_the_connection() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    sim.add_fault(FaultRule {
        method: Some("GET".into()),
        drop_connection: true,
        nth: Some(1),
        ..Default::default()
    })
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(sim.clone().serve(listener));
    let client = reqwest::Client::new();
    let url = format!("http://{addr}{}", rg_get());
    let first = async {
        client
            .get(&url)
            .bearer_auth("t")
            .send()
            .await?
            .bytes()
            .await
    };
    assert!(
        first.await.is_err(),
        "the dropped request must fail at the transport level"
    );
    let second = client.get(&url).bearer_auth("t").send().await.unwrap();
    assert_eq!(second.status(), 200);
    let log = sim.requests();
    assert!(
        log.iter()
            .any(|r| r.status == 0 && r.error_code.as_deref() == Some("ConnectionDropped"))
    );
}

#[tokio::test]
async fn invalid_rules_are_rejected() {
    let sim = sim();
    assert_eq!(
        call(&sim, "POST", "/_sim/faults", Some(json!({"method": "GET"})))
            .await
            .status,
        400
    );
    assert_eq!(
        call(
            &sim,
            "POST",
            "/_sim/faults",
            Some(json!({"status": 500, "probability": 2.0}))
        )
        .await
        .status,
        400
    );
    assert_eq!(
        call(
            &sim,
            "POST",
            "/_sim/faults",
            Some(json!({"status": 500, "bogus": 1}))
        )
        .await
        .status,
        400
    );
    assert_eq!(call(&sim, "DELETE", "/_sim/faults", None).await.status, 204);
}

#[tokio::test]
async fn throttling_answers_429_with_retry_after() {
    let mut cfg = config();
    cfg.throttle = ThrottleConfig {
        read_burst: 3,
        read_per_second: 1.0,
        write_burst: 2,
        write_per_second: 1.0,
        ..ThrottleConfig::default()
    };
    let sim = Simulator::new(cfg).unwrap();
    create_rg(&sim, "rg").await; // 1 write
    for _ in 0..3 {
        let r = call(&sim, "GET", &rg_get(), None).await;
        assert_eq!(r.status, 200);
        assert!(
            r.header("x-ms-ratelimit-remaining-subscription-reads")
                .is_some()
        );
    }
    let r = call(&sim, "GET", &rg_get(), None).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.code().as_deref(), Some("SubscriptionRequestsThrottled"));
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    // Writes have their own bucket (one token left).
    assert_eq!(
        call(&sim, "PUT", &rg_get(), Some(json!({"location": "eastus"})))
            .await
            .status,
        200
    );
    assert_eq!(
        call(&sim, "PUT", &rg_get(), Some(json!({"location": "eastus"})))
            .await
            .status,
        429
    );
    // Another subscription is not affected.
    let other =
        "/subscriptions/22222222-2222-2222-2222-222222222222/resourcegroups?api-version=2021-04-01";
    assert_eq!(call(&sim, "GET", other, None).await.status, 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(call(&sim, "GET", &rg_get(), None).await.status, 200);
}

#[tokio::test]
async fn inventory_lists_arm_and_kube_in_creation_order() {
    let sim = sim();
    create_rg(&sim, "rg").await;
    call(&sim, "PUT", &format!("{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/i?api-version=2024-11-30", rg_path("rg")), Some(json!({"location": "eastus", "tags": {"hcp-workflow.io/cluster": "c1"}}))).await;
    let r = call(&sim, "GET", "/_sim/inventory", None).await;
    let items = r.body.as_array().unwrap();
    let ident = items
        .iter()
        .find(|i| i["type"] == "Microsoft.ManagedIdentity/userAssignedIdentities")
        .unwrap();
    assert_eq!(ident["tags"]["hcp-workflow.io/cluster"], "c1");
    assert!(
        items
            .iter()
            .any(|i| i["type"] == "core/namespaces" && i["name"] == "default")
    );
    let seqs: Vec<u64> = items
        .iter()
        .map(|i| i["created_seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let log = call(&sim, "GET", "/_sim/requests", None).await;
    assert_eq!(
        log.body.as_array().unwrap().len(),
        2,
        "control requests are not logged"
    );
}
