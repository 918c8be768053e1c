//! HyperShift's ARO HCP identity model: a HostedCluster with
//! `spec.platform.azure.azureAuthenticationConfig.azureAuthenticationConfigType:
//! ManagedIdentities`, as HyperShift 4.22 runs it on an AKS management cluster (`crate::aks`).
//!
//! **Which operator.** Only an operator installed for ARO HCP (env `MANAGED_SERVICE=ARO-HCP`,
//! `support/azureutil/azureutil.go` `IsAroHCP`, read from the live `hypershift/operator`
//! Deployment) runs this mode. Any other fails its reconcile at the CAPI infrastructure
//! (`hypershift-operator/controllers/hostedcluster/internal/platform/azure/azure.go`
//! `reconcileAzureClusterIdentity`: "WorkloadIdentities must be set in the Azure platform spec
//! for non-managed Azure deployments", wrapped "failed to reconcile Azure cluster identity: …"),
//! and an ARO HCP one without `ARO_HCP_KEY_VAULT_USER_CLIENT_ID` fails at the CAPI provider
//! (`CAPIProviderDeploymentSpec`: "environment variable ARO_HCP_KEY_VAULT_USER_CLIENT_ID is not
//! set", wrapped by `hostedcluster_controller.go` `reconcileCAPIProvider` and `reconcile`): both
//! as `ReconciliationSucceeded=False`, reason `ReconciliationError` (`Reconcile`), and the
//! cluster goes no further ([`block`]).
//!
//! **SecretProviderClasses.** Every control-plane component's credentials are a Key Vault
//! secret mounted by the Secrets Store CSI driver. HyperShift makes one SecretProviderClass per
//! component in the control-plane namespace, each exactly as
//! `support/secretproviderclass/secretproviderclass.go` `ReconcileManagedAzureSecretProviderClass`
//! builds it (provider `azure`, `usePodIdentity: "false"`, `useVMManagedIdentity: "true"`,
//! `userAssignedIdentityID` = the operator's `ARO_HCP_KEY_VAULT_USER_CLIENT_ID`, `keyvaultName`
//! and `tenantId` of `managedIdentitiesKeyVault`, `objects` naming `credentialsSecretName` with
//! its `objectEncoding`, `objectType: secret`), named as in `support/config/constants.go` ([`SPCS`]):
//! the HyperShift operator makes `managed-azure-cpo` and `managed-azure-nodepool-management`
//! (`hostedcluster_controller.go` `reconcile`, "Reconcile CPO/CAPZ SecretProviderClass CR");
//! the control-plane operator, once it runs, the six others (`control-plane-operator/
//! controllers/hostedcontrolplane/v2/{cloud_controller_manager/azure/config.go, ingressoperator,
//! registryoperator, cno, storage}/azure.go` and their `*-secretprovider.yaml` assets; the
//! registry's only with the `ImageRegistry` capability). They go with the control-plane
//! namespace when the HostedCluster is deleted.
//!
//! **Mounts** ([`tick`]). Each pod that mounts one (`support/azureutil`
//! `CreateVolumeForAzureSecretStoreProviderClass`; volume names from `support/config`, those of
//! the network and CSI operands are ours) is stuck `ContainerCreating` until kubelet's mount
//! succeeds; kubelet retries with its backoff (500 ms doubling to 2m2s, scaled). A mount is the
//! Azure provider's (`Azure/secrets-store-csi-driver-provider-azure` `pkg/provider/provider.go`):
//! a token for the node's identity `userAssignedIdentityID` (only the add-on identity is on the
//! nodes), `GET https://<vault>.vault.azure.net/secrets/<name>/` as that identity's principal
//! (`crate::keyvault::read_secret_as`: RBAC on the vault — Key Vault Secrets User), then
//! `getContentBytes` per `objectEncoding`. A failure is kubelet's `FailedMount` event on the pod
//! (a real `core/v1` Event in the control-plane namespace, message as kubelet, the CSI driver,
//! the provider and azcore word it: `MountVolume.SetUp failed for volume "cpo-cert" : rpc error:
//! code = Unknown desc = failed to mount secrets store objects for pod <ns>/<pod>, err: rpc
//! error: code = Unknown desc = failed to mount objects, error: failed to get objectType:secret,
//! objectName:<name>, objectVersion:: GET https://…` + azcore's `RESPONSE 403` block with Key
//! Vault's `ForbiddenByRbac` body) and the provider's Key Vault read is in the request log
//! (actor `secrets-store-csi-driver-provider-azure`). The add-on runs with
//! `enableSecretRotation: "false"`: a mounted volume is never re-read.
//!
//! **Credentials** ([`failures`]). A mounted file is msi-dataplane's
//! `UserAssignedIdentityCredentials` JSON (`docs/content/reference/architecture/managed-azure/
//! keyvault-secret-structure.md`): its `client_id` must be the component's `clientID` (when
//! set; *our model*: HyperShift itself only passes the file on), `client_secret` the base64 of
//! a PEM bundle with a `CERTIFICATE` and a `PRIVATE KEY`. Entra ID then checks the client
//! assertion signed with it: the application exists (`AADSTS700016`), the certificate's SHA-1
//! thumbprint is among its key credentials and the certificate is valid now (`AADSTS700027`,
//! `crate::graph::app_key_thumbprints`), the application has a service principal
//! (`AADSTS7000229`, `crate::graph::service_principal_object_id`); and ARM the service
//! principal's role at each scope — the component/role/scope table of
//! `crate::workload_identity` (`support/azureutil/azureutil.go` `GetServicePrincipalScopes`).
//! The control-plane operator's own Azure calls are not checked (only its mount).
//!
//! **Data plane.** `dataPlane.{imageRegistryMSIClientID, diskMSIClientID, fileMSIClientID}`
//! are user-assigned managed identities federated with the guest's issuer
//! (`contrib/managed-azure/setup_dataplane_identities.sh`: issuer `spec.issuerURL`, audience
//! `openshift`, subjects below) holding their role on the managed resource group
//! (`cmd/infra/azure/rbac.go` `AssignDataPlaneRoles`): the same chain as workload identities.
//!
//! **Where a failure shows** (`crate::workload_identity::Effect`): the control-plane operator
//! not running keeps the hosted control plane from ever being available (HyperShift's
//! `Available=False`, `WaitingForAvailable`, "Waiting for hosted control plane to be healthy":
//! the HostedControlPlane has no `Available` condition, `computeHostedClusterAvailability`) and
//! no node joins; CAPZ (`nodePoolManagement`) and the cloud provider keep NodePools from being
//! Ready; ingress, image registry, network and the CSI drivers are ClusterOperators that never
//! become available — each with the error text in the condition message, as for workload
//! identities.

