//! `plan update-cluster` on the real binary, locked by golden files: a cluster
//! created from `examples/cluster.yaml` with `--simulate`, then its file edited — every
//! change, the DAG, the pivots and the undo plan; a file with changes that cannot be made in
//! place (each with why and the fix); an unchanged file (nothing to change). The run id the
//! plan names is replaced by `<run>` (it is random).
#![allow(clippy::unwrap_used)]

mod views_support;

use std::path::Path;
use views_support::{bin, golden};

fn sh(dir: &Path, db: &str, args: &[&str]) -> (i32, String, String) {
    let out = bin()
        .args(["--database", db, "--simulate"])
        .args(args)
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn edit(path: &Path, from: &str, to: &str) {
    let s = std::fs::read_to_string(path).unwrap();
    assert!(s.contains(from), "{from}");
    std::fs::write(path, s.replacen(from, to, 1)).unwrap();
}

#[test]
fn plan_update_cluster_shows_every_change_the_dag_pivots_and_undo_plan() {
    let dir = hcp_runtime::testkit::scratch_dir("plan-update");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in ["cluster.yaml", "pull-secret.json", "id_ed25519.pub"] {
        std::fs::copy(root.join("examples").join(f), dir.join(f)).unwrap();
    }
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    let cfg = dir.join("cluster.yaml");
    let c = "cluster.yaml";
    let (code, out, err) = sh(&dir, &db, &["start", "create-cluster", "--config", c]);
    assert_eq!(code, 0, "{out}{err}");
    let run = out
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_whitespace().next())
        })
        .unwrap()
        .to_string();
    let short = &run[run.len() - 8..];
    let norm = |s: &str| s.replace(short, "<run>");
    // Unchanged: nothing to change.
    let (code, out, _) = sh(&dir, &db, &["plan", "update-cluster", "--config", c]);
    assert_eq!(code, 0);
    golden("plan_update_nothing.txt", &norm(&out));
    // Every kind of change update-cluster makes.
    let original = std::fs::read_to_string(&cfg).unwrap();
    edit(
        &cfg,
        "    replicas: 2\n",
        "    replicas: 3\n    vmSize: Standard_D8s_v5\n",
    );
    edit(&cfg, "    vmSize: Standard_D4s_v5\n", "");
    edit(
        &cfg,
        "nodePools:\n",
        "nodePools:\n  - name: gpu\n    autoScaling: {min: 1, max: 4}\n",
    );
    edit(&cfg, "ocp-release:4.22.0-multi", "ocp-release:4.22.3-multi");
    edit(
        &cfg,
        "  - 12345678-1234-1234-1234-123456789abc\n",
        "  - 12345678-1234-1234-1234-123456789abc\n  - 22222222-3333-4444-5555-666666666666\n",
    );
    let (code, out, err) = sh(&dir, &db, &["plan", "update-cluster", "--config", c]);
    assert_eq!(code, 0, "{err}");
    golden("plan_update.txt", &norm(&out));
    let (code, out, _) = sh(
        &dir,
        &db,
        &["--output", "json", "plan", "update-cluster", "--config", c],
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pivots: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["pivot"].is_string())
        .map(|s| s["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        pivots,
        vec![
            "update-cluster.release.control-plane",
            "update-cluster.release-nodepools.workers"
        ]
    );
    assert_eq!(v["nothing_to_change"], false);
    assert_eq!(
        v["differences"].as_array().unwrap().len(),
        5,
        "{}",
        v["differences"]
    );
    // Changes it cannot make in place: refused, each with why and the fix.
    std::fs::write(&cfg, &original).unwrap();
    edit(&cfg, "location: eastus", "location: westus2");
    edit(&cfg, "    zone: \"1\"\n", "    zone: \"2\"\n");
    let (code, out, _) = sh(&dir, &db, &["plan", "update-cluster", "--config", c]);
    assert_eq!(code, 0);
    golden("plan_update_refused.txt", &norm(&out));
}

