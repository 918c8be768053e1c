//! The AKS management cluster (`simulator serve --management-platform aks`): what an
//! ARO HCP management cluster is made of, beyond serving no Route API.
//!
//! **ARM.** The cluster itself is a `Microsoft.ContainerService/managedClusters` resource
//! [`CLUSTER_NAME`] in the management subscription and resource group
//! ([`crate::SimConfig::management_subscription`], `management_resource_group`), seeded at start
//! and read-only (GET, list; a PUT, PATCH or DELETE is refused as ARM refuses a caller
//! without `Microsoft.ContainerService/managedClusters/write` — *our model* of hcp-workflow's
//! permissions on the management cluster, [`refuse_write`]). Its body follows
//! `specification/containerservice/resource-manager/Microsoft.ContainerService/aks/stable/2025-07-01/managedClusters.json`
//! (and the `ManagedClustersGet` / `ManagedClustersCreate_AzureKeyvaultSecretsProvider`
//! examples): `properties.addonProfiles.azureKeyvaultSecretsProvider` = `{enabled: true,
//! config: {enableSecretRotation: "false", rotationPollInterval: "2m"}, identity:
//! {resourceId, clientId, objectId}}` — the add-on's user-assigned identity
//! `azurekeyvaultsecretsprovider-<cluster>` in the node resource group
//! `MC_<group>_<cluster>_<location>`, seeded as a real ARM identity so role assignments can
//! name its principal (Key Vault Secrets User on the vault the mounts read) —,
//! `oidcIssuerProfile` = `{enabled: true, issuerURL:
//! "https://<location>.oic.prod-aks.azure.com/<tenant>/<guid>/"}` and
//! `securityProfile.workloadIdentity.enabled: true`.
//!
//! **Kubernetes.** The add-on installs the Secrets Store CSI driver, its CRD
//! `secretproviderclasses.secrets-store.csi.x-k8s.io` (served: `GET
//! /apis/apiextensions.k8s.io/v1/customresourcedefinitions/<name>` and the
//! `secrets-store.csi.x-k8s.io/v1` API, `kubernetes-sigs/secrets-store-csi-driver`
//! `charts/secrets-store-csi-driver/crds/`) and the Azure provider; workload identity installs
//! the webhook's `MutatingWebhookConfiguration` [`WI_WEBHOOK`] (as Azure/azure-workload-identity
//! deploys it: webhook `mutation.azure-workload-identity.io`, service
//! `kube-system/azure-wi-webhook-webhook-service` `/mutate-v1-pod`, pods CREATE/UPDATE). The
//! HyperShift operator Deployment `hypershift/operator` is installed for ARO HCP
//! (`cmd/install/assets/hypershift_operator.go`, release-4.22: `--managed-service ARO-HCP`
//! → env `MANAGED_SERVICE=ARO-HCP`, `--aro-hcp-key-vault-users-client-id` → env
//! `ARO_HCP_KEY_VAULT_USER_CLIENT_ID`, here the add-on identity's client id).
//!
//! **Scenario** ([`AksScenario`], `scenario.aks`): the add-on disabled (`enabled: false`, no
//! identity; no CSI driver and no SecretProviderClass CRD — and an operator installed with
//! `MANAGED_SERVICE=ARO-HCP` watches SecretProviderClasses
//! (`hostedcluster_controller.go` `SetupWithManager`, `hyperutil.ManagedAzure`), so its
//! controller never syncs its caches and the pod crash-loops: the Deployment reports no
//! available replica and no HostedCluster or NodePool is reconciled — *our model* also stops
//! the CAPI machines the simulator drives from its NodePool controller —,
//! [`operator_running`]); the OIDC
//! issuer disabled (`{enabled: false}`; AKS refuses workload identity without it, so that goes
//! too); the workload identity webhook absent (no `workloadIdentity` in `securityProfile`, no
//! `MutatingWebhookConfiguration`). What the management cluster's own OIDC issuer and webhook
//! would serve (the HyperShift operator's Azure credentials on a self-managed install) is not
//! modelled further.

