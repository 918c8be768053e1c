//! Private link plumbing with Azure quirks: finding the control plane's internal load
//! balancer, tearing a private link service down, reading a private endpoint's address,
//! picking a free NAT subnet.
//!
//! Teardown order matters (DOMAIN.md §5): Azure refuses to delete a PLS that still has
//! private endpoint connections (`PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted`),
//! a rejected connection included, and connections may come from other subscriptions
//! (users who connected their own endpoints). So every connection, ours and foreign, is
//! first rejected (the remote endpoint then shows `Rejected` instead of silently breaking),
//! then deleted, and only then the PLS. Each call does what it can without waiting and
//! answers [`Progress::Pending`] while deletions run.

use std::net::Ipv4Addr;

use hcp_runtime::StepError;
use hcp_runtime::action::StepContext;
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::client::{ArmClient, DeleteResponse};
use super::durable::{self, Deleted, Progress};
use super::error::ArmError;
use super::models::{
    API_NETWORK, LoadBalancer, PrivateEndpoint, PrivateEndpointConnection, VirtualNetwork,
};
use super::names;

/// Checkpoint member where [`teardown`] keeps its report across attempts.
pub const TEARDOWN_KEY: &str = "pls-teardown";

/// What [`teardown`] did, accumulated across attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeardownReport {
    /// The PLS itself.
    pub pls: Deleted,
    /// Connections this teardown rejected.
    #[serde(default)]
    pub rejected: Vec<String>,
    /// Connections this teardown deleted.
    #[serde(default)]
    pub deleted_connections: Vec<String>,
    /// Every private endpoint that was connected (ours and any a user added, from any
    /// subscription): the report says whose connections were cut.
    #[serde(default)]
    pub connected_endpoints: Vec<String>,
}

impl Default for TeardownReport {
    fn default() -> Self {
        Self {
            pls: Deleted::Gone,
            rejected: Vec::new(),
            deleted_connections: Vec::new(),
            connected_endpoints: Vec::new(),
        }
    }
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x.eq_ignore_ascii_case(s)) {
        v.push(s.to_string());
    }
}

/// Rejects and deletes every private endpoint connection of a PLS, then deletes the PLS.
///
/// The caller decides whether the PLS is ours before the first call (ownership is not
/// re-checked here: the PLS may already be half torn down).
///
/// # Errors
/// ARM errors, classified.
pub async fn teardown(
    ctx: &StepContext,
    arm: &ArmClient,
    pls_id: &str,
) -> Result<Progress<TeardownReport>, StepError> {
    let mut report: TeardownReport =
        durable::checkpoint_field(ctx, TEARDOWN_KEY)?.unwrap_or_default();
    let before = report.clone();
    let exists = arm.get_value(pls_id, API_NETWORK).await?.is_some();
    let (waiting, retry_after) = if exists {
        release_connections(arm, pls_id, None, &mut report).await?
    } else {
        (0, None)
    };
    if waiting > 0 {
        if report != before {
            durable::save_checkpoint_field(ctx, TEARDOWN_KEY, &report).await?;
        }
        return Ok(pending(
            format!(
                "waiting for {waiting} private endpoint connection(s) of {pls_id} to be deleted"
            ),
            retry_after,
        ));
    }
    match durable::delete(ctx, arm, pls_id, API_NETWORK, None).await {
        Ok(Progress::Done(d)) => {
            // `Gone` after an earlier attempt deleted it is still "deleted by us".
            report.pls = if before.pls == Deleted::Deleted {
                Deleted::Deleted
            } else {
                d
            };
            Ok(Progress::Done(report))
        }
        Ok(Progress::Pending { after, reason }) => {
            report.pls = Deleted::Deleted;
            durable::save_checkpoint_field(ctx, TEARDOWN_KEY, &report).await?;
            Ok(Progress::Pending { after, reason })
        }
        Err(e)
            if e.code.as_deref()
                == Some("PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted") =>
        {
            if report != before {
                durable::save_checkpoint_field(ctx, TEARDOWN_KEY, &report).await?;
            }
            Ok(pending(
                format!("{pls_id} still has private endpoint connections; retrying its deletion"),
                e.retry_after(),
            ))
        }
        Err(e) => Err(e),
    }
}

fn pending<T>(reason: String, after: Option<std::time::Duration>) -> Progress<T> {
    Progress::Pending {
        after: after
            .unwrap_or_else(durable::default_poll)
            .min(durable::MAX_POLL),
        reason,
    }
}

