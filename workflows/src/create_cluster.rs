//! create-cluster: identities → OIDC → network → control plane → PLS → PE/DNS → nodepools.
//!
//! Laid out like omicron's sagas: the DAG is built once from the config (nodes included or
//! not depending on it), persisted with the run, and every node is an action of
//! `hcp_activities::steps` whose undo is declared beside it. Parallel where Azure allows:
//! identities in parallel, each identity's federated credentials one node (written one at
//! a time), role assignments in parallel, node pools in parallel.

use crate::config::PrivateLinkManager;
use crate::config::{ClusterConfig, Identities, Topology};
use crate::layout::{CLUSTERS_NAMESPACE, COMPONENTS, Layout, Scope, api};
use hcp_activities::kube::render::{HostedClusterInput, NodePoolImage, NodePoolInput};
use hcp_activities::steps::arm::{
    EnsureContainer, EnsureDnsLink, EnsureDnsZone, EnsureIdentity, EnsureLoadBalancer, EnsureNsg,
    EnsurePublicIp, EnsureResourceGroup, EnsureStorageAccount, EnsureVnet, ResourceInput,
    ResourceOutput,
};
use hcp_activities::steps::cluster::{
    ApplyHostedCluster, ApplyNodePool, ClientId, ConditionInput, EnsureClusterSecrets,
    EnsureIssuerKey, ExistingIssuerKey, HostedClusterNodeInput, IssuerKeyInput, NodePoolNodeInput,
    RolloutInput, SecretsInput, WaitCondition, WaitRollout,
};
use hcp_activities::steps::dns::{
    EnsurePublicRecords, FindPublicZone, PublicRecordsInput, PublicZoneInput,
};
use hcp_activities::steps::hypershift_link::{
    HyperShiftLink, HyperShiftLinkInput, WaitHyperShiftEndpoint, WaitHyperShiftPls,
};
use hcp_activities::steps::identity::{
    EnsureFederatedCredentials, EnsureRoleAssignment, FederatedInput, IdentitySource,
    ResolveIdentities, ResolveInput, RoleInput, Subject,
};
use hcp_activities::steps::private_link::{
    ARecordInput, EnsureARecords, EnsureNatSubnet, EnsurePrivateEndpoint, EnsurePrivateLinkService,
    NatSubnetInput, OidcDocsInput, PeInput, PlsInput, PublishOidcDocuments, SubnetRef,
};
use hcp_runtime::{DagError, NodeOptions, Ref, SagaBuilder, SagaDag};
use serde_json::json;
use std::collections::BTreeMap;

/// Workflow name.
pub const WORKFLOW: &str = "create-cluster";
/// Version of this definition (persisted with each run).
pub const VERSION: u32 = 1;

fn n(s: &str) -> String {
    format!("{WORKFLOW}.{s}")
}

