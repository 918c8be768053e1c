//! The team's end-to-end test, with containers (podman with runc): everything a
//! team runs comes from the image `bin/Containerfile` builds (non-root, read-only root
//! filesystem), on the host's network:
//! - PostgreSQL (the host's server, as a managed database would be: no registry is
//!   reachable here for a Postgres image), its schema made by a `migrate` container (the
//!   manifests' Job);
//! - `simulator serve` in a container;
//! - 3 worker containers, each with `--listen-health` and `--notify` to a local receiver;
//! - the UI container.
//!
//! In that order: it starts 3 creates; it SIGKILLs a worker container, then SIGTERMs
//! another (which drains and exits 0); it upgrades the workers to a new image tag with runs
//! in flight (the old tag runs as the previous release, `HCP_TEST_PREVIOUS_RELEASE=1`, see
//! `bin/src/release.rs`; the new one as this release); then it checks that every run
//! converged once, that the simulator's inventory is exactly the union of the ledgers,
//! that `/readyz` and `/metrics` answer, and that each run's success reached the receiver
//! exactly once. It prints how long the runs of the SIGKILLed container waited for another
//! worker (BENCHMARKS.md).
//!
//! Without podman: "skipped: no podman" (`HCP_REQUIRE_PODMAN=1` makes that a failure;
//! `.ci/run` installs podman and runc and sets it).
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{assert_inventory_is_the_ledgers, cluster_file, get_at, ids_at};
use hcp_e2e_tests::crash::created_twice;
use hcp_e2e_tests::webhook::receiver;
use hcp_e2e_tests::{bin, document, http_get, items, postgres_url, run_id, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TIME_SCALE: &str = "0.01";

fn podman(args: &[&str]) -> (i32, String, String) {
    let out = Command::new("podman").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn have_podman() -> bool {
    let ok = Command::new("podman")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("HCP_REQUIRE_PODMAN").as_deref() != Ok("1"),
            "HCP_REQUIRE_PODMAN=1 but podman cannot run"
        );
        eprintln!("skipped: no podman");
    }
    ok
}

/// Containers and images made by the test, removed when it ends (whatever happens).
struct Podman {
    prefix: String,
    images: Vec<String>,
}

impl Drop for Podman {
    fn drop(&mut self) {
        let (_, out, _) = podman(&[
            "ps",
            "-a",
            "--filter",
            &format!("name={}", self.prefix),
            "--format",
            "{{.Names}}",
        ]);
        for name in out.lines().filter(|l| !l.is_empty()) {
            let _ = podman(&["rm", "-f", "-t", "0", name]);
        }
        for image in &self.images {
            let _ = podman(&["rmi", "-f", image]);
        }
    }
}

