//! Against `simulator serve`: `hcp-workflow
//! verify` compares what the journal says with what exists. Each drift kind is caused out
//! of band, through the same ARM and Kubernetes APIs an operator (or the portal) uses; verify
//! must report exactly that (and nothing else) with exit 3, and say ok (exit 0) once it is
//! put back. verify itself sends no PUT, PATCH or DELETE (the simulator's request log).
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, cluster_file};
use hcp_e2e_tests::{document, items};
use serde_json::{Value, json};

const FAST: f64 = 0.002;
const A: &str = "22222222-3333-4444-5555-666666666666";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";

/// The file of a Private cluster with hcp-workflow's private link, subscription A allowed.
fn linked(env: &Env, name: &str, infra: &str) -> std::path::PathBuf {
    cluster_file(
        &env.dir,
        name,
        infra,
        "Private",
        &format!("allowedSubscriptions:\n  - {A}\nprivateLink:\n  managedBy: hcp-workflow\n"),
    )
}

/// `verify cluster/<name> --output json`: (exit code, the rows that are not ok as
/// `(check, verdict, resource)`).
fn verify(env: &Env, name: &str) -> (i32, Vec<(String, String, String)>) {
    let target = format!("cluster/{name}");
    let (code, out, err) = env.cli(&["--output", "json", "verify", &target], &[]);
    assert!(code == 0 || code == 3, "exit {code}: {out}{err}");
    let doc = document(&out, "VerifyReport");
    assert_eq!(doc["cluster"], name);
    let bad = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] != "ok")
        .map(|r| {
            (
                r["check"].as_str().unwrap().to_string(),
                r["verdict"].as_str().unwrap().to_string(),
                r["resource"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (code, bad)
}

fn assert_ok(env: &Env, name: &str) {
    let (code, _) = verify(env, name);
    if code != 0 {
        let (_, out, _) = env.cli(&["verify", &format!("cluster/{name}")], &[]);
        panic!("not ok:\n{out}");
    }
}

/// [`assert_ok`], and verify sent nothing but GETs (and token requests): the simulator's
/// request log, our client's requests only (HyperShift's simulated controllers write on
/// their own, under their own actor).
fn assert_ok_read_only(env: &Env, name: &str) {
    env.sim.clear_requests();
    assert_ok(env, name);
    let writes: Vec<Value> = env
        .sim
        .requests()
        .into_iter()
        .filter(|r| {
            let m = r["method"].as_str().unwrap_or_default();
            let p = r["path"].as_str().unwrap_or_default();
            let controller = matches!(
                r["actor"].as_str(),
                Some("hypershift-operator" | "control-plane-operator")
            );
            m != "GET" && !controller && !(m == "POST" && p.contains("/oauth2/v2.0/token"))
        })
        .collect();
    assert_eq!(writes, Vec::<Value>::new(), "verify wrote something");
}

/// Every row of `verify cluster/<name> --output json`.
fn rows(env: &Env, name: &str) -> Vec<Value> {
    let (_, out, _) = env.cli(
        &["--output", "json", "verify", &format!("cluster/{name}")],
        &[],
    );
    document(&out, "VerifyReport")["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// ARM id → its path with the api-version.
fn arm(id: &str, api: &str) -> String {
    format!("{id}?api-version={api}")
}

/// PUT `body` at `id` (as an operator would in the portal), asserting success; a
/// throttled answer (the simulator's ARM limits, after a run's burst) is tried again.
fn put(env: &Env, id: &str, api: &str, body: &Value) {
    for _ in 0..100 {
        let (s, b) = env.sim.put(&arm(id, api), body);
        if s == 429 {
            std::thread::sleep(std::time::Duration::from_millis(200));
            continue;
        }
        assert!((200..300).contains(&s), "PUT {id}: {s} {b}");
        return;
    }
    panic!("PUT {id}: throttled for 20 s");
}

/// GET `path`, asserting 200; throttled answers are tried again.
fn get(env: &Env, path: &str) -> Value {
    for _ in 0..100 {
        let r = reqwest::blocking::Client::new()
            .get(format!("{}{path}", env.sim.base))
            .header("authorization", "Bearer test")
            .send()
            .unwrap();
        if r.status().as_u16() == 429 {
            std::thread::sleep(std::time::Duration::from_millis(200));
            continue;
        }
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        return r.json().unwrap();
    }
    panic!("GET {path}: throttled for 20 s");
}

fn merge_patch(env: &Env, path: &str, body: &Value) {
    let r = reqwest::blocking::Client::new()
        .patch(format!("{}{path}", env.sim.base))
        .header("authorization", "Bearer test")
        .header("content-type", "application/merge-patch+json")
        .json(body)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "PATCH {path}: {}", r.status());
}

/// The `fix` of the row about `resource`.
fn doc_fix(env: &Env, name: &str, resource: &str) -> String {
    let (_, out, _) = env.cli(
        &["--output", "json", "verify", &format!("cluster/{name}")],
        &[],
    );
    document(&out, "VerifyReport")["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == resource && r["verdict"] != "ok")
        .map(|r| r["fix"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// Ok once what was put back settles (a pool scaling down, an asynchronous delete).
fn eventually_ok(env: &Env, name: &str) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, bad) = verify(env, name);
        if code == 0 {
            return;
        }
        assert!(std::time::Instant::now() < until, "still not ok: {bad:?}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `hcp-workflow --database … --simulator … verify cluster/vfy` after each kind of drift:
/// the rows, the exit code, and fix lines that carry the journal and target flags.
#[test]
fn verify_reports_each_drift_kind_exactly_and_sends_no_write() {
    let env = Env::new("verify", FAST);
    let (name, infra) = ("vfy", "vfy-v3r1f");
    let cfg = linked(&env, name, infra);
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");

    // Everything as the journal says; and verify is read-only.
    assert_ok_read_only(&env, name);
    // The text form says the same; `--all` lists every cluster that exists.
    let (code, out, _) = env.cli(&["verify", &format!("cluster/{name}")], &[]);
    assert_eq!(code, 0);
    assert!(out.contains("Everything is as the journal says."), "{out}");
    let (code, out, _) = env.cli(&["--output", "json", "verify", "--all"], &[]);
    assert_eq!(code, 0);
    assert_eq!(items(&out, "VerifyReportList").len(), 1);
    // Nothing to verify: exit 2, naming what exists.
    let (code, _, err) = env.cli(&["verify", "cluster/nobody"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("hcp-workflow clusters"), "{err}");

    let rg = format!("/subscriptions/{GUEST_SUB}/resourceGroups/{name}-{infra}");
    let vnet = format!(
        "/subscriptions/{GUEST_SUB}/resourceGroups/{name}-vnet-{infra}/providers/Microsoft.Network/virtualNetworks/{name}-{infra}"
    );
    let pls = format!(
        "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-{infra}"
    );
    let zone = format!("{rg}/providers/Microsoft.Network/privateDnsZones/{name}.hypershift.local");
    let net = "2023-11-01";
    let dns = "2024-06-01";

    // 1. A tag removed from the VNet hcp-workflow created.
    let original = get(&env, &arm(&vnet, net));
    assert!(original.get("tags").is_some(), "{original}");
    let mut untagged = original.clone();
    untagged["tags"] = json!({"owner": "someone"});
    put(&env, &vnet, net, &untagged);
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(bad, vec![("tags".into(), "drifted".into(), vnet.clone())]);
    put(&env, &vnet, net, &original);
    assert_ok(&env, name);

    // 2. A subscription allowed by hand on the Private Link Service.
    let original = get(&env, &arm(&pls, net));
    let mut widened = original.clone();
    widened["properties"]["visibility"]["subscriptions"]
        .as_array_mut()
        .unwrap()
        .push(json!("44444444-5555-6666-7777-888888888888"));
    put(&env, &pls, net, &widened);
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("pls.visibility".into(), "drifted".into(), pls.clone())]
    );
    put(&env, &pls, net, &original);
    assert_ok(&env, name);

    // 3. The private endpoint's A record re-pointed, then removed.
    let api_rec = format!("{zone}/A/api");
    let original = get(&env, &arm(&api_rec, dns));
    let mut elsewhere = original.clone();
    elsewhere["properties"]["aRecords"] = json!([{"ipv4Address": "10.9.9.9"}]);
    put(&env, &api_rec, dns, &elsewhere);
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("dns.a".into(), "drifted".into(), api_rec.clone())]
    );
    assert_eq!(env.sim.delete(&arm(&api_rec, dns)), 200);
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("exists".into(), "missing".into(), api_rec.clone())]
    );
    // The fix verify names for what is missing: repair-cluster recreates it under the same
    // name (and adopts the rest as it is).
    let fix = doc_fix(&env, name, &api_rec);
    assert!(fix.contains("start repair-cluster --config FILE"), "{fix}");
    // Pasted, the fix acts on this journal and this simulator, not on the default ones.
    let flagged = format!(
        "hcp-workflow --database {} --simulator {} start repair-cluster --config FILE",
        env.db,
        env.sim.base.trim_end_matches('/')
    );
    assert!(fix.contains(&flagged), "want {flagged:?} in {fix:?}");
    let (_, text, _) = env.cli(&["verify", &format!("cluster/{name}")], &[]);
    assert!(
        text.lines()
            .any(|l| l.contains("fix: ") && l.contains(&flagged)),
        "{text}"
    );
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        get(&env, &arm(&api_rec, dns))["properties"]["aRecords"],
        original["properties"]["aRecords"]
    );
    assert_ok(&env, name);

    // 4. A federated credential pointed at another issuer.
    let ids = env.sim.ids();
    let fic = ids
        .iter()
        .find(|i| i.contains("/federatedIdentityCredentials/"))
        .unwrap()
        .clone();
    let original = get(&env, &arm(&fic, "2024-11-30"));
    let mut other = original.clone();
    other["properties"]["issuer"] = json!("https://issuer.example.com/other");
    put(&env, &fic, "2024-11-30", &other);
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("identity.federation".into(), "drifted".into(), fic.clone())]
    );
    put(&env, &fic, "2024-11-30", &original);
    assert_ok(&env, name);

    // 5. A NodePool scaled by hand.
    merge_patch(
        &env,
        &format!("{NP}/{name}-workers"),
        &json!({"spec": {"replicas": 3}}),
    );
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![(
            "node-pool.ready".into(),
            "drifted".into(),
            format!("NodePool clusters/{name}-workers")
        )]
    );
    merge_patch(
        &env,
        &format!("{NP}/{name}-workers"),
        &json!({"spec": {"replicas": 2}}),
    );
    eventually_ok(&env, name);

    // 5b. Auto-repair turned on and a drain timeout set by hand: the pool is still Ready
    // with its replicas, but not as the file says.
    merge_patch(
        &env,
        &format!("{NP}/{name}-workers"),
        &json!({"spec": {"management": {"autoRepair": true}, "nodeDrainTimeout": "60s"}}),
    );
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![(
            "node-pool.settings".into(),
            "drifted".into(),
            format!("NodePool clusters/{name}-workers")
        )]
    );
    merge_patch(
        &env,
        &format!("{NP}/{name}-workers"),
        &json!({"spec": {"management": {"autoRepair": false}, "nodeDrainTimeout": null}}),
    );
    eventually_ok(&env, name);

    // 6. A load balancer nobody journaled, in the cluster's own resource group.
    let lb = format!("{rg}/providers/Microsoft.Network/loadBalancers/planted");
    put(
        &env,
        &lb,
        net,
        &json!({"location": "eastus", "sku": {"name": "Standard"}, "properties": {}}),
    );
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(bad, vec![("foreign".into(), "foreign".into(), lb.clone())]);
    assert!(matches!(env.sim.delete(&arm(&lb, net)), 200 | 202));
    eventually_ok(&env, name);

    // 7. The issuer's JWKS replaced by one without the cluster's signing key (anyone with
    //    the storage account's key can): Entra would refuse every workload's token.
    let account = ids
        .iter()
        .find(|i| i.contains("/storageAccounts/") && !i.contains("/blobServices/"))
        .unwrap()
        .clone();
    assert_eq!(
        env.sim.put_blob(
            &account,
            "oidc",
            "openid/v1/jwks",
            "application/json",
            br#"{"keys":[]}"#.to_vec()
        ),
        201
    );
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(
        (bad[0].0.as_str(), bad[0].1.as_str()),
        ("oidc.jwks", "drifted")
    );
    assert!(bad[0].2.ends_with("/oidc/openid/v1/jwks"), "{bad:?}");
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, name);

    // 8. An identity deleted and recreated under its name: a new principal, so every role
    //    assignment of the old one is stale (HyperShift's 403), and its federated
    //    credentials went with it.
    let identity = ids
        .iter()
        .find(|i| {
            i.to_ascii_lowercase().contains("/userassignedidentities/")
                && !i.contains("/federatedIdentityCredentials/")
        })
        .unwrap()
        .clone();
    let body = get(&env, &arm(&identity, "2024-11-30"));
    assert!(matches!(
        env.sim.delete(&arm(&identity, "2024-11-30")),
        200 | 204
    ));
    put(
        &env,
        &identity,
        "2024-11-30",
        &json!({"location": body["location"], "tags": body["tags"]}),
    );
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert!(!bad.is_empty());
    for (check, verdict, resource) in &bad {
        assert!(
            (check == "identity.assignment" && verdict == "drifted")
                || (check == "exists"
                    && verdict == "missing"
                    && resource.contains("/federatedIdentityCredentials/")),
            "{bad:?}"
        );
    }
    assert!(
        bad.iter().any(|(c, _, _)| c == "identity.assignment"),
        "{bad:?}"
    );
}

