//! The engine-facing helpers: ensure or delete one ARM resource, durably.
//!
//! This is where the journal contract for Azure lives. A step calls [`ensure`] or
//! [`delete`] once per attempt; the helper looks at the world (and at the node's
//! checkpoint), does at most one write, and answers [`Progress::Done`] or
//! [`Progress::Pending`] — never sleeping for a long-running operation in memory. The
//! step turns `Pending` into the engine's durable `Wait` ([`Progress::into_outcome`]) and
//! the engine calls it again later, possibly in another process.
//!
//! # Guarantees
//! - **Journal before waiting.** When ARM accepts a PUT or DELETE as a long-running
//!   operation, its polling URL is saved with `StepContext::save_checkpoint` *before*
//!   `Pending` is returned. A resumed attempt polls that URL instead of sending the write
//!   again. (A crash between the write and the save is covered by the next point.)
//! - **Look before writing.** Without a journaled operation, the resource is read first:
//!   an existing resource of ours is never re-PUT (so repeated `ensure` calls send no second
//!   PUT, and a VNet's subnet list is never replaced behind a running cluster), and a
//!   missing one is never DELETEd. One read is carried over to the next attempt: a
//!   resource read missing whose PUT the ARM budget then held back (nothing sent) is
//!   journaled as such ([`UNSENT_KEY`]) and not read again; that record is removed
//!   durably before the PUT is sent, so an attempt after a crash reads again. And where
//!   the ledger proves nothing can be there (a parent this run created), the first PUT is
//!   sent unread ([`ensure_new`]) after journaling that it is about to be; from then on
//!   the resource is read like any other.
//! - **Ownership.** A tagged resource is ours when its `hcp-workflow.io/cluster` and
//!   `hcp-workflow.io/infra-id` tags match ([`Ownership::is_ours`]; the run tag may differ:
//!   an earlier run of the same cluster). [`ensure`] refuses to adopt anything else
//!   (`NotOurs`, permanent, no PUT); [`delete`] given an ownership never deletes anything
//!   else ([`Deleted::KeptNotOurs`], no DELETE). Untagged child resources (subnets,
//!   federated credentials, role assignments, connections, DNS records) have deterministic
//!   names under a parent we own; existing under that name is the ownership evidence
//!   for adoption, never for deletion by an undo: which run created one is journaled by
//!   the step (`steps::arm::ChildrenJournal`).
//! - **No re-tagging on adoption.** An adopted resource keeps the `hcp-workflow.io/run` tag
//!   of the run that created it. Re-tagging it with the adopting run is not needed: the
//!   store admits at most one unfinished run per cluster, so the run the tag names has
//!   finished (succeeded, or rolled back) before a later run can adopt the resource and
//!   can never unwind again — and re-tagging would make the adopting run's own undo
//!   ([`delete_created`]) take a resource that existed before that run.
//! - **Failed operations do not stick.** A journaled operation that ended `Failed` is
//!   dropped from the checkpoint before its error is returned, so `hcp-workflow retry`
//!   re-issues the write instead of re-reading the old failure.
//!
//! # Checkpoint layout
//! The node's checkpoint is a JSON object; these helpers own its
//! [`OPERATIONS_KEY`] member (a map from lower-cased resource id to the pending
//! operation) and keep every other member as they found it. An action that saves its own
//! checkpoint must keep that member (use [`save_checkpoint_field`]).
//!
//! # Caveats
//! - An existing resource of ours is not compared with the desired body: drift is
//!   reported (the final body is returned in [`Ensured::body`]) but not corrected.
//! - A resource of ours in provisioning state `Failed` is re-PUT once per attempt (Azure's
//!   documented remedy); a bring-your-own one is a permanent error.

use std::collections::BTreeMap;
use std::time::Duration;

use hcp_runtime::StepError;
use hcp_runtime::action::{Outcome, StepContext, UndoOutcome};
use hcp_runtime::error::kind;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::client::{ArmClient, DeleteResponse, Operation, OperationStatus};
use super::models::provisioning_state;

