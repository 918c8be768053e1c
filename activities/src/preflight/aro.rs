//! Preflight rows of the ARO HCP identity model (seed
//! `000_4293f64c3e51efdc`, "Required Azure Permissions" and "AKS Management Cluster").
//!
//! All read-only:
//! - `graph.permission`: the caller's Microsoft Graph application permissions, read from
//!   the `roles` claim of a Graph access token (what Graph itself enforces): it needs
//!   `Application.ReadWrite.OwnedBy` (or `Application.ReadWrite.All`) to create the
//!   control-plane components' applications.
//! - `keyvault.name`: a vault to create must have a free name
//!   (`Microsoft.KeyVault/checkNameAvailability`, `keyvault.json` 2023-07-01) unless it
//!   already exists in the persistent group (reused); an existing vault must exist and use
//!   RBAC authorization (HyperShift's `setup_MIv3_kv.sh` creates it with
//!   `--enable-rbac-authorization`; the roles below are RBAC roles).
//! - `keyvault.data-plane`: the caller's data actions on an existing vault
//!   (`Microsoft.Authorization/permissions` of the vault: certificates create/read,
//!   secrets get/set); a vault the run creates gets Key Vault Administrator for the caller
//!   from the run itself (needs `roleAssignments/write` there, an `azure.permission` row).
//! - `aks.addons`: the AKS cluster's Key Vault Secrets Provider add-on (with its identity),
//!   OIDC issuer and workload identity (`managedClusters.json` `ManagedClusterProperties`).
//! - `k8s.aro-hcp`: the management cluster's side: the HyperShift operator runs with
//!   `MANAGED_SERVICE=ARO-HCP` and `ARO_HCP_KEY_VAULT_USER_CLIENT_ID` naming the add-on's
//!   identity (`cmd/install/assets/hypershift_operator.go`, release-4.22), the
//!   SecretProviderClass CRD is served, and the workload identity webhook is installed.

use std::sync::Arc;

use futures::FutureExt;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Check, CheckResult, Inputs, Workflow, short};
use crate::azure::keyvault::API_KEY_VAULT;
use crate::steps::aks::{API_AKS, AksFacts};
use crate::steps::{AzureEnv, Clients};

/// Microsoft Graph `Application.ReadWrite.OwnedBy` (application permission id
/// 18a4783c-866b-4cc7-a460-3d5e5662c884, "Microsoft Graph permissions reference").
pub const OWNED_BY: &str = "Application.ReadWrite.OwnedBy";
const ALL: &str = "Application.ReadWrite.All";

/// The AKS workload identity webhook's configuration (what `az aks update
/// --enable-workload-identity` installs).
pub const WI_WEBHOOK: &str = "azure-wi-webhook-mutating-webhook-configuration";
/// The Secrets Store CSI driver's SecretProviderClass CRD.
pub const SPC_CRD: &str = "secretproviderclasses.secrets-store.csi.x-k8s.io";

/// What the ARO HCP checks read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AroInputs {
    /// Key Vault name.
    pub key_vault: String,
    /// Key Vault ARM id.
    pub key_vault_id: String,
    /// A vault the user made.
    pub existing: bool,
    /// The AKS cluster's ARM id.
    pub aks_cluster_id: String,
    /// Azure target of the AKS cluster's subscription.
    pub aks_azure: AzureEnv,
}

pub(crate) fn checks(clients: &Arc<Clients>, inputs: &Arc<Inputs>) -> Vec<Check> {
    let Some(a) = inputs.aro.clone() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (c, env) = (clients.clone(), inputs.azure.clone());
    out.push(Check::new(
        "graph.permission",
        format!("Microsoft Graph application permissions ({OWNED_BY})"),
        async move { vec![graph_permission(&c, &env).await] },
    ));
    if inputs.workflow == Workflow::Create {
        let (c, i, a2) = (clients.clone(), inputs.clone(), a.clone());
        out.push(Check::new(
            "keyvault.name",
            a.key_vault_id.clone(),
            async move { key_vault(&c, &i.azure, &i.subscription, &a2).await },
        ));
    }
    // One read of the AKS cluster for both rows that need it.
    let aks: AksRead = {
        let (c, a2) = (clients.clone(), a.clone());
        async move { read_aks(&c, &a2).await }.boxed().shared()
    };
    let (r, a2) = (aks.clone(), a.clone());
    out.push(Check::new(
        "aks.addons",
        a.aks_cluster_id.clone(),
        async move { vec![aks_addons(r.await, &a2)] },
    ));
    let (c, i) = (clients.clone(), inputs.clone());
    out.push(Check::new(
        "k8s.aro-hcp",
        "HyperShift operator env, SecretProviderClass CRD, workload identity webhook",
        async move { management(&c, &i, aks.await).await },
    ));
    out
}