#[test]
fn after_delete_nothing_tagged_is_left_live_and_a_planted_leftover_is_reported() {
    let env = Env::new("verify-live", FAST);
    let (name, infra) = ("gone", "gone-g0n3x");
    let cfg = cluster_file(&env.dir, name, infra, "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // A live cluster is verify's, not --live's.
    let (code, _, err) = env.cli(
        &["inventory", "--orphans", "--live", "--cluster", name],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("verify cluster/{name}")), "{err}");
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    env.sim.clear_requests();
    let (code, out, err) = env.cli(
        &["--output", "json", "inventory", "--orphans", "--live"],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(items(&out, "LiveOrphans"), Vec::<Value>::new());
    // Read-only: only GETs (and token requests).
    assert!(
        env.sim.requests().iter().all(|r| r["method"] == "GET"
            || r["path"]
                .as_str()
                .is_some_and(|p| p.contains("/oauth2/v2.0/token"))),
        "inventory --live wrote something"
    );
    // Something left with the cluster's tags (as a crashed tool of old would leave it).
    let rg = format!("/subscriptions/{GUEST_SUB}/resourceGroups/{name}-leftover");
    put(
        &env,
        &rg,
        "2021-04-01",
        &json!({"location": "eastus", "tags": {"hcp-workflow.io/cluster": name, "hcp-workflow.io/infra-id": infra}}),
    );
    // Same name, another infra id (another cluster of that name): not this one's.
    put(
        &env,
        &format!("/subscriptions/{GUEST_SUB}/resourceGroups/{name}-other"),
        "2021-04-01",
        &json!({"location": "eastus", "tags": {"hcp-workflow.io/cluster": name, "hcp-workflow.io/infra-id": "gone-0th3r"}}),
    );
    let (code, out, err) = env.cli(
        &["--output", "json", "inventory", "--orphans", "--live"],
        &[],
    );
    assert_eq!(code, 3, "{out}{err}");
    let left = items(&out, "LiveOrphans");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(
        left[0]["id"].as_str().unwrap().to_ascii_lowercase(),
        rg.to_ascii_lowercase()
    );
    assert_eq!(left[0]["cluster"], name);
    let (code, out, _) = env.cli(&["inventory", "--orphans", "--live"], &[]);
    assert_eq!(code, 3);
    assert!(out.contains("still tagged as a deleted cluster's"), "{out}");
}

/// `start repair-cluster`: what verify finds missing or drifted is put back (and verify says
/// ok after); a resource that lost its tags is not adopted: the repair pauses, the operator
/// re-tags it, `retry` finishes. Refused over a changed file or a cluster never created.
#[test]
fn repair_puts_back_what_verify_finds_and_stops_at_what_may_not_be_ours() {
    let env = Env::new("repair", FAST);
    let (name, infra) = ("rpr", "rpr-r3pa1");
    let cfg = linked(&env, name, infra);
    // Nothing to repair before a create.
    let (code, _, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no applied configuration"), "{err}");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, name);

    let rg = format!("/subscriptions/{GUEST_SUB}/resourceGroups/{name}-{infra}");
    let pls = format!(
        "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-{infra}"
    );
    let zone = format!("{rg}/providers/Microsoft.Network/privateDnsZones/{name}.hypershift.local");
    let (net, dns, msi) = ("2023-11-01", "2024-06-01", "2024-11-30");
    // Several kinds of drift at once.
    let apps = format!("{zone}/A/*.apps");
    assert!(matches!(env.sim.delete(&arm(&apps, dns)), 200 | 204));
    let api = format!("{zone}/A/api");
    let mut rec = get(&env, &arm(&api, dns));
    rec["properties"]["aRecords"] = json!([{"ipv4Address": "10.9.9.9"}]);
    put(&env, &api, dns, &rec);
    let mut p = get(&env, &arm(&pls, net));
    p["properties"]["visibility"]["subscriptions"]
        .as_array_mut()
        .unwrap()
        .push(json!("44444444-5555-6666-7777-888888888888"));
    put(&env, &pls, net, &p);
    let ids = env.sim.ids();
    let identity = ids
        .iter()
        .find(|i| {
            i.to_ascii_lowercase().contains("/userassignedidentities/")
                && !i.contains("/federatedIdentityCredentials/")
        })
        .unwrap()
        .clone();
    let body = get(&env, &arm(&identity, msi));
    assert!(matches!(env.sim.delete(&arm(&identity, msi)), 200 | 204));
    put(
        &env,
        &identity,
        msi,
        &json!({"location": body["location"], "tags": body["tags"]}),
    );
    let other_fic = ids
        .iter()
        .find(|i| i.contains("/federatedIdentityCredentials/") && !i.starts_with(&identity))
        .unwrap()
        .clone();
    let mut f = get(&env, &arm(&other_fic, msi));
    f["properties"]["issuer"] = json!("https://issuer.example.com/other");
    put(&env, &other_fic, msi, &f);
    merge_patch(
        &env,
        &format!("{NP}/{name}-workers"),
        &json!({"spec": {"replicas": 3, "management": {"autoRepair": true}}}),
    );
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    let kinds: std::collections::BTreeSet<&str> = bad.iter().map(|b| b.0.as_str()).collect();
    for k in [
        "exists",
        "dns.a",
        "pls.visibility",
        "identity.assignment",
        "identity.federation",
        "node-pool.ready",
        "node-pool.settings",
    ] {
        assert!(kinds.contains(k), "{k} missing from {bad:?}");
    }

    // The plan is create's steps plus the private link's access; a changed file is
    // update-cluster's work.
    let c = cfg.to_string_lossy().to_string();
    let (code, plan, err) = env.cli(&["plan", "repair-cluster", "--config", &c], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(plan.contains("create-cluster.access.connections"), "{plan}");
    let infra_pool = "  - name: infra\n    replicas: 1\n";
    let bigger = "  - name: infra\n    replicas: 2\n";
    hcp_e2e_tests::cluster::edit_file(&cfg, infra_pool, bigger);
    let (code, _, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("update-cluster"), "{err}");
    hcp_e2e_tests::cluster::edit_file(&cfg, bigger, infra_pool);

    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Repair complete"), "{out}");
    eventually_ok(&env, name);
    let run = env.show(&hcp_e2e_tests::run_id(&out));
    let rewritten = run["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "updated")
        .count();
    assert!(
        rewritten >= 2,
        "the drifted record and credential are written again: {}",
        run["ledger"]
    );

    // A VNet that lost this cluster's tags may be someone else's now: not adopted.
    let vnet = format!(
        "/subscriptions/{GUEST_SUB}/resourceGroups/{name}-vnet-{infra}/providers/Microsoft.Network/virtualNetworks/{name}-{infra}"
    );
    let original = get(&env, &arm(&vnet, net));
    let mut untagged = original.clone();
    untagged["tags"] = json!({});
    put(&env, &vnet, net, &untagged);
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("‖ Repair paused after"), "{out}");
    let run_id = hcp_e2e_tests::run_id(&out);
    // The operator checks it is ours and puts the tags back (verify's fix), then retries.
    put(&env, &vnet, net, &original);
    let (code, _, err) = env.cli(&["retry", &run_id], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = env.cli(&["drive", &run_id], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Repair complete"), "{out}");
    assert_ok(&env, name);
}

/// Wait until a GET of `path` answers 404 (an asynchronous ARM delete finished).
fn wait_gone(env: &Env, path: &str) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let s = reqwest::blocking::Client::new()
            .get(format!("{}{path}", env.sim.base))
            .header("authorization", "Bearer test")
            .send()
            .unwrap()
            .status()
            .as_u16();
        if s == 404 {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "{path} still answers {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The rows that are not ok, once they are `want` (what was caused settles: an endpoint's
/// connection appears when Azure has made the endpoint).
fn eventually_bad(env: &Env, name: &str, want: impl Fn(&[(String, String, String)]) -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, bad) = verify(env, name);
        if want(&bad) {
            assert_eq!(code, 3, "{bad:?}");
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "not as expected: {bad:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

const NET: &str = "2023-11-01";
const DNS: &str = "2024-06-01";
/// A subscription the test clusters do not allow.
const STRANGER: &str = "44444444-5555-6666-7777-888888888888";
const MGMT_VNET: &str = "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/virtualNetworks/management-vnet";

/// `privateLink.managedBy: hypershift`: verify reads HyperShift's `AzurePrivateLinkService`
/// (its conditions, and the Private Link Service, endpoint, records and VNet links its
/// status names) and reports each drift as exactly one row: a condition HyperShift reports
/// False, a connection from a subscription that is not allowed (which neither HyperShift
/// nor repair-cluster removes: the fix says how), a VNet link of HyperShift's pointed
/// elsewhere (deleted, HyperShift's control-plane operator makes it again).
#[test]
fn verify_checks_hypershifts_private_link_through_its_azure_private_link_service() {
    let env = Env::with_sim_args("verify-hs", FAST, &["--private-platform", "azure"]);
    let (name, infra) = ("vhs", "vhs-h5v3r");
    let cfg = cluster_file(
        &env.dir,
        name,
        infra,
        "Private",
        &format!("allowedSubscriptions:\n  - {A}\nprivateLink:\n  managedBy: hypershift\n"),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let cr_path = format!(
        "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters-{name}/azureprivatelinkservices/private-router"
    );
    // The create ends once the endpoint and its zone are there; HyperShift's control-plane
    // operator goes on with the base-domain zone (which no ledger then holds: verify knows
    // it from the status, not as foreign).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while get(&env, &cr_path)["status"]["baseDomainDNSZoneID"].is_null() {
        assert!(std::time::Instant::now() < until, "no base-domain zone");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_ok_read_only(&env, name);
    // HyperShift's link is checked, not only the ledger's existence rows.
    let all = rows(&env, name);
    let count = |c: &str| all.iter().filter(|r| r["check"] == c).count();
    assert_eq!(
        count("pls.condition"),
        5,
        "one per HyperShift condition type"
    );
    for c in [
        "pls.status",
        "pls.visibility",
        "pls.auto-approval",
        "pls.connection",
    ] {
        assert_eq!(count(c), 1, "{c}");
    }
    // `api`, `*.apps` in `<name>.hypershift.local`; `api-<name>`, `oauth-<name>` in the
    // base-domain zone.
    assert_eq!(count("dns.a"), 4);
    // The infra zone's (ours), HyperShift's two.
    assert_eq!(count("dns.vnet-link"), 3);
    assert_eq!(count("secret.exists"), 4);

    let cr_row = format!("AzurePrivateLinkService clusters-{name}/private-router");
    let cr = get(&env, &cr_path);
    let pls = cr["status"]["privateLinkServiceID"]
        .as_str()
        .unwrap()
        .to_string();

    // 1. A condition HyperShift reports False (its operator, when it cannot find the
    //    internal load balancer), through the status subresource.
    let original = cr["status"]["conditions"].clone();
    let mut conditions = original.clone();
    for c in conditions.as_array_mut().unwrap() {
        if c["type"] == "AzureInternalLoadBalancerAvailable" {
            c["status"] = json!("False");
            c["reason"] = json!("AzureError");
            c["message"] = json!("no internal load balancer has frontend IP 10.224.0.4");
        }
    }
    merge_patch(
        &env,
        &format!("{cr_path}/status"),
        &json!({"status": {"conditions": conditions}}),
    );
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("pls.condition".into(), "drifted".into(), cr_row.clone())]
    );
    let fix = doc_fix(&env, name, &cr_row);
    assert!(
        fix.contains(&format!(
            "kubectl describe azureprivatelinkservice -n clusters-{name} private-router"
        )),
        "{fix}"
    );
    merge_patch(
        &env,
        &format!("{cr_path}/status"),
        &json!({"status": {"conditions": original}}),
    );
    assert_ok(&env, name);

    // 2. An endpoint in a subscription that is not allowed asks to connect (pending: not
    //    auto-approved). HyperShift's operator rejects connections only when its CR goes.
    let rg = format!("/subscriptions/{STRANGER}/resourceGroups/intruder");
    put(&env, &rg, "2021-04-01", &json!({"location": "eastus"}));
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/v");
    put(
        &env,
        &vnet,
        NET,
        &json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]},
            "subnets": [{"name": "s", "properties": {"addressPrefix": "10.9.0.0/24"}}]}}),
    );
    let pe = format!("{rg}/providers/Microsoft.Network/privateEndpoints/intruder-pe");
    let stranger_pe = json!({"location": "eastus", "properties": {"subnet": {"id": format!("{vnet}/subnets/s")},
        "manualPrivateLinkServiceConnections": [{"name": "c", "properties": {"privateLinkServiceId": pls}}]}});
    for _ in 0..50 {
        // Its subnet is usable once the VNet is made.
        if env.sim.put(&arm(&pe, NET), &stranger_pe).0 < 300 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let prefix = format!("{pls}/privateEndpointConnections/");
    eventually_bad(&env, name, |bad| {
        bad.len() == 1
            && bad[0].0 == "pls.connection"
            && bad[0].1 == "foreign"
            && bad[0].2.starts_with(&prefix)
    });
    let (_, bad) = verify(&env, name);
    let conn = bad[0].2.clone();
    let fix = doc_fix(&env, name, &conn);
    assert!(
        fix.contains(&format!(
            "az network private-endpoint-connection reject --id {conn}"
        )),
        "{fix}"
    );
    // The fix: repair-cluster rejects it, then removes it, on HyperShift's PLS too.
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let after = get(&env, &arm(&pls, NET));
    assert!(
        after["properties"]["privateEndpointConnections"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| !c["id"].as_str().unwrap_or("").eq_ignore_ascii_case(&conn)),
        "the foreign connection is gone: {after}"
    );
    eventually_ok(&env, name);

    // 3. HyperShift's link of `<name>.hypershift.local` pointed at another network (the
    //    simulator takes the PUT; in Azure it would be deleted and made again under its
    //    name). Deleted, as the fix says, HyperShift's control-plane operator makes it again.
    let zone = cr["status"]["privateDNSZoneID"].as_str().unwrap();
    let link = format!("{zone}/virtualNetworkLinks/private-router-vnet-link");
    let mut elsewhere = get(&env, &arm(&link, DNS));
    elsewhere["properties"]["virtualNetwork"]["id"] = json!(MGMT_VNET);
    put(&env, &link, DNS, &elsewhere);
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("dns.vnet-link".into(), "drifted".into(), link.clone())]
    );
    assert!(doc_fix(&env, name, &link).contains("az network private-dns link vnet delete"));
    assert!(matches!(env.sim.delete(&arm(&link, DNS)), 200 | 202 | 204));
    eventually_ok(&env, name);
}

