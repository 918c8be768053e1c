//! What `hcp-workflow verify` expects of a cluster (issue 25): its layout and the file it
//! was last applied with, turned into the read-only checks of
//! [`hcp_activities::verify`]. The ledger's resources come from the caller (the journal).

use crate::config::{ClusterConfig, PrivateLinkManager};
use crate::layout::{CLUSTERS_NAMESPACE, Layout};
use hcp_activities::verify::{Expected, Input, Pool, PrivateLink};
use serde_json::Value;

/// The cluster file a last applied configuration ([`crate::applied::document`]) describes.
/// The files it names (pull secret, SSH key, …) are only hashes there: they come back as
/// placeholder paths, which verify never reads.
///
/// # Errors
/// The document does not describe a cluster file (a journal from another version).
pub fn config_from_applied(doc: &Value) -> Result<ClusterConfig, String> {
    let mut doc = doc.clone();
    let Some(m) = doc.as_object_mut() else {
        return Err("the applied configuration is not an object".into());
    };
    for key in ["pullSecret", "sshKey"] {
        m.insert(
            key.into(),
            Value::String(format!("(journaled as a hash: {key})")),
        );
    }
    if let Some(Value::Object(ids)) = m.get_mut("identities")
        && let Some(Value::Object(existing)) = ids.get_mut("existing")
        && existing.contains_key("file")
    {
        existing.insert("file".into(), Value::String("(journaled as a hash)".into()));
    }
    if let Some(Value::Object(oidc)) = m.get_mut("oidcIssuer")
        && let Some(Value::Object(existing)) = oidc.get_mut("existing")
        && existing.contains_key("signingKey")
    {
        existing.insert(
            "signingKey".into(),
            Value::String("(journaled as a hash)".into()),
        );
    }
    serde_json::from_value(doc)
        .map_err(|e| format!("the applied configuration does not read as a cluster file: {e}"))
}

/// The checks of cluster `cfg` (laid out as `l`) over the resources its ledger holds.
pub fn input(cfg: &ClusterConfig, l: &Layout, expected: Vec<Expected>) -> Input {
    let ours_link = cfg.topology.uses_private_link()
        && cfg.private_link.managed_by == PrivateLinkManager::HcpWorkflow;
    let allowed = crate::create_cluster::pls_subscriptions(cfg, l);
    let mut own_groups = vec![l.managed_rg.clone()];
    if l.network_created {
        own_groups.push(l.vnet_rg.clone());
        if !l.nsg_rg.eq_ignore_ascii_case(&l.vnet_rg) {
            own_groups.push(l.nsg_rg.clone());
        }
    }
    Input {
        cluster: l.name.clone(),
        infra_id: l.infra_id.clone(),
        azure: l.azure.clone(),
        mgmt_azure: l.mgmt_azure.clone(),
        mgmt: l.mgmt.clone(),
        expected,
        issuer_url: l.issuer_url.clone(),
        private_link: ours_link.then(|| PrivateLink {
            pls_id: l.pls_id.clone(),
            pe_id: l.pe_id.clone(),
            allowed,
            records: ["api", "*.apps"]
                .iter()
                .map(|r| format!("{}/A/{r}", l.pl_zone_id))
                .collect(),
        }),
        namespace: CLUSTERS_NAMESPACE.into(),
        pools: cfg
            .node_pools
            .iter()
            .map(|p| Pool {
                name: format!("{}-{}", l.name, p.name),
                replicas: match p.auto_scaling {
                    Some(a) => Err((a.min, a.max)),
                    None => Ok(p.desired_replicas()),
                },
            })
            .collect(),
        own_groups,
        signing_key_secret: l.secret("sa-token-issuer-key"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_applied_configuration_reads_back_as_the_cluster_file_without_its_secrets() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let cfg = crate::config::load(&root.join("cluster.yaml")).map_err(|e| e.to_string());
        let Ok(cfg) = cfg else {
            panic!("examples/cluster.yaml loads: {cfg:?}");
        };
        let doc = crate::applied::document(&cfg);
        let back = config_from_applied(&doc);
        let Ok(back) = back else {
            panic!("reads back: {back:?}");
        };
        assert_eq!(back.name, cfg.name);
        assert_eq!(back.node_pools, cfg.node_pools);
        assert_eq!(back.topology, cfg.topology);
        assert!(back.pull_secret.to_string_lossy().contains("hash"));
        let l = Layout::new(&back, "demo-x7k2p", true);
        let input = input(&back, &l, Vec::new());
        assert_eq!(input.pools.len(), cfg.node_pools.len());
        assert!(input.own_groups.contains(&l.managed_rg));
        assert!(config_from_applied(&serde_json::json!([1])).is_err());
    }
}
