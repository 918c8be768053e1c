//! HyperShift's own code judges what we render. For each variant, a cluster is
//! created (or updated) with the real CLI against `simulator serve`; the HostedCluster,
//! NodePools, Secrets, Services and AzurePrivateLinkService CRs are read back from the
//! simulator's kube API and handed to `tests/hypershift-oracle` (a Go program built against a
//! HyperShift release-4.22 checkout, `HCP_HYPERSHIFT_SRC`), which runs HyperShift's functions
//! and reconcilers on them. The test fails on:
//! - any check HyperShift's code failed or panicked in (the panic names the function);
//! - any condition both HyperShift and the simulator report with a different status, reason
//!   or message (the simulator models HyperShift: a difference is the simulator's bug or ours).
//!
//! Without `HCP_HYPERSHIFT_SRC` every test prints `skipped: …` and passes.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, aro_env, aro_file, cluster_file, edit_file};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

const FAST: f64 = 0.002;
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const PRIVATE_PLATFORM: &[&str] = &["--private-platform", "azure"];
const SUB_A: &str = "22222222-3333-4444-5555-666666666666";
const SUB_B: &str = "33333333-4444-5555-6666-777777777777";

/// The oracle binary (built once per test process by `build.sh`, which caches it under
/// `target/hypershift-oracle/`), or `None` with the skip line printed.
fn oracle() -> Option<PathBuf> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let Ok(src) = std::env::var("HCP_HYPERSHIFT_SRC") else {
            return None;
        };
        if src.is_empty() {
            return None;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hypershift-oracle/build.sh");
        let t = Instant::now();
        let out = Command::new("bash").arg(&script).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "building the HyperShift oracle failed:\n{stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let bin = PathBuf::from(stdout.lines().last().unwrap().trim());
        eprintln!("oracle: {} (ready in {:?})", bin.display(), t.elapsed());
        Some(bin)
    })
    .clone()
}

fn skip() -> bool {
    if oracle().is_none() {
        eprintln!("skipped: HCP_HYPERSHIFT_SRC not set (the oracle needs a HyperShift checkout)");
        return true;
    }
    false
}

/// What the simulator holds for cluster `name`.
#[derive(Clone, Debug)]
struct Snapshot {
    hc: Value,
    nodepools: Vec<Value>,
    secrets: Vec<Value>,
    services: Vec<Value>,
    pls: Vec<Value>,
    /// Image → version answers the simulator's registry gave for other clusters (a digest it
    /// resolved a tag to), used when this cluster's own status carries none.
    known_releases: Vec<(String, String)>,
}

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

fn snapshot(env: &Env, name: &str) -> Snapshot {
    let hc = env.sim.get(&format!("{HC}/{name}"));
    assert!(hc.get("spec").is_some(), "no HostedCluster {name}: {hc}");
    let nodepools = items(&env.sim.get(NP))
        .into_iter()
        .filter(|p| p["spec"]["clusterName"] == name)
        .collect();
    // The HostedCluster's Secrets, and the control plane's (the ignition CA the NodePool
    // controller requires).
    let mut secrets = items(&env.sim.get("/api/v1/namespaces/clusters/secrets"));
    secrets.extend(items(
        &env.sim
            .get(&format!("/api/v1/namespaces/clusters-{name}/secrets")),
    ));
    let services = items(
        &env.sim
            .get(&format!("/api/v1/namespaces/clusters-{name}/services")),
    );
    let pls = items(&env.sim.get(&format!(
        "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters-{name}/azureprivatelinkservices"
    )));
    Snapshot {
        hc,
        nodepools,
        secrets,
        services,
        pls,
        known_releases: Vec::new(),
    }
}

