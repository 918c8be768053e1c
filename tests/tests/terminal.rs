//! Issue 21 §2, on a real pseudo-terminal (tmux): the outcome of a followed run is the last
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
