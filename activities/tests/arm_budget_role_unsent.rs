//! A role assignment whose PUT the ARM budget held back (nothing sent) is not
//! read again by the step's next attempt, through the real `azure.role-assignment.ensure`
//! action: what the held-back attempt knew (the assignment missing: its principal new, or
//! read missing) is journaled (`durable::UNSENT_KEY`), trusted by the next attempt, and
//! forgotten durably before its PUT can leave — so an attempt after that (as after a crash
//! once the PUT may have gone out) reads again, and the ledger is what a read would give.
#![allow(clippy::unwrap_used)]

mod azure_support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use hcp_activities::azure::budget::{self, BudgetConfig};
use hcp_activities::azure::durable::UNSENT_KEY;
use hcp_activities::azure::models::{API_AUTHORIZATION, API_MSI};
use hcp_activities::azure::roles;
use hcp_activities::azure::{Transport, names};
use hcp_activities::steps::arm::{
    CHILDREN_KEY, EnsureIdentity, EnsureResourceGroup, ResourceInput,
};
use hcp_activities::steps::identity::{EnsureRoleAssignment, RoleInput};
use hcp_activities::steps::{Clients, Reach};
use hcp_runtime::ledger::LedgerAction;
use hcp_runtime::{Action, Outcome, Phase, StepContext, StepError};
use hcp_simulator::Simulator;
use serde_json::{Value, json};
use uuid::Uuid;

use azure_support::{SUB, azure, owner};

fn resource(resource_type: &str, id: &str, api: &str) -> ResourceInput {
    ResourceInput {
        azure: azure(),
        owner: owner(),
        resource_type: resource_type.into(),
        id: id.into(),
        api: api.into(),
        body: json!({"location": "eastus"}),
        tagged: true,
        persistent: false,
        byo: false,
        shared: false,
        parent: None,
    }
}

type Attempt<O> = (Result<Outcome<O>, StepError>, Vec<Value>);

/// One attempt of `a`, as the engine runs it: starting from `checkpoint`, returning its
/// result and every checkpoint it saved, in order.
async fn attempt<A: Action>(
    a: &A,
    input: &A::Input,
    outputs: &HashMap<String, Value>,
    checkpoint: Option<Value>,
) -> Attempt<A::Output>
where
    A::Input: Clone,
{
    let (ctx, cell) = StepContext::detached(
        Uuid::from_u128(0xB001),
        "node",
        Phase::Action,
        1,
        checkpoint,
        outputs.clone(),
        BTreeMap::new(),
    );
    let r = a.run(&ctx, input.clone()).await;
    let saved = cell.lock().unwrap().clone();
    (r, saved)
}