/// The versions the simulator's registry gave each release image it was asked about (the
/// oracle's fake release provider answers only these; it never guesses a version).
fn releases(s: &Snapshot, prev: Option<&Snapshot>) -> Value {
    let mut m = serde_json::Map::new();
    // Every entry below skips an empty version: that is no answer.
    let put = |m: &mut serde_json::Map<String, Value>, img: &str, v: &str, overwrite: bool| {
        if !v.is_empty() && (overwrite || !m.contains_key(img)) {
            m.insert(img.to_string(), json!(v));
        }
    };
    for snap in std::iter::once(s).chain(prev) {
        let hc = &snap.hc;
        let status = &hc["status"]["version"];
        if let (Some(img), Some(v)) = (
            status["desired"]["image"].as_str(),
            status["desired"]["version"].as_str(),
        ) {
            put(&mut m, img, v, true);
        }
        for h in status["history"].as_array().into_iter().flatten() {
            if let (Some(img), Some(v)) = (h["image"].as_str(), h["version"].as_str()) {
                put(&mut m, img, v, true);
            }
        }
        // The spec's image (a tag or a digest) is what the desired version was resolved from.
        if let (Some(img), Some(v)) = (
            hc["spec"]["release"]["image"].as_str(),
            status["desired"]["version"].as_str(),
        ) {
            put(&mut m, img, v, false);
        }
        for np in &snap.nodepools {
            if let (Some(img), Some(v)) = (
                np["spec"]["release"]["image"].as_str(),
                np["status"]["version"].as_str(),
            ) {
                put(&mut m, img, v, false);
            }
        }
        for (img, v) in &snap.known_releases {
            put(&mut m, img, v, false);
        }
    }
    Value::Object(m)
}

/// The HyperShift operator Deployment's `MANAGED_SERVICE` env on the simulator (`ARO-HCP`
/// on an ARO HCP install), `""` without one.
fn managed_service(env: &Env) -> String {
    let d = env
        .sim
        .get("/apis/apps/v1/namespaces/hypershift/deployments/operator");
    d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["env"].as_array().cloned().unwrap_or_default())
        .find(|e| e["name"] == "MANAGED_SERVICE")
        .and_then(|e| e["value"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Run the oracle on `s` (with `prev` for change judgments); returns its report.
fn judge(env: &Env, tag: &str, s: &Snapshot, prev: Option<&Snapshot>, caps: &[&str]) -> Value {
    let mut input = json!({
        "hostedCluster": s.hc,
        "nodePools": s.nodepools,
        "secrets": s.secrets,
        "services": s.services,
        "azurePrivateLinkServices": s.pls,
        "releases": releases(s, prev),
        "management": {"capabilities": caps, "managedService": managed_service(env)},
    });
    if let Some(p) = prev {
        input["previous"] = json!({"hostedCluster": p.hc, "nodePools": p.nodepools});
    }
    let path = env.dir.join(format!("oracle-{tag}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&input).unwrap()).unwrap();
    let out = Command::new(oracle().unwrap()).arg(&path).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "oracle failed on {}: {}\n{stdout}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the oracle printed no JSON document ({e}): {stdout}"));
    std::fs::write(
        env.dir.join(format!("oracle-{tag}.report.json")),
        serde_json::to_vec_pretty(&report).unwrap(),
    )
    .unwrap();
    report
}

fn cond<'a>(obj: &'a Value, ctype: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ctype)
}

