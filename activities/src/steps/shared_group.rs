//! The persistent resource group, shared by many clusters.
//!
//! HyperShift's docs describe one persistent group (e.g. `os4-common`) holding the
//! identities and OIDC issuers of many hosted clusters. So this group is not one cluster's
//! resource like the managed, VNet and NSG groups:
//!
//! - **ensure** adopts any existing group except another cluster's *own* group (one tagged
//!   with another cluster's ownership whose name is one of that cluster's derived group
//!   names `<name>-<infraID>`, `<name>-vnet-<infraID>`, `<name>-nsg-<infraID>`: pointing
//!   `persistentResourceGroup` there is a mistake, refused before anything is written).
//!   A missing group is created with our ownership tags plus [`TAG_SHARED`]` = persistent`,
//!   which says "made by hcp-workflow to be shared".
//! - **undo** (a failed or cancelled create) deletes the group only when this very run
//!   created it *and* it holds no resources at all — another cluster may have put its
//!   identities there meanwhile. Otherwise it is kept, and the ledger says why.
//! - **delete** (`delete-cluster --purge-persistent`, which has already deleted this
//!   cluster's own persistent resources) deletes the group only when hcp-workflow made it
//!   (the shared marker, or this cluster's tags from an hcp-workflow before shared groups)
//!   *and* nothing is left inside. A group the user made (no hcp-workflow tags) is never
//!   deleted.
//!
//! "Holds no resources" is read with ARM's generic resource list
//! (`GET …/resourceGroups/{g}/resources`, `Resources_ListByResourceGroup` in
//! `specification/resources/resource-manager/Microsoft.Resources/stable/2021-04-01/resources.json`).
//! ARM has no conditional group delete, so a resource another cluster creates between that
//! list and the DELETE would be lost: the window is one round trip, and both clusters
//! would have to be mid-run on one group whose creator is unwinding or purging. Known gap,
//! stated in docs/dev/design/ownership.md.

use super::arm::{DeleteInput, DeleteOutput, ResourceInput, ResourceOutput, UNDO_LEDGER_KEY};
use crate::azure::ArmClient;
use crate::azure::durable::{
    self, Adopt, Deleted, EnsureSpec, Progress, TAG_CLUSTER, TAG_INFRA_ID, TAG_RUN,
};
use crate::azure::models::is_deleting;
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Outcome, StepContext, StepError, UndoOutcome};
use serde_json::Value;

/// Tag marking a group hcp-workflow created to be shared by clusters.
pub const TAG_SHARED: &str = "hcp-workflow.io/shared";
/// Value of [`TAG_SHARED`] on the persistent group.
pub const SHARED_PERSISTENT: &str = "persistent";

/// api-version of the generic resource list (Microsoft.Resources).
const RESOURCES_API: &str = "2021-04-01";

/// How soon to look at a group again that is being deleted or appeared meanwhile.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// What an existing group is, from its tags and name.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// Carries [`TAG_SHARED`]: made by hcp-workflow to be shared.
    Shared,
    /// No hcp-workflow tag at all: the user's.
    Users,
    /// This cluster's tags without the marker (an hcp-workflow before shared groups).
    OursLegacy,
    /// Another cluster's tags, under a name that is not one of its own groups: a
    /// persistent group first used by that cluster before shared groups existed.
    OtherClustersPersistent(String),
    /// Another cluster's own (managed, VNet or NSG) group.
    OtherClustersOwn { cluster: String, infra_id: String },
}

fn tag<'a>(tags: Option<&'a Value>, k: &str) -> Option<&'a str> {
    tags.and_then(|t| t.get(k)).and_then(Value::as_str)
}

