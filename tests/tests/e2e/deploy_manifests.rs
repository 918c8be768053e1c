//! `hcp-workflow deploy manifests`, as a team uses it: the YAML goes to
//! `kubectl apply --dry-run=server` against `hcp-workflow simulator serve`, and through
//! `kubectl kustomize` as a resource file. Bad flags exit 2, naming the flag.
//!
//! The simulator serves Namespaces, Secrets, Services, ConfigMaps, Deployments and the
//! HyperShift kinds, not ServiceAccounts, RBAC, Jobs, PodDisruptionBudgets or
//! NetworkPolicies: those documents are checked by the unit tests (each a valid object of
//! its kind through k8s-openapi's types; the RBAC rules equal the permission table), and
//! only the served kinds are sent to its API server here.
//!
//! kubectl: the official-client venv's (`HCP_CONFORMANCE_PYTHON`'s directory), else the
//! one on PATH; without either the kubectl half prints `skipped: …`.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::Sim;
use hcp_e2e_tests::{bin, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn manifests(args: &[&str]) -> Output {
    Command::new(bin())
        .args(["deploy", "manifests"])
        .args(args)
        .output()
        .unwrap()
}

fn kubectl() -> Option<PathBuf> {
    if let Some(py) = std::env::var_os("HCP_CONFORMANCE_PYTHON") {
        let k = Path::new(&py).with_file_name("kubectl");
        if k.is_file() {
            return Some(k);
        }
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|k| k.is_file())
}

/// The YAML documents of `yaml` (split at `---` lines), each with its `kind`.
fn documents(yaml: &str) -> Vec<(String, String)> {
    yaml.split("\n---\n")
        .filter_map(|d| {
            let kind = d.lines().find_map(|l| l.strip_prefix("kind: "))?;
            Some((kind.to_string(), d.to_string()))
        })
        .collect()
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (&["--namespace", "Not_A_Name"][..], "--namespace"),
        (&["--replicas", "0"][..], "--replicas"),
        (&["--azure-client-id", "abc"][..], "--azure-client-id"),
        (&["--database-secret=-x"][..], "--database-secret"),
    ] {
        let out = manifests(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn kubectl_accepts_the_manifests() {
    let t0 = Instant::now();
    let out = manifests(&[
        "--namespace",
        "hcp",
        "--replicas",
        "3",
        "--database-secret",
        "hcp-db",
        "--image",
        "registry.example/hcp-workflow:1",
        "--azure-client-id",
        "11111111-2222-3333-4444-555555555555",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let yaml = String::from_utf8(out.stdout).unwrap();
    let docs = documents(&yaml);
    let kinds: Vec<&str> = docs.iter().map(|(k, _)| k.as_str()).collect();
    for k in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Job",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(&k), "{k} missing: {kinds:?}");
    }
    let Some(kubectl) = kubectl() else {
        eprintln!("skipped: no kubectl (the official-client venv's, or on PATH)");
        return;
    };
    let dir = scratch("deploy-manifests");

    // Kustomize takes the output as a resource file, unchanged.
    std::fs::write(dir.join("hcp-workflow.yaml"), &yaml).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- hcp-workflow.yaml\nimages:\n- name: registry.example/hcp-workflow\n  newTag: \"2\"\n",
    )
    .unwrap();
    let k = Command::new(&kubectl)
        .arg("kustomize")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(k.status.success(), "{}", String::from_utf8_lossy(&k.stderr));
    let built = String::from_utf8_lossy(&k.stdout);
    assert_eq!(documents(&built).len(), docs.len(), "{built}");
    assert!(
        built.contains("image: registry.example/hcp-workflow:2"),
        "{built}"
    );

    // The kinds the simulator serves go to its API server (server-side dry run, with
    // kubectl's schema validation).
    let sim = Sim::start(&dir, 0.001);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "sim", "cluster": {"server": sim.base}}],
            "users": [{"name": "admin", "user": {"token": "sim-admin-token"}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "admin"}}],
            "current-context": "sim",
        })
        .to_string(),
    )
    .unwrap();
    let run = |args: &[&str], input: Option<&str>| -> Output {
        let mut c = Command::new(&kubectl);
        c.arg("--kubeconfig").arg(&kubeconfig).args(args);
        if let Some(text) = input {
            let f = dir.join(format!("in-{}.yaml", uuid::Uuid::new_v4().simple()));
            std::fs::write(&f, text).unwrap();
            c.arg("-f").arg(f);
        }
        c.output().unwrap()
    };
    let ns = run(&["create", "namespace", "hcp"], None);
    assert!(
        ns.status.success(),
        "{}",
        String::from_utf8_lossy(&ns.stderr)
    );
    let served = ["Deployment", "Service"];
    let (sent, not_served): (Vec<_>, Vec<_>) =
        docs.iter().partition(|(k, _)| served.contains(&k.as_str()));
    let body: Vec<&str> = sent.iter().map(|(_, d)| d.as_str()).collect();
    let applied = run(
        &["apply", "--dry-run=server", "--validate=strict"],
        Some(&body.join("\n---\n")),
    );
    let stdout = String::from_utf8_lossy(&applied.stdout);
    assert!(
        applied.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    for line in [
        "deployment.apps/hcp-workflow-worker created (server dry run)",
        "deployment.apps/hcp-workflow-ui created (server dry run)",
        "service/hcp-workflow-ui created (server dry run)",
    ] {
        assert!(stdout.contains(line), "{stdout}");
    }
    let skipped: std::collections::BTreeSet<&str> =
        not_served.iter().map(|(k, _)| k.as_str()).collect();
    eprintln!(
        "not sent to the simulator (it does not serve them; checked by the unit tests): {}",
        skipped.into_iter().collect::<Vec<_>>().join(", ")
    );
    sim.stop();
    eprintln!("deploy manifests test: {:?}", t0.elapsed());
}
