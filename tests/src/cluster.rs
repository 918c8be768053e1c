//! Cluster end-to-end harness: a simulator as its own process (with `--state`, so it
//! outlives killed workers), cluster files, and the simulator's control API.

use crate::{Proc, bin};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The shared reference data, when this checkout has `../shared` beside it.
pub fn shared_crds() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference/hypershift");
    p.exists().then_some(p)
}

/// The condensed Azure OpenAPI specs (`../shared/spec-conformance/specs`), when present.
pub fn shared_specs() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec-conformance/specs");
    p.exists().then_some(p)
}

/// A simulator process.
#[derive(Debug)]
pub struct Sim {
    proc: Proc,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    http: reqwest::blocking::Client,
}

impl Sim {
    /// Start `hcp-workflow simulator serve` with its state in `dir/sim.json`.
    pub fn start(dir: &Path, time_scale: f64) -> Sim {
        Sim::start_with(dir, time_scale, &[])
    }

    /// [`Sim::start`] with extra `simulator serve` arguments (e.g. `--private-platform
    /// azure`).
    pub fn start_with(dir: &Path, time_scale: f64, extra: &[&str]) -> Sim {
        let state = dir.join("sim.json");
        let ts = time_scale.to_string();
        let mut args = vec![
            "simulator",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--state",
            state.to_str().unwrap(),
            "--time-scale",
            &ts,
        ];
        let crds = shared_crds();
        if let Some(c) = &crds {
            args.push("--crds");
            args.push(c.to_str().unwrap());
        }
        // Every request body our client sends is validated against Azure's OpenAPI specs
        // : a body Azure would refuse fails the test with ARM's 400.
        let specs = shared_specs();
        if let Some(s) = &specs {
            args.push("--specs");
            args.push(s.to_str().unwrap());
        }
        args.extend_from_slice(extra);
        let mut proc = Proc::spawn(dir, &args, &[("RUST_LOG", "warn")]);
        let line = proc
            .wait_line("hcp-simulator listening on ", Duration::from_secs(30))
            .unwrap_or_else(|| panic!("simulator did not start: {}", proc.stderr()));
        let base = line
            .trim_start_matches("hcp-simulator listening on ")
            .trim()
            .to_string();
        let sim = Sim {
            proc,
            base,
            http: reqwest::blocking::Client::new(),
        };
        // HyperShift's `clusters` namespace exists on a management cluster before any
        // cluster is created (hcp-workflow creates it if missing but never deletes it).
        sim.http
            .post(format!("{}/api/v1/namespaces", sim.base))
            .header("authorization", "Bearer test")
            .json(&serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "clusters"}}))
            .send()
            .unwrap();
        sim
    }

    /// `GET /_sim/inventory`.
    pub fn inventory(&self) -> Vec<Value> {
        self.get("/_sim/inventory")
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Inventory ids (ARM ids and Kubernetes paths).
    pub fn ids(&self) -> BTreeSet<String> {
        self.inventory()
            .iter()
            .filter_map(|i| i["id"].as_str().map(str::to_string))
            .collect()
    }

    /// `GET /_sim/requests`.
    pub fn requests(&self) -> Vec<Value> {
        self.get("/_sim/requests")
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `DELETE /_sim/requests`.
    pub fn clear_requests(&self) {
        self.http
            .delete(format!("{}/_sim/requests", self.base))
            .send()
            .unwrap();
    }

    /// `POST /_sim/faults`.
    pub fn fault(&self, rule: Value) -> String {
        let v: Value = self
            .http
            .post(format!("{}/_sim/faults", self.base))
            .json(&rule)
            .send()
            .unwrap()
            .json()
            .unwrap();
        v["id"].as_str().unwrap_or_default().to_string()
    }

    /// `DELETE /_sim/faults`.
    pub fn clear_faults(&self) {
        self.http
            .delete(format!("{}/_sim/faults", self.base))
            .send()
            .unwrap();
    }

    /// Any GET on the simulator.
    pub fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base))
            .header("authorization", "Bearer test")
            .send()
            .unwrap()
            .json()
            .unwrap_or(Value::Null)
    }

    /// Any PUT on the simulator (ARM with a dummy bearer token).
    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .put(format!("{}{path}", self.base))
            .header("authorization", "Bearer test")
            .json(body)
            .send()
            .unwrap();
        let s = r.status().as_u16();
        (s, r.json().unwrap_or(Value::Null))
    }

    /// Any DELETE on the simulator; the status.
    pub fn delete(&self, path: &str) -> u16 {
        self.http
            .delete(format!("{}{path}", self.base))
            .header("authorization", "Bearer test")
            .send()
            .unwrap()
            .status()
            .as_u16()
    }

    /// Any POST on the simulator (a Kubernetes create).
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("authorization", "Bearer test")
            .json(body)
            .send()
            .unwrap();
        let s = r.status().as_u16();
        (s, r.json().unwrap_or(Value::Null))
    }

    /// Create the public DNS zone `domain` in group `hcp-dns` of `subscription` (as a user
    /// would before creating clusters there; `simulator serve` seeds only
    /// `hcp.example.com` in [`GUEST_SUB`]).
    pub fn seed_public_zone(&self, subscription: &str, domain: &str) {
        let rg = format!("/subscriptions/{subscription}/resourceGroups/hcp-dns");
        let (s, b) = self.put(
            &format!("{rg}?api-version=2021-04-01"),
            &serde_json::json!({"location": "eastus"}),
        );
        assert!((200..300).contains(&s), "{s} {b}");
        let (s, b) = self.put(
            &format!("{rg}/providers/Microsoft.Network/dnszones/{domain}?api-version=2018-05-01"),
            &serde_json::json!({"location": "global"}),
        );
        assert!((200..300).contains(&s), "{s} {b}");
    }

    /// Put Blob `{container}/{blob}` in storage account `account_id` as a real client
    /// does: the account key from `listKeys`, the request signed with Shared Key (the
    /// simulator verifies the signature, as Azure does). Returns the status.
    pub fn put_blob(
        &self,
        account_id: &str,
        container: &str,
        blob: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> u16 {
        use hcp_activities::azure::storage::{sign, string_to_sign};
        let keys: Value = self
            .http
            .post(format!(
                "{}{account_id}/listKeys?api-version=2024-01-01",
                self.base
            ))
            .header("authorization", "Bearer test")
            .send()
            .unwrap()
            .json()
            .unwrap();
        let key = hcp_activities::secret::Secret::new(
            keys["keys"][0]["value"].as_str().unwrap().to_string(),
        );
        let account = account_id.rsplit('/').next().unwrap();
        let path = format!("/{container}/{blob}");
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let headers: Vec<(String, String)> = vec![
            ("x-ms-blob-type".into(), "BlockBlob".into()),
            ("x-ms-date".into(), date.clone()),
            ("x-ms-version".into(), "2021-08-06".into()),
            ("content-type".into(), content_type.into()),
        ];
        let sts = string_to_sign("PUT", account, &path, &[], &headers, body.len() as u64);
        let sig = sign(&sts, &key).unwrap();
        let mut req = self
            .http
            .put(format!("{}/_blob/{account}{path}", self.base))
            .header("authorization", format!("SharedKey {account}:{sig}"));
        for (k, v) in &headers {
            req = req.header(k.as_str(), v.as_str());
        }
        req.body(body).send().unwrap().status().as_u16()
    }

    /// Stop it.
    pub fn stop(mut self) {
        self.proc.kill();
    }
}

