//! Private Link Services, their private-endpoint connections, and Private Endpoints.
//!
//! Creating a PE against a PLS (by id or alias) adds a connection child to the PLS:
//! `Approved` when the PE's subscription is in the PLS `autoApproval` list, else `Pending`.
//! The PE side shows the state of that connection (and `Disconnected` once it is gone).

use serde_json::{Value, json};

use super::network::name_subresources;
use super::props;
use crate::arm::path::ResId;
use crate::arm::{ArmError, Ctx, store, types};
use crate::sim::Simulator;
use crate::state::{ArmResource, State};
use crate::util::{default_field, str_at};

const CONN_LISTS: [&str; 2] = [
    "privateLinkServiceConnections",
    "manualPrivateLinkServiceConnections",
];

pub(crate) fn prepare(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    internal: &mut Value,
    existing: Option<&ArmResource>,
) -> Result<(), ArmError> {
    match rid.spec.rtype {
        types::PLS => pls(ctx, rid, body, internal),
        types::PEC => connection_update(rid, body, existing),
        types::PE => private_endpoint(ctx, rid, body, internal),
        _ => Ok(()),
    }
}

fn pls(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    internal: &mut Value,
) -> Result<(), ArmError> {
    let fes = body
        .pointer("/properties/loadBalancerFrontendIpConfigurations")
        .and_then(Value::as_array);
    if fes.is_none_or(Vec::is_empty) {
        return Err(ArmError::bad_request(
            "PrivateLinkServiceMustHaveLoadBalancerFrontendIpConfigurations",
            "A private link service needs at least one loadBalancerFrontendIpConfigurations entry.",
        ));
    }
    // Each frontend must exist *in the PLS's region*; Azure answers a
    // frontend of a load balancer in another region as a missing reference
    // (`InvalidResourceReference`, message as ARM prints it, seen in a real deployment's
    // output: Azure/ResourceModules#1803).
    let pls_loc = str_at(body, "/location")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace(' ', "");
    let mut fe_vnets = Vec::new();
    for fe in fes.into_iter().flatten() {
        let fe_id = str_at(fe, "/id").unwrap_or_default().to_string();
        let lb_id = fe_id
            .split_once("/frontendIPConfigurations/")
            .map(|(lb, _)| lb.to_ascii_lowercase())
            .unwrap_or_default();
        let lb = ctx.st.arm.get(&lb_id);
        let in_region = lb.is_some_and(|lb| {
            str_at(&lb.body, "/location")
                .unwrap_or_default()
                .to_ascii_lowercase()
                .replace(' ', "")
                == pls_loc
        });
        let fe_body = lb.and_then(|lb| {
            lb.body
                .pointer("/properties/frontendIPConfigurations")
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .find(|f| str_at(f, "/id").is_some_and(|i| i.eq_ignore_ascii_case(&fe_id)))
                })
                .cloned()
        });
        if !in_region || fe_body.is_none() {
            return Err(ArmError::bad_request(
                "InvalidResourceReference",
                format!(
                    "Resource {fe_id} referenced by resource {} was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.",
                    rid.id
                ),
            ));
        }
        if let Some(sub) = fe_body
            .as_ref()
            .and_then(|f| str_at(f, "/properties/subnet/id"))
        {
            fe_vnets.push(vnet_of(sub));
        }
    }
    let ipcs = body
        .pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ipcs.is_empty() {
        return Err(ArmError::bad_request(
            "InvalidRequestFormat",
            "A private link service needs at least one ipConfigurations entry.",
        ));
    }
    for ipc in &ipcs {
        let Some(subnet) = str_at(ipc, "/properties/subnet/id") else {
            return Err(ArmError::bad_request(
                "InvalidRequestFormat",
                "Every ipConfigurations entry needs properties.subnet.id.",
            ));
        };
        // The NAT subnet must be in the load balancer frontend's VNet ("The NAT subnet must
        // be in the same VNet as the ILB (Azure requirement)", HyperShift's
        // `hypershift-operator/controllers/platform/azure/controller.go`). No published
        // error code for this refusal was found: ours is Network's generic
        // `InvalidRequestFormat` (a modelling choice, not a quote).
        if let Some(fe_vnet) = fe_vnets.first()
            && vnet_of(subnet) != *fe_vnet
        {
            return Err(ArmError::bad_request(
                "InvalidRequestFormat",
                format!(
                    "Private link service ip configuration subnet {subnet} must be in the virtual network of the load balancer frontend ip configuration ({fe_vnet})."
                ),
            ));
        }
        if let Some(s) = ctx.st.arm.get(&subnet.to_ascii_lowercase()) {
            let policies = str_at(&s.body, "/properties/privateLinkServiceNetworkPolicies")
                .unwrap_or("Enabled");
            if !policies.eq_ignore_ascii_case("Disabled") {
                return Err(ArmError::bad_request(
                    "PrivateLinkServiceNetworkPoliciesCannotBeEnabledOnPrivateLinkServiceSubnet",
                    format!(
                        "Private link service network policies cannot be enabled on private link service subnet {}.",
                        s.id
                    ),
                ));
            }
        }
    }
    name_subresources(rid, body, "ipConfigurations")?;
    let location = str_at(body, "/location")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace(' ', "");
    if str_at(internal, "/alias").is_none() {
        internal["alias"] = json!(format!(
            "{}.{}.{location}.azure.privatelinkservice",
            rid.name,
            ctx.uuid()
        ));
    }
    if str_at(internal, "/nic").is_none() {
        let nic = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/networkInterfaces/{}.nic.{}",
            rid.sub,
            rid.rg.as_deref().unwrap_or_default(),
            rid.name,
            ctx.uuid()
        );
        internal["nic"] = json!(nic);
    }
    // Addresses of NAT IP configurations are kept across PUTs.
    let mut items = body
        .pointer("/properties/ipConfigurations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, item) in items.iter_mut().enumerate() {
        let name = item
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let subnet = str_at(item, "/properties/subnet/id")
            .unwrap_or_default()
            .to_string();
        let ip = match str_at(item, "/properties/privateIPAddress") {
            Some(ip) => ip.to_string(),
            None => match str_at(internal, &format!("/ips/{name}")) {
                Some(ip) => ip.to_string(),
                None => store::alloc_ip(ctx.st, &subnet),
            },
        };
        crate::util::obj_mut(internal, "ips").insert(name, json!(ip));
        let p = props(item);
        p.insert("privateIPAddress".into(), json!(ip));
        default_field(p, "privateIPAllocationMethod", json!("Dynamic"));
        default_field(p, "privateIPAddressVersion", json!("IPv4"));
        default_field(p, "primary", json!(i == 0));
    }
    let alias = internal["alias"].clone();
    let nic = internal["nic"].clone();
    let p = props(body);
    p.insert("ipConfigurations".into(), Value::Array(items));
    p.remove("privateEndpointConnections");
    p.insert("alias".into(), alias);
    p.insert("networkInterfaces".into(), json!([{ "id": nic }]));
    default_field(p, "visibility", json!({"subscriptions": []}));
    default_field(p, "autoApproval", json!({"subscriptions": []}));
    default_field(p, "fqdns", json!([]));
    default_field(p, "enableProxyProtocol", json!(false));
    Ok(())
}

