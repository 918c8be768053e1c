//! The machines behind a NodePool: CAPI Machines, and the Azure resources the Cluster API
//! provider for Azure (CAPZ) creates for each of them in the cluster's managed resource
//! group — what a real hosted cluster's workers are, and what a day-2 change (scale,
//! platform change, upgrade) creates and deletes.
//!
//! **Resources.** Per machine, CAPZ v1.21 (the version HyperShift release-4.22 vendors,
//! `go.mod`) creates in the HostedCluster's `spec.platform.azure.resourceGroup` (subscription
//! `spec.platform.azure.subscriptionID`, region `spec.platform.azure.location`):
//! - the NIC `<machine>-nic` (`azure/defaults.go` `GenerateNICName`), in the NodePool's
//!   `spec.platform.azure.subnetID`, first (`azure/services/networkinterfaces`);
//! - the VM `<machine>` (`azure/services/virtualmachines`), size `vmSize`;
//! - its OS disk `<machine>_OSDisk` (`GenerateOSDiskName`), created by Azure with the VM.
//!
//! The NIC and the VM carry CAPZ's tags (`api/v1beta1/tags.go` `Build`):
//! `sigs.k8s.io_cluster-api-provider-azure_cluster_<infraID>: owned` (HyperShift names the
//! CAPI Cluster after the infra id, `nodepool_controller.go` `newCAPI(token, infraID)`),
//! `Name: <resource name>`, and on the VM `sigs.k8s.io_cluster-api-provider-azure_role: node`;
//! the OS disk gets none. A machine's name is `<nodepool>-<5>-<5>`: CAPI names the
//! MachineSet after the MachineDeployment (HyperShift's is the NodePool's name) plus a
//! random suffix, and the Machine after the MachineSet plus another (`names.SimpleNameGenerator`,
//! alphabet `bcdfghjklmnpqrstvwxz2456789`); the simulator derives both from hashes so a
//! run is reproducible. When the managed resource group is not in the simulation (the
//! simulator's own API tests apply HostedClusters without one), machines are still
//! modelled (counts, versions, quota) but have no ARM resources.
//!
//! These are stored ARM resources, so they appear in `GET /_sim/inventory` and in the
//! generic resource list of the group, go with the group (cascade), and a NIC keeps its
//! subnet in use (`InUseSubnetCannotBeDeleted`) as on Azure. `Microsoft.Compute` is not an
//! ARM surface of the simulator: the VM and disk are not served by GET/PUT.
//!
//! **Quota.** Every VM counts its vCPUs against the regional quota of its subscription
//! (scenario `vm_core_quota`, "Total Regional vCPUs"). A VM PUT that would exceed it is
//! refused as Azure refuses it: 409 Conflict, code `OperationNotAllowed`, message
//! [`quota_message`] — the text Azure returns for a VM PUT over the regional cores quota,
//! as quoted from a real 409 by an azurerm provider e2e log (Terraform 1.14, azurerm
//! 3.117.1: "Operation could not be completed as it results in exceeding approved Total
//! Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location:
//! eastus, Current Limit: 10, Current Usage: 10, Additional Required: 2, (Minimum) New Limit
//! Required: 12. Setup Alerts when Quota reaches threshold. …"), whose first two sentences
//! Microsoft's own troubleshooting article prints for a scale-out ("QuotaExceeded error when
//! scaling virtual machine scale sets", MicrosoftDocs/SupportArticles-docs). The vCPUs of a
//! size are read off its name ([`vm_cores`]).
//!
//! **How the refusal shows.** CAPZ creates the NIC, then the VM PUT fails:
//! `UpdatePutStatus` marks the AzureMachine's `VMRunning` False, reason `Failed`,
//! `virtualmachine failed to create or update. err: {err}` (`azure/scope/machine.go`), with
//! `{err}` = `failed to create or update resource {rg}/{vm} (service: virtualmachine): `
//! (`azure/services/async/async.go` `CreateOrUpdateResource`) + azcore's `ResponseError`
//! text (`sdk/azcore/internal/exported/response_error.go`: method and URL, the status line,
//! `ERROR CODE: OperationNotAllowed`, the indented JSON body, between 80-dash separators).
//! CAPI mirrors that into the Machine's `InfrastructureReady`, and HyperShift aggregates
//! the machines into the NodePool's `AllMachinesReady`
//! (`hypershift-operator/controllers/nodepool/conditions.go` `setAllMachinesReadyCondition`,
//! `nodepool_controller.go` `aggregateMachineReasonsAndMessages`): reason `Failed`, message
//! `{n} of {m} machines are not ready\n` then one `Machine {name}: Failed: {message}\n` per
//! machine while the text stays under 1000 bytes, else "... too many similar errors\n".
//! Azure's quota message alone is over 900 characters, so on a real NodePool the per-machine
//! line never fits and only the count and "... too many similar errors" show — the
//! simulator shows exactly that ([`all_machines_ready`]). The refused PUT, with Azure's
//! code and full message, is in the request log (`GET /_sim/requests`, actor
//! `cluster-api-provider-azure`, `error_code`, `error_message`), once per refusal.
//! CAPZ retries; a machine whose VM fits again (quota raised, other VMs gone) gets it.

