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
//! Once the release has rolled out, the guest's storage operators make their own resources
//! in the cluster's managed resource group ([`guest_storage`]), tagged as their code tags
//! them: the image registry's storage account (openshift/cluster-image-registry-operator
//! `pkg/storage/azure/azure.go`: `kubernetes.io_cluster.<infraID>: owned`, the infra id
//! being the HostedControlPlane's, `support/globalconfig/infrastructure.go`) and a
//! persistent volume's managed disk (kubernetes-sigs/azuredisk-csi-driver
//! `pkg/azuredisk/azure_managedDiskController.go`: `k8s-azure-created-by:
//! kubernetes-azure-dd`; `pkg/azureutils/azure_disk_utils.go`: the
//! `kubernetes.io-created-for-pv-name` / `-pvc-name` / `-pvc-namespace` tags, which
//! OpenShift's CSI operator turns on with `--extra-create-metadata`). The internal load
//! balancer carries no tag: cloud-provider-azure tags load balancers only with the cloud
//! config's `tags`, which HyperShift's cloud config does not set; it is known by its name.
//! The cleanup removes them.
//!
//! This runs before the operator's deletion handling in the same tick, so the finalizer is
//! only dropped after the cleanup, as HyperShift orders it.

use serde_json::{Value, json};

use crate::conditions::{condition_true, objects, set_condition};
use crate::kube::{HYPERSHIFT, kind_by_key, store};
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
    let live: std::collections::BTreeSet<String> =
        hcs.iter().map(|(ns, n, _)| format!("{ns}/{n}")).collect();
    st.guest_cloud.retain(|k, _| live.contains(k));
    let mut changed = false;
    for (ns, name, obj) in hcs {
        let k = format!("{ns}/{name}");
        let mut g = st.guest_cloud.get(&k).cloned().unwrap_or_default();
        if store::is_deleting(&obj) {
            if crate::conditions::cleanup_requested(&obj) && !g.cleaned {
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
                if let Some(ilb) = g.ilb.take() {
                    crate::arm::store::remove_tree(st, &ilb);
                }
                for id in std::mem::take(&mut g.storage) {
                    crate::arm::store::remove_tree(st, &id);
                }
                g.cleaned = true;
                let mut obj = Value::clone(&obj);
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
        if g.ilb.is_none()
            && condition_true(&obj, "Available")
            && str_at(&obj, "/spec/platform/azure/topology") == Some("Private")
            && let Some(ilb) = ingress_ilb(sim, st, now, &obj)
        {
            g.ilb = Some(ilb);
            st.guest_cloud.insert(k.clone(), g.clone());
            changed = true;
        }
        if g.storage.is_empty()
            && obj
                .pointer("/status/version/history/0/completionTime")
                .and_then(Value::as_str)
                .is_some()
        {
            let made = guest_storage(sim, st, now, &obj);
            if !made.is_empty() {
                g.storage = made;
                st.guest_cloud.insert(k.clone(), g.clone());
                changed = true;
            }
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

/// A Private guest's default ingress controller is published on an *internal* load
/// balancer: HyperShift gives a private cluster's ingress the `Internal` endpoint scope, and
/// the guest's cloud provider makes `<infraID>-internal` in the cluster's managed resource
/// group (cloud-provider-azure `getAzureLoadBalancerName`, internal suffix `-internal`),
/// its frontend an IP of the guest subnet. It lives in the managed group, so a delete
/// without the cloud cleanup removes it with the group. Returns its lower-cased id.
fn ingress_ilb(sim: &Simulator, st: &mut State, now: u64, hc: &Value) -> Option<String> {
    let sub = str_at(hc, "/spec/platform/azure/subscriptionID")?;
    let rg = str_at(hc, "/spec/platform/azure/resourceGroup")?;
    let subnet = str_at(hc, "/spec/platform/azure/subnetID")?.to_string();
    let infra = str_at(hc, "/spec/infraID")?;
    let location = str_at(hc, "/spec/platform/azure/location").unwrap_or("eastus");
    let rg_id = format!("/subscriptions/{sub}/resourceGroups/{rg}");
    st.arm.get(&rg_id.to_ascii_lowercase())?;
    st.arm.get(&subnet.to_ascii_lowercase())?;
    let id = format!("{rg_id}/providers/Microsoft.Network/loadBalancers/{infra}-internal");
    let key = id.to_ascii_lowercase();
    if !st.arm.contains_key(&key) {
        let ip = crate::arm::store::alloc_ip(st, &subnet);
        let body = json!({
            "location": location,
            "sku": {"name": "Standard", "tier": "Regional"},
            "properties": {
                "frontendIPConfigurations": [{
                    "name": "a-router-default", "id": format!("{id}/frontendIPConfigurations/a-router-default"),
                    "type": "Microsoft.Network/loadBalancers/frontendIPConfigurations",
                    "properties": {"privateIPAddress": ip, "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet}},
                }],
                "backendAddressPools": [], "loadBalancingRules": [], "probes": [], "inboundNatRules": [], "inboundNatPools": [], "outboundRules": [],
            }
        });
        crate::arm::store::insert_internal(sim, st, now, &id, crate::arm::types::LB, &rg_id, body);
    }
    Some(key)
}

/// The image registry's storage account and one persistent volume's disk, made by the
/// guest's operators in the managed resource group once the release runs (see the module
/// docs for the code each is modelled on). Returns their lower-cased ids.
fn guest_storage(sim: &Simulator, st: &mut State, now: u64, hc: &Value) -> Vec<String> {
    let (Some(sub), Some(rg), Some(infra)) = (
        str_at(hc, "/spec/platform/azure/subscriptionID"),
        str_at(hc, "/spec/platform/azure/resourceGroup"),
        str_at(hc, "/spec/infraID"),
    ) else {
        return Vec::new();
    };
    let location = str_at(hc, "/spec/platform/azure/location").unwrap_or("eastus");
    let rg_id = format!("/subscriptions/{sub}/resourceGroups/{rg}");
    if !st.arm.contains_key(&rg_id.to_ascii_lowercase()) {
        return Vec::new();
    }
    // `generateAccountName`: "imageregistry" + the infra id's letters and digits, cut to
    // Azure's 24 characters (the operator appends random characters when that is taken).
    let alnum: String = infra
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let account: String = format!("imageregistry{alnum}").chars().take(24).collect();
    let account_id = format!("{rg_id}/providers/Microsoft.Storage/storageAccounts/{account}");
    crate::arm::store::insert_internal(
        sim,
        st,
        now,
        &account_id,
        crate::arm::types::STORAGE_ACCOUNT,
        &rg_id,
        json!({
            "location": location,
            "kind": "StorageV2",
            "sku": {"name": "Standard_LRS", "tier": "Standard"},
            "tags": {format!("kubernetes.io_cluster.{infra}"): "owned"},
            "properties": {"provisioningState": "Succeeded", "minimumTlsVersion": "TLS1_2"},
        }),
    );
    let h = crate::machines::fnv(&format!("{infra}/prometheus-data"));
    let pv = format!("pvc-{h:08x}-5b1c-4c5e-9d3a-7e2f0c4b8a61");
    let disk_id = format!("{rg_id}/providers/Microsoft.Compute/disks/{pv}");
    crate::arm::store::insert_internal(
        sim,
        st,
        now,
        &disk_id,
        crate::machines::DISK,
        &rg_id,
        json!({
            "location": location,
            "sku": {"name": "Premium_LRS"},
            "tags": {
                "k8s-azure-created-by": "kubernetes-azure-dd",
                "kubernetes.io-created-for-pv-name": pv,
                "kubernetes.io-created-for-pvc-name": "prometheus-data-prometheus-k8s-0",
                "kubernetes.io-created-for-pvc-namespace": "openshift-monitoring",
            },
            "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 100,
                "provisioningState": "Succeeded", "diskState": "Unattached"},
        }),
    );
    vec![
        account_id.to_ascii_lowercase(),
        disk_id.to_ascii_lowercase(),
    ]
}
