//! Azure checks of `preflight`, each citing the API it reads.

use super::{Check, CheckResult, Inputs, NatSubnet, Workflow, short};
use crate::azure::models::{API_NETWORK, API_RESOURCES, API_STORAGE};
use crate::azure::{ArmClient, ArmError};
use crate::steps::permissions;
use crate::steps::{AzureEnv, Clients};
use base64::Engine;
use hcp_runtime::SagaDag;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `GET /subscriptions/{s}/providers` (Providers_List,
/// `specification/resources/resource-manager/Microsoft.Resources/stable/2021-04-01/resources.json`).
pub const API_PROVIDERS: &str = "2021-04-01";
/// `GET /subscriptions/{s}/providers/Microsoft.Features/providers/{ns}/features/{f}`
/// (Features_Get, `specification/resources/resource-manager/Microsoft.Features/stable/2021-07-01/features.json`).
pub const API_FEATURES: &str = "2021-07-01";
/// `GET {scope}/providers/Microsoft.Authorization/permissions` (Permissions_ListForResourceGroup,
/// `…/Microsoft.Authorization/stable/2022-04-01/authorization-RoleDefinitionsCalls.json`).
pub const API_PERMISSIONS: &str = "2022-04-01";
/// `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages` (Usage_List,
/// `specification/compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2024-07-01/computeRPCommon.json`).
pub const API_COMPUTE_USAGES: &str = "2024-07-01";
/// `GET /subscriptions/{s}/providers/Microsoft.Compute/skus?$filter=location eq '…'`
/// (ResourceSkus_List, `specification/compute/resource-manager/Microsoft.Compute/Skus/stable/2021-07-01/skus.json`).
pub const API_SKUS: &str = "2021-07-01";

/// Resource providers the guest subscription needs (the run writes their types).
pub const GUEST_PROVIDERS: [&str; 5] = [
    "Microsoft.Network",
    "Microsoft.ManagedIdentity",
    "Microsoft.Storage",
    "Microsoft.Compute",
    "Microsoft.Authorization",
];

fn row_err(check: &str, target: &str, what: &str, e: &ArmError, fix: &str) -> CheckResult {
    if e.status == 403 || e.code == "AuthorizationFailed" {
        return CheckResult::fail(
            check,
            target,
            format!(
                "{what}: not allowed to read it ({}: {})",
                e.code,
                short(&e.message)
            ),
            "grant the caller Reader (or a role with the read action) at this scope: az role assignment create --assignee <object id from azure.token> --role Reader --scope <scope>",
        );
    }
    CheckResult::fail(
        check,
        target,
        format!("{what}: {} {}: {}", e.status, e.code, short(&e.message)),
        fix,
    )
}

/// The Azure checks that apply to `inputs.workflow`.
pub(crate) fn checks(clients: &Arc<Clients>, inputs: &Arc<Inputs>, dag: &SagaDag) -> Vec<Check> {
    let mut out = Vec::new();
    let create = inputs.workflow == Workflow::Create;
    out.push(token_check(clients, &inputs.azure));
    // Providers: the guest subscription's five; the management subscription's Network.
    let mut subs: Vec<(String, Vec<&'static str>)> =
        vec![(inputs.subscription.clone(), GUEST_PROVIDERS.to_vec())];
    if let Some(pl) = &inputs.private_link
        && !pl
            .mgmt_subscription
            .eq_ignore_ascii_case(&inputs.subscription)
    {
        subs.push((pl.mgmt_subscription.clone(), vec!["Microsoft.Network"]));
    }
    if create {
        for (sub, namespaces) in subs {
            let (c, i, s) = (clients.clone(), inputs.clone(), sub.clone());
            out.push(Check::new(
                "azure.provider",
                format!("/subscriptions/{sub}/providers"),
                async move { providers(&c, &i.azure, &s, &namespaces).await },
            ));
        }
        let (c, i) = (clients.clone(), inputs.clone());
        out.push(Check::new(
            "azure.feature",
            feature_id(&inputs.subscription),
            async move { encryption_at_host(&c, &i).await },
        ));
    }
    // The guest subscription's groups, listed once for every check that asks whether one
    // exists (one read instead of one per group).
    let groups = Arc::new(GroupList::new(&inputs.subscription));
    // Permissions, derived from the DAG: one check per scope.
    let mut by_scope: BTreeMap<String, Vec<permissions::Needed>> = BTreeMap::new();
    for n in permissions::needed(dag) {
        by_scope
            .entry(n.scope.to_ascii_lowercase())
            .or_default()
            .push(n);
    }
    let perms = Arc::new(PermissionReads::new(by_scope.keys()));
    for (_, needed) in by_scope {
        let scope = needed[0].scope.clone();
        let env = env_for(inputs, &scope);
        let c = clients.clone();
        let listed = groups.lists(&scope).then(|| groups.clone());
        let p = perms.clone();
        out.push(Check::new("azure.permission", scope.clone(), async move {
            permission(&c, &env, &scope, &needed, listed.as_deref(), &p).await
        }));
    }
    if create {
        let (c, i) = (clients.clone(), inputs.clone());
        let pls_location = dag
            .nodes
            .iter()
            .find(|n| n.action == "azure.private-link-service.ensure")
            .and_then(|n| n.input.get("location").and_then(Value::as_str))
            .map(str::to_string);
        out.push(Check::new(
            "azure.quota",
            format!(
                "/subscriptions/{}/providers/Microsoft.Network/locations/{}/usages",
                inputs.subscription, inputs.location
            ),
            async move { network_quota(&c, &i, pls_location).await },
        ));
        let (c, i) = (clients.clone(), inputs.clone());
        out.push(Check::new(
            "azure.vm-size",
            format!(
                "/subscriptions/{}/providers/Microsoft.Compute/skus (location {})",
                inputs.subscription, inputs.location
            ),
            async move { compute(&c, &i).await },
        ));
        let (c, i) = (clients.clone(), inputs.clone());
        out.push(Check::new(
            "azure.dns-zone",
            format!("public DNS zone {}", inputs.base_domain),
            async move { dns_zone(&c, &i).await },
        ));
        if let Some(id) = inputs.storage_account_id.clone() {
            let (c, i) = (clients.clone(), inputs.clone());
            out.push(Check::new(
                "azure.storage-account",
                id.clone(),
                async move { storage_account(&c, &i, &id).await },
            ));
        }
        let (c, i, g) = (clients.clone(), inputs.clone(), groups.clone());
        out.push(Check::new(
            "azure.persistent-group",
            inputs.persistent_rg.clone(),
            async move { persistent_group(&c, &i, &g).await },
        ));
        if inputs.private_link.is_some() {
            let (c, i, p) = (clients.clone(), inputs.clone(), perms.clone());
            out.push(Check::new(
                "azure.private-link",
                "management VNet, load-balancer group, NAT subnet, PLS visibility",
                async move { private_link(&c, &i, &p).await },
            ));
        }
    }
    if inputs.workflow == Workflow::Update && !inputs.pools.is_empty() {
        // The machines an update adds: offered sizes and the vCPU quota.
        let (c, i) = (clients.clone(), inputs.clone());
        out.push(Check::new(
            "azure.vm-size",
            format!(
                "/subscriptions/{}/providers/Microsoft.Compute/skus (location {})",
                inputs.subscription, inputs.location
            ),
            async move { compute(&c, &i).await },
        ));
    }
    out
}

/// The Azure target for a scope: the management subscription's for its scopes.
fn env_for(inputs: &Inputs, scope: &str) -> AzureEnv {
    match &inputs.private_link {
        Some(pl)
            if scope.to_ascii_lowercase().starts_with(
                &format!("/subscriptions/{}", pl.mgmt_subscription).to_ascii_lowercase(),
            ) =>
        {
            pl.mgmt_azure.clone()
        }
        _ => inputs.azure.clone(),
    }
}

// --- token ------------------------------------------------------------------------------

/// Claims of an Entra access token we report (none is secret).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// `tid`.
    pub tenant: Option<String>,
    /// `oid`: the caller's object id (what role assignments name).
    pub object_id: Option<String>,
    /// `appid` (v1) or `azp` (v2): the client.
    pub app_id: Option<String>,
    /// `upn` / `unique_name` for users.
    pub user: Option<String>,
    /// `roles`: the application permissions granted (e.g. Microsoft Graph's
    /// `Application.ReadWrite.OwnedBy` in a Graph token).
    pub roles: Vec<String>,
}

/// Reads the claims of a JWT's payload (base64url JSON, RFC 7519 §3). The signature is not
/// verified: the token comes straight from Entra over TLS and is only described here.
pub fn token_claims(token: &str) -> Option<TokenClaims> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    Some(TokenClaims {
        tenant: s("tid"),
        object_id: s("oid"),
        app_id: s("appid").or_else(|| s("azp")),
        user: s("upn").or_else(|| s("unique_name")),
        roles: v
            .get("roles")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

fn token_check(clients: &Arc<Clients>, env: &AzureEnv) -> Check {
    let target = format!(
        "ARM token for tenant {} ({} cloud, auth {})",
        env.tenant_id,
        env.cloud.resource_manager(),
        env.auth.as_str()
    );
    let (c, env) = (clients.clone(), env.clone());
    let t = target.clone();
    Check::new("azure.token", target, async move {
        vec![token(&c, &env, &t).await]
    })
}

async fn token(clients: &Clients, env: &AzureEnv, target: &str) -> CheckResult {
    let (cred, mode) = match clients.arm_credential(env).await {
        Ok(x) => x,
        Err(e) if e.code.as_deref() == Some(crate::steps::env::UNREACHABLE) => {
            return CheckResult::fail(
                "azure.token",
                target,
                short(&e.message),
                format!(
                    "check the network path from here to {} (DNS, a proxy: HTTPS_PROXY and NO_PROXY, a firewall); the credentials themselves were not judged",
                    env.cloud.authority_host()
                ),
            );
        }
        Err(e) => {
            return CheckResult::fail(
                "azure.token",
                target,
                short(&e.message),
                format!(
                    "provide credentials for auth `{}` (workload-identity: AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE; client-secret: AZURE_CLIENT_ID, AZURE_CLIENT_SECRET; azure-cli: az login --tenant {})",
                    env.auth.as_str(),
                    env.tenant_id
                ),
            );
        }
    };
    // azure_core TokenCredential::get_token with ARM's `<endpoint>/.default` scope: the
    // Entra v2 token endpoint (`POST {authority}/{tenant}/oauth2/v2.0/token`).
    let scope = env.cloud.arm_scope();
    let tok = match cred.get_token(&[scope.as_str()], None).await {
        Ok(t) => t,
        Err(e) => {
            return CheckResult::fail(
                "azure.token",
                target,
                format!("no token for {scope}: {}", short(&e)),
                "check the credential's tenant and that it may request ARM tokens",
            );
        }
    };
    let claims = token_claims(tok.token.secret()).unwrap_or_default();
    drop(tok);
    let who = format!(
        "tenant {}, object id {}{}, credential {}",
        claims.tenant.as_deref().unwrap_or("(not in token)"),
        claims.object_id.as_deref().unwrap_or("(not in token)"),
        claims
            .app_id
            .as_deref()
            .map(|a| format!(", app id {a}"))
            .or_else(|| claims.user.as_deref().map(|u| format!(", user {u}")))
            .unwrap_or_default(),
        mode.as_str()
    );
    match &claims.tenant {
        Some(t) if !t.eq_ignore_ascii_case(&env.tenant_id) => CheckResult::fail(
            "azure.token",
            target,
            format!("the token is for another tenant: {who}"),
            format!(
                "use a credential of tenant {} (or fix `tenant` in the cluster file)",
                env.tenant_id
            ),
        ),
        _ => CheckResult::pass("azure.token", target, who),
    }
}

// --- providers and features ------------------------------------------------------------

/// One row per namespace, from one `Providers_List` of the subscription (one
/// read where there were one per namespace). ARM lists every provider, registered or not.
async fn providers(
    clients: &Clients,
    env: &AzureEnv,
    sub: &str,
    namespaces: &[&str],
) -> Vec<CheckResult> {
    let target = |ns: &str| format!("/subscriptions/{sub}/providers/{ns}");
    let fix = |ns: &str| format!("az provider register --namespace {ns} --subscription {sub}");
    let arm = match clients.arm(env).await {
        Ok(a) => a,
        Err(e) => {
            return namespaces
                .iter()
                .map(|ns| no_client("azure.provider", &target(ns), &e))
                .collect();
        }
    };
    let list = match arm
        .list_values(&format!("/subscriptions/{sub}/providers"), API_PROVIDERS)
        .await
    {
        Ok(l) => l,
        Err(e) => {
            return namespaces
                .iter()
                .map(|ns| row_err("azure.provider", &target(ns), "providers", &e, &fix(ns)))
                .collect();
        }
    };
    namespaces
        .iter()
        .map(|ns| {
            let found = list.iter().find(|p| {
                p.get("namespace")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.eq_ignore_ascii_case(ns))
            });
            // `registrationState` is Registered, NotRegistered, Registering, …
            match found {
                Some(v) => {
                    let state = v
                        .get("registrationState")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown");
                    if state.eq_ignore_ascii_case("Registered") {
                        CheckResult::pass("azure.provider", target(ns), "Registered")
                    } else {
                        CheckResult::fail(
                            "azure.provider",
                            target(ns),
                            format!(
                                "registrationState {state}: the run's writes of {ns} types would fail with MissingSubscriptionRegistration"
                            ),
                            fix(ns),
                        )
                    }
                }
                None => CheckResult::fail(
                    "azure.provider",
                    target(ns),
                    "not in the subscription's provider list",
                    fix(ns),
                ),
            }
        })
        .collect()
}

fn feature_id(sub: &str) -> String {
    format!(
        "/subscriptions/{sub}/providers/Microsoft.Features/providers/Microsoft.Compute/features/EncryptionAtHost"
    )
}

async fn encryption_at_host(clients: &Clients, inputs: &Inputs) -> Vec<CheckResult> {
    let target = feature_id(&inputs.subscription);
    let arm = match clients.arm(&inputs.azure).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.feature", &target, &e)],
    };
    let fix = format!(
        "az feature register --namespace Microsoft.Compute --name EncryptionAtHost --subscription {s} && az provider register --namespace Microsoft.Compute --subscription {s}",
        s = inputs.subscription
    );
    // Features_Get: `properties.state` is Registered, NotRegistered, Pending, …
    match arm.get_value(&target, API_FEATURES).await {
        Ok(Some(v)) => {
            let state = v
                .pointer("/properties/state")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            if state.eq_ignore_ascii_case("Registered") {
                vec![CheckResult::pass("azure.feature", target, "Registered")]
            } else {
                vec![CheckResult::fail(
                    "azure.feature",
                    target,
                    format!(
                        "state {state}: HyperShift's NodePool CRD defaults encryptionAtHost: Enabled, so the node VMs would be refused"
                    ),
                    fix,
                )]
            }
        }
        Ok(None) => vec![CheckResult::fail(
            "azure.feature",
            target,
            "404: feature not found",
            fix,
        )],
        Err(e) => vec![row_err("azure.feature", &target, "feature", &e, &fix)],
    }
}

fn no_client(check: &str, target: &str, e: &hcp_runtime::StepError) -> CheckResult {
    CheckResult::fail(
        check,
        target,
        format!("{NO_CLIENT}{}", short(&e.message)),
        NO_CLIENT_FIX,
    )
}

/// The detail prefix and fix of a row that could not be checked because no ARM client
/// could be made: the same failure as `azure.token`'s, which
/// [`super::collapse_dependents`] folds into one row.
pub(crate) const NO_CLIENT: &str = "no ARM client: ";
pub(crate) const NO_CLIENT_FIX: &str = "fix the credentials first (see azure.token)";

// --- permissions -----------------------------------------------------------------------

fn permission_fix(scope: &str, missing: &[&str]) -> String {
    let rbac = missing
        .iter()
        .any(|a| a.starts_with("Microsoft.Authorization/roleAssignments/"));
    let other = missing
        .iter()
        .any(|a| !a.starts_with("Microsoft.Authorization/roleAssignments/"));
    let mut cmds = Vec::new();
    if other {
        cmds.push(format!(
            "az role assignment create --assignee <object id from azure.token> --role Contributor --scope {scope}"
        ));
    }
    if rbac {
        cmds.push(format!(
            "az role assignment create --assignee <object id from azure.token> --role \"Role Based Access Control Administrator\" --scope {scope}"
        ));
    }
    cmds.join(" ; ")
}

async fn permission(
    clients: &Clients,
    env: &AzureEnv,
    scope: &str,
    needed: &[permissions::Needed],
    groups: Option<&GroupList>,
    reads: &PermissionReads,
) -> Vec<CheckResult> {
    let arm = match clients.arm(env).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.permission", scope, &e)],
    };
    let absent = match groups {
        Some(g) => matches!(g.find(&arm, scope).await, Some(None)),
        None => false,
    };
    let actions: Vec<&str> = needed.iter().map(|n| n.action).collect();
    if !scope.to_ascii_lowercase().contains("/resourcegroups/") {
        return vec![CheckResult::warn(
            "azure.permission",
            scope,
            format!(
                "not checked: Microsoft.Authorization/permissions answers for a resource group or a resource only; needed at the subscription: {}",
                actions.join(", ")
            ),
            None,
        )];
    }
    // The group does not exist yet (the run creates it): its effective permissions are the
    // subscription's, which this API cannot report.
    let not_yet = || {
        vec![CheckResult::warn(
            "azure.permission",
            scope,
            format!(
                "not checked: the group does not exist yet (the run creates it) and the permissions API answers for an existing group or resource only; the steps need {} actions here, and Microsoft.Resources/subscriptions/resourceGroups/write on the subscription",
                actions.len()
            ),
            None,
        )]
    };
    if absent {
        // Not in the subscription's group list.
        return not_yet();
    }
    let read = match reads.read(&arm, scope).await {
        Some(r) => r,
        None => {
            let path = format!("{scope}/providers/Microsoft.Authorization/permissions");
            arm.list_values(&path, API_PERMISSIONS).await
        }
    };
    let perms = match read {
        Ok(p) => p,
        Err(e) if e.status == 404 && e.code == "ResourceGroupNotFound" => return not_yet(),
        Err(e) => {
            return vec![row_err(
                "azure.permission",
                scope,
                "permissions",
                &e,
                "grant the caller a role at this scope",
            )];
        }
    };
    let missing: Vec<&permissions::Needed> = needed
        .iter()
        .filter(|n| !permissions::allowed(&perms, n.action))
        .collect();
    if missing.is_empty() {
        return vec![CheckResult::pass(
            "azure.permission",
            scope,
            format!(
                "all {} actions the steps need here are allowed",
                needed.len()
            ),
        )];
    }
    let names: Vec<&str> = missing.iter().map(|n| n.action).collect();
    let steps: Vec<String> = {
        let mut s: Vec<String> = missing.iter().flat_map(|n| n.nodes.clone()).collect();
        s.sort();
        s.dedup();
        s
    };
    vec![CheckResult::fail(
        "azure.permission",
        scope,
        format!(
            "the caller may not: {} (needed by {})",
            names.join(", "),
            steps.join(", ")
        ),
        permission_fix(scope, &names),
    )]
}