/// Runs `a` until done (setup only: the budget is open).
async fn done<A: Action>(a: &A, input: &A::Input) -> A::Output
where
    A::Input: Clone,
{
    let mut checkpoint = None;
    for _ in 0..100 {
        let (r, saved) = attempt(a, input, &HashMap::new(), checkpoint.clone()).await;
        checkpoint = saved.last().cloned().or(checkpoint);
        match r {
            Ok(Outcome::Done(o)) => return o,
            Ok(Outcome::Wait { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) if e.retryable => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{} failed: {e}", A::NAME),
        }
    }
    panic!("{} did not finish", A::NAME)
}

fn count(sim: &Simulator, method: &str, id: &str) -> usize {
    azure_support::requests(&sim.requests(), method, id).len()
}

fn recorded(cp: &Value, id: &str) -> bool {
    cp[UNSENT_KEY].get(id.to_ascii_lowercase()).is_some()
}

fn open_budget() {
    budget::global().reset();
    budget::global().configure(BudgetConfig::default());
}

/// Attempts 1–3 of one assignment: held back (`gets_first` reads: 0 for a principal this
/// run created, 1 otherwise), then written without a read, then (as after a crash once
/// the PUT went out) read and found.
async fn held_back_then_trusted_then_read_again(
    sim: &Simulator,
    arm: &hcp_activities::azure::ArmClient,
    role: &EnsureRoleAssignment,
    input: &RoleInput,
    outputs: &HashMap<String, Value>,
    gets_first: usize,
) {
    let spec_id = {
        let name = names::role_assignment_name(&owner().infra_id, &input.component, &input.scope);
        names::role_assignment_id(&input.scope, &name)
    };
    let n = |m: &str| count(sim, m, &spec_id);

    // Attempt 1: the PUT is held back by the budget: a soft, throttled error; what the
    // attempt knew is journaled with the intent.
    azure_support::spend_write_budget(arm).await;
    let (r, saved) = attempt(role, input, outputs, None).await;
    let e = r.expect_err("held back");
    assert_eq!(e.code.as_deref(), Some("ArmBudgetWait"), "{e:?}");
    assert_eq!((n("GET"), n("PUT")), (gets_first, 0));
    let cp = saved.last().cloned().expect("journaled");
    assert!(recorded(&cp, &spec_id), "{cp}");
    assert!(
        cp[CHILDREN_KEY]["creating"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == &json!(spec_id))),
        "{cp}"
    );

    // Attempt 2, its turn come: no read, one PUT; the record is forgotten (durably) first.
    open_budget();
    let (r, saved) = attempt(role, input, outputs, Some(cp)).await;
    let Ok(Outcome::Done(out)) = r else {
        panic!("{r:?}")
    };
    assert_eq!((n("GET"), n("PUT")), (gets_first, 1));
    assert_eq!(
        out.ledger[0].action,
        LedgerAction::Created,
        "{out:?} {spec_id}"
    );
    assert!(
        saved.first().is_some_and(|c| !recorded(c, &spec_id)),
        "forgotten before the PUT: {saved:?}"
    );

    // Attempt 3, from the checkpoint saved before the PUT (a crash once it may have gone
    // out): it reads, finds the assignment as specified, writes nothing; still ours.
    let (r, _) = attempt(role, input, outputs, saved.last().cloned()).await;
    let Ok(Outcome::Done(out)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(out.ledger[0].action, LedgerAction::Created);
    assert_eq!((n("GET"), n("PUT")), (gets_first + 1, 1));
}

// One test per process: the budget is the process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_assignment_held_back_by_the_budget_is_not_read_again_by_the_next_attempt() {
    let (sim, transport) = azure_support::start().await;
    let arm = azure_support::arm(&transport).await;
    let Transport::Simulator { base } = transport else {
        panic!("simulator transport expected")
    };
    let clients = Clients::new(Reach::Simulator(base));
    open_budget();
    let rg = names::resource_group_id(SUB, "demo-persistent");
    done(
        &EnsureResourceGroup(clients.clone()),
        &resource("Microsoft.Resources/resourceGroups", &rg, "2021-04-01"),
    )
    .await;
    let scope = names::resource_group_id(SUB, "demo-managed");
    done(
        &EnsureResourceGroup(clients.clone()),
        &resource("Microsoft.Resources/resourceGroups", &scope, "2021-04-01"),
    )
    .await;
    let ident =
        format!("{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/demo-disk");
    let out = done(
        &EnsureIdentity(clients.clone()),
        &resource(
            "Microsoft.ManagedIdentity/userAssignedIdentities",
            &ident,
            API_MSI,
        ),
    )
    .await;
    let created = serde_json::to_value(&out).unwrap();
    // The identity as a later run sees it (adopted): its assignments are read first.
    let mut adopted = created.clone();
    for r in adopted["ledger"].as_array_mut().unwrap() {
        r["action"] = json!("adopted");
    }
    let role = EnsureRoleAssignment(clients.clone());
    // Distinct roles: the same principal, role and scope under two names would be a twin
    // (`RoleAssignmentExists`), adopted.
    let input = |component: &str, role: &str| RoleInput {
        azure: azure(),
        owner: owner(),
        component: component.into(),
        scope: scope.clone(),
        role: role.into(),
        identity: serde_json::from_value(json!({"$ref": "ident"})).unwrap(),
        scope_from: None,
        name_seed: None,
    };

    // A principal this run created: no read at all, before or after the hold.
    let outputs = HashMap::from([("ident".to_string(), created)]);
    held_back_then_trusted_then_read_again(
        &sim,
        &arm,
        &role,
        &input("disk", names::roles::CONTRIBUTOR),
        &outputs,
        0,
    )
    .await;
    // An adopted principal: one read (missing) before the hold, none after it.
    let adopted = HashMap::from([("ident".to_string(), adopted)]);
    held_back_then_trusted_then_read_again(
        &sim,
        &arm,
        &role,
        &input("file", names::roles::DISK),
        &adopted,
        1,
    )
    .await;

    // What the held-back attempt knew no longer holds when its turn comes: an assignment
    // with our name for another principal (stale) appeared. The trusted write is refused
    // (`RoleAssignmentUpdateNotPermitted`, nothing written): read, delete, write, ours.
    let stale_input = input("network", names::roles::NETWORK);
    let principal = out.prop("principalId").unwrap().to_string();
    let name = names::role_assignment_name(&owner().infra_id, "network", &scope);
    let stale_id = names::role_assignment_id(&scope, &name);
    azure_support::spend_write_budget(&arm).await;
    let (r, saved) = attempt(&role, &stale_input, &outputs, None).await;
    assert_eq!(
        r.err().and_then(|e| e.code).as_deref(),
        Some("ArmBudgetWait")
    );
    let cp = saved.last().cloned().unwrap();
    assert!(recorded(&cp, &stale_id), "{cp}");
    open_budget();
    let other = "aaaaaaaa-0000-0000-0000-0000000000ff";
    arm.put(
        &stale_id,
        API_AUTHORIZATION,
        &json!({"properties": {
            "roleDefinitionId": roles::role_definition_id(&scope, names::roles::NETWORK),
            "principalId": other,
            "principalType": "ServicePrincipal",
        }}),
    )
    .await
    .unwrap();
    let (r, _) = attempt(&role, &stale_input, &outputs, Some(cp)).await;
    let Ok(Outcome::Done(done)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(done.ledger[0].action, LedgerAction::Created);
    assert_eq!(count(&sim, "DELETE", &stale_id), 1);
    let now = arm
        .get_value(&stale_id, API_AUTHORIZATION)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now["properties"]["principalId"], json!(principal));
}
