//! The ARO HCP identity steps against an in-process simulator, through the real
//! actions (`run` and `undo` as the engine calls them, with detached contexts carrying the
//! checkpoints the engine would hand over):
//!
//! - a run creates the vault, the application, its service principal, a certificate in the
//!   vault, binds the certificate to the application and writes the credentials secret;
//!   every step repeated after success changes nothing; the secret is msi-dataplane's JSON
//!   with the certificate's PEM bundle;
//! - a later run adopts all of it, and its undo deletes nothing;
//! - the first run's undo deletes (and purges) exactly what it created.
#![allow(clippy::unwrap_used)]

use crate::azure_support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hcp_activities::azure::Transport;
use hcp_activities::steps::arm::{EnsureResourceGroup, ResourceInput};
use hcp_activities::steps::entra::{
    ApplicationInput, BindCertificate, BindCertificateInput, EnsureApplication,
    EnsureServicePrincipal, ServicePrincipalInput,
};
use hcp_activities::steps::identity::{EnsureRoleAssignment, IdentitySource, RoleInput};
use hcp_activities::steps::key_vault::{
    CertificateInput, CredentialsSecretInput, EnsureCertificate, EnsureCredentialsSecret,
    EnsureKeyVault, KeyVaultInput,
};
use hcp_activities::steps::{Clients, Reach};
use hcp_runtime::ledger::LedgerAction;
use hcp_runtime::{Action, Outcome, Phase, StepContext};
use serde_json::{Value, json};
use uuid::Uuid;

use azure_support::{SUB, TENANT, azure, owner, run_action, undo_action};

const KV_ADMIN: &str = "00482a5a-887f-4fb3-b363-3b7fe8e74483";

fn run(n: u128) -> Uuid {
    Uuid::from_u128(0xB000 + n)
}

fn r<T>(node: &str) -> hcp_runtime::Ref<T> {
    serde_json::from_value(json!({ "$ref": node })).unwrap()
}

/// The object id of the process's own principal (the token's `oid`).
async fn caller_oid(clients: &Clients) -> String {
    let (cred, _) = clients.arm_credential(&azure()).await.unwrap();
    let token = cred
        .get_token(&["https://management.azure.com/.default"], None)
        .await
        .unwrap();
    let payload = token.token.secret().split('.').nth(1).unwrap().to_string();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    claims["oid"].as_str().unwrap().to_string()
}

struct Inputs {
    vault: KeyVaultInput,
    admin: RoleInput,
    app: ApplicationInput,
    sp: ServicePrincipalInput,
    cert: CertificateInput,
    bind: BindCertificateInput,
    secret: CredentialsSecretInput,
}

fn inputs(vault_id: &str, oid: &str) -> Inputs {
    Inputs {
        vault: KeyVaultInput {
            azure: azure(),
            owner: owner(),
            id: vault_id.into(),
            location: "eastus".into(),
            tenant_id: None,
            byo: false,
            persistent: true,
            shared: false,
        },
        admin: RoleInput {
            azure: azure(),
            owner: owner(),
            component: "kv-admin".into(),
            scope: vault_id.into(),
            role: KV_ADMIN.into(),
            identity: IdentitySource::Principal {
                principal_id: oid.into(),
            },
            scope_from: None,
            name_seed: None,
        },
        app: ApplicationInput {
            azure: azure(),
            owner: owner(),
            unique_name: "demo-abc12-cpo".into(),
            display_name: "demo cpo".into(),
            persistent: true,
        },
        sp: ServicePrincipalInput {
            azure: azure(),
            owner: owner(),
            application: r("app"),
            persistent: true,
        },
        cert: CertificateInput {
            azure: azure(),
            owner: owner(),
            vault: r("vault"),
            name: "cpo-demo".into(),
            subject: "CN=cpo-demo".into(),
            validity_months: 12,
            persistent: true,
        },
        bind: BindCertificateInput {
            azure: azure(),
            owner: owner(),
            application: r("app"),
            certificate: r("cert"),
        },
        secret: CredentialsSecretInput {
            azure: azure(),
            owner: owner(),
            vault: r("vault"),
            certificate: r("cert"),
            application: r("app"),
            name: None,
            persistent: true,
        },
    }
}