/// The AKS cluster's body, or why it could not be read: (detail, fix).
type AksAnswer = Result<Value, (String, &'static str)>;
type AksRead = futures::future::Shared<futures::future::BoxFuture<'static, AksAnswer>>;

async fn read_aks(clients: &Clients, a: &AroInputs) -> AksAnswer {
    let arm = clients
        .arm(&a.aks_azure)
        .await
        .map_err(|e| (e.message, "see the azure.token row"))?;
    match arm.get_value(&a.aks_cluster_id, API_AKS).await {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err((
            "absent: no such AKS cluster".into(),
            "fix managementCluster.aksClusterId",
        )),
        Err(e) => Err((short(&e), "grant the caller Reader on the AKS cluster")),
    }
}

/// The `roles` claim of a token's payload (`azure::token_claims`).
fn token_roles(token: &str) -> Option<Vec<String>> {
    super::azure::token_claims(token).map(|c| c.roles)
}

async fn graph_permission(clients: &Clients, env: &AzureEnv) -> CheckResult {
    let target = format!("Microsoft Graph application permissions ({OWNED_BY})");
    let Some(scope) = env.cloud.graph_scope() else {
        return CheckResult::fail(
            "graph.permission",
            target,
            "this custom cloud names no Microsoft Graph endpoint",
            "add cloud.custom.graph to the cluster file",
        );
    };
    let (cred, _) = match clients.arm_credential(env).await {
        Ok(x) => x,
        Err(e) => {
            return CheckResult::fail(
                "graph.permission",
                target,
                format!("no credential: {}", e.message),
                "see the azure.token row",
            );
        }
    };
    let token = match cred.get_token(&[scope.as_str()], None).await {
        Ok(t) => t,
        Err(e) => {
            return CheckResult::fail(
                "graph.permission",
                target,
                format!("Entra refused a Microsoft Graph token: {}", short(&e)),
                "let the application request Microsoft Graph tokens (grant it a Graph permission with admin consent)",
            );
        }
    };
    let roles = token_roles(token.token.secret()).unwrap_or_default();
    if roles.iter().any(|r| r == OWNED_BY || r == ALL) {
        CheckResult::pass(
            "graph.permission",
            target,
            format!("granted: {}", roles.join(", ")),
        )
    } else {
        CheckResult::fail(
            "graph.permission",
            target,
            format!(
                "the caller's Graph token carries {}: without {OWNED_BY} it cannot create the control-plane components' applications",
                if roles.is_empty() {
                    "no application permission".to_string()
                } else {
                    roles.join(", ")
                }
            ),
            format!(
                "az ad app permission add --id <client id> --api 00000003-0000-0000-c000-000000000000 --api-permissions 18a4783c-866b-4cc7-a460-3d5e5662c884=Role && az ad app permission admin-consent --id <client id> ({OWNED_BY}, admin consent needed)"
            ),
        )
    }
}

/// Data actions the steps use on the vault.
const DATA_ACTIONS: [&str; 4] = [
    "Microsoft.KeyVault/vaults/certificates/create/action",
    "Microsoft.KeyVault/vaults/certificates/read",
    "Microsoft.KeyVault/vaults/secrets/getSecret/action",
    "Microsoft.KeyVault/vaults/secrets/setSecret/action",
];

/// Whether `action` is granted by a `Microsoft.Authorization/permissions` list's
/// `dataActions` (wildcards as RBAC writes them) and not in its `notDataActions`.
fn data_allowed(perms: &[Value], action: &str) -> bool {
    let matches = |pattern: &str| {
        let p = pattern.to_ascii_lowercase();
        let a = action.to_ascii_lowercase();
        match p.strip_suffix('*') {
            Some(prefix) => a.starts_with(prefix),
            None => p == a,
        }
    };
    let list = |p: &Value, k: &str| -> Vec<String> {
        p.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    perms.iter().any(|p| {
        list(p, "dataActions").iter().any(|d| matches(d))
            && !list(p, "notDataActions").iter().any(|d| matches(d))
    })
}

async fn key_vault(
    clients: &Clients,
    env: &AzureEnv,
    subscription: &str,
    a: &AroInputs,
) -> Vec<CheckResult> {
    let arm = match clients.arm(env).await {
        Ok(x) => x,
        Err(e) => {
            return vec![CheckResult::fail(
                "keyvault.name",
                &a.key_vault_id,
                e.message,
                "see the azure.token row",
            )];
        }
    };
    let found = match arm.get_value(&a.key_vault_id, API_KEY_VAULT).await {
        Ok(v) => v,
        Err(e) => {
            return vec![CheckResult::fail(
                "keyvault.name",
                &a.key_vault_id,
                short(&e),
                "grant the caller Reader on the persistent resource group",
            )];
        }
    };
    let mut rows = Vec::new();
    match (found, a.existing) {
        (Some(v), _) => {
            let rbac = v
                .pointer("/properties/enableRbacAuthorization")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if !rbac {
                rows.push(CheckResult::fail(
                    "keyvault.name",
                    &a.key_vault_id,
                    "the vault uses access policies, not RBAC authorization: HyperShift's Secrets Store mounts and hcp-workflow's grants are RBAC roles",
                    format!("az keyvault update --name {} --enable-rbac-authorization true", a.key_vault),
                ));
                return rows;
            }
            rows.push(CheckResult::pass(
                "keyvault.name",
                &a.key_vault_id,
                if a.existing {
                    "exists, RBAC authorization on (yours: never deleted)".to_string()
                } else {
                    "exists in the persistent group, RBAC authorization on: reused".to_string()
                },
            ));
            if a.existing {
                rows.push(data_plane(&arm, a).await);
            }
        }
        (None, true) => rows.push(CheckResult::fail(
            "keyvault.name",
            &a.key_vault_id,
            "absent: identities.aroHcp.keyVault.existing names a vault that is not there",
            format!(
                "create it (az keyvault create --name {} --resource-group <persistentResourceGroup> --enable-rbac-authorization) or drop existing: true to let hcp-workflow create it",
                a.key_vault
            ),
        )),
        (None, false) => {
            let path =
                format!("/subscriptions/{subscription}/providers/Microsoft.KeyVault/checkNameAvailability");
            let body = json!({"name": a.key_vault, "type": "Microsoft.KeyVault/vaults"});
            match arm.post(&path, API_KEY_VAULT, Some(&body)).await {
                Ok(Some(v)) if v.get("nameAvailable").and_then(Value::as_bool) == Some(true) => {
                    rows.push(CheckResult::pass(
                        "keyvault.name",
                        &a.key_vault_id,
                        format!("the name {} is free: the run creates the vault", a.key_vault),
                    ));
                }
                Ok(v) => {
                    let why = v
                        .as_ref()
                        .and_then(|v| v.get("message").and_then(Value::as_str))
                        .unwrap_or("the name is taken");
                    rows.push(CheckResult::fail(
                        "keyvault.name",
                        &a.key_vault_id,
                        format!("{} cannot be created: {why}", a.key_vault),
                        "pick another identities.aroHcp.keyVault.name (vault names are global; a soft-deleted vault keeps its name until purged: az keyvault purge --name …)",
                    ));
                }
                Err(e) => rows.push(CheckResult::fail(
                    "keyvault.name",
                    &a.key_vault_id,
                    short(&e),
                    "grant the caller Microsoft.KeyVault/checkNameAvailability/read on the subscription",
                )),
            }
        }
    }
    rows
}

async fn data_plane(arm: &crate::azure::ArmClient, a: &AroInputs) -> CheckResult {
    let path = format!(
        "{}/providers/Microsoft.Authorization/permissions",
        a.key_vault_id
    );
    match arm
        .list_values(&path, crate::azure::models::API_AUTHORIZATION)
        .await
    {
        Ok(perms) => {
            let missing: Vec<&str> = DATA_ACTIONS
                .iter()
                .copied()
                .filter(|d| !data_allowed(&perms, d))
                .collect();
            if missing.is_empty() {
                CheckResult::pass(
                    "keyvault.data-plane",
                    &a.key_vault_id,
                    "the caller may create certificates and read and write secrets",
                )
            } else {
                CheckResult::fail(
                    "keyvault.data-plane",
                    &a.key_vault_id,
                    format!("the caller may not: {}", missing.join(", ")),
                    format!(
                        "az role assignment create --assignee <object id from azure.token> --role \"Key Vault Certificates Officer\" --scope {0} && az role assignment create --assignee <object id> --role \"Key Vault Secrets Officer\" --scope {0}",
                        a.key_vault_id
                    ),
                )
            }
        }
        Err(e) => CheckResult::fail(
            "keyvault.data-plane",
            &a.key_vault_id,
            short(&e),
            "grant the caller Reader on the vault",
        ),
    }
}

fn aks_addons(answer: AksAnswer, a: &AroInputs) -> CheckResult {
    let v = match answer {
        Ok(v) => v,
        Err((detail, fix)) => {
            return CheckResult::fail("aks.addons", &a.aks_cluster_id, detail, fix);
        }
    };
    let f = AksFacts::from_body(&v);
    let mut missing = Vec::new();
    let mut fixes = Vec::new();
    if !f.secrets_provider_enabled || f.secrets_provider_identity.is_none() {
        missing.push("the Key Vault Secrets Provider add-on");
        fixes.push("az aks enable-addons --addons azure-keyvault-secrets-provider --name <aks> --resource-group <rg>");
    }
    if f.oidc_issuer.is_none() {
        missing.push("the OIDC issuer");
        fixes.push("az aks update --enable-oidc-issuer --name <aks> --resource-group <rg>");
    }
    if !f.workload_identity {
        missing.push("workload identity");
        fixes.push("az aks update --enable-workload-identity --name <aks> --resource-group <rg>");
    }
    if missing.is_empty() {
        let id = f.secrets_provider_identity.unwrap_or_default();
        CheckResult::pass(
            "aks.addons",
            &a.aks_cluster_id,
            format!(
                "Key Vault Secrets Provider on (identity client id {}), OIDC issuer on, workload identity on",
                id.client_id
            ),
        )
    } else {
        CheckResult::fail(
            "aks.addons",
            &a.aks_cluster_id,
            format!("not enabled: {}", missing.join(", ")),
            fixes.join(" && "),
        )
    }
}

/// The operator's environment variable `name`, from its containers.
fn operator_env(d: &Deployment, name: &str) -> Option<String> {
    d.spec
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|c| c.env.iter().flatten())
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

async fn management(clients: &Clients, i: &Inputs, aks: AksAnswer) -> Vec<CheckResult> {
    let m = match clients.mgmt(&i.mgmt).await {
        Ok(m) => m,
        Err(e) => {
            return vec![CheckResult::fail(
                "k8s.aro-hcp",
                "management cluster",
                e.message,
                "see the k8s.reachable row",
            )];
        }
    };
    let mut rows = Vec::new();
    // The add-on's client id, to compare with the operator's.
    let addon = aks
        .ok()
        .and_then(|v| AksFacts::from_body(&v).secrets_provider_identity);
    let deps: Api<Deployment> = Api::namespaced(m.client().clone(), "hypershift");
    let target = "Deployment hypershift/operator env";
    match deps.get_opt("operator").await {
        Ok(Some(d)) => {
            let managed = operator_env(&d, "MANAGED_SERVICE");
            let user = operator_env(&d, "ARO_HCP_KEY_VAULT_USER_CLIENT_ID");
            let fix = format!(
                "reinstall the operator: hypershift install --managed-service ARO-HCP --aro-hcp-key-vault-users-client-id {}",
                addon
                    .as_ref()
                    .map_or("<Key Vault Secrets Provider identity client id>", |x| {
                        x.client_id.as_str()
                    })
            );
            if managed.as_deref() != Some("ARO-HCP") {
                rows.push(CheckResult::fail(
                    "k8s.aro-hcp",
                    target,
                    format!(
                        "MANAGED_SERVICE is {}: HyperShift only honours ManagedIdentities (and makes the SecretProviderClasses) for ARO-HCP",
                        managed.as_deref().unwrap_or("unset")
                    ),
                    fix,
                ));
            } else {
                match (user, &addon) {
                    (Some(u), Some(x)) if u.eq_ignore_ascii_case(&x.client_id) => {
                        rows.push(CheckResult::pass(
                            "k8s.aro-hcp",
                            target,
                            format!("MANAGED_SERVICE=ARO-HCP, ARO_HCP_KEY_VAULT_USER_CLIENT_ID={u} (the Key Vault Secrets Provider identity)"),
                        ));
                    }
                    (Some(u), Some(x)) => rows.push(CheckResult::fail(
                        "k8s.aro-hcp",
                        target,
                        format!(
                            "ARO_HCP_KEY_VAULT_USER_CLIENT_ID is {u}, but the AKS Key Vault Secrets Provider identity is {}: the mounts would use an identity hcp-workflow does not grant",
                            x.client_id
                        ),
                        fix,
                    )),
                    (None, _) => rows.push(CheckResult::fail(
                        "k8s.aro-hcp",
                        target,
                        "ARO_HCP_KEY_VAULT_USER_CLIENT_ID is unset: the SecretProviderClasses would name no identity",
                        fix,
                    )),
                    (Some(u), None) => rows.push(CheckResult::warn(
                        "k8s.aro-hcp",
                        target,
                        format!("ARO_HCP_KEY_VAULT_USER_CLIENT_ID={u}; the AKS add-on identity could not be read to compare (see aks.addons)"),
                        None,
                    )),
                }
            }
        }
        Ok(None) => rows.push(CheckResult::fail(
            "k8s.aro-hcp",
            target,
            "absent: the HyperShift operator is not installed",
            "hypershift install --managed-service ARO-HCP --aro-hcp-key-vault-users-client-id <id>",
        )),
        Err(e) => rows.push(CheckResult::fail(
            "k8s.aro-hcp",
            target,
            short(&e),
            "grant get on deployments in namespace hypershift",
        )),
    }
    // A public ARO HCP cluster is served through the shared ingress router
    // (`support/util/visibility.go` `UseSharedIngressHC`): its four Routes' names get A
    // records at that router's address, so it must have one.
    if i.private_link.is_none() {
        let ns = crate::steps::cluster::SHARED_INGRESS_NAMESPACE;
        let target = format!("Service {ns}/router");
        rows.push(match m.service_lb_ip(ns, "router").await {
            Ok(Some(ip)) => CheckResult::pass(
                "k8s.aro-hcp",
                target,
                format!(
                    "the shared ingress router answers at {ip}: the cluster's api-, oauth-, konnectivity- and ignition-<name>.<baseDomain> A records will point there"
                ),
            ),
            Ok(None) => CheckResult::fail(
                "k8s.aro-hcp",
                target,
                "absent or without a load balancer address: a public ARO HCP cluster's Routes are served only by HyperShift's shared ingress router",
                "install the operator with --managed-service ARO-HCP (it runs the shared ingress) and wait until the Service has an address",
            ),
            Err(e) => CheckResult::fail(
                "k8s.aro-hcp",
                target,
                e.to_string(),
                format!("grant get on services in namespace {ns}"),
            ),
        });
    }
    let crds: Api<CustomResourceDefinition> = Api::all(m.client().clone());
    rows.push(match crds.get_opt(SPC_CRD).await {
        Ok(Some(_)) => CheckResult::pass(
            "k8s.aro-hcp",
            format!("CRD {SPC_CRD}"),
            "served (Secrets Store CSI driver)",
        ),
        Ok(None) => CheckResult::fail(
            "k8s.aro-hcp",
            format!("CRD {SPC_CRD}"),
            "absent: the Secrets Store CSI driver is not installed",
            "az aks enable-addons --addons azure-keyvault-secrets-provider --name <aks> --resource-group <rg>",
        ),
        Err(e) => CheckResult::fail(
            "k8s.aro-hcp",
            format!("CRD {SPC_CRD}"),
            short(&e),
            "grant get on customresourcedefinitions",
        ),
    });
    let hooks: Api<MutatingWebhookConfiguration> = Api::all(m.client().clone());
    rows.push(match hooks.get_opt(WI_WEBHOOK).await {
        Ok(Some(_)) => CheckResult::pass(
            "k8s.aro-hcp",
            format!("MutatingWebhookConfiguration {WI_WEBHOOK}"),
            "the workload identity webhook is installed",
        ),
        Ok(None) => CheckResult::fail(
            "k8s.aro-hcp",
            format!("MutatingWebhookConfiguration {WI_WEBHOOK}"),
            "absent: workload identity is not enabled on the AKS cluster",
            "az aks update --enable-workload-identity --name <aks> --resource-group <rg>",
        ),
        Err(e) => CheckResult::warn(
            "k8s.aro-hcp",
            format!("MutatingWebhookConfiguration {WI_WEBHOOK}"),
            format!("not checked: {}", short(&e)),
            Some("grant get on mutatingwebhookconfigurations".into()),
        ),
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn roles_from_a_token() {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(json!({"roles": [OWNED_BY]}).to_string());
        assert_eq!(
            token_roles(&format!("h.{payload}.s")),
            Some(vec![OWNED_BY.to_string()])
        );
    }

    #[test]
    fn data_actions_with_wildcards() {
        let admin = vec![json!({"actions": [], "dataActions": ["Microsoft.KeyVault/vaults/*"]})];
        assert!(DATA_ACTIONS.iter().all(|d| data_allowed(&admin, d)));
        let reader =
            vec![json!({"dataActions": ["Microsoft.KeyVault/vaults/secrets/getSecret/action"]})];
        assert!(!data_allowed(
            &reader,
            "Microsoft.KeyVault/vaults/certificates/create/action"
        ));
        let denied = vec![json!({"dataActions": ["Microsoft.KeyVault/vaults/*"],
            "notDataActions": ["Microsoft.KeyVault/vaults/secrets/setSecret/action"]})];
        assert!(!data_allowed(
            &denied,
            "Microsoft.KeyVault/vaults/secrets/setSecret/action"
        ));
    }
}
