//! Where a run's steps send their requests, and the clients they use.
//!
//! A node's input names its *targets* ([`AzureEnv`], [`MgmtEnv`]): the cloud, tenant and
//! auth mode, and the management cluster. They are journaled with the DAG, so a resumed run
//! talks to the same place. The *process* decides how to reach them ([`Clients`]): directly,
//! or through a simulator. A run started against the simulator is refused by a process
//! talking to real Azure, and the other way round, with a message saying how to resume it.
//!
//! Clients are built lazily and cached per target: credentials are proven once per process
//! and target, not per step.

use crate::azure::credential::{Env, credential_with_env};
use crate::azure::durable::Ownership;
use crate::azure::{ArmClient, AuthMode, Cloud, GraphClient, KeyVaultClient, Transport};
use crate::kube::KubeTarget;
use crate::kube::mgmt::Mgmt;
use azure_core::credentials::TokenCredential;
use hcp_runtime::{StepContext, StepError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tokio::sync::Mutex;

/// Tag and label keys of our ownership (DOMAIN.md §1).
pub use crate::azure::durable::{TAG_CLUSTER, TAG_INFRA_ID, TAG_RUN};

/// The Azure side of a run, as journaled in every Azure node's input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AzureEnv {
    /// Which cloud.
    pub cloud: Cloud,
    /// Entra tenant.
    pub tenant_id: String,
    /// How to authenticate.
    pub auth: AuthMode,
    /// The run was started against a simulator.
    #[serde(default)]
    pub simulated: bool,
}

/// The management cluster of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MgmtEnv {
    /// The simulator's Kubernetes API (wherever the process's simulator is).
    Simulator,
    /// A real cluster.
    Cluster(KubeTarget),
}

/// Who owns what we create: the cluster and its infra id. The run id is added at run time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// Cluster name.
    pub cluster: String,
    /// Infra id.
    pub infra_id: String,
}

impl Owner {
    /// Ownership of resources this run creates (cluster, infra id and run).
    pub fn ownership(&self, ctx: &StepContext) -> Ownership {
        Ownership::new(&self.cluster, &self.infra_id, &ctx.run_id().to_string())
    }

    /// Tags (or labels) for a resource this run creates.
    pub fn tags(&self, ctx: &StepContext) -> BTreeMap<String, String> {
        self.ownership(ctx).tags
    }

    /// Whether tags (or labels) say the resource belongs to this cluster.
    pub fn owns(&self, tags: Option<&serde_json::Value>) -> bool {
        Ownership::new(&self.cluster, &self.infra_id, "").is_ours(tags)
    }

    /// Whether tags say this very run created the resource.
    pub fn created_by(&self, tags: Option<&serde_json::Value>, ctx: &StepContext) -> bool {
        self.ownership(ctx).is_this_run(tags)
    }
}

/// How this process reaches Azure and the management cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Real endpoints.
    Direct,
    /// An hcp-simulator at this base URL (e.g. `http://127.0.0.1:8080`).
    Simulator(String),
}

/// Cached clients for the steps of this process.
#[derive(Debug)]
pub struct Clients {
    reach: Reach,
    arm: Mutex<HashMap<String, ArmClient>>,
    /// Credentials proven per target, shared by the Graph and Key Vault clients.
    creds: Mutex<HashMap<String, Arc<dyn TokenCredential>>>,
    graph: Mutex<HashMap<String, GraphClient>>,
    key_vault: Mutex<HashMap<String, KeyVaultClient>>,
    kube: Mutex<HashMap<String, Mgmt>>,
}

/// Fake credentials the simulator's token endpoint accepts; they exercise the real
/// client-secret flow of azure_identity. Not a secret: the simulator accepts anything.
/// The code of a credential error whose token endpoint did not answer: the network is what
/// to fix, not the credential (preflight says "cannot reach", not "log in").
pub const UNREACHABLE: &str = "EndpointUnreachable";

const SIM_CLIENT_ID: &str = "00000000-0000-0000-0000-00000000c11e";

impl Clients {
    /// Clients reaching the world through `reach`.
    pub fn new(reach: Reach) -> Arc<Self> {
        crate::tls::install_crypto_provider();
        if matches!(reach, Reach::Simulator(_)) {
            // The simulator runs on a fast time scale and always says when to look again;
            // where it does not, do not wait real Azure's 10 s.
            crate::azure::durable::set_default_poll(std::time::Duration::from_millis(250));
        }
        Arc::new(Self {
            reach,
            arm: Mutex::default(),
            creds: Mutex::default(),
            graph: Mutex::default(),
            key_vault: Mutex::default(),
            kube: Mutex::default(),
        })
    }

