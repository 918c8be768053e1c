//! delete-cluster: the reverse of create-cluster, as its own workflow.
//!
//! Targets come from the cluster's layout (deterministic names from its name and infra id;
//! the CLI takes the infra id from the create run's journal when the config has none), and
//! every delete checks ownership: untagged and bring-your-own resources are never deleted,
//! persistent ones only with `--purge-persistent`, and anything already gone is done
//! (resource group missing, HostedCluster missing, half-created cluster).
//!
//! Order (DOMAIN.md §5): nodepools → DNS records, link, zone → PE → PLS (connections
//! rejected and removed first) → HostedCluster (its finalizer tears the control plane and
//! its internal LB down) → Secrets, NAT subnet → role assignments (before identities) → LB,
//! IP, link, zone, VNet, NSG → resource groups → persistent resources if purging.

use crate::config::ClusterConfig;
use crate::layout::{CLUSTERS_NAMESPACE, COMPONENTS, Layout, api};
use hcp_activities::kube::mgmt::Kind;
use hcp_activities::steps::arm::{
    DeleteContainer, DeleteDnsLink, DeleteDnsRecord, DeleteDnsZone, DeleteFederatedCredential,
    DeleteIdentity, DeleteInput, DeleteLoadBalancer, DeleteNsg, DeletePrivateEndpoint,
    DeletePublicIp, DeleteResourceGroup, DeleteRoleAssignment, DeleteStorageAccount, DeleteSubnet,
    DeleteVnet,
};
use hcp_activities::steps::cluster::{DeleteObject, DeleteObjectInput};
use hcp_activities::steps::private_link::{DeletePrivateLinkService, PlsDeleteInput};
use hcp_runtime::{DagError, NodeOptions, SagaBuilder, SagaDag};

/// Workflow name.
pub const WORKFLOW: &str = "delete-cluster";
/// Version of this definition.
pub const VERSION: u32 = 1;

fn n(s: &str) -> String {
    format!("{WORKFLOW}.{s}")
}

/// Options of a delete.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeleteOptions {
    /// Also delete persistent resources (identities, federated credentials, OIDC issuer,
    /// the persistent resource group).
    pub purge_persistent: bool,
}