// --- quotas, VM sizes ------------------------------------------------------------------

fn usage<'a>(list: &'a [Value], name: &str) -> Option<(&'a Value, i64, i64)> {
    let u = list.iter().find(|u| {
        u.pointer("/name/value")
            .and_then(Value::as_str)
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
    })?;
    let cur = u.get("currentValue").and_then(Value::as_i64).unwrap_or(0);
    let limit = u.get("limit").and_then(Value::as_i64).unwrap_or(0);
    Some((u, cur, limit))
}

fn quota_row(
    check: &str,
    target: &str,
    list: &[Value],
    names: &[&str],
    need: i64,
    what: &str,
    fix: &str,
) -> CheckResult {
    let Some((u, cur, limit)) = names.iter().find_map(|n| usage(list, n)) else {
        return CheckResult::warn(
            check,
            format!("{target} [{}]", names.join("|")),
            format!("{what}: not reported by usages; not checked"),
            None,
        );
    };
    let name = u
        .pointer("/name/value")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let target = format!("{target} [{name}]");
    if cur + need > limit {
        CheckResult::fail(
            check,
            target,
            format!("{what}: {cur} of {limit} used, the run needs {need} more"),
            fix.to_string(),
        )
    } else {
        CheckResult::pass(
            check,
            target,
            format!("{what}: {cur} of {limit} used, the run needs {need}"),
        )
    }
}

