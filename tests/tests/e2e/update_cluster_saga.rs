//! Update-cluster passes the suite every workflow has, end to end with real
//! processes against `simulator serve`. One update with every kind of change (allowed
//! subscriptions with one revoked, a pool scaled onto a new machine template with
//! auto-repair on and a drain timeout, a pool added,
//! a pool removed, a release upgrade, the topology PublicAndPrivate → Private, new SSH-key
//! and pull-secret contents; the undoable switch back is in update_topology.rs):
//! - a permanent failure injected at each step: before the first pivot the run unwinds to
//!   the cluster as it was (a cluster per step); after it, the run pauses with its work kept
//!   and `retry` goes on (one cluster for every step after the pivot, failing at each in
//!   turn, until the update completes);
//! - every step succeeds when repeated: a worker SIGKILLed at every boundary of every step
//!   (before its effect, after it, after its journal write) and restarted ends in the same
//!   cluster, with nothing created twice and the pivot's PATCH sent once;
//! - unwinding twice is harmless: a worker SIGKILLed at every boundary of the unwind.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, Sim, cluster_file, edit_file, get_at as get, run};
use hcp_e2e_tests::crash::{crash_through, created_twice, targets};
use hcp_e2e_tests::{document, says_run};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const FAST: f64 = 0.002;
const A: &str = "22222222-3333-4444-5555-666666666666";
const B: &str = "33333333-4444-5555-6666-777777777777";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const OLD: &str = "quay.io/openshift-release-dev/ocp-release:4.22.0-multi";
const NEW: &str = "quay.io/openshift-release-dev/ocp-release:4.22.3-multi";

/// A created cluster `name` (PublicAndPrivate, hcp-workflow's private link, A and B allowed)
/// and its file edited to the update with every kind of change: B revoked, `workers`
/// scaled onto a new VM size with auto-repair on and a drain timeout, `infra` removed, `extra` added, the release, the topology
/// to Private, new SSH-key and pull-secret contents.
fn created(dir: &Path, db: &str, base: &str, name: &str, infra: &str, sub: &str) -> PathBuf {
    let cfg = cluster_file(
        dir,
        name,
        infra,
        "PublicAndPrivate",
        &format!(
            "allowedSubscriptions:\n  - {A}\n  - {B}\nprivateLink:\n  managedBy: hcp-workflow\n"
        ),
    );
    edit_file(
        &cfg,
        &format!("subscription: {GUEST_SUB}"),
        &format!("subscription: {sub}"),
    );
    let c = cfg.to_string_lossy().to_string();
    let (code, out, err) = run(
        dir,
        &[
            "--database",
            db,
            "--simulator",
            base,
            "start",
            "create-cluster",
            "--config",
            &c,
        ],
        &[],
    );
    assert_eq!(code, 0, "{name}: {out}{err}");
    edit_file(&cfg, &format!("  - {B}\n"), "");
    edit_file(
        &cfg,
        "  - name: workers\n    replicas: 2\n  - name: infra\n    replicas: 1\n",
        "  - name: workers\n    replicas: 3\n    vmSize: Standard_D8s_v5\n    autoRepair: true\n    nodeDrainTimeout: 20m\n  - name: extra\n    replicas: 1\n",
    );
    edit_file(&cfg, OLD, NEW);
    edit_file(&cfg, "topology: PublicAndPrivate", "topology: Private");
    std::fs::write(dir.join(format!("{name}.id_ed25519.pub")), NEW_KEY).unwrap();
    std::fs::write(
        dir.join(format!("{name}.pull-secret.json")),
        r#"{"auths":{"quay.io":{"auth":"bmV3OnNlY3JldA=="}}}"#,
    )
    .unwrap();
    cfg
}

const NEW_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHcYc0QHcNRR6p6tMXKq1DzoRfhzHXXuJmr1v+V8Lq2n new@key\n";

/// The `id_rsa.pub` of HyperShift's copy of the SSH key Secret, decoded.
fn ssh_copy(base: &str, name: &str) -> String {
    hcp_e2e_tests::cluster::secret_data_at(
        base,
        &format!("clusters-{name}"),
        "ssh-key",
        "id_rsa.pub",
    )
}

