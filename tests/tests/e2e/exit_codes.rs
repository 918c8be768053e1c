//! One end-to-end test per exit-code rule, on the real binary with a scratch
//! SQLite journal:
//! - 0: the command succeeded;
//! - 1: the run ended badly (or the command failed);
//! - 2: every refused operator command and every invalid input, with nothing journaled
//!   (and no journal file created where there was none);
//! - 130: a follower stopped by Ctrl-C, while its run goes on and ends well;
//! - a closed pipe (`| head -1`) ends the process quietly (0 or SIGPIPE), never a panic;
//! - `--output json`: a failure is exactly one `Error` document with the same exit code as
//!   text mode, a one-shot answer one document, a follower NDJSON `Event` lines.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::{Proc, bin, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// What one run of the binary did.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `hcp-workflow args…`, with no inherited journal or fault settings.
fn hw(args: &[&str]) -> Out {
    let o = Command::new(bin())
        .args(args)
        .env_remove("HCP_WORKFLOW_DATABASE_URL")
        .env_remove("HCP_SAMPLE_FAULTS")
        .env_remove("HCP_CRASH_AT")
        .env_remove("HCP_TRACE_BOUNDARIES")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A scratch journal and self-test world.
struct Journal {
    dir: PathBuf,
    db: String,
    world: String,
}

impl Journal {
    fn new(tag: &str) -> Journal {
        let dir = scratch(tag);
        let path = dir.join("journal.db");
        Journal {
            db: format!("sqlite://{}", path.display()),
            world: dir.join("world").display().to_string(),
            dir,
        }
    }

    /// `hcp-workflow --database <journal> args…`.
    fn hw(&self, args: &[&str]) -> Out {
        let mut all = vec!["--database", self.db.as_str()];
        all.extend_from_slice(args);
        hw(&all)
    }

    /// The self-test saga to its end in text mode (with `extra` arguments): its output and
    /// run id (the first line is `run <id>`).
    fn selftest(&self, extra: &[&str]) -> (Out, String) {
        let mut args = vec!["selftest", "--world", self.world.as_str()];
        args.extend_from_slice(extra);
        let out = self.hw(&args);
        let run = run_id(&out.stdout).unwrap_or_else(|| panic!("no run id: {out:?}"));
        (out, run)
    }

    /// `show RUN --output json`.
    fn show_json(&self, run: &str) -> Value {
        let out = self.hw(&["show", run, "--output", "json"]);
        assert_eq!(out.code, Some(0), "{out:?}");
        serde_json::from_str(&out.stdout).unwrap()
    }

    /// Every run as (run_id, state, updated_at, operator commands): what a refused command
    /// must leave untouched.
    fn snapshot(&self) -> Vec<(String, String, String, Value)> {
        let out = self.hw(&["list", "--output", "json"]);
        assert_eq!(out.code, Some(0), "{out:?}");
        let list: Value = serde_json::from_str(&out.stdout).unwrap();
        list["items"]
            .as_array()
            .unwrap_or_else(|| panic!("no items: {list}"))
            .iter()
            .map(|r| {
                let id = r["run_id"].as_str().unwrap().to_string();
                let commands = self.show_json(&id)["commands"].clone();
                (
                    id,
                    r["state"].as_str().unwrap().to_string(),
                    r["updated_at"].as_str().unwrap().to_string(),
                    commands,
                )
            })
            .collect()
    }
}

/// The id on the `run <id>` line.
fn run_id(stdout: &str) -> Option<String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_string)
}