    /// How this process reaches the world.
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// How long a step waits before looking again at something that is not ready yet (a
    /// condition, an IP, an approval). Real control planes take minutes, so 5 s; the
    /// simulator runs on a fast time scale, so 250 ms.
    pub fn poll(&self) -> std::time::Duration {
        match self.reach {
            Reach::Direct => std::time::Duration::from_secs(5),
            Reach::Simulator(_) => std::time::Duration::from_millis(250),
        }
    }

    fn check(&self, simulated: bool) -> Result<(), StepError> {
        match (&self.reach, simulated) {
            (Reach::Simulator(_), true) | (Reach::Direct, false) => Ok(()),
            (Reach::Direct, true) => Err(StepError::permanent(
                "configuration",
                "this run was started against the simulator; run the worker or `resume` with \
                 `--simulate` (in-process) or `--simulator URL`",
            )
            .with_code("SimulatedRun")),
            (Reach::Simulator(_), false) => Err(StepError::permanent(
                "configuration",
                "this run targets real Azure, but this process talks to a simulator; run it \
                 without `--simulate`/`--simulator`",
            )
            .with_code("RealRun")),
        }
    }

    /// The ARM client for `env`, proving its credential on first use.
    ///
    /// # Errors
    /// Credentials that do not work are permanent errors naming every mode tried;
    /// a failed token request over the network is retryable.
    pub async fn arm(&self, env: &AzureEnv) -> Result<ArmClient, StepError> {
        self.check(env.simulated)?;
        let key = serde_json::to_string(env).unwrap_or_default();
        let mut cache = self.arm.lock().await;
        if let Some(c) = cache.get(&key) {
            return Ok(c.clone());
        }
        let (transport, mode, vars) = match &self.reach {
            Reach::Direct => (Transport::Direct, env.auth, Env::process()),
            Reach::Simulator(base) => (
                Transport::Simulator { base: base.clone() },
                AuthMode::ClientSecret,
                Env::from_pairs([
                    ("AZURE_CLIENT_ID", SIM_CLIENT_ID),
                    ("AZURE_TENANT_ID", env.tenant_id.as_str()),
                    ("AZURE_CLIENT_SECRET", "simulated"),
                ]),
            ),
        };
        let (cred, _chosen) =
            credential_with_env(mode, &env.tenant_id, &env.cloud, &transport, &vars)
                .await
                .map_err(|e| {
                    let retryable = e.is_retryable();
                    let msg = format!("Azure credentials ({}): {e}", env.auth.as_str());
                    if retryable {
                        StepError::retryable("transient", msg)
                    } else {
                        StepError::permanent("authorization", msg)
                            .with_code("CredentialUnavailable")
                    }
                })?;
        let client = ArmClient::new(&env.cloud, cred, &transport)
            .map_err(|e| StepError::permanent("configuration", e.to_string()))?;
        cache.insert(key, client.clone());
        Ok(client)
    }

    /// A fresh credential for `env` (the same selection as [`Self::arm`], uncached) and the
    /// mode that worked, for `preflight`'s "who am I" (it asks for a token and reads its
    /// claims; the token never leaves the process).
    ///
    /// # Errors
    /// As [`Self::arm`].
    pub async fn arm_credential(
        &self,
        env: &AzureEnv,
    ) -> Result<(Arc<dyn azure_core::credentials::TokenCredential>, AuthMode), StepError> {
        self.check(env.simulated)?;
        let (transport, mode, vars) = match &self.reach {
            Reach::Direct => (Transport::Direct, env.auth, Env::process()),
            Reach::Simulator(base) => (
                Transport::Simulator { base: base.clone() },
                AuthMode::ClientSecret,
                Env::from_pairs([
                    ("AZURE_CLIENT_ID", SIM_CLIENT_ID),
                    ("AZURE_TENANT_ID", env.tenant_id.as_str()),
                    ("AZURE_CLIENT_SECRET", "simulated"),
                ]),
            ),
        };
        credential_with_env(mode, &env.tenant_id, &env.cloud, &transport, &vars)
            .await
            .map_err(|e| {
                let msg = format!("Azure credentials ({}): {e}", env.auth.as_str());
                if e.unreachable().is_some() {
                    StepError::retryable("transient", msg).with_code(UNREACHABLE)
                } else if e.is_retryable() {
                    StepError::retryable("transient", msg)
                } else {
                    StepError::permanent("authorization", msg).with_code("CredentialUnavailable")
                }
            })
    }

