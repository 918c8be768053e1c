//! Azure Resource Manager resource ids given in the cluster file (bring-your-own VNet, subnet,
//! NSG; the management VNet and NAT subnet).
//!
//! Why parse them here: a wrong id (a subnet id pasted where the VNet id belongs, a subnet of
//! another VNet) would otherwise surface as an ARM 400 or, worse, a Private Link Service wired
//! to the wrong network, late in a run. ARM treats keywords, namespaces and types
//! case-insensitively, and so does this parser.

use super::validate::{is_resource_group_name, is_uuid};
use std::fmt;

/// A parsed resource id `/subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}/{name}[/{type}/{name}]*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArmResourceId {
    raw: String,
    subscription: String,
    resource_group: String,
    namespace: String,
    /// `(type, name)` pairs, outermost first: `[("virtualNetworks", "v"), ("subnets", "s")]`.
    types: Vec<(String, String)>,
}

/// The kinds of resource the cluster file refers to by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArmKind {
    /// `Microsoft.Network/virtualNetworks`
    VirtualNetwork,
    /// `Microsoft.Network/virtualNetworks/subnets`
    Subnet,
    /// `Microsoft.Network/networkSecurityGroups`
    NetworkSecurityGroup,
    /// `Microsoft.Compute/diskEncryptionSets`
    DiskEncryptionSet,
    /// `Microsoft.ContainerService/managedClusters` (an AKS cluster)
    ManagedCluster,
}

impl ArmKind {
    fn types(self) -> &'static [&'static str] {
        match self {
            ArmKind::VirtualNetwork => &["virtualNetworks"],
            ArmKind::Subnet => &["virtualNetworks", "subnets"],
            ArmKind::NetworkSecurityGroup => &["networkSecurityGroups"],
            ArmKind::DiskEncryptionSet => &["diskEncryptionSets"],
            ArmKind::ManagedCluster => &["managedClusters"],
        }
    }

    fn namespace(self) -> &'static str {
        match self {
            ArmKind::DiskEncryptionSet => "Microsoft.Compute",
            ArmKind::ManagedCluster => "Microsoft.ContainerService",
            _ => "Microsoft.Network",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ArmKind::VirtualNetwork => "a virtual network",
            ArmKind::Subnet => "a subnet",
            ArmKind::NetworkSecurityGroup => "a network security group",
            ArmKind::DiskEncryptionSet => "a disk encryption set",
            ArmKind::ManagedCluster => "an AKS cluster",
        }
    }

    fn template(self) -> &'static str {
        match self {
            ArmKind::VirtualNetwork => {
                "/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<name>"
            }
            ArmKind::Subnet => {
                "/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<name>"
            }
            ArmKind::NetworkSecurityGroup => {
                "/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.Network/networkSecurityGroups/<name>"
            }
            ArmKind::DiskEncryptionSet => {
                "/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.Compute/diskEncryptionSets/<name>"
            }
            ArmKind::ManagedCluster => {
                "/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.ContainerService/managedClusters/<name>"
            }
        }
    }
}