/// Rejects, then deletes, every private endpoint connection of `pls_id` except those of
/// the private endpoint `keep` (compared case-insensitively), recording what it did in
/// `report`. Returns how many connections are still being deleted and the longest
/// `Retry-After` seen. A PLS that vanished meanwhile has nothing left to release.
///
/// # Errors
/// ARM errors, classified.
pub async fn release_connections(
    arm: &ArmClient,
    pls_id: &str,
    keep: Option<&str>,
    report: &mut TeardownReport,
) -> Result<(usize, Option<std::time::Duration>), StepError> {
    release_connections_where(
        arm,
        pls_id,
        &|pe: &str| keep.is_none_or(|k| !k.eq_ignore_ascii_case(pe)),
        "Rejected by hcp-workflow: the cluster behind this private link service is being deleted.",
        report,
    )
    .await
}

/// Rejects (with `description`), then deletes, every private endpoint connection of
/// `pls_id` whose private endpoint id `release` selects, recording what it did in
/// `report`; connections without an endpoint id are released too. Returns how many are
/// still being deleted and the longest `Retry-After` seen.
///
/// # Errors
/// ARM errors, classified.
pub async fn release_connections_where(
    arm: &ArmClient,
    pls_id: &str,
    release: &(dyn Fn(&str) -> bool + Sync),
    description: &str,
    report: &mut TeardownReport,
) -> Result<(usize, Option<std::time::Duration>), StepError> {
    let mut waiting = 0usize;
    let mut retry_after = None;
    let path = format!("{pls_id}/privateEndpointConnections");
    // The PLS may vanish between the GET and the list (a delete accepted by an earlier
    // attempt completing): a 404 here means there is nothing left to reject.
    let conns: Vec<PrivateEndpointConnection> = match arm.list(&path, API_NETWORK).await {
        Ok(c) => c,
        Err(e) if e.status == 404 => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    for c in conns {
        let Some(cid) = c.id.clone() else { continue };
        let p = &c.properties;
        let endpoint = p.private_endpoint.as_ref().and_then(|s| s.id.as_deref());
        if let Some(pe) = endpoint {
            push_unique(&mut report.connected_endpoints, pe);
            if !release(pe) {
                continue;
            }
        }
        if p.provisioning_state
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("Deleting"))
        {
            waiting += 1;
            continue;
        }
        let rejected = p
            .private_link_service_connection_state
            .status
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("Rejected"));
        if !rejected {
            let body = json!({
                "name": c.name.clone().unwrap_or_else(|| names::name_of(&cid).to_string()),
                "properties": {"privateLinkServiceConnectionState": {
                    "status": "Rejected",
                    "description": description,
                    "actionsRequired": "None",
                }},
            });
            match arm.put(&cid, API_NETWORK, &body).await {
                Ok(_) => push_unique(&mut report.rejected, &cid),
                // Gone meanwhile (its endpoint was deleted): nothing to reject.
                Err(e) if e.status == 404 => continue,
                Err(e) => return Err(StepError::from(e.with_resource(&cid))),
            }
        }
        match arm
            .delete(&cid, API_NETWORK)
            .await
            .map_err(|e| StepError::from(e.with_resource(&cid)))?
        {
            DeleteResponse::Gone | DeleteResponse::Done => {}
            DeleteResponse::Accepted(op) => {
                waiting += 1;
                retry_after = retry_after.or(op.retry_after);
            }
        }
        push_unique(&mut report.deleted_connections, &cid);
    }
    Ok((waiting, retry_after))
}

pub use self::teardown as pls_teardown;

/// The internal load balancer of resource group `rg_id` with a frontend whose private IP
/// is `ip`: `(load balancer id, frontend IP configuration id)`.
///
/// # Errors
/// ARM errors (a missing resource group is `NotFound`).
pub async fn find_internal_lb(
    arm: &ArmClient,
    rg_id: &str,
    ip: &str,
) -> Result<Option<(String, String)>, ArmError> {
    let path = format!(
        "{}/providers/Microsoft.Network/loadBalancers",
        rg_id.trim_end_matches('/')
    );
    let lbs: Vec<LoadBalancer> = arm.list(&path, API_NETWORK).await?;
    Ok(lbs.into_iter().find_map(|lb| {
        let lb_id = lb.id.clone()?;
        lb.properties
            .frontend_ip_configurations
            .into_iter()
            .find(|f| f.properties.private_ip_address.as_deref() == Some(ip))
            .and_then(|f| f.id)
            .map(|fe| (lb_id, fe))
    }))
}

/// [`find_internal_lb`] by subscription and resource group name.
///
/// # Errors
/// See [`find_internal_lb`].
pub async fn find_internal_lb_by_ip(
    arm: &ArmClient,
    sub: &str,
    rg: &str,
    ip: &str,
) -> Result<Option<(String, String)>, ArmError> {
    find_internal_lb(arm, &names::resource_group_id(sub, rg), ip).await
}

