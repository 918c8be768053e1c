//! Saga definitions: a DAG of nodes built once from the workflow's input, then persisted
//! with the run.
//!
//! A workflow is a sequence of **stages**; the nodes of a stage run in parallel and each
//! depends on every node of the previous stage (a barrier), unless it names extra
//! intra-stage predecessors with [`NodeOptions::after`] (e.g. federated credentials written
//! one at a time per identity). Nodes are included or left out by ordinary `if`s in the
//! workflow's builder code: the decision is taken once, when the DAG is built, and the
//! persisted DAG is what recovery uses — never today's code's idea of it.
//!
//! # Guarantees
//! - Node names are unique within a DAG (they are journal keys: a persisted name is an API).
//! - Every [`Ref`] inside a node's input points at an ancestor of that node, checked at
//!   build time, so a step can only read outputs that are guaranteed to exist when it runs.

use crate::action::Action;
use crate::retry::RetryPolicy;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::marker::PhantomData;

/// Errors found while building a DAG (a workflow-definition bug or bad input).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DagError {
    /// Two nodes share a name.
    #[error("duplicate node name `{0}`")]
    DuplicateNode(String),
    /// A node was added before any stage was opened.
    #[error("node `{0}` added outside a stage: call `stage()` first")]
    NoStage(String),
    /// `after` or a `$ref` names a node that is not an earlier node.
    #[error("node `{node}` refers to `{target}`, which is not one of its ancestors")]
    NotAnAncestor {
        /// The referring node.
        node: String,
        /// The missing or later node.
        target: String,
    },
    /// The node's input could not be serialized.
    #[error("input of node `{node}` cannot be serialized: {message}")]
    Input {
        /// The node.
        node: String,
        /// serde's explanation.
        message: String,
    },
    /// A DAG with no nodes.
    #[error("workflow `{0}` has no nodes")]
    Empty(String),
    /// A node marked as a pivot runs an action that declares an undo: a pivot's effect is
    /// the point of no return, so it has none.
    #[error("node `{0}` is marked as a pivot but its action declares an undo")]
    PivotWithUndo(String),
}

/// What a run does when one of its steps fails for good (after its retries).
///
/// Persisted with the DAG, so a run keeps the policy it was started with whatever a later
/// binary's default is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum FailurePolicy {
    /// Undo every started step in reverse order (the classic saga).
    #[default]
    Unwind,
    /// Keep every step's work and wait for an operator (`retry` redrives the failed step,
    /// `cancel` unwinds). With a deadline: unwind by itself once the deadline passes with
    /// nobody having acted (a journaled timer, so it survives restarts).
    Pause {
        /// Seconds after the failure at which the run unwinds by itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_secs: Option<u64>,
    },
}

impl FailurePolicy {
    /// `pause`, unwinding by itself `deadline` after the failure (`None`: never).
    pub fn pause(deadline: Option<std::time::Duration>) -> Self {
        Self::Pause {
            deadline_secs: deadline.map(|d| d.as_secs().max(1)),
        }
    }

    /// The pause deadline, if any.
    pub fn deadline(self) -> Option<std::time::Duration> {
        match self {
            Self::Pause {
                deadline_secs: Some(s),
            } => Some(std::time::Duration::from_secs(s)),
            _ => None,
        }
    }

    /// Whether this is the default (`unwind`): not serialized then, so DAGs persisted
    /// before policies existed read back unchanged.
    pub fn is_unwind(&self) -> bool {
        *self == Self::Unwind
    }
}

impl fmt::Display for FailurePolicy {
    /// `unwind`, `pause` or `pause=24h` (the flag's own syntax).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unwind => f.write_str("unwind"),
            Self::Pause {
                deadline_secs: None,
            } => f.write_str("pause"),
            Self::Pause {
                deadline_secs: Some(s),
            } => write!(f, "pause={}", short_duration(*s)),
        }
    }
}

/// `90` → `90s`, `3600` → `1h`, `86400` → `24h`, `5400` → `90m`: the largest unit (up to
/// hours, the way operators write deadlines) that divides exactly.
pub fn short_duration(secs: u64) -> String {
    for (unit, n) in [("h", 3_600), ("m", 60)] {
        if secs >= n && secs.is_multiple_of(n) {
            return format!("{}{unit}", secs / n);
        }
    }
    format!("{secs}s")
}

/// One node as persisted with the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Unique, stable name, e.g. `create-cluster.pls.ensure`.
    pub name: String,
    /// Registered action implementing it.
    pub action: String,
    /// Stage label (display and progress bars).
    pub stage: String,
    /// Serialized typed input.
    pub input: serde_json::Value,
    /// Names of the nodes that must succeed before this one starts.
    pub deps: Vec<String>,
    /// Retry policy of the action.
    pub retry: RetryPolicy,
    /// Retry policy of the undo.
    pub undo_retry: RetryPolicy,
    /// Whether the action declares an undo.
    pub has_undo: bool,
    /// Set on a pivot: the step cannot be undone, and once it has succeeded the run never
    /// unwinds past it. The text says why (shown by `plan` and `show`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pivot: Option<String>,
}

