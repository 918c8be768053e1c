//! Management-cluster steps: the issuer key Secret, the control plane's Secrets, the
//! HostedCluster, the private-router wait, availability, and NodePools.
//!
//! Objects are written by server-side apply (field manager `hcp-workflow`) and labelled
//! with our ownership; undos delete only objects this run created, and wait for the
//! HyperShift finalizers durably (each look is one engine attempt, not a sleep loop).
//!
//! # Ownership across runs
//! Before writing, a step looks at each of its objects (`claim`):
//! - a missing one is journaled in the step's checkpoint ([`ObjectJournal`]) as created by
//!   this run, durably, *before* it is applied;
//! - an existing one of this cluster that this run did not create is *adopted*: ownership
//!   moves to this run ([`Mgmt::relabel_run`] sets `hcp-workflow.io/run` to it), so an
//!   earlier run's undo — which deletes only objects labelled with its own run — leaves it.
//!
//! The undo (`undo_object`) deletes an object only when its run label is this run *and*
//! the action's journal lists it: an adopted object carries this run's label too, but the
//! journal says it existed before. Runs of an older binary have no journal; that binary
//! never relabelled, so for them the label alone names the creating run (and a run of this
//! binary always saves its journal before its first write, relabels included).

use super::arm::{ResourceOutput, azure_retry, azure_undo_retry};
use super::env::{Clients, MgmtEnv, Owner};
use super::facts::{Facts, WaitClass};
pub use super::objects::{HostedClusterOutput, OBJECTS_KEY, ObjectJournal};
use super::objects::{cluster_version_conditions, read_file, stale_conditions};
use crate::azure::durable::{checkpoint_field, save_checkpoint_field};
use crate::kube::mgmt::{DeleteProgress, Kind, Mgmt};
use crate::kube::render::{self, HostedClusterInput, NodePoolInput};
use crate::oidc::IssuerKey;
use crate::secret::Secret;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn k8s_record(
    kind: Kind,
    ns: &str,
    name: &str,
    action: LedgerAction,
    persistent: bool,
) -> LedgerRecord {
    LedgerRecord {
        kind: "kubernetes".into(),
        resource_type: kind.type_name().into(),
        id: if ns.is_empty() {
            name.to_string()
        } else {
            format!("{ns}/{name}")
        },
        action,
        persistent,
        note: None,
    }
}

/// The object's labels as JSON, for the ownership checks shared with Azure tags.
fn label_json(l: &BTreeMap<String, String>) -> serde_json::Value {
    serde_json::to_value(l).unwrap_or_default()
}

/// Looks at a step's objects before it writes any of them; returns, per object, whether
/// it exists. Missing ones are added to the step's [`ObjectJournal`], which is saved
/// (durably) before anything is written — also when nothing is missing, so an undo can
/// tell this binary's runs from an older binary's. Existing objects of this cluster that
/// the journal does not list are adopted: relabelled with this run (see the module docs).
/// Objects of another owner are left alone here (the apply refuses them).
async fn claim(
    ctx: &StepContext,
    m: &Mgmt,
    owner: &Owner,
    objects: &[(Kind, &str, &str)],
) -> Result<Vec<bool>, StepError> {
    let saved: Option<ObjectJournal> = checkpoint_field(ctx, OBJECTS_KEY)?;
    let mut journal = saved.clone().unwrap_or_default();
    let mut found = Vec::with_capacity(objects.len());
    let run = ctx.run_id().to_string();
    for &(kind, ns, name) in objects {
        let labels = m.labels(kind, ns, name).await?;
        // Missing, or made by this very run (its creator label says so) though its journal
        // no longer lists it (the journal was lost: a deleted WAL, a restored backup): this
        // run's to create, and to delete on unwind, never "adopted".
        let ours_already = labels.as_ref().is_some_and(|l| {
            l.get(crate::kube::LABEL_CREATED_BY) == Some(&run) && owner.owns(Some(&label_json(l)))
        });
        if (labels.is_none() || ours_already) && !journal.lists(kind, ns, name) {
            journal.creating.push(ObjectJournal::key(kind, ns, name));
        }
        found.push(labels);
    }
    if saved.as_ref() != Some(&journal) {
        save_checkpoint_field(ctx, OBJECTS_KEY, &journal).await?;
    }
    for (&(kind, ns, name), labels) in objects.iter().zip(&found) {
        if let Some(l) = labels
            && !journal.lists(kind, ns, name)
            && owner.owns(Some(&label_json(l)))
        {
            m.relabel_run(kind, ns, name, &run).await?;
        }
    }
    Ok(found.iter().map(Option::is_some).collect())
}

/// Whether the object exists and carries this run's label (`hcp-workflow.io/run`).
async fn labelled_this_run(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    owner: &Owner,
    ctx: &StepContext,
) -> Result<Option<bool>, StepError> {
    Ok(m.labels(kind, ns, name)
        .await?
        .map(|l| owner.created_by(Some(&label_json(&l)), ctx)))
}

/// The ledger line of an object an ensure step just applied: created by this run (its
/// journal lists it and it carries this run's label), or adopted.
async fn applied_record(
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    owner: &Owner,
    ctx: &StepContext,
    persistent: bool,
) -> Result<LedgerRecord, StepError> {
    let journal: ObjectJournal = checkpoint_field(ctx, OBJECTS_KEY)?.unwrap_or_default();
    let created = journal.lists(kind, ns, name)
        && labelled_this_run(m, kind, ns, name, owner, ctx)
            .await?
            .unwrap_or(false);
    Ok(k8s_record(
        kind,
        ns,
        name,
        LedgerAction::created_or_adopted(created),
        persistent,
    ))
}

/// Where an existing issuer publishes its JWKS: the discovery document's `jwks_uri` (as
/// every OIDC client, and Entra, reads it), else `<issuer>/openid/v1/jwks` when
/// the document cannot be read or names none.
pub(crate) async fn jwks_url(
    clients: &Clients,
    cloud: &crate::azure::Cloud,
    issuer_url: &str,
) -> String {
    let base = issuer_url.trim_end_matches('/');
    let fixed = format!("{base}/{}", crate::oidc::JWKS_PATH);
    let disc = format!("{base}/.well-known/openid-configuration");
    match crate::azure::storage::get_public(cloud, &clients.transport(), &disc).await {
        Ok(Some(b)) => serde_json::from_slice::<serde_json::Value>(&b)
            .ok()
            .and_then(|v| {
                v.get("jwks_uri")
                    .and_then(|u| u.as_str())
                    .map(str::to_string)
            })
            .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
            .unwrap_or(fixed),
        _ => fixed,
    }
}

