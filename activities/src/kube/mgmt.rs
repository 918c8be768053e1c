//! [`Mgmt`]: the operations the steps perform on the management cluster.
//!
//! Every write is a server-side apply with field manager [`FIELD_MANAGER`], sending only
//! the fields we set, so we own exactly those and the HyperShift operator (finalizers,
//! status, `spec.clusterID`) owns the rest. Applying the same object again is a no-op.
//! Apply is never forced: a field-manager conflict means someone else changed a field we
//! set, and it is surfaced ([`super::ErrorClass::FieldConflict`]) rather than overwritten.
//!
//! Reads return what is there *now* and deletes return [`DeleteProgress`] instead of
//! waiting: a step that needs a condition or a deletion to finish returns a durable wait
//! and calls again.
//!
//! # Ownership rules
//! - An object is *ours* when it carries [`super::LABEL_CLUSTER`] and
//!   [`super::LABEL_INFRA_ID`]. [`Mgmt::delete`] refuses anything else with
//!   [`KubeError::NotOurs`].
//! - An apply whose labels name an owner refuses to overwrite an existing object of
//!   another owner (or none) with [`KubeError::NotOurs`], and keeps the existing object's
//!   [`super::LABEL_RUN`] instead of relabelling it with the current run. Moving an object
//!   to another run is a separate, explicit write: [`Mgmt::relabel_run`] (a JSON merge
//!   patch of that one label, so the fields we server-side apply keep their owner).
//! - [`Mgmt::apply_namespace`] never writes to a namespace that already exists unless it
//!   is ours: namespaces such as `clusters` are shared, and labelling one would make a
//!   later delete-cluster take it.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::{Secret as K8sSecret, Service};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::error::KubeError;
use super::{LABEL_CREATED_BY, LABEL_RUN, is_ours, same_owner};
use crate::secret::Secret;

/// The field manager of every server-side apply we send.
pub const FIELD_MANAGER: &str = "hcp-workflow";

/// HyperShift's API group and version.
const HYPERSHIFT_GROUP: &str = "hypershift.openshift.io";
const HYPERSHIFT_VERSION: &str = "v1beta1";

/// The kinds the workflows touch.
///
/// Serialized as the Kubernetes kind name (`"HostedCluster"`); it appears in journaled
/// step inputs, so the names are an API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// `v1` Namespace (cluster-scoped).
    Namespace,
    /// `v1` Secret.
    Secret,
    /// `v1` Service.
    Service,
    /// `hypershift.openshift.io/v1beta1` HostedCluster.
    HostedCluster,
    /// `hypershift.openshift.io/v1beta1` NodePool.
    NodePool,
}

impl Kind {
    /// The Kubernetes kind name.
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::Secret => "Secret",
            Kind::Service => "Service",
            Kind::HostedCluster => "HostedCluster",
            Kind::NodePool => "NodePool",
        }
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Namespace)
    }

    /// The kube-rs description of the kind (group, version, plural).
    pub fn api_resource(self) -> ApiResource {
        let (group, version, plural) = match self {
            Kind::Namespace => ("", "v1", "namespaces"),
            Kind::Secret => ("", "v1", "secrets"),
            Kind::Service => ("", "v1", "services"),
            Kind::HostedCluster => (HYPERSHIFT_GROUP, HYPERSHIFT_VERSION, "hostedclusters"),
            Kind::NodePool => (HYPERSHIFT_GROUP, HYPERSHIFT_VERSION, "nodepools"),
        };
        ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            },
            kind: self.type_name().to_string(),
            plural: plural.to_string(),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

/// A status condition (`status.conditions[]`), as HyperShift reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Condition {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason (`AsExpected`, `WaitingForControlPlane`, ...).
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
    /// RFC 3339 time of the last status change.
    pub last_transition_time: Option<String>,
    /// The object generation the condition was computed for.
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// What a delete call found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeleteProgress {
    /// The object does not exist (any more).
    Gone,
    /// Deletion was requested (now or earlier) and the object still exists, held by these
    /// finalizers (for a Namespace, its `metadata.finalizers` then `spec.finalizers`).
    Deleting {
        /// Finalizers still present.
        finalizers: Vec<String>,
    },
}

/// What an apply left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion` after the apply.
    pub resource_version: Option<String>,
    /// `metadata.generation` after the apply (bumped only when `spec` changed).
    pub generation: Option<i64>,
    /// Whether an apply request was sent (false: an existing namespace left untouched).
    pub written: bool,
}

