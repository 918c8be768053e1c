//! `hcp-workflow deploy manifests`: the Kubernetes objects a team runs hcp-workflow with,
//! built from k8s-openapi's types (valid by construction) and printed as plain
//! multi-document YAML (Kustomize takes it as a resource file as is).
//!
//! The RBAC rules are not written here: they come from the management-cluster permission
//! table the steps and `preflight` share
//! ([`hcp_activities::preflight::kube::management_access`]), taken over every workflow, with
//! and without a private link. A step that starts using a new verb adds it to that table,
//! and both `preflight` and these manifests follow.

use anyhow::Result;
use clap::{Args, Subcommand};
use hcp_activities::preflight::Workflow as PreflightWorkflow;
use hcp_activities::preflight::kube::{AccessScope, ManagementAccess, management_access};
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SeccompProfile, SecretKeySelector, SecurityContext, Service, ServiceAccount, ServicePort,
    ServiceSpec, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet};

use crate::output::Refused;

#[derive(Subcommand, Debug)]
pub enum DeployCommand {
    /// Print the Kubernetes manifests that run hcp-workflow for a team: the worker
    /// Deployment, the UI Deployment and Service, a ServiceAccount with Azure workload
    /// identity, the Role/ClusterRole rules the steps use on the management cluster (derived
    /// from the same table as `preflight`), a PodDisruptionBudget, a NetworkPolicy and the
    /// `hcp-workflow migrate` Job. Plain multi-document YAML: `kubectl apply -f -`, or a
    /// Kustomize resource.
    #[command(
        after_help = "Examples:\n  hcp-workflow deploy manifests > hcp-workflow.yaml\n  hcp-workflow deploy manifests --namespace hcp --replicas 3 --database-secret hcp-db --image registry.example/hcp-workflow:0.1.0 --azure-client-id 11111111-2222-3333-4444-555555555555 | kubectl apply -f -"
    )]
    Manifests(ManifestArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ManifestArgs {
    /// The namespace hcp-workflow runs in (its ServiceAccount, Deployments, Job, Service).
    #[arg(long, default_value = "hcp-workflow")]
    pub namespace: String,
    /// Worker replicas (each takes runs; a run is held by one worker at a time).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(i32).range(1..=100))]
    pub replicas: i32,
    /// The Secret holding the journal's URL under key `url`
    /// (`postgres://user:password@host/db`): it reaches the pods as
    /// HCP_WORKFLOW_DATABASE_URL, never on a command line shown in logs.
    #[arg(long, default_value = "hcp-workflow-database", value_name = "SECRET")]
    pub database_secret: String,
    /// The container image (see bin/Containerfile and docs/operations/team.md).
    #[arg(long, default_value = concat!("localhost/hcp-workflow:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// The client id of the Azure managed identity (or app registration) the worker acts
    /// as, through workload identity (the ServiceAccount's
    /// `azure.workload.identity/client-id`).
    #[arg(long, value_name = "UUID")]
    pub azure_client_id: Option<String>,
    /// Its tenant, when it is not the cluster's default (`azure.workload.identity/tenant-id`).
    #[arg(long, value_name = "UUID")]
    pub azure_tenant_id: Option<String>,
    /// A namespace HostedClusters go in (the cluster files' `namespace`; repeatable): the
    /// worker is granted the HostedCluster, NodePool and Secret verbs there only.
    #[arg(long = "hosted-cluster-namespace", value_name = "NAMESPACE", default_values_t = vec!["clusters".to_string()])]
    pub hosted_cluster_namespaces: Vec<String>,
    /// The Secret holding the UI's token under key `token` (HCP_WORKFLOW_UI_TOKEN).
    #[arg(long, default_value = "hcp-workflow-ui", value_name = "SECRET")]
    pub ui_token_secret: String,
    /// The Secret holding the worker's notification URLs under key `urls`
    /// (comma-separated; HCP_WORKFLOW_NOTIFY); optional: without it nothing is sent.
    #[arg(long, default_value = "hcp-workflow-notify", value_name = "SECRET")]
    pub notify_secret: String,
}

/// `deploy …`.
pub fn run(out: crate::services::OutputFormat, cmd: DeployCommand) -> Result<u8> {
    match cmd {
        DeployCommand::Manifests(a) => {
            let objects = manifests(&a)?;
            match out {
                crate::services::OutputFormat::Text => print!("{}", to_yaml(&objects)?),
                crate::services::OutputFormat::Json => {
                    // A `v1 List`: what `kubectl apply -f` takes as one JSON document.
                    let list =
                        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
                    println!("{}", serde_json::to_string_pretty(&list)?);
                }
            }
            if a.azure_client_id.is_none() {
                eprintln!(
                    "note: the ServiceAccount's azure.workload.identity/client-id is a placeholder ({PLACEHOLDER_CLIENT_ID}); give --azure-client-id, or patch it in your overlay"
                );
            }
            Ok(0)
        }
    }
}

/// The client id written when `--azure-client-id` is not given.
pub const PLACEHOLDER_CLIENT_ID: &str = "00000000-0000-0000-0000-000000000000";

/// The binary's path in the image (bin/Containerfile).
pub const BINARY: &str = "/usr/local/bin/hcp-workflow";
/// The non-root user and group of every container (bin/Containerfile creates it).
pub const UID: i64 = 65532;
/// The UI's container port.
pub const UI_PORT: i32 = 8080;
/// The worker's `--listen-health` port: `/healthz`, `/readyz`, `/metrics`, no token.
pub const HEALTH_PORT: i32 = 9464;
/// Name of everything that has one name.
pub const NAME: &str = "hcp-workflow";
/// The annotation that says which scope of the permission table a Role or ClusterRole
/// grants (`cluster`, `control-plane-namespaces`, `hosted-cluster-namespaces`,
/// `namespace/<name>`).
pub const SCOPE_ANNOTATION: &str = "hcp-workflow.io/rbac-scope";

/// Every permission the steps use on the management cluster: the union of the table over
/// every workflow, with and without a private link.
pub fn all_management_access() -> BTreeSet<ManagementAccess> {
    let mut all = BTreeSet::new();
    for wf in [
        PreflightWorkflow::Create,
        PreflightWorkflow::Update,
        PreflightWorkflow::Delete,
    ] {
        for private_link in [false, true] {
            all.extend(management_access(wf, private_link));
        }
    }
    all
}

/// The value of [`SCOPE_ANNOTATION`] for a scope.
pub fn scope_name(s: AccessScope) -> String {
    match s {
        AccessScope::Cluster => "cluster".into(),
        AccessScope::ControlPlaneNamespace => "control-plane-namespaces".into(),
        AccessScope::HostedClusterNamespace => "hosted-cluster-namespaces".into(),
        AccessScope::Namespace(n) => format!("namespace/{n}"),
    }
}

/// RBAC rules for a set of permissions: one rule per (group, resource), verbs sorted.
pub fn rules(access: &[&ManagementAccess]) -> Vec<PolicyRule> {
    let mut by: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for a in access {
        by.entry((a.group, a.resource)).or_default().insert(a.verb);
    }
    by.into_iter()
        .map(|((group, resource), verbs)| PolicyRule {
            api_groups: Some(vec![group.to_string()]),
            resources: Some(vec![resource.to_string()]),
            verbs: verbs.into_iter().map(str::to_string).collect(),
            ..Default::default()
        })
        .collect()
}

/// A DNS-1123 label (namespaces, Secret names we mount by name): 1–63 of `a-z0-9-`,
/// starting and ending alphanumeric.
fn dns_label(flag: &str, v: &str) -> Result<()> {
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Refused::input(format!(
            "{flag} {v:?} is not a Kubernetes name: use 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit (e.g. hcp-workflow)"
        )))
    }
}

