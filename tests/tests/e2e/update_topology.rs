//! And §5, end to end with real processes against `simulator serve`:
//! - a PublicAndPrivate cluster switched to Private (HyperShift deletes the public router;
//!   the public A records go) and back (the router returns; new records point at it);
//! - a cluster created Private becomes PublicAndPrivate (its services, immutable, carry
//!   their hostnames since HyperShift 4.22 needs them on a Private cluster too);
//! - new SSH-key contents reach HyperShift's copy and every pool's machines are replaced;
//!   new pull-secret contents reach HyperShift's copy and no machine is replaced;
//! - delete-cluster after all of it leaves only the persistent resources;
//! - every step of a switch to PublicAndPrivate (the undoable direction; the other one is
//!   in update_cluster_saga.rs's every-change update): a permanent failure at it unwinds
//!   to the cluster as it was (Private, no public router, no public records).
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{
    Env, GUEST_SUB, cluster_file, edit_file, get_at, persistent_only, run,
};
use hcp_e2e_tests::{document, run_id, says_run};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

const FAST: f64 = 0.002;
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";

fn update(env: &Env, cfg: &Path) -> (i32, String, String) {
    env.start("update-cluster", cfg, &[], &[])
}

fn topology(env: &Env, name: &str) -> Value {
    env.sim.get(&format!("{HC}/{name}"))["spec"]["platform"]["azure"]["topology"].clone()
}

/// The public `router` Service's IP in the control-plane namespace, if the Service exists.
fn public_router(env: &Env, name: &str) -> Option<String> {
    public_router_at(&env.sim.base, name)
}