/// Checkpoint member holding the journaled long-running operations.
pub const OPERATIONS_KEY: &str = "azure-operations";
/// Checkpoint member holding the resources this step read as missing and whose PUT the
/// ARM budget then held back (never sent), with when they were read.
pub const UNSENT_KEY: &str = "azure-unsent-puts";
/// Checkpoint member holding the resources this step PUT (or was about to PUT) without
/// reading them first, because they live in a parent this run created ([`ensure_new`]):
/// written durably before that PUT, so every later attempt reads.
pub const UNREAD_KEY: &str = "azure-unread-puts";
/// How long a read that found a resource missing is trusted by the next attempt of a step
/// whose PUT the ARM budget held back ([`UNSENT_KEY`]); older, it is read again.
pub const UNSENT_TRUST: Duration = Duration::from_secs(15 * 60);
/// Tag: cluster name.
pub const TAG_CLUSTER: &str = "hcp-workflow.io/cluster";
/// Tag: infra id.
pub const TAG_INFRA_ID: &str = "hcp-workflow.io/infra-id";
/// Tag: run id.
pub const TAG_RUN: &str = "hcp-workflow.io/run";

/// Polling interval when ARM suggests none (its usual `Retry-After` for network LROs).
pub const DEFAULT_POLL: Duration = Duration::from_secs(10);

/// The process's polling interval when ARM suggests none: [`DEFAULT_POLL`], unless the
/// process talks to a simulator on a fast time scale ([`set_default_poll`]).
static DEFAULT_POLL_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(DEFAULT_POLL.as_millis() as u64);

/// Set the polling interval used when ARM suggests none (process-wide).
pub fn set_default_poll(d: Duration) {
    DEFAULT_POLL_MS.store(
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// The polling interval used when ARM suggests none.
pub fn default_poll() -> Duration {
    Duration::from_millis(DEFAULT_POLL_MS.load(std::sync::atomic::Ordering::Relaxed))
}
/// Longest wait between two looks, whatever the server suggests.
pub const MAX_POLL: Duration = Duration::from_secs(300);

/// Where a durable operation stands after one attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress<T> {
    /// Finished.
    Done(T),
    /// Not yet: look again after `after`.
    Pending {
        /// When to look again.
        after: Duration,
        /// What we are waiting for (shown to operators).
        reason: String,
    },
}

impl<T> Progress<T> {
    /// The engine outcome of an action: `Done`, or a durable `Wait`.
    pub fn into_outcome(self, ctx: &StepContext) -> Outcome<T> {
        match self {
            Progress::Done(v) => Outcome::Done(v),
            Progress::Pending { after, reason } => ctx.wait(after, reason),
        }
    }

    /// The engine outcome of an undo (the value is dropped).
    pub fn into_undo(self, ctx: &StepContext) -> UndoOutcome {
        match self {
            Progress::Done(_) => UndoOutcome::Done,
            Progress::Pending { after, reason } => ctx.undo_wait(after, reason),
        }
    }

    /// Maps the finished value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Progress<U> {
        match self {
            Progress::Done(v) => Progress::Done(f(v)),
            Progress::Pending { after, reason } => Progress::Pending { after, reason },
        }
    }

    /// Whether finished.
    pub fn is_done(&self) -> bool {
        matches!(self, Progress::Done(_))
    }

    fn pending(after: Option<Duration>, reason: impl Into<String>) -> Self {
        Progress::Pending {
            after: after.unwrap_or_else(default_poll).min(MAX_POLL),
            reason: reason.into(),
        }
    }
}

/// The ownership tags of one cluster (and run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ownership {
    /// `hcp-workflow.io/cluster`, `hcp-workflow.io/infra-id`, `hcp-workflow.io/run`.
    pub tags: BTreeMap<String, String>,
}

impl Ownership {
    /// The three tags of a cluster and run.
    pub fn new(cluster: &str, infra_id: &str, run: &str) -> Self {
        Self {
            tags: BTreeMap::from([
                (TAG_CLUSTER.to_string(), cluster.to_string()),
                (TAG_INFRA_ID.to_string(), infra_id.to_string()),
                (TAG_RUN.to_string(), run.to_string()),
            ]),
        }
    }

