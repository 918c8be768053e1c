//! `Microsoft.KeyVault/vaults` in ARM: PUT validation and generated fields, soft delete,
//! deleted vaults, purge, `checkNameAvailability`.
//!
//! Modelled on `specification/keyvault/resource-manager/Microsoft.KeyVault/stable/2024-11-01/keyvault.json`
//! (and 2023-07-01, the same contract): `Vaults_CreateOrUpdate` (200/201, `VaultProperties`
//! with `tenantId` and `sku` required, `enableSoftDelete` default true,
//! `softDeleteRetentionInDays` 7–90 default 90, `enableRbacAuthorization` default false,
//! `createMode` `recover`/`default`, `enablePurgeProtection` irreversible), `Vaults_Delete`
//! (200/204), `Vaults_ListDeleted`, `Vaults_GetDeleted`, `Vaults_PurgeDeleted` (200/202),
//! `Vaults_CheckNameAvailability` (`CheckNameAvailabilityResult`: `nameAvailable`, `reason`
//! `AccountNameInvalid`/`AlreadyExists`, `message`) and the examples `createVault.json`,
//! `getDeletedVault.json`, `purgeDeletedVault.json`, `checkVaultNameAvailability.json`.
//!
//! Refusals, with Azure's codes: an invalid name 400 `VaultNameNotValid`; a name in use by
//! another vault (anywhere, or soft-deleted in another subscription, or in the scenario's
//! `taken_key_vault_names`) 409 `VaultAlreadyExists`; a name soft-deleted in the same
//! subscription 409 `ConflictError` unless `createMode: recover` (which restores the vault
//! with its secrets and certificates); `enablePurgeProtection: false` 400 `BadRequest`;
//! purging a vault with purge protection 405 `MethodNotAllowed` "Operation
//! 'DeletedVaultPurge' is not allowed." (the text Azure answers, quoted in
//! microsoft/AzureTRE#1446). Deleting a vault (or its resource group) always soft-deletes it
//! — soft delete can no longer be turned off — for `softDeleteRetentionInDays` model days;
//! purge answers 200 at once (the spec's synchronous answer).

use axum::http::Method;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{KvState, VaultData};
use crate::arm::path::ResId;
use crate::arm::{ArmError, Ctx, types};
use crate::http::{Req, json as json_resp};
use crate::sim::{Simulator, lock};
use crate::state::{ArmResource, State};
use crate::util::{self, default_field, obj_mut, str_at};

/// A soft-deleted vault (`Microsoft.KeyVault/deletedVaults`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DeletedVault {
    pub name: String,
    /// The original vault's id.
    pub vault_id: String,
    pub location: String,
    pub tags: Value,
    /// When it was deleted (simulator ms); `None` until the next tick stamps a deletion that
    /// happened inside ARM's cascade (which has no clock).
    pub deletion_ms: Option<u64>,
    pub retention_days: u64,
    pub purge_protection: bool,
    /// The vault's stored body, for `createMode: recover`.
    pub body: Value,
}

impl DeletedVault {
    fn subscription(&self) -> &str {
        self.vault_id.split('/').nth(2).unwrap_or_default()
    }
    fn purge_ms(&self, sim: &Simulator, now: u64) -> u64 {
        self.deletion_ms.unwrap_or(now)
            + sim.scaled(std::time::Duration::from_secs(self.retention_days * 86_400))
    }
}

/// Vault name rules: 3–24 characters, letters, digits and hyphens, starting with a letter,
/// ending with a letter or digit, no consecutive hyphens.
pub(crate) fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    (3..=24).contains(&b.len())
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && !name.contains("--")
}

fn name_invalid(name: &str) -> String {
    format!(
        "The vault name '{name}' is invalid. A vault's name must be between 3-24 alphanumeric characters. The name must begin with a letter, end with a letter or digit, and not contain consecutive hyphens. Follow this link for more information: https://go.microsoft.com/fwlink/?linkid=2147742"
    )
}

/// Azure's text (as observed verbatim, typo included, in Azure/azure-powershell#15115).
fn name_in_use(name: &str) -> String {
    format!(
        "The vault name '{name}' is already in use. Vault names are globaly unique so it is possible that the name is already taken. If you are sure that the vault name was not taken then it is possible that a vault with the same name was recently deleted but not purged after being placed in a recoverable state. If the vault is in a recoverable state then the vault will need to be purged before reusing the name. For more information on VaultAlreadyExists, soft delete and purging a vault follow this link https://go.microsoft.com/fwlink/?linkid=2147740."
    )
}

/// The live vault of that (globally unique) name.
pub(crate) fn vault_by_name<'a>(st: &'a State, name: &str) -> Option<&'a ArmResource> {
    st.arm
        .values()
        .find(|r| r.rtype == types::VAULT && r.name.eq_ignore_ascii_case(name))
}

