//! What `hcp-workflow verify` expects of a cluster: its layout and the file it
//! was last applied with, turned into the read-only checks of
//! [`hcp_activities::verify`]. The ledger's resources come from the caller (the journal).

use crate::config::{ClusterConfig, OidcIssuer, PrivateLinkManager};
use crate::layout::{CLUSTERS_NAMESPACE, Layout};
use hcp_activities::kube::render;
use hcp_activities::steps::hypershift_link::control_plane_namespace;
use hcp_activities::steps::node_pool::PoolManagement;
use hcp_activities::verify::{
    Expected, HyperShiftLinkCheck, Input, LinkManager, Pool, PrivateLink, REPAIR, SecretRef,
    VnetLink,
};
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
/// `link` is who made its private link, as its create recorded it: the file's
/// `privateLink.managedBy: auto` (the default) says only that the create decided, so the
/// file alone cannot choose the private-link checks.
pub fn input(
    cfg: &ClusterConfig,
    l: &Layout,
    link: PrivateLinkManager,
    expected: Vec<Expected>,
) -> Input {
    let private = cfg.topology.uses_private_link();
    let ours_link = private && link == PrivateLinkManager::HcpWorkflow;
    let hypershift_link = private && link == PrivateLinkManager::Hypershift;
    let allowed = crate::create_cluster::pls_subscriptions(cfg, l);
    let mut own_groups = vec![l.managed_rg.clone()];
    if l.network_created {
        own_groups.push(l.vnet_rg.clone());
        if !l.nsg_rg.eq_ignore_ascii_case(&l.vnet_rg) {
            own_groups.push(l.nsg_rg.clone());
        }
    }
    // The infra zone's link is always ours (create's `network.dns-link`); the private-link
    // zone's when hcp-workflow makes the private link (`pe-dns.link`). Both name the guest
    // VNet. HyperShift's links are read from its AzurePrivateLinkService at verify time.
    let mut vnet_links = vec![VnetLink {
        id: l.infra_link_id.clone(),
        vnet_id: l.vnet_id.clone(),
    }];
    if ours_link {
        vnet_links.push(VnetLink {
            id: l.pl_link_id.clone(),
            vnet_id: l.vnet_id.clone(),
        });
        // The published hostnames' zones: without one, no zone answers that name in the
        // guest VNet (the kubeconfig's API name on a Private cluster).
        vnet_links.extend(l.endpoint_zones.iter().map(|ez| VnetLink {
            id: ez.link_id.clone(),
            vnet_id: l.vnet_id.clone(),
        }));
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
            allowed: allowed.clone(),
            records: ["api", "*.apps"]
                .iter()
                .map(|r| format!("{}/A/{r}", l.pl_zone_id))
                .chain(
                    l.endpoint_zones
                        .iter()
                        .map(|ez| format!("{}/A/@", ez.zone_id)),
                )
                .collect(),
            manager: LinkManager::HcpWorkflow,
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
                management: PoolManagement::rendered(&crate::create_cluster::node_pool_input(
                    cfg, l, p,
                )),
            })
            .collect(),
        own_groups,
        signing_key_secret: l.secret("sa-token-issuer-key"),
        // Where the private link's service and NAT subnet live (none without one).
        mgmt_subscription: if private {
            l.mgmt_lb_rg
                .split('/')
                .nth(2)
                .unwrap_or_default()
                .to_string()
        } else {
            String::new()
        },
        hypershift_link: hypershift_link.then(|| HyperShiftLinkCheck {
            allowed,
            vnet_id: l.vnet_id.clone(),
        }),
        vnet_links,
        secrets: secrets(cfg, l),
    }
}

