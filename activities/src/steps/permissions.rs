//! The Azure RBAC actions each step needs, keyed by the step's action name, next to the
//! actions themselves (issue 13: `preflight` derives what to check from the DAG, never
//! from a hand-kept list of resources).
//!
//! Action strings are Azure's resource provider operations (`az provider operation show
//! --namespace Microsoft.Network`), as `Microsoft.Authorization/permissions` (api-version
//! 2022-04-01, `Permissions_ListForResourceGroup` in
//! `specification/authorization/resource-manager/Microsoft.Authorization/stable/2022-04-01/authorization-RoleDefinitionsCalls.json`)
//! reports them in `actions` / `notActions`.
//!
//! [`needed`] walks a DAG: for every node it looks the node's action up in [`arm_actions`]
//! and takes the *scope* (the resource group the step writes in) from the node's journaled
//! input (`id`, `scope`, `vnet_id`, `zone_id`, or the input of the node a `$ref` points at).
//! A node whose action has no entry is reported by [`unknown_actions`], so a new step
//! without a permission entry fails the unit test that builds every DAG.

use hcp_runtime::SagaDag;
use serde_json::Value;

const RG_READ: &str = "Microsoft.Resources/subscriptions/resourceGroups/read";
const RG_WRITE: &str = "Microsoft.Resources/subscriptions/resourceGroups/write";
const RG_DELETE: &str = "Microsoft.Resources/subscriptions/resourceGroups/delete";
const RG_LIST: &str = "Microsoft.Resources/subscriptions/resourceGroups/resources/read";