/// Delete `kind ns/name` if this run created it; wait for it to be gone.
///
/// Created by this run = labelled with this run *and* listed in the action's
/// [`ObjectJournal`]; for a run of an older binary (no journal), labelled with this run
/// (see the module docs).
/// Annotation asking HyperShift to remove what the guest cluster created in the cloud
/// (load balancers and their NSG rules, disks, image-registry storage, ingress DNS records)
/// while the HostedCluster is deleted: `hyperv1.CleanupCloudResourcesAnnotation`
/// (`api/hypershift/v1beta1/hostedcluster_types.go`), set by `hypershift destroy cluster`
/// before its delete (`cmd/cluster/core/destroy.go` `setDestroyCloudResourcesAnnotation`).
pub const CLEANUP_CLOUD_RESOURCES: &str = "hypershift.openshift.io/cleanup-cloud-resources";

/// Sets [`CLEANUP_CLOUD_RESOURCES`] on the HostedCluster before it is deleted (a missing
/// one is fine: nothing to clean).
async fn request_cloud_cleanup(m: &Mgmt, ns: &str, name: &str) -> Result<(), StepError> {
    m.annotate(
        Kind::HostedCluster,
        ns,
        name,
        CLEANUP_CLOUD_RESOURCES,
        "true",
    )
    .await?;
    Ok(())
}

/// How the guest's cloud cleanup is going, for a deleting HostedCluster's wait message:
/// HyperShift bubbles `CloudResourcesDestroyed` up from the HostedControlPlane
/// (`api/hypershift/v1beta1/hostedcluster_conditions.go`).
async fn cloud_cleanup_progress(m: &Mgmt, ns: &str, name: &str) -> String {
    match m
        .condition(Kind::HostedCluster, ns, name, "CloudResourcesDestroyed")
        .await
    {
        Ok(Some(c)) => format!(
            "; guest cloud cleanup: CloudResourcesDestroyed={}{}",
            c.status,
            match (c.reason, c.message) {
                (Some(r), Some(msg)) if !msg.is_empty() => format!(" ({r}: {msg})"),
                (Some(r), _) => format!(" ({r})"),
                _ => String::new(),
            }
        ),
        _ => "; guest cloud cleanup requested".to_string(),
    }
}

#[allow(clippy::too_many_arguments)]
async fn undo_object(
    poll: Duration,
    m: &Mgmt,
    kind: Kind,
    ns: &str,
    name: &str,
    owner: &Owner,
    ctx: &StepContext,
    cloud_cleanup: bool,
    link: Option<(&Clients, &super::hypershift_link::HyperShiftLink)>,
) -> Result<UndoOutcome, StepError> {
    let labelled = labelled_this_run(m, kind, ns, name, owner, ctx).await?;
    let journaled = match ObjectJournal::of_undo(ctx)? {
        Some(j) => j.lists(kind, ns, name),
        None => true,
    };
    if labelled == Some(true) && !journaled {
        tracing::info!(
            node = ctx.node(),
            "undo keeps {} {ns}/{name}: it existed before this run (adopted, not created)",
            kind.type_name()
        );
    }
    let cloud_cleanup = cloud_cleanup && kind == Kind::HostedCluster;
    match labelled.map(|l| l && journaled) {
        None | Some(false) => Ok(UndoOutcome::Done),
        Some(true) => {
            if cloud_cleanup {
                request_cloud_cleanup(m, ns, name).await?;
            }
            match m.delete(kind, ns, name).await? {
                DeleteProgress::Gone => Ok(UndoOutcome::Done),
                DeleteProgress::Deleting { finalizers } => {
                    let mut cleanup = if cloud_cleanup {
                        cloud_cleanup_progress(m, ns, name).await
                    } else {
                        String::new()
                    };
                    if kind == Kind::HostedCluster {
                        cleanup +=
                            &super::hypershift_link::release_stuck_cr_finalizer(link, m, ns, name)
                                .await?;
                    }
                    Ok(ctx.undo_wait(
                        poll,
                        format!(
                            "waiting for {} {ns}/{name} to be deleted (finalizers: {}){cleanup}",
                            kind.type_name(),
                            finalizers.join(", ")
                        ),
                    ))
                }
            }
        }
    }
}

fn kube_retry() -> RetryPolicy {
    azure_retry()
}

// ---------------------------------------------------------------------------------------

/// Namespace of the management cluster's shared ingress router (HyperShift with
/// `--managed-service ARO-HCP`, `hypershift-operator/controllers/sharedingress/manifests.go`).
pub const SHARED_INGRESS_NAMESPACE: &str = "hypershift-sharedingress";

/// Input of `k8s.issuer-key.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IssuerKeyInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace of the HostedCluster (e.g. `clusters`).
    pub namespace: String,
    /// Secret name (`<name>-sa-token-issuer-key`).
    pub secret: String,
    /// An existing issuer's signing key: store this key instead of generating one, after
    /// checking the issuer publishes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<ExistingIssuerKey>,
    /// repair-cluster: a missing signing key is never made anew (every token the cluster
    /// issued, and the published JWKS, name the old one): the step stops for an operator.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_keys: bool,
}

/// The signing key of an existing OIDC issuer (`oidcIssuer.existing`): a file path only;
/// the key is read when the step runs and never journaled.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExistingIssuerKey {
    /// PEM private key file (PKCS#1 or PKCS#8 RSA), on the worker's machine
    /// (HyperShift: `--sa-token-issuer-private-key-path`).
    pub key_file: PathBuf,
    /// Issuer URL; its JWKS (`<url>/openid/v1/jwks`) must list the key's `kid`.
    pub issuer_url: String,
    /// Azure target (the transport that reaches the issuer, as for the blob documents).
    pub azure: super::env::AzureEnv,
}

