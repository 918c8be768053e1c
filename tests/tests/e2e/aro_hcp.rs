//! The ARO HCP identity model end to end, with real processes: `hcp-workflow`
//! against `hcp-workflow simulator serve --management-platform aks` (an AKS management
//! cluster with the Key Vault Secrets Provider add-on; Microsoft Graph; Key Vault's ARM and
//! data plane; HyperShift's ManagedIdentities mode, whose SecretProviderClass mounts read
//! the credentials secrets as the add-on's identity and check the certificate against the
//! application's key credentials).
//!
//! - create, delete (the persistent identities stay), re-create (they are reused: no new
//!   application, no new certificate), purge (nothing of ours is left, soft-deleted objects
//!   purged too);
//! - a failure at every node of the identities and control-plane stages unwinds to the
//!   inventory from before;
//! - SIGKILL at every journal boundary of the identities stage: same end, nothing created
//!   twice (no application upserted as new twice, no certificate created twice);
//! - no certificate private key in the journal, the logs or the views;
//! - the Graph permission and Key Vault preflight rows.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{GUEST_SUB, TENANT, aro_env, aro_file, fail_each_node};
use hcp_e2e_tests::crash::{crash_through, targets};
use hcp_e2e_tests::{document, items, says_run};
use serde_json::Value;
use std::collections::BTreeSet;

const TIME_SCALE: f64 = 0.002;

fn graph_apps(ids: &BTreeSet<String>) -> BTreeSet<String> {
    ids.iter()
        .filter(|i| i.starts_with("graph:/applications/"))
        .cloned()
        .collect()
}

/// A Key Vault data-plane read of the simulator (a token from its Entra, as any client).
fn kv_get(base: &str, vault: &str, path: &str) -> Value {
    let http = reqwest::blocking::Client::new();
    let tok: Value = http
        .post(format!("{base}/{TENANT}/oauth2/v2.0/token"))
        .header("x-ms-original-host", "login.microsoftonline.com")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            "grant_type=client_credentials&client_id=11111111-0000-0000-0000-0000000000aa&client_secret=test&scope=https%3A%2F%2Fvault.azure.net%2F.default",
        )
        .send()
        .unwrap()
        .json()
        .unwrap();
    let token = tok["access_token"].as_str().unwrap().to_string();
    http.get(format!("{base}{path}?api-version=7.5"))
        .header("x-ms-original-host", format!("{vault}.vault.azure.net"))
        .bearer_auth(token)
        .send()
        .unwrap()
        .json()
        .unwrap_or(Value::Null)
}

