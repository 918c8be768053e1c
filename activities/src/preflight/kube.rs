//! Management-cluster checks of `preflight`, each citing the Kubernetes API it uses.
//!
//! Reachability (`GET /version`) is asked once and shared: when the API server does not
//! answer, only the `k8s.reachable` row says so and the other checks add nothing.

use super::{Check, CheckResult, Inputs, Workflow, short};
use crate::kube::{LABEL_CLUSTER, LABEL_INFRA_ID, Mgmt};
use crate::steps::Clients;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;
use std::sync::Arc;

/// Namespace and name of the HyperShift operator's Deployment and ConfigMaps.
pub const HYPERSHIFT_NAMESPACE: &str = "hypershift";
/// The operator's ConfigMap of supported OpenShift versions (openshift/hypershift
/// `hypershift-operator/controllers/supportedversion/reconciler.go`: ConfigMap
/// `supported-versions`, key `supported-versions`, JSON `{"versions":["4.22",…]}`).
pub const SUPPORTED_VERSIONS: &str = "supported-versions";

type Reach = Shared<BoxFuture<'static, Result<Mgmt, String>>>;

/// The management-cluster checks that apply to `inputs.workflow`.
pub(crate) fn checks(clients: &Arc<Clients>, inputs: &Arc<Inputs>) -> Vec<Check> {
    let target = match &inputs.mgmt {
        crate::steps::MgmtEnv::Simulator => "management cluster (simulator)".to_string(),
        crate::steps::MgmtEnv::Cluster(t) => format!("management cluster ({})", describe_target(t)),
    };
    let reach: Reach = {
        let (c, env) = (clients.clone(), inputs.mgmt.clone());
        async move {
            let m = c.mgmt(&env).await.map_err(|e| e.message)?;
            // GET /version (the discovery endpoint every API server serves).
            m.client()
                .apiserver_version()
                .await
                .map(|_| m.clone())
                .map_err(|e| short(&e))
        }
        .boxed()
        .shared()
    };
    let mut out = Vec::new();
    {
        let r = reach.clone();
        let t = target.clone();
        out.push(Check::new("k8s.reachable", target.clone(), async move {
            match r.await {
                Ok(m) => {
                    let v = m.client().apiserver_version().await.map(|v| v.git_version).unwrap_or_default();
                    vec![CheckResult::pass("k8s.reachable", t, format!("API server answers (Kubernetes {v})"))]
                }
                Err(e) => vec![CheckResult::fail(
                    "k8s.reachable",
                    t,
                    format!("the API server did not answer: {e}"),
                    "fix managementCluster.kubeconfig / context in the cluster file (oc login …; oc whoami --show-server)",
                )],
            }
        }));
    }
    let add = |out: &mut Vec<Check>,
               id: &'static str,
               t: String,
               f: fn(Mgmt, Arc<Inputs>) -> BoxFuture<'static, Vec<CheckResult>>| {
        let (r, i) = (reach.clone(), inputs.clone());
        out.push(Check::new(id, t, async move {
            match r.await {
                Ok(m) => f(m, i).await,
                Err(_) => Vec::new(),
            }
        }));
    };
    add(
        &mut out,
        "k8s.whoami",
        "SelfSubjectReview".into(),
        |m, _| whoami(m).boxed(),
    );
    add(
        &mut out,
        "k8s.access",
        "SelfSubjectAccessReview".into(),
        |m, i| access(m, i).boxed(),
    );
    add(
        &mut out,
        "k8s.route-api",
        "/apis/route.openshift.io/v1".into(),
        |m, i| route_api(m, i).boxed(),
    );
    add(
        &mut out,
        "k8s.crds",
        "hypershift.openshift.io CRDs".into(),
        |m, i| crds(m, i).boxed(),
    );
    add(
        &mut out,
        "k8s.operator",
        "Deployment hypershift/operator".into(),
        |m, i| operator(m, i).boxed(),
    );
    add(
        &mut out,
        "k8s.hosted-cluster",
        "HostedCluster".into(),
        |m, i| hosted_cluster(m, i).boxed(),
    );
    out
}

