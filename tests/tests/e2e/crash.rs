//! Crash tests: the real `hcp-workflow` process runs the engine's sample saga and is
//! SIGKILLed at every journal boundary (before a side effect, after it but before its
//! journal write, after the write; forward and while unwinding), then restarted. The run
//! must converge to the same end state: every resource created (and deleted) exactly once,
//! and no undo for a node that never started. Both backends.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::{Proc, fresh_postgres, postgres_url, scratch};
use hcp_runtime::testkit::read_lines;
use std::path::Path;
use std::time::Duration;

const NODES: [&str; 5] = ["a", "b1", "b2", "c", "d"];

#[derive(Clone, Copy, Debug)]
enum Scenario {
    /// Everything succeeds.
    Forward,
    /// `c` fails permanently (after its effect): a, b1, b2, c are undone; d never starts.
    UnwindAtC,
    /// `c` fails permanently with `--on-failure pause`: the run stops in needs-operator
    /// and nothing is undone.
    PauseAtC,
    /// `c` fails with `--on-failure pause=2s`, nobody acts: once the deadline passed, the
    /// next process unwinds it (the kills fall in that unwind). Ends like `UnwindAtC`.
    DeadlineAtC,
}

impl Scenario {
    fn args(self) -> Vec<&'static str> {
        match self {
            Self::Forward => vec![],
            Self::UnwindAtC => vec!["--fail", "c"],
            Self::PauseAtC => vec!["--fail", "c", "--on-failure", "pause"],
            Self::DeadlineAtC => vec!["--fail", "c", "--on-failure", "pause=2s"],
        }
    }
}

/// The deadline of [`Scenario::DeadlineAtC`], and a little more.
const DEADLINE: Duration = Duration::from_millis(2_300);

/// [`Scenario::DeadlineAtC`]'s first process: runs the saga until it pauses (exit 1), then
/// waits out the deadline. Nothing was undone yet.
fn pause_then_wait(dir: &Path, db: &str) {
    let p = selftest(dir, db, Scenario::DeadlineAtC, &envs(&[]));
    let (code, out, err) = p.finish(Duration::from_secs(60));
    assert_eq!(code, Some(1), "paused: {out:?} {err}");
    assert!(
        out.iter()
            .any(|l| l.contains("paused (on-failure=pause=2s)")),
        "the pause was announced: {out:?}"
    );
    let fx = read_lines(&dir.join("world/effects.log"));
    assert!(
        !fx.iter().any(|l| l.starts_with("undo")),
        "nothing undone while paused: {fx:?}"
    );
    std::thread::sleep(DEADLINE);
}

fn envs(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("HCP_LEASE_TTL_MS", "1000".to_string()),
        ("HCP_POLL_MS", "20".to_string()),
        ("RUST_LOG", "warn".to_string()),
    ];
    v.extend(extra.iter().cloned());
    v
}