/// What the update changes, as the management cluster and Azure show it.
fn snapshot(base: &str, name: &str, infra: &str) -> Value {
    let pls = format!(
        "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-{infra}?api-version=2023-11-01"
    );
    let pool = |p: &str| get(base, &format!("{NP}/{name}-{p}"));
    let hc = get(base, &format!("{HC}/{name}"));
    json!({
        "workers": [pool("workers")["spec"]["replicas"], pool("workers")["spec"]["platform"]["azure"]["vmSize"], pool("workers")["spec"]["release"]["image"],
                    pool("workers")["spec"]["management"]["autoRepair"], pool("workers")["spec"]["nodeDrainTimeout"]],
        "infra": pool("infra").get("spec").is_some(),
        "extra": pool("extra").get("spec").is_some(),
        "release": hc["spec"]["release"]["image"],
        "hc_subs": hc["spec"]["platform"]["azure"]["private"]["privateLink"]["additionalAllowedSubscriptions"],
        "pls_subs": get(base, &pls)["properties"]["visibility"]["subscriptions"],
        "topology": hc["spec"]["platform"]["azure"]["topology"],
        "public_router": get(base, &format!("/api/v1/namespaces/clusters-{name}/services/router")).get("spec").is_some(),
        "new_key": ssh_copy(base, name) == NEW_KEY,
    })
}

fn as_it_was(sub: &str) -> Value {
    json!({
        "workers": [2, "Standard_D4s_v5", OLD, false, null], "infra": true, "extra": false, "release": OLD,
        "hc_subs": [A, B], "pls_subs": [sub, A, B],
        "topology": "PublicAndPrivate", "public_router": true, "new_key": false,
    })
}

fn as_the_file_says(sub: &str) -> Value {
    json!({
        "workers": [3, "Standard_D8s_v5", NEW, true, "1200s"], "infra": false, "extra": true, "release": NEW,
        "hc_subs": [A], "pls_subs": [sub, A],
        "topology": "Private", "public_router": false, "new_key": true,
    })
}