    fn tag(&self, k: &str) -> Option<&str> {
        self.tags
            .get(k)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Whether it names a cluster and an infra id (without them nothing is ours).
    pub fn is_complete(&self) -> bool {
        self.tag(TAG_CLUSTER).is_some() && self.tag(TAG_INFRA_ID).is_some()
    }

    /// Whether a resource with these `tags` (its `tags` member, possibly absent) belongs
    /// to our cluster: cluster and infra-id tags match; the run tag may differ.
    pub fn is_ours(&self, tags: Option<&Value>) -> bool {
        let get = |k: &str| tags.and_then(|t| t.get(k)).and_then(Value::as_str);
        self.is_complete()
            && get(TAG_CLUSTER) == self.tag(TAG_CLUSTER)
            && get(TAG_INFRA_ID) == self.tag(TAG_INFRA_ID)
    }

    /// Whether a resource with these tags was created by this ownership's run.
    pub fn is_this_run(&self, tags: Option<&Value>) -> bool {
        self.is_ours(tags)
            && self.tag(TAG_RUN).is_some()
            && tags.and_then(|t| t.get(TAG_RUN)).and_then(Value::as_str) == self.tag(TAG_RUN)
    }

    /// The tags as a JSON object (for request bodies).
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.tags
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    }
}

/// Whether an existing resource may be adopted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Adopt {
    /// Only resources of ours (tags) are adopted; missing ones are created.
    #[default]
    OursOnly,
    /// Bring-your-own: any existing resource is used read-only; it is never written, and
    /// a missing one is an error.
    Any,
}

/// What [`ensure`] should make exist.
#[derive(Debug, Clone, PartialEq)]
pub struct EnsureSpec {
    /// ARM id.
    pub id: String,
    /// Pinned api-version.
    pub api: String,
    /// PUT body (for tagged resources the ownership tags are merged into `tags`).
    pub body: Value,
    /// Adoption rule.
    pub adopt: Adopt,
    /// Whether the type carries tags (child resources do not).
    pub tagged: bool,
    /// Our ownership tags.
    pub ownership: Ownership,
    /// Query parameters of the read before a write ([`super::models::read_query`]: a private
    /// endpoint is read with its network interfaces); empty for most types.
    pub read_query: &'static [(&'static str, &'static str)],
}

/// A resource that exists as asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ensured {
    /// ARM id.
    pub id: String,
    /// Final body as ARM returns it.
    pub body: Value,
    /// Whether this run created it (a PUT by this run, or our run tag on it).
    pub created: bool,
}

/// What [`delete`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Deleted {
    /// It did not exist.
    Gone,
    /// It existed and is now deleted.
    Deleted,
    /// It exists and is not ours: left in place, never DELETEd.
    KeptNotOurs,
}

/// A journaled long-running write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOperation {
    /// ARM id of the resource.
    pub id: String,
    /// `put` or `delete`.
    pub verb: Verb,
    /// How to poll it.
    pub operation: Operation,
}

/// The write a journaled operation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// Create or replace.
    Put,
    /// Delete.
    Delete,
}

fn checkpoint_object(ctx: &StepContext) -> Result<Map<String, Value>, StepError> {
    Ok(match ctx.checkpoint::<Value>()? {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    })
}

/// One member of the node's checkpoint object.
///
/// # Errors
/// A permanent `definition` error when the member does not decode into `T`.
pub fn checkpoint_field<T: DeserializeOwned>(
    ctx: &StepContext,
    key: &str,
) -> Result<Option<T>, StepError> {
    match checkpoint_object(ctx)?.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
            StepError::permanent(kind::DEFINITION, format!("checkpoint member `{key}`: {e}"))
        }),
    }
}

/// Saves one member of the node's checkpoint object, keeping the others.
///
/// # Errors
/// The journal write failed (retryable), or `value` is not serializable.
pub async fn save_checkpoint_field<T: Serialize>(
    ctx: &StepContext,
    key: &str,
    value: &T,
) -> Result<(), StepError> {
    let v = serde_json::to_value(value).map_err(|e| {
        StepError::permanent(kind::DEFINITION, format!("checkpoint member `{key}`: {e}"))
    })?;
    let mut obj = checkpoint_object(ctx)?;
    obj.insert(key.to_string(), v);
    ctx.save_checkpoint(&Value::Object(obj)).await
}