#[tokio::test]
async fn a_run_builds_the_credentials_and_its_undo_removes_only_what_it_made() {
    let (sim, transport) = azure_support::start().await;
    let Transport::Simulator { base } = transport else {
        panic!("simulator transport expected")
    };
    let clients: Arc<Clients> = Clients::new(Reach::Simulator(base));
    let rg = format!("/subscriptions/{SUB}/resourceGroups/demo-persistent");
    let rg_input = ResourceInput {
        azure: azure(),
        owner: owner(),
        resource_type: "Microsoft.Resources/resourceGroups".into(),
        id: rg.clone(),
        api: "2021-04-01".into(),
        body: json!({"location": "eastus"}),
        tagged: true,
        persistent: true,
        byo: false,
        shared: false,
        parent: None,
    };
    run_action(
        &EnsureResourceGroup(clients.clone()),
        run(0),
        &rg_input,
        &HashMap::new(),
        None,
    )
    .await;
    let vault_id = format!("{rg}/providers/Microsoft.KeyVault/vaults/kv-demo-abc12");
    let oid = caller_oid(&clients).await;
    let i = inputs(&vault_id, &oid);
    let mut outputs: HashMap<String, Value> = HashMap::new();

    // Run 1 builds everything.
    let (vault, vault_cp) = run_action(
        &EnsureKeyVault(clients.clone()),
        run(1),
        &i.vault,
        &outputs,
        None,
    )
    .await;
    assert!(vault.created, "{vault:?}");
    assert_eq!(vault.ledger[0].action, LedgerAction::Created);
    outputs.insert("vault".into(), serde_json::to_value(&vault).unwrap());
    let (admin, admin_cp) = run_action(
        &EnsureRoleAssignment(clients.clone()),
        run(1),
        &i.admin,
        &outputs,
        None,
    )
    .await;
    let (app, app_cp) = run_action(
        &EnsureApplication(clients.clone()),
        run(1),
        &i.app,
        &outputs,
        None,
    )
    .await;
    assert!(app.created && !app.app_id.is_empty(), "{app:?}");
    // A repeat after success changes nothing.
    let (again, _) = run_action(
        &EnsureApplication(clients.clone()),
        run(1),
        &i.app,
        &outputs,
        app_cp.clone(),
    )
    .await;
    assert_eq!(again, app);
    outputs.insert("app".into(), serde_json::to_value(&app).unwrap());
    let (sp, sp_cp) = run_action(
        &EnsureServicePrincipal(clients.clone()),
        run(1),
        &i.sp,
        &outputs,
        None,
    )
    .await;
    assert!(sp.created && sp.app_id == app.app_id, "{sp:?}");
    outputs.insert("sp".into(), serde_json::to_value(&sp).unwrap());
    let (cert, cert_cp) = run_action(
        &EnsureCertificate(clients.clone()),
        run(1),
        &i.cert,
        &outputs,
        None,
    )
    .await;
    assert!(
        cert.created && !cert.x5t.is_empty() && !cert.cer.is_empty(),
        "{cert:?}"
    );
    assert!(cert.expires > cert.not_before);
    let (again, _) = run_action(
        &EnsureCertificate(clients.clone()),
        run(1),
        &i.cert,
        &outputs,
        cert_cp.clone(),
    )
    .await;
    assert_eq!(again.version, cert.version, "reused, not re-issued");
    outputs.insert("cert".into(), serde_json::to_value(&cert).unwrap());
    let (bind, bind_cp) = run_action(
        &BindCertificate(clients.clone()),
        run(1),
        &i.bind,
        &outputs,
        None,
    )
    .await;
    assert!(bind.added);
    let (again, _) = run_action(
        &BindCertificate(clients.clone()),
        run(1),
        &i.bind,
        &outputs,
        bind_cp.clone(),
    )
    .await;
    assert_eq!(again.key_id, bind.key_id);
    let graph = clients.graph(&azure()).await.unwrap();
    let read = graph.get_application(&app.id).await.unwrap().unwrap();
    assert_eq!(read.key_credentials.len(), 1, "{read:?}");
    let (secret, secret_cp) = run_action(
        &EnsureCredentialsSecret(clients.clone()),
        run(1),
        &i.secret,
        &outputs,
        None,
    )
    .await;
    assert!(
        secret.created && secret.name == "cpo-demo-json",
        "{secret:?}"
    );
    assert_eq!(secret.certificate_version, cert.version);
    let (again, _) = run_action(
        &EnsureCredentialsSecret(clients.clone()),
        run(1),
        &i.secret,
        &outputs,
        secret_cp.clone(),
    )
    .await;
    assert_eq!(again.version, secret.version, "not written twice");
    // Nothing secret in any output or checkpoint.
    for v in [
        serde_json::to_value(&secret).unwrap(),
        secret_cp.clone().unwrap_or_default(),
        serde_json::to_value(&cert).unwrap(),
        cert_cp.clone().unwrap_or_default(),
    ] {
        assert!(!v.to_string().contains("PRIVATE"), "{v}");
    }
    let kv = clients.key_vault(&azure()).await.unwrap();
    let stored = kv
        .get_secret(&vault.name, "cpo-demo-json", None)
        .await
        .unwrap()
        .unwrap();
    let creds: Value = serde_json::from_str(stored.value.expose()).unwrap();
    assert_eq!(creds["client_id"], app.app_id.as_str());
    assert_eq!(creds["tenant_id"], TENANT);
    assert_eq!(
        creds["authentication_endpoint"],
        "https://login.microsoftonline.com/"
    );
    let pem = base64::engine::general_purpose::STANDARD
        .decode(creds["client_secret"].as_str().unwrap())
        .unwrap();
    let pem = String::from_utf8(pem).unwrap();
    assert!(pem.contains("PRIVATE KEY") && pem.contains("BEGIN CERTIFICATE"));
    assert_eq!(stored.attributes.exp, Some(cert.expires));
    assert_eq!(stored.attributes.nbf, Some(cert.not_before));

    // Run 2 (a re-create of the same cluster) adopts everything; its undo keeps it all.
    let later = |mut v: Value| {
        v["created"] = json!(false);
        v
    };
    let (vault2, vault2_cp) = run_action(
        &EnsureKeyVault(clients.clone()),
        run(2),
        &i.vault,
        &HashMap::new(),
        None,
    )
    .await;
    assert!(!vault2.created);
    let mut outputs2 =
        HashMap::from([("vault".to_string(), serde_json::to_value(&vault2).unwrap())]);
    let (app2, app2_cp) = run_action(
        &EnsureApplication(clients.clone()),
        run(2),
        &i.app,
        &outputs2,
        None,
    )
    .await;
    assert!(!app2.created && app2.app_id == app.app_id);
    outputs2.insert("app".into(), serde_json::to_value(&app2).unwrap());
    let (sp2, sp2_cp) = run_action(
        &EnsureServicePrincipal(clients.clone()),
        run(2),
        &i.sp,
        &outputs2,
        None,
    )
    .await;
    assert!(!sp2.created && sp2.id == sp.id);
    let (cert2, cert2_cp) = run_action(
        &EnsureCertificate(clients.clone()),
        run(2),
        &i.cert,
        &outputs2,
        None,
    )
    .await;
    assert!(!cert2.created && cert2.version == cert.version);
    outputs2.insert("cert".into(), later(serde_json::to_value(&cert2).unwrap()));
    let (bind2, bind2_cp) = run_action(
        &BindCertificate(clients.clone()),
        run(2),
        &i.bind,
        &outputs2,
        None,
    )
    .await;
    assert!(!bind2.added);
    let (secret2, secret2_cp) = run_action(
        &EnsureCredentialsSecret(clients.clone()),
        run(2),
        &i.secret,
        &outputs2,
        None,
    )
    .await;
    assert!(!secret2.created && secret2.version == secret.version);
    undo_action(
        &EnsureCredentialsSecret(clients.clone()),
        run(2),
        &i.secret,
        Some(&secret2),
        secret2_cp,
        &outputs2,
    )
    .await;
    undo_action(
        &BindCertificate(clients.clone()),
        run(2),
        &i.bind,
        Some(&bind2),
        bind2_cp,
        &outputs2,
    )
    .await;
    undo_action(
        &EnsureCertificate(clients.clone()),
        run(2),
        &i.cert,
        Some(&cert2),
        cert2_cp,
        &outputs2,
    )
    .await;
    undo_action(
        &EnsureServicePrincipal(clients.clone()),
        run(2),
        &i.sp,
        Some(&sp2),
        sp2_cp,
        &outputs2,
    )
    .await;
    undo_action(
        &EnsureApplication(clients.clone()),
        run(2),
        &i.app,
        Some(&app2),
        app2_cp,
        &outputs2,
    )
    .await;
    undo_action(
        &EnsureKeyVault(clients.clone()),
        run(2),
        &i.vault,
        Some(&vault2),
        vault2_cp,
        &outputs2,
    )
    .await;
    assert!(graph.get_application(&app.id).await.unwrap().is_some());
    assert_eq!(
        graph
            .get_application(&app.id)
            .await
            .unwrap()
            .unwrap()
            .key_credentials
            .len(),
        1
    );
    assert!(
        kv.get_secret(&vault.name, "cpo-demo-json", None)
            .await
            .unwrap()
            .is_some()
    );

    // Run 1's undo, in reverse order, deletes what it made.
    undo_action(
        &EnsureCredentialsSecret(clients.clone()),
        run(1),
        &i.secret,
        Some(&secret),
        secret_cp,
        &outputs,
    )
    .await;
    assert!(
        kv.get_secret(&vault.name, "cpo-demo-json", None)
            .await
            .unwrap()
            .is_none()
    );
    undo_action(
        &BindCertificate(clients.clone()),
        run(1),
        &i.bind,
        Some(&bind),
        bind_cp,
        &outputs,
    )
    .await;
    let read = graph.get_application(&app.id).await.unwrap().unwrap();
    assert!(read.key_credentials.is_empty(), "{read:?}");
    undo_action(
        &EnsureCertificate(clients.clone()),
        run(1),
        &i.cert,
        Some(&cert),
        cert_cp,
        &outputs,
    )
    .await;
    assert!(
        kv.get_certificate(&vault.name, "cpo-demo", None)
            .await
            .unwrap()
            .is_none()
    );
    undo_action(
        &EnsureServicePrincipal(clients.clone()),
        run(1),
        &i.sp,
        Some(&sp),
        sp_cp,
        &outputs,
    )
    .await;
    assert!(
        graph
            .get_service_principal_by_app_id(&app.app_id)
            .await
            .unwrap()
            .is_none()
    );
    undo_action(
        &EnsureApplication(clients.clone()),
        run(1),
        &i.app,
        Some(&app),
        app_cp,
        &outputs,
    )
    .await;
    assert!(
        graph
            .get_application_by_unique_name("demo-abc12-cpo")
            .await
            .unwrap()
            .is_none()
    );
    assert!(!graph.purge_deleted_item(&app.id).await.unwrap(), "purged");
    // The vault's undo lists its contents with the caller's data role, so it runs before
    // the role assignment's (the workflow puts that assignment before the vault).
    let vault_undo = undo_action(
        &EnsureKeyVault(clients.clone()),
        run(1),
        &i.vault,
        Some(&vault),
        vault_cp,
        &outputs,
    )
    .await;
    let ledger = hcp_runtime::ledger::records_in(&vault_undo.unwrap());
    assert_eq!(ledger[0].action, LedgerAction::Deleted, "{ledger:?}");
    let arm = azure_support::arm(&Transport::Simulator {
        base: match clients.reach() {
            Reach::Simulator(b) => b.clone(),
            Reach::Direct => unreachable!(),
        },
    })
    .await;
    assert!(
        arm.get_value(&vault_id, "2023-07-01")
            .await
            .unwrap()
            .is_none()
    );
    let avail =
        hcp_activities::azure::keyvault::check_name_availability(&arm, SUB, "kv-demo-abc12")
            .await
            .unwrap();
    assert!(avail.name_available, "purged: {avail:?}");
    undo_action(
        &EnsureRoleAssignment(clients.clone()),
        run(1),
        &i.admin,
        Some(&admin),
        admin_cp,
        &outputs,
    )
    .await;
    drop(sim);
}

