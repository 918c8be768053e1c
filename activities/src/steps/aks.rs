//! The AKS management cluster and the caller, read-only: what the ARO HCP identity model
//! needs to know before it grants anything.
//!
//! - `azure.aks-cluster.read`: the AKS cluster (`Microsoft.ContainerService/managedClusters`,
//!   `specification/containerservice/resource-manager/Microsoft.ContainerService/aks/stable/2025-07-01/managedClusters.json`
//!   `ManagedClusterProperties`): the Key Vault Secrets Provider add-on
//!   (`addonProfiles.azureKeyvaultSecretsProvider`, its identity's client and object ids:
//!   the identity the Secrets Store CSI driver reads Key Vault as, which HyperShift names
//!   in `ARO_HCP_KEY_VAULT_USER_CLIENT_ID`), the OIDC issuer (`oidcIssuerProfile`) and
//!   workload identity (`securityProfile.workloadIdentity`). A disabled add-on stops the
//!   run for good: without it no control-plane pod can mount its credentials.
//! - `azure.caller.principal`: the object id of the principal hcp-workflow runs as (the
//!   `oid` claim of its ARM access token, as `az` reads it), so the caller can be granted
//!   Key Vault Administrator on a vault it creates (HyperShift's `setup_MIv3_kv.sh` does
//!   the same for the signed-in user).

use super::facts::Facts;
use std::sync::Arc;

use hcp_runtime::{Action, Outcome, RetryPolicy, StepContext, StepError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::arm::azure_retry;
use super::env::{AzureEnv, Clients};

/// api-version of `Microsoft.ContainerService/managedClusters` reads.
pub const API_AKS: &str = "2025-07-01";

/// Input of `azure.aks-cluster.read`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AksInput {
    /// Azure target (the management cluster's subscription).
    pub azure: AzureEnv,
    /// ARM id of the AKS cluster.
    pub id: String,
}

/// An identity's ids.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct IdentityIds {
    /// Client (application) id.
    pub client_id: String,
    /// Object (principal) id.
    pub object_id: String,
}

/// Output of `azure.aks-cluster.read`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AksOutput {
    /// The cluster id.
    pub id: String,
    /// The Key Vault Secrets Provider add-on's identity.
    pub key_vault_secrets_provider: IdentityIds,
    /// The cluster's OIDC issuer URL, when enabled.
    #[serde(default)]
    pub oidc_issuer: Option<String>,
    /// Whether workload identity (the webhook) is enabled.
    #[serde(default)]
    pub workload_identity: bool,
}

/// What an AKS cluster answer says (shared with preflight).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AksFacts {
    /// `addonProfiles.azureKeyvaultSecretsProvider.enabled`.
    pub secrets_provider_enabled: bool,
    /// Its identity, when it has one.
    pub secrets_provider_identity: Option<IdentityIds>,
    /// `oidcIssuerProfile.issuerURL` when `enabled`.
    pub oidc_issuer: Option<String>,
    /// `securityProfile.workloadIdentity.enabled`.
    pub workload_identity: bool,
}

impl AksFacts {
    /// Reads the facts off a `managedClusters` GET body.
    pub fn from_body(v: &Value) -> Self {
        let p = |ptr: &str| v.pointer(ptr);
        let s = |ptr: &str| p(ptr).and_then(Value::as_str).map(str::to_string);
        let b = |ptr: &str| p(ptr).and_then(Value::as_bool).unwrap_or(false);
        let addon = "/properties/addonProfiles/azureKeyvaultSecretsProvider";
        let identity = match (
            s(&format!("{addon}/identity/clientId")),
            s(&format!("{addon}/identity/objectId")),
        ) {
            (Some(client_id), Some(object_id)) => Some(IdentityIds {
                client_id,
                object_id,
            }),
            _ => None,
        };
        AksFacts {
            secrets_provider_enabled: b(&format!("{addon}/enabled")),
            secrets_provider_identity: identity,
            oidc_issuer: if b("/properties/oidcIssuerProfile/enabled") {
                s("/properties/oidcIssuerProfile/issuerURL")
            } else {
                None
            },
            workload_identity: b("/properties/securityProfile/workloadIdentity/enabled"),
        }
    }
}

/// `azure.aks-cluster.read`: read-only, no undo.
#[derive(Clone, Debug)]
pub struct ReadAksCluster(pub Arc<Clients>);

fn permanent(message: String) -> StepError {
    StepError::permanent(hcp_runtime::error::kind::VALIDATION, message)
}