fn uuid_flag(flag: &str, v: &str) -> Result<()> {
    uuid::Uuid::parse_str(v).map(|_| ()).map_err(|_| {
        Refused::input(format!(
            "{flag} {v:?} is not a UUID: give the identity's client (or tenant) id, e.g. `az identity show -g RG -n NAME --query clientId -o tsv`"
        ))
    })
}

fn check(a: &ManifestArgs) -> Result<()> {
    dns_label("--namespace", &a.namespace)?;
    dns_label("--database-secret", &a.database_secret)?;
    dns_label("--ui-token-secret", &a.ui_token_secret)?;
    dns_label("--notify-secret", &a.notify_secret)?;
    for ns in &a.hosted_cluster_namespaces {
        dns_label("--hosted-cluster-namespace", ns)?;
    }
    if let Some(id) = &a.azure_client_id {
        uuid_flag("--azure-client-id", id)?;
    }
    if let Some(id) = &a.azure_tenant_id {
        uuid_flag("--azure-tenant-id", id)?;
    }
    if a.image.trim().is_empty() || a.image.chars().any(char::is_whitespace) {
        return Err(Refused::input(format!(
            "--image {:?} is not an image reference: give one like registry.example/hcp-workflow:{}",
            a.image,
            env!("CARGO_PKG_VERSION")
        )));
    }
    Ok(())
}