/// The data-plane DNS suffix of a vault by its location's cloud.
pub(crate) fn dns_suffix(location: &str) -> &'static str {
    let l = location.to_ascii_lowercase();
    if l.starts_with("usgov") || l.starts_with("usdod") {
        "vault.usgovcloudapi.net"
    } else if l.starts_with("china") {
        "vault.azure.cn"
    } else {
        "vault.azure.net"
    }
}

/// `Vaults_CreateOrUpdate`: validation, soft-delete conflicts, recovery, defaults.
pub(crate) fn prepare_vault(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    existing: Option<&ArmResource>,
) -> Result<(), ArmError> {
    let name = rid.name.clone();
    if !valid_name(&name) {
        return Err(ArmError::bad_request(
            "VaultNameNotValid",
            name_invalid(&name),
        ));
    }
    let key = name.to_ascii_lowercase();
    let sc = crate::preflight::scenario(ctx.sim);
    let taken_elsewhere = vault_by_name(ctx.st, &name)
        .is_some_and(|v| !v.id.eq_ignore_ascii_case(&rid.id))
        || (existing.is_none()
            && sc
                .taken_key_vault_names
                .iter()
                .any(|n| n.eq_ignore_ascii_case(&name)));
    if taken_elsewhere {
        return Err(ArmError::new(409, "VaultAlreadyExists", name_in_use(&name)));
    }
    let recover =
        str_at(body, "/properties/createMode").is_some_and(|m| m.eq_ignore_ascii_case("recover"));
    let deleted = if existing.is_none() {
        ctx.st.keyvault.deleted_vaults.get(&key).cloned()
    } else {
        None
    };
    if let Some(d) = &deleted {
        if !d.subscription().eq_ignore_ascii_case(&rid.sub) {
            return Err(ArmError::new(409, "VaultAlreadyExists", name_in_use(&name)));
        }
        if !recover {
            return Err(ArmError::new(
                409,
                "ConflictError",
                "A vault with the same name already exists in deleted state. You need to either recover or purge existing key vault. Follow this link https://go.microsoft.com/fwlink/?linkid=2149745 for more information on soft delete.",
            ));
        }
        // Recovery: the deleted vault's properties come back under the request's (tags and
        // location apply); its secrets and certificates were kept.
        if let Some(Value::Object(old)) = d.body.get("properties").cloned() {
            let p = obj_mut(body, "properties");
            for (k, v) in old {
                p.entry(k).or_insert(v);
            }
        }
    }
    let props = body.get("properties").cloned().unwrap_or(Value::Null);
    let tenant = str_at(&props, "/tenantId").unwrap_or_default().to_string();
    if tenant.is_empty() {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "The request content was invalid and could not be deserialized: 'Required property 'tenantId' not found in JSON. Path 'properties'.'.",
        ));
    }
    if uuid::Uuid::parse_str(&tenant).is_err() {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!("The tenant ID '{tenant}' is not a valid GUID."),
        ));
    }
    match (str_at(&props, "/sku/family"), str_at(&props, "/sku/name")) {
        (None, _) | (_, None) => {
            return Err(ArmError::bad_request(
                "InvalidRequestContent",
                "The request content was invalid and could not be deserialized: 'Required property 'sku' not found in JSON. Path 'properties'.'.",
            ));
        }
        (Some(f), Some(s))
            if f != "A"
                || !(s.eq_ignore_ascii_case("standard") || s.eq_ignore_ascii_case("premium")) =>
        {
            return Err(ArmError::bad_request(
                "BadRequest",
                format!(
                    "The SKU '{s}' of family '{f}' is not supported: Key Vault SKUs are family 'A', name 'standard' or 'premium'."
                ),
            ));
        }
        _ => {}
    }
    if let Some(days) = props.get("softDeleteRetentionInDays")
        && !days.as_i64().is_some_and(|d| (7..=90).contains(&d))
    {
        return Err(ArmError::bad_request(
            "BadRequest",
            "The property \"softDeleteRetentionInDays\" has an invalid value. It accepts >=7 and <=90.",
        ));
    }
    let had_protection = existing
        .and_then(|e| e.body.pointer("/properties/enablePurgeProtection"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let protection = props.get("enablePurgeProtection").and_then(Value::as_bool);
    if protection == Some(false) {
        return Err(ArmError::bad_request(
            "BadRequest",
            "The property \"enablePurgeProtection\" cannot be set to false. Enabling the purge protection for a vault is an irreversible action.",
        ));
    }
    // Accepted: from here on the request changes the world.
    match (&deleted, existing) {
        (Some(_), _) => {
            ctx.st.keyvault.deleted_vaults.remove(&key);
        }
        (None, None) => {
            // A new vault starts empty.
            ctx.st
                .keyvault
                .vaults
                .insert(key.clone(), VaultData::default());
        }
        (None, Some(_)) => {}
    }
    ctx.st.keyvault.vaults.entry(key).or_default();
    let location = str_at(body, "/location").unwrap_or_default().to_string();
    let uri = existing
        .and_then(|e| str_at(&e.body, "/properties/vaultUri").map(str::to_string))
        .unwrap_or_else(|| format!("https://{name}.{}/", dns_suffix(&location)));
    let p = obj_mut(body, "properties");
    p.remove("createMode");
    p.insert("vaultUri".into(), json!(uri));
    if protection.is_none() && had_protection {
        p.insert("enablePurgeProtection".into(), json!(true));
    }
    default_field(p, "accessPolicies", json!([]));
    default_field(p, "enabledForDeployment", json!(false));
    default_field(p, "enabledForDiskEncryption", json!(false));
    default_field(p, "enabledForTemplateDeployment", json!(false));
    default_field(p, "enableSoftDelete", json!(true));
    default_field(p, "softDeleteRetentionInDays", json!(90));
    default_field(p, "enableRbacAuthorization", json!(false));
    default_field(p, "publicNetworkAccess", json!("Enabled"));
    default_field(p, "privateEndpointConnections", json!([]));
    Ok(())
}

/// ARM removed a vault (its DELETE, or its resource group's): it becomes a deleted vault
/// for its retention period; its secrets and certificates stay for a recovery.
pub(crate) fn on_vault_removed(st: &mut State, r: &ArmResource) {
    let key = r.name.to_ascii_lowercase();
    let retention = r
        .body
        .pointer("/properties/softDeleteRetentionInDays")
        .and_then(Value::as_u64)
        .unwrap_or(90);
    let purge_protection = r
        .body
        .pointer("/properties/enablePurgeProtection")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    st.keyvault.deleted_vaults.insert(
        key,
        DeletedVault {
            name: r.name.clone(),
            vault_id: r.id.clone(),
            location: str_at(&r.body, "/location").unwrap_or_default().to_string(),
            tags: r.body.get("tags").cloned().unwrap_or_else(|| json!({})),
            deletion_ms: None,
            retention_days: retention,
            purge_protection,
            body: r.body.clone(),
        },
    );
}

/// Stamps fresh deletions and purges deleted vaults whose retention ended.
pub(crate) fn tick(sim: &Simulator, kv: &mut KvState, now: u64) -> bool {
    let mut changed = false;
    for d in kv.deleted_vaults.values_mut() {
        if d.deletion_ms.is_none() {
            d.deletion_ms = Some(now);
            changed = true;
        }
    }
    let due: Vec<String> = kv
        .deleted_vaults
        .iter()
        .filter(|(_, d)| d.purge_ms(sim, now) <= now)
        .map(|(k, _)| k.clone())
        .collect();
    for k in due {
        kv.deleted_vaults.remove(&k);
        kv.vaults.remove(&k);
        changed = true;
    }
    changed
}

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn norm_loc(l: &str) -> String {
    l.chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase()
}

fn render_deleted(sim: &Simulator, d: &DeletedVault, now: u64) -> Value {
    let deleted = d.deletion_ms.unwrap_or(now);
    json!({
        "id": format!("/subscriptions/{}/providers/Microsoft.KeyVault/locations/{}/deletedVaults/{}", d.subscription(), norm_loc(&d.location), d.name),
        "name": d.name,
        "type": "Microsoft.KeyVault/deletedVaults",
        "properties": {
            "vaultId": d.vault_id,
            "location": norm_loc(&d.location),
            "tags": d.tags,
            "deletionDate": util::rfc3339_secs(deleted),
            "scheduledPurgeDate": util::rfc3339_secs(d.purge_ms(sim, now)),
            "purgeProtectionEnabled": d.purge_protection,
        }
    })
}

/// The provider-level Key Vault requests (not resources): `checkNameAvailability`, the
/// deleted vaults and their purge. `None` when the request is not one of them.
pub(crate) fn handle_arm(sim: &Simulator, req: &Req) -> Option<Response> {
    let s: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    let (sub, rest) = match s.as_slice() {
        [subs, sub, p, ns, rest @ ..]
            if eq(subs, "subscriptions") && eq(p, "providers") && eq(ns, "Microsoft.KeyVault") =>
        {
            (*sub, rest)
        }
        _ => return None,
    };
    enum Op<'a> {
        CheckName,
        ListDeleted,
        GetDeleted(&'a str, &'a str),
        Purge(&'a str, &'a str),
    }
    let op = match (&req.method, rest) {
        (&Method::POST, [c]) if eq(c, "checkNameAvailability") => Op::CheckName,
        (&Method::GET, [d]) if eq(d, "deletedVaults") => Op::ListDeleted,
        (&Method::GET, [l, loc, d, n]) if eq(l, "locations") && eq(d, "deletedVaults") => {
            Op::GetDeleted(loc, n)
        }
        (&Method::POST, [l, loc, d, n, p])
            if eq(l, "locations") && eq(d, "deletedVaults") && eq(p, "purge") =>
        {
            Op::Purge(loc, n)
        }
        _ => return None,
    };
    let Some(v) = req.q("api-version") else {
        return Some(crate::arm::error_response(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    };
    let versions = types::lookup(types::VAULT)
        .map(|t| t.api_versions)
        .unwrap_or(&[]);
    if !versions.contains(&v) {
        return Some(crate::arm::error_response(
            400,
            "NoRegisteredProviderFound",
            &format!(
                "No registered resource provider found for API version '{v}' and type 'vaults'. The supported api-versions are '{}'.",
                versions.join(", ")
            ),
        ));
    }
    let now = sim.now_ms();
    Some(match op {
        Op::CheckName => check_name(sim, req),
        Op::ListDeleted => {
            let st = lock(&sim.inner.state);
            let values: Vec<Value> = st
                .keyvault
                .deleted_vaults
                .values()
                .filter(|d| eq(d.subscription(), sub))
                .map(|d| render_deleted(sim, d, now))
                .collect();
            json_resp(200, &json!({ "value": values }))
        }
        Op::GetDeleted(loc, name) => {
            let st = lock(&sim.inner.state);
            match find_deleted(&st.keyvault, sub, loc, name) {
                Some(d) => json_resp(200, &render_deleted(sim, d, now)),
                None => deleted_not_found(name),
            }
        }
        Op::Purge(loc, name) => {
            let mut st = lock(&sim.inner.state);
            let Some(d) = find_deleted(&st.keyvault, sub, loc, name).cloned() else {
                return Some(deleted_not_found(name));
            };
            if d.purge_protection {
                return Some(crate::arm::error_response(
                    405,
                    "MethodNotAllowed",
                    "Operation 'DeletedVaultPurge' is not allowed.",
                ));
            }
            let key = d.name.to_ascii_lowercase();
            st.keyvault.deleted_vaults.remove(&key);
            st.keyvault.vaults.remove(&key);
            crate::http::empty(200)
        }
    })
}

fn find_deleted<'a>(kv: &'a KvState, sub: &str, loc: &str, name: &str) -> Option<&'a DeletedVault> {
    kv.deleted_vaults
        .get(&name.to_ascii_lowercase())
        .filter(|d| eq(d.subscription(), sub) && norm_loc(&d.location) == norm_loc(loc))
}