/// The Secrets the HostedCluster reads: each one deleted is `secret.exists` missing (and
/// nothing else). The pull secret comes from the file: repair-cluster writes it again. A
/// generated key does not: the fix names HyperShift's copy in the control-plane namespace
/// (repair would make a new key, which cannot decrypt what etcd holds).
#[test]
fn verify_reports_a_deleted_secret_the_hosted_cluster_reads() {
    let env = Env::new("verify-secrets", FAST);
    let (name, infra) = ("vsec", "vsec-s3cr7");
    let cfg = cluster_file(&env.dir, name, infra, "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok_read_only(&env, name);
    let checked: Vec<String> = rows(&env, name)
        .iter()
        .filter(|r| r["check"] == "secret.exists")
        .map(|r| r["resource"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        checked,
        [
            "pull-secret",
            "ssh-key",
            "sa-token-issuer-key",
            "etcd-encryption-key"
        ]
        .map(|s| format!("Secret clusters/{name}-{s}"))
    );

    let secrets = "/api/v1/namespaces/clusters/secrets";
    let pull = format!("{name}-pull-secret");
    let etcd = format!("{name}-etcd-encryption-key");
    let kept = get(&env, &format!("{secrets}/{etcd}"));
    assert_eq!(env.sim.delete(&format!("{secrets}/{pull}")), 200);
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![(
            "secret.exists".into(),
            "missing".into(),
            format!("Secret clusters/{pull}")
        )]
    );
    assert!(doc_fix(&env, name, &format!("Secret clusters/{pull}")).contains("repair-cluster"));

    assert_eq!(env.sim.delete(&format!("{secrets}/{etcd}")), 200);
    let (_, bad) = verify(&env, name);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert_eq!(
        bad[1],
        (
            "secret.exists".into(),
            "missing".into(),
            format!("Secret clusters/{etcd}")
        )
    );
    let fix = doc_fix(&env, name, &format!("Secret clusters/{etcd}"));
    assert!(
        fix.contains(&format!("kubectl get secret -n clusters-{name} {etcd}"))
            && fix.contains("not repair-cluster"),
        "{fix}"
    );
    // The operator copies the key back (here: as it was), labels and all.
    let (s, b) = env.sim.post(
        secrets,
        &json!({"apiVersion": "v1", "kind": "Secret", "type": kept["type"],
            "metadata": {"name": etcd, "namespace": "clusters", "labels": kept["metadata"]["labels"]},
            "data": kept["data"]}),
    );
    assert_eq!(s, 201, "{b}");
    // repair-cluster writes the pull secret again from the file.
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, name);
    assert_eq!(
        get(&env, &format!("{secrets}/{etcd}"))["data"],
        kept["data"],
        "the etcd key is the one the cluster had"
    );
}

