//! Deterministic journals for the inspector's tests: runs with fixed ids and fixed
//! timestamps, written through the real store API (create, lease, fenced appends, operator
//! inbox) into a scratch SQLite file, each event validated by the engine's state machine
//! first. The binary then renders them with `--now` fixed, so output is byte-stable.
#![allow(dead_code, clippy::unwrap_used)]

use hcp_runtime::store::{Append, Lease, NewCommand, NewEvent, NewRun, RunPatch};
use hcp_runtime::{
    Event, JournalStore, NodeSpec, OperatorCommand, RetryPolicy, RunState, RunView, SagaDag,
    StepError, Timestamp, UnwindCause,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// 2025-06-01T12:00:00Z: every fixture time is an offset from it.
pub const T0: i64 = 1_748_779_200_000;
/// The `--now` the golden files are rendered at (T0 + 30 min).
pub const NOW: &str = "2025-06-01T12:30:00Z";

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hcp-workflow"))
}

pub fn run_id(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0000_0000_0000_4000_8000_0000_0000_0000 | n)
}

pub fn at(secs: i64) -> Timestamp {
    Timestamp(T0 + secs * 1000)
}

/// A cluster-shaped DAG: identity → {network ∥ dns} → control plane → private link.
pub fn cluster_dag(workflow: &str) -> SagaDag {
    let retry = RetryPolicy::default().with_max_attempts(5);
    let n = |name: &str, stage: &str, deps: &[&str]| NodeSpec {
        name: format!("{workflow}.{name}"),
        action: format!("azure.{name}"),
        stage: stage.into(),
        input: serde_json::Value::Null,
        deps: deps.iter().map(|d| format!("{workflow}.{d}")).collect(),
        retry: retry.clone(),
        undo_retry: RetryPolicy::default().with_max_attempts(3),
        has_undo: true,
        pivot: None,
    };
    SagaDag {
        workflow: workflow.into(),
        version: 2,
        stages: vec![
            "identity".into(),
            "network".into(),
            "control-plane".into(),
            "private-link".into(),
        ],
        nodes: vec![
            n("identity.ensure", "identity", &[]),
            n("vnet.ensure", "network", &["identity.ensure"]),
            n("dns.ensure", "network", &["identity.ensure"]),
            n(
                "hostedcluster.apply",
                "control-plane",
                &["vnet.ensure", "dns.ensure"],
            ),
            n("pls.ensure", "private-link", &["hostedcluster.apply"]),
        ],
        on_failure: Default::default(),
        record: None,
    }
}

pub fn ledger(items: &[(&str, &str, &str, &str)]) -> serde_json::Value {
    let l: Vec<serde_json::Value> = items
        .iter()
        .map(|(kind, ty, id, action)| {
            serde_json::json!({"kind": kind, "resource_type": ty, "id": id, "action": action})
        })
        .collect();
    serde_json::json!({ "ledger": l })
}

pub fn rg(cluster: &str, rest: &str) -> String {
    format!("/subscriptions/00000000-0000-0000-0000-00000000aaaa/resourceGroups/{cluster}-rg{rest}")
}

/// One run being written.
pub struct J {
    pub store: Arc<dyn JournalStore>,
    pub lease: Lease,
    pub view: RunView,
    pub id: uuid::Uuid,
}

impl J {
    pub async fn start(
        store: &Arc<dyn JournalStore>,
        n: u128,
        dag: SagaDag,
        cluster: &str,
        created: i64,
    ) -> J {
        let id = run_id(n);
        store
            .create_run(NewRun {
                id,
                workflow: dag.workflow.clone(),
                workflow_version: dag.version,
                labels: [("cluster".to_string(), cluster.to_string())].into(),
                idempotency_key: None,
                exclusive_key: None,
                target: None,
                dag: serde_json::to_string(&dag).unwrap(),
                created_at: at(created),
            })
            .await
            .unwrap();
        let lease = store
            .acquire(
                "worker-1",
                at(created),
                Duration::from_secs(3600),
                1,
                Some(id),
            )
            .await
            .unwrap()
            .pop()
            .unwrap();
        J {
            store: store.clone(),
            lease,
            view: RunView::new(dag),
            id,
        }
    }

