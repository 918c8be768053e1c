//! A step whose PUT the ARM budget held back (nothing sent) goes back to the
//! engine; its next attempt trusts what it had read (the resource missing) instead of
//! reading it again, and forgets that read durably before its PUT can leave, so an attempt
//! after that (e.g. after a crash once the PUT may have gone out) reads again.
#![allow(clippy::unwrap_used)]

mod azure_support;

use hcp_activities::azure::budget::{self, BudgetConfig};
use hcp_activities::azure::durable::{self, Adopt, EnsureSpec, Ownership, Progress, UNSENT_KEY};
use hcp_activities::azure::names;
use hcp_simulator::SimConfig;
use serde_json::{Value, json};

use azure_support::SUB;

fn last(cell: &hcp_runtime::action::CheckpointCell) -> Option<Value> {
    cell.lock().unwrap().last().cloned()
}

// One test per process: the budget is the process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_held_back_by_the_budget_is_not_read_again_by_the_next_attempt() {
    let (sim, transport) = azure_support::start_with(SimConfig::default()).await;
    let arm = azure_support::arm(&transport).await;
    azure_support::spend_write_budget(&arm).await;
    let id = names::resource_group_id(SUB, "held");
    let spec = EnsureSpec {
        id: id.clone(),
        api: "2021-04-01".into(),
        body: json!({"location": "eastus"}),
        adopt: Adopt::OursOnly,
        tagged: true,
        ownership: Ownership::new("demo", "abc12", &azure_support::run_id().to_string()),
        read_query: &[],
    };
    let held = |m: &str| {
        sim.requests()
            .iter()
            .filter(|r| r.method == m && r.path.split('?').next() == Some(id.as_str()))
            .count()
    };

    // Attempt 1: read (missing), PUT held back by the budget: a soft, throttled error.
    let (ctx, cell) = azure_support::ctx(None);
    let e = durable::ensure(&ctx, &arm, &spec).await.unwrap_err();
    assert_eq!(e.code.as_deref(), Some("ArmBudgetWait"), "{e:?}");
    assert_eq!((held("GET"), held("PUT")), (1, 0));
    let cp = last(&cell).expect("the read was journaled");
    assert!(
        cp[UNSENT_KEY].get(id.to_ascii_lowercase()).is_some(),
        "{cp}"
    );

    // Attempt 2, its turn come: no second read, one PUT; the read is forgotten first.
    budget::global().reset();
    budget::global().configure(BudgetConfig::default());
    let (ctx, cell) = azure_support::ctx(Some(cp));
    let r = durable::ensure(&ctx, &arm, &spec).await.unwrap();
    assert!(matches!(r, Progress::Done(ref e) if e.created), "{r:?}");
    assert_eq!((held("GET"), held("PUT")), (1, 1));
    let saved = cell.lock().unwrap().clone();
    assert!(
        saved
            .first()
            .is_some_and(|c| c[UNSENT_KEY].as_object().is_some_and(|m| m.is_empty())),
        "forgotten before the PUT: {saved:?}"
    );

    // Attempt 3 (as after a crash once the PUT went out): it reads, finds it, adopts.
    let (ctx, _) = azure_support::ctx(saved.last().cloned());
    let r = durable::ensure(&ctx, &arm, &spec).await.unwrap();
    assert!(matches!(r, Progress::Done(ref e) if e.created), "{r:?}");
    assert_eq!((held("GET"), held("PUT")), (2, 1));
}
