//! The [`Simulator`] handle: shared state, clock, background ticker, public helpers.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::config::SimConfig;
use crate::faults::{FaultEngine, FaultRule};
use crate::kube::crd::CrdSet;
use crate::state::{KubeEvent, State};
use crate::throttle::Throttle;
use crate::{Error, arm, kube, operator};

/// One resource as listed by `GET /_sim/inventory`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InventoryItem {
    /// ARM id, or the Kubernetes object path (`/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>`).
    pub id: String,
    /// ARM resource type, or `<group>/<plural>` for Kubernetes (`core` for the core group).
    #[serde(rename = "type")]
    pub rtype: String,
    /// Resource or object name.
    pub name: String,
    /// ARM tags, or Kubernetes labels.
    pub tags: serde_json::Value,
    /// Creation order across ARM and Kubernetes.
    pub created_seq: u64,
}

/// Microsoft Graph objects and Key Vault objects (live and soft-deleted: a soft-deleted
/// name still blocks a re-create, so an unwind that leaves one has not cleaned up):
/// `graph:/applications/{id}`, `graph:/servicePrincipals/{id}`,
/// `graph:/directory/deletedItems/{id}`, `https://{vault}.vault.azure.net/certificates/{name}`,
/// `…/secrets/{name}`, `…/deletedcertificates/{name}`, `…/deletedsecrets/{name}`, and
/// `keyvault:/deletedVaults/{name}`. Their `name` is the display name / object name, `tags`
/// the Graph `tags` or Key Vault tags of the newest version.
fn directory_inventory(st: &State) -> Vec<InventoryItem> {
    let mut out = Vec::new();
    let item = |id: String, rtype: &str, name: String, tags: serde_json::Value| InventoryItem {
        id,
        rtype: rtype.to_string(),
        name,
        tags,
        created_seq: u64::MAX,
    };
    let text = |v: &serde_json::Value, k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let tags = |v: &serde_json::Value| v.get("tags").cloned().unwrap_or(serde_json::json!([]));
    for (id, app) in &st.graph.applications {
        out.push(item(
            format!("graph:/applications/{id}"),
            "microsoft.graph.application",
            text(app, "displayName"),
            tags(app),
        ));
    }
    for (id, sp) in &st.graph.service_principals {
        out.push(item(
            format!("graph:/servicePrincipals/{id}"),
            "microsoft.graph.servicePrincipal",
            text(sp, "displayName"),
            tags(sp),
        ));
    }
    for (id, d) in &st.graph.deleted {
        out.push(item(
            format!("graph:/directory/deletedItems/{id}"),
            "microsoft.graph.deletedItem",
            text(d, "displayName"),
            tags(d),
        ));
    }
    for (vault, data) in &st.keyvault.vaults {
        let base = format!("https://{vault}.vault.azure.net");
        for c in data.certificates.values() {
            let t = c
                .versions
                .last()
                .map(|v| serde_json::json!(v.tags))
                .unwrap_or(serde_json::json!({}));
            let kind = if c.deleted.is_some() {
                "deletedcertificates"
            } else {
                "certificates"
            };
            out.push(item(
                format!("{base}/{kind}/{}", c.name),
                "Microsoft.KeyVault/vaults/certificates",
                c.name.clone(),
                t,
            ));
        }
        for sec in data.secrets.values().filter(|s| !s.managed) {
            let t = sec
                .versions
                .last()
                .map(|v| serde_json::json!(v.tags))
                .unwrap_or(serde_json::json!({}));
            let kind = if sec.deleted.is_some() {
                "deletedsecrets"
            } else {
                "secrets"
            };
            out.push(item(
                format!("{base}/{kind}/{}", sec.name),
                "Microsoft.KeyVault/vaults/secrets",
                sec.name.clone(),
                t,
            ));
        }
    }
    for name in st.keyvault.deleted_vaults.keys() {
        out.push(item(
            format!("keyvault:/deletedVaults/{name}"),
            "Microsoft.KeyVault/deletedVaults",
            name.clone(),
            serde_json::json!({}),
        ));
    }
    out
}

