//! create-cluster: identities → OIDC → network → control plane → PLS → PE/DNS → nodepools.
//!
//! Laid out like omicron's sagas: the DAG is built once from the config (nodes included or
//! not depending on it), persisted with the run, and every node is an action of
//! `hcp_activities::steps` whose undo is declared beside it. Parallel where Azure allows:
//! identities in parallel, each identity's federated credentials one node (written one at
//! a time), role assignments in parallel, node pools in parallel.

use crate::config::PrivateLinkManager;
use crate::config::{ClusterConfig, Identities, Topology};
use crate::layout::{
    ARO_DATA_PLANE, CLUSTERS_NAMESPACE, COMPONENTS, KEY_VAULT_ADMINISTRATOR,
    KEY_VAULT_SECRETS_USER, Layout, Scope, api,
};
use crate::workflow::{Admission, Admit, PreflightKind, WorkflowDef};
use hcp_activities::kube::render::{
    HostedClusterInput, NodePoolImage, NodePoolInput, PublicHostnames,
};
use hcp_activities::steps::aks::{
    AksInput, AksOutput, CallerInput, CallerPrincipal, ReadAksCluster,
};
use hcp_activities::steps::arm::{
    EnsureContainer, EnsureDnsLink, EnsureDnsZone, EnsureIdentity, EnsureLoadBalancer, EnsureNsg,
    EnsurePublicIp, EnsureResourceGroup, EnsureStorageAccount, EnsureVnet, ResourceInput,
    ResourceOutput,
};
use hcp_activities::steps::aro_identity::ApplicationOutput;
use hcp_activities::steps::cluster::ManagedIdentitiesSource;
use hcp_activities::steps::cluster::{
    ApplyHostedCluster, ApplyNodePool, ClientId, ConditionInput, EnsureClusterSecrets,
    EnsureIssuerKey, ExistingIssuerKey, HostedClusterNodeInput, HostedClusterOutput,
    IssuerKeyInput, NodePoolNodeInput, RolloutInput, SecretsInput, WaitCondition, WaitRollout,
};
use hcp_activities::steps::dns::{
    EnsurePublicRecords, FindPublicZone, PublicRecordsInput, PublicZoneInput, PublicZoneOutput,
};
use hcp_activities::steps::entra::{
    ApplicationInput, BindCertificate, BindCertificateInput, EnsureApplication,
    EnsureServicePrincipal, ServicePrincipalInput, ServicePrincipalOutput,
};
use hcp_activities::steps::hypershift_link::{
    HyperShiftLink, HyperShiftLinkInput, WaitHyperShiftEndpoint, WaitHyperShiftPls,
};
use hcp_activities::steps::identity::{
    EnsureFederatedCredentials, EnsureRoleAssignment, FederatedInput, IdentitySource,
    ResolveIdentities, ResolveInput, ResolvedIdentities, RoleInput, Subject,
};
use hcp_activities::steps::key_vault::{
    CertificateInput, CredentialsSecretInput, EnsureCertificate, EnsureCredentialsSecret,
    EnsureKeyVault, KeyVaultInput,
};
use hcp_activities::steps::private_link::{
    ARecordInput, EnsureARecords, EnsureNatSubnet, EnsurePrivateEndpoint, EnsurePrivateLinkService,
    NatSubnetInput, OidcDocsInput, PeInput, PlsInput, PublishOidcDocuments, SubnetRef,
};
use hcp_runtime::{DagError, FailurePolicy, NodeOptions, Ref, SagaBuilder, SagaDag};
use serde_json::json;
use std::collections::BTreeMap;

/// Workflow name.
pub const WORKFLOW: &str = "create-cluster";
/// Version of this definition (persisted with each run).
pub const VERSION: u32 = 1;

fn n(s: &str) -> String {
    format!("{WORKFLOW}.{s}")
}

/// Build the DAG for `cfg` with the resolved `layout`, one function per stage, in order:
///
/// - `preflight`: read-only lookups (public DNS zone, bring-your-own identities).
/// - `identities`: the persistent group, identities and their federated credentials.
/// - `oidc`: the issuer's signing key and, for a created issuer, its storage and documents.
/// - `network`: resource groups, NSG and VNet, infra DNS zone and link, egress IP and load
///   balancer, role assignments.
/// - `control-plane` (`control_plane`): Secrets, NAT subnet, HostedCluster.
/// - `pls`, `pe-dns` (private topologies): `pls` and `pe_dns`, or `hypershift_pls` and
///   `hypershift_pe_dns` when HyperShift makes the private link.
/// - `public-dns` (`public_dns`, PublicAndPrivate): the public hostnames' records.
/// - `available`: the HostedCluster's conditions.
/// - `nodepools`: one NodePool per pool.
/// - `rollout`: the guest's release rollout.
///
/// # Errors
/// A definition error (a bug: caught by the unit tests).
pub fn build(cfg: &ClusterConfig, l: &Layout) -> Result<SagaDag, DagError> {
    build_with(cfg, l, false)
}

