//! The ARM budget: hcp-workflow limits its own requests before ARM has to.
//!
//! ARM throttles per subscription, per service principal and per operation type with token
//! buckets (reads 250 tokens refilled at 25/s, writes 200 at 10/s, deletes 200 at 10/s),
//! and per subscription and type with a global bucket fifteen times that, shared by every
//! principal ("Understand how Azure Resource Manager throttles requests",
//! learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
//! Resource providers keep their own, lower limits per subscription and region on top
//! (Microsoft.Network: 1,000 writes per 5 minutes; Azure DNS: 40 record-set writes per
//! minute per zone), shared by everything in the subscription, the guest clusters' cloud
//! controllers and CSI drivers included. A fleet tool that runs into 429s has already
//! taken what others needed.
//!
//! So every ARM request first takes a token from a client-side bucket keyed by (resource
//! manager host, subscription, operation type), sized at a **share** of ARM's documented
//! bucket (half by default, [`BudgetConfig::share`]):
//! - **Adaptive.** Each answer's `x-ms-ratelimit-remaining-subscription-*` header says what
//!   ARM has left; when that is below what the other half needs, the local bucket drops
//!   to what is above it. A 429's `Retry-After` empties the bucket until then. A 429 is
//!   still handled as before (a durable, soft retry), as the fallback.
//! - **Shared.** One bucket per key in the process (every run draws from it). With a
//!   [`TokenSource`] (the journal's [`hcp_runtime::JournalStore::take_tokens`] on
//!   Postgres), the process's bucket is only a cache of tokens leased from the database a
//!   batch at a time, so all workers share one bucket at one round trip per batch.
//! - **Fair, with priorities.** Waiters are served in order of arrival, where an undo (or a
//!   delete) counts as having arrived ten minutes earlier and a run near its end up to five
//!   minutes earlier; every waiter ages, so none waits for ever. A step keeps its first arrival for
//!   all its requests, so a step that has started finishes before new ones start (no
//!   attempt is sent back mid-way with its tokens wasted). A step waits in memory at most
//!   [`BudgetConfig::inline_wait`]; past that it gets a soft, throttled error whose
//!   message names the budget ("waiting for ARM write budget of subscription …") and
//!   whose Retry-After is its expected turn: the engine journals the retry, so `why`,
//!   `show`, the UI and the progress line say so, and no attempt is used up.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

/// ARM's operation types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// GET, HEAD.
    Read,
    /// PUT, PATCH, POST.
    Write,
    /// DELETE.
    Delete,
}

impl Class {
    /// The class of an HTTP method.
    pub fn of(method: &azure_core::http::Method) -> Self {
        Self::of_name(method.as_str())
    }

    /// The class of an HTTP method by its name (`GET`, `delete`, ...; case-insensitive),
    /// as a request log records it.
    pub fn of_name(method: &str) -> Self {
        if method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD") {
            Class::Read
        } else if method.eq_ignore_ascii_case("DELETE") {
            Class::Delete
        } else {
            Class::Write
        }
    }

    /// `read`, `write`, `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Read => "read",
            Class::Write => "write",
            Class::Delete => "delete",
        }
    }

    /// ARM's documented per-principal subscription bucket: (capacity, refill per second).
    pub fn documented(self) -> (f64, f64) {
        match self {
            Class::Read => (250.0, 25.0),
            Class::Write | Class::Delete => (200.0, 10.0),
        }
    }

    /// The header in which ARM says what is left of the principal's bucket.
    pub fn remaining_header(self) -> &'static str {
        match self {
            Class::Read => "x-ms-ratelimit-remaining-subscription-reads",
            Class::Write => "x-ms-ratelimit-remaining-subscription-writes",
            Class::Delete => "x-ms-ratelimit-remaining-subscription-deletes",
        }
    }
}

/// One budget: a resource manager, a subscription, an operation type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Key {
    /// Resource manager host (`management.azure.com`).
    pub host: String,
    /// Subscription id (lower case).
    pub subscription: String,
    /// Operation type.
    pub class: Class,
}

