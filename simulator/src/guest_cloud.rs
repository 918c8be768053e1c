//! The guest cluster's cloud controller, and HyperShift's cloud cleanup on delete.
//!
//! A running guest cluster writes into Azure on its own: the cloud provider
//! (kubernetes-sigs/cloud-provider-azure, `pkg/provider/azure_loadbalancer.go` and
//! `pkg/provider/securitygroup/`) opens the default ingress router's LoadBalancer ports in
//! the cluster's network security group (`spec.platform.azure.securityGroupID`) with rules
//! named `k8s-azure-lb_allow_IPv4_<hash>`. The simulator models that much: once a
//! HostedCluster is `Available`, one rule for TCP 80 and 443 from `Internet` is added to
//! its NSG — which may be a bring-your-own NSG hcp-workflow never deletes.
//!
//! On deletion, HyperShift removes what the guest made only when the HostedCluster carries
//! `hypershift.openshift.io/cleanup-cloud-resources: "true"` (`hyperv1.CleanupCloudResourcesAnnotation`,
//! `api/hypershift/v1beta1/hostedcluster_types.go`; `hypershift destroy cluster` sets it in
//! `cmd/cluster/core/destroy.go`). The HyperShift operator propagates it to the
//! HostedControlPlane (`hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`),
//! whose deletion waits for the hosted cluster config operator to delete the guest's
//! LoadBalancer services, PVs and registry storage and report `CloudResourcesDestroyed`
//! (`control-plane-operator/hostedclusterconfigoperator/controllers/resources/resources.go`
//! `destroyCloudResources`: `True`, reason `CloudResourcesDestroyed`, "All guest resources
//! destroyed"), bubbled up to the HostedCluster. Without the annotation nothing is removed
//! and no such condition appears: the rules stay in the NSG.
//!
//! This runs before the operator's deletion handling in the same tick, so the finalizer is
//! only dropped after the cleanup, as HyperShift orders it.

use serde_json::{Value, json};

use crate::kube::{HYPERSHIFT, kind_by_key, store};
use crate::operator::{condition_true, objects, set_condition};
use crate::sim::Simulator;
use crate::state::State;
use crate::util::str_at;

/// The annotation HyperShift's cleanup keys on.
pub(crate) const CLEANUP_ANNOTATION: &str = "hypershift.openshift.io/cleanup-cloud-resources";

/// A stable rule name per cluster (cloud-provider-azure hashes the service; any stable
/// 8 hex digits do here).
fn rule_name(ns: &str, name: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in format!("{ns}/{name}/openshift-ingress/router-default").bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("k8s-azure-lb_allow_IPv4_{h:08x}")
}

fn nsg_rules<'a>(st: &'a mut State, nsg_key: &str) -> Option<&'a mut Vec<Value>> {
    let nsg = st.arm.get_mut(nsg_key)?;
    let props = crate::util::obj_mut(&mut nsg.body, "properties");
    let rules = props
        .entry("securityRules")
        .or_insert_with(|| Value::Array(Vec::new()));
    rules.as_array_mut()
}

pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let key = format!("{HYPERSHIFT}/hostedclusters");
    let Some(kind) = kind_by_key(&key) else {
        return false;
    };
    let hcs = objects(st, &key);
    let live: Vec<String> = hcs.iter().map(|(ns, n, _)| format!("{ns}/{n}")).collect();
    st.guest_cloud.retain(|k, _| live.contains(k));
    let mut changed = false;
    for (ns, name, mut obj) in hcs {
        let k = format!("{ns}/{name}");
        let mut g = st.guest_cloud.get(&k).cloned().unwrap_or_default();
        if store::is_deleting(&obj) {
            if crate::operator::cleanup_requested(&obj) && !g.cleaned {
                if let Some(nsg) = g.nsg.clone()
                    && let Some(rules) = nsg_rules(st, &nsg)
                {
                    rules.retain(|r| {
                        !r.get("name")
                            .and_then(Value::as_str)
                            .is_some_and(|n| g.rules.iter().any(|x| x == n))
                    });
                }
                g.rules.clear();
                g.cleaned = true;
                if set_condition(
                    &mut obj,
                    "CloudResourcesDestroyed",
                    true,
                    "CloudResourcesDestroyed",
                    "All guest resources destroyed",
                    now,
                ) {
                    store::update(sim, st, kind, &ns, obj);
                }
                changed = true;
            }
            st.guest_cloud.insert(k, g);
            continue;
        }
        if g.nsg.is_none() && condition_true(&obj, "Available") {
            let Some(nsg_id) = str_at(&obj, "/spec/platform/azure/securityGroupID") else {
                continue;
            };
            let nsg_key = nsg_id.to_ascii_lowercase();
            let rule = rule_name(&ns, &name);
            let rule_id = format!("{nsg_id}/securityRules/{rule}");
            if let Some(rules) = nsg_rules(st, &nsg_key) {
                if !rules
                    .iter()
                    .any(|r| r.get("name").and_then(Value::as_str) == Some(rule.as_str()))
                {
                    rules.push(json!({
                        "name": rule,
                        "id": rule_id,
                        "type": "Microsoft.Network/networkSecurityGroups/securityRules",
                        "properties": {
                            "protocol": "Tcp",
                            "sourcePortRange": "*",
                            "destinationPortRanges": ["80", "443"],
                            "sourceAddressPrefix": "Internet",
                            "destinationAddressPrefix": "*",
                            "access": "Allow",
                            "priority": 500,
                            "direction": "Inbound",
                        }
                    }));
                }
                g.nsg = Some(nsg_key);
                g.rules = vec![rule];
                st.guest_cloud.insert(k, g);
                changed = true;
            }
        }
    }
    changed
}
