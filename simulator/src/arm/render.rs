//! Response bodies: the stored body plus envelope fields, provisioning states, children
//! and cross references computed from the current state.

use serde_json::{Value, json};

use super::prepare::{privatelink, props};
use super::{store, types};
use crate::sim::Simulator;
use crate::state::{ArmResource, Prov, State};
use crate::util::str_at;

/// Sub-resource arrays whose elements carry their parent's etag and provisioning state.
const SUBRESOURCE_ARRAYS: &[(&str, &[&str])] = &[
    (
        types::LB,
        &[
            "frontendIPConfigurations",
            "backendAddressPools",
            "loadBalancingRules",
            "probes",
            "inboundNatRules",
            "inboundNatPools",
            "outboundRules",
        ],
    ),
    (types::NSG, &["securityRules", "defaultSecurityRules"]),
    (types::PLS, &["ipConfigurations"]),
    (types::NIC, &["ipConfigurations"]),
    (
        types::PE,
        &[
            "privateLinkServiceConnections",
            "manualPrivateLinkServiceConnections",
        ],
    ),
];

/// Renders a stored resource as ARM returns it.
pub(crate) fn render(sim: &Simulator, st: &State, r: &ArmResource, expand_nics: bool) -> Value {
    let spec = types::lookup(&r.rtype);
    let mut v = r.body.clone();
    let Value::Object(_) = &v else { return v };
    v["id"] = json!(r.id);
    v["name"] = json!(r.name);
    v["type"] = json!(r.rtype);
    if spec.is_some_and(|s| s.etag) {
        v["etag"] = json!(r.etag);
    }
    let has_prov = spec.is_some_and(|s| s.has_prov);
    if has_prov {
        props(&mut v).insert("provisioningState".into(), json!(r.prov.as_str()));
    }
    let sub_prov = if r.prov == Prov::Deleting {
        Prov::Deleting
    } else {
        r.prov
    };
    if let Some((_, arrays)) = SUBRESOURCE_ARRAYS.iter().find(|(t, _)| *t == r.rtype) {
        for arr in *arrays {
            if let Some(items) = v
                .pointer_mut(&format!("/properties/{arr}"))
                .and_then(Value::as_array_mut)
            {
                for item in items {
                    if *arr != "defaultSecurityRules" {
                        item["etag"] = json!(r.etag);
                    }
                    props(item).insert("provisioningState".into(), json!(sub_prov.as_str()));
                }
            }
        }
    }
    let key = r.id.to_ascii_lowercase();
    match r.rtype.as_str() {
        types::VNET => {
            let subnets: Vec<Value> = store::children(st, &key, types::SUBNET)
                .iter()
                .map(|s| render(sim, st, s, false))
                .collect();
            props(&mut v).insert("subnets".into(), Value::Array(subnets));
        }
        types::SUBNET => subnet_refs(st, &key, &mut v),
        types::NSG => {
            let subnets: Vec<Value> = store::of_type(st, types::SUBNET)
                .into_iter()
                .filter(|s| {
                    str_at(&s.body, "/properties/networkSecurityGroup/id")
                        .is_some_and(|i| i.eq_ignore_ascii_case(&key))
                })
                .map(|s| json!({"id": s.id}))
                .collect();
            if !subnets.is_empty() {
                props(&mut v).insert("subnets".into(), Value::Array(subnets));
            }
        }
        types::PIP => {
            let fe = store::of_type(st, types::LB).into_iter().find_map(|lb| {
                lb.body
                    .pointer("/properties/frontendIPConfigurations")
                    .and_then(Value::as_array)
                    .and_then(|fes| {
                        fes.iter()
                            .find(|f| {
                                str_at(f, "/properties/publicIPAddress/id")
                                    .is_some_and(|i| i.eq_ignore_ascii_case(&key))
                            })
                            .and_then(|f| f.get("id").cloned())
                    })
            });
            if let Some(id) = fe {
                props(&mut v).insert("ipConfiguration".into(), json!({ "id": id }));
            }
        }
        types::PLS => {
            let conns: Vec<Value> = store::children(st, &key, types::PEC)
                .iter()
                .map(|c| render(sim, st, c, false))
                .collect();
            props(&mut v).insert("privateEndpointConnections".into(), Value::Array(conns));
        }
        types::PE => private_endpoint(sim, st, r, &key, &mut v, expand_nics),
        types::ZONE => {
            let records = store::children(st, &key, types::AREC).len();
            let links = store::children(st, &key, types::LINK);
            let with_reg = links
                .iter()
                .filter(|l| l.body.pointer("/properties/registrationEnabled") == Some(&json!(true)))
                .count();
            let p = props(&mut v);
            // +1: the SOA record every zone has.
            p.insert("numberOfRecordSets".into(), json!(records + 1));
            p.insert("numberOfVirtualNetworkLinks".into(), json!(links.len()));
            p.insert(
                "numberOfVirtualNetworkLinksWithRegistration".into(),
                json!(with_reg),
            );
        }
        types::PUBLIC_ZONE => {
            let records = store::children(st, &key, types::PUBLIC_AREC).len();
            // +2: the SOA and NS record sets every public zone has.
            props(&mut v).insert("numberOfRecordSets".into(), json!(records + 2));
        }
        types::PUBLIC_AREC => {
            let zone = r.parent.rsplit('/').next().unwrap_or_default();
            let fqdn = if r.name == "@" {
                format!("{zone}.")
            } else {
                format!("{}.{zone}.", r.name)
            };
            props(&mut v).insert("fqdn".into(), json!(fqdn));
        }
        types::LINK => {
            let state = if r.prov == Prov::Succeeded {
                "Completed"
            } else {
                "InProgress"
            };
            props(&mut v).insert("virtualNetworkLinkState".into(), json!(state));
        }
        types::AREC => {
            let zone = r.parent.rsplit('/').next().unwrap_or_default();
            let fqdn = if r.name == "@" {
                format!("{zone}.")
            } else {
                format!("{}.{zone}.", r.name)
            };
            props(&mut v).insert("fqdn".into(), json!(fqdn));
        }
        _ => {}
    }
    v
}

