//! `Mgmt` against the simulated management cluster (real kube-rs client over HTTP, CRD
//! validation on when `../shared` is present): idempotent server-side apply, ownership
//! guards, the private-router IP, conditions, finalizer-aware deletion.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ::kube as kube_rs;
use hcp_activities::kube::render::{
    self, HostedClusterInput, NodePoolImage, NodePoolInput, Topology, WORKLOAD_IDENTITY_FIELDS,
};
use hcp_activities::kube::{
    self, DeleteProgress, ErrorClass, Kind, KubeError, KubeTarget, Mgmt, PRIVATE_ROUTER,
};
use hcp_activities::secret::Secret;
use hcp_simulator::{FaultRule, SimConfig, Simulator};
use k8s_openapi::api::core::v1::Secret as K8sSecret;
use serde_json::{Value, json};

const SUB: &str = "11111111-1111-1111-1111-111111111111";
/// Bound of every polling loop below (in 50 ms steps): far above the simulated operator's
/// delays at the default time scale (a NodePool is Ready after 3 s).
const POLLS: usize = 400;

fn crds() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/reference/hypershift"
    ));
    dir.is_dir().then_some(dir)
}

async fn start() -> (Simulator, Mgmt) {
    let mut cfg = SimConfig::default();
    cfg.throttle.enabled = false;
    cfg.crds_dir = crds();
    // These tests are about the Kubernetes API mechanics; their HostedClusters name
    // identities that exist nowhere (the identity chain has its own e2e tests).
    cfg.scenario.unchecked_identities = true;
    let sim = Simulator::new(cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(sim.clone().serve(listener));
    let client = kube::client(&KubeTarget::Endpoint { url }).await.unwrap();
    (sim, Mgmt::new(client))
}

fn owner(cluster: &str, infra: &str, run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (kube::LABEL_CLUSTER.to_string(), cluster.to_string()),
        (kube::LABEL_INFRA_ID.to_string(), infra.to_string()),
        (kube::LABEL_RUN.to_string(), run.to_string()),
    ])
}

fn subnet(rg: &str, vnet: &str, name: &str) -> String {
    format!(
        "/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{name}"
    )
}

fn hc_input(
    name: &str,
    topology: Topology,
    labels: BTreeMap<String, String>,
) -> HostedClusterInput {
    HostedClusterInput {
        name: name.into(),
        namespace: "clusters".into(),
        infra_id: format!("{name}-x1"),
        release_image: "quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64".into(),
        base_domain: "example.com".into(),
        issuer_url: "https://demooidc.blob.core.windows.net/oidc".into(),
        location: "eastus".into(),
        subscription_id: SUB.into(),
        tenant_id: "22222222-2222-2222-2222-222222222222".into(),
        resource_group: format!("{name}-{name}-x1"),
        vnet_id: format!(
            "/subscriptions/{SUB}/resourceGroups/{name}-vnet/providers/Microsoft.Network/virtualNetworks/{name}"
        ),
        subnet_id: subnet(&format!("{name}-vnet"), name, "default"),
        nsg_id: format!(
            "/subscriptions/{SUB}/resourceGroups/{name}-nsg/providers/Microsoft.Network/networkSecurityGroups/{name}-nsg"
        ),
        topology,
        cloud: None,
        highly_available: false,
        infrastructure_highly_available: false,
        fips: false,
        etcd_storage_class: None,
        etcd_size: None,
        image_content_sources: Vec::new(),
        node_selector: BTreeMap::new(),
        tolerations: Vec::new(),
        pod_labels: BTreeMap::new(),
        user_labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        kube_api_server_dns_name: None,
        feature_set: None,
        capabilities_enabled: Vec::new(),
        capabilities_disabled: Vec::new(),
        control_plane_operator_image: None,
        ovn_kubernetes_mtu: None,
        disable_multi_network: false,
        kms: None,
        cluster_network: None,
        service_network: None,
        machine_network: None,
        workload_identities: WORKLOAD_IDENTITY_FIELDS
            .iter()
            .enumerate()
            .map(|(i, (c, _))| (c.to_string(), format!("00000000-0000-4000-8000-{i:012}")))
            .collect(),
        managed_identities: None,
        nat_subnet_id: topology
            .is_private()
            .then(|| subnet("hcp-management", "management-vnet", "pls-nat")),
        additional_allowed_subscriptions: vec![],
        private_zone_id: None,
        public_zone_id: None,
        pull_secret_name: format!("{name}-pull-secret"),
        ssh_key_secret_name: None,
        etcd_key_secret_name: format!("{name}-etcd-encryption-key"),
        sa_signing_key_secret_name: format!("{name}-sa-token-issuer-key"),
        labels,
    }
}

