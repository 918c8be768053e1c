//! (a simulator process and the
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

/// PUT and wait until the resource is ready.
fn put_ready(env: &Env, id: &str, api: &str, body: Value) -> Value {
    hcp_e2e_tests::cluster::put_ready_at(env, id, api, body)
}

/// Rewrite the cluster file's `from` block with `to`.
fn edit(path: &Path, from: &str, to: &str) {
    hcp_e2e_tests::cluster::edit_file(path, from, to)
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
    let cfg = cluster_file(&env.dir, "byoids", "byoids-a1b2c", "Public", "");
    // The user's identities, each with its federated credentials for the cluster's issuer
    // (the simulated cluster checks the whole chain).
    hcp_e2e_tests::cluster::byo_identities(&env, &cfg, "byoidsoidc1", None);
    let identity_ids: Vec<String> = hcp_e2e_tests::cluster::IDENTITIES
        .iter()
        .map(|(f, _)| {
            format!(
                "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/mine-{}",
                rg("my-identities"),
                f.to_ascii_lowercase()
            )
            .to_ascii_lowercase()
        })
        .collect();
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
    // The discovery document too (preflight checks it).
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
        // (checkNameAvailability, SelfSubjectReview, SelfSubjectAccessReview).
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

/// On `simulator serve`: a bring-your-own VNet in another subscription and
/// overlapping node/pod/service networks are refused before anything is journaled or sent
/// (exit 2, naming the field); a valid file's pod, service and node networks reach the
/// HostedCluster (`spec.networking`, `machineNetwork` included, so HyperShift checks too).
#[test]
fn networks_are_checked_and_rendered() {
    let env = Env::new("cfg-networks", 0.002);
    let other_sub = "22222222-2222-3333-4444-555555555555";
    let byo = cluster_file(&env.dir, "xi", "xi-0th3r", "Public", "");
    edit(
        &byo,
        "network:\n  create: {}\n",
        &format!(
            "network:\n  existing:\n    vnetId: /subscriptions/{other_sub}/resourceGroups/byo/providers/Microsoft.Network/virtualNetworks/v\n    subnetId: /subscriptions/{other_sub}/resourceGroups/byo/providers/Microsoft.Network/virtualNetworks/v/subnets/s\n    nsgId: /subscriptions/{GUEST_SUB}/resourceGroups/byo/providers/Microsoft.Network/networkSecurityGroups/n\n"
        ),
    );
    env.sim.clear_requests();
    let (code, out, err) = env.start("create-cluster", &byo, &[], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("network.existing.vnetId"), "{err}");
    assert!(
        err.contains(&format!("the VNet is in subscription {other_sub}")),
        "{err}"
    );
    let overlap = cluster_file(
        &env.dir,
        "omi",
        "omi-0v3rl",
        "Public",
        "networking:\n  clusterNetwork: 10.0.0.0/14\n",
    );
    let (code, out, err) = env.start("create-cluster", &overlap, &[], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("networking.clusterNetwork"), "{err}");
    assert!(
        err.contains("overlaps network.create.vnetCidr 10.0.0.0/16"),
        "{err}"
    );
    assert!(
        env.sim.requests().is_empty(),
        "nothing was sent: {:?}",
        env.sim.requests()
    );
    let (_, listed, _) = env.cli(&["--output", "json", "list"], &[]);
    assert!(
        listed.is_empty() || !listed.contains("\"run_id\""),
        "nothing journaled: {listed}"
    );
    // A valid file: the networks reach the HostedCluster.
    let good = cluster_file(
        &env.dir,
        "rho",
        "rho-n3tw0",
        "Public",
        "networking:\n  clusterNetwork: 10.200.0.0/14\n  serviceNetwork: 172.30.0.0/16\n",
    );
    let (code, out, err) = env.start("create-cluster", &good, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let hc = env.sim.get(&format!("{HC}/rho"));
    let n = &hc["spec"]["networking"];
    assert_eq!(n["clusterNetwork"][0]["cidr"], "10.200.0.0/14", "{n}");
    assert_eq!(n["serviceNetwork"][0]["cidr"], "172.30.0.0/16", "{n}");
    assert_eq!(n["machineNetwork"][0]["cidr"], "10.0.0.0/16", "{n}");
}

/// A bring-your-own VNet with custom DNS servers: preflight warns, naming the
/// VNet and its servers (the private zones resolve only through Azure DNS); with Azure DNS
/// among the servers, no warning.
#[test]
fn a_byo_vnet_with_custom_dns_servers_is_warned_about() {
    let env = Env::new("cfg-byo-dns", FAST);
    let net = rg("dns-net");
    put_ready(&env, &net, "2021-04-01", json!({"location": "eastus"}));
    let nsg = format!("{net}/providers/Microsoft.Network/networkSecurityGroups/dns-nsg");
    put_ready(&env, &nsg, "2023-11-01", json!({"location": "eastus"}));
    let vnet = format!("{net}/providers/Microsoft.Network/virtualNetworks/dns-vnet");
    let vnet_body = |servers: Value| {
        json!({"location": "eastus", "properties": {
            "addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
            "dhcpOptions": {"dnsServers": servers},
            "subnets": [{"name": "nodes", "properties": {"addressPrefix": "10.1.0.0/24", "networkSecurityGroup": {"id": nsg}}}],
        }})
    };
    put_ready(
        &env,
        &vnet,
        "2023-11-01",
        vnet_body(json!(["10.1.0.4", "10.1.0.5"])),
    );
    let cfg = cluster_file(&env.dir, "dnsnet", "dnsnet-d5d5d", "Public", "");
    edit(
        &cfg,
        "network:\n  create: {}\n",
        &format!(
            "network:\n  existing:\n    vnetId: {vnet}\n    subnetId: {vnet}/subnets/nodes\n    nsgId: {nsg}\n"
        ),
    );
    let preflight = || {
        let (_, out, err) = env.cli(
            &[
                "--output",
                "json",
                "preflight",
                "--config",
                cfg.to_str().unwrap(),
            ],
            &[],
        );
        hcp_e2e_tests::items(&out, "PreflightReport")
            .into_iter()
            .filter(|r| r["check"] == "network.existing-dns")
            .map(|r| (r, err.clone()))
            .collect::<Vec<_>>()
    };
    let rows = preflight();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0].0;
    assert_eq!(row["status"], "warn", "{row}");
    assert_eq!(row["target"], vnet.as_str(), "{row}");
    let detail = row["detail"].as_str().unwrap();
    assert!(detail.contains("10.1.0.4, 10.1.0.5"), "{detail}");
    assert!(detail.contains("168.63.129.16"), "{detail}");
    // Azure DNS among them: nothing to say.
    put_ready(
        &env,
        &vnet,
        "2023-11-01",
        vnet_body(json!(["168.63.129.16"])),
    );
    assert!(preflight().is_empty());
}

/// On `simulator serve`: with a PodDisruptionBudget that allows no eviction in
/// the guest, a delete that removed the NodePools first (draining every node) never ended.
/// The NodePools now go with the HostedCluster, undrained, as HyperShift deletes them:
/// hcp-workflow sends no NodePool DELETE before the HostedCluster's, and the delete
/// succeeds. A pool's `nodeDrainTimeout` is rendered (a Go duration).
#[test]
fn delete_goes_with_the_hosted_cluster_and_a_blocking_pdb_does_not_hang_it() {
    let env = Env::new("cfg-pdb", FAST);
    let cfg = cluster_file(
        &env.dir,
        "tau",
        "tau-pdb00",
        "Public",
        "waitBudgets:\n  kubernetesDeletion: 20s\n",
    );
    edit(
        &cfg,
        "    replicas: 1\n",
        "    replicas: 1\n    nodeDrainTimeout: 10m\n",
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let np = env
        .sim
        .get("/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools/tau-infra");
    assert_eq!(np["spec"]["nodeDrainTimeout"], "600s", "{np}");
    let (status, body) = env
        .sim
        .put("/_sim/scenario", &json!({"blocking_pdb": true}));
    assert!((200..300).contains(&status), "{body}");
    env.sim.clear_requests();
    let (code, out, err) = env.start("delete-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_eq!(
        code, 0,
        "the delete must not wait on a drain:\n{out}\n{err}"
    );
    let reqs = env.sim.requests();
    let first = |needle: &str| {
        reqs.iter().position(|r| {
            r["method"] == "DELETE" && r["path"].as_str().unwrap_or_default().contains(needle)
        })
    };
    let hc = first("/hostedclusters/tau").expect("the HostedCluster was deleted");
    if let Some(np) = first("/nodepools/") {
        assert!(hc < np, "a NodePool DELETE came before the HostedCluster's");
    }
    assert!(
        env.sim.get("/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools/tau-workers")["code"]
            == 404
            || env
                .sim
                .get("/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools/tau-workers")
                .get("metadata")
                .is_none(),
        "the pools are gone"
    );
}

/// An existing issuer's JWKS is read where its discovery document's
/// `jwks_uri` says, not at a fixed path. Here the issuer publishes its keys at `keys.json`
/// only: the create is accepted (it was refused as "not published" before).
#[test]
fn an_existing_issuers_jwks_is_read_from_its_jwks_uri() {
    let env = Env::new("cfg-jwks-uri", FAST);
    let key_path = key_file(&env.dir);
    let pem = std::fs::read_to_string(&key_path).unwrap();
    let key = hcp_activities::oidc::IssuerKey::from_private_pem(&pem).unwrap();
    // An issuer whose fixed path lists some other key ...
    let url = existing_issuer(
        &env,
        "uriissuer",
        &json!({"keys": [{"use": "sig", "kty": "RSA", "kid": "stale", "alg": "RS256", "n": "AQAB", "e": "AQAB"}]}),
    );
    // ... and whose discovery document points at keys.json, which lists ours.
    let acct = format!(
        "{}/providers/Microsoft.Storage/storageAccounts/uriissuer",
        rg("issuer")
    );
    let jwks = hcp_activities::oidc::jwks(&key).to_string().into_bytes();
    assert!(
        (200..300).contains(&env.sim.put_blob(
            &acct,
            "oidc",
            "keys.json",
            "application/json",
            jwks
        ))
    );
    let mut disc = hcp_activities::oidc::discovery_document(&url);
    disc["jwks_uri"] = json!(format!("{url}/keys.json"));
    assert!((200..300).contains(&env.sim.put_blob(
        &acct,
        "oidc",
        ".well-known/openid-configuration",
        "application/json",
        disc.to_string().into_bytes()
    )));
    let cfg = cluster_file(&env.dir, "uri", "uri-j5k5u", "Public", "");
    edit(
        &cfg,
        "oidcIssuer:\n  create: {}\n",
        &format!("oidcIssuer:\n  existing:\n    url: {url}\n    signingKey: sa-signing-key.pem\n"),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// A create is done when the guest's release has rolled out
/// (`status.version.history[0].completionTime`, as `hypershift create cluster --wait`),
/// not at Available + Ready pools. With cluster operators that never become available the
/// run stops for an operator once its `clusterRollout` budget is spent (it never unwinds by
/// itself), and what it waits for names the failing operators as HyperShift reports them.
#[test]
fn create_waits_for_the_rollout_and_names_failing_cluster_operators() {
    let env = Env::new("cfg-rollout", FAST);
    let ok = cluster_file(&env.dir, "upsilon", "upsilon-r0ll0", "Public", "");
    let (code, out, err) = env.start("create-cluster", &ok, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("create-cluster.rollout.guest"), "{out}");
    let hc = env.sim.get(&format!("{HC}/upsilon"));
    assert!(
        hc.pointer("/status/version/history/0/completionTime")
            .and_then(Value::as_str)
            .is_some(),
        "{hc}"
    );
    let (status, body) = env.sim.put(
        "/_sim/scenario",
        &json!({"failing_cluster_operators": ["console", "ingress"]}),
    );
    assert!((200..300).contains(&status), "{body}");
    let bad = cluster_file(
        &env.dir,
        "phi",
        "phi-r0ll1",
        "Public",
        "waitBudgets:\n  clusterRollout: 3s\n",
    );
    let (code, out, err) = env.start("create-cluster", &bad, &[], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(hcp_e2e_tests::says_run(&out, "needs an operator"), "{out}");
    let run = hcp_e2e_tests::run_id(&out);
    let (_, why, _) = env.cli(&["why", &run], &[]);
    assert!(why.contains("rollout.guest"), "{why}");
    assert!(
        why.contains("Cluster operator console is not available"),
        "{why}"
    );
    assert!(
        why.contains("Cluster operator ingress is not available"),
        "{why}"
    );
    // Giving up on it unwinds cleanly (the HostedCluster with a Partial rollout included).
    let (code, out, err) = env.cli(&["cancel", &run, "--reason", "operators broken"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        hcp_e2e_tests::says_run(&out, "was cancelled and unwound"),
        "{out}{err}"
    );
}

/// `cloud: {custom: …}` with well-formed endpoints: HyperShift 4.22 maps only the three
/// named clouds to CAPZ (`AzurePublicCloud`, `AzureUSGovernmentCloud`, `AzureChinaCloud`),
/// so such a cluster could never run; `start create-cluster` refuses it with exit 2 naming
/// the field, and nothing is journaled or created (it used to render `AzurePublicCloud`).
#[test]
fn a_custom_cloud_is_refused_before_anything_is_journaled() {
    let env = Env::new("cfg-custom-cloud", FAST);
    let extra = "cloud:\n  custom:\n    resourceManager: https://management.local.example\n    authorityHost: https://login.local.example\n    storageSuffix: core.local.example\n";
    let cfg = cluster_file(&env.dir, "cust", "cust-c1oud", "Public", extra);
    let before = env.sim.ids();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("cloud.custom"), "{err}");
    assert!(err.contains("AzurePublicCloud"), "{err}");
    assert!(
        !env.dir.join("journal.db").exists(),
        "no journal was even opened"
    );
    assert_eq!(env.sim.ids(), before, "nothing created");
    assert!(env.sim.get(&format!("{HC}/cust"))["kind"] != "HostedCluster");
}

/// `hcp-workflow start create-cluster --config F` with `identities.existing` whose
/// identities have no federated credential for one of the component's service accounts
/// (here the ingress operator's subject is misspelled): the component could never get a
/// token, and the run would wait out its budgets for machines and a rollout that cannot
/// come. The preflight refuses it before journaling (exit 2), naming the identity, the
/// subject and the `az` command that adds the credential.
#[test]
fn start_create_cluster_with_byo_identities_missing_a_federated_credential_is_refused() {
    let env = Env::new("cfg-byo-no-fic", FAST);
    let cfg = cluster_file(
        &env.dir,
        "nofic",
        "nofic-a1b2c",
        "Public",
        "waitBudgets:\n  nodePoolReady: 10s\n  clusterRollout: 10s\n",
    );
    hcp_e2e_tests::cluster::byo_identities(
        &env,
        &cfg,
        "noficoidc1",
        Some((
            "system:serviceaccount:openshift-ingress-operator:ingress-operator",
            "system:serviceaccount:openshift-ingress-operator:ingress",
        )),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("identities.federation"), "{err}");
    assert!(
        err.contains("mine-ingress")
            && err.contains("system:serviceaccount:openshift-ingress-operator:ingress-operator")
            && err.contains("az identity federated-credential create"),
        "{err}"
    );
    assert_eq!(env.run_count(), 0, "nothing journaled");
    // The other seven identities' credentials are right: their rows pass.
    let (_, pre, _) = env.cli(&["preflight", "--config", cfg.to_str().unwrap()], &[]);
    assert_eq!(
        pre.lines()
            .filter(|l| l.starts_with("pass") && l.contains("identities.federation"))
            .count(),
        7,
        "{pre}"
    );
}