use axum::http::Method;
use serde_json::{Value, json};

use crate::arm::{store as arm_store, types};
use crate::sim::Simulator;
use crate::state::{MachineSim, State};
use crate::util::str_at;

/// ARM type of a virtual machine.
pub(crate) const VM: &str = "Microsoft.Compute/virtualMachines";
/// ARM type of a managed disk.
pub(crate) const DISK: &str = "Microsoft.Compute/disks";
/// Who the simulated VM PUTs are from, in the request log.
pub(crate) const ACTOR: &str = "cluster-api-provider-azure";
/// The api-version CAPZ v1.21's compute client (armcompute v5) sends.
const COMPUTE_API: &str = "2024-03-01";
/// CAPZ's cluster ownership tag prefix (`NameAzureProviderOwned`).
const OWNED_TAG_PREFIX: &str = "sigs.k8s.io_cluster-api-provider-azure_cluster_";
/// CAPZ's role tag (`NameAzureClusterAPIRole`).
const ROLE_TAG: &str = "sigs.k8s.io_cluster-api-provider-azure_role";
/// HyperShift's limit of an aggregated machine message (`maxMessageLength`).
const MAX_MESSAGE: usize = 1000;

/// The vCPUs a VM size counts against the regional quota, read off its name as Azure names
/// sizes ("[Family] + [Sub-family]* + [# of vCPUs] + [Constrained vCPUs]* + [Additive
/// Features] + …", MicrosoftDocs/azure-compute-docs `articles/virtual-machines/sizes/overview.md`):
/// the first number after the family letters. `Standard_D4s_v5` → 4, `Standard_D8s_v5` → 8,
/// `Standard_E16ds_v5` → 16, `Standard_NC24ads_A100_v4` → 24, `Standard_B2ms` → 2. A
/// constrained-vCPU size counts its full vCPUs (`Standard_M8-2ms` → 8: "this number
/// represents the total vCPUs of quota that the VM uses", `VirtualMachineSize.numberOfCores`
/// in the compute API reference). A name without a number counts 0.
pub(crate) fn vm_cores(size: &str) -> u32 {
    let name = size.split_once('_').map_or(size, |(_, rest)| rest);
    let digits: String = name
        .chars()
        .skip_while(|c| c.is_ascii_alphabetic())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(0)
}

/// Where a cluster's machines go.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    /// `<namespace>/<name>` of the HostedCluster.
    pub cluster: String,
    pub sub: String,
    pub rg: String,
    pub location: String,
    pub infra: String,
    /// The managed resource group exists in the simulation (machines get ARM resources).
    pub arm: bool,
}

