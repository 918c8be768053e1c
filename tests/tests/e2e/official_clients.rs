//! The official-client conformance suite: `tests/official/*.py` drives a real
//! `hcp-workflow simulator serve` process with the Azure SDK for Python (azure-identity,
//! azure-mgmt-*, azure-storage-blob, azure-keyvault-certificates, azure-keyvault-secrets),
//! Microsoft Graph REST, the `kubernetes` Python client and kubectl, and each row asserts
//! what the real service does. The Key Vault and Graph rows
//! (`test_keyvault_graph.py`) run as their own test on their own simulator.
//!
//! The clients live in a virtualenv made from `tests/official/requirements.txt` (`.ci/run`
//! makes it in `$CARGO_TARGET_DIR/conformance-venv` and sets `HCP_CONFORMANCE_PYTHON` to its
//! python). Without it each test prints `skipped: …` and passes, unless
//! `HCP_REQUIRE_CONFORMANCE=1` (set by `.ci/run`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use hcp_e2e_tests::cluster::Sim;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> Result<PathBuf, String> {
    match std::env::var_os("HCP_CONFORMANCE_PYTHON") {
        Some(p) if Path::new(&p).is_file() => Ok(PathBuf::from(p)),
        Some(p) => Err(format!(
            "HCP_CONFORMANCE_PYTHON={} is not a file",
            p.to_string_lossy()
        )),
        None => Err(
            "HCP_CONFORMANCE_PYTHON not set (make the venv from tests/official/requirements.txt)"
                .into(),
        ),
    }
}

/// The Key Vault and Microsoft Graph rows: their own module and simulator.
const KEYVAULT_GRAPH: &str = "test_keyvault_graph.py";

/// Runs pytest on `targets` (paths under `tests/official`, plus pytest options) against a
/// fresh simulator; returns `(tests, failures, errors, skipped)` after asserting that pytest
/// passed. `None`: skipped (no venv and `HCP_REQUIRE_CONFORMANCE` unset).
fn run_suite(tag: &str, targets: &[String]) -> Option<(u64, u64, u64, u64)> {
    let py = match python() {
        Ok(p) => p,
        Err(why) => {
            if std::env::var("HCP_REQUIRE_CONFORMANCE").is_ok_and(|v| v == "1") {
                panic!("HCP_REQUIRE_CONFORMANCE=1 but {why}");
            }
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let dir = hcp_e2e_tests::scratch(tag);
    // `Sim` passes the shared CRDs and the Azure specs (request bodies are validated).
    let sim = Sim::start_with(&dir, 0.001, &[]);
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("official");
    let junit = dir.join("junit.xml");
    let out = Command::new(&py)
        .args(["-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"])
        .arg(format!("--junitxml={}", junit.display()))
        .args(targets)
        .current_dir(&suite)
        .env("HCP_SIM_URL", &sim.base)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    let attr = |name: &str| -> u64 {
        xml.split(&format!(" {name}=\""))
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    let (tests, failures, errors, skipped) = (
        attr("tests"),
        attr("failures"),
        attr("errors"),
        attr("skipped"),
    );
    eprintln!(
        "{tag}: {} passed, {failures} failed, {errors} errors, {skipped} skipped (of {tests})",
        tests.saturating_sub(failures + errors + skipped)
    );
    sim.stop();
    assert!(
        out.status.success() && tests > 0 && failures == 0 && errors == 0,
        "pytest exited {:?}\n{stdout}\n{stderr}",
        out.status.code()
    );
    Some((tests, failures, errors, skipped))
}

#[test]
fn official_clients_conform() {
    // Everything but the Key Vault / Graph module, which `keyvault_and_graph_conform` runs.
    run_suite(
        "official-clients",
        &[".".into(), format!("--ignore={KEYVAULT_GRAPH}")],
    );
}

/// azure-mgmt-keyvault, azure-keyvault-certificates and azure-keyvault-secrets (challenge
/// auth, the certificate poller, PEM secrets, soft delete, RBAC) and Microsoft Graph REST
/// with an azure-identity token, against the simulated Key Vault and Graph.
#[test]
fn keyvault_and_graph_conform() {
    if let Some((_, _, _, skipped)) = run_suite("official-keyvault-graph", &[KEYVAULT_GRAPH.into()])
    {
        assert_eq!(skipped, 0, "no Key Vault / Graph row may be skipped");
    }
}
