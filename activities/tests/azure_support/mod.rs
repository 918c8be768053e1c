//! Shared helpers of the `azure_*` tests: an in-process simulator on a loopback socket,
//! an ARM client through the simulator transport, detached step contexts, and a loop that
//! drives a durable helper to completion the way the engine would (each attempt sees the
//! last saved checkpoint).
#![allow(clippy::unwrap_used, dead_code, missing_debug_implementations)]

use std::collections::{BTreeMap, HashMap};

use hcp_activities::azure::credential::{AuthMode, Env, credential_with_env};
use hcp_activities::azure::{ArmClient, Cloud, Transport};
use hcp_runtime::action::{CheckpointCell, Phase, StepContext};
use hcp_simulator::{RequestRecord, SimConfig, Simulator};
use serde_json::Value;
use uuid::Uuid;

/// Guest subscription of the tests.
pub const SUB: &str = "11111111-1111-1111-1111-111111111111";
/// A subscription for "foreign" resources.
pub const OTHER_SUB: &str = "33333333-3333-3333-3333-333333333333";
/// Tenant used for credentials.
pub const TENANT: &str = "00000000-0000-0000-0000-0000000000e1";
/// Fake service principal the simulator's Entra accepts.
pub const CLIENT_ID: &str = "11111111-2222-3333-4444-555555555555";

/// Fast config without throttling.
pub fn config() -> SimConfig {
    let mut c = SimConfig::default();
    c.throttle.enabled = false;
    c
}

/// Starts a simulator on 127.0.0.1:0; returns it and the transport reaching it.
pub async fn start_with(cfg: SimConfig) -> (Simulator, Transport) {
    // These tests share one process and one subscription: the process's ARM budget
    //  would make them wait for each other. `arm_budget.rs` tests it alone.
    if !cfg.throttle.enabled {
        hcp_activities::azure::budget::global().configure(
            hcp_activities::azure::budget::BudgetConfig {
                enabled: false,
                ..Default::default()
            },
        );
    }
    let sim = Simulator::new(cfg).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(sim.clone().serve(listener));
    (sim, Transport::Simulator { base })
}

/// [`start_with`] the default test config.
pub async fn start() -> (Simulator, Transport) {
    start_with(config()).await
}

/// Settings of a client-secret service principal.
pub fn sp_env() -> Env {
    Env::from_pairs([
        ("AZURE_CLIENT_ID", CLIENT_ID),
        ("AZURE_CLIENT_SECRET", "not-a-real-secret"),
    ])
}

/// An ARM client authenticated with a (fake) client secret through the simulator.
pub async fn arm(transport: &Transport) -> ArmClient {
    let (cred, mode) = credential_with_env(
        AuthMode::ClientSecret,
        TENANT,
        &Cloud::Public,
        transport,
        &sp_env(),
    )
    .await
    .unwrap();
    assert_eq!(mode, AuthMode::ClientSecret);
    ArmClient::new(&Cloud::Public, cred, transport).unwrap()
}

/// The run id every test context uses.
pub fn run_id() -> Uuid {
    Uuid::from_u128(0x1234)
}

/// A detached context starting from `checkpoint`.
pub fn ctx(checkpoint: Option<Value>) -> (StepContext, CheckpointCell) {
    StepContext::detached(
        run_id(),
        "test-node",
        Phase::Action,
        1,
        checkpoint,
        HashMap::new(),
        BTreeMap::new(),
    )
}

/// The last checkpoint saved into `cell`, if any.
pub fn last_saved(cell: &CheckpointCell) -> Option<Value> {
    cell.lock().unwrap().last().cloned()
}

/// Requests whose method is `method` and whose path (without query) ends with `suffix`
/// (case-insensitive).
pub fn requests<'a>(
    log: &'a [RequestRecord],
    method: &str,
    suffix: &str,
) -> Vec<&'a RequestRecord> {
    let suffix = suffix.to_ascii_lowercase();
    log.iter()
        .filter(|r| r.method == method)
        .filter(|r| {
            r.path
                .split('?')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase()
                .ends_with(&suffix)
        })
        .collect()
}