use axum::http::Method;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::arm::{ArmError, store as arm_store, types};
use crate::http::{Req, json as json_resp};
use crate::kube::{kind_by_key, store};
use crate::sim::Simulator;
use crate::state::State;
use crate::util::str_at;

/// Name of the seeded AKS cluster (the `managementCluster.aksClusterId` of
/// `examples/aro-hcp.yaml`).
pub const CLUSTER_NAME: &str = "management";
/// The Secrets Store CSI driver's API group.
pub(crate) const SPC_GROUP: &str = "secrets-store.csi.x-k8s.io";
/// The SecretProviderClass CRD.
pub(crate) const SPC_CRD: &str = "secretproviderclasses.secrets-store.csi.x-k8s.io";
/// The workload identity webhook's configuration, as AKS installs it.
pub(crate) const WI_WEBHOOK: &str = "azure-wi-webhook-mutating-webhook-configuration";
/// The operator's env naming its managed service (`support/azureutil` `IsAroHCP`).
pub(crate) const MANAGED_SERVICE_ENV: &str = "MANAGED_SERVICE";
/// `hyperv1.AroHCP`.
pub(crate) const ARO_HCP: &str = "ARO-HCP";
/// `support/config` `AROHCPKeyVaultManagedIdentityClientID`.
pub(crate) const KV_USER_ENV: &str = "ARO_HCP_KEY_VAULT_USER_CLIENT_ID";

/// AKS failures of the management cluster (`scenario.aks`; see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AksScenario {
    /// The Azure Key Vault Secrets Provider add-on is off: no CSI driver, no
    /// SecretProviderClass CRD, no add-on identity in the cluster's ARM body.
    pub key_vault_secrets_provider_disabled: bool,
    /// The cluster's OIDC issuer is off (and with it workload identity).
    pub oidc_issuer_disabled: bool,
    /// The workload identity webhook is not installed.
    pub workload_identity_webhook_absent: bool,
    /// The Route CRD is applied (`route.openshift.io/v1` served), as HyperShift's AKS
    /// setup does before `hypershift install` (`contrib/managed-azure/setup_install_ho_on_aks.sh`
    /// applies openshift/api's `route/v1/zz_generated.crd-manifests/routes.crd.yaml`):
    /// HyperShift's capability check (`support/capabilities` `CapabilityRoute`) then
    /// passes and a HostedCluster's Route services are accepted. On by default: `simulator
    /// serve --management-platform aks` is a management cluster installed the way that
    /// how-to installs it; `{"aks": {"route_crd": false}}` is a bare AKS cluster, which
    /// serves no Route API.
    pub route_crd: bool,
}

impl Default for AksScenario {
    fn default() -> Self {
        AksScenario {
            key_vault_secrets_provider_disabled: false,
            oidc_issuer_disabled: false,
            workload_identity_webhook_absent: false,
            route_crd: true,
        }
    }
}

/// Whether the Route API is served: OpenShift, or AKS with the Route CRD applied.
pub(crate) fn routes_served(sim: &Simulator) -> bool {
    !is_aks(sim) || scenario(sim).route_crd
}

/// Whether the management cluster is AKS.
pub(crate) fn is_aks(sim: &Simulator) -> bool {
    sim.config().management_platform == crate::config::ManagementPlatform::Aks
}

fn scenario(sim: &Simulator) -> AksScenario {
    crate::preflight::scenario(sim).aks
}

/// Whether the Secrets Store CSI driver (and its CRD) is installed: AKS with the add-on on.
pub(crate) fn csi_driver_installed(sim: &Simulator) -> bool {
    is_aks(sim) && !scenario(sim).key_vault_secrets_provider_disabled
}

fn rg_id(sim: &Simulator) -> String {
    let c = sim.config();
    format!(
        "/subscriptions/{}/resourceGroups/{}",
        c.management_subscription, c.management_resource_group
    )
}