fn np_input(cluster: &str, labels: BTreeMap<String, String>) -> NodePoolInput {
    NodePoolInput {
        name: format!("{cluster}-workers"),
        namespace: "clusters".into(),
        cluster_name: cluster.into(),
        replicas: 2,
        auto_scaling: None,
        release_image: "quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64".into(),
        vm_size: String::new(),
        image: NodePoolImage::ImageId("rhcos".into()),
        os_disk_size_gib: 128,
        subnet_id: subnet(&format!("{cluster}-vnet"), cluster, "default"),
        availability_zone: None,
        labels,
        node_drain_timeout: None,
        node_volume_detach_timeout: None,
        arch: None,
        upgrade_type: None,
        encryption_at_host: None,
        disk_encryption_set_id: None,
        os_disk_storage_account_type: None,
        auto_repair: false,
        ephemeral_os_disk: false,
        diagnostics: None,
    }
}

fn label(obj: &kube_rs::api::DynamicObject, key: &str) -> Option<String> {
    obj.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key).cloned())
}

/// Calls `f` every 50 ms until it yields `Some`, at most [`POLLS`] times.
async fn poll<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..POLLS {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("gave up waiting for {what}");
}

#[tokio::test]
async fn public_cluster_lifecycle() {
    let (sim, m) = start().await;
    let labels = owner("demo", "demo-x1", "run-1");

    // Namespace + Secret + HostedCluster, each applied twice: the second apply changes nothing.
    let ns1 = m.apply_namespace("clusters", &labels).await.unwrap();
    let ns2 = m.apply_namespace("clusters", &labels).await.unwrap();
    assert!(ns1.written && ns2.written);
    assert_eq!(ns1.uid, ns2.uid);

    let data = || {
        BTreeMap::from([(
            render::PULL_SECRET_KEY.to_string(),
            Secret::new(br#"{"auths":{}}"#.to_vec()),
        )])
    };
    let s1 = m
        .apply_secret("clusters", "demo-pull-secret", data(), &labels)
        .await
        .unwrap();
    let s2 = m
        .apply_secret("clusters", "demo-pull-secret", data(), &labels)
        .await
        .unwrap();
    assert_eq!(s1.uid, s2.uid);
    let got = m
        .get_secret_data("clusters", "demo-pull-secret", render::PULL_SECRET_KEY)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.expose().as_slice(), br#"{"auths":{}}"#);
    assert!(
        m.get_secret_data("clusters", "demo-pull-secret", "nope")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        m.get_secret_data("clusters", "missing", "key")
            .await
            .unwrap()
            .is_none()
    );

    let hc = render::hosted_cluster(&hc_input("demo", Topology::Public, labels.clone()));
    let a1 = m.apply_hosted_cluster("clusters", &hc).await.unwrap();
    let before = m
        .get(Kind::HostedCluster, "clusters", "demo")
        .await
        .unwrap()
        .unwrap();
    let a2 = m.apply_hosted_cluster("clusters", &hc).await.unwrap();
    let after = m
        .get(Kind::HostedCluster, "clusters", "demo")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a1.uid, a2.uid);
    assert_eq!(a1.generation, Some(1));
    assert_eq!(
        a2.generation,
        Some(1),
        "re-applying the same spec is not a change"
    );
    assert_eq!(before.data["spec"], after.data["spec"]);

    // Every write was a server-side apply by our field manager, never forced.
    let patches: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| r.path)
        .collect();
    assert_eq!(patches.len(), 6, "{patches:#?}");
    assert!(
        patches
            .iter()
            .all(|p| p.contains("fieldManager=hcp-workflow"))
    );
    assert!(patches.iter().all(|p| !p.contains("force=true")));
    assert_eq!(
        patches
            .iter()
            .filter(|p| p.starts_with(
                "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters/demo?"
            ))
            .count(),
        2
    );

    // A later run re-applying keeps the creating run's label.
    let hc_run2 = render::hosted_cluster(&hc_input(
        "demo",
        Topology::Public,
        owner("demo", "demo-x1", "run-2"),
    ));
    m.apply_hosted_cluster("clusters", &hc_run2).await.unwrap();
    let obj = m
        .get(Kind::HostedCluster, "clusters", "demo")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(label(&obj, kube::LABEL_RUN).as_deref(), Some("run-1"));

    // Another cluster's owner cannot take it over.
    let other = render::hosted_cluster(&hc_input(
        "demo",
        Topology::Public,
        owner("demo", "demo-OTHER", "run-9"),
    ));
    let err = m
        .apply_hosted_cluster("clusters", &other)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            KubeError::NotOurs {
                action: "overwrite",
                ..
            }
        ),
        "{err}"
    );

    // NodePool, applied twice (early, so its readiness overlaps the control plane's).
    let np = render::node_pool(&np_input("demo", labels.clone()));
    let n1 = m.apply_node_pool("clusters", &np).await.unwrap();
    let n2 = m.apply_node_pool("clusters", &np).await.unwrap();
    assert_eq!((n1.uid.clone(), n1.generation), (n2.uid, n2.generation));

    // A Public cluster's API server is a LoadBalancer Service with a public IP; it has no
    // private router (`infra.go` `reconcileHCPRouterServices`).
    let cp_ns = kube::control_plane_namespace("clusters", "demo");
    let ip = poll("the kube-apiserverlb load balancer IP", || {
        let (m, cp_ns) = (m.clone(), cp_ns.clone());
        async move { m.service_lb_ip(&cp_ns, "kube-apiserverlb").await.unwrap() }
    })
    .await;
    assert!(ip.starts_with("20."), "{ip}");
    assert!(
        m.service_lb_ip(&cp_ns, PRIVATE_ROUTER)
            .await
            .unwrap()
            .is_none()
    );

    let available = poll("Available=True", || {
        let m = m.clone();
        async move {
            m.condition(Kind::HostedCluster, "clusters", "demo", "Available")
                .await
                .unwrap()
                .filter(|c| c.is_true())
        }
    })
    .await;
    assert_eq!(available.reason.as_deref(), Some("AsExpected"));
    assert!(available.last_transition_time.is_some());
    assert!(
        m.condition(Kind::HostedCluster, "clusters", "demo", "NoSuchCondition")
            .await
            .unwrap()
            .is_none()
    );

    // NodePool: Ready=True.
    let ready = poll("NodePool Ready=True", || {
        let m = m.clone();
        async move {
            m.condition(Kind::NodePool, "clusters", "demo-workers", "Ready")
                .await
                .unwrap()
                .filter(|c| c.is_true())
        }
    })
    .await;
    assert_eq!(ready.status, "True");

    // Delete the NodePool by calling delete again and again (as a step does).
    let first = m
        .delete(Kind::NodePool, "clusters", "demo-workers")
        .await
        .unwrap();
    assert_eq!(
        first,
        DeleteProgress::Deleting {
            finalizers: vec![hcp_simulator::FINALIZER.to_string()]
        }
    );
    poll("the NodePool to be gone", || {
        let m = m.clone();
        async move {
            (m.delete(Kind::NodePool, "clusters", "demo-workers")
                .await
                .unwrap()
                == DeleteProgress::Gone)
                .then_some(())
        }
    })
    .await;
    // Calling delete while it was deleting did not send another DELETE.
    let np_deletes = sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.path.contains("/nodepools/demo-workers"))
        .count();
    assert_eq!(np_deletes, 1);

    // Delete the HostedCluster: held by HyperShift's finalizer, then gone.
    let first = m
        .delete(Kind::HostedCluster, "clusters", "demo")
        .await
        .unwrap();
    match first {
        DeleteProgress::Deleting { finalizers } => {
            assert_eq!(finalizers, vec![hcp_simulator::FINALIZER.to_string()]);
        }
        DeleteProgress::Gone => panic!("the finalizer should hold the HostedCluster"),
    }
    m.wait_deleted(
        Kind::HostedCluster,
        "clusters",
        "demo",
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    assert_eq!(
        m.delete(Kind::HostedCluster, "clusters", "demo")
            .await
            .unwrap(),
        DeleteProgress::Gone
    );
    // The operator tore the control plane down with it.
    assert!(
        m.service_lb_ip(&cp_ns, "kube-apiserverlb")
            .await
            .unwrap()
            .is_none()
    );

    // A Secret without finalizers is gone at once; deleting what is missing is done.
    assert_eq!(
        m.delete(Kind::Secret, "clusters", "demo-pull-secret")
            .await
            .unwrap(),
        DeleteProgress::Gone
    );
    assert_eq!(
        m.delete(Kind::Secret, "clusters", "demo-pull-secret")
            .await
            .unwrap(),
        DeleteProgress::Gone
    );
    assert_eq!(
        m.delete(Kind::NodePool, "clusters", "never-existed")
            .await
            .unwrap(),
        DeleteProgress::Gone
    );

    // Waiting on a condition of an object that is gone is a permanent error.
    let err = m
        .condition(Kind::HostedCluster, "clusters", "demo", "Available")
        .await
        .unwrap_err();
    assert_eq!(err.classify(), ErrorClass::NotFound);
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn objects_that_are_not_ours_are_neither_deleted_nor_taken_over() {
    let (sim, m) = start().await;
    let labels = owner("demo", "demo-x1", "run-1");
    // Someone else's namespace and Secret, created without our labels.
    let ns_api: kube_rs::Api<k8s_openapi::api::core::v1::Namespace> =
        kube_rs::Api::all(m.client().clone());
    ns_api
        .create(
            &Default::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "shared", "labels": {"team": "a"}}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let secrets: kube_rs::Api<K8sSecret> = kube_rs::Api::namespaced(m.client().clone(), "shared");
    secrets
        .create(
            &Default::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "theirs"}, "stringData": {"k": "v"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();

    // Our namespace apply leaves a shared namespace untouched (no labels claimed).
    let applied = m.apply_namespace("shared", &labels).await.unwrap();
    assert!(!applied.written);
    let ns_labels = m
        .labels(Kind::Namespace, "", "shared")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        ns_labels,
        BTreeMap::from([("team".to_string(), "a".to_string())])
    );
    assert!(!sim.requests().iter().any(|r| r.method == "PATCH"));

    // Delete refuses, and the objects survive.
    let err = m
        .delete(Kind::Secret, "shared", "theirs")
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            KubeError::NotOurs {
                action: "delete",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.classify(), ErrorClass::NotOurs);
    let step: hcp_runtime::StepError = err.into();
    assert!(!step.retryable);
    assert_eq!(step.code.as_deref(), Some("NotOurs"));
    let err = m.delete(Kind::Namespace, "", "shared").await.unwrap_err();
    assert!(matches!(err, KubeError::NotOurs { .. }));
    assert!(!sim.requests().iter().any(|r| r.method == "DELETE"));
    assert!(secrets.get_opt("theirs").await.unwrap().is_some());

    // Apply refuses to overwrite their Secret.
    let err = m
        .apply_secret(
            "shared",
            "theirs",
            BTreeMap::from([("k".to_string(), Secret::new(b"ours".to_vec()))]),
            &labels,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            KubeError::NotOurs {
                action: "overwrite",
                ..
            }
        ),
        "{err}"
    );
    let kept = m
        .get_secret_data("shared", "theirs", "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.expose().as_slice(), b"v");
}

#[tokio::test]
async fn private_cluster_gets_its_router_and_its_nodes_wait_for_the_private_path() {
    let (_sim, m) = start().await;
    let labels = owner("priv", "priv-x1", "run-1");
    m.apply_namespace("clusters", &labels).await.unwrap();
    let input = hc_input("priv", Topology::Private, labels);
    input.validate().unwrap();
    m.apply_hosted_cluster("clusters", &render::hosted_cluster(&input))
        .await
        .unwrap();
    let cp_ns = kube::control_plane_namespace("clusters", "priv");
    let ip = poll("the private-router IP", || {
        let (m, cp_ns) = (m.clone(), cp_ns.clone());
        async move { m.service_lb_ip(&cp_ns, PRIVATE_ROUTER).await.unwrap() }
    })
    .await;
    assert!(ip.starts_with("10.224."));
    // HyperShift's Available follows the hosted control plane only
    // (`reconcileAvailabilityStatus`): it does not wait for the private endpoint...
    poll("Available=True", || {
        let m = m.clone();
        async move {
            m.condition(Kind::HostedCluster, "clusters", "priv", "Available")
                .await
                .unwrap()
                .filter(|c| c.is_true())
        }
    })
    .await;
    // ...but without a PLS, private endpoint and `api` record no node can reach the API
    // server, and no NodePool becomes Ready.
    let np = render::node_pool(&np_input("priv", owner("priv", "priv-x1", "run-1")));
    m.apply_node_pool("clusters", &np).await.unwrap();
    let c = poll("AllNodesHealthy=False", || {
        let m = m.clone();
        async move {
            m.condition(
                Kind::NodePool,
                "clusters",
                "priv-workers",
                "AllNodesHealthy",
            )
            .await
            .unwrap()
            .filter(|c| c.status == "False")
        }
    })
    .await;
    assert_eq!(c.reason.as_deref(), Some("WaitingForNodeRef"));
    let ready = m
        .condition(Kind::NodePool, "clusters", "priv-workers", "Ready")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ready.status, "False");
}