/// Build the DAG for `cfg` with the resolved `layout`.
///
/// # Errors
/// A definition error (a bug: caught by the unit tests).
pub fn build(cfg: &ClusterConfig, l: &Layout) -> Result<SagaDag, DagError> {
    let mut b = SagaBuilder::new(WORKFLOW, VERSION);
    let o = NodeOptions::default;
    let res = |resource_type: &str, id: &str, api: &str, body: serde_json::Value| ResourceInput {
        azure: l.azure.clone(),
        owner: l.owner.clone(),
        resource_type: resource_type.into(),
        id: id.into(),
        api: api.into(),
        body,
        tagged: true,
        persistent: false,
        byo: false,
        shared: false,
    };
    let loc = || json!({"location": l.location});
    // Resource groups carry the user's tags too (`resourceGroupTags`; ownership tags are
    // merged over them when the body is sent).
    let rg_body = || {
        let mut body = loc();
        if !cfg.resource_group_tags.is_empty() {
            body["tags"] = json!(cfg.resource_group_tags);
        }
        body
    };

    // ---- preflight: read-only lookups before anything is created ------------------------
    // The public DNS zone of baseDomain must exist (HyperShift: `GetBaseDomainID`), and
    // bring-your-own identities must resolve to principals (their role assignments need
    // them). A miss fails the run for good before anything is written.
    b.stage("preflight");
    let public_zone = b.add::<FindPublicZone>(
        n("preflight.public-dns-zone"),
        &public_zone_input(cfg, l, false),
        o(),
    )?;
    let resolved = match cfg.read_workload_identities() {
        Ok(Some(w)) => Some(
            b.add::<ResolveIdentities>(
                n("preflight.identities"),
                &ResolveInput {
                    azure: l.azure.clone(),
                    subscription: l.sub.clone(),
                    client_ids: COMPONENTS
                        .iter()
                        .map(|c| {
                            (
                                c.component.name().to_string(),
                                w.get(c.component).client_id.clone(),
                            )
                        })
                        .collect(),
                },
                o(),
            )?,
        ),
        _ => None,
    };

    // ---- identities -------------------------------------------------------------------
    b.stage("identities");
    let prg = b.add::<EnsureResourceGroup>(
        n("identities.persistent-rg"),
        &ResourceInput {
            persistent: true,
            // Shared by many clusters (HyperShift's `os4-common`): adopted whoever made
            // it, deleted only when empty (issue 12, finding 11).
            shared: true,
            ..res(
                "Microsoft.Resources/resourceGroups",
                &l.persistent_rg,
                api::RESOURCES,
                rg_body(),
            )
        },
        o(),
    )?;
    let mut identities: BTreeMap<&'static str, Ref<ResourceOutput>> = BTreeMap::new();
    if Layout::identities_created(cfg) {
        for c in &COMPONENTS {
            let id = l.identity_id(c.component);
            let r = b.add::<EnsureIdentity>(
                n(&format!("identities.{}", c.component.name())),
                &ResourceInput {
                    persistent: true,
                    ..res(
                        "Microsoft.ManagedIdentity/userAssignedIdentities",
                        &id,
                        api::MSI,
                        loc(),
                    )
                },
                o().after(&prg),
            )?;
            identities.insert(c.component.name(), r);
        }
        for c in &COMPONENTS {
            let Some(ident) = identities.get(c.component.name()) else {
                continue;
            };
            b.add::<EnsureFederatedCredentials>(
                n(&format!("identities.{}.federated", c.component.name())),
                &FederatedInput {
                    azure: l.azure.clone(),
                    owner: l.owner.clone(),
                    identity: ident.clone(),
                    issuer: l.issuer_url.clone(),
                    subjects: c
                        .subjects
                        .iter()
                        .map(|s| Subject {
                            name: l.fic_name(s),
                            subject: format!("system:serviceaccount:{s}"),
                        })
                        .collect(),
                    persistent: true,
                },
                o().after(ident),
            )?;
        }
    }

    // ---- OIDC ---------------------------------------------------------------------------
    // The service-account signing key is always ours (kept in a Secret on the management
    // cluster); with an existing issuer, publishing its JWKS (the node's output) is the
    // issuer owner's job.
    b.stage("oidc");
    let key = b.add::<EnsureIssuerKey>(
        n("oidc.key"),
        &IssuerKeyInput {
            mgmt: l.mgmt.clone(),
            owner: l.owner.clone(),
            namespace: CLUSTERS_NAMESPACE.into(),
            secret: l.secret("sa-token-issuer-key"),
            existing: match &cfg.oidc_issuer {
                crate::config::OidcIssuer::Existing(e) => Some(ExistingIssuerKey {
                    key_file: e.signing_key.clone(),
                    issuer_url: e.url.clone(),
                    azure: l.azure.clone(),
                }),
                crate::config::OidcIssuer::Create(_) => None,
            },
        },
        o(),
    )?;
    if let Some(account_id) = &l.storage_account_id {
        let account = b.add::<EnsureStorageAccount>(
            n("oidc.storage-account"),
            &ResourceInput {
                persistent: true,
                ..res(
                    "Microsoft.Storage/storageAccounts",
                    account_id,
                    api::STORAGE,
                    json!({
                        "location": l.location,
                        "kind": "StorageV2",
                        "sku": {"name": "Standard_LRS"},
                        "properties": {"allowBlobPublicAccess": true, "minimumTlsVersion": "TLS1_2"},
                    }),
                )
            },
            o(),
        )?;
        let container = b.add::<EnsureContainer>(
            n("oidc.container"),
            &ResourceInput {
                tagged: false,
                persistent: true,
                ..res(
                    "Microsoft.Storage/storageAccounts/blobServices/containers",
                    &format!(
                        "{account_id}/blobServices/default/containers/{}",
                        l.container
                    ),
                    api::STORAGE,
                    json!({"properties": {"publicAccess": "Container"}}),
                )
            },
            o().after(&account),
        )?;
        b.add::<PublishOidcDocuments>(
            n("oidc.documents"),
            &OidcDocsInput {
                azure: l.azure.clone(),
                account_id: account_id.clone(),
                container: l.container.clone(),
                issuer: l.issuer_url.clone(),
                key: key.clone(),
            },
            o().after(&container).after(&key),
        )?;
    }

    // ---- network ------------------------------------------------------------------------
    b.stage("network");
    let rg = |b: &mut SagaBuilder, what: &str, id: &str| {
        b.add::<EnsureResourceGroup>(
            n(&format!("network.rg.{what}")),
            &res(
                "Microsoft.Resources/resourceGroups",
                id,
                api::RESOURCES,
                rg_body(),
            ),
            o(),
        )
    };
    let managed = rg(&mut b, "managed", &l.managed_rg)?;
    let mut net_done: Vec<Ref<ResourceOutput>> = Vec::new();
    // Role assignments wait for the group they are scoped to.
    let mut scope_rgs: Vec<(Scope, Ref<ResourceOutput>)> = vec![(Scope::Managed, managed.clone())];
    let mut vnet_node: Option<Ref<ResourceOutput>> = None;
    if l.network_created {
        let vnet_rg = rg(&mut b, "vnet", &l.vnet_rg)?;
        let nsg_rg = rg(&mut b, "nsg", &l.nsg_rg)?;
        scope_rgs.push((Scope::Vnet, vnet_rg.clone()));
        scope_rgs.push((Scope::Nsg, nsg_rg.clone()));
        let nsg = b.add::<EnsureNsg>(
            n("network.nsg"),
            &res(
                "Microsoft.Network/networkSecurityGroups",
                &l.nsg_id,
                api::NETWORK,
                loc(),
            ),
            o().after(&nsg_rg),
        )?;
        let (vnet_cidr, subnet_cidr) = match &cfg.network {
            crate::config::Network::Create(c) => (c.vnet_cidr.clone(), c.subnet_cidr.clone()),
            crate::config::Network::Existing(_) => Default::default(),
        };
        let vnet = b.add::<EnsureVnet>(
            n("network.vnet"),
            &res(
                "Microsoft.Network/virtualNetworks",
                &l.vnet_id,
                api::NETWORK,
                json!({
                    "location": l.location,
                    "properties": {
                        "addressSpace": {"addressPrefixes": [vnet_cidr]},
                        "subnets": [{"name": "default", "properties": {
                            "addressPrefix": subnet_cidr,
                            "networkSecurityGroup": {"id": l.nsg_id},
                        }}],
                    }
                }),
            ),
            o().after(&vnet_rg).after(&nsg),
        )?;
        net_done.push(vnet.clone());
        vnet_node = Some(vnet);
    }
    // The infra private DNS zone `<name>.<baseDomain>` and its link to the guest VNet are
    // always ours, also with a bring-your-own network (openshift/hypershift
    // `cmd/infra/azure/create.go` `createDNSAndLBResources`): the zone lives in the managed
    // group; the link only names the VNet, which is never modified.
    let zone = b.add::<EnsureDnsZone>(
        n("network.dns-zone"),
        &res(
            "Microsoft.Network/privateDnsZones",
            &l.infra_zone_id,
            api::PRIVATE_DNS,
            json!({"location": "global"}),
        ),
        o().after(&managed),
    )?;
    let link = b.add::<EnsureDnsLink>(
        n("network.dns-link"),
        &res(
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
            &l.infra_link_id,
            api::PRIVATE_DNS,
            json!({"location": "global", "properties": {
                "virtualNetwork": {"id": l.vnet_id},
                "registrationEnabled": false,
            }}),
        ),
        match &vnet_node {
            Some(vnet) => o().after(&zone).after(vnet),
            None => o().after(&zone),
        },
    )?;
    net_done.push(link);
    let ip = b.add::<EnsurePublicIp>(
        n("network.public-ip"),
        &res(
            "Microsoft.Network/publicIPAddresses",
            &l.public_ip_id,
            api::NETWORK,
            json!({
                "location": l.location,
                "sku": {"name": "Standard"},
                "properties": {
                    "publicIPAllocationMethod": "Static",
                    "publicIPAddressVersion": "IPv4",
                    "idleTimeoutInMinutes": 4,
                }
            }),
        ),
        o().after(&managed),
    )?;
    let lb = b.add::<EnsureLoadBalancer>(
        n("network.load-balancer"),
        &res(
            "Microsoft.Network/loadBalancers",
            &l.lb_id,
            api::NETWORK,
            egress_lb_body(l),
        ),
        o().after(&ip),
    )?;
    net_done.push(lb);
    // Role assignments need the groups as scopes (and the identities' principals).
    let mut roles = Vec::new();
    // Bring-your-own identities get the same 18 assignments (HyperShift:
    // `handleIdentitiesAndRBAC`); their principals come from the preflight lookup.
    for c in &COMPONENTS {
        let identity: IdentitySource = match (identities.get(c.component.name()), &resolved) {
            (Some(ident), _) => ident.clone().into(),
            (None, Some(r)) => IdentitySource::Resolved {
                resolved: r.clone(),
                component: c.component.name().to_string(),
            },
            (None, None) => continue,
        };
        for s in c.scopes {
            // The DNS scope is the public zone's group, known once the zone is found.
            let (scope, scope_from) = match l.scope_id(*s) {
                Some(id) => (id.to_string(), None),
                None => (String::new(), Some(public_zone.clone())),
            };
            let what = format!("{s:?}").to_lowercase();
            let r = b.add::<EnsureRoleAssignment>(
                n(&format!("network.role.{}.{what}", c.component.name())),
                &RoleInput {
                    azure: l.azure.clone(),
                    owner: l.owner.clone(),
                    component: c.component.name().into(),
                    scope,
                    role: c.role.into(),
                    identity: identity.clone(),
                    scope_from,
                },
                match scope_rgs.iter().find(|(sc, _)| sc == s) {
                    Some((_, group)) => o().after(group),
                    None => o(),
                },
            )?;
            roles.push(r);
        }
    }

    // ---- control plane --------------------------------------------------------------------
    b.stage("control-plane");
    let secrets = b.add::<EnsureClusterSecrets>(
        n("control-plane.secrets"),
        &SecretsInput {
            mgmt: l.mgmt.clone(),
            owner: l.owner.clone(),
            namespace: CLUSTERS_NAMESPACE.into(),
            pull_secret_file: cfg.pull_secret.clone(),
            ssh_key_file: cfg.ssh_key.clone(),
            pull_secret: l.secret("pull-secret"),
            ssh_key: l.secret("ssh-key"),
            etcd_key: l.secret("etcd-encryption-key"),
        },
        o(),
    )?;
    let private = cfg.topology.uses_private_link();
    // Resolved before the run is journaled (bin: `auto` reads the operator's args); an
    // unresolved `auto` builds today's hcp-workflow stages (e.g. `plan` offline).
    let hypershift_link = cfg.private_link.managed_by == PrivateLinkManager::Hypershift;
    let hs_link = HyperShiftLink {
        mgmt_azure: l.mgmt_azure.clone(),
        guest_azure: l.azure.clone(),
    };
    let mut nat = None;
    if private && let Some(cidr) = &l.nat_subnet_create {
        nat = Some(b.add::<EnsureNatSubnet>(
            n("control-plane.nat-subnet"),
            &NatSubnetInput {
                azure: l.mgmt_azure.clone(),
                owner: l.owner.clone(),
                vnet_id: l.mgmt_vnet_id.clone(),
                name: format!("{}-pls-nat", l.infra_id),
                cidr: cidr.clone(),
            },
            o(),
        )?);
    }
    let mut client_ids = BTreeMap::new();
    match &cfg.identities {
        Identities::Create(_) => {
            for (k, r) in &identities {
                client_ids.insert((*k).to_string(), ClientId::Identity(r.clone()));
            }
        }
        Identities::Existing(_) => {
            if let Ok(Some(w)) = cfg.read_workload_identities() {
                for c in &COMPONENTS {
                    client_ids.insert(
                        c.component.name().to_string(),
                        ClientId::Literal(w.get(c.component).client_id.clone()),
                    );
                }
            }
        }
    }
    let hc_name = l.name.clone();
    // PublicAndPrivate: the API server and OAuth have public hostnames whose A records
    // hcp-workflow writes (issue 22 §1; `kube::render::hosted_cluster`).
    let public_hostnames = hcp_activities::kube::render::public_hostnames(
        &hc_name,
        &cfg.base_domain,
        render_topology(cfg.topology),
    );
    let mut hc_opts = o().after(&secrets);
    if let Some(nat) = &nat {
        hc_opts = hc_opts.after(nat);
    }
    let hc = b.add::<ApplyHostedCluster>(
        n("control-plane.hosted-cluster"),
        &HostedClusterNodeInput {
            mgmt: l.mgmt.clone(),
            owner: l.owner.clone(),
            spec: HostedClusterInput {
                name: hc_name.clone(),
                namespace: CLUSTERS_NAMESPACE.into(),
                infra_id: l.infra_id.clone(),
                release_image: cfg.release_image.clone(),
                base_domain: cfg.base_domain.clone(),
                issuer_url: l.issuer_url.clone(),
                location: l.location.clone(),
                subscription_id: l.sub.clone(),
                tenant_id: cfg.tenant.clone(),
                resource_group: l
                    .managed_rg
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                vnet_id: l.vnet_id.clone(),
                subnet_id: l.subnet_id.clone(),
                nsg_id: l.nsg_id.clone(),
                topology: render_topology(cfg.topology),
                workload_identities: BTreeMap::new(),
                nat_subnet_id: private.then(|| l.nat_subnet_id.clone()),
                pull_secret_name: l.secret("pull-secret"),
                ssh_key_secret_name: Some(l.secret("ssh-key")),
                etcd_key_secret_name: l.secret("etcd-encryption-key"),
                sa_signing_key_secret_name: l.secret("sa-token-issuer-key"),
                cloud: hosted_cluster_cloud(&cfg.cloud),
                highly_available: cfg.control_plane.availability_policy
                    == crate::config::AvailabilityPolicy::HighlyAvailable,
                infrastructure_highly_available: cfg
                    .control_plane
                    .infrastructure_availability_policy
                    == crate::config::AvailabilityPolicy::HighlyAvailable,
                fips: cfg.control_plane.fips,
                etcd_storage_class: cfg.control_plane.etcd.storage_class.clone(),
                etcd_size: cfg.control_plane.etcd.size.clone(),
                image_content_sources: cfg
                    .control_plane
                    .image_content_sources
                    .iter()
                    .map(|i| (i.source.clone(), i.mirrors.clone()))
                    .collect(),
                kms: cfg.control_plane.kms.as_ref().and_then(|k| {
                    // Validated with the file (exit 2 before anything is journaled).
                    let (vault, key, version) = crate::config::kms_key(&k.key_id).ok()?;
                    Some(hcp_activities::kube::render::KmsInput {
                        vault,
                        key,
                        version,
                        credentials_secret_name: k.credentials_secret_name.clone(),
                    })
                }),
                ovn_kubernetes_mtu: cfg.networking.ovn_kubernetes_mtu,
                disable_multi_network: cfg.networking.disable_multi_network,
                node_selector: cfg.control_plane.placement.node_selector.clone(),
                tolerations: cfg
                    .control_plane
                    .placement
                    .tolerations
                    .iter()
                    .filter_map(|t| serde_json::to_value(t).ok())
                    .collect(),
                pod_labels: cfg.control_plane.placement.pod_labels.clone(),
                user_labels: cfg.control_plane.labels.clone(),
                annotations: cfg.control_plane.annotations.clone(),
                kube_api_server_dns_name: cfg.control_plane.kube_api_server_dns_name.clone(),
                feature_set: cfg.control_plane.feature_set.clone(),
                capabilities_enabled: cfg.control_plane.capabilities.enabled.clone(),
                capabilities_disabled: cfg.control_plane.capabilities.disabled.clone(),
                control_plane_operator_image: cfg
                    .control_plane
                    .control_plane_operator_image
                    .clone(),
                cluster_network: Some(cfg.networking.cluster_network.clone()),
                service_network: Some(cfg.networking.service_network.clone()),
                machine_network: match &cfg.network {
                    crate::config::Network::Create(c) => Some(c.vnet_cidr.clone()),
                    crate::config::Network::Existing(e) => e.machine_cidr.clone(),
                },
                additional_allowed_subscriptions: cfg.allowed_subscriptions.clone(),
                private_zone_id: Some(l.infra_zone_id.clone()),
                // Filled at run time from the preflight lookup.
                public_zone_id: None,
                labels: BTreeMap::new(),
            },
            client_ids,
            wait_router: private,
            wait_public_router: public_hostnames.is_some(),
            // A failed create's undo asks the guest to clean up too (destroy.go does).
            cleanup_cloud_resources: true,
            public_zone: Some(public_zone.clone()),
            hypershift_private_link: (private && hypershift_link).then(|| hs_link.clone()),
        },
        hc_opts,
    )?;

    // ---- private link -------------------------------------------------------------------
    if private && !hypershift_link {
        b.stage("pls");
        let mut subs = vec![l.sub.clone()];
        for s in &cfg.allowed_subscriptions {
            if !subs.contains(s) {
                subs.push(s.clone());
            }
        }
        let pls = b.add::<EnsurePrivateLinkService>(
            n("pls.service"),
            &PlsInput {
                azure: l.mgmt_azure.clone(),
                owner: l.owner.clone(),
                id: l.pls_id.clone(),
                location: l.location.clone(),
                lb_resource_group: l.mgmt_lb_rg.clone(),
                hosted_cluster: hc.clone(),
                nat_subnet: match &nat {
                    Some(r) => SubnetRef::Node(r.clone()),
                    None => SubnetRef::Id(l.nat_subnet_id.clone()),
                },
                subscriptions: subs,
            },
            o(),
        )?;

        b.stage("pe-dns");
        let pe = b.add::<EnsurePrivateEndpoint>(
            n("pe-dns.endpoint"),
            &PeInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                id: l.pe_id.clone(),
                location: l.location.clone(),
                subnet_id: l.subnet_id.clone(),
                pls: pls.clone(),
            },
            o(),
        )?;
        let zone = b.add::<EnsureDnsZone>(
            n("pe-dns.zone"),
            &res(
                "Microsoft.Network/privateDnsZones",
                &l.pl_zone_id,
                api::PRIVATE_DNS,
                json!({"location": "global"}),
            ),
            o(),
        )?;
        let link = b.add::<EnsureDnsLink>(
            n("pe-dns.link"),
            &res(
                "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
                &l.pl_link_id,
                api::PRIVATE_DNS,
                json!({"location": "global", "properties": {
                    "virtualNetwork": {"id": l.vnet_id},
                    "registrationEnabled": false,
                }}),
            ),
            o().after(&zone),
        )?;
        b.add::<EnsureARecords>(
            n("pe-dns.records"),
            &ARecordInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                zone_id: l.pl_zone_id.clone(),
                names: vec!["api".into(), "*.apps".into()],
                endpoint: pe.clone(),
            },
            o().after(&zone).after(&link).after(&pe),
        )?;
    }
    if private && hypershift_link {
        // HyperShift's controllers make PLS, PE and DNS: wait for what its
        // AzurePrivateLinkService reports, verify and record it (hypershift_link.rs).
        let input = HyperShiftLinkInput {
            mgmt: l.mgmt.clone(),
            owner: l.owner.clone(),
            namespace: CLUSTERS_NAMESPACE.into(),
            name: hc_name.clone(),
            link: hs_link.clone(),
        };
        b.stage("pls");
        b.add::<WaitHyperShiftPls>(n("pls.hypershift"), &input, o().after(&hc))?;
        b.stage("pe-dns");
        b.add::<WaitHyperShiftEndpoint>(n("pe-dns.hypershift"), &input, o())?;
    }
    if let Some(h) = &public_hostnames {
        b.stage("public-dns");
        b.add::<EnsurePublicRecords>(
            n("public-dns.records"),
            &PublicRecordsInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                zone: public_zone.clone(),
                names: h.relative(&cfg.base_domain),
                hosted_cluster: hc.clone(),
            },
            o().after(&hc),
        )?;
    }
    b.stage("available");
    let wait = |condition: &str| ConditionInput {
        mgmt: l.mgmt.clone(),
        kind: hcp_activities::kube::mgmt::Kind::HostedCluster,
        namespace: CLUSTERS_NAMESPACE.into(),
        name: hc_name.clone(),
        condition: condition.into(),
    };
    b.add::<WaitCondition>(n("available.hosted-cluster"), &wait("Available"), o())?;
    if public_hostnames.is_some() {
        // The control-plane operator resolves the API server's public hostname
        // (`hostedcontrolplane_controller.go`: `ExternalDNSReachable`, bubbled up to the
        // HostedCluster): the record just written is what users' kubeconfigs will use.
        b.add::<WaitCondition>(
            n("available.external-dns"),
            &wait("ExternalDNSReachable"),
            o(),
        )?;
    }

    // ---- node pools ---------------------------------------------------------------------
    b.stage("nodepools");
    for p in &cfg.node_pools {
        b.add::<ApplyNodePool>(
            n(&format!("nodepools.{}", p.name)),
            &NodePoolNodeInput {
                mgmt: l.mgmt.clone(),
                owner: l.owner.clone(),
                spec: NodePoolInput {
                    name: format!("{}-{}", l.name, p.name),
                    namespace: CLUSTERS_NAMESPACE.into(),
                    cluster_name: hc_name.clone(),
                    replicas: i32::try_from(p.replicas).unwrap_or(i32::MAX),
                    release_image: cfg.release_image.clone(),
                    vm_size: p.vm_size.clone(),
                    os_disk_size_gib: i32::try_from(p.os_disk_size_gib).unwrap_or(i32::MAX),
                    image: node_image(p),
                    subnet_id: p.subnet_id.clone().unwrap_or_else(|| l.subnet_id.clone()),
                    availability_zone: p.zone.clone(),
                    labels: BTreeMap::new(),
                    // Validated with the file (exit 2 before anything is journaled).
                    node_drain_timeout: crate::config::drain_timeout(
                        p.node_drain_timeout.as_deref(),
                    )
                    .ok()
                    .flatten(),
                    node_volume_detach_timeout: crate::config::drain_timeout(
                        p.node_volume_detach_timeout.as_deref(),
                    )
                    .ok()
                    .flatten(),
                    arch: p.arch.clone(),
                    upgrade_type: p.upgrade_type.clone(),
                    encryption_at_host: p.encryption_at_host.clone(),
                    disk_encryption_set_id: p.disk_encryption_set_id.clone(),
                    os_disk_storage_account_type: p.os_disk_storage_account_type.clone(),
                    auto_repair: p.auto_repair,
                    ephemeral_os_disk: p.ephemeral_os_disk,
                    diagnostics: p.diagnostics.as_ref().map(|d| {
                        (
                            d.storage_account_type.clone(),
                            d.storage_account_uri.clone(),
                        )
                    }),
                },
            },
            o(),
        )?;
    }
    // ---- rollout ---------------------------------------------------------------------
    // As `hypershift create cluster --wait`: the cluster is created once its release has
    // rolled out (console, ingress, registry, CSI available), not at Available + Ready pools.
    b.stage("rollout");
    b.add::<WaitRollout>(
        n("rollout.guest"),
        &RolloutInput {
            mgmt: l.mgmt.clone(),
            namespace: CLUSTERS_NAMESPACE.into(),
            name: hc_name.clone(),
        },
        o(),
    )?;
    let _ = (net_done, roles);
    let mut dag = b.build()?;
    crate::budgets::apply(&mut dag, &cfg.wait_budgets);
    Ok(dag)
}