fn operations(ctx: &StepContext) -> Result<BTreeMap<String, PendingOperation>, StepError> {
    Ok(checkpoint_field(ctx, OPERATIONS_KEY)?.unwrap_or_default())
}

/// Whether this attempt's checkpoint journals a DELETE of `id` still to be followed.
///
/// # Errors
/// A checkpoint that does not parse.
pub fn has_journaled_delete(ctx: &StepContext, id: &str) -> Result<bool, StepError> {
    Ok(journaled(ctx, id, Verb::Delete)?.is_some())
}

/// Whether this step's checkpoint journals a PUT of `id` still to be followed (its
/// long-running operation is polled by the next [`ensure`] before anything else).
///
/// # Errors
/// A checkpoint that does not parse.
pub fn has_journaled_put(ctx: &StepContext, id: &str) -> Result<bool, StepError> {
    Ok(journaled(ctx, id, Verb::Put)?.is_some())
}

/// Resources read as missing whose PUT was held back by the ARM budget: lower-cased id →
/// when the read was made (journal clock, ms).
fn unsent(ctx: &StepContext) -> Result<BTreeMap<String, i64>, StepError> {
    Ok(checkpoint_field(ctx, UNSENT_KEY)?.unwrap_or_default())
}

/// When this step read `id` missing, if it journaled that read, recently, and that no PUT
/// of it has been sent since ([`UNSENT_KEY`]). Also used for role assignments
/// (`roles::recalled_missing`).
pub(crate) fn unsent_missing(ctx: &StepContext, id: &str) -> Result<Option<i64>, StepError> {
    let trust = i64::try_from(UNSENT_TRUST.as_millis()).unwrap_or(i64::MAX);
    Ok(unsent(ctx)?
        .get(&id.to_ascii_lowercase())
        .copied()
        .filter(|at| ctx.now().0.saturating_sub(*at) <= trust))
}

/// `PUT id` keeping the [`UNSENT_KEY`] record true (for [`ensure`] and role assignments).
/// The record of `id` is removed durably before the PUT can leave: from then on it may
/// have been sent, so any later attempt (after a crash at any point) reads the resource
/// again. When the ARM budget holds the PUT back (`ArmBudgetWait`: `ArmClient::send` sent
/// nothing) and the step knew the resource missing (`missing_since`, journal clock ms), the
/// record is written, so the engine's soft retry at the budget's turn PUTs without reading
/// again; a crash before it is durable only costs that read. The outer error:
/// the checkpoint could not be written; the inner: ARM's answer, for the caller.
pub(crate) async fn put_keeping_unsent(
    ctx: &StepContext,
    arm: &ArmClient,
    id: &str,
    api: &str,
    body: &Value,
    missing_since: Option<i64>,
) -> Result<Result<super::client::PutResponse, super::error::ArmError>, StepError> {
    mark_unsent(ctx, id, None).await?;
    let out = arm.put(id, api, body).await;
    if let (Err(e), Some(at)) = (&out, missing_since)
        && e.code == "ArmBudgetWait"
    {
        mark_unsent(ctx, id, Some(at)).await?;
    }
    Ok(out)
}

/// Records (`Some(read at)`) or forgets (`None`) that `id` was read missing and its PUT not
/// sent; durable before returning. Forgetting something not recorded writes nothing.
async fn mark_unsent(ctx: &StepContext, id: &str, read_at: Option<i64>) -> Result<(), StepError> {
    let mut all = unsent(ctx)?;
    let key = id.to_ascii_lowercase();
    match read_at {
        Some(at) => {
            all.insert(key, at);
        }
        None => {
            if all.remove(&key).is_none() {
                return Ok(());
            }
        }
    }
    save_checkpoint_field(ctx, UNSENT_KEY, &all).await
}