impl Placement {
    pub(crate) fn of(st: &State, ns: &str, name: &str, hc: &Value) -> Placement {
        let sub = str_at(hc, "/spec/platform/azure/subscriptionID")
            .unwrap_or_default()
            .to_string();
        let rg = str_at(hc, "/spec/platform/azure/resourceGroup")
            .unwrap_or_default()
            .to_string();
        let arm = !sub.is_empty()
            && !rg.is_empty()
            && st.arm.contains_key(
                &format!("/subscriptions/{sub}/resourcegroups/{rg}").to_ascii_lowercase(),
            );
        Placement {
            cluster: format!("{ns}/{name}"),
            sub,
            rg,
            location: str_at(hc, "/spec/platform/azure/location")
                .unwrap_or("eastus")
                .to_ascii_lowercase()
                .replace(' ', ""),
            infra: str_at(hc, "/spec/infraID").unwrap_or(name).to_string(),
            arm,
        }
    }

    fn rg_id(&self) -> String {
        format!("/subscriptions/{}/resourceGroups/{}", self.sub, self.rg)
    }
}

/// What a NodePool's machines are made from: its machine template and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `<nodepool>-<fnv32a of the template spec>` (`capi.go` `machineTemplateBuilders`,
    /// `getName(nodePool.Name, HashSimple(specJSON))`): a changed VM size, OS disk, image,
    /// subnet, zone, encryption-at-host or diagnostics setting makes a new template, which
    /// rolls the machines. The hash is over the simulator's rendering of those fields, not
    /// CAPZ's `AzureMachineTemplateSpec` JSON, so the suffix differs from a real one.
    pub template: String,
    /// The OpenShift version of `spec.release.image` (`""` when its tag names none).
    pub version: String,
    /// The pool's config hash (`crate::nodepool::config_hash`, HyperShift's
    /// `HashWithoutVersion`): the user data a machine boots with. A machine created with
    /// another config is replaced like one of another template.
    pub config: String,
}

impl Target {
    pub(crate) fn of(pool: &str, np: &Value, version: &str, config: &str) -> Target {
        let az = np.pointer("/spec/platform/azure");
        let field = |k: &str| az.and_then(|a| a.get(k)).cloned().unwrap_or(Value::Null);
        let spec = json!({
            "vmSize": field("vmSize"), "osDisk": field("osDisk"), "image": field("image"),
            "subnetID": field("subnetID"), "availabilityZone": field("availabilityZone"),
            "encryptionAtHost": field("encryptionAtHost"), "diagnostics": field("diagnostics"),
        });
        Target {
            template: format!("{pool}-{:08x}", fnv(&spec.to_string())),
            version: version.to_string(),
            config: config.to_string(),
        }
    }
}

/// 32-bit FNV-1a (Go's `hash/fnv` `New32a`, HyperShift's `HashSimple`).
pub(crate) fn fnv(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Five characters of `names.SimpleNameGenerator`'s alphabet, from a hash of `seed`.
fn suffix(seed: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = fnv(seed);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(h % 27) as usize] as char;
            h /= 27;
            c
        })
        .collect()
}

/// vCPUs of the VMs that exist (running or being deleted) in `sub`/`location`.
pub(crate) fn cores_in_use(st: &State, sub: &str, location: &str) -> u32 {
    in_scope(st, sub, location).map(|m| m.cores).sum()
}

/// Number of VMs that exist in `sub`/`location`.
pub(crate) fn vms_in_use(st: &State, sub: &str, location: &str) -> u32 {
    in_scope(st, sub, location).count() as u32
}

fn in_scope<'a>(st: &'a State, sub: &str, location: &str) -> impl Iterator<Item = &'a MachineSim> {
    let sub = sub.to_ascii_lowercase();
    let location = location.to_ascii_lowercase().replace(' ', "");
    st.machines
        .values()
        .flatten()
        .filter(move |m| m.running() && m.sub == sub && m.location == location)
}