/// [`build`]; with `repair` (repair-cluster, [`crate::repair_cluster`]) the NodePools are
/// applied again even when they exist, and hcp-workflow's own Private Link Service also
/// gets its access put back after its ensure: visibility and
/// auto-approval written again when they drifted, and every connection from a
/// subscription that is not allowed rejected, then removed (a pivot).
///
/// # Errors
/// A definition error (a bug: caught by the unit tests).
pub fn build_with(cfg: &ClusterConfig, l: &Layout, repair: bool) -> Result<SagaDag, DagError> {
    let c = Ctx {
        repair,
        ..Ctx::new(cfg, l)
    };
    let mut b = SagaBuilder::new(WORKFLOW, VERSION);
    b.stage("preflight");
    let pre = preflight(&mut b, &c)?;
    b.stage("identities");
    let (idents, aro, prg) = identities(&mut b, &c, &pre)?;
    b.stage("oidc");
    oidc(&mut b, &c, &prg)?;
    b.stage("network");
    let managed = network(&mut b, &c, &pre, &idents, &aro)?;
    b.stage("control-plane");
    let cp = control_plane(&mut b, &c, &pre, &idents, &aro)?;
    if c.private && !c.hypershift_link {
        b.stage("pls");
        let pls_ref = pls(&mut b, &c, &cp)?;
        b.stage("pe-dns");
        pe_dns(&mut b, &c, &pls_ref, &managed)?;
        if repair {
            b.stage("access");
            crate::repair_cluster::access(&mut b, cfg, l)?;
        }
    }
    if c.private && c.hypershift_link {
        b.stage("pls");
        hypershift_pls(&mut b, &c, &cp)?;
        b.stage("pe-dns");
        hypershift_pe_dns(&mut b, &c)?;
        if repair {
            b.stage("access");
            crate::repair_cluster::access(&mut b, cfg, l)?;
        }
    }
    if let Some(h) = &c.public_hostnames {
        b.stage("public-dns");
        public_dns(&mut b, &c, h, &pre, &cp)?;
    }
    b.stage("available");
    available(&mut b, &c)?;
    b.stage("nodepools");
    nodepools(&mut b, &c)?;
    b.stage("rollout");
    rollout(&mut b, &c)?;
    let mut dag = b.build()?;
    crate::budgets::apply(&mut dag, &cfg.wait_budgets);
    Ok(dag)
}

fn o() -> NodeOptions {
    NodeOptions::default()
}

/// create-cluster as `start`, `plan`, `preflight` and `drive` see it. It has no pivots:
/// every step has an undo that removes what the run made (docs/dev/design/lifecycle.md).
pub static DEF: WorkflowDef = WorkflowDef {
    name: WORKFLOW,
    noun: "Creation",
    default_on_failure: FailurePolicy::Unwind,
    forward_only: false,
    destructive: false,
    follows_create: false,
    applies_config: true,
    updates: false,
    removes_cluster: false,
    preflight: PreflightKind::Create,
    summary: "Bring a cluster up.",
    admit,
    on_existing: Some(crate::workflow::OnExisting {
        same: "a start adopts it and changes nothing",
        refuses: "it would adopt what exists and change none of it",
    }),
    build: |c, l, _| build(c, l),
};

/// A create over a cluster that exists (or is partially deleted) and differs from the
/// file would adopt what exists, change none of the differences, and say "complete":
/// refused, naming every difference. Same file, or no cluster: proceed (a create is
/// idempotent, and resumes a partial one).
fn admit(a: &Admit<'_>) -> Admission {
    match (a.state.standing_applied(), a.applied, a.file) {
        (Some(by), Some(applied), Some(file)) => Admission::unless_differs(by.id, applied, file),
        _ => Admission::Proceed,
    }
}

/// What every stage reads: the config, its layout, and what follows from them.
struct Ctx<'a> {
    cfg: &'a ClusterConfig,
    l: &'a Layout,
    /// The private-link stages run (Private, PublicAndPrivate).
    private: bool,
    /// HyperShift makes the private link. Resolved before the run is journaled (bin:
    /// `auto` reads the operator's args); an unresolved `auto` builds today's hcp-workflow
    /// stages (e.g. `plan` offline).
    hypershift_link: bool,
    /// repair-cluster: existing NodePools are applied again.
    repair: bool,
    /// PublicAndPrivate: the API server and OAuth have public hostnames whose A records
    /// hcp-workflow writes.
    public_hostnames: Option<PublicHostnames>,
}

impl<'a> Ctx<'a> {
    fn new(cfg: &'a ClusterConfig, l: &'a Layout) -> Self {
        Ctx {
            cfg,
            l,
            private: cfg.topology.uses_private_link(),
            hypershift_link: cfg.private_link.managed_by == PrivateLinkManager::Hypershift,
            repair: false,
            public_hostnames: hcp_activities::kube::render::public_hostnames(
                &l.name,
                &cfg.base_domain,
                crate::create_cluster::render_topology(cfg.topology),
                matches!(cfg.identities, crate::config::Identities::AroHcp(_)),
            ),
        }
    }

    /// A resource of ours in the guest subscription (tagged, not persistent).
    fn res(
        &self,
        resource_type: &str,
        id: &str,
        api: &str,
        body: serde_json::Value,
    ) -> ResourceInput {
        ResourceInput {
            azure: self.l.azure.clone(),
            owner: self.l.owner.clone(),
            resource_type: resource_type.into(),
            id: id.into(),
            api: api.into(),
            body,
            tagged: true,
            persistent: false,
            byo: false,
            shared: false,
            parent: None,
        }
    }

    fn loc(&self) -> serde_json::Value {
        json!({"location": self.l.location})
    }

    /// Resource groups carry the user's tags too (`resourceGroupTags`; ownership tags are
    /// merged over them when the body is sent).
    fn rg_body(&self) -> serde_json::Value {
        let mut body = self.loc();
        if !self.cfg.resource_group_tags.is_empty() {
            body["tags"] = json!(self.cfg.resource_group_tags);
        }
        body
    }

    fn hs_link(&self) -> HyperShiftLink {
        HyperShiftLink {
            mgmt_azure: self.l.mgmt_azure.clone(),
            guest_azure: self.l.azure.clone(),
        }
    }
}

/// What the preflight lookups give later stages.
struct Preflight {
    /// The public DNS zone of `baseDomain`.
    public_zone: Ref<PublicZoneOutput>,
    /// Bring-your-own identities' principals.
    resolved: Option<Ref<ResolvedIdentities>>,
    /// The ARO HCP model: the AKS cluster and the caller, read before anything is made.
    aro: Option<(
        Ref<AksOutput>,
        Ref<hcp_activities::steps::aks::CallerOutput>,
    )>,
}

/// The identities created, by component name (none when they are brought).
type IdentityRefs = BTreeMap<&'static str, Ref<ResourceOutput>>;

