//! The read APIs `hcp-workflow preflight` asks, and the [`Scenario`] that makes
//! each of them answer a failure.
//!
//! Written from the real contracts (Azure/azure-rest-api-specs, Kubernetes API reference),
//! sharing no types with the client:
//!
//! | Request | Spec |
//! |---|---|
//! | `GET /subscriptions/{s}/providers/{ns}` (2021-04-01) | `Providers_Get`, `resources/resource-manager/Microsoft.Resources/stable/2021-04-01/resources.json` |
//! | `GET /subscriptions/{s}/providers` (2021-04-01) | `Providers_List`, the same file |
//! | `GET /subscriptions/{s}/providers/Microsoft.Features/providers/{ns}/features/{f}` (2021-07-01) | `Features_Get`, `resources/resource-manager/Microsoft.Features/stable/2021-07-01/features.json` |
//! | `GET {resourceGroup or resource}/providers/Microsoft.Authorization/permissions` (2022-04-01) | `Permissions_ListForResourceGroup` / `Permissions_ListForResource`, `authorization/…/stable/2022-04-01/authorization-RoleDefinitionsCalls.json` |
//! | `GET /subscriptions/{s}/providers/Microsoft.Network/locations/{l}/usages` (2023-11-01) | `Usages_List`, `network/…/stable/2023-11-01/network.json` |
//! | `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages` (2024-07-01) | `Usage_List`, `compute/…/ComputeRP/stable/2024-07-01/computeRPCommon.json` |
//! | `GET /subscriptions/{s}/providers/Microsoft.Compute/skus?$filter=location eq '…'` (2021-07-01) | `ResourceSkus_List`, `compute/…/Skus/stable/2021-07-01/skus.json` |
//! | `POST /subscriptions/{s}/providers/Microsoft.Storage/checkNameAvailability` (2024-01-01) | `StorageAccounts_CheckNameAvailability`, `storage/…/stable/2024-01-01/storage.json` |
//! | `POST /subscriptions/{s}/providers/Microsoft.Network/locations/{l}/checkPrivateLinkServiceVisibility` (2023-11-01) | `PrivateLinkServices_CheckPrivateLinkServiceVisibility`, `network/…/2023-11-01/privateLinkService.json` |
//! | `POST /apis/authentication.k8s.io/v1/selfsubjectreviews` | Kubernetes `SelfSubjectReview` (GA in 1.28) |
//! | `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` | Kubernetes `SelfSubjectAccessReview` |
//! | `GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}` | the HyperShift CRDs (from `--crds DIR`, else a minimal CRD with the fields hcp-workflow renders) |
//!
//! The HyperShift operator's ConfigMap `hypershift/supported-versions` (key
//! `supported-versions`, `{"versions":["4.22",…]}`, as
//! `hypershift-operator/controllers/supportedversion/reconciler.go` writes it) is seeded at
//! start from [`crate::SimConfig::hypershift_version`] (4.14 up to it).
//!
//! ## Scenario (`SimConfig::scenario`, `simulator serve --scenario FILE.json`, `PUT /_sim/scenario`)
//! ```json
//! {"unregistered_providers": ["Microsoft.Compute"],
//!  "unregistered_features": ["Microsoft.Compute/EncryptionAtHost"],
//!  "denied_actions": [{"action": "Microsoft.Network/privateLinkServices/write", "scope": "/subscriptions/…/resourceGroups/hcp-management"}],
//!  "usage": {"PublicIPAddresses": 1000}, "limits": {"standardDSv5Family": 8},
//!  "restricted_sizes": [{"size": "Standard_D4s_v5", "zones": ["1"]}],
//!  "taken_storage_account_names": ["demohcpoidc7f3a"],
//!  "denied_kube": ["create hypershift.openshift.io/hostedclusters"],
//!  "kube_user": "system:admin", "no_hypershift_crds": false,
//!  "invalid_client_secret": false, "no_operator": false, "no_self_subject_review": false,
//!  "blocking_pdb": false, "failing_cluster_operators": ["console"],
//!  "vm_core_quota": 16, "stall_upgrade": false,
//!  "not_upgradeable": "Kubernetes 1.36 removes APIs that require admin consideration",
//!  "graph_permissions": ["Application.ReadWrite.OwnedBy"],
//!  "denied_data_actions": [{"action": "Microsoft.KeyVault/vaults/certificates/create/action"}],
//!  "caller_needs_data_roles": false, "taken_key_vault_names": ["demo-kv"]}
//! ```
//! Every field is optional. `denied_actions[].scope` limits a denial to scopes starting with
//! it (case-insensitive; none: everywhere); actions may use RBAC wildcards. A restricted
//! size without zones is restricted in the whole location. `denied_kube` entries are
//! `<verb> <group>/<resource>` (`create /secrets` for the core group). The other failures
//! have their own switches: no DNS zone (`--no-dns-zones`), no Route API
//! (`--management-platform aks`), an old operator (`--hypershift-version 4.21`), the other
//! `--private-platform`, and a HostedCluster name taken (create one without our labels). An
//! API server that does not answer, or answers too slowly for the per-check limit: a fault
//! rule (`drop_connection` on `/version`, `latency_ms` on a path). A private link service
//! not visible to the guest subscription: PUT one whose `visibility` lacks it (the
//! visibility answer is computed from the stored PLS).

