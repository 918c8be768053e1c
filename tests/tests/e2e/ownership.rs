//! "An undo deletes only what its own run created, untagged children included", end to
//! end: the real `hcp-workflow` binary against a simulator process.
//!
//! create → delete (persistent resources — identities, their federated identity
//! credentials, the OIDC storage account and container, the issuer key — are kept) →
//! create again, and that second create is unwound: once cancelled by an operator after its
//! private endpoint exists (the reported case, where the unwind deleted the credentials
//! the first run had made), once by a permanent failure late in the run. Each unwind must
//! leave exactly what existed before it: the same credentials under the same ids, never
//! deleted and recreated, and no DELETE sent for any of them.
//!
//! Every run has finished before the next one starts.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use hcp_e2e_tests::{Proc, says_run};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Simulated Azure durations × this: a whole create takes a couple of seconds.
const TIME_SCALE: f64 = 0.002;

const FIC: &str = "federatedIdentityCredentials";

/// Inventory id → creation sequence number (a resource deleted and created again
/// under the same id gets a new one).
fn inventory(env: &Env) -> BTreeMap<String, u64> {
    env.sim
        .inventory()
        .iter()
        .filter_map(|i| Some((i["id"].as_str()?.to_string(), i["created_seq"].as_u64()?)))
        .collect()
}

/// DELETE requests the simulator received for a federated credential.
fn fic_deletes(env: &Env) -> Vec<String> {
    env.sim
        .requests()
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .filter(|p| p.contains(FIC))
        .collect()
}

fn fics(inv: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    inv.iter()
        .filter(|(id, _)| id.contains(FIC))
        .map(|(id, seq)| (id.clone(), *seq))
        .collect()
}

/// Asserts that an unwound run left the inventory exactly as it was before the run.
fn assert_unwound_to(env: &Env, before: &BTreeMap<String, u64>, what: &str) {
    let after = inventory(env);
    let fic_before = fics(before);
    let fic_after = fics(&after);
    let missing: Vec<_> = fic_before
        .keys()
        .filter(|id| !fic_after.contains_key(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{what}: federated credentials that existed before the run were deleted: {missing:#?}"
    );
    let recreated: Vec<_> = fic_before
        .iter()
        .filter(|(id, seq)| fic_after.get(*id) != Some(*seq))
        .collect();
    assert!(
        recreated.is_empty(),
        "{what}: federated credentials deleted and created again: {recreated:#?}"
    );
    let deletes = fic_deletes(env);
    assert!(
        deletes.is_empty(),
        "{what}: DELETE sent for federated credentials: {deletes:#?}"
    );
    let gone: Vec<_> = before
        .keys()
        .filter(|id| !after.contains_key(*id))
        .collect();
    let left: Vec<_> = after
        .keys()
        .filter(|id| !before.contains_key(*id))
        .collect();
    let changed: Vec<_> = before
        .iter()
        .filter(|(id, seq)| after.get(*id).is_some_and(|s| s != *seq))
        .collect();
    assert!(
        gone.is_empty() && left.is_empty() && changed.is_empty(),
        "{what}: the unwind did not restore the inventory from before the run\n\
         deleted (existed before): {gone:#?}\nleft behind (created by the run): {left:#?}\n\
         recreated: {changed:#?}"
    );
}

#[test]
fn unwinding_a_second_create_keeps_the_first_runs_federated_credentials() {
    let env = Env::new("ownership", TIME_SCALE);
    let cfg = cluster_file(&env.dir, "omega", "omega-0wn3r", "Private", "");

    // 1. Create, then delete: the persistent resources stay.
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "create failed\nstdout:\n{out}\nstderr:\n{err}");
    let created = fics(&inventory(&env));
    assert!(
        created.len() >= 10,
        "the create made every component's federated credentials: {created:#?}"
    );
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "delete failed\nstdout:\n{out}\nstderr:\n{err}");
    let before = inventory(&env);
    assert_eq!(
        fics(&before),
        created,
        "delete-cluster keeps the federated credentials (persistent)"
    );
    assert!(
        before
            .keys()
            .any(|id| id.contains("userAssignedIdentities") && !id.contains(FIC)),
        "identities are persistent"
    );

    // 2. Create again; cancel it once its private endpoint exists. The first A-record PUT
    //    (the step after the private endpoint) is throttled with a long Retry-After, so
    //    the run sits in a durable retry wait — no attempt in flight — when the cancel
    //    lands, and cannot finish before it.
    env.sim.clear_requests();
    env.sim.fault(
        json!({"method": "PUT", "resource_type": "Microsoft.Network/privateDnsZones/A",
        "status": 429, "error_code": "TooManyRequests", "retry_after": 30, "times": 1}),
    );
    let cfg_path = cfg.to_str().unwrap();
    let mut create = Proc::spawn(
        &env.dir,
        &env.args(&["start", "create-cluster", "--config", cfg_path]),
        &[("HCP_POLL_MS", "20")],
    );
    let line = create
        .wait_line("run ", Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the second create did not start: {:?}", create.seen));
    let run_id = line.split_whitespace().nth(1).unwrap().to_string();
    let end = Instant::now() + Duration::from_secs(120);
    while !env.sim.requests().iter().any(|r| {
        r["method"] == "PUT"
            && r["status"] == 429
            && r["path"].as_str().is_some_and(|p| p.contains("/A/"))
    }) {
        assert!(
            Instant::now() < end,
            "the second create never reached its DNS records"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        inventory(&env)
            .keys()
            .any(|id| id.contains("/privateEndpoints/omega-omega-0wn3r-pe")),
        "the private endpoint exists when the run is cancelled"
    );
    let (code, out, err) = env.cli(
        &[
            "cancel",
            &run_id,
            "--reason",
            "ownership test: cancel after the PE",
        ],
        &[],
    );
    assert_eq!(code, 0, "cancel refused\nstdout:\n{out}\nstderr:\n{err}");
    let (code, lines, err) = create.finish(Duration::from_secs(180));
    let stdout = lines.join("\n");
    assert!(
        says_run(&stdout, "was cancelled and unwound"),
        "the second create was cancelled and unwound (exit {code:?})\nstdout:\n{stdout}\nstderr:\n{err}"
    );
    env.sim.clear_faults();
    assert_unwound_to(&env, &before, "cancelled second create");

    // 3. Create again, failing for good late (after its DNS records): same guarantee.
    env.sim.clear_requests();
    let (code, out, err) = env.start(
        "create-cluster",
        &cfg,
        &[],
        &[("HCP_INJECT_FAIL", "create-cluster.pe-dns.records")],
    );
    assert!(
        code == 1 && says_run(&out, "rolled back"),
        "the third create failed and rolled back (exit {code})\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert_unwound_to(&env, &before, "failed third create");

    // 4. The credentials still work for a create that succeeds: they are adopted as is.
    env.sim.clear_requests();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(
        code, 0,
        "final create failed\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!(
        fics(&inventory(&env)),
        created,
        "the same credentials, never rewritten"
    );
    let fic_puts: Vec<Value> = env
        .sim
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "PUT" && r["path"].as_str().is_some_and(|p| p.contains(FIC)))
        .collect();
    assert!(
        fic_puts.is_empty(),
        "existing credentials are not re-PUT: {fic_puts:#?}"
    );
    env.sim.stop();
}
