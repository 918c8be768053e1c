//! One follower for `start`, `drive` and `watch`, without a terminal: a follower that comes
//! after the steps ran replays each with the time the journal recorded for it (not with
//! the time it reads them), and all three print the same outcome block.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use hcp_e2e_tests::run_id;
use std::collections::BTreeSet;

const FAST: f64 = 0.002;

/// The step lines of a follower's output (`  +3s  network  create-cluster.…  succeeded in 1s`).
fn step_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.trim_start().starts_with('+') && l.contains("create-cluster."))
        .collect()
}

/// Each step's `succeeded` line.
fn succeeded(out: &str) -> BTreeSet<&str> {
    step_lines(out)
        .into_iter()
        .filter(|l| l.contains(" succeeded"))
        .collect()
}

/// From the outcome line (`✓ …`) to the end.
fn outcome(out: &str) -> Vec<&str> {
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("✓ ") || l.starts_with("✗ "))
        .unwrap_or_else(|| panic!("no outcome line in:\n{out}"));
    lines[at..].to_vec()
}

/// `hcp-workflow start create-cluster`, then, seconds later, `hcp-workflow watch RUN` and
/// `hcp-workflow drive RUN` of the finished run: every step's line is the one `start`
/// printed (its recorded time and duration), the outcome block is `start`'s, nothing is
/// coloured (no terminal), and `--compact` prints one line per step.
#[test]
fn watch_and_drive_of_a_finished_start_replay_recorded_times_and_the_same_outcome() {
    let env = Env::new("follower", FAST);
    let cfg = cluster_file(&env.dir, "follow", "follow-f0ll0w", "Public", "");
    let (code, started, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{started}{err}");
    let run = run_id(&started);
    let steps = succeeded(&started);
    assert!(steps.len() > 10, "{started}");
    // Long enough that "now" is a different second from any step's end.
    std::thread::sleep(std::time::Duration::from_millis(2500));

    let (code, watched, err) = env.cli(&["watch", &run], &[]);
    assert_eq!(code, 0, "{watched}{err}");
    let (code, driven, err) = env.cli(&["drive", &run], &[]);
    assert_eq!(code, 0, "{driven}{err}");
    for (cmd, out) in [("watch", &watched), ("drive", &driven)] {
        assert_eq!(
            succeeded(out),
            steps,
            "{cmd} replays the steps as start showed them:\n--- start\n{started}\n--- {cmd}\n{out}"
        );
        assert_eq!(
            outcome(out),
            outcome(&started),
            "{cmd} ends as start does:\n--- start\n{started}\n--- {cmd}\n{out}"
        );
        assert!(!out.contains('\x1b'), "colour without a terminal: {out:?}");
    }
    assert!(
        !started.contains('\x1b'),
        "colour without a terminal: {started:?}"
    );
    assert!(
        steps.iter().all(|l| l.contains(" succeeded in ")),
        "each step says how long it took:\n{started}"
    );
    assert!(
        outcome(&started)[0].starts_with("✓ Creation complete after "),
        "{started}"
    );

    // `--compact`: one line per step, each its end.
    let (code, compact, err) = env.cli(&["watch", "--compact", &run], &[]);
    assert_eq!(code, 0, "{compact}{err}");
    let lines = step_lines(&compact);
    assert_eq!(
        lines.iter().copied().collect::<BTreeSet<_>>(),
        steps,
        "{compact}"
    );
    assert_eq!(lines.len(), steps.len(), "{compact}");
    assert_eq!(outcome(&compact), outcome(&started), "{compact}");
}
