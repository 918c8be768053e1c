//! `hcp-workflow preflight` end to end: every check fails with its row when the
//! simulator is set up with that failure, the command exits 2, nothing is journaled (no
//! journal file at all) and nothing is created — the simulator's request log holds only
//! reads (GET, and the read-only POSTs: token, checkNameAvailability,
//! checkPrivateLinkServiceVisibility, SelfSubjectReview, SelfSubjectAccessReview). One run
//! where everything passes; `start` refusing on a failing check; `--skip-preflight`
//! recorded in the journal.
//!
//! Several failures share one simulator process (the scenario is switched with
//! `PUT /_sim/scenario`) to keep the suite fast.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, cluster_file};
use hcp_e2e_tests::{document, items};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const FAST: f64 = 0.002;
const MGMT_RG: &str =
    "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management";

/// `preflight --output json --config cfg extra…`: (exit code, rows, stderr).
fn preflight(env: &Env, cfg: &Path, extra: &[&str]) -> (i32, Vec<Value>, String) {
    let cfg = cfg.to_string_lossy();
    let mut a = vec!["--output", "json", "preflight", "--config", cfg.as_ref()];
    a.extend_from_slice(extra);
    let (code, out, err) = env.cli(&a, &[]);
    assert!(
        serde_json::from_str::<Value>(&out).is_ok(),
        "not one JSON document: {out}\n{err}"
    );
    let doc = document(&out, "PreflightReport");
    assert_eq!(doc["ok"], json!(code == 0), "{out}");
    (code, items(&out, "PreflightReport"), err)
}

/// The failing rows.
fn failures(rows: &[Value]) -> Vec<&Value> {
    rows.iter().filter(|r| r["status"] == "fail").collect()
}

/// The one failing row of `check` whose target contains `target`; it names a fix.
fn failed<'a>(rows: &'a [Value], check: &str, target: &str) -> &'a Value {
    let r = rows
        .iter()
        .find(|r| {
            r["status"] == "fail"
                && r["check"] == check
                && r["target"].as_str().unwrap_or_default().contains(target)
        })
        .unwrap_or_else(|| {
            panic!(
                "no failing {check} row on {target}: {}",
                serde_json::to_string_pretty(rows).unwrap()
            )
        });
    assert!(
        r["fix"].as_str().is_some_and(|f| !f.is_empty()),
        "a failing row names its fix: {r}"
    );
    r
}

fn set_scenario(env: &Env, s: Value) {
    let (status, body) = env.sim.put("/_sim/scenario", &s);
    assert_eq!(status, 204, "{body}");
}

/// Only reads reached the simulator: GET/HEAD, and the read-only POSTs.
fn assert_only_reads(env: &Env) {
    let reads = [
        "/oauth2/v2.0/token",
        "/checkNameAvailability",
        "/checkPrivateLinkServiceVisibility",
        "/selfsubjectreviews",
        "/selfsubjectaccessreviews",
    ];
    for r in env.sim.requests() {
        let m = r["method"].as_str().unwrap_or_default();
        let p = r["path"].as_str().unwrap_or_default();
        let ok =
            matches!(m, "GET" | "HEAD") || (m == "POST" && reads.iter().any(|x| p.contains(x)));
        assert!(ok, "a write reached the simulator: {m} {p}");
    }
}

/// Nothing journaled: there is not even a journal file.
fn assert_no_journal(env: &Env) {
    let db = env.dir.join("journal.db");
    assert!(!db.exists(), "{} was created", db.display());
}

/// A preflight that must fail: exit 2, no journal file, only reads reached the simulator
/// and nothing was created. Returns the rows.
fn refused(env: &Env, cfg: &Path, extra: &[&str]) -> Vec<Value> {
    let before = env.sim.ids();
    env.sim.clear_requests();
    let (code, rows, err) = preflight(env, cfg, extra);
    assert_eq!(code, 2, "{rows:#?}\n{err}");
    assert_no_journal(env);
    assert_only_reads(env);
    assert_eq!(env.sim.ids(), before, "preflight created something");
    rows
}