#[test]
fn create_delete_recreate_and_purge_reuse_and_then_remove_the_persistent_identities() {
    let env = aro_env("aro-lifecycle", TIME_SCALE);
    let before = env.sim.ids();
    let cfg = aro_file(&env.dir, "aro", "aro-a1b2c", GUEST_SUB, "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "create failed\nstdout:\n{out}\nstderr:\n{err}");
    assert!(says_run(&out, "succeeded"), "{out}");
    let created: BTreeSet<String> = env.sim.ids().difference(&before).cloned().collect();
    // The Key Vault, 8 applications and service principals, 8 certificates and credentials
    // secrets, 3 data-plane identities with federated credentials, the role assignments.
    assert_eq!(graph_apps(&created).len(), 8, "{created:#?}");
    let count = |needle: &str| created.iter().filter(|i| i.contains(needle)).count();
    assert_eq!(count("graph:/servicePrincipals/"), 8, "{created:#?}");
    assert_eq!(
        count("vault.azure.net/certificates/aro-"),
        8,
        "{created:#?}"
    );
    assert_eq!(count("vault.azure.net/secrets/aro-"), 8, "{created:#?}");
    assert_eq!(
        count("vaults/aro-kv"),
        1 + count("vaults/aro-kv/"),
        "{created:#?}"
    );
    assert_eq!(
        count("userAssignedIdentities/aro-") - count("federatedIdentityCredentials"),
        3
    );
    assert!(count("federatedIdentityCredentials") >= 3, "{created:#?}");
    for secret in [
        "aro-cpo-json",
        "aro-nodepool-mgmt-json",
        "aro-image-registry-json",
    ] {
        assert!(
            created
                .iter()
                .any(|i| i.ends_with(&format!("/secrets/{secret}"))),
            "no {secret}: {created:#?}"
        );
    }
    // The HostedCluster carries HyperShift's ManagedIdentities shape.
    let hc = env
        .sim
        .get("/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters/aro");
    let auth = &hc["spec"]["platform"]["azure"]["azureAuthenticationConfig"];
    assert_eq!(
        auth["azureAuthenticationConfigType"], "ManagedIdentities",
        "{auth}"
    );
    // A public ManagedIdentities cluster is served by HyperShift's shared ingress, which
    // routes by hostname (`UseSharedIngressHC`): its four Routes have hostnames, and their
    // public A records point at the shared ingress router.
    let router = env
        .sim
        .get("/api/v1/namespaces/hypershift-sharedingress/services/router");
    let router_ip = router["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!router_ip.is_empty(), "{router}");
    for (service, prefix) in [
        ("APIServer", "api"),
        ("OAuthServer", "oauth"),
        ("Konnectivity", "konnectivity"),
        ("Ignition", "ignition"),
    ] {
        let s = hc["spec"]["services"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["service"] == service)
            .cloned()
            .unwrap();
        assert_eq!(s["servicePublishingStrategy"]["type"], "Route", "{s}");
        assert_eq!(
            s["servicePublishingStrategy"]["route"]["hostname"],
            format!("{prefix}-aro.hcp.example.com"),
            "{s}"
        );
        let rec = env.sim.get(&format!(
            "/subscriptions/{GUEST_SUB}/resourceGroups/hcp-dns/providers/Microsoft.Network/dnszones/hcp.example.com/A/{prefix}-aro?api-version=2018-05-01"
        ));
        assert_eq!(
            rec["properties"]["ARecords"][0]["ipv4Address"],
            router_ip.as_str(),
            "{rec}"
        );
    }
    assert_eq!(
        hc["status"]["controlPlaneEndpoint"]["host"],
        "api-aro.hcp.example.com"
    );
    let cp = &auth["managedIdentities"]["controlPlane"];
    assert_eq!(cp["managedIdentitiesKeyVault"]["name"], "aro-kv", "{cp}");
    assert_eq!(
        cp["controlPlaneOperator"]["credentialsSecretName"],
        "aro-cpo-json"
    );
    assert_eq!(cp["disk"]["objectEncoding"], "utf-8");
    let dp = &auth["managedIdentities"]["dataPlane"];
    for k in [
        "imageRegistryMSIClientID",
        "diskMSIClientID",
        "fileMSIClientID",
    ] {
        assert!(dp[k].as_str().is_some_and(|s| s.len() == 36), "{dp}");
    }
    // The credentials secret HyperShift mounts: msi-dataplane's JSON for that application.
    let secret = kv_get(&env.sim.base, "aro-kv", "/secrets/aro-cpo-json");
    let creds: Value = serde_json::from_str(secret["value"].as_str().unwrap()).unwrap();
    assert_eq!(
        creds["client_id"], cp["controlPlaneOperator"]["clientID"],
        "{creds}"
    );
    assert!(creds["client_secret"].as_str().unwrap().len() > 1000);
    assert_eq!(creds["tenant_id"], TENANT);

    // delete-cluster keeps the persistent identities.
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "delete failed\nstdout:\n{out}\nstderr:\n{err}");
    let kept: BTreeSet<String> = env.sim.ids().difference(&before).cloned().collect();
    assert_eq!(
        graph_apps(&kept),
        graph_apps(&created),
        "applications are persistent"
    );
    assert!(kept.iter().any(|i| i.ends_with("/certificates/aro-cpo")));
    assert!(!kept.iter().any(|i| i.contains("hostedclusters/aro")));
    assert!(
        !kept
            .iter()
            .any(|i| i.contains("/dnszones/hcp.example.com/A/")),
        "the four public records are deleted with the cluster: {kept:#?}"
    );

    // A re-create reuses them: the same applications, no new certificate.
    env.sim.clear_requests();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "re-create failed\nstdout:\n{out}\nstderr:\n{err}");
    let again: BTreeSet<String> = env.sim.ids().difference(&before).cloned().collect();
    assert_eq!(
        graph_apps(&again),
        graph_apps(&created),
        "re-create made new applications"
    );
    let reqs = env.sim.requests();
    let new_certs: Vec<&Value> = reqs
        .iter()
        .filter(|r| {
            r["method"] == "POST"
                && r["path"]
                    .as_str()
                    .is_some_and(|p| p.contains("/certificates/") && p.contains("/create"))
        })
        .collect();
    assert!(
        new_certs.is_empty(),
        "re-create made certificates: {new_certs:#?}"
    );
    let upserts_created: Vec<&Value> = reqs
        .iter()
        .filter(|r| {
            r["method"] == "PATCH"
                && r["status"] == 201
                && r["path"].as_str().is_some_and(|p| p.contains("/v1.0/"))
        })
        .collect();
    assert!(
        upserts_created.is_empty(),
        "re-create created directory objects: {upserts_created:#?}"
    );

    // --purge-persistent removes all of it (purged, not just soft-deleted).
    let (code, out, err) = env.start("delete-cluster", &cfg, &["--purge-persistent"], &[]);
    assert_eq!(code, 0, "purge failed\nstdout:\n{out}\nstderr:\n{err}");
    let after = env.sim.ids();
    let left: Vec<_> = after.symmetric_difference(&before).collect();
    assert!(left.is_empty(), "purge left something behind: {left:#?}");
    env.sim.stop();
}