/// The private-link zone's VNet link (hcp-workflow's own) made again under its name but
/// linked to another network: `dns.vnet-link` drifted. repair-cluster keeps an existing link
/// of ours as it is, so verify still says so after it; as the fix says, the link is
/// deleted (`dns.vnet-link` missing, not a second `exists` row) and repair makes it again,
/// linked to the guest VNet.
#[test]
fn verify_reports_a_vnet_link_repointed_or_deleted_and_repair_makes_it_again() {
    let env = Env::new("verify-links", FAST);
    let (name, infra) = ("vlnk", "vlnk-l1nk5");
    let cfg = linked(&env, name, infra);
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok_read_only(&env, name);
    let all = rows(&env, name);
    let links: Vec<&str> = all
        .iter()
        .filter(|r| r["check"] == "dns.vnet-link")
        .map(|r| r["resource"].as_str().unwrap())
        .collect();
    assert_eq!(
        links.len(),
        4,
        "the infra zone's, the private-link zone's, and the api and oauth hostnames' zones'"
    );
    let link = links
        .iter()
        .find(|l| l.contains(".hypershift.local/virtualNetworkLinks/"))
        .unwrap()
        .to_string();
    let original = get(&env, &arm(&link, DNS));
    let guest_vnet = original["properties"]["virtualNetwork"]["id"].clone();

    // Made again under its name (with our tags), linked elsewhere.
    assert!(matches!(env.sim.delete(&arm(&link, DNS)), 200 | 202 | 204));
    wait_gone(&env, &arm(&link, DNS));
    put(
        &env,
        &link,
        DNS,
        &json!({"location": "global", "tags": original["tags"],
            "properties": {"virtualNetwork": {"id": MGMT_VNET}, "registrationEnabled": false}}),
    );
    let drifted = vec![("dns.vnet-link".into(), "drifted".into(), link.clone())];
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(bad, drifted);
    let fix = doc_fix(&env, name, &link);
    assert!(
        fix.contains(&format!(
            "az network private-dns link vnet delete --ids {link}"
        )) && fix.contains("repair-cluster"),
        "{fix}"
    );
    // repair-cluster alone adopts the link as it is.
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(verify(&env, name).1, drifted);

    // The fix: delete it, then repair.
    assert!(matches!(env.sim.delete(&arm(&link, DNS)), 200 | 202 | 204));
    wait_gone(&env, &arm(&link, DNS));
    let (code, bad) = verify(&env, name);
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("dns.vnet-link".into(), "missing".into(), link.clone())]
    );
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, name);
    assert_eq!(
        get(&env, &arm(&link, DNS))["properties"]["virtualNetwork"]["id"],
        guest_vnet
    );
}