/// The Secrets the HostedCluster reads (`create_cluster::hosted_cluster_spec`), each with
/// what puts it back. HyperShift's operator copies the etcd key (same name) and the signing
/// key (`sa-signing-key`, key `service-account.key`) into the control-plane namespace on
/// every reconcile (`hypershift-operator/controllers/hostedcluster/
/// hostedcluster_controller.go`, release-4.22): while those copies exist, they hold the
/// keys the running control plane uses, and the fix copies them back. repair-cluster would
/// instead make new keys (create's `control-plane.secrets` and `oidc.key` generate one
/// when the Secret is missing): a new etcd key cannot decrypt what etcd already holds,
/// and a new signing key invalidates every token signed with the old one.
fn secrets(cfg: &ClusterConfig, l: &Layout) -> Vec<SecretRef> {
    let ns = CLUSTERS_NAMESPACE;
    let cp = control_plane_namespace(ns, &l.name);
    let label = format!(
        "kubectl label secret -n {ns} {{name}} {}={} {}={}",
        hcp_activities::kube::LABEL_CLUSTER,
        l.name,
        hcp_activities::kube::LABEL_INFRA_ID,
        l.infra_id
    );
    // Recreate Secret `name` (key `key`) from the copy `copy` (key `from`) in the
    // control-plane namespace, then label it as ours.
    let restore = |name: &str, key: &str, copy: &str, from: &str| {
        format!(
            "copy it back from HyperShift's copy: kubectl get secret -n {cp} {copy} -o jsonpath='{{.data.{}}}' | base64 -d > key && kubectl create secret generic -n {ns} {name} --from-file={key}=key && rm key && {}; not repair-cluster, which would generate a new key",
            from.replace('.', "\\."),
            label.replace("{name}", name)
        )
    };
    let mut out = vec![
        SecretRef {
            name: l.secret("pull-secret"),
            field: "spec.pullSecret".into(),
            fix: format!("{REPAIR} (writes it again from the file's pullSecret)"),
        },
        SecretRef {
            name: l.secret("ssh-key"),
            field: "spec.sshKey".into(),
            fix: format!("{REPAIR} (writes it again from the file's sshKey)"),
        },
    ];
    let sa = l.secret("sa-token-issuer-key");
    out.push(SecretRef {
        field: "spec.serviceAccountSigningKey".into(),
        fix: match &cfg.oidc_issuer {
            OidcIssuer::Existing(_) => format!(
                "{REPAIR} (writes it again from the file's oidcIssuer.existing.signingKey)"
            ),
            OidcIssuer::Create(_) => format!(
                "{} (it would also publish the new key's JWKS: tokens signed with the old key stop being accepted)",
                restore(&sa, render::SA_SIGNING_KEY_KEY, "sa-signing-key", "service-account.key")
            ),
        },
        name: sa,
    });
    // With KMS the HostedCluster names a Key Vault key, and no etcd key Secret.
    if cfg.control_plane.kms.is_none() {
        let etcd = l.secret("etcd-encryption-key");
        out.push(SecretRef {
            field: "spec.secretEncryption.aescbc.activeKey".into(),
            fix: format!(
                "{} (a new key cannot decrypt what etcd already holds)",
                restore(&etcd, render::ETCD_KEY_KEY, &etcd, render::ETCD_KEY_KEY)
            ),
            name: etcd,
        });
    }
    out
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
        let input = input(&back, &l, back.private_link.managed_by, Vec::new());
        assert_eq!(input.pools.len(), cfg.node_pools.len());
        assert!(input.own_groups.contains(&l.managed_rg));
        assert!(config_from_applied(&serde_json::json!([1])).is_err());
    }

    #[test]
    fn the_checks_follow_who_makes_the_private_link_and_name_the_secrets_the_cluster_reads() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let cfg = crate::config::load(&root.join("cluster.yaml")).map_err(|e| e.to_string());
        let Ok(mut cfg) = cfg else {
            panic!("examples/cluster.yaml loads: {cfg:?}");
        };
        assert!(cfg.topology.uses_private_link());
        let l = Layout::new(&cfg, "demo-x7k2p", true);
        let mgmt_sub = l.mgmt_lb_rg.split('/').nth(2).map(str::to_string);

        // The file says `auto`: what the create recorded decides.
        assert_eq!(cfg.private_link.managed_by, PrivateLinkManager::Auto);
        let ours = input(&cfg, &l, PrivateLinkManager::HcpWorkflow, Vec::new());
        assert!(ours.private_link.is_some() && ours.hypershift_link.is_none());
        // The infra zone's, the private-link zone's, and one per published hostname's zone
        // (`api-demo.…`, `oauth-demo.…`): each must answer in the guest VNet.
        let links: Vec<&str> = ours.vnet_links.iter().map(|v| v.id.as_str()).collect();
        let mut want = vec![l.infra_link_id.as_str(), l.pl_link_id.as_str()];
        want.extend(l.endpoint_zones.iter().map(|ez| ez.link_id.as_str()));
        assert_eq!(links, want);
        assert_eq!(l.endpoint_zones.len(), 2, "api and oauth");
        assert!(ours.vnet_links.iter().all(|v| v.vnet_id == l.vnet_id));
        assert_eq!(Some(ours.mgmt_subscription.clone()), mgmt_sub);

        let hs = input(&cfg, &l, PrivateLinkManager::Hypershift, Vec::new());
        assert!(hs.private_link.is_none());
        let Some(h) = &hs.hypershift_link else {
            panic!("HyperShift's private link is checked");
        };
        assert_eq!(
            h.allowed,
            crate::create_cluster::pls_subscriptions(&cfg, &l)
        );
        assert_eq!(h.vnet_id, l.vnet_id);
        // HyperShift's own links are read from its AzurePrivateLinkService, not the layout.
        let links: Vec<&str> = hs.vnet_links.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(links, [l.infra_link_id.as_str()]);

        let names: Vec<&str> = hs.secrets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "demo-pull-secret",
                "demo-ssh-key",
                "demo-sa-token-issuer-key",
                "demo-etcd-encryption-key"
            ]
        );
        assert_eq!(hs.signing_key_secret, "demo-sa-token-issuer-key");
        // What the file holds, repair writes again; a generated key only comes back from
        // HyperShift's copy.
        assert!(hs.secrets[0].fix.contains("repair-cluster"));
        let etcd = &hs.secrets[3].fix;
        assert!(
            etcd.contains("kubectl get secret -n clusters-demo demo-etcd-encryption-key"),
            "{etcd}"
        );
        assert!(hs.secrets[2].fix.contains("sa-signing-key"));
        assert!(hs.secrets[2].fix.contains(r"{.data.service-account\.key}"));

        cfg.control_plane.kms = serde_json::from_value(serde_json::json!({
            "keyId": "https://v.vault.azure.net/keys/k/1",
            "credentialsSecretName": "kms-creds",
        }))
        .ok();
        assert!(cfg.control_plane.kms.is_some());
        let kms = input(&cfg, &l, PrivateLinkManager::Hypershift, Vec::new());
        assert!(
            kms.secrets
                .iter()
                .all(|s| s.name != "demo-etcd-encryption-key")
        );

        cfg.topology = crate::config::Topology::Public;
        let public = input(&cfg, &l, PrivateLinkManager::HcpWorkflow, Vec::new());
        assert!(public.private_link.is_none() && public.hypershift_link.is_none());
        assert_eq!(public.mgmt_subscription, "");
        assert_eq!(public.vnet_links.len(), 1);
    }
}