fn quota_fix(sub: &str, loc: &str, what: &str) -> String {
    format!(
        "free some {what} in {loc} or request more: Azure portal → Subscriptions → {sub} → Usage + quotas (az quota update …)"
    )
}

async fn network_quota(
    clients: &Clients,
    inputs: &Inputs,
    pls_location: Option<String>,
) -> Vec<CheckResult> {
    let mut rows = Vec::new();
    let sub = &inputs.subscription;
    let loc = &inputs.location;
    let path = format!("/subscriptions/{sub}/providers/Microsoft.Network/locations/{loc}/usages");
    let arm = match clients.arm(&inputs.azure).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.quota", &path, &e)],
    };
    // Usages_List (network.json, 2023-11-01): `name.value`, `currentValue`, `limit`.
    match arm.list_values(&path, API_NETWORK).await {
        Ok(list) => {
            rows.push(quota_row(
                "azure.quota",
                &path,
                &list,
                &["StandardSkuPublicIpAddresses", "PublicIPAddresses"],
                1,
                "public IP addresses (the egress IP)",
                &quota_fix(sub, loc, "public IP addresses"),
            ));
            if inputs.network_created {
                rows.push(quota_row(
                    "azure.quota",
                    &path,
                    &list,
                    &["VirtualNetworks"],
                    1,
                    "virtual networks",
                    &quota_fix(sub, loc, "virtual networks"),
                ));
            }
        }
        Err(e) => rows.push(row_err(
            "azure.quota",
            &path,
            "network usages",
            &e,
            "grant Reader on the subscription",
        )),
    }
    // Private link services count in the management subscription, where the PLS goes
    // (made by hcp-workflow or by HyperShift).
    if let Some(pl) = &inputs.private_link {
        let ploc = pls_location.unwrap_or_else(|| loc.clone());
        let msub = &pl.mgmt_subscription;
        let ppath =
            format!("/subscriptions/{msub}/providers/Microsoft.Network/locations/{ploc}/usages");
        match clients.arm(&pl.mgmt_azure).await {
            Ok(marm) => match marm.list_values(&ppath, API_NETWORK).await {
                Ok(list) => rows.push(quota_row(
                    "azure.quota",
                    &ppath,
                    &list,
                    &["PrivateLinkServices"],
                    1,
                    "private link services",
                    &quota_fix(msub, &ploc, "private link services"),
                )),
                Err(e) => rows.push(row_err(
                    "azure.quota",
                    &ppath,
                    "network usages",
                    &e,
                    "grant Reader on the subscription",
                )),
            },
            Err(e) => rows.push(no_client("azure.quota", &ppath, &e)),
        }
    }
    rows
}

