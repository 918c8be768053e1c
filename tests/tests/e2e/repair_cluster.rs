//! Repair-cluster passes the suite every workflow has, end to end with real
//! processes against `simulator serve` (a Private cluster with hcp-workflow's own private
//! link, so the `access` stage and its pivot are in the DAG):
//! - every step succeeds when repeated: a second repair of a healthy cluster changes
//!   nothing (the same resources, none deleted or created again, the same contents; its
//!   only writes are no-op re-applies, named exactly);
//! - a failure at each step pauses the run (the default), and `cancel` unwinds it without
//!   deleting anything the create made: every step fails once, one cluster per group of
//!   stages (each in its own subscription: ARM throttles reads per subscription), the
//!   steps that fail together in one run are cancelled together;
//! - every step survives a worker SIGKILLed at every boundary, on a drifted cluster: it
//!   ends repaired, with nothing created twice and nothing leaked;
//! - unwinding twice is harmless: a worker SIGKILLed at every boundary of a cancelled
//!   repair's unwind; the unwind removes exactly what the repair recreated and puts back
//!   what it changed, and a second `cancel` is refused.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{
    Env, GUEST_SUB, Sim, cluster_file, edit_file, get_at, request_lines, run,
};
use hcp_e2e_tests::crash::{crash_through, created_twice, targets};
use hcp_e2e_tests::{Proc, document, run_id, says_run};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const FAST: f64 = 0.002;
const A: &str = "22222222-3333-4444-5555-666666666666";
const FOREIGN: &str = "44444444-5555-6666-7777-888888888888";
const MGMT: &str =
    "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const SECRETS: &str = "/api/v1/namespaces/clusters/secrets";
const NET: &str = "2023-11-01";
const DNS: &str = "2024-06-01";
const MSI: &str = "2024-11-30";
/// The label a Kubernetes object's ownership moves to each run that adopts it.
const RUN_LABEL: &str = "hcp-workflow.io/run";

/// One cluster under test: its file, journal and subscription.
#[derive(Debug)]
struct Cluster {
    dir: PathBuf,
    db: String,
    base: String,
    name: String,
    infra: String,
    sub: String,
    cfg: PathBuf,
    /// `HCP_ARM_SHARE` of its commands (`None`: the default share).
    arm_share: Option<&'static str>,
}

impl Cluster {
    /// Write the file of a Private cluster with hcp-workflow's private link (subscription A
    /// allowed) in subscription `sub`, and create it.
    fn create(dir: &Path, db: &str, base: &str, name: &str, infra: &str, sub: &str) -> Cluster {
        let cfg = cluster_file(
            dir,
            name,
            infra,
            "Private",
            &format!("allowedSubscriptions:\n  - {A}\nprivateLink:\n  managedBy: hcp-workflow\n"),
        );
        if sub != GUEST_SUB {
            edit_file(
                &cfg,
                &format!("subscription: {GUEST_SUB}"),
                &format!("subscription: {sub}"),
            );
        }
        let c = Cluster {
            dir: dir.to_path_buf(),
            db: db.to_string(),
            base: base.to_string(),
            name: name.to_string(),
            infra: infra.to_string(),
            sub: sub.to_string(),
            cfg,
            arm_share: None,
        };
        let file = c.cfg.to_string_lossy().to_string();
        let (code, out, err) = c.cli(&["start", "create-cluster", "--config", &file], &[]);
        assert_eq!(code, 0, "create {name}: {out}{err}");
        c
    }

    /// `hcp-workflow --database … --simulator … rest…`.
    fn cli(&self, rest: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
        let mut a = vec![
            "--database",
            self.db.as_str(),
            "--simulator",
            self.base.as_str(),
        ];
        a.extend_from_slice(rest);
        let mut envs = envs.to_vec();
        if let Some(share) = self.arm_share {
            envs.push(("HCP_ARM_SHARE", share));
        }
        run(&self.dir, &a, &envs)
    }