/// The problems in `report` for variant `tag`: failed and panicked checks, and every
/// condition HyperShift and the simulator both report differently. Prints every check.
fn problems(tag: &str, s: &Snapshot, report: &Value) -> Vec<String> {
    let mut out = Vec::new();
    eprintln!(
        "oracle [{tag}] HyperShift {} — {}",
        report["hypershift"]["commit"], report["summary"]
    );
    for c in report["checks"].as_array().into_iter().flatten() {
        let check = c["check"].as_str().unwrap_or_default();
        let subject = c["subject"].as_str().unwrap_or_default();
        let func = c["hypershift_function"].as_str().unwrap_or_default();
        let result = c["result"].as_str().unwrap_or_default();
        let name = if subject.is_empty() {
            check.to_string()
        } else {
            format!("{check}[{subject}]")
        };
        eprintln!(
            "  {result:<10} {name}: {}{}",
            c["reason"].as_str().unwrap_or_default(),
            c.get("values").map(|v| format!(" {v}")).unwrap_or_default()
        );
        match result {
            "panic" => out.push(format!(
                "[{tag}] {name}: HyperShift's code panicked in {}: {}",
                c["panic"]["function"].as_str().unwrap_or_default(),
                c["panic"]["value"].as_str().unwrap_or_default()
            )),
            "failed" => out.push(format!(
                "[{tag}] {name}: HyperShift ({func}) says: {}",
                c["errors"]
            )),
            _ => {}
        }
        // The object whose conditions HyperShift computed, as the simulator holds it.
        let sim_obj = if check.starts_with("nodepool.") {
            s.nodepools
                .iter()
                .find(|p| p["metadata"]["name"] == subject)
                .cloned()
        } else if check.starts_with("hostedcluster.")
            || check == "infra.ReconcileInfrastructureStatus"
        {
            Some(s.hc.clone())
        } else {
            None
        };
        let Some(sim_obj) = sim_obj else { continue };
        // A condition function that stops HyperShift's NodePool reconcile (it returns a result)
        // on a pool the simulator made ready nodes for: HyperShift would have made none.
        if check.starts_with("nodepool.")
            && result != "failed"
            && c["values"]["shortCircuits"] == true
            && cond(&sim_obj, "Ready").is_some_and(|r| r["status"] == "True")
        {
            for hs in c["conditions"].as_array().into_iter().flatten() {
                if hs["status"] == "False" {
                    out.push(format!(
                        "[{tag}] {name}: HyperShift ({func}) stops the NodePool reconcile here ({}={}: {} {:?}), so it would make no machines, but the simulator's NodePool is Ready",
                        hs["type"].as_str().unwrap_or_default(),
                        hs["status"].as_str().unwrap_or_default(),
                        hs["reason"].as_str().unwrap_or_default(),
                        hs["message"].as_str().unwrap_or_default()
                    ));
                }
            }
        }
        for hs in c["conditions"].as_array().into_iter().flatten() {
            let ctype = hs["type"].as_str().unwrap_or_default();
            let Some(sim) = cond(&sim_obj, ctype) else {
                eprintln!("    (the simulator does not set {ctype}; HyperShift: {hs})");
                continue;
            };
            for field in ["status", "reason", "message"] {
                let a = hs[field].as_str().unwrap_or_default();
                let b = sim[field].as_str().unwrap_or_default();
                if a != b {
                    out.push(format!(
                        "[{tag}] {name} condition {ctype}.{field}: HyperShift ({func}) says {a:?}, the simulator says {b:?}"
                    ));
                }
            }
        }
    }
    out
}

/// `create-cluster`; a failure is a problem of the variant (the others are still judged).
fn create(env: &Env, cfg: &Path, all: &mut Vec<String>) -> bool {
    let (code, out, err) = env.start("create-cluster", cfg, &[], &[]);
    if code != 0 {
        all.push(format!(
            "[{}] create-cluster failed (exit {code}); nothing judged\n{out}\n{err}",
            cfg.display()
        ));
    }
    code == 0
}

/// `update-cluster`; a failure is returned as a problem (the cluster is judged as it then
/// is).
fn update(env: &Env, cfg: &Path) -> Vec<String> {
    let (code, out, err) = env.start("update-cluster", cfg, &[], &[]);
    if code == 0 {
        return Vec::new();
    }
    vec![format!(
        "[{}] update-cluster failed (exit {code})\n{out}\n{err}",
        cfg.display()
    )]
}