use axum::http::Method;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Digest;

use crate::kube::{kind_by_key, store};
use crate::sim::Simulator;
use crate::state::State;
use crate::util::str_at;
use crate::workload_identity::{self as wi, Component, Effect, Failure, Scope};

/// One control-plane component's SecretProviderClass and the pod that mounts it.
struct Spc {
    /// `support/config/constants.go` `ManagedAzure*SecretProviderClassName`.
    name: &'static str,
    /// Field under `managedIdentities.controlPlane`.
    field: &'static str,
    /// Made by the control-plane operator (else by the HyperShift operator).
    by_cpo: bool,
    /// The Deployment whose pod mounts it.
    deployment: &'static str,
    /// Its volume.
    volume: &'static str,
}

/// The eight SecretProviderClasses, in the order HyperShift makes them.
const SPCS: &[Spc] = &[
    Spc {
        name: "managed-azure-cpo",
        field: "controlPlaneOperator",
        by_cpo: false,
        deployment: "control-plane-operator",
        volume: "cpo-cert",
    },
    Spc {
        name: "managed-azure-nodepool-management",
        field: "nodePoolManagement",
        by_cpo: false,
        deployment: "capi-provider",
        volume: "nodepool-management-cert",
    },
    Spc {
        name: "managed-azure-cloud-provider",
        field: "cloudProvider",
        by_cpo: true,
        deployment: "azure-cloud-controller-manager",
        volume: "cloud-provider-cert",
    },
    Spc {
        name: "managed-azure-ingress",
        field: "ingress",
        by_cpo: true,
        deployment: "ingress-operator",
        volume: "ingress-cert",
    },
    Spc {
        name: "managed-azure-image-registry",
        field: "imageRegistry",
        by_cpo: true,
        deployment: "cluster-image-registry-operator",
        volume: "image-registry-cert",
    },
    Spc {
        name: "managed-azure-network",
        field: "network",
        by_cpo: true,
        deployment: "cloud-network-config-controller",
        volume: "network-cert",
    },
    Spc {
        name: "managed-azure-disk-csi",
        field: "disk",
        by_cpo: true,
        deployment: "azure-disk-csi-driver-controller",
        volume: "disk-cert",
    },
    Spc {
        name: "managed-azure-file-csi",
        field: "file",
        by_cpo: true,
        deployment: "azure-file-csi-driver-controller",
        volume: "file-cert",
    },
];

/// The control-plane operator's SecretProviderClass.
const CPO_SPC: &str = "managed-azure-cpo";

/// Where HyperShift mounts the credentials (`support/config` `ManagedAzureCertificatePath`).
const CERT_PATH: &str = "/mnt/certs/";