/// Azure's answer to a VM PUT over the regional vCPU quota (see the module docs).
pub(crate) fn quota_message(
    sub: &str,
    location: &str,
    limit: u32,
    usage: u32,
    required: u32,
) -> String {
    let new_limit = usage + required;
    format!(
        "Operation could not be completed as it results in exceeding approved Total Regional Cores quota. \
Additional details - Deployment Model: Resource Manager, Location: {location}, Current Limit: {limit}, \
Current Usage: {usage}, Additional Required: {required}, (Minimum) New Limit Required: {new_limit}. \
Setup Alerts when Quota reaches threshold. Learn more at https://aka.ms/quotamonitoringalerting . \
Submit a request for Quota increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView/Parameters/\
%7B%22subscriptionId%22:%22{sub}%22,%22command%22:%22openQuotaApprovalBlade%22,%22quotas%22:[%7B%22location%22:%22{location}%22,\
%22providerId%22:%22Microsoft.Compute%22,%22resourceName%22:%22cores%22,%22quotaRequest%22:%7B%22properties%22:%7B%22limit%22:{new_limit},\
%22unit%22:%22Count%22,%22name%22:%7B%22value%22:%22cores%22%7D%7D%7D%7D]%7D by specifying parameters listed in the \
\u{2018}Details\u{2019} section for deployment to succeed. Please read more about quota limits at \
https://docs.microsoft.com/en-us/azure/azure-supportability/regional-quota-requests"
    )
}

/// CAPZ's `VMRunning` message for a VM PUT Azure refused (see the module docs).
fn vm_put_failed(
    vm_id: &str,
    rg: &str,
    name: &str,
    status: &str,
    code: &str,
    message: &str,
) -> String {
    let sep = "-".repeat(80);
    let body = json!({"error": {"code": code, "message": message}});
    let indented = serde_json::to_string_pretty(&body).unwrap_or_default();
    format!(
        "virtualmachine failed to create or update. err: failed to create or update resource {rg}/{name} (service: virtualmachine): \
PUT https://management.azure.com{vm_id}\n{sep}\nRESPONSE {status}\nERROR CODE: {code}\n{sep}\n{indented}\n{sep}\n"
    )
}

/// Creates a machine for `target` in `place` (`existing`: the pool's other machines, which
/// are not in `st.machines` while the pool is reconciled): its NIC, then its VM and OS disk
/// unless the quota refuses the VM (the machine then records CAPZ's failure and is retried
/// by [`retry`]).
pub(crate) fn create(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    place: &Placement,
    np: &Value,
    target: &Target,
    existing: &[MachineSim],
) -> MachineSim {
    let pool = str_at(np, "/metadata/name").unwrap_or_default();
    // A new MachineSet for every template, version and config (a new user-data Secret).
    let ms = suffix(&format!(
        "{pool}/{}/{}/{}",
        target.template, target.version, target.config
    ));
    let mut n = 0u32;
    let name = loop {
        let candidate = format!("{pool}-{ms}-{}", suffix(&format!("{pool}/{ms}/{n}")));
        if !existing.iter().any(|m| m.name == candidate)
            && !st.machines.values().flatten().any(|m| m.name == candidate)
        {
            break candidate;
        }
        n += 1;
    };
    let size = str_at(np, "/spec/platform/azure/vmSize")
        .unwrap_or_default()
        .to_string();
    let mut m = MachineSim {
        cores: vm_cores(&size),
        name,
        cluster: place.cluster.clone(),
        template: target.template.clone(),
        version: target.version.clone(),
        config: target.config.clone(),
        size,
        sub: place.sub.to_ascii_lowercase(),
        location: place.location.clone(),
        created_ms: now,
        ..MachineSim::default()
    };
    if place.arm {
        m.nic = Some(create_nic(sim, st, now, place, np, &m.name));
    }
    let pool_usage = pool_cores(existing, &m.sub, &m.location);
    try_vm(sim, st, now, place, np, &mut m, pool_usage);
    m
}