/// `line` without its `[variant]` prefix and `[subject]` segments: the same finding in
/// several variants or pools.
fn finding(line: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    let mut seg = String::new();
    for ch in line.chars() {
        match ch {
            '[' => {
                depth += 1;
                seg.clear();
            }
            ']' if depth > 0 => {
                depth -= 1;
                // Keep brackets that hold a sentence (JSON lists of errors), drop names.
                if seg.contains(' ') {
                    out.push('[');
                    out.push_str(&seg);
                    out.push(']');
                }
            }
            c if depth > 0 => seg.push(c),
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

fn finish(mut all: Vec<String>) {
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|p| seen.insert(p.clone()));
    let mut distinct: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for p in &all {
        *distinct.entry(finding(p)).or_default() += 1;
    }
    let summary: Vec<String> = distinct
        .iter()
        .map(|(f, n)| format!("  ({n}×) {f}"))
        .collect();
    assert!(
        all.is_empty(),
        "HyperShift's code disagrees: {} distinct finding(s):\n{}\n\nevery occurrence ({}):\n{}",
        distinct.len(),
        summary.join("\n"),
        all.len(),
        all.join("\n")
    );
}

#[test]
fn topologies_and_both_private_link_modes() {
    if skip() {
        return;
    }
    let mut all = Vec::new();
    // HyperShift's own private-link controllers (`--private-platform Azure`).
    let env = Env::with_sim_args("oracle-topo-hs", FAST, PRIVATE_PLATFORM);
    for (name, infra, topology, extra) in [
        ("opub", "opub-0a1b2", "Public", String::new()),
        (
            "opap",
            "opap-0a1b2",
            "PublicAndPrivate",
            format!("allowedSubscriptions:\n  - {SUB_A}\nprivateLink:\n  managedBy: hypershift\n"),
        ),
        (
            "opri",
            "opri-0a1b2",
            "Private",
            "privateLink:\n  managedBy: hypershift\n".to_string(),
        ),
    ] {
        let cfg = cluster_file(&env.dir, name, infra, topology, &extra);
        if !create(&env, &cfg, &mut all) {
            continue;
        }
        let s = snapshot(&env, name);
        let r = judge(&env, name, &s, None, &["Route"]);
        all.extend(problems(
            &format!("{topology}/hypershift-mode/{name}"),
            &s,
            &r,
        ));
    }
    // hcp-workflow makes the private link (the operator runs without the flag).
    let env = Env::new("oracle-topo-hw", FAST);
    for (name, infra, topology) in [
        ("wpri", "wpri-0a1b2", "Private"),
        ("wpap", "wpap-0a1b2", "PublicAndPrivate"),
    ] {
        let cfg = cluster_file(
            &env.dir,
            name,
            infra,
            topology,
            "privateLink:\n  managedBy: hcp-workflow\n",
        );
        if !create(&env, &cfg, &mut all) {
            continue;
        }
        let s = snapshot(&env, name);
        let r = judge(&env, name, &s, None, &["Route"]);
        all.extend(problems(
            &format!("{topology}/hcp-workflow-mode/{name}"),
            &s,
            &r,
        ));
    }
    finish(all);
}

#[test]
fn aro_hcp_managed_identities_on_aks() {
    if skip() {
        return;
    }
    let env = aro_env("oracle-aro", FAST);
    let name = "oaro";
    let cfg = aro_file(&env.dir, name, "oaro-0a1b2", GUEST_SUB, "");
    let mut all = Vec::new();
    if !create(&env, &cfg, &mut all) {
        finish(all);
        return;
    }
    let s = snapshot(&env, name);
    // AKS with HyperShift's Route CRD applied: the Route API is registered.
    let r = judge(&env, name, &s, None, &["Route"]);
    all.extend(problems("ARO-HCP/ManagedIdentities/Public", &s, &r));
    // The shared ingress must be in use and publish the KAS at a host.
    let si = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "sharedingress.KasRouteHostname")
        .cloned()
        .unwrap_or(Value::Null);
    if si["values"]["UseSharedIngressHCP"] != true {
        all.push(format!(
            "[ARO-HCP] HyperShift (support/util UseSharedIngressHCP) does not see an ARO HCP Public cluster: {}",
            si["values"]
        ));
    }
    finish(all);
}

/// Every update-cluster change kind, one after the other on one cluster; each judged with
/// the cluster before the change as `previous`.
#[test]
fn every_day2_change_kind() {
    if skip() {
        return;
    }
    let env = Env::with_sim_args("oracle-day2", FAST, PRIVATE_PLATFORM);
    let name = "oday";
    let cfg = cluster_file(
        &env.dir,
        name,
        "oday-0a1b2",
        "PublicAndPrivate",
        &format!(
            "allowedSubscriptions:\n  - {SUB_A}\n  - {SUB_B}\nprivateLink:\n  managedBy: hypershift\n"
        ),
    );
    edit_file(
        &cfg,
        "  - name: infra\n    replicas: 1\n",
        "  - name: infra\n    replicas: 1\n  - name: inplace\n    replicas: 1\n    upgradeType: InPlace\n",
    );
    let mut all = Vec::new();
    if !create(&env, &cfg, &mut all) {
        finish(all);
        return;
    }
    let mut prev = snapshot(&env, name);
    let r = judge(&env, "created", &prev, None, &["Route"]);
    all.extend(problems("day2/created", &prev, &r));

    let r = step(&env, name, &mut prev, &mut all, "scale", &|| {
        edit_file(
            &cfg,
            "  - name: workers\n    replicas: 2\n",
            "  - name: workers\n    replicas: 3\n",
        );
        update(&env, &cfg)
    });
    expect_rollout(&mut all, "scale", &r, "workers", Some(false), Some(false));

    let r = step(&env, name, &mut prev, &mut all, "vmsize", &|| {
        edit_file(
            &cfg,
            "  - name: workers\n    replicas: 3\n",
            "  - name: workers\n    replicas: 3\n    vmSize: Standard_D8s_v5\n",
        );
        update(&env, &cfg)
    });
    expect_rollout(&mut all, "vmsize", &r, "workers", Some(true), Some(false));

    // An InPlace pool's template change is refused by update-cluster: HyperShift's answer
    // on a hand-changed NodePool.
    let r = step(&env, name, &mut prev, &mut all, "inplace-template", &|| {
        let path = format!("{NP}/{name}-inplace");
        let mut np = env.sim.get(&path);
        np["spec"]["platform"]["azure"]["vmSize"] = json!("Standard_D8s_v5");
        let (code, body) = env.sim.put(&path, &np);
        assert!(code < 300, "hand change of the InPlace pool: {code} {body}");
        Vec::new()
    });
    expect_rollout(
        &mut all,
        "inplace-template",
        &r,
        "inplace",
        Some(true),
        Some(false),
    );

    let r = step(&env, name, &mut prev, &mut all, "release-tag", &|| {
        edit_file(&cfg, "ocp-release:4.22.0-multi", "ocp-release:4.22.3-multi");
        update(&env, &cfg)
    });
    expect_rollout(&mut all, "release-tag", &r, "workers", None, Some(true));

    let digest = prev.hc["status"]["version"]["history"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if digest.contains("@sha256:") {
        // The same release, now pinned by the digest the control plane reports. update-cluster
        // may refuse the change (then there is nothing new for HyperShift to judge).
        let before = std::fs::read_to_string(&cfg).unwrap();
        edit_file(
            &cfg,
            "releaseImage: quay.io/openshift-release-dev/ocp-release:4.22.3-multi",
            &format!("releaseImage: {digest}\nreleaseVersion: 4.22.3"),
        );
        let (code, out, err) = env.start("update-cluster", &cfg, &[], &[]);
        if code == 0 {
            step(&env, name, &mut prev, &mut all, "release-digest", &Vec::new);
        } else {
            eprintln!(
                "note: update-cluster refused the release pinned by digest (exit {code}); not judged:\n{out}{err}"
            );
            std::fs::write(&cfg, before).unwrap();
        }
    } else {
        all.push(format!(
            "[day2/release-digest] the simulator's history holds no digest: {digest:?}"
        ));
    }

    // A cluster created with its release pinned by digest (the digest the simulator's
    // registry gave 4.22.0), judged as created.
    let d0 = prev.hc["status"]["version"]["history"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["version"] == "4.22.0")
        .and_then(|h| h["image"].as_str())
        .unwrap_or_default()
        .to_string();
    if d0.contains("@sha256:") {
        let dcfg = cluster_file(&env.dir, "odig", "odig-0a1b2", "Public", "");
        edit_file(
            &dcfg,
            "releaseImage: quay.io/openshift-release-dev/ocp-release:4.22.0-multi",
            &format!("releaseImage: {d0}\nreleaseVersion: 4.22.0"),
        );
        if create(&env, &dcfg, &mut all) {
            let mut s = snapshot(&env, "odig");
            s.known_releases.push((d0.clone(), "4.22.0".to_string()));
            let r = judge(&env, "created-by-digest", &s, None, &["Route"]);
            all.extend(problems("day2/created-by-digest", &s, &r));
        }
    } else {
        all.push(format!(
            "[day2/created-by-digest] no 4.22.0 digest in the history: {}",
            prev.hc["status"]["version"]
        ));
    }

    step(
        &env,
        name,
        &mut prev,
        &mut all,
        "allowed-subscriptions",
        &|| {
            edit_file(&cfg, &format!("  - {SUB_B}\n"), "");
            update(&env, &cfg)
        },
    );

    step(&env, name, &mut prev, &mut all, "secret-rotation", &|| {
        std::fs::write(
            env.dir.join(format!("{name}.pull-secret.json")),
            r#"{"auths":{"quay.io":{"auth":"bmV3OnNlY3JldA=="}}}"#,
        )
        .unwrap();
        update(&env, &cfg)
    });

    step(&env, name, &mut prev, &mut all, "topology-switch", &|| {
        edit_file(&cfg, "topology: PublicAndPrivate", "topology: Private");
        update(&env, &cfg)
    });
    finish(all);
}

/// Apply `change`, then judge the cluster with the one before it as `previous`.
fn step(
    env: &Env,
    name: &str,
    prev: &mut Snapshot,
    all: &mut Vec<String>,
    tag: &str,
    change: &dyn Fn() -> Vec<String>,
) -> Value {
    all.extend(change());
    let s = snapshot(env, name);
    let r = judge(env, tag, &s, Some(prev), &["Route"]);
    all.extend(problems(&format!("day2/{tag}"), &s, &r));
    all.extend(observer_triggers(&format!("day2/{tag}"), prev, &s));
    *prev = s;
    r
}

/// The object without what every write changes (`resourceVersion`, `managedFields`, …).
fn stable(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "resourceVersion",
            "managedFields",
            "generation",
            "creationTimestamp",
        ] {
            m.remove(k);
        }
    }
    v
}