/// Reads the existing issuer's key file (at use time; the bytes stay in a [`Secret`]) and
/// checks its `kid` is in the issuer's JWKS.
pub async fn existing_issuer_key(
    clients: &Clients,
    e: &ExistingIssuerKey,
) -> Result<IssuerKey, StepError> {
    let pem =
        crate::files::read_regular(&e.key_file, crate::files::MAX_INPUT_FILE).map_err(|err| {
            StepError::permanent(
                "validation",
                format!(
                    "oidcIssuer.existing.signingKey: cannot read {}: {err}",
                    e.key_file.display()
                ),
            )
            .with_code("FileUnreadable")
        })?;
    let pem = Secret::new(pem);
    let text = std::str::from_utf8(pem.expose()).map_err(|_| {
        StepError::permanent(
            "validation",
            format!(
                "oidcIssuer.existing.signingKey: {} is not a PEM text file",
                e.key_file.display()
            ),
        )
    })?;
    let key = IssuerKey::from_private_pem(text).map_err(|err| {
        StepError::permanent(
            "validation",
            format!(
                "oidcIssuer.existing.signingKey: {}: {err}",
                e.key_file.display()
            ),
        )
    })?;
    let kid = key.kid();
    let cloud = e.azure.cloud.clone();
    let url = jwks_url(clients, &cloud, &e.issuer_url).await;
    let body = crate::azure::storage::get_public(&cloud, &clients.transport(), &url).await?;
    let published: Vec<String> = body
        .as_deref()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
        .and_then(|v| v.get("keys").and_then(|k| k.as_array()).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|k| k.get("kid").and_then(|x| x.as_str()).map(str::to_string))
        .collect();
    if !published.contains(&kid) {
        let found = if body.is_none() {
            "it answered 404".to_string()
        } else if published.is_empty() {
            "it lists no keys".to_string()
        } else {
            format!("it lists kid {}", published.join(", "))
        };
        return Err(StepError::permanent(
            "validation",
            format!(
                "oidcIssuer.existing.signingKey: the key in {} (kid {kid}) is not published by the issuer: \
                 {url} must list kid {kid}, but {found}. Tokens signed with it would not validate: \
                 give the issuer's own signing key, or publish this key's JWKS at the issuer",
                e.key_file.display()
            ),
        )
        .with_code("IssuerKeyNotPublished"));
    }
    Ok(key)
}

/// Public half of the issuer key (safe to journal).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IssuerKeyOutput {
    /// Key id.
    pub kid: String,
    /// JWKS document.
    pub jwks: serde_json::Value,
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

/// `k8s.issuer-key.ensure`: RSA-4096 service-account signing key, generated once and kept
/// only in a Secret on the management cluster (never in the journal); an existing Secret
/// is reused, never regenerated.
#[derive(Clone, Debug)]
pub struct EnsureIssuerKey(pub Arc<Clients>);

const KEY_FIELD: &str = "key";

impl Action for EnsureIssuerKey {
    const NAME: &'static str = "k8s.issuer-key.ensure";
    type Input = IssuerKeyInput;
    type Output = IssuerKeyOutput;

