//! Name resolution as Azure DNS (168.63.129.16) answers a machine in a virtual network.
//!
//! Modelled on Azure's documentation of private DNS zones
//! (<https://learn.microsoft.com/azure/dns/private-dns-overview>,
//! <https://learn.microsoft.com/azure/dns/private-dns-fallback>):
//! - the private zones **linked to the VNet** are consulted first; of those whose name the
//!   query falls in, the longest (most specific) one answers;
//! - that zone is authoritative: a name it does not hold is NXDOMAIN. There is **no
//!   fall-through** to public DNS (the link's `resolutionPolicy: NxDomainRedirect` exists
//!   only for `privatelink.*` zones, which hcp-workflow does not use);
//! - a name no linked zone covers is resolved publicly: the public zone delegated for it
//!   (the longest public zone it falls in; the simulator holds the world's zones).
//!
//! Within a zone a name is answered by its own record set, else by a wildcard `*.<rest>`
//! one label up (`*.apps` answers `console.apps`); the zone's apex is the record `@`.

use serde::Serialize;
use serde_json::Value;

use crate::arm::{store as arm_store, types};
use crate::state::State;
use crate::util::str_at;

/// What a query for one name gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "answer", rename_all = "lowercase")]
pub(crate) enum Answer {
    /// An A record: its addresses, and the zone (id) that answered.
    A { ips: Vec<String>, zone: String },
    /// NXDOMAIN from the zone (id) that is authoritative for the name.
    Nxdomain { zone: String },
    /// No zone anywhere covers the name.
    Unknown,
}

impl Answer {
    /// The first address, if any.
    pub(crate) fn ip(&self) -> Option<&str> {
        match self {
            Answer::A { ips, .. } => ips.first().map(String::as_str),
            _ => None,
        }
    }
}

fn covers(zone: &str, fqdn: &str) -> bool {
    fqdn == zone || fqdn.ends_with(&format!(".{zone}"))
}

/// The relative names that could answer `fqdn` in `zone`: its own, then the wildcard one
/// label up.
fn candidates(zone: &str, fqdn: &str) -> Vec<String> {
    if fqdn == zone {
        return vec!["@".into()];
    }
    let Some(rel) = fqdn.strip_suffix(&format!(".{zone}")) else {
        return Vec::new();
    };
    let mut v = vec![rel.to_string()];
    if let Some((_, rest)) = rel.split_once('.') {
        v.push(format!("*.{rest}"));
    } else {
        v.push("*".into());
    }
    v
}

fn lookup(st: &State, zone_id: &str, zone: &str, fqdn: &str, rtype: &str, key: &str) -> Answer {
    for rel in candidates(zone, fqdn) {
        let id = format!("{zone_id}/A/{rel}").to_ascii_lowercase();
        if let Some(rec) = st
            .arm
            .get(&id)
            .filter(|r| r.rtype.eq_ignore_ascii_case(rtype))
        {
            let ips: Vec<String> = rec
                .body
                .pointer(&format!("/properties/{key}"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| str_at(r, "/ipv4Address").map(str::to_string))
                .collect();
            if !ips.is_empty() {
                return Answer::A {
                    ips,
                    zone: zone_id.to_string(),
                };
            }
        }
    }
    Answer::Nxdomain {
        zone: zone_id.to_string(),
    }
}

/// What a machine in VNet `vnet_id` gets for `fqdn`.
pub(crate) fn resolve_in_vnet(st: &State, vnet_id: &str, fqdn: &str) -> Answer {
    let fqdn = fqdn.trim_end_matches('.').to_ascii_lowercase();
    let vnet = vnet_id.to_ascii_lowercase();
    let linked = arm_store::of_type(st, types::LINK)
        .into_iter()
        .filter(|l| {
            str_at(&l.body, "/properties/virtualNetwork/id")
                .is_some_and(|v| v.eq_ignore_ascii_case(&vnet))
        })
        .filter_map(|l| st.arm.get(&l.parent))
        .filter(|z| z.rtype.eq_ignore_ascii_case(types::ZONE))
        .filter(|z| covers(&z.name.to_ascii_lowercase(), &fqdn))
        .max_by_key(|z| z.name.len());
    if let Some(z) = linked {
        return lookup(
            st,
            &z.id,
            &z.name.to_ascii_lowercase(),
            &fqdn,
            types::AREC,
            "aRecords",
        );
    }
    resolve_publicly(st, &fqdn, None)
}

/// What public DNS answers for `fqdn`: the zone `delegated` (a public zone id, e.g. the
/// HostedCluster's `spec.dns.publicZoneID`, when it covers the name: zones of the same name
/// in other subscriptions are not what the world resolves), else the longest public zone
/// the name falls in.
pub(crate) fn resolve_publicly(st: &State, fqdn: &str, delegated: Option<&str>) -> Answer {
    let fqdn = fqdn.trim_end_matches('.').to_ascii_lowercase();
    let delegated = delegated
        .and_then(|id| st.arm.get(&id.to_ascii_lowercase()))
        .filter(|z| z.rtype.eq_ignore_ascii_case(types::PUBLIC_ZONE))
        .filter(|z| covers(&z.name.to_ascii_lowercase(), &fqdn));
    let zone = delegated.or_else(|| {
        arm_store::of_type(st, types::PUBLIC_ZONE)
            .into_iter()
            .filter(|z| covers(&z.name.to_ascii_lowercase(), &fqdn))
            .max_by_key(|z| z.name.len())
    });
    match zone {
        Some(z) => lookup(
            st,
            &z.id,
            &z.name.to_ascii_lowercase(),
            &fqdn,
            types::PUBLIC_AREC,
            "ARecords",
        ),
        None => Answer::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_the_name_then_the_wildcard_one_label_up() {
        assert_eq!(candidates("a.example.com", "a.example.com"), vec!["@"]);
        assert_eq!(
            candidates("c.example.com", "console.apps.c.example.com"),
            vec!["console.apps", "*.apps"]
        );
        assert_eq!(
            candidates("example.com", "api-c.example.com"),
            vec!["api-c", "*"]
        );
        assert!(candidates("example.com", "other.org").is_empty());
        assert!(covers("example.com", "example.com"));
        assert!(!covers("example.com", "badexample.com"));
    }
}
