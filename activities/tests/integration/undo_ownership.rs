//! "An undo deletes only what its own run created, untagged children included", against an
//! in-process simulator, through the real step actions (`run` and `undo` as the engine calls
//! them, with detached contexts carrying the checkpoints the engine would hand over):
//!
//! - federated identity credentials and private DNS record sets that existed before a run
//!   survive that run's undo; those it created are deleted; a crash between journaling a
//!   child and its PUT is covered either way; an undo run twice is harmless; a run of an
//!   older binary (no journal) deletes only what its output proves it created;
//! - a role assignment that existed before the run (a re-run create of a live cluster)
//!   survives its undo;
//! - an untagged container that existed before the run survives the undo of a run that
//!   failed before recording an output;
//! - Kubernetes Secrets adopted by a later run are deleted neither by the earlier run's
//!   undo nor by the later one's;
//! - the persistent resource group is shared: any cluster adopts it,
//!   a failed create's undo and a purge delete it only when hcp-workflow made it and nothing
//!   else is inside, a user's group is never deleted, and another cluster's own group is
//!   refused before anything is written.
#![allow(clippy::unwrap_used)]

use crate::azure_support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hcp_activities::azure::models::API_AUTHORIZATION;
use hcp_activities::azure::models::{API_MSI, API_PRIVATE_DNS, API_STORAGE};
use hcp_activities::azure::names;
use hcp_activities::azure::{ArmClient, Transport};
use hcp_activities::steps::arm::{
    CHILDREN_KEY, DeleteIdentity, DeleteInput, DeleteResourceGroup, EnsureContainer, EnsureDnsZone,
    EnsureIdentity, EnsureResourceGroup, EnsureStorageAccount, ResourceInput, UNDO_LEDGER_KEY,
};
use hcp_activities::steps::cluster::{EnsureClusterSecrets, OBJECTS_KEY, SecretsInput};
use hcp_activities::steps::identity::{
    EnsureFederatedCredentials, EnsureRoleAssignment, FederatedInput, RoleInput, Subject,
};
use hcp_activities::steps::private_link::{ARecordInput, EnsureARecords};
use hcp_activities::steps::{Clients, MgmtEnv, Owner, Reach};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Phase, StepContext, UndoOutcome};
use hcp_simulator::Simulator;
use serde_json::{Value, json};
use uuid::Uuid;

use azure_support::{SUB, azure, owner, run_action, undo_action};

const ISSUER: &str = "https://demooidc.blob.core.windows.net/demo";

struct World {
    sim: Simulator,
    arm: ArmClient,
    clients: Arc<Clients>,
    base: String,
}

async fn world() -> World {
    let (sim, transport) = azure_support::start().await;
    let arm = azure_support::arm(&transport).await;
    let Transport::Simulator { base } = transport else {
        panic!("simulator transport expected")
    };
    World {
        sim,
        arm,
        clients: Clients::new(Reach::Simulator(base.clone())),
        base,
    }
}

fn run(n: u128) -> Uuid {
    Uuid::from_u128(0xA000 + n)
}

fn resource(resource_type: &str, id: &str, api: &str, body: Value) -> ResourceInput {
    ResourceInput {
        azure: azure(),
        owner: owner(),
        resource_type: resource_type.into(),
        id: id.into(),
        api: api.into(),
        body,
        tagged: true,
        persistent: false,
        byo: false,
        shared: false,
        parent: None,
    }
}

fn rg_id(rg: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}")
}

async fn ensure_rg(w: &World, rg: &str) -> String {
    let id = rg_id(rg);
    let input = resource(
        "Microsoft.Resources/resourceGroups",
        &id,
        "2021-04-01",
        json!({"location": "eastus"}),
    );
    run_action(
        &EnsureResourceGroup(w.clients.clone()),
        run(0),
        &input,
        &HashMap::new(),
        None,
    )
    .await;
    id
}

/// An identity (made by run 0) and its output, as the credential node sees it.
async fn identity(w: &World, name: &str) -> (String, HashMap<String, Value>) {
    let rg = ensure_rg(w, "demo-persistent").await;
    let id = format!("{rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}");
    let input = resource(
        "Microsoft.ManagedIdentity/userAssignedIdentities",
        &id,
        API_MSI,
        json!({"location": "eastus"}),
    );
    let (out, _) = run_action(
        &EnsureIdentity(w.clients.clone()),
        run(0),
        &input,
        &HashMap::new(),
        None,
    )
    .await;
    let outputs = HashMap::from([("ident".to_string(), serde_json::to_value(out).unwrap())]);
    (id, outputs)
}

fn fic_input(names: &[&str]) -> FederatedInput {
    FederatedInput {
        azure: azure(),
        owner: owner(),
        identity: serde_json::from_value(json!({"$ref": "ident"})).unwrap(),
        issuer: ISSUER.into(),
        subjects: names
            .iter()
            .map(|n| Subject {
                name: format!("demo-{n}"),
                subject: format!("system:serviceaccount:openshift-{n}:{n}"),
            })
            .collect(),
        persistent: true,
        converge: false,
    }
}

fn fic_id(identity: &str, n: &str) -> String {
    format!("{identity}/federatedIdentityCredentials/demo-{n}")
}

/// The simulator's creation sequence number of `id` (ARM ids compare case-insensitively);
/// `None` when it does not exist. A resource deleted and created again gets a new one.
fn created_seq(sim: &Simulator, id: &str) -> Option<u64> {
    sim.inventory()
        .into_iter()
        .find(|i| i.id.eq_ignore_ascii_case(id))
        .map(|i| i.created_seq)
}

/// The identity's output as a later run sees it: that run adopted the identity (only the
/// run that created it records it created, and only that run's children of a new identity
/// skip their read before the write).
fn as_later_run(outputs: &HashMap<String, Value>) -> HashMap<String, Value> {
    let mut later = outputs.clone();
    for v in later.values_mut() {
        if let Some(Value::Array(ledger)) = v.get_mut("ledger") {
            for r in ledger {
                if r.get("action") == Some(&json!("created")) {
                    r["action"] = json!("adopted");
                }
            }
        }
    }
    later
}

