//! Every run records who started it (the identity rule of
//! operator commands; in CI, the job's URL), the absolute config path, the file's SHA-256
//! and the binary's version; `list`, `show`, `history` and their JSON show it, and the
//! history starts with "run created by …".
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use hcp_e2e_tests::{document, items};

const FAST: f64 = 0.002;

#[test]
fn every_run_records_who_started_it_with_which_file_and_binary() {
    let env = Env::new("audit-start", FAST);
    let cfg = cluster_file(&env.dir, "nu", "nu-4ud1t", "Private", "");
    // Started from the scratch directory with a relative path: the absolute one is kept.
    let rel = cfg.file_name().unwrap().to_str().unwrap();
    let ci = [
        ("USER", "alice"),
        ("HOSTNAME", "bastion"),
        ("GITHUB_SERVER_URL", "https://github.com"),
        ("GITHUB_REPOSITORY", "acme/fleet"),
        ("GITHUB_RUN_ID", "4242"),
    ];
    let (code, out, err) = env.start(
        "create-cluster",
        std::path::Path::new(rel),
        &["--detach"],
        &ci,
    );
    assert_eq!(code, 0, "{out}{err}");
    let run = out
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let who = "alice@bastion (CI job https://github.com/acme/fleet/actions/runs/4242)";
    let sum = std::process::Command::new("sha256sum")
        .arg(&cfg)
        .output()
        .unwrap();
    let digest = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let abs = std::fs::canonicalize(&cfg).unwrap();

    let (_, shown, _) = env.cli(&["--output", "json", "show", &run], &[]);
    let v = document(&shown, "Run");
    assert_eq!(v["labels"]["started-by"], who, "{shown}");
    assert_eq!(v["labels"]["config"], abs.to_str().unwrap(), "{shown}");
    assert_eq!(v["labels"]["config-sha256"], digest.as_str(), "{shown}");
    assert_eq!(v["labels"]["version"], env!("CARGO_PKG_VERSION"), "{shown}");

    let (_, text, _) = env.cli(&["show", &run], &[]);
    assert!(text.contains(&format!("by {who}")), "{text}");
    assert!(text.contains(&format!("sha256 {digest}")), "{text}");

    let (_, list, _) = env.cli(&["--output", "json", "list"], &[]);
    let rows = items(&list, "RunList");
    assert_eq!(rows[0]["started_by"], who, "{list}");
    let (_, list, _) = env.cli(&["list"], &[]);
    assert!(
        list.lines().next().unwrap().contains("STARTED BY"),
        "{list}"
    );
    assert!(list.contains("alice@bastion"), "{list}");

    let (_, hist, _) = env.cli(&["--output", "json", "history", &run], &[]);
    let first = &items(&hist, "RunHistory")[0];
    assert_eq!(first["kind"], "run_created", "{hist}");
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("run created by {who} at ")),
        "{hist}"
    );
    assert_eq!(first["data"]["config_sha256"], digest.as_str(), "{hist}");
    let (_, hist, _) = env.cli(&["history", &run], &[]);
    assert!(hist.contains("run created by alice@bastion"), "{hist}");

    // Operator commands follow the same rule.
    let (code, _, err) = env.cli(&["cancel", &run, "--reason", "audit test"], &ci);
    assert_eq!(code, 0, "{err}");
    let (_, hist, _) = env.cli(&["history", &run], &[]);
    assert!(hist.contains(who), "{hist}");
}