/// The ARM actions a step with this action name performs. `None`: the name is unknown
/// here (a bug: every registered action has an entry, even an empty one). An empty slice:
/// the step makes no ARM call (Kubernetes steps, HyperShift waits).
pub fn arm_actions(action: &str) -> Option<&'static [&'static str]> {
    Some(match action {
        "azure.resource-group.ensure" => &[RG_READ, RG_WRITE, RG_LIST, RG_DELETE],
        "azure.resource-group.delete" => &[RG_READ, RG_LIST, RG_DELETE],
        "azure.identity.ensure" => &[
            "Microsoft.ManagedIdentity/userAssignedIdentities/read",
            "Microsoft.ManagedIdentity/userAssignedIdentities/write",
            "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
        ],
        "azure.identity.delete" => &[
            "Microsoft.ManagedIdentity/userAssignedIdentities/read",
            "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
        ],
        "azure.identities.resolve" => &["Microsoft.ManagedIdentity/userAssignedIdentities/read"],
        "azure.federated-credentials.ensure" => &[
            "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/read",
            "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/write",
            "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/delete",
        ],
        "azure.federated-credential.delete" => &[
            "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/read",
            "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/delete",
        ],
        "azure.role-assignment.ensure" => &[
            "Microsoft.Authorization/roleAssignments/read",
            "Microsoft.Authorization/roleAssignments/write",
            "Microsoft.Authorization/roleAssignments/delete",
        ],
        "azure.role-assignment.delete" | "azure.role-assignment.delete-in-dns-zone-group" => &[
            "Microsoft.Authorization/roleAssignments/read",
            "Microsoft.Authorization/roleAssignments/delete",
        ],
        "azure.nsg.ensure" => &[
            "Microsoft.Network/networkSecurityGroups/read",
            "Microsoft.Network/networkSecurityGroups/write",
            "Microsoft.Network/networkSecurityGroups/delete",
        ],
        "azure.nsg.delete" => &[
            "Microsoft.Network/networkSecurityGroups/read",
            "Microsoft.Network/networkSecurityGroups/delete",
        ],
        "azure.vnet.ensure" => &[
            "Microsoft.Network/virtualNetworks/read",
            "Microsoft.Network/virtualNetworks/write",
            "Microsoft.Network/virtualNetworks/delete",
            // The subnet references the NSG.
            "Microsoft.Network/networkSecurityGroups/join/action",
        ],
        "azure.vnet.delete" => &[
            "Microsoft.Network/virtualNetworks/read",
            "Microsoft.Network/virtualNetworks/delete",
        ],
        "azure.subnet.ensure" | "azure.nat-subnet.ensure" => &[
            "Microsoft.Network/virtualNetworks/read",
            "Microsoft.Network/virtualNetworks/subnets/read",
            "Microsoft.Network/virtualNetworks/subnets/write",
            "Microsoft.Network/virtualNetworks/subnets/delete",
        ],
        "azure.subnet.delete" => &[
            "Microsoft.Network/virtualNetworks/subnets/read",
            "Microsoft.Network/virtualNetworks/subnets/delete",
        ],
        "azure.public-ip.ensure" => &[
            "Microsoft.Network/publicIPAddresses/read",
            "Microsoft.Network/publicIPAddresses/write",
            "Microsoft.Network/publicIPAddresses/delete",
        ],
        "azure.public-ip.delete" => &[
            "Microsoft.Network/publicIPAddresses/read",
            "Microsoft.Network/publicIPAddresses/delete",
        ],
        "azure.load-balancer.ensure" => &[
            "Microsoft.Network/loadBalancers/read",
            "Microsoft.Network/loadBalancers/write",
            "Microsoft.Network/loadBalancers/delete",
            // The frontend references the public IP.
            "Microsoft.Network/publicIPAddresses/join/action",
        ],
        "azure.load-balancer.delete" => &[
            "Microsoft.Network/loadBalancers/read",
            "Microsoft.Network/loadBalancers/delete",
        ],
        "azure.private-dns-zone.ensure" => &[
            "Microsoft.Network/privateDnsZones/read",
            "Microsoft.Network/privateDnsZones/write",
            "Microsoft.Network/privateDnsZones/delete",
        ],
        "azure.private-dns-zone.delete" => &[
            "Microsoft.Network/privateDnsZones/read",
            "Microsoft.Network/privateDnsZones/delete",
        ],
        "azure.private-dns-link.ensure" => &[
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks/read",
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks/write",
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks/delete",
        ],
        "azure.private-dns-link.delete" => &[
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks/read",
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks/delete",
        ],
        "azure.private-dns-a-record.ensure" => &[
            "Microsoft.Network/privateDnsZones/A/read",
            "Microsoft.Network/privateDnsZones/A/write",
            "Microsoft.Network/privateDnsZones/A/delete",
        ],
        "azure.private-dns-a-record.delete" => &[
            "Microsoft.Network/privateDnsZones/A/read",
            "Microsoft.Network/privateDnsZones/A/delete",
        ],
        "azure.storage-account.ensure" => &[
            "Microsoft.Storage/storageAccounts/read",
            "Microsoft.Storage/storageAccounts/write",
            "Microsoft.Storage/storageAccounts/delete",
        ],
        "azure.storage-account.delete" => &[
            "Microsoft.Storage/storageAccounts/read",
            "Microsoft.Storage/storageAccounts/delete",
        ],
        "azure.blob-container.ensure" => &[
            "Microsoft.Storage/storageAccounts/blobServices/containers/read",
            "Microsoft.Storage/storageAccounts/blobServices/containers/write",
            "Microsoft.Storage/storageAccounts/blobServices/containers/delete",
        ],
        "azure.blob-container.delete" => &[
            "Microsoft.Storage/storageAccounts/blobServices/containers/read",
            "Microsoft.Storage/storageAccounts/blobServices/containers/delete",
        ],
        // Shared Key uploads: the account keys.
        "azure.oidc-documents.publish" => &["Microsoft.Storage/storageAccounts/listKeys/action"],
        "azure.private-link-service.ensure" => &[
            "Microsoft.Network/privateLinkServices/read",
            "Microsoft.Network/privateLinkServices/write",
            "Microsoft.Network/privateLinkServices/delete",
            "Microsoft.Network/privateLinkServices/privateEndpointConnections/write",
            "Microsoft.Network/privateLinkServices/privateEndpointConnections/delete",
            "Microsoft.Network/loadBalancers/read",
            "Microsoft.Network/virtualNetworks/subnets/join/action",
        ],
        "azure.private-link-service.delete" => &[
            "Microsoft.Network/privateLinkServices/read",
            "Microsoft.Network/privateLinkServices/delete",
            "Microsoft.Network/privateLinkServices/privateEndpointConnections/write",
            "Microsoft.Network/privateLinkServices/privateEndpointConnections/delete",
        ],
        "azure.pls.visibility" => &[
            "Microsoft.Network/privateLinkServices/read",
            "Microsoft.Network/privateLinkServices/write",
        ],
        "azure.pls.connections.prune" => &[
            "Microsoft.Network/privateLinkServices/read",
            "Microsoft.Network/privateLinkServices/privateEndpointConnections/read",
            "Microsoft.Network/privateLinkServices/privateEndpointConnections/write",
            "Microsoft.Network/privateLinkServices/privateEndpointConnections/delete",
        ],
        "azure.private-endpoint.ensure" => &[
            "Microsoft.Network/privateEndpoints/read",
            "Microsoft.Network/privateEndpoints/write",
            "Microsoft.Network/privateEndpoints/delete",
            "Microsoft.Network/virtualNetworks/subnets/join/action",
        ],
        "azure.private-endpoint.delete" => &[
            "Microsoft.Network/privateEndpoints/read",
            "Microsoft.Network/privateEndpoints/delete",
        ],
        "azure.public-dns-zone.find" => &["Microsoft.Network/dnszones/read"],
        "azure.public-dns-a-record.ensure" => &[
            "Microsoft.Network/dnszones/A/read",
            "Microsoft.Network/dnszones/A/write",
            "Microsoft.Network/dnszones/A/delete",
        ],
        "azure.public-dns-a-record.delete" => &[
            "Microsoft.Network/dnszones/A/read",
            "Microsoft.Network/dnszones/A/delete",
        ],
        "azure.key-vault.ensure" => &[
            "Microsoft.KeyVault/vaults/read",
            "Microsoft.KeyVault/vaults/write",
            "Microsoft.KeyVault/vaults/delete",
            "Microsoft.KeyVault/checkNameAvailability/read",
            "Microsoft.KeyVault/locations/deletedVaults/read",
            "Microsoft.KeyVault/locations/deletedVaults/purge/action",
        ],
        "azure.key-vault.delete" => &[
            "Microsoft.KeyVault/vaults/read",
            "Microsoft.KeyVault/vaults/delete",
            "Microsoft.KeyVault/locations/deletedVaults/read",
            "Microsoft.KeyVault/locations/deletedVaults/purge/action",
        ],
        // Microsoft Graph (the application permission Application.ReadWrite.OwnedBy) and
        // Key Vault's data plane (data actions of a Key Vault role on the vault): no ARM
        // action of their own.
        "graph.application.ensure"
        | "graph.service-principal.ensure"
        | "graph.application.bind-certificate"
        | "key-vault.certificate.ensure"
        | "key-vault.credentials-secret.ensure"
        | "graph.application.delete"
        | "key-vault.certificate.delete"
        | "key-vault.secret.delete" => &[],
        // Kubernetes steps and HyperShift waits make no ARM call of their own
        // (SelfSubjectAccessReview covers them).
        "k8s.issuer-key.ensure"
        | "k8s.cluster-secrets.ensure"
        | "k8s.hosted-cluster.apply"
        | "k8s.condition.wait"
        | "k8s.rollout.wait"
        | "k8s.node-pool.apply"
        | "k8s.object.delete"
        | "k8s.node-pool.update"
        | "k8s.node-pool.release"
        | "k8s.hosted-cluster.release"
        | "k8s.hosted-cluster.allowed-subscriptions"
        | "hypershift.private-link-service.wait"
        | "hypershift.private-endpoint.wait"
        | "hypershift.private-link.release"
        | "hypershift.private-link.verify-gone" => &[],
        _ => return None,
    })
}

