//! `hcp-workflow completion bash` completes values, not only subcommands and flags:
//! `--state` values, run ids and `cluster/<name>` from the journal the command line names.
//! Checked as bash does it: the printed script is sourced and its completion function
//! called with `COMP_WORDS`/`COMP_CWORD`, which calls the binary back through the
//! `COMPLETE` environment protocol.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::{bin, hermetic, scratch};
use std::path::Path;
use std::process::Command;

/// What bash would offer after `words` (the last one being completed), with `dir` as the
/// working directory.
fn complete(dir: &Path, words: &[&str]) -> Vec<String> {
    let script = r#"
source <("$0" completion bash)
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMP_TYPE=9
_clap_complete_hcp_workflow hcp-workflow "${COMP_WORDS[$COMP_CWORD]}" ""
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let mut cmd = Command::new("bash");
    hermetic(&mut cmd);
    let out = cmd
        .arg("-c")
        .arg(script)
        .arg(bin())
        .args(words)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `hcp-workflow completion bash`, sourced: Tab after `list --state` offers every state,
/// after `show`/`watch`/`kubeconfig` the journal's run ids and `cluster/<name>` (the journal
/// `--database` names, or the default one in the current directory), after `--cluster`
/// the cluster names; a journal that does not exist offers no values and is not created.
/// A journal `j.db` in `dir` holding one finished self-test run: its URL and the run's id.
fn journal_with_a_run(dir: &Path) -> (String, String) {
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let mut cmd = Command::new(bin());
    hermetic(&mut cmd);
    let out = cmd
        .args(["--database", &db, "selftest", "--world"])
        .arg(dir.join("world"))
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let run = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_whitespace().next())
        })
        .unwrap()
        .to_string();
    (db, run)
}

#[test]
fn completion_bash_completes_states_run_ids_and_cluster_targets_from_the_journal() {
    let dir = scratch("completion");
    let (db, run) = journal_with_a_run(&dir);

    let states = complete(&dir, &["hcp-workflow", "list", "--state", ""]);
    for s in ["needs-operator", "succeeded", "rolled-back", "running"] {
        assert!(states.iter().any(|c| c == s), "{s} not in {states:?}");
    }
    let states = complete(&dir, &["hcp-workflow", "list", "--state", "ne"]);
    assert_eq!(states, ["needs-operator"]);

    for sub in ["show", "watch", "drive", "cancel", "kubeconfig", "verify"] {
        let got = complete(&dir, &["hcp-workflow", "--database", &db, sub, ""]);
        assert!(got.contains(&run), "{sub}: {run} not in {got:?}");
        assert!(
            got.iter().any(|c| c == "cluster/selftest"),
            "{sub}: cluster/selftest not in {got:?}"
        );
    }
    let got = complete(&dir, &["hcp-workflow", "--database", &db, "why", &run[..8]]);
    assert_eq!(got, vec![run.clone()]);
    let got = complete(
        &dir,
        &["hcp-workflow", "--database", &db, "verify", "cluster/s"],
    );
    assert_eq!(got, ["cluster/selftest"]);
    let got = complete(
        &dir,
        &["hcp-workflow", "--database", &db, "list", "--cluster", ""],
    );
    assert_eq!(got, ["selftest"]);

    // The default journal is the one in the current directory.
    std::fs::copy(dir.join("j.db"), dir.join("hcp-workflow.db")).unwrap();
    let got = complete(&dir, &["hcp-workflow", "history", ""]);
    assert!(got.contains(&run), "{got:?}");

    // No journal there: nothing offered, nothing created.
    let empty = scratch("completion-none");
    let got = complete(&empty, &["hcp-workflow", "show", ""]);
    assert!(
        got.iter().all(|c| c.starts_with("--")),
        "only flags: {got:?}"
    );
    assert!(!empty.join("hcp-workflow.db").exists());
}

/// What zsh would offer after `words`: the printed script sourced in a real zsh, its
/// completer called with `words`/`CURRENT` as zsh's completion system sets them, and
/// `_describe` standing in for the menu (it prints the values it was given).
fn complete_zsh(dir: &Path, words: &[&str]) -> Option<Vec<String>> {
    let script = r#"
compdef() { :; }
_describe() { local -a offered; offered=("${(@P)3}"); printf '%s\n' "${offered[@]%%:*}"; }
source <("$0" completion zsh)
words=("$@")
CURRENT=$#
_clap_dynamic_completer_hcp_workflow
"#;
    let mut cmd = Command::new("zsh");
    hermetic(&mut cmd);
    let out = match cmd
        .args(["-f", "-c", script])
        .arg(bin())
        .args(words)
        .current_dir(dir)
        .output()
    {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("zsh: {e}"),
    };
    assert!(out.status.success(), "{out:?}");
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// `hcp-workflow completion zsh`, in zsh: the same values as bash.
#[test]
fn completion_zsh_completes_states_run_ids_and_cluster_targets_from_the_journal() {
    let dir = scratch("completion-zsh");
    let Some(states) = complete_zsh(&dir, &["hcp-workflow", "list", "--state", ""]) else {
        assert!(
            std::env::var("HCP_REQUIRE_TERMINAL").as_deref() != Ok("1"),
            "HCP_REQUIRE_TERMINAL=1 but zsh is not installed"
        );
        eprintln!("skipped: no zsh");
        return;
    };
    for s in ["needs-operator", "succeeded", "rolled-back", "running"] {
        assert!(states.iter().any(|c| c == s), "{s} not in {states:?}");
    }
    let (db, run) = journal_with_a_run(&dir);
    let got = complete_zsh(&dir, &["hcp-workflow", "--database", &db, "show", ""]).unwrap();
    assert!(got.contains(&run), "{run} not in {got:?}");
    assert!(got.iter().any(|c| c == "cluster/selftest"), "{got:?}");
    let got = complete_zsh(
        &dir,
        &["hcp-workflow", "--database", &db, "verify", "cluster/s"],
    )
    .unwrap();
    assert_eq!(got, ["cluster/selftest"]);
}
