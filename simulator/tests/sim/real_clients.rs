//! The real clients, unchanged: azure_core's pipeline with an azure_identity
//! `ClientSecretCredential`, and kube-rs (`Api`, `Patch::Apply`, `await_condition`,
//! delete with finalizer) — against a simulator on a loopback socket.
//!
//! azure_identity only accepts an https authority host and the bearer-token policy refuses
//! plain http, so requests keep their real `https://login.microsoftonline.com/...` and
//! `https://management.azure.com/...` URLs through the pipeline; only the transport (an
//! `azure_core::http::HttpClient`) sends them to the simulator's loopback address, passing
//! the original host in `x-ms-original-host`.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::Secret;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::policies::Policy;
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::{
    AsyncRawResponse, Body, ClientOptions, Context, HttpClient, Method, Pipeline, Request,
    Transport, Url,
};
use azure_identity::{ClientSecretCredential, ClientSecretCredentialOptions};
use futures::TryStreamExt;
use hcp_simulator::{ORIGINAL_HOST_HEADER, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

/// Sends https Azure requests to the simulator, keeping path and query.
#[derive(Debug)]
struct SimTransport {
    base: String,
    client: reqwest::Client,
}

#[async_trait::async_trait]
impl HttpClient for SimTransport {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let url = request.url();
        let host = url.host_str().unwrap_or_default().to_string();
        let mut target = format!("{}{}", self.base, url.path());
        if let Some(q) = url.query() {
            target.push('?');
            target.push_str(q);
        }
        let method = reqwest::Method::from_bytes(request.method().as_str().as_bytes()).unwrap();
        let mut req = self
            .client
            .request(method, &target)
            .header(ORIGINAL_HOST_HEADER, host);
        for (name, value) in request.headers().iter() {
            req = req.header(name.as_str(), value.as_str());
        }
        if let Body::Bytes(b) = request.body() {
            req = req.body(b.clone());
        }
        let rsp = req.send().await.map_err(|e| {
            azure_core::Error::with_error(
                azure_core::error::ErrorKind::Io,
                e,
                "simulator transport",
            )
        })?;
        let status = rsp.status().as_u16();
        let headers: HashMap<HeaderName, HeaderValue> = rsp
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::from(k.as_str().to_owned()),
                    HeaderValue::from(v.to_str().ok()?.to_owned()),
                ))
            })
            .collect();
        let body = Box::pin(rsp.bytes_stream().map_err(|e| {
            azure_core::Error::with_error(azure_core::error::ErrorKind::Io, e, "body")
        }));
        Ok(AsyncRawResponse::new(
            status.into(),
            Headers::from(headers),
            body,
        ))
    }
}

async fn start() -> (Simulator, String) {
    let mut cfg = SimConfig::default();
    cfg.throttle.enabled = false;
    let crds =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference/hypershift");
    if crds.is_dir() {
        cfg.crds_dir = Some(crds);
    }
    let sim = Simulator::new(cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(sim.clone().serve(listener));
    (sim, base)
}

async fn send(
    pipeline: &Pipeline,
    method: Method,
    url: &str,
    body: Option<Value>,
) -> (u16, azure_core::http::headers::Headers, Value) {
    let mut req = Request::new(Url::parse(url).unwrap(), method);
    if let Some(b) = body {
        req.insert_header("content-type", "application/json");
        req.set_body(b.to_string());
    }
    let rsp = pipeline
        .send(&Context::new(), &mut req, None)
        .await
        .unwrap();
    let status = u16::from(rsp.status());
    let headers = rsp.headers().clone();
    let bytes = rsp.into_body();
    let v = serde_json::from_slice(bytes.as_ref()).unwrap_or(Value::Null);
    (status, headers, v)
}

#[tokio::test]
async fn azure_core_pipeline_with_client_secret_credential() {
    let (sim, base) = start().await;
    let transport = Transport::new(Arc::new(SimTransport {
        base,
        client: reqwest::Client::new(),
    }));
    let options = ClientOptions {
        transport: Some(transport.clone()),
        ..Default::default()
    };
    let credential = ClientSecretCredential::new(
        "72f988bf-86f1-41af-91ab-2d7cd011db47",
        "11111111-2222-3333-4444-555555555555".to_string(),
        Secret::new("not-a-real-secret"),
        Some(ClientSecretCredentialOptions {
            client_options: options.clone(),
        }),
    )
    .unwrap();
    let auth: Arc<dyn Policy> = Arc::new(BearerTokenAuthorizationPolicy::new(
        credential,
        ["https://management.azure.com/.default"],
    ));
    let pipeline = Pipeline::new(
        Some("hcp-simulator-test"),
        Some("0"),
        options,
        vec![],
        vec![auth],
        None,
    );
    let sub = "https://management.azure.com/subscriptions/33333333-3333-3333-3333-333333333333";
    let (s, _, b) = send(
        &pipeline,
        Method::Put,
        &format!("{sub}/resourcegroups/rc?api-version=2021-04-01"),
        Some(json!({"location": "eastus"})),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(b["name"], "rc");
    // An LRO: PUT a VNet, poll the Azure-AsyncOperation URL through the same pipeline.
    let vnet = format!(
        "{sub}/resourceGroups/rc/providers/Microsoft.Network/virtualNetworks/v?api-version=2023-11-01"
    );
    let (s, h, _) = send(&pipeline, Method::Put, &vnet, Some(json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}}))).await;
    assert_eq!(s, 201);
    let op: String = h
        .get_optional_string(&HeaderName::from_static("azure-asyncoperation"))
        .unwrap();
    assert!(op.starts_with("https://management.azure.com/"));
    let mut status = String::new();
    for _ in 0..200 {
        let (_, _, b) = send(&pipeline, Method::Get, &op, None).await;
        status = b["status"].as_str().unwrap().to_string();
        if status != "InProgress" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, "Succeeded");
    let (_, _, b) = send(&pipeline, Method::Get, &vnet, None).await;
    assert_eq!(b["properties"]["provisioningState"], "Succeeded");
    // The token endpoint and ARM both saw the real https hosts' paths.
    let log = sim.requests();
    assert!(
        log.iter().any(|r| r.method == "POST"
            && r.path.ends_with("/oauth2/v2.0/token")
            && r.status == 200)
    );
    // Errors surface through the pipeline's error type with the ARM code.
    let mut req = Request::new(
        Url::parse(&format!("{sub}/resourceGroups/nope?api-version=2021-04-01")).unwrap(),
        Method::Get,
    );
    let err = pipeline
        .send(&Context::new(), &mut req, Some(Default::default()))
        .await
        .unwrap_err();
    assert!(
        format!("{err:?}").contains("ResourceGroupNotFound"),
        "{err:?}"
    );
}