fn labels(component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), NAME.to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            component.to_string(),
        ),
    ])
}

fn meta(name: &str, ns: Option<&str>, component: &str) -> ObjectMeta {
    let mut l = labels(component);
    l.insert(
        "app.kubernetes.io/version".into(),
        env!("CARGO_PKG_VERSION").into(),
    );
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: ns.map(str::to_string),
        labels: Some(l),
        ..Default::default()
    }
}

fn secret_env(name: &str, secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: optional.then_some(true),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        ..Default::default()
    }
}

/// Non-root, read-only root filesystem, no privilege escalation, no capabilities.
fn container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        run_as_user: Some(UID),
        run_as_group: Some(UID),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod_security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(UID),
        run_as_group: Some(UID),
        fs_group: Some(UID),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn resources(cpu: &str, memory: &str, memory_limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            Quantity(memory_limit.into()),
        )])),
        ..Default::default()
    }
}

/// The one writable directory of a container (`/tmp`, an emptyDir): the root filesystem
/// is read-only.
fn tmp_volume() -> (Volume, VolumeMount) {
    (
        Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
        VolumeMount {
            name: "tmp".into(),
            mount_path: "/tmp".into(),
            ..Default::default()
        },
    )
}

fn container(name: &str, a: &ManifestArgs, args: &[&str], env: Vec<EnvVar>) -> Container {
    let (_, mount) = tmp_volume();
    Container {
        name: name.to_string(),
        image: Some(a.image.clone()),
        command: Some(vec![BINARY.into()]),
        args: Some(args.iter().map(|s| s.to_string()).collect()),
        env: Some(env),
        security_context: Some(container_security()),
        volume_mounts: Some(vec![mount]),
        working_dir: Some("/tmp".into()),
        ..Default::default()
    }
}

fn pod_spec(containers: Vec<Container>, service_account: bool, restart: Option<&str>) -> PodSpec {
    let (volume, _) = tmp_volume();
    PodSpec {
        service_account_name: service_account.then(|| NAME.to_string()),
        // Only the worker talks to the management cluster: the others get no token.
        automount_service_account_token: Some(service_account),
        security_context: Some(pod_security()),
        containers,
        volumes: Some(vec![volume]),
        restart_policy: restart.map(str::to_string),
        ..Default::default()
    }
}

fn selector(component: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels(component)),
        ..Default::default()
    }
}

