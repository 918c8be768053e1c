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
//! - Untagged children (federated credentials, role assignments, DNS record sets, the NAT
//!   subnet, the OIDC blob container) carry no run tag, so the run's *journal* is the proof instead: the
//!   forward action saves each child it is about to create in its checkpoint
//!   ([`ChildrenJournal`]) *before* the PUT, and the undo deletes only the children listed
//!   there ([`ensure_children`], [`delete_children`]: the one place this rule lives). A
//!   child that existed before the run is recorded as adopted and never deleted by it.
//! - `delete` (delete-cluster) deletes only what carries our cluster and infra-id tags;
//!   anything else is recorded as kept. A missing resource is done.

use super::env::{AzureEnv, Clients, Owner};
use super::facts::Facts;
use crate::azure::ArmClient;
use crate::azure::durable::{self, Adopt, Deleted, EnsureSpec, Ensured, Progress};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
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
    /// The shared persistent resource group ([`super::shared_group`]): adopted whoever
    /// made it, deleted only when empty. Absent in runs journaled before shared groups.
    #[serde(default)]
    pub shared: bool,
    /// The node that ensured what this resource lives in (its resource group, or its
    /// parent: a DNS zone, a storage account). When that node's ledger says this run
    /// created it, nothing can have been in it before the run, so the first PUT is sent
    /// without a read ([`durable::ensure_new`]). Absent: always read first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Ref<ResourceOutput>>,
}

fn yes() -> bool {
    true
}

impl ResourceInput {
    /// This resource, living in what `parent` ensured (see [`ResourceInput::parent`]).
    #[must_use]
    pub fn within(self, parent: &Ref<ResourceOutput>) -> Self {
        Self {
            parent: Some(parent.clone()),
            ..self
        }
    }
}

/// Whether this run's ledger records `output`'s resource as `created`. A resource created
/// by this run had no children and held nothing before it.
pub fn created_by_run(output: &ResourceOutput) -> bool {
    output
        .ledger
        .iter()
        .any(|r| r.action == LedgerAction::Created && r.id.eq_ignore_ascii_case(&output.id))
}

/// Whether `parent` (an ancestor's output) was created by this run ([`created_by_run`]);
/// `false` when none is named.
///
/// # Errors
/// The named node has no output (not an ancestor: a definition error).
pub fn parent_created(
    ctx: &StepContext,
    parent: Option<&Ref<ResourceOutput>>,
) -> Result<bool, StepError> {
    match parent {
        None => Ok(false),
        Some(p) => Ok(created_by_run(&ctx.output(p)?)),
    }
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
    /// The shared persistent resource group ([`super::shared_group::delete`]).
    #[serde(default)]
    pub shared: bool,
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
    ensure_resource_seen(ctx, arm, input, None).await
}