#[test]
fn every_node_of_an_aro_create_unwinds_to_the_inventory_from_before() {
    let env = aro_env("aro-unwind-each", TIME_SCALE);
    let cfg = aro_file(&env.dir, "delta", "delta-u0w1n", GUEST_SUB, "");
    let (code, plan, err) = env.cli(
        &[
            "--output",
            "json",
            "plan",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan: Value = document(&plan, "Plan");
    // The stages the ARO HCP model changes: identities (Key Vault, applications,
    // certificates, secrets, data-plane identities), their role assignments and the
    // HostedCluster that names them. The other stages are the workload-identity model's
    // (tests/cluster.rs).
    let nodes: Vec<String> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            let node = s["node"].as_str().unwrap_or_default();
            matches!(s["stage"].as_str(), Some("identities" | "control-plane"))
                || node.contains("network.role.")
        })
        .map(|s| s["node"].as_str().unwrap().to_string())
        .collect();
    assert!(nodes.len() > 60, "{nodes:?}");
    for k in 0..nodes.len() {
        env.sim.seed_public_zone(
            &format!("{k:08}-2222-3333-4444-555555555555"),
            "hcp.example.com",
        );
    }
    let before = env.sim.ids();
    let failures = fail_each_node(&env.dir, &env.sim.base, &nodes, |k| {
        let name = format!("d{k}");
        let infra = format!("d{k}-u0w1n");
        let sub = format!("{k:08}-2222-3333-4444-555555555555");
        (aro_file(&env.dir, &name, &infra, &sub, ""), name, infra)
    });
    assert!(
        failures.is_empty(),
        "{} nodes did not unwind cleanly:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    let after = env.sim.ids();
    let added: Vec<_> = after.difference(&before).collect();
    let removed: Vec<_> = before.difference(&after).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "inventory differs after all the unwinds: left {added:#?}, gone {removed:#?}"
    );
    env.sim.stop();
}