/// The drift example of docs/guide/drift.md on the unchanged `examples/cluster.yaml` (`privateLink.managedBy:
/// auto`, the default): `hcp-workflow verify cluster/demo` exits 0 on the fresh cluster, a
/// subscription allowed by hand on the Private Link Service makes it exit 3 with exactly a
/// `pls.visibility` row, and `start repair-cluster --config examples/cluster.yaml` puts it
/// back. verify chooses the private-link checks from what the create recorded (its
/// `private-link` label), not from the file's `auto`, which used to skip all of them.
#[test]
fn readme_drift_example_on_the_unchanged_example_file_is_found_and_repaired() {
    let env = Env::new("verify-readme", FAST);
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let run = hcp_e2e_tests::run_id(&out);
    assert_eq!(env.show(&run)["labels"]["private-link"], "hcp-workflow");
    assert_ok_read_only(&env, "demo");
    let all = rows(&env, "demo");
    let checks = |c: &str| all.iter().filter(|r| r["check"] == c).count();
    for c in [
        "pls.visibility",
        "pls.auto-approval",
        "pls.connection",
        "dns.a",
    ] {
        assert!(checks(c) >= 1, "no {c} row: {all:?}");
    }
    let pls = all.iter().find(|r| r["check"] == "pls.visibility").unwrap()["resource"]
        .as_str()
        .unwrap()
        .to_string();
    let net = "2023-11-01";
    let original = get(&env, &arm(&pls, net));
    let mut widened = original.clone();
    widened["properties"]["visibility"]["subscriptions"]
        .as_array_mut()
        .unwrap()
        .push(json!(STRANGER));
    put(&env, &pls, net, &widened);
    let (code, bad) = verify(&env, "demo");
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("pls.visibility".into(), "drifted".into(), pls.clone())]
    );
    let (code, out, err) = env.start("repair-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, "demo");
    assert_eq!(
        get(&env, &arm(&pls, net))["properties"]["visibility"],
        original["properties"]["visibility"]
    );
}

