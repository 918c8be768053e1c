//! The last applied configuration: what a create (and, later, an update) made the cluster
//! be, journaled with its run, so a later start can say how a cluster file differs from the
//! cluster (`start create-cluster` on a cluster that exists and differs from the
//! file must not claim to have created it as the file says).
//!
//! The document is the cluster file as JSON (camelCase keys, as written), with:
//! - every file it names (pull secret, SSH key, identities file, OIDC signing key) replaced
//!   by the SHA-256 of its content (`{"sha256": …}`): a secret never reaches the journal,
//!   and moving a file is not a change;
//! - the keys that steer a run, not the cluster, left out: `waitBudgets`, `onFailure`,
//!   `auth`, `upgrade`, and how the management cluster is reached (`managementCluster.kubeconfig`,
//!   `managementCluster.context`).

use crate::config::ClusterConfig;
use serde_json::{Map, Value};
use sha2::Digest;
use std::path::Path;

/// Keys of the document that steer a run rather than describe the cluster.
const RUN_SETTINGS: [&str; 4] = ["waitBudgets", "onFailure", "auth", "upgrade"];

/// The applied-configuration document of `cfg` (its paths already resolved, as
/// [`crate::config::load`] returns them).
pub fn document(cfg: &ClusterConfig) -> Value {
    let mut v = serde_json::to_value(cfg).unwrap_or(Value::Null);
    let Value::Object(m) = &mut v else {
        return v;
    };
    for k in RUN_SETTINGS {
        m.remove(k);
    }
    if let Some(Value::Object(mc)) = m.get_mut("managementCluster") {
        mc.remove("kubeconfig");
        mc.remove("context");
    }
    m.insert("pullSecret".into(), digest_of(&cfg.pull_secret));
    m.insert("sshKey".into(), digest_of(&cfg.ssh_key));
    if let Some(Value::Object(ids)) = m.get_mut("identities")
        && let Some(Value::Object(existing)) = ids.get_mut("existing")
        && let Some(Value::String(p)) = existing.get("file").cloned()
    {
        existing.insert("file".into(), digest_of(Path::new(&p)));
    }
    if let Some(Value::Object(oidc)) = m.get_mut("oidcIssuer")
        && let Some(Value::Object(existing)) = oidc.get_mut("existing")
        && let Some(Value::String(p)) = existing.get("signingKey").cloned()
    {
        existing.insert("signingKey".into(), digest_of(Path::new(&p)));
    }
    v
}

/// `{"sha256": hex}` of a file's content, or `{"unreadable": …}` (never its content).
fn digest_of(path: &Path) -> Value {
    let mut m = Map::new();
    match std::fs::read(path) {
        Ok(bytes) => {
            let d = sha2::Sha256::digest(&bytes);
            let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
            m.insert("sha256".into(), Value::String(hex));
        }
        Err(e) => {
            m.insert("unreadable".into(), Value::String(e.kind().to_string()));
        }
    }
    Value::Object(m)
}

/// One difference between the applied configuration and a cluster file.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Change {
    /// Where, like the validation errors name fields: `nodePools[workers].replicas`.
    pub path: String,
    /// The applied value (`null`: absent).
    pub applied: Value,
    /// The file's value (`null`: absent).
    pub file: Value,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Value| match v {
            Value::Null => "(not set)".to_string(),
            Value::Object(m) if m.contains_key("sha256") => "a file with other contents".into(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if self.applied.get("sha256").is_some() && self.file.get("sha256").is_some() {
            return write!(f, "{}: the file's contents changed", self.path);
        }
        // A named entry (a node pool) added or removed as a whole.
        if self.path.ends_with(']') {
            match (&self.applied, &self.file) {
                (Value::Null, v @ Value::Object(_)) => {
                    return write!(f, "{}: added {}", self.path, show(v));
                }
                (v @ Value::Object(_), Value::Null) => {
                    return write!(f, "{}: removed (was {})", self.path, show(v));
                }
                _ => {}
            }
        }
        write!(
            f,
            "{}: {} → {}",
            self.path,
            show(&self.applied),
            show(&self.file)
        )
    }
}

/// Every difference from `applied` to `file`, in document order. Lists of objects with a
/// `name` (node pools) are matched by name, so a reordered list is no change.
pub fn diff(applied: &Value, file: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk("", applied, file, &mut out);
    out
}

fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<Change>) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    // A file's digest is one value: its contents changed, or not.
    let digest = |v: &Value| v.get("sha256").is_some() || v.get("unreadable").is_some();
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if !digest(a) && !digest(b) => {
            let mut keys: Vec<&String> = x.keys().collect();
            keys.extend(y.keys().filter(|k| !x.contains_key(*k)));
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                walk(&join(k), va, vb, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if named(x) && named(y) => {
            let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_string);
            let mut names: Vec<String> = x.iter().filter_map(name).collect();
            let added: Vec<String> = y
                .iter()
                .filter_map(name)
                .filter(|n| !names.contains(n))
                .collect();
            names.extend(added);
            for n in names {
                let find = |list: &Vec<Value>| {
                    list.iter()
                        .find(|v| name(v).as_deref() == Some(n.as_str()))
                        .cloned()
                        .unwrap_or(Value::Null)
                };
                let (va, vb) = (find(x), find(y));
                let p = format!("{path}[{n}]");
                if va.is_null() || vb.is_null() {
                    out.push(Change {
                        path: p,
                        applied: va,
                        file: vb,
                    });
                } else {
                    walk(&p, &va, &vb, out);
                }
            }
        }
        _ if a != b => out.push(Change {
            path: path.to_string(),
            applied: a.clone(),
            file: b.clone(),
        }),
        _ => {}
    }
}

fn named(list: &[Value]) -> bool {
    !list.is_empty()
        && list
            .iter()
            .all(|v| v.get("name").is_some_and(Value::is_string))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_pools_are_matched_by_name_and_every_change_is_named() {
        let a = json!({"name": "demo", "nodePools": [{"name": "workers", "replicas": 2}, {"name": "infra", "replicas": 1}], "releaseImage": "r1"});
        let b = json!({"name": "demo", "nodePools": [{"name": "infra", "replicas": 1}, {"name": "workers", "replicas": 3}, {"name": "gpu", "replicas": 1}], "releaseImage": "r1"});
        let d: Vec<String> = diff(&a, &b).iter().map(ToString::to_string).collect();
        assert_eq!(
            d,
            vec![
                "nodePools[workers].replicas: 2 → 3".to_string(),
                r#"nodePools[gpu]: added {"name":"gpu","replicas":1}"#.to_string(),
            ]
        );
        assert!(diff(&a, &a).is_empty());
    }

    #[test]
    fn secrets_are_hashes_and_run_settings_are_not_the_cluster() {
        let dir = std::env::temp_dir().join(format!("hcp-applied-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pull = dir.join("pull.json");
        std::fs::write(&pull, r#"{"auths":{"quay.io":{"auth":"c2VjcmV0"}}}"#).unwrap();
        let ssh = dir.join("id.pub");
        std::fs::write(&ssh, "ssh-ed25519 AAAA test").unwrap();
        let yaml = format!(
            "name: demo\nsubscription: 11111111-2222-3333-4444-555555555555\ntenant: 99999999-8888-7777-6666-555555555555\nlocation: eastus\nbaseDomain: example.com\nreleaseImage: quay.io/x:4.22.0-multi\npersistentResourceGroup: p\noidcIssuer: {{create: {{}}}}\nidentities: {{create: {{}}}}\nnetwork: {{create: {{}}}}\ntopology: Public\nmanagementCluster: {{subscription: 00000000-0000-0000-0000-00000000a0a0, loadBalancerResourceGroup: m, vnetId: /subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/m/providers/Microsoft.Network/virtualNetworks/v, context: admin}}\nnodePools: [{{name: workers, replicas: 2}}]\npullSecret: {}\nsshKey: {}\nonFailure: pause\n",
            pull.display(),
            ssh.display()
        );
        let file = dir.join("cluster.yaml");
        std::fs::write(&file, yaml).unwrap();
        let cfg = crate::config::load(&file).unwrap_or_else(|e| panic!("{e:?}"));
        let doc = document(&cfg);
        let text = doc.to_string();
        assert!(
            !text.contains("c2VjcmV0"),
            "no secret in the document: {text}"
        );
        assert!(
            doc["pullSecret"]["sha256"]
                .as_str()
                .is_some_and(|h| h.len() == 64)
        );
        assert!(
            doc.get("onFailure").is_none() && doc["managementCluster"].get("context").is_none()
        );
        // Moving a file is no change; changing its contents is.
        let moved = dir.join("moved.json");
        std::fs::copy(&pull, &moved).unwrap();
        let mut cfg2 = cfg.clone();
        cfg2.pull_secret = moved.clone();
        assert!(diff(&doc, &document(&cfg2)).is_empty());
        std::fs::write(&moved, r#"{"auths":{}}"#).unwrap();
        let d: Vec<String> = diff(&doc, &document(&cfg2))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            d,
            vec!["pullSecret: the file's contents changed".to_string()]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
