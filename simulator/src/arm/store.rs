//! Lookups over stored ARM resources, cascading removal, private IP allocation.

use serde_json::{Value, json};

use super::types;
use crate::sim::Simulator;
use crate::state::{ArmResource, Prov, State};
use crate::util;

/// Resources of `rtype` whose parent is `parent_key`, in creation order.
pub(crate) fn children<'a>(st: &'a State, parent_key: &str, rtype: &str) -> Vec<&'a ArmResource> {
    let mut v: Vec<&ArmResource> = st
        .arm
        .values()
        .filter(|r| r.parent == parent_key && r.rtype.eq_ignore_ascii_case(rtype))
        .collect();
    v.sort_by_key(|r| r.created_seq);
    v
}

/// All resources of a type, in creation order.
pub(crate) fn of_type<'a>(st: &'a State, rtype: &str) -> Vec<&'a ArmResource> {
    let mut v: Vec<&ArmResource> = st
        .arm
        .values()
        .filter(|r| r.rtype.eq_ignore_ascii_case(rtype))
        .collect();
    v.sort_by_key(|r| r.created_seq);
    v
}

/// A storage account by (globally unique) name.
pub(crate) fn find_storage_account<'a>(st: &'a State, name: &str) -> Option<&'a ArmResource> {
    st.arm
        .values()
        .find(|r| r.rtype == types::STORAGE_ACCOUNT && r.name.eq_ignore_ascii_case(name))
}

/// The parent key to check for existence, skipping virtual segments (`blobServices/default`).
pub(crate) fn real_parent_key(parent: &str) -> String {
    let p = parent.to_ascii_lowercase();
    match p.strip_suffix("/blobservices/default") {
        Some(stripped) => stripped.to_string(),
        None => p,
    }
}

/// Allocates the next private IP in a subnet (Azure reserves .0–.3). Unknown subnets get
/// addresses from 10.255.0.0/16 so a reference to a subnet outside the simulation still
/// yields a stable address.
pub(crate) fn alloc_ip(st: &mut State, subnet_id: &str) -> String {
    let key = subnet_id.to_ascii_lowercase();
    let cidr = st
        .arm
        .get(&key)
        .and_then(|s| {
            util::str_at(&s.body, "/properties/addressPrefix")
                .or_else(|| util::str_at(&s.body, "/properties/addressPrefixes/0"))
                .map(str::to_string)
        })
        .and_then(|p| util::parse_cidr(&p))
        .unwrap_or((u32::from(std::net::Ipv4Addr::new(10, 255, 0, 0)), 16));
    let next = st.ip_next.entry(key).or_insert(4);
    let ip = util::ip_in(cidr, *next);
    *next += 1;
    ip
}

/// Removes a resource and everything below it, then applies cross-resource side effects
/// (a removed private endpoint disappears from its PLS, a removed account loses its blobs).
pub(crate) fn remove_tree(st: &mut State, key: &str) -> Vec<ArmResource> {
    let prefix = format!("{key}/");
    let keys: Vec<String> = st
        .arm
        .keys()
        .filter(|k| *k == key || k.starts_with(&prefix))
        .cloned()
        .collect();
    let removed: Vec<ArmResource> = keys.iter().filter_map(|k| st.arm.remove(k)).collect();
    for r in &removed {
        on_removed(st, r);
    }
    removed
}

fn on_removed(st: &mut State, r: &ArmResource) {
    match r.rtype.as_str() {
        types::PE => {
            let pe = r.id.to_ascii_lowercase();
            let conns: Vec<String> = st
                .arm
                .iter()
                .filter(|(_, c)| {
                    c.rtype == types::PEC
                        && util::str_at(&c.body, "/properties/privateEndpoint/id")
                            .is_some_and(|i| i.eq_ignore_ascii_case(&pe))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for k in conns {
                st.arm.remove(&k);
            }
            if let Some(nic) = util::str_at(&r.internal, "/nic").map(str::to_ascii_lowercase) {
                st.arm.remove(&nic);
            }
        }
        types::VAULT => crate::keyvault::on_vault_removed(st, r),
        types::STORAGE_ACCOUNT => {
            let prefix = format!("{}/", r.name.to_ascii_lowercase());
            st.blobs.retain(|k, _| !k.starts_with(&prefix));
        }
        types::CONTAINER => {
            let account =
                r.id.split('/')
                    .nth(8)
                    .unwrap_or_default()
                    .to_ascii_lowercase();
            let prefix = format!("{account}/{}/", r.name.to_ascii_lowercase());
            st.blobs.retain(|k, _| !k.starts_with(&prefix));
        }
        _ => {}
    }
}

/// Inserts (or replaces) a resource the simulator creates on its own (operator LBs,
/// private endpoint NICs, seeded management network).
pub(crate) fn insert_internal(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    id: &str,
    rtype: &str,
    parent: &str,
    body: Value,
) {
    let name = id.rsplit('/').next().unwrap_or_default().to_string();
    let key = id.to_ascii_lowercase();
    let (seq, created) = match st.arm.get(&key) {
        Some(e) => (e.created_seq, e.created_ms),
        None => (st.next_seq(), now),
    };
    let etag = format!("W/\"{}\"", util::uuid(st, sim.config().seed));
    st.arm.insert(
        key,
        ArmResource {
            id: id.to_string(),
            rtype: rtype.to_string(),
            name,
            parent: parent.to_ascii_lowercase(),
            body,
            etag,
            prov: Prov::Succeeded,
            created_seq: seq,
            created_ms: created,
            op: None,
            internal: Value::Null,
        },
    );
}

/// Management resource group, VNet (10.224.0.0/12) and node subnet `aks-subnet`
/// (10.224.0.0/16), as an AKS management cluster would have.
pub(crate) fn seed_management(sim: &Simulator, st: &mut State, now: u64) {
    let c = sim.config();
    let sub = &c.management_subscription;
    let rg_id = format!(
        "/subscriptions/{sub}/resourceGroups/{}",
        c.management_resource_group
    );
    let tags = json!({"hcp-simulator/seeded": "true"});
    insert_internal(
        sim,
        st,
        now,
        &rg_id,
        types::RG,
        &format!("/subscriptions/{sub}"),
        json!({"location": c.management_location, "tags": tags, "properties": {}}),
    );
    let vnet_id = format!(
        "{rg_id}/providers/Microsoft.Network/virtualNetworks/{}",
        c.management_vnet
    );
    insert_internal(
        sim,
        st,
        now,
        &vnet_id,
        types::VNET,
        &rg_id,
        json!({"location": c.management_location, "tags": tags,
               "properties": {"addressSpace": {"addressPrefixes": ["10.224.0.0/12"]}}}),
    );
    insert_internal(
        sim,
        st,
        now,
        &format!("{vnet_id}/subnets/aks-subnet"),
        types::SUBNET,
        &vnet_id,
        json!({"properties": {"addressPrefix": "10.224.0.0/16"}}),
    );
}
