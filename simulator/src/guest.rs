//! What a running guest cluster and HyperShift's NodePool controller do that hcp-workflow
//! depends on: the public DNS zones of base domains, the ingress operator's `*.apps`
//! records, and the NodePool boot image.
//!
//! **Public DNS zones.** `hypershift create infra azure` needs an existing Azure DNS zone
//! named exactly the base domain (openshift/hypershift `cmd/infra/azure/networking.go`
//! `GetBaseDomainID`); nobody creates it per cluster. [`seed_dns_zones`] puts the
//! configured [`crate::config::DnsZoneSeed`]s (and their groups) into the cloud at start
//! when missing, tagged `hcp-simulator/seeded` and no run's.
//!
//! **Ingress records.** Once a HostedCluster is `Available` and one of its NodePools is
//! `Ready` (routers run on workers), the guest's ingress operator publishes the default
//! ingress controller's wildcard `*.apps.<name>.<baseDomain>` as A record sets in the zones
//! the HostedCluster names (`spec.dns.publicZoneID`, relative name `*.apps.<name>`, and
//! `spec.dns.privateZoneID`, relative name `*.apps`; openshift/cluster-ingress-operator
//! writes one DNSRecord per zone of the cluster's `dns.config.openshift.io`, which
//! HyperShift fills from `spec.dns`). A zone the HostedCluster does not name, or that does
//! not exist, gets no record, and the console's route health check then fails: our model
//! reports that as HyperShift bubbles the guest ClusterVersion's `Failing` condition up,
//! `ClusterVersionSucceeding=False` (`api/hypershift/v1beta1/hostedcluster_conditions.go`;
//! inverted in `hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`)
//! with reason `ClusterOperatorDegraded` and "Cluster operator console is degraded" (the
//! CVO's wording for a degraded operator, written from memory: the console operator and
//! CVO sources were not available to check it). On deletion with
//! `hypershift.openshift.io/cleanup-cloud-resources: "true"` the hosted cluster config
//! operator deletes the ingress controllers (`destroyCloudResources` →
//! `ensureIngressControllersRemoved` in
//! `control-plane-operator/hostedclusterconfigoperator/controllers/resources/resources.go`),
//! so their records go; without it they stay (see [`crate::guest_cloud`]).
//!
//! **NodePool image.** From OpenShift 4.20 on, HyperShift's NodePool controller fills an
//! `AzureMarketplace` image that has no publisher/offer/sku/version from the release
//! payload's RHCOS stream, Gen2 unless `imageGeneration: Gen1`, and persists it in the
//! spec (`hypershift-operator/controllers/nodepool/azure.go` `defaultAzureNodePoolImage`).
//! Before 4.20 it leaves the image alone and building the machine template fails with
//! "no Azure VM image configured: …" (`azureMachineTemplateSpec`); HyperShift reports that
//! as a `ReconcileError` event and the pool never gets `Ready`. The simulator shows the
//! same message on `Ready=False` (reason `ReconcileError`) — events are not simulated.
//! The payload's marketplace image is modelled as publisher `azureopenshift`, offer
//! `aro4`, SKU `4NN-v2` (Gen2) or `aro_4NN` (Gen1), version `4NN.6.20250701`.

use serde_json::{Value, json};

use crate::arm::{store as arm_store, types};
use crate::conditions::{condition_true, objects, set_condition};
use crate::kube::{HYPERSHIFT, kind_by_key, store};
use crate::sim::Simulator;
use crate::state::State;
use crate::util::str_at;

/// The message HyperShift's `azureMachineTemplateSpec` fails with when a NodePool has no
/// image (openshift/hypershift `hypershift-operator/controllers/nodepool/azure.go`),
/// prefixed as `azureMachineTemplate` wraps it.
pub(crate) const NO_IMAGE_MESSAGE: &str = "failed to generate AzureMachineTemplateSpec: no Azure VM image configured: either provide marketplace flags (--marketplace-publisher, etc.) or ensure the release image contains marketplace metadata (available in OCP 4.20+)";

/// Model of the release payload's Azure marketplace image of OpenShift `4.<minor>`.
fn payload_image(minor: u32, gen1: bool) -> Value {
    json!({
        "publisher": "azureopenshift",
        "offer": "aro4",
        "sku": if gen1 { format!("aro_4{minor:02}") } else { format!("4{minor:02}-v2") },
        "version": format!("4{minor:02}.6.20250701"),
        "imageGeneration": if gen1 { "Gen1" } else { "Gen2" },
    })
}