/// One entry of the request log (`GET /_sim/requests`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestRecord {
    /// Arrival order (starts at 1).
    pub seq: u64,
    /// HTTP method.
    pub method: String,
    /// Path with query string, as received.
    pub path: String,
    /// Status sent (0 when a fault dropped the connection).
    pub status: u16,
    /// `x-ms-error-code`, Kubernetes Status reason, or OAuth error, if any.
    pub error_code: Option<String>,
    /// Who sent it when it did not come over HTTP: a simulated controller calling Azure
    /// (`hypershift-operator`, `control-plane-operator`). `None` for HTTP clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The error message a simulated controller got back, when Azure refused its call
    /// (e.g. CAPZ's VM PUT refused for quota, whose message HyperShift's NodePool condition
    /// truncates). `None` for HTTP clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// When it was answered, Unix milliseconds (the simulator's clock: wall time at start
    /// plus real time since; not the scaled model time).
    #[serde(default)]
    pub at_ms: u64,
}

/// Simulator clock: wall time at start plus tokio time since, so paused-time tests control
/// it and persisted timestamps stay meaningful after a restart.
#[derive(Debug)]
pub(crate) struct Clock {
    wall0_ms: u64,
    inst0: tokio::time::Instant,
}

impl Clock {
    fn new() -> Self {
        let wall0_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Self {
            wall0_ms,
            inst0: tokio::time::Instant::now(),
        }
    }
    pub(crate) fn now_ms(&self) -> u64 {
        self.wall0_ms + self.inst0.elapsed().as_millis() as u64
    }

    /// Microseconds since the simulator started (on the same tokio clock).
    fn micros(&self) -> u64 {
        self.inst0.elapsed().as_micros() as u64
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub config: SimConfig,
    pub clock: Clock,
    pub state: Mutex<State>,
    pub faults: Mutex<FaultEngine>,
    pub throttle: Mutex<Throttle>,
    pub log: Mutex<Vec<RequestRecord>>,
    pub seq: AtomicU64,
    pub events: broadcast::Sender<Arc<KubeEvent>>,
    pub crds: CrdSet,
    /// Identities with a federated-credential write in flight (lower-cased ids).
    pub fic_busy: Mutex<HashSet<String>>,
    /// The preflight failure scenario in force (`PUT /_sim/scenario`).
    pub scenario: Mutex<crate::preflight::Scenario>,
    /// With `persist_every`: a mutation not yet written to the state file.
    pub dirty: std::sync::atomic::AtomicBool,
    /// With `persist_every`: when the state file was last written (simulated-clock ms).
    pub saved_ms: AtomicU64,
    /// When the controllers' last run ended, and how long it took ([`Clock::micros`]).
    pub tick_end_us: AtomicU64,
    pub tick_cost_us: AtomicU64,
    /// A write came in since the controllers last ran: the next request runs them.
    pub written: std::sync::atomic::AtomicBool,
    /// With a state file: whether this simulator writes it (it holds the file's lock),
    /// and the lock, held for its lifetime. `false` when another process holds it.
    pub persists: bool,
    pub _state_lock: Option<std::fs::File>,
}

impl Drop for Inner {
    /// A debounced state file is written once more when the simulator goes away.
    fn drop(&mut self) {
        if self.dirty.swap(false, Ordering::SeqCst)
            && self.persists
            && let Some(path) = &self.config.state_file
        {
            let st = lock(&self.state);
            if let Err(e) = st.save(path) {
                tracing::error!(error = %e, "persisting simulator state failed");
            }
        }
    }
}

/// Take the lock beside the state file `path` (`<path>.lock`) for this simulator's
/// lifetime: one simulator writes a state file. Each simulator keeps its state in memory and
/// writes all of it, so two writing one file would each overwrite what the other made (and
/// race on its temporary file). When another process holds the lock, this one works on
/// the copy it loaded, writes nothing, and says so once with what to do instead. A file
/// system that cannot lock at all keeps the old behaviour (this simulator writes).
fn lock_state_file(path: &std::path::Path) -> (bool, Option<std::fs::File>) {
    use std::io::{Read, Seek, Write};
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let lock_path = std::path::PathBuf::from(lock_path);
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
    {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(path = %lock_path.display(), error = %e, "no state file lock");
            return (true, None);
        }
    };
    match file.try_lock() {
        Ok(()) => {
            // Who holds it, for the message of the process that finds it taken.
            let _ = file.set_len(0);
            let _ = file.rewind();
            let _ = write!(file, "{}", std::process::id());
            (true, Some(file))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            if holder == std::process::id().to_string() {
                // Another simulator of this very process (one per cluster of a command):
                // they take turns within the process, as they always did.
                return (true, None);
            }
            tracing::warn!(
                "the simulated cloud in {} belongs to another process (pid {}): this process works on a copy of it and saves none of its changes there. To share one simulated cloud between processes, stop the other one, or run `hcp-workflow simulator serve --state {}` once and pass `--simulator http://127.0.0.1:8443` (its address) to every command instead of --simulate",
                path.display(),
                if holder.is_empty() { "unknown" } else { holder },
                path.display(),
            );
            (false, None)
        }
        Err(std::fs::TryLockError::Error(e)) => {
            tracing::debug!(path = %lock_path.display(), error = %e, "cannot lock the state file");
            (true, None)
        }
    }
}

