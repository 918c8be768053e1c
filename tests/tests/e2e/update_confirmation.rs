//! An update or repair that deletes, replaces or cannot undo something asks first, as a
//! delete does, end to end with real processes against `simulator serve`:
//! - with no terminal (`start update-cluster --config … </dev/null`) it is refused with
//!   exit 2 unless `--yes`, listing what would go, the ⚑ pivots and terraform's summary
//!   line, and nothing is journaled or changed;
//! - a pool removed and a pool added with the same settings is named as a likely rename;
//! - on a real terminal (tmux) it asks, and only `yes` goes ahead.
//!
//! A user renamed pool `workers` to `worker` and ran `start update-cluster --simulate
//! --config … </dev/null`: it printed `✓ Update complete … 1 created, 1 deleted`, and every
//! machine of the pool was gone, though the plan marks that step `⚑ pivot`.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, edit_file};
use hcp_e2e_tests::terminal::{Tmux, quote};
use std::path::Path;

const FAST: f64 = 0.002;
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";

/// `start WF --config CFG` with stdin not a terminal and no `--yes` (`Env::start` adds it).
fn start_unasked(env: &Env, wf: &str, cfg: &Path) -> (i32, String, String) {
    env.cli(&["start", wf, "--config", cfg.to_str().unwrap()], &[])
}

fn exists(env: &Env, path: &str) -> bool {
    env.sim.get(path)["metadata"]["name"].is_string()
}

#[test]
fn removing_or_renaming_a_pool_without_a_terminal_needs_yes() {
    let env = Env::new("confirm-pool", FAST);
    let name = "cfp";
    let cfg = cluster_file(&env.dir, name, "cfp-c0nf1", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let before = env.run_count();

    // `workers` renamed to `worker`: the user's command, refused.
    edit_file(&cfg, "  - name: workers\n", "  - name: worker\n");
    let (code, out, err) = start_unasked(&env, "update-cluster", &cfg);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!("delete NodePool clusters/{name}-workers")),
        "{err}"
    );
    assert!(err.contains("is this a rename?"), "{err}");
    assert!(err.contains("⚑ "), "the pivot is named: {err}");
    assert!(
        err.contains("1 to add, 0 to change, 1 to delete (⚑ 1 cannot be undone)"),
        "{err}"
    );
    assert!(err.contains("--yes"), "{err}");
    assert!(err.contains("nothing was journaled"), "{err}");
    assert_eq!(env.run_count(), before, "nothing journaled");
    assert!(
        exists(&env, &format!("{NP}/{name}-workers")),
        "nothing deleted"
    );
    assert!(
        !exists(&env, &format!("{NP}/{name}-worker")),
        "nothing created"
    );

    // The plan says the same, and that start will ask.
    let c = cfg.to_string_lossy().to_string();
    let (code, plan, perr) = env.cli(&["plan", "update-cluster", "--config", &c], &[]);
    assert_eq!(code, 0, "{plan}{perr}");
    assert!(plan.contains("asks first (or needs --yes)"), "{plan}");
    assert!(
        plan.contains("1 to add, 0 to change, 1 to delete"),
        "{plan}"
    );

    // Only an added pool: nothing is deleted or beyond undo, so nothing is asked.
    edit_file(&cfg, "  - name: worker\n", "  - name: workers\n");
    edit_file(
        &cfg,
        "  - name: infra\n    replicas: 1\n",
        "  - name: infra\n    replicas: 1\n  - name: extra\n    replicas: 1\n",
    );
    let (code, out, err) = start_unasked(&env, "update-cluster", &cfg);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Update complete"), "{out}");

    // Removing it again deletes: refused without --yes, done with it.
    edit_file(&cfg, "  - name: extra\n    replicas: 1\n", "");
    let (code, out, err) = start_unasked(&env, "update-cluster", &cfg);
    assert_eq!(code, 2, "{out}{err}");
    assert!(exists(&env, &format!("{NP}/{name}-extra")));
    let (code, out, err) = env.cli(&["start", "update-cluster", "--config", &c, "--yes"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("(--yes: not asked)"), "{err}");
    assert!(!exists(&env, &format!("{NP}/{name}-extra")));
}

#[test]
fn a_topology_switch_and_a_repair_that_prunes_connections_need_yes_too() {
    let env = Env::new("confirm-topo", FAST);
    let name = "cft";
    let cfg = cluster_file(&env.dir, name, "cft-t0p0l", "PublicAndPrivate", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let before = env.run_count();

    // A repair of a private-link cluster may reject and remove connections (a pivot).
    let (code, out, err) = start_unasked(&env, "repair-cluster", &cfg);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("repair-cluster of cluster cft"), "{err}");
    assert!(err.contains("⚑ "), "{err}");
    assert_eq!(env.run_count(), before);

    edit_file(&cfg, "topology: PublicAndPrivate", "topology: Private");
    let (code, out, err) = start_unasked(&env, "update-cluster", &cfg);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("delete the public endpoint"), "{err}");
    assert!(err.contains("0 to add, 1 to change, 0 to delete"), "{err}");
    assert_eq!(env.run_count(), before, "nothing journaled");
    let hc = env.sim.get(&format!("{HC}/{name}"));
    assert_eq!(
        hc["spec"]["platform"]["azure"]["topology"],
        "PublicAndPrivate"
    );
}

#[test]
fn on_a_terminal_a_pool_removal_asks_and_only_yes_goes_ahead() {
    let Some(tmux) = Tmux::new("confirm") else {
        assert!(
            std::env::var_os("HCP_REQUIRE_TERMINAL").is_none(),
            "tmux is required here"
        );
        eprintln!("skipped: no tmux to give the binary a terminal");
        return;
    };
    let env = Env::new("confirm-tty", FAST);
    let name = "cfy";
    let cfg = cluster_file(&env.dir, name, "cfy-ttyy1", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    edit_file(&cfg, "  - name: infra\n    replicas: 1\n", "");
    let before = env.run_count();
    let line = format!(
        "cd {} && {} --database {} --simulator {} start update-cluster --config {}; echo EXIT=$?; sleep 600",
        quote(env.dir.to_str().unwrap()),
        quote(hcp_e2e_tests::bin().to_str().unwrap()),
        quote(&env.db),
        quote(&env.sim.base),
        quote(cfg.to_str().unwrap()),
    );
    for (session, answer, exit) in [("no", "y", "EXIT=2"), ("yes", "yes", "EXIT=0")] {
        tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "200",
            "-y",
            "60",
            "sh",
            "-c",
            &line,
        ]);
        let asked = tmux.wait_for(session, "Only 'yes' is accepted");
        assert!(
            asked.contains(&format!("delete NodePool clusters/{name}-infra")),
            "{asked}"
        );
        assert!(
            asked.contains("0 to add, 0 to change, 1 to delete"),
            "{asked}"
        );
        tmux.cmd(&["send-keys", "-t", session, answer, "Enter"]);
        let done = tmux.wait_for(session, "EXIT=");
        assert!(done.contains(exit), "{done}");
        if session == "no" {
            assert!(done.contains("not confirmed"), "{done}");
            assert_eq!(env.run_count(), before, "nothing journaled");
            assert!(exists(&env, &format!("{NP}/{name}-infra")));
        } else {
            assert!(done.contains("✓ Update complete"), "{done}");
            assert!(!exists(&env, &format!("{NP}/{name}-infra")));
        }
    }
}