impl Key {
    /// The key of a request to `path` (`/subscriptions/{id}/…`) on `host`; `None` for a
    /// request outside a subscription (tenant-level), which has no subscription budget.
    pub fn of(host: &str, path: &str, class: Class) -> Option<Key> {
        let mut parts = path.trim_start_matches('/').split('/');
        match (parts.next(), parts.next()) {
            (Some(s), Some(id)) if s.eq_ignore_ascii_case("subscriptions") && !id.is_empty() => {
                Some(Key {
                    host: host.to_ascii_lowercase(),
                    subscription: id.to_ascii_lowercase(),
                    class,
                })
            }
            _ => None,
        }
    }

    /// The shared bucket's name in the journal (`arm/<host>/<subscription>/<class>`).
    pub fn shared_name(&self) -> String {
        format!(
            "arm/{}/{}/{}",
            self.host,
            self.subscription,
            self.class.as_str()
        )
    }
}

/// How much of ARM's buckets hcp-workflow takes.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetConfig {
    /// Off: requests are never held back (ARM's 429s are still retried).
    pub enabled: bool,
    /// The share (0 < share ≤ 1) of each documented bucket, capacity and refill alike, that
    /// hcp-workflow uses; the rest is left to everything else in the subscription.
    pub share: f64,
    /// Per-subscription shares (lower-case id → share), overriding `share`.
    pub shares: HashMap<String, f64>,
    /// Longest a request waits for its turn in memory; a longer wait becomes a journaled,
    /// soft retry at the expected turn.
    pub inline_wait: Duration,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            share: 0.5,
            shares: HashMap::new(),
            inline_wait: Duration::from_secs(10),
        }
    }
}

impl BudgetConfig {
    /// The share of `subscription`.
    pub fn share_of(&self, subscription: &str) -> f64 {
        self.shares
            .get(&subscription.to_ascii_lowercase())
            .copied()
            .unwrap_or(self.share)
            .clamp(0.001, 1.0)
    }
}

/// Where the tokens come from when several processes share one budget.
pub trait TokenSource: Send + Sync + fmt::Debug {
    /// Take up to `want` tokens from the shared bucket `name` (`capacity`, `per_second`):
    /// the tokens granted, and how long until the next whole one.
    fn take<'a>(
        &'a self,
        name: &'a str,
        want: u32,
        capacity: f64,
        per_second: f64,
    ) -> BoxFuture<'a, Result<(u32, Duration), String>>;
}

/// The journal's shared token buckets ([`hcp_runtime::JournalStore::take_tokens`]) as a
/// [`TokenSource`]: every process on one Postgres journal shares each budget.
#[derive(Debug)]
pub struct JournalTokens(pub Arc<dyn hcp_runtime::JournalStore>);

impl TokenSource for JournalTokens {
    fn take<'a>(
        &'a self,
        name: &'a str,
        want: u32,
        capacity: f64,
        per_second: f64,
    ) -> BoxFuture<'a, Result<(u32, Duration), String>> {
        Box::pin(async move {
            let now = hcp_runtime::Clock::now(&hcp_runtime::SystemClock);
            let g = self
                .0
                .take_tokens(name, want, capacity, per_second, now)
                .await
                .map_err(|e| e.to_string())?;
            Ok((g.granted, g.next_token_in()))
        })
    }
}

/// Who asks: the step, for fairness and priority.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// Stable across the step's attempts (`run/node/phase`): a step that comes back after
    /// a deferral keeps its place.
    pub id: String,
    /// An undo, or a step of a delete: served first.
    pub urgent: bool,
    /// How far its run is (0 to 1): a run near its end goes before a new one.
    pub progress: f32,
}

impl Caller {
    /// The step this task runs ([`hcp_runtime::current_step`]), if any.
    pub fn current() -> Option<Caller> {
        hcp_runtime::current_step().map(|s| Caller {
            id: format!("{}/{}/{:?}", s.run_id, s.node, s.phase),
            urgent: s.phase == hcp_runtime::Phase::Undo || s.workflow.starts_with("delete-"),
            progress: s.progress,
        })
    }

    /// How much earlier than its arrival this caller counts as having arrived.
    fn head_start(&self) -> Duration {
        let urgent = if self.urgent {
            URGENT_HEAD_START
        } else {
            Duration::ZERO
        };
        urgent + PROGRESS_HEAD_START.mul_f32(self.progress.clamp(0.0, 1.0))
    }
}

/// How much earlier than its arrival an undo or a step of a delete counts: more than any
/// forward step's [`PROGRESS_HEAD_START`], so a teardown goes before every create that has
/// not already waited that long.
const URGENT_HEAD_START: Duration = Duration::from_secs(600);