/// Only the frontend IP configuration id of [`find_internal_lb`].
///
/// # Errors
/// See [`find_internal_lb`].
pub async fn find_internal_lb_frontend(
    arm: &ArmClient,
    rg_id: &str,
    ip: &str,
) -> Result<Option<String>, ArmError> {
    Ok(find_internal_lb(arm, rg_id, ip).await?.map(|(_, fe)| fe))
}

/// A private endpoint's address: `customDnsConfigs[0].ipAddresses[0]`, else its NIC's
/// (`$expand=networkInterfaces`, else a GET of the NIC). `None` when the PE is missing or
/// has no address yet.
///
/// # Errors
/// ARM errors, classified.
pub async fn private_endpoint_ip(arm: &ArmClient, pe_id: &str) -> Result<Option<String>, ArmError> {
    let Some(v) = arm
        .get_value_with(pe_id, API_NETWORK, &[("$expand", "networkInterfaces")])
        .await?
    else {
        return Ok(None);
    };
    endpoint_ip(arm, pe_id, v).await
}

/// [`private_endpoint_ip`] from a body of the endpoint already read (with its NICs
/// expanded or not): a NIC is read only when the body names one but not its address.
///
/// # Errors
/// ARM errors, classified; a body that is not a private endpoint.
pub async fn endpoint_ip(
    arm: &ArmClient,
    pe_id: &str,
    body: Value,
) -> Result<Option<String>, ArmError> {
    let pe: PrivateEndpoint = super::client::decode(body, Some(pe_id))?;
    if let Some(ip) = pe.private_ip() {
        return Ok(Some(ip.to_string()));
    }
    let Some(nic_id) = pe
        .properties
        .network_interfaces
        .iter()
        .find_map(|n| n.id.clone())
    else {
        return Ok(None);
    };
    let nic = arm.get_value(&nic_id, API_NETWORK).await?;
    Ok(nic.and_then(|n| {
        n.pointer("/properties/ipConfigurations")
            .and_then(Value::as_array)
            .and_then(|cfgs| {
                cfgs.iter().find_map(|c| {
                    c.pointer("/properties/privateIPAddress")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
            })
    }))
}

/// The subnet named `name` in a VNet's body (`properties.subnets`, which ARM fills with
/// the whole subnet resources, as `Subnets_Get` answers them), compared without case.
pub fn subnet_in<'a>(vnet: &'a Value, name: &str) -> Option<&'a Value> {
    vnet.pointer("/properties/subnets")?
        .as_array()?
        .iter()
        .find(|s| {
            s.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
}

/// The first /24 inside a VNet's IPv4 address space that overlaps none of its subnets
/// (for the PLS NAT subnet). `vnet` is the VNet's ARM body.
pub fn free_slash24(vnet: &Value) -> Option<String> {
    let v: VirtualNetwork = serde_json::from_value(vnet.clone()).ok()?;
    let used: Vec<Ipv4Net> = v
        .properties
        .subnets
        .iter()
        .flat_map(|s| {
            s.properties
                .address_prefix
                .iter()
                .chain(&s.properties.address_prefixes)
        })
        .filter_map(|p| p.parse().ok())
        .collect();
    let overlaps = |a: &Ipv4Net, b: &Ipv4Net| a.contains(&b.network()) || b.contains(&a.network());
    v.properties
        .address_space
        .address_prefixes
        .iter()
        .filter_map(|p| p.parse::<Ipv4Net>().ok())
        .filter(|space| space.prefix_len() <= 24)
        .find_map(|space| {
            space
                .subnets(24)
                .ok()?
                .find(|cand| !used.iter().any(|u| overlaps(cand, u)))
        })
        .map(|n| n.to_string())
}

/// Whether `ip` is a valid IPv4 address (load balancer frontends are IPv4 here).
pub fn is_ipv4(ip: &str) -> bool {
    ip.parse::<Ipv4Addr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slash24_skips_used_ranges() {
        let vnet = json!({"properties": {
            "addressSpace": {"addressPrefixes": ["10.224.0.0/12"]},
            "subnets": [
                {"name": "aks-subnet", "properties": {"addressPrefix": "10.224.0.0/16"}},
                {"name": "x", "properties": {"addressPrefixes": ["10.225.0.0/24"]}},
            ]
        }});
        assert_eq!(free_slash24(&vnet).as_deref(), Some("10.225.1.0/24"));
        let full = json!({"properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/24"]},
            "subnets": [{"properties": {"addressPrefix": "10.0.0.0/25"}}]
        }});
        assert_eq!(free_slash24(&full), None);
        assert!(is_ipv4("10.0.0.4"));
        assert!(!is_ipv4("x"));
    }
}
