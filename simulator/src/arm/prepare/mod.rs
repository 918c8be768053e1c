//! Per-type PUT validation and generated fields, post-PUT side effects, and delete guards.
//!
//! `prepare` turns a client body into the stored body (keeping generated values of an
//! existing resource such as `clientId`, `alias` or allocated IPs, since PUT replaces the
//! client-owned fields only). Resource groups, identities, credentials, role assignments,
//! storage and Private DNS are here; networking is in [`network`] and [`privatelink`].

mod network;
pub(crate) mod privatelink;

use serde_json::{Map, Value, json};

use super::path::ResId;
use super::{ArmError, Ctx, store, types};
use crate::sim::Simulator;
use crate::state::{ArmResource, State};
use crate::util::{self, default_field, obj_mut, str_at};

/// A prepared PUT.
pub(crate) struct Prepared {
    pub body: Value,
    pub internal: Value,
}

pub(crate) fn props(body: &mut Value) -> &mut Map<String, Value> {
    obj_mut(body, "properties")
}

pub(crate) fn prepare(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    mut body: Value,
    existing: Option<&ArmResource>,
) -> Result<Prepared, ArmError> {
    let mut internal = existing.map(|e| e.internal.clone()).unwrap_or(Value::Null);
    if !internal.is_object() {
        internal = json!({});
    }
    props(&mut body);
    match rid.spec.rtype {
        types::RG => {
            if let Some(e) = existing {
                let old = str_at(&e.body, "/location").unwrap_or_default();
                let new = str_at(&body, "/location").unwrap_or_default();
                if !old.eq_ignore_ascii_case(new) {
                    return Err(ArmError::new(
                        409,
                        "InvalidResourceGroupLocation",
                        format!(
                            "Invalid resource group location '{new}'. The Resource group already exists in location '{old}'."
                        ),
                    ));
                }
            }
        }
        types::IDENTITY => identity(ctx, &mut body, existing),
        types::FIC => fic(ctx, rid, &mut body, existing)?,
        types::ROLE => role_assignment(ctx, rid, &mut body, existing)?,
        types::STORAGE_ACCOUNT => storage_account(ctx, rid, &mut body, &mut internal, existing)?,
        types::CONTAINER => container(ctx, rid, &mut body)?,
        types::ZONE => zone(rid, &mut body)?,
        types::LINK => {
            if str_at(&body, "/properties/virtualNetwork/id").is_none() {
                return Err(ArmError::bad_request(
                    "BadRequest",
                    "properties.virtualNetwork.id is required.",
                ));
            }
            default_field(props(&mut body), "registrationEnabled", json!(false));
            if let Some(Value::String(l)) = body.get_mut("location") {
                *l = l.to_ascii_lowercase();
            }
        }
        types::PUBLIC_ZONE => public_zone(rid, &mut body)?,
        types::VAULT => crate::keyvault::prepare_vault(ctx, rid, &mut body, existing)?,
        types::PUBLIC_AREC => {
            let p = props(&mut body);
            default_field(p, "TTL", json!(3600));
            default_field(p, "ARecords", json!([]));
            p.insert("provisioningState".into(), json!("Succeeded"));
        }
        types::AREC => {
            let p = props(&mut body);
            default_field(p, "ttl", json!(3600));
            default_field(p, "aRecords", json!([]));
            default_field(p, "isAutoRegistered", json!(false));
        }
        types::NSG | types::VNET | types::SUBNET | types::PIP | types::LB | types::NIC => {
            network::prepare(ctx, rid, &mut body, &mut internal, existing)?;
        }
        types::PLS | types::PEC | types::PE => {
            privatelink::prepare(ctx, rid, &mut body, &mut internal, existing)?
        }
        _ => {}
    }
    Ok(Prepared { body, internal })
}

/// A public DNS zone (`specification/dns/.../2018-05-01/dns.json`, `Zones_CreateOrUpdate`):
/// location `global`, `zoneType` Public, four Azure name servers.
fn public_zone(rid: &ResId, body: &mut Value) -> Result<(), ArmError> {
    let loc = str_at(body, "/location").unwrap_or("global");
    if !loc.eq_ignore_ascii_case("global") {
        return Err(ArmError::bad_request(
            "LocationNotAvailableForResourceType",
            format!(
                "The provided location '{loc}' is not available for resource type 'Microsoft.Network/dnszones'. List of available regions for the resource type is 'global'."
            ),
        ));
    }
    if !rid.name.contains('.') {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "The zone name '{}' is invalid: it must have at least two labels.",
                rid.name
            ),
        ));
    }
    body["location"] = json!("global");
    let p = props(body);
    default_field(p, "zoneType", json!("Public"));
    default_field(p, "maxNumberOfRecordSets", json!(10000));
    default_field(
        p,
        "nameServers",
        json!([
            "ns1-01.azure-dns.com.",
            "ns2-01.azure-dns.net.",
            "ns3-01.azure-dns.org.",
            "ns4-01.azure-dns.info."
        ]),
    );
    Ok(())
}