use axum::http::Method;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

use crate::http::{Req, json as json_resp};
use crate::sim::{Simulator, lock};
use crate::state::State;

/// Failures the read APIs answer with (see the module docs for the JSON shape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// Resource provider namespaces reported `NotRegistered` (every subscription).
    pub unregistered_providers: Vec<String>,
    /// Features reported `NotRegistered`, as `<namespace>/<feature>`.
    pub unregistered_features: Vec<String>,
    /// Actions the caller lacks (reported in `notActions`).
    pub denied_actions: Vec<DeniedAction>,
    /// Usage `currentValue` overrides by usage name (`PublicIPAddresses`, `cores`, …).
    pub usage: BTreeMap<String, i64>,
    /// Usage `limit` overrides by usage name.
    pub limits: BTreeMap<String, i64>,
    /// VM sizes restricted for the subscription.
    pub restricted_sizes: Vec<RestrictedSize>,
    /// Storage account names taken by someone else (globally).
    pub taken_storage_account_names: Vec<String>,
    /// Kubernetes verbs denied to the caller: `<verb> <group>/<resource>`.
    pub denied_kube: Vec<String>,
    /// The management cluster's user (default `system:admin`).
    pub kube_user: Option<String>,
    /// Serve no HyperShift CRDs (HyperShift not installed).
    pub no_hypershift_crds: bool,
    /// Entra refuses the client secret (401 `invalid_client`, AADSTS7000215): a wrong or
    /// expired secret.
    pub invalid_client_secret: bool,
    /// No HyperShift operator Deployment (`hypershift/operator` answers 404).
    pub no_operator: bool,
    /// `SelfSubjectReview` is not served (404), as on an API server before 1.28.
    pub no_self_subject_review: bool,
    /// A PodDisruptionBudget in the guest allows no eviction, so draining a node never
    /// finishes: a NodePool deleted on its own (its nodes drained first) stays until its
    /// `nodeDrainTimeout` passes, for ever without one. A NodePool deleted with its
    /// HostedCluster is not drained.
    pub blocking_pdb: bool,
    /// Guest cluster operators that never become available (`console`, `ingress`, …): the
    /// release never rolls out, and the HostedCluster's `ClusterVersion*` conditions say
    /// which.
    pub failing_cluster_operators: Vec<String>,
    /// The simulated cluster does not check its workload-identity chain
    /// (`workload_identity.rs`). Only for tests of the Kubernetes API mechanics that apply
    /// HostedClusters naming identities that exist nowhere (activities' `kube_mgmt`); no
    /// create or delete test sets it.
    #[serde(default)]
    pub unchecked_identities: bool,
    /// Total regional vCPU quota (`cores`, "Total Regional vCPUs") of every subscription in
    /// every region: a VM PUT that would take the cores in use past it is refused as Azure
    /// refuses it (409 `OperationNotAllowed`, see `machines.rs`), so a NodePool create
    /// or scale-up beyond it leaves the extra machines without a VM. `None`: no limit
    /// (the usages API still reports a limit of 100).
    pub vm_core_quota: Option<u32>,
    /// A control-plane upgrade never finishes: the guest's `console` ClusterOperator stays
    /// degraded, so `status.version.history[0]` stays `Partial` and the HostedCluster's
    /// `ClusterVersionProgressing` says what the CVO says (see `operator::upgrade`).
    /// Clearing it lets the upgrade complete.
    pub stall_upgrade: bool,
    /// The guest's cluster-version operator reports `Upgradeable=False` with this message
    /// (reason `AdminAckRequired`), bubbled up as the HostedCluster's
    /// `ClusterVersionUpgradeable`: HyperShift then refuses a minor upgrade that is not
    /// forced (`Progressing=False`, reason `Blocked`; see `operator::upgrade_blocked`).
    pub not_upgradeable: Option<String>,
    /// Microsoft Graph application permissions (app roles) granted to the caller, carried in
    /// the `roles` claim of its Graph tokens (`entra`, `graph`). `None`: the least privilege
    /// ARO HCP documents for creating applications, `["Application.ReadWrite.OwnedBy"]`;
    /// `[]`: none (every Graph call answers 403 `Authorization_RequestDenied`). Also
    /// understood: `Application.ReadWrite.All`, `Application.Read.All`,
    /// `Directory.ReadWrite.All`, `Directory.Read.All`.
    pub graph_permissions: Option<Vec<String>>,
    /// Key Vault data actions the caller lacks (`Microsoft.KeyVault/vaults/secrets/getSecret/action`,
    /// RBAC wildcards allowed), optionally only at scopes starting with `scope` (the vault's
    /// ARM id): the data plane answers 403 as Key Vault does (`keyvault`).
    pub denied_data_actions: Vec<DeniedAction>,
    /// The caller's Key Vault data actions on a vault with `enableRbacAuthorization` need a
    /// role assignment granting them at the vault or above (as for every other principal);
    /// without it the caller is allowed everything not in `denied_data_actions`.
    pub caller_needs_data_roles: bool,
    /// Key Vault names taken by someone else (globally): `checkNameAvailability` answers
    /// `AlreadyExists` and a vault PUT 409 `VaultAlreadyExists`.
    pub taken_key_vault_names: Vec<String>,
    /// The AKS management cluster's add-ons (`crate::aks`): `{"key_vault_secrets_provider_disabled":
    /// true, "oidc_issuer_disabled": true, "workload_identity_webhook_absent": true}`.
    pub aks: crate::aks::AksScenario,
}