fn journaled(ctx: &StepContext, id: &str, verb: Verb) -> Result<Option<Operation>, StepError> {
    Ok(operations(ctx)?
        .remove(&id.to_ascii_lowercase())
        .filter(|p| p.verb == verb)
        .map(|p| p.operation))
}

async fn journal(
    ctx: &StepContext,
    id: &str,
    verb: Verb,
    op: Option<&Operation>,
) -> Result<(), StepError> {
    let mut ops = operations(ctx)?;
    let key = id.to_ascii_lowercase();
    match op {
        Some(op) => {
            ops.insert(
                key,
                PendingOperation {
                    id: id.to_string(),
                    verb,
                    operation: op.clone(),
                },
            );
        }
        None => {
            if ops.remove(&key).is_none() {
                return Ok(());
            }
        }
    }
    save_checkpoint_field(ctx, OPERATIONS_KEY, &ops).await
}

/// Provisioning state of a body, classified.
enum Prov {
    Terminal,
    Failed(String),
    Busy(String),
}

fn prov(body: &Value) -> Prov {
    match provisioning_state(body) {
        None => Prov::Terminal,
        Some(s) if s.eq_ignore_ascii_case("Succeeded") => Prov::Terminal,
        Some(s) if s.eq_ignore_ascii_case("Failed") || s.eq_ignore_ascii_case("Canceled") => {
            Prov::Failed(s.to_string())
        }
        Some(s) => Prov::Busy(s.to_string()),
    }
}

/// Where a journaled operation stands, from the caller's point of view.
enum Polled {
    /// Still running: wait.
    Wait(Option<Duration>),
    /// Finished (or forgotten by ARM): look at the resource.
    Look,
}

async fn poll_journaled(
    ctx: &StepContext,
    arm: &ArmClient,
    id: &str,
    verb: Verb,
    op: &Operation,
) -> Result<Polled, StepError> {
    match arm.poll(op).await {
        Ok(OperationStatus::InProgress { retry_after }) => Ok(Polled::Wait(retry_after)),
        Ok(OperationStatus::Succeeded) => Ok(Polled::Look),
        Ok(OperationStatus::Failed(e)) => {
            journal(ctx, id, verb, None).await?;
            let e = if verb == Verb::Delete {
                e.while_deleting()
            } else {
                e
            };
            Err(e.with_resource(id).into())
        }
        // The operation expired or ARM forgot it: the resource tells the truth.
        Err(e) if e.status == 404 => Ok(Polled::Look),
        Err(e) => Err(e.with_resource(id).into()),
    }
}

fn not_ours(id: &str, tags: Option<&Value>, ownership: &Ownership) -> StepError {
    let seen = match tags {
        Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()).to_string(),
        _ => "none".to_string(),
    };
    StepError::permanent(
        "ownership",
        format!(
            "refusing to adopt {id}: it exists but is not tagged as this cluster's (tags seen: {seen}; \
             expected {TAG_CLUSTER}={} and {TAG_INFRA_ID}={}) — tag it or remove it, then run it again",
            ownership.tag(TAG_CLUSTER).unwrap_or_default(),
            ownership.tag(TAG_INFRA_ID).unwrap_or_default(),
        ),
    )
    .with_code("NotOurs")
}

fn failed_state(id: &str, state: &str) -> StepError {
    StepError::permanent(
        "azure",
        format!(
            "Azure reports {id} in provisioning state {state} — inspect it in the portal, fix or delete it, then run it again"
        ),
    )
    .with_code("ProvisioningFailed")
}

/// Makes the resource exist (create it, or adopt ours) — one step further per call.
///
/// See the module's `# Guarantees`. Errors carry the ARM classification (throttling,
/// conflicts and replication delays retryable; validation, authorization and quota
/// permanent).
///
/// # Errors
/// - `NotOurs` (permanent): the resource exists without our tags (tagged types with
///   [`Adopt::OursOnly`]); nothing was written.
/// - `ResourceNotFound` (permanent): a bring-your-own resource is missing.
/// - `ProvisioningFailed` (permanent): a bring-your-own resource is in state `Failed`.
/// - ARM errors of the GET, PUT or poll, classified; a failed operation's error.
pub async fn ensure(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &EnsureSpec,
) -> Result<Progress<Ensured>, StepError> {
    ensure_seen(ctx, arm, spec, None).await
}