fn template(component: &str, extra: &[(&str, &str)], spec: PodSpec) -> PodTemplateSpec {
    let mut l = labels(component);
    for (k, v) in extra {
        l.insert((*k).to_string(), (*v).to_string());
    }
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(l),
            ..Default::default()
        }),
        spec: Some(spec),
    }
}

/// Prometheus' conventional scrape annotations, for a pod serving `/metrics` on `port`.
fn scraped(mut t: PodTemplateSpec, port: i32) -> PodTemplateSpec {
    if let Some(m) = t.metadata.as_mut() {
        m.annotations = Some(BTreeMap::from([
            ("prometheus.io/scrape".to_string(), "true".to_string()),
            ("prometheus.io/port".to_string(), port.to_string()),
            ("prometheus.io/path".to_string(), "/metrics".to_string()),
        ]));
    }
    t
}

fn common_env(a: &ManifestArgs) -> Vec<EnvVar> {
    vec![
        secret_env(
            "HCP_WORKFLOW_DATABASE_URL",
            &a.database_secret,
            "url",
            false,
        ),
        env("HOME", "/tmp"),
        env("RUST_LOG", "info"),
    ]
}

/// The objects, in the order `kubectl apply` creates them.
///
/// # Errors
/// A [`Refused`] input error naming the flag when a value is not usable.
pub fn manifests(a: &ManifestArgs) -> Result<Vec<serde_json::Value>> {
    check(a)?;
    let ns = Some(a.namespace.as_str());
    let mut out: Vec<serde_json::Value> = Vec::new();
    let mut push = |v: Result<serde_json::Value, serde_json::Error>| -> Result<()> {
        out.push(v?);
        Ok(())
    };

    // ServiceAccount with Azure workload identity.
    let mut sa_annotations = BTreeMap::from([(
        "azure.workload.identity/client-id".to_string(),
        a.azure_client_id
            .clone()
            .unwrap_or_else(|| PLACEHOLDER_CLIENT_ID.to_string()),
    )]);
    if let Some(t) = &a.azure_tenant_id {
        sa_annotations.insert("azure.workload.identity/tenant-id".into(), t.clone());
    }
    push(serde_json::to_value(ServiceAccount {
        metadata: ObjectMeta {
            annotations: Some(sa_annotations),
            ..meta(NAME, ns, "worker")
        },
        ..Default::default()
    }))?;

    // RBAC from the permission table, one role per scope.
    let subject = vec![Subject {
        kind: "ServiceAccount".into(),
        name: NAME.into(),
        namespace: Some(a.namespace.clone()),
        ..Default::default()
    }];
    // One install's names: `hcp-workflow`, or `hcp-workflow-<namespace>` when several
    // installs share the management cluster (cluster-scoped names must not collide).
    let instance = if a.namespace == NAME {
        NAME.to_string()
    } else {
        format!("{NAME}-{}", a.namespace)
    };
    let access = all_management_access();
    let scopes: BTreeSet<AccessScope> = access.iter().map(|x| x.scope).collect();
    for scope in scopes {
        let of_scope: Vec<&ManagementAccess> = access.iter().filter(|x| x.scope == scope).collect();
        let role_meta = |name: &str, ns: Option<&str>| ObjectMeta {
            annotations: Some(BTreeMap::from([(
                SCOPE_ANNOTATION.to_string(),
                scope_name(scope),
            )])),
            ..meta(name, ns, "worker")
        };
        let role_ref = |kind: &str, name: &str| RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: kind.into(),
            name: name.into(),
        };
        match scope {
            // Namespaces are cluster-scoped; control-plane namespaces are named per
            // cluster (`<namespace>-<cluster>`) and made by HyperShift, so no Role can be
            // placed in them ahead of time: both are granted cluster-wide.
            AccessScope::Cluster | AccessScope::ControlPlaneNamespace => {
                let name = match scope {
                    AccessScope::Cluster => format!("{instance}-namespaces"),
                    _ => format!("{instance}-control-planes"),
                };
                push(serde_json::to_value(ClusterRole {
                    metadata: role_meta(&name, None),
                    rules: Some(rules(&of_scope)),
                    ..Default::default()
                }))?;
                push(serde_json::to_value(ClusterRoleBinding {
                    metadata: meta(&name, None, "worker"),
                    role_ref: role_ref("ClusterRole", &name),
                    subjects: Some(subject.clone()),
                }))?;
            }
            // The same rules in each HostedCluster namespace: one ClusterRole, bound per
            // namespace by a RoleBinding (which grants in its own namespace only).
            AccessScope::HostedClusterNamespace => {
                let name = format!("{instance}-hosted-clusters");
                push(serde_json::to_value(ClusterRole {
                    metadata: role_meta(&name, None),
                    rules: Some(rules(&of_scope)),
                    ..Default::default()
                }))?;
                for hc_ns in &a.hosted_cluster_namespaces {
                    push(serde_json::to_value(RoleBinding {
                        metadata: meta(&name, Some(hc_ns), "worker"),
                        role_ref: role_ref("ClusterRole", &name),
                        subjects: Some(subject.clone()),
                    }))?;
                }
            }
            AccessScope::Namespace(fixed) => {
                push(serde_json::to_value(Role {
                    metadata: role_meta(&instance, Some(fixed)),
                    rules: Some(rules(&of_scope)),
                }))?;
                push(serde_json::to_value(RoleBinding {
                    metadata: meta(&instance, Some(fixed), "worker"),
                    role_ref: role_ref("Role", &instance),
                    subjects: Some(subject.clone()),
                }))?;
            }
        }
    }

    // The schema, before the workers start (Argo CD / Flux: a sync hook; plain kubectl:
    // apply, wait for the Job, then the rest; a Job is immutable, so delete it before
    // applying a new image's).
    let migrate = container(
        "migrate",
        a,
        &["migrate", "--database", "$(DATABASE_URL)"],
        vec![
            secret_env("DATABASE_URL", &a.database_secret, "url", false),
            env("HOME", "/tmp"),
        ],
    );
    push(serde_json::to_value(Job {
        metadata: meta(&format!("{NAME}-migrate"), ns, "migrate"),
        spec: Some(JobSpec {
            backoff_limit: Some(6),
            template: template(
                "migrate",
                &[],
                pod_spec(
                    vec![Container {
                        resources: Some(resources("50m", "64Mi", "256Mi")),
                        ..migrate
                    }],
                    false,
                    Some("OnFailure"),
                ),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }))?;

    // Workers.
    let mut worker_env = common_env(a);
    worker_env.push(secret_env(
        "HCP_WORKFLOW_NOTIFY",
        &a.notify_secret,
        "urls",
        true,
    ));
    let health = format!("0.0.0.0:{HEALTH_PORT}");
    let http_probe = |path: &str, failures: i32| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("health".into()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        failure_threshold: Some(failures),
        ..Default::default()
    };
    let worker = Container {
        ports: Some(vec![ContainerPort {
            name: Some("health".into()),
            container_port: HEALTH_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        // Liveness never looks at the database (an outage must not restart every worker);
        // readiness does, and at whether this worker's leases renew.
        liveness_probe: Some(http_probe("/healthz", 3)),
        readiness_probe: Some(http_probe("/readyz", 2)),
        resources: Some(resources("100m", "128Mi", "1Gi")),
        ..container(
            "worker",
            a,
            &[
                "--log-format",
                "json",
                "worker",
                "--world",
                "/tmp/hcp-workflow-selftest",
                "--listen-health",
                &health,
                // Within terminationGracePeriodSeconds (60), with room to release leases.
                "--grace",
                "45s",
            ],
            worker_env,
        )
    };
    push(serde_json::to_value(Deployment {
        metadata: meta(&format!("{NAME}-worker"), ns, "worker"),
        spec: DeploymentSpec {
            replicas: Some(a.replicas),
            selector: selector("worker"),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(1)),
                }),
            }),
            template: scraped(
                template(
                    "worker",
                    // The Azure workload identity webhook injects AZURE_CLIENT_ID,
                    // AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE into these pods.
                    &[("azure.workload.identity/use", "true")],
                    PodSpec {
                        // Time to finish or release the runs it holds on SIGTERM.
                        termination_grace_period_seconds: Some(60),
                        ..pod_spec(vec![worker], true, None)
                    },
                ),
                HEALTH_PORT,
            ),
            ..Default::default()
        },
        ..Default::default()
    }))?;
    push(serde_json::to_value(PodDisruptionBudget {
        metadata: meta(&format!("{NAME}-worker"), ns, "worker"),
        spec: Some(PodDisruptionBudgetSpec {
            // A worker that goes releases its runs and another takes them over: one at a
            // time keeps the rest working through a node drain.
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(selector("worker")),
            ..Default::default()
        }),
        ..Default::default()
    }))?;

    // UI.
    let mut ui_env = common_env(a);
    ui_env.push(secret_env(
        crate::ui::TOKEN_ENV,
        &a.ui_token_secret,
        "token",
        false,
    ));
    let listen = format!("0.0.0.0:{UI_PORT}");
    let probe = Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::String("http".into()),
            ..Default::default()
        }),
        period_seconds: Some(10),
        ..Default::default()
    };
    let ui = Container {
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: UI_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        readiness_probe: Some(probe.clone()),
        liveness_probe: Some(probe),
        resources: Some(resources("50m", "64Mi", "512Mi")),
        ..container(
            "ui",
            a,
            &["--log-format", "json", "ui", "--listen", &listen],
            ui_env,
        )
    };
    push(serde_json::to_value(Deployment {
        metadata: meta(&format!("{NAME}-ui"), ns, "ui"),
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: selector("ui"),
            template: template("ui", &[], pod_spec(vec![ui], false, None)),
            ..Default::default()
        },
        ..Default::default()
    }))?;
    push(serde_json::to_value(Service {
        metadata: meta(&format!("{NAME}-ui"), ns, "ui"),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(labels("ui")),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: UI_PORT,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }))?;

    // Ingress to hcp-workflow's pods: the UI's port and the workers' probe and metrics port
    // (which serves no action); nothing else (the Job serves nothing). Egress stays open: ARM, Entra ID, storage, the journal and the API server
    // have addresses a policy here cannot know.
    push(serde_json::to_value(NetworkPolicy {
        metadata: meta(NAME, ns, "network"),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_string(),
                    NAME.to_string(),
                )])),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                ports: Some(
                    [UI_PORT, HEALTH_PORT]
                        .into_iter()
                        .map(|p| NetworkPolicyPort {
                            port: Some(IntOrString::Int(p)),
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }))?;
    Ok(out)
}