fn describe_target(t: &crate::kube::KubeTarget) -> String {
    match t {
        crate::kube::KubeTarget::Kubeconfig { path, context } => format!(
            "kubeconfig {}, context {}",
            path.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "$KUBECONFIG or ~/.kube/config".into()),
            context.as_deref().unwrap_or("(current)")
        ),
        other => format!("{other:?}"),
    }
}

/// `POST /apis/authentication.k8s.io/v1/selfsubjectreviews` (Kubernetes ≥ 1.28): who the
/// API server thinks we are.
async fn whoami(m: Mgmt) -> Vec<CheckResult> {
    let api: Api<SelfSubjectReview> = Api::all(m.client().clone());
    let target = "POST /apis/authentication.k8s.io/v1/selfsubjectreviews";
    match api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
    {
        Ok(r) => {
            let u = r.status.and_then(|s| s.user_info).unwrap_or_default();
            vec![CheckResult::pass(
                "k8s.whoami",
                target,
                format!(
                    "user {}, groups {}",
                    u.username.unwrap_or_else(|| "(none)".into()),
                    u.groups.unwrap_or_default().join(", ")
                ),
            )]
        }
        Err(e) => vec![CheckResult::warn(
            "k8s.whoami",
            target,
            format!("not answered (API server older than 1.28?): {}", short(&e)),
            Some("oc whoami".into()),
        )],
    }
}

/// Where a [`ManagementAccess`] applies on the management cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessScope {
    /// A cluster-scoped resource (namespaces).
    Cluster,
    /// The HostedCluster's namespace (the cluster file's `namespace`, `clusters` by default).
    HostedClusterNamespace,
    /// The hosted control plane's namespace (`<namespace>-<cluster>`), which HyperShift
    /// creates for each cluster: no name is known before the cluster exists.
    ControlPlaneNamespace,
    /// A namespace with a fixed name (the HyperShift operator's, [`HYPERSHIFT_NAMESPACE`]).
    Namespace(&'static str),
}

/// One verb on one resource that a workflow's steps use on the management cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ManagementAccess {
    /// The Kubernetes verb (`get`, `create`, `patch`, `delete`).
    pub verb: &'static str,
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The resource (plural).
    pub resource: &'static str,
    /// Where.
    pub scope: AccessScope,
}