/// One denied ARM action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeniedAction {
    /// The action (RBAC wildcards allowed).
    pub action: String,
    /// Only at scopes starting with this (case-insensitive).
    #[serde(default)]
    pub scope: Option<String>,
}

/// One restricted VM size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestrictedSize {
    /// e.g. `Standard_D4s_v5`.
    pub size: String,
    /// Restricted zones; empty: the whole location.
    #[serde(default)]
    pub zones: Vec<String>,
}

impl Scenario {
    /// Reads a scenario file (JSON).
    ///
    /// # Errors
    /// Unreadable or invalid file.
    pub fn load(path: &std::path::Path) -> Result<Scenario, crate::Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| crate::Error::Config(format!("{}: {e}", path.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| crate::Error::Config(format!("{}: {e}", path.display())))
    }
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn arm_error(status: u16, code: &str, message: &str) -> Response {
    crate::arm::error_response(status, code, message)
}

/// Serves the preflight ARM reads; `None` when the request is not one of them.
pub(crate) fn handle_arm(sim: &Simulator, req: &Req) -> Option<Response> {
    let s: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let get = req.method == Method::GET;
    let post = req.method == Method::POST;
    let resp = match s.as_slice() {
        [
            "subscriptions",
            sub,
            "providers",
            "Microsoft.Features",
            "providers",
            ns,
            "features",
            f,
        ] if get => feature(sim, sub, ns, f),
        [_, sub, p] if get && eq(p, "providers") => providers(sim, sub),
        [_, sub, p, ns] if get && eq(p, "providers") => provider(sim, sub, ns),
        [_, sub, p, n, l, loc, u]
            if get
                && eq(p, "providers")
                && eq(n, "Microsoft.Network")
                && eq(l, "locations")
                && eq(u, "usages") =>
        {
            network_usages(sim, sub, loc)
        }
        [_, sub, p, n, l, loc, u]
            if get
                && eq(p, "providers")
                && eq(n, "Microsoft.Compute")
                && eq(l, "locations")
                && eq(u, "usages") =>
        {
            compute_usages(sim, sub, loc)
        }
        [_, sub, p, n, k]
            if get && eq(p, "providers") && eq(n, "Microsoft.Compute") && eq(k, "skus") =>
        {
            skus(sim, req, sub)
        }
        [_, _sub, p, n, c]
            if post
                && eq(p, "providers")
                && eq(n, "Microsoft.Storage")
                && eq(c, "checkNameAvailability") =>
        {
            check_name(sim, req)
        }
        [_, sub, p, n, l, _loc, c]
            if post
                && eq(p, "providers")
                && eq(n, "Microsoft.Network")
                && eq(l, "locations")
                && eq(c, "checkPrivateLinkServiceVisibility") =>
        {
            pls_visibility(sim, req, sub)
        }
        [.., p, a, perm]
            if get
                && eq(p, "providers")
                && eq(a, "Microsoft.Authorization")
                && eq(perm, "permissions") =>
        {
            permissions(sim, req)
        }
        _ => return None,
    };
    Some(resp)
}

pub(crate) fn scenario(sim: &Simulator) -> Scenario {
    lock(&sim.inner.scenario).clone()
}

/// The namespaces `Providers_List` answers with: what a new subscription lists among its
/// few hundred (every provider is listed, registered or not).
const NAMESPACES: [&str; 10] = [
    "Microsoft.Authorization",
    "Microsoft.Compute",
    "Microsoft.ContainerService",
    "Microsoft.Features",
    "Microsoft.KeyVault",
    "Microsoft.ManagedIdentity",
    "Microsoft.Network",
    "Microsoft.Resources",
    "Microsoft.Storage",
    "Microsoft.Insights",
];

/// A `Provider` (resources.json 2021-04-01).
fn provider_body(sim: &Simulator, sub: &str, ns: &str) -> Value {
    let sc = scenario(sim);
    let state = if sc.unregistered_providers.iter().any(|p| eq(p, ns)) {
        "NotRegistered"
    } else {
        "Registered"
    };
    json!({
        "id": format!("/subscriptions/{sub}/providers/{ns}"),
        "namespace": ns,
        "registrationState": state,
        "registrationPolicy": "RegistrationRequired",
        "resourceTypes": [],
    })
}

/// `Providers_Get`.
fn provider(sim: &Simulator, sub: &str, ns: &str) -> Response {
    json_resp(200, &provider_body(sim, sub, ns))
}

/// `Providers_List` (`ProviderListResult`: `value`, and `nextLink` when there are more;
/// everything fits one page here).
fn providers(sim: &Simulator, sub: &str) -> Response {
    let value: Vec<Value> = NAMESPACES
        .iter()
        .map(|ns| provider_body(sim, sub, ns))
        .collect();
    json_resp(200, &json!({ "value": value }))
}

fn feature(sim: &Simulator, sub: &str, ns: &str, f: &str) -> Response {
    let sc = scenario(sim);
    let name = format!("{ns}/{f}");
    let state = if sc.unregistered_features.iter().any(|x| eq(x, &name)) {
        "NotRegistered"
    } else {
        "Registered"
    };
    json_resp(
        200,
        &json!({
            "id": format!("/subscriptions/{sub}/providers/Microsoft.Features/providers/{ns}/features/{f}"),
            "name": name,
            "type": "Microsoft.Features/providers/features",
            "properties": {"state": state},
        }),
    )
}

/// `{"value":[{"actions":["*"],"notActions":[…]}]}`; 404 `ResourceGroupNotFound` for a
/// missing group, `ResourceNotFound` for a missing resource.
fn permissions(sim: &Simulator, req: &Req) -> Response {
    let segs = &req.segments;
    // The scope: everything before `providers/Microsoft.Authorization/permissions`.
    let scope_segs = &segs[..segs.len().saturating_sub(3)];
    let scope = format!("/{}", scope_segs.join("/"));
    if scope_segs.len() < 4 || !eq(&scope_segs[2], "resourceGroups") {
        return arm_error(
            404,
            "NotFound",
            "Microsoft.Authorization/permissions is served for a resource group or a resource only",
        );
    }
    let rg_id = format!(
        "/subscriptions/{}/resourceGroups/{}",
        scope_segs[1], scope_segs[3]
    );
    {
        let st = lock(&sim.inner.state);
        if !st.arm.contains_key(&rg_id.to_ascii_lowercase()) {
            return arm_error(
                404,
                "ResourceGroupNotFound",
                &format!("Resource group '{}' could not be found.", scope_segs[3]),
            );
        }
        if scope_segs.len() > 4 && !st.arm.contains_key(&scope.to_ascii_lowercase()) {
            return arm_error(
                404,
                "ResourceNotFound",
                &format!("The Resource '{scope}' was not found."),
            );
        }
    }
    let sc = scenario(sim);
    let lower = scope.to_ascii_lowercase();
    let not_actions: Vec<String> = sc
        .denied_actions
        .iter()
        .filter(|d| {
            d.scope
                .as_deref()
                .is_none_or(|s| lower.starts_with(&s.to_ascii_lowercase()))
        })
        .map(|d| d.action.clone())
        .collect();
    json_resp(
        200,
        &json!({"value": [{
            "actions": ["*"],
            "notActions": not_actions,
            "dataActions": [],
            "notDataActions": [],
        }]}),
    )
}

fn count_in_sub(st: &State, sub: &str, rtype: &str) -> i64 {
    let prefix = format!("/subscriptions/{sub}/").to_ascii_lowercase();
    st.arm
        .values()
        .filter(|r| {
            r.rtype.eq_ignore_ascii_case(rtype) && r.id.to_ascii_lowercase().starts_with(&prefix)
        })
        .count() as i64
}

fn usage_item(
    sc: &Scenario,
    id: Option<String>,
    name: &str,
    localized: &str,
    current: i64,
    limit: i64,
) -> Value {
    let current = sc.usage.get(name).copied().unwrap_or(current);
    let limit = sc.limits.get(name).copied().unwrap_or(limit);
    let mut v = json!({
        "name": {"value": name, "localizedValue": localized},
        "currentValue": current,
        "limit": limit,
        "unit": "Count",
    });
    if let Some(id) = id {
        v["id"] = json!(id);
    }
    v
}

fn network_usages(sim: &Simulator, sub: &str, loc: &str) -> Response {
    let sc = scenario(sim);
    let st = lock(&sim.inner.state);
    let base = format!("/subscriptions/{sub}/providers/Microsoft.Network/locations/{loc}/usages");
    let items: Vec<Value> = [
        (
            "VirtualNetworks",
            "Virtual Networks",
            crate::arm::types::VNET,
            1000,
        ),
        (
            "PublicIPAddresses",
            "Public IP Addresses",
            crate::arm::types::PIP,
            1000,
        ),
        (
            "NetworkSecurityGroups",
            "Network Security Groups",
            crate::arm::types::NSG,
            5000,
        ),
        (
            "LoadBalancers",
            "Load Balancers",
            crate::arm::types::LB,
            1000,
        ),
        (
            "PrivateLinkServices",
            "Private Link Services",
            crate::arm::types::PLS,
            800,
        ),
    ]
    .iter()
    .map(|(n, l, t, limit)| {
        usage_item(
            &sc,
            Some(format!("{base}/{n}")),
            n,
            l,
            count_in_sub(&st, sub, t),
            *limit,
        )
    })
    .collect();
    json_resp(200, &json!({ "value": items }))
}

/// The simulated VM size catalogue: (name, family, vCPUs).
const SIZES: [(&str, &str, i64); 6] = [
    ("Standard_D2s_v5", "standardDSv5Family", 2),
    ("Standard_D4s_v5", "standardDSv5Family", 4),
    ("Standard_D8s_v5", "standardDSv5Family", 8),
    ("Standard_D4s_v3", "standardDSv3Family", 4),
    ("Standard_E4s_v5", "standardESv5Family", 4),
    ("Standard_D4ds_v5", "standardDDSv5Family", 4),
];

/// `Usage_List`: `cores` (Total Regional vCPUs) and `virtualMachines` count the VMs the
/// simulated CAPZ created in this subscription and region ([`crate::machines`]); the
/// `cores` limit is the scenario's `vm_core_quota` (100 without one). The scenario's
/// `usage`/`limits` overrides win.
fn compute_usages(sim: &Simulator, sub: &str, loc: &str) -> Response {
    let sc = scenario(sim);
    let (cores, vms) = {
        let st = lock(&sim.inner.state);
        (
            crate::machines::cores_in_use(&st, sub, loc),
            crate::machines::vms_in_use(&st, sub, loc),
        )
    };
    let core_limit = sc.vm_core_quota.map_or(100, i64::from);
    let mut items = vec![
        usage_item(
            &sc,
            None,
            "cores",
            "Total Regional vCPUs",
            i64::from(cores),
            core_limit,
        ),
        usage_item(
            &sc,
            None,
            "virtualMachines",
            "Virtual Machines",
            i64::from(vms),
            25000,
        ),
    ];
    let mut families: Vec<&str> = SIZES.iter().map(|s| s.1).collect();
    families.dedup();
    for f in families {
        items.push(usage_item(&sc, None, f, f, 0, 100));
    }
    json_resp(200, &json!({ "value": items }))
}

fn skus(sim: &Simulator, req: &Req, _sub: &str) -> Response {
    let sc = scenario(sim);
    // `$filter=location eq 'eastus'`; without it, every location (one here).
    let loc = req
        .q("$filter")
        .and_then(|f| f.split('\'').nth(1))
        .map(str::to_string)
        .unwrap_or_else(|| sim.config().management_location.clone());
    let items: Vec<Value> = SIZES
        .iter()
        .map(|(name, family, vcpus)| {
            let restrictions: Vec<Value> = sc
                .restricted_sizes
                .iter()
                .filter(|r| eq(&r.size, name))
                .map(|r| {
                    if r.zones.is_empty() {
                        json!({"type": "Location", "values": [loc], "restrictionInfo": {"locations": [loc]}, "reasonCode": "NotAvailableForSubscription"})
                    } else {
                        json!({"type": "Zone", "values": [loc], "restrictionInfo": {"locations": [loc], "zones": r.zones}, "reasonCode": "NotAvailableForSubscription"})
                    }
                })
                .collect();
            json!({
                "resourceType": "virtualMachines",
                "name": name,
                "tier": "Standard",
                "size": name.trim_start_matches("Standard_"),
                "family": family,
                "locations": [loc],
                "locationInfo": [{"location": loc, "zones": ["1", "2", "3"], "zoneDetails": []}],
                "capabilities": [
                    {"name": "vCPUs", "value": vcpus.to_string()},
                    {"name": "MemoryGB", "value": (vcpus * 4).to_string()},
                    {"name": "EncryptionAtHostSupported", "value": "True"},
                ],
                "restrictions": restrictions,
            })
        })
        .collect();
    json_resp(200, &json!({ "value": items }))
}

fn check_name(sim: &Simulator, req: &Req) -> Response {
    let body = req.json_body().unwrap_or(Value::Null);
    let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
    if !(3..=24).contains(&name.len())
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    {
        return json_resp(
            200,
            &json!({"nameAvailable": false, "reason": "AccountNameInvalid",
                "message": format!("{name} is not a valid storage account name. Storage account name must be between 3 and 24 characters in length and use numbers and lower-case letters only.")}),
        );
    }
    let taken = scenario(sim)
        .taken_storage_account_names
        .iter()
        .any(|n| eq(n, name))
        || crate::arm::find_storage_account(&lock(&sim.inner.state), name).is_some();
    if taken {
        json_resp(
            200,
            &json!({"nameAvailable": false, "reason": "AlreadyExists",
                "message": format!("The storage account named {name} is already taken.")}),
        )
    } else {
        json_resp(200, &json!({"nameAvailable": true}))
    }
}

fn pls_visibility(sim: &Simulator, req: &Req, sub: &str) -> Response {
    let body = req.json_body().unwrap_or(Value::Null);
    let alias = body
        .get("privateLinkServiceAlias")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let st = lock(&sim.inner.state);
    let pls = st.arm.values().find(|r| {
        r.rtype == crate::arm::types::PLS
            && r.body
                .pointer("/properties/alias")
                .and_then(Value::as_str)
                .is_some_and(|a| eq(a, alias))
    });
    let visible = pls.is_some_and(|p| {
        p.body
            .pointer("/properties/visibility/subscriptions")
            .and_then(Value::as_array)
            .is_some_and(|subs| {
                subs.iter()
                    .filter_map(Value::as_str)
                    .any(|s| s == "*" || eq(s, sub))
            })
    });
    json_resp(200, &json!({ "visible": visible }))
}

/// The token endpoint's refusal of a scenario's wrong client secret: 401 `invalid_client`
/// with Entra's AADSTS7000215 text (the error a wrong or expired `AZURE_CLIENT_SECRET`
/// gets; https://learn.microsoft.com/entra/identity-platform/reference-error-codes).
pub(crate) fn token_refusal(
    sim: &Simulator,
    client_id: &str,
    has_secret: bool,
) -> Option<Response> {
    (has_secret && scenario(sim).invalid_client_secret).then(|| {
        crate::entra::error_response(
            401,
            "invalid_client",
            &format!(
                "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '{client_id}'."
            ),
        )
    })
}

// --- Kubernetes ------------------------------------------------------------------------

/// Serves the preflight Kubernetes reviews and CRD reads, and the scenario's missing
/// operator Deployment; `None` otherwise.
pub(crate) fn handle_kube(sim: &Simulator, req: &Req) -> Option<Response> {
    let s: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    match (&req.method, s.as_slice()) {
        (&Method::POST, ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"])
            if scenario(sim).no_self_subject_review =>
        {
            // What an API server before 1.28 answers: authentication.k8s.io/v1
            // SelfSubjectReview went GA in 1.28 (KEP-3325, kubernetes/enhancements
            // keps/sig-auth/3325-self-subject-attributes-review-api), so an older server has
            // no such resource: 404 with the generic not-found Status.
            Some(crate::kube::status_response(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ))
        }
        (
            &Method::GET,
            [
                "apis",
                "apps",
                "v1",
                "namespaces",
                "hypershift",
                "deployments",
                "operator",
            ],
        ) if scenario(sim).no_operator => Some(crate::kube::status_response(
            404,
            "NotFound",
            "deployments.apps \"operator\" not found",
        )),
        (&Method::POST, ["apis", "authentication.k8s.io", "v1", "selfsubjectreviews"]) => {
            let user = scenario(sim)
                .kube_user
                .unwrap_or_else(|| "system:admin".into());
            Some(json_resp(
                201,
                &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                    "metadata": {"creationTimestamp": null},
                    "status": {"userInfo": {"username": user, "groups": ["system:masters", "system:authenticated"]}}}),
            ))
        }
        (
            &Method::POST,
            [
                "apis",
                "authorization.k8s.io",
                "v1",
                "selfsubjectaccessreviews",
            ],
        ) => {
            let body = req.json_body().unwrap_or(Value::Null);
            let attrs = body
                .pointer("/spec/resourceAttributes")
                .cloned()
                .unwrap_or(Value::Null);
            let f = |k: &str| {
                attrs
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let key = format!("{} {}/{}", f("verb"), f("group"), f("resource"));
            let denied = scenario(sim).denied_kube.iter().any(|d| d.trim() == key);
            let mut status = json!({"allowed": !denied});
            if denied {
                status["denied"] = json!(true);
                status["reason"] = json!(format!("the scenario denies {key}"));
            }
            Some(json_resp(
                201,
                &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "metadata": {"creationTimestamp": null}, "spec": body.get("spec").cloned().unwrap_or(json!({})),
                    "status": status}),
            ))
        }
        (
            &Method::GET,
            [
                "apis",
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                name,
            ],
        ) => Some(match crd(sim, name) {
            Some(c) => json_resp(200, &c),
            None => crate::kube::status_response(
                404,
                "NotFound",
                &format!("customresourcedefinitions.apiextensions.k8s.io \"{name}\" not found"),
            ),
        }),
        _ => None,
    }
}

