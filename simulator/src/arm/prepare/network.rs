//! NSGs, VNets and subnets, public IPs, load balancers, NICs.

use serde_json::{Value, json};

use super::props;
use crate::arm::path::ResId;
use crate::arm::{ArmError, Ctx, store, types};
use crate::state::{ArmResource, Prov};
use crate::util::{self, default_field, str_at};

pub(crate) fn prepare(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    internal: &mut Value,
    existing: Option<&ArmResource>,
) -> Result<(), ArmError> {
    let guid = existing
        .and_then(|e| str_at(&e.body, "/properties/resourceGuid").map(str::to_string))
        .unwrap_or_else(|| ctx.uuid());
    match rid.spec.rtype {
        types::NSG => {
            name_subresources(rid, body, "securityRules")?;
            let p = props(body);
            default_field(p, "securityRules", json!([]));
            default_field(p, "flushConnection", json!(false));
            p.insert("defaultSecurityRules".into(), default_rules(&rid.id));
            p.insert("resourceGuid".into(), json!(guid));
        }
        types::VNET => {
            if body
                .pointer("/properties/addressSpace/addressPrefixes")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                return Err(ArmError::bad_request(
                    "InvalidRequestFormat",
                    "Cannot parse the request: properties.addressSpace.addressPrefixes is required.",
                ));
            }
            // The subnets in the body are validated here and stored as child resources by
            // `sync_subnets`; a PUT without them means "no subnets" (create-or-replace).
            let wanted: Vec<String> = subnet_list(body)
                .iter()
                .map(|s| {
                    s.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_ascii_lowercase()
                })
                .collect();
            if wanted.iter().any(String::is_empty) {
                return Err(ArmError::bad_request(
                    "InvalidRequestFormat",
                    "Every subnet needs a name.",
                ));
            }
            let key = rid.key();
            for s in store::children(ctx.st, &key, types::SUBNET) {
                if !wanted.contains(&s.name.to_ascii_lowercase())
                    && subnet_used(ctx, &s.id.to_ascii_lowercase())
                {
                    return Err(subnet_in_use(&s.id));
                }
            }
            let p = props(body);
            default_field(p, "virtualNetworkPeerings", json!([]));
            default_field(p, "enableDdosProtection", json!(false));
            p.insert("resourceGuid".into(), json!(guid));
        }
        types::SUBNET => subnet_defaults(body)?,
        types::PIP => {
            let sku = str_at(body, "/sku/name").unwrap_or("Basic").to_string();
            let sku_obj = util::obj_mut(body, "sku");
            default_field(sku_obj, "name", json!(sku));
            default_field(sku_obj, "tier", json!("Regional"));
            let method = if sku.eq_ignore_ascii_case("Standard") {
                "Static"
            } else {
                "Dynamic"
            };
            let p = props(body);
            default_field(p, "publicIPAllocationMethod", json!(method));
            default_field(p, "publicIPAddressVersion", json!("IPv4"));
            default_field(p, "idleTimeoutInMinutes", json!(4));
            default_field(p, "ipTags", json!([]));
            default_field(
                p,
                "ddosSettings",
                json!({"protectionMode": "VirtualNetworkInherited"}),
            );
            p.insert("resourceGuid".into(), json!(guid));
            let is_static =
                p.get("publicIPAllocationMethod").and_then(Value::as_str) == Some("Static");
            if is_static {
                let ip = match str_at(internal, "/ip") {
                    Some(ip) => ip.to_string(),
                    None => {
                        // Documentation range (RFC 5737) so simulated public IPs never collide
                        // with real ones.
                        let n = ctx.st.ip_next.entry("_public".into()).or_insert(1);
                        let ip = format!("203.0.113.{}", *n % 254 + 1);
                        *n += 1;
                        ip
                    }
                };
                internal["ip"] = json!(ip);
                props(body).insert("ipAddress".into(), json!(ip));
            }
        }
        types::LB => load_balancer(ctx, rid, body, existing, &guid)?,
        types::NIC => {
            name_subresources(rid, body, "ipConfigurations")?;
        }
        _ => {}
    }
    Ok(())
}