/// Retries the VMs of a pool's machines whose VM PUT was refused (`ms` are the pool's
/// machines, which are not in `st.machines` while the pool is reconciled).
pub(crate) fn retry(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    place: &Placement,
    np: &Value,
    ms: &mut [MachineSim],
) {
    for i in 0..ms.len() {
        if ms[i].running() || ms[i].deleting_ms.is_some() {
            continue;
        }
        let pool_usage = pool_cores(ms, &ms[i].sub, &ms[i].location);
        try_vm(sim, st, now, place, np, &mut ms[i], pool_usage);
    }
}

/// vCPUs of the running machines of `ms` in `sub`/`location`.
fn pool_cores(ms: &[MachineSim], sub: &str, location: &str) -> u32 {
    ms.iter()
        .filter(|m| m.running() && m.sub == sub && m.location == location)
        .map(|m| m.cores)
        .sum()
}

fn try_vm(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    place: &Placement,
    np: &Value,
    m: &mut MachineSim,
    pool_usage: u32,
) {
    let vm_id = format!(
        "{}/providers/Microsoft.Compute/virtualMachines/{}",
        place.rg_id(),
        m.name
    );
    if let Some(limit) = crate::preflight::scenario(sim).vm_core_quota {
        let usage = cores_in_use(st, &m.sub, &m.location) + pool_usage;
        if usage + m.cores > limit {
            let message = quota_message(&place.sub, &place.location, limit, usage, m.cores);
            let failed = vm_put_failed(
                &vm_id,
                &place.rg,
                &m.name,
                "409: 409 Conflict",
                "OperationNotAllowed",
                &message,
            );
            if m.failed.as_deref() != Some(failed.as_str()) {
                crate::arm::log_internal(
                    sim,
                    ACTOR,
                    &Method::PUT,
                    &format!("{vm_id}?api-version={COMPUTE_API}"),
                    409,
                    Some("OperationNotAllowed".into()),
                    Some(message),
                );
                m.failed = Some(failed);
            }
            return;
        }
    }
    m.failed = None;
    m.created_ms = now;
    if place.arm {
        let (vm, disk) = create_vm(sim, st, now, place, np, m, &vm_id);
        m.vm = Some(vm);
        m.disk = Some(disk);
    }
}

fn create_nic(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    place: &Placement,
    np: &Value,
    name: &str,
) -> String {
    let rg_id = place.rg_id();
    let nic_name = format!("{name}-nic");
    let id = format!("{rg_id}/providers/Microsoft.Network/networkInterfaces/{nic_name}");
    let subnet = str_at(np, "/spec/platform/azure/subnetID")
        .unwrap_or_default()
        .to_string();
    let ip = arm_store::alloc_ip(st, &subnet);
    let body = json!({
        "location": place.location,
        "tags": {format!("{OWNED_TAG_PREFIX}{}", place.infra): "owned", "Name": nic_name},
        "properties": {
            "ipConfigurations": [{
                "name": "pipConfig",
                "id": format!("{id}/ipConfigurations/pipConfig"),
                "type": "Microsoft.Network/networkInterfaces/ipConfigurations",
                "properties": {
                    "privateIPAddress": ip, "privateIPAllocationMethod": "Dynamic",
                    "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet}, "primary": true,
                },
            }],
            "nicType": "Standard",
            "enableIPForwarding": false,
            "enableAcceleratedNetworking": false,
        }
    });
    arm_store::insert_internal(sim, st, now, &id, types::NIC, &rg_id, body);
    id.to_ascii_lowercase()
}