/// `ipConfigurations` and `privateEndpoints` of a subnet: what uses it.
fn subnet_refs(st: &State, key: &str, v: &mut Value) {
    let mut ipcs = Vec::new();
    let mut pes = Vec::new();
    for r in st.arm.values() {
        let arrays: &[&str] = match r.rtype.as_str() {
            types::LB => &["frontendIPConfigurations"],
            types::NIC | types::PLS => &["ipConfigurations"],
            types::PE => {
                if str_at(&r.body, "/properties/subnet/id")
                    .is_some_and(|i| i.eq_ignore_ascii_case(key))
                {
                    pes.push(json!({"id": r.id}));
                }
                &[]
            }
            _ => &[],
        };
        for arr in arrays {
            if let Some(items) = r
                .body
                .pointer(&format!("/properties/{arr}"))
                .and_then(Value::as_array)
            {
                for it in items {
                    if str_at(it, "/properties/subnet/id")
                        .is_some_and(|i| i.eq_ignore_ascii_case(key))
                        && let Some(id) = it.get("id")
                    {
                        ipcs.push(json!({ "id": id }));
                    }
                }
            }
        }
    }
    let p = props(v);
    if !ipcs.is_empty() {
        p.insert("ipConfigurations".into(), Value::Array(ipcs));
    }
    if !pes.is_empty() {
        p.insert("privateEndpoints".into(), Value::Array(pes));
    }
}

fn private_endpoint(
    sim: &Simulator,
    st: &State,
    r: &ArmResource,
    key: &str,
    v: &mut Value,
    expand_nics: bool,
) {
    let ip = str_at(&r.internal, "/ip").unwrap_or_default().to_string();
    let mut fqdns = Vec::new();
    for list in [
        "privateLinkServiceConnections",
        "manualPrivateLinkServiceConnections",
    ] {
        if let Some(items) = v
            .pointer_mut(&format!("/properties/{list}"))
            .and_then(Value::as_array_mut)
        {
            for item in items {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let pls_key = str_at(&r.internal, &format!("/pls/{name}"))
                    .unwrap_or_default()
                    .to_string();
                let state = privatelink::pe_side_state(st, key, &pls_key);
                props(item).insert("privateLinkServiceConnectionState".into(), state);
                if let Some(pls) = st.arm.get(&pls_key)
                    && let Some(f) = pls
                        .body
                        .pointer("/properties/fqdns")
                        .and_then(Value::as_array)
                {
                    fqdns.extend(f.iter().filter_map(Value::as_str).map(str::to_string));
                }
            }
        }
    }
    // Azure lists a custom DNS config per FQDN the service publishes; a PLS without FQDNs
    // yields none, and clients read the address from the NIC instead.
    if !fqdns.is_empty() {
        let configs: Vec<Value> = fqdns
            .iter()
            .map(|f| json!({"fqdn": f, "ipAddresses": [ip]}))
            .collect();
        props(v).insert("customDnsConfigs".into(), Value::Array(configs));
    }
    if expand_nics
        && let Some(nic) =
            str_at(&r.internal, "/nic").and_then(|n| st.arm.get(&n.to_ascii_lowercase()))
    {
        props(v).insert(
            "networkInterfaces".into(),
            json!([render(sim, st, nic, false)]),
        );
    }
}