    fn retry_policy() -> RetryPolicy {
        kube_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: IssuerKeyInput,
    ) -> Result<Outcome<IssuerKeyOutput>, StepError> {
        // An existing issuer's key is read and checked before anything is written.
        let given = match &input.existing {
            Some(e) => Some(existing_issuer_key(&self.0, e).await?),
            None => None,
        };
        let m = self.0.mgmt(&input.mgmt).await?;
        m.apply_namespace(&input.namespace, &BTreeMap::new())
            .await?;
        claim(
            ctx,
            &m,
            &input.owner,
            &[(Kind::Secret, &input.namespace, &input.secret)],
        )
        .await?;
        if let Some(key) = given {
            // The issuer's own key, checked against its JWKS, is written (again) on every
            // run: the file is the truth, a key left in the Secret is not.
            let data = BTreeMap::from([(
                KEY_FIELD.to_string(),
                Secret::new(key.private_pem.expose().as_bytes().to_vec()),
            )]);
            m.apply_secret(
                &input.namespace,
                &input.secret,
                data,
                &input.owner.tags(ctx),
            )
            .await?;
            let record = applied_record(
                &m,
                Kind::Secret,
                &input.namespace,
                &input.secret,
                &input.owner,
                ctx,
                true,
            )
            .await?;
            return Ok(Outcome::Done(IssuerKeyOutput {
                kid: key.kid(),
                jwks: crate::oidc::jwks(&key),
                ledger: vec![record],
            }));
        }
        let existing = m
            .get_secret_data(&input.namespace, &input.secret, KEY_FIELD)
            .await?;
        let key = match existing {
            Some(pem) => {
                let pem = String::from_utf8(pem.expose().clone()).map_err(|_| {
                    StepError::permanent(
                        "validation",
                        format!(
                            "Secret {}/{} holds a key that is not UTF-8 PEM",
                            input.namespace, input.secret
                        ),
                    )
                })?;
                IssuerKey::from_private_pem(&pem).map_err(|e| {
                    StepError::permanent("validation", format!("issuer key Secret: {e}"))
                })?
            }
            None if input.keep_keys => {
                return Err(lost_key(
                    &input.namespace,
                    &input.secret,
                    "service-account signing key",
                    "a new key would invalidate every token the cluster issued and the JWKS it published",
                ));
            }
            None => {
                // RSA-4096 generation takes a second or two: keep it off the async workers.
                let key = tokio::task::spawn_blocking(crate::oidc::generate)
                    .await
                    .map_err(|e| {
                        StepError::retryable("internal", format!("key generation task: {e}"))
                    })?
                    .map_err(|e| {
                        StepError::permanent("internal", format!("key generation: {e}"))
                    })?;
                let data = BTreeMap::from([(
                    KEY_FIELD.to_string(),
                    Secret::new(key.private_pem.expose().as_bytes().to_vec()),
                )]);
                m.apply_secret(
                    &input.namespace,
                    &input.secret,
                    data,
                    &input.owner.tags(ctx),
                )
                .await?;
                key
            }
        };
        let record = applied_record(
            &m,
            Kind::Secret,
            &input.namespace,
            &input.secret,
            &input.owner,
            ctx,
            true,
        )
        .await?;
        Ok(Outcome::Done(IssuerKeyOutput {
            kid: crate::oidc::kid(&key.public_der),
            jwks: crate::oidc::jwks(&key),
            ledger: vec![record],
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: IssuerKeyInput,
        _output: Option<IssuerKeyOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        undo_object(
            self.0.poll(),
            &m,
            Kind::Secret,
            &input.namespace,
            &input.secret,
            &input.owner,
            ctx,
            false,
            None,
        )
        .await
    }
}

impl Facts for EnsureIssuerKey {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

// ---------------------------------------------------------------------------------------

/// Input of `k8s.cluster-secrets.ensure`: file paths only, read at run time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SecretsInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Namespace.
    pub namespace: String,
    /// Path of the pull secret file (on the worker's machine).
    pub pull_secret_file: PathBuf,
    /// Path of the SSH public key file.
    pub ssh_key_file: PathBuf,
    /// Secret names.
    pub pull_secret: String,
    /// SSH key Secret name.
    pub ssh_key: String,
    /// etcd encryption key Secret name.
    pub etcd_key: String,
    /// repair-cluster: a missing etcd key is never made anew (a new key cannot decrypt
    /// what etcd holds): the step stops for an operator instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_keys: bool,
}

/// Output: which Secrets.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SecretsOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

/// `k8s.cluster-secrets.ensure`: pull secret, SSH key and a 32-byte etcd encryption key
/// (generated once; an existing one is kept).
#[derive(Clone, Debug)]
pub struct EnsureClusterSecrets(pub Arc<Clients>);

impl Action for EnsureClusterSecrets {
    const NAME: &'static str = "k8s.cluster-secrets.ensure";
    type Input = SecretsInput;
    type Output = SecretsOutput;

    fn retry_policy() -> RetryPolicy {
        kube_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: SecretsInput,
    ) -> Result<Outcome<SecretsOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let l = input.owner.tags(ctx);
        let ns = &input.namespace;
        m.apply_namespace(ns, &BTreeMap::new()).await?;
        let pull = read_file(&input.pull_secret_file, "pull secret")?;
        let ssh = read_file(&input.ssh_key_file, "SSH public key")?;
        claim(
            ctx,
            &m,
            &input.owner,
            &[
                (Kind::Secret, ns, &input.pull_secret),
                (Kind::Secret, ns, &input.ssh_key),
                (Kind::Secret, ns, &input.etcd_key),
            ],
        )
        .await?;
        m.apply_secret(
            ns,
            &input.pull_secret,
            BTreeMap::from([(".dockerconfigjson".to_string(), pull)]),
            &l,
        )
        .await?;
        m.apply_secret(
            ns,
            &input.ssh_key,
            BTreeMap::from([("id_rsa.pub".to_string(), ssh)]),
            &l,
        )
        .await?;
        if m.get_secret_data(ns, &input.etcd_key, "key")
            .await?
            .is_none()
        {
            if input.keep_keys {
                return Err(lost_key(
                    ns,
                    &input.etcd_key,
                    "etcd encryption key",
                    "a new key cannot decrypt what etcd already holds",
                ));
            }
            let mut bytes = vec![0u8; 32];
            aws_lc_rs::rand::fill(&mut bytes)
                .map_err(|_| StepError::permanent("internal", "no system randomness"))?;
            m.apply_secret(
                ns,
                &input.etcd_key,
                BTreeMap::from([("key".to_string(), Secret::new(bytes))]),
                &l,
            )
            .await?;
        }
        let mut ledger = Vec::new();
        for name in [&input.pull_secret, &input.ssh_key, &input.etcd_key] {
            ledger
                .push(applied_record(&m, Kind::Secret, ns, name, &input.owner, ctx, false).await?);
        }
        Ok(Outcome::Done(SecretsOutput { ledger }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: SecretsInput,
        _output: Option<SecretsOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        for name in [&input.pull_secret, &input.ssh_key, &input.etcd_key] {
            if let UndoOutcome::Wait { until, reason } = undo_object(
                self.0.poll(),
                &m,
                Kind::Secret,
                &input.namespace,
                name,
                &input.owner,
                ctx,
                false,
                None,
            )
            .await?
            {
                return Ok(UndoOutcome::Wait { until, reason });
            }
        }
        Ok(UndoOutcome::Done)
    }
}

impl Facts for EnsureClusterSecrets {
    const ARM_ACTIONS: &'static [&'static str] = &[];
}

// ---------------------------------------------------------------------------------------

/// A workload identity's client id: given (bring-your-own identities) or from the node
/// that created the identity.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ClientId {
    /// Output of an identity node.
    Identity(Ref<ResourceOutput>),
    /// A literal client id.
    Literal(String),
    /// The string at a JSON pointer of a node's output (e.g. `/appId` of an Entra
    /// application node, `/body/properties/clientId` of an identity).
    Field {
        /// The node.
        from: Ref<serde_json::Value>,
        /// RFC 6901 pointer into its output.
        pointer: String,
    },
}

impl ClientId {
    /// The client id, read from the journal's outputs when it comes from a node.
    ///
    /// # Errors
    /// The node has no output yet, or the pointer names no string.
    pub fn resolve(&self, ctx: &StepContext) -> Result<String, StepError> {
        match self {
            ClientId::Literal(s) => Ok(s.clone()),
            ClientId::Identity(r) => Ok(ctx
                .output(r)?
                .prop("clientId")
                .unwrap_or_default()
                .to_string()),
            ClientId::Field { from, pointer } => ctx
                .output(from)?
                .pointer(pointer)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    StepError::permanent(
                        hcp_runtime::error::kind::VALIDATION,
                        format!("output of {} has no string at {pointer}", from.node()),
                    )
                }),
        }
    }
}