    /// `start repair-cluster --config <file> extra…`.
    fn repair(&self, extra: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
        let c = self.cfg.to_string_lossy().to_string();
        // No terminal here: a repair with pivots needs --yes (tested in update_confirmation.rs).
        let mut a = vec!["start", "repair-cluster", "--config", c.as_str(), "--yes"];
        a.extend_from_slice(extra);
        self.cli(&a, envs)
    }

    /// `--output json show <run>`.
    fn show(&self, run: &str) -> Value {
        let (code, out, err) = self.cli(&["--output", "json", "show", run], &[]);
        assert_eq!(code, 0, "show {run}: {err}");
        document(&out, "Run")
    }

    /// `verify cluster/<name>`: exit code and its text.
    fn verify(&self) -> (i32, String) {
        let (code, out, err) = self.cli(&["verify", &format!("cluster/{}", self.name)], &[]);
        (code, format!("{out}{err}"))
    }

    /// verify says ok, once what was put back has settled (a pool scaling down).
    fn eventually_ok(&self) {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let (code, out) = self.verify();
            if code == 0 {
                return;
            }
            assert!(Instant::now() < until, "verify: exit {code}\n{out}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn rg(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}-{}",
            self.sub, self.name, self.infra
        )
    }

    fn pls(&self) -> String {
        format!(
            "{MGMT}/providers/Microsoft.Network/privateLinkServices/pls-{}",
            self.infra
        )
    }

    /// The private endpoint's zone.
    fn pe_zone(&self) -> String {
        format!(
            "{}/providers/Microsoft.Network/privateDnsZones/{}.hypershift.local",
            self.rg(),
            self.name
        )
    }

    /// Whether the simulator's inventory entry `id` is this cluster's (its subscription, its
    /// infra id in the management subscription, its objects on the management cluster).
    fn owns(&self, id: &str) -> bool {
        let n = &self.name;
        id.starts_with(&format!("/subscriptions/{}/", self.sub))
            || id.contains(&self.infra)
            || id.contains(&format!("/clusters-{n}"))
            || id.starts_with(&format!("{SECRETS}/{n}-"))
            || id.starts_with(&format!("{NP}/{n}-"))
            || id == format!("{HC}/{n}")
    }

    /// Everything of this cluster the simulator holds, each resource with its creation
    /// sequence number (a delete and re-create changes it) and its tags or labels — but for
    /// the Kubernetes `hcp-workflow.io/run` label, which moves to every run that adopts
    /// the object (`claim` in activities' cluster steps).
    fn holdings(&self) -> BTreeMap<String, Value> {
        get_at(&self.base, "/_sim/inventory")
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| {
                let id = i["id"].as_str()?.to_string();
                if !self.owns(&id) {
                    return None;
                }
                let mut tags = i["tags"].clone();
                if !id.starts_with("/subscriptions/")
                    && let Some(t) = tags.as_object_mut()
                {
                    t.remove(RUN_LABEL);
                }
                Some((
                    id,
                    json!({"type": i["type"], "seq": i["created_seq"], "tags": tags}),
                ))
            })
            .collect()
    }

    /// What the cluster's objects say: the HostedCluster's and NodePools' specs and
    /// generations (a write that changes a spec bumps it), the Secrets' data, the Private
    /// Link Service's visibility and auto-approval.
    fn contents(&self) -> Value {
        let n = &self.name;
        let obj = |p: &str| {
            let v = get_at(&self.base, p);
            json!({"spec": v["spec"], "generation": v["metadata"]["generation"], "data": v["data"]})
        };
        let pls = arm_get(&self.base, &self.pls(), NET);
        let secrets = [
            "sa-token-issuer-key",
            "pull-secret",
            "ssh-key",
            "etcd-encryption-key",
        ]
        .map(|s| obj(&format!("{SECRETS}/{n}-{s}")));
        json!({
            "hc": obj(&format!("{HC}/{n}")),
            "workers": obj(&format!("{NP}/{n}-workers")),
            "infra": obj(&format!("{NP}/{n}-infra")),
            "secrets": secrets,
            "pls": [pls["properties"]["visibility"], pls["properties"]["autoApproval"]],
        })
    }
}