/// What the ARO HCP model's `identities` stage made, for the later stages.
#[derive(Default)]
struct AroRefs {
    /// Component → (application, service principal).
    apps: BTreeMap<&'static str, (Ref<ApplicationOutput>, Ref<ServicePrincipalOutput>)>,
    /// Data-plane component → its managed identity.
    data_plane: BTreeMap<&'static str, Ref<ResourceOutput>>,
    /// Nodes the HostedCluster waits for (the credentials secrets, the mount's role).
    ready: Vec<Ref<serde_json::Value>>,
}

/// What the control-plane stage gives later stages.
struct ControlPlaneRefs {
    /// The NAT subnet, when ours.
    nat: Option<Ref<ResourceOutput>>,
    /// The HostedCluster.
    hc: Ref<HostedClusterOutput>,
}

/// `preflight`: read-only lookups before anything is created.
///
/// The public DNS zone of baseDomain must exist (HyperShift: `GetBaseDomainID`), and
/// bring-your-own identities must resolve to principals (their role assignments need
/// them). A miss fails the run for good before anything is written.
fn preflight(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<Preflight, DagError> {
    let (cfg, l) = (c.cfg, c.l);
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
                        .map(|comp| {
                            (
                                comp.component.name().to_string(),
                                w.get(comp.component).client_id.clone(),
                            )
                        })
                        .collect(),
                },
                o(),
            )?,
        ),
        _ => None,
    };
    let aro = match &l.aro {
        Some(a) => {
            let aks = b.add::<ReadAksCluster>(
                n("preflight.aks-cluster"),
                &AksInput {
                    azure: l.mgmt_azure.clone(),
                    id: a.aks_cluster_id.clone(),
                },
                o(),
            )?;
            let caller = b.add::<CallerPrincipal>(
                n("preflight.caller"),
                &CallerInput {
                    azure: l.azure.clone(),
                },
                o(),
            )?;
            Some((aks, caller))
        }
        None => None,
    };
    Ok(Preflight {
        public_zone,
        resolved,
        aro,
    })
}

/// `identities` of the ARO HCP model (seed `000_4293f64c3e51efdc`; HyperShift's
/// `contrib/managed-azure/setup_MIv3_kv.sh` and `setup_dataplane_identities.sh`,
/// release-4.22): the Key Vault and its two role assignments (the caller's Key Vault
/// Administrator on a vault it creates; Key Vault Secrets User for the AKS Key Vault
/// Secrets Provider identity, which mounts the secrets); per control-plane component an
/// Entra application and service principal, a certificate created in Key Vault, its public
/// key bound to the application and the credentials secret HyperShift mounts; the 3
/// data-plane managed identities with their federated credentials. All persistent.
fn aro_identities(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    pre: &Preflight,
    prg: &Ref<ResourceOutput>,
) -> Result<AroRefs, DagError> {
    let l = c.l;
    let (Some(a), Some((aks, caller))) = (&l.aro, &pre.aro) else {
        return Ok(AroRefs::default());
    };
    // Key Vault Administrator for the caller on the persistent group (HyperShift's
    // `setup_MIv3_kv.sh` grants it on the vault; the group scope lets the vault's own undo
    // still read the vault after the vault-scoped grants are undone). Named by the vault:
    // shared by the group's clusters, adopted by the next one, never deleted by a delete.
    let admin = if a.key_vault_existing {
        None
    } else {
        Some(b.add::<EnsureRoleAssignment>(
            n("identities.key-vault.role.caller"),
            &RoleInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                component: "key-vault-caller".into(),
                scope: l.persistent_rg.clone(),
                role: KEY_VAULT_ADMINISTRATOR.into(),
                identity: IdentitySource::Output {
                    principal_from: retype(caller),
                    pointer: "/object_id".into(),
                },
                scope_from: None,
                name_seed: Some(a.key_vault.clone()),
            },
            o().after(prg),
        )?)
    };
    let vault = b.add::<EnsureKeyVault>(
        n("identities.key-vault"),
        &KeyVaultInput {
            azure: l.azure.clone(),
            owner: l.owner.clone(),
            id: a.key_vault_id.clone(),
            location: l.location.clone(),
            tenant_id: Some(a.tenant.clone()),
            byo: a.key_vault_existing,
            persistent: true,
            shared: true,
        },
        // The caller's data role comes first: the vault's undo lists what the vault holds
        // (only an empty vault of this run is removed), and the role's undo runs after it.
        match &admin {
            Some(r) => o().after(prg).after(r),
            None => o().after(prg),
        },
    )?;
    // Shared by every cluster of the vault: named by the vault, adopted by the next
    // cluster, never deleted by delete-cluster.
    let kv_role = |b: &mut SagaBuilder,
                   what: &str,
                   role: &str,
                   from: Ref<serde_json::Value>,
                   pointer: &str|
     -> Result<Ref<hcp_activities::steps::identity::RoleOutput>, DagError> {
        b.add::<EnsureRoleAssignment>(
            n(&format!("identities.key-vault.role.{what}")),
            &RoleInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                component: format!("key-vault-{what}"),
                scope: a.key_vault_id.clone(),
                role: role.into(),
                identity: IdentitySource::Output {
                    principal_from: from,
                    pointer: pointer.into(),
                },
                scope_from: None,
                name_seed: Some(a.key_vault.clone()),
            },
            o().after(&vault),
        )
    };
    let reader = kv_role(
        b,
        "secrets-provider",
        KEY_VAULT_SECRETS_USER,
        retype(aks),
        "/key_vault_secrets_provider/object_id",
    )?;
    let mut refs = AroRefs::default();
    refs.ready.push(retype(&reader));
    for comp in &COMPONENTS {
        let name = comp.component.name();
        let app = b.add::<EnsureApplication>(
            n(&format!("identities.{name}.application")),
            &ApplicationInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                unique_name: a.app_unique_name(comp.component),
                display_name: a.app_display_name(comp.component),
                persistent: true,
            },
            o(),
        )?;
        let sp = b.add::<EnsureServicePrincipal>(
            n(&format!("identities.{name}.service-principal")),
            &ServicePrincipalInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                application: app.clone(),
                persistent: true,
            },
            o().after(&app),
        )?;
        let cert_opts = o().after(&vault);
        let cert = b.add::<EnsureCertificate>(
            n(&format!("identities.{name}.certificate")),
            &CertificateInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                vault: vault.clone(),
                name: a.cert(comp.component),
                subject: format!("CN={}", a.app_display_name(comp.component)),
                validity_months: a.validity_months,
                persistent: true,
            },
            cert_opts,
        )?;
        let bind = b.add::<BindCertificate>(
            n(&format!("identities.{name}.bind-certificate")),
            &BindCertificateInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                application: app.clone(),
                certificate: cert.clone(),
            },
            o().after(&app).after(&cert),
        )?;
        let secret = b.add::<EnsureCredentialsSecret>(
            n(&format!("identities.{name}.credentials")),
            &CredentialsSecretInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                vault: vault.clone(),
                certificate: cert.clone(),
                application: app.clone(),
                name: Some(a.credentials_secret(comp.component)),
                persistent: true,
            },
            o().after(&bind),
        )?;
        refs.ready.push(retype(&secret));
        refs.apps.insert(name, (app, sp));
    }
    for (comp, subject, _, _) in ARO_DATA_PLANE {
        let id = b.add::<EnsureIdentity>(
            n(&format!("identities.data-plane.{comp}")),
            &ResourceInput {
                persistent: true,
                ..c.res(
                    "Microsoft.ManagedIdentity/userAssignedIdentities",
                    &a.data_plane_identity_id(comp),
                    api::MSI,
                    c.loc(),
                )
            },
            o().after(prg),
        )?;
        b.add::<EnsureFederatedCredentials>(
            n(&format!("identities.data-plane.{comp}.federated")),
            &FederatedInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                identity: id.clone(),
                issuer: l.issuer_url.clone(),
                subjects: vec![Subject {
                    name: l.fic_name(subject),
                    subject: format!("system:serviceaccount:{subject}"),
                }],
                persistent: true,
                converge: c.repair,
            },
            o().after(&id),
        )?;
        refs.data_plane.insert(comp, id);
    }
    Ok(refs)
}

