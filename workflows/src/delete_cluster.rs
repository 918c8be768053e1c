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
use crate::layout::{ARO_DATA_PLANE, CLUSTERS_NAMESPACE, COMPONENTS, Layout, api};
use crate::workflow::{PreflightKind, WorkflowDef};
use hcp_activities::kube::mgmt::Kind;
use hcp_activities::kube::render::PublicHostnames;
use hcp_activities::steps::arm::{
    DeleteContainer, DeleteDnsLink, DeleteDnsRecord, DeleteDnsZone, DeleteFederatedCredential,
    DeleteIdentity, DeleteInput, DeleteLoadBalancer, DeleteNsg, DeleteOutput,
    DeletePrivateEndpoint, DeletePublicIp, DeleteResourceGroup, DeleteRoleAssignment,
    DeleteStorageAccount, DeleteSubnet, DeleteVnet,
};
use hcp_activities::steps::cluster::{DeleteObject, DeleteObjectInput};
use hcp_activities::steps::dns::{
    DeleteDnsScopeRoleAssignment, DeletePublicRecords, DnsScopeRoleDeleteInput, FindPublicZone,
    PublicRecordsDeleteInput, PublicZoneOutput,
};
use hcp_activities::steps::entra::{DeleteApplication, DeleteApplicationInput};
use hcp_activities::steps::hypershift_link::{
    HyperShiftLink, HyperShiftLinkInput, ReleaseHyperShiftLink, ReleaseOutput, VerifyGoneInput,
    VerifyHyperShiftLinkGone,
};
use hcp_activities::steps::key_vault::{
    DeleteCertificate, DeleteKeyVault, DeleteSecret, DeleteVaultObjectInput, KeyVaultInput,
};
use hcp_activities::steps::private_link::{DeletePrivateLinkService, PlsDeleteInput};
use hcp_runtime::{DagError, FailurePolicy, NodeOptions, Ref, SagaBuilder, SagaDag};

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

/// Build the delete DAG, one function per stage, in order:
///
/// - `preflight` (unless `dnsZoneResourceGroup` names the public zone's group and there are
///   no public hostnames): the public DNS zone lookup.
/// - `pls` (`hypershift_pls`, HyperShift's private link): release the connections that
///   are ours to remove.
/// - `public-dns` (`public_dns`, PublicAndPrivate): the public hostnames' records.
/// - `pe-dns`, `pe-dns-zone`, `pls` (`pe_dns`, `pe_dns_zone`, `pls`; hcp-workflow's
///   private link): A records; link, zone and Private Endpoint; Private Link Service.
/// - `control-plane` (`control_plane`): HostedCluster, Secrets, NAT subnet.
/// - `nodepools`: what is left of the NodePools.
/// - `role-assignments` (`role_assignments`): all 18, also for bring-your-own identities.
/// - `network`: load balancer, IP, infra DNS link and zone, VNet, NSG.
/// - `resource-groups` (`resource_groups`): the cluster's groups.
/// - `persistent`, `persistent-rg` (`persistent`, `persistent_rg`; with
///   `--purge-persistent`): identities, OIDC storage and key; the persistent group.
///
/// # Errors
/// A definition error (a bug: caught by the unit tests).
pub fn build(cfg: &ClusterConfig, l: &Layout, opts: DeleteOptions) -> Result<SagaDag, DagError> {
    let c = Ctx::new(cfg, l, opts);
    let mut b = SagaBuilder::new(WORKFLOW, VERSION);
    b.on_failure(DEF.default_on_failure);
    // Read only: the public DNS zone's group names the ingress role assignment when
    // `dnsZoneResourceGroup` does not (a zone that is gone is no error here).
    // PublicAndPrivate: the public hostnames' records live in the public zone too.
    let public_zone = if l.dns_zone_rg.is_none() || c.public_hostnames.is_some() {
        b.stage("preflight");
        Some(preflight(&mut b, &c)?)
    } else {
        None
    };
    let release = if c.private && c.hypershift_link {
        b.stage("pls");
        Some(hypershift_pls(&mut b, &c)?)
    } else {
        None
    };
    if let (Some(h), Some(zone)) = (&c.public_hostnames, &public_zone) {
        b.stage("public-dns");
        public_dns(&mut b, &c, h, zone)?;
    }
    if c.private && !c.hypershift_link {
        b.stage("pe-dns");
        pe_dns(&mut b, &c)?;
        b.stage("pe-dns-zone");
        pe_dns_zone(&mut b, &c)?;
        b.stage("pls");
        pls(&mut b, &c)?;
    }
    b.stage("control-plane");
    control_plane(&mut b, &c, release.as_ref())?;
    b.stage("nodepools");
    nodepools(&mut b, &c)?;
    b.stage("role-assignments");
    role_assignments(&mut b, &c, public_zone.as_ref())?;
    b.stage("network");
    let managed_first = network(&mut b, &c)?;
    b.stage("resource-groups");
    resource_groups(&mut b, &c, managed_first.is_some())?;
    if opts.purge_persistent {
        b.stage("persistent");
        persistent(&mut b, &c)?;
        b.stage("persistent-rg");
        persistent_rg(&mut b, &c)?;
    }
    let mut dag = b.build()?;
    crate::budgets::apply(&mut dag, &cfg.wait_budgets);
    Ok(dag)
}