/// The permission table of the management cluster: every verb the steps of `workflow` use,
/// with `private_link` when the cluster is Private or PublicAndPrivate. `preflight` asks a
/// `SelfSubjectAccessReview` for each entry; `hcp-workflow deploy manifests` turns the
/// union over every workflow into the Role and ClusterRole rules of its ServiceAccount.
pub fn management_access(workflow: Workflow, private_link: bool) -> Vec<ManagementAccess> {
    use AccessScope::{Cluster, ControlPlaneNamespace, HostedClusterNamespace, Namespace};
    let a = |verb, group, resource, scope| ManagementAccess {
        verb,
        group,
        resource,
        scope,
    };
    let hs = "hypershift.openshift.io";
    let ns = HostedClusterNamespace;
    let mut v = Vec::new();
    let verbs_all: &[&'static str] = &["get", "create", "patch", "delete"];
    match workflow {
        Workflow::Create => {
            v.push(a("get", "", "namespaces", Cluster));
            v.push(a("create", "", "namespaces", Cluster));
            // A missing HostedCluster namespace is created by a server-side apply, which
            // is a PATCH (`Mgmt::apply_namespace`).
            v.push(a("patch", "", "namespaces", Cluster));
            for verb in verbs_all {
                v.push(a(verb, "", "secrets", ns));
                v.push(a(verb, hs, "hostedclusters", ns));
                v.push(a(verb, hs, "nodepools", ns));
            }
            if private_link {
                // hcp-workflow mode reads the private-router Service's LB IP; hypershift
                // mode reads and releases the AzurePrivateLinkService CR.
                v.push(a("get", "", "services", ControlPlaneNamespace));
                v.push(a(
                    "get",
                    hs,
                    "azureprivatelinkservices",
                    ControlPlaneNamespace,
                ));
                v.push(a(
                    "patch",
                    hs,
                    "azureprivatelinkservices",
                    ControlPlaneNamespace,
                ));
                v.push(a(
                    "get",
                    "apps",
                    "deployments",
                    Namespace(HYPERSHIFT_NAMESPACE),
                ));
            }
        }
        Workflow::Update => {
            v.push(a("get", "", "secrets", ns));
            v.push(a("get", hs, "hostedclusters", ns));
            v.push(a("patch", hs, "hostedclusters", ns));
            for verb in verbs_all {
                v.push(a(verb, hs, "nodepools", ns));
            }
            if private_link {
                v.push(a(
                    "get",
                    hs,
                    "azureprivatelinkservices",
                    ControlPlaneNamespace,
                ));
            }
        }
        Workflow::Delete => {
            for verb in verbs_all.iter().filter(|v| **v != "create") {
                v.push(a(verb, "", "secrets", ns));
                v.push(a(verb, hs, "hostedclusters", ns));
                v.push(a(verb, hs, "nodepools", ns));
            }
        }
    }
    v
}

/// The (verb, group, resource, namespace) tuples the run needs: [`management_access`] with
/// this cluster's namespaces.
fn needed_access(i: &Inputs) -> Vec<(&'static str, &'static str, &'static str, Option<String>)> {
    management_access(i.workflow, i.private_link.is_some())
        .into_iter()
        .map(|a| {
            let ns = match a.scope {
                AccessScope::Cluster => None,
                AccessScope::HostedClusterNamespace => Some(i.namespace.clone()),
                AccessScope::ControlPlaneNamespace => Some(crate::kube::control_plane_namespace(
                    &i.namespace,
                    &i.owner.cluster,
                )),
                AccessScope::Namespace(n) => Some(n.to_string()),
            };
            (a.verb, a.group, a.resource, ns)
        })
        .collect()
}

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, one per tuple, concurrently.
async fn access(m: Mgmt, i: Arc<Inputs>) -> Vec<CheckResult> {
    let api: Api<SelfSubjectAccessReview> = Api::all(m.client().clone());
    let needed = needed_access(&i);
    let reviews = needed.iter().map(|(verb, group, resource, ns)| {
        let api = api.clone();
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some((*verb).into()),
                    group: Some((*group).into()),
                    resource: Some((*resource).into()),
                    namespace: ns.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        async move { api.create(&PostParams::default(), &review).await }
    });
    let answers = futures::future::join_all(reviews).await;
    let mut denied = Vec::new();
    let mut errors = Vec::new();
    for ((verb, group, resource, ns), a) in needed.iter().zip(answers) {
        let what = format!(
            "{verb} {}{resource}{}",
            if group.is_empty() {
                String::new()
            } else {
                format!("{group}/")
            },
            ns.as_deref()
                .map(|n| format!(" in {n}"))
                .unwrap_or_default()
        );
        match a {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(r) => denied.push((
                what,
                r.status.and_then(|s| s.reason).unwrap_or_default(),
                *verb,
                *resource,
                ns.clone(),
            )),
            Err(e) => errors.push(format!("{what}: {}", short(&e))),
        }
    }
    let target = "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let mut rows = Vec::new();
    for (what, reason, verb, resource, ns) in &denied {
        rows.push(CheckResult::fail(
            "k8s.access",
            format!("{target} [{what}]"),
            format!("denied{}", if reason.is_empty() { String::new() } else { format!(": {reason}") }),
            format!(
                "grant it, e.g. oc adm policy add-cluster-role-to-user cluster-admin <user from k8s.whoami> (or a Role allowing {verb} {resource}{})",
                ns.as_deref().map(|n| format!(" in namespace {n}")).unwrap_or_default()
            ),
        ));
    }
    if let Some(first) = errors.first() {
        rows.push(CheckResult::warn(
            "k8s.access",
            target,
            format!(
                "{} of {} reviews not answered, e.g. {first}",
                errors.len(),
                needed.len()
            ),
            None,
        ));
    }
    if rows.is_empty() {
        rows.push(CheckResult::pass(
            "k8s.access",
            target,
            format!("all {} verbs the run uses are allowed", needed.len()),
        ));
    }
    rows
}

/// The fix of a management cluster without the Route API: the CRD HyperShift's AKS setup
/// applies (`contrib/managed-azure/setup_install_ho_on_aks.sh`, release-4.22), or OpenShift.
const ROUTE_CRD_FIX: &str = "on AKS, apply the Route CRD before installing HyperShift, as its AKS setup does (contrib/managed-azure/setup_install_ho_on_aks.sh): `kubectl apply -f https://raw.githubusercontent.com/openshift/api/6bababe9164ea6c78274fd79c94a3f951f8d5ab2/route/v1/zz_generated.crd-manifests/routes.crd.yaml`, then restart the operator (`kubectl -n hypershift rollout restart deployment/operator`: it reads the capabilities once at start); otherwise use an OpenShift management cluster";

/// Discovery: `GET /apis` lists `route.openshift.io` on OpenShift (and on AKS once the
/// Route CRD is applied).
async fn route_api(m: Mgmt, i: Arc<Inputs>) -> Vec<CheckResult> {
    let target = "/apis/route.openshift.io/v1";
    match m.client().list_api_groups().await {
        Ok(g) if g.groups.iter().any(|g| g.name == "route.openshift.io") => {
            vec![CheckResult::pass(
                "k8s.route-api",
                target,
                "served: OpenShift, or an AKS cluster with the Route CRD applied",
            )]
        }
        // Every topology publishes Ignition, Konnectivity and OAuthServer as
        // Routes (activities/src/kube/render.rs), and HyperShift refuses a HostedCluster
        // with a Route service on a management cluster without the Route API
        // (`hostedcluster_controller.go` `validateConfigAndClusterCapabilities`: "cluster
        // does not support Routes, but service … is exposed via a Route").
        Ok(_) => vec![CheckResult::fail(
            "k8s.route-api",
            target,
            format!(
                "not served: the management cluster is not OpenShift; HyperShift refuses a HostedCluster whose Ignition, Konnectivity and OAuth services are Routes there (ValidConfiguration=False: cluster does not support Routes, but service \"Ignition\" is exposed via a Route){}",
                if i.private_link.is_some() {
                    ", and a private topology also needs it for the APIServer Route and HyperShift's private-link controllers"
                } else {
                    ""
                }
            ),
            // HyperShift's AKS setup applies openshift/api's Route CRD before `hypershift
            // install` (contrib/managed-azure/setup_install_ho_on_aks.sh); on OpenShift the
            // API is always there.
            ROUTE_CRD_FIX,
        )],
        Err(e) => vec![CheckResult::fail(
            "k8s.route-api",
            target,
            format!("discovery failed: {}", short(&e)),
            "check the API server",
        )],
    }
}

/// Schema paths (under `spec`) of every field hcp-workflow renders (activities/src/kube/render.rs).
fn rendered_fields(kind: &str, private: bool) -> Vec<&'static str> {
    match kind {
        "hostedclusters" => {
            let mut v = vec![
                "platform.azure.location",
                "platform.azure.resourceGroup",
                "platform.azure.vnetID",
                "platform.azure.subnetID",
                "platform.azure.securityGroupID",
                "platform.azure.subscriptionID",
                "platform.azure.tenantID",
                "platform.azure.cloud",
                "platform.azure.azureAuthenticationConfig",
                "issuerURL",
                "serviceAccountSigningKey",
                "dns.baseDomain",
                "dns.publicZoneID",
                "dns.privateZoneID",
                "release.image",
            ];
            if private {
                v.extend(["platform.azure.topology", "platform.azure.private"]);
            }
            v
        }
        _ => vec![
            "clusterName",
            "replicas",
            "release.image",
            "platform.azure.vmSize",
            "platform.azure.image",
            "platform.azure.osDisk",
            "platform.azure.subnetID",
        ],
    }
}