/// A running simulated cloud + management cluster. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Simulator {
    pub(crate) inner: Arc<Inner>,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it: the simulator's
/// state stays usable for the remaining requests of a test.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How often the background ticker completes operations and advances the operator (at
/// most: see [`ticker`]).
const TICK: Duration = Duration::from_millis(20);

/// A request never skips the controllers when their last run ended this long ago
/// ([`Simulator::tick_for_request`]), however long it took.
const MAX_SKIP_US: u64 = 50_000;

impl Simulator {
    /// Builds a simulator; loads `config.state_file` if it exists and the CRDs of
    /// `config.crds_dir`. When called inside a tokio runtime it starts the background
    /// ticker that completes operations and runs the simulated operator between requests.
    ///
    /// # Errors
    /// Unreadable state file or CRD directory, or an invalid configuration.
    pub fn new(config: SimConfig) -> Result<Simulator, Error> {
        config.validate()?;
        let crds = match &config.crds_dir {
            Some(dir) => CrdSet::load(dir)?,
            None => CrdSet::default(),
        };
        let (persists, state_lock) = match &config.state_file {
            Some(p) => lock_state_file(p),
            None => (true, None),
        };
        let loaded = match &config.state_file {
            Some(p) => State::load(p)?,
            None => None,
        };
        let fresh = loaded.is_none();
        let state = loaded.unwrap_or_default();
        let (events, _) = broadcast::channel(4096);
        let sim = Simulator {
            inner: Arc::new(Inner {
                faults: Mutex::new(FaultEngine::new(config.seed)),
                throttle: Mutex::new(Throttle::new(config.throttle.clone())),
                clock: Clock::new(),
                state: Mutex::new(state),
                log: Mutex::new(Vec::new()),
                seq: AtomicU64::new(0),
                events,
                crds,
                fic_busy: Mutex::new(HashSet::new()),
                scenario: Mutex::new(config.scenario.clone()),
                dirty: std::sync::atomic::AtomicBool::new(false),
                saved_ms: AtomicU64::new(0),
                tick_end_us: AtomicU64::new(0),
                tick_cost_us: AtomicU64::new(0),
                written: std::sync::atomic::AtomicBool::new(true),
                persists,
                _state_lock: state_lock,
                config,
            }),
        };
        {
            let now = sim.now_ms();
            let mut st = lock(&sim.inner.state);
            if fresh {
                arm::seed_management(&sim, &mut st, now);
                kube::seed_namespaces(&sim, &mut st, now);
            } else {
                // Watch history is not persisted: resuming from an older version is 410.
                st.kube_history_floor = st.kube_rv;
            }
            // Also on a loaded state: a new cluster file may name another base domain.
            crate::guest::seed_dns_zones(&sim, &mut st, now);
            kube::seed_operator_deployment(&sim, &mut st, now);
            crate::preflight::seed_supported_versions(&sim, &mut st, now);
            if fresh {
                st.kube_history_floor = 0;
            }
        }
        sim.persist()?;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&sim.inner);
            handle.spawn(ticker(weak));
        }
        Ok(sim)
    }

    /// The configuration this simulator runs with.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    /// The axum router serving every surface (ARM, Entra, blob, Kubernetes, `/_sim`).
    /// In-process callers can drive it with `tower::ServiceExt::oneshot`.
    pub fn router(&self) -> axum::Router {
        crate::http::router(self.clone())
    }

    /// Serves the router on `listener` until the task is cancelled.
    ///
    /// # Errors
    /// I/O errors of the listener.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> Result<(), Error> {
        axum::serve(listener, self.router())
            .await
            .map_err(Error::Serve)
    }

    /// Every ARM resource and Kubernetes object, in creation order.
    pub fn inventory(&self) -> Vec<InventoryItem> {
        self.tick();
        let st = lock(&self.inner.state);
        let mut items: Vec<InventoryItem> = arm::inventory(&st);
        items.extend(kube::inventory(&st));
        items.extend(directory_inventory(&st));
        items.sort_by_key(|i| i.created_seq);
        items
    }

    /// What Azure DNS answers a machine in VNet `vnet_id` for `name` (`crate::dns`), as
    /// JSON: `{"answer": "a", "ips": [...], "zone": id}`, `{"answer": "nxdomain", "zone":
    /// id}` or `{"answer": "unknown"}`. Without a VNet, what public DNS answers.
    pub fn resolve(&self, vnet_id: Option<&str>, name: &str) -> serde_json::Value {
        self.tick();
        let st = lock(&self.inner.state);
        let answer = match vnet_id {
            Some(v) => crate::dns::resolve_in_vnet(&st, v, name),
            None => crate::dns::resolve_publicly(&st, name, None),
        };
        serde_json::to_value(answer).unwrap_or_default()
    }

    /// The request log so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.inner.log).clone()
    }

    /// Adds a fault rule; returns its id.
    ///
    /// # Errors
    /// The rule is inconsistent (see [`FaultRule`]).
    pub fn add_fault(&self, rule: FaultRule) -> Result<String, String> {
        self.written();
        lock(&self.inner.faults).add(rule)
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.written();
        lock(&self.inner.faults).clear();
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }

    /// Scaled duration of a model duration, in ms.
    pub(crate) fn scaled(&self, model: Duration) -> u64 {
        self.inner.config.scaled_ms(model)
    }

    pub(crate) fn next_request_seq(&self) -> u64 {
        self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The controllers' turn before a request is answered. They run unless no write came
    /// in since their last run **and** that run ended less than its own duration ago (ARM's
    /// due operations complete either way: [`Self::tick_operations`]): a
    /// request that queued behind a run of the controllers (they hold the state lock) is
    /// answered from what that run made, as if it had come in while it ran. The answer is
    /// never staler than one run of the controllers, the delay their lock already imposes;
    /// with a handful of clusters a run takes microseconds and every request still runs
    /// them. (With fifty clusters one run took about 15 ms and ran before every request and
    /// from the ticker, most of the simulator's CPU: the fifty-cluster benchmark.)
    pub(crate) fn tick_for_request(&self) {
        let written = self.inner.written.swap(false, Ordering::SeqCst);
        let cost = self
            .inner
            .tick_cost_us
            .load(Ordering::SeqCst)
            .min(MAX_SKIP_US);
        let since = self
            .inner
            .clock
            .micros()
            .saturating_sub(self.inner.tick_end_us.load(Ordering::SeqCst));
        if written || since >= cost {
            self.tick();
        } else {
            self.tick_operations();
        }
    }

    /// Only ARM's due long-running operations (cheap: what a client polls for is never
    /// late). One that completes counts as a write: the next request runs every controller.
    fn tick_operations(&self) {
        let changed = {
            let mut st = lock(&self.inner.state);
            arm::tick(self, &mut st, self.now_ms())
        };
        if changed {
            self.written();
            self.persist_logged();
        }
    }

    /// A write came in (a request that is not a GET or HEAD, or a control request): the
    /// next request runs the controllers whenever it comes.
    pub(crate) fn written(&self) {
        self.inner.written.store(true, Ordering::SeqCst);
    }

    /// Completes due operations and advances the simulated operator. Returns whether
    /// anything changed (and persists if so).
    pub(crate) fn tick(&self) -> bool {
        let changed = {
            let mut st = lock(&self.inner.state);
            let start = self.inner.clock.micros();
            let now = self.now_ms();
            let a = arm::tick(self, &mut st, now);
            let b = operator::tick(self, &mut st, now);
            let c = kube::tick(self, &mut st, now);
            let d = crate::keyvault::tick(self, &mut st, now);
            let end = self.inner.clock.micros();
            self.inner.tick_end_us.store(end, Ordering::SeqCst);
            self.inner
                .tick_cost_us
                .store(end.saturating_sub(start), Ordering::SeqCst);
            a || b || c || d
        };
        if changed {
            self.persist_logged();
        }
        changed
    }

    /// Writes the state file, if one is configured and this simulator owns it.
    pub(crate) fn persist(&self) -> Result<(), Error> {
        if !self.inner.persists {
            return Ok(());
        }
        if let Some(path) = &self.inner.config.state_file {
            let st = lock(&self.inner.state);
            st.save(path)?;
        }
        Ok(())
    }

    pub(crate) fn persist_logged(&self) {
        if self.inner.config.persist_every.is_some() {
            // Debounced: the ticker writes it (`flush_due`).
            self.inner.dirty.store(true, Ordering::SeqCst);
            return;
        }
        if let Err(e) = self.persist() {
            tracing::error!(error = %e, "persisting simulator state failed");
        }
    }

    /// With `persist_every`: write the state file if it changed and the interval passed
    /// (`force`: whenever it changed, e.g. at shutdown).
    pub(crate) fn flush_due(&self, force: bool) {
        let Some(every) = self.inner.config.persist_every else {
            return;
        };
        let now = self.inner.clock.now_ms();
        let since = now.saturating_sub(self.inner.saved_ms.load(Ordering::SeqCst));
        if (force || since >= every.as_millis() as u64)
            && self.inner.dirty.swap(false, Ordering::SeqCst)
        {
            self.inner.saved_ms.store(now, Ordering::SeqCst);
            if let Err(e) = self.persist() {
                self.inner.dirty.store(true, Ordering::SeqCst);
                tracing::error!(error = %e, "persisting simulator state failed");
            }
        }
    }
}