/// Seeds the configured public DNS zones (and their groups) that are missing.
pub(crate) fn seed_dns_zones(sim: &Simulator, st: &mut State, now: u64) {
    let tags = json!({"hcp-simulator/seeded": "true"});
    for z in sim.config().dns_zones.clone() {
        let sub = format!("/subscriptions/{}", z.subscription);
        let rg_id = format!("{sub}/resourceGroups/{}", z.resource_group);
        if !st.arm.contains_key(&rg_id.to_ascii_lowercase()) {
            arm_store::insert_internal(
                sim,
                st,
                now,
                &rg_id,
                types::RG,
                &sub,
                json!({"location": sim.config().management_location, "tags": tags, "properties": {}}),
            );
        }
        let zone_id = format!("{rg_id}/providers/Microsoft.Network/dnszones/{}", z.domain);
        if !st.arm.contains_key(&zone_id.to_ascii_lowercase()) {
            arm_store::insert_internal(
                sim,
                st,
                now,
                &zone_id,
                types::PUBLIC_ZONE,
                &rg_id,
                json!({"location": "global", "tags": tags, "properties": {
                    "zoneType": "Public",
                    "maxNumberOfRecordSets": 10000,
                    "nameServers": ["ns1-01.azure-dns.com.", "ns2-01.azure-dns.net.",
                                    "ns3-01.azure-dns.org.", "ns4-01.azure-dns.info."],
                }}),
            );
        }
    }
}

/// One tick: NodePool images first (before the operator may call a pool `Ready`), then
/// the ingress records.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let a = node_pool_images(sim, st, now);
    let b = ingress_records(sim, st, now);
    a || b
}

/// `(major, minor)` of a NodePool's release (its image tag); `None` when the tag says
/// nothing (a digest), which the model treats as a current release.
fn release_of(np: &Value) -> Option<(u32, u32)> {
    let image = str_at(np, "/spec/release/image")?;
    if image.contains('@') {
        return None;
    }
    let tag = image.rsplit_once(':').map(|(_, t)| t)?;
    crate::config::minor_version(tag)
}

/// Whether the pool has an image HyperShift can build a machine template from.
pub(crate) fn image_usable(np: &Value) -> bool {
    let image = np.pointer("/spec/platform/azure/image");
    let Some(image) = image else {
        // Not an Azure pool (or no image block): nothing for this model to say.
        return np.pointer("/spec/platform/azure").is_none();
    };
    if str_at(image, "/imageID").is_some_and(|s| !s.is_empty()) {
        return true;
    }
    ["publisher", "offer", "sku", "version"].iter().all(|k| {
        image
            .pointer(&format!("/azureMarketplace/{k}"))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    })
}

fn node_pool_images(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let key = format!("{HYPERSHIFT}/nodepools");
    let Some(kind) = kind_by_key(&key) else {
        return false;
    };
    let mut changed = false;
    // Only the pools with work to do are copied (most have a usable image).
    let todo: Vec<(String, Value)> = crate::conditions::entries(st, &key, None)
        .filter(|e| !store::is_deleting(&e.object) && !image_usable(&e.object))
        .map(|e| (e.namespace.clone(), Value::clone(&e.object)))
        .collect();
    for (ns, mut obj) in todo {
        let Some(image) = obj.pointer("/spec/platform/azure/image").cloned() else {
            continue;
        };
        let release = release_of(&obj);
        let defaulted = release.is_none_or(|r| r >= (4, 20));
        let marketplace_type = str_at(&image, "/type") == Some("AzureMarketplace");
        if defaulted && marketplace_type {
            let gen1 = str_at(&image, "/azureMarketplace/imageGeneration") == Some("Gen1");
            let minor = release.map(|r| r.1).unwrap_or(22);
            if let Some(img) = obj.pointer_mut("/spec/platform/azure/image") {
                img["azureMarketplace"] = payload_image(minor, gen1);
            }
            store::update(sim, st, kind, &ns, obj);
            changed = true;
        } else if set_condition(
            &mut obj,
            "Ready",
            false,
            "ReconcileError",
            NO_IMAGE_MESSAGE,
            now,
        ) {
            store::update(sim, st, kind, &ns, obj);
            changed = true;
        }
    }
    changed
}

/// A deterministic "public" IP of a cluster's default router.
fn router_ip(ns: &str, name: &str) -> String {
    public_ip(&format!("{ns}/{name}/router-default"))
}