/// [`ensure_resource`] when this attempt has just read the resource (`seen`: what it
/// found, `Some(None)`: nothing), so it is not read again. Ignored where a
/// read must happen anyway: an untagged child this run journaled as created (an earlier
/// attempt may have written it) and a resource whose write an earlier attempt journaled
/// ([`durable::ensure_seen`]) are read anew; shared and bring-your-own kinds read as
/// before.
///
/// # Errors
/// As [`ensure_resource`].
pub async fn ensure_resource_seen(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &ResourceInput,
    seen: Option<Option<Value>>,
) -> Result<Outcome<ResourceOutput>, StepError> {
    if input.shared {
        return super::shared_group::ensure(ctx, arm, input).await;
    }
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
        read_query: crate::azure::models::read_query(&input.resource_type),
    };
    // In a parent this run created nothing can have been before: no read before the
    // first PUT (a caller's own read, `seen`, is used as it is).
    let parent_new = seen.is_none() && parent_created(ctx, input.parent.as_ref())?;
    let progress = if input.tagged && parent_new {
        durable::ensure_new(ctx, arm, &spec).await?
    } else if input.tagged {
        durable::ensure_seen(ctx, arm, &spec, seen).await?
    } else {
        // An untagged resource is a child: its creation is journaled like the others'.
        let mut journal = ChildrenJournal::of_action(ctx)?;
        ensure_child(ctx, arm, &mut journal, &spec, parent_new, seen).await?
    };
    match progress {
        Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
        Progress::Done(e) => {
            let created = if input.tagged {
                input.owner.created_by(e.body.get("tags"), ctx)
            } else {
                e.created
            };
            let rec = if input.tagged {
                record(
                    &input.resource_type,
                    &e.id,
                    LedgerAction::created_or_adopted(created),
                    input.persistent,
                    None,
                )
            } else {
                child_record(&input.resource_type, &e.id, created, input.persistent)
            };
            Ok(Outcome::Done(ResourceOutput {
                id: e.id.clone(),
                ledger: vec![rec],
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
    if input.shared {
        return super::shared_group::remove(ctx, arm, input).await;
    }
    if !input.tagged {
        // An untagged child: deleted only if the action's journal (or, for a run of an
        // older binary, its output) proves this run created it.
        return delete_children(
            ctx,
            arm,
            &input.resource_type,
            &input.api,
            std::slice::from_ref(&input.id),
            output.map(|o| o.ledger.as_slice()),
            input.persistent,
        )
        .await;
    }
    let progress =
        durable::delete_created(ctx, arm, &input.id, &input.api, &input.owner.ownership(ctx))
            .await?;
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
    if input.shared {
        return super::shared_group::delete(ctx, arm, input).await;
    }
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

/// Checkpoint member in which an ensure step journals the untagged children it creates
/// (see [`ChildrenJournal`]).
pub const CHILDREN_KEY: &str = "created-children";

/// Checkpoint member in which an undo records what it deleted and kept (read by
/// `hcp_runtime::ledger` instead of deriving the undo's lines from the output).
pub const UNDO_LEDGER_KEY: &str = "ledger";

/// What an ensure step journals about the untagged children it writes: the ids of those it
/// found missing and is creating, each saved durably *before* its PUT is sent.
///
/// Untagged children (federated identity credentials, role assignments, private DNS record
/// sets, the NAT subnet, the OIDC container) have deterministic names, so "exists under our name" does
/// not say *which run* created one: after create → delete (persistent credentials kept) →
/// create, the second run finds the first run's credentials under the same names. This
/// journal is that proof. Read by the action on a resumed attempt
/// ([`ChildrenJournal::of_action`]) and by the undo through the engine's
/// `StepContext::action_checkpoint` ([`ChildrenJournal::of_undo`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildrenJournal {
    /// Ids (as written) of the children this run is creating or created.
    #[serde(default)]
    pub creating: Vec<String>,
}

impl ChildrenJournal {
    /// Whether `id` is journaled as created by this run (ARM ids compare case-insensitively).
    pub fn lists(&self, id: &str) -> bool {
        self.creating.iter().any(|c| c.eq_ignore_ascii_case(id))
    }

    /// Journals `id` as being created by this run, durably: call it after finding the child
    /// missing and before sending its PUT.
    ///
    /// # Errors
    /// The journal write failed (retryable: lease lost).
    pub async fn record_creating(&mut self, ctx: &StepContext, id: &str) -> Result<(), StepError> {
        if !self.lists(id) {
            self.creating.push(id.to_string());
        }
        durable::save_checkpoint_field(ctx, CHILDREN_KEY, &*self).await
    }

    /// In an action: the journal saved by this or an earlier attempt (empty when none).
    ///
    /// # Errors
    /// The checkpoint member does not decode (permanent `definition` error).
    pub fn of_action(ctx: &StepContext) -> Result<Self, StepError> {
        Ok(durable::checkpoint_field(ctx, CHILDREN_KEY)?.unwrap_or_default())
    }

    /// In an undo: the forward action's journal, whether it succeeded or not; `None` when
    /// it saved none (it created nothing, or it ran under a binary older than the journal).
    ///
    /// # Errors
    /// The checkpoint member does not decode (permanent `definition` error).
    pub fn of_undo(ctx: &StepContext) -> Result<Option<Self>, StepError> {
        let Some(Value::Object(mut cp)) = ctx.action_checkpoint::<Value>()? else {
            return Ok(None);
        };
        match cp.remove(CHILDREN_KEY) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                StepError::permanent(
                    hcp_runtime::error::kind::DEFINITION,
                    format!("action checkpoint member `{CHILDREN_KEY}`: {e}"),
                )
            }),
        }
    }
}

/// The ledger line of an untagged child an ensure step finished.
fn child_record(resource_type: &str, id: &str, created: bool, persistent: bool) -> LedgerRecord {
    if created {
        record(resource_type, id, LedgerAction::Created, persistent, None)
    } else {
        record(
            resource_type,
            id,
            LedgerAction::Adopted,
            persistent,
            Some("existed before this run: its undo leaves it in place".into()),
        )
    }
}

/// One untagged child, one step further: GET it; when it is missing and not journaled yet,
/// journal it as created by this run (durable) and only then let [`durable::ensure`] PUT
/// it. A child found existing that the journal does not list existed before this run.
/// `Ensured::created` is whether the journal lists it.
///
/// (The GET here and the one inside [`durable::ensure`] are two reads: a child deleted by
/// someone else between them is created without being journaled, so it is recorded
/// adopted and left behind by the undo — a leak, never the deletion of something that is
/// not ours.)
async fn ensure_child(
    ctx: &StepContext,
    arm: &ArmClient,
    journal: &mut ChildrenJournal,
    spec: &EnsureSpec,
    parent_new: bool,
    read: Option<Option<Value>>,
) -> Result<Progress<Ensured>, StepError> {
    let mut seen = None;
    if !journal.lists(&spec.id) {
        // A parent this run created had no children before it: nothing to read. `read`:
        // the caller read it in this very attempt (before any intent of it was journaled).
        let existing = if parent_new {
            None
        } else if let Some(read) = read {
            read
        } else {
            arm.get_value(&spec.id, &spec.api)
                .await
                .map_err(|e| StepError::from(e.with_resource(&spec.id)))?
        };
        if existing.is_none() {
            journal.record_creating(ctx, &spec.id).await?;
        }
        seen = Some(existing);
    }
    // What this attempt just read (before journaling its intent) is not read again: one
    // GET per child, not two. A later attempt (the child journaled) reads anew.
    let progress = durable::ensure_seen(ctx, arm, spec, seen).await?;
    Ok(progress.map(|mut e| {
        e.created = journal.lists(&e.id);
        e
    }))
}

/// Ensure untagged child resources (federated credentials, DNS records), one at a time
/// (with `converge`, repair-cluster's, one that exists but no longer says what we write is
/// written again and recorded `updated`):
/// Azure refuses concurrent writes on some parents. A child still being written makes the
/// whole step wait (`Outcome::Wait`); the next attempt skips the children already there.
///
/// Each child this run creates is journaled ([`ChildrenJournal`]) before its PUT, so
/// [`delete_children`] can tell it from one that existed before the run: those are
/// recorded `adopted` and never deleted by this run's undo. `parent_new`: this run created
/// the parent (its ledger says so), so a child not yet journaled cannot exist and is not
/// read before its PUT (one write per resource where nothing can be there).
///
/// # Errors
/// ARM errors, classified; a failed journal write (retryable).
#[allow(clippy::too_many_arguments)]
pub async fn ensure_children(
    ctx: &StepContext,
    arm: &ArmClient,
    owner: &Owner,
    resource_type: &str,
    api: &str,
    children: Vec<(String, Value)>,
    persistent: bool,
    converge: bool,
    parent_new: bool,
) -> Result<Outcome<Vec<LedgerRecord>>, StepError> {
    let mut journal = ChildrenJournal::of_action(ctx)?;
    let mut ledger = Vec::new();
    for (id, body) in children {
        let spec = EnsureSpec {
            id: id.clone(),
            api: api.to_string(),
            body,
            adopt: Adopt::OursOnly,
            tagged: false,
            ownership: owner.ownership(ctx),
            read_query: &[],
        };
        match ensure_child(ctx, arm, &mut journal, &spec, parent_new, None).await? {
            Progress::Pending { after, reason } => return Ok(ctx.wait(after, reason)),
            Progress::Done(e) if converge && !e.created && !contains_ci(&e.body, &spec.body) => {
                // repair-cluster: ours (in a parent of ours, at our deterministic name) but
                // no longer what we wrote: an A record re-pointed, a credential federated with another
                // issuer (`hcp-workflow verify` reports it). Written again: a plain PUT,
                // synchronous for these types, so a repeat after a crash finds it right.
                arm.put(&id, api, &spec.body)
                    .await
                    .map_err(|e| StepError::from(e.with_resource(&id)))?;
                ledger.push(record(
                    resource_type,
                    &id,
                    LedgerAction::Updated,
                    persistent,
                    Some("had drifted from what hcp-workflow wrote: written again".into()),
                ));
            }
            Progress::Done(e) => {
                ledger.push(child_record(resource_type, &id, e.created, persistent))
            }
        }
    }
    Ok(Outcome::Done(ledger))
}

/// Whether `have` (what ARM returns) says everything `want` (what we PUT) sets: object keys
/// matched case-insensitively (ARM echoes `TTL` as `ttl`), arrays element by element, and
/// what ARM adds beside them (ids, etags, provisioning state) is no difference.
pub fn contains_ci(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (_, Value::Null) => true,
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, wv)| {
            wv.is_null()
                || h.iter()
                    .find(|(hk, _)| hk.eq_ignore_ascii_case(k))
                    .is_some_and(|(_, hv)| contains_ci(hv, wv))
        }),
        (Value::Array(h), Value::Array(w)) => {
            h.len() == w.len() && h.iter().zip(w).all(|(a, b)| contains_ci(a, b))
        }
        _ => have == want,
    }
}