/// The VNet id of a subnet id, lower-cased.
fn vnet_of(subnet: &str) -> String {
    subnet
        .to_ascii_lowercase()
        .split_once("/subnets/")
        .map(|(v, _)| v.to_string())
        .unwrap_or_default()
}

/// PUT on an existing connection: approve or reject (the connection itself is created by
/// the private endpoint, never by this PUT).
fn connection_update(
    rid: &ResId,
    body: &mut Value,
    existing: Option<&ArmResource>,
) -> Result<(), ArmError> {
    let Some(e) = existing else {
        return Err(ArmError::new(
            404,
            "NotFound",
            format!(
                "Private endpoint connection '{}' does not exist; connections are created by private endpoints.",
                rid.name
            ),
        ));
    };
    let status = str_at(body, "/properties/privateLinkServiceConnectionState/status")
        .unwrap_or_default()
        .to_string();
    let canonical = ["Approved", "Rejected", "Pending"]
        .into_iter()
        .find(|s| s.eq_ignore_ascii_case(&status));
    let Some(status) = canonical else {
        return Err(ArmError::bad_request(
            "InvalidPrivateEndpointConnectionStatus",
            format!(
                "'{status}' is not a valid private link service connection status (Approved, Rejected, Pending)."
            ),
        ));
    };
    let description = str_at(
        body,
        "/properties/privateLinkServiceConnectionState/description",
    )
    .unwrap_or_default()
    .to_string();
    let actions = str_at(
        body,
        "/properties/privateLinkServiceConnectionState/actionsRequired",
    )
    .unwrap_or("None")
    .to_string();
    let mut stored = e.body.clone();
    props(&mut stored).insert(
        "privateLinkServiceConnectionState".into(),
        json!({"status": status, "description": description, "actionsRequired": actions}),
    );
    *body = stored;
    Ok(())
}

