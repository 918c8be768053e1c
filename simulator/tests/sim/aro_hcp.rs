//! The AKS management cluster and HyperShift's ARO HCP identity model: the
//! seeded `managedClusters` resource and its add-ons, the SecretProviderClasses of a
//! `ManagedIdentities` HostedCluster, and its control plane's Key Vault mounts.
#![allow(clippy::unwrap_used)]

use crate::common;

use axum::body::Body;
use axum::http::Request;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::*;
use hcp_simulator::{ManagementPlatform, Simulator};
use serde_json::{Value, json};
use tower::ServiceExt;

const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const SPC: &str =
    "/apis/secrets-store.csi.x-k8s.io/v1/namespaces/clusters-aro/secretproviderclasses";
const AKS_API: &str = "api-version=2025-07-01";
const KV_API: &str = "api-version=7.5";
const VAULT: &str = "aro-kv-test";
/// The control-plane components (`managedIdentities.controlPlane`) and their
/// SecretProviderClasses.
const COMPONENTS: [(&str, &str); 8] = [
    ("controlPlaneOperator", "managed-azure-cpo"),
    ("nodePoolManagement", "managed-azure-nodepool-management"),
    ("cloudProvider", "managed-azure-cloud-provider"),
    ("ingress", "managed-azure-ingress"),
    ("imageRegistry", "managed-azure-image-registry"),
    ("network", "managed-azure-network"),
    ("disk", "managed-azure-disk-csi"),
    ("file", "managed-azure-file-csi"),
];
/// The component roles of `GetServicePrincipalScopes` (Contributor for CAPZ).
const ROLES: [&str; 7] = [
    "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "a1f96423-95ce-4224-ab27-4e3dc72facd4",
    "0336e1d3-7a87-462b-b6db-342b63f7802c",
    "8b32b316-c2f5-4ddf-b05b-83dacd2d08b5",
    "be7a6435-15ae-4171-8f30-4a343eff9e8f",
    "5b7237c5-45e1-49d6-bc18-a1f62f400748",
    "0d7aedc0-15fd-4a67-a412-efad370c947e",
];
const SECRETS_USER: &str = "4633458b-17de-408a-b874-0445c86b69e6";
const ISSUER: &str = "https://issuer.example.com/aro";

/// An AKS management cluster at 1/500 of the model durations.
fn aks_sim() -> Simulator {
    let mut c = config();
    c.time_scale = 0.002;
    c.management_platform = ManagementPlatform::Aks;
    // HyperShift's AKS how-to applies the Route CRD first (`setup_install_ho_on_aks.sh`):
    // the shared ingress routes the cluster's Routes.
    c.scenario.aks.route_crd = true;
    Simulator::new(c).unwrap()
}

fn cluster_path(sim: &Simulator) -> String {
    let c = sim.config();
    format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.ContainerService/managedClusters/management",
        c.management_subscription, c.management_resource_group
    )
}

/// An Entra token for `scope` (client credentials).
async fn token(sim: &Simulator, scope: &str) -> String {
    let body = format!(
        "grant_type=client_credentials&client_id=11111111-aaaa-bbbb-cccc-222222222222&client_secret=s&scope={}",
        percent(scope)
    );
    let req = Request::builder()
        .method("POST")
        .uri(format!("/{}/oauth2/v2.0/token", sim.config().tenant_id))
        .header("host", "login.microsoftonline.com")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .unwrap();
    let resp = sim.router().oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string()
}

fn percent(s: &str) -> String {
    s.replace(':', "%3A").replace('/', "%2F")
}

async fn kv(sim: &Simulator, tok: &str, method: &str, path: &str, body: Option<Value>) -> Resp {
    let auth = format!("Bearer {tok}");
    call_with(
        sim,
        method,
        &format!("/_keyvault/{VAULT}{path}"),
        body,
        &[("authorization", &auth), ("host", "localhost")],
    )
    .await
}

async fn graph(sim: &Simulator, tok: &str, method: &str, path: &str, body: Option<Value>) -> Resp {
    let auth = format!("Bearer {tok}");
    call_with(
        sim,
        method,
        &format!("/_graph/v1.0{path}"),
        body,
        &[
            ("authorization", &auth),
            ("host", "localhost"),
            ("prefer", "create-if-missing"),
        ],
    )
    .await
}