/// Where the ARO HCP model's `managedIdentities` come from (filled at run time).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ManagedIdentitiesSource {
    /// Key Vault name.
    pub key_vault_name: String,
    /// Key Vault tenant.
    pub key_vault_tenant_id: String,
    /// DOMAIN.md §4 component → (application client id, credentials secret name).
    pub control_plane: BTreeMap<String, (ClientId, String)>,
    /// Data plane: `image-registry`, `disk`, `file` → managed identity client id.
    pub data_plane: BTreeMap<String, ClientId>,
}

/// Input of `k8s.hosted-cluster.apply`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostedClusterNodeInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Rendering input; `workload_identities` is filled at run time from `client_ids`.
    pub spec: HostedClusterInput,
    /// Component → client id source.
    pub client_ids: BTreeMap<String, ClientId>,
    /// Wait for the `private-router` Service's internal load balancer IP (private topologies).
    pub wait_router: bool,
    /// Wait for the public `router` Service's load balancer IP (PublicAndPrivate: the
    /// public hostnames' A records point at it). Absent (false) in runs journaled before.
    #[serde(default)]
    pub wait_public_router: bool,
    /// Read that address from the management cluster's shared ingress router instead
    /// (`hypershift-sharedingress/router`, `hypershift-operator/controllers/sharedingress/
    /// manifests.go` `RouterPublicService`): a public ARO HCP cluster's Routes are served
    /// there (`support/util/visibility.go` `UseSharedIngressHC`).
    #[serde(default)]
    pub shared_ingress_router: bool,
    /// The undo sets [`CLEANUP_CLOUD_RESOURCES`] before deleting the HostedCluster, as
    /// `hypershift destroy cluster` does. Absent (false) in runs journaled before it.
    #[serde(default)]
    pub cleanup_cloud_resources: bool,
    /// The public DNS zone lookup: its id becomes `spec.dns.publicZoneID` at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_zone: Option<Ref<super::dns::PublicZoneOutput>>,
    /// `privateLink.managedBy: hypershift`: the undo rejects and removes the connections
    /// HyperShift's own endpoint did not make before deleting the HostedCluster, and checks
    /// afterwards that what HyperShift's CR named is gone (`hypershift_link`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypershift_private_link: Option<super::hypershift_link::HyperShiftLink>,
    /// The ARO HCP model: `spec.managed_identities` is filled from these at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_identities: Option<ManagedIdentitiesSource>,
}

/// `k8s.hosted-cluster.apply`: server-side apply the HostedCluster, then (private
/// topologies) wait for its `private-router` Service to get an internal LB IP. The undo
/// deletes it and waits for HyperShift's finalizer (which tears the control plane down).
#[derive(Clone, Debug)]
pub struct ApplyHostedCluster(pub Arc<Clients>);

impl Action for ApplyHostedCluster {
    const NAME: &'static str = "k8s.hosted-cluster.apply";
    type Input = HostedClusterNodeInput;
    type Output = HostedClusterOutput;

    fn retry_policy() -> RetryPolicy {
        kube_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: HostedClusterNodeInput,
    ) -> Result<Outcome<HostedClusterOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let mut spec = input.spec.clone();
        for (component, src) in &input.client_ids {
            let id = src.resolve(ctx)?;
            spec.workload_identities.insert(component.clone(), id);
        }
        if let Some(mi) = &input.managed_identities {
            let mut control_plane = BTreeMap::new();
            for (component, (src, secret)) in &mi.control_plane {
                control_plane.insert(
                    component.clone(),
                    render::ManagedIdentityInput {
                        client_id: src.resolve(ctx)?,
                        credentials_secret_name: secret.clone(),
                        object_encoding: "utf-8".into(),
                    },
                );
            }
            let dp = |k: &str| -> Result<String, StepError> {
                match mi.data_plane.get(k) {
                    Some(src) => src.resolve(ctx),
                    None => Ok(String::new()),
                }
            };
            let m = render::ManagedIdentitiesInput {
                key_vault_name: mi.key_vault_name.clone(),
                key_vault_tenant_id: mi.key_vault_tenant_id.clone(),
                control_plane,
                image_registry_msi_client_id: dp("image-registry")?,
                disk_msi_client_id: dp("disk")?,
                file_msi_client_id: dp("file")?,
            };
            m.validate()?;
            spec.managed_identities = Some(m);
        }
        if let Some(z) = &input.public_zone {
            spec.public_zone_id = ctx.output(z)?.id;
        }
        spec.labels = input.owner.tags(ctx);
        let (ns, name) = (spec.namespace.clone(), spec.name.clone());
        // Apply only once (an existing HostedCluster's spec is HyperShift's to reconcile);
        // an existing one of ours is adopted by `claim` (relabelled with this run).
        let exists = claim(ctx, &m, &input.owner, &[(Kind::HostedCluster, &ns, &name)]).await?;
        if exists.first() == Some(&false) {
            m.apply_hosted_cluster(&ns, &render::hosted_cluster(&spec))
                .await?;
        }
        let record = applied_record(
            &m,
            Kind::HostedCluster,
            &ns,
            &name,
            &input.owner,
            ctx,
            false,
        )
        .await?;
        let mut router_ip = None;
        if input.wait_router {
            let hcp_ns = format!("{ns}-{name}");
            match m.service_lb_ip(&hcp_ns, "private-router").await? {
                Some(ip) => router_ip = Some(ip),
                None => {
                    return Ok(ctx.wait(
                        self.0.poll(),
                        format!(
                            "waiting for Service {hcp_ns}/private-router to get its internal load balancer IP"
                        ),
                    ));
                }
            }
        }
        let mut public_router_ip = None;
        if input.wait_public_router {
            let hcp_ns = if input.shared_ingress_router {
                SHARED_INGRESS_NAMESPACE.to_string()
            } else {
                format!("{ns}-{name}")
            };
            match m.service_lb_ip(&hcp_ns, "router").await? {
                Some(ip) => public_router_ip = Some(ip),
                None => {
                    return Ok(ctx.wait(
                        self.0.poll(),
                        format!(
                            "waiting for Service {hcp_ns}/router to get its public load balancer IP"
                        ),
                    ));
                }
            }
        }
        Ok(Outcome::Done(HostedClusterOutput {
            ledger: vec![record],
            namespace: ns,
            name,
            router_ip,
            public_router_ip,
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: HostedClusterNodeInput,
        _output: Option<HostedClusterOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let (ns, name) = (&input.spec.namespace, &input.spec.name);
        let link = input.hypershift_private_link.as_ref();
        if let Some(l) = link
            && let Some(wait) = super::hypershift_link::before_hosted_cluster_undo(
                &self.0,
                ctx,
                &m,
                &input.owner,
                ns,
                name,
                l,
            )
            .await?
        {
            return Ok(wait);
        }
        let undone = undo_object(
            self.0.poll(),
            &m,
            Kind::HostedCluster,
            ns,
            name,
            &input.owner,
            ctx,
            input.cleanup_cloud_resources,
            link.map(|l| (self.0.as_ref(), l)),
        )
        .await?;
        match (undone, link) {
            (UndoOutcome::Done, Some(l)) => {
                super::hypershift_link::after_hosted_cluster_undo(&self.0, ctx, &m, ns, name, l)
                    .await
            }
            (o, _) => Ok(o),
        }
    }
}

impl Facts for ApplyHostedCluster {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const UNDO_WAIT: WaitClass = WaitClass::KubernetesDeletion;
}

// ---------------------------------------------------------------------------------------

/// Input of `k8s.condition.wait`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConditionInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Object kind.
    pub kind: Kind,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Condition type, e.g. `Available`.
    pub condition: String,
}

/// Output: when it became true (the condition's own time).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConditionOutput {
    /// `lastTransitionTime` of the condition.
    pub since: Option<String>,
}