/// One attempt after another until done or a permanent error, which is returned.
async fn try_action<A: Action>(
    a: &A,
    run: Uuid,
    input: &A::Input,
    outputs: &HashMap<String, Value>,
) -> Result<A::Output, hcp_runtime::StepError>
where
    A::Input: Clone,
{
    let mut checkpoint = None;
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
            Ok(Outcome::Done(o)) => return Ok(o),
            Ok(Outcome::Wait { .. }) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) if e.retryable => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(e),
        }
    }
    panic!("{} did not finish", A::NAME)
}

#[tokio::test]
async fn failed_runs_unwind_by_their_journal_and_foreign_objects_are_refused_or_kept() {
    let (_sim, transport) = azure_support::start().await;
    let Transport::Simulator { base } = transport else {
        panic!("simulator transport expected")
    };
    let clients: Arc<Clients> = Clients::new(Reach::Simulator(base));
    let graph = clients.graph(&azure()).await.unwrap();

    // An application of the same uniqueName without our tags is refused, never written.
    let foreign = graph
        .upsert_application("someone-else", &json!({"displayName": "not ours"}))
        .await
        .unwrap();
    assert!(foreign.created);
    let mut input = inputs(
        "/subscriptions/x/resourceGroups/g/providers/Microsoft.KeyVault/vaults/kv-x",
        "p",
    )
    .app;
    input.unique_name = "someone-else".into();
    let err = try_action(
        &EnsureApplication(clients.clone()),
        run(3),
        &input,
        &HashMap::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code.as_deref(), Some("NotOurs"), "{err}");
    let still = graph
        .get_application_by_unique_name("someone-else")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.display_name.as_deref(), Some("not ours"));
    // delete-cluster keeps it too.
    let del = hcp_activities::steps::entra::DeleteApplicationInput {
        azure: azure(),
        owner: owner(),
        unique_name: "someone-else".into(),
        persistent: true,
    };
    let (out, _) = run_action(
        &hcp_activities::steps::entra::DeleteApplication(clients.clone()),
        run(4),
        &del,
        &HashMap::new(),
        None,
    )
    .await;
    assert_eq!(out.ledger[0].action, LedgerAction::Kept);

    // A run that created the application and then failed (no output): its undo finds the
    // intent in the action checkpoint and the run tag on the application, and deletes it.
    let mut mine = input.clone();
    mine.unique_name = "demo-abc12-failed".into();
    let (app, cp) = run_action(
        &EnsureApplication(clients.clone()),
        run(5),
        &mine,
        &HashMap::new(),
        None,
    )
    .await;
    assert!(app.created);
    let undo_cp = undo_action(
        &EnsureApplication(clients.clone()),
        run(5),
        &mine,
        None,
        cp,
        &HashMap::new(),
    )
    .await;
    let ledger = hcp_runtime::ledger::records_in(&undo_cp.unwrap());
    assert_eq!(ledger[0].action, LedgerAction::Deleted, "{ledger:?}");
    assert!(
        graph
            .get_application_by_unique_name("demo-abc12-failed")
            .await
            .unwrap()
            .is_none()
    );
    // Without a journal and without an output (another run's application) nothing goes.
    let (app6, _) = run_action(
        &EnsureApplication(clients.clone()),
        run(6),
        &mine,
        &HashMap::new(),
        None,
    )
    .await;
    undo_action(
        &EnsureApplication(clients.clone()),
        run(7),
        &mine,
        None,
        None,
        &HashMap::new(),
    )
    .await;
    assert!(graph.get_application(&app6.id).await.unwrap().is_some());
    // delete-cluster deletes ours.
    let mut del = del;
    del.unique_name = mine.unique_name.clone();
    let (out, _) = run_action(
        &hcp_activities::steps::entra::DeleteApplication(clients.clone()),
        run(8),
        &del,
        &HashMap::new(),
        None,
    )
    .await;
    assert_eq!(
        out.ledger[0].action,
        LedgerAction::Deleted,
        "{:?}",
        out.ledger
    );
    assert!(graph.get_application(&app6.id).await.unwrap().is_none());
}
