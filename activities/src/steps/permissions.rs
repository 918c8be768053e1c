//! The Azure RBAC actions a DAG's steps need, at the scopes they write in: `preflight`
//! derives what to check from the DAG, never from a hand-kept list of resources. Each step
//! declares its actions itself ([`super::facts::Facts::ARM_ACTIONS`]).
//!
//! Action strings are Azure's resource provider operations (`az provider operation show
//! --namespace Microsoft.Network`), as `Microsoft.Authorization/permissions` (api-version
//! 2022-04-01, `Permissions_ListForResourceGroup` in
//! `specification/authorization/resource-manager/Microsoft.Authorization/stable/2022-04-01/authorization-RoleDefinitionsCalls.json`)
//! reports them in `actions` / `notActions`.
//!
//! [`needed`] walks a DAG: for every node it reads the actions its step declares and takes
//! the *scope* (the resource group the step writes in) from the node's journaled
//! input (`id`, `scope`, `vnet_id`, `zone_id`, or the input of the node a `$ref` points at).
//! A node whose action no registered step has is reported by [`unknown_actions`].

use hcp_runtime::SagaDag;
use serde_json::Value;

/// The ARM actions a step with this action name performs ([`super::facts::Facts::ARM_ACTIONS`]).
/// `None`: no registered step has the name. An empty slice: the step makes no ARM call
/// (Kubernetes steps, HyperShift waits).
pub fn arm_actions(action: &str) -> Option<&'static [&'static str]> {
    super::facts_of(action).map(|f| f.arm_actions)
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