async fn ticker(weak: Weak<Inner>) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(inner) = weak.upgrade() else { return };
        let sim = Simulator { inner };
        // Requests run the controllers first (`Simulator::tick_for_request`): the ticker
        // only fills the gaps, and leaves at least four times their last run's duration
        // between two runs of its own, so it never takes more than a fifth of a core (with
        // fifty clusters it took most of the simulator's CPU: the fifty-cluster benchmark). What it
        // advances between requests is seen by watches only: a request runs them anyway.
        let since = sim
            .inner
            .clock
            .micros()
            .saturating_sub(sim.inner.tick_end_us.load(Ordering::SeqCst));
        let gap = (TICK.as_micros() as u64).max(4 * sim.inner.tick_cost_us.load(Ordering::SeqCst));
        if since >= gap {
            sim.tick();
        }
        sim.flush_due(false);
    }
}

/// Options of `hcp-workflow simulator serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// State file (`--state`).
    pub state: Option<PathBuf>,
    /// Time scale (`--time-scale`); default [`SimConfig::default`]'s.
    pub time_scale: Option<f64>,
    /// Seed (`--seed`).
    pub seed: Option<u64>,
    /// CRD directory (`--crds`).
    pub crds: Option<PathBuf>,
    /// Azure REST API spec directory (`--specs`): ARM request bodies are validated.
    pub specs: Option<PathBuf>,
    /// The simulated HyperShift operator's `--private-platform` (`--private-platform`);
    /// default [`SimConfig::default`]'s (none).
    pub private_platform: Option<crate::config::PrivatePlatform>,
    /// The management cluster's platform (`--management-platform`); default OpenShift.
    pub management_platform: Option<crate::config::ManagementPlatform>,
    /// The simulated HyperShift operator's minor version (`--hypershift-version`);
    /// default [`crate::config::DEFAULT_HYPERSHIFT_VERSION`].
    pub hypershift_version: Option<String>,
    /// Public DNS zones seeded at start (`--dns-zone`, `--no-dns-zones`); `None`:
    /// [`crate::config::DnsZoneSeed::example`], the zone of `examples/cluster.yaml`.
    pub dns_zones: Option<Vec<crate::config::DnsZoneSeed>>,
    /// Preflight failure scenario file (`--scenario FILE.json`; see the `preflight` module).
    pub scenario: Option<PathBuf>,
}