/// `plan repair-cluster` of a cluster created from `examples/cluster.yaml` with
/// `--simulate`, locked by a golden file: create-cluster's steps under their names, each
/// resource `[exists: created by run …]` (its step adopts it), the `access` stage with
/// its pivot, the pause policy and what `cancel` undoes. The run id is replaced by `<run>`
/// and the journal's URL by `<journal>`. The file changed: the plan says `start` refuses it
/// and names update-cluster.
#[test]
fn plan_repair_cluster_shows_create_steps_the_access_stage_and_its_pivot() {
    let dir = hcp_runtime::testkit::scratch_dir("plan-repair");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in ["cluster.yaml", "pull-secret.json", "id_ed25519.pub"] {
        std::fs::copy(root.join("examples").join(f), dir.join(f)).unwrap();
    }
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    let cfg = dir.join("cluster.yaml");
    let c = "cluster.yaml";
    // The create only makes what the plan is of: fast (the simulator's time scale, no
    // preflight: the plan runs its own).
    let out = bin()
        .args(["--database", &db, "--simulate", "start", "create-cluster"])
        .args(["--config", c, "--skip-preflight"])
        .env("HCP_SIM_TIME_SCALE", "0.002")
        .env("HCP_POLL_MS", "20")
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_whitespace().next())
        })
        .unwrap()
        .to_string();
    let short = &run[run.len() - 8..];
    let norm = |s: &str| s.replace(short, "<run>").replace(&db, "<journal>");
    let (code, out, err) = sh(&dir, &db, &["plan", "repair-cluster", "--config", c]);
    assert_eq!(code, 0, "{err}");
    golden("plan_repair.txt", &norm(&out));
    let (code, out, _) = sh(
        &dir,
        &db,
        &["--output", "json", "plan", "repair-cluster", "--config", c],
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["workflow"], "repair-cluster");
    assert_eq!(v["on_failure"], "pause");
    assert_eq!(v["applied_by_run"], run.as_str());
    assert_eq!(v["differences"], serde_json::json!([]));
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 68);
    assert!(
        steps
            .iter()
            .all(|s| s["node"].as_str().unwrap().starts_with("create-cluster.")),
        "repair runs create's steps under their names"
    );
    let pivots: Vec<&str> = steps
        .iter()
        .filter(|s| s["pivot"].is_string())
        .map(|s| s["node"].as_str().unwrap())
        .collect();
    assert_eq!(pivots, vec!["create-cluster.access.connections"]);
    // `cancel` after the pivot undoes the node pools only; before it, every step with an
    // undo, in reverse order.
    assert_eq!(
        v["undo"],
        serde_json::json!(["create-cluster.nodepools.workers"])
    );
    let before = v["undo_before_pivot"].as_array().unwrap();
    assert_eq!(before.len(), 62);
    assert_eq!(before[0], "create-cluster.access.pls-visibility");
    assert_eq!(before[61], "create-cluster.identities.persistent-rg");
    // Every Azure resource and Kubernetes object the create made exists: its step adopts it.
    let existing = v["existing"].as_object().unwrap();
    assert_eq!(existing.len(), 71);
    assert!(
        existing
            .values()
            .all(|e| e.as_str().unwrap().starts_with("exists: ")),
        "{existing:?}"
    );
    // A changed file is update-cluster's work: the plan says start refuses it.
    edit(&cfg, "    replicas: 2\n", "    replicas: 3\n");
    let (code, out, _) = sh(&dir, &db, &["plan", "repair-cluster", "--config", c]);
    assert_eq!(code, 0);
    assert!(out.contains("nodePools[workers].replicas: 2 → 3"), "{out}");
    assert!(
        out.contains("`start repair-cluster` refuses this")
            && out.contains("plan update-cluster --config cluster.yaml"),
        "{out}"
    );
}

/// `plan` of the ARO HCP example names the Key Vault, each component's
/// application, service principal, certificate (made in Key Vault), key credential and
/// credentials secret, the data-plane identities and every role; the purge plan names what
/// `--purge-persistent` removes (only this cluster's). Then the example's own quick start
/// (`start create-cluster --simulate --config examples/aro-hcp.yaml`) succeeds.
#[test]
fn plan_and_quick_start_of_the_aro_hcp_example() {
    let dir = hcp_runtime::testkit::scratch_dir("plan-aro");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in ["aro-hcp.yaml", "pull-secret.json", "id_ed25519.pub"] {
        std::fs::copy(root.join("examples").join(f), dir.join(f)).unwrap();
    }
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    let c = "aro-hcp.yaml";
    let (code, out, err) = sh(&dir, &db, &["plan", "create-cluster", "--config", c]);
    assert_eq!(code, 0, "{err}");
    golden("plan_aro_create.txt", &out);
    let (code, out, err) = sh(
        &dir,
        &db,
        &[
            "plan",
            "delete-cluster",
            "--purge-persistent",
            "--config",
            c,
        ],
    );
    assert_eq!(code, 0, "{err}");
    golden("plan_aro_purge.txt", &out);
    let out = bin()
        .args(["--database", &db, "--simulate"])
        .args(["start", "create-cluster", "--config", c])
        .env("NO_COLOR", "1")
        .env("HCP_SIM_TIME_SCALE", "0.002")
        .env("HCP_POLL_MS", "20")
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("succeeded"), "{stdout}");
}