impl ArmResourceId {
    /// Parses any resource-group-scoped resource id.
    ///
    /// # Errors
    /// A sentence saying which part is malformed.
    pub fn parse(id: &str) -> Result<Self, String> {
        let Some(rest) = id.strip_prefix('/') else {
            return Err("must start with /subscriptions/".into());
        };
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err("has an empty segment (doubled or trailing '/')".into());
        }
        if parts.len() < 8 || !parts.len().is_multiple_of(2) {
            return Err("is not a resource id (expected /subscriptions/<uuid>/resourceGroups/<rg>/providers/<namespace>/<type>/<name>)".into());
        }
        if !parts[0].eq_ignore_ascii_case("subscriptions") {
            return Err("must start with /subscriptions/".into());
        }
        if !is_uuid(parts[1]) {
            return Err(format!(
                "has a subscription that is not a UUID ({:?})",
                parts[1]
            ));
        }
        if !parts[2].eq_ignore_ascii_case("resourceGroups") {
            return Err(
                "must name a resource group after the subscription (/resourceGroups/<rg>)".into(),
            );
        }
        if !is_resource_group_name(parts[3]) {
            return Err(format!(
                "has an invalid resource group name ({:?})",
                parts[3]
            ));
        }
        if !parts[4].eq_ignore_ascii_case("providers") {
            return Err(
                "must continue with /providers/<namespace>/ after the resource group".into(),
            );
        }
        let types = parts[6..]
            .chunks(2)
            .map(|pair| (pair[0].to_string(), pair[1].to_string()))
            .collect();
        Ok(Self {
            raw: id.to_string(),
            subscription: parts[1].to_string(),
            resource_group: parts[3].to_string(),
            namespace: parts[5].to_string(),
            types,
        })
    }

    /// Parses an id and checks it designates a resource of `kind`.
    ///
    /// # Errors
    /// A sentence naming the expected shape.
    pub fn parse_kind(id: &str, kind: ArmKind) -> Result<Self, String> {
        let parsed = Self::parse(id).map_err(|why| {
            format!(
                "must be the ARM id of {}: {} ({why})",
                kind.describe(),
                kind.template()
            )
        })?;
        let expected = kind.types();
        let matches = parsed.namespace.eq_ignore_ascii_case(kind.namespace())
            && parsed.types.len() == expected.len()
            && parsed
                .types
                .iter()
                .zip(expected)
                .all(|((t, _), e)| t.eq_ignore_ascii_case(e));
        if matches {
            Ok(parsed)
        } else {
            Err(format!(
                "must be the ARM id of {}: {} (got a {} id)",
                kind.describe(),
                kind.template(),
                parsed.type_path()
            ))
        }
    }

    /// The subscription id, as written.
    pub fn subscription(&self) -> &str {
        &self.subscription
    }

    /// The resource group name, as written.
    pub fn resource_group(&self) -> &str {
        &self.resource_group
    }

    /// The innermost resource's name (the subnet's for a subnet id).
    pub fn name(&self) -> &str {
        self.types.last().map_or("", |(_, n)| n.as_str())
    }

    /// The id of the enclosing resource (the VNet of a subnet), if this is a child resource.
    pub fn parent(&self) -> Option<ArmResourceId> {
        if self.types.len() < 2 {
            return None;
        }
        let types = self.types[..self.types.len() - 1].to_vec();
        let mut raw = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{}",
            self.subscription, self.resource_group, self.namespace
        );
        for (t, n) in &types {
            raw.push_str(&format!("/{t}/{n}"));
        }
        Some(Self {
            raw,
            subscription: self.subscription.clone(),
            resource_group: self.resource_group.clone(),
            namespace: self.namespace.clone(),
            types,
        })
    }

    /// Same resource, compared the way ARM does (case-insensitively).
    pub fn same_resource(&self, other: &ArmResourceId) -> bool {
        self.raw.eq_ignore_ascii_case(&other.raw)
    }

    fn type_path(&self) -> String {
        let mut s = self.namespace.clone();
        for (t, _) in &self.types {
            s.push('/');
            s.push_str(t);
        }
        s
    }
}

impl fmt::Display for ArmResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUB: &str = "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/rg";

    #[test]
    fn kinds_and_parent() {
        let vnet = format!("{SUB}/providers/Microsoft.Network/virtualNetworks/v");
        let subnet = format!("{vnet}/subnets/s");
        let v = ArmResourceId::parse_kind(&vnet, ArmKind::VirtualNetwork)
            .unwrap_or_else(|e| panic!("{e}"));
        let s =
            ArmResourceId::parse_kind(&subnet, ArmKind::Subnet).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.name(), "s");
        assert_eq!(s.resource_group(), "rg");
        assert!(s.parent().is_some_and(|p| p.same_resource(&v)));
        let upper = vnet
            .replace("virtualNetworks", "VIRTUALNETWORKS")
            .replace("/v", "/V");
        let vu = ArmResourceId::parse_kind(&upper, ArmKind::VirtualNetwork)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(vu.same_resource(&v));
        assert!(ArmResourceId::parse_kind(&subnet, ArmKind::VirtualNetwork).is_err());
        assert!(ArmResourceId::parse_kind(&vnet, ArmKind::NetworkSecurityGroup).is_err());
        assert!(ArmResourceId::parse_kind(&format!("{vnet}/"), ArmKind::VirtualNetwork).is_err());
        assert!(ArmResourceId::parse("subscriptions/x").is_err());
        assert!(
            ArmResourceId::parse("/subscriptions/nope/resourceGroups/rg/providers/A/b/c").is_err()
        );
    }
}