/// `k8s.condition.wait`: durable wait for `condition=True` (no undo: waiting changes
/// nothing).
#[derive(Clone, Debug)]
pub struct WaitCondition(pub Arc<Clients>);

impl Action for WaitCondition {
    const NAME: &'static str = "k8s.condition.wait";
    const HAS_UNDO: bool = false;
    type Input = ConditionInput;
    type Output = ConditionOutput;

    fn retry_policy() -> RetryPolicy {
        kube_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: ConditionInput,
    ) -> Result<Outcome<ConditionOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let c = m
            .condition(input.kind, &input.namespace, &input.name, &input.condition)
            .await?;
        match c {
            Some(c) if c.status == "True" => Ok(Outcome::Done(ConditionOutput {
                since: c.last_transition_time,
            })),
            other => {
                let now = other
                    .map(|c| {
                        format!(
                            " (now {}: {} {})",
                            c.status,
                            c.reason.unwrap_or_default(),
                            c.message.unwrap_or_default()
                        )
                    })
                    .unwrap_or_default();
                Ok(ctx.wait(
                    self.0.poll(),
                    format!(
                        "waiting for {} {}/{} condition {}=True{now}",
                        input.kind.type_name(),
                        input.namespace,
                        input.name,
                        input.condition
                    ),
                ))
            }
        }
    }
}

impl Facts for WaitCondition {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::HostedClusterAvailable;
}

// ---------------------------------------------------------------------------------------

/// Input of `k8s.rollout.wait`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RolloutInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Namespace of the HostedCluster.
    pub namespace: String,
    /// HostedCluster name.
    pub name: String,
}

/// Output of `k8s.rollout.wait`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RolloutOutput {
    /// The version that rolled out (`status.version.history[0].version`).
    pub version: Option<String>,
    /// When (`completionTime`).
    pub completed_at: String,
    /// How to reach the cluster, as its HostedCluster reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
}

/// How to reach a hosted cluster: what `hypershift create kubeconfig` and the
/// console need, read from the HostedCluster's status (HyperShift's
/// `hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`: `Status.KubeConfig`
/// names Secret `<name>-admin-kubeconfig`, key `kubeconfig`; `Status.ControlPlaneEndpoint`
/// is the API server's host and port, 443 behind a Route; the console is
/// `console-openshift-console.apps.<name>.<baseDomain>`,
/// `control-plane-operator/controllers/hostedcontrolplane/v2/kas/params.go`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// `https://<host>:<port>` (`None` until HyperShift reports the endpoint).
    pub api_server: Option<String>,
    /// `<namespace>/<name>` of the admin kubeconfig Secret on the management cluster.
    pub kubeconfig_secret: Option<String>,
    /// The command that writes the kubeconfig to a file.
    pub kubeconfig_command: Option<String>,
    /// The web console.
    pub console: String,
    /// Where those names resolve, when that is not everywhere (a private topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reach: Option<String>,
}

/// The [`Access`] of HostedCluster `hc` (its JSON) in namespace `ns`.
pub fn access_of(hc: &serde_json::Value, ns: &str, name: &str) -> Access {
    let s = |p: &str| hc.pointer(p).and_then(serde_json::Value::as_str);
    let api_server = s("/status/controlPlaneEndpoint/host")
        .filter(|h| !h.is_empty())
        .map(|h| {
            let port = hc
                .pointer("/status/controlPlaneEndpoint/port")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(443);
            format!("https://{h}:{port}")
        });
    let secret = s("/status/kubeconfig/name").map(str::to_string);
    let base = s("/spec/dns/baseDomain").unwrap_or_default();
    Access {
        api_server,
        kubeconfig_command: secret.as_ref().map(|sec| {
            format!(
                "kubectl get secret -n {ns} {sec} -o jsonpath='{{.data.kubeconfig}}' | base64 -d > {name}.kubeconfig"
            )
        }),
        kubeconfig_secret: secret.map(|sec| format!("{ns}/{sec}")),
        console: format!("https://console-openshift-console.apps.{name}.{base}"),
        // The API and OAuth names are answered by private zones linked to the guest VNet
        // (the private endpoint's address); the console's by the infra zone.
        reach: match s("/spec/platform/azure/topology") {
            Some("Private") => Some(
                "the API server, OAuth and console names resolve only inside the guest VNet \
                 (its private zones answer them with the private endpoint): connect from \
                 there, or from a network linked to those zones"
                    .into(),
            ),
            Some("PublicAndPrivate") => Some(
                "public names; inside the guest VNet the API server and OAuth names resolve \
                 to the private endpoint"
                    .into(),
            ),
            _ => None,
        },
    }
}