/// `start WORKFLOW` refused by a failing `check`: exit 2, the row named on stderr, the
/// journal holds no run and only reads reached the simulator. Returns stderr.
fn start_refused(env: &Env, workflow: &str, cfg: &Path, check: &str) -> String {
    let (code, out, err) = env.start(workflow, cfg, &[], &[]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("preflight") && err.contains(check), "{err}");
    assert!(err.contains("nothing was journaled or created"), "{err}");
    // The hint keeps the run's target flags: without `--simulator URL` a
    // copied command would check real Azure.
    assert!(
        err.contains(&format!(
            "full report: hcp-workflow --database {} --simulator {} preflight --config ",
            env.db, env.sim.base
        )),
        "{err}"
    );
    // Nothing journaled: a refused start leaves no journal behind, or an empty one.
    assert_eq!(env.run_count(), 0);
    assert_only_reads(env);
    err
}

fn edit(path: &Path, from: &str, to: &str) {
    let s = std::fs::read_to_string(path).unwrap();
    assert!(s.contains(from), "{from:?} not in {}", path.display());
    std::fs::write(path, s.replacen(from, to, 1)).unwrap();
}

/// A Private cluster file whose `workers` pool pins zone 1.
fn private_file(env: &Env, name: &str) -> PathBuf {
    let cfg = cluster_file(&env.dir, name, &format!("{name}-p7f3a"), "Private", "");
    edit(
        &cfg,
        "  - name: workers\n    replicas: 2\n",
        "  - name: workers\n    replicas: 2\n    zone: \"1\"\n",
    );
    cfg
}