/// ARM id of the AKS cluster.
pub(crate) fn cluster_id(sim: &Simulator) -> String {
    format!(
        "{}/providers/Microsoft.ContainerService/managedClusters/{CLUSTER_NAME}",
        rg_id(sim)
    )
}

/// The node resource group AKS makes (`MC_<group>_<cluster>_<location>`).
fn node_rg(sim: &Simulator) -> String {
    let c = sim.config();
    format!(
        "MC_{}_{CLUSTER_NAME}_{}",
        c.management_resource_group, c.management_location
    )
}

/// ARM id of the add-on's user-assigned identity.
pub(crate) fn addon_identity_id(sim: &Simulator) -> String {
    format!(
        "/subscriptions/{}/resourcegroups/{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/azurekeyvaultsecretsprovider-{CLUSTER_NAME}",
        sim.config().management_subscription,
        node_rg(sim)
    )
}

/// A stable GUID of the seeded cluster (derived from the seed; no draw of the id sequence,
/// so AKS seeding does not shift the ids of everything created later).
fn stable_uuid(sim: &Simulator, what: &str) -> String {
    let ns = uuid::Uuid::from_u64_pair(sim.config().seed, 0x616b_732d_7365_6564);
    let bytes = *uuid::Uuid::new_v5(&ns, what.as_bytes()).as_bytes();
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The add-on identity's `(clientId, principalId)`, when seeded.
pub(crate) fn addon_identity(sim: &Simulator, st: &State) -> Option<(String, String)> {
    let i = st.arm.get(&addon_identity_id(sim).to_ascii_lowercase())?;
    Some((
        str_at(&i.body, "/properties/clientId")?.to_string(),
        str_at(&i.body, "/properties/principalId")?.to_string(),
    ))
}

/// Seeds (on AKS) the node resource group, the add-on identity and the cluster; idempotent,
/// also on a loaded state.
pub(crate) fn seed(sim: &Simulator, st: &mut State, now: u64) {
    if !is_aks(sim) {
        return;
    }
    let c = sim.config();
    let sub = &c.management_subscription;
    let tags = json!({"hcp-simulator/seeded": "true"});
    let node_rg_id = format!("/subscriptions/{sub}/resourceGroups/{}", node_rg(sim));
    if !st.arm.contains_key(&node_rg_id.to_ascii_lowercase()) {
        arm_store::insert_internal(
            sim,
            st,
            now,
            &node_rg_id,
            types::RG,
            &format!("/subscriptions/{sub}"),
            json!({"location": c.management_location, "tags": tags, "managedBy": cluster_id(sim), "properties": {}}),
        );
    }
    let identity_id = addon_identity_id(sim);
    let key = identity_id.to_ascii_lowercase();
    if !st.arm.contains_key(&key) {
        arm_store::insert_internal(
            sim,
            st,
            now,
            &identity_id,
            types::IDENTITY,
            &node_rg_id,
            json!({"location": c.management_location, "tags": tags, "properties": {
                "tenantId": c.tenant_id,
                "principalId": stable_uuid(sim, "addon-principal"),
                "clientId": stable_uuid(sim, "addon-client"),
                "isolationScope": "None",
            }}),
        );
        // AKS made it long before anything runs: no replication delay for role assignments.
        if let Some(r) = st.arm.get_mut(&key) {
            r.created_ms = 0;
        }
    }
    sync_cluster(sim, st, now);
    sync_webhook(sim, st, now);
}

/// The cluster's ARM body for the current scenario.
fn cluster_body(sim: &Simulator, st: &State) -> Value {
    let c = sim.config();
    let sc = scenario(sim);
    let addon = match addon_identity(sim, st) {
        Some((client, principal)) if !sc.key_vault_secrets_provider_disabled => json!({
            "enabled": true,
            "config": {"enableSecretRotation": "false", "rotationPollInterval": "2m"},
            "identity": {"resourceId": addon_identity_id(sim), "clientId": client, "objectId": principal},
        }),
        _ => json!({"enabled": false, "config": null}),
    };
    let oidc = if sc.oidc_issuer_disabled {
        json!({"enabled": false})
    } else {
        json!({"enabled": true, "issuerURL": format!(
            "https://{}.oic.prod-aks.azure.com/{}/{}/",
            c.management_location, c.tenant_id, stable_uuid(sim, "oidc-issuer")
        )})
    };
    let security = if sc.oidc_issuer_disabled || sc.workload_identity_webhook_absent {
        json!({})
    } else {
        json!({"workloadIdentity": {"enabled": true}})
    };
    let fqdn_suffix = &stable_uuid(sim, "fqdn")[..8];
    let subnet = format!(
        "{}/providers/Microsoft.Network/virtualNetworks/{}/subnets/aks-subnet",
        rg_id(sim),
        c.management_vnet
    );
    json!({
        "location": c.management_location,
        "tags": {"hcp-simulator/seeded": "true"},
        "sku": {"name": "Base", "tier": "Standard"},
        "identity": {"type": "SystemAssigned", "principalId": stable_uuid(sim, "cluster-principal"), "tenantId": c.tenant_id},
        "properties": {
            "kubernetesVersion": "1.31",
            "currentKubernetesVersion": "1.31.0",
            "dnsPrefix": CLUSTER_NAME,
            "fqdn": format!("{CLUSTER_NAME}-{fqdn_suffix}.hcp.{}.azmk8s.io", c.management_location),
            "agentPoolProfiles": [{
                "name": "system", "count": 3, "vmSize": "Standard_D4s_v5", "osType": "Linux",
                "mode": "System", "type": "VirtualMachineScaleSets", "vnetSubnetID": subnet,
                "maxPods": 110, "provisioningState": "Succeeded", "orchestratorVersion": "1.31",
                "currentOrchestratorVersion": "1.31.0", "powerState": {"code": "Running"},
            }],
            "nodeResourceGroup": node_rg(sim),
            "enableRBAC": true,
            "networkProfile": {
                "networkPlugin": "azure", "loadBalancerSku": "standard", "outboundType": "loadBalancer",
                "serviceCidr": "10.0.0.0/16", "dnsServiceIP": "10.0.0.10",
            },
            "addonProfiles": {"azureKeyvaultSecretsProvider": addon},
            "oidcIssuerProfile": oidc,
            "securityProfile": security,
            "powerState": {"code": "Running"},
        },
    })
}

/// Brings the seeded cluster's ARM body in line with the scenario. Returns whether it changed.
fn sync_cluster(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let id = cluster_id(sim);
    let body = cluster_body(sim, st);
    match st.arm.get_mut(&id.to_ascii_lowercase()) {
        Some(r) if r.body == body => false,
        Some(r) => {
            r.body = body;
            true
        }
        None => {
            arm_store::insert_internal(
                sim,
                st,
                now,
                &id,
                types::MANAGED_CLUSTER,
                &rg_id(sim),
                body,
            );
            true
        }
    }
}

/// The env the HyperShift operator is installed with on AKS (ARO HCP): `MANAGED_SERVICE` and
/// the add-on identity's client id.
pub(crate) fn operator_env(sim: &Simulator, st: &State) -> Option<Value> {
    if !is_aks(sim) {
        return None;
    }
    let mut env = vec![json!({"name": MANAGED_SERVICE_ENV, "value": ARO_HCP})];
    if let Some((client, _)) = addon_identity(sim, st) {
        env.push(json!({"name": KV_USER_ENV, "value": client}));
    }
    Some(Value::Array(env))
}

/// An env var of the HyperShift operator's container (`hypershift/operator`), as installed
/// (or as someone edited it since).
pub(crate) fn operator_env_var(st: &State, name: &str) -> Option<String> {
    store::get(st, "apps/deployments", "hypershift", "operator")?
        .pointer("/spec/template/spec/containers/0/env")?
        .as_array()?
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
        .and_then(|e| e.get("value").and_then(Value::as_str))
        .map(str::to_string)
}

/// `azureutil.IsAroHCP()` of the running operator.
pub(crate) fn is_aro_hcp(st: &State) -> bool {
    operator_env_var(st, MANAGED_SERVICE_ENV).as_deref() == Some(ARO_HCP)
}

/// Whether the HyperShift operator runs: an ARO HCP install watches SecretProviderClasses,
/// which exist only with the CSI driver's CRD (see the module docs).
pub(crate) fn operator_running(sim: &Simulator, st: &State) -> bool {
    !is_aro_hcp(st) || csi_driver_installed(sim)
}

/// Keeps the AKS pieces in line with the scenario on every tick: the cluster's ARM body,
/// the webhook configuration, the operator Deployment's availability. Returns whether
/// anything changed.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    if !is_aks(sim) {
        return false;
    }
    let mut changed = sync_cluster(sim, st, now);
    changed |= sync_webhook(sim, st, now);
    changed |= sync_operator_status(sim, st);
    // An operator installed with `--managed-service ARO-HCP` runs the shared ingress router
    // (`hypershift-operator/controllers/sharedingress/sharedingress_controller.go`): a
    // public LoadBalancer Service `hypershift-sharedingress/router`.
    if is_aro_hcp(st)
        && operator_running(sim, st)
        && store::get(
            st,
            "core/services",
            crate::operator::SHARED_INGRESS_NAMESPACE,
            "router",
        )
        .is_none()
    {
        crate::operator::ensure_public_service(
            sim,
            st,
            now,
            crate::operator::SHARED_INGRESS_NAMESPACE,
            "router",
            443,
        );
        changed = true;
    }
    changed
}