/// The data-plane identities: `dataPlane.<field>`, their federated subjects, roles and what
/// they break.
const DATA_PLANE: &[(&str, Component)] = &[
    (
        "imageRegistryMSIClientID",
        Component {
            field: "dataPlane.imageRegistryMSIClientID",
            subjects: &["system:serviceaccount:openshift-image-registry:registry"],
            role: "8b32b316-c2f5-4ddf-b05b-83dacd2d08b5",
            scopes: &[Scope::Managed],
            action: "Microsoft.Storage/storageAccounts/write",
            effect: Effect::Operator("image-registry"),
        },
    ),
    (
        "diskMSIClientID",
        Component {
            field: "dataPlane.diskMSIClientID",
            subjects: &[
                "system:serviceaccount:openshift-cluster-csi-drivers:azure-disk-csi-driver-node-sa",
            ],
            role: "5b7237c5-45e1-49d6-bc18-a1f62f400748",
            scopes: &[Scope::Managed],
            action: "Microsoft.Compute/disks/write",
            effect: Effect::Operator("storage"),
        },
    ),
    (
        "fileMSIClientID",
        Component {
            field: "dataPlane.fileMSIClientID",
            subjects: &[
                "system:serviceaccount:openshift-cluster-csi-drivers:azure-file-csi-driver-node-sa",
            ],
            role: "0d7aedc0-15fd-4a67-a412-efad370c947e",
            scopes: &[Scope::Managed],
            action: "Microsoft.Storage/storageAccounts/write",
            effect: Effect::Operator("storage"),
        },
    ),
];

/// Who reads Key Vault for a mount (the request log's `actor`).
const PROVIDER: &str = "secrets-store-csi-driver-provider-azure";
/// The Key Vault api-version of the provider's `azsecrets` client.
const KV_API: &str = "7.5";

/// One Secrets Store CSI volume of a control-plane pod (persisted in `State::csi_mounts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MountSim {
    /// Mount attempts so far.
    #[serde(default)]
    pub attempts: u32,
    /// Kubelet's next attempt (simulator ms).
    #[serde(default)]
    pub next_ms: u64,
    /// The secret version written to the volume, once mounted (never re-read).
    #[serde(default)]
    pub version: Option<String>,
    /// What the component reads from the mounted file ([`parse_credentials`]): its client
    /// and certificate, or why the file is unusable.
    #[serde(default)]
    pub creds: Option<Result<Credentials, String>>,
    /// The last `FailedMount` message.
    #[serde(default)]
    pub error: Option<String>,
}

impl MountSim {
    fn mounted(&self) -> bool {
        self.version.is_some()
    }
}

/// Whether `hc` uses managed identities (`azureAuthenticationConfigType: ManagedIdentities`).
pub(crate) fn is_managed(hc: &Value) -> bool {
    str_at(
        hc,
        "/spec/platform/azure/azureAuthenticationConfig/azureAuthenticationConfigType",
    ) == Some("ManagedIdentities")
}

fn managed_identities(hc: &Value) -> Option<&Value> {
    hc.pointer("/spec/platform/azure/azureAuthenticationConfig/managedIdentities")
}

fn registry_disabled(hc: &Value) -> bool {
    hc.pointer("/spec/capabilities/disabled")
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|c| c.as_str() == Some("ImageRegistry")))
}

fn mount_key(cp_ns: &str, spc: &str) -> String {
    format!("{cp_ns}/{spc}")
}

/// Why the HyperShift operator stops reconciling `hc` (see the module docs): `(message)` of
/// `ReconciliationSucceeded=False`, reason `ReconciliationError`.
pub(crate) fn block(st: &State, hc: &Value) -> Option<String> {
    if !is_managed(hc) {
        return None;
    }
    if !crate::aks::is_aro_hcp(st) {
        return Some(
            "failed to reconcile Azure cluster identity: WorkloadIdentities must be set in the Azure platform spec for non-managed Azure deployments".into(),
        );
    }
    if crate::aks::operator_env_var(st, crate::aks::KV_USER_ENV).is_none() {
        return Some(format!(
            "failed to reconcile capi provider: failed to get capi provider deployment spec: environment variable {} is not set",
            crate::aks::KV_USER_ENV
        ));
    }
    None
}

/// `ReconcileManagedAzureSecretProviderClass`'s spec for component `field` of `hc`.
fn spc_spec(st: &State, hc: &Value, field: &str) -> Value {
    let mi = managed_identities(hc).cloned().unwrap_or(Value::Null);
    let cp = |p: &str| {
        str_at(&mi, &format!("/controlPlane/{p}"))
            .unwrap_or_default()
            .to_string()
    };
    let objects = format!(
        "\narray:\n  - |\n    objectName: {}\n    objectEncoding: {}\n    objectType: secret\n",
        cp(&format!("{field}/credentialsSecretName")),
        cp(&format!("{field}/objectEncoding")),
    );
    json!({
        "provider": "azure",
        "parameters": {
            "usePodIdentity": "false",
            "useVMManagedIdentity": "true",
            "userAssignedIdentityID": crate::aks::operator_env_var(st, crate::aks::KV_USER_ENV).unwrap_or_default(),
            "keyvaultName": cp("managedIdentitiesKeyVault/name"),
            "tenantId": cp("managedIdentitiesKeyVault/tenantID"),
            "objects": objects,
        },
    })
}