/// What a cluster end-to-end test runs against: a scratch directory, a SQLite journal in
/// it, and a simulator process (stopped when the `Env` is dropped).
#[derive(Debug)]
pub struct Env {
    /// Scratch directory (cluster files, logs, the journal).
    pub dir: PathBuf,
    /// `sqlite://<dir>/journal.db`.
    pub db: String,
    /// The simulator.
    pub sim: Sim,
}

impl Env {
    /// A fresh scratch directory `tag`, its journal, and a simulator at `time_scale`.
    pub fn new(tag: &str, time_scale: f64) -> Env {
        Env::with_sim_args(tag, time_scale, &[])
    }

    /// [`Env::new`] with extra `simulator serve` arguments.
    pub fn with_sim_args(tag: &str, time_scale: f64, sim_args: &[&str]) -> Env {
        let dir = crate::scratch(tag);
        let sim = Sim::start_with(&dir, time_scale, sim_args);
        let db = format!("sqlite://{}", dir.join("journal.db").display());
        Env { dir, db, sim }
    }

    /// `--database … --simulator … rest…`.
    pub fn args<'a>(&'a self, rest: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec![
            "--database",
            self.db.as_str(),
            "--simulator",
            self.sim.base.as_str(),
        ];
        a.extend_from_slice(rest);
        a
    }

    /// Run `hcp-workflow --database … --simulator … args…` to completion.
    pub fn cli(&self, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
        run(&self.dir, &self.args(args), envs)
    }

    /// How many runs the journal holds (`--output json list`); none when there is no
    /// journal at all (a refused or nothing-to-do start creates none).
    pub fn run_count(&self) -> usize {
        self.run_list().len()
    }

    /// Every run of the journal (`--output json list`); none when there is no journal at
    /// all (a refused or nothing-to-do start creates none).
    pub fn run_list(&self) -> Vec<Value> {
        let (code, out, err) = self.cli(&["--output", "json", "list"], &[]);
        if code == 2 && err.contains("no journal at") {
            return Vec::new();
        }
        assert_eq!(code, 0, "list: {err}");
        crate::items(&out, "RunList")
    }

    /// `--output json show <run>`: the `Run` document (the command must succeed).
    pub fn show(&self, run: &str) -> Value {
        let (code, out, err) = self.cli(&["--output", "json", "show", run], &[]);
        assert_eq!(code, 0, "show {run}: {err}");
        crate::document(&out, "Run")
    }

    /// `start <wf> --config <cfg> extra…`.
    pub fn start(
        &self,
        wf: &str,
        cfg: &Path,
        extra: &[&str],
        envs: &[(&str, &str)],
    ) -> (i32, String, String) {
        let cfg = cfg.to_string_lossy();
        let mut a = vec!["start", wf, "--config", cfg.as_ref()];
        // Tests have no terminal: a delete, and an update or repair that deletes,
        // replaces or cannot undo something, is refused there without `--yes` (exit 2;
        // the confirmation itself is tested in `tests/terminal.rs`, `exit_codes.rs` and
        // `update_confirmation.rs`, which call `cli` directly).
        if matches!(wf, "delete-cluster" | "update-cluster" | "repair-cluster")
            && !extra.contains(&"--yes")
        {
            a.push("--yes");
        }
        a.extend_from_slice(extra);
        self.cli(&a, envs)
    }
}