#[test]
fn a_failure_at_each_step_unwinds_before_the_pivot_and_pauses_after_it() {
    let env = Env::new("update-each", FAST);
    // The steps, from the plan of one such update.
    let cfg0 = created(
        &env.dir,
        &env.db,
        &env.sim.base,
        "each",
        "each-e4ch0",
        GUEST_SUB,
    );
    let c = cfg0.to_string_lossy().to_string();
    let (code, out, err) = env.cli(
        &["--output", "json", "plan", "update-cluster", "--config", &c],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan = document(&out, "Plan");
    let steps: Vec<(String, bool)> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["node"].as_str().unwrap().to_string(),
                s["pivot"].is_string(),
            )
        })
        .collect();
    assert_eq!(steps.len(), 22, "{steps:?}");
    // Before the first pivot: the steps that descend from no pivot.
    let first_pivot = steps.iter().position(|(_, p)| *p).unwrap();
    assert_eq!(steps[first_pivot].0, "update-cluster.release.control-plane");
    let before: Vec<String> = steps[..first_pivot].iter().map(|s| s.0.clone()).collect();
    let after: Vec<String> = steps[first_pivot..].iter().map(|s| s.0.clone()).collect();
    // Each cluster in its own subscription (its machines count against that subscription's
    // regional vCPU quota), which needs the public zone of baseDomain.
    let sub_of = |k: usize| format!("{k:08}-2222-3333-4444-555555555555");
    for k in 0..=before.len() {
        env.sim.seed_public_zone(&sub_of(k), "hcp.example.com");
    }
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (dir, base) = (env.dir.clone(), env.sim.base.clone());
    // One job per step before the pivot (a fresh cluster each: it unwinds), and one job for
    // every step after it, on one cluster: a failure at each in turn pauses the run, and
    // `retry` + `drive` go on to the next (each step's failure is injected until it has
    // failed once).
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if k > before.len() {
                        break;
                    }
                    let (name, infra) = (format!("e{k}"), format!("e{k}-upd4t"));
                    let db = format!("sqlite://{}", dir.join(format!("{name}.db")).display());
                    let sub = sub_of(k);
                    let cfg = created(&dir, &db, &base, &name, &infra, &sub);
                    let c = cfg.to_string_lossy().to_string();
                    let args = ["--database", db.as_str(), "--simulator", base.as_str()];
                    let cli = |rest: &[&str], envs: &[(&str, &str)]| {
                        let mut a = args.to_vec();
                        a.extend_from_slice(rest);
                        run(&dir, &a, envs)
                    };
                    let mut problems = Vec::new();
                    let what = if let Some(node) = before.get(k) {
                        let (code, out, err) = cli(
                            &["start", "update-cluster", "--config", &c, "--yes"],
                            &[("HCP_INJECT_FAIL", node.as_str())],
                        );
                        if code != 1 || !says_run(&out, "rolled back") {
                            problems.push(format!("exit {code}, not rolled back\n{out}\n{err}"));
                        }
                        let now = snapshot(&base, &name, &infra);
                        if now != as_it_was(&sub) {
                            problems.push(format!("not as it was: {now}"));
                        }
                        node.clone()
                    } else {
                        let mut left = after.clone();
                        let (mut code, mut out, mut err) = cli(
                            &["start", "update-cluster", "--config", &c, "--yes"],
                            &[("HCP_INJECT_FAIL", left.join(",").as_str())],
                        );
                        let run_id = hcp_e2e_tests::run_id(&out);
                        let mut rounds = 0;
                        while !out.contains("✓ Update complete") && rounds <= after.len() {
                            rounds += 1;
                            if code != 1 || !out.contains("‖ Update paused after") {
                                problems.push(format!("not paused: exit {code}\n{out}\n{err}"));
                                break;
                            }
                            let (_, shown, _) = cli(&["--output", "json", "show", &run_id], &[]);
                            let shown: Value = serde_json::from_str(&shown).unwrap_or(Value::Null);
                            let failed: Vec<String> = shown["stages"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .flat_map(|g| g["steps"].as_array().cloned().unwrap_or_default())
                                .filter(|s| s["state"] == "failed")
                                .filter_map(|s| s["name"].as_str().map(str::to_string))
                                .collect();
                            if failed.is_empty() || failed.iter().any(|f| !left.contains(f)) {
                                problems.push(format!("paused, but failed: {failed:?}"));
                                break;
                            }
                            left.retain(|n| !failed.contains(n));
                            let (c1, o1, e1) = cli(&["retry", &run_id], &[]);
                            if c1 != 0 {
                                problems.push(format!("retry: {c1} {o1}{e1}"));
                                break;
                            }
                            (code, out, err) = cli(
                                &["drive", &run_id],
                                &[("HCP_INJECT_FAIL", left.join(",").as_str())],
                            );
                        }
                        if !left.is_empty() {
                            problems.push(format!("these never failed: {left:?}\n{out}{err}"));
                        }
                        let now = snapshot(&base, &name, &infra);
                        if now != as_the_file_says(&sub) {
                            problems.push(format!("not as the file says after retry: {now}"));
                        }
                        "every step after the pivot".to_string()
                    };
                    if !problems.is_empty() {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{what}: {}", problems.join("; ")));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

fn crash_env(tag: &str) -> (PathBuf, String, Sim) {
    let dir = hcp_e2e_tests::scratch(tag);
    let sim = Sim::start(&dir, FAST);
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    (dir, db, sim)
}

fn detach_update(dir: &Path, db: &str, sim: &Sim, cfg: &Path) {
    let c = cfg.to_string_lossy().to_string();
    let (code, out, err) = run(
        dir,
        &[
            "--database",
            db,
            "--simulator",
            &sim.base,
            "start",
            "update-cluster",
            "--config",
            &c,
            "--detach",
            "--yes",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn every_step_of_an_update_survives_sigkill_at_every_boundary() {
    let (dir, db, sim) = crash_env("update-crash");
    let (name, infra) = ("crsh", "crsh-cr45h");
    let cfg = created(&dir, &db, &sim.base, name, infra, GUEST_SUB);
    sim.clear_requests();
    detach_update(&dir, &db, &sim, &cfg);
    let points = targets(&dir, &db, &sim, &cfg, "update-cluster", "action");
    assert_eq!(points.len(), 3 * 22);
    let (end, kills) = crash_through(&dir, &db, &sim, &points, &[]);
    eprintln!(
        "{kills} workers killed across {} crash points",
        points.len()
    );
    assert_eq!(end, "succeeded");
    assert!(kills >= 15, "only {kills} kills");
    assert_eq!(
        snapshot(&sim.base, name, infra),
        as_the_file_says(GUEST_SUB)
    );
    assert!(created_twice(&sim.requests()).is_empty());
    let hc_patches = hcp_e2e_tests::cluster::request_lines(&sim.requests())
        .iter()
        .filter(|(m, p, s)| {
            m == "PATCH" && p.split('?').next() == Some(&format!("{HC}/{name}")) && *s < 300
        })
        .count();
    // The release, the allowed subscriptions and the topology once each: a repeated step
    // re-reads and finds its change made.
    assert_eq!(hc_patches, 3, "HostedCluster PATCHes");
    sim.stop();
}

#[test]
fn the_unwind_of_an_update_survives_sigkill_at_every_boundary() {
    let (dir, db, sim) = crash_env("update-unwind-crash");
    let (name, infra) = ("uwc", "uwc-unw1c");
    let cfg = created(&dir, &db, &sim.base, name, infra, GUEST_SUB);
    detach_update(&dir, &db, &sim, &cfg);
    let points = targets(&dir, &db, &sim, &cfg, "update-cluster", "undo");
    assert_eq!(points.len(), 9, "{points:?}");
    let (end, kills) = crash_through(
        &dir,
        &db,
        &sim,
        &points,
        &[("HCP_INJECT_FAIL", "update-cluster.nodepools.workers")],
    );
    eprintln!(
        "{kills} workers killed across {} crash points",
        points.len()
    );
    assert_eq!(end, "rolled-back");
    assert!(kills >= 4, "only {kills} kills");
    assert_eq!(snapshot(&sim.base, name, infra), as_it_was(GUEST_SUB));
    sim.stop();
}