fn capability(sku: &Value, name: &str) -> Option<String> {
    sku.get("capabilities")?
        .as_array()?
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))?
        .get("value")?
        .as_str()
        .map(str::to_string)
}

fn strs(v: Option<&Value>) -> Vec<String> {
    crate::steps::permissions::strings(v)
}

/// VM sizes offered (skus) and vCPU quota (compute usages), one row per pool and family.
async fn compute(clients: &Clients, inputs: &Inputs) -> Vec<CheckResult> {
    let sub = &inputs.subscription;
    let loc = &inputs.location;
    let skus_path = format!("/subscriptions/{sub}/providers/Microsoft.Compute/skus");
    let arm = match clients.arm(&inputs.azure).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.vm-size", &skus_path, &e)],
    };
    let filter = format!("location eq '{loc}'");
    let query = [("$filter", filter.as_str())];
    let usages_path =
        format!("/subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/usages");
    let (skus, usages) = futures::join!(
        arm.list_values_with(&skus_path, API_SKUS, &query),
        arm.list_values(&usages_path, API_COMPUTE_USAGES)
    );
    let skus = match skus {
        Ok(s) => s,
        Err(e) => {
            return vec![row_err(
                "azure.vm-size",
                &skus_path,
                "resource SKUs",
                &e,
                "grant Reader on the subscription",
            )];
        }
    };
    let mut rows = Vec::new();
    // family → (vCPUs needed, pools)
    let mut need: BTreeMap<String, (i64, Vec<String>)> = BTreeMap::new();
    let mut total = 0i64;
    for p in &inputs.pools {
        let target = format!(
            "{skus_path} [{} in {loc}{}] for pool {}",
            p.vm_size,
            p.zone
                .as_deref()
                .map(|z| format!(" zone {z}"))
                .unwrap_or_default(),
            p.name
        );
        let sku = skus.iter().find(|s| {
            s.get("resourceType").and_then(Value::as_str) == Some("virtualMachines")
                && s.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.eq_ignore_ascii_case(&p.vm_size))
        });
        let Some(sku) = sku else {
            rows.push(CheckResult::fail(
                "azure.vm-size",
                target,
                format!("{} is not offered in {loc}", p.vm_size),
                format!("pick a size offered there: az vm list-skus --location {loc} --resource-type virtualMachines --output table"),
            ));
            continue;
        };
        // restrictions[]: type Location (values = locations) or Zone (restrictionInfo.zones).
        let mut blocked = None;
        for r in sku
            .get("restrictions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let reason = r
                .get("reasonCode")
                .and_then(Value::as_str)
                .unwrap_or("restricted");
            match r.get("type").and_then(Value::as_str) {
                Some("Location") => blocked = Some(format!("restricted in {loc} ({reason})")),
                Some("Zone") => {
                    let zones = strs(r.pointer("/restrictionInfo/zones"));
                    match &p.zone {
                        Some(z) if zones.iter().any(|x| x == z) => {
                            blocked = Some(format!("restricted in zone {z} of {loc} ({reason})"))
                        }
                        None if !zones.is_empty() => rows.push(CheckResult::warn(
                            "azure.vm-size",
                            target.clone(),
                            format!(
                                "restricted in zones {} of {loc} ({reason}); the pool pins no zone",
                                zones.join(", ")
                            ),
                            None,
                        )),
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if blocked.is_none()
            && let Some(z) = &p.zone
        {
            let offered: Vec<String> = sku
                .get("locationInfo")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|li| {
                    li.get("location")
                        .and_then(Value::as_str)
                        .is_some_and(|l| l.eq_ignore_ascii_case(loc))
                })
                .flat_map(|li| strs(li.get("zones")))
                .collect();
            if !offered.iter().any(|o| o == z) {
                blocked = Some(format!(
                    "not offered in zone {z} of {loc} (zones: {})",
                    offered.join(", ")
                ));
            }
        }
        match blocked {
            Some(why) => rows.push(CheckResult::fail(
                "azure.vm-size",
                target,
                format!("{}: {why}", p.vm_size),
                format!("pick another size or zone (az vm list-skus --location {loc} --size {} --output table), or ask Azure support to lift the restriction", p.vm_size),
            )),
            None => rows.push(CheckResult::pass(
                "azure.vm-size",
                target,
                format!("{} offered without restrictions", p.vm_size),
            )),
        }
        let vcpus: i64 = capability(sku, "vCPUs")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let family = sku
            .get("family")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let all = vcpus * p.replicas.max(0);
        match &p.replaces {
            // A rolling replacement: the new size's family needs every new machine (none
            // of the old ones counts for it unless they share it), the region only the
            // surge's peak.
            Some((old_size, old_n)) => {
                let old_sku = skus.iter().find(|s| {
                    s.get("resourceType").and_then(Value::as_str) == Some("virtualMachines")
                        && s.get("name")
                            .and_then(Value::as_str)
                            .is_some_and(|n| n.eq_ignore_ascii_case(old_size))
                });
                let old_vcpus: i64 = old_sku
                    .and_then(|s| capability(s, "vCPUs"))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let same_family = old_sku
                    .and_then(|s| s.get("family"))
                    .and_then(Value::as_str)
                    == Some(family.as_str());
                let peak = super::rolling_peak(
                    p.replicas.max(0).min(*old_n),
                    old_vcpus,
                    vcpus,
                    super::DEFAULT_MAX_SURGE,
                ) + vcpus * (p.replicas - old_n).max(0);
                let e = need.entry(family).or_default();
                e.0 += if same_family { peak } else { all };
                e.1.push(format!(
                    "{}×{} ({vcpus} vCPUs) replacing {old_n}×{old_size} one at a time",
                    p.replicas, p.vm_size
                ));
                total += peak;
            }
            None => {
                let e = need.entry(family).or_default();
                e.0 += all;
                e.1.push(format!("{}×{} ({vcpus} vCPUs)", p.replicas, p.vm_size));
                total += all;
            }
        }
    }
    let upath = format!("/subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/usages");
    match usages {
        Ok(list) => {
            for (family, (n, pools)) in &need {
                rows.push(quota_row(
                    "azure.quota",
                    &upath,
                    &list,
                    &[family.as_str()],
                    *n,
                    &format!("{family} vCPUs for {}", pools.join(" + ")),
                    &quota_fix(sub, loc, &format!("{family} vCPUs")),
                ));
            }
            if total > 0 {
                rows.push(quota_row(
                    "azure.quota",
                    &upath,
                    &list,
                    &["cores"],
                    total,
                    "total regional vCPUs",
                    &quota_fix(sub, loc, "regional vCPUs"),
                ));
            }
        }
        Err(e) => rows.push(row_err(
            "azure.quota",
            &upath,
            "compute usages",
            &e,
            "grant Reader on the subscription",
        )),
    }
    rows
}

// --- resource groups of the guest subscription ------------------------------------------

/// The guest subscription's resource groups, listed once (`ResourceGroups_List`,
/// resources.json 2021-04-01, following `nextLink`) for every check that needs to know
/// whether a group exists and what it is tagged: the permission checks of the groups a
/// create makes (whose permissions API answers only for an existing group) and the
/// persistent group's. A failed list answers nothing, and each check then reads for itself.
pub(crate) struct GroupList {
    /// `/subscriptions/{s}/resourcegroups/`, lower case.
    prefix: String,
    cell: tokio::sync::OnceCell<Option<Vec<Value>>>,
}

impl GroupList {
    fn new(subscription: &str) -> Self {
        Self {
            prefix: format!("/subscriptions/{subscription}/resourcegroups/").to_ascii_lowercase(),
            cell: tokio::sync::OnceCell::new(),
        }
    }

    /// `scope` is a resource group of this subscription (not a resource in one).
    fn lists(&self, scope: &str) -> bool {
        scope
            .to_ascii_lowercase()
            .strip_prefix(&self.prefix)
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
    }

    /// `Some(Some(group))`, `Some(None)` (listed, absent), or `None`: not one of this
    /// subscription's groups, or the list failed.
    async fn find(&self, arm: &ArmClient, group_id: &str) -> Option<Option<Value>> {
        if !self.lists(group_id) {
            return None;
        }
        let path = self.prefix.trim_end_matches('/').to_string();
        let all = self
            .cell
            .get_or_init(|| async {
                match arm.list_values(&path, API_RESOURCES).await {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::debug!(error = %e, "listing the resource groups failed; each check reads its own");
                        None
                    }
                }
            })
            .await
            .as_ref()?;
        let name = group_id.rsplit('/').next().unwrap_or_default();
        Some(
            all.iter()
                .find(|g| {
                    g.get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| n.eq_ignore_ascii_case(name))
                })
                .cloned(),
        )
    }
}