/// The same node, seen as a JSON value (its output read through a pointer).
fn retype<T>(r: &Ref<T>) -> Ref<serde_json::Value> {
    r.retype()
}

/// `identities`: the persistent resource group, then (when created) one identity per
/// component in parallel, each with its federated credentials as one node.
fn identities(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    pre: &Preflight,
) -> Result<(IdentityRefs, AroRefs, Ref<ResourceOutput>), DagError> {
    let l = c.l;
    let prg = b.add::<EnsureResourceGroup>(
        n("identities.persistent-rg"),
        &ResourceInput {
            persistent: true,
            // Shared by many clusters (HyperShift's `os4-common`): adopted whoever made
            // it, deleted only when empty.
            shared: true,
            ..c.res(
                "Microsoft.Resources/resourceGroups",
                &l.persistent_rg,
                api::RESOURCES,
                c.rg_body(),
            )
        },
        o(),
    )?;
    let mut identities: IdentityRefs = BTreeMap::new();
    if Layout::identities_created(c.cfg) {
        for comp in &COMPONENTS {
            let id = l.identity_id(comp.component);
            let r = b.add::<EnsureIdentity>(
                n(&format!("identities.{}", comp.component.name())),
                &ResourceInput {
                    persistent: true,
                    ..c.res(
                        "Microsoft.ManagedIdentity/userAssignedIdentities",
                        &id,
                        api::MSI,
                        c.loc(),
                    )
                    .within(&prg)
                },
                o().after(&prg),
            )?;
            identities.insert(comp.component.name(), r);
        }
        for comp in &COMPONENTS {
            let Some(ident) = identities.get(comp.component.name()) else {
                continue;
            };
            b.add::<EnsureFederatedCredentials>(
                n(&format!("identities.{}.federated", comp.component.name())),
                &FederatedInput {
                    azure: l.azure.clone(),
                    owner: l.owner.clone(),
                    identity: ident.clone(),
                    issuer: l.issuer_url.clone(),
                    subjects: comp
                        .subjects
                        .iter()
                        .map(|s| Subject {
                            name: l.fic_name(s),
                            subject: format!("system:serviceaccount:{s}"),
                        })
                        .collect(),
                    persistent: true,
                    converge: c.repair,
                },
                o().after(ident),
            )?;
        }
    }
    let aro = aro_identities(b, c, pre, &prg)?;
    Ok((identities, aro, prg))
}