fn has_field(schema: &Value, path: &str) -> bool {
    let mut cur = match schema.pointer("/properties/spec") {
        Some(s) => s,
        None => return false,
    };
    for seg in path.split('.') {
        match cur.get("properties").and_then(|p| p.get(seg)) {
            Some(n) => cur = n,
            None => return false,
        }
    }
    true
}

/// `GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.hypershift.openshift.io`:
/// present, serving v1beta1, with every field we render.
async fn crds(m: Mgmt, i: Arc<Inputs>) -> Vec<CheckResult> {
    let api: Api<CustomResourceDefinition> = Api::all(m.client().clone());
    let mut rows = Vec::new();
    for plural in ["hostedclusters", "nodepools"] {
        let name = format!("{plural}.hypershift.openshift.io");
        let target = format!("CustomResourceDefinition {name}");
        let crd = match api.get_opt(&name).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                rows.push(CheckResult::fail(
                    "k8s.crds",
                    target,
                    "absent: HyperShift is not installed",
                    "install the HyperShift operator: hypershift install --help",
                ));
                continue;
            }
            Err(e) => {
                rows.push(CheckResult::fail(
                    "k8s.crds",
                    target,
                    short(&e),
                    "grant get on customresourcedefinitions",
                ));
                continue;
            }
        };
        let v = serde_json::to_value(&crd).unwrap_or(Value::Null);
        let version = v
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|vs| {
                vs.iter().find(|x| {
                    x.get("name").and_then(Value::as_str) == Some("v1beta1")
                        && x.get("served").and_then(Value::as_bool) != Some(false)
                })
            });
        let Some(version) = version else {
            rows.push(CheckResult::fail(
                "k8s.crds",
                target,
                "does not serve v1beta1",
                "upgrade the HyperShift operator",
            ));
            continue;
        };
        let schema = version
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or(Value::Null);
        let missing: Vec<&str> = rendered_fields(plural, i.private_link.is_some())
            .into_iter()
            .filter(|f| !has_field(&schema, f))
            .collect();
        if missing.is_empty() {
            rows.push(CheckResult::pass(
                "k8s.crds",
                target,
                "v1beta1 served with every field hcp-workflow renders",
            ));
        } else {
            rows.push(CheckResult::fail(
                "k8s.crds",
                target,
                format!("v1beta1 lacks spec.{}", missing.join(", spec.")),
                "upgrade the HyperShift operator (hypershift install) to a version with these fields (4.22 for the Azure private topology)",
            ));
        }
    }
    rows
}

