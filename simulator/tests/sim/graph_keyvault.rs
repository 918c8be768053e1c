//! Microsoft Graph and Azure Key Vault: the wire contracts of /tmp/aro-design.md
//! as the simulator serves them, through its router.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::*;
use hcp_simulator::{SimConfig, Simulator};
use serde_json::{Value, json};
use sha1::Digest;
use tower::ServiceExt;

const KV: &str = "api-version=7.5";
const GRAPH: &str = "graph.microsoft.com";
const CALLER: &str = "hcp-workflow-caller";
const SECRETS_USER: &str = "4633458b-17de-408a-b874-0445c86b69e6";

/// Fast config; certificate operations take 200 ms and deletions 100 ms (scaled), so the
/// pending and being-deleted states are observable without sleeping long.
fn kv_sim() -> Simulator {
    let mut c: SimConfig = config();
    c.latency.put.insert(
        "Microsoft.KeyVault/vaults/certificates".into(),
        Duration::from_secs(20),
    );
    Simulator::new(c).unwrap()
}

fn tenant(sim: &Simulator) -> String {
    sim.config().tenant_id.clone()
}

/// Any request with a raw body and explicit headers (no defaults).
async fn raw(
    sim: &Simulator,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Resp {
    let mut b = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = match body {
        Some(v) => b
            .header("content-type", "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    };
    let resp = sim.router().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).to_string();
    Resp {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text,
    }
}

/// An access token from the simulated Entra for `client` and `scope`.
async fn token(sim: &Simulator, client: &str, scope: &str) -> String {
    let form = format!(
        "grant_type=client_credentials&client_id={client}&client_secret=s&scope={}",
        scope.replace(':', "%3A").replace('/', "%2F")
    );
    let req = Request::builder()
        .method("POST")
        .uri(format!("/{}/oauth2/v2.0/token", tenant(sim)))
        .header("host", "login.microsoftonline.com")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(form))
        .unwrap();
    let resp = sim.router().oneshot(req).await.unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["access_token"].as_str().unwrap().to_string()
}

fn claims(token: &str) -> Value {
    let p = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
}

async fn graph(
    sim: &Simulator,
    tok: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
    upsert: bool,
) -> Resp {
    let auth = format!("Bearer {tok}");
    let mut h = vec![("host", GRAPH), ("authorization", auth.as_str())];
    if upsert {
        h.push(("prefer", "create-if-missing"));
    }
    raw(sim, method, path, &h, body).await
}

async fn kv(
    sim: &Simulator,
    vault: &str,
    tok: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Resp {
    let host = format!("{vault}.vault.azure.net");
    let auth = format!("Bearer {tok}");
    let sep = if path.contains('?') { '&' } else { '?' };
    raw(
        sim,
        method,
        &format!("{path}{sep}{KV}"),
        &[("host", host.as_str()), ("authorization", auth.as_str())],
        body,
    )
    .await
}

async fn set_scenario(sim: &Simulator, s: Value) {
    let r = raw(
        sim,
        "PUT",
        "/_sim/scenario",
        &[("host", "localhost")],
        Some(s),
    )
    .await;
    assert!(r.status == 200 || r.status == 204, "{r:?}");
}

fn vault_path(rg: &str, name: &str) -> String {
    format!(
        "{}/providers/Microsoft.KeyVault/vaults/{name}?api-version=2023-07-01",
        rg_path(rg)
    )
}

async fn create_vault(sim: &Simulator, rg: &str, name: &str, rbac: bool) -> Resp {
    let r = call(
        sim,
        "PUT",
        &vault_path(rg, name),
        Some(
            json!({"location": "eastus", "properties": {"tenantId": tenant(sim),
            "sku": {"family": "A", "name": "standard"}, "enableRbacAuthorization": rbac}}),
        ),
    )
    .await;
    assert!(r.status == 201 || r.status == 200, "{r:?}");
    r
}

fn pem_policy(subject: &str) -> Value {
    json!({"policy": {
        "key_props": {"exportable": true, "kty": "RSA", "key_size": 2048, "reuse_key": false},
        "secret_props": {"contentType": "application/x-pem-file"},
        "x509_props": {"subject": subject, "validity_months": 12},
        "issuer": {"name": "Self"}},
        "attributes": {"enabled": true}, "tags": {"component": "cloud-provider"}})
}

/// Creates a certificate and waits for its operation to complete; returns the certificate.
async fn issue(sim: &Simulator, vault: &str, tok: &str, name: &str) -> Resp {
    let r = kv(
        sim,
        vault,
        tok,
        "POST",
        &format!("/certificates/{name}/create"),
        Some(pem_policy(&format!("CN={name}"))),
    )
    .await;
    assert_eq!(r.status, 202, "{r:?}");
    wait_completed(sim, vault, tok, name).await
}

/// Polls the certificate's operation until it completes; returns the certificate.
async fn wait_completed(sim: &Simulator, vault: &str, tok: &str, name: &str) -> Resp {
    for _ in 0..300 {
        let p = kv(
            sim,
            vault,
            tok,
            "GET",
            &format!("/certificates/{name}/pending"),
            None,
        )
        .await;
        assert_eq!(p.status, 200, "{p:?}");
        if p.body["status"] == "completed" {
            assert_eq!(
                p.body["target"],
                format!("https://{vault}.vault.azure.net/certificates/{name}")
            );
            let r = kv(
                sim,
                vault,
                tok,
                "GET",
                &format!("/certificates/{name}"),
                None,
            )
            .await;
            assert_eq!(r.status, 200, "{r:?}");
            return r;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("certificate {name} never completed");
}

#[tokio::test]
async fn graph_application_upsert_ownership_and_permissions() {
    let sim = kv_sim();
    let tok = token(&sim, CALLER, "https://graph.microsoft.com/.default").await;
    let c = claims(&tok);
    assert_eq!(c["roles"], json!(["Application.ReadWrite.OwnedBy"]));
    // The caller's object id is stable across tokens.
    let again = token(&sim, CALLER, "https://management.azure.com/.default").await;
    assert_eq!(claims(&again)["oid"], c["oid"]);
    assert!(claims(&again).get("roles").is_none());

    let path = "/v1.0/applications(uniqueName='hcp-demo-cloud-provider')";
    let body = json!({"displayName": "hcp-demo-cloud-provider", "tags": ["hcp"], "notes": "n"});
    let r = graph(&sim, &tok, "PATCH", path, Some(body.clone()), true).await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.body["uniqueName"], "hcp-demo-cloud-provider");
    let id = r.body["id"].as_str().unwrap().to_string();
    let app_id = r.body["appId"].as_str().unwrap().to_string();
    let r = graph(&sim, &tok, "PATCH", path, Some(body), true).await;
    assert_eq!(r.status, 204, "{r:?}");
    // Without Prefer, a missing uniqueName is 404.
    let r = graph(
        &sim,
        &tok,
        "PATCH",
        "/v1.0/applications(uniqueName='nope')",
        Some(json!({"displayName": "x"})),
        false,
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.body["error"]["code"], "Request_ResourceNotFound");
    assert!(r.body["error"]["innerError"]["request-id"].is_string());
    let r = graph(
        &sim,
        &tok,
        "GET",
        &format!("/v1.0/applications(appId='{app_id}')"),
        None,
        false,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["id"], id.as_str());
    // The caller owns what it created.
    let r = graph(
        &sim,
        &tok,
        "GET",
        &format!("/v1.0/applications/{id}/owners"),
        None,
        false,
    )
    .await;
    assert_eq!(r.body["value"][0]["id"], c["oid"]);
    assert_eq!(
        r.body["value"][0]["@odata.type"],
        "#microsoft.graph.servicePrincipal"
    );
    // Its service principal: 201, then 204; visible by filter.
    let sp = format!("/v1.0/servicePrincipals(appId='{app_id}')");
    let r = graph(&sim, &tok, "PATCH", &sp, Some(json!({})), true).await;
    assert_eq!(r.status, 201, "{r:?}");
    let sp_id = r.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        graph(&sim, &tok, "PATCH", &sp, Some(json!({})), true)
            .await
            .status,
        204
    );
    let r = graph(
        &sim,
        &tok,
        "GET",
        &format!("/v1.0/servicePrincipals?$filter=appId%20eq%20'{app_id}'"),
        None,
        false,
    )
    .await;
    assert_eq!(r.body["value"].as_array().unwrap().len(), 1, "{r:?}");
    // A token of that application carries its service principal's id.
    let app_tok = token(&sim, &app_id, "https://vault.azure.net/.default").await;
    assert_eq!(claims(&app_tok)["oid"], sp_id.as_str());

    // An application someone else made: OwnedBy cannot touch it.
    set_scenario(
        &sim,
        json!({"graph_permissions": ["Application.ReadWrite.All"]}),
    )
    .await;
    let admin = token(
        &sim,
        "tenant-admin-app",
        "https://graph.microsoft.com/.default",
    )
    .await;
    set_scenario(&sim, json!({})).await;
    let r = graph(
        &sim,
        &admin,
        "POST",
        "/v1.0/applications",
        Some(json!({"displayName": "foreign"})),
        false,
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let foreign = r.body["id"].as_str().unwrap().to_string();
    for (m, b) in [
        ("GET", None),
        ("PATCH", Some(json!({"notes": "mine now"}))),
        ("DELETE", None),
    ] {
        let r = graph(
            &sim,
            &tok,
            m,
            &format!("/v1.0/applications/{foreign}"),
            b,
            false,
        )
        .await;
        assert_eq!(r.status, 403, "{m}: {r:?}");
        assert_eq!(r.body["error"]["code"], "Authorization_RequestDenied");
        assert_eq!(
            r.body["error"]["message"],
            "Insufficient privileges to complete the operation."
        );
    }
    // Lists show only the owned applications.
    let r = graph(&sim, &tok, "GET", "/v1.0/applications", None, false).await;
    assert_eq!(r.body["value"].as_array().unwrap().len(), 1);

    // Delete: soft, then permanent.
    assert_eq!(
        graph(
            &sim,
            &tok,
            "DELETE",
            &format!("/v1.0/applications/{id}"),
            None,
            false
        )
        .await
        .status,
        204
    );
    assert_eq!(
        graph(
            &sim,
            &tok,
            "GET",
            &format!("/v1.0/applications/{id}"),
            None,
            false
        )
        .await
        .status,
        404
    );
    assert_eq!(graph(&sim, &tok, "GET", &sp, None, false).await.status, 404);
    let r = graph(
        &sim,
        &tok,
        "GET",
        &format!("/v1.0/directory/deletedItems/{id}"),
        None,
        false,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        graph(
            &sim,
            &tok,
            "DELETE",
            &format!("/v1.0/directory/deletedItems/{id}"),
            None,
            false
        )
        .await
        .status,
        204
    );
    assert_eq!(
        graph(
            &sim,
            &tok,
            "GET",
            &format!("/v1.0/directory/deletedItems/{id}"),
            None,
            false
        )
        .await
        .status,
        404
    );

    // No token; a token for ARM; no permission at all.
    let r = raw(&sim, "GET", "/v1.0/applications", &[("host", GRAPH)], None).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.body["error"]["code"], "InvalidAuthenticationToken");
    let r = graph(&sim, &again, "GET", "/v1.0/applications", None, false).await;
    assert_eq!(r.status, 401);
    set_scenario(&sim, json!({"graph_permissions": []})).await;
    let none = token(&sim, CALLER, "https://graph.microsoft.com/.default").await;
    let r = graph(
        &sim,
        &none,
        "PATCH",
        path,
        Some(json!({"displayName": "x"})),
        true,
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["error"]["code"], "Authorization_RequestDenied");
    // The request log names the Graph error.
    assert!(
        sim.requests()
            .iter()
            .any(|q| q.error_code.as_deref() == Some("Authorization_RequestDenied"))
    );
}

#[tokio::test]
async fn managed_identities_are_service_principals() {
    let sim = kv_sim();
    create_rg(&sim, "rg").await;
    let r = call(
        &sim,
        "PUT",
        &format!("{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/mi-1?api-version=2023-01-31", rg_path("rg")),
        Some(json!({"location": "eastus"})),
    )
    .await;
    let client = r.body["properties"]["clientId"]
        .as_str()
        .unwrap()
        .to_string();
    let principal = r.body["properties"]["principalId"]
        .as_str()
        .unwrap()
        .to_string();
    // Its token's oid is its principal id.
    let t = token(&sim, &client, "https://vault.azure.net/.default").await;
    assert_eq!(claims(&t)["oid"], principal.as_str());
    set_scenario(&sim, json!({"graph_permissions": ["Application.Read.All"]})).await;
    let reader = token(&sim, CALLER, "https://graph.microsoft.com/.default").await;
    let r = graph(
        &sim,
        &reader,
        "GET",
        &format!("/v1.0/servicePrincipals(appId='{client}')"),
        None,
        false,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["id"], principal.as_str());
    assert_eq!(r.body["servicePrincipalType"], "ManagedIdentity");
    set_scenario(&sim, json!({})).await;
    let owned_by = token(&sim, CALLER, "https://graph.microsoft.com/.default").await;
    let r = graph(
        &sim,
        &owned_by,
        "GET",
        &format!("/v1.0/servicePrincipals(appId='{client}')"),
        None,
        false,
    )
    .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn certificate_create_pending_completed_and_pem_secret() {
    let sim = kv_sim();
    create_rg(&sim, "rg").await;
    let v = create_vault(&sim, "rg", "hcp-kv-1", true).await;
    assert_eq!(
        v.body["properties"]["vaultUri"],
        "https://hcp-kv-1.vault.azure.net/"
    );
    assert_eq!(v.body["properties"]["provisioningState"], "Succeeded");
    let tok = token(&sim, CALLER, "https://vault.azure.net/.default").await;

    let r = kv(
        &sim,
        "hcp-kv-1",
        &tok,
        "POST",
        "/certificates/cp/create",
        Some(pem_policy("CN=cp")),
    )
    .await;
    assert_eq!(r.status, 202, "{r:?}");
    assert_eq!(r.body["status"], "inProgress");
    assert_eq!(
        r.body["id"],
        "https://hcp-kv-1.vault.azure.net/certificates/cp/pending"
    );
    assert!(
        r.header("location")
            .unwrap()
            .contains("/certificates/cp/pending")
    );
    let csr = STANDARD.decode(r.body["csr"].as_str().unwrap()).unwrap();
    assert!(
        <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<_>>::from_der(&csr).is_ok()
    );
    let p = kv(
        &sim,
        "hcp-kv-1",
        &tok,
        "GET",
        "/certificates/cp/pending",
        None,
    )
    .await;
    assert_eq!(p.body["status"], "inProgress", "{p:?}");
    assert_eq!(
        kv(&sim, "hcp-kv-1", &tok, "GET", "/certificates/cp", None)
            .await
            .status,
        404
    );
    // A second create while pending conflicts.
    let r = kv(
        &sim,
        "hcp-kv-1",
        &tok,
        "POST",
        "/certificates/cp/create",
        Some(pem_policy("CN=cp")),
    )
    .await;
    assert_eq!(r.status, 409, "{r:?}");

    let cert = wait_completed(&sim, "hcp-kv-1", &tok, "cp").await;
    let der = STANDARD.decode(cert.body["cer"].as_str().unwrap()).unwrap();
    let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
    assert_eq!(parsed.subject().to_string(), "CN=cp");
    assert_eq!(parsed.issuer().to_string(), "CN=cp");
    let sha: [u8; 20] = sha1::Sha1::digest(&der).into();
    assert_eq!(cert.body["x5t"], URL_SAFE_NO_PAD.encode(sha));
    let v = parsed.validity();
    let days = (v.not_after.timestamp() - v.not_before.timestamp()) / 86_400;
    assert!((365..=366).contains(&days), "{days}");
    assert_eq!(cert.body["attributes"]["exp"], v.not_after.timestamp());
    assert_eq!(cert.body["policy"]["x509_props"]["subject"], "CN=cp");
    assert!(parsed.public_key().parsed().is_ok());
    let version = cert.body["id"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        cert.body["sid"],
        format!("https://hcp-kv-1.vault.azure.net/secrets/cp/{version}")
    );

    // Its secret: PEM private key + certificate, the key being the certificate's.
    let s = kv(&sim, "hcp-kv-1", &tok, "GET", "/secrets/cp/", None).await;
    assert_eq!(s.status, 200, "{s:?}");
    assert_eq!(s.body["contentType"], "application/x-pem-file");
    assert_eq!(s.body["managed"], true);
    assert_eq!(
        s.body["kid"],
        format!("https://hcp-kv-1.vault.azure.net/keys/cp/{version}")
    );
    let pem = s.body["value"].as_str().unwrap();
    let k = pem.find("-----BEGIN PRIVATE KEY-----").unwrap();
    let c = pem.find("-----BEGIN CERTIFICATE-----").unwrap();
    assert!(k < c);
    let key = rcgen::KeyPair::from_pem(&pem[..c]).unwrap();
    assert_eq!(
        key.public_key_raw(),
        parsed.public_key().subject_public_key.data.as_ref()
    );
    let cert_pem_der = STANDARD
        .decode(
            pem[c..]
                .lines()
                .filter(|l| !l.starts_with("-----"))
                .collect::<String>(),
        )
        .unwrap();
    assert_eq!(cert_pem_der, der);
    // Managed secrets are Key Vault's.
    let r = kv(&sim, "hcp-kv-1", &tok, "DELETE", "/secrets/cp", None).await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.body["error"]["innererror"]["code"],
        "SecretManagedByKeyVault"
    );
    // Creating again makes a new version.
    let second = issue(&sim, "hcp-kv-1", &tok, "cp").await;
    assert_ne!(second.body["id"], cert.body["id"]);
    let versions = kv(
        &sim,
        "hcp-kv-1",
        &tok,
        "GET",
        "/certificates/cp/versions",
        None,
    )
    .await;
    assert_eq!(versions.body["value"].as_array().unwrap().len(), 2);
    // PKCS#12 is refused with a clear message.
    let mut p12 = pem_policy("CN=x");
    p12["policy"]["secret_props"]["contentType"] = json!("application/x-pkcs12");
    let r = kv(
        &sim,
        "hcp-kv-1",
        &tok,
        "POST",
        "/certificates/x/create",
        Some(p12),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("application/x-pem-file")
    );
}

#[tokio::test]
async fn soft_delete_conflict_purge_and_recreate() {
    let sim = kv_sim();
    create_rg(&sim, "rg").await;
    create_vault(&sim, "rg", "hcp-kv-2", true).await;
    let tok = token(&sim, CALLER, "https://vault.azure.net/.default").await;
    issue(&sim, "hcp-kv-2", &tok, "ing").await;
    let r = kv(&sim, "hcp-kv-2", &tok, "DELETE", "/certificates/ing", None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body["recoveryId"],
        "https://hcp-kv-2.vault.azure.net/deletedcertificates/ing"
    );
    // Still being deleted.
    let r = kv(
        &sim,
        "hcp-kv-2",
        &tok,
        "POST",
        "/certificates/ing/create",
        Some(pem_policy("CN=ing")),
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.body["error"]["innererror"]["code"],
        "ObjectIsBeingDeleted"
    );
    // Then deleted but recoverable.
    let mut seen = false;
    for _ in 0..100 {
        if kv(
            &sim,
            "hcp-kv-2",
            &tok,
            "GET",
            "/deletedcertificates/ing",
            None,
        )
        .await
        .status
            == 200
        {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen);
    let r = kv(
        &sim,
        "hcp-kv-2",
        &tok,
        "POST",
        "/certificates/ing/create",
        Some(pem_policy("CN=ing")),
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["error"]["code"], "Conflict");
    assert_eq!(
        r.body["error"]["innererror"]["code"],
        "ObjectIsDeletedButRecoverable"
    );
    assert_eq!(
        r.body["error"]["message"],
        "Certificate ing is currently in a deleted but recoverable state, and its name cannot be reused; in this state, the certificate can only be recovered or purged."
    );
    // The secret went with it.
    assert_eq!(
        kv(&sim, "hcp-kv-2", &tok, "GET", "/secrets/ing", None)
            .await
            .status,
        404
    );
    let r = kv(
        &sim,
        "hcp-kv-2",
        &tok,
        "DELETE",
        "/deletedcertificates/ing",
        None,
    )
    .await;
    assert_eq!(r.status, 204, "{r:?}");
    issue(&sim, "hcp-kv-2", &tok, "ing").await;

    // Plain secrets: set, get, delete, conflict, recover.
    let r = kv(&sim, "hcp-kv-2", &tok, "PUT", "/secrets/ing-json", Some(json!({"value": "{}", "contentType": "application/json",
        "attributes": {"enabled": true, "nbf": 1700000000, "exp": 1800000000}, "tags": {"renew_after": "x"}}))).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["attributes"]["exp"], 1_800_000_000);
    let r = kv(&sim, "hcp-kv-2", &tok, "GET", "/secrets/ing-json", None).await;
    assert_eq!(r.body["value"], "{}");
    assert_eq!(r.body["tags"]["renew_after"], "x");
    let list = kv(&sim, "hcp-kv-2", &tok, "GET", "/secrets?maxresults=1", None).await;
    assert_eq!(list.body["value"].as_array().unwrap().len(), 1);
    assert!(
        list.body["nextLink"]
            .as_str()
            .unwrap()
            .contains("$skiptoken=1")
    );
    assert_eq!(
        kv(&sim, "hcp-kv-2", &tok, "DELETE", "/secrets/ing-json", None)
            .await
            .status,
        200
    );
    let r = kv(
        &sim,
        "hcp-kv-2",
        &tok,
        "PUT",
        "/secrets/ing-json",
        Some(json!({"value": "{}"})),
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(
        kv(&sim, "hcp-kv-2", &tok, "GET", "/secrets/ing-json", None)
            .await
            .body["error"]["code"],
        "SecretNotFound"
    );
}

#[tokio::test]
async fn data_plane_authentication_challenge() {
    let sim = kv_sim();
    create_rg(&sim, "rg").await;
    create_vault(&sim, "rg", "hcp-kv-3", true).await;
    let r = raw(
        &sim,
        "GET",
        &format!("/secrets?{KV}"),
        &[("host", "hcp-kv-3.vault.azure.net")],
        None,
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate").unwrap(),
        format!(
            "Bearer authorization=\"https://login.microsoftonline.com/{}\", resource=\"https://vault.azure.net\"",
            tenant(&sim)
        )
    );
    assert_eq!(r.body["error"]["code"], "Unauthorized");
    assert_eq!(
        r.body["error"]["message"],
        "AKV10000: Request is missing a Bearer or PoP token."
    );
    // A Graph token is for another audience.
    let g = token(&sim, CALLER, "https://graph.microsoft.com/.default").await;
    let r = kv(&sim, "hcp-kv-3", &g, "GET", "/secrets", None).await;
    assert_eq!(r.status, 401);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("AKV10022: Invalid audience. Expected https://vault.azure.net")
    );
    // The plain-http path form reaches the same vault.
    let t = token(&sim, CALLER, "https://vault.azure.net/.default").await;
    let auth = format!("Bearer {t}");
    let r = raw(
        &sim,
        "GET",
        &format!("/_keyvault/hcp-kv-3/secrets?{KV}"),
        &[("host", "127.0.0.1"), ("authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    // A vault that does not exist has no DNS name: no HTTP answer.
    let _ = kv(&sim, "no-such-vault", &t, "GET", "/secrets", None).await;
    assert_eq!(
        sim.requests().last().unwrap().error_code.as_deref(),
        Some("NameResolutionFailure")
    );
}

#[tokio::test]
async fn rbac_denies_other_principals_until_a_role_is_assigned() {
    let sim = kv_sim();
    create_rg(&sim, "rg").await;
    let vault = create_vault(&sim, "rg", "hcp-kv-4", true).await;
    let vault_id = vault.body["id"].as_str().unwrap().to_string();
    let caller = token(&sim, CALLER, "https://vault.azure.net/.default").await;
    let r = kv(
        &sim,
        "hcp-kv-4",
        &caller,
        "PUT",
        "/secrets/cpo-json",
        Some(json!({"value": "creds"})),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    // The AKS add-on's identity.
    let mi = call(
        &sim,
        "PUT",
        &format!("{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/kv-provider?api-version=2023-01-31", rg_path("rg")),
        Some(json!({"location": "eastus"})),
    )
    .await;
    let client = mi.body["properties"]["clientId"]
        .as_str()
        .unwrap()
        .to_string();
    let principal = mi.body["properties"]["principalId"]
        .as_str()
        .unwrap()
        .to_string();
    let t = token(&sim, &client, "https://vault.azure.net/.default").await;
    let r = kv(&sim, "hcp-kv-4", &t, "GET", "/secrets/cpo-json", None).await;
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(r.body["error"]["code"], "Forbidden");
    assert_eq!(r.body["error"]["innererror"]["code"], "ForbiddenByRbac");
    let msg = r.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("Action: 'Microsoft.KeyVault/vaults/secrets/getSecret/action'"),
        "{msg}"
    );
    assert!(msg.contains(&format!("oid={principal}")), "{msg}");
    // Key Vault Secrets User at the vault's scope.
    let ra = format!(
        "{vault_id}/providers/Microsoft.Authorization/roleAssignments/{}?api-version=2022-04-01",
        uuid_of("ra-1")
    );
    let r = call(
        &sim,
        "PUT",
        &ra,
        Some(json!({"properties": {"principalId": principal, "principalType": "ServicePrincipal",
            "roleDefinitionId": format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{SECRETS_USER}")}})),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = kv(&sim, "hcp-kv-4", &t, "GET", "/secrets/cpo-json", None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["value"], "creds");
    // Reading is all that role allows.
    let r = kv(
        &sim,
        "hcp-kv-4",
        &t,
        "PUT",
        "/secrets/cpo-json",
        Some(json!({"value": "x"})),
    )
    .await;
    assert_eq!(r.status, 403);
    // The caller's scenario denials.
    set_scenario(
        &sim,
        json!({"denied_data_actions": [{"action": "Microsoft.KeyVault/vaults/certificates/*"}]}),
    )
    .await;
    let r = kv(
        &sim,
        "hcp-kv-4",
        &caller,
        "POST",
        "/certificates/c/create",
        Some(pem_policy("CN=c")),
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body["error"]["innererror"]["code"], "ForbiddenByRbac");
    set_scenario(&sim, json!({"caller_needs_data_roles": true})).await;
    let r = kv(&sim, "hcp-kv-4", &caller, "GET", "/secrets/cpo-json", None).await;
    assert_eq!(r.status, 403);
}

fn uuid_of(s: &str) -> String {
    let h: [u8; 20] = sha1::Sha1::digest(s.as_bytes()).into();
    let hex: String = h.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

#[tokio::test]
async fn vault_names_soft_delete_and_purge() {
    let sim = kv_sim();
    create_rg(&sim, "rg").await;
    create_vault(&sim, "rg", "kv-taken", true).await;
    let check = |name: &'static str| {
        let sim = sim.clone();
        async move {
            call(
                &sim,
                "POST",
                &format!("/subscriptions/{SUB}/providers/Microsoft.KeyVault/checkNameAvailability?api-version=2023-07-01"),
                Some(json!({"name": name, "type": "Microsoft.KeyVault/vaults"})),
            )
            .await
        }
    };
    let r = check("kv-taken").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body["nameAvailable"], false);
    assert_eq!(r.body["reason"], "AlreadyExists");
    assert_eq!(check("kv-free").await.body["nameAvailable"], true);
    assert_eq!(check("1-bad").await.body["reason"], "AccountNameInvalid");
    set_scenario(&sim, json!({"taken_key_vault_names": ["kv-elsewhere"]})).await;
    assert_eq!(check("kv-elsewhere").await.body["reason"], "AlreadyExists");
    let r = call(
        &sim,
        "PUT",
        &vault_path("rg", "kv-elsewhere"),
        Some(json!({"location": "eastus", "properties": {"tenantId": tenant(&sim), "sku": {"family": "A", "name": "standard"}}})),
    )
    .await;
    assert_eq!(r.code().as_deref(), Some("VaultAlreadyExists"));
    let r = call(
        &sim,
        "PUT",
        &vault_path("rg", "a--b"),
        Some(json!({"location": "eastus", "properties": {}})),
    )
    .await;
    assert_eq!(r.code().as_deref(), Some("VaultNameNotValid"));

    // A secret survives a soft delete and a recovery.
    let tok = token(&sim, CALLER, "https://vault.azure.net/.default").await;
    assert_eq!(
        kv(
            &sim,
            "kv-taken",
            &tok,
            "PUT",
            "/secrets/s",
            Some(json!({"value": "v"}))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        call(&sim, "DELETE", &vault_path("rg", "kv-taken"), None)
            .await
            .status,
        200
    );
    assert_eq!(check("kv-taken").await.body["reason"], "AlreadyExists");
    let deleted = format!(
        "/subscriptions/{SUB}/providers/Microsoft.KeyVault/locations/eastus/deletedVaults/kv-taken"
    );
    let r = call(
        &sim,
        "GET",
        &format!("{deleted}?api-version=2023-07-01"),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body["properties"]["vaultId"],
        format!(
            "{}/providers/Microsoft.KeyVault/vaults/kv-taken",
            rg_path("rg")
        )
    );
    let r = call(
        &sim,
        "GET",
        &format!(
            "/subscriptions/{SUB}/providers/Microsoft.KeyVault/deletedVaults?api-version=2023-07-01"
        ),
        None,
    )
    .await;
    assert_eq!(r.body["value"].as_array().unwrap().len(), 1);
    let body = json!({"location": "eastus", "properties": {"tenantId": tenant(&sim), "sku": {"family": "A", "name": "standard"}, "enableRbacAuthorization": true}});
    let r = call(
        &sim,
        "PUT",
        &vault_path("rg", "kv-taken"),
        Some(body.clone()),
    )
    .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.code().as_deref(), Some("ConflictError"));
    let mut recover = body.clone();
    recover["properties"]["createMode"] = json!("recover");
    assert_eq!(
        call(&sim, "PUT", &vault_path("rg", "kv-taken"), Some(recover))
            .await
            .status,
        201
    );
    assert_eq!(
        kv(&sim, "kv-taken", &tok, "GET", "/secrets/s", None)
            .await
            .body["value"],
        "v"
    );
    // Delete and purge: the name is free and the vault comes back empty.
    assert_eq!(
        call(&sim, "DELETE", &vault_path("rg", "kv-taken"), None)
            .await
            .status,
        200
    );
    let r = call(
        &sim,
        "POST",
        &format!("{deleted}/purge?api-version=2023-07-01"),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        call(
            &sim,
            "GET",
            &format!("{deleted}?api-version=2023-07-01"),
            None
        )
        .await
        .status,
        404
    );
    assert_eq!(check("kv-taken").await.body["nameAvailable"], true);
    assert_eq!(
        call(&sim, "PUT", &vault_path("rg", "kv-taken"), Some(body))
            .await
            .status,
        201
    );
    assert_eq!(
        kv(&sim, "kv-taken", &tok, "GET", "/secrets/s", None)
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn key_vault_certificate_becomes_an_application_key_credential() {
    let sim = kv_sim();
    create_rg(&sim, "rg").await;
    create_vault(&sim, "rg", "hcp-kv-5", true).await;
    let kvt = token(&sim, CALLER, "https://vault.azure.net/.default").await;
    let cert = issue(&sim, "hcp-kv-5", &kvt, "cpo").await;
    let cer = cert.body["cer"].as_str().unwrap().to_string();
    let der = STANDARD.decode(&cer).unwrap();
    let sha: [u8; 20] = sha1::Sha1::digest(&der).into();
    let g = token(&sim, CALLER, "https://graph.microsoft.com/.default").await;
    let r = graph(
        &sim,
        &g,
        "PATCH",
        "/v1.0/applications(uniqueName='cpo')",
        Some(json!({"displayName": "cpo"})),
        true,
    )
    .await;
    let id = r.body["id"].as_str().unwrap().to_string();
    let cred = json!({"type": "AsymmetricX509Cert", "usage": "Verify", "key": cer, "displayName": "CN=cpo"});
    let r = graph(
        &sim,
        &g,
        "PATCH",
        &format!("/v1.0/applications/{id}"),
        Some(json!({"keyCredentials": [cred]})),
        false,
    )
    .await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = graph(
        &sim,
        &g,
        "GET",
        &format!("/v1.0/applications/{id}"),
        None,
        false,
    )
    .await;
    let k = &r.body["keyCredentials"][0];
    assert_eq!(k["key"], Value::Null);
    assert_eq!(k["customKeyIdentifier"], STANDARD.encode(sha));
    assert!(k["keyId"].is_string());
    assert!(k["endDateTime"].as_str().unwrap().ends_with('Z'));
    // Resubmitting by keyId without the key keeps it; an end date past the certificate's is refused.
    let key_id = k["keyId"].as_str().unwrap().to_string();
    let r = graph(&sim, &g, "PATCH", &format!("/v1.0/applications/{id}"),
        Some(json!({"keyCredentials": [{"type": "AsymmetricX509Cert", "usage": "Verify", "keyId": key_id, "key": null}]})), false).await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = graph(&sim, &g, "PATCH", &format!("/v1.0/applications/{id}"),
        Some(json!({"keyCredentials": [{"type": "AsymmetricX509Cert", "usage": "Verify", "key": cer, "endDateTime": "2999-01-01T00:00:00Z"}]})), false).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["error"]["message"],
        "Key credential end date is invalid."
    );
    let r = graph(&sim, &g, "PATCH", &format!("/v1.0/applications/{id}"),
        Some(json!({"keyCredentials": [{"type": "AsymmetricX509Cert", "usage": "Verify", "key": "bm90IGEgY2VydA=="}]})), false).await;
    assert_eq!(r.status, 400);
    let r = graph(
        &sim,
        &g,
        "PATCH",
        &format!("/v1.0/applications/{id}"),
        Some(json!({"appId": "x"})),
        false,
    )
    .await;
    assert_eq!(r.status, 400);
}