/// `Permissions_ListForResourceGroup` answers, read once per scope for every check that
/// needs one: the scope's permission check, and the private-link check, for which the
/// answer (or its `ResourceGroupNotFound`) says whether the load balancers' group exists.
#[derive(Default)]
pub(crate) struct PermissionReads {
    /// Every scope a permission check asks, lower case (known before any check runs).
    scopes: BTreeMap<String, tokio::sync::OnceCell<Result<Vec<Value>, ArmError>>>,
}

impl PermissionReads {
    fn new<'a>(scopes: impl Iterator<Item = &'a String>) -> Self {
        Self {
            scopes: scopes
                .map(|s| (s.to_ascii_lowercase(), Default::default()))
                .collect(),
        }
    }

    /// The permissions at `scope`, read once; `None` when no permission check asks it.
    async fn read(&self, arm: &ArmClient, scope: &str) -> Option<Result<Vec<Value>, ArmError>> {
        let cell = self.scopes.get(&scope.to_ascii_lowercase())?;
        let path = format!("{scope}/providers/Microsoft.Authorization/permissions");
        Some(
            cell.get_or_init(|| arm.list_values(&path, API_PERMISSIONS))
                .await
                .clone(),
        )
    }
}

// --- DNS zone, storage account name, persistent group -----------------------------------