/// Binds, prints the endpoints and the settings to use, and serves until Ctrl-C.
///
/// # Errors
/// Bind failure, unreadable state/CRDs, or serving errors.
pub async fn serve_cli(opts: ServeOptions) -> Result<(), Error> {
    let mut config = SimConfig::default();
    if let Some(t) = opts.time_scale {
        config.time_scale = t;
    }
    if let Some(s) = opts.seed {
        config.seed = s;
    }
    if let Some(p) = opts.private_platform {
        config.private_platform = p;
    }
    if let Some(p) = opts.management_platform {
        config.management_platform = p;
    }
    if let Some(v) = &opts.hypershift_version {
        config.hypershift_version = v.clone();
    }
    config.dns_zones = opts
        .dns_zones
        .clone()
        .unwrap_or_else(|| vec![crate::config::DnsZoneSeed::example()]);
    if let Some(p) = &opts.scenario {
        config.scenario = crate::preflight::Scenario::load(p)?;
    }
    config.state_file = opts.state.clone();
    config.persist_every = Some(Duration::from_millis(250));
    config.crds_dir = opts.crds.clone();
    config.specs_dir = opts.specs.clone();
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(Error::Serve)?;
    let addr = listener.local_addr().map_err(Error::Serve)?;
    let sim = Simulator::new(config)?;
    println!("{}", banner(&sim, addr));
    let router = sim.router();
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(Error::Serve);
    sim.flush_due(true);
    served
}