/// A deterministic "public" IP for `seed` (the management cluster's public load balancer
/// frontends and the guest's default router).
pub(crate) fn public_ip(seed: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in seed.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!(
        "20.{}.{}.{}",
        (h >> 16) & 0xff,
        (h >> 8) & 0xff,
        (h & 0xfd) + 1
    )
}

fn ingress_records(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let hc_key = format!("{HYPERSHIFT}/hostedclusters");
    let Some(kind) = kind_by_key(&hc_key) else {
        return false;
    };
    let pools_key = format!("{HYPERSHIFT}/nodepools");
    let hcs = objects(st, &hc_key);
    let live: std::collections::BTreeSet<String> =
        hcs.iter().map(|(ns, n, _)| format!("{ns}/{n}")).collect();
    st.guest_dns.retain(|k, _| live.contains(k));
    let mut changed = false;
    for (ns, name, obj) in hcs {
        let k = format!("{ns}/{name}");
        let mut g = st.guest_dns.get(&k).cloned().unwrap_or_default();
        if store::is_deleting(&obj) {
            let asked = crate::conditions::cleanup_requested(&obj);
            if asked && !g.cleaned {
                for r in std::mem::take(&mut g.records) {
                    st.arm.remove(&r);
                }
                g.cleaned = true;
                st.guest_dns.insert(k, g);
                changed = true;
            }
            continue;
        }
        let pool_ready = crate::conditions::entries(st, &pools_key, Some(&ns)).any(|e| {
            str_at(&e.object, "/spec/clusterName") == Some(name.as_str())
                && condition_true(&e.object, "Ready")
        });
        if !condition_true(&obj, "Available") || !pool_ready {
            continue;
        }
        // Already published everywhere: nothing to do.
        if !g.records.is_empty() && g.missing.is_empty() {
            continue;
        }
        let base = str_at(&obj, "/spec/dns/baseDomain").unwrap_or_default();
        let fqdn = format!("*.apps.{name}.{base}");
        let ip = router_ip(&ns, &name);
        let mut missing = Vec::new();
        let mut added = false;
        for (field, rtype, body) in [
            (
                "publicZoneID",
                types::PUBLIC_AREC,
                json!({"properties": {"TTL": 30, "ARecords": [{"ipv4Address": ip}], "provisioningState": "Succeeded"}}),
            ),
            (
                "privateZoneID",
                types::AREC,
                json!({"properties": {"ttl": 30, "aRecords": [{"ipv4Address": ip}], "isAutoRegistered": false}}),
            ),
        ] {
            let zone_type = if rtype == types::PUBLIC_AREC {
                types::PUBLIC_ZONE
            } else {
                types::ZONE
            };
            let zone = str_at(&obj, &format!("/spec/dns/{field}"))
                .filter(|z| !z.is_empty())
                .and_then(|z| st.arm.get(&z.to_ascii_lowercase()))
                .filter(|z| z.rtype.eq_ignore_ascii_case(zone_type))
                .map(|z| (z.id.clone(), z.name.clone()));
            let Some((zone_id, zone_name)) = zone else {
                missing.push(field.to_string());
                continue;
            };
            let relative = fqdn
                .strip_suffix(&format!(".{zone_name}"))
                .unwrap_or(&fqdn)
                .to_ascii_lowercase();
            let rec_id = format!("{zone_id}/A/{relative}");
            let rec_key = rec_id.to_ascii_lowercase();
            if !st.arm.contains_key(&rec_key) {
                arm_store::insert_internal(sim, st, now, &rec_id, rtype, &zone_id, body);
                added = true;
            }
            if !g.records.contains(&rec_key) {
                g.records.push(rec_key);
            }
        }
        let degraded = !missing.is_empty();
        let was = std::mem::replace(&mut g.missing, missing);
        let news = added || was != g.missing;
        let condition = if degraded {
            Some((
                false,
                "ClusterOperatorDegraded",
                "Cluster operator console is degraded",
            ))
        } else if !was.is_empty() {
            Some((true, "FromClusterVersion", ""))
        } else {
            None
        };
        let mut dirty = false;
        if let Some((status, reason, message)) = condition {
            let mut obj = Value::clone(&obj);
            dirty = set_condition(
                &mut obj,
                "ClusterVersionSucceeding",
                status,
                reason,
                message,
                now,
            );
            if dirty {
                store::update(sim, st, kind, &ns, obj);
            }
        }
        st.guest_dns.insert(k, g);
        changed |= dirty || news;
    }
    changed
}