/// HyperShift's `AzurePrivateLinkServiceObserver` (control-plane-operator, `SetupWithManager`)
/// is triggered by the `private-router` Service alone, not by the HostedControlPlane: a CR
/// spec that changed while that Service did not is an update HyperShift's observer would not
/// have made then (only at its next resync or a CPO restart).
fn observer_triggers(tag: &str, prev: &Snapshot, cur: &Snapshot) -> Vec<String> {
    let find = |v: &[Value], n: &str| v.iter().find(|o| o["metadata"]["name"] == n).cloned();
    let (Some(p_cr), Some(c_cr)) = (
        find(&prev.pls, "private-router"),
        find(&cur.pls, "private-router"),
    ) else {
        return Vec::new();
    };
    let svc_same = find(&prev.services, "private-router").map(|v| stable(&v))
        == find(&cur.services, "private-router").map(|v| stable(&v));
    let mut out = Vec::new();
    if svc_same && p_cr["spec"] != c_cr["spec"] {
        let keys: std::collections::BTreeSet<String> = p_cr["spec"]
            .as_object()
            .into_iter()
            .chain(c_cr["spec"].as_object())
            .flat_map(|m| m.keys().cloned())
            .collect();
        for k in keys {
            if p_cr["spec"][&k] != c_cr["spec"][&k] {
                out.push(format!(
                    "[{tag}] azureprivatelinkservice.Observer: HyperShift's observer (control-plane-operator/controllers/azureprivatelinkservice SetupWithManager: For(Service) filtered to private-router) is not triggered by this change — the private-router Service did not change — so the AzurePrivateLinkService keeps spec.{k} = {} until a resync or a CPO restart; the simulator's CR already has {}",
                    p_cr["spec"][&k], c_cr["spec"][&k]
                ));
            }
        }
    }
    out
}

