//! Day-2 changes of a running cluster, as HyperShift and CAPI/CAPZ carry them out: NodePool
//! scale (VMs, NICs and OS disks in the managed resource group), autoscaling, platform
//! change, auto-repair, release upgrade and version skew, the regional vCPU quota, and control-plane
//! upgrades (history, y-stream downgrade refusal, a stalled upgrade).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::*;
use hcp_simulator::{InventoryItem, Simulator};
use serde_json::{Value, json};

const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const VM: &str = "Microsoft.Compute/virtualMachines";
const NIC: &str = "Microsoft.Network/networkInterfaces";
const DISK: &str = "Microsoft.Compute/disks";

/// Model durations at 1/500: a node joins 0.6 s after its VM, a deleted machine goes
/// 0.12 s after, a release rolls out in 0.6 s, the CVO's 40 minutes are 4.8 s.
fn day2_sim() -> Simulator {
    let mut c = config();
    c.time_scale = 0.002;
    Simulator::new(c).unwrap()
}

fn release(v: &str) -> String {
    format!("quay.io/openshift-release-dev/ocp-release:{v}-multi")
}

/// What the guest's CVO reports running for tag `release(v)`: HyperShift resolves the tag
/// to its digest first (`cvo/deployment.go` `discoverCVOReleaseImages`); the simulated
/// registry's digest of a tag is the SHA-256 of the reference.
fn resolved(v: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(release(v).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("quay.io/openshift-release-dev/ocp-release@sha256:{hex}")
}

fn subnet(name: &str) -> String {
    format!(
        "{}/providers/Microsoft.Network/virtualNetworks/{name}-vnet/subnets/default",
        rg_path(&format!("{name}-net"))
    )
}

fn hosted_cluster(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": "clusters"},
        "spec": {
            "infraID": format!("{name}-infra"),
            "platform": {"type": "Azure", "azure": {
                "location": "eastus", "resourceGroup": format!("{name}-mrg"), "subscriptionID": SUB,
                "subnetID": subnet(name), "topology": "Public"}},
            "release": {"image": release(version)},
            "dns": {"baseDomain": "example.com"},
            "services": [{"service": "APIServer", "servicePublishingStrategy": {"type": "LoadBalancer"}}],
        }
    })
}

/// A NodePool as hcp-workflow renders one: `replicas`, or `autoScaling` instead.
fn node_pool(cluster: &str, version: &str, size: &str, size_spec: Value) -> Value {
    let mut spec = json!({
        "clusterName": cluster,
        "management": {"autoRepair": false, "upgradeType": "Replace"},
        "platform": {"type": "Azure", "azure": {
            "vmSize": size,
            "image": {"type": "AzureMarketplace", "azureMarketplace": {
                "publisher": "azureopenshift", "offer": "aro4", "sku": "422-v2", "version": "422.6.20250701"}},
            "osDisk": {"sizeGiB": 128, "diskStorageAccountType": "Premium_LRS"},
            "subnetID": subnet(cluster)}},
        "release": {"image": release(version)},
    });
    for (k, v) in size_spec.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": "workers", "namespace": "clusters"}, "spec": spec})
}

