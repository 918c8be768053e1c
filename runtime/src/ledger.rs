//! The resource ledger: what a run created, adopted, kept or deleted, and which node did it.
//!
//! The engine knows nothing about Azure or Kubernetes, so the ledger is a *convention over
//! journaled data* rather than a second log that could disagree with the journal:
//!
//! - a step's **output** may carry a top-level `"ledger"` array of [`LedgerRecord`]s (what
//!   the step created, adopted, found gone, or deleted — delete workflows record deletions
//!   this way);
//! - a node's **undo checkpoint** may carry a `"ledger"` array too (an undo that wants to
//!   say exactly what it removed);
//! - a node whose stuck undo an operator **resolved** by hand records every resource its
//!   output recorded as `created` as `resolved` (by whom, with their note): nobody here
//!   saw it go, so it stays visible;
//! - otherwise, when a node is **undone**, every resource its output recorded as `created`
//!   is recorded as `deleted` by that node's undo (undos remove what their action created,
//!   and keep what it adopted).
//!
//! [`ledger_of`] folds a [`RunView`] into the run's ledger, in journal order.
//!
//! # Guarantees
//! The ledger is derived from the same durable writes as the run's state: a resource a
//! step reported is in the ledger exactly when the step's success is in the journal. A
//! step that crashed after creating something and before journaling its output does not
//! list it; its resumed attempt (idempotent, ownership-tagged) finds and records it.

use crate::journal::RunView;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// What happened to a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum LedgerAction {
    /// This run created it.
    Created,
    /// It existed (ours, or bring-your-own read only) and this run used it.
    Adopted,
    /// This run deleted it.
    Deleted,
    /// It was already gone when this run looked.
    Gone,
    /// This run left it in place on purpose (not ours, persistent, or bring-your-own).
    Kept,
    /// It existed before this run, which changed it in place (`update-cluster`): an undo
    /// puts back what it changed and never deletes it.
    Updated,
    /// This run created it, its undo gave up, and an operator declared the undo done by
    /// hand (`resolve`): it may still exist, so it stays in the inventory for an auditor,
    /// with who resolved it and their note.
    Resolved,
}

impl LedgerAction {
    /// `Created` when this run created the resource, else `Adopted`.
    pub fn created_or_adopted(created: bool) -> Self {
        if created {
            Self::Created
        } else {
            Self::Adopted
        }
    }

    /// Kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerAction::Created => "created",
            LedgerAction::Adopted => "adopted",
            LedgerAction::Deleted => "deleted",
            LedgerAction::Gone => "gone",
            LedgerAction::Kept => "kept",
            LedgerAction::Resolved => "resolved",
            LedgerAction::Updated => "updated",
        }
    }
}

/// One resource as a step reports it (inside its output's `"ledger"` array).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRecord {
    /// `azure` or `kubernetes` (or `file` for the self-test saga).
    pub kind: String,
    /// E.g. `Microsoft.Network/privateLinkServices` or `hypershift.openshift.io/HostedCluster`.
    pub resource_type: String,
    /// Azure resource id, or `namespace/name` for Kubernetes objects.
    pub id: String,
    /// What happened.
    pub action: LedgerAction,
    /// Persistent resources outlive a cluster (identities, OIDC issuer, persistent group).
    #[serde(default)]
    pub persistent: bool,
    /// Optional note (e.g. why it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A ledger line: a record plus who and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The resource and what happened to it.
    #[serde(flatten)]
    pub record: LedgerRecord,
    /// The node that did it.
    pub node: String,
    /// `action` or `undo`.
    pub phase: String,
    /// When the journal recorded it.
    pub at: Option<Timestamp>,
}