/// The SecretProviderClasses of `hc` (in `cp_ns`), created or brought back to HyperShift's
/// spec (`createOrUpdate`): the HyperShift operator's two on every reconcile, the
/// control-plane operator's six once it runs (its own volume mounted). Called from the
/// simulated operator's reconcile once nothing blocks it. Returns whether anything was
/// written.
pub(crate) fn reconcile(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    hc: &Value,
) -> bool {
    if !is_managed(hc) || block(st, hc).is_some() {
        return false;
    }
    let Some(kind) = kind_by_key(&format!("{}/secretproviderclasses", crate::aks::SPC_GROUP))
    else {
        return false;
    };
    if !crate::aks::csi_driver_installed(sim) {
        return false;
    }
    let cpo_up = cpo_running(st, cp_ns);
    let mut changed = false;
    for spc in SPCS {
        if (spc.by_cpo && !cpo_up) || (spc.field == "imageRegistry" && registry_disabled(hc)) {
            continue;
        }
        let manager = if spc.by_cpo {
            "control-plane-operator"
        } else {
            crate::kube::fields::OPERATOR
        };
        let spec = spc_spec(st, hc, spc.field);
        match store::get(st, &kind.key(), cp_ns, spc.name).cloned() {
            Some(o) if o.get("spec") == Some(&spec) || store::is_deleting(&o) => {}
            Some(mut o) => {
                o["spec"] = spec;
                store::update_by(sim, st, kind, cp_ns, o, store::By::Update(manager), false);
                changed = true;
            }
            None => {
                store::create_by(
                    sim,
                    st,
                    now,
                    kind,
                    cp_ns,
                    json!({"metadata": {"name": spc.name}, "spec": spec}),
                    store::By::Update(manager),
                    false,
                );
                changed = true;
            }
        }
    }
    changed
}

/// Whether the control-plane operator of `cp_ns` runs (its credentials volume is mounted).
fn cpo_running(st: &State, cp_ns: &str) -> bool {
    st.csi_mounts
        .get(&mount_key(cp_ns, CPO_SPC))
        .is_some_and(MountSim::mounted)
}

/// Whether the hosted control plane of `hc` can run: not an ARO HCP cluster, or its
/// control-plane operator's volume is mounted.
pub(crate) fn control_plane_up(st: &State, ns: &str, hc: &Value) -> bool {
    if !is_managed(hc) {
        return true;
    }
    let name = str_at(hc, "/metadata/name").unwrap_or_default();
    cpo_running(st, &format!("{ns}-{name}"))
}

/// Kubelet and the Secrets Store CSI driver: every SecretProviderClass volume of an ARO HCP
/// control plane not yet mounted is tried when its backoff allows; records of volumes whose
/// SecretProviderClass is gone are dropped. Returns whether anything changed.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let prefix = format!("{}/secretproviderclasses|", crate::aks::SPC_GROUP);
    let spcs: Vec<(String, String)> = st
        .kube
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(_, e)| (e.namespace.clone(), e.name.clone()))
        .collect();
    let live: std::collections::BTreeSet<String> =
        spcs.iter().map(|(ns, name)| mount_key(ns, name)).collect();
    let before = st.csi_mounts.len();
    st.csi_mounts.retain(|k, _| live.contains(k));
    let mut changed = st.csi_mounts.len() != before;
    for (cp_ns, name) in spcs {
        // Only HyperShift's (a pod mounts each of them).
        let Some(spc) = SPCS.iter().find(|s| s.name == name) else {
            continue;
        };
        let m = st
            .csi_mounts
            .get(&mount_key(&cp_ns, spc.name))
            .cloned()
            .unwrap_or_default();
        if m.mounted() || now < m.next_ms {
            continue;
        }
        changed |= attempt(sim, st, now, &cp_ns, spc, m);
    }
    changed
}

/// Kubelet's backoff before mount attempt `n + 1` (`nestedpendingoperations`: 500 ms,
/// doubling, at most 2m2s), scaled.
fn backoff(sim: &Simulator, attempts: u32) -> u64 {
    let ms = 500u64.saturating_mul(1u64 << attempts.saturating_sub(1).min(10));
    sim.scaled(std::time::Duration::from_millis(ms.min(122_000)))
}

