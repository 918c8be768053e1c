//! Simulated Kubernetes API server (management cluster) over plain HTTP.
//!
//! Kinds: core/v1 `namespaces`, `secrets`, `services`, `configmaps`, and
//! `hypershift.openshift.io/v1beta1` `hostedclusters`, `nodepools`,
//! `azureprivatelinkservices`. Paths follow the API server:
//! `/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]`,
//! `/apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}[/status]]`, the cluster-wide
//! `/api/v1/{plural}` and `/apis/{group}/{version}/{plural}` lists, and discovery at
//! `/version`, `/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}`.
//!
//! Verbs: GET, LIST, WATCH, POST, PUT, PATCH, DELETE, as a kube-apiserver serves them:
//!
//! - LIST: `labelSelector` (equality- and set-based: `in`, `notin`, `key`, `!key`),
//!   `fieldSelector` (`metadata.name`, `metadata.namespace`, and per built-in kind what the
//!   real server converts: Secret `type`, Namespace `status.phase`, Service `spec.type` /
//!   `spec.clusterIP`; anything else is 400 `field label not supported: X`), `limit` /
//!   `continue` paging (opaque token, `metadata.remainingItemCount` without selectors),
//!   server-side tables (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`).
//! - WATCH (`?watch=true`): resumable by `resourceVersion` (410 when too old); WatchList
//!   (`sendInitialEvents=true`) ends its initial events with the `k8s.io/initial-events-end`
//!   BOOKMARK.
//! - Writes: `dryRun=All` never persists; `fieldValidation` (`Strict` 400, `Warn` the
//!   default with `Warning` headers, `Ignore`) over the unknown fields pruned from custom
//!   resources with structural schemas ([`crd`]); the status subresource is respected
//!   (main-resource writes keep `status`, `/status` writes change only `status`); PUT
//!   checks `resourceVersion`.
//! - Server-side apply with `managedFields` ([`fields`]): ownership per manager and
//!   operation, 409 conflicts with the field manager's message and `FieldManagerConflict`
//!   causes, `force=true` takes ownership, fields a manager stops applying (and nobody else
//!   owns) are removed. PUT / merge / JSON patches record an `Update` manager
//!   (`fieldManager`, else the user agent up to its `/`); the simulated controllers write
//!   as `hypershift-operator` (status changes as its `status` subresource entry).
//! - DELETE: `preconditions.uid` / `resourceVersion` (409 `Precondition failed: ...`),
//!   finalizers + `deletionTimestamp`; an immediate delete answers the deleted object for
//!   Services and Namespaces and a `Status` `Success` for the other kinds
//!   (`genericregistry.Store.ReturnDeletedObject`, see [`api`]).
//! - kubectl: `/openapi/v2`, `/openapi/v3` and its group-version documents from the CRD
//!   schemas and minimal built-in schemas (`kubectl explain`, `--validate=strict`);
//!   `shortNames` / `categories` in discovery; protobuf bodies of the built-in kinds kubectl
//!   creates are decoded ([`proto`]), others answered 415; responses are always JSON (every
//!   client lists `application/json` in `Accept`).
//!
//! Errors are `Status` bodies (404 NotFound, 409 AlreadyExists / Conflict, 422 Invalid,
//! ...).
//!
//! # Caveats (kept on purpose)
//! - Strategic merge patch is a JSON merge patch: no built-in kind here is patched by our
//!   client with list-merge directives, and kubectl's client-side apply of the HyperShift
//!   kinds uses merge patches anyway (custom resources have no strategic merge).
//! - Built-in kinds have no schemas, so their lists are atomic in server-side apply except
//!   the keyed lists [`fields`] names (containers, env, ports, volumes, finalizers, owner
//!   references); `Update` entries do not mark maps with `.` (structs and maps cannot be
//!   told apart without a schema). Ownership itself is exact.
//! - No admission, no defaulting beyond what is listed in [`api`], no CEL
//!   (`x-kubernetes-validations`), no protobuf responses, no CBOR (415, which client-go
//!   takes as the signal to fall back to JSON for CBOR).

mod api;
pub(crate) mod crd;
pub(crate) mod fields;
mod openapi;
mod proto;
pub(crate) mod store;
mod watch;

use axum::http::Method;
use axum::response::Response;
use serde_json::{Value, json};

use crate::http::{ErrorCode, Req, json as json_resp};
use crate::sim::{InventoryItem, Simulator, lock};
use crate::state::State;

/// A kind the simulated API server serves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Writes to the object ignore `status`; `/status` writes only change `status`.
    pub status_sub: bool,
}

