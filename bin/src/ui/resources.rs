//! The run page's resources table: each ledger row with its Azure portal link (for ARM ids
//! of runs against real Azure) and how to show it (a resolved-by-hand resource is marked,
//! never hidden: it may still exist, and an auditor must be able to check it).

use crate::views::model::{LedgerRow, RunDetail};
use serde::Serialize;

/// A ledger row as the resources table shows it.
#[derive(Debug, Serialize)]
pub struct ResourceView<'a> {
    #[serde(flatten)]
    pub row: &'a LedgerRow,
    /// The resource in the Azure portal of the run's cloud, when there is one.
    pub portal: Option<String>,
    /// Whether an operator resolved its stuck undo by hand (the note says who and why).
    pub resolved: bool,
    /// The step that recorded it, without the workflow's name (`network.rg.vnet`).
    pub step: &'a str,
}

/// The portal host of a run's target: the public cloud's for `azure/public` (and for runs
/// that recorded no target), the sovereign clouds' own, none for a custom cloud or a
/// simulator (whose resources no portal shows).
fn portal_host(target: Option<&str>) -> Option<&'static str> {
    match target {
        None | Some("azure/public") => Some("portal.azure.com"),
        Some("azure/usGovernment") => Some("portal.azure.us"),
        Some("azure/china") => Some("portal.azure.cn"),
        Some(_) => None,
    }
}

/// Whether `t` can stand in the portal URL as a tenant (a GUID or a domain name).
fn plausible_tenant(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 253
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

/// Percent-encode what may not stand in a URL fragment unescaped (ARM ids are mostly
/// `[A-Za-z0-9/._-]`; anything else is escaped rather than trusted).
fn encode_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'/'
            | b'-'
            | b'_'
            | b'.'
            | b'~'
            | b'('
            | b')'
            | b'!'
            | b'*'
            | b'\''
            | b','
            | b';'
            | b'='
            | b'+'
            | b':'
            | b'@' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `https://portal.azure.com/#@<tenant>/resource<id>` for an Azure resource id of a run
/// against `target` (`@<tenant>` left out when the tenant is unknown).
pub fn portal_url(
    kind: &str,
    id: &str,
    target: Option<&str>,
    tenant: Option<&str>,
) -> Option<String> {
    if kind != "azure" || !id.to_ascii_lowercase().starts_with("/subscriptions/") {
        return None;
    }
    let host = portal_host(target)?;
    let tenant = tenant
        .map(str::trim)
        .filter(|t| plausible_tenant(t))
        .map(|t| format!("@{t}"))
        .unwrap_or_default();
    Some(format!(
        "https://{host}/#{tenant}/resource{}",
        encode_path(id)
    ))
}

/// The resources table of `d`.
pub fn of(d: &RunDetail) -> Vec<ResourceView<'_>> {
    let tenant = d.labels.get("tenant").map(String::as_str);
    let prefix = format!("{}.", d.workflow);
    d.ledger
        .iter()
        .map(|r| ResourceView {
            row: r,
            portal: portal_url(&r.kind, &r.id, d.target.as_deref(), tenant),
            resolved: r.action == "resolved",
            step: r
                .node
                .strip_prefix(&prefix)
                .filter(|s| !s.is_empty())
                .unwrap_or(&r.node),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::portal_url;

    const ID: &str =
        "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/privateLinkServices/pls";

    #[test]
    fn portal_links_follow_the_cloud_and_the_tenant() {
        let t = Some("72f988bf-86f1-41af-91ab-2d7cd011db47");
        assert_eq!(
            portal_url("azure", ID, Some("azure/public"), t).as_deref(),
            Some(
                "https://portal.azure.com/#@72f988bf-86f1-41af-91ab-2d7cd011db47/resource/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/privateLinkServices/pls"
            )
        );
        assert_eq!(
            portal_url("azure", ID, None, None),
            Some(format!("https://portal.azure.com/#/resource{ID}"))
        );
        assert_eq!(
            portal_url("azure", ID, Some("azure/usGovernment"), None),
            Some(format!("https://portal.azure.us/#/resource{ID}"))
        );
        assert_eq!(
            portal_url("azure", ID, Some("azure/china"), t)
                .map(|u| u.starts_with("https://portal.azure.cn/#@72f9")),
            Some(true)
        );
        assert_eq!(portal_url("azure", ID, Some("azure/custom"), t), None);
        assert_eq!(
            portal_url("azure", ID, Some("simulator/in-process"), t),
            None
        );
        assert_eq!(portal_url("kubernetes", "ns/name", None, t), None);
        assert_eq!(portal_url("azure", "not-an-arm-id", None, t), None);
        // A tenant that is not a GUID or domain is left out, and odd characters escaped.
        assert_eq!(
            portal_url("azure", "/subscriptions/a b#c", None, Some("x/../evil")),
            Some("https://portal.azure.com/#/resource/subscriptions/a%20b%23c".to_string())
        );
    }
}