/// One mount attempt of `spc`'s volume.
fn attempt(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    spc: &Spc,
    mut m: MountSim,
) -> bool {
    let pod = pod_name(cp_ns, spc.deployment);
    m.attempts += 1;
    let result = if crate::aks::csi_driver_installed(sim) {
        provider_mount(sim, st, cp_ns, spc).map_err(|e| {
            format!(
                "MountVolume.SetUp failed for volume \"{}\" : rpc error: code = Unknown desc = failed to mount secrets store objects for pod {cp_ns}/{pod}, err: rpc error: code = Unknown desc = failed to mount objects, error: {e}",
                spc.volume
            )
        })
    } else {
        Err(format!(
            "MountVolume.SetUp failed for volume \"{}\" : kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name secrets-store.csi.k8s.io not found in the list of registered CSI drivers",
            spc.volume
        ))
    };
    match result {
        Ok((content, version)) => {
            m.creds = Some(parse_credentials(&content));
            m.version = Some(version);
            m.error = None;
        }
        Err(message) => {
            record_event(sim, st, now, cp_ns, &pod, &message);
            m.error = Some(message);
            m.next_ms = now + backoff(sim, m.attempts);
        }
    }
    st.csi_mounts.insert(mount_key(cp_ns, spc.name), m);
    true
}

/// The Azure provider's mount of one SecretProviderClass: `(content, version)` of its one
/// object, or the provider's error (`GetSecretsStoreObjectContent`).
fn provider_mount(
    sim: &Simulator,
    st: &State,
    cp_ns: &str,
    spc: &Spc,
) -> Result<(String, String), String> {
    let obj = store::get(
        st,
        &format!("{}/secretproviderclasses", crate::aks::SPC_GROUP),
        cp_ns,
        spc.name,
    )
    .cloned()
    .unwrap_or(Value::Null);
    let p = |k: &str| str_at(&obj, &format!("/spec/parameters/{k}")).unwrap_or_default();
    let vault = p("keyvaultName");
    if vault.is_empty() {
        return Err("keyvaultName is not provided".into());
    }
    if p("tenantId").is_empty() {
        return Err("tenantId is not provided".into());
    }
    let objects = parse_objects(p("objects"))?;
    let Some((name, encoding)) = objects.into_iter().next() else {
        return Err("objects is not set".into());
    };
    let wrap = |e: String| {
        format!("failed to get objectType:secret, objectName:{name}, objectVersion:: {e}")
    };
    if !["", "utf-8", "hex", "base64"].contains(&encoding.to_ascii_lowercase().as_str()) {
        return Err(wrap(format!(
            "invalid objectEncoding: {encoding}, should be hex, base64 or utf-8"
        )));
    }
    // The node's identities: only the add-on's (useVMManagedIdentity with its client id).
    let client = p("userAssignedIdentityID");
    let principal = match crate::aks::addon_identity(sim, st) {
        Some((c, principal)) if c.eq_ignore_ascii_case(client) => principal,
        _ => {
            return Err(wrap(format!(
                "ManagedIdentityCredential authentication failed. the requested identity isn't assigned to this resource\nGET http://169.254.169.254/metadata/identity/oauth2/token\n{SEP}\nRESPONSE 400 Bad Request\n{SEP}\n{{\n  \"error\": \"invalid_request\",\n  \"error_description\": \"Identity not found\"\n}}\n{SEP}\n"
            )));
        }
    };
    let suffix = crate::keyvault::vault_by_name(st, vault)
        .and_then(|v| str_at(&v.body, "/location"))
        .map_or("vault.azure.net", crate::keyvault::dns_suffix);
    let url = format!("https://{vault}.{suffix}/secrets/{name}/");
    let logged = format!("{url}?api-version={KV_API}");
    let read = kv_read(st, vault, &name, &principal);
    let (status, code, message) = match &read {
        Ok(_) => (200, None, None),
        Err(KvFail::NoSuchHost) => (
            0,
            None,
            Some(format!(
                "dial tcp: lookup {vault}.{suffix} on 10.0.0.10:53: no such host"
            )),
        ),
        Err(KvFail::Http {
            status,
            code,
            message,
            ..
        }) => (*status, Some(code.clone()), Some(message.clone())),
    };
    crate::arm::log_internal(sim, PROVIDER, &Method::GET, &logged, status, code, message);
    let (value, version) = match read {
        Ok(v) => v,
        Err(KvFail::NoSuchHost) => {
            return Err(wrap(format!(
                "Get \"{logged}\": dial tcp: lookup {vault}.{suffix} on 10.0.0.10:53: no such host"
            )));
        }
        Err(KvFail::Http {
            status,
            code,
            message,
            inner,
        }) => {
            return Err(wrap(azcore_error(
                "GET",
                &url,
                status,
                &code,
                &message,
                inner.as_deref(),
            )));
        }
    };
    let bytes = content_bytes(&value, &encoding)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), version))
}

const SEP: &str =
    "--------------------------------------------------------------------------------";

/// azcore's `ResponseError.Error()` text (`sdk/azcore/internal/exported/response_error.go`).
fn azcore_error(
    method: &str,
    url: &str,
    status: u16,
    code: &str,
    message: &str,
    inner: Option<&str>,
) -> String {
    let reason = match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        429 => "Too Many Requests",
        _ => "Error",
    };
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let inner = inner
        .map(|i| {
            format!(
                ",\n    \"innererror\": {{\n      \"code\": {}\n    }}",
                q(i)
            )
        })
        .unwrap_or_default();
    format!(
        "{method} {url}\n{SEP}\nRESPONSE {status}: {status} {reason}\nERROR CODE: {code}\n{SEP}\n{{\n  \"error\": {{\n    \"code\": {},\n    \"message\": {}{inner}\n  }}\n}}\n{SEP}\n",
        q(code),
        q(message)
    )
}