fn sync_webhook(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let Some(kind) = kind_by_key("admissionregistration.k8s.io/mutatingwebhookconfigurations")
    else {
        return false;
    };
    let sc = scenario(sim);
    let want = !(sc.workload_identity_webhook_absent || sc.oidc_issuer_disabled);
    let have = store::get(st, &kind.key(), "", WI_WEBHOOK);
    match (want, have) {
        (true, None) => {
            let obj = json!({
                "metadata": {"name": WI_WEBHOOK, "labels": {"azure-workload-identity.io/system": "true"}},
                "webhooks": [{
                    "name": "mutation.azure-workload-identity.io",
                    "admissionReviewVersions": ["v1", "v1beta1"],
                    "clientConfig": {"service": {"name": "azure-wi-webhook-webhook-service", "namespace": "kube-system", "path": "/mutate-v1-pod", "port": 443}},
                    "failurePolicy": "Fail",
                    "matchPolicy": "Equivalent",
                    "namespaceSelector": {},
                    "objectSelector": {},
                    "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"], "scope": "*"}],
                    "sideEffects": "None",
                    "timeoutSeconds": 10,
                }],
            });
            store::create(sim, st, now, kind, "", obj);
            true
        }
        (false, Some(o)) if !store::is_deleting(o) => {
            store::delete(sim, st, now, kind, "", WI_WEBHOOK);
            true
        }
        _ => false,
    }
}