fn deleted_not_found(name: &str) -> Response {
    crate::arm::error_response(
        404,
        "ResourceNotFound",
        &format!(
            "The Resource 'Microsoft.KeyVault/deletedVaults/{name}' under resource group '<null>' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
        ),
    )
}

/// `Vaults_CheckNameAvailability`.
fn check_name(sim: &Simulator, req: &Req) -> Response {
    let body = req.json_body().unwrap_or(Value::Null);
    let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
    let rtype = body.get("type").and_then(Value::as_str).unwrap_or_default();
    if !eq(rtype, types::VAULT) {
        return crate::arm::error_response(
            400,
            "InvalidRequestContent",
            &format!(
                "The request content was invalid and could not be deserialized: 'Error converting value \"{rtype}\" to type 'Type'. Path 'type'.'."
            ),
        );
    }
    if !valid_name(name) {
        return json_resp(
            200,
            &json!({"nameAvailable": false, "reason": "AccountNameInvalid",
                "message": "Vault name must only contain alphanumeric characters and dashes and cannot start with a number."}),
        );
    }
    let taken = {
        let st = lock(&sim.inner.state);
        vault_by_name(&st, name).is_some()
            || st
                .keyvault
                .deleted_vaults
                .contains_key(&name.to_ascii_lowercase())
    } || crate::preflight::scenario(sim)
        .taken_key_vault_names
        .iter()
        .any(|n| eq(n, name));
    if taken {
        json_resp(
            200,
            &json!({"nameAvailable": false, "reason": "AlreadyExists", "message": name_in_use(name)}),
        )
    } else {
        json_resp(200, &json!({"nameAvailable": true}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vault_names() {
        assert!(valid_name("hcp-kv-1"));
        assert!(valid_name("abc"));
        assert!(!valid_name("ab"));
        assert!(!valid_name("1abc"));
        assert!(!valid_name("abc-"));
        assert!(!valid_name("a--b"));
        assert!(!valid_name("a_bc"));
        assert!(!valid_name("abcdefghijklmnopqrstuvwxy"));
    }
}
