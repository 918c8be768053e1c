//! Findings of the adversarial reliability
//! review.
//! - a long-running operation's poll that answers 409 with `InternalServerError` in its
//!   body is a transient failure (the code in the body wins, as in Azure's SDKs), not a
//!   reason to roll the create back.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use serde_json::json;

const FAST: f64 = 0.002;

#[test]
fn an_lro_poll_failing_409_with_internal_server_error_in_its_body_is_retried() {
    let env = Env::new("reliability-lro-code", FAST);
    let cfg = cluster_file(&env.dir, "pi", "pi-lr0c0", "Public", "");
    // The first two polls of network operations answer 409 with a transient code.
    env.sim.fault(
        json!({"method": "GET", "path": "*/providers/Microsoft.Network/locations/*/operations/*",
        "nth": 1, "times": 2, "status": 409, "error_code": "InternalServerError",
        "message": "An internal error occurred while processing the operation"}),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_eq!(
        code, 0,
        "the create rolled back on a transient poll failure:\n{out}\n{err}"
    );
    let hit = env
        .sim
        .requests()
        .iter()
        .filter(|r| r["status"] == 409 && r["method"] == "GET")
        .count();
    assert_eq!(hit, 2, "the fault fired twice");
}