    pub async fn ev_with(&mut self, secs: i64, e: Event, applied: Vec<i64>) {
        let t = at(secs);
        self.view.apply(&e, t).unwrap();
        let state = self.view.state();
        let wake_at = match state {
            s if s.is_terminal() => None,
            RunState::NeedsOperator | RunState::Failed => None,
            RunState::Waiting => self.view.next_timer(),
            _ => Some(t),
        };
        self.store
            .append(
                &self.lease,
                Append {
                    events: vec![NewEvent {
                        kind: e.kind().into(),
                        node: e.node().map(str::to_string),
                        data: serde_json::to_string(&e).unwrap(),
                        at: t,
                    }],
                    patch: RunPatch {
                        state,
                        blocked_on: self.view.blocked_on(),
                        current_step: self.view.current_step().map(str::to_string),
                        wake_at,
                        updated_at: t,
                    },
                    applied_commands: applied,
                    after_seq: None,
                    summary_kept: false,
                },
            )
            .await
            .unwrap();
    }

    pub async fn ev(&mut self, secs: i64, e: Event) {
        self.ev_with(secs, e, vec![]).await
    }

    fn node(&self, short: &str) -> String {
        format!("{}.{short}", self.view.dag.workflow)
    }

    pub async fn started(&mut self, secs: i64, short: &str, attempt: u32) {
        let node = self.node(short);
        self.ev(secs, Event::NodeStarted { node, attempt }).await
    }

    pub async fn succeeded(&mut self, secs: i64, short: &str, output: serde_json::Value) {
        let node = self.node(short);
        self.ev(secs, Event::NodeSucceeded { node, output }).await
    }

    pub async fn retry(&mut self, secs: i64, short: &str, attempt: u32, next: i64, e: StepError) {
        let node = self.node(short);
        self.ev(
            secs,
            Event::NodeRetryScheduled {
                node,
                attempt,
                next_at: at(next),
                error: e,
            },
        )
        .await
    }

    pub async fn failed(&mut self, secs: i64, short: &str, e: StepError) {
        let node = self.node(short);
        self.ev(
            secs,
            Event::NodeFailed {
                node: node.clone(),
                error: e,
                reason: "permanent error".into(),
            },
        )
        .await;
        self.ev(
            secs,
            Event::UnwindStarted {
                cause: UnwindCause::NodeFailed { node },
            },
        )
        .await
    }

    pub async fn undo(&mut self, secs: i64, short: &str) {
        let node = self.node(short);
        self.ev(
            secs,
            Event::UndoStarted {
                node: node.clone(),
                attempt: 1,
            },
        )
        .await;
        self.ev(
            secs + 2,
            Event::NodeUndone {
                node,
                skipped: false,
            },
        )
        .await
    }

    /// A command submitted at `secs` and applied at `secs + 1`.
    pub async fn operator(&mut self, secs: i64, cmd: OperatorCommand, by: &str, reason: &str) {
        let id = self
            .store
            .submit_command(
                self.id,
                NewCommand {
                    command: serde_json::to_string(&cmd).unwrap(),
                    requested_by: by.into(),
                    reason: reason.into(),
                    requested_at: at(secs),
                },
            )
            .await
            .unwrap();
        self.ev_with(
            secs + 1,
            Event::Operator {
                command_id: id,
                command: cmd,
                by: by.into(),
                reason: reason.into(),
                outcome: "applied".into(),
            },
            vec![id],
        )
        .await
    }

    pub async fn release(self) {
        self.store.release(&self.lease, None).await.unwrap();
    }
}