/// How much earlier than its arrival a step of a finished run would count (a run halfway
/// through: half that). Measured with 50 creates on one budget (docs/dev/bench-log/2026-11.md): 300 s
/// instead of 20 s cut the mean run from 626 s to 455 s and the deferrals by half, with the
/// same total wall; a new run waits at most this much longer than in arrival order.
const PROGRESS_HEAD_START: Duration = Duration::from_secs(300);

/// A request that would wait longer than [`BudgetConfig::inline_wait`].
#[derive(Debug, Clone, PartialEq)]
pub struct Deferred {
    /// When to come back (the expected turn).
    pub after: Duration,
    /// What it waits for, for people: "waiting for ARM write budget of subscription …".
    pub message: String,
}

/// Counters of one budget, for `/metrics` and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Tokens spent (requests sent).
    pub used: u64,
    /// Total time requests waited for a token, in milliseconds.
    pub waited_ms: u64,
    /// Requests sent back to the engine to come back later.
    pub deferred: u64,
    /// 429s ARM answered anyway.
    pub throttled: u64,
    /// Tokens leased from the shared bucket (a [`TokenSource`]).
    pub leased: u64,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
    capacity: f64,
    rate: f64,
    blocked_until: Option<Instant>,
    /// (rank in ms since the budget's epoch, sequence) of every waiter, in turn order.
    queue: BTreeMap<(i64, u64), ()>,
    /// Caller id → its first arrival (ms since the budget's epoch).
    first_seen: HashMap<String, i64>,
    notify: Arc<Notify>,
    fetching: bool,
    stats: Stats,
}

/// The process's ARM budget ([`global`]).
#[derive(Debug)]
pub struct Budget {
    cfg: RwLock<BudgetConfig>,
    buckets: Mutex<HashMap<Key, Bucket>>,
    source: RwLock<Option<Arc<dyn TokenSource>>>,
    seq: AtomicU64,
    epoch: Instant,
}

/// The one budget of this process.
pub fn global() -> &'static Budget {
    static B: OnceLock<Budget> = OnceLock::new();
    B.get_or_init(|| Budget::new(BudgetConfig::default()))
}

/// Removes a waiter from its queue however its wait ends (a timeout drops the future).
struct InQueue<'a> {
    budget: &'a Budget,
    key: &'a Key,
    me: (i64, u64),
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        if let Ok(mut g) = self.budget.buckets.lock()
            && let Some(b) = g.get_mut(self.key)
            && b.queue.remove(&self.me).is_some()
        {
            b.notify.notify_waiters();
        }
    }
}