/// Everything passes against a fresh simulator, in one JSON document, with exit 0; no
/// journal file, no write, nothing in the inventory that was not there before.
#[test]
fn everything_passes_and_nothing_is_written() {
    let env = Env::new("preflight-pass", FAST);
    let cfg = private_file(&env, "pfok");
    let before = env.sim.ids();
    env.sim.clear_requests();
    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(
        code,
        0,
        "{}\n{err}",
        serde_json::to_string_pretty(&rows).unwrap()
    );
    assert!(failures(&rows).is_empty());
    let checks: BTreeSet<&str> = rows.iter().filter_map(|r| r["check"].as_str()).collect();
    for c in [
        "config.release",
        "azure.token",
        "azure.provider",
        "azure.feature",
        "azure.permission",
        "azure.quota",
        "azure.vm-size",
        "azure.dns-zone",
        "azure.storage-account",
        "azure.persistent-group",
        "azure.mgmt-vnet",
        "azure.mgmt-lb-group",
        "azure.nat-subnet",
        "azure.pls-visibility",
        "k8s.reachable",
        "k8s.whoami",
        "k8s.access",
        "k8s.route-api",
        "k8s.crds",
        "k8s.operator",
        "k8s.supported-versions",
        "k8s.private-platform",
        "k8s.hosted-cluster",
    ] {
        assert!(checks.contains(c), "no {c} row: {checks:?}");
    }
    // The token row says who we are (tenant and object id from the token's claims).
    let who = rows.iter().find(|r| r["check"] == "azure.token").unwrap();
    assert!(
        who["detail"].as_str().unwrap().contains("object id"),
        "{who}"
    );
    // The permissions of the management LB group were read and all allowed.
    assert!(
        rows.iter().any(|r| r["check"] == "azure.permission"
            && r["status"] == "pass"
            && r["target"].as_str().unwrap().eq_ignore_ascii_case(MGMT_RG)),
        "{rows:#?}"
    );
    // The text table has the same checks and the exit code.
    let c = cfg.to_string_lossy();
    let (code, out, _) = env.cli(&["preflight", "--config", c.as_ref()], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("STATUS") && out.contains("k8s.supported-versions"),
        "{out}"
    );
    assert_no_journal(&env);
    assert_only_reads(&env);
    assert_eq!(env.sim.ids(), before, "preflight created something");

    // What several checks need is read once — one provider list per
    // subscription, one list of the guest subscription's groups (no permissions asked of a
    // group it does not hold), the management group's permissions once (they also say
    // that the group exists), and the NAT subnet found in the VNet's body.
    let sent = |pred: &dyn Fn(&str) -> bool| {
        env.sim
            .requests()
            .iter()
            .filter(|r| r["method"] == "GET" && pred(r["path"].as_str().unwrap_or_default()))
            .count()
    };
    env.sim.clear_requests();
    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 0, "{rows:#?}\n{err}");
    let per_ns = sent(&|p| {
        p.contains("/providers/Microsoft.")
            && p.split('?')
                .next()
                .is_some_and(|p| p.matches('/').count() == 4)
    });
    assert_eq!(per_ns, 0, "a provider read on its own");
    assert_eq!(
        sent(&|p| p
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/providers"))),
        2
    );
    assert_eq!(
        sent(&|p| p.contains("/resourcegroups?")),
        1,
        "one group list"
    );
    assert_eq!(
        sent(&|p| p.contains("/permissions?") && !p.to_ascii_lowercase().contains("hcp-management")),
        0,
        "permissions asked of groups the list does not hold"
    );
    assert_eq!(
        sent(&|p| p
            .to_ascii_lowercase()
            .contains("hcp-management/providers/microsoft.authorization/permissions?")),
        1
    );
    assert_eq!(
        sent(&|p| p.split('?').next().is_some_and(|p| p
            .to_ascii_lowercase()
            .ends_with("resourcegroups/hcp-management"))),
        0,
        "the group's existence is its permissions' answer"
    );
    assert_eq!(
        sent(&|p| p.contains("/subnets/")),
        0,
        "the NAT subnet is in the VNet's body"
    );

    // The group list failing: every check reads for itself, with the same verdicts.
    env.sim.fault(json!({"method": "GET", "path": "*/resourcegroups?*", "status": 403, "error_code": "AuthorizationFailed"}));
    let (code2, rows2, err) = preflight(&env, &cfg, &[]);
    env.sim.clear_faults();
    assert_eq!(code2, 0, "{rows2:#?}\n{err}");
    let verdicts = |rows: &[Value]| {
        rows.iter()
            .filter(|r| r["check"] == "azure.permission" || r["check"] == "azure.persistent-group")
            .map(|r| format!("{} {} {}", r["check"], r["status"], r["target"]).to_ascii_lowercase())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(
        verdicts(&rows2),
        verdicts(&rows),
        "the same rows without the list"
    );
}

/// The Azure failures, one scenario at a time on one simulator: a provider not registered,
/// the EncryptionAtHost feature, a permission missing for the caller, quotas used up
/// (public IPs, the VM family's vCPUs), a VM size restricted in the pool's zone and in the
/// whole region, a storage account name taken; and the management cluster's access
/// review denied and the HyperShift CRDs absent.
#[test]
fn each_azure_and_access_failure_gives_its_row() {
    let env = Env::new("preflight-azure", FAST);
    let cfg = private_file(&env, "pfaz");
    let before = env.sim.ids();
    env.sim.clear_requests();
    // The storage account name the file derives (read off a passing run).
    let (code, rows, _) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 0, "{rows:#?}");
    let account_id = rows
        .iter()
        .find(|r| r["check"] == "azure.storage-account")
        .and_then(|r| r["target"].as_str())
        .unwrap()
        .to_string();
    let account = account_id.rsplit('/').next().unwrap().to_string();
    let cases: Vec<(Value, &str, String, &str)> = vec![
        (
            json!({"unregistered_providers": ["Microsoft.Compute"]}),
            "azure.provider",
            format!("/subscriptions/{GUEST_SUB}/providers/Microsoft.Compute"),
            "NotRegistered",
        ),
        (
            json!({"unregistered_features": ["Microsoft.Compute/EncryptionAtHost"]}),
            "azure.feature",
            "features/EncryptionAtHost".into(),
            "NotRegistered",
        ),
        (
            json!({"denied_actions": [{"action": "Microsoft.Network/privateLinkServices/write", "scope": MGMT_RG}]}),
            "azure.permission",
            MGMT_RG.into(),
            "Microsoft.Network/privateLinkServices/write",
        ),
        (
            json!({"usage": {"PublicIPAddresses": 1000}}),
            "azure.quota",
            "[PublicIPAddresses]".into(),
            "1000 of 1000 used",
        ),
        (
            json!({"limits": {"standardDSv5Family": 4}}),
            "azure.quota",
            "[standardDSv5Family]".into(),
            "0 of 4 used, the run needs 12 more",
        ),
        (
            json!({"restricted_sizes": [{"size": "Standard_D4s_v5", "zones": ["1"]}]}),
            "azure.vm-size",
            "pool workers".into(),
            "restricted in zone 1",
        ),
        (
            json!({"restricted_sizes": [{"size": "Standard_D4s_v5"}]}),
            "azure.vm-size",
            "pool infra".into(),
            "restricted in eastus",
        ),
        (
            json!({"taken_storage_account_names": [account]}),
            "azure.storage-account",
            account_id.clone(),
            "is taken",
        ),
        (
            json!({"denied_kube": ["create hypershift.openshift.io/hostedclusters"]}),
            "k8s.access",
            "create hypershift.openshift.io/hostedclusters in clusters".into(),
            "denied",
        ),
        (
            json!({"no_hypershift_crds": true}),
            "k8s.crds",
            "hostedclusters.hypershift.openshift.io".into(),
            "absent",
        ),
    ];
    for (scenario, check, target, detail) in &cases {
        set_scenario(&env, scenario.clone());
        let (code, rows, err) = preflight(&env, &cfg, &[]);
        assert_eq!(code, 2, "{scenario}: {rows:#?}\n{err}");
        let row = failed(&rows, check, target);
        assert!(
            row["detail"].as_str().unwrap().contains(detail),
            "{scenario}: {row}"
        );
        assert_eq!(
            failures(&rows)
                .iter()
                .filter(|r| r["check"] != *check)
                .count(),
            0,
            "{scenario}: only {check} fails: {rows:#?}"
        );
    }
    // `start` refuses on a failing check: exit 2, the failing row, nothing journaled.
    set_scenario(
        &env,
        json!({"unregistered_providers": ["Microsoft.Network"]}),
    );
    let err = start_refused(&env, "create-cluster", &cfg, "azure.provider");
    assert!(err.contains("Microsoft.Network"), "{err}");
    assert_eq!(env.sim.ids(), before, "preflight created something");
    // `--skip-preflight` journals the run anyway, and says so in its labels.
    let (code, out, err) = env.start(
        "create-cluster",
        &cfg,
        &["--skip-preflight", "--detach"],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let run = out
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let (_, shown, _) = env.cli(&["--output", "json", "show", &run], &[]);
    let v = document(&shown, "Run");
    assert_eq!(v["labels"]["preflight"], "skipped", "{shown}");
}

/// No public DNS zone for baseDomain; the references of the file: an existing OIDC issuer
/// that publishes nothing, a bring-your-own network that does not exist, bring-your-own
/// identities that resolve to nothing.
#[test]
fn dns_zone_and_file_references() {
    let env = Env::with_sim_args("preflight-refs", FAST, &["--no-dns-zones"]);
    let cfg = cluster_file(&env.dir, "pfref", "pfref-a1b2c", "Public", "");
    let key = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../workflows/tests/fixtures/files/sa-signing-key.pem");
    std::fs::copy(key, env.dir.join("sa-signing-key.pem")).unwrap();
    edit(
        &cfg,
        "oidcIssuer:\n  create: {}\n",
        "oidcIssuer:\n  existing:\n    url: https://nosuchissuer.blob.core.windows.net/oidc\n    signingKey: sa-signing-key.pem\n",
    );
    let rg = format!("/subscriptions/{GUEST_SUB}/resourceGroups/byo");
    let vnet = format!("{rg}/providers/Microsoft.Network/virtualNetworks/byo-vnet");
    let nsg = format!("{rg}/providers/Microsoft.Network/networkSecurityGroups/byo-nsg");
    edit(
        &cfg,
        "network:\n  create: {}\n",
        &format!(
            "network:\n  existing:\n    vnetId: {vnet}\n    subnetId: {vnet}/subnets/nodes\n    nsgId: {nsg}\n"
        ),
    );
    let ids: serde_json::Map<String, Value> = [
        "imageRegistry",
        "ingress",
        "file",
        "disk",
        "nodePoolManagement",
        "cloudProvider",
        "network",
        "controlPlaneOperator",
    ]
    .iter()
    .enumerate()
    .map(|(i, k)| {
        (
            (*k).to_string(),
            json!({"clientID": format!("00000000-0000-0000-0000-00000000000{i}")}),
        )
    })
    .collect();
    std::fs::write(
        env.dir.join("workload-identities.json"),
        serde_json::to_vec(&Value::Object(ids)).unwrap(),
    )
    .unwrap();
    edit(
        &cfg,
        "identities:\n  create: {}\n",
        "identities:\n  existing:\n    file: workload-identities.json\n",
    );
    let rows = refused(&env, &cfg, &[]);
    failed(&rows, "azure.dns-zone", "hcp.example.com");
    failed(&rows, "oidc.existing", "/.well-known/openid-configuration");
    failed(&rows, "oidc.existing", "/openid/v1/jwks");
    failed(&rows, "network.existing", "virtualNetworks/byo-vnet");
    failed(&rows, "network.existing", "networkSecurityGroups/byo-nsg");
    failed(
        &rows,
        "identities.existing",
        "00000000-0000-0000-0000-000000000003",
    );
    // A public topology needs no private-link checks.
    assert!(
        !rows.iter().any(|r| r["check"] == "azure.nat-subnet"),
        "{rows:#?}"
    );
}

/// An AKS management cluster without HyperShift's AKS setup: the Route CRD not applied.
fn bare_aks(env: &Env) {
    let (code, body) = env
        .sim
        .put("/_sim/scenario", &json!({"aks": {"route_crd": false}}));
    assert!(code < 300, "{code} {body}");
}

/// The management cluster: no Route API (a bare AKS), an operator too old for the release
/// (4.21), installed with `--private-platform Azure` while the file says hcp-workflow;
/// and a HostedCluster of this name that is not ours.
#[test]
fn management_cluster_failures() {
    let env = Env::with_sim_args(
        "preflight-mgmt",
        FAST,
        &[
            "--management-platform",
            "aks",
            "--hypershift-version",
            "4.21",
            "--private-platform",
            "azure",
        ],
    );
    bare_aks(&env);
    let cfg = private_file(&env, "pfmc");
    edit(
        &cfg,
        "topology: Private\n",
        "topology: Private\nprivateLink:\n  managedBy: hcp-workflow\n",
    );
    let rows = refused(&env, &cfg, &[]);
    failed(&rows, "k8s.route-api", "route.openshift.io");
    let r = failed(
        &rows,
        "k8s.supported-versions",
        "hypershift/supported-versions",
    );
    assert!(r["detail"].as_str().unwrap().contains("4.22"), "{r}");
    failed(&rows, "k8s.private-platform", "--private-platform");
}

/// A HostedCluster name already taken by another cluster (same name, another infra id), a
/// management VNet and load-balancer resource group that do not exist, and a NAT subnet
/// CIDR that overlaps the management VNet's subnets: each fails with its row, exit 2,
/// nothing journaled or written.
#[test]
fn name_taken_and_management_network_failures() {
    let env = Env::new("preflight-names", FAST);
    // The name `pfnt` is taken by a live cluster (infra id pfnt-a1b2c), in another journal.
    let live = cluster_file(&env.dir, "pfnt", "pfnt-a1b2c", "Public", "");
    let other_db = format!("sqlite://{}", env.dir.join("other.db").display());
    let live_s = live.to_string_lossy().to_string();
    let (code, out, err) = hcp_e2e_tests::cluster::run(
        &env.dir,
        &[
            "--database",
            &other_db,
            "--simulator",
            &env.sim.base,
            "start",
            "create-cluster",
            "--config",
            &live_s,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // A second file: same name, another infra id, and a management VNet that is not there.
    let dir2 = env.dir.join("second");
    std::fs::create_dir_all(&dir2).unwrap();
    let cfg = cluster_file(&dir2, "pfnt", "pfnt-z9y8x", "Private", "");
    edit(
        &cfg,
        "virtualNetworks/management-vnet",
        "virtualNetworks/no-such-vnet",
    );
    edit(
        &cfg,
        "loadBalancerResourceGroup: hcp-management\n",
        "loadBalancerResourceGroup: no-such-group\n",
    );
    let before = env.sim.ids();
    env.sim.clear_requests();
    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 2, "{rows:#?}\n{err}");
    let r = failed(&rows, "k8s.hosted-cluster", "clusters/pfnt");
    assert!(
        r["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("pfnt-a1b2c"),
        "the row names who holds the name: {r}"
    );
    failed(&rows, "azure.mgmt-vnet", "no-such-vnet");
    failed(&rows, "azure.mgmt-lb-group", "no-such-group");
    assert_no_journal(&env);
    assert_only_reads(&env);
    assert_eq!(env.sim.ids(), before, "preflight created something");

    // A NAT subnet CIDR inside the management VNet's `aks-subnet` (10.224.0.0/16).
    let cfg = cluster_file(&dir2, "pfns", "pfns-n4t5b", "Private", "");
    edit(
        &cfg,
        "virtualNetworks/management-vnet\n",
        "virtualNetworks/management-vnet\n  natSubnet:\n    cidr: 10.224.7.0/24\n",
    );
    env.sim.clear_requests();
    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 2, "{rows:#?}\n{err}");
    failed(&rows, "azure.nat-subnet", "pfns-n4t5b-pls-nat");
    assert_no_journal(&env);
    assert_only_reads(&env);
    assert_eq!(env.sim.ids(), before, "preflight created something");
}

/// Rows of `check` (any status).
fn rows_of<'a>(rows: &'a [Value], check: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["check"] == check).collect()
}