impl Applied {
    fn from_meta(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        Applied {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            generation: meta.generation,
            written: true,
        }
    }
}

/// The management cluster, as the steps use it. Cheap to clone (shares the client).
#[derive(Clone)]
pub struct Mgmt {
    client: kube::Client,
}

impl fmt::Debug for Mgmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mgmt")
            .field("default_namespace", &self.client.default_namespace())
            .finish()
    }
}

fn describe(kind: Kind, ns: &str, name: &str) -> String {
    if kind.namespaced() {
        format!("{kind} {ns}/{name}")
    } else {
        format!("{kind} {name}")
    }
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn found_labels(labels: &BTreeMap<String, String>) -> String {
    match (
        labels.get(super::LABEL_CLUSTER),
        labels.get(super::LABEL_INFRA_ID),
    ) {
        (None, None) => "are missing".to_string(),
        (c, i) => format!(
            "say cluster={} infra-id={}",
            c.map_or("<none>", String::as_str),
            i.map_or("<none>", String::as_str)
        ),
    }
}

fn finalizers_of(obj: &DynamicObject) -> Vec<String> {
    let mut f = obj.metadata.finalizers.clone().unwrap_or_default();
    if let Some(spec) = obj
        .data
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
    {
        f.extend(spec.iter().filter_map(Value::as_str).map(str::to_string));
    }
    f
}

impl Mgmt {
    /// Wraps a client (see [`super::client`]).
    pub fn new(client: kube::Client) -> Self {
        Mgmt { client }
    }

    /// The underlying kube-rs client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn api(&self, kind: Kind, ns: &str) -> Api<DynamicObject> {
        let ar = kind.api_resource();
        if kind.namespaced() {
            Api::namespaced_with(self.client.clone(), ns, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        }
    }

    /// The object, if it exists.
    ///
    /// # Errors
    /// Transport and API errors other than 404.
    pub async fn get(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
    ) -> Result<Option<DynamicObject>, KubeError> {
        self.api(kind, ns)
            .get_opt(name)
            .await
            .map_err(|e| KubeError::from_kube("get", &describe(kind, ns, name), e))
    }

    /// The object's labels, or `None` when it does not exist.
    ///
    /// # Errors
    /// Transport and API errors other than 404.
    pub async fn labels(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, KubeError> {
        Ok(self
            .get(kind, ns, name)
            .await?
            .map(|o| o.metadata.labels.unwrap_or_default()))
    }

    /// Checks an apply whose labels are `desired` against what exists: refuses a
    /// terminating object and (when `desired` names an owner) another owner's object, and
    /// keeps the existing run label.
    async fn guard(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        desired: &mut BTreeMap<String, String>,
    ) -> Result<Option<DynamicObject>, KubeError> {
        let Some(existing) = self.get(kind, ns, name).await? else {
            // Created by this apply: the creating run is named for good.
            if is_ours(desired)
                && let Some(run) = desired.get(LABEL_RUN).cloned()
            {
                desired.insert(LABEL_CREATED_BY.to_string(), run);
            }
            return Ok(None);
        };
        let resource = describe(kind, ns, name);
        if existing.metadata.deletion_timestamp.is_some() {
            return Err(KubeError::Terminating { resource });
        }
        if is_ours(desired) {
            let have = existing.metadata.labels.clone().unwrap_or_default();
            if !same_owner(&have, desired) {
                return Err(KubeError::NotOurs {
                    resource,
                    action: "overwrite",
                    found: found_labels(&have),
                });
            }
            if let Some(run) = have.get(LABEL_RUN) {
                desired.insert(LABEL_RUN.to_string(), run.clone());
            }
            // The creator stays as it is (absent on objects of older binaries); a later
            // apply by the same field manager that left it out would remove it.
            desired.remove(LABEL_CREATED_BY);
            if let Some(creator) = have.get(LABEL_CREATED_BY) {
                desired.insert(LABEL_CREATED_BY.to_string(), creator.clone());
            }
        }
        Ok(Some(existing))
    }

    async fn apply_value(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        body: &Value,
    ) -> Result<Applied, KubeError> {
        self.apply_value_with(kind, ns, name, body, false).await
    }

    /// A server-side apply; `force` takes over fields another manager set (repair).
    async fn apply_value_with(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        body: &Value,
        force: bool,
    ) -> Result<Applied, KubeError> {
        let mut params = PatchParams::apply(FIELD_MANAGER);
        if force {
            params = params.force();
        }
        let applied = self
            .api(kind, ns)
            .patch(name, &params, &Patch::Apply(body))
            .await
            .map_err(|e| KubeError::from_kube("apply", &describe(kind, ns, name), e))?;
        Ok(Applied::from_meta(&applied.metadata))
    }

    /// Ensures namespace `name` exists. A missing namespace is created (server-side apply)
    /// with `labels`; an existing one is written only when it is ours (same owner as
    /// `labels`), so a shared namespace is never claimed.
    ///
    /// # Errors
    /// [`KubeError::Terminating`] while the namespace is being deleted (retryable), API
    /// and transport errors.
    pub async fn apply_namespace(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Applied, KubeError> {
        let kind = Kind::Namespace;
        if let Some(existing) = self.get(kind, "", name).await? {
            if existing.metadata.deletion_timestamp.is_some() {
                return Err(KubeError::Terminating {
                    resource: describe(kind, "", name),
                });
            }
            let have = existing.metadata.labels.clone().unwrap_or_default();
            if labels.is_empty() || !same_owner(&have, labels) {
                return Ok(Applied {
                    written: false,
                    ..Applied::from_meta(&existing.metadata)
                });
            }
        }
        let mut labels = labels.clone();
        self.guard(kind, "", name, &mut labels).await?;
        let body = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        });
        self.apply_value(kind, "", name, &body).await
    }

    /// Server-side applies Secret `ns/name` with exactly `data` (values are never logged
    /// or put into errors) and `labels`. The type is left to the server (`Opaque`), as
    /// HyperShift's CLI does.
    ///
    /// # Errors
    /// [`KubeError::NotOurs`] when the Secret exists with another owner, API and
    /// transport errors.
    pub async fn apply_secret(
        &self,
        ns: &str,
        name: &str,
        data: BTreeMap<String, Secret<Vec<u8>>>,
        labels: &BTreeMap<String, String>,
    ) -> Result<Applied, KubeError> {
        let kind = Kind::Secret;
        let mut labels = labels.clone();
        self.guard(kind, ns, name, &mut labels).await?;
        let encoded: Map<String, Value> = data
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(STANDARD.encode(v.expose()))))
            .collect();
        let body = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": encoded,
        });
        self.apply_value(kind, ns, name, &body).await
    }

    /// The bytes under `key` in Secret `ns/name`; `None` when the Secret or the key is
    /// missing.
    ///
    /// # Errors
    /// API and transport errors other than 404.
    pub async fn get_secret_data(
        &self,
        ns: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<Secret<Vec<u8>>>, KubeError> {
        let api: Api<K8sSecret> = Api::namespaced(self.client.clone(), ns);
        let secret = api
            .get_opt(name)
            .await
            .map_err(|e| KubeError::from_kube("get", &describe(Kind::Secret, ns, name), e))?;
        Ok(secret
            .and_then(|mut s| s.data.as_mut().and_then(|d| d.remove(key)))
            .map(|b| Secret::new(b.0)))
    }

    /// Server-side applies a rendered object (see [`super::render`]) of `kind` into `ns`.
    async fn apply_rendered(
        &self,
        kind: Kind,
        ns: &str,
        obj: &Value,
        force: bool,
    ) -> Result<Applied, KubeError> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| KubeError::Invalid {
                resource: format!("{kind} in {ns}"),
                message: "the object has no metadata.name".into(),
            })?
            .to_string();
        let resource = describe(kind, ns, &name);
        let ar = kind.api_resource();
        let mut body = obj.clone();
        let Some(root) = body.as_object_mut() else {
            return Err(KubeError::Invalid {
                resource,
                message: "the object is not a JSON object".into(),
            });
        };
        for (field, want) in [("apiVersion", &ar.api_version), ("kind", &ar.kind)] {
            match root.get(field).and_then(Value::as_str) {
                None => {
                    root.insert(field.to_string(), Value::String(want.clone()));
                }
                Some(have) if have != want => {
                    return Err(KubeError::Invalid {
                        resource,
                        message: format!("{field} is {have:?}, expected {want:?}"),
                    });
                }
                Some(_) => {}
            }
        }
        let meta = root
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or_else(|| KubeError::Invalid {
                resource: resource.clone(),
                message: "metadata is not an object".into(),
            })?;
        match meta.get("namespace").and_then(Value::as_str) {
            Some(have) if have != ns => {
                return Err(KubeError::Invalid {
                    resource,
                    message: format!("metadata.namespace is {have:?}, but it is applied to {ns:?}"),
                });
            }
            _ => {
                meta.insert("namespace".into(), Value::String(ns.to_string()));
            }
        }
        let mut labels = labels_of(obj);
        self.guard(kind, ns, &name, &mut labels).await?;
        if !labels.is_empty() {
            meta.insert("labels".into(), json!(labels));
        }
        self.apply_value_with(kind, ns, &name, &body, force).await
    }

    /// Server-side applies a HostedCluster (from [`super::render::hosted_cluster`]).
    ///
    /// # Errors
    /// [`KubeError::Invalid`] for a malformed object, [`KubeError::NotOurs`] when a
    /// HostedCluster of that name exists with another owner, a 422 API error when the CRD
    /// refuses it (permanent, with the API server's message), transport errors.
    pub async fn apply_hosted_cluster(&self, ns: &str, obj: &Value) -> Result<Applied, KubeError> {
        self.apply_rendered(Kind::HostedCluster, ns, obj, false)
            .await
    }

    /// Server-side applies a NodePool (from [`super::render::node_pool`]).
    ///
    /// # Errors
    /// As [`Mgmt::apply_hosted_cluster`].
    pub async fn apply_node_pool(&self, ns: &str, obj: &Value) -> Result<Applied, KubeError> {
        self.apply_rendered(Kind::NodePool, ns, obj, false).await
    }

    /// [`Mgmt::apply_node_pool`] taking back the fields another manager changed (a size
    /// changed by hand), for repair-cluster: the object must still be ours (labels).
    ///
    /// # Errors
    /// As [`Mgmt::apply_hosted_cluster`].
    pub async fn reapply_node_pool(&self, ns: &str, obj: &Value) -> Result<Applied, KubeError> {
        self.apply_rendered(Kind::NodePool, ns, obj, true).await
    }

    /// Condition `ctype` of `kind ns/name`; `Ok(None)` when the object has no such
    /// condition yet.
    ///
    /// # Errors
    /// [`KubeError::NotFound`] when the object does not exist (permanent: a step waiting
    /// on a condition of an object that vanished cannot succeed), API and transport errors.
    pub async fn condition(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        ctype: &str,
    ) -> Result<Option<Condition>, KubeError> {
        let obj = self
            .get(kind, ns, name)
            .await?
            .ok_or_else(|| KubeError::NotFound {
                resource: describe(kind, ns, name),
            })?;
        let s = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(obj
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|conds| {
                conds
                    .iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
            })
            .map(|c| Condition {
                status: s(c, "status").unwrap_or_else(|| "Unknown".to_string()),
                reason: s(c, "reason"),
                message: s(c, "message"),
                last_transition_time: s(c, "lastTransitionTime"),
                observed_generation: c.get("observedGeneration").and_then(Value::as_i64),
            }))
    }

    /// `status.loadBalancer.ingress[0].ip` of Service `ns/name` (for HyperShift's
    /// [`super::PRIVATE_ROUTER`] in [`super::control_plane_namespace`]); `None` while the
    /// Service or its IP does not exist yet.
    ///
    /// # Errors
    /// API and transport errors other than 404.
    pub async fn service_lb_ip(&self, ns: &str, name: &str) -> Result<Option<String>, KubeError> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), ns);
        let svc = api
            .get_opt(name)
            .await
            .map_err(|e| KubeError::from_kube("get", &describe(Kind::Service, ns, name), e))?;
        Ok(svc
            .and_then(|s| s.status)
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .and_then(|ingress| ingress.into_iter().next())
            .and_then(|i| i.ip)
            .filter(|ip| !ip.is_empty()))
    }

    /// Sets annotation `key` of Service `ns/name` — a Service of HyperShift's, not ours — to
    /// `value`: one merge patch of that annotation alone (RFC 7386), nothing else of the
    /// object touched. It exists to make a controller that watches only that Service look
    /// again (HyperShift's private-link observer). Returns whether the Service exists.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn nudge_service(
        &self,
        ns: &str,
        name: &str,
        key: &str,
        value: &str,
    ) -> Result<bool, KubeError> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"metadata": {"annotations": {key: value}}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
            Err(e) => Err(KubeError::from_kube(
                "annotate",
                &describe(Kind::Service, ns, name),
                e,
            )),
        }
    }

    /// Sets the [`LABEL_RUN`] label of `kind ns/name` to `run`: ownership of an object of
    /// ours moves to the run that adopted it, so an earlier run's undo (which deletes only
    /// objects labelled with its own run) leaves it.
    ///
    /// A JSON merge patch of that one label (RFC 7386; the Kubernetes API conventions'
    /// `application/merge-patch+json`), carrying the `resourceVersion` just read, so an
    /// object changed or recreated in between is not touched (409 Conflict, retryable).
    /// Not a server-side apply: applying only the label as [`FIELD_MANAGER`] would remove
    /// the fields that manager applied before. Returns `None` when the object does not
    /// exist; `written: false` when it already carries `run`.
    ///
    /// # Errors
    /// [`KubeError::NotOurs`] when the object lacks our ownership labels
    /// ([`super::is_ours`]); [`KubeError::Terminating`] while it is being deleted; API and
    /// transport errors.
    pub async fn relabel_run(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        run: &str,
    ) -> Result<Option<Applied>, KubeError> {
        self.patch_ours_metadata(kind, ns, name, "relabel", "labels", LABEL_RUN, run)
            .await
    }

    /// Sets annotation `key: value` on `kind ns/name` if it is ours, like
    /// [`Self::relabel_run`] (a merge patch carrying the `resourceVersion` just read; only
    /// objects with our ownership labels). Unlike a relabel it is also written while the
    /// object is being deleted: HyperShift reads `cleanup-cloud-resources` during deletion
    /// (`hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`
    /// propagates it to the HostedControlPlane then). Returns `None` when the object does
    /// not exist; `written: false` when it already carries the value.
    ///
    /// # Errors
    /// [`KubeError::NotOurs`] when the object lacks our ownership labels; API and transport
    /// errors.
    pub async fn annotate(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<Applied>, KubeError> {
        self.patch_ours_metadata(kind, ns, name, "annotate", "annotations", key, value)
            .await
    }

    /// Merge patch (RFC 7386) `patch` on `kind ns/name` if it is ours and not being
    /// deleted, carrying the `resourceVersion` just read (a concurrent writer makes it a
    /// 409, retried). For day-2 changes of fields a create applied (`update-cluster`): a
    /// server-side apply of only the changed fields would drop every other field
    /// `hcp-workflow` applied. Returns `None` when the object does not exist.
    ///
    /// # Errors
    /// [`KubeError::NotOurs`], [`KubeError::Terminating`], API (a 422 names what the CRD
    /// refused) and transport errors.
    pub async fn patch_ours(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Option<Applied>, KubeError> {
        let resource = describe(kind, ns, name);
        let Some(obj) = self.get_ours(kind, ns, name, "patch").await? else {
            return Ok(None);
        };
        if obj.metadata.deletion_timestamp.is_some() {
            return Err(KubeError::Terminating { resource });
        }
        let mut body = patch.clone();
        if let Some(m) = body.as_object_mut() {
            let meta = m.entry("metadata").or_insert_with(|| json!({}));
            meta["resourceVersion"] = json!(obj.metadata.resource_version);
        }
        self.merge_patch(kind, ns, name, "patch", &body)
            .await
            .map(Some)
    }

    /// `kind ns/name` if it exists, refused ([`KubeError::NotOurs`], naming `action`) when
    /// it lacks our ownership labels.
    async fn get_ours(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        action: &'static str,
    ) -> Result<Option<DynamicObject>, KubeError> {
        let Some(obj) = self.get(kind, ns, name).await? else {
            return Ok(None);
        };
        let labels = obj.metadata.labels.clone().unwrap_or_default();
        if !is_ours(&labels) {
            return Err(KubeError::NotOurs {
                resource: describe(kind, ns, name),
                action,
                found: found_labels(&labels),
            });
        }
        Ok(Some(obj))
    }

    /// A merge patch as [`FIELD_MANAGER`].
    async fn merge_patch(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        action: &'static str,
        body: &Value,
    ) -> Result<Applied, KubeError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let patched = self
            .api(kind, ns)
            .patch(name, &params, &Patch::Merge(body))
            .await
            .map_err(|e| KubeError::from_kube(action, &describe(kind, ns, name), e))?;
        Ok(Applied::from_meta(&patched.metadata))
    }

    /// One label or annotation (`field`) set by merge patch on an object of ours.
    #[allow(clippy::too_many_arguments)]
    async fn patch_ours_metadata(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        action: &'static str,
        field: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<Applied>, KubeError> {
        let resource = describe(kind, ns, name);
        let Some(obj) = self.get_ours(kind, ns, name, action).await? else {
            return Ok(None);
        };
        let current = if field == "labels" {
            obj.metadata.labels.as_ref()
        } else {
            obj.metadata.annotations.as_ref()
        };
        if current.and_then(|m| m.get(key)).map(String::as_str) == Some(value) {
            return Ok(Some(Applied {
                written: false,
                ..Applied::from_meta(&obj.metadata)
            }));
        }
        // A relabel of a terminating object would adopt what is going away.
        if field == "labels" && obj.metadata.deletion_timestamp.is_some() {
            return Err(KubeError::Terminating { resource });
        }
        let body = json!({"metadata": {
            "resourceVersion": obj.metadata.resource_version,
            field: {key: value},
        }});
        self.merge_patch(kind, ns, name, action, &body)
            .await
            .map(Some)
    }

    /// Requests deletion of `kind ns/name` if it is ours, and reports progress without
    /// waiting: [`DeleteProgress::Gone`] when it does not exist (also after a 404 on
    /// delete), [`DeleteProgress::Deleting`] while finalizers hold it. Calling again
    /// while it is deleting only reads it.
    ///
    /// The delete carries a `uid` precondition, so an object recreated under the same name
    /// between our read and our delete is not touched (409, retryable: the next call
    /// re-checks ownership).
    ///
    /// # Errors
    /// [`KubeError::NotOurs`] when the object lacks our ownership labels ([`super::is_ours`]),
    /// API and transport errors.
    pub async fn delete(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
    ) -> Result<DeleteProgress, KubeError> {
        let resource = describe(kind, ns, name);
        let Some(obj) = self.get(kind, ns, name).await? else {
            return Ok(DeleteProgress::Gone);
        };
        let labels = obj.metadata.labels.clone().unwrap_or_default();
        if !is_ours(&labels) {
            return Err(KubeError::NotOurs {
                resource,
                action: "delete",
                found: found_labels(&labels),
            });
        }
        if obj.metadata.deletion_timestamp.is_some() {
            return Ok(DeleteProgress::Deleting {
                finalizers: finalizers_of(&obj),
            });
        }
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: obj.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.api(kind, ns).delete(name, &dp).await {
            // A Status answer means the object is gone.
            Ok(answer) if answer.is_right() => return Ok(DeleteProgress::Gone),
            // An object answer: gone or held by finalizers; look again to know which.
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(DeleteProgress::Gone),
            Err(e) => return Err(KubeError::from_kube("delete", &resource, e)),
        }
        Ok(match self.get(kind, ns, name).await? {
            None => DeleteProgress::Gone,
            Some(o) => DeleteProgress::Deleting {
                finalizers: finalizers_of(&o),
            },
        })
    }

    /// Waits until `kind ns/name` does not exist, watching it, for at most `timeout`.
    ///
    /// For tests and tools only: steps must not wait in memory (return a durable wait and
    /// call [`Mgmt::delete`] again instead).
    ///
    /// # Errors
    /// [`KubeError::Timeout`] after `timeout`, [`KubeError::Watch`] when the watch fails.
    pub async fn wait_deleted(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        timeout: Duration,
    ) -> Result<(), KubeError> {
        let resource = describe(kind, ns, name);
        // kube-runtime's await_condition has no timeout of its own (it says so).
        let wait = kube::runtime::wait::await_condition(
            self.api(kind, ns),
            name,
            |o: Option<&DynamicObject>| o.is_none(),
        );
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(KubeError::Watch {
                resource,
                message: e.to_string(),
            }),
            Err(_) => Err(KubeError::Timeout {
                what: format!("{resource} to be deleted"),
                after: timeout,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_their_resources() {
        let hc = Kind::HostedCluster.api_resource();
        assert_eq!(hc.api_version, "hypershift.openshift.io/v1beta1");
        assert_eq!(hc.plural, "hostedclusters");
        assert_eq!(Kind::NodePool.api_resource().plural, "nodepools");
        assert_eq!(Kind::Secret.api_resource().api_version, "v1");
        assert!(!Kind::Namespace.namespaced());
        assert_eq!(
            serde_json::to_value(Kind::HostedCluster).ok(),
            Some(json!("HostedCluster"))
        );
    }

    #[test]
    fn namespace_finalizers_include_spec() {
        let mut o = DynamicObject::new("x", &Kind::Namespace.api_resource());
        o.metadata.finalizers = Some(vec!["a".into()]);
        o.data = json!({"spec": {"finalizers": ["kubernetes"]}});
        assert_eq!(
            finalizers_of(&o),
            vec!["a".to_string(), "kubernetes".to_string()]
        );
    }
}