/// The longest common prefix of two run ids: a reference that matches both.
fn common_prefix(a: &str, b: &str) -> String {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// A cluster file that parses as YAML but has a value of the wrong type (line 13,
/// column 15: `replicas: two`): the config crate's own bad-input fixture.
fn bad_cluster_file() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workflows/tests/fixtures/bad/type-error.yaml");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A directory holding only the bad cluster file; the journal URL beside it (absent).
fn bad_file_dir(tag: &str) -> (PathBuf, PathBuf, String) {
    let dir = scratch(tag).join("cfg");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(&file, bad_cluster_file()).unwrap();
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    (dir, file, db)
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every JSON document on `stdout` (pretty or one per line).
fn documents(stdout: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(stdout)
        .into_iter::<Value>()
        .map(|d| d.unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}")))
        .collect()
}

// ---------------------------------------------------------------------------------------
// 0

#[test]
fn exit_0_when_the_command_succeeded() {
    let j = Journal::new("exit-0");
    let (out, run) = j.selftest(&[]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout
            .lines()
            .last()
            .is_some_and(|l| l == format!("run {run} succeeded")),
        "{out:?}"
    );
    let out = j.hw(&["list"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let row = out.stdout.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with(&run[run.len() - 8..]) && row.contains("succeeded"),
        "{out:?}"
    );
    let out = j.hw(&["show", &run]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("succeeded"), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

// ---------------------------------------------------------------------------------------
// 1

#[test]
fn exit_1_when_the_run_ended_badly() {
    let j = Journal::new("exit-1");
    let (out, run) = j.selftest(&["--fail", "c"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stdout.contains(&format!("run {run} rolled back"))
            && out
                .stdout
                .contains("rolled back after c failed: InvalidParameter"),
        "{out:?}"
    );
    // The run is journaled as rolled back (reading it is a success).
    assert_eq!(j.show_json(&run)["state"], "rolled-back");
    // A command that fails (not bad input) is exit 1 too.
    let out = hw(&["list", "--database", "mysql://x"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.starts_with("error: ") && out.stderr.contains("mysql"),
        "{out:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 2

#[test]
fn exit_2_for_refused_commands_and_invalid_input_with_nothing_journaled() {
    let j = Journal::new("exit-2");
    let (_, done) = j.selftest(&[]);
    let (_, rolled_back) = j.selftest(&["--fail", "c"]);
    let before = j.snapshot();
    assert_eq!(before.len(), 2);
    let ambiguous = common_prefix(&done, &rolled_back);
    assert!(!ambiguous.is_empty(), "{done} {rolled_back}");
    let unknown = "01a20a8f-df98-7525-a71b-a5abb58ac534";

    let cases: Vec<(Vec<&str>, Vec<String>)> = vec![
        // A run that does not exist.
        (vec!["cancel", unknown], vec![format!("no run {unknown}")]),
        (vec!["show", unknown], vec![unknown.to_string()]),
        (vec!["why", unknown], vec![unknown.to_string()]),
        (vec!["history", unknown], vec![unknown.to_string()]),
        (vec!["watch", unknown], vec![unknown.to_string()]),
        (
            vec!["cancel", "ffffffff"],
            vec!["no run matches `ffffffff`".into()],
        ),
        // A command the run's state does not allow.
        (
            vec!["retry", &rolled_back],
            vec!["`retry` refused".into(), "already rolled-back".into()],
        ),
        (
            vec!["cancel", &done],
            vec!["refused".into(), "already succeeded".into()],
        ),
        // Run references that name no single run.
        (
            vec!["show", &ambiguous],
            vec![
                format!("`{ambiguous}` matches 2 runs"),
                "type more characters".into(),
            ],
        ),
        (
            vec!["show", "not-a-run!"],
            vec!["`not-a-run!` is not a run reference".into()],
        ),
        // Bad flags and values.
        (
            vec!["list", "--state", "bogus"],
            vec![
                "--state bogus: unknown state".into(),
                "needs-operator".into(),
            ],
        ),
        (
            vec!["history", &done, "--step", "nosuch"],
            vec!["--step nosuch: no such step in this run".into()],
        ),
        (
            vec!["list", "--no-such-flag"],
            vec!["unexpected argument '--no-such-flag'".into()],
        ),
        (
            vec!["selftest", "--world", &j.world, "--fail", "zz"],
            vec!["--fail zz: no such step".into()],
        ),
    ];
    // Every case is tried; the failures are listed together.
    let mut wrong = Vec::new();
    for (args, wants) in &cases {
        let out = j.hw(args);
        let said = out.stderr.starts_with("error: ")
            && wants.iter().all(|w| out.stderr.contains(w.as_str()))
            && !out.stderr.contains("panicked");
        if out.code != Some(2) || !said {
            wrong.push(format!(
                "{args:?}: want exit 2 and {wants:?}; got exit {:?}, stderr {:?}",
                out.code, out.stderr
            ));
        }
    }
    // Nothing was journaled: no new run, no queued command, no state change.
    assert_eq!(j.snapshot(), before);

    // A read-only command without a journal: exit 2, where it was expected, none created.
    let missing = j.dir.join("missing.db");
    let missing_db = format!("sqlite://{}", missing.display());
    for args in [
        vec!["list"],
        vec!["show", done.as_str()],
        vec!["why", done.as_str()],
        vec!["history", done.as_str()],
        vec!["watch", done.as_str()],
    ] {
        let mut all = vec!["--database", missing_db.as_str()];
        all.extend_from_slice(&args);
        let out = hw(&all);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(
            out.stderr
                .contains(&format!("error: no journal at {}", missing.display())),
            "{args:?}: {out:?}"
        );
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }

    // An invalid cluster file: exit 2, every problem with its place, no journal created.
    let (dir, file, db) = bad_file_dir("exit-2-config");
    let out = hw(&[
        "--database",
        &db,
        "start",
        "create-cluster",
        "--simulate",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "error: {} is not a valid cluster file:",
            file.display()
        )) && out.stderr.contains(
            "  nodePools[0].replicas (line 13, column 15): expected a whole number, got the text \"two\""
        ) && out.stderr.contains("nothing was journaled or created"),
        "{out:?}"
    );
    assert_eq!(names_in(&dir), ["bad.yaml"], "{out:?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------
// 130

#[test]
fn exit_130_when_a_follower_is_interrupted_and_the_run_goes_on() {
    let j = Journal::new("exit-130");
    // The self-test follows its run, whose step c waits 4 s: the run is live meanwhile.
    let mut selftest = Proc::spawn(
        &j.dir,
        &["--database", &j.db, "selftest", "--world", &j.world],
        &[("HCP_SAMPLE_FAULTS", r#"{"waits":{"c":1},"wait_ms":4000}"#)],
    );
    let first = selftest
        .wait_line("run ", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("selftest printed no run: {}", selftest.stderr()));
    let run = run_id(&first).unwrap();
    // Two other followers of the same run, text and JSON.
    let mut text = Proc::spawn(&j.dir, &["--database", &j.db, "watch", &run], &[]);
    let mut json = Proc::spawn(
        &j.dir,
        &["--database", &j.db, "--output", "json", "watch", &run],
        &[],
    );
    let line = text
        .wait_line("run ", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("watch printed nothing: {}", text.stderr()));
    assert!(line.contains(&run), "{line}");
    json.wait_line("{", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("watch -o json printed nothing: {}", json.stderr()));
    assert!(
        selftest.child.try_wait().unwrap().is_none(),
        "the run ended before the watchers were interrupted: {:?}",
        selftest.seen
    );
    text.signal("INT");
    json.signal("INT");

    let (code, _, err) = text.finish(Duration::from_secs(5));
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains(&format!("stopped watching; run {run} is")) && err.contains("goes on"),
        "{err}"
    );
    let (code, lines, err) = json.finish(Duration::from_secs(5));
    assert_eq!(code, Some(130), "{err}");
    let events: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!events.is_empty());
    for e in &events {
        assert_eq!(e["apiVersion"], "hcp-workflow/v1", "{e}");
        assert_eq!(e["kind"], "Event", "{e}");
        // Interrupted: the stream ends without a `finished` line.
        assert_ne!(e["type"], "finished", "{e}");
    }
    assert_eq!(events[0]["type"], "started", "{lines:?}");

    // The run was never touched by the interrupt: it goes on and ends well.
    let (code, lines, err) = selftest.finish(Duration::from_secs(8));
    assert_eq!(code, Some(0), "{lines:?}\n{err}");
    assert_eq!(
        lines.last().map(String::as_str),
        Some(format!("run {run} succeeded").as_str())
    );
    assert_eq!(j.show_json(&run)["state"], "succeeded");
    assert_eq!(j.show_json(&run)["commands"], Value::Array(vec![]));
}

// ---------------------------------------------------------------------------------------
// Closed pipe

#[test]
fn a_closed_pipe_ends_quietly_never_with_a_panic() {
    let j = Journal::new("exit-pipe");
    let (_, run) = j.selftest(&[]);
    j.selftest(&["--fail", "c"]);
    let bin = bin().display().to_string();
    let err = j.dir.join("stderr.txt");
    // (arguments, the reader): `head -1` reads one line and leaves; `true` never reads.
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["list"], "head -1"),
        (vec!["list", "--output", "json"], "head -1"),
        (vec!["show", &run], "head -1"),
        (vec!["show", &run, "--output", "json"], "head -1"),
        // 78 kB: more than a pipe holds, so the writer meets the closed end.
        (vec!["completion", "bash"], "head -1"),
        (vec!["list"], "true"),
    ];
    for (args, reader) in cases {
        // PIPESTATUS[0]: how the binary itself ended (bash says 141 for SIGPIPE).
        let script = format!(
            r#""$0" --database "$1" {} 2>"$2" | {reader} >/dev/null; echo "${{PIPESTATUS[0]}}""#,
            args.join(" ")
        );
        let o = Command::new("bash")
            .args(["-c", &script, &bin, &j.db, err.to_str().unwrap()])
            .env_remove("HCP_WORKFLOW_DATABASE_URL")
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?} | {reader}: {o:?}");
        let status = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let stderr = std::fs::read_to_string(&err).unwrap();
        assert!(
            status == "0" || status == "141",
            "{args:?} | {reader}: exit {status}, stderr {stderr}"
        );
        assert!(
            !stderr.contains("panicked"),
            "{args:?} | {reader}: {stderr}"
        );
        assert!(
            !stderr.contains("Broken pipe"),
            "{args:?} | {reader}: {stderr}"
        );
    }
    // `list | head -1` is the header.
    let o = Command::new("bash")
        .args(["-c", r#""$0" --database "$1" list | head -1"#, &bin, &j.db])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("RUN "),
        "{o:?}"
    );
}

// ---------------------------------------------------------------------------------------
// JSON

/// One `Error` document, the exit code of text mode, the message also on stderr.
#[test]
fn json_errors_are_one_error_document_with_the_text_mode_exit_code() {
    let j = Journal::new("exit-json-err");
    let (_, done) = j.selftest(&[]);
    let (_, rolled_back) = j.selftest(&["--fail", "c"]);
    let ambiguous = common_prefix(&done, &rolled_back);
    let missing = format!("sqlite://{}", j.dir.join("missing.db").display());
    let unknown = "01a20a8f-df98-7525-a71b-a5abb58ac534";
    // (journal, arguments, reason, exit code)
    let db = j.db.as_str();
    let cases: Vec<(&str, Vec<&str>, &str, i32)> = vec![
        (db, vec!["list", "--state", "bogus"], "InvalidInput", 2),
        (db, vec!["list", "--no-such-flag"], "InvalidInput", 2),
        (
            db,
            vec!["history", &done, "--step", "nosuch"],
            "InvalidInput",
            2,
        ),
        (db, vec!["show", "ffffffff"], "BadRunRef", 2),
        (db, vec!["show", &ambiguous], "BadRunRef", 2),
        (db, vec!["show", "not-a-run!"], "BadRunRef", 2),
        (db, vec!["cancel", "ffffffff"], "BadRunRef", 2),
        (db, vec!["cancel", unknown], "BadRunRef", 2),
        (db, vec!["show", unknown], "BadRunRef", 2),
        (db, vec!["retry", &rolled_back], "Refused", 2),
        (db, vec!["cancel", &done], "Refused", 2),
        (&missing, vec!["list"], "NoJournal", 2),
        (&missing, vec!["show", &done], "NoJournal", 2),
        ("mysql://x", vec!["list"], "Failed", 1),
    ];
    let mut wrong = Vec::new();
    for (db, args, reason, code) in &cases {
        let mut text_args = vec!["--database", *db];
        text_args.extend_from_slice(args);
        let text = hw(&text_args);
        let mut json_args = text_args.clone();
        json_args.extend(["--output", "json"]);
        let out = hw(&json_args);
        // The same exit code in both modes.
        assert_eq!(out.code, text.code, "{args:?}: {out:?} vs {text:?}");
        if out.code != Some(*code) {
            wrong.push(format!("{args:?}: want exit {code}, got {:?}", out.code));
        }
        let docs = documents(&out.stdout);
        assert_eq!(docs.len(), 1, "{args:?}: exactly one document: {out:?}");
        let doc = &docs[0];
        assert_eq!(doc["apiVersion"], "hcp-workflow/v1", "{args:?}: {doc}");
        assert_eq!(doc["kind"], "Error", "{args:?}: {doc}");
        assert_eq!(
            doc["error"]["exit_code"],
            out.code.unwrap(),
            "{args:?}: {doc}"
        );
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{args:?}: {doc}");
        // Stderr is for people, in both modes: the same message.
        assert!(out.stderr.contains(message), "{args:?}: {doc} vs {out:?}");
        if doc["error"]["reason"] != *reason {
            wrong.push(format!("{args:?}: want reason {reason}, got {doc}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Not even a missing journal is created by a JSON error.
    assert!(!j.dir.join("missing.db").exists());
}

/// A follower's failure is an `error` event line; nothing else on stdout.
#[test]
fn json_follower_errors_are_one_error_event() {
    let (dir, file, db) = bad_file_dir("exit-json-follower");
    let out = hw(&[
        "--database",
        &db,
        "--output",
        "json",
        "start",
        "create-cluster",
        "--simulate",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    let e: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(e["apiVersion"], "hcp-workflow/v1", "{e}");
    assert_eq!(e["kind"], "Event", "{e}");
    assert_eq!(e["type"], "error", "{e}");
    assert_eq!(e["error"]["reason"], "InvalidInput", "{e}");
    assert_eq!(e["error"]["exit_code"], 2, "{e}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("nodePools[0].replicas (line 13, column 15)"),
        "{e}"
    );
    assert_eq!(names_in(&dir), ["bad.yaml"], "{out:?}");

    let j = Journal::new("exit-json-follower-st");
    let out = j.hw(&[
        "--output", "json", "selftest", "--world", &j.world, "--fail", "zz",
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    let e: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(
        (&e["kind"], &e["type"], &e["error"]["reason"]),
        (
            &Value::from("Event"),
            &Value::from("error"),
            &Value::from("InvalidInput")
        ),
        "{e}"
    );
}

/// One-shot answers are one document; followers NDJSON `Event` lines from `started` to
/// `finished`, with the exit code of the run's end.
#[test]
fn json_success_is_one_document_and_followers_ndjson_events() {
    let j = Journal::new("exit-json-ok");
    let follow = |extra: &[&str], code: i32| -> Vec<Value> {
        let mut args = vec!["--output", "json", "selftest", "--world", j.world.as_str()];
        args.extend_from_slice(extra);
        let out = j.hw(&args);
        assert_eq!(out.code, Some(code), "{out:?}");
        let events: Vec<Value> = out
            .stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not one JSON line ({e}): {l}"))
            })
            .collect();
        for e in &events {
            assert_eq!(e["apiVersion"], "hcp-workflow/v1", "{e}");
            assert_eq!(e["kind"], "Event", "{e}");
            let t = e["type"].as_str().unwrap_or_default();
            assert!(
                ["started", "progress", "finished", "error"].contains(&t),
                "{e}"
            );
        }
        assert_eq!(events.first().unwrap()["type"], "started");
        assert_eq!(events.last().unwrap()["type"], "finished");
        events
    };
    let ok = follow(&[], 0);
    assert_eq!(ok.last().unwrap()["state"], "succeeded");
    let run = ok[0]["run_id"].as_str().unwrap().to_string();
    let failed = follow(&["--fail", "c"], 1);
    assert_eq!(failed.last().unwrap()["state"], "rolled-back");

    let out = j.hw(&["--output", "json", "list"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let docs = documents(&out.stdout);
    assert_eq!(docs.len(), 1, "{out:?}");
    assert_eq!(docs[0]["apiVersion"], "hcp-workflow/v1");
    assert_eq!(docs[0]["kind"], "RunList");
    let items = docs[0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{out:?}");
    assert!(
        items
            .iter()
            .any(|r| r["run_id"] == run.as_str() && r["short_id"] == run[run.len() - 8..]),
        "{out:?}"
    );

    let out = j.hw(&["--output", "json", "show", &run]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let docs = documents(&out.stdout);
    assert_eq!(docs.len(), 1, "{out:?}");
    assert_eq!(docs[0]["apiVersion"], "hcp-workflow/v1");
    assert_eq!(docs[0]["kind"], "Run");
    assert_eq!(docs[0]["run_id"], run.as_str());
    assert_eq!(docs[0]["short_id"], &run[run.len() - 8..]);
    assert_eq!(docs[0]["state"], "succeeded");

    // `watch` of a finished run: started, finished, exit 0.
    let out = j.hw(&["--output", "json", "watch", &run]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let types: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].clone())
        .collect();
    assert_eq!(
        types.first().zip(types.last()),
        Some((&Value::from("started"), &Value::from("finished"))),
        "{out:?}"
    );
}

/// `hcp-workflow start update-cluster --simulate --config demo.yaml` in an empty directory
/// (the default journal `./hcp-workflow.db`): refused with exit 2 ("nothing was journaled
/// or created"), and indeed nothing is created — no journal, no lock or simulator file.
#[test]
fn a_refused_start_in_an_empty_directory_creates_no_journal() {
    let dir = scratch("refused-start-creates-nothing");
    let cfg = hcp_e2e_tests::cluster::cluster_file(&dir, "demo", "demo-r3fu5", "Public", "");
    let before = names_in(&dir);
    let o = Command::new(bin())
        .args(["start", "update-cluster", "--simulate", "--yes", "--config"])
        .arg(&cfg)
        .env_remove("HCP_WORKFLOW_DATABASE_URL")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nothing was journaled or created"), "{err}");
    assert_eq!(names_in(&dir), before, "{err}");
}

/// `hcp-workflow --database sqlite://… start update-cluster --simulate --config demo.yaml`
/// on a journal without the cluster: the "Create it first" command it prints carries the
/// same journal and target flags, so pasting it creates the cluster where the update
/// looked for it.
#[test]
fn update_clusters_create_it_first_hint_keeps_the_database_and_target_flags() {
    let dir = scratch("create-it-first-flags");
    let cfg = hcp_e2e_tests::cluster::cluster_file(&dir, "demo", "demo-cr34t", "Public", "");
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    let cfg_s = cfg.to_string_lossy();
    let o = hw(&[
        "--database",
        &db,
        "start",
        "update-cluster",
        "--simulate",
        "--yes",
        "--config",
        &cfg_s,
    ]);
    assert_eq!(o.code, Some(2), "{o:?}");
    let want = format!(
        "Create it first: hcp-workflow --database {db} --simulate start create-cluster --config {cfg_s}"
    );
    assert!(o.stderr.contains(&want), "want {want:?} in {o:?}");
}
