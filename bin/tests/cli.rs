//! CLI contract tests on the real binary (this file also makes `cargo test` build the
//! binary that the end-to-end tests in `tests/` drive).
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hcp-workflow"))
}

#[test]
fn every_command_has_help_with_an_example() {
    for cmd in [
        "worker",
        "selftest",
        "list",
        "show",
        "history",
        "cancel",
        "retry",
        "resolve",
        "resume",
        "completion",
        "man",
    ] {
        let out = bin().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success(), "{cmd} --help");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Example"),
            "{cmd} --help has an example:\n{text}"
        );
    }
}

#[test]
fn bad_input_exits_2_and_names_the_problem() {
    let dir = hcp_runtime::testkit::scratch_dir("cli");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let out = bin()
        .args(["list", "--database", &db, "--state", "exploded"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--state exploded") && err.contains("needs-operator"),
        "{err}"
    );
    let out = bin()
        .args(["selftest", "--database", &db, "--fail", "zz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fail zz: no such step"));
    let out = bin()
        .args(["list", "--database", "mysql://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mysql"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn selftest_runs_and_operators_see_it() {
    let dir = hcp_runtime::testkit::scratch_dir("cli");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world = dir.join("w");
    let out = bin()
        .args([
            "selftest",
            "--database",
            &db,
            "--world",
            world.to_str().unwrap(),
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // NDJSON events: `started` first, `progress` lines, `finished` last.
    for l in &lines {
        assert_eq!(l["apiVersion"], "hcp-workflow/v1", "{l}");
        assert_eq!(l["kind"], "Event", "{l}");
    }
    assert_eq!(lines[0]["type"], "started", "{:?}", lines[0]);
    let finished = lines.last().unwrap();
    assert_eq!(finished["type"], "finished", "{finished}");
    assert_eq!(finished["state"], "succeeded");
    let run = lines[0]["run_id"].as_str().unwrap().to_string();
    assert_eq!(finished["run_id"], run.as_str());
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "progress" && l["step"] == "c" && l["state"] == "succeeded"),
        "{lines:?}"
    );
    let out = bin()
        .args(["list", "--database", &db, "--output", "json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "RunList", "{list}");
    let rows = &list["items"];
    assert_eq!(rows[0]["run_id"], run.as_str());
    assert_eq!(rows[0]["workflow"], "sample");
    assert_eq!(rows[0]["state"], "succeeded");
    let out = bin()
        .args(["show", &run, "--database", &db])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("state      succeeded") && text.contains("b2"),
        "{text}"
    );
    // A command on a finished run is refused with an explanation, exit 2.
    let out = bin()
        .args(["cancel", &run, "--database", &db])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already succeeded"));
}

/// A scratch journal URL and world directory.
fn scratch(tag: &str) -> (std::path::PathBuf, String, String) {
    let dir = hcp_runtime::testkit::scratch_dir(tag);
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let world = dir.join("w").display().to_string();
    (dir, db, world)
}

/// Journal a self-test run without executing it (`--detach`); its id.
fn detached_selftest(db: &str, world: &str) -> String {
    let out = bin()
        .args(["selftest", "--database", db, "--world", world, "--detach"])
        .args(["--output", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One `started` event line, nothing more: the run is not followed.
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "Event", "{v}");
    assert_eq!(v["type"], "started", "{v}");
    v["run_id"].as_str().unwrap().to_string()
}

/// Run a self-test saga to its end (it succeeds); its id.
fn finished_selftest(db: &str, world: &str) -> String {
    let (code, run) = selftest_to_end(db, world, &[], &[]);
    assert_eq!(code, Some(0));
    run
}

/// Run a self-test saga with `extra` arguments and `envs` until it ends or stops for an
/// operator: (exit code, run id from the `started` event).
fn selftest_to_end(
    db: &str,
    world: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> (Option<i32>, String) {
    let out = bin()
        .args([
            "selftest",
            "--database",
            db,
            "--world",
            world,
            "--output",
            "json",
        ])
        .args(extra)
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let started = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "started")
        .unwrap_or_else(|| {
            panic!(
                "no started event: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (
        out.status.code(),
        started["run_id"].as_str().unwrap().to_string(),
    )
}

/// Stderr lines of a spawned child, as they come.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Wait (at most a minute) for a line matching `want`; every line seen so far.
fn wait_for_line(
    lines: &std::sync::mpsc::Receiver<String>,
    want: impl Fn(&str) -> bool,
) -> (bool, Vec<String>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(l) => {
                let hit = want(&l);
                seen.push(l);
                if hit {
                    return (true, seen);
                }
            }
            Err(_) => break,
        }
    }
    (false, seen)
}

#[test]
fn completion_scripts_and_man_pages() {
    let out = bin().args(["completion", "bash"]).output().unwrap();
    assert!(out.status.success());
    let bash = String::from_utf8_lossy(&out.stdout);
    // The script calls the binary back at each Tab (`COMPLETE=bash hcp-workflow -- …`),
    // so subcommands and values come from the binary itself.
    assert!(
        bash.contains("COMPLETE=\"bash\"")
            && bash.contains("complete -o")
            && bash.contains("hcp-workflow"),
        "{bash}"
    );
    for shell in ["zsh", "fish"] {
        let out = bin().args(["completion", shell]).output().unwrap();
        assert!(out.status.success(), "completion {shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(
            script.contains("COMPLETE=") && script.contains("hcp-workflow"),
            "{script}"
        );
    }
    // Asked as a shell asks: the subcommands.
    let out = bin()
        .args(["--", "hcp-workflow", "st"])
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", "1")
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&out.stdout);
    assert!(words.lines().any(|w| w == "start"), "{words}");
    let out = bin().args(["completion", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));

    let out = bin().arg("man").output().unwrap();
    assert!(out.status.success());
    let man = String::from_utf8_lossy(&out.stdout);
    // clap_mangen puts the portable quote definition (`.ie`/`.el`) before the title.
    let first = man
        .lines()
        .find(|l| !l.starts_with(".ie") && !l.starts_with(".el"))
        .unwrap();
    assert!(first.starts_with(".TH hcp-workflow 1"), "{man}");
    assert!(
        man.contains(".SH NAME") && man.contains("selftest"),
        "{man}"
    );
    // Documented, not hidden.
    let help = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("completion") && help.contains("man"),
        "{help}"
    );

    let (dir, _, _) = scratch("cli-man");
    let pages = dir.join("man1");
    let out = bin()
        .args(["man", "--out-dir", pages.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "hcp-workflow.1",
        "hcp-workflow-list.1",
        "hcp-workflow-start.1",
    ] {
        let text = std::fs::read_to_string(pages.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
}

#[test]
fn version_names_the_commit_and_build_date() {
    let out = bin().arg("--version").output().unwrap();
    assert!(out.status.success());
    let v = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    // hcp-workflow 0.1.0 (a1b2c3d[-dirty] 2026-11-23), or `unknown` without git.
    let rest = v
        .strip_prefix(&format!("hcp-workflow {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{v}"));
    let (commit, date) = rest.split_once(' ').unwrap_or_else(|| panic!("{v}"));
    let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
    assert!(
        hash == "unknown" || (hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{v}"
    );
    let d: Vec<&str> = date.split('-').collect();
    assert!(
        d.len() == 3
            && d[0].len() == 4
            && d[1].len() == 2
            && d[2].len() == 2
            && d.iter().all(|p| p.chars().all(|c| c.is_ascii_digit())),
        "{v}"
    );
    assert!(
        ("01"..="12").contains(&d[1]) && ("01"..="31").contains(&d[2]),
        "{v}"
    );
}

#[test]
fn a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    let (_dir, db, world) = scratch("cli-pipe");
    finished_selftest(&db, &world);
    finished_selftest(&db, &world);
    for args in [
        vec!["list", "--database", db.as_str()],
        vec!["list", "--database", db.as_str(), "--output", "json"],
        vec!["--help"],
    ] {
        let mut child = bin()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the command prints (`… | head -0`).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn logs_are_not_coloured_off_a_terminal() {
    use std::process::Stdio;
    let (_dir, db, world) = scratch("cli-colour");
    detached_selftest(&db, &world);
    let mut worker = bin()
        .args(["worker", "--database", &db, "--world", &world])
        .env("RUST_LOG", "info")
        .env("HCP_POLL_MS", "100")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut worker);
    let (found, seen) = wait_for_line(&lines, |l| l.contains("run finished"));
    let _ = worker.kill();
    let _ = worker.wait();
    let all = seen.join("\n");
    assert!(found, "{all}");
    assert!(all.contains("INFO"), "{all}");
    assert!(!all.contains("\x1b["), "ANSI escapes in a pipe: {all:?}");
}

/// On a terminal (a pty from `script`, where there is one), logs are coloured unless
/// `NO_COLOR` is set.
#[test]
fn no_color_turns_colour_off_on_a_terminal() {
    if !std::path::Path::new("/usr/bin/script").exists() {
        eprintln!("skipped: no /usr/bin/script to give the binary a terminal");
        return;
    }
    let (_dir, db, world) = scratch("cli-no-color");
    // A worker on a terminal for two seconds: it logs (at info) the run it picks up.
    let shell = format!(
        "{} --database {db} worker --world {world} & sleep 2; kill $!",
        env!("CARGO_BIN_EXE_hcp-workflow")
    );
    let under_pty = |no_color: bool| {
        detached_selftest(&db, &world);
        let mut c = Command::new("/usr/bin/script");
        c.args(["-qec", &shell, "/dev/null"])
            .env("RUST_LOG", "info")
            .env("HCP_POLL_MS", "100")
            .env("TERM", "xterm")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("NO_COLOR");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let out = c.output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let plain = under_pty(true);
    assert!(plain.contains("picked up run"), "{plain}");
    assert!(
        !plain.contains("\x1b["),
        "NO_COLOR and still ANSI: {plain:?}"
    );
    let coloured = under_pty(false);
    assert!(coloured.contains("picked up run"), "{coloured}");
    assert!(
        coloured.contains("\x1b["),
        "a terminal gets colour: {coloured:?}"
    );
}

#[test]
fn read_only_commands_never_create_a_journal() {
    let (dir, _, _) = scratch("cli-nojournal");
    let path = dir.join("missing.db");
    let db = format!("sqlite://{}", path.display());
    let id = "01a20a8f-df98-7525-a71b-a5abb58ac534";
    for args in [
        vec!["list"],
        vec!["show", id],
        vec!["why", id],
        vec!["history", id],
        vec!["watch", id],
        vec!["inventory"],
        vec!["cancel", id],
    ] {
        let out = bin()
            .args(&args)
            .args(["--database", &db])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("error: no journal at {}", path.display()))
                && err.contains("start a run first")
                && err.contains("HCP_WORKFLOW_DATABASE_URL"),
            "{args:?}: {err}"
        );
        assert!(!path.exists(), "{args:?} created {}", path.display());
    }
    // Query parameters are not part of the file name.
    let out = bin()
        .args(["list", "--database", &format!("{db}?mode=ro")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!path.exists());
    // The default names the file in the current directory.
    let out = bin()
        .arg("list")
        .env_remove("HCP_WORKFLOW_DATABASE_URL")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "error: no journal at ./hcp-workflow.db (sqlite://./hcp-workflow.db): start a run first, or pass --database / HCP_WORKFLOW_DATABASE_URL"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.join("hcp-workflow.db").exists());
    // `memory:` has no file to miss.
    let out = bin()
        .args(["list", "--database", "memory:"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn refused_operator_commands_exit_2() {
    let (_dir, db, world) = scratch("cli-refused");
    let done = finished_selftest(&db, &world);
    let pending = detached_selftest(&db, &world);
    // An unknown run.
    let out = bin()
        .args([
            "cancel",
            "01a20a8f-df98-7525-a71b-a5abb58ac534",
            "--database",
            &db,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no run 01a20a8f"), "{err}");
    // A state the command does not apply to.
    let out = bin()
        .args(["retry", &done, "--database", &db])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("refused") && err.contains("already succeeded"),
        "{err}"
    );
    let out = bin()
        .args(["resume", &pending, "--database", &db])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // An unknown step.
    let out = bin()
        .args(["retry", &pending, "--step", "zz", "--database", &db])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--step zz: no such step in this run"), "{err}");
    let out = bin()
        .args([
            "resolve",
            &pending,
            "--step",
            "zz",
            "--note",
            "x",
            "--database",
            &db,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn operator_identity_comes_from_logname_without_user() {
    let (_dir, db, world) = scratch("cli-who");
    let run = detached_selftest(&db, &world);
    let out = bin()
        .args([
            "cancel",
            &run,
            "--database",
            &db,
            "--reason",
            "wrong region",
        ])
        .env_remove("USER")
        .env("LOGNAME", "alice")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bin()
        .args(["show", &run, "--database", &db, "--output", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "Run", "{v}");
    assert_eq!(v["commands"][0]["command_id"], 1, "{v}");
    let by = v["commands"][0]["by"].as_str().unwrap();
    assert!(by.starts_with("alice@"), "{v}");
    assert_eq!(v["commands"][0]["reason"], "wrong region");
}

#[test]
fn worker_logs_runs_it_picks_up_and_finishes() {
    use std::process::Stdio;
    let (_dir, db, world) = scratch("cli-worker-log");
    let run = detached_selftest(&db, &world);
    let mut worker = bin()
        .args([
            "--log-format",
            "json",
            "worker",
            "--database",
            &db,
            "--world",
            &world,
        ])
        .env("RUST_LOG", "info")
        .env("HCP_POLL_MS", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut worker);
    let json = |l: &str| serde_json::from_str::<serde_json::Value>(l).ok();
    let of_run = |l: &str, msg: &str| {
        json(l).is_some_and(|v| {
            v["level"] == "INFO" && v["fields"]["message"] == msg && v["fields"]["run_id"] == run
        })
    };
    let (found, seen) = wait_for_line(&lines, |l| of_run(l, "run finished"));
    let _ = worker.kill();
    let _ = worker.wait();
    assert!(found, "{}", seen.join("\n"));
    let picked = seen.iter().find(|l| of_run(l, "picked up run")).unwrap();
    let picked = json(picked).unwrap();
    assert_eq!(picked["fields"]["cluster"], "selftest");
    let finished = json(seen.last().unwrap()).unwrap();
    assert_eq!(finished["fields"]["state"], "succeeded", "{finished}");
    assert_eq!(finished["fields"]["cluster"], "selftest");
}

#[test]
fn watch_interrupted_by_ctrl_c_exits_130() {
    use std::process::Stdio;
    let (_dir, db, world) = scratch("cli-watch-int");
    // Pending for good: no worker executes it.
    let run = detached_selftest(&db, &world);
    let mut watch = bin()
        .args(["watch", &run, "--database", &db])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(watch.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert!(first.contains(&run), "{first}");
    let killed = Command::new("kill")
        .args(["-INT", &watch.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = watch.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `resolve --wait` by a run's short id (its last 8) and a step's suffix: it follows until
/// the worker applied the command, and says what it did; a misspelt step gets "did you
/// mean" and exit 2.
#[test]
fn resolve_waits_until_applied_with_short_id_and_step_suffix() {
    use std::process::Stdio;
    let (_dir, db, world) = scratch("cli-resolve-wait");
    let (code, run) = selftest_to_end(
        &db,
        &world,
        &["--fail", "c"],
        &[("HCP_SAMPLE_FAULTS", r#"{"stuck_undo":["b1"]}"#)],
    );
    assert_eq!(code, Some(1));
    let short = &run[run.len() - 8..];
    // A misspelt step: did you mean, exit 2, nothing queued.
    let o = bin()
        .args([
            "resolve",
            short,
            "--step",
            "b2x",
            "--note",
            "n",
            "--database",
            &db,
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no such step"), "{err}");
    let mut worker = bin()
        .args(["worker", "--database", &db, "--world", &world])
        .env("HCP_POLL_MS", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let o = bin()
        .args([
            "resolve",
            short,
            "--step",
            "b1",
            "--note",
            "removed by hand",
            "--wait",
            "--database",
            &db,
        ])
        .env("USER", "carol")
        .output()
        .unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("applied `resolve --step b1` at "), "{text}");
    // `--wait` follows to the effect, the end of the unwind.
    assert!(text.contains("following its effect"), "{text}");
    assert_eq!(
        text.lines().last(),
        Some(format!("run {run} rolled back").as_str()),
        "{text}"
    );
}

/// `list` and `show` colour the run state on a terminal (succeeded green), never off one,
/// and never with `NO_COLOR`.
#[test]
fn state_text_is_coloured_only_on_a_terminal() {
    if !std::path::Path::new("/usr/bin/script").exists() {
        eprintln!("skipped: no /usr/bin/script to give the binary a terminal");
        return;
    }
    let (_dir, db, world) = scratch("cli-state-colour");
    let run = finished_selftest(&db, &world);
    let under_pty = |args: &str, no_color: bool| {
        let shell = format!(
            "{} --database {db} {args}",
            env!("CARGO_BIN_EXE_hcp-workflow")
        );
        let mut c = Command::new("/usr/bin/script");
        c.args(["-qec", &shell, "/dev/null"])
            .env("TERM", "xterm")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("NO_COLOR");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        String::from_utf8_lossy(&c.output().unwrap().stdout).to_string()
    };
    let listed = under_pty("list", false);
    assert!(listed.contains("\x1b[32msucceeded"), "{listed:?}");
    let shown = under_pty(&format!("show {run}"), false);
    assert!(shown.contains("\x1b[32msucceeded\x1b[0m"), "{shown:?}");
    assert!(!under_pty("list", true).contains("\x1b["));
    let piped = bin().args(["list", "--database", &db]).output().unwrap();
    assert!(!String::from_utf8_lossy(&piped.stdout).contains("\x1b["));
}

/// `bench cluster` creates the example cluster against the in-process simulator without a
/// failure (it seeds the public DNS zone of `baseDomain`, as a user has it). Behaviour only:
/// the figures belong in BENCHMARKS.md.
#[test]
fn bench_cluster_creates_without_failures() {
    let (dir, _db, _world) = scratch("cli-bench-cluster");
    let db = format!("sqlite://{}/bench.db", dir.display());
    let out = bin()
        .args([
            "--database",
            &db,
            "bench",
            "cluster",
            "--creates",
            "1",
            "--time-scale",
            "0.002",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR").to_string() + "/..")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["failed_runs"], 0, "{last}");
    // 59 steps, the rollout wait, and the zone, link and apex record of each of the two
    // published hostnames (a Private cluster's API and OAuth names).
    assert_eq!(last["steps_per_create"], 66, "{last}");
}

/// Every `worker` made `./hcp-workflow-selftest/` in whatever directory it was
/// started from, though it ran no self-test. The self-test's scratch directory now appears
/// only with its first side effect.
#[test]
fn a_worker_leaves_no_selftest_directory_behind() {
    let (dir, db, _world) = scratch("cli-worker-no-stray");
    let cwd = dir.join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let mut worker = bin()
        .args(["worker", "--database", &db])
        .current_dir(&cwd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Up once it holds the journal's executor lock (its pid is in the lock file).
    let lock = format!("{}.executor.lock", db.trim_start_matches("sqlite://"));
    let pid = worker.id().to_string();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.contains(&pid)) {
        assert!(std::time::Instant::now() < end, "the worker never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = worker.kill();
    let _ = worker.wait();
    let left: Vec<_> = std::fs::read_dir(&cwd)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert!(left.is_empty(), "the worker left {left:?} in its directory");
}

/// The bash completion completes below the top level, in a real bash (the
/// generated case labels were mangled for the hyphenated binary name, so only top-level
/// commands completed).
#[test]
fn bash_completion_completes_subcommand_flags_and_values_in_a_real_bash() {
    if Command::new("bash").arg("--version").output().is_err() {
        eprintln!("skipped: no bash");
        return;
    }
    let dir = hcp_runtime::testkit::scratch_dir("cli-completion");
    let out = bin().args(["completion", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = dir.join("hcp-workflow.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // Complete `words…` the way bash does: the function `complete -p` registered, with
    // COMP_WORDS/COMP_CWORD set and (command, current word, previous word) as arguments.
    let complete = |words: &[&str]| -> Vec<String> {
        let snippet = r#"source "$1"; shift
fn=$(complete -p hcp-workflow | sed -E 's/.*-F ([^ ]+).*/\1/')
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
"$fn" hcp-workflow "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}""#;
        let o = Command::new("bash")
            .arg("-c")
            .arg(snippet)
            .arg("bash")
            .arg(&script)
            .args(words)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert!(
        complete(&["hcp-workflow", "sta"]).contains(&"start".to_string()),
        "top level"
    );
    assert_eq!(complete(&["hcp-workflow", "start", "--con"]), ["--config"]);
    assert_eq!(
        complete(&["hcp-workflow", "start", "cr"]),
        ["create-cluster"]
    );
    assert_eq!(complete(&["hcp-workflow", "list", "--st"]), ["--state"]);
    assert_eq!(
        complete(&["hcp-workflow", "simulator", "serve", "--time"]),
        ["--time-scale"]
    );
}