/// [`ensure`] for a resource whose parent (resource group, zone) this run created, as its
/// ledger proves: nothing can have been there before this run, so the first attempt that
/// gets here sends its PUT without reading first (no GET where the journal
/// knows the answer). Which resources were so written is journaled ([`UNREAD_KEY`])
/// durably *before* the PUT can leave; every later call for the same resource — another
/// attempt, a poll after a `Wait`, the attempt after a crash at any point — reads it as
/// [`ensure`] does, so a PUT that may have been sent is never sent blind a second time.
///
/// The caller proves the parent new; a parent that existed before the run (adopted,
/// bring-your-own, an operator's) must go through [`ensure`].
///
/// # Errors
/// As [`ensure`]; a failed journal write (retryable).
pub async fn ensure_new(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &EnsureSpec,
) -> Result<Progress<Ensured>, StepError> {
    let key = spec.id.to_ascii_lowercase();
    let mut unread: std::collections::BTreeSet<String> =
        checkpoint_field(ctx, UNREAD_KEY)?.unwrap_or_default();
    if unread.contains(&key) || journaled(ctx, &spec.id, Verb::Put)?.is_some() {
        return ensure_seen(ctx, arm, spec, None).await;
    }
    unread.insert(key);
    save_checkpoint_field(ctx, UNREAD_KEY, &unread).await?;
    ensure_seen(ctx, arm, spec, Some(None)).await
}

/// [`ensure`] when this attempt has just read the resource: `seen` is `Some(what it
/// found)` (`Some(None)`: nothing), and it is not read again. `None`: read it. A write
/// journaled by an earlier attempt is always polled and the resource read anew.
///
/// # Errors
/// As [`ensure`].
pub async fn ensure_seen(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &EnsureSpec,
    seen: Option<Option<Value>>,
) -> Result<Progress<Ensured>, StepError> {
    let id = spec.id.as_str();
    if spec.tagged && spec.adopt == Adopt::OursOnly && !spec.ownership.is_complete() {
        return Err(StepError::permanent(
            kind::DEFINITION,
            format!("ensure {id}: the ownership names no cluster and infra id"),
        ));
    }
    let mut created = false;
    let mut seen = seen;
    if let Some(op) = journaled(ctx, id, Verb::Put)? {
        seen = None;
        match poll_journaled(ctx, arm, id, Verb::Put, &op).await? {
            Polled::Wait(after) => {
                return Ok(Progress::pending(
                    after.or(op.retry_after),
                    format!("waiting for Azure to finish writing {id}"),
                ));
            }
            Polled::Look => created = true,
        }
    }
    let mut read_at = ctx.now().0;
    if created {
        // Polled above: the read below is this attempt's own.
    } else if seen.is_none()
        && let Some(at) = unsent_missing(ctx, id)?
    {
        // An earlier attempt of this step read it missing, then the ARM budget held its PUT
        // back (nothing was sent: see `put`) and the step went back to the engine. That
        // read still stands (no second read of what this step already learned):
        // the marker is removed durably before any PUT is sent, so after a crash once the
        // PUT may have gone out the next attempt reads again; it is trusted for
        // `UNSENT_TRUST` only (an operator's `retry` much later reads again).
        seen = Some(None);
        read_at = at;
    }
    let existing = match seen {
        Some(v) => v,
        None => arm
            .get_value_with(id, &spec.api, spec.read_query)
            .await
            .map_err(|e| StepError::from(e.with_resource(id)))?,
    };
    match existing {
        Some(body) => {
            if spec.adopt == Adopt::Any {
                return match prov(&body) {
                    Prov::Terminal => Ok(Progress::Done(Ensured {
                        id: id.to_string(),
                        body,
                        created: false,
                    })),
                    Prov::Failed(s) => Err(failed_state(id, &s)),
                    Prov::Busy(s) => Ok(Progress::pending(
                        None,
                        format!("waiting for {id} to leave provisioning state {s}"),
                    )),
                };
            }
            let tags = body.get("tags");
            if spec.tagged && !spec.ownership.is_ours(tags) {
                return Err(not_ours(id, tags, &spec.ownership));
            }
            let created = created || (spec.tagged && spec.ownership.is_this_run(tags));
            match prov(&body) {
                Prov::Terminal => Ok(Progress::Done(Ensured {
                    id: id.to_string(),
                    body,
                    created,
                })),
                Prov::Busy(s) => Ok(Progress::pending(
                    None,
                    format!("waiting for {id} to leave provisioning state {s}"),
                )),
                Prov::Failed(s) => {
                    tracing::warn!(%id, state = %s, "resource of ours in a failed state: writing it again");
                    put(ctx, arm, spec, created, None).await
                }
            }
        }
        None if spec.adopt == Adopt::Any => Err(StepError::permanent(
            kind::VALIDATION,
            format!(
                "bring-your-own resource {id} does not exist (or this identity cannot read it) — create it or fix the id, then run it again"
            ),
        )
        .with_code("ResourceNotFound")),
        None => put(ctx, arm, spec, true, Some(read_at)).await,
    }
}