async fn put_arm(sim: &Simulator, path: &str, body: Value) -> Resp {
    let r = call(sim, "PUT", path, Some(body)).await;
    assert!(r.status == 200 || r.status == 201, "{path}: {r:?}");
    r
}

async fn assign(sim: &Simulator, scope: &str, role: &str, principal: &str, ptype: &str) {
    let id = uuid::Uuid::new_v4();
    put_arm(
        sim,
        &format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{id}?api-version=2022-04-01"),
        json!({"properties": {
            "roleDefinitionId": format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{role}"),
            "principalId": principal, "principalType": ptype}}),
    )
    .await;
}

/// What [`world`] made.
struct World {
    vault_id: String,
    addon_principal: String,
}

/// Everything an ARO HCP cluster needs but the add-on identity's Key Vault Secrets User:
/// the vault; one Entra application (certificate made in Key Vault, bound to the
/// application, its service principal holding every component role on the subscription)
/// whose credentials JSON is stored once per component; the three data-plane identities;
/// then the HostedCluster and a NodePool.
async fn world(sim: &Simulator, bind_certificate: bool) -> World {
    let c = sim.config().clone();
    ensure_ns(sim, "clusters").await;
    create_rg(sim, "kv").await;
    create_rg(sim, "aro-mrg").await;
    create_rg(sim, "aro-net").await;
    let vault_id = format!(
        "{}/providers/Microsoft.KeyVault/vaults/{VAULT}",
        rg_path("kv")
    );
    put_arm(
        sim,
        &format!("{vault_id}?api-version=2023-07-01"),
        json!({"location": "eastus", "properties": {"tenantId": c.tenant_id,
            "sku": {"family": "A", "name": "standard"}, "enableRbacAuthorization": true}}),
    )
    .await;
    put_arm(
        sim,
        &format!("{}/providers/Microsoft.Network/virtualNetworks/aro-vnet?{NET}", rg_path("aro-net")),
        json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}}),
    )
    .await;

    // The certificate, in Key Vault.
    let kv_tok = token(sim, "https://vault.azure.net/.default").await;
    let r = kv(
        sim,
        &kv_tok,
        "POST",
        &format!("/certificates/aro-cp/create?{KV_API}"),
        Some(json!({"policy": {
            "key_props": {"exportable": true, "kty": "RSA", "key_size": 2048, "reuse_key": false},
            "secret_props": {"contentType": "application/x-pem-file"},
            "x509_props": {"subject": "CN=aro-cp", "validity_months": 12},
            "issuer": {"name": "Self"}}})),
    )
    .await;
    assert_eq!(r.status, 202, "{r:?}");
    let mut cert = Value::Null;
    for _ in 0..500 {
        let r = kv(
            sim,
            &kv_tok,
            "GET",
            &format!("/certificates/aro-cp/pending?{KV_API}"),
            None,
        )
        .await;
        if r.body["status"] == "completed" {
            cert = kv(
                sim,
                &kv_tok,
                "GET",
                &format!("/certificates/aro-cp?{KV_API}"),
                None,
            )
            .await
            .body;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let cer = cert["cer"]
        .as_str()
        .unwrap_or_else(|| panic!("{cert}"))
        .to_string();
    let pem = kv(
        sim,
        &kv_tok,
        "GET",
        &format!("/secrets/aro-cp?{KV_API}"),
        None,
    )
    .await;
    let pem = pem.body["value"].as_str().unwrap().to_string();

    // The application, its certificate and its service principal.
    let g_tok = token(sim, "https://graph.microsoft.com/.default").await;
    let app = graph(
        sim,
        &g_tok,
        "PATCH",
        "/applications(uniqueName='aro-cp')",
        Some(json!({"displayName": "aro-cp"})),
    )
    .await;
    assert_eq!(app.status, 201, "{app:?}");
    let app_id = app.body["appId"].as_str().unwrap().to_string();
    let object_id = app.body["id"].as_str().unwrap().to_string();
    if bind_certificate {
        let r = graph(
            sim,
            &g_tok,
            "PATCH",
            &format!("/applications/{object_id}"),
            Some(json!({"keyCredentials": [{"type": "AsymmetricX509Cert", "usage": "Verify", "key": cer}]})),
        )
        .await;
        assert_eq!(r.status, 204, "{r:?}");
    }
    let sp = graph(
        sim,
        &g_tok,
        "PATCH",
        &format!("/servicePrincipals(appId='{app_id}')"),
        Some(json!({})),
    )
    .await;
    assert_eq!(sp.status, 201, "{sp:?}");
    let sp_id = sp.body["id"].as_str().unwrap().to_string();
    for role in ROLES {
        assign(
            sim,
            &format!("/subscriptions/{SUB}"),
            role,
            &sp_id,
            "ServicePrincipal",
        )
        .await;
    }

    // msi-dataplane's credentials JSON, once per component.
    let creds = json!({
        "authentication_endpoint": "https://login.microsoftonline.com/",
        "client_id": app_id, "client_secret": STANDARD.encode(&pem), "tenant_id": c.tenant_id,
        "not_before": "2025-01-01T00:00:00Z", "not_after": "2035-01-01T00:00:00Z",
    })
    .to_string();
    for (field, _) in COMPONENTS {
        let r = kv(
            sim,
            &kv_tok,
            "PUT",
            &format!("/secrets/aro-{}-json?{KV_API}", field.to_ascii_lowercase()),
            Some(json!({"value": creds})),
        )
        .await;
        assert_eq!(r.status, 200, "{r:?}");
    }

    // The data-plane identities, federated with the guest's issuer.
    let mut dp = serde_json::Map::new();
    for (field, name, subject, role) in [
        (
            "imageRegistryMSIClientID",
            "registry",
            "system:serviceaccount:openshift-image-registry:registry",
            "8b32b316-c2f5-4ddf-b05b-83dacd2d08b5",
        ),
        (
            "diskMSIClientID",
            "disk",
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-disk-csi-driver-node-sa",
            "5b7237c5-45e1-49d6-bc18-a1f62f400748",
        ),
        (
            "fileMSIClientID",
            "file",
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-file-csi-driver-node-sa",
            "0d7aedc0-15fd-4a67-a412-efad370c947e",
        ),
    ] {
        let id = format!(
            "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}",
            rg_path("kv")
        );
        let r = put_arm(
            sim,
            &format!("{id}?api-version=2023-01-31"),
            json!({"location": "eastus"}),
        )
        .await;
        dp.insert(field.into(), r.body["properties"]["clientId"].clone());
        let principal = r.body["properties"]["principalId"]
            .as_str()
            .unwrap()
            .to_string();
        put_arm(
            sim,
            &format!("{id}/federatedIdentityCredentials/{name}-fic?api-version=2023-01-31"),
            json!({"properties": {"issuer": ISSUER, "subject": subject, "audiences": ["openshift"]}}),
        )
        .await;
        assign(
            sim,
            &rg_path("aro-mrg"),
            role,
            &principal,
            "ServicePrincipal",
        )
        .await;
    }

    // The HostedCluster (services as LoadBalancers: AKS has no Routes) and its NodePool.
    let mut cp = serde_json::Map::new();
    cp.insert(
        "managedIdentitiesKeyVault".into(),
        json!({"name": VAULT, "tenantID": c.tenant_id}),
    );
    for (field, _) in COMPONENTS {
        cp.insert(
            field.into(),
            json!({"clientID": app_id, "objectEncoding": "utf-8",
                "credentialsSecretName": format!("aro-{}-json", field.to_ascii_lowercase())}),
        );
    }
    let net = rg_path("aro-net");
    let hc = json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": "aro", "namespace": "clusters"},
        "spec": {
            "infraID": "aro-infra", "issuerURL": ISSUER,
            "platform": {"type": "Azure", "azure": {
                "location": "eastus", "resourceGroup": "aro-mrg", "subscriptionID": SUB, "tenantID": c.tenant_id,
                "vnetID": format!("{net}/providers/Microsoft.Network/virtualNetworks/aro-vnet"),
                "subnetID": format!("{net}/providers/Microsoft.Network/virtualNetworks/aro-vnet/subnets/default"),
                "securityGroupID": format!("{net}/providers/Microsoft.Network/networkSecurityGroups/aro-nsg"),
                "topology": "Public",
                "azureAuthenticationConfig": {"azureAuthenticationConfigType": "ManagedIdentities",
                    "managedIdentities": {"controlPlane": cp, "dataPlane": dp}}}},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"},
            "dns": {"baseDomain": "example.com"},
            // Served by the shared ingress, which routes by hostname
            // (`UseSharedIngressHC`): every Route carries one, as the AKS path renders it.
            "services": [
                {"service": "APIServer", "servicePublishingStrategy": {"type": "Route", "route": {"hostname": "api-aro.hcp.example.com"}}},
                {"service": "OAuthServer", "servicePublishingStrategy": {"type": "Route", "route": {"hostname": "oauth-aro.hcp.example.com"}}},
                {"service": "Konnectivity", "servicePublishingStrategy": {"type": "Route", "route": {"hostname": "konnectivity-aro.hcp.example.com"}}},
                {"service": "Ignition", "servicePublishingStrategy": {"type": "Route", "route": {"hostname": "ignition-aro.hcp.example.com"}}},
            ],
        }
    });
    let r = apply(sim, &format!("{HC}/aro"), &hc).await;
    assert_eq!(r.status, 201, "{r:?}");
    let np = json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": "workers", "namespace": "clusters"},
        "spec": {"clusterName": "aro", "replicas": 1,
            "management": {"autoRepair": false, "upgradeType": "Replace"},
            "platform": {"type": "Azure", "azure": {"vmSize": "Standard_D4s_v5",
                "osDisk": {"sizeGiB": 128, "diskStorageAccountType": "Premium_LRS"},
                "image": {"type": "AzureMarketplace", "azureMarketplace": {
                    "publisher": "azureopenshift", "offer": "aro4", "sku": "422-v2", "version": "422.6.20250701"}}}},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"}}});
    let r = apply(sim, &format!("{NP}/workers"), &np).await;
    assert_eq!(r.status, 201, "{r:?}");
    let cluster = call(
        sim,
        "GET",
        &format!("{}?{AKS_API}", cluster_path(sim)),
        None,
    )
    .await;
    let addon_principal = cluster.body["properties"]["addonProfiles"]["azureKeyvaultSecretsProvider"]
        ["identity"]["objectId"]
        .as_str()
        .unwrap()
        .to_string();
    World {
        vault_id,
        addon_principal,
    }
}