impl Podman {
    /// Build the image from the binary under test, tagged `tag`.
    fn build(&mut self, rootfs: &Path, tag: &str) -> String {
        let image = format!("localhost/{}:{tag}", self.prefix);
        let containerfile = repo().join("bin/Containerfile");
        let (code, out, err) = podman(&[
            "build",
            "--runtime",
            "runc",
            "--label",
            &format!("io.hcp-workflow.e2e-tag={tag}"),
            "-f",
            containerfile.to_str().unwrap(),
            "-t",
            &image,
            rootfs.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "podman build: {out}{err}");
        self.images.push(image.clone());
        image
    }

    /// `podman run -d` as the manifests run it: non-root (the image's user), read-only root
    /// filesystem, `/tmp` the one writable place; `mounts` read-only at the same paths.
    fn run(
        &self,
        name: &str,
        image: &str,
        envs: &[(&str, &str)],
        mounts: &[&Path],
        args: &[&str],
    ) -> String {
        let name = format!("{}-{name}", self.prefix);
        let mut a: Vec<String> = [
            "run",
            "-d",
            "--runtime",
            "runc",
            "--network",
            "host",
            "--read-only",
            "--tmpfs",
            "/tmp",
            // runc cannot raise these on a host without CAP_SYS_RESOURCE (docs/operations/team.md).
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "--name",
            &name,
            // Its worker id starts with its hostname (with the host's network, podman would
            // otherwise give every container the host's).
            "--hostname",
            &name,
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        for (k, v) in envs {
            a.push("--env".into());
            a.push(format!("{k}={v}"));
        }
        for m in mounts {
            a.push("-v".into());
            a.push(format!("{0}:{0}:ro", m.display()));
        }
        a.push(image.into());
        a.extend(args.iter().map(|s| (*s).to_string()));
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        let (code, out, err) = podman(&refs);
        assert_eq!(code, 0, "podman run {name}: {out}{err}");
        name
    }

    fn logs(name: &str) -> String {
        let (_, out, err) = podman(&["logs", name]);
        format!("{out}{err}")
    }

    fn exit_code(name: &str) -> Option<i32> {
        let (_, out, _) = podman(&["inspect", "--format", "{{.State.ExitCode}}", name]);
        out.trim().parse().ok()
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_until(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    hcp_e2e_tests::wait_until(what, timeout, Duration::from_millis(300), f);
}

/// The host's CLI (a laptop's): `hcp-workflow --database … --simulator … args`.
fn cli(
    dir: &Path,
    db: &str,
    sim: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (i32, String, String) {
    let mut a = vec!["--database", db, "--simulator", sim];
    a.extend_from_slice(args);
    hcp_e2e_tests::cluster::run(dir, &a, envs)
}

fn steps_succeeded(run: &Value) -> usize {
    hcp_e2e_tests::cluster::steps_of(run)
        .iter()
        .filter(|s| s["state"] == "succeeded")
        .count()
}

#[test]
fn a_team_runs_workers_from_the_image_kills_and_upgrades_them_and_every_run_converges() {
    let Some(server) = postgres_url() else { return };
    if !have_podman() {
        return;
    }
    let dir = scratch("containers");
    // The containers run as uid 65532: the cluster files must be readable by it.
    let mut perms = std::fs::metadata(&dir).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&dir, perms).unwrap();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let mut pm = Podman {
        prefix: format!("hcp-e2e-{}", &id[..8]),
        images: Vec::new(),
    };

    // The image, twice: the tag a team runs today and the one it upgrades to.
    let rootfs = dir.join("rootfs");
    let st = Command::new(repo().join("bin/container-rootfs.sh"))
        .arg(bin())
        .arg(&rootfs)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v1 = pm.build(&rootfs, "1");
    let v2 = pm.build(&rootfs, "2");

    // PostgreSQL, its schema made by the migrate container (the manifests' Job).
    let db = hcp_e2e_tests::fresh_postgres_unmigrated_blocking(&server);
    let migrate = pm.run("migrate", &v1, &[], &[], &["--database", &db, "migrate"]);
    wait_until(
        "the migrate container ends",
        Duration::from_secs(60),
        || {
            podman(&["inspect", "--format", "{{.State.Running}}", &migrate])
                .1
                .trim()
                == "false"
        },
    );
    assert_eq!(
        Podman::exit_code(&migrate),
        Some(0),
        "{}",
        Podman::logs(&migrate)
    );

    // The simulated Azure and management cluster.
    let sim_port = free_port();
    let sim = format!("http://127.0.0.1:{sim_port}");
    let crds = hcp_e2e_tests::cluster::shared_crds().map(|p| p.canonicalize().unwrap());
    let specs = hcp_e2e_tests::cluster::shared_specs().map(|p| p.canonicalize().unwrap());
    let shared: Vec<PathBuf> = [crds.clone(), specs.clone()]
        .into_iter()
        .flatten()
        .collect();
    let mut sim_args = vec![
        "simulator".to_string(),
        "serve".into(),
        "--listen".into(),
        format!("127.0.0.1:{sim_port}"),
        "--state".into(),
        "/tmp/sim.json".into(),
        "--time-scale".into(),
        TIME_SCALE.into(),
    ];
    if let Some(c) = &crds {
        sim_args.extend(["--crds".into(), c.display().to_string()]);
    }
    if let Some(s) = &specs {
        sim_args.extend(["--specs".into(), s.display().to_string()]);
    }
    let mounts: Vec<&Path> = shared.iter().map(PathBuf::as_path).collect();
    let sim_args: Vec<&str> = sim_args.iter().map(String::as_str).collect();
    let simulator = pm.run(
        "simulator",
        &v1,
        &[("RUST_LOG", "warn")],
        &mounts,
        &sim_args,
    );
    wait_until("the simulator answers", Duration::from_secs(60), || {
        http_get(&format!("{sim}/_sim/inventory")).0 == 200
    });
    let _ = reqwest::blocking::Client::new()
        .post(format!("{sim}/api/v1/namespaces"))
        .header("authorization", "Bearer test")
        .json(&serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "clusters"}}))
        .send()
        .unwrap();
    let before = ids_at(&sim);

    // The receiver of the notifications, and 3 workers of today's tag.
    let (hook, got) = receiver("/hooks/team", false);
    let worker = |pm: &Podman, name: &str, image: &str, old: bool| -> (String, u16) {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut envs = vec![("RUST_LOG", "info"), ("HCP_POLL_MS", "200")];
        if old {
            envs.push(("HCP_TEST_PREVIOUS_RELEASE", "1"));
        }
        let name = pm.run(
            name,
            image,
            &envs,
            &[dir.as_path()],
            &[
                "--database",
                &db,
                "--simulator",
                &sim,
                "worker",
                "--listen-health",
                &listen,
                "--grace",
                "30s",
                "--notify",
                &hook,
            ],
        );
        (name, port)
    };
    let mut olds: Vec<(String, u16)> = (0..3)
        .map(|i| worker(&pm, &format!("worker-v1-{i}"), &v1, true))
        .collect();
    for (name, port) in &olds {
        wait_until(&format!("{name} is ready"), Duration::from_secs(60), || {
            http_get(&format!("http://127.0.0.1:{port}/readyz")).0 == 200
        });
    }
    // The UI container.
    let ui_port = free_port();
    let ui = pm.run(
        "ui",
        &v1,
        &[],
        &[],
        &[
            "--database",
            &db,
            "ui",
            "--listen",
            &format!("127.0.0.1:{ui_port}"),
        ],
    );

    // 1. Three creates, started from a laptop with today's CLI.
    let old_cli = [("HCP_TEST_PREVIOUS_RELEASE", "1")];
    let mut runs = Vec::new();
    for (name, infra) in [
        ("cta", "cta-c1t9e"),
        ("ctb", "ctb-c2t9e"),
        ("ctc", "ctc-c3t9e"),
    ] {
        let cfg = cluster_file(&dir, name, infra, "PublicAndPrivate", "");
        let cfg_s = cfg.to_str().unwrap();
        let (code, out, err) = cli(
            &dir,
            &db,
            &sim,
            &["start", "create-cluster", "--config", cfg_s, "--detach"],
            &old_cli,
        );
        assert_eq!(code, 0, "{out}{err}");
        runs.push(run_id(&out));
    }
    for f in std::fs::read_dir(&dir).unwrap().flatten() {
        let mut p = f.metadata().unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o755);
        let _ = std::fs::set_permissions(f.path(), p);
    }
    let show = |r: &str| -> Value {
        let (code, out, err) = cli(&dir, &db, &sim, &["--output", "json", "show", r], &[]);
        assert_eq!(code, 0, "{err}");
        document(&out, "Run")
    };
    wait_until("every run is under way", Duration::from_secs(120), || {
        runs.iter().all(|r| steps_succeeded(&show(r)) >= 3)
    });