/// Namespace, managed resource group and guest network of cluster `name`, then the
/// HostedCluster.
async fn cluster(sim: &Simulator, name: &str, version: &str) {
    let r = call(
        sim,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "clusters"}})),
    )
    .await;
    assert!(r.status == 201 || r.status == 409, "{r:?}");
    create_rg(sim, &format!("{name}-mrg")).await;
    create_rg(sim, &format!("{name}-net")).await;
    put_ok(
        sim,
        &format!(
            "{}/providers/Microsoft.Network/virtualNetworks/{name}-vnet?{NET}",
            rg_path(&format!("{name}-net"))
        ),
        json!({"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "default", "properties": {"addressPrefix": "10.0.0.0/24"}}]}}),
    )
    .await;
    let r = apply(sim, &format!("{HC}/{name}"), &hosted_cluster(name, version)).await;
    assert_eq!(r.status, 201, "{r:?}");
}

/// ARM resources of `rtype` in resource group `rg` (from `GET /_sim/inventory`).
fn arm_in(sim: &Simulator, rtype: &str, rg: &str) -> Vec<InventoryItem> {
    let rg = format!("/resourcegroups/{rg}/").to_ascii_lowercase();
    let mut v: Vec<InventoryItem> = sim
        .inventory()
        .into_iter()
        .filter(|i| i.rtype == rtype && i.id.to_ascii_lowercase().contains(&rg))
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

fn names(items: &[InventoryItem]) -> Vec<String> {
    items.iter().map(|i| i.name.clone()).collect()
}

/// The machines' OS disks in `rg` (CAPZ names them `<vm>_OSDisk`): the guest's own disks
/// (a PersistentVolume's `pvc-…`) are there too.
fn os_disks(sim: &Simulator, rg: &str) -> Vec<InventoryItem> {
    arm_in(sim, DISK, rg)
        .into_iter()
        .filter(|d| d.name.ends_with("_OSDisk"))
        .collect()
}

async fn wait_machines(sim: &Simulator, rg: &str, vms: usize, nics: usize) {
    for _ in 0..1000 {
        if arm_in(sim, VM, rg).len() == vms
            && arm_in(sim, NIC, rg).len() == nics
            && os_disks(sim, rg).len() == vms
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "expected {vms} VMs/disks and {nics} NICs in {rg}: {:?} / {:?} / {:?}",
        names(&arm_in(sim, VM, rg)),
        names(&arm_in(sim, NIC, rg)),
        names(&os_disks(sim, rg))
    );
}

async fn pool_at(sim: &Simulator, replicas: u64) -> Resp {
    wait_until(
        sim,
        &format!("{NP}/workers"),
        &format!("Ready with {replicas} replicas"),
        |r| {
            status(r, "Ready").as_deref() == Some("True")
                && r.body["status"]["replicas"] == replicas
        },
    )
    .await
}

#[tokio::test]
async fn scaling_converges_with_vms_nics_and_disks_in_the_managed_group() {
    let sim = day2_sim();
    cluster(&sim, "demo", "4.22.0").await;
    let np = node_pool("demo", "4.22.0", "Standard_D4s_v5", json!({"replicas": 2}));
    assert_eq!(apply(&sim, &format!("{NP}/workers"), &np).await.status, 201);
    let r = pool_at(&sim, 2).await;
    assert_eq!(r.body["status"]["version"], "4.22.0");
    assert_eq!(status(&r, "UpdatingVersion").as_deref(), Some("False"));
    assert_eq!(status(&r, "AutoscalingEnabled").as_deref(), Some("False"));
    assert_eq!(status(&r, "AllMachinesReady").as_deref(), Some("True"));
    assert_eq!(
        message(&r, "ValidReleaseImage"),
        format!("Using release image: {}", release("4.22.0"))
    );
    wait_machines(&sim, "demo-mrg", 2, 2).await;

    // CAPZ's resources per machine: `<machine>`, `<machine>-nic`, `<machine>_OSDisk`,
    // CAPZ's tags on the VM and NIC.
    let vms = arm_in(&sim, VM, "demo-mrg");
    for vm in &vms {
        assert!(vm.name.starts_with("workers-"), "{}", vm.name);
        assert_eq!(vm.name.len(), "workers-".len() + 11, "{}", vm.name);
        assert_eq!(
            vm.tags,
            json!({"sigs.k8s.io_cluster-api-provider-azure_cluster_demo-infra": "owned",
                "sigs.k8s.io_cluster-api-provider-azure_role": "node", "Name": vm.name})
        );
        assert_eq!(
            vm.id,
            format!(
                "{}/providers/Microsoft.Compute/virtualMachines/{}",
                rg_path("demo-mrg"),
                vm.name
            )
        );
    }
    let nics = arm_in(&sim, NIC, "demo-mrg");
    assert_eq!(
        names(&nics),
        vms.iter()
            .map(|v| format!("{}-nic", v.name))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        nics[0].tags,
        json!({"sigs.k8s.io_cluster-api-provider-azure_cluster_demo-infra": "owned", "Name": nics[0].name})
    );
    assert_eq!(
        names(&arm_in(&sim, DISK, "demo-mrg")),
        vms.iter()
            .map(|v| format!("{}_OSDisk", v.name))
            .collect::<Vec<_>>()
    );
    // The NIC is a real ARM NIC in the pool's subnet; the generic list shows the VMs.
    let nic = call(&sim, "GET", &format!("{}?{NET}", nics[0].id), None).await;
    assert_eq!(nic.status, 200, "{nic:?}");
    assert_eq!(
        nic.body["properties"]["ipConfigurations"][0]["properties"]["subnet"]["id"],
        subnet("demo")
    );
    let listed = call(
        &sim,
        "GET",
        &format!(
            "{}/resources?api-version=2021-04-01&$filter=resourceType%20eq%20%27{VM}%27",
            rg_path("demo-mrg")
        ),
        None,
    )
    .await;
    assert_eq!(
        listed.body["value"].as_array().unwrap().len(),
        2,
        "{listed:?}"
    );
    // The machines' NICs keep the subnet in use, as on Azure.
    let del = call(&sim, "DELETE", &format!("{}?{NET}", subnet("demo")), None).await;
    assert_eq!(
        del.code().as_deref(),
        Some("InUseSubnetCannotBeDeleted"),
        "{del:?}"
    );

    // Scale up: a third machine; the pool is Ready again with 3 once its node joined.
    let np3 = node_pool("demo", "4.22.0", "Standard_D4s_v5", json!({"replicas": 3}));
    assert_eq!(
        apply(&sim, &format!("{NP}/workers"), &np3).await.status,
        200
    );
    let r = pool_at(&sim, 3).await;
    // HyperShift's conditions carry the generation it reconciled.
    assert_eq!(r.body["metadata"]["generation"], 2);
    assert_eq!(condition(&r, "Ready").unwrap()["observedGeneration"], 2);
    assert_eq!(
        condition(&r, "AutoscalingEnabled").unwrap()["observedGeneration"],
        2
    );
    wait_machines(&sim, "demo-mrg", 3, 3).await;
    let after_up = names(&arm_in(&sim, VM, "demo-mrg"));
    assert!(
        names(&vms).iter().all(|n| after_up.contains(n)),
        "scale-up keeps the machines"
    );

    // Scale down to 1: two machines (VM, NIC, disk) go.
    let np1 = node_pool("demo", "4.22.0", "Standard_D4s_v5", json!({"replicas": 1}));
    assert_eq!(
        apply(&sim, &format!("{NP}/workers"), &np1).await.status,
        200
    );
    pool_at(&sim, 1).await;
    wait_machines(&sim, "demo-mrg", 1, 1).await;

    // Deleting the HostedCluster (HyperShift deletes its NodePools, CAPI their machines)
    // leaves nothing of the machines behind.
    call(&sim, "DELETE", &format!("{HC}/demo"), None).await;
    wait_until(&sim, &format!("{HC}/demo"), "HostedCluster gone", |r| {
        r.status == 404
    })
    .await;
    wait_until(&sim, &format!("{NP}/workers"), "NodePool gone", |r| {
        r.status == 404
    })
    .await;
    wait_machines(&sim, "demo-mrg", 0, 0).await;
    assert!(sim.inventory().iter().all(|i| {
        !i.id
            .to_ascii_lowercase()
            .contains("/resourcegroups/demo-mrg/")
    }));
}

/// `autoRepair` as HyperShift carries it (`nodepool/capi.go`): no health check (no
/// `AutorepairEnabled`) while no machine has reached the ignition endpoint, True once one
/// has, False at once when it is turned off, and the machines are never replaced for it.
#[tokio::test]
async fn auto_repair_waits_for_ignition_and_turns_off_at_once() {
    let sim = day2_sim();
    cluster(&sim, "rep", "4.22.0").await;
    let mut np = node_pool("rep", "4.22.0", "Standard_D4s_v5", json!({"replicas": 0}));
    np["spec"]["management"]["autoRepair"] = json!(true);
    assert_eq!(apply(&sim, &format!("{NP}/workers"), &np).await.status, 201);
    let r = wait_until(
        &sim,
        &format!("{NP}/workers"),
        "ignition not reached",
        |r| status(r, "ReachedIgnitionEndpoint").as_deref() == Some("False"),
    )
    .await;
    assert_eq!(status(&r, "AutorepairEnabled"), None, "{}", r.body);
    np["spec"]["replicas"] = json!(1);
    apply(&sim, &format!("{NP}/workers"), &np).await;
    let r = pool_at(&sim, 1).await;
    assert_eq!(
        status(&r, "ReachedIgnitionEndpoint").as_deref(),
        Some("True")
    );
    let r = wait_until(&sim, &format!("{NP}/workers"), "AutorepairEnabled", |r| {
        status(r, "AutorepairEnabled").as_deref() == Some("True")
    })
    .await;
    let vms = names(&arm_in(&sim, VM, "rep-mrg"));
    assert_eq!(vms.len(), 1, "{}", r.body);
    np["spec"]["management"]["autoRepair"] = json!(false);
    np["spec"]["nodeDrainTimeout"] = json!("600s");
    apply(&sim, &format!("{NP}/workers"), &np).await;
    wait_until(
        &sim,
        &format!("{NP}/workers"),
        "AutorepairEnabled False",
        |r| status(r, "AutorepairEnabled").as_deref() == Some("False"),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        names(&arm_in(&sim, VM, "rep-mrg")),
        vms,
        "no machine replaced"
    );
}

#[tokio::test]
async fn a_deleted_node_pool_removes_its_machines_before_its_finalizer_goes() {
    let sim = day2_sim();
    cluster(&sim, "del", "4.22.0").await;
    let np = node_pool("del", "4.22.0", "Standard_D4s_v5", json!({"replicas": 2}));
    apply(&sim, &format!("{NP}/workers"), &np).await;
    pool_at(&sim, 2).await;
    wait_machines(&sim, "del-mrg", 2, 2).await;
    call(&sim, "DELETE", &format!("{NP}/workers"), None).await;
    // While the finalizer holds the pool, its machines are still there; once it is gone,
    // so are they.
    let r = call(&sim, "GET", &format!("{NP}/workers"), None).await;
    assert_eq!(r.status, 200);
    assert_eq!(arm_in(&sim, VM, "del-mrg").len(), 2);
    wait_until(&sim, &format!("{NP}/workers"), "NodePool gone", |r| {
        r.status == 404
    })
    .await;
    wait_machines(&sim, "del-mrg", 0, 0).await;
}

#[tokio::test]
async fn autoscaling_runs_the_minimum_and_replicas_with_autoscaling_is_refused() {
    let sim = day2_sim();
    cluster(&sim, "auto", "4.22.0").await;
    let np = node_pool(
        "auto",
        "4.22.0",
        "Standard_D4s_v5",
        json!({"autoScaling": {"min": 2, "max": 5}}),
    );
    assert_eq!(apply(&sim, &format!("{NP}/workers"), &np).await.status, 201);
    let r = pool_at(&sim, 2).await;
    let c = condition(&r, "AutoscalingEnabled").unwrap();
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "AsExpected");
    assert_eq!(c["message"], "Maximum nodes: 5, Minimum nodes: 2");
    wait_machines(&sim, "auto-mrg", 2, 2).await;

    // Both set: the NodePool CRD's CEL rule refuses it.
    let both = node_pool(
        "auto",
        "4.22.0",
        "Standard_D4s_v5",
        json!({"replicas": 3, "autoScaling": {"min": 2, "max": 5}}),
    );
    let r = apply(&sim, &format!("{NP}/workers"), &both).await;
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(
        r.body["message"],
        "NodePool.hypershift.openshift.io \"workers\" is invalid: spec: Invalid value: \"object\": Both replicas or autoScaling should not be set"
    );
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec");
    // min 0 on Azure, and max below min, are refused too.
    let zero = node_pool(
        "auto",
        "4.22.0",
        "Standard_D4s_v5",
        json!({"autoScaling": {"min": 0, "max": 1}}),
    );
    let r = apply(&sim, &format!("{NP}/workers"), &zero).await;
    assert_eq!(
        r.body["message"],
        "NodePool.hypershift.openshift.io \"workers\" is invalid: spec: Invalid value: \"object\": Scale-from-zero (autoScaling.min=0) is currently only supported for AWS platform"
    );
    let inverted = node_pool(
        "auto",
        "4.22.0",
        "Standard_D4s_v5",
        json!({"autoScaling": {"min": 3, "max": 2}}),
    );
    let r = apply(&sim, &format!("{NP}/workers"), &inverted).await;
    assert_eq!(
        r.body["message"],
        "NodePool.hypershift.openshift.io \"workers\" is invalid: spec.autoScaling: Invalid value: \"object\": max must be equal or greater than min"
    );

    // From replicas to autoscaling: the MachineDeployment keeps its count inside
    // [min, max], then the autoscaler (no load) removes what is above the minimum.
    let fixed = node_pool("auto", "4.22.0", "Standard_D4s_v5", json!({"replicas": 4}));
    let r = apply(&sim, &format!("{NP}/workers"), &fixed).await;
    assert_eq!(r.status, 200, "{r:?}");
    // Server-side apply drops the whole `autoScaling` struct this manager no longer applies.
    assert!(
        r.body["spec"].get("autoScaling").is_none(),
        "{:#}",
        r.body["spec"]
    );
    assert_eq!(r.body["spec"]["replicas"], 4);
    let r = pool_at(&sim, 4).await;
    assert_eq!(status(&r, "AutoscalingEnabled").as_deref(), Some("False"));
    assert_eq!(message(&r, "AutoscalingEnabled"), "");
    let auto = node_pool(
        "auto",
        "4.22.0",
        "Standard_D4s_v5",
        json!({"autoScaling": {"min": 1, "max": 3}}),
    );
    assert_eq!(
        apply(&sim, &format!("{NP}/workers"), &auto).await.status,
        200
    );
    let r = pool_at(&sim, 1).await;
    assert_eq!(
        message(&r, "AutoscalingEnabled"),
        "Maximum nodes: 3, Minimum nodes: 1"
    );
    wait_machines(&sim, "auto-mrg", 1, 1).await;
}

#[tokio::test]
async fn a_platform_change_rolls_the_machines_to_a_new_template() {
    let sim = day2_sim();
    cluster(&sim, "roll", "4.22.0").await;
    let np = node_pool("roll", "4.22.0", "Standard_D4s_v5", json!({"replicas": 2}));
    apply(&sim, &format!("{NP}/workers"), &np).await;
    let r = pool_at(&sim, 2).await;
    assert_eq!(
        status(&r, "UpdatingPlatformMachineTemplate").as_deref(),
        Some("False")
    );
    wait_machines(&sim, "roll-mrg", 2, 2).await;
    let before = names(&arm_in(&sim, VM, "roll-mrg"));
    assert_eq!(cores_in_use(&sim).await, 8);

    let bigger = node_pool("roll", "4.22.0", "Standard_D8s_v5", json!({"replicas": 2}));
    assert_eq!(
        apply(&sim, &format!("{NP}/workers"), &bigger).await.status,
        200
    );
    let r = wait_until(&sim, &format!("{NP}/workers"), "rolling", |r| {
        status(r, "UpdatingPlatformMachineTemplate").as_deref() == Some("True")
    })
    .await;
    let c = condition(&r, "UpdatingPlatformMachineTemplate").unwrap();
    assert_eq!(c["reason"], "AsExpected");
    let msg = c["message"].as_str().unwrap();
    let template = msg
        .strip_prefix("platform machine template update in progress. Target template: workers-")
        .unwrap_or_else(|| panic!("{msg}"));
    assert!(
        template.len() == 8 && template.chars().all(|c| c.is_ascii_hexdigit()),
        "{msg}"
    );
    // maxSurge 1, maxUnavailable 0: never fewer than 2 available while rolling.
    assert!(r.body["status"]["replicas"].as_u64().unwrap() >= 2);
    assert_eq!(status(&r, "Ready").as_deref(), Some("True"));

    let r = wait_until(&sim, &format!("{NP}/workers"), "rolled", |r| {
        status(r, "UpdatingPlatformMachineTemplate").as_deref() == Some("False")
    })
    .await;
    assert_eq!(status(&r, "Ready").as_deref(), Some("True"));
    assert_eq!(r.body["status"]["replicas"], 2);
    wait_machines(&sim, "roll-mrg", 2, 2).await;
    let after = arm_in(&sim, VM, "roll-mrg");
    assert!(
        names(&after).iter().all(|n| !before.contains(n)),
        "new machines: {before:?} → {:?}",
        names(&after)
    );
    // The new VMs are D8s_v5: 2 × 8 cores in use now (2 × 4 before).
    assert_eq!(cores_in_use(&sim).await, 16);
}

/// `cores` in use in the test subscription (the compute usages API).
async fn cores_in_use(sim: &Simulator) -> u64 {
    let u = call(
        sim,
        "GET",
        &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages?api-version=2024-07-01"),
        None,
    )
    .await;
    u.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"]["value"] == "cores")
        .unwrap()["currentValue"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn node_pool_release_upgrade_and_version_skew() {
    let sim = day2_sim();
    cluster(&sim, "up", "4.22.2").await;
    let np = node_pool("up", "4.21.5", "Standard_D4s_v5", json!({"replicas": 2}));
    apply(&sim, &format!("{NP}/workers"), &np).await;
    let r = pool_at(&sim, 2).await;
    assert_eq!(r.body["status"]["version"], "4.21.5");
    // The control plane's release rolls out once the pool is Ready.
    wait_until(&sim, &format!("{HC}/up"), "rolled out", |r| {
        r.body["status"]["version"]["history"][0]["state"] == "Completed"
    })
    .await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "skew known", |r| {
        status(r, "SupportedVersionSkew").as_deref() == Some("True")
    })
    .await;
    assert_eq!(
        message(&r, "SupportedVersionSkew"),
        "Release image version is valid"
    );
    wait_machines(&sim, "up-mrg", 2, 2).await;
    let before = names(&arm_in(&sim, VM, "up-mrg"));

    // Upgrade the pool to the control plane's version: new machines at the new version.
    let up = node_pool("up", "4.22.2", "Standard_D4s_v5", json!({"replicas": 2}));
    apply(&sim, &format!("{NP}/workers"), &up).await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "updating", |r| {
        status(r, "UpdatingVersion").as_deref() == Some("True")
    })
    .await;
    let c = condition(&r, "UpdatingVersion").unwrap();
    assert_eq!(c["reason"], "AsExpected");
    assert_eq!(
        c["message"],
        "Updating version in progress. Target version: 4.22.2"
    );
    assert_eq!(r.body["status"]["version"], "4.21.5");
    let r = wait_until(&sim, &format!("{NP}/workers"), "updated", |r| {
        r.body["status"]["version"] == "4.22.2"
            && status(r, "UpdatingVersion").as_deref() == Some("False")
    })
    .await;
    assert_eq!(status(&r, "Ready").as_deref(), Some("True"));
    wait_machines(&sim, "up-mrg", 2, 2).await;
    assert!(
        names(&arm_in(&sim, VM, "up-mrg"))
            .iter()
            .all(|n| !before.contains(n))
    );

    // A patch above the control plane: SupportedVersionSkew=False, and HyperShift rolls the
    // pool anyway (the condition does not block).
    let above = node_pool("up", "4.22.5", "Standard_D4s_v5", json!({"replicas": 2}));
    apply(&sim, &format!("{NP}/workers"), &above).await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "skew refused", |r| {
        status(r, "SupportedVersionSkew").as_deref() == Some("False")
    })
    .await;
    let c = condition(&r, "SupportedVersionSkew").unwrap();
    assert_eq!(c["reason"], "UnsupportedSkew");
    assert_eq!(
        c["message"],
        "NodePool version 4.22.5 cannot be higher than the HostedCluster version 4.22.2"
    );
    wait_until(&sim, &format!("{NP}/workers"), "still upgraded", |r| {
        r.body["status"]["version"] == "4.22.5"
    })
    .await;

    // More than three minors below: the skew message names the oldest allowed.
    let old = node_pool("up", "4.18.0", "Standard_D4s_v5", json!({"replicas": 2}));
    let mut old = old;
    old["metadata"]["name"] = json!("old");
    apply(&sim, &format!("{NP}/old"), &old).await;
    let r = wait_until(&sim, &format!("{NP}/old"), "old skew", |r| {
        status(r, "SupportedVersionSkew").as_deref() == Some("False")
    })
    .await;
    assert_eq!(
        message(&r, "SupportedVersionSkew"),
        "NodePool minor version 4.18 is less than 4.19, which is the minimum NodePool version compatible with the 4.22 HostedCluster"
    );
}