/// One needed permission: an action at a scope, and the steps that need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    /// The resource group the step writes in (`/subscriptions/{s}/resourceGroups/{g}`),
    /// or the subscription (`/subscriptions/{s}`) when the step's scope is the
    /// subscription.
    pub scope: String,
    /// The ARM action.
    pub action: &'static str,
    /// The nodes needing it.
    pub nodes: Vec<String>,
}

/// `/subscriptions/{s}/resourceGroups/{g}` (or `/subscriptions/{s}`) of an ARM id.
pub fn scope_of(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('/').collect();
    match parts.as_slice() {
        ["", s, sub, g, rg, ..]
            if s.eq_ignore_ascii_case("subscriptions")
                && g.eq_ignore_ascii_case("resourceGroups")
                && !rg.is_empty() =>
        {
            Some(format!("/subscriptions/{sub}/resourceGroups/{rg}"))
        }
        ["", s, sub, ..] if s.eq_ignore_ascii_case("subscriptions") && !sub.is_empty() => {
            Some(format!("/subscriptions/{sub}"))
        }
        _ => None,
    }
}

fn str_field<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The ARM id a node's input targets: `id`, `scope`, `vnet_id`, `zone_id`, `account_id`,
/// the `identity` or `zone` a `$ref` names (that node's target), or `subscription`.
fn target_of(dag: &SagaDag, input: &Value) -> Option<String> {
    for k in ["id", "scope", "vnet_id", "zone_id", "account_id"] {
        if let Some(s) = str_field(input, k) {
            return Some(s.to_string());
        }
    }
    if let Some(s) = input.pointer("/pls/ours/id").and_then(Value::as_str) {
        return Some(s.to_string());
    }
    for via in ["/identity/$ref", "/zone/$ref"] {
        if let Some(node) = input.pointer(via).and_then(Value::as_str)
            && let Some(n) = dag.node(node)
        {
            return target_of(dag, &n.input);
        }
    }
    if let Some(rg) = str_field(input, "resource_group")
        && let Some(sub) = str_field(input, "subscription")
    {
        return Some(format!("/subscriptions/{sub}/resourceGroups/{rg}"));
    }
    str_field(input, "subscription").map(|s| format!("/subscriptions/{s}"))
}

