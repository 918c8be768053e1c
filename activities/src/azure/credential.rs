//! Azure credentials: which identity the workflow acts as.
//!
//! Four ways in, tried in this order by [`AuthMode::Auto`]:
//!
//! 1. **workload identity** — `AZURE_CLIENT_ID` + `AZURE_FEDERATED_TOKEN_FILE` (tenant from
//!    `AZURE_TENANT_ID`, else the configured tenant): the worker runs as a pod with Entra
//!    workload identity;
//! 2. **client secret** — `AZURE_CLIENT_ID` + `AZURE_CLIENT_SECRET` (same tenant rule); the
//!    secret is read from the environment, wrapped at once, and never logged;
//! 3. **managed identity** — the VM's / App Service's identity (user-assigned when
//!    `AZURE_CLIENT_ID` is set);
//! 4. **Azure CLI** — `az account get-access-token`, when `az` is on `PATH`.
//!
//! Each mode is first checked for applicability (its variables are set, `az` exists), then
//! proven with a real token request for the cloud's ARM scope, so a misconfiguration
//! surfaces at start with every reason at once ([`CredentialError::NoneWorked`]) rather
//! than as a 401 in the middle of a run. Every credential uses the cloud's authority host
//! and the chosen [`Transport`], so the simulator's Entra endpoint answers them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use azure_core::credentials::TokenCredential;
use azure_identity::{
    AzureCliCredential, AzureCliCredentialOptions, ClientAssertionCredentialOptions,
    ClientSecretCredential, ClientSecretCredentialOptions, ManagedIdentityCredential,
    ManagedIdentityCredentialOptions, UserAssignedId, WorkloadIdentityCredential,
    WorkloadIdentityCredentialOptions,
};
use hcp_runtime::StepError;
use hcp_runtime::error::kind;
use serde::{Deserialize, Serialize};

use super::cloud::Cloud;
use super::transport::{Transport, TransportError};
use crate::secret::Secret;

/// Environment variable: client (application) id.
pub const ENV_CLIENT_ID: &str = "AZURE_CLIENT_ID";
/// Environment variable: tenant id.
pub const ENV_TENANT_ID: &str = "AZURE_TENANT_ID";
/// Environment variable: client secret.
pub const ENV_CLIENT_SECRET: &str = "AZURE_CLIENT_SECRET";
/// Environment variable: projected service-account token file (workload identity).
pub const ENV_FEDERATED_TOKEN_FILE: &str = "AZURE_FEDERATED_TOKEN_FILE";

/// How long one token probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `auto` waits for managed identity. IMDS answers within milliseconds on an
/// Azure VM and not at all elsewhere (azure_identity then retries for over a minute), so
/// `auto` gives it a short leash; an explicit `managed-identity` gets [`PROBE_TIMEOUT`].
pub const AUTO_MANAGED_IDENTITY_TIMEOUT: Duration = Duration::from_secs(2);

/// How to authenticate to Azure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    /// Try workload identity, client secret, managed identity, Azure CLI — in that order.
    #[default]
    Auto,
    /// Entra workload identity (federated token file).
    WorkloadIdentity,
    /// Service principal with a client secret.
    ClientSecret,
    /// Azure managed identity (IMDS / App Service).
    ManagedIdentity,
    /// The Azure CLI's logged-in account.
    AzureCli,
}

impl AuthMode {
    /// The modes [`AuthMode::Auto`] tries, in order.
    pub const AUTO_ORDER: [AuthMode; 4] = [
        AuthMode::WorkloadIdentity,
        AuthMode::ClientSecret,
        AuthMode::ManagedIdentity,
        AuthMode::AzureCli,
    ];

    /// The kebab-case name (as in configuration files).
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Auto => "auto",
            AuthMode::WorkloadIdentity => "workload-identity",
            AuthMode::ClientSecret => "client-secret",
            AuthMode::ManagedIdentity => "managed-identity",
            AuthMode::AzureCli => "azure-cli",
        }
    }
}

impl fmt::Display for AuthMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// No usable credential.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The chosen mode is not configured (a variable is missing, `az` is not installed).
    #[error("Azure authentication `{mode}` is not configured: {why}")]
    NotApplicable {
        /// The mode.
        mode: AuthMode,
        /// What is missing.
        why: String,
    },
    /// The chosen mode is configured but could not get a token.
    #[error("Azure authentication `{mode}` failed: {why}")]
    Failed {
        /// The mode.
        mode: AuthMode,
        /// Why (Entra's answer, a timeout, …).
        why: String,
    },
    /// The token endpoint did not answer: a refused connection, a name that does not
    /// resolve, a time-out. Nothing is known about the credential itself.
    #[error("cannot reach {endpoint} ({mode}): {why}")]
    Unreachable {
        /// The mode.
        mode: AuthMode,
        /// The endpoint it could not reach (`https://login.microsoftonline.com/<tenant>/…`).
        endpoint: String,
        /// The network error.
        why: String,
    },
    /// `auto` tried every mode and none worked.
    #[error("{}", none_worked(.attempts))]
    NoneWorked {
        /// Each mode tried and why it did not work.
        attempts: Vec<(AuthMode, String)>,
    },
    /// The HTTP transport could not be built.
    #[error(transparent)]
    Transport(#[from] TransportError),
}