fn create_vm(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    place: &Placement,
    np: &Value,
    m: &MachineSim,
    vm_id: &str,
) -> (String, String) {
    let rg_id = place.rg_id();
    let disk_name = format!("{}_OSDisk", m.name);
    let disk_id = format!("{rg_id}/providers/Microsoft.Compute/disks/{disk_name}");
    let nic_id = format!(
        "{rg_id}/providers/Microsoft.Network/networkInterfaces/{}-nic",
        m.name
    );
    let az = np
        .pointer("/spec/platform/azure")
        .cloned()
        .unwrap_or(Value::Null);
    let disk_gib = az.pointer("/osDisk/sizeGiB").cloned().unwrap_or(json!(30));
    let disk_sku = str_at(&az, "/osDisk/diskStorageAccountType").unwrap_or("Premium_LRS");
    let image = match az.pointer("/image/azureMarketplace") {
        Some(mp) => json!({
            "publisher": mp.get("publisher"), "offer": mp.get("offer"),
            "sku": mp.get("sku"), "version": mp.get("version"),
        }),
        None => json!({"id": str_at(&az, "/image/imageID").unwrap_or_default()}),
    };
    let mut vm = json!({
        "location": place.location,
        "tags": {
            format!("{OWNED_TAG_PREFIX}{}", place.infra): "owned",
            ROLE_TAG: "node",
            "Name": m.name,
        },
        "properties": {
            "hardwareProfile": {"vmSize": m.size},
            "storageProfile": {
                "imageReference": image,
                "osDisk": {
                    "osType": "Linux", "name": disk_name, "createOption": "FromImage",
                    "diskSizeGB": disk_gib, "deleteOption": "Delete",
                    "managedDisk": {"id": disk_id, "storageAccountType": disk_sku},
                },
                "dataDisks": [],
            },
            "osProfile": {"computerName": m.name, "adminUsername": "capi",
                "linuxConfiguration": {"disablePasswordAuthentication": true}},
            "networkProfile": {"networkInterfaces": [{"id": nic_id, "properties": {"primary": true}}]},
            "provisioningState": "Succeeded",
            "vmId": crate::util::uuid(st, sim.config().seed).to_string(),
        },
    });
    if let Some(z) = str_at(&az, "/availabilityZone") {
        vm["zones"] = json!([z]);
    }
    arm_store::insert_internal(sim, st, now, vm_id, VM, &rg_id, vm);
    let disk = json!({
        "location": place.location,
        "managedBy": vm_id,
        "sku": {"name": disk_sku},
        "properties": {
            "osType": "Linux",
            "creationData": {"createOption": "FromImage"},
            "diskSizeGB": disk_gib,
            "diskState": "Attached",
            "provisioningState": "Succeeded",
        },
    });
    arm_store::insert_internal(sim, st, now, &disk_id, DISK, &rg_id, disk);
    if let Some(nic) = st.arm.get_mut(&nic_id.to_ascii_lowercase()) {
        crate::util::obj_mut(&mut nic.body, "properties")
            .insert("virtualMachine".into(), json!({"id": vm_id}));
    }
    (vm_id.to_ascii_lowercase(), disk_id.to_ascii_lowercase())
}

/// Removes a machine's VM, OS disk and NIC (CAPZ deletes them with the machine).
pub(crate) fn remove(st: &mut State, m: &MachineSim) {
    for key in [&m.vm, &m.disk, &m.nic].into_iter().flatten() {
        arm_store::remove_tree(st, key);
    }
}

/// Whether a machine's VM was removed behind CAPZ's back (its resource group deleted).
pub(crate) fn vanished(st: &State, m: &MachineSim) -> bool {
    m.vm.as_ref().is_some_and(|k| !st.arm.contains_key(k))
}

/// HyperShift's `AllMachinesReady` from the machines (see the module docs): `None` when
/// every machine's infrastructure is ready, else `(reason, message)`.
pub(crate) fn all_machines_ready(machines: &[MachineSim]) -> Option<(String, String)> {
    let failed: Vec<&MachineSim> = machines.iter().filter(|m| !m.running()).collect();
    if failed.is_empty() {
        return None;
    }
    let mut msg = format!(
        "{} of {} machines are not ready\n",
        failed.len(),
        machines.len()
    );
    let mut lines = String::new();
    for m in &failed {
        let line = format!(
            "Machine {}: Failed: {}\n",
            m.name,
            m.failed.as_deref().unwrap_or_default()
        );
        if lines.len() + line.len() > MAX_MESSAGE {
            lines.push_str("... too many similar errors\n");
            break;
        }
        lines.push_str(&line);
    }
    msg.push_str(&lines);
    Some(("Failed".into(), msg))
}

