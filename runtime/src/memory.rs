//! In-memory [`JournalStore`]: the reference implementation of the contract, used by unit
//! tests and by `--database memory:` (nothing survives the process).

use crate::journal::RunState;
use crate::store::*;
use crate::time::Timestamp;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

#[derive(Debug)]
struct MemRun {
    summary: RunSummary,
    dag: String,
    events: Vec<StoredEvent>,
    commands: Vec<CommandRecord>,
}

#[derive(Debug, Default)]
struct Inner {
    runs: HashMap<RunId, MemRun>,
    keys: HashMap<String, RunId>,
    next_command: i64,
    reports: Vec<ReportRecord>,
    next_report: i64,
    schedules: HashMap<String, Timestamp>,
    buckets: HashMap<String, (f64, Timestamp)>,
    /// Appends still to be written but answered with a transient error (test hook).
    lose_answers: usize,
}

/// In-memory journal store.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    wake: tokio::sync::watch::Sender<u64>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            wake: tokio::sync::watch::channel(0).0,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>, StoreError> {
        self.inner
            .lock()
            .map_err(|_| StoreError::permanent("memory store mutex poisoned"))
    }

    fn poke(&self) {
        self.wake.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Test hook: the next `n` appends are written, then answered with a transient error,
    /// as when a database connection drops between a commit and its answer.
    pub fn lose_append_answers(&self, n: usize) -> Result<(), StoreError> {
        self.lock()?.lose_answers = n;
        Ok(())
    }

    /// Test hook: overwrite the data of event `seq` of `run` with `data` (to simulate a
    /// corrupt row).
    pub fn corrupt_event(&self, run: RunId, seq: i64, data: &str) -> Result<(), StoreError> {
        let mut g = self.lock()?;
        let r = g.runs.get_mut(&run).ok_or(StoreError::NotFound(run))?;
        for e in &mut r.events {
            if e.seq == seq {
                e.data = data.to_string();
            }
        }
        Ok(())
    }
}

fn fenced(r: &MemRun, lease: &Lease) -> bool {
    r.summary.lease_owner.as_deref() != Some(lease.owner.as_str())
        || r.summary.lease_epoch != lease.epoch
}

