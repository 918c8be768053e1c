//! With real processes (`simulator serve` and the prebuilt
//! `hcp-workflow`): the simulated cluster checks the workload-identity chain its real
//! components depend on — identity, federated credential (issuer, subject, audience), the
//! issuer's published documents and key, and role assignments at each scope — so a broken
//! link fails the run with Azure's own error, where before every test stayed green.
//!
//! Run `cargo build -p hcp-workflow` first.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, byo_identities, cluster_file};
use serde_json::{Value, json};
use std::time::Duration;

const FAST: f64 = 0.002;
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";

fn rg(name: &str) -> String {
    format!("/subscriptions/{GUEST_SUB}/resourceGroups/{name}")
}

/// The whole chain right (the user's identities and federated credentials, our issuer and
/// role assignments): the create succeeds. One subject wrong (`ingress-operator` spelled
/// otherwise): the ingress operator cannot get a token (`AADSTS70021`, naming the issuer
/// and the subject Entra was shown), the release never rolls out, and the run fails and
/// unwinds instead of reporting a cluster whose ingress is dead.
#[test]
fn a_wrong_federated_subject_fails_the_create_with_aadsts70021() {
    let env = Env::new("wi-subject", FAST);
    let good = cluster_file(
        &env.dir,
        "wiok",
        "wiok-a1b2c",
        "Public",
        "waitBudgets:\n  clusterRollout: 10s\n",
    );
    byo_identities(&env, &good, "wiokoidc1", None);
    let (code, out, err) = env.start("create-cluster", &good, &[], &[]);
    assert_eq!(code, 0, "the right chain must succeed\n{out}\n{err}");
    // A Public cluster's API server is a LoadBalancer Service
    // (`kube-apiserverlb`, port 7443) with a public IP; the control-plane operator makes no private router for it.
    let svc = |name: &str| {
        env.sim
            .get(&format!("/api/v1/namespaces/clusters-wiok/services/{name}"))
    };
    assert!(
        svc("kube-apiserverlb")["status"]["loadBalancer"]["ingress"][0]["ip"].is_string(),
        "{}",
        svc("kube-apiserverlb")
    );
    assert_eq!(
        svc("private-router")["code"],
        404,
        "{}",
        svc("private-router")
    );

    let env = Env::new("wi-subject-bad", FAST);
    let bad = cluster_file(
        &env.dir,
        "wibad",
        "wibad-a1b2c",
        "Public",
        "waitBudgets:\n  clusterRollout: 10s\n",
    );
    byo_identities(
        &env,
        &bad,
        "wibadoidc1",
        Some((
            "system:serviceaccount:openshift-ingress-operator:ingress-operator",
            "system:serviceaccount:openshift-ingress-operator:ingress",
        )),
    );
    // The preflight refuses this file (`identities.federation`, tested in
    // cluster_config.rs); past it, the simulated cluster's own check of the chain must
    // still fail the run with Entra's error.
    let (code, out, err) = env.start("create-cluster", &bad, &["--skip-preflight"], &[]);
    let all = format!("{out}\n{err}");
    assert_eq!(code, 1, "{all}");
    assert!(all.contains("rollout.guest"), "{all}");
    assert!(all.contains("ingress"), "{all}");
    assert!(all.contains("AADSTS70021"), "{all}");
    assert!(
        all.contains(
            "Assertion Subject: 'system:serviceaccount:openshift-ingress-operator:ingress-operator'"
        ),
        "{all}"
    );
}

/// With hcp-workflow's own identities: one role assignment deleted by hand while the run
/// is on its way (node-pool management's Contributor on the VNet's group) — CAPZ cannot
/// create machines (`AuthorizationFailed` over that scope), no NodePool becomes Ready, and
/// the run fails and unwinds.
#[test]
fn a_deleted_role_assignment_fails_the_create_with_authorization_failed() {
    let env = Env::new("wi-role", FAST);
    let cfg = cluster_file(
        &env.dir,
        "wirole",
        "wirole-a1b2c",
        "Public",
        "waitBudgets:\n  nodePoolReady: 10s\n",
    );
    // The NodePools reach the management cluster 3 s late: time to break the chain first.
    env.sim.fault(json!({
        "resource_type": "hypershift.openshift.io/nodepools",
        "method": "PATCH",
        "latency_ms": 3000,
        "times": 2,
    }));
    let run = hcp_e2e_tests::Proc::spawn(
        &env.dir,
        &env.args(&["start", "create-cluster", "--config", cfg.to_str().unwrap()]),
        &[],
    );
    // Once the HostedCluster exists, every role assignment has been made.
    let hc = loop {
        let v = env.sim.get(&format!("{HC}/wirole"));
        if v.pointer("/spec/platform/azure/azureAuthenticationConfig")
            .is_some()
        {
            break v;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let client = hc.pointer(
        "/spec/platform/azure/azureAuthenticationConfig/workloadIdentities/nodePoolManagement/clientID",
    )
    .and_then(Value::as_str)
    .unwrap()
    .to_string();
    let inventory = env.sim.inventory();
    let of_type = |t: &str| -> Vec<String> {
        inventory
            .iter()
            .filter(|i| {
                i["type"]
                    .as_str()
                    .is_some_and(|x| x.eq_ignore_ascii_case(t))
            })
            .filter_map(|i| i["id"].as_str().map(str::to_string))
            .collect()
    };
    let principal = of_type("Microsoft.ManagedIdentity/userAssignedIdentities")
        .into_iter()
        .map(|id| env.sim.get(&format!("{id}?api-version=2024-11-30")))
        .find(|v| v["properties"]["clientId"] == client.as_str())
        .unwrap()["properties"]["principalId"]
        .as_str()
        .unwrap()
        .to_string();
    let vnet_rg = rg("wirole-vnet-wirole-a1b2c").to_ascii_lowercase();
    let assignment = of_type("Microsoft.Authorization/roleAssignments")
        .into_iter()
        .filter(|id| id.to_ascii_lowercase().starts_with(&vnet_rg))
        .find(|id| {
            env.sim.get(&format!("{id}?api-version=2022-04-01"))["properties"]["principalId"]
                == principal.as_str()
        })
        .expect("node-pool management's role assignment on the VNet group");
    let status = env
        .sim
        .delete(&format!("{assignment}?api-version=2022-04-01"));
    assert!(
        (200..300).contains(&status),
        "DELETE {assignment}: {status}"
    );

    let (code, lines, err) = run.finish(Duration::from_secs(240));
    let all = format!("{}\n{err}", lines.join("\n"));
    assert_eq!(code, Some(1), "{all}");
    assert!(all.contains("nodepools."), "{all}");
    assert!(all.contains("AuthorizationFailed"), "{all}");
    assert!(
        all.contains(&vnet_rg) || all.to_ascii_lowercase().contains(&vnet_rg),
        "{all}"
    );
}
