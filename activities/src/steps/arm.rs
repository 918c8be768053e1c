//! One `ensure` and one `delete` action per plain ARM resource kind.
//!
//! "Plain" kinds are those whose body is fully known when the DAG is built (resource
//! groups, NSG, VNet, public IP, load balancer, private DNS zone and link, storage account,
//! blob container, identities): they share [`ensure_resource`] and [`remove_resource`],
//! and differ in name, resource type and api-version only.
//!
//! # Guarantees
//! - `ensure` never replaces an existing resource (no PUT over it: a VNet PUT would drop
//!   subnets), adopts only what carries our ownership tags, and refuses anything else.
//! - The undo deletes only what *this run* created (tag `hcp-workflow.io/run`), so a failed
//!   run leaves what existed before it. Bring-your-own resources are never deleted.
//! - `delete` (delete-cluster) deletes only what carries our cluster and infra-id tags;
//!   anything else is recorded as kept. A missing resource is done.

use super::env::{AzureEnv, Clients, Owner};
use crate::azure::ArmClient;
use crate::azure::durable::{self, Adopt, Deleted, EnsureSpec, Progress};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Input of a plain resource node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResourceInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// ARM resource type, e.g. `Microsoft.Network/virtualNetworks` (for the ledger).
    pub resource_type: String,
    /// Resource id.
    pub id: String,
    /// Pinned api-version.
    pub api: String,
    /// PUT body (tags are added at run time).
    pub body: Value,
    /// Whether the resource takes tags (child resources do not).
    #[serde(default = "yes")]
    pub tagged: bool,
    /// Outlives the cluster (delete-cluster keeps it unless purging).
    #[serde(default)]
    pub persistent: bool,
    /// Bring-your-own: must exist; only read; never created or deleted.
    #[serde(default)]
    pub byo: bool,
}

fn yes() -> bool {
    true
}

/// Output of a plain resource node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResourceOutput {
    /// Resource id.
    pub id: String,
    /// The resource as last read (never holds secrets: no list-keys bodies).
    pub body: Value,
    /// Ledger records (see `hcp_runtime::ledger`).
    #[serde(default)]
    pub ledger: Vec<LedgerRecord>,
}

impl ResourceOutput {
    /// `properties.<key>` as a string.
    pub fn prop(&self, key: &str) -> Option<&str> {
        self.body
            .get("properties")
            .and_then(|p| p.get(key))
            .and_then(|v| v.as_str())
    }
}

/// Input of a delete node (delete-cluster).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// ARM resource type.
    pub resource_type: String,
    /// Resource id.
    pub id: String,
    /// Pinned api-version.
    pub api: String,
    /// Whether the resource takes tags; untagged children are ours by deterministic name.
    #[serde(default = "yes")]
    pub tagged: bool,
    /// Persistent resource (recorded as such).
    #[serde(default)]
    pub persistent: bool,
}

/// Output of a delete node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteOutput {
    /// Ledger records.
    pub ledger: Vec<LedgerRecord>,
}

pub(crate) fn record(
    resource_type: &str,
    id: &str,
    action: LedgerAction,
    persistent: bool,
    note: Option<String>,
) -> LedgerRecord {
    LedgerRecord {
        kind: "azure".into(),
        resource_type: resource_type.into(),
        id: id.into(),
        action,
        persistent,
        note,
    }
}

/// Ensure a resource whose body is known; shared by every plain kind.
///
/// # Errors
/// ARM errors, classified; `NotOurs` when a resource with that name exists without our tags.
pub async fn ensure_resource(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &ResourceInput,
) -> Result<Outcome<ResourceOutput>, StepError> {
    if input.byo {
        let Some(body) = arm.get_value(&input.id, &input.api).await? else {
            return Err(StepError::permanent(
                "validation",
                format!(
                    "bring-your-own {} `{}` does not exist (or this identity cannot read it)",
                    input.resource_type, input.id
                ),
            )
            .with_code("ResourceNotFound"));
        };
        return Ok(Outcome::Done(ResourceOutput {
            id: input.id.clone(),
            body,
            ledger: vec![record(
                &input.resource_type,
                &input.id,
                LedgerAction::Adopted,
                input.persistent,
                Some("bring-your-own: never deleted".into()),
            )],
        }));
    }
    let mut body = input.body.clone();
    if input.tagged
        && let Some(obj) = body.as_object_mut()
    {
        let mut tags = serde_json::Map::new();
        if let Some(Value::Object(t)) = obj.get("tags") {
            tags = t.clone();
        }
        for (k, v) in input.owner.tags(ctx) {
            tags.insert(k, Value::String(v));
        }
        obj.insert("tags".into(), Value::Object(tags));
    }
    let spec = EnsureSpec {
        id: input.id.clone(),
        api: input.api.clone(),
        body,
        adopt: Adopt::OursOnly,
        tagged: input.tagged,
        ownership: input.owner.ownership(ctx),
    };
    match durable::ensure(ctx, arm, &spec).await? {
        Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
        Progress::Done(e) => {
            let created = if input.tagged {
                input.owner.created_by(e.body.get("tags"), ctx)
            } else {
                e.created
            };
            let action = LedgerAction::created_or_adopted(created);
            Ok(Outcome::Done(ResourceOutput {
                id: e.id.clone(),
                ledger: vec![record(
                    &input.resource_type,
                    &e.id,
                    action,
                    input.persistent,
                    None,
                )],
                body: e.body,
            }))
        }
    }
}