/// The SecretProviderClass `objects` parameter (`array:` of YAML documents) → `(objectName,
/// objectEncoding)` of each secret.
fn parse_objects(objects: &str) -> Result<Vec<(String, String)>, String> {
    if objects.trim().is_empty() {
        return Err("objects is not set".into());
    }
    let v: Value = serde_norway::from_str(objects)
        .map_err(|e| format!("failed to yaml unmarshal objects, error: {e}"))?;
    let items = v
        .get("array")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let o: Value = serde_norway::from_str(item.as_str().unwrap_or_default()).map_err(|e| {
            format!("unmarshal failed for keyVaultObjects at index {i}, error: {e}")
        })?;
        out.push((
            str_at(&o, "/objectName").unwrap_or_default().to_string(),
            str_at(&o, "/objectEncoding")
                .unwrap_or_default()
                .to_string(),
        ));
    }
    Ok(out)
}

/// The provider's `getContentBytes`: the secret value decoded per `objectEncoding` (Go's
/// error texts).
fn content_bytes(value: &str, encoding: &str) -> Result<Vec<u8>, String> {
    match encoding.to_ascii_lowercase().as_str() {
        "base64" => STANDARD.decode(value).map_err(|e| match e {
            base64::DecodeError::InvalidByte(at, _)
            | base64::DecodeError::InvalidLastSymbol(at, _) => {
                format!("illegal base64 data at input byte {at}")
            }
            _ => format!("illegal base64 data at input byte {}", value.len()),
        }),
        "hex" => {
            let b = value.as_bytes();
            let digit = |c: u8| (c as char).to_digit(16);
            let mut out = Vec::with_capacity(b.len() / 2);
            for pair in b.chunks(2) {
                let hi = digit(pair[0]).ok_or_else(|| invalid_hex(pair[0]))?;
                let Some(&lo) = pair.get(1) else {
                    return Err("encoding/hex: odd length hex string".into());
                };
                let lo = digit(lo).ok_or_else(|| invalid_hex(lo))?;
                out.push((hi * 16 + lo) as u8);
            }
            Ok(out)
        }
        _ => Ok(value.as_bytes().to_vec()),
    }
}

fn invalid_hex(c: u8) -> String {
    format!("encoding/hex: invalid byte: U+{:04X} {:?}", c, c as char)
}

/// A pod name of `deployment` in `cp_ns` (`<deployment>-<template hash>-<suffix>`, stable).
fn pod_name(cp_ns: &str, deployment: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let h = sha2::Sha256::digest(format!("{cp_ns}/{deployment}").as_bytes());
    let pick = |r: std::ops::Range<usize>| -> String {
        h[r].iter()
            .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
            .collect()
    };
    format!("{deployment}-{}-{}", pick(0..10), pick(10..15))
}

/// Kubelet's `FailedMount` event on `pod`: a new Event, or the same one counted again
/// (`count`, `lastTimestamp`) when the message repeats.
fn record_event(sim: &Simulator, st: &mut State, now: u64, cp_ns: &str, pod: &str, message: &str) {
    let Some(kind) = kind_by_key("core/events") else {
        return;
    };
    if store::get(st, "core/namespaces", "", cp_ns).is_none_or(store::is_deleting) {
        return;
    }
    let at = crate::util::rfc3339_secs(now);
    let same = st
        .kube
        .values()
        .find(|e| {
            e.kind_key == "core/events"
                && e.namespace == cp_ns
                && str_at(&e.object, "/involvedObject/name") == Some(pod)
                && str_at(&e.object, "/reason") == Some("FailedMount")
                && str_at(&e.object, "/message") == Some(message)
        })
        .map(|e| Value::clone(&e.object));
    if let Some(mut ev) = same {
        let count = ev.get("count").and_then(Value::as_u64).unwrap_or(1) + 1;
        ev["count"] = json!(count);
        ev["lastTimestamp"] = json!(at);
        store::update_by(
            sim,
            st,
            kind,
            cp_ns,
            ev,
            store::By::Update("kubelet"),
            false,
        );
        return;
    }
    let host = "aks-system-00000000-vmss000000";
    let ev = json!({
        "metadata": {"name": format!("{pod}.{:x}", now.saturating_mul(1_000_000))},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": cp_ns, "name": pod},
        "reason": "FailedMount",
        "message": message,
        "type": "Warning",
        "source": {"component": "kubelet", "host": host},
        "reportingComponent": "kubelet",
        "reportingInstance": host,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    });
    store::create_by(
        sim,
        st,
        now,
        kind,
        cp_ns,
        ev,
        store::By::Update("kubelet"),
        false,
    );
}

