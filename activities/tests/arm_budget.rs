//! The ARM budget with the real ARM client against the in-process simulator,
//! whose throttling follows ARM's documented buckets: under a saturated budget, a delete's
//! requests are served before the creates that were waiting first, nothing is throttled by
//! ARM, and a turn too far away comes back to the engine as a soft, throttled error that
//! names the budget.
#![allow(clippy::unwrap_used)]

mod azure_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcp_activities::azure::budget::{self, BudgetConfig};
use hcp_activities::azure::error::ErrorClass;
use hcp_activities::azure::names;
use hcp_runtime::{Phase, StepInfo, in_step};
use hcp_simulator::SimConfig;

use azure_support::SUB;

fn step(workflow: &str, n: u128) -> StepInfo {
    StepInfo {
        run_id: uuid::Uuid::from_u128(n),
        workflow: workflow.into(),
        node: "read".into(),
        phase: Phase::Action,
        progress: 0.1,
    }
}

// One test per process: the budget is the process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_are_served_before_waiting_creates_and_arm_never_throttles() {
    // ARM's documented limits in the simulator; hcp-workflow's share: 4% of 250 reads
    // (10 at once, then 1 per second).
    let (sim, transport) = azure_support::start_with(SimConfig::default()).await;
    let arm = azure_support::arm(&transport).await;
    budget::global().configure(BudgetConfig {
        share: 0.04,
        inline_wait: Duration::from_secs(30),
        ..BudgetConfig::default()
    });
    let rg = names::resource_group_id(SUB, "budget");
    // Spend the burst.
    for _ in 0..10 {
        arm.get_value(&rg, "2021-04-01").await.unwrap();
    }
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (arm, rg, order) = (arm.clone(), rg.clone(), order.clone());
        tasks.push(tokio::spawn(in_step(
            step("create-cluster", i),
            async move {
                arm.get_value(&rg, "2021-04-01").await.unwrap();
                order.lock().unwrap().push(format!("create-{i}"));
            },
        )));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The delete arrives last, behind four creates.
    let (a, r, o) = (arm.clone(), rg.clone(), order.clone());
    let started = tokio::time::Instant::now();
    tasks.push(tokio::spawn(in_step(
        step("delete-cluster", 99),
        async move {
            a.get_value(&r, "2021-04-01").await.unwrap();
            o.lock()
                .unwrap()
                .push(format!("delete after {:?}", started.elapsed()));
        },
    )));
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert!(order[0].starts_with("delete after "), "{order:?}");
    assert_eq!(
        order[1..],
        ["create-0", "create-1", "create-2", "create-3"],
        "creates in their order of arrival"
    );
    let log = sim.requests();
    assert_eq!(
        log.iter().filter(|r| r.status == 429).count(),
        0,
        "ARM never had to throttle"
    );
    let k = budget::Key::of("management.azure.com", &rg, budget::Class::Read).unwrap();
    let stats = budget::global().stats()[&k].clone();
    assert_eq!(stats.used, 15);
    assert!(stats.waited_ms > 3_000, "{stats:?}");

    // A turn further away than the inline wait: a soft, throttled error naming the budget,
    // with the expected turn as its Retry-After.
    budget::global().configure(BudgetConfig {
        share: 0.004, // one read, refilled every 10 s
        inline_wait: Duration::from_millis(500),
        ..BudgetConfig::default()
    });
    arm.get_value(&rg, "2021-04-01").await.unwrap();
    let e = arm.get_value(&rg, "2021-04-01").await.unwrap_err();
    assert_eq!(e.class, ErrorClass::Throttled, "{e:?}");
    assert_eq!(e.code, "ArmBudgetWait");
    assert!(
        e.message.starts_with(&format!(
            "waiting for ARM read budget of subscription {SUB}"
        )),
        "{}",
        e.message
    );
    assert!(e.retry_after.unwrap() >= Duration::from_secs(5), "{e:?}");
    let step_error = hcp_runtime::StepError::from(e);
    assert!(
        hcp_runtime::retry::is_soft(&step_error.kind),
        "uses up no attempt"
    );
}