/// Resolves a `privateLinkServiceId` (resource id or alias) to the PLS key.
fn resolve_pls(st: &State, target: &str) -> Option<String> {
    if target.starts_with('/') {
        let k = target.to_ascii_lowercase();
        st.arm.get(&k).filter(|r| r.rtype == types::PLS).map(|_| k)
    } else {
        store::of_type(st, types::PLS)
            .into_iter()
            .find(|p| str_at(&p.internal, "/alias").is_some_and(|a| a.eq_ignore_ascii_case(target)))
            .map(|p| p.id.to_ascii_lowercase())
    }
}

fn private_endpoint(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    internal: &mut Value,
) -> Result<(), ArmError> {
    let Some(subnet) = str_at(body, "/properties/subnet/id").map(str::to_string) else {
        return Err(ArmError::bad_request(
            "InvalidRequestFormat",
            "A private endpoint needs properties.subnet.id.",
        ));
    };
    let mut total = 0;
    let mut resolved = serde_json::Map::new();
    for list in CONN_LISTS {
        let mut items = body
            .pointer(&format!("/properties/{list}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, item) in items.iter_mut().enumerate() {
            total += 1;
            let Some(target) = str_at(item, "/properties/privateLinkServiceId").map(str::to_string)
            else {
                return Err(ArmError::bad_request(
                    "InvalidRequestFormat",
                    format!("{list}[{i}] needs properties.privateLinkServiceId."),
                ));
            };
            let Some(pls_key) = resolve_pls(ctx.st, &target) else {
                return Err(ArmError::bad_request(
                    "PrivateLinkServiceNotFound",
                    format!(
                        "The private link service '{target}' referenced by private endpoint {} was not found (by id or alias).",
                        rid.id
                    ),
                ));
            };
            let name = item
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}-{list}-{i}", rid.name));
            resolved.insert(name.clone(), json!(pls_key));
            item["name"] = json!(name);
            item["id"] = json!(format!("{}/{list}/{name}", rid.id));
            item["type"] =
                json!("Microsoft.Network/privateEndpoints/privateLinkServiceConnections");
            let p = props(item);
            default_field(p, "groupIds", json!([]));
            default_field(p, "requestMessage", json!(""));
            p.remove("privateLinkServiceConnectionState");
        }
        props(body).insert(list.to_string(), Value::Array(items));
    }
    if total == 0 {
        return Err(ArmError::bad_request(
            "InvalidRequestFormat",
            "A private endpoint needs a privateLinkServiceConnections or manualPrivateLinkServiceConnections entry.",
        ));
    }
    internal["pls"] = Value::Object(resolved);
    if str_at(internal, "/nic").is_none() {
        let nic_name = str_at(body, "/properties/customNetworkInterfaceName")
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}.nic.{}", rid.name, ctx.uuid()));
        internal["nic"] = json!(format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/networkInterfaces/{nic_name}",
            rid.sub,
            rid.rg.as_deref().unwrap_or_default()
        ));
    }
    if str_at(internal, "/ip").is_none() {
        let fixed = str_at(
            body,
            "/properties/ipConfigurations/0/properties/privateIPAddress",
        )
        .map(str::to_string);
        let ip = fixed.unwrap_or_else(|| store::alloc_ip(ctx.st, &subnet));
        internal["ip"] = json!(ip);
    }
    let nic = internal["nic"].clone();
    let p = props(body);
    p.insert("networkInterfaces".into(), json!([{ "id": nic }]));
    default_field(p, "applicationSecurityGroups", json!([]));
    default_field(p, "ipConfigurations", json!([]));
    default_field(p, "customDnsConfigs", json!([]));
    Ok(())
}