/// `oidc`: the service-account signing key is always ours (kept in a Secret on the
/// management cluster); with an existing issuer, publishing its JWKS (the node's output) is
/// the issuer owner's job. A created issuer gets its storage account, container and
/// documents.
fn oidc(b: &mut SagaBuilder, c: &Ctx<'_>, prg: &Ref<ResourceOutput>) -> Result<(), DagError> {
    let (cfg, l) = (c.cfg, c.l);
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
            keep_keys: c.repair,
        },
        o(),
    )?;
    if let Some(account_id) = &l.storage_account_id {
        let account = b.add::<EnsureStorageAccount>(
            n("oidc.storage-account"),
            &ResourceInput {
                persistent: true,
                ..c.res("Microsoft.Storage/storageAccounts",
                    account_id,
                    api::STORAGE,
                    json!({
                        "location": l.location,
                        "kind": "StorageV2",
                        "sku": {"name": "Standard_LRS"},
                        "properties": {"allowBlobPublicAccess": true, "minimumTlsVersion": "TLS1_2"},
                    }),
                ).within(prg)
            },
            o(),
        )?;
        let container = b.add::<EnsureContainer>(
            n("oidc.container"),
            &ResourceInput {
                tagged: false,
                persistent: true,
                ..c.res(
                    "Microsoft.Storage/storageAccounts/blobServices/containers",
                    &format!(
                        "{account_id}/blobServices/default/containers/{}",
                        l.container
                    ),
                    api::STORAGE,
                    json!({"properties": {"publicAccess": "Container"}}),
                )
                .within(&account)
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
    Ok(())
}

/// `network`: the managed group; when the network is ours, its groups, NSG and VNet; the
/// infra private DNS zone and link; the egress IP and load balancer; then the role
/// assignments (`role_assignments`).
fn network(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    pre: &Preflight,
    identities: &IdentityRefs,
    aro: &AroRefs,
) -> Result<Ref<ResourceOutput>, DagError> {
    let (cfg, l) = (c.cfg, c.l);
    let rg = |b: &mut SagaBuilder, what: &str, id: &str| {
        b.add::<EnsureResourceGroup>(
            n(&format!("network.rg.{what}")),
            &c.res(
                "Microsoft.Resources/resourceGroups",
                id,
                api::RESOURCES,
                c.rg_body(),
            ),
            o(),
        )
    };
    let managed = rg(b, "managed", &l.managed_rg)?;
    // Role assignments wait for the group they are scoped to.
    let mut scope_rgs: Vec<(Scope, Ref<ResourceOutput>)> = vec![(Scope::Managed, managed.clone())];
    let mut vnet_node: Option<Ref<ResourceOutput>> = None;
    if l.network_created {
        let vnet_rg = rg(b, "vnet", &l.vnet_rg)?;
        let nsg_rg = rg(b, "nsg", &l.nsg_rg)?;
        scope_rgs.push((Scope::Vnet, vnet_rg.clone()));
        scope_rgs.push((Scope::Nsg, nsg_rg.clone()));
        let nsg = b.add::<EnsureNsg>(
            n("network.nsg"),
            &c.res(
                "Microsoft.Network/networkSecurityGroups",
                &l.nsg_id,
                api::NETWORK,
                c.loc(),
            )
            .within(&nsg_rg),
            o().after(&nsg_rg),
        )?;
        let (vnet_cidr, subnet_cidr) = match &cfg.network {
            crate::config::Network::Create(net) => (net.vnet_cidr.clone(), net.subnet_cidr.clone()),
            crate::config::Network::Existing(_) => Default::default(),
        };
        let vnet = b.add::<EnsureVnet>(
            n("network.vnet"),
            &c.res(
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
            )
            .within(&vnet_rg),
            o().after(&vnet_rg).after(&nsg),
        )?;
        vnet_node = Some(vnet);
    }
    // The infra private DNS zone `<name>.<baseDomain>` and its link to the guest VNet are
    // always ours, also with a bring-your-own network (openshift/hypershift
    // `cmd/infra/azure/create.go` `createDNSAndLBResources`): the zone lives in the managed
    // group; the link only names the VNet, which is never modified.
    let zone = b.add::<EnsureDnsZone>(
        n("network.dns-zone"),
        &c.res(
            "Microsoft.Network/privateDnsZones",
            &l.infra_zone_id,
            api::PRIVATE_DNS,
            json!({"location": "global"}),
        )
        .within(&managed),
        o().after(&managed),
    )?;
    b.add::<EnsureDnsLink>(
        n("network.dns-link"),
        &c.res(
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
            &l.infra_link_id,
            api::PRIVATE_DNS,
            json!({"location": "global", "properties": {
                "virtualNetwork": {"id": l.vnet_id},
                "registrationEnabled": false,
            }}),
        )
        .within(&zone),
        match &vnet_node {
            Some(vnet) => o().after(&zone).after(vnet),
            None => o().after(&zone),
        },
    )?;
    let ip = b.add::<EnsurePublicIp>(
        n("network.public-ip"),
        &c.res(
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
        )
        .within(&managed),
        o().after(&managed),
    )?;
    b.add::<EnsureLoadBalancer>(
        n("network.load-balancer"),
        &c.res(
            "Microsoft.Network/loadBalancers",
            &l.lb_id,
            api::NETWORK,
            egress_lb_body(l),
        )
        .within(&managed),
        o().after(&ip),
    )?;
    role_assignments(b, c, pre, identities, aro, &scope_rgs)?;
    Ok(managed)
}

/// The `network` stage's role assignments: they need the groups as scopes (`scope_rgs`)
/// and the identities' principals. Bring-your-own identities get the same 18 assignments
/// (HyperShift: `handleIdentitiesAndRBAC`); their principals come from the preflight
/// lookup.
fn role_assignments(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    pre: &Preflight,
    identities: &IdentityRefs,
    aro: &AroRefs,
    scope_rgs: &[(Scope, Ref<ResourceOutput>)],
) -> Result<(), DagError> {
    let l = c.l;
    // ARO HCP data plane (`cmd/infra/azure/rbac.go` `AssignDataPlaneRoles`): each identity
    // its built-in role on the managed group, named `<component>WI`.
    for (comp, _, role, ra_component) in ARO_DATA_PLANE {
        let Some(ident) = aro.data_plane.get(comp) else {
            continue;
        };
        let managed = scope_rgs.iter().find(|(sc, _)| *sc == Scope::Managed);
        b.add::<EnsureRoleAssignment>(
            n(&format!("network.role.{comp}-data-plane.managed")),
            &RoleInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                component: ra_component.into(),
                scope: l.managed_rg.clone(),
                role: role.into(),
                identity: ident.clone().into(),
                scope_from: None,
                name_seed: None,
            },
            match managed {
                Some((_, group)) => o().after(group),
                None => o(),
            },
        )?;
    }
    for comp in &COMPONENTS {
        let identity: IdentitySource = match (
            identities.get(comp.component.name()),
            &pre.resolved,
            aro.apps.get(comp.component.name()),
        ) {
            (_, _, Some((_, sp))) => IdentitySource::ServicePrincipal {
                service_principal: sp.clone(),
            },
            (Some(ident), _, _) => ident.clone().into(),
            (None, Some(r), None) => IdentitySource::Resolved {
                resolved: r.clone(),
                component: comp.component.name().to_string(),
            },
            (None, None, None) => continue,
        };
        for s in comp.scopes {
            // The DNS scope is the public zone's group, known once the zone is found.
            let (scope, scope_from) = match l.scope_id(*s) {
                Some(id) => (id.to_string(), None),
                None => (String::new(), Some(pre.public_zone.clone())),
            };
            let what = format!("{s:?}").to_lowercase();
            b.add::<EnsureRoleAssignment>(
                n(&format!("network.role.{}.{what}", comp.component.name())),
                &RoleInput {
                    azure: l.azure.clone(),
                    owner: l.owner.clone(),
                    component: comp.component.name().into(),
                    scope,
                    role: comp.role.into(),
                    identity: identity.clone(),
                    scope_from,
                    name_seed: None,
                },
                match scope_rgs.iter().find(|(sc, _)| sc == s) {
                    Some((_, group)) => o().after(group),
                    None => o(),
                },
            )?;
        }
    }
    Ok(())
}

/// `control-plane`: the cluster's Secrets, the NAT subnet (private topologies, when ours),
/// then the HostedCluster (`hosted_cluster_spec`).
fn control_plane(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    pre: &Preflight,
    identities: &IdentityRefs,
    aro: &AroRefs,
) -> Result<ControlPlaneRefs, DagError> {
    let (cfg, l) = (c.cfg, c.l);
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
            keep_keys: c.repair,
        },
        o(),
    )?;
    let mut nat = None;
    if c.private
        && let Some(cidr) = &l.nat_subnet_create
    {
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
            for (k, r) in identities {
                client_ids.insert((*k).to_string(), ClientId::Identity(r.clone()));
            }
        }
        Identities::AroHcp(_) => {}
        Identities::Existing(_) => {
            if let Ok(Some(w)) = cfg.read_workload_identities() {
                for comp in &COMPONENTS {
                    client_ids.insert(
                        comp.component.name().to_string(),
                        ClientId::Literal(w.get(comp.component).client_id.clone()),
                    );
                }
            }
        }
    }
    let managed_identities = l.aro.as_ref().map(|a| ManagedIdentitiesSource {
        key_vault_name: a.key_vault.clone(),
        key_vault_tenant_id: a.tenant.clone(),
        control_plane: aro
            .apps
            .iter()
            .filter_map(|(k, (app, _))| {
                let comp = COMPONENTS.iter().find(|c| c.component.name() == *k)?;
                Some((
                    (*k).to_string(),
                    (
                        ClientId::Field {
                            from: retype(app),
                            pointer: "/app_id".into(),
                        },
                        a.credentials_secret(comp.component),
                    ),
                ))
            })
            .collect(),
        data_plane: aro
            .data_plane
            .iter()
            .map(|(k, r)| ((*k).to_string(), ClientId::Identity(r.clone())))
            .collect(),
    });
    let mut hc_opts = o().after(&secrets);
    for r in &aro.ready {
        hc_opts = hc_opts.after(r);
    }
    if let Some(nat) = &nat {
        hc_opts = hc_opts.after(nat);
    }
    let hc = b.add::<ApplyHostedCluster>(
        n("control-plane.hosted-cluster"),
        &HostedClusterNodeInput {
            mgmt: l.mgmt.clone(),
            owner: l.owner.clone(),
            spec: hosted_cluster_spec(c),
            client_ids,
            wait_router: c.private,
            wait_public_router: c.public_hostnames.is_some(),
            shared_ingress_router: c
                .public_hostnames
                .as_ref()
                .is_some_and(|h| h.shared_ingress),
            // A failed create's undo asks the guest to clean up too (destroy.go does).
            cleanup_cloud_resources: true,
            public_zone: Some(pre.public_zone.clone()),
            hypershift_private_link: (c.private && c.hypershift_link).then(|| c.hs_link()),
            managed_identities,
        },
        hc_opts,
    )?;
    Ok(ControlPlaneRefs { nat, hc })
}