#[tokio::test]
async fn a_pool_above_the_control_planes_minor_is_refused_and_does_not_upgrade() {
    let sim = day2_sim();
    cluster(&sim, "skew", "4.21.3").await;
    let np = node_pool("skew", "4.21.3", "Standard_D4s_v5", json!({"replicas": 1}));
    apply(&sim, &format!("{NP}/workers"), &np).await;
    pool_at(&sim, 1).await;
    wait_until(&sim, &format!("{HC}/skew"), "rolled out", |r| {
        r.body["status"]["version"]["history"][0]["state"] == "Completed"
    })
    .await;
    wait_machines(&sim, "skew-mrg", 1, 1).await;
    let before = names(&arm_in(&sim, VM, "skew-mrg"));
    let above = node_pool("skew", "4.22.0", "Standard_D4s_v5", json!({"replicas": 1}));
    apply(&sim, &format!("{NP}/workers"), &above).await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "refused", |r| {
        status(r, "ValidReleaseImage").as_deref() == Some("False")
    })
    .await;
    let c = condition(&r, "ValidReleaseImage").unwrap();
    assert_eq!(c["reason"], "ValidationFailed");
    assert_eq!(
        c["message"],
        "Failed to get release image: the latest version supported is: \"4.21.3\". Attempting to use: \"4.22.0\""
    );
    // HyperShift's reconcile stops there: no rollout, nothing updating.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let r = call(&sim, "GET", &format!("{NP}/workers"), None).await;
    assert_eq!(r.body["status"]["version"], "4.21.3");
    assert_eq!(status(&r, "UpdatingVersion").as_deref(), Some("False"));
    assert_eq!(names(&arm_in(&sim, VM, "skew-mrg")), before);
    // A y-stream downgrade of the pool is refused as well.
    let down = node_pool("skew", "4.20.1", "Standard_D4s_v5", json!({"replicas": 1}));
    apply(&sim, &format!("{NP}/workers"), &down).await;
    wait_until(&sim, &format!("{NP}/workers"), "downgrade refused", |r| {
        message(r, "ValidReleaseImage")
            == "Failed to get release image: y-stream downgrade from \"4.21.3\" to \"4.20.1\" is not supported"
    })
    .await;
}