async fn dns_zone(clients: &Clients, inputs: &Inputs) -> Vec<CheckResult> {
    let domain = inputs.base_domain.trim_end_matches('.');
    let sub = &inputs.subscription;
    let target = match &inputs.dns_zone_resource_group {
        Some(rg) => format!(
            "/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/dnszones/{domain}"
        ),
        None => format!("/subscriptions/{sub}/providers/Microsoft.Network/dnszones [{domain}]"),
    };
    let arm = match clients.arm(&inputs.azure).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.dns-zone", &target, &e)],
    };
    // The same lookup as the `azure.public-dns-zone.find` step.
    let found = crate::steps::dns::find_public_zone(
        &arm,
        sub,
        inputs.dns_zone_resource_group.as_deref(),
        domain,
    )
    .await;
    let rg = inputs
        .dns_zone_resource_group
        .clone()
        .unwrap_or_else(|| "<group>".into());
    match found {
        Ok(Some(id)) => vec![CheckResult::pass(
            "azure.dns-zone",
            id,
            "public zone of baseDomain exists",
        )],
        Ok(None) => vec![CheckResult::fail(
            "azure.dns-zone",
            target,
            format!(
                "no public Azure DNS zone named {domain:?} in subscription {sub}: HyperShift needs it (the guest's ingress writes *.apps.<name>.{domain} there)"
            ),
            format!(
                "az network dns zone create --subscription {sub} -g {rg} -n {domain} (then delegate it from the parent domain), or fix baseDomain / dnsZoneResourceGroup"
            ),
        )],
        Err(e) => vec![row_err(
            "azure.dns-zone",
            &target,
            "DNS zones",
            &e,
            "grant Reader on the zone's group",
        )],
    }
}

async fn storage_account(clients: &Clients, inputs: &Inputs, id: &str) -> Vec<CheckResult> {
    let name = id.rsplit('/').next().unwrap_or(id);
    let sub = &inputs.subscription;
    let arm = match clients.arm(&inputs.azure).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.storage-account", id, &e)],
    };
    // StorageAccounts_CheckNameAvailability (read-only POST; storage.json 2024-01-01):
    // `{"nameAvailable": bool, "reason": "AlreadyExists"|"AccountNameInvalid", "message"}`.
    let path = format!("/subscriptions/{sub}/providers/Microsoft.Storage/checkNameAvailability");
    let body = json!({"name": name, "type": "Microsoft.Storage/storageAccounts"});
    let answer = match arm.post(&path, API_STORAGE, Some(&body)).await {
        Ok(v) => v.unwrap_or(Value::Null),
        Err(e) => {
            return vec![row_err(
                "azure.storage-account",
                id,
                "checkNameAvailability",
                &e,
                "grant Reader on the subscription",
            )];
        }
    };
    if answer.get("nameAvailable").and_then(Value::as_bool) == Some(true) {
        return vec![CheckResult::pass(
            "azure.storage-account",
            id,
            format!("name {name} is available"),
        )];
    }
    let reason = answer
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let fix =
        "set oidcIssuer.create.storageAccount to another globally unique name (3–24 of a-z0-9)"
            .to_string();
    if reason == "AccountNameInvalid" {
        return vec![CheckResult::fail(
            "azure.storage-account",
            id,
            format!(
                "name {name} is invalid: {}",
                answer
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            ),
            fix,
        )];
    }
    // Taken: by us (the account in the persistent group, with our tags) is fine.
    match arm.get_value(id, API_STORAGE).await {
        Ok(Some(v)) if inputs.owner.owns(v.get("tags")) => vec![CheckResult::pass(
            "azure.storage-account",
            id,
            format!("name {name} is taken by this cluster's own account (it is adopted)"),
        )],
        Ok(Some(_)) => vec![CheckResult::fail(
            "azure.storage-account",
            id,
            format!(
                "{name} exists in the persistent group but is not this cluster's (no hcp-workflow tags of {})",
                inputs.owner.cluster
            ),
            fix,
        )],
        Ok(None) => vec![CheckResult::fail(
            "azure.storage-account",
            id,
            format!(
                "name {name} is taken by another account ({reason}); storage account names are global"
            ),
            fix,
        )],
        Err(e) => vec![row_err(
            "azure.storage-account",
            id,
            "storage account",
            &e,
            &fix,
        )],
    }
}