/// The HostedCluster rendered by the `control-plane` stage.
fn hosted_cluster_spec(c: &Ctx<'_>) -> HostedClusterInput {
    let (cfg, l) = (c.cfg, c.l);
    HostedClusterInput {
        name: l.name.clone(),
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
        managed_identities: None,
        nat_subnet_id: c.private.then(|| l.nat_subnet_id.clone()),
        pull_secret_name: l.secret("pull-secret"),
        ssh_key_secret_name: Some(l.secret("ssh-key")),
        etcd_key_secret_name: l.secret("etcd-encryption-key"),
        sa_signing_key_secret_name: l.secret("sa-token-issuer-key"),
        cloud: hosted_cluster_cloud(&cfg.cloud),
        highly_available: cfg.control_plane.availability_policy
            == crate::config::AvailabilityPolicy::HighlyAvailable,
        infrastructure_highly_available: cfg.control_plane.infrastructure_availability_policy
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
        control_plane_operator_image: cfg.control_plane.control_plane_operator_image.clone(),
        cluster_network: Some(cfg.networking.cluster_network.clone()),
        service_network: Some(cfg.networking.service_network.clone()),
        machine_network: match &cfg.network {
            crate::config::Network::Create(net) => Some(net.vnet_cidr.clone()),
            crate::config::Network::Existing(e) => e.machine_cidr.clone(),
        },
        additional_allowed_subscriptions: cfg.allowed_subscriptions.clone(),
        private_zone_id: Some(l.infra_zone_id.clone()),
        // Filled at run time from the preflight lookup.
        public_zone_id: None,
        labels: BTreeMap::new(),
    }
}