/// A Go `intstr.IntOrString` (`3` or `"25%"`) scaled against `total`
/// (`intstr.GetScaledValueFromIntOrPercent`).
pub(crate) fn scaled_int_or_percent(
    v: Option<&Value>,
    total: u32,
    round_up: bool,
    default: u32,
) -> u32 {
    match v {
        Some(Value::Number(n)) => n.as_u64().map_or(default, |n| n as u32),
        Some(Value::String(s)) => match s.strip_suffix('%').and_then(|p| p.parse::<u32>().ok()) {
            Some(p) => {
                let x = u64::from(p) * u64::from(total);
                (if round_up { x.div_ceil(100) } else { x / 100 }) as u32
            }
            None => s.parse().unwrap_or(default),
        },
        _ => default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_come_from_the_size_name() {
        assert_eq!(vm_cores("Standard_D4s_v5"), 4);
        assert_eq!(vm_cores("Standard_D8s_v5"), 8);
        assert_eq!(vm_cores("Standard_E16ds_v5"), 16);
        assert_eq!(vm_cores("Standard_NC24ads_A100_v4"), 24);
        assert_eq!(vm_cores("Standard_B2ms"), 2);
        assert_eq!(vm_cores("Standard_M8-2ms"), 8);
        assert_eq!(vm_cores("Standard_HB120rs_v3"), 120);
        assert_eq!(vm_cores(""), 0);
    }

    #[test]
    fn quota_message_is_azures() {
        let m = quota_message("sub-1", "eastus", 10, 10, 2);
        assert!(m.starts_with("Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 10, Current Usage: 10, Additional Required: 2, (Minimum) New Limit Required: 12. Setup Alerts when Quota reaches threshold."), "{m}");
        assert!(m.contains("%22subscriptionId%22:%22sub-1%22"));
        assert!(m.contains("%22limit%22:12,"));
        assert!(m.ends_with("by specifying parameters listed in the \u{2018}Details\u{2019} section for deployment to succeed. Please read more about quota limits at https://docs.microsoft.com/en-us/azure/azure-supportability/regional-quota-requests"));
    }

    #[test]
    fn the_aggregate_is_truncated_like_hypershift() {
        let ok = MachineSim::default();
        let short = MachineSim {
            name: "a".into(),
            failed: Some("boom".into()),
            ..MachineSim::default()
        };
        assert_eq!(
            all_machines_ready(&[ok.clone(), short.clone()]),
            Some((
                "Failed".into(),
                "1 of 2 machines are not ready\nMachine a: Failed: boom\n".into()
            ))
        );
        let long = MachineSim {
            name: "b".into(),
            failed: Some("x".repeat(1200)),
            ..MachineSim::default()
        };
        assert_eq!(
            all_machines_ready(&[ok, long]).map(|r| r.1),
            Some("1 of 2 machines are not ready\n... too many similar errors\n".into())
        );
        assert_eq!(all_machines_ready(&[]), None);
    }

    #[test]
    fn int_or_percent() {
        assert_eq!(scaled_int_or_percent(None, 3, true, 1), 1);
        assert_eq!(scaled_int_or_percent(Some(&json!(2)), 3, true, 1), 2);
        assert_eq!(scaled_int_or_percent(Some(&json!("25%")), 3, true, 1), 1);
        assert_eq!(scaled_int_or_percent(Some(&json!("25%")), 3, false, 0), 0);
    }

    #[test]
    fn names_are_stable_and_use_the_generator_alphabet() {
        let a = suffix("pool/t/v");
        assert_eq!(a, suffix("pool/t/v"));
        assert_eq!(a.len(), 5);
        assert!(a.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
        assert_ne!(a, suffix("pool/t/w"));
    }
}
