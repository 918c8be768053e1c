//! `hcp-workflow kubeconfig cluster/NAME [--output-file F]`, end to end against `simulator
//! serve`: the hosted cluster's admin kubeconfig, as HyperShift publishes it on the
//! management cluster, in one command instead of the four a user copied from "How to reach
//! the cluster".
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, secret_data_at};
use std::os::unix::fs::PermissionsExt;

const FAST: f64 = 0.002;

/// The token of the simulated admin kubeconfig (`token: sim-…`).
fn token(kubeconfig: &str) -> &str {
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap_or_else(|| panic!("no token in the kubeconfig: {kubeconfig}"))
}

/// `hcp-workflow kubeconfig cluster/NAME` writes the admin kubeconfig Secret's content to
/// stdout, `--output-file F` to a mode-0600 file, and the credential appears nowhere else
/// (not in stderr, not in trace-level logs); a cluster that does not exist is exit 2 with
/// its name and nothing on stdout.
#[test]
fn kubeconfig_cluster_name_writes_the_admin_kubeconfig_and_exits_2_for_an_unknown_cluster() {
    let env = Env::new("kubeconfig", FAST);
    let name = "kc";
    let cfg = cluster_file(&env.dir, name, "kc-k0bec0nf", "Public", "");

    // Before the cluster exists: exit 2, naming it, nothing written.
    let (code, out, err) = env.cli(&["kubeconfig", &format!("cluster/{name}")], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!("cluster {name} does not exist")),
        "{err}"
    );

    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // The create's "How to reach the cluster" names the one command.
    assert!(
        out.contains(&format!(
            "kubeconfig cluster/{name} --output-file {name}.kubeconfig"
        )),
        "{out}"
    );

    let published = secret_data_at(
        &env.sim.base,
        "clusters",
        &format!("{name}-admin-kubeconfig"),
        "kubeconfig",
    );
    assert!(published.contains("kind: Config"), "{published}");
    let secret = token(&published).to_string();

    // stdout, with every log on: the kubeconfig there and only there.
    let (code, out, err) = env.cli(
        &["kubeconfig", &format!("cluster/{name}")],
        &[("RUST_LOG", "trace")],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, published);
    assert!(
        !err.contains(&secret),
        "the credential is in the logs: {err}"
    );

    // A file, created with mode 0600 even where one with a looser mode was.
    let file = env.dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&file, "old").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, out, err) = env.cli(
        &[
            "kubeconfig",
            &format!("cluster/{name}"),
            "--output-file",
            &format!("{name}.kubeconfig"),
        ],
        &[("RUST_LOG", "trace")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        !err.contains(&secret),
        "the credential is in the logs: {err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), published);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");

    // Another name: exit 2, naming it.
    let (code, out, err) = env.cli(&["kubeconfig", "cluster/nosuch"], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("cluster nosuch does not exist"), "{err}");
}