/// The subscriptions whose private endpoints may connect to the cluster's Private Link
/// Service: the guest's, then `allowedSubscriptions` (each once, compared ignoring case).
/// Create, update, repair and verify all read the PLS's visibility and auto-approval as
/// this list.
pub(crate) fn pls_subscriptions(cfg: &ClusterConfig, l: &Layout) -> Vec<String> {
    let mut subs = vec![l.sub.clone()];
    for s in &cfg.allowed_subscriptions {
        if !subs.iter().any(|a| a.eq_ignore_ascii_case(s)) {
            subs.push(s.clone());
        }
    }
    subs
}

/// `pls` (private topologies, hcp-workflow's private link): the Private Link Service on the
/// management cluster's load balancer, open to the guest and allowed subscriptions.
fn pls(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    cp: &ControlPlaneRefs,
) -> Result<Ref<ResourceOutput>, DagError> {
    let (cfg, l) = (c.cfg, c.l);
    let subs = pls_subscriptions(cfg, l);
    b.add::<EnsurePrivateLinkService>(
        n("pls.service"),
        &PlsInput {
            azure: l.mgmt_azure.clone(),
            owner: l.owner.clone(),
            id: l.pls_id.clone(),
            location: l.location.clone(),
            lb_resource_group: l.mgmt_lb_rg.clone(),
            hosted_cluster: cp.hc.clone(),
            nat_subnet: match &cp.nat {
                Some(r) => SubnetRef::Node(r.clone()),
                None => SubnetRef::Id(l.nat_subnet_id.clone()),
            },
            subscriptions: subs,
        },
        o(),
    )
}

/// `pe-dns` (private topologies, hcp-workflow's private link): the Private Endpoint to
/// `pls`, the private-link DNS zone, its link to the guest VNet, and the A records.
fn pe_dns(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    pls: &Ref<ResourceOutput>,
    managed: &Ref<ResourceOutput>,
) -> Result<(), DagError> {
    let l = c.l;
    let pe = b.add::<EnsurePrivateEndpoint>(
        n("pe-dns.endpoint"),
        &PeInput {
            azure: l.azure.clone(),
            owner: l.owner.clone(),
            id: l.pe_id.clone(),
            location: l.location.clone(),
            subnet_id: l.subnet_id.clone(),
            pls: pls.clone(),
            group: Some(managed.clone()),
        },
        o(),
    )?;
    let zone = b.add::<EnsureDnsZone>(
        n("pe-dns.zone"),
        &c.res(
            "Microsoft.Network/privateDnsZones",
            &l.pl_zone_id,
            api::PRIVATE_DNS,
            json!({"location": "global"}),
        )
        .within(managed),
        o(),
    )?;
    let link = b.add::<EnsureDnsLink>(
        n("pe-dns.link"),
        &c.res(
            "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
            &l.pl_link_id,
            api::PRIVATE_DNS,
            json!({"location": "global", "properties": {
                "virtualNetwork": {"id": l.vnet_id},
                "registrationEnabled": false,
            }}),
        )
        .within(&zone),
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
            zone: Some(zone.clone()),
            converge: c.repair,
        },
        o().after(&zone).after(&link).after(&pe),
    )?;
    endpoint_zones(b, l, (WORKFLOW, "pe-dns"), &pe, Some(managed), c.repair)?;
    Ok(())
}

/// The published hostnames' own private zones (`Layout::endpoint_zones`): each linked to
/// the guest VNet, its apex at the private endpoint, so the kubeconfig's API name and the
/// OAuth name resolve inside the guest VNet (and only there, on a Private cluster).
/// `managed` is the node that ensured the managed group, when this run has one;
/// `(workflow, prefix)` name the nodes (`create-cluster.pe-dns.api-zone`, …).
pub(crate) fn endpoint_zones(
    b: &mut SagaBuilder,
    l: &Layout,
    (workflow, prefix): (&str, &str),
    pe: &Ref<hcp_activities::steps::private_link::PeOutput>,
    managed: Option<&Ref<ResourceOutput>>,
    converge: bool,
) -> Result<Vec<String>, DagError> {
    let mut records = Vec::new();
    let res = |resource_type: &str, id: &str, body: serde_json::Value| ResourceInput {
        azure: l.azure.clone(),
        owner: l.owner.clone(),
        resource_type: resource_type.into(),
        id: id.into(),
        api: api::PRIVATE_DNS.into(),
        body,
        tagged: true,
        persistent: false,
        byo: false,
        shared: false,
        parent: None,
    };
    for ez in &l.endpoint_zones {
        let key = endpoint_key(&ez.host);
        let mut zone_input = res(
            "Microsoft.Network/privateDnsZones",
            &ez.zone_id,
            json!({"location": "global"}),
        );
        if let Some(m) = managed {
            zone_input = zone_input.within(m);
        }
        let zone =
            b.add::<EnsureDnsZone>(format!("{workflow}.{prefix}.{key}-zone"), &zone_input, o())?;
        let link = b.add::<EnsureDnsLink>(
            format!("{workflow}.{prefix}.{key}-link"),
            &res(
                "Microsoft.Network/privateDnsZones/virtualNetworkLinks",
                &ez.link_id,
                json!({"location": "global", "properties": {
                    "virtualNetwork": {"id": l.vnet_id},
                    "registrationEnabled": false,
                }}),
            )
            .within(&zone),
            o().after(&zone),
        )?;
        let rec = b.add::<EnsureARecords>(
            format!("{workflow}.{prefix}.{key}-record"),
            &ARecordInput {
                azure: l.azure.clone(),
                owner: l.owner.clone(),
                zone_id: ez.zone_id.clone(),
                names: vec!["@".into()],
                endpoint: pe.clone(),
                zone: Some(zone.clone()),
                converge,
            },
            o().after(&zone).after(&link).after(pe),
        )?;
        records.push(rec.node().to_string());
    }
    Ok(records)
}

/// A node-name key for an endpoint hostname: its prefix (`api`, `oauth`).
pub(crate) fn endpoint_key(host: &str) -> &str {
    host.split('-').next().unwrap_or(host)
}