impl Budget {
    /// A budget with `cfg`.
    pub fn new(cfg: BudgetConfig) -> Self {
        Self {
            cfg: RwLock::new(cfg),
            buckets: Mutex::new(HashMap::new()),
            source: RwLock::new(None),
            seq: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// Replace the configuration (buckets already made keep their size until
    /// [`Budget::reset`]).
    pub fn configure(&self, cfg: BudgetConfig) {
        if let Ok(mut c) = self.cfg.write() {
            *c = cfg;
        }
        self.reset();
    }

    /// Share every bucket through `source` from now on.
    pub fn share_through(&self, source: Arc<dyn TokenSource>) {
        if let Ok(mut s) = self.source.write() {
            *s = Some(source);
        }
        self.reset();
    }

    /// Forget every bucket (and its counters).
    pub fn reset(&self) {
        if let Ok(mut g) = self.buckets.lock() {
            g.clear();
        }
    }

    /// The default share, or `None` when the budget is off.
    pub fn share_of_default(&self) -> Option<f64> {
        let c = self.config();
        c.enabled.then_some(c.share)
    }

    fn config(&self) -> BudgetConfig {
        self.cfg.read().map(|c| c.clone()).unwrap_or_default()
    }

    fn shared(&self) -> Option<Arc<dyn TokenSource>> {
        self.source.read().ok().and_then(|s| s.clone())
    }

    /// Each budget's counters, by key.
    pub fn stats(&self) -> BTreeMap<Key, Stats> {
        self.buckets
            .lock()
            .map(|g| {
                g.iter()
                    .map(|(k, b)| (k.clone(), b.stats.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn ms(&self, t: Instant) -> i64 {
        i64::try_from(t.duration_since(self.epoch).as_millis()).unwrap_or(i64::MAX)
    }

    fn bucket<'a>(
        &self,
        g: &'a mut HashMap<Key, Bucket>,
        key: &Key,
        cfg: &BudgetConfig,
        shared: bool,
        now: Instant,
    ) -> &'a mut Bucket {
        g.entry(key.clone()).or_insert_with(|| {
            let (cap, rate) = key.class.documented();
            let share = cfg.share_of(&key.subscription);
            Bucket {
                // Shared: this process holds only what it leased.
                tokens: if shared { 0.0 } else { cap * share },
                last: now,
                capacity: cap * share,
                rate: rate * share,
                blocked_until: None,
                queue: BTreeMap::new(),
                first_seen: HashMap::new(),
                notify: Arc::new(Notify::new()),
                fetching: false,
                stats: Stats::default(),
            }
        })
    }

    /// Take one token of `key` for `caller`, waiting for its turn up to the inline wait.
    ///
    /// # Errors
    /// [`Deferred`] when its turn is further away than that.
    pub async fn acquire(&self, key: &Key, caller: Option<&Caller>) -> Result<(), Deferred> {
        let cfg = self.config();
        if !cfg.enabled {
            return Ok(());
        }
        let source = self.shared();
        let start = Instant::now();
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let me = {
            let mut g = self.buckets.lock().map_err(|_| poisoned(key))?;
            let now_ms = self.ms(start);
            let b = self.bucket(&mut g, key, &cfg, source.is_some(), start);
            let arrived = match caller {
                Some(c) => *b.first_seen.entry(c.id.clone()).or_insert(now_ms),
                None => now_ms,
            };
            let head_start = caller.map_or(0, |c| {
                i64::try_from(c.head_start().as_millis()).unwrap_or(0)
            });
            let me = (arrived - head_start, seq);
            b.queue.insert(me, ());
            me
        };
        let guard = InQueue {
            budget: self,
            key,
            me,
        };
        loop {
            enum Next {
                Wait(Duration, Arc<Notify>),
                Fetch(f64, f64),
            }
            let next = {
                let mut g = self.buckets.lock().map_err(|_| poisoned(key))?;
                let now = Instant::now();
                let b = self.bucket(&mut g, key, &cfg, source.is_some(), now);
                if source.is_none() {
                    let elapsed = now.duration_since(b.last).as_secs_f64();
                    b.tokens = (b.tokens + elapsed * b.rate).min(b.capacity);
                }
                b.last = now;
                if b.blocked_until.is_some_and(|u| u <= now) {
                    b.blocked_until = None;
                }
                let head = b.queue.keys().next() == Some(&me);
                let position = b.queue.range(..me).count() as f64;
                if let Some(until) = b.blocked_until {
                    Next::Wait(
                        until.duration_since(now)
                            + Duration::from_secs_f64(position / b.rate.max(0.001)),
                        b.notify.clone(),
                    )
                } else if head && b.tokens >= 1.0 {
                    b.tokens -= 1.0;
                    b.queue.remove(&me);
                    // The caller keeps its first arrival for its next requests: a step that
                    // has started goes on before steps that have not (otherwise every step
                    // is sent back mid-attempt, its spent tokens wasted, and under a
                    // saturated budget no attempt ever ends). Forgotten after a while.
                    if b.first_seen.len() > 4096 {
                        let cutoff = self.ms(Instant::now()) - 15 * 60 * 1000;
                        b.first_seen.retain(|_, t| *t > cutoff);
                    }
                    b.stats.used += 1;
                    b.stats.waited_ms += u64::try_from(start.elapsed().as_millis()).unwrap_or(0);
                    b.notify.notify_waiters();
                    std::mem::forget(guard);
                    return Ok(());
                } else if head && source.is_some() && !b.fetching {
                    b.fetching = true;
                    Next::Fetch(b.capacity, b.rate)
                } else {
                    let missing = (position + 1.0 - b.tokens).max(0.0);
                    Next::Wait(
                        Duration::from_secs_f64(missing / b.rate.max(0.001)),
                        b.notify.clone(),
                    )
                }
            };
            match next {
                Next::Fetch(capacity, rate) => {
                    let batch = (capacity / 10.0).ceil().max(1.0) as u32;
                    let got = match &source {
                        Some(s) => s.take(&key.shared_name(), batch, capacity, rate).await,
                        None => Ok((0, Duration::from_millis(100))),
                    };
                    let mut g = self.buckets.lock().map_err(|_| poisoned(key))?;
                    let b = self.bucket(&mut g, key, &cfg, true, Instant::now());
                    b.fetching = false;
                    match got {
                        Ok((n, _)) if n > 0 => {
                            b.tokens += f64::from(n);
                            b.stats.leased += u64::from(n);
                        }
                        Ok((_, next_in)) => {
                            b.blocked_until =
                                Some(Instant::now() + next_in.max(Duration::from_millis(20)));
                        }
                        Err(e) => {
                            // The journal did not answer: do without the shared bucket for a
                            // moment rather than stop every request.
                            tracing::warn!(budget = %key.shared_name(), error = %e, "cannot lease ARM tokens from the journal; waiting");
                            b.blocked_until = Some(Instant::now() + Duration::from_millis(500));
                        }
                    }
                    b.notify.notify_waiters();
                }
                Next::Wait(wait, notify) => {
                    if start.elapsed() + wait > cfg.inline_wait {
                        let mut g = self.buckets.lock().map_err(|_| poisoned(key))?;
                        let b = self.bucket(&mut g, key, &cfg, source.is_some(), Instant::now());
                        b.stats.deferred += 1;
                        b.stats.waited_ms +=
                            u64::try_from(start.elapsed().as_millis()).unwrap_or(0);
                        drop(g);
                        drop(guard);
                        let after = wait.max(Duration::from_secs(1));
                        return Err(Deferred {
                            after,
                            message: format!(
                                "waiting for ARM {} budget of subscription {} (hcp-workflow's share: {:.0} requests, {:.1}/s; this step's turn in about {}s)",
                                key.class.as_str(),
                                key.subscription,
                                cfg.share_of(&key.subscription) * key.class.documented().0,
                                cfg.share_of(&key.subscription) * key.class.documented().1,
                                after.as_secs_f64().ceil()
                            ),
                        });
                    }
                    let nap = wait.clamp(Duration::from_millis(5), Duration::from_millis(250));
                    tokio::select! {
                        () = notify.notified() => {}
                        () = tokio::time::sleep(nap) => {}
                    }
                }
            }
        }
    }

    /// Learn from an answer: what ARM says is left of the principal's bucket (the local
    /// bucket keeps no more than what is above the other callers' share), and a 429's
    /// `Retry-After` (nothing goes out until then).
    pub fn observe(
        &self,
        key: &Key,
        status: u16,
        remaining: Option<u32>,
        retry_after: Option<Duration>,
    ) {
        let cfg = self.config();
        if !cfg.enabled {
            return;
        }
        let shared = self.shared().is_some();
        let Ok(mut g) = self.buckets.lock() else {
            return;
        };
        let now = Instant::now();
        let b = self.bucket(&mut g, key, &cfg, shared, now);
        if status == 429 {
            b.stats.throttled += 1;
            b.tokens = 0.0;
            let until = now + retry_after.unwrap_or(Duration::from_secs(1));
            b.blocked_until = Some(b.blocked_until.map_or(until, |u| u.max(until)));
        } else if let Some(left) = remaining {
            let (cap, _) = key.class.documented();
            let reserve = cap * (1.0 - cfg.share_of(&key.subscription));
            let allowed = (f64::from(left) - reserve).max(0.0);
            if allowed < b.tokens {
                b.tokens = allowed;
            }
        }
    }
}

fn poisoned(key: &Key) -> Deferred {
    Deferred {
        after: Duration::from_secs(1),
        message: format!(
            "the ARM budget of subscription {} is unavailable (a poisoned lock)",
            key.subscription
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(class: Class) -> Key {
        Key {
            host: "management.azure.com".into(),
            subscription: "s".into(),
            class,
        }
    }

    fn budget(share: f64, inline: Duration) -> Budget {
        Budget::new(BudgetConfig {
            share,
            inline_wait: inline,
            ..BudgetConfig::default()
        })
    }

    #[test]
    fn a_request_is_keyed_by_host_subscription_and_class() {
        let k = Key::of(
            "Management.Azure.com",
            "/subscriptions/ABC/resourceGroups/x",
            Class::Write,
        );
        assert_eq!(k.as_ref().map(|k| k.subscription.as_str()), Some("abc"));
        assert_eq!(
            k.map(|k| k.shared_name()),
            Some("arm/management.azure.com/abc/write".to_string())
        );
        assert_eq!(
            Key::of("h", "/providers/Microsoft.Network", Class::Read),
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_share_of_the_documented_bucket_is_all_that_goes_out() {
        // Half of 200 writes: 100 at once, then 5/s.
        let b = budget(0.5, Duration::from_secs(60));
        let k = key(Class::Write);
        for _ in 0..100 {
            b.acquire(&k, None).await.unwrap();
        }
        let t = Instant::now();
        for _ in 0..10 {
            b.acquire(&k, None).await.unwrap();
        }
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(1900) && took <= Duration::from_millis(2200),
            "10 more writes at 5/s took {took:?}"
        );
        assert_eq!(b.stats()[&k].used, 110);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_wait_is_deferred_with_the_budget_named() {
        let b = budget(0.01, Duration::from_secs(2));
        let k = key(Class::Delete);
        // 1% of 200: 2 tokens, 0.1/s.
        b.acquire(&k, None).await.unwrap();
        b.acquire(&k, None).await.unwrap();
        let d = b.acquire(&k, None).await.unwrap_err();
        assert!(d.after >= Duration::from_secs(8), "{d:?}");
        assert!(
            d.message
                .starts_with("waiting for ARM delete budget of subscription s"),
            "{}",
            d.message
        );
        assert_eq!(b.stats()[&k].deferred, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn undos_go_before_creates_and_nobody_waits_for_ever() {
        let b = Arc::new(budget(0.005, Duration::from_secs(3600)));
        let k = key(Class::Write);
        // 0.5% of 200: one token, refilled at 0.05/s (one every 20 s).
        b.acquire(&k, None).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, urgent) in [("create-1", false), ("create-2", false), ("undo", true)] {
            let (b, k, order) = (b.clone(), k.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let c = Caller {
                    id: name.into(),
                    urgent,
                    progress: 0.0,
                };
                b.acquire(&k, Some(&c)).await.unwrap();
                order.lock().unwrap().push(name);
            }));
            // Creates arrive first.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec!["undo", "create-1", "create-2"]);
    }

    #[tokio::test(start_paused = true)]
    async fn arm_headers_and_429s_hold_the_budget_back() {
        let b = budget(0.5, Duration::from_secs(600));
        let k = key(Class::Read);
        b.acquire(&k, None).await.unwrap();
        // ARM has 130 reads left of 250: only 5 are above the other half's 125.
        b.observe(&k, 200, Some(130), None);
        for _ in 0..5 {
            b.acquire(&k, None).await.unwrap();
        }
        let t = Instant::now();
        b.acquire(&k, None).await.unwrap();
        assert!(
            t.elapsed() >= Duration::from_millis(70),
            "{:?}",
            t.elapsed()
        );
        // A 429 asking for 3 s: nothing goes out before.
        b.observe(&k, 429, None, Some(Duration::from_secs(3)));
        let t = Instant::now();
        b.acquire(&k, None).await.unwrap();
        assert!(t.elapsed() >= Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!(b.stats()[&k].throttled, 1);
    }

    #[derive(Debug)]
    struct Pool(Mutex<f64>);

    impl TokenSource for Pool {
        fn take<'a>(
            &'a self,
            _name: &'a str,
            want: u32,
            _capacity: f64,
            _per_second: f64,
        ) -> BoxFuture<'a, Result<(u32, Duration), String>> {
            Box::pin(async move {
                let mut p = self.0.lock().unwrap();
                let n = p.floor().min(f64::from(want)) as u32;
                *p -= f64::from(n);
                Ok((n, Duration::from_secs(3600)))
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_budget_spends_only_what_it_leased_in_batches() {
        let pool = Arc::new(Pool(Mutex::new(25.0)));
        let (a, b) = (
            budget(0.5, Duration::from_secs(1)),
            budget(0.5, Duration::from_secs(1)),
        );
        a.share_through(pool.clone());
        b.share_through(pool.clone());
        let k = key(Class::Write);
        let mut sent = 0;
        for i in 0..40 {
            let which = if i % 2 == 0 { &a } else { &b };
            if which.acquire(&k, None).await.is_ok() {
                sent += 1;
            }
        }
        // Batches of 10 (a tenth of the 100-token share): 10 + 10 + 5.
        assert_eq!(sent, 25, "two processes together sent what the pool had");
        assert_eq!(a.stats()[&k].leased + b.stats()[&k].leased, 25);
    }
}