/// Drives a durable helper to completion like the engine: each attempt gets a fresh
/// context holding the last saved checkpoint; `Pending` waits (capped, test-only) and
/// tries again. Evaluates to the `Done` value; panics on an error or after 300 attempts.
#[macro_export]
macro_rules! drive {
    (|$ctx:ident| $call:expr) => {{
        let mut checkpoint: Option<serde_json::Value> = None;
        let mut attempts = 0;
        loop {
            attempts += 1;
            assert!(attempts < 300, "did not finish after 300 attempts");
            let (c, cell) = azure_support::ctx(checkpoint.clone());
            let $ctx = &c;
            match $call.await.unwrap() {
                hcp_activities::azure::durable::Progress::Done(v) => break v,
                hcp_activities::azure::durable::Progress::Pending { after, .. } => {
                    if let Some(last) = azure_support::last_saved(&cell) {
                        checkpoint = Some(last);
                    }
                    tokio::time::sleep(after.min(std::time::Duration::from_millis(100))).await;
                }
            }
        }
    }};
}

/// The Azure environment of the step tests: public cloud, the test tenant, a client
/// secret, simulated.
pub fn azure() -> hcp_activities::steps::AzureEnv {
    hcp_activities::steps::AzureEnv {
        cloud: Cloud::Public,
        tenant_id: TENANT.into(),
        auth: AuthMode::ClientSecret,
        simulated: true,
    }
}

/// The cluster the step tests work for.
pub fn owner() -> hcp_activities::steps::Owner {
    hcp_activities::steps::Owner {
        cluster: "demo".into(),
        infra_id: "demo-abc12".into(),
    }
}

/// The budget spent: 1% of ARM's buckets (2 writes at once, then one every 10 s; plenty of
/// reads), both writes taken, so the next PUT is held back (`ArmBudgetWait`).
pub async fn spend_write_budget(w: &ArmClient) {
    use hcp_activities::azure::budget::{self, BudgetConfig};
    budget::global().reset();
    budget::global().configure(BudgetConfig {
        share: 0.01,
        inline_wait: std::time::Duration::from_millis(300),
        ..BudgetConfig::default()
    });
    for i in 0..2 {
        let id = hcp_activities::azure::names::resource_group_id(SUB, &format!("spent-{i}"));
        w.put(
            &id,
            "2021-04-01",
            &serde_json::json!({"location": "eastus"}),
        )
        .await
        .unwrap();
    }
}

/// Runs an action like the engine until it is done: each attempt sees the last checkpoint
/// saved (starting from `start`); waits and retryable errors are tried again. Returns the
/// output and the action's last checkpoint.
pub async fn run_action<A: hcp_runtime::Action>(
    a: &A,
    run: Uuid,
    input: &A::Input,
    outputs: &HashMap<String, Value>,
    start: Option<Value>,
) -> (A::Output, Option<Value>)
where
    A::Input: Clone,
{
    let mut checkpoint = start;
    for attempt in 1..300 {
        let (ctx, cell) = StepContext::detached(
            run,
            "node",
            Phase::Action,
            attempt,
            checkpoint.clone(),
            outputs.clone(),
            BTreeMap::new(),
        );
        let r = a.run(&ctx, input.clone()).await;
        if let Some(last) = cell.lock().unwrap().last().cloned() {
            checkpoint = Some(last);
        }
        match r {
            Ok(hcp_runtime::Outcome::Done(o)) => return (o, checkpoint),
            Ok(hcp_runtime::Outcome::Wait { .. }) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            Err(e) if e.retryable => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(e) => panic!("{} failed: {e}", A::NAME),
        }
    }
    panic!("{} did not finish", A::NAME)
}

/// Runs an undo like the engine until it is done, handing it the action's last checkpoint;
/// returns the undo's last checkpoint.
pub async fn undo_action<A: hcp_runtime::Action>(
    a: &A,
    run: Uuid,
    input: &A::Input,
    output: Option<&A::Output>,
    action_checkpoint: Option<Value>,
    outputs: &HashMap<String, Value>,
) -> Option<Value>
where
    A::Input: Clone,
    A::Output: Clone,
{
    let mut checkpoint = None;
    for attempt in 1..300 {
        let (ctx, cell) = StepContext::detached_undo(
            run,
            "node",
            attempt,
            checkpoint.clone(),
            action_checkpoint.clone(),
            outputs.clone(),
            BTreeMap::new(),
        );
        let r = a.undo(&ctx, input.clone(), output.cloned()).await;
        if let Some(last) = cell.lock().unwrap().last().cloned() {
            checkpoint = Some(last);
        }
        match r {
            Ok(hcp_runtime::UndoOutcome::Done) => return checkpoint,
            Ok(hcp_runtime::UndoOutcome::Wait { .. }) => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            Err(e) if e.retryable => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(e) => panic!("undo of {} failed: {e}", A::NAME),
        }
    }
    panic!("undo of {} did not finish", A::NAME)
}