/// The scenario given as a file at start (`simulator serve --scenario FILE.json`): Entra
/// refuses the client secret, so `azure.token` fails with AADSTS7000215 and its fix; then,
/// switched while serving, no HyperShift operator Deployment (`k8s.operator`) and an API
/// server without SelfSubjectReview (`k8s.whoami` warns, exit 0). Each: nothing
/// journaled, only reads.
#[test]
fn token_operator_and_whoami_rows() {
    let scen_dir = hcp_e2e_tests::scratch("preflight-scenario-file");
    let scen = scen_dir.join("scenario.json");
    std::fs::write(&scen, r#"{"invalid_client_secret": true}"#).unwrap();
    let env = Env::with_sim_args(
        "preflight-token",
        FAST,
        &["--scenario", scen.to_str().unwrap()],
    );
    let cfg = private_file(&env, "pftk");
    let before = env.sim.ids();
    env.sim.clear_requests();

    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 2, "{rows:#?}\n{err}");
    let r = failed(&rows, "azure.token", "ARM token for tenant");
    let detail = r["detail"].as_str().unwrap();
    assert!(detail.contains("AADSTS7000215"), "{r}");
    assert!(
        r["fix"].as_str().unwrap().contains("AZURE_CLIENT_SECRET"),
        "the fix names the credential's variables: {r}"
    );
    assert!(
        !detail.contains("simulated"),
        "the secret is never printed: {r}"
    );
    // The management cluster does not depend on Azure credentials.
    assert!(
        rows_of(&rows, "k8s.operator")
            .iter()
            .all(|r| r["status"] == "pass"),
        "{rows:#?}"
    );
    assert_no_journal(&env);
    assert_only_reads(&env);

    // No operator Deployment: HyperShift is not installed.
    set_scenario(&env, json!({"no_operator": true}));
    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 2, "{rows:#?}\n{err}");
    let r = failed(&rows, "k8s.operator", "Deployment hypershift/operator");
    assert!(r["detail"].as_str().unwrap().contains("absent"), "{r}");
    assert!(
        r["fix"].as_str().unwrap().contains("hypershift install"),
        "{r}"
    );
    assert_eq!(
        failures(&rows)
            .iter()
            .filter(|r| r["check"] != "k8s.operator")
            .count(),
        0,
        "only k8s.operator fails: {rows:#?}"
    );

    // An API server before 1.28 has no SelfSubjectReview: a warning, not a failure.
    set_scenario(&env, json!({"no_self_subject_review": true}));
    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 0, "{rows:#?}\n{err}");
    let w = rows_of(&rows, "k8s.whoami");
    assert_eq!(w.len(), 1, "{rows:#?}");
    assert_eq!(w[0]["status"], "warn", "{}", w[0]);
    assert!(
        w[0]["detail"].as_str().unwrap().contains("1.28"),
        "{}",
        w[0]
    );
    assert_no_journal(&env);
    assert_only_reads(&env);
    assert_eq!(env.sim.ids(), before, "preflight created something");

    // The persistent group's name is another cluster's own resource group (cluster pftk,
    // infra id `persistent`: its `<cluster>-<infraID>` group), deleted with that cluster.
    set_scenario(&env, json!({}));
    let rg = format!("/subscriptions/{GUEST_SUB}/resourcegroups/pftk-persistent");
    let (status, body) = env.sim.put(
        &format!("{rg}?api-version=2021-04-01"),
        &json!({"location": "eastus", "tags": {
            "hcp-workflow.io/cluster": "pftk", "hcp-workflow.io/infra-id": "persistent"}}),
    );
    assert!(status < 300, "{status} {body}");
    let rows = refused(&env, &cfg, &[]);
    let r = failed(&rows, "azure.persistent-group", "pftk-persistent");
    assert!(
        r["detail"].as_str().unwrap().contains("own resource group"),
        "{r}"
    );
}

