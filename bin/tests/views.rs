//! The inspector's CLI views on the real binary: golden files lock the human-readable
//! output of `list`, `show`, `history`, `why` and `inventory` over a deterministic journal
//! (fixed ids and timestamps, `--now` fixed); JSON output is checked field by field; `watch`
//! follows a run that a separate worker process executes.
#![allow(clippy::unwrap_used)]

mod views_support;

use views_support::{NOW, fixture, golden, run, run_id};

fn setup() -> (std::path::PathBuf, String) {
    let dir = hcp_runtime::testkit::scratch_dir("views");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = rt.block_on(fixture(&dir));
    (dir, url)
}

#[test]
fn golden_text_views() {
    let (_dir, db) = setup();
    let stuck = run_id(2).to_string();
    let waiting = run_id(3).to_string();
    let done = run_id(1).to_string();
    let paused = run_id(5).to_string();
    let stopped = run_id(6).to_string();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("list.txt", vec!["list"]),
        (
            "list_needs_operator.txt",
            vec!["list", "--state", "needs-operator"],
        ),
        ("list_cluster_alpha.txt", vec!["list", "--cluster", "alpha"]),
        ("list_since.txt", vec!["list", "--since", "20m"]),
        ("show_stuck.txt", vec!["show", &stuck]),
        ("show_waiting.txt", vec!["show", &waiting]),
        ("show_succeeded.txt", vec!["show", &done]),
        (
            "history_stuck_failed.txt",
            vec!["history", &stuck, "--failed"],
        ),
        (
            "history_stuck_step.txt",
            vec!["history", &stuck, "--step", "create-cluster.pls.ensure"],
        ),
        ("why_stuck.txt", vec!["why", &stuck]),
        ("why_waiting.txt", vec!["why", &waiting]),
        ("why_succeeded.txt", vec!["why", &done]),
        ("show_paused.txt", vec!["show", &paused]),
        ("why_paused.txt", vec!["why", &paused]),
        ("show_stopped_delete.txt", vec!["show", &stopped]),
        ("why_stopped_delete.txt", vec!["why", &stopped]),
        ("inventory.txt", vec!["inventory"]),
        ("inventory_orphans.txt", vec!["inventory", "--orphans"]),
    ];
    for (name, args) in cases {
        let mut full = args.clone();
        full.extend(["--database", &db]);
        // `history` and `inventory` print absolute times only; the rest take --now.
        if !matches!(args[0], "history" | "inventory") {
            full.extend(["--now", NOW]);
        }
        let (code, out) = run(&full);
        assert_eq!(code, 0, "{full:?}");
        golden(name, &out);
    }
}