/// After a PE is stored: its NIC exists, and each PLS it targets has a connection for it
/// (connections to PLSs it no longer targets are removed).
pub(crate) fn after_pe_put(ctx: &mut Ctx<'_>, rid: &ResId) -> Result<(), ArmError> {
    let Some(pe) = ctx.st.arm.get(&rid.key()).cloned() else {
        return Ok(());
    };
    let pe_key = rid.key();
    let location = str_at(&pe.body, "/location")
        .unwrap_or_default()
        .to_string();
    let targets: Vec<String> = pe
        .internal
        .get("pls")
        .and_then(Value::as_object)
        .map(|m| {
            m.values()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    // Drop connections this PE no longer asks for.
    let stale: Vec<String> = store::of_type(ctx.st, types::PEC)
        .into_iter()
        .filter(|c| {
            str_at(&c.body, "/properties/privateEndpoint/id")
                .is_some_and(|i| i.eq_ignore_ascii_case(&pe_key))
                && !targets.contains(&c.parent)
        })
        .map(|c| c.id.to_ascii_lowercase())
        .collect();
    for k in stale {
        ctx.st.arm.remove(&k);
    }
    for pls_key in targets {
        let exists = store::children(ctx.st, &pls_key, types::PEC)
            .iter()
            .any(|c| {
                str_at(&c.body, "/properties/privateEndpoint/id")
                    .is_some_and(|i| i.eq_ignore_ascii_case(&pe_key))
            });
        if exists {
            continue;
        }
        let Some(pls) = ctx.st.arm.get(&pls_key).cloned() else {
            continue;
        };
        let auto = pls
            .body
            .pointer("/properties/autoApproval/subscriptions")
            .and_then(Value::as_array)
            .is_some_and(|subs| {
                subs.iter()
                    .filter_map(Value::as_str)
                    .any(|s| s == "*" || s.eq_ignore_ascii_case(&rid.sub))
            });
        let (status, description) = if auto {
            ("Approved", "Auto-Approved")
        } else {
            ("Pending", "Awaiting approval")
        };
        let name = format!("{}.{}", rid.name, ctx.uuid());
        let id = format!("{}/privateEndpointConnections/{name}", pls.id);
        let link = (ctx.st.rng_draws % 1_000_000_000) + 536_870_912;
        let body = json!({
            "properties": {
                "privateEndpoint": {"id": pe.id},
                "privateLinkServiceConnectionState": {"status": status, "description": description, "actionsRequired": "None"},
                "linkIdentifier": link.to_string(),
                "privateEndpointLocation": location,
            }
        });
        store::insert_internal(ctx.sim, ctx.st, ctx.now, &id, types::PEC, &pls.id, body);
    }
    // The NIC Azure creates for the endpoint.
    if let Some(nic_id) = str_at(&pe.internal, "/nic").map(str::to_string) {
        let ip = str_at(&pe.internal, "/ip").unwrap_or_default().to_string();
        let subnet = str_at(&pe.body, "/properties/subnet/id")
            .unwrap_or_default()
            .to_string();
        let cfg_name = format!("privateEndpointIpConfig.{}", ctx.uuid());
        let body = json!({
            "location": location,
            "properties": {
                "ipConfigurations": [{
                    "name": cfg_name,
                    "id": format!("{nic_id}/ipConfigurations/{cfg_name}"),
                    "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                    "properties": {
                        "privateIPAddress": ip,
                        "privateIPAllocationMethod": "Dynamic",
                        "privateIPAddressVersion": "IPv4",
                        "subnet": {"id": subnet},
                        "primary": true,
                    }
                }],
                "privateEndpoint": {"id": pe.id},
                "nicType": "Standard",
                "enableIPForwarding": false,
                "enableAcceleratedNetworking": false,
            }
        });
        let rg_id = rid.rg_id().unwrap_or_default();
        if !ctx.st.arm.contains_key(&nic_id.to_ascii_lowercase()) {
            store::insert_internal(ctx.sim, ctx.st, ctx.now, &nic_id, types::NIC, &rg_id, body);
        }
    }
    Ok(())
}

/// Whether a connection prevents deleting its PLS.
pub(crate) fn connection_blocks(sim: &Simulator, c: &ArmResource) -> bool {
    let status = str_at(
        &c.body,
        "/properties/privateLinkServiceConnectionState/status",
    )
    .unwrap_or_default();
    !status.eq_ignore_ascii_case("Rejected") || sim.config().rejected_connection_blocks_pls_delete
}

/// The PLS (key) fronting a frontend of this load balancer, if any.
pub(crate) fn pls_referencing_lb(st: &State, lb_key: &str) -> Option<String> {
    pls_referencing(st, &format!("{lb_key}/frontendipconfigurations/"))
}

/// The PLS (lower-cased id) in front of one frontend (`fe_key`, lower-cased), if any.
pub(crate) fn pls_referencing_frontend(st: &State, fe_key: &str) -> Option<String> {
    pls_referencing(st, fe_key)
}

fn pls_referencing(st: &State, prefix: &str) -> Option<String> {
    store::of_type(st, types::PLS)
        .into_iter()
        .find(|p| {
            crate::util::mentions_prefix(
                p.body
                    .pointer("/properties/loadBalancerFrontendIpConfigurations")
                    .unwrap_or(&Value::Null),
                prefix,
            )
        })
        .map(|p| p.id.to_ascii_lowercase())
}

pub(crate) fn pls_has_connections(id: &str) -> ArmError {
    ArmError::bad_request(
        "PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted",
        format!(
            "Private link service {id} has private endpoint connections and cannot be deleted. Delete the connections first."
        ),
    )
}

pub(crate) fn lb_in_use(id: &str) -> ArmError {
    ArmError::bad_request(
        "CannotDeleteLoadBalancerWithPrivateLinkService",
        format!(
            "Load balancer {id} cannot be deleted because it is referenced by a private link service."
        ),
    )
}

pub(crate) fn pre_delete(ctx: &mut Ctx<'_>, res: &ArmResource) -> Result<(), ArmError> {
    let key = res.id.to_ascii_lowercase();
    match res.rtype.as_str() {
        types::LB if pls_referencing_lb(ctx.st, &key).is_some() => Err(lb_in_use(&res.id)),
        types::PLS => {
            let blocking = store::children(ctx.st, &key, types::PEC)
                .into_iter()
                .any(|c| connection_blocks(ctx.sim, c));
            if blocking {
                Err(pls_has_connections(&res.id))
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// Connection state the PE side shows for its connection to `pls_key`.
pub(crate) fn pe_side_state(st: &State, pe_key: &str, pls_key: &str) -> Value {
    store::children(st, pls_key, types::PEC)
        .into_iter()
        .find(|c| str_at(&c.body, "/properties/privateEndpoint/id").is_some_and(|i| i.eq_ignore_ascii_case(pe_key)))
        .and_then(|c| c.body.pointer("/properties/privateLinkServiceConnectionState").cloned())
        .unwrap_or_else(|| {
            json!({"status": "Disconnected", "description": "The private link service connection was removed.", "actionsRequired": "None"})
        })
}