/// Multi-document YAML, one document per object, with a header comment.
pub fn to_yaml(objects: &[serde_json::Value]) -> Result<String> {
    let mut s = format!(
        "# Generated by `hcp-workflow deploy manifests` ({}); regenerate rather than edit.\n",
        crate::services::VERSION
    );
    for o in objects {
        s.push_str("---\n");
        s.push_str(&serde_norway::to_string(o)?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;

    fn args() -> ManifestArgs {
        ManifestArgs {
            namespace: "hcp".into(),
            replicas: 3,
            database_secret: "db".into(),
            image: "registry.example/hcp-workflow:1".into(),
            azure_client_id: Some("11111111-2222-3333-4444-555555555555".into()),
            azure_tenant_id: None,
            hosted_cluster_namespaces: vec!["clusters".into(), "team-b".into()],
            ui_token_secret: "ui".into(),
            notify_secret: "notify".into(),
        }
    }

    /// The YAML documents, parsed back.
    fn documents(yaml: &str) -> Vec<serde_json::Value> {
        use serde::Deserialize;
        serde_norway::Deserializer::from_str(yaml)
            .map(|d| serde_json::Value::deserialize(d).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    /// `v` is a valid `T`: it deserializes, and serializing it again gives `v` back
    /// (nothing unknown was dropped, nothing has the wrong type).
    fn round_trip<T: DeserializeOwned + serde::Serialize>(v: &serde_json::Value) {
        let typed: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{e}: {v}"));
        let back = serde_json::to_value(&typed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&back, v);
    }

    #[test]
    fn every_document_is_a_valid_object_of_its_kind() {
        let objects = manifests(&args()).unwrap_or_else(|e| panic!("{e}"));
        let yaml = to_yaml(&objects).unwrap_or_else(|e| panic!("{e}"));
        let docs = documents(&yaml);
        assert_eq!(docs, objects);
        let mut kinds = BTreeSet::new();
        for d in &docs {
            let kind = d["kind"].as_str().unwrap_or_default().to_string();
            match kind.as_str() {
                "ServiceAccount" => round_trip::<ServiceAccount>(d),
                "ClusterRole" => round_trip::<ClusterRole>(d),
                "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(d),
                "Role" => round_trip::<Role>(d),
                "RoleBinding" => round_trip::<RoleBinding>(d),
                "Job" => round_trip::<Job>(d),
                "Deployment" => round_trip::<Deployment>(d),
                "PodDisruptionBudget" => round_trip::<PodDisruptionBudget>(d),
                "Service" => round_trip::<Service>(d),
                "NetworkPolicy" => round_trip::<NetworkPolicy>(d),
                other => panic!("unexpected kind {other}"),
            }
            kinds.insert(kind);
        }
        assert_eq!(kinds.len(), 10, "{kinds:?}");
        // Every pod: non-root, read-only root filesystem.
        for d in docs
            .iter()
            .filter(|d| matches!(d["kind"].as_str(), Some("Deployment" | "Job")))
        {
            let spec = &d["spec"]["template"]["spec"];
            assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{d}");
            for c in spec["containers"].as_array().into_iter().flatten() {
                assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true, "{c}");
                assert_eq!(
                    c["securityContext"]["allowPrivilegeEscalation"], false,
                    "{c}"
                );
                assert_eq!(c["image"], "registry.example/hcp-workflow:1");
            }
        }
        let worker = docs
            .iter()
            .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "hcp-workflow-worker")
            .unwrap_or_else(|| panic!("no worker"));
        assert_eq!(worker["spec"]["replicas"], 3);
        assert_eq!(
            worker["spec"]["template"]["metadata"]["labels"]["azure.workload.identity/use"],
            "true"
        );
        // A string, quoted in YAML (a bare `true` would be a boolean the API refuses).
        assert!(
            yaml.contains("azure.workload.identity/use: 'true'")
                || yaml.contains("azure.workload.identity/use: \"true\"")
        );
        let sa = docs
            .iter()
            .find(|d| d["kind"] == "ServiceAccount")
            .unwrap_or_else(|| panic!("no SA"));
        assert_eq!(
            sa["metadata"]["annotations"]["azure.workload.identity/client-id"],
            "11111111-2222-3333-4444-555555555555"
        );
        let job = docs
            .iter()
            .find(|d| d["kind"] == "Job")
            .unwrap_or_else(|| panic!("no Job"));
        assert_eq!(
            job["spec"]["template"]["spec"]["containers"][0]["args"],
            serde_json::json!(["migrate", "--database", "$(DATABASE_URL)"])
        );
        // The database URL comes from the Secret, never a literal.
        assert!(!yaml.contains("postgres://"));
    }

    /// Every container's arguments are a command line this binary accepts (a flag renamed
    /// in `worker`, `ui` or `migrate` fails here, not in a pod).
    #[test]
    fn container_args_parse_with_this_binary() {
        use clap::Parser;
        let docs = manifests(&args()).unwrap_or_else(|e| panic!("{e}"));
        let mut seen = BTreeSet::new();
        for d in docs
            .iter()
            .filter(|d| matches!(d["kind"].as_str(), Some("Deployment" | "Job")))
        {
            for c in d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                assert_eq!(c["command"], serde_json::json!([BINARY]));
                let argv: Vec<String> = std::iter::once("hcp-workflow".to_string())
                    .chain(
                        c["args"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|a| a.as_str().map(str::to_string)),
                    )
                    .collect();
                if let Err(e) = crate::Cli::try_parse_from(&argv) {
                    panic!("{argv:?}: {e}");
                }
                seen.insert(c["name"].as_str().unwrap_or_default().to_string());
            }
        }
        assert_eq!(
            seen,
            BTreeSet::from(["migrate".into(), "ui".into(), "worker".into()])
        );
    }

    /// The RBAC rules are exactly the permission table (over every workflow), each
    /// permission in the scope the table names.
    #[test]
    fn rbac_rules_equal_the_permission_table() {
        let a = args();
        let docs = manifests(&a).unwrap_or_else(|e| panic!("{e}"));
        let mut granted: BTreeSet<(String, String, String, String)> = BTreeSet::new();
        let mut bound_in: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for d in &docs {
            match d["kind"].as_str() {
                Some("ClusterRole" | "Role") => {
                    let scope = d["metadata"]["annotations"][SCOPE_ANNOTATION]
                        .as_str()
                        .unwrap_or_else(|| panic!("no scope on {d}"))
                        .to_string();
                    if d["kind"] == "Role" {
                        assert_eq!(
                            scope,
                            format!(
                                "namespace/{}",
                                d["metadata"]["namespace"].as_str().unwrap_or_default()
                            )
                        );
                    }
                    let role: Vec<PolicyRule> = serde_json::from_value(d["rules"].clone())
                        .unwrap_or_else(|e| panic!("{e}"));
                    for r in role {
                        for g in r.api_groups.iter().flatten() {
                            for res in r.resources.iter().flatten() {
                                for v in &r.verbs {
                                    assert!(
                                        granted.insert((
                                            v.clone(),
                                            g.clone(),
                                            res.clone(),
                                            scope.clone()
                                        )),
                                        "twice: {v} {g} {res}"
                                    );
                                }
                            }
                        }
                    }
                }
                Some("RoleBinding") => {
                    bound_in
                        .entry(
                            d["roleRef"]["name"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                        )
                        .or_default()
                        .insert(
                            d["metadata"]["namespace"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                        );
                    assert_eq!(d["subjects"][0]["namespace"], "hcp");
                }
                _ => {}
            }
        }
        let table: BTreeSet<(String, String, String, String)> = all_management_access()
            .into_iter()
            .map(|x| {
                (
                    x.verb.into(),
                    x.group.into(),
                    x.resource.into(),
                    scope_name(x.scope),
                )
            })
            .collect();
        assert_eq!(granted, table);
        assert!(table.contains(&(
            "patch".into(),
            "".into(),
            "namespaces".into(),
            "cluster".into()
        )));
        // The HostedCluster-namespace rules are bound in each namespace given, and nowhere else.
        assert_eq!(
            bound_in.get("hcp-workflow-hcp-hosted-clusters"),
            Some(&BTreeSet::from([
                "clusters".to_string(),
                "team-b".to_string()
            ]))
        );
    }

    #[test]
    fn bad_values_name_the_flag() {
        let mut a = args();
        a.namespace = "Bad_NS".into();
        let e = manifests(&a)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("--namespace \"Bad_NS\""), "{e}");
        let mut a = args();
        a.azure_client_id = Some("nope".into());
        let e = manifests(&a)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("--azure-client-id"), "{e}");
    }
}