/// HyperShift's rollout answer for pool `pool` (`templateRollout`, `versionRollout`) must
/// be what the change kind means; `None` = not asserted.
fn expect_rollout(
    all: &mut Vec<String>,
    tag: &str,
    r: &Value,
    pool: &str,
    template: Option<bool>,
    version: Option<bool>,
) {
    let Some(c) = r["checks"].as_array().unwrap().iter().find(|c| {
        c["check"] == "nodepool.Rollout"
            && c["subject"]
                .as_str()
                .is_some_and(|s| s.ends_with(&format!("-{pool}")))
    }) else {
        all.push(format!(
            "[day2/{tag}] no nodepool.Rollout judgment for {pool}"
        ));
        return;
    };
    let v = &c["values"];
    eprintln!("  rollout [{tag}] {pool}: {v}");
    if let Some(t) = template
        && v.get("templateRollout").is_some()
        && v["templateRollout"] != t
    {
        all.push(format!(
            "[day2/{tag}] {pool}: HyperShift's machine template name (azureMachineTemplateSpec + generateMachineTemplateName) {} ({} → {}), expected {}",
            if v["templateRollout"] == true { "changes" } else { "does not change" },
            v["templatePrevious"], v["templateCurrent"],
            if t { "a change" } else { "none" }
        ));
    }
    if let Some(t) = version
        && v.get("versionRollout").is_some()
        && v["versionRollout"] != t
    {
        all.push(format!(
            "[day2/{tag}] {pool}: HyperShift's isUpdatingVersion says {} ({} → {}), expected {t}",
            v["versionRollout"], v["versionPrevious"], v["versionTarget"]
        ));
    }
}