fn none_worked(attempts: &[(AuthMode, String)]) -> String {
    let mut s = String::from("no Azure credential worked (auth: auto); set one up and try again:");
    for (mode, why) in attempts {
        s.push_str(&format!("\n  - {mode}: {why}"));
    }
    s
}

impl CredentialError {
    /// Whether trying again later may help (a token endpoint timing out, not a missing
    /// variable or a rejected secret).
    pub fn is_retryable(&self) -> bool {
        match self {
            CredentialError::Failed { why, .. } => why.starts_with("timed out"),
            CredentialError::Unreachable { .. } => true,
            _ => false,
        }
    }

    /// The endpoint that did not answer, when that is why.
    pub fn unreachable(&self) -> Option<&str> {
        match self {
            CredentialError::Unreachable { endpoint, .. } => Some(endpoint),
            _ => None,
        }
    }
}

/// Whether `e` (or an error under it) is a network failure rather than an answer: a refused
/// or reset connection, a name that does not resolve, a time-out. azure_identity wraps the
/// transport's error in its own ("ClientSecretCredential authentication failed. failed to
/// execute `reqwest` request"), so the chain is walked, by io kinds first, then by the
/// words hyper and the resolver use.
fn network_failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    use std::io::ErrorKind as K;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut last = e.to_string();
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                K::ConnectionRefused
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::NotConnected
                    | K::TimedOut
                    | K::HostUnreachable
                    | K::NetworkUnreachable
                    | K::AddrNotAvailable
            )
        {
            return Some(one_line(&io.to_string()));
        }
        last = err.to_string();
        cur = err.source();
    }
    let text = one_line(&e.to_string()).to_ascii_lowercase() + " " + &last.to_ascii_lowercase();
    [
        "dns error",
        "failed to lookup address",
        "name or service not known",
        "temporary failure in name resolution",
        "connection refused",
        "tcp connect error",
        "error sending request",
        "failed to execute `reqwest` request",
        "operation timed out",
        "network is unreachable",
    ]
    .iter()
    .any(|w| text.contains(w))
    .then(|| one_line(&last))
}

impl From<CredentialError> for StepError {
    fn from(e: CredentialError) -> Self {
        let retryable = e.is_retryable();
        let msg = e.to_string();
        if retryable {
            StepError::retryable(kind::TRANSIENT, msg)
        } else {
            StepError::permanent(kind::AUTHORIZATION, msg).with_code("CredentialUnavailable")
        }
    }
}

/// Where credential settings come from: the process environment, or a fixed map (tests,
/// and callers that resolve settings themselves).
#[derive(Clone, Default)]
pub struct Env {
    vars: Option<BTreeMap<String, String>>,
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values may be secrets: show names only.
        let names: Vec<&String> = self.vars.iter().flat_map(|m| m.keys()).collect();
        f.debug_struct("Env")
            .field("process", &self.vars.is_none())
            .field("names", &names)
            .finish()
    }
}

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self { vars: None }
    }

    /// A fixed set of variables (nothing is read from the process).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            vars: Some(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }

    /// A variable's value, `None` when unset or empty.
    pub fn var(&self, key: &str) -> Option<String> {
        let v = match &self.vars {
            None => std::env::var(key).ok(),
            Some(m) => m.get(key).cloned(),
        };
        v.filter(|v| !v.trim().is_empty())
    }
}

/// Builds and proves a credential for `mode` from the process environment.
///
/// Returns the credential and the mode actually chosen (useful with `auto`).
///
/// # Errors
/// See [`CredentialError`].
pub async fn credential(
    mode: AuthMode,
    tenant_id: &str,
    cloud: &Cloud,
    transport: &Transport,
) -> Result<(Arc<dyn TokenCredential>, AuthMode), CredentialError> {
    credential_with_env(mode, tenant_id, cloud, transport, &Env::process()).await
}