fn deletes_of(sim: &Simulator, id: &str) -> usize {
    azure_support::requests(&sim.requests(), "DELETE", id).len()
}

fn action_of(ledger: &[LedgerRecord], id: &str) -> Option<LedgerAction> {
    ledger
        .iter()
        .find(|r| r.id.eq_ignore_ascii_case(id))
        .map(|r| r.action)
}

fn undo_ledger(undo_checkpoint: &Option<Value>) -> Vec<LedgerRecord> {
    undo_checkpoint
        .as_ref()
        .map(hcp_runtime::ledger::records_in)
        .unwrap_or_default()
}

fn journaled(checkpoint: &Option<Value>) -> Vec<String> {
    checkpoint
        .as_ref()
        .and_then(|c| c.pointer(&format!("/{CHILDREN_KEY}/creating")))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn federated_credentials_that_existed_before_the_run_survive_its_undo() {
    let w = world().await;
    let (ident, outputs) = identity(&w, "demo-disk").await;
    let fic = EnsureFederatedCredentials(w.clients.clone());

    // Run A creates `one` (and succeeds: it never unwinds).
    let (out_a, cp_a) = run_action(&fic, run(1), &fic_input(&["one"]), &outputs, None).await;
    let one = fic_id(&ident, "one");
    assert_eq!(action_of(&out_a.ledger, &one), Some(LedgerAction::Created));
    assert_eq!(journaled(&cp_a), vec![one.clone()]);
    let one_seq = created_seq(&w.sim, &one).unwrap();

    // Run B finds `one` and creates `two`.
    let outputs = as_later_run(&outputs);
    let input_b = fic_input(&["one", "two"]);
    let (out_b, cp_b) = run_action(&fic, run(2), &input_b, &outputs, None).await;
    let two = fic_id(&ident, "two");
    assert_eq!(action_of(&out_b.ledger, &one), Some(LedgerAction::Adopted));
    assert_eq!(action_of(&out_b.ledger, &two), Some(LedgerAction::Created));
    assert_eq!(
        journaled(&cp_b),
        vec![two.clone()],
        "only the missing child is journaled"
    );

    // B unwinds (it succeeded, or failed later: the undo gets its output either way).
    let undo_cp = undo_action(&fic, run(2), &input_b, Some(&out_b), cp_b.clone(), &outputs).await;
    assert_eq!(
        created_seq(&w.sim, &one),
        Some(one_seq),
        "the credential that existed before run B is untouched"
    );
    assert_eq!(deletes_of(&w.sim, &one), 0, "no DELETE was sent for it");
    assert!(w.arm.get_value(&two, API_MSI).await.unwrap().is_none());
    let ul = undo_ledger(&undo_cp);
    assert_eq!(action_of(&ul, &one), Some(LedgerAction::Kept));
    assert_eq!(action_of(&ul, &two), Some(LedgerAction::Deleted));

    // Undo twice (a resumed undo with its checkpoint, and a fresh one): harmless.
    let again = undo_action(&fic, run(2), &input_b, Some(&out_b), cp_b.clone(), &outputs).await;
    assert_eq!(
        action_of(&undo_ledger(&again), &one),
        Some(LedgerAction::Kept)
    );
    let (ctx, _) = StepContext::detached_undo(
        run(2),
        "node",
        2,
        undo_cp,
        cp_b,
        outputs.clone(),
        BTreeMap::new(),
    );
    assert_eq!(
        fic.undo(&ctx, input_b.clone(), Some(out_b)).await.unwrap(),
        UndoOutcome::Done
    );
    assert_eq!(created_seq(&w.sim, &one), Some(one_seq));
    assert_eq!(deletes_of(&w.sim, &one), 0);
}

#[tokio::test]
async fn a_crash_between_journal_and_put_is_undone_either_way() {
    let w = world().await;
    let (ident, outputs) = identity(&w, "demo-file").await;
    let fic = EnsureFederatedCredentials(w.clients.clone());
    let (old, landed, lost) = (
        fic_id(&ident, "old"),
        fic_id(&ident, "landed"),
        fic_id(&ident, "lost"),
    );
    // `old` existed before the run.
    run_action(&fic, run(1), &fic_input(&["old"]), &outputs, None).await;
    let old_seq = created_seq(&w.sim, &old).unwrap();
    let outputs = as_later_run(&outputs);

    // Run C journaled `landed` and `lost`, then crashed: `landed`'s PUT reached Azure,
    // `lost`'s never left. Simulate the PUT that landed.
    let body = |n: &str| json!({"properties": {"issuer": ISSUER, "subject": format!("system:serviceaccount:openshift-{n}:{n}"), "audiences": ["openshift"]}});
    w.arm.put(&landed, API_MSI, &body("landed")).await.unwrap();
    let crashed = json!({CHILDREN_KEY: {"creating": [landed, lost]}});

    // The undo (no output: the action never finished) deletes the child that exists and
    // tolerates the one that does not; `old` is not listed and stays.
    let input = fic_input(&["old", "landed", "lost"]);
    let undo_cp = undo_action(&fic, run(3), &input, None, Some(crashed.clone()), &outputs).await;
    assert!(w.arm.get_value(&landed, API_MSI).await.unwrap().is_none());
    assert!(w.arm.get_value(&lost, API_MSI).await.unwrap().is_none());
    assert_eq!(created_seq(&w.sim, &old), Some(old_seq));
    let ul = undo_ledger(&undo_cp);
    assert_eq!(action_of(&ul, &landed), Some(LedgerAction::Deleted));
    assert_eq!(action_of(&ul, &lost), Some(LedgerAction::Gone));
    assert_eq!(action_of(&ul, &old), Some(LedgerAction::Kept));

    // The same crash, resumed forward instead: the next attempt finds `landed` listed and
    // existing — ours — and creates `lost`; both are recorded created, `old` adopted.
    w.arm.put(&landed, API_MSI, &body("landed")).await.unwrap();
    let (out, cp) = run_action(&fic, run(3), &input, &outputs, Some(crashed)).await;
    assert_eq!(action_of(&out.ledger, &landed), Some(LedgerAction::Created));
    assert_eq!(action_of(&out.ledger, &lost), Some(LedgerAction::Created));
    assert_eq!(action_of(&out.ledger, &old), Some(LedgerAction::Adopted));
    undo_action(&fic, run(3), &input, Some(&out), cp, &outputs).await;
    assert!(w.arm.get_value(&landed, API_MSI).await.unwrap().is_none());
    assert!(w.arm.get_value(&lost, API_MSI).await.unwrap().is_none());
    assert_eq!(created_seq(&w.sim, &old), Some(old_seq));
}

#[tokio::test]
async fn without_a_journal_only_what_the_output_proves_is_deleted() {
    let w = world().await;
    let (ident, outputs) = identity(&w, "demo-net").await;
    let fic = EnsureFederatedCredentials(w.clients.clone());
    let input = fic_input(&["a", "b"]);
    let (a, b) = (fic_id(&ident, "a"), fic_id(&ident, "b"));
    let (out, _) = run_action(&fic, run(1), &input, &outputs, None).await;
    let seqs = (created_seq(&w.sim, &a), created_seq(&w.sim, &b));

    // A run of an older binary: no journal and no output (it failed before finishing).
    // Deleting by name would take what we cannot prove is ours: nothing is deleted.
    let undo_cp = undo_action(&fic, run(4), &input, None, None, &outputs).await;
    assert_eq!((created_seq(&w.sim, &a), created_seq(&w.sim, &b)), seqs);
    let ul = undo_ledger(&undo_cp);
    assert_eq!(action_of(&ul, &a), Some(LedgerAction::Kept));
    assert!(
        ul.iter()
            .all(|r| r.note.as_deref().is_some_and(|n| n.contains("no record"))),
        "{ul:?}"
    );

    // An older binary's output that recorded `b` created and `a` adopted: `b` goes.
    let mut old_output = out.clone();
    for r in &mut old_output.ledger {
        r.action = if r.id == b {
            LedgerAction::Created
        } else {
            LedgerAction::Adopted
        };
    }
    undo_action(&fic, run(4), &input, Some(&old_output), None, &outputs).await;
    assert_eq!(created_seq(&w.sim, &a), seqs.0);
    assert!(w.arm.get_value(&b, API_MSI).await.unwrap().is_none());
}

#[tokio::test]
async fn role_assignments_that_existed_before_the_run_survive_its_undo() {
    let w = world().await;
    let (_, outputs) = identity(&w, "demo-ingress").await;
    let scope = ensure_rg(&w, "demo-managed").await;
    let input = RoleInput {
        azure: azure(),
        owner: owner(),
        component: "ingress".into(),
        scope: scope.clone(),
        role: names::roles::INGRESS.into(),
        identity: serde_json::from_value(json!({"$ref": "ident"})).unwrap(),
        scope_from: None,
        name_seed: None,
    };
    let role = EnsureRoleAssignment(w.clients.clone());

    // Run A (a create that succeeded) assigns the role; run B (create run again on the
    // live cluster) finds it, and is unwound.
    let (out_a, cp_a) = run_action(&role, run(1), &input, &outputs, None).await;
    assert_eq!(out_a.ledger[0].action, LedgerAction::Created);
    let seq = created_seq(&w.sim, &out_a.id).unwrap();
    let later = as_later_run(&outputs);
    let (out_b, cp_b) = run_action(&role, run(2), &input, &later, None).await;
    assert_eq!(out_b.ledger[0].action, LedgerAction::Adopted);
    assert_eq!(out_b.id, out_a.id);
    undo_action(&role, run(2), &input, None, cp_b.clone(), &outputs).await;
    undo_action(&role, run(2), &input, Some(&out_b), cp_b, &outputs).await;
    assert_eq!(
        created_seq(&w.sim, &out_a.id),
        Some(seq),
        "A's assignment stays"
    );
    assert_eq!(deletes_of(&w.sim, &out_a.id), 0);

    // The run that created it deletes it on its undo.
    undo_action(&role, run(1), &input, Some(&out_a), cp_a, &outputs).await;
    assert!(
        w.arm
            .get_value(&out_a.id, API_AUTHORIZATION)
            .await
            .unwrap()
            .is_none()
    );
}

/// A simulated world with the private zone `demo.hypershift.local` in group `demo-managed`.
async fn world_with_private_zone() -> (World, String) {
    let w = world().await;
    let rg = ensure_rg(&w, "demo-managed").await;
    let zone = format!("{rg}/providers/Microsoft.Network/privateDnsZones/demo.hypershift.local");
    let zone_input = resource(
        "Microsoft.Network/privateDnsZones",
        &zone,
        API_PRIVATE_DNS,
        json!({"location": "global"}),
    );
    run_action(
        &EnsureDnsZone(w.clients.clone()),
        run(0),
        &zone_input,
        &HashMap::new(),
        None,
    )
    .await;
    (w, zone)
}

#[tokio::test]
async fn dns_record_sets_that_existed_before_the_run_survive_its_undo() {
    let (w, zone) = world_with_private_zone().await;
    let (api, apps) = (format!("{zone}/A/api"), format!("{zone}/A/*.apps"));
    // `api` exists before the run (an earlier run's, or written by hand).
    w.arm
        .put(
            &api,
            API_PRIVATE_DNS,
            &json!({"properties": {"ttl": 300, "aRecords": [{"ipv4Address": "10.0.0.9"}]}}),
        )
        .await
        .unwrap();
    let api_seq = created_seq(&w.sim, &api).unwrap();

    let records = EnsureARecords(w.clients.clone());
    let input = ARecordInput {
        azure: azure(),
        owner: owner(),
        zone_id: zone.clone(),
        names: vec!["api".into(), "*.apps".into()],
        endpoint: serde_json::from_value(json!({"$ref": "pe"})).unwrap(),
        zone: None,
        converge: false,
    };
    let outputs = HashMap::from([(
        "pe".to_string(),
        json!({"id": "pe-id", "ip": "10.0.0.4", "ledger": []}),
    )]);
    let (out, cp) = run_action(&records, run(5), &input, &outputs, None).await;
    assert_eq!(action_of(&out.ledger, &api), Some(LedgerAction::Adopted));
    assert_eq!(action_of(&out.ledger, &apps), Some(LedgerAction::Created));

    // Unwound after failing later (no output) and again with its output: harmless.
    let undo_cp = undo_action(&records, run(5), &input, None, cp.clone(), &outputs).await;
    assert_eq!(created_seq(&w.sim, &api), Some(api_seq));
    assert!(
        w.arm
            .get_value(&apps, API_PRIVATE_DNS)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        action_of(&undo_ledger(&undo_cp), &api),
        Some(LedgerAction::Kept)
    );
    undo_action(&records, run(5), &input, Some(&out), cp, &outputs).await;
    assert_eq!(created_seq(&w.sim, &api), Some(api_seq));
    assert_eq!(deletes_of(&w.sim, &api), 0);

    // A crash after `*.apps` was journaled and written: the undo deletes it.
    w.arm
        .put(
            &apps,
            API_PRIVATE_DNS,
            &json!({"properties": {"ttl": 300, "aRecords": [{"ipv4Address": "10.0.0.4"}]}}),
        )
        .await
        .unwrap();
    let crashed = json!({CHILDREN_KEY: {"creating": [apps]}});
    undo_action(&records, run(6), &input, None, Some(crashed), &outputs).await;
    assert!(
        w.arm
            .get_value(&apps, API_PRIVATE_DNS)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(created_seq(&w.sim, &api), Some(api_seq));
}

/// repair-cluster (`converge`): a record of ours that no longer points at the endpoint is
/// written again and recorded `updated` (not `created`): the repair's undo keeps it.
#[tokio::test]
async fn a_drifted_record_is_written_again_by_a_repair_and_kept_by_its_undo() {
    let (w, zone) = world_with_private_zone().await;
    let api = format!("{zone}/A/api");
    w.arm
        .put(
            &api,
            API_PRIVATE_DNS,
            &json!({"properties": {"ttl": 300, "aRecords": [{"ipv4Address": "10.0.0.9"}]}}),
        )
        .await
        .unwrap();
    let records = EnsureARecords(w.clients.clone());
    let input = ARecordInput {
        azure: azure(),
        owner: owner(),
        zone_id: zone.clone(),
        names: vec!["api".into()],
        endpoint: serde_json::from_value(json!({"$ref": "pe"})).unwrap(),
        zone: None,
        converge: true,
    };
    let outputs = HashMap::from([(
        "pe".to_string(),
        json!({"id": "pe-id", "ip": "10.0.0.4", "ledger": []}),
    )]);
    let (out, cp) = run_action(&records, run(5), &input, &outputs, None).await;
    assert_eq!(action_of(&out.ledger, &api), Some(LedgerAction::Updated));
    let now = w
        .arm
        .get_value(&api, API_PRIVATE_DNS)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now["properties"]["aRecords"][0]["ipv4Address"], "10.0.0.4");
    // Again: nothing to write (it says what we write), adopted.
    let (again, _) = run_action(&records, run(6), &input, &outputs, None).await;
    assert_eq!(action_of(&again.ledger, &api), Some(LedgerAction::Adopted));
    undo_action(&records, run(5), &input, Some(&out), cp, &outputs).await;
    assert!(
        w.arm
            .get_value(&api, API_PRIVATE_DNS)
            .await
            .unwrap()
            .is_some(),
        "kept"
    );
    assert_eq!(deletes_of(&w.sim, &api), 0);
}

#[tokio::test]
async fn an_existing_container_survives_the_undo_of_a_run_that_never_finished() {
    let w = world().await;
    let rg = ensure_rg(&w, "demo-persistent").await;
    let account = format!("{rg}/providers/Microsoft.Storage/storageAccounts/demooidc");
    run_action(
        &EnsureStorageAccount(w.clients.clone()),
        run(0),
        &resource(
            "Microsoft.Storage/storageAccounts",
            &account,
            API_STORAGE,
            json!({"location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"},
                   "properties": {"allowBlobPublicAccess": true}}),
        ),
        &HashMap::new(),
        None,
    )
    .await;
    let container_input = |name: &str| ResourceInput {
        tagged: false,
        persistent: true,
        ..resource(
            "Microsoft.Storage/storageAccounts/blobServices/containers",
            &format!("{account}/blobServices/default/containers/{name}"),
            API_STORAGE,
            json!({"properties": {"publicAccess": "Container"}}),
        )
    };
    let container = EnsureContainer(w.clients.clone());

    // Run A created the OIDC container; run B adopts it and is unwound before its output
    // was journaled (the case the old code deleted by name).
    let kept = container_input("oidc");
    let (out_a, _) = run_action(&container, run(1), &kept, &HashMap::new(), None).await;
    assert_eq!(out_a.ledger[0].action, LedgerAction::Created);
    let seq = created_seq(&w.sim, &kept.id).unwrap();
    let (out_b, cp_b) = run_action(&container, run(2), &kept, &HashMap::new(), None).await;
    assert_eq!(out_b.ledger[0].action, LedgerAction::Adopted);
    undo_action(&container, run(2), &kept, None, cp_b, &HashMap::new()).await;
    assert_eq!(created_seq(&w.sim, &kept.id), Some(seq));

    // A container this run created goes with its undo, output or not.
    let fresh = container_input("fresh");
    let (_, cp) = run_action(&container, run(3), &fresh, &HashMap::new(), None).await;
    undo_action(&container, run(3), &fresh, None, cp, &HashMap::new()).await;
    assert!(
        w.arm
            .get_value(&fresh.id, API_STORAGE)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(created_seq(&w.sim, &kept.id), Some(seq));
}

/// The cluster Secrets' step input, its files in a temporary directory (kept alive by the
/// returned guard), names prefixed with `prefix`.
fn secrets_input(prefix: &str) -> (tempfile::TempDir, SecretsInput) {
    let dir = tempfile::tempdir().unwrap();
    let (pull, ssh) = (dir.path().join("pull.json"), dir.path().join("id.pub"));
    std::fs::write(&pull, br#"{"auths":{}}"#).unwrap();
    std::fs::write(&ssh, b"ssh-ed25519 AAAA test").unwrap();
    let input = SecretsInput {
        mgmt: MgmtEnv::Simulator,
        owner: owner(),
        namespace: "clusters".into(),
        pull_secret_file: pull,
        ssh_key_file: ssh,
        pull_secret: format!("{prefix}-pull-secret"),
        ssh_key: format!("{prefix}-ssh-key"),
        etcd_key: format!("{prefix}-etcd-encryption-key"),
        keep_keys: false,
    };
    (dir, input)
}

fn secret_labels(sim: &Simulator, name: &str) -> Option<serde_json::Map<String, Value>> {
    sim.inventory()
        .into_iter()
        .find(|i| i.rtype == "core/secrets" && i.name == name)
        .map(|i| i.tags.as_object().cloned().unwrap_or_default())
}

#[tokio::test]
async fn secrets_adopted_by_a_later_run_survive_both_runs_undos() {
    let w = world().await;
    let (_dir, input) = secrets_input("demo");
    let names = [
        "demo-pull-secret",
        "demo-ssh-key",
        "demo-etcd-encryption-key",
    ];
    let secrets = EnsureClusterSecrets(w.clients.clone());
    let none = HashMap::new();
    let label = |name: &str| {
        secret_labels(&w.sim, name)
            .and_then(|l| l.get("hcp-workflow.io/run").cloned())
            .and_then(|v| v.as_str().map(str::to_string))
    };

    // Run A creates them.
    let (out_a, cp_a) = run_action(&secrets, run(1), &input, &none, None).await;
    assert!(
        out_a
            .ledger
            .iter()
            .all(|r| r.action == LedgerAction::Created)
    );
    let seqs: Vec<_> = names
        .iter()
        .map(|n| {
            w.sim
                .inventory()
                .into_iter()
                .find(|i| i.name == *n)
                .unwrap()
                .created_seq
        })
        .collect();

    // Run B adopts them: ownership moves to B (relabelled), and B records them adopted.
    let (out_b, cp_b) = run_action(&secrets, run(2), &input, &none, None).await;
    assert!(
        out_b
            .ledger
            .iter()
            .all(|r| r.action == LedgerAction::Adopted),
        "{:?}",
        out_b.ledger
    );
    for n in names {
        assert_eq!(label(n), Some(run(2).to_string()), "{n} relabelled");
    }
    assert!(
        cp_b.as_ref()
            .and_then(|c| c.pointer(&format!("/{OBJECTS_KEY}/creating")))
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty),
        "B journals that it created nothing: {cp_b:?}"
    );

    // A's undo (A unwinding after B adopted them: the user's trial) keeps them ...
    undo_action(&secrets, run(1), &input, Some(&out_a), cp_a, &none).await;
    // ... and so does B's: they existed before B.
    undo_action(&secrets, run(2), &input, Some(&out_b), cp_b, &none).await;
    for (n, seq) in names.iter().zip(&seqs) {
        let item = w.sim.inventory().into_iter().find(|i| i.name == *n);
        assert_eq!(item.map(|i| i.created_seq), Some(*seq), "{n} survived");
    }

    // A run of an older binary (no journal) whose run label is on them still deletes
    // them (the old binary never relabelled: the label named the creating run) ...
    let legacy = undo_action(&secrets, run(2), &input, None, None, &none).await;
    assert!(legacy.is_none());
    for n in names {
        assert!(secret_labels(&w.sim, n).is_none(), "{n} deleted");
    }
    // ... and a run that creates them deletes them on its undo.
    let (out_c, cp_c) = run_action(&secrets, run(3), &input, &none, None).await;
    assert!(
        out_c
            .ledger
            .iter()
            .all(|r| r.action == LedgerAction::Created)
    );
    undo_action(&secrets, run(3), &input, Some(&out_c), cp_c, &none).await;
    for n in names {
        assert!(
            secret_labels(&w.sim, n).is_none(),
            "{n} deleted by its creator's undo"
        );
    }
}

#[tokio::test]
async fn relabel_moves_only_our_objects_and_only_their_run_label() {
    use hcp_activities::kube::{self, KubeError, KubeTarget, Mgmt};
    use hcp_activities::secret::Secret;
    let w = world().await;
    let m = Mgmt::new(
        kube::client(&KubeTarget::Endpoint {
            url: w.base.clone(),
        })
        .await
        .unwrap(),
    );
    m.apply_namespace("clusters", &BTreeMap::new())
        .await
        .unwrap();
    let labels = |run: &str| {
        BTreeMap::from([
            (kube::LABEL_CLUSTER.to_string(), "demo".to_string()),
            (kube::LABEL_INFRA_ID.to_string(), "demo-abc12".to_string()),
            (kube::LABEL_RUN.to_string(), run.to_string()),
            ("team".to_string(), "x".to_string()),
        ])
    };
    let data = || BTreeMap::from([("k".to_string(), Secret::new(b"v".to_vec()))]);
    let kind = kube::Kind::Secret;

    assert!(
        m.relabel_run(kind, "clusters", "missing", "r2")
            .await
            .unwrap()
            .is_none()
    );
    m.apply_secret("clusters", "foreign", data(), &BTreeMap::new())
        .await
        .unwrap();
    let err = m
        .relabel_run(kind, "clusters", "foreign", "r2")
        .await
        .unwrap_err();
    assert!(matches!(err, KubeError::NotOurs { .. }), "{err}");

    m.apply_secret("clusters", "ours", data(), &labels("r1"))
        .await
        .unwrap();
    let applied = m
        .relabel_run(kind, "clusters", "ours", "r2")
        .await
        .unwrap()
        .unwrap();
    assert!(applied.written);
    let mut want = labels("r2");
    // The creator label set at creation stays.
    want.insert(
        "hcp-workflow.io/created-by-run".to_string(),
        "r1".to_string(),
    );
    assert_eq!(
        m.labels(kind, "clusters", "ours").await.unwrap(),
        Some(want),
        "only the run label changed"
    );
    assert_eq!(
        m.get_secret_data("clusters", "ours", "k")
            .await
            .unwrap()
            .map(|s| s.expose().clone()),
        Some(b"v".to_vec()),
        "data untouched"
    );
    let again = m
        .relabel_run(kind, "clusters", "ours", "r2")
        .await
        .unwrap()
        .unwrap();
    assert!(!again.written, "already this run's: nothing written");
}

#[test]
fn undo_ledger_key_is_what_the_runtime_reads() {
    let v = json!({UNDO_LEDGER_KEY: [{"kind": "azure", "resource_type": "t", "id": "x", "action": "kept"}]});
    assert_eq!(hcp_runtime::ledger::records_in(&v).len(), 1);
}

// ---- the shared persistent resource group ----------------------

fn owner_of(cluster: &str) -> Owner {
    Owner {
        cluster: cluster.into(),
        infra_id: format!("{cluster}-x1y2z"),
    }
}

fn shared_rg(owner: Owner, id: &str) -> ResourceInput {
    ResourceInput {
        owner,
        persistent: true,
        shared: true,
        parent: None,
        ..resource(
            "Microsoft.Resources/resourceGroups",
            id,
            "2021-04-01",
            json!({"location": "eastus"}),
        )
    }
}

fn delete_input(
    owner: Owner,
    resource_type: &str,
    id: &str,
    api: &str,
    shared: bool,
) -> DeleteInput {
    DeleteInput {
        azure: azure(),
        owner,
        resource_type: resource_type.into(),
        id: id.into(),
        api: api.into(),
        tagged: true,
        persistent: true,
        shared,
    }
}

fn identity_in(owner: Owner, rg: &str, name: &str) -> ResourceInput {
    ResourceInput {
        owner,
        persistent: true,
        ..resource(
            "Microsoft.ManagedIdentity/userAssignedIdentities",
            &format!(
                "{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{name}",
                rg_id(rg)
            ),
            API_MSI,
            json!({"location": "eastus"}),
        )
    }
}

async fn group_exists(w: &World, id: &str) -> bool {
    w.arm.get_value(id, "2021-04-01").await.unwrap().is_some()
}

#[tokio::test]
async fn one_persistent_group_serves_many_clusters_and_goes_with_the_last() {
    let w = world().await;
    let id = rg_id("os4-common");
    let none = HashMap::new();
    let rg = EnsureResourceGroup(w.clients.clone());
    // Cluster a's run creates the group (marked shared); cluster b's run adopts it.
    let (out_a, _) = run_action(&rg, run(1), &shared_rg(owner_of("a"), &id), &none, None).await;
    assert_eq!(out_a.ledger[0].action, LedgerAction::Created);
    assert_eq!(out_a.body["tags"]["hcp-workflow.io/shared"], "persistent");
    let (out_b, _) = run_action(&rg, run(2), &shared_rg(owner_of("b"), &id), &none, None).await;
    assert_eq!(
        out_b.ledger[0].action,
        LedgerAction::Adopted,
        "{:?}",
        out_b.ledger
    );
    // Both put an identity there.
    let ident = EnsureIdentity(w.clients.clone());
    let ia = identity_in(owner_of("a"), "os4-common", "a-disk-a-x1y2z");
    let ib = identity_in(owner_of("b"), "os4-common", "b-disk-b-x1y2z");
    run_action(&ident, run(1), &ia, &none, None).await;
    run_action(&ident, run(2), &ib, &none, None).await;

    // a's create fails and unwinds: its identity goes, the group (holding b's) stays.
    undo_action(&ident, run(1), &ia, None, None, &none).await;
    let cp = undo_action(
        &rg,
        run(1),
        &shared_rg(owner_of("a"), &id),
        Some(&out_a),
        None,
        &none,
    )
    .await;
    assert!(
        group_exists(&w, &id).await,
        "a's undo deleted a group holding b's identity"
    );
    let l = undo_ledger(&cp);
    assert_eq!(l[0].action, LedgerAction::Kept);
    assert!(
        l[0].note
            .as_deref()
            .unwrap_or_default()
            .contains("b-disk-b-x1y2z"),
        "{l:?}"
    );
    // Unwinding twice is harmless.
    undo_action(
        &rg,
        run(1),
        &shared_rg(owner_of("a"), &id),
        Some(&out_a),
        None,
        &none,
    )
    .await;
    assert!(group_exists(&w, &id).await);

    // b is purged: its identity goes, then the group, now empty and made by hcp-workflow.
    let del_ident = DeleteIdentity(w.clients.clone());
    let del_rg = DeleteResourceGroup(w.clients.clone());
    run_action(
        &del_ident,
        run(3),
        &delete_input(
            owner_of("b"),
            "Microsoft.ManagedIdentity/userAssignedIdentities",
            &ib.id,
            API_MSI,
            false,
        ),
        &none,
        None,
    )
    .await;
    let (out, _) = run_action(
        &del_rg,
        run(3),
        &delete_input(
            owner_of("b"),
            "Microsoft.Resources/resourceGroups",
            &id,
            "2021-04-01",
            true,
        ),
        &none,
        None,
    )
    .await;
    assert_eq!(
        out.ledger[0].action,
        LedgerAction::Deleted,
        "{:?}",
        out.ledger
    );
    assert!(!group_exists(&w, &id).await);
}

#[tokio::test]
async fn a_purge_keeps_a_shared_group_that_still_holds_another_clusters_resources() {
    let w = world().await;
    let id = rg_id("os4-common");
    let none = HashMap::new();
    let rg = EnsureResourceGroup(w.clients.clone());
    run_action(&rg, run(1), &shared_rg(owner_of("a"), &id), &none, None).await;
    run_action(&rg, run(2), &shared_rg(owner_of("b"), &id), &none, None).await;
    let ident = EnsureIdentity(w.clients.clone());
    let ib = identity_in(owner_of("b"), "os4-common", "b-disk-b-x1y2z");
    run_action(&ident, run(2), &ib, &none, None).await;
    // a (the group's creator) is purged while b still lives there.
    let del_rg = DeleteResourceGroup(w.clients.clone());
    let input = delete_input(
        owner_of("a"),
        "Microsoft.Resources/resourceGroups",
        &id,
        "2021-04-01",
        true,
    );
    let (out, _) = run_action(&del_rg, run(3), &input, &none, None).await;
    assert_eq!(out.ledger[0].action, LedgerAction::Kept);
    assert!(
        out.ledger[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("still holds 1"),
        "{:?}",
        out.ledger
    );
    assert!(group_exists(&w, &id).await);
    assert!(w.arm.get_value(&ib.id, API_MSI).await.unwrap().is_some());
}

#[tokio::test]
async fn a_users_persistent_group_is_adopted_and_never_deleted() {
    let w = world().await;
    let id = rg_id("platform-shared");
    let none = HashMap::new();
    w.arm
        .put(
            &id,
            "2021-04-01",
            &json!({"location": "eastus", "tags": {"team": "platform"}}),
        )
        .await
        .unwrap();
    let rg = EnsureResourceGroup(w.clients.clone());
    let input = shared_rg(owner_of("a"), &id);
    let (out, _) = run_action(&rg, run(1), &input, &none, None).await;
    assert_eq!(out.ledger[0].action, LedgerAction::Adopted);
    undo_action(&rg, run(1), &input, Some(&out), None, &none).await;
    assert!(
        group_exists(&w, &id).await,
        "the undo deleted the user's group"
    );
    let del_rg = DeleteResourceGroup(w.clients.clone());
    let (out, _) = run_action(
        &del_rg,
        run(2),
        &delete_input(
            owner_of("a"),
            "Microsoft.Resources/resourceGroups",
            &id,
            "2021-04-01",
            true,
        ),
        &none,
        None,
    )
    .await;
    assert_eq!(out.ledger[0].action, LedgerAction::Kept);
    assert!(
        group_exists(&w, &id).await,
        "the purge deleted the user's (empty) group"
    );
}

#[tokio::test]
async fn another_clusters_own_group_is_refused_as_the_persistent_group() {
    let w = world().await;
    let none = HashMap::new();
    // Cluster a's managed group `<name>-<infraID>`, made by a's run.
    let id = rg_id("a-a-x1y2z");
    let mut a_managed = shared_rg(owner_of("a"), &id);
    a_managed.shared = false;
    a_managed.persistent = false;
    let rg = EnsureResourceGroup(w.clients.clone());
    run_action(&rg, run(1), &a_managed, &none, None).await;
    let before = w.sim.requests().len();
    let (ctx, _) = StepContext::detached(
        run(2),
        "node",
        Phase::Action,
        1,
        None,
        none.clone(),
        BTreeMap::new(),
    );
    let err = match rg.run(&ctx, shared_rg(owner_of("b"), &id)).await {
        Err(e) => e,
        Ok(_) => panic!("cluster b adopted cluster a's managed group as its persistent group"),
    };
    assert!(!err.retryable);
    assert_eq!(err.code.as_deref(), Some("NotOurs"));
    assert!(
        err.message.contains("persistentResourceGroup"),
        "{}",
        err.message
    );
    let writes = w.sim.requests()[before..]
        .iter()
        .filter(|r| r.method != "GET")
        .count();
    assert_eq!(writes, 0, "a refused adoption wrote to Azure");
}

/// A run whose journal of created objects was lost (after the WAL was deleted
/// and the worker killed) re-runs its step: what it created itself is recorded as created,
/// not adopted, so its unwind deletes it instead of leaving it behind. The creator label
/// survives a later run's adoption, which still records adopted.
#[tokio::test]
async fn objects_a_run_created_stay_its_own_after_its_journal_is_lost() {
    let w = world().await;
    let (_dir, input) = secrets_input("lost");
    let names = [
        "lost-pull-secret",
        "lost-ssh-key",
        "lost-etcd-encryption-key",
    ];
    let secrets = EnsureClusterSecrets(w.clients.clone());
    let none = HashMap::new();
    let creator = |name: &str| {
        secret_labels(&w.sim, name)
            .and_then(|l| l.get("hcp-workflow.io/created-by-run").cloned())
            .and_then(|v| v.as_str().map(str::to_string))
    };
    // Run A creates them; its checkpoint (the journal) is then lost.
    let (_, _lost) = run_action(&secrets, run(11), &input, &none, None).await;
    for n in names {
        assert_eq!(
            creator(n),
            Some(run(11).to_string()),
            "{n} names its creator"
        );
    }
    let (again, cp) = run_action(&secrets, run(11), &input, &none, None).await;
    assert!(
        again
            .ledger
            .iter()
            .all(|r| r.action == LedgerAction::Created),
        "re-run without its journal: {:?}",
        again.ledger
    );
    // Its unwind, with the journal its re-run rebuilt, deletes them.
    undo_action(&secrets, run(11), &input, Some(&again), cp, &none).await;
    for n in names {
        assert!(
            secret_labels(&w.sim, n).is_none(),
            "{n} deleted by its creator's undo"
        );
    }
}

/// The creator label survives a later run's adoption, which records adopted (and whose
/// undo keeps the objects).
#[tokio::test]
async fn the_creator_label_survives_a_later_adoption() {
    let w = world().await;
    let (_dir, input) = secrets_input("kept");
    let names = [
        "kept-pull-secret",
        "kept-ssh-key",
        "kept-etcd-encryption-key",
    ];
    let secrets = EnsureClusterSecrets(w.clients.clone());
    let none = HashMap::new();
    let creator = |name: &str| {
        secret_labels(&w.sim, name)
            .and_then(|l| l.get("hcp-workflow.io/created-by-run").cloned())
            .and_then(|v| v.as_str().map(str::to_string))
    };
    run_action(&secrets, run(13), &input, &none, None).await;
    let (out_b, cp_b) = run_action(&secrets, run(14), &input, &none, None).await;
    assert!(
        out_b
            .ledger
            .iter()
            .all(|r| r.action == LedgerAction::Adopted)
    );
    // B's journal lost too: still adopted (the creator is A).
    let (out_b2, _) = run_action(&secrets, run(14), &input, &none, None).await;
    assert!(
        out_b2
            .ledger
            .iter()
            .all(|r| r.action == LedgerAction::Adopted)
    );
    for n in names {
        assert_eq!(
            creator(n),
            Some(run(13).to_string()),
            "{n}: the creator stays"
        );
    }
    undo_action(&secrets, run(14), &input, Some(&out_b), cp_b, &none).await;
    for n in names {
        assert!(
            secret_labels(&w.sim, n).is_some(),
            "{n} kept by the adopter's undo"
        );
    }
}

/// repair-cluster never makes a key anew: with the etcd key Secret gone, its secrets step
/// stops for an operator (a new key could not decrypt what etcd holds), and no Secret of
/// that name appears.
#[tokio::test]
async fn repair_stops_rather_than_make_a_lost_etcd_key_anew() {
    let w = world().await;
    let (_dir, mut input) = secrets_input("keys");
    let secrets = EnsureClusterSecrets(w.clients.clone());
    let none = HashMap::new();
    run_action(&secrets, run(1), &input, &none, None).await;
    let path = "/api/v1/namespaces/clusters/secrets/keys-etcd-encryption-key";
    let status = reqwest::Client::new()
        .delete(format!("{}{path}", w.base))
        .header("authorization", "Bearer test")
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
    input.keep_keys = true;
    let (ctx, _cell) = StepContext::detached(
        run(2),
        "node",
        Phase::Action,
        1,
        None,
        none.clone(),
        BTreeMap::new(),
    );
    let err = match secrets.run(&ctx, input.clone()).await {
        Err(e) => e,
        Ok(_) => panic!("repair made the key anew"),
    };
    assert!(!err.retryable);
    assert_eq!(err.code.as_deref(), Some("KeySecretMissing"), "{err}");
    assert!(err.message.contains("never makes a new one"), "{err}");
    assert!(
        secret_labels(&w.sim, "keys-etcd-encryption-key").is_none(),
        "no new key"
    );
}

/// For an identity this run created, its role assignment is written without a read
/// first. A stale assignment under our deterministic name (an older principal) refuses that
/// write (409 `RoleAssignmentUpdateNotPermitted`); the step then reads and replaces it, and
/// its undo deletes the replacement (journaled before the write) and nothing else.
#[tokio::test]
async fn a_new_identitys_assignment_replaces_a_stale_one_found_by_its_write() {
    let w = world().await;
    let (_, outputs) = identity(&w, "demo-cloud").await;
    let scope = ensure_rg(&w, "demo-stale").await;
    let input = RoleInput {
        azure: azure(),
        owner: owner(),
        component: "cloud".into(),
        scope: scope.clone(),
        role: names::roles::INGRESS.into(),
        identity: serde_json::from_value(json!({"$ref": "ident"})).unwrap(),
        scope_from: None,
        name_seed: None,
    };
    let role = EnsureRoleAssignment(w.clients.clone());
    // Our first run, to learn the deterministic id; then the assignment is made stale: the
    // same name for another principal.
    let (first, _) = run_action(&role, run(7), &input, &outputs, None).await;
    w.arm.delete(&first.id, API_AUTHORIZATION).await.unwrap();
    let stale_principal = "99999999-9999-9999-9999-999999999999";
    let role_def = w
        .arm
        .put(
            &first.id,
            API_AUTHORIZATION,
            &json!({"properties": {
                "roleDefinitionId": hcp_activities::azure::roles::role_definition_id(&scope, names::roles::INGRESS),
                "principalId": stale_principal,
                "principalType": "ServicePrincipal",
            }}),
        )
        .await;
    assert!(role_def.is_ok(), "{role_def:?}");
    let before = w.sim.requests().len();
    let (out, cp) = run_action(&role, run(8), &input, &outputs, None).await;
    assert_eq!(out.id, first.id);
    assert_eq!(out.ledger[0].action, LedgerAction::Created);
    let now = w
        .arm
        .get_value(&out.id, API_AUTHORIZATION)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(
        now.pointer("/properties/principalId")
            .and_then(Value::as_str),
        Some(stale_principal),
        "the stale assignment was replaced"
    );
    // The write came first (no read before it), and was refused; then read and replace.
    let after: Vec<(String, u16)> = w.sim.requests()[before..]
        .iter()
        .filter(|r| r.path.contains("roleAssignments/"))
        .map(|r| (r.method.clone(), r.status))
        .collect();
    assert_eq!(
        after.first().map(|(m, s)| (m.as_str(), *s)),
        Some(("PUT", 409)),
        "{after:?}"
    );
    assert_eq!(journaled(&cp), vec![out.id.clone()]);
    undo_action(&role, run(8), &input, Some(&out), cp, &outputs).await;
    assert!(
        w.arm
            .get_value(&out.id, API_AUTHORIZATION)
            .await
            .unwrap()
            .is_none()
    );
}