/// A data-plane request to the simulator's Microsoft Graph or Key Vault, with a token from
/// its Entra for `scope`, as the client hcp-workflow signs in as under the simulator (the
/// owner of the applications it made): (status, body).
fn data_plane(
    env: &Env,
    method: reqwest::Method,
    host: &str,
    path: &str,
    scope: &str,
) -> (u16, Value) {
    let http = reqwest::blocking::Client::new();
    let tok: Value = http
        .post(format!(
            "{}/{}/oauth2/v2.0/token",
            env.sim.base,
            hcp_e2e_tests::cluster::TENANT
        ))
        .header("x-ms-original-host", "login.microsoftonline.com")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=client_credentials&client_id=00000000-0000-0000-0000-00000000c11e&client_secret=test&scope={}",
            scope.replace(':', "%3A").replace('/', "%2F")
        ))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let token = tok["access_token"].as_str().unwrap().to_string();
    let r = http
        .request(method, format!("{}{path}", env.sim.base))
        .header("x-ms-original-host", host)
        .bearer_auth(token)
        .send()
        .unwrap();
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

/// `hcp-workflow start create-cluster --simulate --config examples/aro-hcp.yaml`, then
/// `hcp-workflow verify cluster/aro`: exit 0. It used to report 20 `identity.assignment`
/// drifts on the untouched cluster (the control-plane applications' service principals
/// were unknown to it), which `repair-cluster` could not clear and `--verify-every`
/// alerted on forever. It also checks the ledger's Entra and Key Vault objects: a
/// credentials secret deleted in the vault is `missing`, with the fix that recovers it;
/// a service principal deleted in Entra is `missing`, its role assignments name a
/// principal that is gone, and repair-cluster puts both back.
#[test]
fn verify_on_a_fresh_aro_hcp_example_is_clean_and_checks_entra_and_key_vault() {
    let env = hcp_e2e_tests::cluster::aro_env("verify-aro", FAST);
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/aro-hcp.yaml");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok_read_only(&env, "aro");
    let all = rows(&env, "aro");
    let of = |needle: &str| {
        all.iter()
            .filter(|r| r["resource"].as_str().unwrap_or_default().contains(needle))
            .count()
    };
    assert_eq!(of("servicePrincipals(appId="), 8, "{all:#?}");
    assert_eq!(of("/keyCredentials/"), 8, "{all:#?}");
    // Each certificate and credentials secret: exists and tags.
    assert_eq!(of(".vault.azure.net/certificates/"), 16, "{all:#?}");
    assert_eq!(of(".vault.azure.net/secrets/"), 16, "{all:#?}");
    let assignments = all
        .iter()
        .filter(|r| r["check"] == "identity.assignment")
        .count();
    assert!(assignments >= 20, "{assignments} assignment rows: {all:#?}");

    // A credentials secret deleted in the vault.
    let vault_host = "aro-hcp-kv-demo.vault.azure.net";
    let (s, b) = data_plane(
        &env,
        reqwest::Method::DELETE,
        vault_host,
        "/secrets/aro-cpo-json?api-version=7.5",
        "https://vault.azure.net/.default",
    );
    assert_eq!(s, 200, "{b}");
    let (code, bad) = verify(&env, "aro");
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![(
            "exists".into(),
            "missing".into(),
            format!("https://{vault_host}/secrets/aro-cpo-json")
        )]
    );
    // Its fix, pasted: Key Vault keeps a deleted secret's name in its soft-delete bin
    // (a write of that name is refused until then), so it is recovered, not remade.
    let fix = doc_fix(
        &env,
        "aro",
        &format!("https://{vault_host}/secrets/aro-cpo-json"),
    );
    assert!(
        fix.contains("az keyvault secret recover --vault-name aro-hcp-kv-demo --name aro-cpo-json"),
        "{fix}"
    );
    let (s, b) = data_plane(
        &env,
        reqwest::Method::POST,
        vault_host,
        "/deletedsecrets/aro-cpo-json/recover?api-version=7.5",
        "https://vault.azure.net/.default",
    );
    assert_eq!(s, 200, "{b}");
    eventually_ok(&env, "aro");

    // A service principal deleted in Entra: its role assignments now name a principal
    // that is gone.
    let sp = all
        .iter()
        .filter_map(|r| r["resource"].as_str())
        .find(|r| r.starts_with("servicePrincipals(appId="))
        .unwrap()
        .to_string();
    let (s, b) = data_plane(
        &env,
        reqwest::Method::DELETE,
        "graph.microsoft.com",
        &format!("/v1.0/{sp}"),
        "https://graph.microsoft.com/.default",
    );
    assert_eq!(s, 204, "{b}");
    let (code, bad) = verify(&env, "aro");
    assert_eq!(code, 3);
    assert!(
        bad.contains(&("exists".into(), "missing".into(), sp.clone())),
        "{bad:?}"
    );
    assert!(
        bad.iter()
            .any(|(c, v, _)| c == "identity.assignment" && v == "drifted"),
        "{bad:?}"
    );
    assert!(
        bad.iter()
            .all(|(c, _, r)| r == &sp || c == "identity.assignment"),
        "{bad:?}"
    );
    let (code, out, err) = env.start("repair-cluster", &cfg, &["--yes"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, "aro");
}