/// An API server that drops the connection (`k8s.reachable` fails, the other Kubernetes
/// checks add no rows of their own), a read slower than `--timeout` (a `no answer within`
/// row for that check), and an existing private link service whose visibility lacks the
/// guest subscription (`azure.pls-visibility`). Then `start delete-cluster` refuses on its
/// own failing check, with nothing journaled.
#[test]
fn reachability_timeout_visibility_and_delete_rows() {
    let env = Env::new("preflight-reach", FAST);
    let cfg = private_file(&env, "pfrc");
    let (code, rows, _) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 0, "{rows:#?}");
    let pls_id = rows_of(&rows, "azure.pls-visibility")[0]["target"]
        .as_str()
        .unwrap()
        .to_string();
    let subnet = rows_of(&rows, "azure.mgmt-vnet")[0]["target"]
        .as_str()
        .unwrap()
        .to_string();
    env.sim.clear_requests();

    // The API server drops every connection to /version.
    let f = env
        .sim
        .fault(json!({"method": "GET", "path": "/version", "drop_connection": true}));
    let (code, rows, err) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 2, "{rows:#?}\n{err}");
    let r = failed(&rows, "k8s.reachable", "management cluster");
    assert!(
        r["detail"].as_str().unwrap().contains("did not answer"),
        "{r}"
    );
    for c in [
        "k8s.access",
        "k8s.crds",
        "k8s.operator",
        "k8s.hosted-cluster",
    ] {
        assert!(
            rows_of(&rows, c).is_empty(),
            "{c} adds nothing when unreachable: {rows:#?}"
        );
    }
    env.sim.clear_faults();
    let _ = f;

    // One read slower than the per-check limit: that check's row says so. The limit is
    // generous (5 s) so that on a loaded 2-core CI machine no healthy check reaches it
    // (with 1 s, `k8s.crds` once timed out beside ten parallel tests); the slow read
    // never answers within the run.
    env.sim
        .fault(json!({"method": "GET", "path": "*/providers?*", "latency_ms": 120000}));
    let (code, rows, err) = preflight(&env, &cfg, &["--timeout", "5"]);
    assert_eq!(code, 2, "{rows:#?}\n{err}");
    let slow: Vec<_> = failures(&rows)
        .into_iter()
        .filter(|r| {
            r["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("no answer within 5 s")
        })
        .collect();
    assert!(!slow.is_empty(), "a timeout row: {rows:#?}");
    assert!(
        slow.iter().all(|r| r["check"] == "azure.provider"),
        "only the slow check times out: {slow:#?}"
    );
    env.sim.clear_faults();

    // A PLS of this name already exists, visible only to another subscription (in front of
    // a frontend of an internal LB of the management VNet: Azure refuses a PLS whose
    // frontend does not exist).
    let mgmt_subnet = format!("{}/subnets/other-pls-subnet", subnet.trim_end_matches('/'));
    let lb = format!("{MGMT_RG}/providers/Microsoft.Network/loadBalancers/kube-internal");
    let (status, body) = env.sim.put(
        &format!("{lb}?api-version=2023-11-01"),
        &json!({
            "location": "eastus",
            "sku": {"name": "Standard"},
            "properties": {"frontendIPConfigurations": [{"name": "fe", "properties": {
                "subnet": {"id": mgmt_subnet}, "privateIPAllocationMethod": "Dynamic"}}]}
        }),
    );
    assert!(status < 300, "{status} {body}");
    let (status, body) = env.sim.put(
        &format!("{pls_id}?api-version=2023-11-01"),
        &json!({
            "location": "eastus",
            "properties": {
                "loadBalancerFrontendIpConfigurations": [{"id": format!("{MGMT_RG}/providers/Microsoft.Network/loadBalancers/kube-internal/frontendIPConfigurations/fe")}],
                "ipConfigurations": [{"name": "ipc", "properties": {"subnet": {"id": mgmt_subnet}}}],
                "visibility": {"subscriptions": ["99999999-9999-9999-9999-999999999999"]},
                "autoApproval": {"subscriptions": []}
            }
        }),
    );
    assert!(status < 300, "{status} {body}");
    let rows = refused(&env, &cfg, &[]);
    let r = failed(&rows, "azure.pls-visibility", &pls_id);
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("not visible to subscription {GUEST_SUB}")),
        "{r}"
    );
    assert!(r["fix"].as_str().unwrap().contains("--visibility"), "{r}");

    // `start delete-cluster` runs the checks that apply to a delete and refuses.
    set_scenario(
        &env,
        json!({"denied_kube": ["delete hypershift.openshift.io/hostedclusters"]}),
    );
    // delete-cluster reads the journal (the create run's recorded private-link mode) before
    // its checks; nothing is written to it.
    start_refused(&env, "delete-cluster", &cfg, "k8s.access");
}