/// Every deletion is a pivot: what it deleted cannot be brought back, so a
/// delete only goes forward. A failed delete pauses for `retry`; it never claims to have
/// rolled anything back.
fn o() -> NodeOptions {
    NodeOptions::default().pivot(PIVOT)
}

/// Why a deletion cannot be undone (shown as `⚑ pivot: …`).
pub const PIVOT: &str = "a deletion cannot be undone";

/// delete-cluster as `start`, `plan`, `preflight` and `drive` see it.
pub static DEF: WorkflowDef = WorkflowDef {
    name: WORKFLOW,
    noun: "Deletion",
    default_on_failure: FailurePolicy::Pause {
        deadline_secs: None,
    },
    forward_only: true,
    destructive: true,
    follows_create: true,
    applies_config: false,
    updates: false,
    removes_cluster: true,
    preflight: PreflightKind::Delete,
    summary: "Take it down.",
    admit: crate::workflow::admit_any,
    on_existing: None,
    build: |c, l, o| {
        build(
            c,
            l,
            DeleteOptions {
                purge_persistent: o.purge_persistent,
                skip_cloud_cleanup: o.skip_cloud_cleanup,
            },
        )
    },
};

/// What every stage reads: the config, its layout, the options, and what follows.
struct Ctx<'a> {
    cfg: &'a ClusterConfig,
    l: &'a Layout,
    opts: DeleteOptions,
    /// The private-link stages ran (Private, PublicAndPrivate).
    private: bool,
    /// `privateLink.managedBy` as resolved before journaling (see create_cluster).
    hypershift_link: bool,
    /// PublicAndPrivate: the public hostnames whose records are ours.
    public_hostnames: Option<PublicHostnames>,
}

impl<'a> Ctx<'a> {
    fn new(cfg: &'a ClusterConfig, l: &'a Layout, opts: DeleteOptions) -> Self {
        Ctx {
            cfg,
            l,
            opts,
            private: cfg.topology.uses_private_link(),
            hypershift_link: cfg.private_link.managed_by == PrivateLinkManager::Hypershift,
            public_hostnames: hcp_activities::kube::render::public_hostnames(
                &l.name,
                &cfg.base_domain,
                crate::create_cluster::render_topology(cfg.topology),
                matches!(cfg.identities, crate::config::Identities::AroHcp(_)),
            ),
        }
    }

    /// The delete of an ARM resource in the guest subscription (not persistent).
    fn del(&self, resource_type: &str, id: &str, api: &str, tagged: bool) -> DeleteInput {
        DeleteInput {
            azure: self.l.azure.clone(),
            owner: self.l.owner.clone(),
            resource_type: resource_type.into(),
            id: id.into(),
            api: api.into(),
            tagged,
            persistent: false,
            shared: false,
        }
    }

    /// The delete of management-cluster objects in the clusters namespace.
    fn kube(&self, kind: Kind, names: Vec<String>) -> DeleteObjectInput {
        DeleteObjectInput {
            mgmt: self.l.mgmt.clone(),
            owner: self.l.owner.clone(),
            kind,
            namespace: CLUSTERS_NAMESPACE.into(),
            names,
            persistent: false,
            cleanup_cloud_resources: false,
            hypershift_private_link: None,
        }
    }

    fn hs_link(&self) -> HyperShiftLink {
        HyperShiftLink {
            mgmt_azure: self.l.mgmt_azure.clone(),
            guest_azure: self.l.azure.clone(),
        }
    }
}