/// The guest subscription of test clusters.
pub const GUEST_SUB: &str = "11111111-2222-3333-4444-555555555555";

/// The tenant of test clusters.
pub const TENANT: &str = "99999999-8888-7777-6666-555555555555";

/// `simulator serve --management-platform aks` as it starts: an AKS management cluster with
/// HyperShift installed the way its AKS how-to installs it (the Route CRD applied first;
/// `contrib/managed-azure/setup_install_ho_on_aks.sh`), which an ARO HCP create needs.
pub fn aro_env(tag: &str, time_scale: f64) -> Env {
    Env::with_sim_args(tag, time_scale, &["--management-platform", "aks"])
}

/// An ARO HCP cluster file (Public: AKS has no Route API).
pub fn aro_file(
    dir: &Path,
    name: &str,
    infra_id: &str,
    subscription: &str,
    extra: &str,
) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ssh = ssh_key_copy(dir, name);
    let pull = format!("{name}.pull-secret.json");
    if !dir.join(&pull).exists() {
        std::fs::copy(root.join("examples/pull-secret.json"), dir.join(&pull)).unwrap();
    }
    let yaml = format!(
        "name: {name}
infraID: {infra_id}
subscription: {subscription}
tenant: {TENANT}
location: eastus
baseDomain: hcp.example.com
releaseImage: quay.io/openshift-release-dev/ocp-release:4.22.0-multi
persistentResourceGroup: {name}-persistent
identities:
  aroHcp:
    keyVault:
      name: {name}-kv
topology: Public
managementCluster:
  platform: aks
  aksClusterId: /subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.ContainerService/managedClusters/management
nodePools:
  - name: workers
    replicas: 1
pullSecret: {pull}
sshKey: {ssh}
{extra}"
    );
    write_cluster_yaml(dir, name, &yaml)
}