/// The public DNS zone lookup of `cfg` (`optional`: delete-cluster, where it may be gone).
pub(crate) fn public_zone_input(
    cfg: &ClusterConfig,
    l: &Layout,
    optional: bool,
) -> PublicZoneInput {
    PublicZoneInput {
        azure: l.azure.clone(),
        subscription: l.sub.clone(),
        base_domain: cfg.base_domain.clone(),
        resource_group: cfg.dns_zone_resource_group.clone(),
        optional,
    }
}

/// A pool's boot image: the one given (`nodePools[].image`), else — from OpenShift 4.20 on —
/// an empty Gen2 marketplace image that HyperShift's NodePool controller fills from the
/// release payload (`hypershift-operator/controllers/nodepool/azure.go`
/// `defaultAzureNodePoolImage`). Validation refuses a pool without an image before 4.20;
/// should one get here anyway, the release default is rendered and HyperShift reports it.
fn node_image(p: &crate::config::NodePool) -> NodePoolImage {
    use crate::config::ImageType;
    let Some(image) = &p.image else {
        return NodePoolImage::FromRelease {
            image_generation: "Gen2".into(),
        };
    };
    match image.image_type {
        ImageType::ImageId => NodePoolImage::ImageId(image.image_id.clone().unwrap_or_default()),
        ImageType::AzureMarketplace => {
            let m = image.azure_marketplace.clone().unwrap_or_default();
            match (m.publisher, m.offer, m.sku, m.version) {
                (Some(publisher), Some(offer), Some(sku), Some(version)) => {
                    NodePoolImage::Marketplace {
                        publisher,
                        offer,
                        sku,
                        version,
                    }
                }
                _ => NodePoolImage::FromRelease {
                    image_generation: m
                        .image_generation
                        .unwrap_or(crate::config::ImageGeneration::Gen2)
                        .as_str()
                        .into(),
                },
            }
        }
    }
}