impl Kind {
    /// `<group>/<plural>`, `core` for the core group.
    pub(crate) fn key(&self) -> String {
        format!(
            "{}/{}",
            if self.group.is_empty() {
                "core"
            } else {
                self.group
            },
            self.plural
        )
    }
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// Path of an object, used as its inventory id.
    pub(crate) fn object_path(&self, ns: &str, name: &str) -> String {
        let base = if self.group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced {
            format!("{base}/namespaces/{ns}/{}/{name}", self.plural)
        } else {
            format!("{base}/{}/{name}", self.plural)
        }
    }
}

pub(crate) const HYPERSHIFT: &str = "hypershift.openshift.io";

pub(crate) static KINDS: &[Kind] = &[
    Kind {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        status_sub: true,
    },
    Kind {
        group: "",
        version: "v1",
        plural: "secrets",
        kind: "Secret",
        namespaced: true,
        status_sub: false,
    },
    Kind {
        group: "",
        version: "v1",
        plural: "services",
        kind: "Service",
        namespaced: true,
        status_sub: true,
    },
    Kind {
        group: "",
        version: "v1",
        plural: "configmaps",
        kind: "ConfigMap",
        namespaced: true,
        status_sub: false,
    },
    Kind {
        group: HYPERSHIFT,
        version: "v1beta1",
        plural: "hostedclusters",
        kind: "HostedCluster",
        namespaced: true,
        status_sub: true,
    },
    Kind {
        group: HYPERSHIFT,
        version: "v1beta1",
        plural: "nodepools",
        kind: "NodePool",
        namespaced: true,
        status_sub: true,
    },
    Kind {
        group: HYPERSHIFT,
        version: "v1beta1",
        plural: "azureprivatelinkservices",
        kind: "AzurePrivateLinkService",
        namespaced: true,
        status_sub: true,
    },
    // The HyperShift operator's own Deployment (`hypershift/operator`), whose args say how
    // it was installed (`--private-platform`).
    Kind {
        group: APPS,
        version: "v1",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
        status_sub: true,
    },
    // OpenShift's Route API: served only when the management cluster is OpenShift
    // (`SimConfig::management_platform`); HyperShift's control-plane operator starts its
    // private-link controllers only when it is (`setupPrivatePlatformControllers`).
    Kind {
        group: ROUTE,
        version: "v1",
        plural: "routes",
        kind: "Route",
        namespaced: true,
        status_sub: true,
    },
    // The Secrets Store CSI driver's SecretProviderClass: served only while the driver (AKS's
    // Key Vault Secrets Provider add-on) is installed (`crate::aks`); HyperShift makes one
    // per ARO HCP control-plane component (`crate::aro_hcp`).
    Kind {
        group: crate::aks::SPC_GROUP,
        version: "v1",
        plural: "secretproviderclasses",
        kind: "SecretProviderClass",
        namespaced: true,
        status_sub: true,
    },
    // Built in: AKS's workload identity webhook is one (`crate::aks`).
    Kind {
        group: ADMISSION,
        version: "v1",
        plural: "mutatingwebhookconfigurations",
        kind: "MutatingWebhookConfiguration",
        namespaced: false,
        status_sub: false,
    },
    // Built in: kubelet's events, e.g. a control-plane pod's `FailedMount` (`crate::aro_hcp`).
    Kind {
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        status_sub: false,
    },
];

pub(crate) const APPS: &str = "apps";
pub(crate) const ROUTE: &str = "route.openshift.io";
pub(crate) const ADMISSION: &str = "admissionregistration.k8s.io";

/// Whether this simulator serves `group` (the Route API only on an OpenShift management
/// cluster, SecretProviderClasses only with AKS's Key Vault Secrets Provider add-on).
fn group_served(sim: &Simulator, group: &str) -> bool {
    match group {
        ROUTE => crate::aks::routes_served(sim),
        crate::aks::SPC_GROUP => crate::aks::csi_driver_installed(sim),
        _ => true,
    }
}

/// The version served for a group.
pub(crate) fn served_version(group: &str) -> &'static str {
    KINDS
        .iter()
        .find(|k| k.group == group)
        .map(|k| k.version)
        .unwrap_or("v1")
}

pub(crate) fn kind_by_key(key: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.key() == key)
}

/// What a Kubernetes path addresses.
#[derive(Debug, Clone)]
pub(crate) enum KTarget {
    Discovery(Value),
    Collection {
        kind: &'static Kind,
        ns: Option<String>,
    },
    Object {
        kind: &'static Kind,
        ns: String,
        name: String,
        status: bool,
    },
}