/// A HyperShift CRD: from `--crds DIR` when given, else a minimal one with the fields
/// hcp-workflow renders.
fn crd(sim: &Simulator, name: &str) -> Option<Value> {
    if scenario(sim).no_hypershift_crds {
        return None;
    }
    let (plural, group) = name.split_once('.')?;
    if group != crate::kube::HYPERSHIFT
        || !matches!(
            plural,
            "hostedclusters" | "nodepools" | "azureprivatelinkservices"
        )
    {
        return None;
    }
    if let Some(dir) = &sim.config().crds_dir
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        for e in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(e.path()) else {
                continue;
            };
            for doc in serde_norway::Deserializer::from_str(&text) {
                let Ok(v) = Value::deserialize(doc) else {
                    continue;
                };
                if v.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
                    && v.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                {
                    return Some(v);
                }
            }
        }
    }
    let obj = |props: Value| json!({"type": "object", "properties": props});
    let spec = match plural {
        "hostedclusters" => obj(json!({
            "platform": obj(json!({"azure": obj(json!({
                "location": {"type": "string"}, "resourceGroup": {"type": "string"}, "vnetID": {"type": "string"},
                "subnetID": {"type": "string"}, "securityGroupID": {"type": "string"}, "subscriptionID": {"type": "string"},
                "tenantID": {"type": "string"}, "cloud": {"type": "string"}, "azureAuthenticationConfig": {"type": "object"},
                "topology": {"type": "string"}, "private": {"type": "object"}}))})),
            "issuerURL": {"type": "string"}, "serviceAccountSigningKey": {"type": "object"},
            "dns": obj(json!({"baseDomain": {"type": "string"}, "publicZoneID": {"type": "string"}, "privateZoneID": {"type": "string"}})),
            "release": obj(json!({"image": {"type": "string"}})),
        })),
        _ => obj(json!({
            "clusterName": {"type": "string"}, "replicas": {"type": "integer"},
            "release": obj(json!({"image": {"type": "string"}})),
            "platform": obj(json!({"azure": obj(json!({"vmSize": {"type": "string"}, "image": {"type": "object"},
                "osDisk": {"type": "object"}, "subnetID": {"type": "string"}}))})),
        })),
    };
    Some(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "kind": plural, "listKind": format!("{plural}List")},
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": obj(json!({"spec": spec, "status": {"type": "object"}}))}}]},
    }))
}

