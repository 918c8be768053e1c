//! Journal files and databases:
//! - one executor per SQLite journal, whatever name it is opened by: a second worker on
//!   `alias.db -> j.db` used to take its own executor lock (`alias.db.executor.lock`),
//!   release the live worker's leases and take its runs;
//! - read-only commands never migrate: `list` on an empty Postgres database created the
//!   whole schema, and on a 0-byte SQLite file initialised it.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::run;
use hcp_e2e_tests::{Proc, postgres_url, scratch};
use std::time::{Duration, Instant};

#[test]
fn a_second_worker_through_a_symlink_is_refused() {
    let dir = scratch("journal-alias");
    let world = dir.join("world");
    let real = dir.join("j.db");
    let alias = dir.join("alias.db");
    let db = |p: &std::path::Path| format!("sqlite://{}", p.display());
    let w1 = Proc::spawn(
        &dir,
        &[
            "--database",
            &db(&real),
            "worker",
            "--world",
            world.to_str().unwrap(),
        ],
        &[],
    );
    // The first worker holds the executor lock once its pid is in the lock file.
    let lock = dir.join("j.db.executor.lock");
    let pid = w1.child.id().to_string();
    let end = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.contains(&pid)) {
        assert!(
            Instant::now() < end,
            "worker 1 never took the lock: {}",
            w1.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::os::unix::fs::symlink(&real, &alias).unwrap();
    let w2 = Proc::spawn(
        &dir,
        &[
            "--database",
            &db(&alias),
            "worker",
            "--world",
            world.to_str().unwrap(),
        ],
        &[],
    );
    let (code, _, err) = w2.finish(Duration::from_secs(30));
    assert!(
        matches!(code, Some(c) if c != 0),
        "the second worker must stop (exit {code:?}): {err}"
    );
    assert!(
        err.contains("being executed by another hcp-workflow process") && err.contains(&pid),
        "{err}"
    );
    assert!(
        !dir.join("alias.db.executor.lock").exists(),
        "a lock was taken under the alias name"
    );
}

fn read_only_commands_refuse(dir: &std::path::Path, db: &str) {
    for cmd in [
        &["list"][..],
        &["inventory"][..],
        &["show", "cluster/x"][..],
    ] {
        let mut a = vec!["--database", db];
        a.extend_from_slice(cmd);
        let (code, out, err) = run(dir, &a, &[]);
        assert_eq!(code, 2, "{cmd:?}: {out}{err}");
        assert!(
            err.contains("holds no hcp-workflow journal") && err.contains("migrate"),
            "{err}"
        );
    }
}

#[test]
fn read_only_commands_never_migrate_a_0_byte_sqlite_file() {
    let dir = scratch("journal-0-byte");
    let file = dir.join("empty.db");
    std::fs::write(&file, b"").unwrap();
    let db = format!("sqlite://{}", file.display());
    read_only_commands_refuse(&dir, &db);
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        0,
        "the file was written"
    );
    let (code, _, err) = run(&dir, &["--database", &db, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&dir, &["--database", &db, "list"], &[]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn read_only_commands_never_migrate_an_empty_postgres_database() {
    let Some(base) = postgres_url() else { return };
    let db = hcp_e2e_tests::fresh_postgres_unmigrated_blocking(&base);
    let dir = scratch("journal-pg-unmigrated");
    read_only_commands_refuse(&dir, &db);
    // Still nothing: a second look refuses again (the first created no schema).
    read_only_commands_refuse(&dir, &db);
    let (code, _, err) = run(&dir, &["--database", &db, "migrate"], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(&dir, &["--database", &db, "list"], &[]);
    assert_eq!(code, 0, "{err}");
}

/// A journal in a directory this user may not write (here: a read-only
/// directory, for the `nobody` user) still answers `list` and `show`; a command that writes
/// is refused (exit 2) saying why, and nothing in the directory changes. Both with the WAL
/// index left by the last writer and without it (a clean shutdown removes it).
#[test]
fn a_read_only_journal_directory_still_answers_reads() {
    let setpriv = std::path::Path::new("/usr/bin/setpriv");
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let sqlite3 = std::process::Command::new("sqlite3")
        .arg("-version")
        .output()
        .is_ok();
    if !root || !setpriv.exists() || !sqlite3 {
        assert!(
            std::env::var_os("HCP_REQUIRE_POSTGRES").is_none(),
            "CI runs this as root with setpriv and sqlite3"
        );
        eprintln!("skipped: needs root, /usr/bin/setpriv and sqlite3 to act as another user");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    for keep_wal_index in [true, false] {
        // Under /tmp: every ancestor is traversable by `nobody`.
        let dir = std::env::temp_dir().join(format!(
            "hcp-ro-journal-{}-{keep_wal_index}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = format!("sqlite://{}", dir.join("j.db").display());
        let world = dir.join("world");
        let (code, out, err) = run(
            &dir,
            &[
                "--database",
                &db,
                "selftest",
                "--world",
                world.to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(code, 0, "{out}{err}");
        if !keep_wal_index {
            let st = std::process::Command::new("sqlite3")
                .arg(dir.join("j.db"))
                .arg("PRAGMA wal_checkpoint(TRUNCATE);")
                .output()
                .unwrap();
            assert!(st.status.success());
            let _ = std::fs::remove_file(dir.join("j.db-wal"));
            let _ = std::fs::remove_file(dir.join("j.db-shm"));
        }
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_file() {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let listing = || {
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let before = listing();
        let as_nobody = |args: &[&str]| {
            let o = std::process::Command::new(setpriv)
                .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
                .arg(hcp_e2e_tests::bin())
                .args(["--database", &db])
                .args(args)
                .current_dir(std::env::temp_dir())
                .output()
                .unwrap();
            (
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        let (code, out, err) = as_nobody(&["list"]);
        assert_eq!(code, 0, "wal index kept: {keep_wal_index}\n{out}{err}");
        assert!(
            out.contains("selftest") && out.contains("succeeded"),
            "{out}"
        );
        let (code, out, err) = as_nobody(&["show", "cluster/selftest"]);
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("state      succeeded"), "{out}");
        // A world `nobody` may write: only the journal is in the way.
        let w2 = std::env::temp_dir().join(format!("hcp-ro-world-{}", std::process::id()));
        let (code, out, err) = as_nobody(&["selftest", "--world", w2.to_str().unwrap()]);
        let _ = std::fs::remove_dir_all(&w2);
        assert_eq!(code, 2, "{out}{err}");
        assert!(
            err.contains("cannot be written by this process"),
            "wal index kept: {keep_wal_index}: {err}"
        );
        assert_eq!(listing(), before, "nothing was created in the directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A SQLite journal on a full disk made the worker exit, and nothing resumed
/// until someone restarted it. Now the worker waits, saying why, and carries on by itself
/// once there is room: the runs journaled before the disk filled up succeed.
#[test]
fn a_worker_waits_out_a_full_disk_and_carries_on() {
    let dir = scratch("journal-disk-full");
    let mnt = dir.join("small");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1M", "tmpfs"])
        .arg(&mnt)
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        assert!(
            std::env::var_os("HCP_REQUIRE_POSTGRES").is_none(),
            "CI runs this as root, where a tmpfs can be mounted"
        );
        eprintln!("skipped: cannot mount a small tmpfs (needs root) to fill a disk");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).output();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let db = format!("sqlite://{}", mnt.join("j.db").display());
    let world = dir.join("world");
    let world = world.to_str().unwrap();
    let mut runs = Vec::new();
    for _ in 0..3 {
        let (code, out, err) = run(
            &dir,
            &[
                "--database",
                &db,
                "--output",
                "json",
                "selftest",
                "--world",
                world,
                "--detach",
            ],
            &[],
        );
        assert_eq!(code, 0, "{out}{err}");
        runs.push(
            hcp_e2e_tests::events(&out)[0]["run_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    // Fill the disk.
    let filler = mnt.join("filler");
    let _ = std::process::Command::new("dd")
        .args(["if=/dev/zero", "bs=4k"])
        .arg(format!("of={}", filler.display()))
        .output();
    let mut w = Proc::spawn(
        &dir,
        &["--database", &db, "worker", "--world", world],
        &[("HCP_POLL_MS", "50")],
    );
    std::thread::sleep(Duration::from_secs(4));
    let log = w.stderr();
    assert!(
        log.contains("full disk") || log.contains("disk is full"),
        "the worker says why it waits: {log}"
    );
    // Waiting is not a hot loop of warnings.
    let warnings = log.matches("acquire failed").count();
    assert!(warnings < 40, "{warnings} acquire warnings in 4 s: {log}");
    // Room again: the worker carries on by itself (it was never restarted).
    std::fs::remove_file(&filler).unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out, _) = run(&dir, &["--database", &db, "--output", "json", "list"], &[]);
        let done = hcp_e2e_tests::items(&out, "RunList")
            .iter()
            .filter(|r| r["state"] == "succeeded")
            .count();
        if done == runs.len() {
            break;
        }
        assert!(
            Instant::now() < end,
            "the runs did not finish after the disk had room again: {out}\n{}",
            w.stderr()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    w.kill();
}

/// Two `--simulate` processes on one journal at once — `hcp-workflow worker --simulate`,
/// then `hcp-workflow start create-cluster --simulate --detach` beside it: one simulated
/// cloud file, `<db>.sim.json`, is written by one process only. The second says so once,
/// with what to do (one `simulator serve` for every process), and never logs "cannot write
/// state file".
#[test]
fn a_second_simulate_process_says_once_that_it_does_not_save_the_simulated_cloud() {
    let dir = scratch("two-simulate");
    let cfg = hcp_e2e_tests::cluster::cluster_file(&dir, "two", "two-s1m2x", "Public", "");
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let state = dir.join("j.db.sim.json");
    let w = Proc::spawn(&dir, &["--database", &db, "--simulate", "worker"], &[]);
    let until = Instant::now() + Duration::from_secs(30);
    while !state.exists() {
        assert!(
            Instant::now() < until,
            "the worker's simulator did not start: {}",
            w.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            &db,
            "--simulate",
            "start",
            "create-cluster",
            "--detach",
            "--skip-preflight",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("cannot write state file"), "{err}");
    let said = format!(
        "the simulated cloud in {} belongs to another process (pid {})",
        state.display(),
        w.child.id()
    );
    assert_eq!(err.matches(&said).count(), 1, "want {said:?} once in {err}");
    assert!(err.contains("simulator serve --state"), "{err}");
    assert!(
        !w.stderr().contains("cannot write state file"),
        "{}",
        w.stderr()
    );
}