    /// The credential for `env` (the same selection as [`Self::arm`]), proven once per
    /// process and target and shared by the Graph and Key Vault clients.
    async fn shared_credential(
        &self,
        env: &AzureEnv,
    ) -> Result<Arc<dyn TokenCredential>, StepError> {
        let key = serde_json::to_string(env).unwrap_or_default();
        let mut cache = self.creds.lock().await;
        if let Some(c) = cache.get(&key) {
            return Ok(c.clone());
        }
        let (cred, _mode) = self.arm_credential(env).await?;
        cache.insert(key, cred.clone());
        Ok(cred)
    }

    /// The Microsoft Graph client for `env` (token scope [`Cloud::graph_scope`]).
    ///
    /// # Errors
    /// As [`Self::arm`]; a custom cloud without a Graph endpoint is a permanent
    /// `configuration` error.
    pub async fn graph(&self, env: &AzureEnv) -> Result<GraphClient, StepError> {
        self.check(env.simulated)?;
        let key = serde_json::to_string(env).unwrap_or_default();
        if let Some(c) = self.graph.lock().await.get(&key) {
            return Ok(c.clone());
        }
        let cred = self.shared_credential(env).await?;
        let client = GraphClient::new(&env.cloud, cred, &self.transport())
            .map_err(|e| StepError::permanent("configuration", e.to_string()))?;
        self.graph.lock().await.insert(key, client.clone());
        Ok(client)
    }

    /// The Key Vault data-plane client for `env` (any vault of its cloud; token scope
    /// [`Cloud::key_vault_scope`]).
    ///
    /// # Errors
    /// As [`Self::arm`]; a custom cloud without a Key Vault suffix is a permanent
    /// `configuration` error.
    pub async fn key_vault(&self, env: &AzureEnv) -> Result<KeyVaultClient, StepError> {
        self.check(env.simulated)?;
        let key = serde_json::to_string(env).unwrap_or_default();
        if let Some(c) = self.key_vault.lock().await.get(&key) {
            return Ok(c.clone());
        }
        let cred = self.shared_credential(env).await?;
        let client = KeyVaultClient::new(&env.cloud, cred, &self.transport())
            .map_err(|e| StepError::permanent("configuration", e.to_string()))?;
        self.key_vault.lock().await.insert(key, client.clone());
        Ok(client)
    }

    /// The blob transport (same reach as ARM).
    pub fn transport(&self) -> Transport {
        match &self.reach {
            Reach::Direct => Transport::Direct,
            Reach::Simulator(base) => Transport::Simulator { base: base.clone() },
        }
    }

    /// The management cluster client for `env`.
    ///
    /// # Errors
    /// A simulated target in a real process (or the reverse), or a kubeconfig problem.
    pub async fn mgmt(&self, env: &MgmtEnv) -> Result<Mgmt, StepError> {
        let target = match (env, &self.reach) {
            (MgmtEnv::Simulator, Reach::Simulator(base)) => {
                KubeTarget::Endpoint { url: base.clone() }
            }
            (MgmtEnv::Simulator, Reach::Direct) => {
                self.check(true)?;
                unreachable_target()?
            }
            (MgmtEnv::Cluster(_), Reach::Simulator(_)) => {
                self.check(false)?;
                unreachable_target()?
            }
            (MgmtEnv::Cluster(t), Reach::Direct) => t.clone(),
        };
        let key = serde_json::to_string(&target).unwrap_or_default();
        let mut cache = self.kube.lock().await;
        if let Some(c) = cache.get(&key) {
            return Ok(c.clone());
        }
        let client = crate::kube::client(&target)
            .await
            .map_err(StepError::from)?;
        let m = Mgmt::new(client);
        cache.insert(key, m.clone());
        Ok(m)
    }
}

fn unreachable_target() -> Result<KubeTarget, StepError> {
    Err(StepError::permanent(
        "configuration",
        "management cluster target does not match this process",
    ))
}