/// The operator Deployment (`GET /apis/apps/v1/namespaces/hypershift/deployments/operator`,
/// read by `hypershift_link::operator_install`), its `supported-versions` ConfigMap
/// (`GET /api/v1/namespaces/hypershift/configmaps/supported-versions`) against the
/// release, and its `--private-platform` against `privateLink.managedBy`.
async fn operator(m: Mgmt, i: Arc<Inputs>) -> Vec<CheckResult> {
    let mut rows = Vec::new();
    let dep = "Deployment hypershift/operator";
    let install = match crate::steps::hypershift_link::operator_install(&m).await {
        Ok(x) => x,
        Err(e) => {
            return vec![CheckResult::fail(
                "k8s.operator",
                dep,
                short(&e),
                "grant get on deployments in namespace hypershift",
            )];
        }
    };
    if !install.found {
        return vec![CheckResult::fail(
            "k8s.operator",
            dep,
            "absent: the HyperShift operator is not installed",
            "hypershift install (without --private-platform for privateLink.managedBy: hcp-workflow, with --private-platform Azure for hypershift)",
        )];
    }
    rows.push(CheckResult::pass(
        "k8s.operator",
        dep,
        format!(
            "present, {}",
            if install.private_platform_azure {
                "--private-platform=Azure"
            } else {
                "no --private-platform"
            }
        ),
    ));
    // Supported versions.
    if i.workflow != Workflow::Delete {
        let cm_target = format!("ConfigMap {HYPERSHIFT_NAMESPACE}/{SUPPORTED_VERSIONS}");
        let api: Api<ConfigMap> = Api::namespaced(m.client().clone(), HYPERSHIFT_NAMESPACE);
        match api.get_opt(SUPPORTED_VERSIONS).await {
            Ok(Some(cm)) => {
                let versions: Vec<String> = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get(SUPPORTED_VERSIONS))
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    .and_then(|v| v.get("versions").cloned())
                    .and_then(|v| serde_json::from_value::<Vec<String>>(v).ok())
                    .unwrap_or_default();
                match i.release {
                    Some((maj, min)) => {
                        let want = format!("{maj}.{min}");
                        if versions.iter().any(|v| v == &want) {
                            rows.push(CheckResult::pass(
                                "k8s.supported-versions",
                                cm_target,
                                format!("the operator supports {want}"),
                            ));
                        } else {
                            rows.push(CheckResult::fail(
                                "k8s.supported-versions",
                                cm_target,
                                format!("the operator supports {} but not the release's {want}", if versions.is_empty() { "nothing readable".to_string() } else { versions.join(", ") }),
                                format!("upgrade the HyperShift operator to one supporting {want} (hypershift install --hypershift-image …), or use a supported release"),
                            ));
                        }
                    }
                    None => rows.push(CheckResult::warn(
                        "k8s.supported-versions",
                        cm_target,
                        "the release's version is unknown; not compared",
                        None,
                    )),
                }
            }
            Ok(None) => rows.push(CheckResult::warn(
                "k8s.supported-versions",
                cm_target,
                "absent: the operator publishes no supported versions (older HyperShift?)",
                Some("upgrade the HyperShift operator".into()),
            )),
            Err(e) => rows.push(CheckResult::fail(
                "k8s.supported-versions",
                cm_target,
                short(&e),
                "grant get on configmaps in namespace hypershift",
            )),
        }
    }
    // --private-platform vs privateLink.managedBy (the same rule `start` resolves with).
    if let Some(pl) = &i.private_link {
        let t = format!(
            "{dep} --private-platform vs privateLink.managedBy: {}",
            pl.managed_by
        );
        let flag = install.private_platform_azure;
        let row = match (pl.managed_by.as_str(), flag) {
            ("hcp-workflow", true) => CheckResult::fail(
                "k8s.private-platform",
                t,
                "the operator runs with --private-platform=Azure, so HyperShift also makes a private link service for this cluster",
                "set privateLink.managedBy: hypershift (or auto), or reinstall the operator without --private-platform",
            ),
            ("hypershift", false) => CheckResult::fail(
                "k8s.private-platform",
                t,
                "the operator runs without --private-platform Azure, so nothing would make the private link service",
                "set privateLink.managedBy: hcp-workflow (or auto), or reinstall the operator with --private-platform Azure",
            ),
            (m, f) => CheckResult::pass(
                "k8s.private-platform",
                t,
                format!(
                    "consistent: {} makes the private link",
                    match (m, f) {
                        ("auto", true) | ("hypershift", _) => "HyperShift",
                        _ => "hcp-workflow",
                    }
                ),
            ),
        };
        rows.push(row);
    }
    rows
}