/// Extract the `"ledger"` records of a JSON value (ignoring entries that do not parse:
/// the ledger is informative and must never fail a view).
pub fn records_in(v: &serde_json::Value) -> Vec<LedgerRecord> {
    v.get("ledger")
        .and_then(|l| l.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|e| serde_json::from_value(e.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The run's ledger, in the order the journal recorded it.
pub fn ledger_of(view: &RunView) -> Vec<LedgerEntry> {
    let mut out: Vec<LedgerEntry> = Vec::new();
    for (spec, st) in view.dag.nodes.iter().zip(&view.nodes) {
        let forward = st.output.as_ref().map(records_in).unwrap_or_default();
        for r in &forward {
            out.push(LedgerEntry {
                record: r.clone(),
                node: spec.name.clone(),
                phase: "action".into(),
                at: st.finished_at,
            });
        }
        if let (Some(who), Some(_)) = (&st.resolved_by, st.undone_at) {
            // Resolved by hand: nobody here saw the resources go.
            for r in forward.iter().filter(|r| r.action == LedgerAction::Created) {
                out.push(LedgerEntry {
                    record: LedgerRecord {
                        action: LedgerAction::Resolved,
                        note: Some(format!("resolved by {who}")),
                        ..r.clone()
                    },
                    node: spec.name.clone(),
                    phase: "undo".into(),
                    at: st.undone_at,
                });
            }
        } else if st.undone_at.is_some() {
            let explicit = st.undo_checkpoint.as_ref().map(records_in);
            match explicit {
                Some(recs) if !recs.is_empty() => {
                    for r in recs {
                        out.push(LedgerEntry {
                            record: r,
                            node: spec.name.clone(),
                            phase: "undo".into(),
                            at: st.undone_at,
                        });
                    }
                }
                _ => {
                    for r in forward.iter().filter(|r| r.action == LedgerAction::Created) {
                        out.push(LedgerEntry {
                            record: LedgerRecord {
                                action: LedgerAction::Deleted,
                                note: None,
                                ..r.clone()
                            },
                            node: spec.name.clone(),
                            phase: "undo".into(),
                            at: st.undone_at,
                        });
                    }
                }
            }
            // What the step adopted (there before the run) its undo keeps: say so, so that
            // no view calls it undone. An explicit undo record wins.
            let said: std::collections::HashSet<String> = out
                .iter()
                .filter(|e| e.node == spec.name && e.phase == "undo")
                .map(|e| e.record.id.clone())
                .collect();
            for r in forward
                .iter()
                .filter(|r| r.action == LedgerAction::Adopted && !said.contains(&r.id))
            {
                out.push(LedgerEntry {
                    record: LedgerRecord {
                        action: LedgerAction::Kept,
                        note: Some(ADOPTED_KEPT.to_string()),
                        ..r.clone()
                    },
                    node: spec.name.clone(),
                    phase: "undo".into(),
                    at: st.undone_at,
                });
            }
        }
    }
    out.sort_by_key(|e| e.at.map(|t| t.0).unwrap_or(i64::MAX));
    out
}

/// The note of a resource an undo kept because its step adopted it.
pub const ADOPTED_KEPT: &str = "adopted, not ours";

/// What the undo of `node` did to the resources its step recorded: (deleted, kept).
pub fn undo_counts(entries: &[LedgerEntry], node: &str) -> (usize, usize) {
    let mut kept = 0;
    let mut deleted = 0;
    for e in entries
        .iter()
        .filter(|e| e.node == node && e.phase == "undo")
    {
        match e.record.action {
            LedgerAction::Kept => kept += 1,
            LedgerAction::Resolved | LedgerAction::Updated => {}
            _ => deleted += 1,
        }
    }
    (deleted, kept)
}

/// How an undone step reads: `undone`, `kept (adopted, not ours)`, or
/// `undone: 2 deleted, 1 kept (adopted, not ours)`.
pub fn undone_word(deleted: usize, kept: usize) -> String {
    match (deleted, kept) {
        (0, k) if k > 0 => format!("kept ({ADOPTED_KEPT})"),
        (d, k) if k > 0 => format!("undone: {d} deleted, {k} kept ({ADOPTED_KEPT})"),
        _ => "undone".to_string(),
    }
}

/// What an unwind did, from the ledger and the view: the sentence that follows "rolled
/// back" / "cancelled" must not claim more than the journal proves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindSummary {
    /// Resources the undos deleted.
    pub deleted: usize,
    /// Resources the run adopted (there before it) and its undos kept.
    pub kept: usize,
    /// Undos an operator resolved by hand: (step, "who: note").
    pub resolved: Vec<(String, String)>,
    /// Steps the unwind kept because they are pivots or came at or before one that
    /// succeeded (never undone): their resources stay.
    pub kept_steps: usize,
    /// Every step is a pivot (a delete): nothing was undone at all.
    pub forward_only: bool,
}

impl UnwindSummary {
    /// Fold `view` (and its ledger).
    pub fn of(view: &RunView) -> Self {
        let entries = ledger_of(view);
        let mut s = UnwindSummary::default();
        for e in entries.iter().filter(|e| e.phase == "undo") {
            match e.record.action {
                LedgerAction::Kept => s.kept += 1,
                LedgerAction::Deleted | LedgerAction::Gone => s.deleted += 1,
                _ => {}
            }
        }
        for (spec, st) in view.dag.nodes.iter().zip(&view.nodes) {
            if let (Some(who), Some(_)) = (&st.resolved_by, st.undone_at) {
                s.resolved.push((spec.name.clone(), who.clone()));
            }
        }
        s.kept_steps = view.kept_count();
        s.forward_only = view.dag.forward_only();
        s
    }

    /// Whether the unwind undid everything the run did (nothing kept, nothing by hand).
    pub fn complete(&self) -> bool {
        self.resolved.is_empty() && self.kept == 0 && self.kept_steps == 0
    }

    /// "nothing it made is left", or what else is true: kept adopted resources, undos
    /// resolved by hand (which nobody here saw finish).
    pub fn sentence(&self) -> String {
        let mut parts = Vec::new();
        if self.forward_only {
            parts.push(format!(
                "nothing was undone (it only goes forward): {} step{} done stay done",
                self.kept_steps,
                if self.kept_steps == 1 { "" } else { "s" }
            ));
        } else if self.kept_steps > 0 {
            parts.push(format!(
                "what came after the pivot was undone; {} step{} at or before it kept (cannot be undone)",
                self.kept_steps,
                if self.kept_steps == 1 { "" } else { "s" }
            ));
        } else if self.resolved.is_empty() {
            parts.push("nothing it made is left".to_string());
        }
        if !self.resolved.is_empty() {
            let n = self.resolved.len();
            let which: Vec<String> = self
                .resolved
                .iter()
                .map(|(step, who)| format!("`{step}` by {who}"))
                .collect();
            parts.push(format!(
                "{n} undo{} resolved by hand ({}): check {}",
                if n == 1 { "" } else { "s" },
                which.join("; "),
                if n == 1 { "it" } else { "them" }
            ));
        }
        if self.kept > 0 {
            parts.push(format!(
                "{} adopted resource{} (there before this run) kept",
                self.kept,
                if self.kept == 1 { "" } else { "s" }
            ));
        }
        parts.join("; ")
    }
}

/// Net effect of a ledger: the resources still present according to it (created, adopted,
/// kept or resolved by hand, and not deleted or gone afterwards), by id, in first-seen
/// order.
pub fn present(entries: &[LedgerEntry]) -> Vec<LedgerEntry> {
    let mut order: Vec<String> = Vec::new();
    let mut last: std::collections::HashMap<String, LedgerEntry> = Default::default();
    for e in entries {
        if !last.contains_key(&e.record.id) {
            order.push(e.record.id.clone());
        }
        last.insert(e.record.id.clone(), e.clone());
    }
    order
        .into_iter()
        .filter_map(|id| last.remove(&id))
        .filter(|e| {
            matches!(
                e.record.action,
                LedgerAction::Created
                    | LedgerAction::Adopted
                    | LedgerAction::Updated
                    | LedgerAction::Kept
                    | LedgerAction::Resolved
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testkit::sample_dag;

    fn rec(id: &str, action: LedgerAction) -> serde_json::Value {
        serde_json::json!({"ledger": [{"kind": "azure", "resource_type": "t", "id": id, "action": action}]})
    }

    #[test]
    fn undone_nodes_delete_what_they_created_and_keep_what_they_adopted() {
        let mut v = RunView::new(sample_dag());
        let t = |n| Timestamp(n);
        v.nodes[0].output = Some(rec("x", LedgerAction::Created));
        v.nodes[0].finished_at = Some(t(2));
        v.nodes[1].output = Some(rec("y", LedgerAction::Adopted));
        v.nodes[1].finished_at = Some(t(3));
        v.nodes[0].undone_at = Some(t(5));
        v.nodes[1].undone_at = Some(t(4));
        let l = ledger_of(&v);
        let got: Vec<_> = l
            .iter()
            .map(|e| (e.record.id.as_str(), e.record.action, e.phase.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("x", LedgerAction::Created, "action"),
                ("y", LedgerAction::Adopted, "action"),
                ("y", LedgerAction::Kept, "undo"),
                ("x", LedgerAction::Deleted, "undo"),
            ]
        );
        let p = present(&l);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].record.id, "y");
        assert_eq!(
            undone_word(undo_counts(&l, &v.dag.nodes[1].name).0, 1),
            "kept (adopted, not ours)"
        );
        assert_eq!(undo_counts(&l, &v.dag.nodes[0].name), (1, 0));
        let s = UnwindSummary::of(&v);
        assert_eq!((s.deleted, s.kept), (1, 1));
        assert_eq!(
            s.sentence(),
            "nothing it made is left; 1 adopted resource (there before this run) kept"
        );
    }

    /// A stuck undo an operator resolved by hand: nobody here saw the resource go, so it
    /// stays present, as `resolved` with who and their note, never `deleted`.
    #[test]
    fn a_resolved_undo_keeps_its_resources_visible_as_resolved() {
        let mut v = RunView::new(sample_dag());
        let t = |n| Timestamp(n);
        v.nodes[0].output = Some(rec("pls", LedgerAction::Created));
        v.nodes[0].finished_at = Some(t(2));
        v.nodes[0].undone_at = Some(t(9));
        v.nodes[0].resolved_by = Some("alice@bastion: deleted in the portal".into());
        let l = ledger_of(&v);
        let last = l.last().unwrap();
        assert_eq!(last.record.action, LedgerAction::Resolved);
        assert_eq!(
            last.record.note.as_deref(),
            Some("resolved by alice@bastion: deleted in the portal")
        );
        assert!(l.iter().all(|e| e.record.action != LedgerAction::Deleted));
        assert_eq!(
            UnwindSummary::of(&v).sentence(),
            "1 undo resolved by hand (`a` by alice@bastion: deleted in the portal): check it"
        );
        let p = present(&l);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].record.action, LedgerAction::Resolved);
    }
}