/// `d`, marked persistent (deleted only with `--purge-persistent`).
fn persist(mut d: DeleteInput) -> DeleteInput {
    d.persistent = true;
    d
}

/// `preflight`: the public DNS zone lookup (optional: the zone may be gone).
fn preflight(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<Ref<PublicZoneOutput>, DagError> {
    b.add::<FindPublicZone>(
        n("preflight.public-dns-zone"),
        &crate::create_cluster::public_zone_input(c.cfg, c.l, true),
        o(),
    )
}

/// `pls` (HyperShift's private link): HyperShift's PLS, PE and zone are its own (its
/// finalizers remove them with the HostedCluster); only the connections its own endpoint
/// did not make are ours to reject and remove, before the HostedCluster goes
/// (hypershift_link.rs).
fn hypershift_pls(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<Ref<ReleaseOutput>, DagError> {
    let l = c.l;
    b.add::<ReleaseHyperShiftLink>(
        n("pls.hypershift-release"),
        &HyperShiftLinkInput {
            mgmt: l.mgmt.clone(),
            owner: l.owner.clone(),
            namespace: CLUSTERS_NAMESPACE.into(),
            name: l.name.clone(),
            link: c.hs_link(),
        },
        o(),
    )
}

/// `public-dns`: only the record sets marked as this cluster's (the zone is shared).
fn public_dns(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    h: &PublicHostnames,
    zone: &Ref<PublicZoneOutput>,
) -> Result<(), DagError> {
    b.add::<DeletePublicRecords>(
        n("public-dns.records"),
        &PublicRecordsDeleteInput {
            azure: c.l.azure.clone(),
            owner: c.l.owner.clone(),
            zone: zone.clone(),
            names: h.relative(&c.cfg.base_domain),
        },
        o(),
    )?;
    Ok(())
}

/// `pe-dns` (hcp-workflow's private link): the private-link zone's A records.
fn pe_dns(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    for rec in ["api", "*.apps"] {
        b.add::<DeleteDnsRecord>(
            n(&format!("pe-dns.record.{}", rec.trim_start_matches("*."))),
            &c.del(
                "Microsoft.Network/privateDnsZones/A",
                &format!("{}/A/{rec}", c.l.pl_zone_id),
                api::PRIVATE_DNS,
                false,
            ),
            o(),
        )?;
    }
    // The published hostnames' own zones (absent on a cluster made before they existed:
    // a delete of what is gone is done).
    for ez in &c.l.endpoint_zones {
        b.add::<DeleteDnsRecord>(
            n(&format!(
                "pe-dns.{}-record",
                crate::create_cluster::endpoint_key(&ez.host)
            )),
            &c.del(
                "Microsoft.Network/privateDnsZones/A",
                &format!("{}/A/@", ez.zone_id),
                api::PRIVATE_DNS,
                false,
            ),
            o(),
        )?;
    }
    Ok(())
}

/// `pe-dns-zone` (hcp-workflow's private link): the zone's link, the zone, and the
/// Private Endpoint.
fn pe_dns_zone(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    let l = c.l;
    let link = b.add::<DeleteDnsLink>(
        n("pe-dns.link"),
        &c.del(
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
            &l.pl_link_id,
            api::PRIVATE_DNS,
            true,
        ),
        o(),
    )?;
    b.add::<DeleteDnsZone>(
        n("pe-dns.zone"),
        &c.del(
            "Microsoft.Network/privateDnsZones",
            &l.pl_zone_id,
            api::PRIVATE_DNS,
            true,
        ),
        o().after(&link),
    )?;
    for ez in &l.endpoint_zones {
        let key = crate::create_cluster::endpoint_key(&ez.host);
        let link = b.add::<DeleteDnsLink>(
            n(&format!("pe-dns.{key}-link")),
            &c.del(
                "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
                &ez.link_id,
                api::PRIVATE_DNS,
                true,
            ),
            o(),
        )?;
        b.add::<DeleteDnsZone>(
            n(&format!("pe-dns.{key}-zone")),
            &c.del(
                "Microsoft.Network/privateDnsZones",
                &ez.zone_id,
                api::PRIVATE_DNS,
                true,
            ),
            o().after(&link),
        )?;
    }
    b.add::<DeletePrivateEndpoint>(
        n("pe-dns.endpoint"),
        &c.del(
            "Microsoft.Network/privateEndpoints",
            &l.pe_id,
            api::NETWORK,
            true,
        ),
        o(),
    )?;
    Ok(())
}

/// `pls` (hcp-workflow's private link): the Private Link Service (connections rejected
/// and removed first).
fn pls(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    b.add::<DeletePrivateLinkService>(
        n("pls.service"),
        &PlsDeleteInput {
            azure: c.l.mgmt_azure.clone(),
            owner: c.l.owner.clone(),
            id: c.l.pls_id.clone(),
        },
        o(),
    )?;
    Ok(())
}

/// `control-plane`: as `hypershift destroy cluster` (cmd/cluster/core/destroy.go), ask
/// HyperShift to remove the guest's cloud resources, then delete and wait until the
/// HostedCluster is gone (its finalizer is released once the cleanup is done or given up
/// on); then the Secrets, the check that HyperShift's private link is gone (`release`),
/// and our NAT subnet.
fn control_plane(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    release: Option<&Ref<ReleaseOutput>>,
) -> Result<(), DagError> {
    let l = c.l;
    let hc = b.add::<DeleteObject>(
        n("control-plane.hosted-cluster"),
        &DeleteObjectInput {
            cleanup_cloud_resources: !c.opts.skip_cloud_cleanup,
            hypershift_private_link: (c.private && c.hypershift_link).then(|| c.hs_link()),
            ..c.kube(Kind::HostedCluster, vec![l.name.clone()])
        },
        o(),
    )?;
    b.add::<DeleteObject>(
        n("control-plane.secrets"),
        &c.kube(
            Kind::Secret,
            vec![
                l.secret("pull-secret"),
                l.secret("ssh-key"),
                l.secret("etcd-encryption-key"),
            ],
        ),
        o().after(&hc),
    )?;
    if let Some(release) = release {
        b.add::<VerifyHyperShiftLinkGone>(
            n("pls.hypershift-gone"),
            &VerifyGoneInput {
                link: c.hs_link(),
                release: release.clone(),
            },
            o().after(&hc),
        )?;
    }
    if c.private && l.nat_subnet_create.is_some() {
        b.add::<DeleteSubnet>(
            n("control-plane.nat-subnet"),
            &DeleteInput {
                azure: l.mgmt_azure.clone(),
                ..c.del(
                    "Microsoft.Network/virtualNetworks/subnets",
                    &l.nat_subnet_id,
                    api::NETWORK,
                    false,
                )
            },
            o().after(&hc),
        )?;
    }
    Ok(())
}

/// `nodepools`: the NodePools go with the HostedCluster, as HyperShift
/// deletes them (`hostedcluster_controller.go` `delete` → `deleteNodePools`, with the CAPI
/// Cluster: cluster-api does not drain the nodes of a Cluster being deleted). Deleting them
/// first, as this workflow did, drained every node, and a PodDisruptionBudget could block
/// the delete for ever. What is left after the HostedCluster is gone (none, normally) is
/// deleted here.
fn nodepools(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    for p in &c.cfg.node_pools {
        b.add::<DeleteObject>(
            n(&format!("nodepools.{}", p.name)),
            &c.kube(Kind::NodePool, vec![format!("{}-{}", c.l.name, p.name)]),
            o(),
        )?;
    }
    Ok(())
}

/// `role-assignments`: ours also for bring-your-own identities (create assigns the same
/// 18 roles to them); the identities themselves are never deleted here.
fn role_assignments(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    public_zone: Option<&Ref<PublicZoneOutput>>,
) -> Result<(), DagError> {
    let l = c.l;
    for comp in &COMPONENTS {
        for s in comp.scopes {
            let Some(scope) = l.scope_id(*s) else {
                // The public zone's group, found by the preflight lookup (if the zone is
                // gone, so is nothing we could name).
                if let Some(zone) = public_zone {
                    b.add::<DeleteDnsScopeRoleAssignment>(
                        n(&format!(
                            "network.role.{}.{}",
                            comp.component.name(),
                            format!("{s:?}").to_lowercase()
                        )),
                        &DnsScopeRoleDeleteInput {
                            azure: l.azure.clone(),
                            owner: l.owner.clone(),
                            component: comp.component.name().into(),
                            zone: zone.clone(),
                        },
                        o(),
                    )?;
                }
                continue;
            };
            let guid = hcp_activities::azure::names::role_assignment_name(
                &l.infra_id,
                comp.component.name(),
                scope,
            );
            b.add::<DeleteRoleAssignment>(
                n(&format!(
                    "network.role.{}.{}",
                    comp.component.name(),
                    format!("{s:?}").to_lowercase()
                )),
                &c.del(
                    "Microsoft.Authorization/roleAssignments",
                    &format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{guid}"),
                    api::AUTHORIZATION,
                    false,
                ),
                o(),
            )?;
        }
    }
    // The ARO HCP data-plane identities' roles on the managed group (`<component>WI`).
    if l.aro.is_some() {
        for (comp, _, _, ra_component) in ARO_DATA_PLANE {
            let guid = hcp_activities::azure::names::role_assignment_name(
                &l.infra_id,
                ra_component,
                &l.managed_rg,
            );
            b.add::<DeleteRoleAssignment>(
                n(&format!("network.role.{comp}-data-plane.managed")),
                &c.del(
                    "Microsoft.Authorization/roleAssignments",
                    &format!(
                        "{}/providers/Microsoft.Authorization/roleAssignments/{guid}",
                        l.managed_rg
                    ),
                    api::AUTHORIZATION,
                    false,
                ),
                o(),
            )?;
        }
    }
    Ok(())
}

/// `network`: load balancer, public IP, the infra zone's link and zone, then (when ours)
/// the VNet and NSG. Returns the managed group's delete when it has to go before the VNet.
fn network(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<Option<Ref<DeleteOutput>>, DagError> {
    let l = c.l;
    let lb = b.add::<DeleteLoadBalancer>(
        n("network.load-balancer"),
        &c.del(
            "Microsoft.Network/loadBalancers",
            &l.lb_id,
            api::NETWORK,
            true,
        ),
        o(),
    )?;
    b.add::<DeletePublicIp>(
        n("network.public-ip"),
        &c.del(
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
        &c.del(
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
            &l.infra_link_id,
            api::PRIVATE_DNS,
            true,
        ),
        o(),
    )?;
    b.add::<DeleteDnsZone>(
        n("network.dns-zone"),
        &c.del(
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
    let managed_first = (c.opts.skip_cloud_cleanup && l.network_created).then(|| {
        b.add::<DeleteResourceGroup>(
            n("network.rg.managed"),
            &c.del(
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
            &c.del(
                "Microsoft.Network/virtualNetworks",
                &l.vnet_id,
                api::NETWORK,
                true,
            ),
            vo,
        )?;
        b.add::<DeleteNsg>(
            n("network.nsg"),
            &c.del(
                "Microsoft.Network/networkSecurityGroups",
                &l.nsg_id,
                api::NETWORK,
                true,
            ),
            o().after(&vnet),
        )?;
    }
    Ok(managed_first)
}

/// `resource-groups`: the managed group (unless `managed_gone`: the `network` stage deleted
/// it first) and, when the network is ours, the VNet and NSG groups.
fn resource_groups(b: &mut SagaBuilder, c: &Ctx<'_>, managed_gone: bool) -> Result<(), DagError> {
    let l = c.l;
    let mut rgs: Vec<(&str, &str)> = if l.network_created {
        vec![
            ("managed", &l.managed_rg),
            ("vnet", &l.vnet_rg),
            ("nsg", &l.nsg_rg),
        ]
    } else {
        vec![("managed", &l.managed_rg)]
    };
    if managed_gone {
        rgs.retain(|(what, _)| *what != "managed");
    }
    for (what, id) in rgs {
        b.add::<DeleteResourceGroup>(
            n(&format!("network.rg.{what}")),
            &c.del(
                "Microsoft.Resources/resourceGroups",
                id,
                api::RESOURCES,
                true,
            ),
            o(),
        )?;
    }
    Ok(())
}

/// `persistent` (`--purge-persistent`): the identities (each after its federated
/// credentials, those one at a time) and the OIDC issuer's storage and key.
fn persistent(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    let l = c.l;
    if Layout::identities_created(c.cfg) {
        for comp in &COMPONENTS {
            let ident = l.identity_id(comp.component);
            let mut fic = Vec::new();
            for s in comp.subjects {
                fic.push(b.add::<DeleteFederatedCredential>(
                    n(&format!(
                        "identities.{}.federated.{}",
                        comp.component.name(),
                        l.fic_name(s)
                    )),
                    &persist(c.del(
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
                n(&format!("identities.{}", comp.component.name())),
                &persist(c.del(
                    "Microsoft.ManagedIdentity/userAssignedIdentities",
                    &ident,
                    api::MSI,
                    true,
                )),
                io,
            )?;
        }
    }
    aro_persistent(b, c)?;
    if let Some(account) = &l.storage_account_id {
        let container = b.add::<DeleteContainer>(
            n("oidc.container"),
            &persist(c.del(
                "Microsoft.Storage/storageAccounts/blobServices/containers",
                &format!("{account}/blobServices/default/containers/{}", l.container),
                api::STORAGE,
                false,
            )),
            o(),
        )?;
        b.add::<DeleteStorageAccount>(
            n("oidc.storage-account"),
            &persist(c.del(
                "Microsoft.Storage/storageAccounts",
                account,
                api::STORAGE,
                true,
            )),
            o().after(&container),
        )?;
        b.add::<DeleteObject>(
            n("oidc.key"),
            &DeleteObjectInput {
                persistent: true,
                ..c.kube(Kind::Secret, vec![l.secret("sa-token-issuer-key")])
            },
            o(),
        )?;
    }
    Ok(())
}

/// The ARO HCP model's persistent objects (`--purge-persistent`): per component the
/// credentials secret, the certificate (both deleted and purged) and the application
/// (Entra deletes its service principal with it; then permanently from deleted items),
/// each only when it carries this cluster's tags; the data-plane identities after their
/// federated credentials; last the vault, only when this cluster made it and nothing
/// else is in it (its role assignments go with it and with the persistent group).
fn aro_persistent(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    let l = c.l;
    let Some(a) = &l.aro else {
        return Ok(());
    };
    let mut vault_after = Vec::new();
    for comp in &COMPONENTS {
        let name = comp.component.name();
        let obj = |what: String| DeleteVaultObjectInput {
            azure: l.azure.clone(),
            owner: l.owner.clone(),
            vault: a.key_vault.clone(),
            name: what,
            persistent: true,
        };
        let secret = b.add::<DeleteSecret>(
            n(&format!("identities.{name}.credentials")),
            &obj(a.credentials_secret(comp.component)),
            o(),
        )?;
        let cert = b.add::<DeleteCertificate>(
            n(&format!("identities.{name}.certificate")),
            &obj(a.cert(comp.component)),
            o().after(&secret),
        )?;
        b.add::<DeleteApplication>(
            n(&format!("identities.{name}.application")),
            &DeleteApplicationInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                unique_name: a.app_unique_name(comp.component),
                persistent: true,
            },
            o(),
        )?;
        vault_after.push(cert);
    }
    for (comp, subject, _, _) in ARO_DATA_PLANE {
        let ident = a.data_plane_identity_id(comp);
        let fic = b.add::<DeleteFederatedCredential>(
            n(&format!(
                "identities.data-plane.{comp}.federated.{}",
                l.fic_name(subject)
            )),
            &persist(c.del(
                "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials",
                &format!(
                    "{ident}/federatedIdentityCredentials/{}",
                    l.fic_name(subject)
                ),
                api::MSI,
                false,
            )),
            o(),
        )?;
        b.add::<DeleteIdentity>(
            n(&format!("identities.data-plane.{comp}")),
            &persist(c.del(
                "Microsoft.ManagedIdentity/userAssignedIdentities",
                &ident,
                api::MSI,
                true,
            )),
            o().after(&fic),
        )?;
    }
    if !a.key_vault_existing {
        let mut vo = o();
        for r in &vault_after {
            vo = vo.after(r);
        }
        b.add::<DeleteKeyVault>(
            n("identities.key-vault"),
            &KeyVaultInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                id: a.key_vault_id.clone(),
                location: l.location.clone(),
                tenant_id: Some(a.tenant.clone()),
                byo: false,
                persistent: true,
                shared: true,
            },
            vo,
        )?;
    }
    Ok(())
}

/// `persistent-rg` (`--purge-persistent`): shared by many clusters, deleted only when
/// hcp-workflow made it and nothing is left inside once this cluster's own persistent
/// resources are gone (finding 11).
fn persistent_rg(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    b.add::<DeleteResourceGroup>(
        n("identities.persistent-rg"),
        &DeleteInput {
            shared: true,
            ..persist(c.del(
                "Microsoft.Resources/resourceGroups",
                &c.l.persistent_rg,
                api::RESOURCES,
                true,
            ))
        },
        o(),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// With a bring-your-own network and identities, delete
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