#[tokio::test]
async fn a_scale_up_beyond_the_vcpu_quota_is_refused_as_azure_refuses_it() {
    let sim = day2_sim();
    let r = call(
        &sim,
        "PUT",
        "/_sim/scenario",
        Some(json!({"vm_core_quota": 8})),
    )
    .await;
    assert_eq!(r.status, 204);
    cluster(&sim, "quota", "4.22.0").await;
    let np = node_pool("quota", "4.22.0", "Standard_D4s_v5", json!({"replicas": 2}));
    apply(&sim, &format!("{NP}/workers"), &np).await;
    pool_at(&sim, 2).await;
    wait_machines(&sim, "quota-mrg", 2, 2).await;

    // A third D4s_v5 needs 4 more cores than the 8 allowed.
    let np3 = node_pool("quota", "4.22.0", "Standard_D4s_v5", json!({"replicas": 3}));
    apply(&sim, &format!("{NP}/workers"), &np3).await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "machines not ready", |r| {
        status(r, "AllMachinesReady").as_deref() == Some("False")
    })
    .await;
    let c = condition(&r, "AllMachinesReady").unwrap();
    assert_eq!(c["reason"], "Failed");
    // Azure's message is too long for HyperShift's 1000-byte aggregate.
    assert_eq!(
        c["message"],
        "1 of 3 machines are not ready\n... too many similar errors\n"
    );
    let c = condition(&r, "Ready").unwrap();
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "WaitingForAvailableMachines");
    assert_eq!(
        c["message"],
        "Minimum availability requires 3 replicas, current 2 available"
    );
    assert_eq!(r.body["status"]["replicas"], 2);
    // The refused machine has its NIC (CAPZ makes it first) but no VM or disk.
    wait_machines(&sim, "quota-mrg", 2, 3).await;
    // The refused PUT, with Azure's code and message, is in the request log.
    let refused: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.actor.as_deref() == Some("cluster-api-provider-azure"))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    let rec = &refused[0];
    assert_eq!(rec.method, "PUT");
    assert_eq!(rec.status, 409);
    assert_eq!(rec.error_code.as_deref(), Some("OperationNotAllowed"));
    assert!(
        rec.path.contains(
            "/resourceGroups/quota-mrg/providers/Microsoft.Compute/virtualMachines/workers-"
        ),
        "{}",
        rec.path
    );
    let expected = format!(
        "Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 8, Current Usage: 8, Additional Required: 4, (Minimum) New Limit Required: 12. Setup Alerts when Quota reaches threshold. Learn more at https://aka.ms/quotamonitoringalerting . Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView/Parameters/%7B%22subscriptionId%22:%22{SUB}%22,%22command%22:%22openQuotaApprovalBlade%22,%22quotas%22:[%7B%22location%22:%22eastus%22,%22providerId%22:%22Microsoft.Compute%22,%22resourceName%22:%22cores%22,%22quotaRequest%22:%7B%22properties%22:%7B%22limit%22:12,%22unit%22:%22Count%22,%22name%22:%7B%22value%22:%22cores%22%7D%7D%7D%7D]%7D by specifying parameters listed in the \u{2018}Details\u{2019} section for deployment to succeed. Please read more about quota limits at https://docs.microsoft.com/en-us/azure/azure-supportability/regional-quota-requests"
    );
    assert_eq!(rec.error_message.as_deref(), Some(expected.as_str()));
    // The usages API agrees: 8 of 8 cores in use.
    let u = call(
        &sim,
        "GET",
        &format!("/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages?api-version=2024-07-01"),
        None,
    )
    .await;
    let cores = u.body["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"]["value"] == "cores")
        .unwrap()
        .clone();
    assert_eq!(cores["currentValue"], 8);
    assert_eq!(cores["limit"], 8);

    // Quota raised: CAPZ's retry gets the VM, and the pool is whole again.
    call(
        &sim,
        "PUT",
        "/_sim/scenario",
        Some(json!({"vm_core_quota": 12})),
    )
    .await;
    let r = pool_at(&sim, 3).await;
    assert_eq!(status(&r, "AllMachinesReady").as_deref(), Some("True"));
    assert_eq!(message(&r, "AllMachinesReady"), "All is well");
    wait_machines(&sim, "quota-mrg", 3, 3).await;
}