/// Side effects once the resource is stored (VNet subnets, private endpoint connections).
pub(crate) fn after_put(ctx: &mut Ctx<'_>, rid: &ResId) -> Result<(), ArmError> {
    match rid.spec.rtype {
        types::VNET => network::sync_subnets(ctx, rid),
        types::PE => privatelink::after_pe_put(ctx, rid),
        _ => Ok(()),
    }
}

/// Refuses deletes Azure refuses (resources in use).
pub(crate) fn pre_delete(ctx: &mut Ctx<'_>, res: &ArmResource) -> Result<(), ArmError> {
    match res.rtype.as_str() {
        types::SUBNET | types::VNET | types::NSG | types::PIP => network::pre_delete(ctx, res),
        types::LB | types::PLS => privatelink::pre_delete(ctx, res),
        types::ZONE => zone_pre_delete(ctx, res),
        _ => Ok(()),
    }
}

/// A Private DNS zone with virtual network links is not deleted: Azure answers 409
/// `CannotDeleteResource`, with the nested ids relative to `providers/` — the message as
/// Azure returns it (quoted verbatim by the Terraform azurerm provider in
/// github.com/learntocloud/networking-lab/issues/8: "Cannot delete resource while nested
/// resources exist. Some existing nested resource IDs include:
/// 'Microsoft.Network/privateDnsZones/internal.local/virtualNetworkLinks/LabVNetLink'.
/// Please delete all nested resources before deleting this resource."). Record sets do
/// not block (they go with the zone). Deleting the resource group still removes everything.
fn zone_pre_delete(ctx: &Ctx<'_>, res: &ArmResource) -> Result<(), ArmError> {
    let links = store::children(ctx.st, &res.id.to_ascii_lowercase(), types::LINK);
    if links.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = links
        .iter()
        .map(|l| {
            let rel =
                l.id.split_once("/providers/")
                    .map_or(l.id.as_str(), |(_, r)| r);
            format!("'{rel}'")
        })
        .collect();
    Err(ArmError::new(
        409,
        "CannotDeleteResource",
        format!(
            "Cannot delete resource while nested resources exist. Some existing nested resource IDs include: {}. Please delete all nested resources before deleting this resource.",
            ids.join(", ")
        ),
    ))
}

/// Why a resource group cannot be deleted: something outside it depends on something in
/// it (a subnet used elsewhere, a PLS with foreign connections, an LB behind a foreign PLS).
pub(crate) fn rg_delete_blocker(sim: &Simulator, st: &State, rg_key: &str) -> Option<ArmError> {
    let prefix = format!("{rg_key}/");
    let inside = |k: &str| k == rg_key || k.starts_with(&prefix);
    for (key, r) in st.arm.iter().filter(|(k, _)| k.starts_with(&prefix)) {
        match r.rtype.as_str() {
            types::SUBNET
                if st
                    .arm
                    .iter()
                    .any(|(k, o)| !inside(k) && util::mentions(&o.body, key)) =>
            {
                return Some(network::subnet_in_use(&r.id));
            }
            types::PLS => {
                let foreign = store::children(st, key, types::PEC).into_iter().any(|c| {
                    let pe = str_at(&c.body, "/properties/privateEndpoint/id")
                        .unwrap_or_default()
                        .to_ascii_lowercase();
                    !inside(&pe) && privatelink::connection_blocks(sim, c)
                });
                if foreign {
                    return Some(privatelink::pls_has_connections(&r.id));
                }
            }
            types::LB
                if privatelink::pls_referencing_lb(st, key).is_some_and(|pls| !inside(&pls)) =>
            {
                return Some(privatelink::lb_in_use(&r.id));
            }
            _ => {}
        }
    }
    None
}

