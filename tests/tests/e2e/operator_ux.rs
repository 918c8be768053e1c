//! Operator experience end to end, on the real binary and a simulator process:
//! a failure printed the moment it happens with the unwind as its own phase and a one-line
//! outcome; run references people can type (a unique suffix or prefix, `cluster/<name>`);
//! step names by suffix with "did you mean"; and one failure card in `show`/`why` whose
//! hint fits the run's state.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use hcp_e2e_tests::{document, items};
use serde_json::json;

const FAST: f64 = 0.002;

use hcp_e2e_tests::run_id;

#[test]
fn failure_line_unwind_phase_outcome_and_failure_card() {
    let env = Env::new("ux-fail", FAST);
    let cfg = cluster_file(&env.dir, "uxf", "uxf-f41l5", "Public", "");
    env.sim.fault(
        json!({"method": "PUT", "resource_type": "Microsoft.Network/publicIPAddresses",
        "status": 409, "error_code": "PublicIPCountLimitReached",
        "message": "Cannot create more than 10 public IP addresses"}),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    // The failure, where the eye lands, the moment it happens: before any undo line.
    let lines: Vec<&str> = out.lines().collect();
    let fail_at = lines
        .iter()
        .position(|l| l.starts_with("✗ ") && l.contains("PublicIPCountLimitReached"))
        .unwrap_or_else(|| panic!("no ✗ failure line:\n{out}"));
    let failure = lines[fail_at];
    assert!(
        failure.contains(" failed: PublicIPCountLimitReached ")
            && failure.contains("Cannot create more than 10")
            && failure.contains("— unwinding "),
        "{failure}"
    );
    let first_undo = lines
        .iter()
        .position(|l| {
            l.contains(" undone") || l.contains("undo-running") || l.contains("undo-started")
        })
        .unwrap_or(usize::MAX);
    assert!(
        fail_at < first_undo,
        "the failure comes before the unwind:\n{out}"
    );
    // A one-line outcome with the elapsed time.
    let outcome = lines
        .iter()
        .find(|l| l.starts_with("✗ Creation failed after"))
        .unwrap_or_else(|| panic!("no outcome line:\n{out}"));
    assert!(outcome.contains("rolled back"), "{outcome}");
    let run = run_id(&out);
    let short = &run[run.len() - 8..];

    // `show` by the short id (the last 8): the failure card with code, and a hint that
    // fits a rolled-back run (never `retry`, which is refused on a finished run).
    let (code, shown, e) = env.cli(&["show", short], &[]);
    assert_eq!(code, 0, "{e}");
    let card: Vec<&str> = shown
        .lines()
        .skip_while(|l| !l.starts_with("FAILURE"))
        .take(3)
        .collect();
    assert!(
        card[0].contains("failed: PublicIPCountLimitReached"),
        "{shown}"
    );
    assert!(card[2].contains("start a new run"), "{shown}");
    assert!(!card.join(" ").contains("retry"), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("UNDO STACK  unwound because")
                && l.ends_with("; the run rolled back")),
        "{shown}"
    );
    // `why` by cluster/<name>: the error that caused the rollback.
    let (code, why, e) = env.cli(&["why", "cluster/uxf"], &[]);
    assert_eq!(code, 0, "{e}");
    assert!(
        why.contains("PublicIPCountLimitReached") && !why.contains("hcp-workflow retry"),
        "{why}"
    );
    // JSON: the same card.
    let (_, j, _) = env.cli(&["--output", "json", "show", &run[..13]], &[]);
    let v = document(&j, "Run");
    assert_eq!(v["run_id"], run.as_str(), "{j}");
    assert_eq!(v["short_id"], short, "{j}");
    assert_eq!(v["failure"]["code"], "PublicIPCountLimitReached", "{j}");
    assert_eq!(v["state"], "rolled-back");

    // A step by its unique suffix; a misspelling gets "did you mean".
    let (code, hist, e) = env.cli(&["history", short, "--step", "network.public-ip"], &[]);
    assert_eq!(code, 0, "{e}");
    assert!(hist.contains("create-cluster.network.public-ip"), "{hist}");
    let (code, _, e) = env.cli(&["history", short, "--step", "network.publik-ip"], &[]);
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("did you mean") && e.contains("create-cluster.network.public-ip"),
        "{e}"
    );

    // Unknown and malformed references are bad input (exit 2) and say what a RUN is.
    let (code, _, e) = env.cli(&["show", "ffffffff"], &[]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("no run matches `ffffffff`"), "{e}");
    let (code, _, e) = env.cli(&["show", "cluster/nosuch"], &[]);
    assert_eq!(code, 2, "{e}");
    let (code, _, e) = env.cli(&["show", "not-a-run!"], &[]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("not a run reference"), "{e}");
}