fn public_router_at(base: &str, name: &str) -> Option<String> {
    let svc = get_at(
        base,
        &format!("/api/v1/namespaces/clusters-{name}/services/router"),
    );
    svc.get("spec")?;
    Some(
        svc["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The public A record `rel` of the base domain's zone: its address, if it exists.
fn public_record(env: &Env, rel: &str) -> Option<String> {
    let r = env.sim.get(&format!(
        "/subscriptions/{GUEST_SUB}/resourceGroups/hcp-dns/providers/Microsoft.Network/dnszones/hcp.example.com/A/{rel}?api-version=2018-05-01"
    ));
    r.get("properties")?;
    Some(
        r["properties"]["ARecords"][0]["ipv4Address"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// The VM names of NodePool `<cluster>-<pool>`.
fn vms(env: &Env, cluster: &str, pool: &str) -> BTreeSet<String> {
    let prefix = format!("/virtualmachines/{cluster}-{pool}-");
    env.sim
        .ids()
        .into_iter()
        .filter(|id| id.to_ascii_lowercase().contains(&prefix))
        .collect()
}

fn secret_data(env: &Env, ns: &str, name: &str, key: &str) -> String {
    hcp_e2e_tests::cluster::secret_data_at(&env.sim.base, ns, name, key)
}

fn ledger_has(run: &Value, action: &str, id_part: &str) -> bool {
    run["ledger"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["action"] == action && r["id"].as_str().is_some_and(|i| i.contains(id_part)))
}

#[test]
fn topology_switches_both_ways_and_new_secret_contents_roll_out() {
    let env = Env::new("update-topology", FAST);
    let before = env.sim.ids();
    let name = "topo";
    let cfg = cluster_file(
        &env.dir,
        name,
        "topo-t0p0l",
        "PublicAndPrivate",
        "privateLink:\n  managedBy: hcp-workflow\n",
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let ip = public_router(&env, name).expect("a PublicAndPrivate cluster has a public router");
    assert_eq!(
        public_record(&env, &format!("api-{name}")),
        Some(ip.clone())
    );

    // PublicAndPrivate → Private: the plan names the pivot; HyperShift deletes the public
    // router; the A records that pointed at it are deleted.
    edit_file(&cfg, "topology: PublicAndPrivate", "topology: Private");
    let c = cfg.to_string_lossy().to_string();
    let (code, plan, err) = env.cli(&["plan", "update-cluster", "--config", &c], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        plan.contains("~ topology: PublicAndPrivate → Private"),
        "{plan}"
    );
    assert!(
        plan.contains("⚑"),
        "the switch to Private is a pivot: {plan}"
    );
    let (code, out, err) = update(&env, &cfg);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");
    assert_eq!(topology(&env, name), "Private");
    assert_eq!(public_router(&env, name), None, "no public router");
    assert_eq!(public_record(&env, &format!("api-{name}")), None);
    assert_eq!(public_record(&env, &format!("oauth-{name}")), None);
    let run = env.show(&run_id(&out));
    assert!(
        ledger_has(&run, "updated", &format!("clusters/{name}")),
        "{}",
        run["ledger"]
    );
    assert!(
        ledger_has(&run, "deleted", &format!("/A/api-{name}")),
        "{}",
        run["ledger"]
    );
    // The private side is untouched: the Private Link Service and the endpoint stay.
    assert!(
        env.sim.ids().iter().any(|i| i
            .to_ascii_lowercase()
            .ends_with("/privatelinkservices/pls-topo-t0p0l")),
        "the PLS stays"
    );

    // SSH key with new contents: HyperShift's copy, then every pool's machines replaced.
    let (w0, i0) = (vms(&env, name, "workers"), vms(&env, name, "infra"));
    std::fs::write(
        env.dir.join(format!("{name}.id_ed25519.pub")),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHcYc0QHcNRR6p6tMXKq1DzoRfhzHXXuJmr1v+V8Lq2n new@key\n",
    )
    .unwrap();
    let (code, out, err) = update(&env, &cfg);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");
    assert!(
        secret_data(&env, &format!("clusters-{name}"), "ssh-key", "id_rsa.pub").contains("new@key"),
        "HyperShift's copy has the new key"
    );
    let (w1, i1) = (vms(&env, name, "workers"), vms(&env, name, "infra"));
    assert_eq!((w1.len(), i1.len()), (2, 1));
    assert!(
        w1.is_disjoint(&w0) && i1.is_disjoint(&i0),
        "every machine replaced: {w0:?} → {w1:?}"
    );
    let run = env.show(&run_id(&out));
    assert!(
        ledger_has(&run, "updated", &format!("clusters/{name}-ssh-key")),
        "{}",
        run["ledger"]
    );
    assert!(
        !run.to_string()
            .contains("AAAAC3NzaC1lZDI1NTE5AAAAIHcYc0QHcNRR6p6tMXKq1DzoRfhzHXXuJmr1v"),
        "no key contents in the journal"
    );

    // Pull secret with new contents: HyperShift's copy; no machine is replaced.
    std::fs::write(
        env.dir.join(format!("{name}.pull-secret.json")),
        r#"{"auths":{"quay.io":{"auth":"bmV3OnNlY3JldA=="}}}"#,
    )
    .unwrap();
    let (code, out, err) = update(&env, &cfg);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        secret_data(
            &env,
            &format!("clusters-{name}"),
            "pull-secret",
            ".dockerconfigjson"
        )
        .contains("bmV3OnNlY3JldA=="),
        "HyperShift's copy has the new pull secret"
    );
    assert_eq!(vms(&env, name, "workers"), w1, "no machine replaced");
    let (_, show, _) = env.cli(&["show", &run_id(&out)], &[]);
    assert!(!show.contains("bmV3OnNlY3JldA=="), "no secret in show");

    // Private → PublicAndPrivate: the public router comes back, new records point at it,
    // and the control-plane operator resolves the public hostname again.
    edit_file(&cfg, "topology: Private", "topology: PublicAndPrivate");
    let (code, out, err) = update(&env, &cfg);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(topology(&env, name), "PublicAndPrivate");
    let ip = public_router(&env, name).expect("the public router is back");
    assert_eq!(
        public_record(&env, &format!("api-{name}")),
        Some(ip.clone())
    );
    assert_eq!(public_record(&env, &format!("oauth-{name}")), Some(ip));
    let run = env.show(&run_id(&out));
    assert!(
        ledger_has(&run, "created", &format!("/A/api-{name}")),
        "{}",
        run["ledger"]
    );
    let (code, out, _) = update(&env, &cfg);
    assert_eq!(code, 0);
    assert!(out.contains("Nothing to change"), "{out}");

    // delete-cluster after all of it leaves only the persistent resources.
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let left = persistent_only(&env.sim.ids(), &before, name);
    assert_eq!(left, Vec::<String>::new());
}

/// A cluster created Private publishes its API server and OAuth by hostname (HyperShift
/// 4.22 needs one), and `spec.services` is immutable: so it can be switched to
/// PublicAndPrivate, its public records written at the new public router.
#[test]
fn a_cluster_created_private_is_switched_to_public_and_private() {
    let env = Env::new("update-topology-refused", FAST);
    let name = "priv";
    let cfg = cluster_file(
        &env.dir,
        name,
        "priv-pr1v8",
        "Private",
        "privateLink:\n  managedBy: hcp-workflow\n",
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    edit_file(&cfg, "topology: Private", "topology: PublicAndPrivate");
    let (code, out, err) = update(&env, &cfg);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(topology(&env, name), "PublicAndPrivate");
    assert!(public_router(&env, name).is_some());
    assert!(public_record(&env, &format!("api-{name}")).is_some());
}

#[test]
fn a_failure_at_each_step_of_a_switch_to_public_and_private_unwinds_to_private() {
    let env = Env::new("update-topology-each", FAST);
    let sub_of = |k: usize| format!("{k:08}-3333-4444-5555-666666666666");
    for k in 0..6 {
        env.sim.seed_public_zone(&sub_of(k), "hcp.example.com");
    }
    let (dir, base) = (env.dir.clone(), env.sim.base.clone());
    // A cluster created PublicAndPrivate, switched to Private, its file back at
    // PublicAndPrivate: (file, db, subscription).
    let setup = |k: usize| {
        let (name, infra) = (format!("s{k}"), format!("s{k}-sw1tc"));
        let sub = sub_of(k);
        let cfg = cluster_file(
            &env.dir,
            &name,
            &infra,
            "PublicAndPrivate",
            "privateLink:\n  managedBy: hcp-workflow\n",
        );
        edit_file(
            &cfg,
            &format!("subscription: {GUEST_SUB}"),
            &format!("subscription: {sub}"),
        );
        let db = format!("sqlite://{}", dir.join(format!("{name}.db")).display());
        let c = cfg.to_string_lossy().to_string();
        let cli = |rest: &[&str], envs: &[(&str, &str)]| {
            let mut a = vec![
                "--database",
                db.as_str(),
                "--simulator",
                env.sim.base.as_str(),
            ];
            a.extend_from_slice(rest);
            run(&dir, &a, envs)
        };
        let (code, out, err) = cli(&["start", "create-cluster", "--config", &c], &[]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        edit_file(&cfg, "topology: PublicAndPrivate", "topology: Private");
        let (code, out, err) = cli(&["start", "update-cluster", "--config", &c, "--yes"], &[]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        edit_file(&cfg, "topology: Private", "topology: PublicAndPrivate");
        (name, c, db, sub)
    };
    let (name0, c0, db0, _) = setup(0);
    let (code, out, err) = run(
        &env.dir,
        &[
            "--database",
            &db0,
            "--simulator",
            &env.sim.base,
            "--output",
            "json",
            "plan",
            "update-cluster",
            "--config",
            &c0,
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan = document(&out, "Plan");
    let steps: Vec<String> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        steps,
        [
            "update-cluster.topology.public-dns-zone",
            "update-cluster.topology.hosted-cluster",
            "update-cluster.topology.public-dns",
            "update-cluster.available.hosted-cluster",
            "update-cluster.available.external-dns",
            "update-cluster.available.rollout",
        ]
    );
    assert!(
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| !s["pivot"].is_string()),
        "no pivot"
    );
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let first = std::sync::Mutex::new(Some((name0, c0, db0, sub_of(0))));
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(node) = steps.get(k) else { break };
                // The cluster the plan was read from serves the first step.
                let (name, c, db, sub) = if k == 0 {
                    first.lock().unwrap().take().unwrap()
                } else {
                    setup(k)
                };
                let (code, out, err) = run(
                    &dir,
                    &["--database", &db, "--simulator", &base, "start", "update-cluster", "--config", &c, "--yes"],
                    &[("HCP_INJECT_FAIL", node.as_str())],
                );
                let mut problems = Vec::new();
                if code != 1 || !says_run(&out, "rolled back") {
                    problems.push(format!("exit {code}, not rolled back\n{out}{err}"));
                }
                let hc = get_at(&base, &format!("{HC}/{name}"));
                if hc["spec"]["platform"]["azure"]["topology"] != "Private" {
                    problems.push(format!("topology {}", hc["spec"]["platform"]["azure"]["topology"]));
                }
                // HyperShift deletes the public router again once the topology is back.
                let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
                while public_router_at(&base, &name).is_some() && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                if public_router_at(&base, &name).is_some() {
                    problems.push("the public router is still there".into());
                }
                let rec = get_at(&base, &format!(
                    "/subscriptions/{sub}/resourceGroups/hcp-dns/providers/Microsoft.Network/dnszones/hcp.example.com/A/api-{name}?api-version=2018-05-01"
                ));
                if rec.get("properties").is_some() {
                    problems.push(format!("a public record is left: {rec}"));
                }
                if !problems.is_empty() {
                    failures.lock().unwrap().push(format!("{node}: {}", problems.join("; ")));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `hcp-workflow start update-cluster --config F` switching PublicAndPrivate → Private
/// deletes the public `api-<name>` record; the "How to reach the cluster" block it prints
/// then must not show that name as a public one: the API server and console lines say they
/// are private (no public record; reachable only inside the guest VNet).
#[test]
fn start_update_cluster_to_private_says_how_to_reach_it_privately() {
    let env = Env::new("update-topology-reach", FAST);
    let name = "reach";
    let cfg = cluster_file(
        &env.dir,
        name,
        "reach-r3ach",
        "PublicAndPrivate",
        "privateLink:\n  managedBy: hcp-workflow\n",
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let line = |out: &str, key: &str| {
        out.lines()
            .skip_while(|l| !l.starts_with("How to reach the cluster:"))
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_default()
            .to_string()
    };
    // PublicAndPrivate: public names, said as such.
    assert!(line(&out, "API server").contains(&format!("api-{name}.hcp.example.com")));
    assert!(!line(&out, "API server").contains("private"), "{out}");

    edit_file(&cfg, "topology: PublicAndPrivate", "topology: Private");
    let (code, out, err) = update(&env, &cfg);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(public_record(&env, &format!("api-{name}")), None);
    let api = line(&out, "API server");
    assert!(
        api.contains(&format!("https://api-{name}.hcp.example.com:443"))
            && api.contains("private: no public DNS record"),
        "{out}"
    );
    assert!(
        line(&out, "console").contains("private: no public DNS record"),
        "{out}"
    );
    assert!(
        line(&out, "reach").contains("only inside the guest VNet"),
        "{out}"
    );
    // `show` says the same.
    let (code, show, err) = env.cli(&["show", &run_id(&out)], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(line(&show, "API server").contains("private"), "{show}");
}