/// The undo of [`ensure_children`] (and of an untagged [`ensure_resource`]): delete, one at
/// a time, only the children this run created; keep every other one.
///
/// "Created by this run" means listed in the forward action's [`ChildrenJournal`] (read
/// with `StepContext::action_checkpoint`, so it holds whether the action succeeded,
/// failed, or crashed between journaling a child and its PUT — a listed child that does
/// not exist is simply gone). `ids` are the children the step manages; journaled ids
/// outside it are deleted too (the journal is the truth).
///
/// **Runs journaled by an older binary** have no journal. Deleting by name what we cannot
/// prove we created would break the rule this exists for, so then only the children the
/// step's *output* recorded as `created` are deleted (the old binary recorded `created`
/// exactly when its own PUT created the child; a child created by a crashed earlier
/// attempt was recorded `adopted`, and is kept: a possible leak, never a wrong delete).
/// With neither journal nor output nothing is deleted, and the undo's ledger says so.
///
/// The undo's ledger (undo checkpoint member [`UNDO_LEDGER_KEY`]) lists every child as
/// `deleted`, `gone` or `kept` (with the reason). Running the undo again is harmless:
/// deleted children are gone, kept ones are still kept.
///
/// # Errors
/// ARM errors, classified; a failed journal write (retryable).
pub async fn delete_children(
    ctx: &StepContext,
    arm: &ArmClient,
    resource_type: &str,
    api: &str,
    ids: &[String],
    output_ledger: Option<&[LedgerRecord]>,
    persistent: bool,
) -> Result<UndoOutcome, StepError> {
    let journal = ChildrenJournal::of_undo(ctx)?;
    let output_created: Vec<&str> = output_ledger
        .unwrap_or_default()
        .iter()
        .filter(|r| r.action == LedgerAction::Created)
        .map(|r| r.id.as_str())
        .collect();
    let created = |id: &str| {
        journal.as_ref().is_some_and(|j| j.lists(id))
            || output_created.iter().any(|c| c.eq_ignore_ascii_case(id))
    };
    let mut all: Vec<String> = ids.to_vec();
    for id in journal.iter().flat_map(|j| j.creating.iter()) {
        if !all.iter().any(|a| a.eq_ignore_ascii_case(id)) {
            all.push(id.clone());
        }
    }
    let keep_note = match (&journal, output_ledger) {
        (Some(_), _) => {
            "existed before this run (not in its journal of created children): left in place"
        }
        (None, Some(_)) => {
            "recorded as adopted by this run (journaled by an older hcp-workflow, which kept no journal of created children): left in place"
        }
        (None, None) => {
            "this run has no record of creating it (no journal of created children and no output: an older hcp-workflow, or nothing created): left in place"
        }
    };
    if journal.is_none() && all.iter().any(|id| !created(id)) {
        tracing::info!(
            node = ctx.node(),
            "undo of untagged children without a journal of created children: deleting only what the step's output recorded as created"
        );
    }
    let mut undo_ledger: Vec<LedgerRecord> =
        durable::checkpoint_field(ctx, UNDO_LEDGER_KEY)?.unwrap_or_default();
    let before = undo_ledger.clone();
    for id in &all {
        let rec = if created(id) {
            match durable::delete(ctx, arm, id, api, None).await? {
                Progress::Pending { after, reason } => {
                    if undo_ledger != before {
                        durable::save_checkpoint_field(ctx, UNDO_LEDGER_KEY, &undo_ledger).await?;
                    }
                    return Ok(ctx.undo_wait(after, reason));
                }
                Progress::Done(Deleted::Deleted) => {
                    record(resource_type, id, LedgerAction::Deleted, persistent, None)
                }
                // Without an ownership to check, `delete` never keeps anything.
                Progress::Done(Deleted::KeptNotOurs) => {
                    record(resource_type, id, LedgerAction::Kept, persistent, None)
                }
                // Gone now; if an earlier attempt of this undo deleted it, keep saying so.
                Progress::Done(Deleted::Gone) => {
                    let earlier = undo_ledger.iter().any(|r| {
                        r.id.eq_ignore_ascii_case(id) && r.action == LedgerAction::Deleted
                    });
                    let action = if earlier {
                        LedgerAction::Deleted
                    } else {
                        LedgerAction::Gone
                    };
                    record(resource_type, id, action, persistent, None)
                }
            }
        } else {
            tracing::info!(node = ctx.node(), %id, "undo keeps {keep_note}");
            record(
                resource_type,
                id,
                LedgerAction::Kept,
                persistent,
                Some(keep_note.to_string()),
            )
        };
        match undo_ledger
            .iter_mut()
            .find(|r| r.id.eq_ignore_ascii_case(id))
        {
            Some(r) => *r = rec,
            None => undo_ledger.push(rec),
        }
    }
    if undo_ledger != before {
        durable::save_checkpoint_field(ctx, UNDO_LEDGER_KEY, &undo_ledger).await?;
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
    ($ensure:ident, $delete:ident, $kind:literal, ensure: [$($ea:expr),* $(,)?], delete: [$($da:expr),* $(,)?] $(,)?) => {
        plain_kind!(@ensure $ensure, $kind, [$($ea),*]);
        delete_kind!($delete, $kind, [$($da),*]);
    };
    (@ensure $ensure:ident, $kind:literal, [$($ea:expr),*]) => {
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

        impl Facts for $ensure {
            const ARM_ACTIONS: &'static [&'static str] = &[$($ea),*];
        }
    };
}