/// Build the delete DAG.
///
/// # Errors
/// A definition error (a bug: caught by the unit tests).
pub fn build(cfg: &ClusterConfig, l: &Layout, opts: DeleteOptions) -> Result<SagaDag, DagError> {
    let mut b = SagaBuilder::new(WORKFLOW, VERSION);
    let o = NodeOptions::default;
    let del = |resource_type: &str, id: &str, api: &str, tagged: bool| DeleteInput {
        azure: l.azure.clone(),
        owner: l.owner.clone(),
        resource_type: resource_type.into(),
        id: id.into(),
        api: api.into(),
        tagged,
        persistent: false,
    };
    let kube = |kind: Kind, names: Vec<String>| DeleteObjectInput {
        mgmt: l.mgmt.clone(),
        owner: l.owner.clone(),
        kind,
        namespace: CLUSTERS_NAMESPACE.into(),
        names,
        persistent: false,
    };

    b.stage("nodepools");
    for p in &cfg.node_pools {
        b.add::<DeleteObject>(
            n(&format!("nodepools.{}", p.name)),
            &kube(Kind::NodePool, vec![format!("{}-{}", l.name, p.name)]),
            o(),
        )?;
    }

    let private = cfg.topology.uses_private_link();
    if private {
        b.stage("pe-dns");
        for rec in ["api", "*.apps"] {
            b.add::<DeleteDnsRecord>(
                n(&format!("pe-dns.record.{}", rec.trim_start_matches("*."))),
                &del(
                    "Microsoft.Network/privateDnsZones/A",
                    &format!("{}/A/{rec}", l.pl_zone_id),
                    api::PRIVATE_DNS,
                    false,
                ),
                o(),
            )?;
        }
        b.stage("pe-dns-zone");
        let link = b.add::<DeleteDnsLink>(
            n("pe-dns.link"),
            &del(
                "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
                &l.pl_link_id,
                api::PRIVATE_DNS,
                true,
            ),
            o(),
        )?;
        b.add::<DeleteDnsZone>(
            n("pe-dns.zone"),
            &del(
                "Microsoft.Network/privateDnsZones",
                &l.pl_zone_id,
                api::PRIVATE_DNS,
                true,
            ),
            o().after(&link),
        )?;
        b.add::<DeletePrivateEndpoint>(
            n("pe-dns.endpoint"),
            &del(
                "Microsoft.Network/privateEndpoints",
                &l.pe_id,
                api::NETWORK,
                true,
            ),
            o(),
        )?;
        b.stage("pls");
        b.add::<DeletePrivateLinkService>(
            n("pls.service"),
            &PlsDeleteInput {
                azure: l.mgmt_azure.clone(),
                owner: l.owner.clone(),
                id: l.pls_id.clone(),
            },
            o(),
        )?;
    }

    b.stage("control-plane");
    let hc = b.add::<DeleteObject>(
        n("control-plane.hosted-cluster"),
        &kube(Kind::HostedCluster, vec![l.name.clone()]),
        o(),
    )?;
    b.add::<DeleteObject>(
        n("control-plane.secrets"),
        &kube(
            Kind::Secret,
            vec![
                l.secret("pull-secret"),
                l.secret("ssh-key"),
                l.secret("etcd-encryption-key"),
            ],
        ),
        o().after(&hc),
    )?;
    if private && l.nat_subnet_create.is_some() {
        b.add::<DeleteSubnet>(
            n("control-plane.nat-subnet"),
            &DeleteInput {
                azure: l.mgmt_azure.clone(),
                ..del(
                    "Microsoft.Network/virtualNetworks/subnets",
                    &l.nat_subnet_id,
                    api::NETWORK,
                    false,
                )
            },
            o().after(&hc),
        )?;
    }

    b.stage("role-assignments");
    if Layout::identities_created(cfg) {
        for c in &COMPONENTS {
            for s in c.scopes {
                let scope = l.scope_id(*s);
                let guid = hcp_activities::azure::names::role_assignment_name(
                    &l.infra_id,
                    c.component.name(),
                    scope,
                );
                b.add::<DeleteRoleAssignment>(
                    n(&format!(
                        "network.role.{}.{}",
                        c.component.name(),
                        format!("{s:?}").to_lowercase()
                    )),
                    &del(
                        "Microsoft.Authorization/roleAssignments",
                        &format!(
                            "{scope}/providers/Microsoft.Authorization/roleAssignments/{guid}"
                        ),
                        api::AUTHORIZATION,
                        false,
                    ),
                    o(),
                )?;
            }
        }
    }

    b.stage("network");
    let lb = b.add::<DeleteLoadBalancer>(
        n("network.load-balancer"),
        &del(
            "Microsoft.Network/loadBalancers",
            &l.lb_id,
            api::NETWORK,
            true,
        ),
        o(),
    )?;
    b.add::<DeletePublicIp>(
        n("network.public-ip"),
        &del(
            "Microsoft.Network/publicIPAddresses",
            &l.public_ip_id,
            api::NETWORK,
            true,
        ),
        o().after(&lb),
    )?;
    if l.network_created {
        let link = b.add::<DeleteDnsLink>(
            n("network.dns-link"),
            &del(
                "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
                &l.infra_link_id,
                api::PRIVATE_DNS,
                true,
            ),
            o(),
        )?;
        b.add::<DeleteDnsZone>(
            n("network.dns-zone"),
            &del(
                "Microsoft.Network/privateDnsZones",
                &l.infra_zone_id,
                api::PRIVATE_DNS,
                true,
            ),
            o().after(&link),
        )?;
        let vnet = b.add::<DeleteVnet>(
            n("network.vnet"),
            &del(
                "Microsoft.Network/virtualNetworks",
                &l.vnet_id,
                api::NETWORK,
                true,
            ),
            o().after(&link),
        )?;
        b.add::<DeleteNsg>(
            n("network.nsg"),
            &del(
                "Microsoft.Network/networkSecurityGroups",
                &l.nsg_id,
                api::NETWORK,
                true,
            ),
            o().after(&vnet),
        )?;
    }

    b.stage("resource-groups");
    let rgs: Vec<(&str, &str)> = if l.network_created {
        vec![
            ("managed", &l.managed_rg),
            ("vnet", &l.vnet_rg),
            ("nsg", &l.nsg_rg),
        ]
    } else {
        vec![("managed", &l.managed_rg)]
    };
    for (what, id) in rgs {
        b.add::<DeleteResourceGroup>(
            n(&format!("network.rg.{what}")),
            &del(
                "Microsoft.Resources/resourceGroups",
                id,
                api::RESOURCES,
                true,
            ),
            o(),
        )?;
    }

    if opts.purge_persistent {
        b.stage("persistent");
        let persist = |mut d: DeleteInput| {
            d.persistent = true;
            d
        };
        if Layout::identities_created(cfg) {
            for c in &COMPONENTS {
                let ident = l.identity_id(c.component);
                let mut fic = Vec::new();
                for s in c.subjects {
                    fic.push(b.add::<DeleteFederatedCredential>(
                        n(&format!(
                            "identities.{}.federated.{}",
                            c.component.name(),
                            l.fic_name(s)
                        )),
                        &persist(del(
                            "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials",
                            &format!("{ident}/federatedIdentityCredentials/{}", l.fic_name(s)),
                            api::MSI,
                            false,
                        )),
                        // One at a time per identity (Azure refuses concurrent writes).
                        match fic.last() {
                            Some(prev) => o().after(prev),
                            None => o(),
                        },
                    )?);
                }
                let mut io = o();
                for f in &fic {
                    io = io.after(f);
                }
                b.add::<DeleteIdentity>(
                    n(&format!("identities.{}", c.component.name())),
                    &persist(del(
                        "Microsoft.ManagedIdentity/userAssignedIdentities",
                        &ident,
                        api::MSI,
                        true,
                    )),
                    io,
                )?;
            }
        }
        if let Some(account) = &l.storage_account_id {
            let c = b.add::<DeleteContainer>(
                n("oidc.container"),
                &persist(del(
                    "Microsoft.Storage/storageAccounts/blobServices/containers",
                    &format!("{account}/blobServices/default/containers/{}", l.container),
                    api::STORAGE,
                    false,
                )),
                o(),
            )?;
            b.add::<DeleteStorageAccount>(
                n("oidc.storage-account"),
                &persist(del(
                    "Microsoft.Storage/storageAccounts",
                    account,
                    api::STORAGE,
                    true,
                )),
                o().after(&c),
            )?;
            b.add::<DeleteObject>(
                n("oidc.key"),
                &DeleteObjectInput {
                    persistent: true,
                    ..kube(Kind::Secret, vec![l.secret("sa-token-issuer-key")])
                },
                o(),
            )?;
        }
        b.stage("persistent-rg");
        b.add::<DeleteResourceGroup>(
            n("identities.persistent-rg"),
            &persist(del(
                "Microsoft.Resources/resourceGroups",
                &l.persistent_rg,
                api::RESOURCES,
                true,
            )),
            o(),
        )?;
    }
    let mut dag = b.build()?;
    crate::budgets::apply(&mut dag, &cfg.wait_budgets);
    Ok(dag)
}