fn sync_operator_status(sim: &Simulator, st: &mut State) -> bool {
    let Some(kind) = kind_by_key("apps/deployments") else {
        return false;
    };
    let Some(mut d) = store::get(st, "apps/deployments", "hypershift", "operator").cloned() else {
        return false;
    };
    let status = if operator_running(sim, st) {
        json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1})
    } else {
        // The pod crash-loops (its manager exits when the SecretProviderClass informer
        // cannot sync): what `kubectl get deploy` then shows.
        json!({"replicas": 1, "readyReplicas": 0, "availableReplicas": 0, "unavailableReplicas": 1,
            "conditions": [{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                "message": "Deployment does not have minimum availability."}]})
    };
    if d.get("status") == Some(&status) {
        return false;
    }
    d["status"] = status;
    store::update(sim, st, kind, "hypershift", d);
    true
}

/// Writes to the managed cluster: ARM's `AuthorizationFailed` for a caller without
/// `Microsoft.ContainerService/managedClusters/write` (or `/delete`) on it.
pub(crate) fn refuse_write(req: &Req, rtype: &str, id: &str) -> Option<ArmError> {
    if !rtype.eq_ignore_ascii_case(types::MANAGED_CLUSTER) {
        return None;
    }
    let action = match req.method {
        Method::PUT | Method::PATCH => "write",
        Method::DELETE => "delete",
        _ => return None,
    };
    let (client, oid) = caller(req);
    Some(ArmError::new(
        403,
        "AuthorizationFailed",
        format!(
            "The client '{client}' with object id '{oid}' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/{action}' over scope '{id}' or the scope is invalid. If access was recently granted, please refresh your credentials."
        ),
    ))
}