/// `k8s.rollout.wait`: waits until the guest's release has rolled out, as
/// `hypershift create cluster --wait` does (`cmd/cluster/core/create.go`: done when
/// `status.version.history[0].completionTime` is set). `Available` and `Ready` pools come
/// before a console, ingress, registry or CSI that never becomes available: while it waits,
/// its reason carries the HostedCluster's `ClusterVersion*` conditions as HyperShift
/// bubbles them up from the CVO, so a stall names the failing operators.
#[derive(Clone, Debug)]
pub struct WaitRollout(pub Arc<Clients>);

impl Action for WaitRollout {
    const NAME: &'static str = "k8s.rollout.wait";
    const HAS_UNDO: bool = false;
    type Input = RolloutInput;
    type Output = RolloutOutput;

    fn retry_policy() -> RetryPolicy {
        kube_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: RolloutInput,
    ) -> Result<Outcome<RolloutOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let Some(hc) = m
            .get(Kind::HostedCluster, &input.namespace, &input.name)
            .await?
        else {
            return Err(StepError::permanent(
                "not-found",
                format!(
                    "HostedCluster {}/{} is gone while waiting for its rollout",
                    input.namespace, input.name
                ),
            ));
        };
        let status = hc.data.get("status").cloned().unwrap_or_default();
        let latest = status.pointer("/version/history/0").cloned();
        if let Some(done) = latest
            .as_ref()
            .and_then(|h| h.get("completionTime"))
            .and_then(serde_json::Value::as_str)
        {
            return Ok(Outcome::Done(RolloutOutput {
                access: Some(access_of(&hc.data, &input.namespace, &input.name)),
                version: latest
                    .as_ref()
                    .and_then(|h| h.get("version"))
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string),
                completed_at: done.to_string(),
            }));
        }
        // What HyperShift reports about the rollout (the CVO's conditions, bubbled up).
        let conditions = cluster_version_conditions(&status);
        let state = latest
            .as_ref()
            .and_then(|h| h.get("state"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("not started");
        Ok(ctx.wait(
            self.0.poll(),
            format!(
                "waiting for HostedCluster {}/{} to roll out (status.version.history[0] {state}, no completionTime){}",
                input.namespace,
                input.name,
                if conditions.is_empty() {
                    String::new()
                } else {
                    format!(": {}", conditions.join("; "))
                }
            ),
        ))
    }
}

impl Facts for WaitRollout {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::ClusterRollout;

    fn plan(i: &RolloutInput) -> Vec<String> {
        vec![format!(
            "wait for HostedCluster {}'s release to roll out (status.version.history[0] Completed)",
            i.name
        )]
    }
}

// ---------------------------------------------------------------------------------------

/// Input of `k8s.node-pool.apply`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodePoolNodeInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Rendering input.
    pub spec: NodePoolInput,
    /// Apply the pool again when it exists (repair-cluster: a size or template changed by
    /// hand goes back to what the file says); otherwise an existing pool of ours is
    /// adopted as it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reapply: bool,
}

/// Output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodePoolOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

/// Why NodePool `ns/name` does not yet run the machines `spec` asks for: HyperShift has
/// not reconciled the latest spec (its conditions are of an older generation), or
/// `status.replicas` is not `spec.replicas` (outside `autoScaling`'s range). `None` once it
/// does.
async fn pool_unsized(
    m: &Mgmt,
    ns: &str,
    name: &str,
    spec: &NodePoolInput,
) -> Result<Option<String>, StepError> {
    let Some(pool) = m.get(Kind::NodePool, ns, name).await? else {
        return Ok(Some("the NodePool is gone".into()));
    };
    if let Some(why) = stale_conditions(&pool.data) {
        return Ok(Some(why));
    }
    let running = pool
        .data
        .pointer("/status/replicas")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0);
    Ok(match spec.auto_scaling {
        Some((min, max)) if !(i64::from(min)..=i64::from(max)).contains(&running) => Some(format!(
            "{running} machine(s) running, want between {min} and {max}"
        )),
        None if running != i64::from(spec.replicas) => Some(format!(
            "{running} machine(s) running, want {}",
            spec.replicas
        )),
        _ => None,
    })
}

/// `k8s.node-pool.apply`: apply the NodePool and wait for `Ready=True` (when it applies an
/// existing pool again, also until it runs the machines asked for); the undo deletes it
/// and waits until it is gone.
#[derive(Clone, Debug)]
pub struct ApplyNodePool(pub Arc<Clients>);

impl Action for ApplyNodePool {
    const NAME: &'static str = "k8s.node-pool.apply";
    type Input = NodePoolNodeInput;
    type Output = NodePoolOutput;