#[tokio::test]
async fn crd_violations_are_permanent_with_the_api_server_message() {
    if crds().is_none() {
        eprintln!("skipped: no ../shared");
        return;
    }
    let (_sim, m) = start().await;
    let labels = owner("bad", "bad-x1", "run-1");
    m.apply_namespace("clusters", &labels).await.unwrap();
    let mut hc = render::hosted_cluster(&hc_input("bad", Topology::Public, labels));
    hc["spec"]["platform"]["azure"]["topology"] = json!("Internal");
    let err = m.apply_hosted_cluster("clusters", &hc).await.unwrap_err();
    match &err {
        KubeError::Api {
            code,
            reason,
            message,
            ..
        } => {
            assert_eq!(*code, 422);
            assert_eq!(reason, "Invalid");
            assert!(message.contains("topology"), "{message}");
        }
        other => panic!("expected a 422, got {other}"),
    }
    assert_eq!(err.classify(), ErrorClass::Validation);
    let step: hcp_runtime::StepError = err.into();
    assert!(!step.retryable);
    assert_eq!(step.code.as_deref(), Some("Invalid"));
    assert!(
        step.message.contains("HTTP 422 Invalid"),
        "{}",
        step.message
    );
    assert!(
        step.message.contains("HostedCluster clusters/bad"),
        "{}",
        step.message
    );

    // A malformed object never reaches the server.
    let err = m
        .apply_node_pool("clusters", &json!({"spec": {}}))
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::Invalid { .. }));
    let mut wrong_ns = render::node_pool(&np_input("bad", BTreeMap::new()));
    wrong_ns["metadata"]["namespace"] = Value::from("elsewhere");
    let err = m.apply_node_pool("clusters", &wrong_ns).await.unwrap_err();
    assert!(matches!(err, KubeError::Invalid { .. }), "{err}");
}