/// `(appid, oid)` of the bearer token (the simulator's Entra tokens are JWTs); the raw token
/// for anything else.
fn caller(req: &Req) -> (String, String) {
    match crate::entra::bearer_claims(req) {
        Some(c) => (
            str_at(&c, "/appid").unwrap_or_default().to_string(),
            str_at(&c, "/oid").unwrap_or_default().to_string(),
        ),
        None => {
            let t = crate::entra::bearer_token(req)
                .unwrap_or_default()
                .to_string();
            (t.clone(), t)
        }
    }
}

/// `GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/secretproviderclasses.secrets-store.csi.x-k8s.io`
/// while the CSI driver is installed; `None` for every other request.
pub(crate) fn handle_kube(sim: &Simulator, req: &Req) -> Option<Response> {
    let s: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    match (&req.method, s.as_slice()) {
        (
            &Method::GET,
            [
                "apis",
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                name,
            ],
        ) if *name == SPC_CRD && csi_driver_installed(sim) => Some(json_resp(200, &spc_crd())),
        _ => None,
    }
}

/// The SecretProviderClass CRD (secrets-store-csi-driver v1.x: `v1` served and stored,
/// `v1alpha1` served and deprecated; status subresource).
fn spc_crd() -> Value {
    let spec = json!({"type": "object", "description": "SecretProviderClassSpec defines the desired state of SecretProviderClass", "properties": {
        "parameters": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Configuration for specific provider"},
        "provider": {"type": "string", "description": "Configuration for provider name"},
        "secretObjects": {"type": "array", "items": {"type": "object", "properties": {
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "data": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}, "objectName": {"type": "string"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "secretName": {"type": "string"}, "type": {"type": "string"}}}},
    }});
    let status = json!({"type": "object", "properties": {"byPod": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "namespace": {"type": "string"}}}}}});
    let schema = json!({"openAPIV3Schema": {"type": "object", "description": "SecretProviderClass is the Schema for the secretproviderclasses API", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": spec, "status": status}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": SPC_CRD, "labels": {"app.kubernetes.io/name": "secrets-store-csi-driver"}},
        "spec": {"group": SPC_GROUP, "scope": "Namespaced",
            "names": {"kind": "SecretProviderClass", "listKind": "SecretProviderClassList", "plural": "secretproviderclasses", "singular": "secretproviderclass"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema, "subresources": {"status": {}}},
                {"name": "v1alpha1", "served": true, "storage": false, "deprecated": true,
                    "deprecationWarning": "secrets-store.csi.x-k8s.io/v1alpha1 is deprecated. Use secrets-store.csi.x-k8s.io/v1 instead.",
                    "schema": schema, "subresources": {"status": {}}},
            ]},
        "status": {"acceptedNames": {"kind": "SecretProviderClass", "plural": "secretproviderclasses"},
            "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}],
            "storedVersions": ["v1"]},
    })
}