/// HyperShift's controllers make PLS, PE and DNS: wait for what its
/// AzurePrivateLinkService reports, verify and record it (hypershift_link.rs).
fn hypershift_link_input(c: &Ctx<'_>) -> HyperShiftLinkInput {
    HyperShiftLinkInput {
        mgmt: c.l.mgmt.clone(),
        owner: c.l.owner.clone(),
        namespace: CLUSTERS_NAMESPACE.into(),
        name: c.l.name.clone(),
        link: c.hs_link(),
    }
}

/// `pls` (private topologies, HyperShift's private link): wait for HyperShift's Private
/// Link Service (`hypershift_link_input`).
fn hypershift_pls(b: &mut SagaBuilder, c: &Ctx<'_>, cp: &ControlPlaneRefs) -> Result<(), DagError> {
    b.add::<WaitHyperShiftPls>(
        n("pls.hypershift"),
        &hypershift_link_input(c),
        o().after(&cp.hc),
    )?;
    Ok(())
}

/// `pe-dns` (private topologies, HyperShift's private link): wait for HyperShift's
/// Private Endpoint and DNS (`hypershift_link_input`).
fn hypershift_pe_dns(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    b.add::<WaitHyperShiftEndpoint>(n("pe-dns.hypershift"), &hypershift_link_input(c), o())?;
    Ok(())
}

/// `public-dns` (PublicAndPrivate): the public hostnames' A records in the public zone.
fn public_dns(
    b: &mut SagaBuilder,
    c: &Ctx<'_>,
    h: &PublicHostnames,
    pre: &Preflight,
    cp: &ControlPlaneRefs,
) -> Result<(), DagError> {
    b.add::<EnsurePublicRecords>(
        n("public-dns.records"),
        &PublicRecordsInput {
            azure: c.l.azure.clone(),
            owner: c.l.owner.clone(),
            zone: pre.public_zone.clone(),
            names: h.relative(&c.cfg.base_domain),
            hosted_cluster: cp.hc.clone(),
        },
        o().after(&cp.hc),
    )?;
    Ok(())
}

/// `available`: the HostedCluster is Available (and, with public hostnames, its API
/// server's public name resolves).
fn available(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    let wait = |condition: &str| ConditionInput {
        mgmt: c.l.mgmt.clone(),
        kind: hcp_activities::kube::mgmt::Kind::HostedCluster,
        namespace: CLUSTERS_NAMESPACE.into(),
        name: c.l.name.clone(),
        condition: condition.into(),
    };
    b.add::<WaitCondition>(n("available.hosted-cluster"), &wait("Available"), o())?;
    if c.public_hostnames.is_some() {
        // The control-plane operator resolves the API server's public hostname
        // (`hostedcontrolplane_controller.go`: `ExternalDNSReachable`, bubbled up to the
        // HostedCluster): the record just written is what users' kubeconfigs will use.
        b.add::<WaitCondition>(
            n("available.external-dns"),
            &wait("ExternalDNSReachable"),
            o(),
        )?;
    }
    Ok(())
}

/// `nodepools`: one NodePool per configured pool, in parallel.
fn nodepools(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    for p in &c.cfg.node_pools {
        b.add::<ApplyNodePool>(
            n(&format!("nodepools.{}", p.name)),
            &NodePoolNodeInput {
                mgmt: c.l.mgmt.clone(),
                owner: c.l.owner.clone(),
                spec: node_pool_input(c.cfg, c.l, p),
                reapply: c.repair,
            },
            o(),
        )?;
    }
    Ok(())
}

/// How pool `p` of `cfg` is rendered (create-cluster, and update-cluster for an added pool
/// or a changed machine template).
pub(crate) fn node_pool_input(
    cfg: &ClusterConfig,
    l: &Layout,
    p: &crate::config::NodePool,
) -> NodePoolInput {
    NodePoolInput {
        name: format!("{}-{}", l.name, p.name),
        namespace: CLUSTERS_NAMESPACE.into(),
        cluster_name: l.name.clone(),
        replicas: i32::try_from(p.desired_replicas()).unwrap_or(i32::MAX),
        auto_scaling: p.auto_scaling.map(|a| {
            (
                i32::try_from(a.min).unwrap_or(i32::MAX),
                i32::try_from(a.max).unwrap_or(i32::MAX),
            )
        }),
        release_image: cfg.release_image.clone(),
        vm_size: p.vm_size.clone(),
        os_disk_size_gib: i32::try_from(p.os_disk_size_gib).unwrap_or(i32::MAX),
        image: node_image(p),
        subnet_id: p.subnet_id.clone().unwrap_or_else(|| l.subnet_id.clone()),
        availability_zone: p.zone.clone(),
        labels: BTreeMap::new(),
        // Validated with the file (exit 2 before anything is journaled).
        node_drain_timeout: crate::config::drain_timeout(p.node_drain_timeout.as_deref())
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
    }
}

/// `rollout`: as `hypershift create cluster --wait`, the cluster is created once its
/// release has rolled out (console, ingress, registry, CSI available), not at Available +
/// Ready pools.
fn rollout(b: &mut SagaBuilder, c: &Ctx<'_>) -> Result<(), DagError> {
    b.add::<WaitRollout>(
        n("rollout.guest"),
        &RolloutInput {
            mgmt: c.l.mgmt.clone(),
            namespace: CLUSTERS_NAMESPACE.into(),
            name: c.l.name.clone(),
        },
        o(),
    )?;
    Ok(())
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

    /// With a bring-your-own network the infra zone `<name>.<baseDomain>`
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

    /// The ingress identity's third scope is the public zone's group:
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

    /// Bring-your-own identities are resolved read-only first and get
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

    /// With an existing issuer, `oidc.key` stores the issuer's key (by
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

    /// No image means HyperShift's release default (Gen2, ≥ 4.20), an
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

    /// The config's cloud reaches `spec.platform.azure.cloud`.
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