    fn retry_policy() -> RetryPolicy {
        kube_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: NodePoolNodeInput,
    ) -> Result<Outcome<NodePoolOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let mut spec = input.spec.clone();
        spec.labels = input.owner.tags(ctx);
        let (ns, name) = (spec.namespace.clone(), spec.name.clone());
        let exists = claim(ctx, &m, &input.owner, &[(Kind::NodePool, &ns, &name)]).await?;
        if exists.first() == Some(&false) {
            m.apply_node_pool(&ns, &render::node_pool(&spec)).await?;
        } else if input.reapply {
            m.reapply_node_pool(&ns, &render::node_pool(&spec)).await?;
        }
        let ready = m.condition(Kind::NodePool, &ns, &name, "Ready").await?;
        if ready.as_ref().is_none_or(|c| c.status != "True") {
            // Why not, as HyperShift reports it: the machines' and nodes' conditions carry
            // Azure's error when CAPZ or the cloud provider cannot authenticate or is
            // refused (AADSTS…, AuthorizationFailed), or that nodes never registered.
            let mut why = String::new();
            for ctype in ["AllMachinesReady", "AllNodesHealthy"] {
                if let Some(c) = m.condition(Kind::NodePool, &ns, &name, ctype).await?
                    && c.status == "False"
                {
                    why.push_str(&format!(
                        "; {ctype}=False ({}): {}",
                        c.reason.unwrap_or_default(),
                        c.message.unwrap_or_default().trim_end()
                    ));
                }
            }
            return Ok(ctx.wait(
                self.0.poll(),
                format!("waiting for NodePool {ns}/{name} Ready=True{why}"),
            ));
        }
        if input.reapply
            && let Some(why) = pool_unsized(&m, &ns, &name, &input.spec).await?
        {
            // A pool resized by hand stays Ready while HyperShift adds or removes machines:
            // the repair is done only once the pool runs what the file says.
            return Ok(ctx.wait(
                self.0.poll(),
                format!("waiting for NodePool {ns}/{name} to settle: {why}"),
            ));
        }
        Ok(Outcome::Done(NodePoolOutput {
            ledger: vec![
                applied_record(&m, Kind::NodePool, &ns, &name, &input.owner, ctx, false).await?,
            ],
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: NodePoolNodeInput,
        _output: Option<NodePoolOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        undo_object(
            self.0.poll(),
            &m,
            Kind::NodePool,
            &input.spec.namespace,
            &input.spec.name,
            &input.owner,
            ctx,
            false,
            None,
        )
        .await
    }
}

impl Facts for ApplyNodePool {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::NodePoolReady;
    const UNDO_WAIT: WaitClass = WaitClass::KubernetesDeletion;
}

// ---------------------------------------------------------------------------------------

/// Input of `k8s.object.delete` (delete-cluster).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteObjectInput {
    /// Management cluster.
    pub mgmt: MgmtEnv,
    /// Ownership.
    pub owner: Owner,
    /// Kind.
    pub kind: Kind,
    /// Namespace.
    pub namespace: String,
    /// Names (deleted together; each only if ours).
    pub names: Vec<String>,
    /// Persistent (recorded as such).
    #[serde(default)]
    pub persistent: bool,
    /// HostedClusters only: set [`CLEANUP_CLOUD_RESOURCES`] before the delete, so the
    /// guest removes its load balancers, NSG rules, disks and registry storage
    /// (`delete-cluster --skip-cloud-cleanup` leaves it unset).
    #[serde(default)]
    pub cleanup_cloud_resources: bool,
    /// `privateLinkManagedBy: hypershift` (HostedCluster only): a 4.22 CPO leaves its
    /// finalizer on the AzurePrivateLinkService; it is released once ARM proves the PE and
    /// zones the CR names are gone ([`super::hypershift_link::release_stuck_cr_finalizer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypershift_private_link: Option<super::hypershift_link::HyperShiftLink>,
}

/// Output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteObjectOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

/// Checkpoint member of `k8s.object.delete`: the objects whose deletion it requested.
const DELETE_REQUESTED_KEY: &str = "delete-requested";

/// `k8s.object.delete`: delete objects carrying our cluster labels and wait until they are
/// gone; missing is done; anything else is kept.
#[derive(Clone, Debug)]
pub struct DeleteObject(pub Arc<Clients>);

impl Action for DeleteObject {
    const NAME: &'static str = "k8s.object.delete";
    const HAS_UNDO: bool = false;
    type Input = DeleteObjectInput;
    type Output = DeleteObjectOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: DeleteObjectInput,
    ) -> Result<Outcome<DeleteObjectOutput>, StepError> {
        let m = self.0.mgmt(&input.mgmt).await?;
        let mut ledger = Vec::new();
        // Objects this step asked to delete (journaled before it waits): gone later is
        // "deleted" by this run, not "already gone".
        let mut requested: Vec<String> =
            checkpoint_field(ctx, DELETE_REQUESTED_KEY)?.unwrap_or_default();
        for name in &input.names {
            let labels = m.labels(input.kind, &input.namespace, name).await?;
            let action = match labels {
                None if requested.contains(name) => LedgerAction::Deleted,
                None => LedgerAction::Gone,
                Some(l) if input.owner.owns(Some(&label_json(&l))) => {
                    let cleanup =
                        input.cleanup_cloud_resources && input.kind == Kind::HostedCluster;
                    if cleanup {
                        request_cloud_cleanup(&m, &input.namespace, name).await?;
                    }
                    match m.delete(input.kind, &input.namespace, name).await? {
                        DeleteProgress::Gone => LedgerAction::Deleted,
                        DeleteProgress::Deleting { finalizers } => {
                            if !requested.contains(name) {
                                requested.push(name.clone());
                                save_checkpoint_field(ctx, DELETE_REQUESTED_KEY, &requested)
                                    .await?;
                            }
                            let mut progress = if cleanup {
                                cloud_cleanup_progress(&m, &input.namespace, name).await
                            } else {
                                String::new()
                            };
                            if input.kind == Kind::HostedCluster {
                                progress += &super::hypershift_link::release_stuck_cr_finalizer(
                                    input
                                        .hypershift_private_link
                                        .as_ref()
                                        .map(|l| (self.0.as_ref(), l)),
                                    &m,
                                    &input.namespace,
                                    name,
                                )
                                .await?;
                            }
                            return Ok(ctx.wait(
                                self.0.poll(),
                                format!(
                                    "waiting for {} {}/{name} to be deleted (finalizers: {}){progress}",
                                    input.kind.type_name(),
                                    input.namespace,
                                    finalizers.join(", ")
                                ),
                            ));
                        }
                    }
                }
                Some(_) => LedgerAction::Kept,
            };
            ledger.push(k8s_record(
                input.kind,
                &input.namespace,
                name,
                action,
                input.persistent,
            ));
        }
        Ok(Outcome::Done(DeleteObjectOutput { ledger }))
    }
}

impl Facts for DeleteObject {
    const ARM_ACTIONS: &'static [&'static str] = &[];
    const WAIT: WaitClass = WaitClass::KubernetesDeletion;
}

/// repair-cluster found a key Secret it generated missing: it must not make a new one.
/// HyperShift keeps a copy in the hosted control plane's namespace (`<ns>-<cluster>`).
fn lost_key(ns: &str, name: &str, what: &str, why: &str) -> StepError {
    StepError::permanent(
        "validation",
        format!(
            "the {what} Secret {ns}/{name} is missing and repair never makes a new one ({why}). Copy HyperShift's copy back from the hosted control plane namespace (`kubectl get secret -n {ns}-<cluster> …`, as `hcp-workflow verify` names it) or restore it from a backup, then `hcp-workflow retry` this run"
        ),
    )
    .with_code("KeySecretMissing")
}
