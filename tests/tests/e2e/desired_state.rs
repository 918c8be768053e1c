//! First part, end to end with real processes against `simulator serve`: a
//! create journals the cluster's applied configuration (secrets as hashes), and a create
//! over a cluster that exists and differs from the file is refused, naming every
//! difference, instead of adopting everything and saying "complete".
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, cluster_file, edit_file, request_lines};
use hcp_e2e_tests::{document, run_id};

const FAST: f64 = 0.002;

#[test]
fn a_create_over_a_cluster_that_differs_from_the_file_is_refused_with_every_difference() {
    let env = Env::new("drift", FAST);
    let cfg = cluster_file(&env.dir, "drift", "drift-d1ff0", "Public", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let first = run_id(&out);
    // The applied configuration is journaled with the run; the pull secret only as a hash.
    let (_, show, _) = env.cli(&["--output", "json", "show", &first], &[]);
    let _ = document(&show, "Run");
    let journal = std::fs::read(env.dir.join("journal.db")).unwrap();
    let secret = b"ZmFrZTpmYWtl";
    assert!(
        !journal.windows(secret.len()).any(|w| w == secret),
        "the pull secret's content is not in the journal"
    );
    // The same file again: adopts, changes nothing, succeeds.
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    // A changed file: refused, every difference named, nothing journaled or sent.
    edit_file(&cfg, "replicas: 2", "replicas: 3");
    let pull = env.dir.join("drift.pull-secret.json");
    std::fs::write(
        &pull,
        r#"{"auths":{"quay.io":{"auth":"b3RoZXI6c2VjcmV0"}}}"#,
    )
    .unwrap();
    let before = env.run_count();
    env.sim.clear_requests();
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("cluster drift exists"), "{err}");
    assert!(err.contains("nodePools[workers].replicas: 2 → 3"), "{err}");
    assert!(
        err.contains("pullSecret: the file's contents changed"),
        "{err}"
    );
    assert!(
        !err.contains("b3RoZXI6c2VjcmV0"),
        "no secret in the message: {err}"
    );
    assert!(err.contains("nothing was journaled or created"), "{err}");
    assert_eq!(env.run_count(), before, "nothing journaled");
    let writes: Vec<_> = request_lines(&env.sim.requests())
        .into_iter()
        .filter(|(m, _, _)| m != "GET")
        .collect();
    assert_eq!(writes, vec![], "nothing was changed in the simulator");
    // `plan` shows the same differences, in text and JSON.
    let c = cfg.to_string_lossy().to_string();
    let (code, out, err) = env.cli(&["plan", "create-cluster", "--config", &c], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("differs from this file in 2 places")
            && out.contains("nodePools[workers].replicas: 2 → 3"),
        "{out}"
    );
    let (code, out, err) = env.cli(
        &["--output", "json", "plan", "create-cluster", "--config", &c],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let plan = document(&out, "Plan");
    let paths: Vec<&str> = plan["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec!["nodePools[workers].replicas", "pullSecret"]);
    // Once the cluster is deleted, the file creates it as it says.
    let (code, out, err) = env.start("delete-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}{err}");
}