/// `hcp-workflow start create-cluster --simulate --config examples/enterprise.yaml`, then
/// `hcp-workflow verify cluster/corp`: exit 0 on the untouched cluster; docs/guide/drift.md's
/// example (a subscription allowed by hand on its Private Link Service) exits 3 with the
/// `pls.visibility` row, and repair-cluster puts it back.
#[test]
fn verify_on_a_fresh_enterprise_example_is_clean_and_finds_the_readme_drift() {
    let env = Env::new("verify-enterprise", FAST);
    let cfg = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/enterprise.yaml");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok_read_only(&env, "corp");
    let all = rows(&env, "corp");
    let pls = all
        .iter()
        .find(|r| r["check"] == "pls.visibility")
        .unwrap_or_else(|| panic!("no pls.visibility row: {all:#?}"))["resource"]
        .as_str()
        .unwrap()
        .to_string();
    let original = get(&env, &arm(&pls, NET));
    let mut widened = original.clone();
    widened["properties"]["visibility"]["subscriptions"]
        .as_array_mut()
        .unwrap()
        .push(json!(STRANGER));
    put(&env, &pls, NET, &widened);
    let (code, bad) = verify(&env, "corp");
    assert_eq!(code, 3);
    assert_eq!(
        bad,
        vec![("pls.visibility".into(), "drifted".into(), pls.clone())]
    );
    let (code, out, err) = env.start("repair-cluster", &cfg, &["--yes"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, "corp");
}

/// `hcp-workflow verify cluster/NAME` while Azure throttles or fails reads: a throttled
/// GET (429 with `Retry-After`) is tried again, not turned into a verdict (a throttled read
/// of the private endpoint used to make its network interface `foreign`); a read that
/// keeps failing is `unknown` (exit 2), and a role assignment whose principal matches none
/// of the identities read is then `unknown` too, never a stale-principal drift.
#[test]
fn verify_retries_a_throttled_read_and_never_calls_an_unread_principal_stale() {
    let env = Env::new("verify-throttled", FAST);
    let cfg = linked(&env, "thr", "thr-t8r0t");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_ok(&env, "thr");
    for rt in [
        "Microsoft.Network/privateEndpoints",
        "Microsoft.ManagedIdentity/userAssignedIdentities",
    ] {
        env.sim.fault(json!({
            "method": "GET",
            "resource_type": rt,
            "status": 429,
            "retry_after": 1,
            "times": 2,
        }));
    }
    let (code, bad) = verify(&env, "thr");
    assert_eq!((code, bad), (0, vec![]));
    env.sim.clear_faults();

    // One identity's reads keep failing (each is tried five times over ~7 s; failing them
    // all would only multiply that).
    env.sim.fault(json!({
        "method": "GET",
        "resource_type": "Microsoft.ManagedIdentity/userAssignedIdentities",
        "path": "*disk*",
        "status": 503,
        "times": 1000,
    }));
    let (code, out, err) = env.cli(&["--output", "json", "verify", "cluster/thr"], &[]);
    assert_eq!(code, 2, "{out}{err}");
    let all = document(&out, "VerifyReport")["items"]
        .as_array()
        .unwrap()
        .clone();
    let verdicts = |c: &str| -> Vec<String> {
        all.iter()
            .filter(|r| r["check"] == c)
            .map(|r| r["verdict"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        verdicts("exists").contains(&"unknown".to_string()),
        "{all:#?}"
    );
    let assignments = verdicts("identity.assignment");
    assert!(
        assignments.iter().any(|v| v == "unknown"),
        "{assignments:?}"
    );
    assert!(
        !all.iter().any(|r| r["verdict"] == "drifted"),
        "a failed read made a drift: {all:#?}"
    );
    env.sim.clear_faults();
    assert_ok(&env, "thr");
}