/// A `start` whose preflight passes with warnings says so in one line, with the
/// command (and the run's target flags) that shows them.
#[test]
fn a_start_prints_its_preflight_warnings_in_one_line() {
    let env = Env::new("preflight-warn-line", FAST);
    let cfg = private_file(&env, "pfwarn");
    let (code, out, err) = env.start("create-cluster", &cfg, &["--detach"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("preflight: "))
        .unwrap_or_else(|| panic!("no preflight line: {err}"));
    assert!(
        line.contains(" pass, ") && line.contains(" warn (`"),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "`hcp-workflow --database {} --simulator {} preflight --config {}` for details",
            env.db,
            env.sim.base,
            cfg.display()
        )),
        "{line}"
    );
    // And the command it names runs and shows the warnings.
    let (code, rows, perr) = preflight(&env, &cfg, &[]);
    assert_eq!(code, 0, "{perr}");
    assert!(rows.iter().any(|r| r["status"] == "warn"), "{rows:#?}");
}

/// A Public cluster on a management cluster without the Route API passed
/// preflight (a warning) and simulated fine; HyperShift refuses it, because Ignition,
/// Konnectivity and OAuth are Routes in every topology. Preflight fails it (exit 2), and
/// with the checks skipped the simulated operator refuses it as HyperShift does: the run
/// never succeeds.
#[test]
fn a_public_cluster_without_the_route_api_is_refused() {
    let env = Env::with_sim_args(
        "preflight-public-aks",
        FAST,
        &["--management-platform", "aks"],
    );
    bare_aks(&env);
    let cfg = cluster_file(
        &env.dir,
        "sigma",
        "sigma-r0ut3",
        "Public",
        "waitBudgets:\n  hostedClusterAvailable: 3s\n",
    );
    let rows = refused(&env, &cfg, &[]);
    let r = failed(&rows, "k8s.route-api", "route.openshift.io");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("cluster does not support Routes"),
        "{r}"
    );
    // On AKS the fix is HyperShift's own AKS setup: apply the Route CRD, then restart
    // the operator (it reads the cluster's capabilities once, at start).
    let fix = r["fix"].as_str().unwrap();
    assert!(
        fix.contains("route/v1/zz_generated.crd-manifests/routes.crd.yaml")
            && fix.contains("rollout restart deployment/operator"),
        "{fix}"
    );
    let (code, out, err) = env.start("create-cluster", &cfg, &["--skip-preflight"], &[]);
    assert_ne!(
        code, 0,
        "a Public cluster on AKS must not succeed:\n{out}\n{err}"
    );
    let hc = env
        .sim
        .get("/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters/sigma");
    let c = hc["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ValidConfiguration")
        .unwrap_or_else(|| panic!("{hc}"))
        .clone();
    assert_eq!(c["status"], "False", "{c}");
    assert!(
        c["message"].as_str().unwrap().contains(
            "cluster does not support Routes, but service \"Ignition\" is exposed via a Route"
        ),
        "{c}"
    );
}