#[tokio::test]
async fn unreachable_cluster_is_a_retryable_transport_error() {
    // Bind then drop a listener so the port is (almost certainly) closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = kube::client(&KubeTarget::Endpoint {
        url: format!("http://127.0.0.1:{port}"),
    })
    .await
    .unwrap();
    let m = Mgmt::new(client);
    let err = m.labels(Kind::Secret, "clusters", "x").await.unwrap_err();
    assert!(matches!(err, KubeError::Transport { .. }), "{err}");
    assert_eq!(err.classify(), ErrorClass::Transient);
    let step: hcp_runtime::StepError = err.into();
    assert!(step.retryable);
}

#[tokio::test]
async fn throttling_and_server_errors_go_back_to_the_engine_at_once() {
    let (sim, m) = start().await;
    for (status, class) in [(429, ErrorClass::Throttled), (503, ErrorClass::Transient)] {
        sim.add_fault(FaultRule {
            method: Some("GET".into()),
            path: Some("/hostedclusters/demo".into()),
            status: Some(status),
            retry_after: Some(7),
            ..FaultRule::default()
        })
        .unwrap();
        let before = sim.requests().len();
        let err = m
            .labels(Kind::HostedCluster, "clusters", "demo")
            .await
            .unwrap_err();
        assert_eq!(err.classify(), class, "{err}");
        assert!(err.is_retryable());
        // One request: no in-memory retry loop inside the client.
        assert_eq!(sim.requests().len(), before + 1);
        let step: hcp_runtime::StepError = err.into();
        assert!(step.retryable);
        assert!(
            step.message.contains(&format!("HTTP {status}")),
            "{}",
            step.message
        );
        sim.clear_faults();
    }
}