/// Seeds (or brings in line with the configuration) the operator's
/// `hypershift/supported-versions` ConfigMap: 4.14 up to the simulated operator's minor.
pub(crate) fn seed_supported_versions(sim: &Simulator, st: &mut State, now: u64) {
    let Some(kind) = crate::kube::kind_by_key("core/configmaps") else {
        return;
    };
    let (maj, latest) =
        crate::config::minor_version(&sim.config().hypershift_version).unwrap_or((4, 22));
    let versions: Vec<String> = (14..=latest).rev().map(|m| format!("{maj}.{m}")).collect();
    let data = json!({
        "supported-versions": json!({"versions": versions}).to_string(),
        "server-version": sim.config().hypershift_version,
    });
    match crate::kube::store::get(st, "core/configmaps", "hypershift", "supported-versions")
        .cloned()
    {
        Some(mut cm) => {
            if cm.get("data") != Some(&data) {
                cm["data"] = data;
                crate::kube::store::update(sim, st, kind, "hypershift", cm);
            }
        }
        None => {
            let obj = json!({
                "metadata": {"name": "supported-versions", "labels": {"hypershift.openshift.io/supported-versions": "true"}},
                "data": data,
            });
            crate::kube::store::create(sim, st, now, kind, "hypershift", obj);
        }
    }
}