fn find_kind(group: &str, version: &str, plural: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

pub(crate) fn parse(segs: &[String]) -> Option<KTarget> {
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (group, version, rest): (&str, &str, &[&str]) = match s.as_slice() {
        ["version"] => {
            return Some(KTarget::Discovery(json!({
                "major": "1", "minor": "31", "gitVersion": "v1.31.0-hcp-simulator", "platform": "linux/amd64",
                "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
                "buildDate": "2024-01-01T00:00:00Z", "goVersion": "go1.22", "compiler": "gc",
            })));
        }
        ["api"] => {
            return Some(KTarget::Discovery(
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
            ));
        }
        ["apis"] => {
            let mut groups: Vec<Value> = Vec::new();
            for k in KINDS.iter().filter(|k| !k.group.is_empty()) {
                if groups.iter().any(|g| g["name"] == k.group) {
                    continue;
                }
                let gv = format!("{}/{}", k.group, k.version);
                groups.push(json!({
                    "name": k.group,
                    "versions": [{"groupVersion": gv, "version": k.version}],
                    "preferredVersion": {"groupVersion": gv, "version": k.version},
                }));
            }
            return Some(KTarget::Discovery(json!({
                "kind": "APIGroupList", "apiVersion": "v1", "groups": groups,
            })));
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let kinds: Vec<&Kind> = KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let ns_of = |ns: &str| Some(ns.to_string());
    match rest {
        [] => Some(KTarget::Discovery(resource_list(group, version, &kinds))),
        ["namespaces", ns, plural] if *plural != "status" && *plural != "finalize" => {
            Some(KTarget::Collection {
                kind: find_kind(group, version, plural)?,
                ns: ns_of(ns),
            })
        }
        ["namespaces", ns, plural, name] => Some(KTarget::Object {
            kind: find_kind(group, version, plural)?,
            ns: (*ns).to_string(),
            name: (*name).to_string(),
            status: false,
        }),
        ["namespaces", ns, plural, name, "status"] => Some(KTarget::Object {
            kind: find_kind(group, version, plural)?,
            ns: (*ns).to_string(),
            name: (*name).to_string(),
            status: true,
        }),
        [plural] => Some(KTarget::Collection {
            kind: find_kind(group, version, plural)?,
            ns: None,
        }),
        [plural, name] => {
            let kind = find_kind(group, version, plural).filter(|k| !k.namespaced)?;
            Some(KTarget::Object {
                kind,
                ns: String::new(),
                name: (*name).to_string(),
                status: false,
            })
        }
        [plural, name, "status"] => {
            let kind = find_kind(group, version, plural).filter(|k| !k.namespaced)?;
            Some(KTarget::Object {
                kind,
                ns: String::new(),
                name: (*name).to_string(),
                status: true,
            })
        }
        _ => None,
    }
}

fn resource_list(group: &str, version: &str, kinds: &[&Kind]) -> Value {
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources = Vec::new();
    for k in kinds {
        let verbs = json!([
            "create", "delete", "get", "list", "patch", "update", "watch"
        ]);
        resources.push(json!({"name": k.plural, "singularName": k.kind.to_ascii_lowercase(), "namespaced": k.namespaced, "kind": k.kind, "verbs": verbs}));
        if k.status_sub {
            resources.push(json!({"name": format!("{}/status", k.plural), "singularName": "", "namespaced": k.namespaced, "kind": k.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

/// The `<group>/<plural>` a request addresses (for fault matching).
pub(crate) fn classify_type(req: &Req) -> Option<String> {
    match parse(&req.segments)? {
        KTarget::Collection { kind, .. } | KTarget::Object { kind, .. } => Some(kind.key()),
        KTarget::Discovery(_) => None,
    }
}

pub(crate) async fn handle(sim: &Simulator, req: &Req) -> Response {
    // The Secrets Store CSI driver's CRD on AKS.
    if let Some(resp) = crate::aks::handle_kube(sim, req) {
        return resp;
    }
    // SelfSubjectReview, SelfSubjectAccessReview, HyperShift CRDs.
    if let Some(resp) = crate::preflight::handle_kube(sim, req) {
        return resp;
    }
    if let Some(resp) = openapi::handle(sim, req) {
        return resp;
    }
    // kubectl's typed clients send built-in kinds as protobuf (and accept JSON back);
    // client-go does not fall back to JSON on 415 for protobuf, so the kinds kubectl
    // creates that way are decoded ([`proto`]); anything else is answered 415.
    if let Some(ct) = req.header("content-type") {
        let ct = ct.split(';').next().unwrap_or_default().trim();
        if ct == "application/vnd.kubernetes.protobuf" || ct == "application/cbor" {
            let Some(v) = (ct != "application/cbor")
                .then(|| proto::decode(&req.body))
                .flatten()
            else {
                return status_response(
                    415,
                    "UnsupportedMediaType",
                    &format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct})"
                    ),
                );
            };
            let mut headers = req.headers.clone();
            headers.insert(
                "content-type",
                axum::http::HeaderValue::from_static("application/json"),
            );
            let json_req = Req {
                method: req.method.clone(),
                path: req.path.clone(),
                path_and_query: req.path_and_query.clone(),
                segments: req.segments.clone(),
                query: req.query.clone(),
                headers,
                body: v.to_string().into(),
                host: req.host.clone(),
            };
            return Box::pin(handle(sim, &json_req)).await;
        }
    }
    let target = parse(&req.segments).and_then(|t| match t {
        KTarget::Collection { kind, .. } | KTarget::Object { kind, .. }
            if !group_served(sim, kind.group) =>
        {
            None
        }
        KTarget::Discovery(mut v) => {
            if let Some(resources) = v.get_mut("resources").and_then(Value::as_array_mut) {
                for r in resources.iter_mut() {
                    let plural = r["name"].as_str().unwrap_or_default().to_string();
                    let kind = KINDS
                        .iter()
                        .find(|k| k.plural == plural && r["kind"].as_str() == Some(k.kind));
                    if let Some(k) = kind {
                        let (short, cats) = openapi::names(sim, k);
                        if !short.is_empty() {
                            r["shortNames"] = json!(short);
                        }
                        if !cats.is_empty() {
                            r["categories"] = json!(cats);
                        }
                    }
                }
            }
            if let Some(groups) = v.get_mut("groups").and_then(Value::as_array_mut) {
                groups.retain(|g| g["name"].as_str().is_none_or(|n| group_served(sim, n)));
            }
            let hidden = v["groupVersion"]
                .as_str()
                .and_then(|gv| gv.split_once('/'))
                .is_some_and(|(g, _)| !group_served(sim, g));
            (!hidden).then_some(KTarget::Discovery(v))
        }
        t => Some(t),
    });
    let Some(target) = target else {
        return status_response(
            404,
            "NotFound",
            &format!(
                "the server could not find the requested resource ({})",
                req.path
            ),
        );
    };
    match (&req.method, target) {
        (&Method::GET, KTarget::Discovery(v)) => json_resp(200, &v),
        (&Method::GET, KTarget::Collection { kind, ns }) => {
            let watch = matches!(req.q("watch"), Some("true") | Some("1"));
            if watch {
                watch::watch(sim, req, kind, ns)
            } else {
                api::list(sim, req, kind, ns.as_deref())
            }
        }
        (&Method::POST, KTarget::Collection { kind, ns }) => {
            api::create(sim, req, kind, ns.as_deref().unwrap_or_default())
        }
        (&Method::GET, KTarget::Object { kind, ns, name, .. }) => {
            api::get(sim, req, kind, &ns, &name)
        }
        (
            &Method::PUT,
            KTarget::Object {
                kind,
                ns,
                name,
                status,
            },
        ) => api::replace(sim, req, kind, &ns, &name, status),
        (
            &Method::PATCH,
            KTarget::Object {
                kind,
                ns,
                name,
                status,
            },
        ) => api::patch(sim, req, kind, &ns, &name, status),
        (
            &Method::DELETE,
            KTarget::Object {
                kind,
                ns,
                name,
                status: false,
            },
        ) => api::delete(sim, req, kind, &ns, &name),
        (m, _) => status_response(
            405,
            "MethodNotAllowed",
            &format!("the server does not allow this method on the requested resource ({m})"),
        ),
    }
}

/// A `Status` error body.
pub(crate) fn status_response(code: u16, reason: &str, message: &str) -> Response {
    status_with_details(code, reason, message, Value::Null)
}

pub(crate) fn status_with_details(
    code: u16,
    reason: &str,
    message: &str,
    details: Value,
) -> Response {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    if !details.is_null() {
        body["details"] = details;
    }
    let mut resp = json_resp(code, &body);
    resp.extensions_mut().insert(ErrorCode(reason.to_string()));
    resp
}

/// Inventory entries of every Kubernetes object.
pub(crate) fn inventory(st: &State) -> Vec<InventoryItem> {
    st.kube
        .values()
        .filter_map(|e| {
            let kind = kind_by_key(&e.kind_key)?;
            Some(InventoryItem {
                id: kind.object_path(&e.namespace, &e.name),
                rtype: e.kind_key.clone(),
                name: e.name.clone(),
                tags: e
                    .object
                    .pointer("/metadata/labels")
                    .cloned()
                    .unwrap_or(json!({})),
                created_seq: e.created_seq,
            })
        })
        .collect()
}

/// Namespaces every cluster has, plus `hypershift` where the operator would run.
pub(crate) fn seed_namespaces(sim: &Simulator, st: &mut State, now: u64) {
    let Some(kind) = kind_by_key("core/namespaces") else {
        return;
    };
    for ns in ["default", "kube-system", "hypershift"] {
        let obj = json!({"metadata": {"name": ns}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        store::create(sim, st, now, kind, "", obj);
    }
    st.kube_history_floor = 0;
}

/// The HyperShift operator's Deployment `hypershift/operator`, with the args of this
/// simulator's install (`--private-platform=Azure` or none; as `hypershift install`
/// renders them: `hypershift-operator/.../install/assets` passes `--private-platform`).
/// Created at a fresh start, and brought in line with the configuration at every start
/// (a restarted simulator with other flags is a reinstalled operator).
pub(crate) fn seed_operator_deployment(sim: &Simulator, st: &mut State, now: u64) {
    let Some(kind) = kind_by_key("apps/deployments") else {
        return;
    };
    // On AKS the install names the cluster's Key Vault Secrets Provider identity, so the
    // cluster (and that identity) come first.
    crate::aks::seed(sim, st, now);
    let mut args = vec![
        "run".to_string(),
        "--namespace=$(MY_NAMESPACE)".to_string(),
        "--pod-name=$(MY_NAME)".to_string(),
        "--metrics-addr=:9000".to_string(),
    ];
    if sim.config().private_platform == crate::config::PrivatePlatform::Azure {
        args.push("--private-platform=Azure".to_string());
    }
    let mut container = json!({"name": "operator", "image": "quay.io/hypershift/hypershift-operator:4.22", "command": ["/usr/bin/hypershift-operator"], "args": args});
    // ARO HCP (`hypershift install --managed-service ARO-HCP --aro-hcp-key-vault-users-client-id`).
    if let Some(env) = crate::aks::operator_env(sim, st) {
        container["env"] = env;
    }
    let containers = json!([container]);
    match store::get(st, "apps/deployments", "hypershift", "operator").cloned() {
        Some(mut existing) => {
            if existing.pointer("/spec/template/spec/containers") != Some(&containers) {
                existing["spec"]["template"]["spec"]["containers"] = containers;
                store::update(sim, st, kind, "hypershift", existing);
            }
        }
        None => {
            let obj = json!({
                "metadata": {"name": "operator", "labels": {"app": "operator", "hypershift.openshift.io/operator-component": "operator"}},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "operator"}},
                    "template": {"metadata": {"labels": {"app": "operator"}}, "spec": {"containers": containers}},
                },
                "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1},
            });
            store::create(sim, st, now, kind, "hypershift", obj);
        }
    }
}

/// Finishes namespace deletions: objects inside are deleted (honouring their finalizers)
/// and the namespace goes once it is empty.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let Some(ns_kind) = kind_by_key("core/namespaces") else {
        return false;
    };
    let terminating: Vec<String> = st
        .kube
        .values()
        .filter(|e| e.kind_key == "core/namespaces" && store::is_deleting(&e.object))
        .map(|e| e.name.clone())
        .collect();
    let mut changed = false;
    for ns in terminating {
        let inside: Vec<(String, String)> = st
            .kube
            .values()
            .filter(|e| e.namespace == ns)
            .map(|e| (e.kind_key.clone(), e.name.clone()))
            .collect();
        if inside.is_empty() {
            store::remove(sim, st, &ns_kind.key(), "", &ns);
            changed = true;
            continue;
        }
        for (kk, name) in inside {
            let Some(kind) = kind_by_key(&kk) else {
                continue;
            };
            let already = store::get(st, &kk, &ns, &name).is_some_and(store::is_deleting);
            if !already {
                store::delete(sim, st, now, kind, &ns, &name);
                changed = true;
            }
        }
    }
    changed
}

/// Locks the state for a Kubernetes request.
pub(crate) fn with_state<T>(sim: &Simulator, f: impl FnOnce(&mut State, u64) -> T) -> T {
    let now = sim.now_ms();
    let mut st = lock(&sim.inner.state);
    f(&mut st, now)
}