#[tokio::test]
async fn a_create_beyond_the_quota_leaves_the_pool_short() {
    let sim = day2_sim();
    call(
        &sim,
        "PUT",
        "/_sim/scenario",
        Some(json!({"vm_core_quota": 10})),
    )
    .await;
    cluster(&sim, "small", "4.22.0").await;
    let np = node_pool("small", "4.22.0", "Standard_D8s_v5", json!({"replicas": 2}));
    apply(&sim, &format!("{NP}/workers"), &np).await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "short", |r| {
        status(r, "AllMachinesReady").as_deref() == Some("False")
            && message(r, "Ready")
                == "Minimum availability requires 2 replicas, current 1 available"
    })
    .await;
    assert_eq!(r.body["status"]["replicas"], 1);
    assert_eq!(
        message(&r, "AllMachinesReady"),
        "1 of 2 machines are not ready\n... too many similar errors\n"
    );
    wait_machines(&sim, "small-mrg", 1, 2).await;
}

#[tokio::test]
async fn a_control_plane_upgrade_prepends_a_partial_entry_then_completes() {
    let sim = day2_sim();
    cluster(&sim, "cp", "4.22.0").await;
    apply(
        &sim,
        &format!("{NP}/workers"),
        &node_pool("cp", "4.22.0", "Standard_D4s_v5", json!({"replicas": 1})),
    )
    .await;
    let r = wait_until(&sim, &format!("{HC}/cp"), "rolled out", |r| {
        r.body["status"]["version"]["history"][0]["state"] == "Completed"
    })
    .await;
    let first = r.body["status"]["version"]["history"][0].clone();
    assert_eq!(
        message(&r, "ClusterVersionAvailable"),
        "Done applying 4.22.0"
    );

    let mut hc = hosted_cluster("cp", "4.22.3");
    hc["spec"]["release"]["image"] = json!(release("4.22.3"));
    assert_eq!(apply(&sim, &format!("{HC}/cp"), &hc).await.status, 200);
    let r = wait_until(&sim, &format!("{HC}/cp"), "upgrading", |r| {
        r.body["status"]["version"]["history"][0]["version"] == "4.22.3"
    })
    .await;
    let v = &r.body["status"]["version"];
    assert_eq!(
        v["desired"],
        json!({"image": resolved("4.22.3"), "version": "4.22.3"})
    );
    let h0 = &v["history"][0];
    assert_eq!(h0["state"], "Partial");
    assert_eq!(h0["image"], resolved("4.22.3"));
    assert!(h0["startedTime"].is_string());
    assert!(h0["completionTime"].is_null());
    assert_eq!(h0["verified"], false);
    assert_eq!(v["history"][1], first, "the old entry is kept as it was");
    let c = condition(&r, "ClusterVersionProgressing").unwrap();
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "FromClusterVersion");
    assert_eq!(c["message"], "Working towards 4.22.3");
    assert_eq!(
        message(&r, "ClusterVersionAvailable"),
        "Done applying 4.22.0"
    );

    let r = wait_until(&sim, &format!("{HC}/cp"), "upgraded", |r| {
        r.body["status"]["version"]["history"][0]["state"] == "Completed"
    })
    .await;
    let v = &r.body["status"]["version"];
    assert!(v["history"][0]["completionTime"].is_string());
    assert_eq!(v["history"].as_array().unwrap().len(), 2);
    assert_eq!(
        status(&r, "ClusterVersionProgressing").as_deref(),
        Some("False")
    );
    assert_eq!(
        message(&r, "ClusterVersionProgressing"),
        "Cluster version is 4.22.3"
    );
    assert_eq!(
        message(&r, "ClusterVersionAvailable"),
        "Done applying 4.22.3"
    );
    assert_eq!(
        status(&r, "ClusterVersionFailing").as_deref(),
        Some("False")
    );
}

