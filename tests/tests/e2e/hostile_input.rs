//! Input files that are not what they should be, through the real binary:
//! a device or a FIFO as the cluster file, the pull secret or the SSH key (the process
//! once grew to 2 GB on `/dev/zero`, and hung for ever on a FIFO), a `.env` given as the
//! cluster file (its secret line was printed), a UTF-8 byte-order mark (a misleading
//! error), 20 000 node pools (accepted). Each is refused at once with exit 2, naming the
//! field or file, and nothing is journaled.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{cluster_file, run};
use hcp_e2e_tests::scratch;
use std::path::Path;
use std::time::{Duration, Instant};

fn start(dir: &Path, cfg: &Path) -> (i32, String) {
    let db = format!("sqlite://{}", dir.join("j.db").display());
    let t0 = Instant::now();
    let (code, out, err) = run(
        dir,
        &[
            "--database",
            &db,
            "--simulate",
            "start",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
    assert!(
        !dir.join("j.db").exists(),
        "a journal was created\n{out}\n{err}"
    );
    (code, err)
}

#[test]
fn special_files_secrets_boms_and_huge_lists_are_refused_before_anything_is_journaled() {
    let dir = scratch("hostile-input");
    let fifo = dir.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // The cluster file itself.
    for (cfg, says) in [
        (
            Path::new("/dev/zero").to_path_buf(),
            "not a regular file (a character device)",
        ),
        (fifo.clone(), "not a regular file (a FIFO)"),
    ] {
        let (code, err) = start(&dir, &cfg);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err}");
    }
    // Files the cluster file names.
    let good = cluster_file(&dir, "hin", "hin-b4d1n", "Public", "");
    let text = std::fs::read_to_string(&good).unwrap();
    for (key, path) in [
        ("pullSecret", "/dev/urandom"),
        ("sshKey", fifo.to_str().unwrap()),
    ] {
        let bad = dir.join(format!("bad-{key}.yaml"));
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{key}:")))
            .unwrap();
        std::fs::write(&bad, text.replace(line, &format!("{key}: {path}"))).unwrap();
        let (code, err) = start(&dir, &bad);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(key) && err.contains("not a regular file"),
            "{err}"
        );
    }
    // A `.env` given as the cluster file: named, never printed.
    let env_file = dir.join("azure.env");
    std::fs::write(&env_file, "AZURE_CLIENT_SECRET=v3ry-s3cret-value-42\n").unwrap();
    let (code, err) = start(&dir, &env_file);
    assert_eq!(code, 2, "{err}");
    assert!(
        !err.contains("v3ry-s3cret"),
        "the secret was printed: {err}"
    );
    assert!(err.contains("not shown"), "{err}");
    // A byte-order mark is not an error: the file is read as the YAML after it.
    let bom = dir.join("bom.yaml");
    std::fs::write(
        &bom,
        [
            b"\xEF\xBB\xBF".as_slice(),
            text.replace("nodePools:", "nodePoolz:").as_bytes(),
        ]
        .concat(),
    )
    .unwrap();
    let (code, err) = start(&dir, &bom);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("did you mean `nodePools`"),
        "the BOM hid the real error: {err}"
    );
    // 20 000 node pools.
    let many = text.clone();
    let pools: String = (0..20_000)
        .map(|i| format!("  - name: p{i}\n    replicas: 1\n"))
        .collect();
    let many = many.replacen("nodePools:\n", &format!("nodePools:\n{pools}"), 1);
    let huge = dir.join("many.yaml");
    std::fs::write(&huge, many).unwrap();
    let (code, err) = start(&dir, &huge);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nodePools") && err.contains("at most 100"),
        "{err}"
    );
}

/// A detached run in the in-memory journal would die with the process that started it: it
/// used to exit 0 for a run that no longer existed.
#[test]
fn a_detached_start_in_memory_is_refused() {
    let dir = scratch("detach-memory");
    let cfg = cluster_file(&dir, "mem", "mem-d3t4c", "Public", "");
    let (code, out, err) = run(
        &dir,
        &[
            "--database",
            "memory:",
            "--simulate",
            "start",
            "create-cluster",
            "--config",
            cfg.to_str().unwrap(),
            "--detach",
        ],
        &[],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--detach") && err.contains("memory:"), "{err}");
}