/// The Private Link Service is created in the cluster's location, in front of
/// the management cluster's internal load balancer (in the management VNet's region). A
/// cluster in another region than the management cluster is refused by preflight (exit 2,
/// nothing journaled or created), not by Azure after the control plane exists.
#[test]
fn a_private_link_service_away_from_its_load_balancers_region_is_refused() {
    let env = Env::new("pf-pls-region", FAST);
    let cfg = cluster_file(&env.dir, "far", "far-r3g10", "Private", "");
    edit(&cfg, "location: eastus\n", "location: westus\n");
    let rows = refused(&env, &cfg, &[]);
    let row = rows
        .iter()
        .find(|r| r["check"] == "azure.pls-region")
        .unwrap_or_else(|| panic!("no azure.pls-region row: {rows:#?}"));
    assert_eq!(row["status"], "fail", "{row}");
    let detail = row["detail"].as_str().unwrap();
    assert!(
        detail.contains("eastus") && detail.contains("westus"),
        "{detail}"
    );
    assert!(detail.contains("InvalidResourceReference"), "{detail}");
    start_refused(&env, "create-cluster", &cfg, "azure.pls-region");
    // In the management cluster's region the same row passes.
    let ok = cluster_file(&env.dir, "near", "near-r3g10", "Private", "");
    let (_, rows, _) = preflight(&env, &ok, &[]);
    let row = rows
        .iter()
        .find(|r| r["check"] == "azure.pls-region")
        .unwrap();
    assert_eq!(row["status"], "pass", "{row}");
}