#[test]
fn json_views_carry_the_fields_scripts_need() {
    let (_dir, db) = setup();
    let (_, out) = run(&["list", "--database", &db, "--now", NOW, "--output", "json"]);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["apiVersion"], "hcp-workflow/v1", "{list}");
    assert_eq!(list["kind"], "RunList", "{list}");
    let rows = list["items"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    let stuck = rows
        .iter()
        .find(|r| r["run_id"] == run_id(2).to_string().as_str())
        .unwrap();
    for k in [
        "run_id",
        "short_id",
        "workflow",
        "cluster",
        "state",
        "stage",
        "step",
        "created_at",
        "blocked_on",
    ] {
        assert!(stuck.get(k).is_some(), "list JSON has {k}: {stuck}");
    }
    assert_eq!(stuck["cluster"], "beta");
    assert_eq!(stuck["state"], "needs-operator");
    assert_eq!(stuck["stage"], "control-plane");
    assert_eq!(stuck["step"], "create-cluster.hostedcluster.apply");
    assert_eq!(stuck["created_at"], "2025-06-01T12:05:00.000Z");
    assert_eq!(stuck["short_id"], "00000002");

    let (_, out) = run(&[
        "show",
        &run_id(3).to_string(),
        "--database",
        &db,
        "--now",
        NOW,
        "--output",
        "json",
    ]);
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["apiVersion"], "hcp-workflow/v1", "{d}");
    assert_eq!(d["kind"], "Run", "{d}");
    assert_eq!(d["run_id"], run_id(3).to_string().as_str());
    assert_eq!(d["short_id"], "00000003");
    let p = &d["pending"];
    assert_eq!(p["step"], "create-cluster.vnet.ensure");
    assert_eq!(
        p["attempt_text"], "3/5",
        "the next attempt of a 5-attempt policy"
    );
    assert_eq!(p["last_error"]["code"], "TooManyRequests");
    assert_eq!(p["next_retry_at"], "2025-06-01T12:31:00.000Z");
    assert_eq!(p["lease_owner"], "worker-1");
    assert_eq!(d["undo"]["unwinding"], false);
    let next: Vec<&str> = d["undo"]["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        next,
        [
            "create-cluster.dns.ensure",
            "create-cluster.vnet.ensure",
            "create-cluster.identity.ensure"
        ],
        "a cancel would undo in reverse dependency order"
    );

    let (_, out) = run(&[
        "why",
        &run_id(2).to_string(),
        "--database",
        &db,
        "--now",
        NOW,
        "--output",
        "json",
    ]);
    let w: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(w["apiVersion"], "hcp-workflow/v1", "{w}");
    assert_eq!(w["kind"], "Why", "{w}");
    assert_eq!(w["run_id"], run_id(2).to_string().as_str());
    assert_eq!(w["state"], "needs-operator");
    let cmds: Vec<&str> = w["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["command"].as_str().unwrap())
        .collect();
    assert!(
        cmds.contains(
            &format!(
                "hcp-workflow resolve {} --step create-cluster.hostedcluster.apply --note '…'",
                run_id(2)
            )
            .as_str()
        ),
        "{cmds:?}"
    );

    let (_, out) = run(&[
        "inventory",
        "--orphans",
        "--database",
        &db,
        "--output",
        "json",
    ]);
    let inv: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(inv["apiVersion"], "hcp-workflow/v1", "{inv}");
    assert_eq!(inv["kind"], "Inventory", "{inv}");
    let all = inv["items"].as_array().unwrap();
    // What the still-running run 3 holds is listed apart, marked unfinished.
    let (held, items): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        all.iter().partition(|r| r["unfinished"] == true);
    assert!(
        held.iter()
            .all(|r| r["run_id"] == run_id(3).to_string().as_str()),
        "{inv}"
    );
    assert_eq!(held.len(), 1, "{inv}");
    assert!(
        items
            .iter()
            .all(|r| r["run_id"] == run_id(2).to_string().as_str()
                || r["run_id"] == run_id(5).to_string().as_str()),
        "only the stuck run and the paused one (it kept its work for an operator) hold \
         what no finished run owns, each row names its run: {inv}"
    );
    assert!(
        items
            .iter()
            .any(|r| r["run_id"] == run_id(5).to_string().as_str()
                && r["run_state"] == "needs-operator"),
        "the paused run's kept VNet is listed with its run: {inv}"
    );
    let ids: Vec<&str> = items.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&"clusters/beta"),
        "the stuck run's HostedCluster is an orphan: {ids:?}"
    );
    assert!(
        !ids.iter().any(|i| i.contains("beta-cp")),
        "an adopted identity is not an orphan: {ids:?}"
    );
    assert!(
        !ids.iter().any(|i| i.contains("alpha")),
        "alpha succeeded: {ids:?}"
    );
}