    // 2. SIGKILL one worker container (the one holding most), then SIGTERM another.
    let store = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let journal = store.block_on(hcp_persistence::open(&db)).unwrap();
    let holders = || -> Vec<(String, Option<String>)> {
        store
            .block_on(journal.list_runs(&hcp_runtime::RunFilter::default()))
            .unwrap()
            .iter()
            .map(|s| (s.id.to_string(), s.lease_owner.clone()))
            .collect()
    };
    let held_by = |name: &str| -> Vec<String> {
        let host = name;
        holders()
            .into_iter()
            .filter(|(_, o)| {
                o.as_deref()
                    .is_some_and(|o| o.starts_with(&format!("{host}-")))
            })
            .map(|(r, _)| r)
            .collect()
    };
    olds.sort_by_key(|(n, _)| std::cmp::Reverse(held_by(n).len()));
    let (victim, _) = olds.remove(0);
    let orphans = held_by(&victim);
    let victim_host = victim.clone();
    // Watch, from the kill on, for another worker to lease each run the victim held: per
    // run, when its lease lapsed (the journal's expiry) and when it was leased again.
    let watcher = {
        let (db, orphans, victim_host) = (db.clone(), orphans.clone(), victim_host.clone());
        std::thread::spawn(move || -> Vec<(String, f64, Option<f64>)> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let journal = rt.block_on(hcp_persistence::open(&db)).unwrap();
            let t0 = Instant::now();
            let wall0 = hcp_runtime::Clock::now(&hcp_runtime::SystemClock).0;
            let mut seen: std::collections::BTreeMap<String, (f64, Option<f64>)> =
                std::collections::BTreeMap::new();
            while t0.elapsed() < Duration::from_secs(120) {
                let runs = rt
                    .block_on(journal.list_runs(&hcp_runtime::RunFilter::default()))
                    .unwrap();
                for s in runs.iter().filter(|s| orphans.contains(&s.id.to_string())) {
                    let e = seen.entry(s.id.to_string()).or_insert((0.0, None));
                    let ours = s
                        .lease_owner
                        .as_deref()
                        .is_some_and(|o| o.starts_with(&format!("{victim_host}-")));
                    if ours {
                        if let Some(x) = s.lease_expires_at {
                            e.0 = (x.0 - wall0) as f64 / 1000.0;
                        }
                    } else if e.1.is_none() && (s.lease_owner.is_some() || s.state.is_terminal()) {
                        e.1 = Some(t0.elapsed().as_secs_f64());
                    }
                }
                if seen.len() == orphans.len() && seen.values().all(|v| v.1.is_some()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            seen.into_iter().map(|(r, (l, t))| (r, l, t)).collect()
        })
    };
    let (code, _, err) = podman(&["kill", "--signal", "KILL", &victim]);
    assert_eq!(code, 0, "{err}");
    let (termed, _) = olds.remove(0);
    // It drains what it holds; holding nothing at that instant (the runs may all sit with
    // the others), it releases nothing and goes at once.
    let termed_held = held_by(&termed).len();
    let t0 = Instant::now();
    let (code, _, err) = podman(&["stop", "--time", "40", &termed]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        Podman::exit_code(&termed),
        Some(0),
        "a SIGTERMed worker drains and exits 0: {}",
        Podman::logs(&termed)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(35),
        "it drained within its grace period: {:?}",
        t0.elapsed()
    );
    let logs = Podman::logs(&termed);
    if termed_held > 0 {
        assert!(logs.contains("draining for at most 30s"), "{logs}");
    } else {
        assert!(logs.contains("releasing its 0 run(s) now"), "{logs}");
    }

    // 3. Upgrade: the new tag's workers come up one by one; the last old one goes.
    assert!(
        runs.iter().any(|r| show(r)["state"] != "succeeded"),
        "every run finished before the upgrade: the test would prove nothing"
    );
    let mut news = Vec::new();
    news.push(worker(&pm, "worker-v2-0", &v2, false));
    let (last_old, _) = olds.remove(0);
    let (code, _, err) = podman(&["stop", "--time", "40", &last_old]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        Podman::exit_code(&last_old),
        Some(0),
        "{}",
        Podman::logs(&last_old)
    );
    news.push(worker(&pm, "worker-v2-1", &v2, false));
    news.push(worker(&pm, "worker-v2-2", &v2, false));

    // The runs the SIGKILLed container held are taken over once their leases lapse.
    for (run, lapsed, retaken) in watcher.join().unwrap() {
        let retaken = retaken.unwrap_or_else(|| panic!("run {run} was never taken over"));
        eprintln!(
            "takeover after SIGKILL of a worker container: run {run}: lease lapsed {lapsed:.1} s after the kill, leased by another worker at {retaken:.1} s"
        );
    }

    // 4. Every run converges; the inventory is the ledgers; probes and metrics answer.
    wait_until("every run succeeds", Duration::from_secs(300), || {
        let (code, out, _) = cli(&dir, &db, &sim, &["--output", "json", "list"], &[]);
        code == 0 && {
            let l = items(&out, "RunList");
            assert!(
                l.iter()
                    .all(|r| r["state"] != "rolled-back" && r["state"] != "needs-operator"),
                "{l:?}"
            );
            l.iter().all(|r| r["state"] == "succeeded")
        }
    });
    let twice = created_twice(
        &get_at(&sim, "/_sim/requests")
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    assert!(twice.is_empty(), "created twice: {twice:?}");
    let ledgers: Vec<Value> = runs.iter().map(|r| show(r)).collect();
    assert_inventory_is_the_ledgers(&before, &ids_at(&sim), &ledgers);

    for (name, port) in &news {
        let (code, body) = http_get(&format!("http://127.0.0.1:{port}/readyz"));
        assert_eq!(code, 200, "{name} /readyz: {body}");
        let (code, body) = http_get(&format!("http://127.0.0.1:{port}/metrics"));
        assert_eq!(code, 200, "{name} /metrics");
        assert!(body.contains("hcp_workflow_worker_info"), "{body}");
    }
    let (code, page) = http_get(&format!("http://127.0.0.1:{ui_port}/"));
    assert_eq!(code, 200, "the UI container answers: {}", Podman::logs(&ui));
    for r in &runs {
        assert!(page.contains(&r[r.len() - 8..]), "the UI lists {r}");
    }
    // Each run's success reached the receiver once, whichever worker saw it.
    wait_until("the notifications arrive", Duration::from_secs(30), || {
        let g = got.lock().unwrap();
        runs.iter().all(|r| {
            g.bodies
                .iter()
                .any(|b| b["run_id"] == r.as_str() && b["event"] == "succeeded")
        })
    });
    let g = got.lock().unwrap();
    for r in &runs {
        let n = g
            .bodies
            .iter()
            .filter(|b| b["run_id"] == r.as_str() && b["event"] == "succeeded")
            .count();
        assert_eq!(n, 1, "run {r}'s success announced once: {:?}", g.bodies);
    }
    drop(g);
    drop(simulator);
}