/// Every broken link of `hc`'s managed identities (empty for other clusters): per
/// component, its mount or else its credentials ([`credentials_failure`]); then the data
/// plane's federated identities.
pub(crate) fn failures(sim: &Simulator, st: &State, ns: &str, hc: &Value) -> Vec<Failure> {
    if !is_managed(hc) || crate::preflight::scenario(sim).unchecked_identities {
        return Vec::new();
    }
    let name = str_at(hc, "/metadata/name").unwrap_or_default();
    let cp_ns = format!("{ns}-{name}");
    let now_s = (sim.now_ms() / 1000) as i64;
    let mut out = Vec::new();
    for spc in SPCS {
        if spc.field == "imageRegistry" && registry_disabled(hc) {
            continue;
        }
        let Some(m) = st.csi_mounts.get(&mount_key(&cp_ns, spc.name)) else {
            continue;
        };
        let effect = wi::component(spc.field).map_or(Effect::ControlPlane, |c| c.effect);
        match &m.creds {
            None => {
                if let Some(e) = &m.error {
                    out.push(Failure {
                        component: spc.field,
                        effect,
                        code: "FailedMount".into(),
                        message: e.clone(),
                    });
                }
            }
            Some(creds) => {
                if let Some(f) = credentials_failure(st, hc, spc, creds, now_s) {
                    out.push(f);
                }
            }
        }
    }
    let Some(dp) = managed_identities(hc).and_then(|m| m.get("dataPlane")) else {
        return out;
    };
    let issuer = str_at(hc, "/spec/issuerURL").unwrap_or_default();
    let tenant = str_at(hc, "/spec/platform/azure/tenantID").unwrap_or_default();
    let issuer_problem = wi::issuer_problem(st, ns, hc, issuer);
    for (field, c) in DATA_PLANE {
        if *field == "imageRegistryMSIClientID" && registry_disabled(hc) {
            continue;
        }
        let client_id = str_at(dp, &format!("/{field}")).unwrap_or_default();
        if let Some(f) =
            wi::federated_failure(st, hc, c, client_id, issuer, tenant, &issuer_problem)
        {
            out.push(f);
        }
    }
    out
}

/// The mounted credentials file of `spc` used against Entra ID and ARM (module docs).
/// The control-plane operator's calls are not checked.
fn credentials_failure(
    st: &State,
    hc: &Value,
    spc: &Spc,
    creds: &Result<Credentials, String>,
    now_s: i64,
) -> Option<Failure> {
    let c = wi::component(spc.field)?;
    let fail = |code: &str, message: String| {
        Some(Failure {
            component: c.field,
            effect: c.effect,
            code: code.to_string(),
            message,
        })
    };
    let mi = managed_identities(hc)?;
    let secret = str_at(
        mi,
        &format!("/controlPlane/{}/credentialsSecretName", spc.field),
    )
    .unwrap_or_default();
    let path = format!("{CERT_PATH}{secret}");
    let creds = match creds {
        Ok(c) => c,
        Err(why) => return fail("InvalidCredentials", format!("{path}: {why}")),
    };
    let tenant = str_at(hc, "/spec/platform/azure/tenantID").unwrap_or_default();
    let want = str_at(mi, &format!("/controlPlane/{}/clientID", spc.field)).unwrap_or_default();
    if !want.is_empty() && !want.eq_ignore_ascii_case(&creds.client_id) {
        return fail(
            "ClientIDMismatch",
            format!(
                "{path} holds the credentials of client '{}', not of the component's clientID '{want}'",
                creds.client_id
            ),
        );
    }
    let client_id = creds.client_id.as_str();
    let Some(thumbprints) = crate::graph::app_key_thumbprints(st, client_id) else {
        return fail(
            "AADSTS700016",
            format!(
                "AADSTS700016: Application with identifier '{client_id}' was not found in the directory '{tenant}'. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant."
            ),
        );
    };
    let thumb = &creds.thumbprint;
    if !thumbprints.iter().any(|t| t.eq_ignore_ascii_case(thumb)) {
        return fail(
            "AADSTS700027",
            format!(
                "AADSTS700027: Client assertion failed signature validation. (Reason - The key was not found., Thumbprint of key used by client: '{thumb}', Please visit the Azure Portal, Graph Explorer or directly use MS Graph to see configured keys for app Id '{client_id}'.)"
            ),
        );
    }
    if now_s > creds.not_after || now_s < creds.not_before {
        return fail(
            "AADSTS700027",
            format!(
                "AADSTS700027: Client assertion failed signature validation. (Reason - The key used is expired., Thumbprint of key used by client: '{thumb}', Found key 'Start={}, End={}', Please visit the Azure Portal, Graph Explorer or directly use MS Graph to see configured keys for app Id '{client_id}'.)",
                secs_rfc3339(creds.not_before),
                secs_rfc3339(creds.not_after)
            ),
        );
    }
    let Some(principal) = crate::graph::service_principal_object_id(st, client_id) else {
        return fail(
            "AADSTS7000229",
            format!(
                "AADSTS7000229: The client application {client_id} is missing service principal in the tenant {tenant}. See instructions here: https://go.microsoft.com/fwlink/?linkid=2225119"
            ),
        );
    };
    wi::role_failure(st, hc, c, client_id, &principal)
}

