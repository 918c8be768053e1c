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
use crate::config::PrivateLinkManager;
use crate::layout::{CLUSTERS_NAMESPACE, COMPONENTS, Layout, api};
use hcp_activities::kube::mgmt::Kind;
use hcp_activities::steps::arm::{
    DeleteContainer, DeleteDnsLink, DeleteDnsRecord, DeleteDnsZone, DeleteFederatedCredential,
    DeleteIdentity, DeleteInput, DeleteLoadBalancer, DeleteNsg, DeletePrivateEndpoint,
    DeletePublicIp, DeleteResourceGroup, DeleteRoleAssignment, DeleteStorageAccount, DeleteSubnet,
    DeleteVnet,
};
use hcp_activities::steps::cluster::{DeleteObject, DeleteObjectInput};
use hcp_activities::steps::dns::{
    DeleteDnsScopeRoleAssignment, DeletePublicRecords, DnsScopeRoleDeleteInput, FindPublicZone,
    PublicRecordsDeleteInput,
};
use hcp_activities::steps::hypershift_link::{
    HyperShiftLink, HyperShiftLinkInput, ReleaseHyperShiftLink, VerifyGoneInput,
    VerifyHyperShiftLinkGone,
};
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
    /// Do not set `hypershift.openshift.io/cleanup-cloud-resources` on the HostedCluster
    /// before deleting it: the guest's load balancers, NSG rules, disks and registry
    /// storage stay (by default they are removed, as `hypershift destroy cluster` does).
    pub skip_cloud_cleanup: bool,
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
        shared: false,
    };
    let kube = |kind: Kind, names: Vec<String>| DeleteObjectInput {
        mgmt: l.mgmt.clone(),
        owner: l.owner.clone(),
        kind,
        namespace: CLUSTERS_NAMESPACE.into(),
        names,
        persistent: false,
        cleanup_cloud_resources: false,
        hypershift_private_link: None,
    };

    // Read only: the public DNS zone's group names the ingress role assignment when
    // `dnsZoneResourceGroup` does not (a zone that is gone is no error here).
    // PublicAndPrivate: the public hostnames' records live in the public zone too.
    let public_hostnames = hcp_activities::kube::render::public_hostnames(
        &l.name,
        &cfg.base_domain,
        crate::create_cluster::render_topology(cfg.topology),
    );
    let public_zone = if l.dns_zone_rg.is_none() || public_hostnames.is_some() {
        b.stage("preflight");
        Some(b.add::<FindPublicZone>(
            n("preflight.public-dns-zone"),
            &crate::create_cluster::public_zone_input(cfg, l, true),
            o(),
        )?)
    } else {
        None
    };

    let private = cfg.topology.uses_private_link();
    // `privateLink.managedBy` as resolved before journaling (see create_cluster).
    let hypershift_link = cfg.private_link.managed_by == PrivateLinkManager::Hypershift;
    let hs_link = HyperShiftLink {
        mgmt_azure: l.mgmt_azure.clone(),
        guest_azure: l.azure.clone(),
    };
    let mut release = None;
    if private && hypershift_link {
        // HyperShift's PLS, PE and zone are its own (its finalizers remove them with the
        // HostedCluster); only the connections its own endpoint did not make are ours to
        // reject and remove, before the HostedCluster goes (hypershift_link.rs).
        b.stage("pls");
        release = Some(b.add::<ReleaseHyperShiftLink>(
            n("pls.hypershift-release"),
            &HyperShiftLinkInput {
                mgmt: l.mgmt.clone(),
                owner: l.owner.clone(),
                namespace: CLUSTERS_NAMESPACE.into(),
                name: l.name.clone(),
                link: hs_link.clone(),
            },
            o(),
        )?);
    }
    if let (Some(h), Some(zone)) = (&public_hostnames, &public_zone) {
        // Only the record sets marked as this cluster's: the zone is shared.
        b.stage("public-dns");
        b.add::<DeletePublicRecords>(
            n("public-dns.records"),
            &PublicRecordsDeleteInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                zone: zone.clone(),
                names: h.relative(&cfg.base_domain),
            },
            o(),
        )?;
    }
    if private && !hypershift_link {
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
    // As `hypershift destroy cluster` (cmd/cluster/core/destroy.go): ask HyperShift to
    // remove the guest's cloud resources, then delete and wait until the HostedCluster is
    // gone (its finalizer is released once the cleanup is done or given up on).
    let hc = b.add::<DeleteObject>(
        n("control-plane.hosted-cluster"),
        &DeleteObjectInput {
            cleanup_cloud_resources: !opts.skip_cloud_cleanup,
            hypershift_private_link: (private && hypershift_link).then(|| hs_link.clone()),
            ..kube(Kind::HostedCluster, vec![l.name.clone()])
        },
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
    if let Some(release) = &release {
        b.add::<VerifyHyperShiftLinkGone>(
            n("pls.hypershift-gone"),
            &VerifyGoneInput {
                link: hs_link.clone(),
                release: release.clone(),
            },
            o().after(&hc),
        )?;
    }
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

    // Ours also for bring-your-own identities (create assigns the same 18 roles to them);
    // the identities themselves are never deleted here.
    // Issue 22 §5: the NodePools go with the HostedCluster, as HyperShift deletes them
    // (`hostedcluster_controller.go` `delete` → `deleteNodePools`, with the CAPI Cluster:
    // cluster-api does not drain the nodes of a Cluster being deleted). Deleting them first,
    // as this workflow did, drained every node, and a PodDisruptionBudget could block the
    // delete for ever. What is left after the HostedCluster is gone (none, normally) is
    // deleted here.
    b.stage("nodepools");
    for p in &cfg.node_pools {
        b.add::<DeleteObject>(
            n(&format!("nodepools.{}", p.name)),
            &kube(Kind::NodePool, vec![format!("{}-{}", l.name, p.name)]),
            o(),
        )?;
    }

    b.stage("role-assignments");
    {
        for c in &COMPONENTS {
            for s in c.scopes {
                let Some(scope) = l.scope_id(*s) else {
                    // The public zone's group, found by the preflight lookup (if the zone is
                    // gone, so is nothing we could name).
                    if let Some(zone) = &public_zone {
                        b.add::<DeleteDnsScopeRoleAssignment>(
                            n(&format!(
                                "network.role.{}.{}",
                                c.component.name(),
                                format!("{s:?}").to_lowercase()
                            )),
                            &DnsScopeRoleDeleteInput {
                                azure: l.azure.clone(),
                                owner: l.owner.clone(),
                                component: c.component.name().into(),
                                zone: zone.clone(),
                            },
                            o(),
                        )?;
                    }
                    continue;
                };
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
    // The infra zone and its link are ours also with a bring-your-own network (the link
    // names the user's VNet; deleting it leaves the VNet alone). Never the public zone.
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
    // Without the guest's cloud cleanup, what the guest's cloud provider made stays in the
    // managed group — for a Private cluster its ingress internal load balancer, whose
    // frontend holds an IP of our subnet, so Azure refuses the VNet's deletion
    // (`InUseSubnetCannotBeDeleted`) until that group is gone: the group goes first then.
    let managed_first = (opts.skip_cloud_cleanup && l.network_created).then(|| {
        b.add::<DeleteResourceGroup>(
            n("network.rg.managed"),
            &del(
                "Microsoft.Resources/resourceGroups",
                &l.managed_rg,
                api::RESOURCES,
                true,
            ),
            o().after(&lb),
        )
    });
    let managed_first = managed_first.transpose()?;
    if l.network_created {
        let mut vo = o().after(&link);
        if let Some(m) = &managed_first {
            vo = vo.after(m);
        }
        let vnet = b.add::<DeleteVnet>(
            n("network.vnet"),
            &del(
                "Microsoft.Network/virtualNetworks",
                &l.vnet_id,
                api::NETWORK,
                true,
            ),
            vo,
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
    let mut rgs: Vec<(&str, &str)> = if l.network_created {
        vec![
            ("managed", &l.managed_rg),
            ("vnet", &l.vnet_rg),
            ("nsg", &l.nsg_rg),
        ]
    } else {
        vec![("managed", &l.managed_rg)]
    };
    if managed_first.is_some() {
        rgs.retain(|(what, _)| *what != "managed");
    }
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
        // Shared by many clusters: deleted only when hcp-workflow made it and nothing is
        // left inside once this cluster's own persistent resources are gone (finding 11).
        b.add::<DeleteResourceGroup>(
            n("identities.persistent-rg"),
            &DeleteInput {
                shared: true,
                ..persist(del(
                    "Microsoft.Resources/resourceGroups",
                    &l.persistent_rg,
                    api::RESOURCES,
                    true,
                ))
            },
            o(),
        )?;
    }
    let mut dag = b.build()?;
    crate::budgets::apply(&mut dag, &cfg.wait_budgets);
    Ok(dag)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Issue 12, findings 3 and 4: with a bring-your-own network and identities, delete
    /// removes the infra zone and link and all 18 role assignments (the ingress one on the
    /// public zone's group, found read-only), but never an identity, the VNet or the
    /// public zone — also when purging.
    #[test]
    fn byo_network_and_identities_delete_zone_link_and_roles_only() {
        let example =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
        let mut cfg = crate::config::load(&example).unwrap();
        let rg = format!("/subscriptions/{}/resourceGroups/byo-net", cfg.subscription);
        cfg.network = crate::config::Network::Existing(crate::config::NetworkExisting {
            vnet_id: format!("{rg}/providers/Microsoft.Network/virtualNetworks/byo-vnet"),
            subnet_id: format!(
                "{rg}/providers/Microsoft.Network/virtualNetworks/byo-vnet/subnets/nodes"
            ),
            nsg_id: format!("{rg}/providers/Microsoft.Network/networkSecurityGroups/byo-nsg"),
            machine_cidr: None,
        });
        cfg.identities = crate::config::Identities::Existing(crate::config::IdentitiesExisting {
            file: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/files/workload-identities.json"),
        });
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = build(
            &cfg,
            &l,
            DeleteOptions {
                purge_persistent: true,
                ..Default::default()
            },
        )
        .unwrap();
        let ids: Vec<&str> = dag
            .nodes
            .iter()
            .filter_map(|x| x.input.get("id").and_then(|v| v.as_str()))
            .collect();
        assert!(ids.contains(&l.infra_zone_id.as_str()));
        assert!(ids.contains(&l.infra_link_id.as_str()));
        assert!(!ids.contains(&l.vnet_id.as_str()), "the VNet is not ours");
        assert!(
            ids.iter().all(|i| !i.contains("/dnszones/")),
            "never the public zone"
        );
        assert!(
            dag.nodes
                .iter()
                .all(|x| x.action != "azure.identity.delete")
        );
        let roles = dag
            .nodes
            .iter()
            .filter(|x| x.action.starts_with("azure.role-assignment.delete"))
            .count();
        assert_eq!(roles, 18);
        let dns = dag
            .nodes
            .iter()
            .find(|x| x.name == n("network.role.ingress.dns"))
            .unwrap();
        assert_eq!(dns.action, "azure.role-assignment.delete-in-dns-zone-group");
        let find = dag
            .nodes
            .iter()
            .find(|x| x.name == n("preflight.public-dns-zone"))
            .unwrap();
        assert_eq!(find.input["optional"], true);
    }
}