/// Undo of a plain kind: delete what this run created, keep the rest.
///
/// # Errors
/// ARM errors, classified.
pub async fn remove_resource(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &ResourceInput,
    output: Option<&ResourceOutput>,
) -> Result<UndoOutcome, StepError> {
    if input.byo {
        return Ok(UndoOutcome::Done);
    }
    let progress = if input.tagged {
        durable::delete_created(ctx, arm, &input.id, &input.api, &input.owner.ownership(ctx))
            .await?
    } else if output.is_some_and(|o| o.ledger.iter().all(|r| r.action != LedgerAction::Created)) {
        // An untagged child the action adopted rather than created stays.
        return Ok(UndoOutcome::Done);
    } else {
        // Untagged children have deterministic names derived from the infra id: when the
        // action created it (or never finished), the name alone makes it ours.
        durable::delete(ctx, arm, &input.id, &input.api, None).await?
    };
    Ok(progress.into_undo(ctx))
}

/// delete-cluster's delete of one resource: only if ours and present.
///
/// # Errors
/// ARM errors, classified.
pub async fn delete_resource(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &DeleteInput,
) -> Result<Outcome<DeleteOutput>, StepError> {
    let own = input.owner.ownership(ctx);
    let own = input.tagged.then_some(&own);
    match durable::delete(ctx, arm, &input.id, &input.api, own).await? {
        Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
        Progress::Done(d) => {
            let (action, note) = match d {
                Deleted::Gone => (LedgerAction::Gone, None),
                Deleted::Deleted => (LedgerAction::Deleted, None),
                Deleted::KeptNotOurs => (
                    LedgerAction::Kept,
                    Some("not tagged as this cluster's: left in place".to_string()),
                ),
            };
            Ok(Outcome::Done(DeleteOutput {
                ledger: vec![record(
                    &input.resource_type,
                    &input.id,
                    action,
                    input.persistent,
                    note,
                )],
            }))
        }
    }
}

/// Ensure untagged child resources (federated credentials, DNS records), one at a time:
/// Azure refuses concurrent writes on some parents. A child still being written makes the
/// whole step wait (`Outcome::Wait`); the next attempt skips the children already there.
///
/// # Errors
/// ARM errors, classified.
pub async fn ensure_children(
    ctx: &StepContext,
    arm: &ArmClient,
    owner: &Owner,
    resource_type: &str,
    api: &str,
    children: Vec<(String, Value)>,
    persistent: bool,
) -> Result<Outcome<Vec<LedgerRecord>>, StepError> {
    let mut ledger = Vec::new();
    for (id, body) in children {
        let spec = EnsureSpec {
            id: id.clone(),
            api: api.to_string(),
            body,
            adopt: Adopt::OursOnly,
            tagged: false,
            ownership: owner.ownership(ctx),
        };
        match durable::ensure(ctx, arm, &spec).await? {
            Progress::Pending { after, reason } => return Ok(ctx.wait(after, reason)),
            Progress::Done(e) => ledger.push(record(
                resource_type,
                &id,
                LedgerAction::created_or_adopted(e.created),
                persistent,
                None,
            )),
        }
    }
    Ok(Outcome::Done(ledger))
}