fn subnet_list(body: &Value) -> Vec<Value> {
    body.pointer("/properties/subnets")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn subnet_defaults(body: &mut Value) -> Result<(), ArmError> {
    let p = props(body);
    if p.get("addressPrefix").is_none() && p.get("addressPrefixes").is_none() {
        return Err(ArmError::bad_request(
            "InvalidRequestFormat",
            "A subnet needs properties.addressPrefix.",
        ));
    }
    default_field(p, "privateEndpointNetworkPolicies", json!("Disabled"));
    default_field(p, "privateLinkServiceNetworkPolicies", json!("Enabled"));
    Ok(())
}

/// Gives every element of `properties.<arr>` its id and type (names are required).
pub(crate) fn name_subresources(rid: &ResId, body: &mut Value, arr: &str) -> Result<(), ArmError> {
    let Some(items) = body
        .pointer_mut(&format!("/properties/{arr}"))
        .and_then(Value::as_array_mut)
    else {
        return Ok(());
    };
    for item in items {
        let Some(name) = item.get("name").and_then(Value::as_str).map(str::to_string) else {
            return Err(ArmError::bad_request(
                "InvalidRequestFormat",
                format!("Every element of properties.{arr} needs a name."),
            ));
        };
        item["id"] = json!(format!("{}/{arr}/{name}", rid.id));
        item["type"] = json!(format!("{}/{arr}", rid.spec.rtype));
        props(item);
    }
    Ok(())
}

fn default_rules(nsg_id: &str) -> Value {
    let rule = |name: &str,
                desc: &str,
                src: &str,
                dst: &str,
                access: &str,
                prio: u32,
                dir: &str| {
        json!({
            "name": name,
            "id": format!("{nsg_id}/defaultSecurityRules/{name}"),
            "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
            "properties": {
                "description": desc, "protocol": "*", "sourcePortRange": "*", "destinationPortRange": "*",
                "sourceAddressPrefix": src, "destinationAddressPrefix": dst, "access": access,
                "priority": prio, "direction": dir,
                "sourcePortRanges": [], "destinationPortRanges": [],
                "sourceAddressPrefixes": [], "destinationAddressPrefixes": [],
            }
        })
    };
    json!([
        rule(
            "AllowVnetInBound",
            "Allow inbound traffic from all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Inbound"
        ),
        rule(
            "AllowAzureLoadBalancerInBound",
            "Allow inbound traffic from azure load balancer",
            "AzureLoadBalancer",
            "*",
            "Allow",
            65001,
            "Inbound"
        ),
        rule(
            "DenyAllInBound",
            "Deny all inbound traffic",
            "*",
            "*",
            "Deny",
            65500,
            "Inbound"
        ),
        rule(
            "AllowVnetOutBound",
            "Allow outbound traffic from all VMs to all VMs in VNET",
            "VirtualNetwork",
            "VirtualNetwork",
            "Allow",
            65000,
            "Outbound"
        ),
        rule(
            "AllowInternetOutBound",
            "Allow outbound traffic from all VMs to Internet",
            "*",
            "Internet",
            "Allow",
            65001,
            "Outbound"
        ),
        rule(
            "DenyAllOutBound",
            "Deny all outbound traffic",
            "*",
            "*",
            "Deny",
            65500,
            "Outbound"
        ),
    ])
}

const LB_ARRAYS: [&str; 7] = [
    "frontendIPConfigurations",
    "backendAddressPools",
    "loadBalancingRules",
    "probes",
    "inboundNatRules",
    "inboundNatPools",
    "outboundRules",
];

fn load_balancer(
    ctx: &mut Ctx<'_>,
    rid: &ResId,
    body: &mut Value,
    existing: Option<&ArmResource>,
    guid: &str,
) -> Result<(), ArmError> {
    for arr in LB_ARRAYS {
        name_subresources(rid, body, arr)?;
        default_field(props(body), arr, json!([]));
    }
    let sku = util::obj_mut(body, "sku");
    default_field(sku, "name", json!("Basic"));
    default_field(sku, "tier", json!("Regional"));
    props(body).insert("resourceGuid".into(), json!(guid));
    // Private frontends keep their address across PUTs; new ones get the next free one.
    let old_ips: Vec<(String, String)> = existing
        .and_then(|e| {
            e.body
                .pointer("/properties/frontendIPConfigurations")
                .and_then(Value::as_array)
                .cloned()
        })
        .unwrap_or_default()
        .iter()
        .filter_map(|f| {
            Some((
                f.get("name")?.as_str()?.to_string(),
                str_at(f, "/properties/privateIPAddress")?.to_string(),
            ))
        })
        .collect();
    let fes = body
        .pointer("/properties/frontendIPConfigurations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut new_fes = Vec::new();
    for mut fe in fes {
        let name = fe
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let subnet = str_at(&fe, "/properties/subnet/id").map(str::to_string);
        let p = props(&mut fe);
        default_field(p, "privateIPAllocationMethod", json!("Dynamic"));
        default_field(p, "privateIPAddressVersion", json!("IPv4"));
        if let Some(subnet) = subnet
            && p.get("privateIPAddress").is_none()
        {
            let ip = match old_ips.iter().find(|(n, _)| *n == name) {
                Some((_, ip)) => ip.clone(),
                None => store::alloc_ip(ctx.st, &subnet),
            };
            props(&mut fe).insert("privateIPAddress".into(), json!(ip));
        }
        new_fes.push(fe);
    }
    props(body).insert("frontendIPConfigurations".into(), Value::Array(new_fes));
    for (arr, defaults) in [
        (
            "loadBalancingRules",
            json!({"enableTcpReset": false, "idleTimeoutInMinutes": 4, "enableFloatingIP": false, "loadDistribution": "Default", "disableOutboundSnat": false}),
        ),
        (
            "inboundNatRules",
            json!({"enableTcpReset": false, "idleTimeoutInMinutes": 4, "enableFloatingIP": false}),
        ),
        (
            "outboundRules",
            json!({"enableTcpReset": false, "idleTimeoutInMinutes": 4, "allocatedOutboundPorts": 0}),
        ),
        (
            "probes",
            json!({"intervalInSeconds": 15, "numberOfProbes": 2, "probeThreshold": 1}),
        ),
    ] {
        if let Some(items) = body
            .pointer_mut(&format!("/properties/{arr}"))
            .and_then(Value::as_array_mut)
        {
            for item in items {
                let p = props(item);
                if let Value::Object(d) = &defaults {
                    for (k, v) in d {
                        default_field(p, k, v.clone());
                    }
                }
            }
        }
    }
    back_references(body);
    Ok(())
}

/// Fills the read-only cross references inside a load balancer (which rules use a
/// frontend, pool or probe), as Azure reports them.
fn back_references(body: &mut Value) {
    let arr = |b: &Value, a: &str| {
        b.pointer(&format!("/properties/{a}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let rules = arr(body, "loadBalancingRules");
    let nats = arr(body, "inboundNatRules");
    let outs = arr(body, "outboundRules");
    let refs = |items: &[Value], ptrs: &[&str], target: &str| -> Vec<Value> {
        items
            .iter()
            .filter(|it| {
                ptrs.iter().any(|p| match it.pointer(p) {
                    Some(Value::Array(a)) => a
                        .iter()
                        .any(|x| str_at(x, "/id").is_some_and(|i| i.eq_ignore_ascii_case(target))),
                    Some(v) => str_at(v, "/id").is_some_and(|i| i.eq_ignore_ascii_case(target)),
                    None => false,
                })
            })
            .filter_map(|it| it.get("id").cloned().map(|id| json!({ "id": id })))
            .collect()
    };
    let fill = |body: &mut Value, a: &str, sets: &[(&str, &[Value], &[&str])]| {
        if let Some(items) = body
            .pointer_mut(&format!("/properties/{a}"))
            .and_then(Value::as_array_mut)
        {
            for item in items.iter_mut() {
                let id = item
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                for (field, src, ptrs) in sets {
                    let r = refs(src, ptrs, &id);
                    let p = props(item);
                    if r.is_empty() {
                        p.remove(*field);
                    } else {
                        p.insert((*field).to_string(), Value::Array(r));
                    }
                }
            }
        }
    };
    let fe_ptr: &[&str] = &["/properties/frontendIPConfiguration"];
    let fe_ptrs_out: &[&str] = &["/properties/frontendIPConfigurations"];
    let pool_ptrs: &[&str] = &[
        "/properties/backendAddressPool",
        "/properties/backendAddressPools",
    ];
    let probe_ptr: &[&str] = &["/properties/probe"];
    fill(
        body,
        "frontendIPConfigurations",
        &[
            ("loadBalancingRules", &rules, fe_ptr),
            ("inboundNatRules", &nats, fe_ptr),
            ("outboundRules", &outs, fe_ptrs_out),
        ],
    );
    fill(
        body,
        "backendAddressPools",
        &[
            ("loadBalancingRules", &rules, pool_ptrs),
            ("outboundRules", &outs, pool_ptrs),
        ],
    );
    fill(body, "probes", &[("loadBalancingRules", &rules, probe_ptr)]);
}

/// Stores the subnets of a VNet PUT as child resources and removes the ones it dropped
/// (their being unused was checked in `prepare`).
pub(crate) fn sync_subnets(ctx: &mut Ctx<'_>, rid: &ResId) -> Result<(), ArmError> {
    let key = rid.key();
    let Some(vnet) = ctx.st.arm.get_mut(&key) else {
        return Ok(());
    };
    let subnets = vnet
        .body
        .pointer_mut("/properties")
        .and_then(Value::as_object_mut)
        .and_then(|p| p.remove("subnets"))
        .and_then(|s| s.as_array().cloned())
        .unwrap_or_default();
    let vnet_id = vnet.id.clone();
    let prov = vnet.prov;
    let mut keep = Vec::new();
    for mut s in subnets {
        let name = s
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Value::Object(o) = &mut s {
            for k in ["id", "name", "type", "etag"] {
                o.remove(k);
            }
        }
        subnet_defaults(&mut s)?;
        let id = format!("{vnet_id}/subnets/{name}");
        let skey = id.to_ascii_lowercase();
        keep.push(skey.clone());
        let (seq, created, id) = match ctx.st.arm.get(&skey) {
            Some(e) => (e.created_seq, e.created_ms, e.id.clone()),
            None => (ctx.st.next_seq(), ctx.now, id),
        };
        let etag = format!("W/\"{}\"", ctx.uuid());
        ctx.st.arm.insert(
            skey,
            ArmResource {
                id,
                rtype: types::SUBNET.to_string(),
                name,
                parent: key.clone(),
                body: s,
                etag,
                prov: if prov == Prov::Succeeded {
                    Prov::Succeeded
                } else {
                    Prov::Updating
                },
                created_seq: seq,
                created_ms: created,
                op: None,
                internal: Value::Null,
            },
        );
    }
    let drop: Vec<String> = store::children(ctx.st, &key, types::SUBNET)
        .iter()
        .map(|s| s.id.to_ascii_lowercase())
        .filter(|k| !keep.contains(k))
        .collect();
    for k in drop {
        store::remove_tree(ctx.st, &k);
    }
    Ok(())
}

/// Whether anything other than the subnet itself references it.
fn subnet_used(ctx: &Ctx<'_>, subnet_key: &str) -> bool {
    let prefix = format!("{subnet_key}/");
    ctx.st.arm.iter().any(|(k, r)| {
        k != subnet_key && !k.starts_with(&prefix) && util::mentions(&r.body, subnet_key)
    })
}

pub(crate) fn subnet_in_use(id: &str) -> ArmError {
    ArmError::bad_request(
        "InUseSubnetCannotBeDeleted",
        format!(
            "Subnet {id} is in use and cannot be deleted. In order to delete the subnet, delete all the resources within the subnet."
        ),
    )
}

pub(crate) fn pre_delete(ctx: &mut Ctx<'_>, res: &ArmResource) -> Result<(), ArmError> {
    let key = res.id.to_ascii_lowercase();
    match res.rtype.as_str() {
        types::SUBNET if subnet_used(ctx, &key) => return Err(subnet_in_use(&res.id)),
        types::VNET => {
            for s in store::children(ctx.st, &key, types::SUBNET) {
                if subnet_used(ctx, &s.id.to_ascii_lowercase()) {
                    return Err(subnet_in_use(&s.id));
                }
            }
        }
        types::NSG => {
            let used = store::of_type(ctx.st, types::SUBNET).into_iter().find(|s| {
                str_at(&s.body, "/properties/networkSecurityGroup/id")
                    .is_some_and(|i| i.eq_ignore_ascii_case(&key))
            });
            if let Some(s) = used {
                return Err(ArmError::bad_request(
                    "InUseNetworkSecurityGroupCannotBeDeleted",
                    format!(
                        "Network security group {} cannot be deleted because it is in use by the following resources: {}.",
                        res.id, s.id
                    ),
                ));
            }
        }
        types::PIP => {
            let used = store::of_type(ctx.st, types::LB)
                .into_iter()
                .find(|lb| util::mentions(&lb.body, &key));
            if let Some(lb) = used {
                return Err(ArmError::bad_request(
                    "PublicIPAddressCannotBeDeleted",
                    format!(
                        "Public IP address {} can not be deleted since it is still allocated to resource {}.",
                        res.id, lb.id
                    ),
                ));
            }
        }
        _ => {}
    }
    Ok(())
}