/// A built saga: what gets persisted with a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SagaDag {
    /// Workflow name, e.g. `create-cluster`.
    pub workflow: String,
    /// Version of the workflow definition that built this DAG.
    pub version: u32,
    /// Stage names in order.
    pub stages: Vec<String>,
    /// Nodes in a topological order (every node after its deps).
    pub nodes: Vec<NodeSpec>,
    /// What the run does when a step fails for good.
    #[serde(default, skip_serializing_if = "FailurePolicy::is_unwind")]
    pub on_failure: FailurePolicy,
    /// The workflow's own record of what it applies (a cluster's applied configuration,
    /// secrets as hashes), journaled with the run. The engine never reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<serde_json::Value>,
}

impl SagaDag {
    /// Look a node up by name.
    pub fn node(&self, name: &str) -> Option<&NodeSpec> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Map from node name to the names of the nodes that depend on it directly.
    pub fn dependents(&self) -> HashMap<&str, Vec<&str>> {
        let mut m: HashMap<&str, Vec<&str>> = HashMap::new();
        for n in &self.nodes {
            m.entry(n.name.as_str()).or_default();
            for d in &n.deps {
                m.entry(d.as_str()).or_default().push(n.name.as_str());
            }
        }
        m
    }

    /// Whether `node` (an index) is a strict descendant of `of`: it depends on it, directly
    /// or through other nodes.
    pub fn descends_from(&self, node: usize, of: usize) -> bool {
        let Some(target) = self.nodes.get(of).map(|n| n.name.as_str()) else {
            return false;
        };
        let mut stack: Vec<&str> = match self.nodes.get(node) {
            Some(n) => n.deps.iter().map(String::as_str).collect(),
            None => return false,
        };
        let mut seen = BTreeSet::new();
        while let Some(d) = stack.pop() {
            if d == target {
                return true;
            }
            if seen.insert(d)
                && let Some(n) = self.node(d)
            {
                stack.extend(n.deps.iter().map(String::as_str));
            }
        }
        false
    }

    /// Whether any node is a pivot.
    pub fn has_pivots(&self) -> bool {
        self.nodes.iter().any(|n| n.pivot.is_some())
    }

    /// Whether every node is a pivot: the workflow only goes forward (a delete).
    pub fn forward_only(&self) -> bool {
        !self.nodes.is_empty() && self.nodes.iter().all(|n| n.pivot.is_some())
    }
}

/// A typed reference to the output of an earlier node. Serialized as `{"$ref": "<node>"}`
/// inside a node's input; read back with [`crate::StepContext::output`].
pub struct Ref<T> {
    node: String,
    _t: PhantomData<fn() -> T>,
}

impl<T> Ref<T> {
    /// The referenced node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The same node seen with another output type (e.g. `serde_json::Value`, to read
    /// one field of its output through a pointer).
    pub fn retype<U>(&self) -> Ref<U> {
        Ref {
            node: self.node.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> Clone for Ref<T> {
    fn clone(&self) -> Self {
        Self {
            node: self.node.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Ref<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ref({})", self.node)
    }
}

impl<T> PartialEq for Ref<T> {
    fn eq(&self, other: &Self) -> bool {
        self.node == other.node
    }
}

#[derive(Serialize, Deserialize)]
struct RefRepr {
    #[serde(rename = "$ref")]
    node: String,
}

impl<T> Serialize for Ref<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RefRepr {
            node: self.node.clone(),
        }
        .serialize(s)
    }
}

impl<'de, T> Deserialize<'de> for Ref<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = RefRepr::deserialize(d)?;
        Ok(Ref {
            node: r.node,
            _t: PhantomData,
        })
    }
}

/// Per-node options; defaults come from the action.
#[derive(Debug, Default, Clone)]
pub struct NodeOptions {
    /// Override the action's retry policy.
    pub retry: Option<RetryPolicy>,
    /// Override the undo's retry policy.
    pub undo_retry: Option<RetryPolicy>,
    /// Extra predecessors inside the current stage.
    pub after: Vec<String>,
    /// Mark the node as a pivot (why it cannot be undone); its action must have no undo.
    pub pivot: Option<String>,
}

impl NodeOptions {
    /// Run after `r` (in addition to the stage barrier).
    pub fn after<T>(mut self, r: &Ref<T>) -> Self {
        self.after.push(r.node.clone());
        self
    }

    /// Use this action retry policy.
    pub fn retry(mut self, p: RetryPolicy) -> Self {
        self.retry = Some(p);
        self
    }

    /// Use this undo retry policy.
    pub fn undo_retry(mut self, p: RetryPolicy) -> Self {
        self.undo_retry = Some(p);
        self
    }