/// [`credential`] with explicit settings.
///
/// # Errors
/// See [`CredentialError`].
pub async fn credential_with_env(
    mode: AuthMode,
    tenant_id: &str,
    cloud: &Cloud,
    transport: &Transport,
    env: &Env,
) -> Result<(Arc<dyn TokenCredential>, AuthMode), CredentialError> {
    let modes: &[AuthMode] = if mode == AuthMode::Auto {
        &AuthMode::AUTO_ORDER
    } else {
        std::slice::from_ref(&mode)
    };
    let mut attempts = Vec::new();
    // A configured credential whose endpoint did not answer: with `auto`, that (not "none
    // worked") is what to fix. The instance metadata service not answering only means
    // this is not an Azure machine.
    let mut unreachable = None;
    for &m in modes {
        let limit = if mode == AuthMode::Auto && m == AuthMode::ManagedIdentity {
            AUTO_MANAGED_IDENTITY_TIMEOUT
        } else {
            PROBE_TIMEOUT
        };
        match try_mode(m, tenant_id, cloud, transport, env, limit).await {
            Ok(c) => {
                tracing::info!(auth = %m, "Azure credential ready");
                return Ok((c, m));
            }
            Err(e @ CredentialError::Transport(_)) => return Err(e),
            Err(e) if mode != AuthMode::Auto => return Err(e),
            Err(e @ CredentialError::Unreachable { .. }) if m != AuthMode::ManagedIdentity => {
                tracing::debug!(auth = %m, error = %e, "Azure token endpoint unreachable");
                attempts.push((m, e.to_string()));
                unreachable.get_or_insert(e);
            }
            Err(CredentialError::Unreachable { why, .. }) => attempts.push((m, why)),
            Err(
                CredentialError::NotApplicable { why, .. } | CredentialError::Failed { why, .. },
            ) => {
                tracing::debug!(auth = %m, %why, "Azure credential not usable");
                attempts.push((m, why));
            }
            Err(CredentialError::NoneWorked { attempts: more }) => attempts.extend(more),
        }
    }
    Err(unreachable.unwrap_or(CredentialError::NoneWorked { attempts }))
}

fn not_applicable(mode: AuthMode, why: impl Into<String>) -> CredentialError {
    CredentialError::NotApplicable {
        mode,
        why: why.into(),
    }
}

fn failed(mode: AuthMode, e: impl fmt::Display) -> CredentialError {
    CredentialError::Failed {
        mode,
        why: e.to_string(),
    }
}

fn tenant(env: &Env, configured: &str) -> Option<String> {
    env.var(ENV_TENANT_ID)
        .or_else(|| Some(configured.trim().to_string()).filter(|t| !t.is_empty()))
}