/// A copy of the example SSH key for cluster `name` in `dir` (per cluster: tests write
/// cluster files from several threads at once); its file name.
fn ssh_key_copy(dir: &Path, name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ssh = format!("{name}.id_ed25519.pub");
    std::fs::copy(root.join("examples/id_ed25519.pub"), dir.join(&ssh)).unwrap();
    ssh
}

/// `dir/<name>.yaml` with `yaml` in it.
fn write_cluster_yaml(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Inventory ids of the simulator at `base` (usable from any thread).
pub fn ids_at(base: &str) -> BTreeSet<String> {
    let v: Value = reqwest::blocking::Client::new()
        .get(format!("{base}/_sim/inventory"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Write a cluster file `dir/<name>.yaml` (Private topology: every stage runs) with the
/// fake pull secret and SSH key beside it; `extra` is appended (top-level YAML keys not
/// already present, e.g. `allowedSubscriptions: [...]`). `persistent_rg` names the
/// persistent resource group.
pub fn cluster_file(
    dir: &Path,
    name: &str,
    infra_id: &str,
    topology: &str,
    extra: &str,
) -> PathBuf {
    // Per-cluster copies: tests write cluster files from several threads at once.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ssh = ssh_key_copy(dir, name);
    // A test may seed its own `pull-secret.json` before calling this.
    let pull = if dir.join("pull-secret.json").exists() {
        "pull-secret.json".to_string()
    } else {
        let p = format!("{name}.pull-secret.json");
        std::fs::copy(root.join("examples/pull-secret.json"), dir.join(&p)).unwrap();
        p
    };
    let yaml = format!(
        "name: {name}
infraID: {infra_id}
subscription: {GUEST_SUB}
tenant: 99999999-8888-7777-6666-555555555555
location: eastus
baseDomain: hcp.example.com
releaseImage: quay.io/openshift-release-dev/ocp-release:4.22.0-multi
persistentResourceGroup: {name}-persistent
oidcIssuer:
  create: {{}}
identities:
  create: {{}}
network:
  create: {{}}
topology: {topology}
managementCluster:
  subscription: 00000000-0000-0000-0000-00000000a0a0
  loadBalancerResourceGroup: hcp-management
  vnetId: /subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/virtualNetworks/management-vnet
nodePools:
  - name: workers
    replicas: 2
  - name: infra
    replicas: 1
pullSecret: {pull}
sshKey: {ssh}
{extra}"
    );
    write_cluster_yaml(dir, name, &yaml)
}

/// Run `hcp-workflow args…` to completion; returns (exit code, stdout, stderr).
pub fn run(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(bin());
    crate::hermetic(&mut cmd);
    let out = cmd
        .args(args)
        .env_remove("HCP_CRASH_AT")
        .env_remove("HCP_INJECT_FAIL")
        .env("HCP_POLL_MS", "20")
        .envs(envs.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Methods and paths of the request log, for ordering assertions.
pub fn request_lines(reqs: &[Value]) -> Vec<(String, String, u16)> {
    reqs.iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap_or_default().to_string(),
                r["path"].as_str().unwrap_or_default().to_string(),
                r["status"].as_u64().unwrap_or_default() as u16,
            )
        })
        .collect()
}

/// Assert that in `reqs`, every private endpoint connection of `pls_id` that was ever
/// listed was PUT `Rejected` and DELETEd before the PLS DELETE (when there was one).
pub fn assert_connections_rejected_before_pls_delete(reqs: &[Value], pls_name: &str) {
    let lines = request_lines(reqs);
    let pls_delete = lines.iter().position(|(m, p, s)| {
        m == "DELETE" && p.contains(&format!("/privateLinkServices/{pls_name}?")) && *s < 300
    });
    let Some(pls_delete) = pls_delete else { return };
    let conns: BTreeSet<String> = lines
        .iter()
        .filter(|(m, p, _)| {
            m == "PUT"
                && p.contains(&format!(
                    "/privateLinkServices/{pls_name}/privateEndpointConnections/"
                ))
        })
        .map(|(_, p, _)| p.split('?').next().unwrap_or_default().to_string())
        .collect();
    for c in &conns {
        let put = lines
            .iter()
            .position(|(m, p, _)| m == "PUT" && p.starts_with(c.as_str()));
        let del = lines
            .iter()
            .position(|(m, p, _)| m == "DELETE" && p.starts_with(c.as_str()));
        assert!(
            put.is_some_and(|i| i < pls_delete),
            "{c}: not rejected before the PLS DELETE"
        );
        assert!(
            del.is_some_and(|i| i < pls_delete),
            "{c}: not deleted before the PLS DELETE"
        );
    }
}

/// PUT and wait (polling GET) until the resource answers 200 and is not provisioning.
pub fn put_ready_at(env: &Env, id: &str, api: &str, body: Value) -> Value {
    let (s, b) = env.sim.put(&format!("{id}?api-version={api}"), &body);
    assert!((200..300).contains(&s), "PUT {id}: {s} {b}");
    for _ in 0..500 {
        let v = env.sim.get(&format!("{id}?api-version={api}"));
        let state = v
            .pointer("/properties/provisioningState")
            .and_then(Value::as_str);
        if v.get("id").is_some() && state.is_none_or(|p| p == "Succeeded") {
            return v;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{id} never became ready");
}

/// Rewrite the cluster file's `from` block with `to`.
pub fn edit_file(path: &Path, from: &str, to: &str) {
    let s = std::fs::read_to_string(path).unwrap();
    assert!(s.contains(from), "{from} not in {}", path.display());
    std::fs::write(path, s.replacen(from, to, 1)).unwrap();
}

/// HyperShift's workload identities and their service-account subjects
/// (`cmd/infra/azure/identities.go`), as a user's own `hypershift create iam azure` makes
/// them.
pub const IDENTITIES: &[(&str, &[&str])] = &[
    (
        "disk",
        &[
            "openshift-cluster-csi-drivers:azure-disk-csi-driver-node-sa",
            "openshift-cluster-csi-drivers:azure-disk-csi-driver-operator",
            "openshift-cluster-csi-drivers:azure-disk-csi-driver-controller-sa",
        ],
    ),
    (
        "file",
        &[
            "openshift-cluster-csi-drivers:azure-file-csi-driver-node-sa",
            "openshift-cluster-csi-drivers:azure-file-csi-driver-operator",
            "openshift-cluster-csi-drivers:azure-file-csi-driver-controller-sa",
        ],
    ),
    (
        "imageRegistry",
        &[
            "openshift-image-registry:registry",
            "openshift-image-registry:cluster-image-registry-operator",
        ],
    ),
    ("ingress", &["openshift-ingress-operator:ingress-operator"]),
    ("cloudProvider", &["kube-system:azure-cloud-provider"]),
    ("nodePoolManagement", &["kube-system:capi-provider"]),
    (
        "network",
        &["openshift-cloud-network-config-controller:cloud-network-config-controller"],
    ),
    (
        "controlPlaneOperator",
        &["kube-system:control-plane-operator"],
    ),
];

/// Bring-your-own identities with federated credentials for `issuer`; `wrong` replaces one
/// subject (its exact text) by another. Writes `workload-identities.json` and points the
/// cluster file at it and at a storage account of a known name (so the issuer URL is known
/// before the run).
pub fn byo_identities(env: &Env, cfg: &Path, account: &str, wrong: Option<(&str, &str)>) {
    let ids_rg = format!("/subscriptions/{GUEST_SUB}/resourceGroups/my-identities");
    put_ready_at(env, &ids_rg, "2021-04-01", json!({"location": "eastus"}));
    let issuer = format!("https://{account}.blob.core.windows.net/oidc");
    let mut file = serde_json::Map::new();
    for (field, subjects) in IDENTITIES {
        let id = format!(
            "{ids_rg}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/mine-{}",
            field.to_ascii_lowercase()
        );
        let v = put_ready_at(env, &id, "2024-11-30", json!({"location": "eastus"}));
        file.insert(
            (*field).into(),
            json!({"clientID": v["properties"]["clientId"]}),
        );
        for (i, s) in subjects.iter().enumerate() {
            let mut subject = format!("system:serviceaccount:{s}");
            if let Some((from, to)) = wrong
                && subject == from
            {
                subject = to.to_string();
            }
            put_ready_at(
                env,
                &format!("{id}/federatedIdentityCredentials/fic-{i}"),
                "2024-11-30",
                json!({"properties": {"issuer": issuer, "subject": subject, "audiences": ["openshift"]}}),
            );
        }
    }
    std::fs::write(
        env.dir.join("workload-identities.json"),
        serde_json::to_vec_pretty(&Value::Object(file)).unwrap(),
    )
    .unwrap();
    edit_file(
        cfg,
        "identities:\n  create: {}\n",
        "identities:\n  existing:\n    file: workload-identities.json\n",
    );
    edit_file(
        cfg,
        "oidcIssuer:\n  create: {}\n",
        &format!("oidcIssuer:\n  create:\n    storageAccount: {account}\n"),
    );
}

/// What is left that existed neither before the cluster nor is persistent (the persistent
/// resource group with the identities and OIDC issuer, and the issuer's signing key Secret,
/// which delete-cluster keeps without `--purge-persistent`).
pub fn persistent_only(
    ids: &std::collections::BTreeSet<String>,
    before: &std::collections::BTreeSet<String>,
    name: &str,
) -> Vec<String> {
    ids.iter()
        .filter(|i| !before.contains(*i))
        .filter(|i| {
            !i.to_ascii_lowercase()
                .contains(&format!("/resourcegroups/{name}-persistent"))
        })
        .filter(|i| {
            **i != format!("/api/v1/namespaces/clusters/secrets/{name}-sa-token-issuer-key")
        })
        .cloned()
        .collect()
}

/// A GET on the simulator at `base` (for threads that cannot share a [`Sim`]); `Null`
/// when the answer is not JSON.
pub fn get_at(base: &str, path: &str) -> Value {
    reqwest::blocking::Client::new()
        .get(format!("{base}{path}"))
        .header("authorization", "Bearer test")
        .send()
        .unwrap()
        .json()
        .unwrap_or(Value::Null)
}

/// The decoded value under `key` of Secret `ns/name` on the simulator at `base` (`""` when
/// the Secret or the key is missing).
pub fn secret_data_at(base: &str, ns: &str, name: &str, key: &str) -> String {
    use base64::Engine;
    let s = get_at(base, &format!("/api/v1/namespaces/{ns}/secrets/{name}"));
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(s["data"][key].as_str().unwrap_or_default())
            .unwrap_or_default(),
    )
    .unwrap_or_default()
}

/// One create-cluster per node of `nodes`, each with `HCP_INJECT_FAIL=<node>`, four at a
/// time against the simulator at `base`; `cluster(k)` writes the k-th cluster's file and
/// returns (file, name, infra id) — each its own name, infra id and subscription. Each run
/// must exit 1 rolled back, name the failing node as the cause, and leave nothing whose id
/// names its cluster. Returns one line per run that did not.
pub fn fail_each_node(
    dir: &Path,
    base: &str,
    nodes: &[String],
    cluster: impl Fn(usize) -> (PathBuf, String, String) + Sync,
) -> Vec<String> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(node) = nodes.get(k) else { break };
                    let (cfg, name, infra) = cluster(k);
                    let db = format!("sqlite://{}", dir.join(format!("{name}.db")).display());
                    let (code, out, err) = run(
                        dir,
                        &[
                            "--database",
                            &db,
                            "--simulator",
                            base,
                            "start",
                            "create-cluster",
                            "--config",
                            cfg.to_str().unwrap(),
                        ],
                        &[("HCP_INJECT_FAIL", node.as_str())],
                    );
                    let mut problems = Vec::new();
                    if code != 1 || !crate::says_run(&out, "rolled back") {
                        problems.push(format!("expected rolled-back (exit {code})\n{out}\n{err}"));
                    }
                    if !out.contains(&format!("unwound because {node} failed")) {
                        problems.push(format!("the cause is not reported\n{out}"));
                    }
                    let left: Vec<String> = ids_at(base)
                        .into_iter()
                        .filter(|i| {
                            i.contains(&format!("/{name}-"))
                                || i.contains(&format!("/{name}."))
                                || i.contains(&infra)
                                || i.ends_with(&format!("/{name}"))
                        })
                        .collect();
                    if !left.is_empty() {
                        problems.push(format!("left behind: {left:#?}"));
                    }
                    if !problems.is_empty() {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{node}: {}", problems.join("; ")));
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

/// The simulator's inventory is what existed `before` plus exactly what the runs' ledgers
/// (`show` documents) say they created: in Azure, every created id is there and every new
/// id is a created one or under one; on the management cluster, every object a ledger
/// names (`namespace/name`) is there (HyperShift's own objects, removed with the
/// HostedCluster, are in no ledger). Not ours by design: the management cluster's internal
/// load balancer (its cloud provider makes it for the private router Services) and each
/// guest's `*.apps` record (its ingress operator publishes it).
pub fn assert_inventory_is_the_ledgers(
    before: &BTreeSet<String>,
    now: &BTreeSet<String>,
    runs: &[Value],
) {
    let lower =
        |s: &BTreeSet<String>| -> BTreeSet<String> { s.iter().map(|i| i.to_lowercase()).collect() };
    let (before, now) = (lower(before), lower(now));
    let mut created = BTreeSet::new();
    for run in runs {
        for e in run["ledger"].as_array().into_iter().flatten() {
            if e["action"] == "created" {
                created.insert(e["id"].as_str().unwrap_or_default().to_lowercase());
            }
        }
    }
    let arm = |id: &String| id.starts_with("/subscriptions/");
    let missing: Vec<_> = created
        .iter()
        .filter(|c| arm(c) && !now.contains(*c))
        .collect();
    assert!(missing.is_empty(), "in a ledger, not in Azure: {missing:?}");
    let theirs = |id: &String| {
        id.ends_with("/loadbalancers/kubernetes-internal") || id.contains("/a/*.apps.")
    };
    let unrecorded: Vec<_> = now
        .difference(&before)
        .filter(|id| arm(id) && !theirs(id))
        .filter(|id| {
            !created
                .iter()
                .any(|c| *id == c || id.starts_with(&format!("{c}/")))
        })
        .collect();
    assert!(
        unrecorded.is_empty(),
        "in Azure, in no ledger: {unrecorded:?}"
    );
    let absent: Vec<_> = created
        .iter()
        .filter(|c| !arm(c))
        .filter(|c| {
            let (ns, name) = c.split_once('/').unwrap_or(("", c.as_str()));
            !now.iter().any(|i| {
                i.contains(&format!("/namespaces/{ns}/")) && i.ends_with(&format!("/{name}"))
            })
        })
        .collect();
    assert!(
        absent.is_empty(),
        "in a ledger, not on the management cluster: {absent:?}"
    );
}

/// The steps of a `show` document (every stage's, in order).
pub fn steps_of(run: &Value) -> Vec<Value> {
    run["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["steps"].as_array().cloned().unwrap_or_default())
        .collect()
}