/// Every permission the DAG's steps need, grouped by (scope, action), in DAG order.
/// Nodes whose scope is known only at run time (the public DNS zone's group when
/// `dnsZoneResourceGroup` is not set) are left out.
pub fn needed(dag: &SagaDag) -> Vec<Needed> {
    let mut out: Vec<Needed> = Vec::new();
    for n in &dag.nodes {
        let Some(actions) = arm_actions(&n.action) else {
            continue;
        };
        if actions.is_empty() {
            continue;
        }
        let Some(scope) = target_of(dag, &n.input).and_then(|id| scope_of(&id)) else {
            continue;
        };
        for a in actions {
            match out
                .iter_mut()
                .find(|x| x.action == *a && x.scope.eq_ignore_ascii_case(&scope))
            {
                Some(x) => x.nodes.push(n.name.clone()),
                None => out.push(Needed {
                    scope: scope.clone(),
                    action: a,
                    nodes: vec![n.name.clone()],
                }),
            }
        }
    }
    out
}

/// Action names in `dag` that [`arm_actions`] does not know.
pub fn unknown_actions(dag: &SagaDag) -> Vec<String> {
    let mut v: Vec<String> = dag
        .nodes
        .iter()
        .filter(|n| arm_actions(&n.action).is_none())
        .map(|n| n.action.clone())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether an Azure action pattern (`*`, `Microsoft.Network/*`, `*/read`) matches an
/// action, case-insensitively (RBAC's wildcard: `*` matches any run of characters).
pub fn pattern_matches(pattern: &str, action: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let a: Vec<char> = action.to_ascii_lowercase().chars().collect();
    // Iterative glob with backtracking on the last `*`.
    let (mut pi, mut ai) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ai < a.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ai;
            pi += 1;
        } else if pi < p.len() && p[pi] == a[ai] {
            pi += 1;
            ai += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ai = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Whether a `Microsoft.Authorization/permissions` list allows `action`: some entry has a
/// matching `actions` pattern and no matching `notActions` pattern (the effective
/// permission is the union of each entry's actions minus its own notActions).
pub fn allowed(permissions: &[Value], action: &str) -> bool {
    let list = |p: &Value, k: &str| strings(p.get(k));
    permissions.iter().any(|p| {
        list(p, "actions")
            .iter()
            .any(|x| pattern_matches(x, action))
            && !list(p, "notActions")
                .iter()
                .any(|x| pattern_matches(x, action))
    })
}

/// The strings of a JSON array (none when it is absent or not an array).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wildcards_match_like_rbac() {
        assert!(pattern_matches(
            "*",
            "Microsoft.Network/virtualNetworks/write"
        ));
        assert!(pattern_matches(
            "microsoft.network/*",
            "Microsoft.Network/virtualNetworks/write"
        ));
        assert!(pattern_matches(
            "*/read",
            "Microsoft.Network/virtualNetworks/read"
        ));
        assert!(!pattern_matches(
            "*/read",
            "Microsoft.Network/virtualNetworks/write"
        ));
        assert!(pattern_matches(
            "Microsoft.Network/*/write",
            "Microsoft.Network/virtualNetworks/subnets/write"
        ));
        assert!(!pattern_matches(
            "Microsoft.Storage/*",
            "Microsoft.Network/x/read"
        ));
    }

    #[test]
    fn not_actions_subtract_within_their_entry_only() {
        let reader = json!({"actions": ["*/read"], "notActions": []});
        let contributor = json!({"actions": ["*"], "notActions": ["Microsoft.Authorization/*/Write", "Microsoft.Authorization/*/Delete"]});
        let perms = vec![contributor.clone()];
        assert!(allowed(&perms, "Microsoft.Network/virtualNetworks/write"));
        assert!(!allowed(
            &perms,
            "Microsoft.Authorization/roleAssignments/write"
        ));
        assert!(allowed(
            &perms,
            "Microsoft.Authorization/roleAssignments/read"
        ));
        let uaa = json!({"actions": ["Microsoft.Authorization/*"], "notActions": []});
        assert!(allowed(
            &[contributor, uaa, reader],
            "Microsoft.Authorization/roleAssignments/write"
        ));
        assert!(!allowed(&[], "Microsoft.Network/virtualNetworks/read"));
    }

    #[test]
    fn scopes_are_resource_groups_or_subscriptions() {
        assert_eq!(
            scope_of("/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/x")
                .as_deref(),
            Some("/subscriptions/s/resourceGroups/g")
        );
        assert_eq!(
            scope_of("/subscriptions/s").as_deref(),
            Some("/subscriptions/s")
        );
        assert_eq!(scope_of("nope"), None);
    }
}
