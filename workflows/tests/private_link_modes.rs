//! `privateLink.managedBy`: which stages each mode builds.
#![allow(clippy::unwrap_used)]

use hcp_runtime::SagaDag;
use hcp_workflows::config::{self, ClusterConfig, PrivateLinkManager, Topology};
use hcp_workflows::layout::Layout;
use hcp_workflows::{create_cluster, delete_cluster};
use std::path::Path;

fn example(mode: PrivateLinkManager, topology: Topology) -> ClusterConfig {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
    let mut cfg = config::load(&p).unwrap();
    cfg.private_link.managed_by = mode;
    cfg.topology = topology;
    cfg
}

fn actions(dag: &SagaDag) -> Vec<&str> {
    dag.nodes.iter().map(|n| n.action.as_str()).collect()
}

fn node<'a>(dag: &'a SagaDag, action: &str) -> &'a hcp_runtime::dag::NodeSpec {
    dag.nodes
        .iter()
        .find(|n| n.action == action)
        .unwrap_or_else(|| panic!("no {action}"))
}

fn depends(dag: &SagaDag, later: &str, earlier: &str) -> bool {
    let mut todo = vec![later.to_string()];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(x) = todo.pop() {
        for d in &dag.nodes.iter().find(|n| n.name == x).unwrap().deps {
            if d == earlier {
                return true;
            }
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    false
}

const OURS: [&str; 3] = [
    "azure.private-link-service.ensure",
    "azure.private-endpoint.ensure",
    "azure.private-dns-a-record.ensure",
];

#[test]
fn hypershift_mode_waits_on_hypershift_instead_of_making_the_private_link() {
    for topology in [Topology::Private, Topology::PublicAndPrivate] {
        let cfg = example(PrivateLinkManager::Hypershift, topology);
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = create_cluster::build(&cfg, &l).unwrap();
        let a = actions(&dag);
        for ours in OURS {
            assert!(
                !a.contains(&ours),
                "{topology:?}: {ours} built in hypershift mode"
            );
        }
        // No zone of ours named like HyperShift's `<name>.hypershift.local`.
        assert!(
            dag.nodes
                .iter()
                .all(|n| n.input["id"] != l.pl_zone_id.as_str())
        );
        let pls = node(&dag, "hypershift.private-link-service.wait");
        let pe = node(&dag, "hypershift.private-endpoint.wait");
        let hc = node(&dag, "k8s.hosted-cluster.apply");
        let avail = node(&dag, "k8s.condition.wait");
        assert!(depends(&dag, &pls.name, &hc.name));
        assert!(depends(&dag, &pe.name, &pls.name));
        assert!(depends(&dag, &avail.name, &pe.name));
        // The HostedCluster's undo tears HyperShift's link down in order.
        assert!(hc.input["hypershift_private_link"]["mgmt_azure"].is_object());
        // Our NAT subnet is still ours (HyperShift uses the one the HostedCluster names).
        assert!(a.contains(&"azure.nat-subnet.ensure"));
        // Budgets: the waits get the availability budget; no undo.
        assert_eq!(pls.retry.wait_budget_ms, 45 * 60 * 1000, "{:?}", pls.retry);
    }
}

#[test]
fn hcp_workflow_mode_and_an_unresolved_auto_build_todays_stages() {
    for mode in [PrivateLinkManager::HcpWorkflow, PrivateLinkManager::Auto] {
        let cfg = example(mode, Topology::Private);
        let l = Layout::new(&cfg, "demo-x1y2z", true);
        let dag = create_cluster::build(&cfg, &l).unwrap();
        let a = actions(&dag);
        for ours in OURS {
            assert!(a.contains(&ours), "{mode:?}: {ours} missing");
        }
        assert!(!a.iter().any(|x| x.starts_with("hypershift.")), "{a:?}");
        assert!(node(&dag, "k8s.hosted-cluster.apply").input["hypershift_private_link"].is_null());
        let d = delete_cluster::build(&cfg, &l, Default::default()).unwrap();
        assert!(actions(&d).contains(&"azure.private-link-service.delete"));
    }
}

#[test]
fn hypershift_mode_delete_releases_connections_before_the_hosted_cluster_and_verifies_after() {
    let cfg = example(PrivateLinkManager::Hypershift, Topology::Private);
    let l = Layout::new(&cfg, "demo-x1y2z", true);
    let dag = delete_cluster::build(&cfg, &l, Default::default()).unwrap();
    let a = actions(&dag);
    for never in [
        "azure.private-link-service.delete",
        "azure.private-endpoint.delete",
        "azure.private-dns-a-record.delete",
    ] {
        assert!(
            !a.contains(&never),
            "{never} would touch HyperShift's resources"
        );
    }
    assert!(
        dag.nodes
            .iter()
            .all(|n| n.input["id"] != l.pl_zone_id.as_str())
    );
    let hc = dag
        .nodes
        .iter()
        .find(|n| n.action == "k8s.object.delete" && n.input["kind"] == "HostedCluster")
        .unwrap();
    let release = node(&dag, "hypershift.private-link.release");
    let gone = node(&dag, "hypershift.private-link.verify-gone");
    assert!(depends(&dag, &hc.name, &release.name));
    assert!(depends(&dag, &gone.name, &hc.name));
    assert_eq!(release.retry.wait_budget_ms, 30 * 60 * 1000);
}