fn secs_rfc3339(s: i64) -> String {
    crate::util::rfc3339_secs(u64::try_from(s).unwrap_or(0).saturating_mul(1000))
}

/// What a component reads from its credentials file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Credentials {
    client_id: String,
    /// Upper-case hex SHA-1 of the certificate.
    thumbprint: String,
    /// The certificate's validity, Unix seconds.
    not_before: i64,
    not_after: i64,
}

/// msi-dataplane's `UserAssignedIdentityCredentials` JSON → the client and its certificate.
/// The error texts are ours.
fn parse_credentials(content: &str) -> Result<Credentials, String> {
    let v: Value = serde_json::from_str(content)
        .map_err(|e| format!("not a UserAssignedIdentityCredentials JSON document: {e}"))?;
    let field = |k: &str| {
        str_at(&v, &format!("/{k}"))
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("UserAssignedIdentityCredentials has no {k}"))
    };
    for k in [
        "authentication_endpoint",
        "tenant_id",
        "not_before",
        "not_after",
    ] {
        field(k)?;
    }
    let client_id = field("client_id")?.to_string();
    let pem = STANDARD
        .decode(field("client_secret")?)
        .map_err(|e| format!("client_secret is not base64: {e}"))?;
    let text = String::from_utf8_lossy(&pem);
    if !text.contains("PRIVATE KEY-----") {
        return Err("client_secret holds no PRIVATE KEY".into());
    }
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err("client_secret holds no CERTIFICATE".into());
    }
    let der = crate::keyvault::cert_der(&pem).ok_or("client_secret's CERTIFICATE is not base64")?;
    let info = crate::keyvault::cert_info(&der)
        .ok_or("client_secret's CERTIFICATE is not an X.509 certificate")?;
    Ok(Credentials {
        client_id,
        thumbprint: crate::keyvault::sha1_hex(&der),
        not_before: info.not_before,
        not_after: info.not_after,
    })
}

/// A failed Key Vault read, as the provider sees it.
enum KvFail {
    /// The vault's name does not resolve (no such vault).
    NoSuchHost,
    /// An HTTP error answer.
    Http {
        status: u16,
        code: String,
        message: String,
        inner: Option<String>,
    },
}

/// `GET /secrets/<name>` of vault `vault` as `principal` (the Key Vault data plane's RBAC):
/// `(value, version)`.
fn kv_read(
    st: &State,
    vault: &str,
    name: &str,
    principal: &str,
) -> Result<(String, String), KvFail> {
    match crate::keyvault::read_secret_as(st, vault, name, principal) {
        Ok(s) => Ok((s.value, s.version)),
        // Status 0: the vault's name does not resolve.
        Err(d) if d.status == 0 => Err(KvFail::NoSuchHost),
        Err(d) => Err(KvFail::Http {
            status: d.status,
            code: d.code,
            message: d.message,
            inner: d.inner,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn objects_parse_as_hypershift_writes_them() {
        let objects = "\narray:\n  - |\n    objectName: cpo-json\n    objectEncoding: utf-8\n    objectType: secret\n";
        assert_eq!(
            parse_objects(objects).unwrap(),
            vec![("cpo-json".to_string(), "utf-8".to_string())]
        );
    }

    #[test]
    fn content_is_decoded_with_go_errors() {
        assert_eq!(content_bytes("aGk=", "base64").unwrap(), b"hi");
        assert_eq!(content_bytes("6869", "hex").unwrap(), b"hi");
        assert_eq!(content_bytes("hi", "utf-8").unwrap(), b"hi");
        assert_eq!(
            content_bytes("686", "hex").unwrap_err(),
            "encoding/hex: odd length hex string"
        );
        assert_eq!(
            content_bytes("6g", "hex").unwrap_err(),
            "encoding/hex: invalid byte: U+0067 'g'"
        );
        assert!(
            content_bytes("{not base64", "base64")
                .unwrap_err()
                .starts_with("illegal base64 data at input byte 0")
        );
    }

    #[test]
    fn pod_names_are_stable_and_shaped_like_a_deployment_s() {
        let a = pod_name("clusters-aro", "control-plane-operator");
        assert_eq!(a, pod_name("clusters-aro", "control-plane-operator"));
        let parts: Vec<&str> = a.rsplitn(3, '-').collect();
        assert_eq!(parts[0].len(), 5);
        assert_eq!(parts[1].len(), 10);
    }
}