/// Delete untagged child resources one at a time (missing ones are done).
///
/// # Errors
/// ARM errors, classified.
pub async fn delete_children(
    ctx: &StepContext,
    arm: &ArmClient,
    api: &str,
    ids: &[String],
) -> Result<UndoOutcome, StepError> {
    for id in ids {
        if let Progress::Pending { after, reason } =
            durable::delete(ctx, arm, id, api, None).await?
        {
            return Ok(ctx.undo_wait(after, reason));
        }
    }
    Ok(UndoOutcome::Done)
}

/// Retry policy of Azure writes: throttling and replication delays can last minutes.
pub fn azure_retry() -> RetryPolicy {
    RetryPolicy::default()
        .with_backoff(Duration::from_secs(2), 2.0, Duration::from_secs(60))
        .with_max_attempts(12)
}

/// Undos try harder: giving up pages a human.
pub fn azure_undo_retry() -> RetryPolicy {
    RetryPolicy::default()
        .with_backoff(Duration::from_secs(2), 2.0, Duration::from_secs(60))
        .with_max_attempts(20)
}

macro_rules! plain_kind {
    ($ensure:ident, $delete:ident, $kind:literal) => {
        plain_kind!(@ensure $ensure, $kind);
        delete_kind!($delete, $kind);
    };
    (@ensure $ensure:ident, $kind:literal) => {
        #[doc = concat!("`azure.", $kind, ".ensure`: create or adopt (see the module docs).")]
        #[derive(Clone, Debug)]
        pub struct $ensure(pub Arc<Clients>);

        impl Action for $ensure {
            const NAME: &'static str = concat!("azure.", $kind, ".ensure");
            type Input = ResourceInput;
            type Output = ResourceOutput;

            fn retry_policy() -> RetryPolicy {
                azure_retry()
            }

            fn undo_retry_policy() -> RetryPolicy {
                azure_undo_retry()
            }

            async fn run(
                &self,
                ctx: &StepContext,
                input: ResourceInput,
            ) -> Result<Outcome<ResourceOutput>, StepError> {
                let arm = self.0.arm(&input.azure).await?;
                ensure_resource(ctx, &arm, &input).await
            }

            async fn undo(
                &self,
                ctx: &StepContext,
                input: ResourceInput,
                output: Option<ResourceOutput>,
            ) -> Result<UndoOutcome, StepError> {
                let arm = self.0.arm(&input.azure).await?;
                remove_resource(ctx, &arm, &input, output.as_ref()).await
            }
        }

    };
}

macro_rules! delete_kind {
    ($delete:ident, $kind:literal) => {
        #[doc = concat!("`azure.", $kind, ".delete`: delete if ours and present (delete-cluster).")]
        #[derive(Clone, Debug)]
        pub struct $delete(pub Arc<Clients>);

        impl Action for $delete {
            const NAME: &'static str = concat!("azure.", $kind, ".delete");
            const HAS_UNDO: bool = false;
            type Input = DeleteInput;
            type Output = DeleteOutput;

            fn retry_policy() -> RetryPolicy {
                azure_undo_retry()
            }

            async fn run(
                &self,
                ctx: &StepContext,
                input: DeleteInput,
            ) -> Result<Outcome<DeleteOutput>, StepError> {
                let arm = self.0.arm(&input.azure).await?;
                delete_resource(ctx, &arm, &input).await
            }
        }
    };
}

plain_kind!(EnsureResourceGroup, DeleteResourceGroup, "resource-group");
plain_kind!(EnsureIdentity, DeleteIdentity, "identity");
plain_kind!(EnsureNsg, DeleteNsg, "nsg");
plain_kind!(EnsureVnet, DeleteVnet, "vnet");
plain_kind!(EnsureSubnet, DeleteSubnet, "subnet");
plain_kind!(EnsurePublicIp, DeletePublicIp, "public-ip");
plain_kind!(EnsureLoadBalancer, DeleteLoadBalancer, "load-balancer");
plain_kind!(EnsureDnsZone, DeleteDnsZone, "private-dns-zone");
plain_kind!(EnsureDnsLink, DeleteDnsLink, "private-dns-link");
plain_kind!(
    EnsureStorageAccount,
    DeleteStorageAccount,
    "storage-account"
);
plain_kind!(EnsureContainer, DeleteContainer, "blob-container");
delete_kind!(DeleteFederatedCredential, "federated-credential");
delete_kind!(DeleteRoleAssignment, "role-assignment");
delete_kind!(DeleteDnsRecord, "private-dns-a-record");
delete_kind!(DeletePrivateEndpoint, "private-endpoint");