fn identity(ctx: &mut Ctx<'_>, body: &mut Value, existing: Option<&ArmResource>) {
    let keep = |f: &str| {
        existing.and_then(|e| str_at(&e.body, &format!("/properties/{f}")).map(str::to_string))
    };
    let client_id = keep("clientId").unwrap_or_else(|| ctx.uuid());
    let principal_id = keep("principalId").unwrap_or_else(|| ctx.uuid());
    let tenant = ctx.cfg().tenant_id.clone();
    let p = props(body);
    p.insert("clientId".into(), json!(client_id));
    p.insert("principalId".into(), json!(principal_id));
    p.insert("tenantId".into(), json!(tenant));
    default_field(p, "isolationScope", json!("None"));
}

/// Federated credential names per Azure's documented pattern.
fn valid_fic_name(n: &str) -> bool {
    let b = n.as_bytes();
    (3..=120).contains(&b.len())
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
}

/// Azure's limit of federated credentials per identity.
const MAX_FICS: usize = 20;

fn fic(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    existing: Option<&ArmResource>,
) -> Result<(), ArmError> {
    if !valid_fic_name(&rid.name) {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "The federated identity credential name '{}' is invalid. It must match ^[a-zA-Z0-9][a-zA-Z0-9-_]{{2,119}}$.",
                rid.name
            ),
        ));
    }
    let issuer = str_at(body, "/properties/issuer")
        .unwrap_or_default()
        .to_string();
    let subject = str_at(body, "/properties/subject")
        .unwrap_or_default()
        .to_string();
    if !issuer.starts_with("https://") {
        return Err(ArmError::bad_request(
            "BadRequest",
            "The issuer must be a valid URL using the https scheme.",
        ));
    }
    if subject.is_empty() {
        return Err(ArmError::bad_request(
            "BadRequest",
            "The subject must not be empty.",
        ));
    }
    match body
        .pointer("/properties/audiences")
        .and_then(Value::as_array)
    {
        Some(a) if a.len() == 1 && a[0].as_str().is_some_and(|s| !s.is_empty()) => {}
        _ => {
            return Err(ArmError::bad_request(
                "BadRequest",
                "Exactly one audience is supported.",
            ));
        }
    }
    let siblings = store::children(ctx.st, &rid.parent.to_ascii_lowercase(), types::FIC);
    if existing.is_none() && siblings.len() >= MAX_FICS {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "A managed identity can have at most {MAX_FICS} federated identity credentials."
            ),
        ));
    }
    let dup = siblings.iter().any(|s| {
        !s.name.eq_ignore_ascii_case(&rid.name)
            && str_at(&s.body, "/properties/issuer") == Some(issuer.as_str())
            && str_at(&s.body, "/properties/subject") == Some(subject.as_str())
    });
    if dup {
        return Err(ArmError::bad_request(
            "BadRequest",
            "A federated identity credential with the same issuer and subject already exists on this identity.",
        ));
    }
    Ok(())
}