/// The text `serve_cli` prints: endpoints and the settings to use.
pub fn banner(sim: &Simulator, addr: SocketAddr) -> String {
    let c = sim.config();
    let base = format!("http://{addr}");
    format!(
        "hcp-simulator listening on {base}\n\
         endpoints (one listener; https Azure URLs are routed here by the simulator transport):\n  \
         Entra token:  https://login.microsoftonline.com/{{tenant}}/oauth2/v2.0/token -> {base}/{{tenant}}/oauth2/v2.0/token\n  \
         ARM:          https://management.azure.com/subscriptions/... -> {base}/subscriptions/...\n  \
         Blob:         https://{{account}}.blob.core.windows.net/{{container}}/{{blob}} -> {base}/_blob/{{account}}/{{container}}/{{blob}}\n  \
         Graph:        https://graph.microsoft.com/v1.0/... -> {base}/_graph/v1.0/...\n  \
         Key Vault:    https://{{vault}}.vault.azure.net/... -> {base}/_keyvault/{{vault}}/...\n  \
         Kubernetes:   {base} (plain HTTP, any bearer token)\n  \
         Control:      {base}/_sim/inventory, {base}/_sim/requests, {base}/_sim/faults, {base}/_sim/scenario\n\
         settings:\n  \
         use: hcp-workflow <command> --simulator {base}\n  \
         management subscription: {ms}\n  \
         management resource group: {mrg} (VNet {vnet}, location {loc})\n  \
         tenant: {tenant}\n  \
         public DNS zones: {zones}\n  \
         time scale: {ts}  seed: {seed}  state: {state}  crds: {crds}\n  \
         hypershift operator: {pp}  management cluster: {mp}",
        zones = if c.dns_zones.is_empty() {
            "(none)".to_string()
        } else {
            c.dns_zones
                .iter()
                .map(|z| {
                    format!(
                        "{} (subscription {}, group {})",
                        z.domain, z.subscription, z.resource_group
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        },
        pp = match c.private_platform {
            crate::config::PrivatePlatform::Azure =>
                "--private-platform=Azure (HyperShift makes the private link)",
            crate::config::PrivatePlatform::None =>
                "no --private-platform (hcp-workflow makes the private link)",
        },
        mp = match c.management_platform {
            crate::config::ManagementPlatform::OpenShift => "OpenShift (Route API served)",
            crate::config::ManagementPlatform::Aks if c.scenario.aks.route_crd =>
                "AKS (Route CRD applied, as HyperShift's AKS setup does)",
            crate::config::ManagementPlatform::Aks => "AKS (no Route API)",
        },
        ms = c.management_subscription,
        mrg = c.management_resource_group,
        vnet = c.management_vnet,
        loc = c.management_location,
        tenant = c.tenant_id,
        ts = c.time_scale,
        seed = c.seed,
        state = c
            .state_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(memory)".into()),
        crds = c
            .crds_dir
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(none)".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a request `after` the last run ended ran the controllers, that run having
    /// taken `cost_us`.
    fn ran(sim: &Simulator, cost_us: u64, after: Duration) -> bool {
        let end = sim.inner.clock.micros();
        sim.inner.tick_end_us.store(end, Ordering::SeqCst);
        sim.inner.tick_cost_us.store(cost_us, Ordering::SeqCst);
        std::thread::sleep(after);
        sim.tick_for_request();
        sim.inner.tick_end_us.load(Ordering::SeqCst) != end
    }

    #[test]
    fn a_request_runs_the_controllers_after_a_write_or_once_their_last_run_is_as_old_as_it_was_long()
     {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let _guard = rt.enter();
        let sim = Simulator::new(SimConfig::default()).expect("simulator");
        let ms = Duration::from_millis;
        // A fresh simulator: the first request runs them (as if written).
        assert!(ran(&sim, 40_000, ms(1)));
        // A cheap run (a few clusters: microseconds) never lets a later request skip them.
        assert!(ran(&sim, 0, ms(1)));
        // A run as long as 40 ms that just ended: a read skips them ...
        assert!(!ran(&sim, 40_000, ms(2)));
        // ... a write does not let the next request skip them ...
        sim.written();
        assert!(ran(&sim, 40_000, ms(2)));
        // ... and neither does time: once the run is as old as it was long, they run.
        assert!(ran(&sim, 20_000, ms(25)));
        // However long a run took, a request waits at most MAX_SKIP_US for the next one.
        assert!(ran(
            &sim,
            10 * MAX_SKIP_US,
            Duration::from_micros(MAX_SKIP_US + 1_000)
        ));
    }
}
