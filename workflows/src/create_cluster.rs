//! create-cluster: identities → OIDC → network → control plane → PLS → PE/DNS → nodepools.
//!
//! Laid out like omicron's sagas: the DAG is built once from the config (nodes included or
//! not depending on it), persisted with the run, and every node is an action of
//! `hcp_activities::steps` whose undo is declared beside it. Parallel where Azure allows:
//! identities in parallel, each identity's federated credentials one node (written one at
//! a time), role assignments in parallel, node pools in parallel.

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
    EnsureIssuerKey, HostedClusterNodeInput, IssuerKeyInput, NodePoolNodeInput, SecretsInput,
    WaitCondition,
};
use hcp_activities::steps::identity::{
    EnsureFederatedCredentials, EnsureRoleAssignment, FederatedInput, RoleInput, Subject,
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
    };
    let loc = || json!({"location": l.location});

    // ---- identities -------------------------------------------------------------------
    b.stage("identities");
    let prg = b.add::<EnsureResourceGroup>(
        n("identities.persistent-rg"),
        &ResourceInput {
            persistent: true,
            ..res(
                "Microsoft.Resources/resourceGroups",
                &l.persistent_rg,
                api::RESOURCES,
                loc(),
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
                loc(),
            ),
            o(),
        )
    };
    let managed = rg(&mut b, "managed", &l.managed_rg)?;
    let mut net_done: Vec<Ref<ResourceOutput>> = Vec::new();
    // Role assignments wait for the group they are scoped to.
    let mut scope_rgs: Vec<(Scope, Ref<ResourceOutput>)> = vec![(Scope::Managed, managed.clone())];
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
            o().after(&zone).after(&vnet),
        )?;
        net_done.push(link);
    }
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
    for c in &COMPONENTS {
        let Some(ident) = identities.get(c.component.name()) else {
            continue;
        };
        for s in c.scopes {
            let scope = l.scope_id(*s).to_string();
            let what = format!("{s:?}").to_lowercase();
            let r = b.add::<EnsureRoleAssignment>(
                n(&format!("network.role.{}.{what}", c.component.name())),
                &RoleInput {
                    azure: l.azure.clone(),
                    owner: l.owner.clone(),
                    component: c.component.name().into(),
                    scope,
                    role: c.role.into(),
                    identity: ident.clone(),
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
                topology: topology(cfg.topology),
                workload_identities: BTreeMap::new(),
                nat_subnet_id: private.then(|| l.nat_subnet_id.clone()),
                pull_secret_name: l.secret("pull-secret"),
                ssh_key_secret_name: Some(l.secret("ssh-key")),
                etcd_key_secret_name: l.secret("etcd-encryption-key"),
                sa_signing_key_secret_name: l.secret("sa-token-issuer-key"),
                cloud: hosted_cluster_cloud(&cfg.cloud),
                highly_available: false,
                additional_allowed_subscriptions: cfg.allowed_subscriptions.clone(),
                private_zone_id: None,
                public_zone_id: None,
                labels: BTreeMap::new(),
            },
            client_ids,
            wait_router: private,
        },
        hc_opts,
    )?;

    // ---- private link -------------------------------------------------------------------
    if private {
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
    b.stage("available");
    b.add::<WaitCondition>(
        n("available.hosted-cluster"),
        &ConditionInput {
            mgmt: l.mgmt.clone(),
            kind: hcp_activities::kube::mgmt::Kind::HostedCluster,
            namespace: CLUSTERS_NAMESPACE.into(),
            name: hc_name.clone(),
            condition: "Available".into(),
        },
        o(),
    )?;

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
                    image: marketplace_image(cfg.release_minor()),
                    subnet_id: l.subnet_id.clone(),
                    availability_zone: p.zone.clone(),
                    labels: BTreeMap::new(),
                },
            },
            o(),
        )?;
    }
    let _ = (net_done, roles);
    let mut dag = b.build()?;
    crate::budgets::apply(&mut dag, &cfg.wait_budgets);
    Ok(dag)
}

/// The RHCOS marketplace image of the release's minor version (`azureopenshift/aro4`,
/// SKU `aro_4NN`), latest build. (The cluster file has no image field yet.)
fn marketplace_image(release: Option<(u32, u32)>) -> NodePoolImage {
    // Validation guarantees a version; 4.19 is the oldest release we accept.
    let (major, minor) = release.unwrap_or((4, 19));
    NodePoolImage::Marketplace {
        publisher: "azureopenshift".into(),
        offer: "aro4".into(),
        sku: format!("aro_{major}{minor}"),
        version: "latest".into(),
    }
}

fn topology(t: Topology) -> hcp_activities::kube::render::Topology {
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