fn role_guid(role_definition_id: &str) -> String {
    role_definition_id
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

fn role_assignment(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    existing: Option<&ArmResource>,
) -> Result<(), ArmError> {
    if uuid::Uuid::parse_str(&rid.name).is_err() {
        return Err(ArmError::bad_request(
            "InvalidRoleAssignmentId",
            format!(
                "The role assignment ID '{}' is not valid. The role assignment ID must be a GUID.",
                rid.name
            ),
        ));
    }
    let role = str_at(body, "/properties/roleDefinitionId")
        .unwrap_or_default()
        .to_string();
    let principal = str_at(body, "/properties/principalId")
        .unwrap_or_default()
        .to_string();
    if role.is_empty() || principal.is_empty() {
        return Err(ArmError::bad_request(
            "InvalidRoleAssignmentRequest",
            "properties.roleDefinitionId and properties.principalId are required.",
        ));
    }
    if let Some(e) = existing {
        let same_principal = str_at(&e.body, "/properties/principalId")
            .is_some_and(|p| p.eq_ignore_ascii_case(&principal));
        let same_role =
            role_guid(str_at(&e.body, "/properties/roleDefinitionId").unwrap_or_default())
                == role_guid(&role);
        if !same_principal || !same_role {
            return Err(ArmError::new(
                409,
                "RoleAssignmentUpdateNotPermitted",
                "Tenant ID, application ID, principal ID, and scope are not allowed to be updated.",
            ));
        }
    }
    let scope_key = rid.parent.to_ascii_lowercase();
    let twin = store::children(ctx.st, &scope_key, types::ROLE)
        .into_iter()
        .any(|r| {
            !r.name.eq_ignore_ascii_case(&rid.name)
                && str_at(&r.body, "/properties/principalId")
                    .is_some_and(|p| p.eq_ignore_ascii_case(&principal))
                && role_guid(str_at(&r.body, "/properties/roleDefinitionId").unwrap_or_default())
                    == role_guid(&role)
        });
    if twin {
        return Err(ArmError::new(
            409,
            "RoleAssignmentExists",
            "The role assignment already exists.",
        ));
    }
    // Entra replication delay: a principal created moments ago is not visible to
    // authorization yet — unless the request names `principalType`, which skips the
    // directory lookup: "set the principalType property when creating the role assignment"
    // (https://learn.microsoft.com/azure/role-based-access-control/role-assignments-template#new-service-principal,
    // and the PrincipalNotFound message itself).
    let typed = str_at(body, "/properties/principalType").is_some_and(|t| !t.is_empty());
    let window = ctx.sim.scaled(ctx.cfg().principal_not_found_for);
    let fresh = store::of_type(ctx.st, types::IDENTITY)
        .into_iter()
        .any(|i| {
            str_at(&i.body, "/properties/principalId")
                .is_some_and(|p| p.eq_ignore_ascii_case(&principal))
                && ctx.now < i.created_ms + window
        });
    if fresh && !typed {
        let tenant = &ctx.cfg().tenant_id;
        return Err(ArmError::bad_request(
            "PrincipalNotFound",
            format!(
                "Principal {} does not exist in the directory {tenant}. Check that you have the correct principal ID. \
                 If you are creating this principal and then immediately assigning a role, this error might be related to a replication delay. \
                 In this case, set the role assignment principalType property to a value, such as ServicePrincipal, User, or Group.",
                principal.replace('-', "")
            ),
        ));
    }
    let now = util::rfc3339(ctx.now);
    let created = existing
        .and_then(|e| str_at(&e.body, "/properties/createdOn").map(str::to_string))
        .unwrap_or(now.clone());
    let p = props(body);
    p.insert("scope".into(), json!(rid.parent));
    default_field(p, "principalType", json!("User"));
    p.insert("createdOn".into(), json!(created));
    p.insert("updatedOn".into(), json!(now));
    Ok(())
}

fn storage_account(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    internal: &mut Value,
    existing: Option<&ArmResource>,
) -> Result<(), ArmError> {
    let name = &rid.name;
    let valid = (3..=24).contains(&name.len())
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !valid {
        return Err(ArmError::bad_request(
            "AccountNameInvalid",
            format!(
                "{name} is not a valid storage account name. Storage account name must be between 3 and 24 characters in length and use numbers and lower-case letters only."
            ),
        ));
    }
    if let Some(other) = store::find_storage_account(ctx.st, name)
        && !other.id.eq_ignore_ascii_case(&rid.id)
    {
        return Err(ArmError::new(
            409,
            "StorageAccountAlreadyTaken",
            format!("The storage account named {name} is already taken."),
        ));
    }
    let Some(sku) = str_at(body, "/sku/name").map(str::to_string) else {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "sku.name is required.",
        ));
    };
    if body.get("kind").and_then(Value::as_str).is_none() {
        return Err(ArmError::bad_request(
            "InvalidRequestContent",
            "kind is required.",
        ));
    }
    let tier = if sku.starts_with("Premium") {
        "Premium"
    } else {
        "Standard"
    };
    obj_mut(body, "sku").insert("tier".into(), json!(tier));
    let location = str_at(body, "/location").unwrap_or_default().to_string();
    let created = existing
        .and_then(|e| str_at(&e.body, "/properties/creationTime").map(str::to_string))
        .unwrap_or_else(|| util::rfc3339(ctx.now));
    for k in ["key1", "key2"] {
        if str_at(internal, &format!("/{k}")).is_none() {
            use base64::Engine;
            let raw = format!("{}{}", ctx.uuid(), ctx.uuid());
            let key = base64::engine::general_purpose::STANDARD.encode(raw.as_bytes());
            if let Some(m) = internal.as_object_mut() {
                m.insert(k.into(), json!(key));
            }
        }
    }
    let ep = |svc: &str, suffix: &str| format!("https://{name}{suffix}.{svc}.core.windows.net/");
    let mut endpoints = json!({
        "blob": ep("blob", ""), "dfs": ep("dfs", ""), "file": ep("file", ""),
        "queue": ep("queue", ""), "table": ep("table", ""), "web": ep("web", ""),
    });
    if body.pointer("/properties/routingPreference/publishInternetEndpoints") == Some(&json!(true))
    {
        endpoints["internetEndpoints"] = json!({
            "blob": ep("blob", "-internetrouting"), "dfs": ep("dfs", "-internetrouting"),
            "file": ep("file", "-internetrouting"), "web": ep("web", "-internetrouting"),
        });
    }
    if body.pointer("/properties/routingPreference/publishMicrosoftEndpoints") == Some(&json!(true))
    {
        endpoints["microsoftEndpoints"] = json!({
            "blob": ep("blob", "-microsoftrouting"), "dfs": ep("dfs", "-microsoftrouting"),
            "file": ep("file", "-microsoftrouting"), "queue": ep("queue", "-microsoftrouting"),
            "table": ep("table", "-microsoftrouting"), "web": ep("web", "-microsoftrouting"),
        });
    }
    let geo = ["GRS", "RAGRS", "GZRS", "RAGZRS"]
        .iter()
        .any(|g| sku.ends_with(g));
    let p = props(body);
    p.insert("creationTime".into(), json!(created));
    p.insert("primaryEndpoints".into(), endpoints);
    p.insert("primaryLocation".into(), json!(location));
    p.insert("statusOfPrimary".into(), json!("available"));
    if geo {
        p.insert("secondaryLocation".into(), json!(format!("{location}2")));
        p.insert("statusOfSecondary".into(), json!("available"));
    }
    default_field(p, "supportsHttpsTrafficOnly", json!(true));
    default_field(p, "allowBlobPublicAccess", json!(false));
    default_field(p, "minimumTlsVersion", json!("TLS1_2"));
    default_field(
        p,
        "keyCreationTime",
        json!({"key1": created, "key2": created}),
    );
    let enc = p.entry("encryption").or_insert_with(|| json!({}));
    if let Value::Object(enc) = enc {
        default_field(enc, "keySource", json!("Microsoft.Storage"));
        let services = enc.entry("services").or_insert_with(|| json!({}));
        if let Value::Object(services) = services {
            for svc in ["blob", "file"] {
                let s = services.entry(svc).or_insert_with(|| json!({}));
                if let Value::Object(s) = s {
                    default_field(s, "enabled", json!(true));
                    default_field(s, "keyType", json!("Account"));
                    default_field(s, "lastEnabledTime", json!(created));
                }
            }
        }
    }
    Ok(())
}