fn classify(name: &str, tags: Option<&Value>, input_owns: bool) -> Kind {
    if tag(tags, TAG_SHARED).is_some() {
        return Kind::Shared;
    }
    let any_ours = tags
        .and_then(Value::as_object)
        .is_some_and(|m| m.keys().any(|k| k.starts_with("hcp-workflow.io/")));
    if !any_ours {
        return Kind::Users;
    }
    if input_owns {
        return Kind::OursLegacy;
    }
    let cluster = tag(tags, TAG_CLUSTER).unwrap_or_default().to_string();
    let infra_id = tag(tags, TAG_INFRA_ID).unwrap_or_default().to_string();
    let own_names = [
        format!("{cluster}-{infra_id}"),
        format!("{cluster}-vnet-{infra_id}"),
        format!("{cluster}-nsg-{infra_id}"),
    ];
    if !cluster.is_empty() && own_names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
        Kind::OtherClustersOwn { cluster, infra_id }
    } else {
        Kind::OtherClustersPersistent(cluster)
    }
}

fn group_name(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

fn rec(input_type: &str, id: &str, action: LedgerAction, note: &str) -> LedgerRecord {
    super::arm::record(input_type, id, action, true, Some(note.to_string()))
}

/// Ensure the shared persistent group: adopt, or create it marked as shared.
///
/// # Errors
/// `NotOurs` (permanent, nothing written) when the group is another cluster's own group;
/// ARM errors, classified.
pub async fn ensure(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &ResourceInput,
) -> Result<Outcome<ResourceOutput>, StepError> {
    let id = input.id.as_str();
    let existing = arm
        .get_value(id, &input.api)
        .await
        .map_err(|e| StepError::from(e.with_resource(id)))?;
    if let Some(body) = existing {
        if is_deleting(&body) {
            return Ok(ctx.wait(
                LOOK_AGAIN,
                format!("waiting for Azure to finish deleting resource group {id}"),
            ));
        }
        let tags = body.get("tags");
        let created = input.owner.created_by(tags, ctx);
        let (action, note) = match classify(group_name(id), tags, input.owner.owns(tags)) {
            Kind::Shared => (
                LedgerAction::created_or_adopted(created),
                "shared persistent group: deleted only when empty".to_string(),
            ),
            Kind::OursLegacy => (
                LedgerAction::created_or_adopted(created),
                "persistent group (this cluster's tags): shared, deleted only when empty"
                    .to_string(),
            ),
            Kind::Users => (
                LedgerAction::Adopted,
                "user-provided persistent group: never deleted".to_string(),
            ),
            Kind::OtherClustersPersistent(c) => (
                LedgerAction::Adopted,
                format!(
                    "persistent group first used by cluster {c}: shared, never deleted by this cluster"
                ),
            ),
            Kind::OtherClustersOwn { cluster, infra_id } => {
                return Err(StepError::permanent(
                    "ownership",
                    format!(
                        "refusing to use {id} as the persistent resource group: it is cluster {cluster}'s own resource group \
                         (infra id {infra_id}), deleted with that cluster — set `persistentResourceGroup` to a group meant to outlive clusters \
                         (e.g. `os4-common`), then start again"
                    ),
                )
                .with_code("NotOurs"));
            }
        };
        return Ok(Outcome::Done(ResourceOutput {
            id: id.to_string(),
            ledger: vec![rec(&input.resource_type, id, action, &note)],
            body,
        }));
    }
    let mut body = input.body.clone();
    if let Some(obj) = body.as_object_mut() {
        let mut tags = match obj.get("tags") {
            Some(Value::Object(t)) => t.clone(),
            _ => serde_json::Map::new(),
        };
        for (k, v) in input.owner.tags(ctx) {
            tags.insert(k, Value::String(v));
        }
        tags.insert(TAG_SHARED.into(), Value::String(SHARED_PERSISTENT.into()));
        obj.insert("tags".into(), Value::Object(tags));
    }
    let spec = EnsureSpec {
        id: id.to_string(),
        api: input.api.clone(),
        body,
        adopt: Adopt::OursOnly,
        tagged: true,
        ownership: input.owner.ownership(ctx),
        read_query: &[],
    };
    // This attempt has just read the group and found nothing: `ensure_seen` does not read
    // it again (one read where a read is needed). A second GET would not close
    // the window for a group created by someone else meanwhile, only move it by one round
    // trip. After a crash anywhere below, the next attempt starts again from the GET above
    // (and `ensure_seen` reads anew whenever an earlier attempt journaled a write).
    match durable::ensure_seen(ctx, arm, &spec, Some(None)).await {
        Ok(Progress::Pending { after, reason }) => Ok(ctx.wait(after, reason)),
        Ok(Progress::Done(e)) => {
            let created = input.owner.created_by(e.body.get("tags"), ctx);
            Ok(Outcome::Done(ResourceOutput {
                id: e.id.clone(),
                ledger: vec![rec(
                    &input.resource_type,
                    &e.id,
                    LedgerAction::created_or_adopted(created),
                    "shared persistent group: deleted only when empty",
                )],
                body: e.body,
            }))
        }
        // Another cluster created it between our GET and durable's: look again.
        Err(e) if e.code.as_deref() == Some("NotOurs") => Ok(ctx.wait(
            LOOK_AGAIN,
            format!("resource group {id} appeared meanwhile: reading its tags again"),
        )),
        Err(e) => Err(e),
    }
}

/// Top-level resources left in the group (ids), or `None` when the group is gone.
async fn contents(arm: &ArmClient, id: &str) -> Result<Option<Vec<String>>, StepError> {
    match arm
        .list_values(&format!("{id}/resources"), RESOURCES_API)
        .await
    {
        Ok(v) => Ok(Some(
            v.iter()
                .filter_map(|r| r.get("id").and_then(Value::as_str).map(str::to_string))
                .collect(),
        )),
        Err(e) if e.status == 404 => Ok(None),
        Err(e) => Err(StepError::from(e.with_resource(id))),
    }
}

fn still_holds(left: &[String]) -> String {
    let first: Vec<&str> = left.iter().take(3).map(|s| group_name(s)).collect();
    format!(
        "shared persistent group still holds {} resource(s) ({}{}): left in place",
        left.len(),
        first.join(", "),
        if left.len() > 3 { ", …" } else { "" }
    )
}

/// The undo of [`ensure`]: delete the group only if this run created it and it is empty.
///
/// # Errors
/// ARM errors, classified; a failed checkpoint write.
pub async fn remove(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &ResourceInput,
) -> Result<UndoOutcome, StepError> {
    let id = input.id.as_str();
    let Some(body) = arm
        .get_value(id, &input.api)
        .await
        .map_err(|e| StepError::from(e.with_resource(id)))?
    else {
        return Ok(UndoOutcome::Done);
    };
    let tags = body.get("tags");
    let this_run = input.owner.ownership(ctx).is_this_run(tags)
        && tag(tags, TAG_RUN).is_some()
        && tag(tags, TAG_SHARED).is_some();
    if !this_run {
        return keep(ctx, input, "existed before this run: left in place").await;
    }
    if !is_deleting(&body)
        && let Some(left) = contents(arm, id).await?
        && !left.is_empty()
    {
        return keep(ctx, input, &still_holds(&left)).await;
    }
    let progress = durable::delete(ctx, arm, id, &input.api, None).await?;
    Ok(progress.into_undo(ctx))
}

async fn keep(
    ctx: &StepContext,
    input: &ResourceInput,
    note: &str,
) -> Result<UndoOutcome, StepError> {
    tracing::info!(node = ctx.node(), id = %input.id, "undo keeps the persistent group: {note}");
    let ledger = vec![rec(
        &input.resource_type,
        &input.id,
        LedgerAction::Kept,
        note,
    )];
    durable::save_checkpoint_field(ctx, UNDO_LEDGER_KEY, &ledger).await?;
    Ok(UndoOutcome::Done)
}

/// delete-cluster's purge of the shared group: only if hcp-workflow made it and it is
/// empty (this cluster's own persistent resources are deleted by earlier nodes).
///
/// # Errors
/// ARM errors, classified.
pub async fn delete(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &DeleteInput,
) -> Result<Outcome<DeleteOutput>, StepError> {
    let id = input.id.as_str();
    let done = |action: LedgerAction, note: Option<String>| {
        Outcome::Done(DeleteOutput {
            ledger: vec![super::arm::record(
                &input.resource_type,
                id,
                action,
                true,
                note,
            )],
        })
    };
    // Once our DELETE is under way, keep following it (durable journals the operation).
    if durable::has_journaled_delete(ctx, id)? {
        return follow_delete(ctx, arm, input, done).await;
    }
    let Some(body) = arm
        .get_value(id, &input.api)
        .await
        .map_err(|e| StepError::from(e.with_resource(id)))?
    else {
        return Ok(done(LedgerAction::Gone, None));
    };
    let tags = body.get("tags");
    match classify(group_name(id), tags, input.owner.owns(tags)) {
        Kind::Shared | Kind::OursLegacy => {}
        Kind::Users => {
            return Ok(done(
                LedgerAction::Kept,
                Some("user-provided persistent group: never deleted".into()),
            ));
        }
        Kind::OtherClustersPersistent(c) => {
            return Ok(done(
                LedgerAction::Kept,
                Some(format!(
                    "persistent group first used by cluster {c}: left in place"
                )),
            ));
        }
        Kind::OtherClustersOwn { cluster, .. } => {
            return Ok(done(
                LedgerAction::Kept,
                Some(format!(
                    "cluster {cluster}'s own resource group: left in place"
                )),
            ));
        }
    }
    if !is_deleting(&body)
        && let Some(left) = contents(arm, id).await?
        && !left.is_empty()
    {
        return Ok(done(LedgerAction::Kept, Some(still_holds(&left))));
    }
    follow_delete(ctx, arm, input, done).await
}

async fn follow_delete(
    ctx: &StepContext,
    arm: &ArmClient,
    input: &DeleteInput,
    done: impl Fn(LedgerAction, Option<String>) -> Outcome<DeleteOutput>,
) -> Result<Outcome<DeleteOutput>, StepError> {
    match durable::delete(ctx, arm, &input.id, &input.api, None).await? {
        Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
        Progress::Done(Deleted::Gone) => Ok(done(LedgerAction::Gone, None)),
        Progress::Done(Deleted::Deleted) => Ok(done(LedgerAction::Deleted, None)),
        Progress::Done(Deleted::KeptNotOurs) => Ok(done(LedgerAction::Kept, None)),
    }
}

/// `preflight`: whether an existing group named `name` with `tags` may serve as this
/// cluster's persistent group, by the rules [`ensure`] applies (`owns`: the tags are this
/// cluster's). `Ok`: what it is; `Err`: why [`ensure`] would refuse it.
///
/// # Errors
/// The group is another cluster's own (managed, VNet or NSG) group.
pub fn compatible(name: &str, tags: Option<&Value>, owns: bool) -> Result<String, String> {
    match classify(name, tags, owns) {
        Kind::Shared => Ok("exists, shared persistent group made by hcp-workflow".into()),
        Kind::OursLegacy => Ok("exists with this cluster's tags".into()),
        Kind::Users => Ok("exists, the user's group (adopted, never deleted)".into()),
        Kind::OtherClustersPersistent(c) => Ok(format!(
            "exists, persistent group first used by cluster {c} (shared)"
        )),
        Kind::OtherClustersOwn { cluster, infra_id } => Err(format!(
            "it is cluster {cluster}'s own resource group (infra id {infra_id}), deleted with that cluster"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classification_of_existing_groups() {
        assert_eq!(classify("os4-common", None, false), Kind::Users);
        assert_eq!(
            classify("os4-common", Some(&json!({"team": "x"})), false),
            Kind::Users
        );
        assert_eq!(
            classify(
                "os4-common",
                Some(&json!({TAG_SHARED: "persistent", TAG_CLUSTER: "a"})),
                false
            ),
            Kind::Shared
        );
        let a = json!({TAG_CLUSTER: "a", TAG_INFRA_ID: "a-x1"});
        assert_eq!(classify("hcp-persistent", Some(&a), true), Kind::OursLegacy);
        assert_eq!(
            classify("hcp-persistent", Some(&a), false),
            Kind::OtherClustersPersistent("a".into())
        );
        for own in ["a-a-x1", "a-vnet-a-x1", "A-NSG-A-X1"] {
            assert_eq!(
                classify(own, Some(&a), false),
                Kind::OtherClustersOwn {
                    cluster: "a".into(),
                    infra_id: "a-x1".into()
                },
                "{own}"
            );
        }
    }
}
