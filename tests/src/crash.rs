//! Crash harness of the cluster workflows (SIGKILL at journal boundaries): real
//! `hcp-workflow worker` processes, each handed the crash points not reached yet
//! (`HCP_CRASH_AT`) and killed at the first it reaches; a last one finishes the run.

use crate::cluster::{Sim, run};
use crate::{Proc, document};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The state of the journal's newest run and its `list` row.
pub fn state(dir: &Path, db: &str, sim: &str) -> (String, Value) {
    let (_, out, _) = run(
        dir,
        &[
            "--database",
            db,
            "--simulator",
            sim,
            "--output",
            "json",
            "list",
        ],
        &[],
    );
    // A `RunList` document (`Null` while the journal cannot be read).
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let run = v["items"]
        .as_array()
        .and_then(|a| a.first())
        .cloned()
        .unwrap_or(Value::Null);
    (run["state"].as_str().unwrap_or("?").to_string(), run)
}

/// The crash points of `workflow` on `cfg`: every boundary of every node (`phase`
/// `action`) or of every undo (`undo`), in the order the run reaches them.
pub fn targets(
    dir: &Path,
    db: &str,
    sim: &Sim,
    cfg: &Path,
    workflow: &str,
    phase: &str,
) -> Vec<String> {
    let (code, out, err) = run(
        dir,
        &[
            "--database",
            db,
            "--simulator",
            &sim.base,
            "--output",
            "json",
            "plan",
            workflow,
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan: Value = document(&out, "Plan");
    let nodes: Vec<String> = if phase == "action" {
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["node"].as_str().unwrap().to_string())
            .collect()
    } else {
        // What an unwind undoes: after the pivots, and (update-cluster) before them.
        ["undo", "undo_before_pivot"]
            .iter()
            .flat_map(|k| plan[*k].as_array().cloned().unwrap_or_default())
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    nodes
        .iter()
        .flat_map(|n| {
            ["before-effect", "after-effect", "after-write"].map(|p| format!("{p}:{phase}:{n}"))
        })
        .collect()
}

/// One worker process per crash point: each runs the run from the journal until it reaches
/// its point, where it is SIGKILLed; then the last worker runs the run to its end.
pub fn crash_through(
    dir: &Path,
    db: &str,
    sim: &Sim,
    points: &[String],
    extra_env: &[(&str, &str)],
) -> (String, usize) {
    let world = dir.join("world");
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut kills = 0;
    let spawn = |crash: Option<&str>| {
        let mut env = vec![
            ("HCP_LEASE_TTL_MS", "300"),
            ("HCP_POLL_MS", "20"),
            ("RUST_LOG", "warn"),
        ];
        if let Some(c) = crash {
            env.push(("HCP_CRASH_AT", c));
        }
        env.extend_from_slice(extra_env);
        Proc::spawn(
            dir,
            &[
                "--database",
                db,
                "--simulator",
                &sim.base,
                "worker",
                "--world",
                world.to_str().unwrap(),
            ],
            &env,
        )
    };
    // Each process gets every point not reached yet and dies at the first it reaches, so
    // no process runs ahead past a point that a parallel branch made unreachable.
    let mut next = 0;
    while next < points.len() {
        assert!(Instant::now() < deadline, "too slow: {kills} kills so far");
        let (st, _) = state(dir, db, &sim.base);
        if is_final(&st) {
            break;
        }
        let remaining = points[next..].join(",");
        let mut w = spawn(Some(&remaining));
        let hit = w.wait_line("HCP_CRASHPOINT", Duration::from_secs(30));
        w.kill();
        let Some(line) = hit else { break };
        kills += 1;
        // "HCP_CRASHPOINT <n> <point> <phase> <node> <attempt>"
        let f: Vec<&str> = line.split_whitespace().collect();
        let here = format!("{}:{}:{}", f[2], f[3], f[4]);
        next += points[next..].iter().position(|p| *p == here).unwrap() + 1;
    }
    // Finish without crashes.
    let mut w = spawn(None);
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let (st, _) = state(dir, db, &sim.base);
        if is_final(&st) {
            w.kill();
            return (st, kills);
        }
        assert!(
            Instant::now() < end,
            "the run did not end after the crashes (state {st})"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A state a run stays in without an operator.
pub fn is_final(st: &str) -> bool {
    matches!(
        st,
        "succeeded" | "rolled-back" | "failed" | "needs-operator" | "cancelled"
    )
}

/// Resources the request log shows created (`201`) more than once.
pub fn created_twice(reqs: &[Value]) -> Vec<String> {
    let mut created: BTreeMap<String, usize> = BTreeMap::new();
    for r in reqs {
        // Resources (ARM and Kubernetes); blob uploads are overwrites by design.
        let path = r["path"].as_str().unwrap_or_default();
        let resource = path.starts_with("/subscriptions/") || path.starts_with("/api");
        if resource && r["method"] == "PUT" && r["status"] == 201 {
            let p = r["path"]
                .as_str()
                .unwrap_or_default()
                .split('?')
                .next()
                .unwrap_or_default()
                .to_lowercase();
            *created.entry(p).or_default() += 1;
        }
    }
    created
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(p, _)| p)
        .collect()
}