/// The rendering topology of a configured one.
pub(crate) fn render_topology(t: Topology) -> hcp_activities::kube::render::Topology {
    use hcp_activities::kube::render::Topology as T;
    match t {
        Topology::Public => T::Public,
        Topology::PublicAndPrivate => T::PublicAndPrivate,
        Topology::Private => T::Private,
    }
}

/// The egress load balancer (DOMAIN.md §3): probe Http 30595 `/healthz`, outbound rule All
/// with 1024 ports per instance, frontend on the egress public IP.
fn egress_lb_body(l: &Layout) -> serde_json::Value {
    let lb = &l.lb_id;
    json!({
        "location": l.location,
        "sku": {"name": "Standard"},
        "properties": {
            "frontendIPConfigurations": [{
                "name": format!("{}-frontend", l.infra_id),
                "properties": {"publicIPAddress": {"id": l.public_ip_id}},
            }],
            "backendAddressPools": [{"name": l.infra_id}],
            "probes": [{
                "name": "http-probe",
                "properties": {"protocol": "Http", "port": 30595, "requestPath": "/healthz",
                               "intervalInSeconds": 5, "numberOfProbes": 2},
            }],
            "outboundRules": [{
                "name": format!("{}-outbound", l.infra_id),
                "properties": {
                    "protocol": "All",
                    "allocatedOutboundPorts": 1024,
                    "idleTimeoutInMinutes": 4,
                    "enableTcpReset": true,
                    "frontendIPConfigurations": [{"id": format!("{lb}/frontendIPConfigurations/{}-frontend", l.infra_id)}],
                    "backendAddressPool": {"id": format!("{lb}/backendAddressPools/{}", l.infra_id)},
                }
            }],
        }
    })
}