async fn spc_names(sim: &Simulator) -> Vec<String> {
    let r = call(sim, "GET", SPC, None).await;
    assert_eq!(r.status, 200, "{r:?}");
    let mut v: Vec<String> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// What hcp-workflow does for a public ARO HCP cluster: its four Routes' names as public A
/// records at the shared ingress router (nodes fetch ignition and reach the API server by
/// them).
async fn publish_names(sim: &Simulator) {
    let router = wait_until(
        sim,
        "/api/v1/namespaces/hypershift-sharedingress/services/router",
        "the shared ingress router's address",
        |r| {
            r.body
                .pointer("/status/loadBalancer/ingress/0/ip")
                .is_some()
        },
    )
    .await;
    let ip = router.body["status"]["loadBalancer"]["ingress"][0]["ip"].clone();
    let rg = format!("/subscriptions/{SUB}/resourceGroups/hcp-dns");
    let r = call(
        sim,
        "PUT",
        &format!("{rg}?api-version=2021-04-01"),
        Some(json!({"location": "eastus"})),
    )
    .await;
    assert!(r.status < 300, "{r:?}");
    let zone = format!("{rg}/providers/Microsoft.Network/dnszones/hcp.example.com");
    let r = call(
        sim,
        "PUT",
        &format!("{zone}?api-version=2018-05-01"),
        Some(json!({"location": "global"})),
    )
    .await;
    assert!(r.status < 300, "{r:?}");
    for prefix in ["api", "oauth", "konnectivity", "ignition"] {
        let r = call(
            sim,
            "PUT",
            &format!("{zone}/A/{prefix}-aro?api-version=2018-05-01"),
            Some(json!({"properties": {"TTL": 300, "ARecords": [{"ipv4Address": ip}]}})),
        )
        .await;
        assert!(r.status < 300, "{r:?}");
    }
}

/// The cluster healthy: available, its pool Ready, its release rolled out.
async fn healthy(sim: &Simulator) {
    wait_until(sim, &format!("{HC}/aro"), "the cluster available", |r| {
        status(r, "Available").as_deref() == Some("True")
    })
    .await;
    publish_names(sim).await;
    wait_until(sim, &format!("{NP}/workers"), "the pool Ready", |r| {
        status(r, "Ready").as_deref() == Some("True")
    })
    .await;
    wait_until(sim, &format!("{HC}/aro"), "the release rolled out", |r| {
        status(r, "ClusterVersionAvailable").as_deref() == Some("True")
    })
    .await;
}

#[tokio::test]
async fn the_aks_cluster_shows_its_add_ons_and_is_read_only() {
    let sim = aks_sim();
    let r = call(
        &sim,
        "GET",
        &format!("{}?{AKS_API}", cluster_path(&sim)),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let p = &r.body["properties"];
    let addon = &p["addonProfiles"]["azureKeyvaultSecretsProvider"];
    assert_eq!(addon["enabled"], true);
    assert_eq!(addon["config"]["enableSecretRotation"], "false");
    let identity_id = addon["identity"]["resourceId"].as_str().unwrap();
    let identity = call(
        &sim,
        "GET",
        &format!("{identity_id}?api-version=2023-01-31"),
        None,
    )
    .await;
    assert_eq!(identity.status, 200, "{identity:?}");
    assert_eq!(
        addon["identity"]["clientId"],
        identity.body["properties"]["clientId"]
    );
    assert_eq!(
        addon["identity"]["objectId"],
        identity.body["properties"]["principalId"]
    );
    assert_eq!(p["oidcIssuerProfile"]["enabled"], true);
    assert!(
        p["oidcIssuerProfile"]["issuerURL"]
            .as_str()
            .unwrap()
            .contains(".oic.prod-aks.azure.com/")
    );
    assert_eq!(p["securityProfile"]["workloadIdentity"]["enabled"], true);
    assert_eq!(p["provisioningState"], "Succeeded");
    // Listed in its group; writes refused as ARM refuses a caller without the action.
    let c = sim.config().clone();
    let list = call(
        &sim,
        "GET",
        &format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.ContainerService/managedClusters?{AKS_API}",
            c.management_subscription, c.management_resource_group
        ),
        None,
    )
    .await;
    assert_eq!(list.body["value"][0]["name"], "management", "{list:?}");
    for (m, action) in [("PUT", "write"), ("DELETE", "delete")] {
        let w = call(
            &sim,
            m,
            &format!("{}?{AKS_API}", cluster_path(&sim)),
            Some(json!({"location": "eastus"})),
        )
        .await;
        assert_eq!(w.status, 403, "{w:?}");
        assert_eq!(w.code().as_deref(), Some("AuthorizationFailed"));
        assert!(
            w.text.contains(&format!(
                "Microsoft.ContainerService/managedClusters/{action}"
            )),
            "{}",
            w.text
        );
    }
    // The operator is installed for ARO HCP with the add-on identity.
    let d = call(
        &sim,
        "GET",
        "/apis/apps/v1/namespaces/hypershift/deployments/operator",
        None,
    )
    .await;
    let env = &d.body["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(
        env,
        &json!([{"name": "MANAGED_SERVICE", "value": "ARO-HCP"},
        {"name": "ARO_HCP_KEY_VAULT_USER_CLIENT_ID", "value": addon["identity"]["clientId"]}])
    );
    let crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/secretproviderclasses.secrets-store.csi.x-k8s.io";
    assert_eq!(call(&sim, "GET", crd, None).await.status, 200);
    let mwc = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/azure-wi-webhook-mutating-webhook-configuration";
    wait_until(&sim, mwc, "the webhook configuration", |r| r.status == 200).await;

    // Every add-on off: the ARM body says so, the CRD and webhook are gone, the operator
    // (watching SecretProviderClasses) crash-loops.
    let r = call(
        &sim,
        "PUT",
        "/_sim/scenario",
        Some(json!({"aks": {"key_vault_secrets_provider_disabled": true, "oidc_issuer_disabled": true,
            "workload_identity_webhook_absent": true}})),
    )
    .await;
    assert!(r.status < 300, "{r:?}");
    wait_until(&sim, mwc, "the webhook configuration gone", |r| {
        r.status == 404
    })
    .await;
    let r = call(
        &sim,
        "GET",
        &format!("{}?{AKS_API}", cluster_path(&sim)),
        None,
    )
    .await;
    let p = &r.body["properties"];
    assert_eq!(
        p["addonProfiles"]["azureKeyvaultSecretsProvider"],
        json!({"enabled": false, "config": null})
    );
    assert_eq!(p["oidcIssuerProfile"], json!({"enabled": false}));
    assert!(p["securityProfile"]["workloadIdentity"].is_null(), "{p}");
    assert_eq!(call(&sim, "GET", crd, None).await.status, 404);
    assert_eq!(call(&sim, "GET", SPC, None).await.status, 404);
    wait_until(
        &sim,
        "/apis/apps/v1/namespaces/hypershift/deployments/operator",
        "the operator down",
        |r| r.body["status"]["availableReplicas"] == 0,
    )
    .await;
}

#[tokio::test]
async fn a_managed_identities_cluster_gets_its_eight_secret_provider_classes() {
    let sim = aks_sim();
    let w = world(&sim, true).await;
    assign(
        &sim,
        &w.vault_id,
        SECRETS_USER,
        &w.addon_principal,
        "ServicePrincipal",
    )
    .await;
    healthy(&sim).await;
    let want: Vec<String> = {
        let mut v: Vec<String> = COMPONENTS.iter().map(|(_, s)| s.to_string()).collect();
        v.sort();
        v
    };
    assert_eq!(spc_names(&sim).await, want);
    // Exactly `ReconcileManagedAzureSecretProviderClass`'s spec.
    let cluster = call(
        &sim,
        "GET",
        &format!("{}?{AKS_API}", cluster_path(&sim)),
        None,
    )
    .await;
    let client = &cluster.body["properties"]["addonProfiles"]["azureKeyvaultSecretsProvider"]["identity"]
        ["clientId"];
    let r = call(&sim, "GET", &format!("{SPC}/managed-azure-ingress"), None).await;
    assert_eq!(
        r.body["spec"],
        json!({"provider": "azure", "parameters": {
            "usePodIdentity": "false", "useVMManagedIdentity": "true",
            "userAssignedIdentityID": client, "keyvaultName": VAULT, "tenantId": sim.config().tenant_id,
            "objects": "\narray:\n  - |\n    objectName: aro-ingress-json\n    objectEncoding: utf-8\n    objectType: secret\n"}}),
    );
    // The mounts read Key Vault as the add-on identity.
    assert!(sim.requests().iter().any(|q| q.actor.as_deref()
        == Some("secrets-store-csi-driver-provider-azure")
        && q.status == 200
        && q.path.contains("/secrets/aro-controlplaneoperator-json/")),);
    // They go with the cluster.
    let r = call(&sim, "DELETE", &format!("{HC}/aro"), None).await;
    assert!(r.status < 300, "{r:?}");
    wait_until(&sim, SPC, "the SecretProviderClasses gone", |r| {
        r.body["items"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
}

#[tokio::test]
async fn a_mount_the_add_on_identity_cannot_read_keeps_the_cluster_down_until_it_can() {
    let sim = aks_sim();
    let w = world(&sim, true).await;
    // No Key Vault Secrets User for the add-on identity: every mount is refused.
    let pool = wait_until(
        &sim,
        &format!("{NP}/workers"),
        "the mount failure on the pool",
        |r| message(r, "AllMachinesReady").contains("ForbiddenByRbac"),
    )
    .await;
    let m = message(&pool, "AllMachinesReady");
    assert!(
        m.contains("MountVolume.SetUp failed for volume \"nodepool-management-cert\""),
        "{m}"
    );
    assert!(m.contains("RESPONSE 403: 403 Forbidden"), "{m}");
    assert_eq!(status(&pool, "Ready").as_deref(), Some("False"));
    let hc = call(&sim, "GET", &format!("{HC}/aro"), None).await;
    assert_eq!(status(&hc, "Available").as_deref(), Some("False"));
    assert_eq!(
        message(&hc, "Available"),
        "Waiting for hosted control plane to be healthy"
    );
    // Only the HyperShift operator's two: the control-plane operator never started.
    assert_eq!(
        spc_names(&sim).await,
        vec!["managed-azure-cpo", "managed-azure-nodepool-management"]
    );
    // Kubelet's events say why.
    let ev = call(&sim, "GET", "/api/v1/namespaces/clusters-aro/events", None).await;
    assert!(
        ev.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "FailedMount"
                && e["involvedObject"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("control-plane-operator-")
                && e["message"].as_str().unwrap().contains("ForbiddenByRbac")),
        "{:#}",
        ev.body
    );
    // The role granted: kubelet's next attempt mounts, and everything comes up.
    assign(
        &sim,
        &w.vault_id,
        SECRETS_USER,
        &w.addon_principal,
        "ServicePrincipal",
    )
    .await;
    healthy(&sim).await;
    assert_eq!(spc_names(&sim).await.len(), 8);
}

#[tokio::test]
async fn an_operator_not_installed_for_aro_hcp_refuses_managed_identities() {
    let mut c = config();
    c.time_scale = 0.002;
    let sim = Simulator::new(c).unwrap();
    ensure_ns(&sim, "clusters").await;
    let hc = json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": "aro", "namespace": "clusters"},
        "spec": {"platform": {"type": "Azure", "azure": {"location": "eastus", "resourceGroup": "aro-mrg",
                "subscriptionID": SUB, "topology": "Public",
                "azureAuthenticationConfig": {"azureAuthenticationConfigType": "ManagedIdentities",
                    "managedIdentities": {"controlPlane": {}, "dataPlane": {}}}}},
            "release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"},
            "dns": {"baseDomain": "example.com"}}});
    assert_eq!(apply(&sim, &format!("{HC}/aro"), &hc).await.status, 201);
    let r = wait_until(&sim, &format!("{HC}/aro"), "the reconcile error", |r| {
        status(r, "ReconciliationSucceeded").as_deref() == Some("False")
    })
    .await;
    assert_eq!(
        message(&r, "ReconciliationSucceeded"),
        "failed to reconcile Azure cluster identity: WorkloadIdentities must be set in the Azure platform spec for non-managed Azure deployments"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let r = call(&sim, "GET", &format!("{HC}/aro"), None).await;
    assert_ne!(status(&r, "Available").as_deref(), Some("True"));
}

#[tokio::test]
async fn credentials_whose_certificate_is_not_on_the_application_keep_the_nodes_away() {
    let sim = aks_sim();
    let w = world(&sim, false).await;
    assign(
        &sim,
        &w.vault_id,
        SECRETS_USER,
        &w.addon_principal,
        "ServicePrincipal",
    )
    .await;
    // Every volume mounts (the control plane comes up), but Entra ID refuses CAPZ's client
    // assertion: no VM is made.
    wait_until(&sim, &format!("{HC}/aro"), "the cluster available", |r| {
        status(r, "Available").as_deref() == Some("True")
    })
    .await;
    let pool = wait_until(
        &sim,
        &format!("{NP}/workers"),
        "the refused assertion",
        |r| message(r, "AllMachinesReady").contains("AADSTS700027"),
    )
    .await;
    let m = message(&pool, "AllMachinesReady");
    assert!(m.contains("VMProvisionFailed"), "{m}");
    assert!(m.contains("The key was not found"), "{m}");
    assert_eq!(spc_names(&sim).await.len(), 8);
}