fn with_tags(spec: &EnsureSpec) -> Value {
    let mut body = spec.body.clone();
    if spec.tagged
        && let Some(obj) = body.as_object_mut()
    {
        let mut tags = match obj.get("tags") {
            Some(Value::Object(t)) => t.clone(),
            _ => Map::new(),
        };
        for (k, v) in &spec.ownership.tags {
            tags.insert(k.clone(), Value::String(v.clone()));
        }
        obj.insert("tags".into(), Value::Object(tags));
    }
    body
}

/// `missing_since`: the resource was read missing (at that time, ms); `None`: it exists
/// (a failed one written again).
async fn put(
    ctx: &StepContext,
    arm: &ArmClient,
    spec: &EnsureSpec,
    created: bool,
    missing_since: Option<i64>,
) -> Result<Progress<Ensured>, StepError> {
    let id = spec.id.as_str();
    let rsp = put_keeping_unsent(ctx, arm, id, &spec.api, &with_tags(spec), missing_since)
        .await?
        .map_err(|e| StepError::from(e.with_resource(id)))?;
    if let Some(op) = &rsp.operation {
        journal(ctx, id, Verb::Put, Some(op)).await?;
        return Ok(Progress::pending(
            op.retry_after,
            format!("waiting for Azure to create {id}"),
        ));
    }
    match rsp.body {
        Some(body) => match prov(&body) {
            Prov::Terminal => Ok(Progress::Done(Ensured {
                id: id.to_string(),
                body,
                created,
            })),
            Prov::Failed(s) => Err(failed_state(id, &s)),
            Prov::Busy(s) => Ok(Progress::pending(
                None,
                format!("waiting for {id} to leave provisioning state {s}"),
            )),
        },
        // 202 without a polling header, or an empty 200/201: look again later.
        None => Ok(Progress::pending(
            None,
            format!("waiting for Azure to create {id}"),
        )),
    }
}

/// Deletes the resource if it exists (and, when `ownership` is given, only if ours) — one
/// step further per call.
///
/// See the module's `# Guarantees`.
///
/// # Errors
/// ARM errors of the GET, DELETE or poll, classified (e.g. `InUseSubnetCannotBeDeleted`
/// is retryable); a failed operation's error.
pub async fn delete(
    ctx: &StepContext,
    arm: &ArmClient,
    id: &str,
    api: &str,
    ownership: Option<&Ownership>,
) -> Result<Progress<Deleted>, StepError> {
    delete_checked(ctx, arm, id, api, ownership.map(|o| (o, false))).await
}

/// [`delete`] for compensations: deletes the resource only if *this run* created it
/// (tag `hcp-workflow.io/run`); anything else — including ours from an earlier run — is
/// `KeptNotOurs`, so a failed run leaves what existed before it.
///
/// # Errors
/// As [`delete`].
pub async fn delete_created(
    ctx: &StepContext,
    arm: &ArmClient,
    id: &str,
    api: &str,
    ownership: &Ownership,
) -> Result<Progress<Deleted>, StepError> {
    delete_checked(ctx, arm, id, api, Some((ownership, true))).await
}