/// One cluster, SIGKILLed at every boundary of the nodes whose names contain one of
/// `parts`: the same end as an uninterrupted run, nothing created twice.
fn crash_pass(tag: &str, name: &str, parts: &[&str]) {
    let env = aro_env(tag, TIME_SCALE);
    let cfg = aro_file(&env.dir, name, &format!("{name}-cr4sh"), GUEST_SUB, "");
    let before = env.sim.ids();
    let (code, _, err) = env.cli(
        &[
            "start",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
            "--detach",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let points: Vec<String> = targets(
        &env.dir,
        &env.db,
        &env.sim,
        &cfg,
        "create-cluster",
        "action",
    )
    .into_iter()
    .filter(|p| parts.iter().any(|part| p.contains(part)))
    .collect();
    assert!(points.len() >= 15, "{points:?}");
    let (end, kills) = crash_through(&env.dir, &env.db, &env.sim, &points, &[]);
    eprintln!(
        "{tag}: {kills} workers killed across {} crash points",
        points.len()
    );
    assert_eq!(end, "succeeded");
    // Parallel branches pass some listed points in the process that dies at another's
    // (tests/cluster_crash.rs explains it): how many are kills depends on timing (a
    // quarter to a half of them here); at least five processes die inside these nodes.
    assert!(kills >= 5, "only {kills} kills of {}", points.len());
    let after = env.sim.ids();
    assert_eq!(graph_apps(&after).len(), 8, "applications made twice?");
    assert!(after.len() > before.len() + 40);
    // One application and service principal upserted as new (201) per uniqueName/appId,
    // one certificate creation per certificate.
    let mut created: std::collections::BTreeMap<String, usize> = Default::default();
    for r in &env.sim.requests() {
        let path = r["path"].as_str().unwrap_or_default();
        let path = path.split('?').next().unwrap_or_default().to_string();
        let new_object = (r["method"] == "PATCH" && r["status"] == 201 && path.contains("/v1.0/"))
            || (r["method"] == "POST" && path.ends_with("/create") && r["status"] == 202);
        if new_object {
            *created.entry(path).or_default() += 1;
        }
    }
    let twice: Vec<_> = created.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "created more than once: {twice:#?}");
    assert_eq!(
        created.keys().filter(|p| p.ends_with("/create")).count(),
        8,
        "{created:#?}"
    );
    env.sim.stop();
}

/// The Key Vault, its role assignments, the caller and AKS reads, and the control-plane
/// operator's whole chain (application, service principal, certificate, binding,
/// credentials secret). The 8 components run in parallel, and a worker dies at the first
/// listed point any branch reaches, so each pass lists one component's chain.
#[test]
fn sigkill_at_every_boundary_of_the_vault_and_one_component_creates_nothing_twice() {
    crash_pass(
        "aro-crash-vault",
        "kappa",
        &[
            ":create-cluster.preflight.",
            ":create-cluster.identities.key-vault",
            ":create-cluster.identities.control-plane-operator.",
        ],
    );
}

/// Another component's chain and a data-plane identity with its federated credential.
#[test]
fn sigkill_at_every_boundary_of_the_data_plane_and_another_component_creates_nothing_twice() {
    crash_pass(
        "aro-crash-dp",
        "lambda",
        &[
            ":create-cluster.identities.disk.",
            ":create-cluster.identities.data-plane.image-registry",
        ],
    );
}

#[test]
fn no_certificate_or_private_key_reaches_the_journal_logs_or_views() {
    let env = aro_env("aro-secrets", TIME_SCALE);
    let cfg = aro_file(&env.dir, "theta", "theta-s3cr3", GUEST_SUB, "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[("RUST_LOG", "debug")]);
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let run_id = out.split_whitespace().nth(1).unwrap().to_string();
    let (_, show, _) = env.cli(&["--output", "json", "show", &run_id], &[]);
    let (_, why, _) = env.cli(&["why", &run_id], &[]);
    let (_, history, _) = env.cli(&["history", &run_id], &[]);
    // The private key Key Vault made, and the credentials JSON built from it.
    let pem = kv_get(&env.sim.base, "theta-kv", "/secrets/theta-cpo")["value"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        pem.contains("PRIVATE KEY"),
        "the certificate's secret: {pem}"
    );
    let key_line = pem
        .lines()
        .skip_while(|l| !l.contains("BEGIN PRIVATE KEY"))
        .nth(5)
        .unwrap()
        .to_string();
    let creds = kv_get(&env.sim.base, "theta-kv", "/secrets/theta-cpo-json")["value"]
        .as_str()
        .unwrap()
        .to_string();
    let creds: Value = serde_json::from_str(&creds).unwrap();
    let client_secret = creds["client_secret"].as_str().unwrap();
    let secret_part = &client_secret[client_secret.len() - 200..client_secret.len() - 100];
    let mut journal = Vec::new();
    for f in std::fs::read_dir(&env.dir).unwrap() {
        let p = f.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("journal.db")
        {
            journal.extend(std::fs::read(&p).unwrap());
        }
    }
    let journal = String::from_utf8_lossy(&journal);
    for (what, hay) in [
        ("journal", journal.as_ref()),
        ("stdout", out.as_str()),
        ("stderr/logs", err.as_str()),
        ("show", show.as_str()),
        ("why", why.as_str()),
        ("history", history.as_str()),
    ] {
        assert!(!hay.contains(&key_line), "private key found in {what}");
        assert!(!hay.contains(secret_part), "credentials found in {what}");
        assert!(
            !hay.contains("PRIVATE KEY"),
            "a private key header in {what}"
        );
    }
    env.sim.stop();
}

/// `hcp-workflow simulator serve --management-platform aks`, nothing else set up, then
/// `preflight --config` of an ARO HCP file: every row passes, `k8s.route-api` included (the
/// simulator's AKS is installed the way HyperShift's AKS how-to installs it; it used to
/// need an undocumented scenario).
#[test]
fn preflight_names_the_graph_permission_and_the_key_vault_rows() {
    let env = aro_env("aro-preflight", TIME_SCALE);
    let cfg = aro_file(&env.dir, "eta", "eta-pr3fl", GUEST_SUB, "");
    let (code, out, err) = env.cli(
        &[
            "--output",
            "json",
            "preflight",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "preflight failed\n{out}\n{err}");
    let rows = items(&out, "PreflightReport");
    for check in [
        "graph.permission",
        "keyvault.name",
        "aks.addons",
        "k8s.aro-hcp",
        "k8s.route-api",
    ] {
        let r: Vec<&Value> = rows.iter().filter(|r| r["check"] == check).collect();
        assert!(!r.is_empty(), "no {check} row: {rows:#?}");
        assert!(r.iter().all(|r| r["status"] == "pass"), "{check}: {r:#?}");
    }
    // Without Application.ReadWrite.OwnedBy: the Graph row fails and says how to grant it.
    let (code, _) = env.sim.put(
        "/_sim/scenario",
        &serde_json::json!({"graph_permissions": []}),
    );
    assert!(code < 300, "{code}");
    let (code, out, _) = env.cli(
        &[
            "--output",
            "json",
            "preflight",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_ne!(code, 0);
    let row = items(&out, "PreflightReport")
        .iter()
        .find(|r| r["check"] == "graph.permission")
        .cloned()
        .unwrap();
    assert_eq!(row["status"], "fail", "{row}");
    assert!(
        row["fix"]
            .as_str()
            .unwrap()
            .contains("Application.ReadWrite.OwnedBy"),
        "{row}"
    );
    // `start` runs the same preflight first: refused, nothing journaled or created.
    let before = env.sim.ids();
    let (code, _, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("graph.permission"), "{err}");
    assert_eq!(env.sim.ids(), before);
    // Past it (--skip-preflight), the first application is refused (403
    // Authorization_RequestDenied, permanent) and the run unwinds to nothing.
    let (code, out, _) = env.start("create-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(says_run(&out, "rolled back"), "{out}");
    assert!(
        out.contains("Authorization_RequestDenied") || out.contains("Insufficient privileges"),
        "{out}"
    );
    assert_eq!(env.sim.ids(), before);
    env.sim.stop();
}

/// Two clusters share one persistent group and its Key Vault (the seed's "Shared
/// Resources"): purging one removes only its own certificates, secrets, applications and
/// data-plane identities; the other cluster's, the vault it still uses and the vault's
/// shared grants stay. The other cluster's purge then removes all of its own, but not the
/// vault: alpha made it (its tags), so no later purge claims it — it stays, with its grants
/// and the group it keeps non-empty, for an operator (docs/dev/known-gaps.md).
#[test]
fn purging_one_cluster_keeps_what_another_cluster_has_in_the_shared_vault() {
    let env = aro_env("aro-shared-vault", TIME_SCALE);
    let before = env.sim.ids();
    let share = |name: &str| {
        let cfg = aro_file(&env.dir, name, &format!("{name}-sh4r3"), GUEST_SUB, "");
        let yaml = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace(&format!("{name}-persistent"), "team-persistent")
            .replace(&format!("name: {name}-kv"), "name: team-kv");
        std::fs::write(&cfg, yaml).unwrap();
        cfg
    };
    let (a, b) = (share("alpha"), share("beta"));
    for cfg in [&a, &b] {
        let (code, out, err) = env.start("create-cluster", cfg, &[], &[]);
        assert_eq!(code, 0, "create failed\nstdout:\n{out}\nstderr:\n{err}");
    }
    let both = env.sim.ids();
    let beta_apps: BTreeSet<String> = graph_apps(&both);
    assert_eq!(beta_apps.len(), 16, "two clusters' applications");
    let (code, out, err) = env.start("delete-cluster", &a, &["--purge-persistent"], &[]);
    assert_eq!(code, 0, "purge failed\nstdout:\n{out}\nstderr:\n{err}");
    let after = env.sim.ids();
    assert!(
        !after
            .iter()
            .any(|i| i.contains("/alpha-") && i.contains("vault.azure.net")),
        "alpha's Key Vault objects are gone"
    );
    for kept in [
        "vault.azure.net/certificates/beta-cpo",
        "vault.azure.net/secrets/beta-cpo-json",
        "userAssignedIdentities/beta-disk-dp",
        "providers/Microsoft.KeyVault/vaults/team-kv",
    ] {
        assert!(
            after.iter().any(|i| i.contains(kept)),
            "{kept} was removed by alpha's purge: {after:#?}"
        );
    }
    assert_eq!(graph_apps(&after).len(), 8, "beta's applications stay");
    assert!(
        after
            .iter()
            .filter(
                |i| i.contains("vaults/team-kv/providers/Microsoft.Authorization/roleAssignments")
            )
            .count()
            >= 1,
        "the vault's shared grant stays: {after:#?}"
    );
    // beta still works on the vault, and its own purge removes all of its own objects.
    let (code, out, err) = env.start("delete-cluster", &b, &["--purge-persistent"], &[]);
    assert_eq!(code, 0, "purge failed\nstdout:\n{out}\nstderr:\n{err}");
    let after = env.sim.ids();
    assert!(
        before.is_subset(&after),
        "something that was there before is gone"
    );
    let left: Vec<_> = after.difference(&before).cloned().collect();
    let vault_or_its_group = |i: &&String| {
        i.ends_with("/resourceGroups/team-persistent")
            || i.contains("/vaults/team-kv")
            || i.contains("team-persistent/providers/Microsoft.Authorization/roleAssignments/")
    };
    assert!(
        left.iter().all(|i| vault_or_its_group(&i)),
        "left behind besides the shared vault: {left:#?}"
    );
    env.sim.stop();
}