impl Action for ReadAksCluster {
    const NAME: &'static str = "azure.aks-cluster.read";
    const HAS_UNDO: bool = false;
    type Input = AksInput;
    type Output = AksOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        _ctx: &StepContext,
        input: AksInput,
    ) -> Result<Outcome<AksOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let Some(body) = arm.get_value(&input.id, API_AKS).await? else {
            return Err(permanent(format!(
                "the AKS management cluster {} does not exist (managementCluster.aksClusterId)",
                input.id
            )));
        };
        let facts = AksFacts::from_body(&body);
        let identity = match (
            facts.secrets_provider_enabled,
            facts.secrets_provider_identity,
        ) {
            (true, Some(i)) => i,
            _ => {
                return Err(permanent(format!(
                    "the AKS cluster {} has no Key Vault Secrets Provider add-on: the control-plane pods could not mount their certificates; enable it (az aks enable-addons --addons azure-keyvault-secrets-provider) and retry",
                    input.id
                )));
            }
        };
        Ok(Outcome::Done(AksOutput {
            id: input.id,
            key_vault_secrets_provider: identity,
            oidc_issuer: facts.oidc_issuer,
            workload_identity: facts.workload_identity,
        }))
    }
}

impl Facts for ReadAksCluster {
    const ARM_ACTIONS: &'static [&'static str] =
        &["Microsoft.ContainerService/managedClusters/read"];
}

/// Input of `azure.caller.principal`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CallerInput {
    /// Azure target.
    pub azure: AzureEnv,
}

/// Output of `azure.caller.principal`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CallerOutput {
    /// The principal's object id (`oid`).
    pub object_id: String,
    /// Its application (client) id (`appid`, `azp`), when a service principal.
    #[serde(default)]
    pub app_id: Option<String>,
}

/// The `oid` and `appid` claims of an access token (its payload only: the token was
/// just issued to us by Entra; nothing here verifies or trusts it for anything but
/// naming ourselves).
///
/// # Errors
/// The token is not a JWT with an `oid` claim.
pub fn token_principal(token: &str) -> Result<CallerOutput, String> {
    let claims = crate::preflight::azure::token_claims(token)
        .ok_or("the access token is not a JWT with a JSON payload")?;
    let object_id = claims
        .object_id
        .ok_or("the access token has no oid claim")?;
    Ok(CallerOutput {
        object_id,
        app_id: claims.app_id,
    })
}

/// `azure.caller.principal`: read-only, no undo.
#[derive(Clone, Debug)]
pub struct CallerPrincipal(pub Arc<Clients>);

impl Action for CallerPrincipal {
    const NAME: &'static str = "azure.caller.principal";
    const HAS_UNDO: bool = false;
    type Input = CallerInput;
    type Output = CallerOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        _ctx: &StepContext,
        input: CallerInput,
    ) -> Result<Outcome<CallerOutput>, StepError> {
        let (credential, _) = self.0.arm_credential(&input.azure).await?;
        let scope = input.azure.cloud.arm_scope();
        let token = credential
            .get_token(&[scope.as_str()], None)
            .await
            .map_err(|e| {
                StepError::retryable(
                    hcp_runtime::error::kind::AUTHORIZATION,
                    format!("cannot get a token to learn who we are: {e}"),
                )
            })?;
        let caller = token_principal(token.token.secret()).map_err(permanent)?;
        Ok(Outcome::Done(caller))
    }
}

impl Facts for CallerPrincipal {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::json;

    #[test]
    fn facts_from_an_aks_answer() {
        let v = json!({"properties": {
            "addonProfiles": {"azureKeyvaultSecretsProvider": {"enabled": true,
                "identity": {"resourceId": "/x", "clientId": "c", "objectId": "o"}}},
            "oidcIssuerProfile": {"enabled": true, "issuerURL": "https://issuer/"},
            "securityProfile": {"workloadIdentity": {"enabled": true}}}});
        let f = AksFacts::from_body(&v);
        assert!(f.secrets_provider_enabled && f.workload_identity);
        assert_eq!(f.oidc_issuer.as_deref(), Some("https://issuer/"));
        assert_eq!(
            f.secrets_provider_identity,
            Some(IdentityIds {
                client_id: "c".into(),
                object_id: "o".into()
            })
        );
        let off = AksFacts::from_body(&json!({"properties": {}}));
        assert_eq!(off, AksFacts::default());
    }

    #[test]
    fn caller_from_a_token() {
        let payload = URL_SAFE_NO_PAD.encode(json!({"oid": "o-1", "appid": "a-1"}).to_string());
        let c = token_principal(&format!("h.{payload}.s")).expect("claims");
        assert_eq!(c.object_id, "o-1");
        assert_eq!(c.app_id.as_deref(), Some("a-1"));
        assert!(token_principal("nope").is_err());
    }
}