/// `check`: the ownership to require, and whether it must be this very run's.
async fn delete_checked(
    ctx: &StepContext,
    arm: &ArmClient,
    id: &str,
    api: &str,
    check: Option<(&Ownership, bool)>,
) -> Result<Progress<Deleted>, StepError> {
    let mut deleted = false;
    if let Some(op) = journaled(ctx, id, Verb::Delete)? {
        match poll_journaled(ctx, arm, id, Verb::Delete, &op).await? {
            Polled::Wait(after) => {
                return Ok(Progress::pending(
                    after.or(op.retry_after),
                    format!("waiting for Azure to delete {id}"),
                ));
            }
            Polled::Look => deleted = true,
        }
    }
    let existing = arm
        .get_value(id, api)
        .await
        .map_err(|e| StepError::from(e.with_resource(id)))?;
    let Some(body) = existing else {
        return Ok(Progress::Done(if deleted {
            Deleted::Deleted
        } else {
            Deleted::Gone
        }));
    };
    if let Some((own, this_run)) = check {
        let tags = body.get("tags");
        let keep = if this_run {
            !own.is_this_run(tags)
        } else {
            !own.is_ours(tags)
        };
        if keep {
            return Ok(Progress::Done(Deleted::KeptNotOurs));
        }
    }
    // Already being deleted: by this step's own DELETE when a crash came between Azure
    // accepting it and the operation being journaled, or by another run of ours. A second DELETE
    // would only race the first (several providers answer it 409
    // AnotherOperationInProgress): wait for it to be gone.
    if super::models::is_deleting(&body) {
        return Ok(Progress::pending(
            None,
            format!("waiting for Azure to finish deleting {id}"),
        ));
    }
    let rsp = arm
        .delete(id, api)
        .await
        .map_err(|e| StepError::from(e.with_resource(id)))?;
    match rsp {
        DeleteResponse::Gone | DeleteResponse::Done => Ok(Progress::Done(Deleted::Deleted)),
        DeleteResponse::Accepted(op) => {
            journal(ctx, id, Verb::Delete, Some(&op)).await?;
            Ok(Progress::pending(
                op.retry_after,
                format!("waiting for Azure to delete {id}"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ownership_rules() {
        let own = Ownership::new("demo", "abc12", "run-1");
        let tags = json!({TAG_CLUSTER: "demo", TAG_INFRA_ID: "abc12", TAG_RUN: "run-0"});
        assert!(own.is_ours(Some(&tags)));
        assert!(!own.is_this_run(Some(&tags)));
        let this = json!({TAG_CLUSTER: "demo", TAG_INFRA_ID: "abc12", TAG_RUN: "run-1"});
        assert!(own.is_this_run(Some(&this)));
        assert!(!own.is_ours(Some(&json!({TAG_CLUSTER: "demo"}))));
        assert!(!own.is_ours(None));
        assert!(!Ownership::default().is_ours(Some(&json!({}))));
        assert_eq!(own.to_json()[TAG_RUN], "run-1");
    }

    #[test]
    fn tags_are_merged_into_tagged_bodies() {
        let spec = EnsureSpec {
            id: "/subscriptions/s/resourceGroups/rg".into(),
            api: "2021-04-01".into(),
            body: json!({"location": "eastus", "tags": {"team": "x"}}),
            adopt: Adopt::OursOnly,
            tagged: true,
            ownership: Ownership::new("demo", "abc12", "r"),
            read_query: &[],
        };
        let b = with_tags(&spec);
        assert_eq!(b["tags"]["team"], "x");
        assert_eq!(b["tags"][TAG_CLUSTER], "demo");
        let untagged = EnsureSpec {
            tagged: false,
            ..spec
        };
        assert!(with_tags(&untagged)["tags"].get(TAG_CLUSTER).is_none());
    }
}