fn container(ctx: &mut Ctx<'_>, rid: &ResId, body: &mut Value) -> Result<(), ArmError> {
    let account_key = store::real_parent_key(&rid.parent);
    let public_allowed = ctx
        .st
        .arm
        .get(&account_key)
        .and_then(|a| a.body.pointer("/properties/allowBlobPublicAccess"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let now = util::rfc3339(ctx.now);
    let p = props(body);
    default_field(p, "publicAccess", json!("None"));
    let access = p
        .get("publicAccess")
        .and_then(Value::as_str)
        .unwrap_or("None")
        .to_string();
    if !access.eq_ignore_ascii_case("None") && !public_allowed {
        return Err(ArmError::new(
            409,
            "PublicAccessNotPermitted",
            "Public access is not permitted on this storage account.",
        ));
    }
    p.insert("lastModifiedTime".into(), json!(now));
    default_field(p, "leaseStatus", json!("Unlocked"));
    default_field(p, "leaseState", json!("Available"));
    default_field(p, "hasImmutabilityPolicy", json!(false));
    default_field(p, "hasLegalHold", json!(false));
    default_field(p, "deleted", json!(false));
    default_field(p, "remainingRetentionDays", json!(0));
    default_field(
        p,
        "defaultEncryptionScope",
        json!("$account-encryption-key"),
    );
    default_field(p, "denyEncryptionScopeOverride", json!(false));
    Ok(())
}

fn zone(rid: &ResId, body: &mut Value) -> Result<(), ArmError> {
    let loc = str_at(body, "/location")
        .unwrap_or_default()
        .to_ascii_lowercase();
    if loc != "global" {
        return Err(ArmError::bad_request(
            "BadRequest",
            format!(
                "The location '{loc}' is not valid for private DNS zone '{}'. Private DNS zones are global.",
                rid.name
            ),
        ));
    }
    body["location"] = json!("global");
    let p = props(body);
    // Azure's documented per-zone limits.
    p.insert("maxNumberOfRecordSets".into(), json!(25000));
    p.insert("maxNumberOfVirtualNetworkLinks".into(), json!(1000));
    p.insert(
        "maxNumberOfVirtualNetworkLinksWithRegistration".into(),
        json!(100),
    );
    Ok(())
}