#[tokio::test]
async fn a_y_stream_downgrade_is_refused_and_the_cluster_keeps_its_version() {
    let sim = day2_sim();
    cluster(&sim, "down", "4.22.0").await;
    apply(
        &sim,
        &format!("{NP}/workers"),
        &node_pool("down", "4.22.0", "Standard_D4s_v5", json!({"replicas": 1})),
    )
    .await;
    wait_until(&sim, &format!("{HC}/down"), "rolled out", |r| {
        r.body["status"]["version"]["history"][0]["state"] == "Completed"
    })
    .await;
    apply(
        &sim,
        &format!("{HC}/down"),
        &hosted_cluster("down", "4.21.9"),
    )
    .await;
    let r = wait_until(&sim, &format!("{HC}/down"), "refused", |r| {
        status(r, "ValidReleaseImage").as_deref() == Some("False")
    })
    .await;
    let c = condition(&r, "ValidReleaseImage").unwrap();
    assert_eq!(c["reason"], "InvalidImage");
    assert_eq!(
        c["message"],
        "y-stream downgrade from \"4.22.0\" to \"4.21.9\" is not supported"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let r = call(&sim, "GET", &format!("{HC}/down"), None).await;
    let v = &r.body["status"]["version"];
    assert_eq!(v["desired"]["version"], "4.22.0");
    assert_eq!(v["history"].as_array().unwrap().len(), 1);
    assert_eq!(status(&r, "Available").as_deref(), Some("True"));
    // Back to its release: valid again.
    apply(
        &sim,
        &format!("{HC}/down"),
        &hosted_cluster("down", "4.22.0"),
    )
    .await;
    wait_until(&sim, &format!("{HC}/down"), "valid", |r| {
        status(r, "ValidReleaseImage").as_deref() == Some("True")
    })
    .await;
}

#[tokio::test]
async fn a_stalled_upgrade_stays_partial_with_the_cvos_words_until_unstalled() {
    let sim = day2_sim();
    cluster(&sim, "stall", "4.22.0").await;
    apply(
        &sim,
        &format!("{NP}/workers"),
        &node_pool("stall", "4.22.0", "Standard_D4s_v5", json!({"replicas": 1})),
    )
    .await;
    wait_until(&sim, &format!("{HC}/stall"), "rolled out", |r| {
        r.body["status"]["version"]["history"][0]["state"] == "Completed"
    })
    .await;
    call(
        &sim,
        "PUT",
        "/_sim/scenario",
        Some(json!({"stall_upgrade": true})),
    )
    .await;
    apply(
        &sim,
        &format!("{HC}/stall"),
        &hosted_cluster("stall", "4.22.3"),
    )
    .await;
    let r = wait_until(&sim, &format!("{HC}/stall"), "waiting on console", |r| {
        condition(r, "ClusterVersionProgressing")
            .is_some_and(|c| c["reason"] == "ClusterOperatorDegraded")
    })
    .await;
    assert_eq!(
        message(&r, "ClusterVersionProgressing"),
        "Working towards 4.22.3: 760 of 851 done (89% complete), waiting up to 40 minutes on console"
    );
    assert_eq!(
        status(&r, "ClusterVersionFailing").as_deref(),
        Some("False")
    );
    assert_eq!(
        r.body["status"]["version"]["history"][0]["state"],
        "Partial"
    );
    // Past the CVO's 40 minutes: failing.
    let r = wait_until(&sim, &format!("{HC}/stall"), "failing", |r| {
        status(r, "ClusterVersionFailing").as_deref() == Some("True")
    })
    .await;
    let c = condition(&r, "ClusterVersionFailing").unwrap();
    assert_eq!(c["reason"], "ClusterOperatorDegraded");
    assert_eq!(c["message"], "Cluster operator console is degraded");
    let c = condition(&r, "ClusterVersionProgressing").unwrap();
    assert_eq!(c["status"], "True");
    assert_eq!(
        c["message"],
        "Unable to apply 4.22.3: wait has exceeded 40 minutes for these operators: console"
    );
    assert_eq!(
        r.body["status"]["version"]["history"][0]["state"],
        "Partial"
    );
    assert!(r.body["status"]["version"]["history"][0]["completionTime"].is_null());
    // The operator recovers: the upgrade completes.
    call(
        &sim,
        "PUT",
        "/_sim/scenario",
        Some(json!({"stall_upgrade": false})),
    )
    .await;
    let r = wait_until(&sim, &format!("{HC}/stall"), "completed", |r| {
        r.body["status"]["version"]["history"][0]["state"] == "Completed"
    })
    .await;
    assert_eq!(
        status(&r, "ClusterVersionFailing").as_deref(),
        Some("False")
    );
    assert_eq!(
        message(&r, "ClusterVersionAvailable"),
        "Done applying 4.22.3"
    );
}

#[tokio::test]
async fn a_scale_down_waits_for_a_drain_a_disruption_budget_blocks() {
    let sim = day2_sim();
    cluster(&sim, "pdb", "4.22.0").await;
    let mut np = node_pool("pdb", "4.22.0", "Standard_D4s_v5", json!({"replicas": 2}));
    np["spec"]["nodeDrainTimeout"] = json!("10m");
    apply(&sim, &format!("{NP}/workers"), &np).await;
    pool_at(&sim, 2).await;
    wait_machines(&sim, "pdb-mrg", 2, 2).await;
    call(
        &sim,
        "PUT",
        "/_sim/scenario",
        Some(json!({"blocking_pdb": true})),
    )
    .await;
    np["spec"]["replicas"] = json!(1);
    apply(&sim, &format!("{NP}/workers"), &np).await;
    let r = wait_until(&sim, &format!("{NP}/workers"), "draining", |r| {
        condition(r, "AllMachinesReady").is_some_and(|c| c["reason"] == "Draining")
    })
    .await;
    assert_eq!(status(&r, "AllMachinesReady").as_deref(), Some("False"));
    assert_eq!(
        message(&r, "AllMachinesReady"),
        "Drain failed: Cannot evict pod as it would violate the pod's disruption budget."
    );
    // The node is still there while it drains.
    assert_eq!(r.body["status"]["replicas"], 2);
    assert_eq!(arm_in(&sim, VM, "pdb-mrg").len(), 2);
    // cluster-api gives up draining after nodeDrainTimeout (10 minutes: 1.2 s here).
    let r = pool_at(&sim, 1).await;
    assert_eq!(message(&r, "AllMachinesReady"), "All is well");
    wait_machines(&sim, "pdb-mrg", 1, 1).await;
}