fn selftest(dir: &Path, db: &str, s: Scenario, env: &[(&'static str, String)]) -> Proc {
    let world = dir.join("world");
    let mut args = vec![
        "selftest",
        "--database",
        db,
        "--world",
        world.to_str().unwrap(),
        "--idempotency-key",
        "crash-test",
    ];
    args.extend(s.args());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Proc::spawn(dir, &args, &env)
}

/// Check the world after convergence.
fn assert_converged(dir: &Path, s: Scenario, ctx: &str) {
    let fx = read_lines(&dir.join("world/effects.log"));
    let count = |line: String| fx.iter().filter(|l| **l == line).count();
    let mut res: Vec<String> = std::fs::read_dir(dir.join("world/res"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    res.sort();
    match s {
        Scenario::Forward => {
            assert_eq!(res, NODES.to_vec(), "{ctx}: final resources");
            // Creates are never repeated. (A SIGKILL can fall between a parallel step's
            // effect and its line in the effect log, so at most one line may be missing;
            // the final state shows the effect happened.)
            let mut lines = 0;
            for n in NODES {
                let c = count(format!("effect {n} create"));
                assert!(c <= 1, "{ctx}: {n} created {c} times: {fx:?}");
                lines += c;
            }
            assert!(lines >= NODES.len() - 1, "{ctx}: {fx:?}");
            assert!(
                !fx.iter().any(|l| l.starts_with("undo")),
                "{ctx}: nothing undone: {fx:?}"
            );
        }
        Scenario::PauseAtC => {
            assert_eq!(res, ["a", "b1", "b2", "c"], "{ctx}: the work is kept");
            for n in ["a", "b1", "b2", "c"] {
                let c = count(format!("effect {n} create"));
                assert!(c <= 1, "{ctx}: {n} created {c} times: {fx:?}");
            }
            assert!(
                !fx.iter()
                    .any(|l| l.starts_with("undo") || l.contains(" d ")),
                "{ctx}: nothing undone, d never started: {fx:?}"
            );
        }
        Scenario::UnwindAtC | Scenario::DeadlineAtC => {
            assert!(res.is_empty(), "{ctx}: everything undone: {res:?}");
            let mut lines = 0;
            for n in ["a", "b1", "b2", "c"] {
                let c = count(format!("effect {n} create"));
                let d = count(format!("undo {n} delete"));
                assert!(
                    c <= 1 && d <= 1,
                    "{ctx}: {n} created {c}, deleted {d} times: {fx:?}"
                );
                lines += c + d;
            }
            assert!(
                lines >= 7,
                "{ctx}: at most one effect line lost to the kill: {fx:?}"
            );
            assert!(
                !fx.iter().any(|l| l.contains(" d ")),
                "{ctx}: d never started, never undone: {fx:?}"
            );
        }
    }
}

async fn run_scenario(
    s: Scenario,
    fresh_db: impl Fn(&Path) -> std::pin::Pin<Box<dyn std::future::Future<Output = String>>>,
) {
    // 1. A traced, uninterrupted run tells how many boundaries there are.
    let dir = scratch("trace");
    let db = fresh_db(&dir).await;
    if let Scenario::DeadlineAtC = s {
        pause_then_wait(&dir, &db);
    }
    let p = selftest(&dir, &db, s, &envs(&[("HCP_TRACE_BOUNDARIES", "1".into())]));
    let (code, out, err) = p.finish(Duration::from_secs(60));
    let expected = match s {
        Scenario::Forward => 0,
        _ => 1,
    };
    assert_eq!(code, Some(expected), "trace run: {out:?} {err}");
    let boundaries: Vec<&String> = out
        .iter()
        .filter(|l| l.starts_with("HCP_BOUNDARY"))
        .collect();
    let min = match s {
        Scenario::Forward => 15,
        Scenario::UnwindAtC => 24,
        Scenario::PauseAtC => 12,
        Scenario::DeadlineAtC => 12,
    };
    assert_eq!(boundaries.len(), min, "{boundaries:?}");
    assert!(
        boundaries.iter().any(|b| b.contains(" undo "))
            == matches!(s, Scenario::UnwindAtC | Scenario::DeadlineAtC)
    );
    if let Scenario::DeadlineAtC = s {
        assert!(
            boundaries.iter().all(|b| b.contains(" undo ")),
            "after the deadline only the unwind runs: {boundaries:?}"
        );
    }
    assert_converged(&dir, s, "uninterrupted");

    // 2. Kill at each boundary, restart, converge.
    for i in 1..=boundaries.len() {
        let dir = scratch("crash");
        let db = fresh_db(&dir).await;
        if let Scenario::DeadlineAtC = s {
            pause_then_wait(&dir, &db);
        }
        let mut p = selftest(&dir, &db, s, &envs(&[("HCP_CRASH_AT", i.to_string())]));
        let hit = p.wait_line("HCP_CRASHPOINT", Duration::from_secs(60));
        let Some(hit) = hit else {
            let err = p.stderr();
            p.kill();
            panic!("{s:?}: boundary {i} never reached; stderr: {err}");
        };
        p.kill(); // SIGKILL at exactly this boundary
        let ctx = format!("{s:?}, killed at {hit}");
        let p = selftest(&dir, &db, s, &envs(&[]));
        let (code, out, err) = p.finish(Duration::from_secs(60));
        assert_eq!(code, Some(expected), "{ctx}: restart: {out:?} {err}");
        assert!(
            out.iter()
                .any(|l| l.contains("(existing run for this idempotency key)")),
            "{ctx}: the restart resumed the same run: {out:?}"
        );
        assert_converged(&dir, s, &ctx);
    }
}

fn sqlite_db(dir: &Path) -> std::pin::Pin<Box<dyn std::future::Future<Output = String>>> {
    let url = format!("sqlite://{}", dir.join("journal.db").display());
    Box::pin(async move { url })
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_forward_survives_sigkill_at_every_boundary() {
    run_scenario(Scenario::Forward, sqlite_db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_unwind_survives_sigkill_at_every_boundary() {
    run_scenario(Scenario::UnwindAtC, sqlite_db).await;
}

fn pg_db(
    base: String,
) -> impl Fn(&Path) -> std::pin::Pin<Box<dyn std::future::Future<Output = String>>> {
    move |_dir: &Path| {
        let base = base.clone();
        Box::pin(async move { fresh_postgres(&base).await })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_pause_survives_sigkill_at_every_boundary() {
    run_scenario(Scenario::PauseAtC, sqlite_db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_deadline_unwind_survives_sigkill_at_every_boundary() {
    run_scenario(Scenario::DeadlineAtC, sqlite_db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_pause_survives_sigkill_at_every_boundary() {
    let Some(base) = postgres_url() else { return };
    run_scenario(Scenario::PauseAtC, pg_db(base)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_deadline_unwind_survives_sigkill_at_every_boundary() {
    let Some(base) = postgres_url() else { return };
    run_scenario(Scenario::DeadlineAtC, pg_db(base)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_forward_survives_sigkill_at_every_boundary() {
    let Some(base) = postgres_url() else { return };
    run_scenario(Scenario::Forward, pg_db(base)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_unwind_survives_sigkill_at_every_boundary() {
    let Some(base) = postgres_url() else { return };
    run_scenario(Scenario::UnwindAtC, pg_db(base)).await;
}