async fn persistent_group(
    clients: &Clients,
    inputs: &Inputs,
    groups: &GroupList,
) -> Vec<CheckResult> {
    let id = &inputs.persistent_rg;
    let arm = match clients.arm(&inputs.azure).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.persistent-group", id, &e)],
    };
    // From the subscription's group list when it answered, else ResourceGroups_Get
    // (resources.json 2021-04-01).
    let found = match groups.find(&arm, id).await {
        Some(found) => Ok(found),
        None => arm.get_value(id, API_RESOURCES).await,
    };
    match found {
        Ok(None) => vec![CheckResult::pass(
            "azure.persistent-group",
            id,
            "absent: the run creates it (marked shared)",
        )],
        Ok(Some(v)) => {
            let name = id.rsplit('/').next().unwrap_or(id);
            match crate::steps::shared_group::compatible(
                name,
                v.get("tags"),
                inputs.owner.owns(v.get("tags")),
            ) {
                Ok(what) => vec![CheckResult::pass("azure.persistent-group", id, what)],
                Err(why) => vec![CheckResult::fail(
                    "azure.persistent-group",
                    id,
                    why,
                    "set persistentResourceGroup to a group of your own or a shared one (e.g. os4-common)",
                )],
            }
        }
        Err(e) => vec![row_err(
            "azure.persistent-group",
            id,
            "resource group",
            &e,
            "grant Reader on the group",
        )],
    }
}

// --- private link ----------------------------------------------------------------------

async fn private_link(
    clients: &Clients,
    inputs: &Inputs,
    perms: &PermissionReads,
) -> Vec<CheckResult> {
    let Some(pl) = &inputs.private_link else {
        return Vec::new();
    };
    let marm = match clients.arm(&pl.mgmt_azure).await {
        Ok(a) => a,
        Err(e) => return vec![no_client("azure.private-link", &pl.vnet_id, &e)],
    };
    let (vnet, group, pls) = futures::join!(
        marm.get_value(&pl.vnet_id, API_NETWORK),
        async {
            // The permission check of this group reads its permissions, which answer only
            // for an existing group: that read tells whether it exists.
            match perms.read(&marm, &pl.lb_rg).await {
                Some(Ok(_)) => Ok(Some(Value::Null)),
                Some(Err(e)) if e.status == 404 && e.code == "ResourceGroupNotFound" => Ok(None),
                _ => marm.get_value(&pl.lb_rg, API_RESOURCES).await,
            }
        },
        async {
            if pl.managed_by == "hypershift" {
                Ok(None)
            } else {
                marm.get_value(&pl.pls_id, API_NETWORK).await
            }
        }
    );
    let mut rows = Vec::new();
    match group {
        Ok(Some(_)) => rows.push(CheckResult::pass("azure.mgmt-lb-group", &pl.lb_rg, "exists")),
        Ok(None) => rows.push(CheckResult::fail(
            "azure.mgmt-lb-group",
            &pl.lb_rg,
            "the management cluster's load-balancer resource group does not exist",
            "set managementCluster.loadBalancerResourceGroup to the group of the management cluster's internal load balancers (on AKS: the node resource group)",
        )),
        Err(e) => rows.push(row_err("azure.mgmt-lb-group", &pl.lb_rg, "resource group", &e, "grant Reader on it")),
    }
    let vnet = match vnet {
        Ok(Some(v)) => {
            rows.push(CheckResult::pass("azure.mgmt-vnet", &pl.vnet_id, "exists"));
            Some(v)
        }
        Ok(None) => {
            rows.push(CheckResult::fail(
                "azure.mgmt-vnet",
                &pl.vnet_id,
                "the management VNet does not exist",
                "set managementCluster.vnetId to the VNet of the management cluster's nodes",
            ));
            None
        }
        Err(e) => {
            rows.push(row_err(
                "azure.mgmt-vnet",
                &pl.vnet_id,
                "VNet",
                &e,
                "grant Reader on it",
            ));
            None
        }
    };
    if let Some(vnet) = &vnet {
        rows.push(nat_subnet(&marm, pl, vnet).await);
        rows.push(pls_region(&pl.vnet_id, vnet, &inputs.location));
    }
    match pls {
        Ok(Some(p)) => {
            let alias = p
                .pointer("/properties/alias")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // PrivateLinkServices_CheckPrivateLinkServiceVisibility (read-only POST,
            // privateLinkService.json 2023-11-01), asked as the guest subscription.
            let path = format!(
                "/subscriptions/{}/providers/Microsoft.Network/locations/{}/checkPrivateLinkServiceVisibility",
                inputs.subscription,
                p.get("location")
                    .and_then(Value::as_str)
                    .unwrap_or(&inputs.location)
            );
            let garm = clients.arm(&inputs.azure).await;
            let ans = match garm {
                Ok(g) => {
                    g.post(
                        &path,
                        API_NETWORK,
                        Some(&json!({"privateLinkServiceAlias": alias})),
                    )
                    .await
                }
                Err(e) => Err(ArmError::local("NoClient", e.message, None)),
            };
            match ans {
                Ok(Some(v)) if v.get("visible").and_then(Value::as_bool) == Some(true) => rows.push(CheckResult::pass(
                    "azure.pls-visibility",
                    &pl.pls_id,
                    format!("visible to subscription {} (alias {alias})", inputs.subscription),
                )),
                Ok(_) => rows.push(CheckResult::fail(
                    "azure.pls-visibility",
                    &pl.pls_id,
                    format!("not visible to subscription {}", inputs.subscription),
                    format!("add {} to the PLS's visibility and autoApproval (az network private-link-service update --ids {} --visibility {} --auto-approval {})", inputs.subscription, pl.pls_id, inputs.subscription, inputs.subscription),
                )),
                Err(e) => rows.push(row_err("azure.pls-visibility", &pl.pls_id, "checkPrivateLinkServiceVisibility", &e, "grant Reader on the guest subscription")),
            }
        }
        Ok(None) => rows.push(CheckResult::pass(
            "azure.pls-visibility",
            &pl.pls_id,
            if pl.managed_by == "hypershift" {
                "made by HyperShift's controllers, which set its visibility".to_string()
            } else {
                format!(
                    "not created yet: the run sets visibility and autoApproval to {}",
                    inputs.subscription
                )
            },
        )),
        Err(e) => rows.push(row_err(
            "azure.pls-visibility",
            &pl.pls_id,
            "PLS",
            &e,
            "grant Reader on it",
        )),
    }
    rows
}