#[test]
fn success_prints_the_outcome_and_list_shows_short_ids() {
    let env = Env::new("ux-ok", FAST);
    let cfg = cluster_file(&env.dir, "uxo", "uxo-0k0k0", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("✓ Creation complete after")),
        "{out}"
    );
    assert!(!out.contains("✗ "), "{out}");
    let run = run_id(&out);
    let (code, listed, e) = env.cli(&["list"], &[]);
    assert_eq!(code, 0, "{e}");
    let row = listed.lines().nth(1).unwrap();
    assert!(row.starts_with(&run[run.len() - 8..]), "{listed}");
    let (_, j, _) = env.cli(&["--output", "json", "list"], &[]);
    let v = items(&j, "RunList");
    assert_eq!(v[0]["run_id"], run.as_str());
    assert_eq!(v[0]["short_id"], &run[run.len() - 8..]);
    // The succeeded run's show says nothing untrue.
    let (_, shown, _) = env.cli(&["show", "cluster/uxo"], &[]);
    assert!(!shown.contains("(no step has started)"), "{shown}");
    assert!(!shown.contains("FAILURE"), "{shown}");
}

/// `start delete-cluster` on a terminal (a pty from util-linux `script`) lists what it
/// deletes and what it keeps and asks; anything but `yes` journals nothing. It asks even
/// when its output is piped (`2>&1 | tail -3`: the question goes to the terminal). With no
/// terminal on stdin (CI) it is refused (exit 2) unless `--yes`.
#[test]
fn delete_on_a_terminal_asks_first() {
    let env = Env::new("ux-confirm", FAST);
    let cfg = cluster_file(&env.dir, "uxd", "uxd-d3l3t", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let on_tty = |answer: &str, extra: &str| {
        let cmd = format!(
            "{} --database {} --simulator {} start delete-cluster --config {} {extra}",
            hcp_e2e_tests::bin().display(),
            env.db,
            env.sim.base,
            cfg.display()
        );
        // Plain marks: what is asserted is the question and the outcome, not colour.
        let mut child = std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(answer.as_bytes()).unwrap();
        }
        let o = child.wait_with_output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).to_string(),
        )
    };
    let (code, screen) = on_tty("no\n", "");
    assert_eq!(code, 2, "{screen}");
    assert!(
        screen.contains("delete-cluster will delete cluster uxd (infra id uxd-d3l3t)"),
        "{screen}"
    );
    assert!(
        screen.contains("and keep:") && screen.contains("--purge-persistent"),
        "{screen}"
    );
    assert!(screen.contains("Only 'yes' is accepted"), "{screen}");
    assert!(
        screen.contains("not confirmed: nothing was journaled or deleted"),
        "{screen}"
    );
    // Output piped, as in `… 2>&1 | tee delete.log`: still asked, on the terminal.
    let (_, screen) = on_tty("no\n", "2>&1 | tail -3");
    assert!(screen.contains("Only 'yes' is accepted"), "{screen}");
    assert!(
        screen.contains("not confirmed: nothing was journaled or deleted"),
        "{screen}"
    );
    // No terminal at all (CI, cron): refused without --yes, for --purge-persistent too.
    for extra in [&[][..], &["--purge-persistent"][..]] {
        let mut a = vec!["start", "delete-cluster", "--config", cfg.to_str().unwrap()];
        a.extend_from_slice(extra);
        let (code, out, err) = env.cli(&a, &[]);
        assert_eq!(code, 2, "{out}\n{err}");
        assert!(
            err.contains("--yes") && err.contains("stdin is not a terminal"),
            "{err}"
        );
        assert!(err.contains("nothing was journaled or deleted"), "{err}");
    }
    let (_, j, _) = env.cli(
        &["--output", "json", "list", "--workflow", "delete-cluster"],
        &[],
    );
    assert!(items(&j, "RunList").is_empty(), "{j}");
    // `--yes` on a terminal: no question, the delete runs.
    let (code, screen) = on_tty("", "--yes");
    assert_eq!(code, 0, "{screen}");
    assert!(!screen.contains("Only 'yes'"), "{screen}");
    assert!(screen.contains("✓ Deletion complete after"), "{screen}");
}

