//! Issue 12, findings 3–5 end to end with real processes (a simulator process and the
//! prebuilt `hcp-workflow`): the public and infra DNS zones with a bring-your-own network
//! and the guest's `*.apps` records, role assignments for bring-your-own identities, an
//! existing OIDC issuer's signing key, and a missing public zone.
//!
//! Run `cargo build -p hcp-workflow` first.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, cluster_file};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const FAST: f64 = 0.002;
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";

fn rg(name: &str) -> String {
    format!("/subscriptions/{GUEST_SUB}/resourceGroups/{name}")
}

/// PUT and wait (polling GET) until the resource answers 200 and is not provisioning.
fn put_ready(env: &Env, id: &str, api: &str, body: Value) -> Value {
    let (s, b) = env.sim.put(&format!("{id}?api-version={api}"), &body);
    assert!((200..300).contains(&s), "PUT {id}: {s} {b}");
    for _ in 0..500 {
        let v = env.sim.get(&format!("{id}?api-version={api}"));
        let state = v
            .pointer("/properties/provisioningState")
            .and_then(Value::as_str);
        if v.get("id").is_some() && state.is_none_or(|p| p == "Succeeded") {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{id} never became ready");
}

/// Rewrite the cluster file's `from` block with `to`.
fn edit(path: &Path, from: &str, to: &str) {
    let s = std::fs::read_to_string(path).unwrap();
    assert!(s.contains(from), "{from} not in {}", path.display());
    std::fs::write(path, s.replacen(from, to, 1)).unwrap();
}

fn inventory_of(env: &Env, rtype: &str) -> Vec<Value> {
    env.sim
        .inventory()
        .into_iter()
        .filter(|i| {
            i["type"]
                .as_str()
                .is_some_and(|t| t.eq_ignore_ascii_case(rtype))
        })
        .collect()
}

fn ids_of(env: &Env, rtype: &str) -> Vec<String> {
    inventory_of(env, rtype)
        .iter()
        .filter_map(|i| i["id"].as_str().map(str::to_ascii_lowercase))
        .collect()
}

/// Finding 3: a bring-your-own network still gets the infra zone and its link, the
/// HostedCluster names both zones, the guest writes `*.apps` into them, and delete removes
/// the infra zone and link but never the public zone or the VNet.
#[test]
fn byo_network_gets_both_zone_ids_and_apps_records() {
    let env = Env::new("cfg-byo-net", FAST);
    // The user's network, made before the cluster (not ours: never tagged, never deleted).
    let net = rg("byo-net");
    put_ready(&env, &net, "2021-04-01", json!({"location": "eastus"}));
    let nsg = format!("{net}/providers/Microsoft.Network/networkSecurityGroups/byo-nsg");
    put_ready(&env, &nsg, "2023-11-01", json!({"location": "eastus"}));
    let vnet = format!("{net}/providers/Microsoft.Network/virtualNetworks/byo-vnet");
    put_ready(
        &env,
        &vnet,
        "2023-11-01",
        json!({"location": "eastus", "properties": {
            "addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
            "subnets": [{"name": "nodes", "properties": {"addressPrefix": "10.1.0.0/24", "networkSecurityGroup": {"id": nsg}}}],
        }}),
    );
    let cfg = cluster_file(&env.dir, "byonet", "byonet-a1b2c", "Public", "");
    edit(
        &cfg,
        "network:\n  create: {}\n",
        &format!(
            "network:\n  existing:\n    vnetId: {vnet}\n    subnetId: {vnet}/subnets/nodes\n    nsgId: {nsg}\n"
        ),
    );
    let before = env.sim.ids();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let hc = env.sim.get(&format!("{HC}/byonet"));
    let infra_zone = format!(
        "{}/providers/Microsoft.Network/privateDnsZones/byonet.hcp.example.com",
        rg("byonet-byonet-a1b2c")
    );
    let public_zone = format!(
        "{}/providers/Microsoft.Network/dnszones/hcp.example.com",
        rg("hcp-dns")
    );
    assert_eq!(hc["spec"]["dns"]["privateZoneID"], infra_zone.as_str());
    assert_eq!(hc["spec"]["dns"]["publicZoneID"], public_zone.as_str());
    let link = format!("{infra_zone}/virtualNetworkLinks/byonet-byonet-a1b2c").to_ascii_lowercase();
    assert!(
        env.sim.ids().iter().any(|i| i.to_ascii_lowercase() == link),
        "no link to the BYO VNet"
    );
    // The guest's ingress publishes *.apps once a pool is Ready (soon after the run ends).
    let want = [
        format!("{public_zone}/A/*.apps.byonet").to_ascii_lowercase(),
        format!("{infra_zone}/A/*.apps").to_ascii_lowercase(),
    ];
    let mut recs = Vec::new();
    for _ in 0..500 {
        recs = [
            ids_of(&env, "Microsoft.Network/dnszones/A"),
            ids_of(&env, "Microsoft.Network/privateDnsZones/A"),
        ]
        .concat();
        if want.iter().all(|w| recs.contains(w)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for w in &want {
        assert!(recs.contains(w), "{w} missing from {recs:?}");
    }
    // The ingress role's third scope is the public zone's group.
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let after: Vec<String> = env
        .sim
        .ids()
        .into_iter()
        .map(|i| i.to_ascii_lowercase())
        .collect();
    assert!(
        !after.contains(&infra_zone.to_ascii_lowercase()),
        "infra zone left behind"
    );
    assert!(!after.contains(&link), "infra link left behind");
    assert!(
        after.contains(&public_zone.to_ascii_lowercase()),
        "the public zone is not ours"
    );
    assert!(
        after.contains(&vnet.to_ascii_lowercase()),
        "the BYO VNet is not ours"
    );
    // Everything else the create made is gone (persistent group and what is in it aside).
    let left: Vec<&String> = after
        .iter()
        .filter(|i| !before.iter().any(|b| b.eq_ignore_ascii_case(i)))
        .filter(|i| !i.contains("byonet-persistent") && !i.starts_with("/api"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:#?}");
}

/// Finding 4: bring-your-own identities get the 18 role assignments; delete removes them
/// and leaves the identities.
#[test]
fn byo_identities_get_18_role_assignments_and_keep_their_identities() {
    let env = Env::new("cfg-byo-ids", FAST);
    let ids_rg = rg("my-identities");
    put_ready(&env, &ids_rg, "2021-04-01", json!({"location": "eastus"}));
    let fields = [
        "disk",
        "file",
        "imageRegistry",
        "ingress",
        "cloudProvider",
        "nodePoolManagement",
        "network",
        "controlPlaneOperator",
    ];
    let mut file = serde_json::Map::new();
    let mut identity_ids = Vec::new();
    for f in fields {
        let id = format!(
            "{ids_rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/mine-{}",
            f.to_ascii_lowercase()
        );
        let v = put_ready(&env, &id, "2024-11-30", json!({"location": "eastus"}));
        let client = v["properties"]["clientId"].as_str().unwrap().to_string();
        file.insert(f.into(), json!({"clientID": client}));
        identity_ids.push(id.to_ascii_lowercase());
    }
    std::fs::write(
        env.dir.join("workload-identities.json"),
        serde_json::to_vec_pretty(&Value::Object(file)).unwrap(),
    )
    .unwrap();
    let cfg = cluster_file(&env.dir, "byoids", "byoids-a1b2c", "Public", "");
    edit(
        &cfg,
        "identities:\n  create: {}\n",
        "identities:\n  existing:\n    file: workload-identities.json\n",
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let roles = ids_of(&env, "Microsoft.Authorization/roleAssignments");
    assert_eq!(roles.len(), 18, "{roles:#?}");
    // One of them is on the public zone's group.
    assert!(
        roles
            .iter()
            .any(|r| r.starts_with(&rg("hcp-dns").to_ascii_lowercase())),
        "{roles:#?}"
    );
    let (code, out, err) = env.start("delete-cluster", &cfg, &["--purge-persistent"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(ids_of(&env, "Microsoft.Authorization/roleAssignments").is_empty());
    let left = ids_of(&env, "Microsoft.ManagedIdentity/userAssignedIdentities");
    for id in &identity_ids {
        assert!(left.contains(id), "{id} was deleted");
    }
}

/// An issuer served from a public blob container of the simulated cloud.
fn existing_issuer(env: &Env, account: &str, jwks: &Value) -> String {
    let grp = rg("issuer");
    put_ready(env, &grp, "2021-04-01", json!({"location": "eastus"}));
    let acct = format!("{grp}/providers/Microsoft.Storage/storageAccounts/{account}");
    put_ready(
        env,
        &acct,
        "2024-01-01",
        json!({"location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"},
               "properties": {"allowBlobPublicAccess": true}}),
    );
    put_ready(
        env,
        &format!("{acct}/blobServices/default/containers/oidc"),
        "2024-01-01",
        json!({"properties": {"publicAccess": "Container"}}),
    );
    let status = env.sim.put_blob(
        &acct,
        "oidc",
        "openid/v1/jwks",
        "application/json",
        jwks.to_string().into_bytes(),
    );
    assert!((200..300).contains(&status), "{status}");
    // The discovery document too (preflight checks it, issue 13).
    let url = format!("https://{account}.blob.core.windows.net/oidc");
    let status = env.sim.put_blob(
        &acct,
        "oidc",
        ".well-known/openid-configuration",
        "application/json",
        hcp_activities::oidc::discovery_document(&url)
            .to_string()
            .into_bytes(),
    );
    assert!((200..300).contains(&status), "{status}");
    url
}

fn key_file(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workflows/tests/fixtures/files/sa-signing-key.pem");
    let dst = dir.join("sa-signing-key.pem");
    std::fs::copy(src, &dst).unwrap();
    dst
}

/// Finding 5: an existing issuer's key is stored in the signing-key Secret when the issuer
/// publishes its kid, and refused with a clear message when it does not.
#[test]
fn existing_issuer_signing_key_must_be_published() {
    let env = Env::new("cfg-issuer", FAST);
    let key_path = key_file(&env.dir);
    let pem = std::fs::read_to_string(&key_path).unwrap();
    let key = hcp_activities::oidc::IssuerKey::from_private_pem(&pem).unwrap();
    let good = existing_issuer(&env, "goodissuer", &hcp_activities::oidc::jwks(&key));
    let cfg = cluster_file(&env.dir, "issuer", "issuer-a1b2c", "Public", "");
    edit(
        &cfg,
        "oidcIssuer:\n  create: {}\n",
        &format!("oidcIssuer:\n  existing:\n    url: {good}\n    signingKey: sa-signing-key.pem\n"),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let secret = env
        .sim
        .get("/api/v1/namespaces/clusters/secrets/issuer-sa-token-issuer-key");
    let stored = secret["data"]["key"].as_str().unwrap();
    use base64::Engine;
    let stored = base64::engine::general_purpose::STANDARD
        .decode(stored)
        .unwrap();
    assert_eq!(String::from_utf8(stored).unwrap().trim(), pem.trim());
    let hc = env.sim.get(&format!("{HC}/issuer"));
    assert_eq!(hc["spec"]["issuerURL"], good.as_str());
    // The key never reaches the journal or the output.
    let (_, shown, _) = env.cli(&["--output", "json", "list"], &[]);
    let body = pem.lines().nth(1).unwrap();
    assert!(!shown.contains(body) && !out.contains(body) && !err.contains(body));

    // Another cluster whose issuer publishes some other key: refused, nothing written to
    // the Secret.
    let other = existing_issuer(
        &env,
        "otherissuer",
        &json!({"keys": [{"use": "sig", "kty": "RSA", "kid": "someone-elses-key", "alg": "RS256", "n": "AQAB", "e": "AQAB"}]}),
    );
    let cfg2 = cluster_file(&env.dir, "wrongkid", "wrongkid-a1b2c", "Public", "");
    edit(
        &cfg2,
        "oidcIssuer:\n  create: {}\n",
        &format!(
            "oidcIssuer:\n  existing:\n    url: {other}\n    signingKey: sa-signing-key.pem\n"
        ),
    );
    let (code, out, err) = env.start("create-cluster", &cfg2, &[], &[]);
    assert_ne!(code, 0, "{out}\n{err}");
    let all = format!("{out}\n{err}");
    assert!(all.contains("is not published by the issuer"), "{all}");
    assert!(all.contains("someone-elses-key"), "{all}");
    assert!(all.contains(&key.kid()), "{all}");
    let s = env
        .sim
        .get("/api/v1/namespaces/clusters/secrets/wrongkid-sa-token-issuer-key");
    assert!(s.get("data").is_none(), "the Secret was written: {s}");
}

/// Finding 3: no public zone for baseDomain fails before anything is created, naming the
/// setting and the fix.
#[test]
fn missing_public_zone_fails_before_anything_is_created() {
    let env = Env::new("cfg-no-zone", FAST);
    let cfg = cluster_file(&env.dir, "nozone", "nozone-a1b2c", "Public", "");
    edit(
        &cfg,
        "baseDomain: hcp.example.com\n",
        "baseDomain: nozone.example.org\n",
    );
    let before = env.sim.ids();
    env.sim.clear_requests();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_ne!(code, 0, "{out}\n{err}");
    let all = format!("{out}\n{err}");
    assert!(
        all.contains("no public Azure DNS zone named \"nozone.example.org\""),
        "{all}"
    );
    assert!(
        all.contains("baseDomain") && all.contains("dnsZoneResourceGroup"),
        "{all}"
    );
    assert_eq!(env.sim.ids(), before, "something was created");
    // Not a single write reached the cloud or the management cluster.
    let writes: Vec<Value> = env
        .sim
        .requests()
        .into_iter()
        .filter(|r| !matches!(r["method"].as_str(), Some("GET") | Some("HEAD")))
        // Entra token requests are POSTs that write nothing; so are preflight's questions
        // (issue 13: checkNameAvailability, SelfSubjectReview, SelfSubjectAccessReview).
        .filter(|r| {
            let p = r["path"].as_str().unwrap_or_default();
            ![
                "/oauth2/",
                "/checkNameAvailability",
                "/checkPrivateLinkServiceVisibility",
                "/selfsubjectreviews",
                "/selfsubjectaccessreviews",
            ]
            .iter()
            .any(|x| p.contains(x))
        })
        .collect();
    assert!(writes.is_empty(), "{writes:#?}");
}