fn hosted_cluster(name: &str) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": "clusters"},
        "spec": {
            "etcd": {"managementType": "Managed"},
            "networking": {"networkType": "OVNKubernetes"},
            "platform": {"type": "Azure", "azure": {"location": "eastus", "resourceGroup": "rg", "vnetID": "v", "subnetID": "s",
                "securityGroupID": "n", "subscriptionID": "x", "tenantID": "t", "topology": "Public",
                "azureAuthenticationConfig": {"azureAuthenticationConfigType": "WorkloadIdentities"}}},
            "pullSecret": {"name": "ps"},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64"},
            "services": [{"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}}],
        }
    })
}

#[tokio::test]
async fn kube_rs_apply_wait_and_delete_with_finalizer() {
    let (_sim, base) = start().await;
    let config = kube::Config::new(base.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let pp = PatchParams::apply("hcp-test").force();
    ns_api
        .patch(
            "clusters",
            &pp,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "clusters"}}),
            ),
        )
        .await
        .unwrap();
    let ar = ApiResource {
        group: "hypershift.openshift.io".into(),
        version: "v1beta1".into(),
        api_version: "hypershift.openshift.io/v1beta1".into(),
        kind: "HostedCluster".into(),
        plural: "hostedclusters".into(),
    };
    let hcs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "clusters", &ar);
    let created = hcs
        .patch("demo", &pp, &Patch::Apply(hosted_cluster("demo")))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let available = |o: Option<&DynamicObject>| {
        o.and_then(|o| o.data["status"]["conditions"].as_array().cloned())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Available" && c["status"] == "True")
            })
    };
    tokio::time::timeout(
        Duration::from_secs(20),
        await_condition(hcs.clone(), "demo", available),
    )
    .await
    .unwrap()
    .unwrap();
    // Typed core objects deserialize: a Public cluster's `kube-apiserverlb` LoadBalancer
    // Service has its IP.
    let svcs: Api<Service> = Api::namespaced(client.clone(), "clusters-demo");
    let svc = svcs.get("kube-apiserverlb").await.unwrap();
    assert!(
        svc.status.unwrap().load_balancer.unwrap().ingress.unwrap()[0]
            .ip
            .is_some()
    );
    // A list with a field selector.
    let lp = kube::api::ListParams::default().fields("metadata.name=demo");
    assert_eq!(hcs.list(&lp).await.unwrap().items.len(), 1);
    // Delete: the operator's finalizer holds it until teardown, then it is gone.
    let hc = hcs.get("demo").await.unwrap();
    assert!(
        hc.metadata
            .finalizers
            .unwrap()
            .contains(&hcp_simulator::FINALIZER.to_string())
    );
    hcs.delete("demo", &DeleteParams::default()).await.unwrap();
    let pending = hcs.get("demo").await.unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    tokio::time::timeout(
        Duration::from_secs(20),
        await_condition(hcs.clone(), "demo", conditions::is_deleted(&uid)),
    )
    .await
    .unwrap()
    .unwrap();
    // Invalid objects are refused with 422 through kube-rs' error type.
    let mut bad = hosted_cluster("bad");
    bad["spec"].as_object_mut().unwrap().remove("release");
    if std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/reference/hypershift")
        .is_dir()
    {
        match hcs.patch("bad", &pp, &Patch::Apply(bad)).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 422),
            other => panic!("expected 422, got {other:?}"),
        }
    }
}
