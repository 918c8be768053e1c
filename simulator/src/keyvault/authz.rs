//! Who may do what on a vault's data plane: Azure RBAC (`enableRbacAuthorization`) or the
//! vault's access policies, plus the scenario's rules for the caller.
//!
//! Built-in roles and their `dataActions` are Azure's ("Azure built-in roles for Security",
//! learn.microsoft.com/azure/role-based-access-control/built-in-roles/security): Key Vault
//! Administrator, Secrets User, Secrets Officer, Certificates Officer, Certificate User and
//! Reader. Role assignments are the ARM store's, at the vault's scope or above (resource
//! group, subscription). Access-policy permissions are `AccessPolicyEntry.permissions`
//! (keyvault.json 2024-11-01). The 403 texts are Key Vault's (an RBAC denial names caller,
//! action, resource and vault with inner code `ForbiddenByRbac`; an access-policy denial
//! "does not have secrets get permission" with `ForbiddenByPolicy`, as Azure answered in
//! hashicorp/terraform-provider-azurerm#26691).

use serde_json::Value;

use super::KvDenied;
use crate::arm::{store as arm_store, types};
use crate::preflight::Scenario;
use crate::state::{ArmResource, State};
use crate::util::{glob, str_at};

/// A data-plane operation, by the RBAC data action it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    SecretGet,
    SecretList,
    SecretSet,
    SecretUpdate,
    SecretDelete,
    SecretPurge,
    SecretRecover,
    CertRead,
    CertList,
    CertCreate,
    CertDelete,
    CertPurge,
    CertRecover,
}

impl Act {
    /// The RBAC data action.
    pub(crate) fn data_action(self) -> &'static str {
        match self {
            Act::SecretGet => "Microsoft.KeyVault/vaults/secrets/getSecret/action",
            Act::SecretList => "Microsoft.KeyVault/vaults/secrets/readMetadata/action",
            Act::SecretSet => "Microsoft.KeyVault/vaults/secrets/setSecret/action",
            Act::SecretUpdate => "Microsoft.KeyVault/vaults/secrets/update/action",
            Act::SecretDelete => "Microsoft.KeyVault/vaults/secrets/delete",
            Act::SecretPurge => "Microsoft.KeyVault/vaults/secrets/purge/action",
            Act::SecretRecover => "Microsoft.KeyVault/vaults/secrets/recover/action",
            Act::CertRead | Act::CertList => "Microsoft.KeyVault/vaults/certificates/read",
            Act::CertCreate => "Microsoft.KeyVault/vaults/certificates/create/action",
            Act::CertDelete => "Microsoft.KeyVault/vaults/certificates/delete",
            Act::CertPurge => "Microsoft.KeyVault/vaults/certificates/purge/action",
            Act::CertRecover => "Microsoft.KeyVault/vaults/certificates/recover/action",
        }
    }

    /// The access-policy permission (`secrets`/`certificates`, verb).
    fn policy_permission(self) -> (&'static str, &'static str) {
        match self {
            Act::SecretGet => ("secrets", "get"),
            Act::SecretList => ("secrets", "list"),
            Act::SecretSet | Act::SecretUpdate => ("secrets", "set"),
            Act::SecretDelete => ("secrets", "delete"),
            Act::SecretPurge => ("secrets", "purge"),
            Act::SecretRecover => ("secrets", "recover"),
            Act::CertRead => ("certificates", "get"),
            Act::CertList => ("certificates", "list"),
            Act::CertCreate => ("certificates", "create"),
            Act::CertDelete => ("certificates", "delete"),
            Act::CertPurge => ("certificates", "purge"),
            Act::CertRecover => ("certificates", "recover"),
        }
    }
}

/// Built-in roles with data actions: (role definition GUID, name, dataActions).
pub(crate) const BUILTIN_ROLES: &[(&str, &str, &[&str])] = &[
    (
        "00482a5a-887f-4fb3-b363-3b7fe8e74483",
        "Key Vault Administrator",
        &["Microsoft.KeyVault/vaults/*"],
    ),
    (
        "4633458b-17de-408a-b874-0445c86b69e6",
        "Key Vault Secrets User",
        &[
            "Microsoft.KeyVault/vaults/secrets/getSecret/action",
            "Microsoft.KeyVault/vaults/secrets/readMetadata/action",
        ],
    ),
    (
        "b86a8fe4-44ce-4948-aee5-eccb2c155cd7",
        "Key Vault Secrets Officer",
        &["Microsoft.KeyVault/vaults/secrets/*"],
    ),
    (
        "a4417e6f-fecd-4de8-b567-7b0420556985",
        "Key Vault Certificates Officer",
        &[
            "Microsoft.KeyVault/vaults/certificatecas/*",
            "Microsoft.KeyVault/vaults/certificates/*",
            "Microsoft.KeyVault/vaults/certificatecontacts/write",
        ],
    ),
    (
        "db79e9a7-68ee-4b58-9aeb-b90e7c24fcba",
        "Key Vault Certificate User",
        &[
            "Microsoft.KeyVault/vaults/certificates/read",
            "Microsoft.KeyVault/vaults/secrets/getSecret/action",
            "Microsoft.KeyVault/vaults/secrets/readMetadata/action",
            "Microsoft.KeyVault/vaults/keys/read",
        ],
    ),
    (
        "21090545-7ca7-4776-b22c-e363652d74d2",
        "Key Vault Reader",
        &[
            "Microsoft.KeyVault/vaults/*/read",
            "Microsoft.KeyVault/vaults/secrets/readMetadata/action",
        ],
    ),
];