    /// Mark the node as a pivot: its effect is the point of no return. `why` is shown to
    /// operators (`⚑ pivot: <why>`).
    pub fn pivot(mut self, why: impl Into<String>) -> Self {
        self.pivot = Some(why.into());
        self
    }
}

/// Builds a [`SagaDag`].
#[derive(Debug)]
pub struct SagaBuilder {
    dag: SagaDag,
    /// Nodes of the stage before the current one (the barrier).
    barrier: Vec<String>,
    /// Nodes of the current stage.
    current: Vec<String>,
    ancestors: HashMap<String, BTreeSet<String>>,
}

impl SagaBuilder {
    /// Start a DAG for `workflow` at definition `version`.
    pub fn new(workflow: impl Into<String>, version: u32) -> Self {
        Self {
            dag: SagaDag {
                workflow: workflow.into(),
                version,
                stages: Vec::new(),
                nodes: Vec::new(),
                on_failure: FailurePolicy::Unwind,
                record: None,
            },
            barrier: Vec::new(),
            current: Vec::new(),
            ancestors: HashMap::new(),
        }
    }

    /// The workflow's default failure policy (a start may override it).
    pub fn on_failure(&mut self, policy: FailurePolicy) -> &mut Self {
        self.dag.on_failure = policy;
        self
    }

    /// Open a new stage: nodes added from now on depend on every node of the previous
    /// non-empty stage.
    pub fn stage(&mut self, name: impl Into<String>) -> &mut Self {
        if !self.current.is_empty() {
            self.barrier = std::mem::take(&mut self.current);
        }
        self.dag.stages.push(name.into());
        self
    }

    /// Add a node running action `A` with `input`.
    ///
    /// # Errors
    /// [`DagError`] on a duplicate name, a missing stage, an `after`/`$ref` that is not an
    /// ancestor, or an unserializable input.
    pub fn add<A: Action>(
        &mut self,
        name: impl Into<String>,
        input: &A::Input,
        opts: NodeOptions,
    ) -> Result<Ref<A::Output>, DagError> {
        let name = name.into();
        let Some(stage) = self.dag.stages.last().cloned() else {
            return Err(DagError::NoStage(name));
        };
        if self.ancestors.contains_key(&name) {
            return Err(DagError::DuplicateNode(name));
        }
        if opts.pivot.is_some() && A::HAS_UNDO {
            return Err(DagError::PivotWithUndo(name));
        }
        let input = serde_json::to_value(input).map_err(|e| DagError::Input {
            node: name.clone(),
            message: e.to_string(),
        })?;
        let mut deps: Vec<String> = self.barrier.clone();
        for a in &opts.after {
            if !self.current.contains(a) && !self.ancestors.contains_key(a) {
                return Err(DagError::NotAnAncestor {
                    node: name,
                    target: a.clone(),
                });
            }
            if !deps.contains(a) {
                deps.push(a.clone());
            }
        }
        let mut anc = BTreeSet::new();
        for d in &deps {
            anc.insert(d.clone());
            if let Some(a) = self.ancestors.get(d) {
                anc.extend(a.iter().cloned());
            }
        }
        let mut refs = Vec::new();
        collect_refs(&input, &mut refs);
        for r in refs {
            if !anc.contains(&r) {
                return Err(DagError::NotAnAncestor {
                    node: name,
                    target: r,
                });
            }
        }
        self.ancestors.insert(name.clone(), anc);
        self.current.push(name.clone());
        self.dag.nodes.push(NodeSpec {
            name: name.clone(),
            action: A::NAME.to_string(),
            stage,
            input,
            deps,
            retry: opts.retry.unwrap_or_else(A::retry_policy),
            undo_retry: opts.undo_retry.unwrap_or_else(A::undo_retry_policy),
            has_undo: A::HAS_UNDO,
            pivot: opts.pivot,
        });
        Ok(Ref {
            node: name,
            _t: PhantomData,
        })
    }

    /// Finish the DAG.
    ///
    /// # Errors
    /// [`DagError::Empty`] when no node was added.
    pub fn build(self) -> Result<SagaDag, DagError> {
        if self.dag.nodes.is_empty() {
            return Err(DagError::Empty(self.dag.workflow));
        }
        Ok(self.dag)
    }
}

/// Every `{"$ref": name}` object inside `v`.
pub(crate) fn collect_refs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if m.len() == 1
                && let Some(serde_json::Value::String(s)) = m.get("$ref")
            {
                out.push(s.clone());
                return;
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

/// Decode a typed value, mapping failure to a permanent definition error.
pub(crate) fn decode<T: DeserializeOwned>(
    what: &str,
    v: serde_json::Value,
) -> Result<T, crate::StepError> {
    serde_json::from_value(v).map_err(|e| {
        crate::StepError::permanent(
            crate::error::kind::DEFINITION,
            format!("{what} does not decode into this binary's type: {e}"),
        )
    })
}
