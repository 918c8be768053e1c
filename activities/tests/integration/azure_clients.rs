//! TLS provider, credentials and transports: the real kube-rs and azure_core /
//! azure_identity clients in one process, credentials proven against the simulator's Entra
//! endpoint.
#![allow(clippy::unwrap_used)]

use crate::azure_support;

use azure_core::credentials::Secret as CoreSecret;
use azure_identity::ClientSecretCredential;
use hcp_activities::azure::credential::{AuthMode, CredentialError, Env, credential_with_env};
use hcp_activities::azure::{ArmClient, Cloud, Transport};
use hcp_activities::tls::install_crypto_provider;

#[tokio::test]
async fn kube_client_and_azure_pipeline_share_one_process() {
    install_crypto_provider();
    // A kube client for an https API server (TLS config is built here) ...
    let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    let kube_client = kube::Client::try_from(config);
    assert!(kube_client.is_ok(), "{:?}", kube_client.err());
    // ... and azure_core's default (reqwest + rustls) client and an ARM pipeline.
    let _http = azure_core::http::new_http_client(None);
    let cred = ClientSecretCredential::new(
        azure_support::TENANT,
        azure_support::CLIENT_ID.to_string(),
        CoreSecret::new("x"),
        None,
    )
    .unwrap();
    let arm = ArmClient::new(&Cloud::Public, cred, &Transport::Direct).unwrap();
    assert_eq!(arm.endpoint(), "https://management.azure.com");
    install_crypto_provider();
}

#[tokio::test]
async fn client_secret_credential_gets_a_token_from_the_cloud_authority() {
    let (sim, transport) = azure_support::start().await;
    let (_cred, mode) = credential_with_env(
        AuthMode::ClientSecret,
        azure_support::TENANT,
        &Cloud::Public,
        &transport,
        &azure_support::sp_env(),
    )
    .await
    .unwrap();
    assert_eq!(mode, AuthMode::ClientSecret);
    let log = sim.requests();
    let tokens = azure_support::requests(
        &log,
        "POST",
        &format!("/{}/oauth2/v2.0/token", azure_support::TENANT),
    );
    assert_eq!(tokens.len(), 1, "{log:?}");
    assert_eq!(tokens[0].status, 200);
}

#[tokio::test]
async fn workload_identity_uses_the_federated_token_file() {
    let (sim, transport) = azure_support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzYSJ9.c2ln").unwrap();
    let env = Env::from_pairs([
        ("AZURE_CLIENT_ID", azure_support::CLIENT_ID),
        ("AZURE_TENANT_ID", azure_support::TENANT),
        ("AZURE_FEDERATED_TOKEN_FILE", file.to_str().unwrap()),
    ]);
    // `auto` picks workload identity first when its settings are present.
    let (_cred, mode) = credential_with_env(AuthMode::Auto, "", &Cloud::Public, &transport, &env)
        .await
        .unwrap();
    assert_eq!(mode, AuthMode::WorkloadIdentity);
    let log = sim.requests();
    let tokens = azure_support::requests(
        &log,
        "POST",
        &format!("/{}/oauth2/v2.0/token", azure_support::TENANT),
    );
    assert_eq!(tokens.len(), 1, "{log:?}");
    assert_eq!(tokens[0].status, 200);
}

#[tokio::test]
async fn auto_prefers_client_secret_over_later_modes() {
    let (_sim, transport) = azure_support::start().await;
    let (_cred, mode) = credential_with_env(
        AuthMode::Auto,
        azure_support::TENANT,
        &Cloud::Public,
        &transport,
        &azure_support::sp_env(),
    )
    .await
    .unwrap();
    assert_eq!(mode, AuthMode::ClientSecret);
}

#[tokio::test]
async fn auto_with_nothing_configured_lists_every_mode_and_why() {
    let (_sim, transport) = azure_support::start().await;
    let err = credential_with_env(
        AuthMode::Auto,
        azure_support::TENANT,
        &Cloud::Public,
        &transport,
        &Env::from_pairs(Vec::<(String, String)>::new()),
    )
    .await
    .err()
    .unwrap();
    let CredentialError::NoneWorked { attempts } = &err else {
        panic!("expected NoneWorked, got {err}");
    };
    let modes: Vec<AuthMode> = attempts.iter().map(|(m, _)| *m).collect();
    assert_eq!(modes, AuthMode::AUTO_ORDER.to_vec());
    assert!(
        attempts[0].1.contains("AZURE_CLIENT_ID is not set"),
        "{err}"
    );
    assert!(
        attempts[1].1.contains("AZURE_CLIENT_ID is not set"),
        "{err}"
    );
    assert!(!attempts[2].1.is_empty(), "{err}");
    assert!(attempts[3].1.contains("not on PATH"), "{err}");
    let text = err.to_string();
    for m in [
        "workload-identity",
        "client-secret",
        "managed-identity",
        "azure-cli",
    ] {
        assert!(text.contains(&format!("  - {m}: ")), "{text}");
    }
    let step: hcp_runtime::StepError = err.into();
    assert!(!step.retryable);
}

#[tokio::test]
async fn explicit_mode_reports_what_is_missing() {
    let (_sim, transport) = azure_support::start().await;
    let err = credential_with_env(
        AuthMode::ClientSecret,
        azure_support::TENANT,
        &Cloud::Public,
        &transport,
        &Env::from_pairs([("AZURE_CLIENT_ID", azure_support::CLIENT_ID)]),
    )
    .await
    .err()
    .unwrap();
    assert!(
        matches!(&err, CredentialError::NotApplicable { mode: AuthMode::ClientSecret, why } if why.contains("AZURE_CLIENT_SECRET")),
        "{err}"
    );
    // The secret never shows up in errors or debug output.
    assert!(!format!("{err:?}").contains("not-a-real-secret"));
}