macro_rules! delete_kind {
    ($delete:ident, $kind:literal, [$($da:expr),* $(,)?]) => {
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

        impl Facts for $delete {
            const ARM_ACTIONS: &'static [&'static str] = &[$($da),*];
        }
    };
}

/// The resource group's own operations (its list: what is in it, before a delete).
const RG_READ: &str = "Microsoft.Resources/subscriptions/resourceGroups/read";
const RG_WRITE: &str = "Microsoft.Resources/subscriptions/resourceGroups/write";
const RG_DELETE: &str = "Microsoft.Resources/subscriptions/resourceGroups/delete";
const RG_LIST: &str = "Microsoft.Resources/subscriptions/resourceGroups/resources/read";

plain_kind!(
    EnsureResourceGroup,
    DeleteResourceGroup,
    "resource-group",
    ensure: [
        RG_READ, RG_WRITE, RG_LIST, RG_DELETE
    ],
    delete: [
        RG_READ, RG_LIST, RG_DELETE
    ],
);
plain_kind!(
    EnsureIdentity,
    DeleteIdentity,
    "identity",
    ensure: [
        "Microsoft.ManagedIdentity/userAssignedIdentities/read",
        "Microsoft.ManagedIdentity/userAssignedIdentities/write",
        "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
    ],
    delete: [
        "Microsoft.ManagedIdentity/userAssignedIdentities/read",
        "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
    ],
);
plain_kind!(
    EnsureNsg,
    DeleteNsg,
    "nsg",
    ensure: [
        "Microsoft.Network/networkSecurityGroups/read",
        "Microsoft.Network/networkSecurityGroups/write",
        "Microsoft.Network/networkSecurityGroups/delete",
    ],
    delete: [
        "Microsoft.Network/networkSecurityGroups/read",
        "Microsoft.Network/networkSecurityGroups/delete",
    ],
);
plain_kind!(
    EnsureVnet,
    DeleteVnet,
    "vnet",
    ensure: [
        "Microsoft.Network/virtualNetworks/read",
        "Microsoft.Network/virtualNetworks/write",
        "Microsoft.Network/virtualNetworks/delete",
        // The subnet references the NSG.
        "Microsoft.Network/networkSecurityGroups/join/action",
    ],
    delete: [
        "Microsoft.Network/virtualNetworks/read",
        "Microsoft.Network/virtualNetworks/delete",
    ],
);
plain_kind!(
    EnsureSubnet,
    DeleteSubnet,
    "subnet",
    ensure: [
        "Microsoft.Network/virtualNetworks/read",
        "Microsoft.Network/virtualNetworks/subnets/read",
        "Microsoft.Network/virtualNetworks/subnets/write",
        "Microsoft.Network/virtualNetworks/subnets/delete",
    ],
    delete: [
        "Microsoft.Network/virtualNetworks/subnets/read",
        "Microsoft.Network/virtualNetworks/subnets/delete",
    ],
);
plain_kind!(
    EnsurePublicIp,
    DeletePublicIp,
    "public-ip",
    ensure: [
        "Microsoft.Network/publicIPAddresses/read",
        "Microsoft.Network/publicIPAddresses/write",
        "Microsoft.Network/publicIPAddresses/delete",
    ],
    delete: [
        "Microsoft.Network/publicIPAddresses/read",
        "Microsoft.Network/publicIPAddresses/delete",
    ],
);
plain_kind!(
    EnsureLoadBalancer,
    DeleteLoadBalancer,
    "load-balancer",
    ensure: [
        "Microsoft.Network/loadBalancers/read",
        "Microsoft.Network/loadBalancers/write",
        "Microsoft.Network/loadBalancers/delete",
        // The frontend references the public IP.
        "Microsoft.Network/publicIPAddresses/join/action",
    ],
    delete: [
        "Microsoft.Network/loadBalancers/read",
        "Microsoft.Network/loadBalancers/delete",
    ],
);
plain_kind!(
    EnsureDnsZone,
    DeleteDnsZone,
    "private-dns-zone",
    ensure: [
        "Microsoft.Network/privateDnsZones/read",
        "Microsoft.Network/privateDnsZones/write",
        "Microsoft.Network/privateDnsZones/delete",
    ],
    delete: [
        "Microsoft.Network/privateDnsZones/read",
        "Microsoft.Network/privateDnsZones/delete",
    ],
);
plain_kind!(
    EnsureDnsLink,
    DeleteDnsLink,
    "private-dns-link",
    ensure: [
        "Microsoft.Network/privateDnsZones/virtualNetworkLinks/read",
        "Microsoft.Network/privateDnsZones/virtualNetworkLinks/write",
        "Microsoft.Network/privateDnsZones/virtualNetworkLinks/delete",
    ],
    delete: [
        "Microsoft.Network/privateDnsZones/virtualNetworkLinks/read",
        "Microsoft.Network/privateDnsZones/virtualNetworkLinks/delete",
    ],
);
plain_kind!(
    EnsureStorageAccount,
    DeleteStorageAccount,
    "storage-account",
    ensure: [
        "Microsoft.Storage/storageAccounts/read",
        "Microsoft.Storage/storageAccounts/write",
        "Microsoft.Storage/storageAccounts/delete",
    ],
    delete: [
        "Microsoft.Storage/storageAccounts/read",
        "Microsoft.Storage/storageAccounts/delete",
    ],
);
plain_kind!(
    EnsureContainer,
    DeleteContainer,
    "blob-container",
    ensure: [
        "Microsoft.Storage/storageAccounts/blobServices/containers/read",
        "Microsoft.Storage/storageAccounts/blobServices/containers/write",
        "Microsoft.Storage/storageAccounts/blobServices/containers/delete",
    ],
    delete: [
        "Microsoft.Storage/storageAccounts/blobServices/containers/read",
        "Microsoft.Storage/storageAccounts/blobServices/containers/delete",
    ],
);
delete_kind!(
    DeleteFederatedCredential,
    "federated-credential",
    [
        "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/read",
        "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/delete",
    ]
);
delete_kind!(
    DeleteRoleAssignment,
    "role-assignment",
    [
        "Microsoft.Authorization/roleAssignments/read",
        "Microsoft.Authorization/roleAssignments/delete",
    ]
);
delete_kind!(
    DeleteDnsRecord,
    "private-dns-a-record",
    [
        "Microsoft.Network/privateDnsZones/A/read",
        "Microsoft.Network/privateDnsZones/A/delete",
    ]
);
delete_kind!(
    DeletePrivateEndpoint,
    "private-endpoint",
    [
        "Microsoft.Network/privateEndpoints/read",
        "Microsoft.Network/privateEndpoints/delete",
    ]
);