#[async_trait]
impl JournalStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn claim_executor(
        &self,
        _owner: &str,
        _serves: Option<&[String]>,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        let mut g = self.lock()?;
        if let Some(k) = &run.idempotency_key
            && let Some(id) = g.keys.get(k)
        {
            let same = g.runs.get(id).is_some_and(|r| {
                r.summary.workflow == run.workflow && r.summary.exclusive_key == run.exclusive_key
            });
            return Ok(if same {
                CreateOutcome::Existing(*id)
            } else {
                CreateOutcome::KeyReused(*id)
            });
        }
        if let Some(x) = &run.exclusive_key
            && let Some(holder) = g.runs.values().find(|r| {
                r.summary.exclusive_key.as_ref() == Some(x) && !r.summary.state.is_terminal()
            })
        {
            return Ok(CreateOutcome::Busy(holder.summary.id));
        }
        if g.runs.contains_key(&run.id) {
            return Err(StoreError::permanent(format!(
                "run {} already exists",
                run.id
            )));
        }
        if let Some(k) = &run.idempotency_key {
            g.keys.insert(k.clone(), run.id);
        }
        let summary = RunSummary {
            id: run.id,
            workflow: run.workflow,
            workflow_version: run.workflow_version,
            labels: run.labels,
            idempotency_key: run.idempotency_key,
            exclusive_key: run.exclusive_key,
            target: run.target,
            state: RunState::Pending,
            blocked_on: "waiting for a worker to pick the run up".into(),
            current_step: None,
            created_at: run.created_at,
            updated_at: run.created_at,
            wake_at: Some(run.created_at),
            lease_owner: None,
            lease_epoch: 0,
            lease_expires_at: None,
            commands_pending: false,
        };
        g.runs.insert(
            run.id,
            MemRun {
                summary,
                dag: run.dag,
                events: Vec::new(),
                commands: Vec::new(),
            },
        );
        drop(g);
        self.poke();
        Ok(CreateOutcome::Created(run.id))
    }

    async fn acquire_targeted(
        &self,
        owner: &str,
        now: Timestamp,
        lease_for: Duration,
        limit: usize,
        only: Option<RunId>,
        targets: Option<&[String]>,
    ) -> Result<Vec<Lease>, StoreError> {
        let mut g = self.lock()?;
        let mut due: Vec<(Timestamp, RunId)> = g
            .runs
            .values()
            .filter(|r| only.is_none_or(|id| id == r.summary.id))
            .filter(|r| {
                targets.is_none_or(|ts| r.summary.target.as_ref().is_none_or(|t| ts.contains(t)))
            })
            .filter(|r| {
                let s = &r.summary;
                !s.state.is_terminal()
                    && (s.lease_owner.is_none() || s.lease_expires_at.is_none_or(|t| t < now))
                    && (s.commands_pending || s.wake_at.is_some_and(|w| w <= now))
            })
            .map(|r| (r.summary.wake_at.unwrap_or(now), r.summary.id))
            .collect();
        due.sort();
        due.truncate(limit);
        let expires_at = now.plus(lease_for);
        let mut out = Vec::with_capacity(due.len());
        for (_, id) in due {
            if let Some(r) = g.runs.get_mut(&id) {
                r.summary.lease_owner = Some(owner.to_string());
                r.summary.lease_epoch += 1;
                r.summary.lease_expires_at = Some(expires_at);
                out.push(Lease {
                    run_id: id,
                    owner: owner.to_string(),
                    epoch: r.summary.lease_epoch,
                    expires_at,
                });
            }
        }
        Ok(out)
    }

    async fn append(&self, lease: &Lease, append: Append) -> Result<i64, StoreError> {
        let mut g = self.lock()?;
        let r = g
            .runs
            .get_mut(&lease.run_id)
            .ok_or(StoreError::NotFound(lease.run_id))?;
        let mut seq = r.events.last().map_or(0, |e| e.seq);
        // A writer whose view of the journal is behind it (`after_seq`): refused like a
        // lost lease.
        if fenced(r, lease) || append.after_seq.is_some_and(|a| a != seq) {
            return Err(StoreError::Fenced {
                run: lease.run_id,
                epoch: lease.epoch,
            });
        }
        for e in append.events {
            seq += 1;
            r.events.push(StoredEvent {
                seq,
                kind: e.kind,
                node: e.node,
                data: e.data,
                at: e.at,
            });
        }
        for c in &mut r.commands {
            if append.applied_commands.contains(&c.id) {
                c.applied_at = Some(append.patch.updated_at);
            }
        }
        let p = append.patch;
        r.summary.state = p.state;
        r.summary.blocked_on = p.blocked_on;
        r.summary.current_step = p.current_step;
        r.summary.wake_at = p.wake_at;
        r.summary.updated_at = p.updated_at;
        r.summary.commands_pending = r.commands.iter().any(|c| c.applied_at.is_none());
        if g.lose_answers > 0 {
            g.lose_answers -= 1;
            return Err(StoreError::transient(
                "connection lost after the commit (test hook)",
            ));
        }
        Ok(seq)
    }

    async fn renew(&self, owner: &str, until: Timestamp) -> Result<Vec<RunId>, StoreError> {
        let mut g = self.lock()?;
        let mut held = Vec::new();
        for r in g.runs.values_mut() {
            if r.summary.lease_owner.as_deref() == Some(owner) {
                r.summary.lease_expires_at = Some(until);
                held.push(r.summary.id);
            }
        }
        Ok(held)
    }

    async fn release(&self, lease: &Lease, wake_at: Option<Timestamp>) -> Result<(), StoreError> {
        let mut g = self.lock()?;
        let r = g
            .runs
            .get_mut(&lease.run_id)
            .ok_or(StoreError::NotFound(lease.run_id))?;
        if fenced(r, lease) {
            return Err(StoreError::Fenced {
                run: lease.run_id,
                epoch: lease.epoch,
            });
        }
        r.summary.lease_owner = None;
        r.summary.lease_expires_at = None;
        r.summary.wake_at = wake_at;
        Ok(())
    }

    async fn load_run(&self, run: RunId) -> Result<Option<RunRecord>, StoreError> {
        let g = self.lock()?;
        Ok(g.runs.get(&run).map(|r| RunRecord {
            summary: r.summary.clone(),
            dag: r.dag.clone(),
            events: r.events.clone(),
            commands: r.commands.clone(),
        }))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let g = self.lock()?;
        let mut v: Vec<RunSummary> = g
            .runs
            .values()
            .map(|r| r.summary.clone())
            .filter(|s| filter.matches(s))
            .collect();
        v.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        if filter.limit > 0 {
            v.truncate(filter.limit);
        }
        Ok(v)
    }

    async fn submit_command(&self, run: RunId, cmd: NewCommand) -> Result<i64, StoreError> {
        let mut g = self.lock()?;
        g.next_command += 1;
        let id = g.next_command;
        let r = g.runs.get_mut(&run).ok_or(StoreError::NotFound(run))?;
        r.commands.push(CommandRecord {
            id,
            command: cmd.command,
            requested_by: cmd.requested_by,
            reason: cmd.reason,
            requested_at: cmd.requested_at,
            applied_at: None,
        });
        r.summary.commands_pending = true;
        drop(g);
        self.poke();
        Ok(id)
    }

    async fn pending_commands(&self, run: RunId) -> Result<Vec<CommandRecord>, StoreError> {
        let g = self.lock()?;
        let r = g.runs.get(&run).ok_or(StoreError::NotFound(run))?;
        Ok(r.commands
            .iter()
            .filter(|c| c.applied_at.is_none())
            .cloned()
            .collect())
    }

    async fn runs_with_commands(&self, owner: &str) -> Result<Vec<RunId>, StoreError> {
        let g = self.lock()?;
        Ok(g.runs
            .values()
            .filter(|r| {
                r.summary.commands_pending && r.summary.lease_owner.as_deref() == Some(owner)
            })
            .map(|r| r.summary.id)
            .collect())
    }

    fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.wake.subscribe()
    }

    async fn record_report(&self, report: NewReport) -> Result<i64, StoreError> {
        let mut g = self.lock()?;
        g.next_report += 1;
        let id = g.next_report;
        g.reports.push(ReportRecord {
            id,
            kind: report.kind.clone(),
            subject: report.subject.clone(),
            at: report.at,
            ok: report.ok,
            by: report.by,
            data: report.data,
        });
        if report.keep > 0 {
            let same = |r: &ReportRecord| r.kind == report.kind && r.subject == report.subject;
            let n = g.reports.iter().filter(|r| same(r)).count();
            let mut drop = n.saturating_sub(report.keep);
            // Oldest first: `reports` is in id order.
            g.reports.retain(|r| {
                if drop > 0 && same(r) {
                    drop -= 1;
                    false
                } else {
                    true
                }
            });
        }
        Ok(id)
    }

    async fn list_reports(&self, filter: &ReportFilter) -> Result<Vec<ReportRecord>, StoreError> {
        let g = self.lock()?;
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<ReportRecord> = g
            .reports
            .iter()
            .rev()
            .filter(|r| r.kind == filter.kind)
            .filter(|r| filter.subject.as_ref().is_none_or(|s| s == &r.subject))
            .filter(|r| !filter.latest_only || seen.insert(r.subject.clone()))
            .cloned()
            .collect();
        if filter.limit > 0 {
            out.truncate(filter.limit);
        }
        Ok(out)
    }

    async fn take_tokens(
        &self,
        key: &str,
        want: u32,
        capacity: f64,
        per_second: f64,
        now: Timestamp,
    ) -> Result<TokenGrant, StoreError> {
        let mut g = self.lock()?;
        let (tokens, at) = g.buckets.get(key).copied().unwrap_or((capacity, now));
        let elapsed = (now.0 - at.0).max(0) as f64 / 1000.0;
        let level = (tokens + elapsed * per_second).min(capacity);
        let granted = level.floor().clamp(0.0, f64::from(want)) as u32;
        let left = level - f64::from(granted);
        g.buckets.insert(key.to_string(), (left, now.max(at)));
        Ok(TokenGrant {
            granted,
            left,
            per_second,
        })
    }

    async fn claim_schedule(
        &self,
        key: &str,
        _by: &str,
        now: Timestamp,
        next: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut g = self.lock()?;
        match g.schedules.get(key) {
            Some(due) if *due > now => Ok(false),
            _ => {
                g.schedules.insert(key.to_string(), next);
                Ok(true)
            }
        }
    }
}