/// An ARM GET on the simulator (throttled answers are tried again).
fn arm_get(base: &str, id: &str, api: &str) -> Value {
    for _ in 0..100 {
        let r = reqwest::blocking::Client::new()
            .get(format!("{base}{id}?api-version={api}"))
            .header("authorization", "Bearer test")
            .send()
            .unwrap();
        match r.status().as_u16() {
            429 => std::thread::sleep(Duration::from_millis(200)),
            404 => return Value::Null,
            _ => return r.json().unwrap(),
        }
    }
    panic!("GET {id}: throttled for 20 s");
}

/// An ARM PUT on the simulator, as an operator would in the portal (throttled answers are
/// tried again).
fn arm_put(sim: &Sim, id: &str, api: &str, body: &Value) {
    for _ in 0..100 {
        let (s, b) = sim.put(&format!("{id}?api-version={api}"), body);
        if s == 429 {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        assert!((200..300).contains(&s), "PUT {id}: {s} {b}");
        return;
    }
    panic!("PUT {id}: throttled for 20 s");
}

/// An ARM DELETE on the simulator, waiting until the resource is gone.
fn arm_delete(sim: &Sim, id: &str, api: &str) {
    let s = sim.delete(&format!("{id}?api-version={api}"));
    assert!(matches!(s, 200 | 202 | 204), "DELETE {id}: {s}");
    for _ in 0..500 {
        if !sim.ids().contains(id) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{id} never went away");
}

/// The steps of a run that are `failed`.
fn failed_steps(run: &Value) -> Vec<String> {
    run["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["steps"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["state"] == "failed")
        .filter_map(|s| s["name"].as_str().map(str::to_string))
        .collect()
}

/// The run's ledger records whose action is `action`.
fn ledger(run: &Value, action: &str) -> Vec<String> {
    run["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == action)
        .map(|r| r["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The requests that are not reads: every method but GET, without the token requests.
fn writes(reqs: &[Value]) -> Vec<(String, String, u16)> {
    request_lines(reqs)
        .into_iter()
        .filter(|(m, p, _)| m != "GET" && !p.contains("/oauth2/v2.0/token"))
        .map(|(m, p, s)| (m, p.split('?').next().unwrap_or_default().to_string(), s))
        .collect()
}

#[test]
fn a_second_repair_of_a_healthy_cluster_changes_nothing() {
    let env = Env::new("repair-twice", FAST);
    let c = Cluster::create(
        &env.dir,
        &env.db,
        &env.sim.base,
        "twice",
        "twice-tw1c3",
        GUEST_SUB,
    );
    let (held, contents) = (c.holdings(), c.contents());
    let account = env
        .sim
        .ids()
        .into_iter()
        .find(|i| i.contains("/storageAccounts/") && !i.contains("/blobServices/"))
        .unwrap();
    let account = account.rsplit('/').next().unwrap().to_string();
    let blob = |b: &str| {
        reqwest::blocking::Client::new()
            .get(format!("{}/_blob/{account}/oidc/{b}", env.sim.base))
            .send()
            .unwrap()
            .bytes()
            .unwrap()
    };
    let docs = [".well-known/openid-configuration", "openid/v1/jwks"];
    let published = docs.map(blob);

    let mut runs = Vec::new();
    let mut sent = Vec::new();
    for _ in 0..2 {
        env.sim.clear_requests();
        let (code, out, err) = c.repair(&[], &[]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("✓ Repair complete"), "{out}");
        runs.push(run_id(&out));
        sent.push(
            writes(&env.sim.requests())
                .into_iter()
                .collect::<BTreeSet<_>>(),
        );
        // The same resources (none deleted and created again), tags and contents.
        assert_eq!(c.holdings(), held);
        assert_eq!(c.contents(), contents);
        assert_eq!(docs.map(blob), published, "the OIDC documents changed");
    }
    // The second run writes to what the first wrote to, the same way…
    assert_eq!(sent[0], sent[1]);
    // …and every one of them is a no-op: nothing is deleted or created in Azure or on the
    // management cluster; Azure gets no write at all but the storage account's listKeys
    // (to upload the OIDC documents again, with the same bytes: above); the management
    // cluster gets server-side applies (and relabels) of the cluster's own objects, whose
    // specs, data and generations are unchanged (above), and SelfSubject(Access)Reviews.
    let n = "twice";
    let ours: BTreeSet<String> = [
        format!("{SECRETS}/{n}-sa-token-issuer-key"),
        format!("{SECRETS}/{n}-pull-secret"),
        format!("{SECRETS}/{n}-ssh-key"),
        format!("{SECRETS}/{n}-etcd-encryption-key"),
        format!("{HC}/{n}"),
        format!("{NP}/{n}-workers"),
        format!("{NP}/{n}-infra"),
    ]
    .into();
    let mut patched = BTreeSet::new();
    for (m, p, s) in &sent[1] {
        let arm = p.starts_with("/subscriptions/");
        let blobs = docs.iter().any(|d| *p == format!("/oidc/{d}"));
        let review = m == "POST"
            && (p.ends_with("/selfsubjectaccessreviews") || p.ends_with("/selfsubjectreviews"));
        let list_keys = m == "POST" && arm && p.ends_with("/listKeys");
        let apply = m == "PATCH" && ours.contains(p);
        assert!(
            (blobs && m == "PUT") || review || list_keys || apply,
            "the second repair wrote {m} {p} ({s})"
        );
        if apply {
            patched.insert(p.clone());
        }
    }
    assert_eq!(patched, ours);
    // Every object is this cluster's create's, adopted by the last repair.
    let create = c.cli(&["--output", "json", "list"], &[]).1;
    let create: Vec<Value> = hcp_e2e_tests::items(&create, "RunList");
    let create_id = create
        .iter()
        .find(|r| r["workflow"] == "create-cluster")
        .unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    for p in &ours {
        let labels = &get_at(&env.sim.base, p)["metadata"]["labels"];
        assert_eq!(
            labels["hcp-workflow.io/created-by-run"],
            create_id.as_str(),
            "{p}"
        );
        assert_eq!(labels[RUN_LABEL], runs[1].as_str(), "{p}");
    }
    // The ledger says so: everything adopted, nothing created or deleted.
    let shown = c.show(&runs[1]);
    assert_eq!(ledger(&shown, "created"), Vec::<String>::new());
    assert_eq!(ledger(&shown, "deleted"), Vec::<String>::new());
    assert!(ledger(&shown, "adopted").len() > 60, "{}", shown["ledger"]);
    let (code, out) = c.verify();
    assert_eq!(code, 0, "{out}");
}

/// Every step fails once, and the run pauses; `cancel` unwinds it, and nothing of the
/// cluster is deleted, re-created, retagged or changed. The steps are split by stage over
/// three clusters (one subscription each), tried in parallel; on each cluster a repair is
/// started with a failure injected at every one of its steps that has not failed yet, and
/// the steps that fail together (parallel branches) are cancelled together.
#[test]
fn a_failure_at_each_step_pauses_and_cancel_unwinds_without_deleting_the_cluster() {
    let env = Env::new("repair-each", FAST);
    let sub_of = |k: usize| format!("{k:08}-3333-4444-5555-666666666666");
    // A failure past the network stage comes after ~50 steps (~60 ARM reads): those are
    // spread over two clusters.
    let groups: [&[&str]; 3] = [
        &["preflight", "identities", "oidc", "network"],
        &["control-plane", "pls", "pe-dns"],
        &["access", "available", "nodepools", "rollout"],
    ];
    for k in 0..groups.len() {
        env.sim.seed_public_zone(&sub_of(k), "hcp.example.com");
    }
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let every_step = std::sync::Mutex::new(BTreeSet::<String>::new());
    let failed_once = std::sync::Mutex::new(BTreeSet::<String>::new());
    let (dir, base) = (env.dir.clone(), env.sim.base.clone());
    std::thread::scope(|scope| {
        for (k, stages) in groups.iter().enumerate() {
            let (dir, base) = (&dir, &base);
            let (failures, every_step, failed_once) = (&failures, &every_step, &failed_once);
            let sub = sub_of(k);
            scope.spawn(move || {
                let name = format!("each{k}");
                let db = format!("sqlite://{}", dir.join(format!("{name}.db")).display());
                let mut c =
                    Cluster::create(dir, &db, base, &name, &format!("{name}-e4ch{k}"), &sub);
                // The subscription is this cluster's alone: its runs may use all of ARM's
                // read budget (the default leaves half to the rest of the subscription).
                c.arm_share = Some("1");
                let file = c.cfg.to_string_lossy().to_string();
                let (code, out, err) = c.cli(
                    &[
                        "--output",
                        "json",
                        "plan",
                        "repair-cluster",
                        "--config",
                        &file,
                    ],
                    &[],
                );
                assert_eq!(code, 0, "{err}");
                let plan = document(&out, "Plan");
                let steps: Vec<String> = plan["steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|s| stages.contains(&s["stage"].as_str().unwrap()))
                    .map(|s| s["node"].as_str().unwrap().to_string())
                    .collect();
                every_step.lock().unwrap().extend(
                    plan["steps"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s["node"].as_str().unwrap().to_string()),
                );
                let problems = fail_each(&c, &steps);
                failed_once.lock().unwrap().extend(steps);
                if !problems.is_empty() {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{name} ({stages:?}):\n{}", problems.join("\n")));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The groups cover the whole DAG.
    assert_eq!(
        every_step.into_inner().unwrap(),
        failed_once.into_inner().unwrap()
    );
}

/// On cluster `c`, a repair with a failure at each of `steps` that has not failed yet, until
/// every one has: each pauses (nothing undone), is cancelled and unwound, and leaves the
/// cluster as it was. Returns what went wrong.
fn fail_each(c: &Cluster, steps: &[String]) -> Vec<String> {
    let (held, contents) = (c.holdings(), c.contents());
    let mut problems = Vec::new();
    let mut left = steps.to_vec();
    while !left.is_empty() {
        let inject = left.join(",");
        // Preflight is read-only and was shown by the create: skipped, to spare the
        // subscription's ARM read budget.
        let (code, out, err) = c.repair(&["--skip-preflight"], &[("HCP_INJECT_FAIL", &inject)]);
        if code != 1
            || !out.contains("‖ Repair paused after")
            || !out.contains("nothing was undone")
        {
            problems.push(format!("not paused: exit {code}\n{out}{err}"));
            break;
        }
        let run = run_id(&out);
        let failed = failed_steps(&c.show(&run));
        if failed.is_empty() || failed.iter().any(|f| !left.contains(f)) {
            problems.push(format!("paused, but failed: {failed:?}"));
            break;
        }
        let what = format!("failed at {failed:?}");
        // Paused: its work is kept, and it adopted everything.
        if c.holdings() != held {
            problems.push(format!("{what}: paused, the cluster changed"));
        }
        let (code, _, err) = c.cli(&["cancel", &run], &[]);
        if code != 0 {
            problems.push(format!("{what}: cancel: exit {code} {err}"));
            break;
        }
        let (code, out, err) = c.cli(&["drive", &run], &[]);
        if code != 1 || !says_run(&out, "was cancelled and unwound") {
            problems.push(format!("{what}: not unwound: exit {code}\n{out}{err}"));
            break;
        }
        let shown = c.show(&run);
        let gone = [ledger(&shown, "created"), ledger(&shown, "deleted")].concat();
        if shown["state"] != "cancelled" || !gone.is_empty() {
            problems.push(format!("{what}: {} with {gone:?}", shown["state"]));
        }
        let now = c.holdings();
        if now != held {
            let changed: Vec<&String> = held
                .keys()
                .chain(now.keys())
                .filter(|k| held.get(*k) != now.get(*k))
                .collect();
            problems.push(format!("{what}: unwound, changed {changed:?}"));
        }
        if c.contents() != contents {
            problems.push(format!(
                "{what}: unwound, contents changed: {}",
                c.contents()
            ));
        }
        left.retain(|s| !failed.contains(s));
    }
    let (code, out) = c.verify();
    if code != 0 {
        problems.push(format!("verify after the unwinds: exit {code}\n{out}"));
    }
    problems
}

/// Drift of several kinds on cluster `c`, out of band (as an operator or the portal would
/// cause it): the private zone's `*.apps` record and the private endpoint zone's VNet link
/// deleted, a federated credential deleted, a subscription allowed by hand on the Private
/// Link Service. Returns the ids deleted.
fn drift(sim: &Sim, c: &Cluster) -> Vec<String> {
    let apps = format!("{}/A/*.apps", c.pe_zone());
    let link = format!(
        "{}/virtualNetworkLinks/{}-{}-pl",
        c.pe_zone(),
        c.name,
        c.infra
    );
    let fic = sim
        .ids()
        .into_iter()
        .find(|i| i.contains("/federatedIdentityCredentials/"))
        .unwrap();
    for (id, api) in [(&apps, DNS), (&link, DNS), (&fic, MSI)] {
        assert!(sim.ids().contains(id.as_str()), "{id}");
        arm_delete(sim, id, api);
    }
    let mut p = arm_get(&sim.base, &c.pls(), NET);
    p["properties"]["visibility"]["subscriptions"]
        .as_array_mut()
        .unwrap()
        .push(json!(FOREIGN));
    arm_put(sim, &c.pls(), NET, &p);
    vec![apps, link, fic]
}

/// The number of PUTs of `id` that succeeded (`201 Created`, or `202 Accepted` for an
/// asynchronous create).
fn puts(reqs: &[Value], id: &str) -> usize {
    request_lines(reqs)
        .iter()
        .filter(|(m, p, s)| {
            m == "PUT"
                && (200..300).contains(s)
                && p.split('?')
                    .next()
                    .is_some_and(|p| p.eq_ignore_ascii_case(id))
        })
        .count()
}

#[test]
fn every_step_of_a_repair_survives_sigkill_at_every_boundary() {
    let env = Env::new("repair-crash", FAST);
    let c = Cluster::create(
        &env.dir,
        &env.db,
        &env.sim.base,
        "rcr",
        "rcr-cr4sh",
        GUEST_SUB,
    );
    let (held, contents) = (c.holdings(), c.contents());
    let deleted = drift(&env.sim, &c);
    let (code, out) = c.verify();
    assert_eq!(code, 3, "the drift is seen: {out}");
    env.sim.clear_requests();
    let (code, out, err) = c.repair(&["--detach", "--skip-preflight"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let points = targets(
        &env.dir,
        &env.db,
        &env.sim,
        &c.cfg,
        "repair-cluster",
        "action",
    );
    assert_eq!(points.len(), 3 * 69);
    let (end, kills) = crash_through(&env.dir, &env.db, &env.sim, &points, &[]);
    eprintln!(
        "{kills} workers killed across {} crash points",
        points.len()
    );
    assert_eq!(end, "succeeded");
    assert!(kills > 30, "only {kills} kills");
    c.eventually_ok();
    // Repaired: what was deleted is back (each written once, however often its step was
    // interrupted), nothing is there twice, and everything else is as it was.
    let reqs = env.sim.requests();
    assert!(
        created_twice(&reqs).is_empty(),
        "{:?}",
        created_twice(&reqs)
    );
    for id in &deleted {
        assert_eq!(puts(&reqs, id), 1, "{id}");
    }
    assert_eq!(env.sim.inventory().len(), env.sim.ids().len(), "duplicates");
    let now = c.holdings();
    assert_eq!(
        now.keys().collect::<BTreeSet<_>>(),
        held.keys().collect::<BTreeSet<_>>(),
        "leaked or missing"
    );
    for (id, v) in &held {
        if !deleted.contains(id) {
            assert_eq!(&now[id], v, "{id}");
        }
    }
    assert_eq!(c.contents(), contents);
    // The Private Link Service's access was written back once: a repeated step re-reads
    // and finds it done.
    assert_eq!(puts(&reqs, &c.pls()), 1, "PLS PUTs");
}

/// A repair of a drifted cluster fails at its last step before the pivot and pauses; the
/// operator cancels it, and a worker is SIGKILLed at every boundary of the unwind (each
/// undo runs again after its kill). The unwind deletes exactly what the repair recreated,
/// puts back the access it changed, and keeps everything the create made.
#[test]
fn the_unwind_of_a_cancelled_repair_survives_sigkill_at_every_boundary() {
    let env = Env::new("repair-unwind-crash", FAST);
    let c = Cluster::create(
        &env.dir,
        &env.db,
        &env.sim.base,
        "ruw",
        "ruw-unw1d",
        GUEST_SUB,
    );
    let held = c.holdings();
    let deleted = drift(&env.sim, &c);
    let drifted = c.holdings();
    let drifted_pls = c.contents()["pls"].clone();
    let (code, out, err) = c.repair(
        &["--skip-preflight"],
        &[("HCP_INJECT_FAIL", "create-cluster.access.pls-visibility")],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("‖ Repair paused after"), "{out}");
    let run = run_id(&out);
    // Paused with its work kept: what was missing is back.
    for id in &deleted {
        assert!(env.sim.ids().contains(id), "{id} not recreated");
    }
    env.sim.clear_requests();
    let (code, _, err) = c.cli(&["cancel", &run], &[]);
    assert_eq!(code, 0, "{err}");
    // The run stays `needs-operator` until a worker applies the cancel, which the shared
    // harness counts as an end: the first worker is started here, and dies at the first
    // boundary of the unwind it reaches.
    let points = targets(
        &env.dir,
        &env.db,
        &env.sim,
        &c.cfg,
        "repair-cluster",
        "undo",
    );
    assert_eq!(points.len(), 3 * 64, "{points:?}");
    let world = env.dir.join("world");
    let mut w = Proc::spawn(
        &env.dir,
        &[
            "--database",
            &env.db,
            "--simulator",
            &env.sim.base,
            "worker",
            "--world",
            world.to_str().unwrap(),
        ],
        &[
            ("HCP_LEASE_TTL_MS", "300"),
            ("HCP_POLL_MS", "20"),
            ("RUST_LOG", "warn"),
            ("HCP_CRASH_AT", &points.join(",")),
        ],
    );
    let hit = w
        .wait_line("HCP_CRASHPOINT", Duration::from_secs(30))
        .unwrap_or_else(|| panic!("no worker applied the cancel: {}", w.stderr()));
    w.kill();
    let f: Vec<&str> = hit.split_whitespace().collect();
    let here = format!("{}:{}:{}", f[2], f[3], f[4]);
    let next = points.iter().position(|p| *p == here).unwrap() + 1;
    let (end, kills) = crash_through(&env.dir, &env.db, &env.sim, &points[next..], &[]);
    eprintln!(
        "{} workers killed across {} crash points",
        kills + 1,
        points.len()
    );
    assert_eq!(end, "cancelled");
    assert!(kills > 15, "only {kills} kills");
    // Exactly what the repair recreated is deleted again, once each; the access it narrowed
    // is as it was before it; everything else is untouched.
    assert_eq!(c.holdings(), drifted);
    assert_eq!(c.contents()["pls"], drifted_pls);
    let mut dels: Vec<String> = writes(&env.sim.requests())
        .into_iter()
        .filter(|(m, _, s)| m == "DELETE" && *s < 300)
        .map(|(_, p, _)| p)
        .collect();
    dels.sort();
    let mut expected = deleted.clone();
    expected.sort();
    assert_eq!(dels, expected);
    // Unwinding again: refused, nothing to do.
    let (code, _, err) = c.cli(&["cancel", &run], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already cancelled"), "{err}");
    // A repair puts it all back.
    let (code, out, err) = c.repair(&["--skip-preflight"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    c.eventually_ok();
    assert_eq!(
        c.holdings().keys().collect::<BTreeSet<_>>(),
        held.keys().collect::<BTreeSet<_>>()
    );
}

/// A NodePool's `spec.replicas` patched by hand (as `kubectl scale nodepool`) from 2 to 3,
/// then `hcp-workflow start repair-cluster --config F`: the repair puts 2 back and reports
/// complete only once the pool runs 2 machines again. A PodDisruptionBudget holds the
/// surplus machine's drain, so the pool stays Ready with 3 while it scales back: the
/// repair must still be waiting then, and finish once the drain is let go.
#[test]
fn start_repair_cluster_waits_until_a_hand_scaled_pool_runs_what_the_file_says() {
    let env = Env::new("repair-hand-scaled", FAST);
    let name = "scaled";
    let cfg = cluster_file(&env.dir, name, "scaled-s4c1d", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let pool = format!("{NP}/{name}-workers");
    let running = || {
        env.sim.get(&pool)["status"]["replicas"]
            .as_i64()
            .unwrap_or(0)
    };
    let r = reqwest::blocking::Client::new()
        .patch(format!("{}{pool}", env.sim.base))
        .header("authorization", "Bearer test")
        .header("content-type", "application/merge-patch+json")
        .json(&json!({"spec": {"replicas": 3}}))
        .send()
        .unwrap();
    assert!(r.status().is_success(), "PATCH {pool}: {}", r.status());
    let until = Instant::now() + Duration::from_secs(60);
    while running() != 3 {
        assert!(
            Instant::now() < until,
            "the pool never ran 3: {}",
            env.sim.get(&pool)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (s, b) = env
        .sim
        .put("/_sim/scenario", &json!({"blocking_pdb": true}));
    assert!((200..300).contains(&s), "{s} {b}");

    // `Env` stays on this thread; the repair runs from its own, on the same journal.
    let (dir, db, base) = (env.dir.clone(), env.db.clone(), env.sim.base.clone());
    let file = cfg.to_string_lossy().to_string();
    std::thread::scope(|scope| {
        let repair = scope.spawn(|| {
            run(
                &dir,
                &[
                    "--database",
                    &db,
                    "--simulator",
                    &base,
                    "start",
                    "repair-cluster",
                    "--config",
                    &file,
                    "--yes",
                ],
                &[],
            )
        });
        // The repair has put 2 back and waits while the pool still runs 3.
        let until = Instant::now() + Duration::from_secs(90);
        loop {
            assert!(
                !repair.is_finished(),
                "the repair ended while the pool runs {} machines: {:?}",
                running(),
                repair.join().unwrap()
            );
            let (_, why, _) = env.cli(&["why", &format!("cluster/{name}")], &[]);
            if why.contains(&format!(
                "waiting for NodePool clusters/{name}-workers to settle"
            )) {
                assert!(why.contains("3 machine(s) running, want 2"), "{why}");
                break;
            }
            assert!(Instant::now() < until, "never waited for the pool: {why}");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(env.sim.get(&pool)["spec"]["replicas"], 2);
        assert_eq!(running(), 3);
        let (s, b) = env
            .sim
            .put("/_sim/scenario", &json!({"blocking_pdb": false}));
        assert!((200..300).contains(&s), "{s} {b}");
        let (code, out, err) = repair.join().unwrap();
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("✓ Repair complete"), "{out}");
    });
    // Complete means converged: the pool runs what the file says, and verify agrees now.
    assert_eq!(running(), 2, "{}", env.sim.get(&pool));
    let (code, out, err) = env.cli(&["verify", &format!("cluster/{name}")], &[]);
    assert_eq!(code, 0, "{out}{err}");
}