/// The fixture journal:
/// - run 1: `create-cluster` of `alpha`, succeeded (identity, vnet, dns, control plane, PLS);
/// - run 2: `create-cluster` of `beta`, stuck unwinding: the PLS step failed with a
///   quota error (after a throttled attempt whose message carries `<script>`), the undo of
///   the control plane gave up twice, with an operator retry in between (`needs-operator`);
/// - run 3: `create-cluster` of `gamma`, waiting: the vnet step backs off after a 429,
///   lease held by `worker-1`;
/// - run 4: `delete-cluster` of `alpha`, succeeded: it deleted alpha's control plane and
///   PLS (so only alpha's persistent identity remains in the inventory).
pub async fn fixture(dir: &Path) -> String {
    let path: PathBuf = dir.join("golden.db");
    let url = format!("sqlite://{}", path.display());
    let store = hcp_persistence::open(&url).await.unwrap();
    let vnet = |s: &str| ledger(&[("azure", "Microsoft.Network/virtualNetworks", s, "created")]);

    // Run 1: alpha, succeeded.
    let mut j = J::start(&store, 1, cluster_dag("create-cluster"), "alpha", 0).await;
    j.started(1, "identity.ensure", 1).await;
    let mut id_ledger = ledger(&[(
        "azure",
        "Microsoft.ManagedIdentity/userAssignedIdentities",
        &rg(
            "alpha",
            "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/alpha-cp",
        ),
        "created",
    )]);
    id_ledger["ledger"][0]["persistent"] = true.into();
    j.succeeded(4, "identity.ensure", id_ledger).await;
    j.started(4, "vnet.ensure", 1).await;
    j.started(4, "dns.ensure", 1).await;
    j.succeeded(
        9,
        "vnet.ensure",
        vnet(&rg(
            "alpha",
            "/providers/Microsoft.Network/virtualNetworks/alpha-vnet",
        )),
    )
    .await;
    j.succeeded(7, "dns.ensure", serde_json::json!({})).await;
    j.started(9, "hostedcluster.apply", 1).await;
    j.succeeded(
        70,
        "hostedcluster.apply",
        ledger(&[(
            "kubernetes",
            "hypershift.openshift.io/HostedCluster",
            "clusters/alpha",
            "created",
        )]),
    )
    .await;
    j.started(70, "pls.ensure", 1).await;
    j.succeeded(
        95,
        "pls.ensure",
        ledger(&[(
            "azure",
            "Microsoft.Network/privateLinkServices",
            &rg(
                "alpha",
                "/providers/Microsoft.Network/privateLinkServices/alpha-pls",
            ),
            "created",
        )]),
    )
    .await;
    j.ev(
        95,
        Event::RunFinished {
            state: RunState::Succeeded,
        },
    )
    .await;
    j.release().await;

    // Run 2: beta, stuck unwinding.
    let mut j = J::start(&store, 2, cluster_dag("create-cluster"), "beta", 300).await;
    j.started(301, "identity.ensure", 1).await;
    j.succeeded(
        303,
        "identity.ensure",
        ledger(&[(
            "azure",
            "Microsoft.ManagedIdentity/userAssignedIdentities",
            &rg(
                "beta",
                "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/beta-cp",
            ),
            "adopted",
        )]),
    )
    .await;
    j.started(303, "vnet.ensure", 1).await;
    j.started(303, "dns.ensure", 1).await;
    j.succeeded(
        306,
        "vnet.ensure",
        vnet(&rg(
            "beta",
            "/providers/Microsoft.Network/virtualNetworks/beta-vnet",
        )),
    )
    .await;
    j.succeeded(305, "dns.ensure", serde_json::json!({})).await;
    j.started(306, "hostedcluster.apply", 1).await;
    j.succeeded(
        360,
        "hostedcluster.apply",
        ledger(&[(
            "kubernetes",
            "hypershift.openshift.io/HostedCluster",
            "clusters/beta",
            "created",
        )]),
    )
    .await;
    j.started(360, "pls.ensure", 1).await;
    j.retry(
        362,
        "pls.ensure",
        1,
        364,
        StepError::retryable("throttled", "Too many requests <script>alert(1)</script>")
            .with_code("TooManyRequests"),
    )
    .await;
    j.started(364, "pls.ensure", 2).await;
    j.failed(
        366,
        "pls.ensure",
        StepError::permanent(
            "quota",
            "The subscription has no Private Link Service quota left in eastus",
        )
        .with_code("QuotaExceeded"),
    )
    .await;
    j.undo(367, "pls.ensure").await;
    let hc = "create-cluster.hostedcluster.apply".to_string();
    j.ev(
        370,
        Event::UndoStarted {
            node: hc.clone(),
            attempt: 1,
        },
    )
    .await;
    let stuck = StepError::retryable(
        "conflict",
        "the HostedCluster still has finalizers (hypershift.openshift.io/finalizer)",
    )
    .with_code("Conflict");
    j.ev(
        371,
        Event::UndoRetryScheduled {
            node: hc.clone(),
            attempt: 1,
            next_at: at(381),
            error: stuck.clone(),
        },
    )
    .await;
    j.ev(
        381,
        Event::UndoStarted {
            node: hc.clone(),
            attempt: 2,
        },
    )
    .await;
    j.ev(
        382,
        Event::UndoRetryScheduled {
            node: hc.clone(),
            attempt: 2,
            next_at: at(402),
            error: stuck.clone(),
        },
    )
    .await;
    j.ev(
        402,
        Event::UndoStarted {
            node: hc.clone(),
            attempt: 3,
        },
    )
    .await;
    j.ev(
        403,
        Event::UndoFailed {
            node: hc.clone(),
            error: stuck.clone(),
            reason: "retries exhausted after 3 attempts".into(),
        },
    )
    .await;
    j.operator(
        600,
        OperatorCommand::Retry {
            step: Some(hc.clone()),
        },
        "alice@ops",
        "operator removed the finalizer",
    )
    .await;
    j.ev(
        602,
        Event::UndoStarted {
            node: hc.clone(),
            attempt: 1,
        },
    )
    .await;
    j.ev(
        603,
        Event::UndoRetryScheduled {
            node: hc.clone(),
            attempt: 1,
            next_at: at(613),
            error: stuck.clone(),
        },
    )
    .await;
    j.ev(
        613,
        Event::UndoStarted {
            node: hc.clone(),
            attempt: 2,
        },
    )
    .await;
    j.ev(
        614,
        Event::UndoRetryScheduled {
            node: hc.clone(),
            attempt: 2,
            next_at: at(634),
            error: stuck.clone(),
        },
    )
    .await;
    j.ev(
        634,
        Event::UndoStarted {
            node: hc.clone(),
            attempt: 3,
        },
    )
    .await;
    j.ev(
        635,
        Event::UndoFailed {
            node: hc,
            error: stuck,
            reason: "retries exhausted after 3 attempts".into(),
        },
    )
    .await;
    j.release().await;

    // Run 3: gamma, backing off after a 429, lease held.
    let mut j = J::start(&store, 3, cluster_dag("create-cluster"), "gamma", 1700).await;
    j.started(1701, "identity.ensure", 1).await;
    j.succeeded(
        1703,
        "identity.ensure",
        ledger(&[(
            "azure",
            "Microsoft.ManagedIdentity/userAssignedIdentities",
            &rg(
                "gamma",
                "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/gamma-cp",
            ),
            "created",
        )]),
    )
    .await;
    j.started(1703, "vnet.ensure", 1).await;
    j.started(1703, "dns.ensure", 1).await;
    j.retry(
        1704,
        "vnet.ensure",
        1,
        1706,
        StepError::retryable("throttled", "429 from ARM").with_code("TooManyRequests"),
    )
    .await;
    j.succeeded(1705, "dns.ensure", serde_json::json!({})).await;
    j.started(1706, "vnet.ensure", 2).await;
    j.retry(
        1708,
        "vnet.ensure",
        2,
        1860,
        StepError::retryable("throttled", "429 from ARM").with_code("TooManyRequests"),
    )
    .await;
    // Lease kept (worker-1, expires an hour after the run was created).

    // Run 4: delete alpha, succeeded.
    let del = SagaDag {
        workflow: "delete-cluster".into(),
        version: 1,
        stages: vec!["delete".into()],
        nodes: vec![NodeSpec {
            name: "delete-cluster.teardown".into(),
            action: "azure.teardown".into(),
            stage: "delete".into(),
            input: serde_json::Value::Null,
            deps: vec![],
            retry: RetryPolicy::default(),
            undo_retry: RetryPolicy::default(),
            has_undo: false,
            pivot: None,
        }],
        on_failure: Default::default(),
        record: None,
    };
    let mut j = J::start(&store, 4, del, "alpha", 1000).await;
    j.ev(
        1001,
        Event::NodeStarted {
            node: "delete-cluster.teardown".into(),
            attempt: 1,
        },
    )
    .await;
    j.ev(
        1100,
        Event::NodeSucceeded {
            node: "delete-cluster.teardown".into(),
            output: ledger(&[
                (
                    "azure",
                    "Microsoft.Network/privateLinkServices",
                    &rg(
                        "alpha",
                        "/providers/Microsoft.Network/privateLinkServices/alpha-pls",
                    ),
                    "deleted",
                ),
                (
                    "kubernetes",
                    "hypershift.openshift.io/HostedCluster",
                    "clusters/alpha",
                    "deleted",
                ),
                (
                    "azure",
                    "Microsoft.Network/virtualNetworks",
                    &rg(
                        "alpha",
                        "/providers/Microsoft.Network/virtualNetworks/alpha-vnet",
                    ),
                    "gone",
                ),
            ]),
        },
    )
    .await;
    j.ev(
        1100,
        Event::RunFinished {
            state: RunState::Succeeded,
        },
    )
    .await;
    j.release().await;

    // Run 5: create-cluster of `epsilon` with `on-failure: pause=24h`: the control plane
    // failed for good and the run paused with its work kept.
    let mut paused_dag = cluster_dag("create-cluster");
    paused_dag.on_failure = hcp_runtime::FailurePolicy::pause(Some(Duration::from_secs(86_400)));
    let mut j = J::start(&store, 5, paused_dag, "epsilon", 1200).await;
    j.started(1201, "identity.ensure", 1).await;
    j.succeeded(1202, "identity.ensure", serde_json::json!({}))
        .await;
    j.started(1203, "vnet.ensure", 1).await;
    j.started(1203, "dns.ensure", 1).await;
    j.succeeded(
        1210,
        "vnet.ensure",
        vnet(&rg(
            "epsilon",
            "/providers/Microsoft.Network/virtualNetworks/epsilon-vnet",
        )),
    )
    .await;
    j.succeeded(1211, "dns.ensure", serde_json::json!({})).await;
    j.started(1212, "hostedcluster.apply", 1).await;
    j.ev(
        1240,
        Event::NodeFailed {
            node: "create-cluster.hostedcluster.apply".into(),
            error: StepError::permanent("quota", "the subscription's vCPU quota is used up")
                .with_code("QuotaExceeded"),
            reason: "permanent error".into(),
        },
    )
    .await;
    j.ev(
        1240,
        Event::RunPaused {
            step: "create-cluster.hostedcluster.apply".into(),
            cause: hcp_runtime::PauseCause::Policy,
            unwind_at: Some(at(1240 + 86_400)),
        },
    )
    .await;
    j.release().await;

    // Run 6: delete-cluster of `zeta` (every step a pivot): two deletions done, the third
    // failed; the run stopped partway, nothing undone.
    let pivot = |name: &str, deps: &[&str]| NodeSpec {
        name: format!("delete-cluster.{name}"),
        action: "azure.delete".into(),
        stage: "delete".into(),
        input: serde_json::Value::Null,
        deps: deps.iter().map(|d| format!("delete-cluster.{d}")).collect(),
        retry: RetryPolicy::default(),
        undo_retry: RetryPolicy::default(),
        has_undo: false,
        pivot: Some("a deletion cannot be undone".into()),
    };
    let del = SagaDag {
        workflow: "delete-cluster".into(),
        version: 1,
        stages: vec!["delete".into()],
        nodes: vec![
            pivot("hosted-cluster", &[]),
            pivot("pls", &["hosted-cluster"]),
            pivot("vnet", &["pls"]),
        ],
        on_failure: hcp_runtime::FailurePolicy::pause(None),
        record: None,
    };
    let mut j = J::start(&store, 6, del, "zeta", 1300).await;
    j.started(1301, "hosted-cluster", 1).await;
    j.succeeded(1330, "hosted-cluster", serde_json::json!({}))
        .await;
    j.started(1331, "pls", 1).await;
    j.succeeded(1340, "pls", serde_json::json!({})).await;
    j.started(1341, "vnet", 1).await;
    j.ev(
        1350,
        Event::NodeFailed {
            node: "delete-cluster.vnet".into(),
            error: StepError::permanent("conflict", "the subnet is still in use by a NIC")
                .with_code("InUseSubnetCannotBeDeleted"),
            reason: "permanent error".into(),
        },
    )
    .await;
    j.ev(
        1350,
        Event::RunPaused {
            step: "delete-cluster.vnet".into(),
            cause: hcp_runtime::PauseCause::PastPivot {
                pivot: "delete-cluster.pls".into(),
            },
            unwind_at: None,
        },
    )
    .await;
    j.release().await;
    url
}

/// Compare `actual` with `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites the file.
pub fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it after review)\n--- expected\n{expected}\n--- actual\n{actual}"
        );
    }
}

/// Run the binary; returns (exit code, stdout).
pub fn run(args: &[&str]) -> (i32, String) {
    let out = bin().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