/// `hcp-workflow start create-cluster --detach` while `hcp-workflow worker` runs for the same
/// journal and simulator: the run is the worker's, so the start says so instead of "run it
/// with: … worker" (which would start a second executor the journal refuses); and the
/// worker does run it.
#[test]
fn start_detach_names_the_running_worker_instead_of_asking_for_one() {
    let env = Env::new("ux-detach-worker", FAST);
    let cfg = cluster_file(&env.dir, "uxd", "uxd-d3t4c", "Public", "");
    let _w = hcp_e2e_tests::Proc::spawn(&env.dir, &env.args(&["worker"]), &[]);
    // The worker holds the journal once it wrote itself into the executor lock file.
    let lock = env.dir.join("journal.db.executor.lock");
    hcp_e2e_tests::wait_until(
        "the worker holds the journal",
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(50),
        || std::fs::read_to_string(&lock).is_ok_and(|s| !s.trim().is_empty()),
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("run it with"), "{out}");
    assert!(
        out.contains("serving this journal runs it") && out.contains("watch "),
        "{out}"
    );
    let run = run_id(&out);
    let (code, out, err) = env.cli(&["watch", &run], &[]);
    assert_eq!(code, 0, "the worker ran it: {out}{err}");
}

/// `hcp-workflow --database postgres://… start create-cluster --detach` while an idle
/// `hcp-workflow worker` serves the same journal and simulator: on Postgres the worker holds
/// no lease and no executor lock, and the start must still name it instead of asking for a
/// worker; once the worker stops, the start asks for one again.
#[test]
fn start_detach_names_an_idle_postgres_worker() {
    let Some(base) = hcp_e2e_tests::postgres_url() else {
        return;
    };
    let mut env = Env::new("ux-detach-pg", FAST);
    env.db = hcp_e2e_tests::fresh_postgres_blocking(&base);
    let cfg = cluster_file(&env.dir, "uxp", "uxp-d3t4c", "Public", "");
    let w = hcp_e2e_tests::Proc::spawn(&env.dir, &env.args(&["worker"]), &[]);
    hcp_e2e_tests::wait_until(
        "the worker starts",
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(100),
        || w.stderr().contains("executing runs from"),
    );
    // Its first word is written as it starts; give it a moment to land.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("run it with"), "{out}");
    assert!(out.contains("which serves this target, runs it"), "{out}");
    let run = run_id(&out);
    let (code, out, err) = env.cli(&["watch", &run], &[]);
    assert_eq!(code, 0, "the worker ran it: {out}{err}");
    // Stopped, it says so: the next detached start asks for a worker.
    w.signal("TERM");
    let (code, _, err) = w.finish(std::time::Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    let cfg2 = cluster_file(&env.dir, "uxq", "uxq-d3t4c", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg2, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("journaled only; run it with"), "{out}");
}