/// The Private Link Service is created in the cluster's `location` (as
/// HyperShift's does: `azurePLS.Spec.Location = azurePlatform.Location`,
/// `control-plane-operator/controllers/azureprivatelinkservice/observer.go`), in front of
/// the management cluster's internal load balancer, which lives in the management VNet's
/// region. Azure refuses a PLS whose frontend is in another region (`InvalidResourceReference`:
/// "… was not found. Please make sure that the referenced resource exists, and that both
/// resources are in the same region."), and would only say so after the control plane
/// exists. (The NAT subnet's VNet is checked against `managementCluster.vnetId` when the file
/// is read.)
fn pls_region(vnet_id: &str, vnet: &Value, location: &str) -> CheckResult {
    let norm = |s: &str| s.to_ascii_lowercase().replace(' ', "");
    let Some(mloc) = vnet.get("location").and_then(Value::as_str) else {
        return CheckResult::warn(
            "azure.pls-region",
            vnet_id,
            "the management VNet's answer has no location: the Private Link Service's region could not be checked",
            Some("check that the management cluster runs in the cluster's location".to_string()),
        );
    };
    if norm(mloc) == norm(location) {
        CheckResult::pass(
            "azure.pls-region",
            vnet_id,
            format!(
                "the management cluster's load balancer and the Private Link Service are both in {location}"
            ),
        )
    } else {
        CheckResult::fail(
            "azure.pls-region",
            vnet_id,
            format!(
                "the management VNet (and its internal load balancer) is in {mloc}, but the cluster's Private Link Service would be created in location {location}: Azure refuses a Private Link Service whose load balancer is in another region (InvalidResourceReference)"
            ),
            format!(
                "set location to {mloc} (the guest VNet may still peer elsewhere), or use a management cluster in {location}"
            ),
        )
    }
}

async fn nat_subnet(arm: &ArmClient, pl: &super::PrivateLinkInputs, vnet: &Value) -> CheckResult {
    use ipnet::Ipv4Net;
    let (id, cidr) = match &pl.nat_subnet {
        NatSubnet::Existing(id) => (id.clone(), None),
        NatSubnet::Create { id, cidr } => (id.clone(), Some(cidr.clone())),
    };
    // The VNet's body lists its subnets in full (as `Subnets_Get` answers them): a subnet of
    // it needs no read of its own.
    let (vnet_id, name) = id.rsplit_once("/subnets/").unwrap_or_default();
    let existing = if vnet_id.eq_ignore_ascii_case(&pl.vnet_id) {
        Ok(crate::azure::privatelink::subnet_in(vnet, name).cloned())
    } else {
        arm.get_value(&id, API_NETWORK).await
    };
    match (existing, cidr) {
        (Err(e), _) => row_err(
            "azure.nat-subnet",
            &id,
            "subnet",
            &e,
            "grant Reader on the VNet",
        ),
        (Ok(Some(s)), _) => {
            let policies = s
                .pointer("/properties/privateLinkServiceNetworkPolicies")
                .and_then(Value::as_str)
                .unwrap_or("Enabled");
            if policies.eq_ignore_ascii_case("Disabled") {
                CheckResult::pass(
                    "azure.nat-subnet",
                    id,
                    "exists with privateLinkServiceNetworkPolicies Disabled",
                )
            } else {
                CheckResult::fail(
                    "azure.nat-subnet",
                    &id,
                    "privateLinkServiceNetworkPolicies is Enabled: a PLS cannot use it",
                    format!(
                        "az network vnet subnet update --ids {id} --private-link-service-network-policies Disabled"
                    ),
                )
            }
        }
        (Ok(None), None) => CheckResult::fail(
            "azure.nat-subnet",
            &id,
            "managementCluster.natSubnet names a subnet that does not exist",
            "create it, or set managementCluster.natSubnet to auto or a CIDR",
        ),
        (Ok(None), Some(None)) => match crate::azure::privatelink::free_slash24(vnet) {
            Some(c) => CheckResult::pass(
                "azure.nat-subnet",
                id,
                format!("auto: {c} is free in the management VNet"),
            ),
            None => CheckResult::fail(
                "azure.nat-subnet",
                &id,
                "auto: no free /24 left in the management VNet's address space",
                "set managementCluster.natSubnet to an existing subnet, or add address space to the VNet",
            ),
        },
        (Ok(None), Some(Some(c))) => {
            let Ok(net) = c.parse::<Ipv4Net>() else {
                return CheckResult::fail(
                    "azure.nat-subnet",
                    &id,
                    format!("{c} is not an IPv4 CIDR"),
                    "fix managementCluster.natSubnet",
                );
            };
            let space: Vec<Ipv4Net> =
                strs(vnet.pointer("/properties/addressSpace/addressPrefixes"))
                    .iter()
                    .filter_map(|p| p.parse().ok())
                    .collect();
            let used: Vec<Ipv4Net> = vnet
                .pointer("/properties/subnets")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|s| {
                    let mut v = strs(s.pointer("/properties/addressPrefixes"));
                    v.extend(
                        s.pointer("/properties/addressPrefix")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    );
                    v
                })
                .filter_map(|p| p.parse().ok())
                .collect();
            let overlaps =
                |a: &Ipv4Net, b: &Ipv4Net| a.contains(&b.network()) || b.contains(&a.network());
            if !space.iter().any(|s| s.contains(&net)) {
                CheckResult::fail(
                    "azure.nat-subnet",
                    &id,
                    format!("{c} is outside the VNet's address space"),
                    "pick a CIDR inside it, or natSubnet: auto",
                )
            } else if let Some(u) = used.iter().find(|u| overlaps(u, &net)) {
                CheckResult::fail(
                    "azure.nat-subnet",
                    &id,
                    format!("{c} overlaps subnet range {u}"),
                    "pick a free CIDR, or natSubnet: auto",
                )
            } else {
                CheckResult::pass(
                    "azure.nat-subnet",
                    id,
                    format!("{c} fits the management VNet"),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_read_from_the_payload_only() {
        let enc =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let t = format!(
            "{}.{}.sig",
            enc(&json!({"alg": "RS256"})),
            enc(&json!({"tid": "t1", "oid": "o1", "appid": "a1"}))
        );
        let c = token_claims(&t).unwrap_or_default();
        assert_eq!(c.tenant.as_deref(), Some("t1"));
        assert_eq!(c.object_id.as_deref(), Some("o1"));
        assert_eq!(c.app_id.as_deref(), Some("a1"));
        assert!(token_claims("not-a-jwt").is_none());
    }
}