/// `spec.platform.azure.cloud` for the config's cloud, so in-cluster components call the
/// cloud's own endpoints (HyperShift's `AzurePlatformSpec.Cloud`, default
/// `AzurePublicCloud`). A custom cloud has no name HyperShift knows: left unset.
fn hosted_cluster_cloud(cloud: &crate::config::Cloud) -> Option<String> {
    match cloud {
        crate::config::Cloud::Public => Some("AzurePublicCloud".into()),
        crate::config::Cloud::UsGovernment => Some("AzureUSGovernmentCloud".into()),
        crate::config::Cloud::China => Some("AzureChinaCloud".into()),
        crate::config::Cloud::Custom(_) => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn example() -> ClusterConfig {
        let example =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
        crate::config::load(&example).unwrap()
    }

    fn byo_network(cfg: &mut ClusterConfig) {
        let rg = format!("/subscriptions/{}/resourceGroups/byo-net", cfg.subscription);
        cfg.network = crate::config::Network::Existing(crate::config::NetworkExisting {
            vnet_id: format!("{rg}/providers/Microsoft.Network/virtualNetworks/byo-vnet"),
            subnet_id: format!(
                "{rg}/providers/Microsoft.Network/virtualNetworks/byo-vnet/subnets/nodes"
            ),
            nsg_id: format!("{rg}/providers/Microsoft.Network/networkSecurityGroups/byo-nsg"),
            machine_cidr: None,
        });
    }

    fn node<'a>(dag: &'a SagaDag, name: &str) -> &'a hcp_runtime::dag::NodeSpec {
        dag.nodes
            .iter()
            .find(|x| x.name == n(name))
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Every ancestor of `name` (transitively).
    fn ancestors(dag: &SagaDag, name: &str) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let mut todo = vec![name.to_string()];
        while let Some(x) = todo.pop() {
            if let Some(spec) = dag.nodes.iter().find(|s| s.name == x) {
                for d in &spec.deps {
                    if out.insert(d.clone()) {
                        todo.push(d.clone());
                    }
                }
            }
        }
        out
    }

    /// Issue 12, finding 3: with a bring-your-own network the infra zone `<name>.<baseDomain>`
    /// and its link to the (user's) VNet are still created, the HostedCluster names both
    /// zones, and the public zone lookup runs before anything is created.
    #[test]
    fn byo_network_gets_the_infra_zone_link_and_both_zone_ids() {
        let mut cfg = example();
        byo_network(&mut cfg);
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = build(&cfg, &l).unwrap();
        let zone = node(&dag, "network.dns-zone");
        assert_eq!(zone.input["id"], l.infra_zone_id.as_str());
        assert!(
            l.infra_zone_id
                .ends_with("/privateDnsZones/demo.hcp.example.com")
        );
        let link = node(&dag, "network.dns-link");
        assert_eq!(
            link.input["body"]["properties"]["virtualNetwork"]["id"],
            l.vnet_id.as_str()
        );
        assert!(
            dag.nodes.iter().all(|x| x.name != n("network.vnet")),
            "the VNet is not ours"
        );
        let hc = node(&dag, "control-plane.hosted-cluster");
        assert_eq!(
            hc.input["spec"]["private_zone_id"],
            l.infra_zone_id.as_str()
        );
        assert_eq!(
            hc.input["public_zone"],
            json!({"$ref": n("preflight.public-dns-zone")})
        );
        // The lookup is read only and comes first: every node that writes depends on it.
        let find = node(&dag, "preflight.public-dns-zone");
        assert_eq!(find.action, "azure.public-dns-zone.find");
        assert!(!find.has_undo);
        assert_eq!(find.input["base_domain"], "hcp.example.com");
        assert_eq!(find.input["optional"], false);
        for x in &dag.nodes {
            if !x.name.contains(".preflight.") {
                assert!(
                    ancestors(&dag, &x.name).contains(&find.name),
                    "{} runs before the public zone lookup",
                    x.name
                );
            }
        }
    }

    /// Issue 12, finding 3: the ingress identity's third scope is the public zone's group:
    /// `dnsZoneResourceGroup` when given, else the group the lookup finds.
    #[test]
    fn ingress_dns_scope_is_the_public_zone_group() {
        let mut cfg = example();
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = build(&cfg, &l).unwrap();
        let role = node(&dag, "network.role.ingress.dns");
        assert_eq!(
            role.input["scope_from"],
            json!({"$ref": n("preflight.public-dns-zone")})
        );
        assert_ne!(role.input["scope"], l.persistent_rg.as_str());
        cfg.dns_zone_resource_group = Some("dns-zones".into());
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = build(&cfg, &l).unwrap();
        let role = node(&dag, "network.role.ingress.dns");
        assert_eq!(
            role.input["scope"],
            format!(
                "/subscriptions/{}/resourceGroups/dns-zones",
                cfg.subscription
            )
            .as_str()
        );
        assert!(role.input.get("scope_from").is_none());
        assert_eq!(
            node(&dag, "preflight.public-dns-zone").input["resource_group"],
            "dns-zones"
        );
    }

    /// Issue 12, finding 4: bring-your-own identities are resolved read-only first and get
    /// the same 18 role assignments; no identity is created.
    #[test]
    fn byo_identities_get_the_18_role_assignments() {
        let mut cfg = example();
        cfg.identities = crate::config::Identities::Existing(crate::config::IdentitiesExisting {
            file: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/files/workload-identities.json"),
        });
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = build(&cfg, &l).unwrap();
        let resolve = node(&dag, "preflight.identities");
        assert_eq!(resolve.action, "azure.identities.resolve");
        assert!(!resolve.has_undo);
        assert_eq!(
            resolve.input["client_ids"]["ingress"],
            "00000000-0000-0000-0000-000000000002"
        );
        assert!(
            dag.nodes
                .iter()
                .all(|x| x.action != "azure.identity.ensure")
        );
        let roles: Vec<_> = dag
            .nodes
            .iter()
            .filter(|x| x.action == "azure.role-assignment.ensure")
            .collect();
        assert_eq!(roles.len(), 18);
        for r in roles {
            assert_eq!(
                r.input["identity"]["resolved"],
                json!({"$ref": n("preflight.identities")}),
                "{}",
                r.name
            );
        }
    }

    /// Issue 12, finding 5: with an existing issuer, `oidc.key` stores the issuer's key (by
    /// path: the key itself is never in the DAG) and checks it against the issuer's JWKS.
    #[test]
    fn existing_issuer_key_file_reaches_the_key_node() {
        let mut cfg = example();
        cfg.oidc_issuer = crate::config::OidcIssuer::Existing(crate::config::OidcIssuerExisting {
            url: "https://issuer.example.com/demo".into(),
            signing_key: "/keys/sa.pem".into(),
        });
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = build(&cfg, &l).unwrap();
        let key = node(&dag, "oidc.key");
        assert_eq!(key.input["existing"]["key_file"], "/keys/sa.pem");
        assert_eq!(
            key.input["existing"]["issuer_url"],
            "https://issuer.example.com/demo"
        );
        assert!(
            dag.nodes
                .iter()
                .all(|x| x.action != "azure.storage-account.ensure")
        );
    }

    /// Issue 12, finding 6: no image means HyperShift's release default (Gen2, ≥ 4.20), an
    /// explicit image is rendered as given.
    #[test]
    fn node_pool_images() {
        let mut cfg = example();
        cfg.node_pools[0].image = None;
        let mut explicit = cfg.node_pools[0].clone();
        explicit.name = "explicit".into();
        explicit.image = Some(crate::config::NodePoolImage {
            image_type: crate::config::ImageType::AzureMarketplace,
            image_id: None,
            azure_marketplace: Some(crate::config::MarketplaceImage {
                publisher: Some("azureopenshift".into()),
                offer: Some("aro4".into()),
                sku: Some("422-v2".into()),
                version: Some("422.6.20250901".into()),
                image_generation: None,
            }),
        });
        let mut by_id = cfg.node_pools[0].clone();
        by_id.name = "byid".into();
        by_id.image = Some(crate::config::NodePoolImage {
            image_type: crate::config::ImageType::ImageId,
            image_id: Some(
                "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/rhcos".into(),
            ),
            azure_marketplace: None,
        });
        cfg.node_pools.push(explicit);
        cfg.node_pools.push(by_id);
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = build(&cfg, &l).unwrap();
        assert_eq!(
            node(&dag, "nodepools.workers").input["spec"]["image"],
            json!({"from-release": {"image_generation": "Gen2"}})
        );
        assert_eq!(
            node(&dag, "nodepools.explicit").input["spec"]["image"]["marketplace"]["sku"],
            "422-v2"
        );
        assert!(node(&dag, "nodepools.byid").input["spec"]["image"]["image-id"].is_string());
    }

    /// Issue 12, finding 10: the config's cloud reaches `spec.platform.azure.cloud`.
    #[test]
    fn the_cloud_reaches_the_hosted_cluster() {
        let example =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
        let mut cfg = crate::config::load(&example).unwrap();
        for (cloud, want) in [
            (crate::config::Cloud::Public, Some("AzurePublicCloud")),
            (
                crate::config::Cloud::UsGovernment,
                Some("AzureUSGovernmentCloud"),
            ),
            (crate::config::Cloud::China, Some("AzureChinaCloud")),
        ] {
            cfg.cloud = cloud;
            let l = Layout::new(&cfg, "demo-x1y2z", true);
            let dag = build(&cfg, &l).unwrap();
            let hc = dag
                .nodes
                .iter()
                .find(|n| n.action == "k8s.hosted-cluster.apply")
                .unwrap();
            assert_eq!(hc.input["spec"]["cloud"].as_str(), want, "{:?}", cfg.cloud);
        }
    }
}
