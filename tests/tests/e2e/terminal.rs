//! On a real pseudo-terminal (tmux): the outcome of a followed run is the last
//! thing on the screen. The progress bars used to be redrawn after the outcome block
//! (`ESC[8A` and 8 stale bars over "✗ Creation failed …", the run line and the `show` hint);
//! here a failing create runs in tmux at several widths and the final screen is read back
//! with `capture-pane`.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file};
use hcp_e2e_tests::terminal::{Tmux, quote};
use serde_json::json;
use std::time::{Duration, Instant};

const FAST: f64 = 0.002;

/// A progress bar as drawn (`  network [=====>     ] 3/5`): a 30-cell bar of `=><- `.
fn is_bar(line: &str) -> bool {
    line.char_indices().any(|(i, c)| {
        c == '['
            && line[i + 1..].chars().count() > 31
            && line[i + 1..].chars().take(30).all(|c| "=><- ".contains(c))
            && line[i + 1..].chars().nth(30) == Some(']')
    })
}

#[test]
fn the_outcome_of_a_failed_run_is_the_last_thing_on_a_real_terminal() {
    let Some(tmux) = Tmux::new("outcome") else {
        assert!(
            std::env::var_os("HCP_REQUIRE_TERMINAL").is_none(),
            "tmux is required here"
        );
        eprintln!("skipped: no tmux to give the binary a terminal");
        return;
    };
    let env = Env::new("term-outcome", FAST);
    // Every create fails for good at the public IP (a quota error), then unwinds.
    env.sim.fault(
        json!({"method": "PUT", "resource_type": "Microsoft.Network/publicIPAddresses",
        "status": 409, "error_code": "PublicIPCountLimitReached",
        "message": "Cannot create more than 10 public IP addresses"}),
    );
    let bin = hcp_e2e_tests::bin();
    for width in [120u32, 150, 200, 250] {
        let name = format!("w{width}");
        let cfg = cluster_file(&env.dir, &name, &format!("{name}-t3rm1"), "Public", "");
        let session = format!("s{width}");
        let line = format!(
            "cd {} && {} --database {} --simulator {} start create-cluster --config {}; echo EXIT=$?; sleep 600",
            quote(env.dir.to_str().unwrap()),
            quote(bin.to_str().unwrap()),
            quote(&env.db),
            quote(&env.sim.base),
            quote(cfg.to_str().unwrap()),
        );
        tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            &width.to_string(),
            "-y",
            "60",
            "sh",
            "-c",
            &line,
        ]);
        let end = Instant::now() + Duration::from_secs(180);
        let screen = loop {
            let s = tmux.screen(&session);
            if s.iter().any(|l| l.starts_with("EXIT=")) {
                // Anything drawn late would land now.
                std::thread::sleep(Duration::from_millis(800));
                break tmux.screen(&session);
            }
            assert!(
                Instant::now() < end,
                "{width} columns: no end after 180 s:\n{}",
                s.join("\n")
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        let shown = screen.join("\n");
        let exit = screen.iter().position(|l| l.starts_with("EXIT=")).unwrap();
        assert_eq!(screen[exit], "EXIT=1", "{width} columns:\n{shown}");
        let outcome = screen
            .iter()
            .position(|l| l.contains("Creation failed"))
            .unwrap_or_else(|| panic!("{width} columns: no outcome on the screen:\n{shown}"));
        let block = &screen[outcome..exit];
        assert!(
            block.iter().any(|l| l.starts_with("run ")),
            "{width} columns: the run line is gone:\n{shown}"
        );
        assert!(
            block.last().is_some_and(|l| {
                l.starts_with("details: hcp-workflow ") && l.contains(" show ")
            }),
            "{width} columns: the show hint is not the last line before the exit:\n{shown}"
        );
        // No bar anywhere below the outcome, and none left on the screen at all.
        assert!(
            !screen.iter().any(|l| is_bar(l)),
            "{width} columns: a progress bar is left on the screen:\n{shown}"
        );
        tmux.cmd(&["kill-session", "-t", &session]);
    }
}

/// Run `line` (a shell command line) in a new tmux session `session`, 150 columns wide, and
/// return its screen once it printed `EXIT=<code>`, as plain text and with colours.
fn run_in_tmux(tmux: &Tmux, session: &str, line: &str) -> (Vec<String>, Vec<String>) {
    let line = format!("{line}; echo EXIT=$?; sleep 600");
    tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "150",
        "-y",
        "60",
        "sh",
        "-c",
        &line,
    ]);
    let end = Instant::now() + Duration::from_secs(180);
    loop {
        let s = tmux.screen(session);
        if s.iter().any(|l| l.starts_with("EXIT=")) {
            std::thread::sleep(Duration::from_millis(800));
            return (tmux.screen(session), tmux.screen_ansi(session));
        }
        assert!(
            Instant::now() < end,
            "{session}: no end after 180 s:\n{}",
            s.join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The line of `screen` (with colours) that holds `what`.
fn line_with<'a>(screen: &'a [String], what: &str) -> &'a str {
    screen
        .iter()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no {what:?} on the screen:\n{}", screen.join("\n")))
}