/// `GET /apis/hypershift.openshift.io/v1beta1/namespaces/{ns}/hostedclusters/{name}`:
/// absent, or ours (labels of this cluster and infra id).
async fn hosted_cluster(m: Mgmt, i: Arc<Inputs>) -> Vec<CheckResult> {
    let name = &i.owner.cluster;
    let target = format!("HostedCluster {}/{name}", i.namespace);
    match m
        .get(crate::kube::Kind::HostedCluster, &i.namespace, name)
        .await
    {
        Ok(None) if i.workflow == Workflow::Update => vec![CheckResult::fail(
            "k8s.hosted-cluster",
            target,
            "absent: there is no cluster to update",
            "create it (`hcp-workflow start create-cluster`); if it was deleted by hand, `hcp-workflow verify` shows what the journal still holds",
        )],
        Ok(None) => vec![CheckResult::pass(
            "k8s.hosted-cluster",
            target,
            if i.workflow == Workflow::Create {
                "absent: the name is free"
            } else {
                "absent (already deleted)"
            },
        )],
        Ok(Some(o)) => {
            let labels = o.metadata.labels.unwrap_or_default();
            let ours = labels.get(LABEL_CLUSTER) == Some(name)
                && labels.get(LABEL_INFRA_ID) == Some(&i.owner.infra_id);
            if ours {
                let mut rows = vec![CheckResult::pass(
                    "k8s.hosted-cluster",
                    target.clone(),
                    "exists and is this cluster's (same cluster and infra id labels)",
                )];
                if i.workflow == Workflow::Update {
                    rows.extend(upgradeable_row(&o.data, i.release, &target));
                }
                rows
            } else {
                vec![CheckResult::fail(
                    "k8s.hosted-cluster",
                    target,
                    format!(
                        "exists and is not this cluster's (labels {LABEL_CLUSTER}={}, {LABEL_INFRA_ID}={}): the name is taken",
                        labels
                            .get(LABEL_CLUSTER)
                            .map(String::as_str)
                            .unwrap_or("(none)"),
                        labels
                            .get(LABEL_INFRA_ID)
                            .map(String::as_str)
                            .unwrap_or("(none)")
                    ),
                    "choose another cluster name, or set infraID to the one that HostedCluster was created with",
                )]
            }
        }
        Err(e) => vec![CheckResult::fail(
            "k8s.hosted-cluster",
            target,
            short(&e),
            "grant get on hostedclusters",
        )],
    }
}