/// Who is asking.
#[derive(Debug, Clone)]
pub(crate) struct Principal {
    /// Object id (the token's `oid`, or the one a controller names).
    pub oid: String,
    pub appid: Option<String>,
    pub tid: Option<String>,
    /// The principal hcp-workflow runs as (scenario rules apply instead of role lookups).
    pub is_caller: bool,
}

/// Whether a role assignment at the vault's scope or above grants `oid` the data action.
pub(crate) fn rbac_allows(st: &State, vault: &ArmResource, oid: &str, action: &str) -> bool {
    let vault_key = vault.id.to_ascii_lowercase();
    arm_store::of_type(st, types::ROLE).into_iter().any(|ra| {
        let scope = &ra.parent;
        let above = vault_key == *scope || vault_key.starts_with(&format!("{scope}/"));
        let mine = str_at(&ra.body, "/properties/principalId")
            .is_some_and(|p| p.eq_ignore_ascii_case(oid));
        let guid = str_at(&ra.body, "/properties/roleDefinitionId")
            .and_then(|r| r.rsplit('/').next())
            .unwrap_or_default()
            .to_ascii_lowercase();
        above
            && mine
            && BUILTIN_ROLES
                .iter()
                .find(|(g, _, _)| *g == guid)
                .is_some_and(|(_, _, actions)| actions.iter().any(|a| glob(a, action)))
    })
}

fn policy_allows(vault: &ArmResource, oid: &str, act: Act) -> bool {
    let (kind, verb) = act.policy_permission();
    vault
        .body
        .pointer("/properties/accessPolicies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| str_at(p, "/objectId").is_some_and(|o| o.eq_ignore_ascii_case(oid)))
        .any(|p| {
            p.pointer(&format!("/permissions/{kind}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|x| x.eq_ignore_ascii_case(verb) || x.eq_ignore_ascii_case("all"))
        })
}

fn is_rbac(vault: &ArmResource) -> bool {
    vault
        .body
        .pointer("/properties/enableRbacAuthorization")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Authorizes `act` on `object` (`secrets/{name}`, `certificates/{name}`, or the collection)
/// of `vault` for `p`. `scenario` is consulted for the caller only.
pub(crate) fn check(
    st: &State,
    scenario: Option<&Scenario>,
    vault: &ArmResource,
    p: &Principal,
    act: Act,
    object: &str,
) -> Result<(), KvDenied> {
    let action = act.data_action();
    let resource = format!("{}/{object}", vault.id).to_ascii_lowercase();
    let rbac = is_rbac(vault);
    let allowed = if p.is_caller {
        let sc = scenario.cloned().unwrap_or_default();
        let denied = sc.denied_data_actions.iter().any(|d| {
            glob(&d.action, action)
                && d.scope
                    .as_deref()
                    .is_none_or(|s| resource.starts_with(&s.to_ascii_lowercase()))
        });
        let needs_role = rbac && sc.caller_needs_data_roles;
        !denied && (!needs_role || rbac_allows(st, vault, &p.oid, action))
    } else if rbac {
        rbac_allows(st, vault, &p.oid, action)
    } else {
        policy_allows(vault, &p.oid, act)
    };
    if allowed {
        return Ok(());
    }
    let tid = p
        .tid
        .clone()
        .or_else(|| str_at(&vault.body, "/properties/tenantId").map(str::to_string))
        .unwrap_or_default();
    let caller = format!(
        "appid={};oid={};iss=https://sts.windows.net/{tid}/",
        p.appid.as_deref().unwrap_or("unknown"),
        p.oid
    );
    let location = str_at(&vault.body, "/location").unwrap_or_default();
    if rbac {
        Err(KvDenied::new(
            403,
            "Forbidden",
            format!(
                "Caller is not authorized to perform action on resource.\r\nIf role assignments, deny assignments or role definitions were changed recently, please observe propagation time.\r\nCaller: {caller}\r\nAction: '{action}'\r\nResource: '{resource}'\r\nAssignment: (not found)\r\nDenyAssignmentId: null\r\nDecisionReason: null \r\nVault: {};location={location}\r\n",
                vault.name
            ),
            Some("ForbiddenByRbac"),
        ))
    } else {
        let (kind, verb) = act.policy_permission();
        Err(KvDenied::new(
            403,
            "Forbidden",
            format!(
                "The user, group or application '{caller}' does not have {kind} {verb} permission on key vault '{};location={location}'. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125287",
                vault.name
            ),
            Some("ForbiddenByPolicy"),
        ))
    }
}
