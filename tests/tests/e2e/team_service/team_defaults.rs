//! A team's defaults, with real processes:
//! - the config file (`HCP_WORKFLOW_CONFIG`, else `$XDG_CONFIG_HOME/hcp-workflow/config.yaml`)
//!   names the journal; the environment variable wins over it, and a flag over both; a
//!   file with a wrong key is refused (exit 2, naming the file and the keys), nothing done;
//! - a start whose journal does not hold the run the HostedCluster's label names (its
//!   runs are in another journal) warns, loudly when the journal is new and empty.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, run};
use hcp_e2e_tests::{items, run_id, scratch};
use std::path::Path;

fn runs_in(dir: &Path, db: &str) -> usize {
    let (code, out, err) = run(dir, &["--database", db, "--output", "json", "list"], &[]);
    assert_eq!(code, 0, "{err}");
    items(&out, "RunList").len()
}

#[test]
fn the_config_file_names_the_journal_below_the_environment_and_the_flags() {
    let dir = scratch("team-config");
    let world = dir.join("world");
    let world = world.to_str().unwrap();
    let team = format!("sqlite://{}", dir.join("team.db").display());
    let env_db = format!("sqlite://{}", dir.join("env.db").display());
    let flag_db = format!("sqlite://{}", dir.join("flag.db").display());
    let xdg = dir.join("xdg");
    std::fs::create_dir_all(xdg.join("hcp-workflow")).unwrap();
    std::fs::write(
        xdg.join("hcp-workflow/config.yaml"),
        format!("database: {team}\n"),
    )
    .unwrap();
    let xdg_s = xdg.to_str().unwrap();
    let selftest = ["selftest", "--detach", "--world", world];
    // The file alone: the run goes to the team's journal, not ./hcp-workflow.db.
    let (code, out, err) = run(&dir, &selftest, &[("XDG_CONFIG_HOME", xdg_s)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        !dir.join("hcp-workflow.db").exists(),
        "no journal in the current directory"
    );
    assert_eq!(runs_in(&dir, &team), 1);
    // The environment variable wins over the file.
    let (code, out, err) = run(
        &dir,
        &selftest,
        &[
            ("XDG_CONFIG_HOME", xdg_s),
            ("HCP_WORKFLOW_DATABASE_URL", &env_db),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(runs_in(&dir, &env_db), 1);
    assert_eq!(runs_in(&dir, &team), 1);
    // The flag wins over both.
    let mut a = vec!["--database", flag_db.as_str()];
    a.extend_from_slice(&selftest);
    let (code, out, err) = run(
        &dir,
        &a,
        &[
            ("XDG_CONFIG_HOME", xdg_s),
            ("HCP_WORKFLOW_DATABASE_URL", &env_db),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(runs_in(&dir, &flag_db), 1);
    assert_eq!(runs_in(&dir, &env_db), 1);
    // The file's `notify:` URLs are the worker's `--notify`.
    let (hook, got) = hcp_e2e_tests::webhook::receiver("/hooks/t", false);
    std::fs::write(
        xdg.join("hcp-workflow/config.yaml"),
        format!("database: {team}\nnotify:\n  - {hook}\n"),
    )
    .unwrap();
    let w = hcp_e2e_tests::Proc::spawn(
        &dir,
        &["worker", "--world", world],
        &[("XDG_CONFIG_HOME", xdg_s), ("HCP_POLL_MS", "50")],
    );
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while got.lock().unwrap().bodies.is_empty() {
        assert!(
            std::time::Instant::now() < end,
            "no notification: {}",
            w.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(got.lock().unwrap().bodies[0]["event"], "succeeded");
    w.signal("TERM");
    let (code, _, err) = w.finish(std::time::Duration::from_secs(20));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&team.replace("sqlite://", "")) || err.contains(&team),
        "{err}"
    );

    // `--help` does not print the file's database URL (it may carry a password).
    std::fs::write(
        xdg.join("hcp-workflow/config.yaml"),
        "database: postgres://hcp:s3cr3t@db.example/hcp\n",
    )
    .unwrap();
    let (code, out, err) = run(&dir, &["--help"], &[("XDG_CONFIG_HOME", xdg_s)]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("s3cr3t") && !err.contains("s3cr3t"), "{out}");

    // A wrong key: exit 2, naming the file and the keys; nothing created.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, format!("databse: {team}\n")).unwrap();
    let before = runs_in(&dir, &team);
    let (code, out, err) = run(
        &dir,
        &selftest,
        &[("HCP_WORKFLOW_CONFIG", bad.to_str().unwrap())],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&bad.display().to_string())
            && err.contains("databse")
            && err.contains("database (a journal URL)"),
        "{err}"
    );
    assert_eq!(runs_in(&dir, &team), before);
    assert!(!dir.join("hcp-workflow.db").exists());
    // HCP_WORKFLOW_CONFIG naming no file is a mistake too.
    let (code, _, err) = run(
        &dir,
        &selftest,
        &[("HCP_WORKFLOW_CONFIG", "/nonexistent/hcp.yaml")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("HCP_WORKFLOW_CONFIG: no file at /nonexistent/hcp.yaml"),
        "{err}"
    );
}

#[test]
fn a_start_on_a_journal_without_the_clusters_runs_warns() {
    let env = Env::new("team-other-journal", 0.002);
    let cfg = cluster_file(&env.dir, "tdj", "tdj-t1d9e", "PublicAndPrivate", "");
    // Created through journal A (the Env's).
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let created = run_id(&out);
    assert!(!err.contains("which is not in"), "{err}");
    // A second start on journal A: its runs are here, no warning.
    let (code, out, err) = env.start("delete-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("which is not in"), "{err}");
    let (code, _, err) = env.cli(&["cancel", &run_id(&out), "--reason", "test"], &[]);
    assert_eq!(code, 0, "{err}");

    // From another directory, the default journal is a new, empty one: warned.
    let elsewhere = scratch("team-elsewhere");
    let cfg_s = cfg.to_str().unwrap();
    let (code, out, err) = run(
        &elsewhere,
        &[
            "--simulator",
            &env.sim.base,
            "start",
            "delete-cluster",
            "--config",
            cfg_s,
            "--detach",
            "--yes",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(&format!(
            "warning: HostedCluster clusters/tdj on the management cluster was last handled by run {created}"
        )) && err.contains("which is not in this new, empty journal sqlite://./hcp-workflow.db")
            && err.contains("Point --database"),
        "{err}"
    );
}