/// On a real terminal, `start`, `watch` and `drive` colour the outcome's ✗ red and ✓ green
/// (none with `NO_COLOR=1`), and Ctrl-C on `start create-cluster` leaves no stale progress
/// bar on the screen.
#[test]
fn start_watch_and_drive_colour_their_marks_and_ctrl_c_leaves_no_stale_bar() {
    let Some(tmux) = Tmux::new("marks") else {
        assert!(
            std::env::var_os("HCP_REQUIRE_TERMINAL").is_none(),
            "tmux is required here"
        );
        eprintln!("skipped: no tmux to give the binary a terminal");
        return;
    };
    let env = Env::new("term-marks", FAST);
    let bin = hcp_e2e_tests::bin();
    let hw_env = |vars: &str, rest: &str| {
        format!(
            "cd {} && {vars} {} --database {} --simulator {} {rest}",
            quote(env.dir.to_str().unwrap()),
            quote(bin.to_str().unwrap()),
            quote(&env.db),
            quote(&env.sim.base),
        )
    };
    let hw = |rest: &str| hw_env("", rest);
    const RED: &str = "\x1b[31m✗";
    const GREEN: &str = "\x1b[32m✓";

    // A create that fails for good and unwinds: its ✗ lines are red.
    env.sim.fault(
        json!({"method": "PUT", "resource_type": "Microsoft.Network/publicIPAddresses",
        "status": 409, "error_code": "PublicIPCountLimitReached",
        "message": "Cannot create more than 10 public IP addresses"}),
    );
    let cfg = cluster_file(&env.dir, "red", "red-t3rm1", "Public", "");
    let cfg = quote(cfg.to_str().unwrap());
    let (plain, ansi) = run_in_tmux(
        &tmux,
        "red",
        &hw(&format!("start create-cluster --config {cfg}")),
    );
    assert!(plain.iter().any(|l| l == "EXIT=1"), "{}", plain.join("\n"));
    assert!(
        line_with(&ansi, "Creation failed").contains(RED),
        "{}",
        ansi.join("\n")
    );
    let run = plain
        .iter()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_whitespace().next())
        })
        .unwrap()
        .to_string();
    // `watch` of it: the same outcome, as red.
    let (plain, ansi) = run_in_tmux(&tmux, "watch-red", &hw(&format!("watch {run}")));
    assert!(plain.iter().any(|l| l == "EXIT=1"), "{}", plain.join("\n"));
    assert!(
        line_with(&ansi, "Creation failed").contains(RED),
        "{}",
        ansi.join("\n")
    );
    // `drive` of it (it has nothing left to do): the same.
    let (plain, ansi) = run_in_tmux(&tmux, "drive-red", &hw(&format!("drive {run}")));
    assert!(plain.iter().any(|l| l == "EXIT=1"), "{}", plain.join("\n"));
    assert!(
        line_with(&ansi, "Creation failed").contains(RED),
        "{}",
        ansi.join("\n")
    );
    // NO_COLOR: the mark, no colour.
    let (_, ansi) = run_in_tmux(
        &tmux,
        "nocolor",
        &hw_env("NO_COLOR=1", &format!("watch {run}")),
    );
    let l = line_with(&ansi, "Creation failed");
    assert!(l.contains("✗") && !l.contains('\x1b'), "{l:?}");

    // A create that succeeds: its ✓ is green.
    env.sim.clear_faults();
    let cfg = cluster_file(&env.dir, "green", "green-t3rm1", "Public", "");
    let cfg = quote(cfg.to_str().unwrap());
    let (plain, ansi) = run_in_tmux(
        &tmux,
        "green",
        &hw(&format!("start create-cluster --config {cfg}")),
    );
    assert!(plain.iter().any(|l| l == "EXIT=0"), "{}", plain.join("\n"));
    assert!(
        line_with(&ansi, "Creation complete").contains(GREEN),
        "{}",
        ansi.join("\n")
    );

    // Ctrl-C while the bars are drawn: exit 130, and no bar is left on the screen (twice:
    // where the echoed `^C` lands depends on the moment).
    for (i, name) in ["intr1", "intr2"].into_iter().enumerate() {
        let cfg = cluster_file(&env.dir, name, &format!("{name}-t3rm1"), "Public", "");
        let cfg = quote(cfg.to_str().unwrap());
        // The shell survives the Ctrl-C (a trap) to print the binary's exit code.
        let line = format!(
            "trap true INT; {}; echo EXIT=$?; sleep 600",
            hw(&format!("start create-cluster --config {cfg}"))
        );
        tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "150",
            "-y",
            "60",
            "sh",
            "-c",
            &line,
        ]);
        let end = Instant::now() + Duration::from_secs(120);
        while !tmux.screen(name).iter().any(|l| is_bar(l)) {
            assert!(
                Instant::now() < end,
                "no bars:\n{}",
                tmux.screen(name).join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300 * i as u64));
        tmux.cmd(&["send-keys", "-t", name, "C-c"]);
        let end = Instant::now() + Duration::from_secs(60);
        let screen = loop {
            let s = tmux.screen(name);
            if s.iter().any(|l| l.starts_with("EXIT=")) {
                std::thread::sleep(Duration::from_millis(800));
                break tmux.screen(name);
            }
            assert!(
                Instant::now() < end,
                "no end after Ctrl-C:\n{}",
                s.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let shown = screen.join("\n");
        assert!(screen.iter().any(|l| l == "EXIT=130"), "{shown}");
        assert!(
            !screen.iter().any(|l| is_bar(l)),
            "a progress bar is left on the screen after Ctrl-C:\n{shown}"
        );
        assert!(
            screen
                .iter()
                .any(|l| l.starts_with("stopped following; run ")),
            "{shown}"
        );
    }
}