#[test]
fn bad_filters_exit_2() {
    let (_dir, db) = setup();
    let out = views_support::bin()
        .args(["list", "--database", &db, "--since", "yesterday-ish"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since yesterday-ish"));
    // A state spelled with `_` gets "did you mean".
    let out = views_support::bin()
        .args(["list", "--database", &db, "--state", "needs_operator"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--state needs_operator: unknown state; did you mean needs-operator?"),
        "{err}"
    );
}

#[test]
fn watch_exit_code_follows_the_end_state() {
    let (_dir, db) = setup();
    let (code, out) = run(&["watch", &run_id(1).to_string(), "--database", &db]);
    assert_eq!(code, 0, "{out}");
    // The outcome block `start` prints: its `run … succeeded` line, then the ledger's.
    assert!(
        out.lines()
            .any(|l| l == format!("run {} succeeded", run_id(1))),
        "{out}"
    );
}

#[test]
fn watch_follows_a_run_executed_by_another_process() {
    let dir = hcp_runtime::testkit::scratch_dir("views-watch");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world = dir.join("w");
    let (code, out) = run(&[
        "selftest",
        "--database",
        &db,
        "--world",
        world.to_str().unwrap(),
        "--detach",
        "--fail",
        "c",
    ]);
    assert_eq!(code, 0, "{out}");
    let id = out.trim().strip_prefix("run ").unwrap().to_string();
    let watch = views_support::bin()
        .args(["watch", &id, "--database", &db, "--interval-ms", "100"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut worker = views_support::bin()
        .args([
            "worker",
            "--database",
            &db,
            "--world",
            world.to_str().unwrap(),
        ])
        .env("HCP_POLL_MS", "50")
        // Faults live in the executing process: the worker makes step c fail.
        .env("HCP_SAMPLE_FAULTS", r#"{"fail":["c"]}"#)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = watch.wait_with_output().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a rolled-back run exits 1:\n{text}"
    );
    // `  +130ms  last           c  undone`: elapsed, stage, step, state.
    assert!(
        text.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 4 && w[0].starts_with('+') && w[1] == "last" && w[2] == "c"
        }),
        "every step that moved is reported: {text}"
    );
    assert!(
        text.lines().any(|l| l == format!("run {id} rolled back")),
        "{text}"
    );
}

#[test]
fn ui_refuses_a_non_loopback_address_without_a_token() {
    let (_dir, db) = setup();
    let out = views_support::bin()
        .args(["ui", "--database", &db, "--listen", "0.0.0.0:0"])
        .env_remove("HCP_WORKFLOW_UI_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to serve on 0.0.0.0:0 without a token") && err.contains("--token"),
        "{err}"
    );
}

/// `hcp-workflow ui --database …` on `db`: the process (killed on drop) and its base URL.
struct Ui {
    child: std::process::Child,
    addr: String,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ui(db: &str) -> Ui {
    use std::io::BufRead;
    let mut child = views_support::bin()
        .args(["ui", "--database", db, "--listen", "127.0.0.1:0"])
        .env_remove("HCP_WORKFLOW_UI_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(out).lines();
    let line = lines
        .find_map(|l| {
            l.ok()?
                .strip_prefix("serving the hcp-workflow UI on ")
                .map(str::to_string)
        })
        .expect("the ui prints where it listens");
    let addr = line
        .split_whitespace()
        .next()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    // Keep reading so the ui never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ui { child, addr }
}

impl Ui {
    /// `GET path`: the body of a 200 answer.
    fn get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        let (head, body) = resp.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        // The body may come chunked: good enough for `contains` checks, the chunk sizes
        // sit on lines of their own.
        body.to_string()
    }
}

/// The words a person reads on a page: tags, and the contents of `<title>`, dropped.
fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    let mut hidden = 0usize;
    while let Some(i) = rest.find('<') {
        if hidden == 0 {
            out.push_str(&rest[..i]);
        }
        let Some(end) = rest[i..].find('>') else {
            break;
        };
        let tag = &rest[i + 1..i + end];
        if tag.starts_with("title") || tag.starts_with("script") || tag.starts_with("style") {
            hidden += 1;
        } else if tag.starts_with("/title")
            || tag.starts_with("/script")
            || tag.starts_with("/style")
        {
            hidden = hidden.saturating_sub(1);
        }
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    out
}

/// `hcp-workflow why cluster/beta`: the cluster's sentence, then its latest run's own
/// paragraph, without a doubled "about that run: Run …".
#[test]
fn why_cluster_does_not_double_the_word_run() {
    let (_dir, db) = setup();
    let (code, out) = run(&["why", "cluster/beta", "--database", &db, "--now", NOW]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("Cluster beta "), "{out}");
    assert!(!out.contains("about that run"), "{out}");
    assert!(!out.to_lowercase().contains("run: run"), "{out}");
}

/// `hcp-workflow why <run>` of a waiting run nobody holds any more: "No worker is running
/// it: waiting for a worker for …", never "No worker is running it: no worker: …".
#[test]
fn why_without_a_worker_says_no_worker_once() {
    let (_dir, db) = setup();
    let waiting = run_id(3).to_string();
    // Hours after gamma's lease lapsed.
    let out = views_support::bin()
        .args([
            "why",
            &waiting,
            "--database",
            &db,
            "--now",
            "2025-06-01T18:00:00Z",
        ])
        .env("HCP_NO_WORKER_AFTER_MS", "1000")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with("No worker is running it: waiting for a worker for "),
        "{text}"
    );
    assert_eq!(text.matches("no worker").count(), 0, "{text}");
}

/// `hcp-workflow ui`, the page of a paused run (`on-failure: pause=24h`): the deadline is
/// said once, and no literal backtick shows: quoted commands are `<code>`.
#[test]
fn ui_paused_run_page_says_the_deadline_once_and_shows_no_backticks() {
    let (_dir, db) = setup();
    let ui = ui(&db);
    let page = ui.get(&format!("/runs/{}", run_id(5)));
    // Above the journal's own record of events (which lists the pause as it happened).
    let summary = page.split("id=\"journal\"").next().unwrap();
    let text = visible_text(summary);
    assert_eq!(
        text.matches("2025-06-02T12:20:40").count(),
        1,
        "the deadline once: {text}"
    );
    assert!(!text.contains('`'), "{text}");
    assert!(
        page.contains(&format!("<code>hcp-workflow retry {}</code>", run_id(5))),
        "{page}"
    );
}

/// `hcp-workflow --database … ui`, "Confirm: cancel": its "Same as:" command names the
/// journal this UI serves, so pasting it cancels this run and not one in the default
/// journal.
#[test]
fn ui_confirm_same_as_names_the_journal() {
    let (_dir, db) = setup();
    let ui = ui(&db);
    let run = run_id(3);
    let page = ui
        .get(&format!("/runs/{run}/confirm?action=cancel"))
        .replace("&#x2f;", "/");
    let want = format!("Same as: <code>hcp-workflow --database {db} cancel {run} --reason");
    assert!(page.contains(&want), "want {want:?} in {page}");
}

/// `hcp-workflow ui`, the Clusters page: each status in its colour (as the runs page
/// colours states), and a cluster deleted after its last verify shows no verify result:
/// the "7 not ok" it had before the delete is not its state now. `clusters` agrees.
#[test]
fn ui_clusters_page_colours_status_and_hides_a_verify_from_before_the_delete() {
    let (_dir, db) = setup();
    // alpha was verified (7 rows not ok) before run 4 deleted it; gamma after its create
    // began (it still exists: partial).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = hcp_persistence::open(&db).await.unwrap();
        let items: Vec<serde_json::Value> = (0..7)
            .map(|i| {
                serde_json::json!({"check": "exists", "verdict": "missing",
                    "resource": format!("r{i}"), "expected": "present", "found": "absent"})
            })
            .collect();
        store
            .record_report(hcp_runtime::NewReport {
                kind: "verify".into(),
                subject: "cluster/alpha".into(),
                at: views_support::at(500),
                ok: false,
                by: "alice@ops".into(),
                data: serde_json::json!({"items": items, "counts": {"missing": 7}}).to_string(),
                keep: 100,
            })
            .await
            .unwrap();
    });
    let ui = ui(&db);
    let page = ui.get("/clusters");
    let row = |name: &str| {
        let start = page
            .find(&format!("data-cluster=\"{name}\""))
            .unwrap_or_else(|| panic!("no row {name}: {page}"));
        let end = page[start..].find("</tr>").unwrap() + start;
        page[start..end].to_string()
    };
    let alpha = row("alpha");
    assert!(alpha.contains("class=\"pill deleted\""), "{alpha}");
    assert!(!alpha.contains("not ok"), "{alpha}");
    assert!(alpha.contains("data-verified=\"never\""), "{alpha}");
    assert!(row("gamma").contains("class=\"pill partial\""), "{page}");
    let (code, out) = run(&["--output", "json", "clusters", "--database", &db]);
    assert_eq!(code, 0, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let alpha = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cluster"] == "alpha")
        .unwrap();
    assert!(alpha["verified"].is_null(), "{alpha}");
}

/// `hcp-workflow why <run>` of a delete-cluster waiting for a Private Link Service's
/// private endpoint connections to go: it tells the wait's budget, says "since" once, and
/// never offers a cancel that "unwinds" (a delete goes only forward).
#[test]
fn why_a_delete_waiting_for_private_endpoint_connections_shows_its_budget_and_no_unwind() {
    use hcp_runtime::{Event, NodeSpec, RetryPolicy, SagaDag, Timestamp};
    let dir = hcp_runtime::testkit::scratch_dir("views-pls-wait");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let pls = "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-eta";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = hcp_persistence::open(&db).await.unwrap();
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
        let dag = SagaDag {
            workflow: "delete-cluster".into(),
            version: 1,
            stages: vec!["delete".into()],
            nodes: vec![
                pivot("hosted-cluster", &[]),
                pivot("private-link.pls", &["hosted-cluster"]),
            ],
            on_failure: Default::default(),
            record: None,
        };
        let mut j = views_support::J::start(&store, 7, dag, "eta", 1500).await;
        j.started(1501, "hosted-cluster", 1).await;
        j.succeeded(1510, "hosted-cluster", serde_json::json!({}))
            .await;
        j.started(1511, "private-link.pls", 1).await;
        j.ev(
            1512,
            Event::NodeWaiting {
                node: "delete-cluster.private-link.pls".into(),
                until: Timestamp(views_support::T0 + 1830 * 1000),
                reason: format!(
                    "waiting for 1 private endpoint connection(s) of {pls} to be deleted"
                ),
            },
        )
        .await;
    });
    let (code, out) = run(&[
        "why",
        &run_id(7).to_string(),
        "--database",
        &db,
        "--now",
        NOW,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("private endpoint connection(s)"), "{out}");
    // Waiting since 12:25:12 (4m48s of the default 30 min budget): it stalls at 12:55:12.
    assert!(
        out.contains(
            "Its wait budget is 30m00s, 4m48s of it spent: it stalls at 2025-06-01T12:55:12.000Z"
        ),
        "{out}"
    );
    assert_eq!(out.matches("since").count(), 1, "{out}");
    assert!(!out.contains("unwind"), "{out}");
    assert!(out.contains("stop it here for good"), "{out}");
}