async fn try_mode(
    mode: AuthMode,
    tenant_id: &str,
    cloud: &Cloud,
    transport: &Transport,
    env: &Env,
    limit: Duration,
) -> Result<Arc<dyn TokenCredential>, CredentialError> {
    let options = transport.client_options(cloud)?;
    let cred: Arc<dyn TokenCredential> = match mode {
        AuthMode::Auto => {
            return Err(not_applicable(mode, "`auto` is not a credential by itself"));
        }
        AuthMode::WorkloadIdentity => {
            let client_id = env
                .var(ENV_CLIENT_ID)
                .ok_or_else(|| not_applicable(mode, format!("{ENV_CLIENT_ID} is not set")))?;
            let file = env.var(ENV_FEDERATED_TOKEN_FILE).ok_or_else(|| {
                not_applicable(mode, format!("{ENV_FEDERATED_TOKEN_FILE} is not set"))
            })?;
            let tenant = tenant(env, tenant_id).ok_or_else(|| {
                not_applicable(
                    mode,
                    format!("{ENV_TENANT_ID} is not set and no tenant is configured"),
                )
            })?;
            if !Path::new(&file).is_file() {
                return Err(not_applicable(
                    mode,
                    format!("{ENV_FEDERATED_TOKEN_FILE}={file} is not a readable file"),
                ));
            }
            WorkloadIdentityCredential::new(Some(WorkloadIdentityCredentialOptions {
                credential_options: ClientAssertionCredentialOptions {
                    client_options: options,
                },
                client_id: Some(client_id),
                tenant_id: Some(tenant),
                token_file_path: Some(PathBuf::from(file)),
            }))
            .map_err(|e| failed(mode, e))?
        }
        AuthMode::ClientSecret => {
            let client_id = env
                .var(ENV_CLIENT_ID)
                .ok_or_else(|| not_applicable(mode, format!("{ENV_CLIENT_ID} is not set")))?;
            let secret = env
                .var(ENV_CLIENT_SECRET)
                .map(Secret::new)
                .ok_or_else(|| not_applicable(mode, format!("{ENV_CLIENT_SECRET} is not set")))?;
            let tenant = tenant(env, tenant_id).ok_or_else(|| {
                not_applicable(
                    mode,
                    format!("{ENV_TENANT_ID} is not set and no tenant is configured"),
                )
            })?;
            ClientSecretCredential::new(
                &tenant,
                client_id,
                azure_core::credentials::Secret::new(secret.into_inner()),
                Some(ClientSecretCredentialOptions {
                    client_options: options,
                }),
            )
            .map_err(|e| failed(mode, e))?
        }
        AuthMode::ManagedIdentity => {
            ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                user_assigned_id: env.var(ENV_CLIENT_ID).map(UserAssignedId::ClientId),
                client_options: options,
            }))
            .map_err(|e| failed(mode, e))?
        }
        AuthMode::AzureCli => {
            if find_on_path(env, "az").is_none() {
                return Err(not_applicable(mode, "the Azure CLI (`az`) is not on PATH"));
            }
            let tenant = tenant(env, tenant_id);
            AzureCliCredential::new(Some(AzureCliCredentialOptions {
                tenant_id: tenant,
                ..Default::default()
            }))
            .map_err(|e| failed(mode, e))?
        }
    };
    let scope = cloud.arm_scope();
    // The endpoint a failure to connect is about: Entra's token endpoint, or the instance
    // metadata service.
    let endpoint = match mode {
        AuthMode::ManagedIdentity => "http://169.254.169.254/metadata/identity/oauth2/token".into(),
        _ => format!(
            "{}/{}/oauth2/v2.0/token",
            cloud.authority_host(),
            tenant(env, tenant_id).unwrap_or_default()
        ),
    };
    match tokio::time::timeout(limit, cred.get_token(&[scope.as_str()], None)).await {
        Ok(Ok(_token)) => Ok(cred),
        Ok(Err(e)) => match network_failure(&e) {
            // The CLI reaches Entra itself: its failure is its own message.
            Some(why) if mode != AuthMode::AzureCli => Err(CredentialError::Unreachable {
                mode,
                endpoint,
                why,
            }),
            _ => Err(failed(mode, one_line(&e.to_string()))),
        },
        Err(_) if mode == AuthMode::AzureCli => Err(failed(
            mode,
            format!(
                "timed out after {}s getting a token for {scope}",
                limit.as_secs()
            ),
        )),
        Err(_) => Err(CredentialError::Unreachable {
            mode,
            endpoint,
            why: format!(
                "no answer within {}s getting a token for {scope}",
                limit.as_secs()
            ),
        }),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn find_on_path(env: &Env, program: &str) -> Option<PathBuf> {
    let path = env.var("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_debug_hides_values() {
        let env = Env::from_pairs([(ENV_CLIENT_SECRET, "s3cr3t")]);
        let dbg = format!("{env:?}");
        assert!(!dbg.contains("s3cr3t"), "{dbg}");
        assert!(dbg.contains(ENV_CLIENT_SECRET));
        assert_eq!(env.var(ENV_CLIENT_ID), None);
    }

    /// A client secret whose token endpoint refuses the connection (a real socket, nothing
    /// listening): "cannot reach <endpoint>", not "authentication failed"; with `auto` too,
    /// where the instance metadata service not answering is no reason.
    #[tokio::test]
    async fn a_token_endpoint_that_refuses_the_connection_is_unreachable_not_bad_credentials() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(9);
        let cloud = Cloud::Custom {
            resource_manager: "https://management.example.local".into(),
            authority_host: format!("https://127.0.0.1:{port}"),
            storage_suffix: "core.example.local".into(),
            graph: None,
            key_vault_suffix: None,
        };
        let env = Env::from_pairs([
            (ENV_CLIENT_ID, "11111111-1111-1111-1111-111111111111"),
            (ENV_CLIENT_SECRET, "not-a-secret"),
            (ENV_TENANT_ID, "99999999-8888-7777-6666-555555555555"),
            ("PATH", ""),
        ]);
        for mode in [AuthMode::ClientSecret, AuthMode::Auto] {
            let e = match credential_with_env(mode, "", &cloud, &Transport::Direct, &env).await {
                Ok(_) => panic!("{mode}: a token from a closed port"),
                Err(e) => e,
            };
            let endpoint = format!(
                "https://127.0.0.1:{port}/99999999-8888-7777-6666-555555555555/oauth2/v2.0/token"
            );
            assert_eq!(e.unreachable(), Some(endpoint.as_str()), "{mode}: {e}");
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("cannot reach {endpoint}")),
                "{msg}"
            );
            assert!(!msg.contains("authentication failed"), "{msg}");
            assert!(e.is_retryable());
        }
    }

    #[test]
    fn none_worked_lists_each_mode() {
        let e = CredentialError::NoneWorked {
            attempts: vec![
                (AuthMode::WorkloadIdentity, "A".into()),
                (AuthMode::AzureCli, "B".into()),
            ],
        };
        let s = e.to_string();
        assert!(s.contains("\n  - workload-identity: A"), "{s}");
        assert!(s.contains("\n  - azure-cli: B"), "{s}");
        assert!(!StepError::from(e).retryable);
    }
}