/// `k8s.hosted-cluster.upgradeable`, for an update to another minor: HyperShift starts a
/// minor upgrade only while the guest's cluster-version operator reports `Upgradeable`
/// (bubbled up as `ClusterVersionUpgradeable`) not False, unless it is forced
/// (`hostedcluster_controller.go` `isUpgrading`); blocked, it shows `Progressing=False`,
/// reason `Blocked`, with the spec already changed. A z-stream update is always allowed.
fn upgradeable_row(hc: &Value, release: Option<(u32, u32)>, target: &str) -> Option<CheckResult> {
    let (maj, min) = release?;
    let running = hc
        .pointer("/status/version/desired/version")
        .and_then(Value::as_str)?;
    let (rmaj, rmin, _) = crate::steps::hosted_cluster::semver(running)?;
    if (u64::from(maj), u64::from(min)) == (rmaj, rmin) {
        return None;
    }
    let id = "k8s.hosted-cluster.upgradeable";
    let t = format!("{target} ClusterVersionUpgradeable");
    let cond = hc
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("ClusterVersionUpgradeable"));
    let field = |c: &Value, k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Some(match cond {
        Some(c) if field(c, "status") == "False" => CheckResult::fail(
            id,
            t,
            format!(
                "False ({}): {}; HyperShift will not start the minor upgrade {running} → {maj}.{min} until the guest's cluster-version operator says Upgradeable=True",
                field(c, "reason"),
                field(c, "message")
            ),
            "resolve what the condition names in the guest (e.g. `oc -n openshift-config patch cm admin-acks …` for an admin acknowledgement), or stay on the current minor",
        ),
        _ => CheckResult::pass(
            id,
            t,
            format!(
                "the guest's cluster-version operator allows the minor upgrade {running} → {maj}.{min}"
            ),
        ),
    })
}
