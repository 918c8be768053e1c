//! The simulated HyperShift operator, evaluated lazily from timestamps on every tick.
//!
//! For each HostedCluster `<ns>/<name>`:
//! 1. on first sight it adds the finalizer `hypershift.openshift.io/finalizer` and reports
//!    `Available=False`;
//! 2. after `operator_router` it creates namespace `<ns>-<name>`, the `private-router`
//!    Service (type LoadBalancer, internal) with `status.loadBalancer.ingress[0].ip`, and the
//!    matching internal load balancer `kubernetes-internal-<ns>-<name>` in the management
//!    resource group (frontend `private-router` with that private IP on the management
//!    VNet's `aks-subnet`);
//! 3. after `operator_available` it sets `Available=True` — at once for topology `Public`
//!    (or none); for `Private`/`PublicAndPrivate` only once an Approved private endpoint
//!    connects to a PLS fronting that load balancer and an `api` A record in some private
//!    DNS zone points at the endpoint's IP;
//! 4. on deletion, after `operator_delete`, it deletes its load balancer — but only when no
//!    PLS references it (Azure would refuse) — then the Service and namespace, and drops
//!    its finalizer.
//!
//! NodePools get the same finalizer, `Ready=True` after `nodepool_ready`, and lose the
//! finalizer `nodepool_delete` after deletion was requested.

use serde_json::{Value, json};

use crate::arm::{store as arm_store, types};
use crate::kube::{HYPERSHIFT, kind_by_key, store};
use crate::sim::Simulator;
use crate::state::{HcSim, NpSim, State};
use crate::util::{self, str_at};

/// Finalizer HyperShift puts on HostedClusters and NodePools.
pub const FINALIZER: &str = "hypershift.openshift.io/finalizer";

pub(crate) fn set_condition(
    obj: &mut Value,
    ctype: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: u64,
) -> bool {
    let status = if status { "True" } else { "False" };
    set_condition_status(obj, ctype, status, reason, message, now)
}

/// Sets condition `ctype` (any status, e.g. `Unknown`) like a controller's
/// `meta.SetStatusCondition`: written when its status or message differ; returns whether
/// it changed.
pub(crate) fn set_condition_status(
    obj: &mut Value,
    ctype: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: u64,
) -> bool {
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let st = util::obj_mut(obj, "status");
    let conds = st.entry("conditions").or_insert_with(|| json!([]));
    let Value::Array(conds) = conds else {
        return false;
    };
    let cond = json!({
        "type": ctype, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": util::rfc3339_secs(now), "observedGeneration": generation,
    });
    match conds
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
    {
        Some(c)
            if c.get("status").and_then(Value::as_str) == Some(status)
                && c.get("message").and_then(Value::as_str) == Some(message) =>
        {
            false
        }
        Some(c) => {
            *c = cond;
            true
        }
        None => {
            conds.push(cond);
            true
        }
    }
}

/// Whether condition `ctype` is `True`.
pub(crate) fn condition_true(obj: &Value, ctype: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(ctype)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Whether the HostedCluster asks for HyperShift's cloud cleanup on deletion
/// (`guest_cloud::CLEANUP_ANNOTATION` = `"true"`).
pub(crate) fn cleanup_requested(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(crate::guest_cloud::CLEANUP_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// `(namespace, name, object)` of every stored object of `kind_key`.
pub(crate) fn objects(st: &State, kind_key: &str) -> Vec<(String, String, Value)> {
    st.kube
        .values()
        .filter(|e| e.kind_key == kind_key)
        .map(|e| (e.namespace.clone(), e.name.clone(), e.object.clone()))
        .collect()
}

pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    // The guest's cloud cleanup runs before the operator may drop its finalizer.
    let g = crate::guest_cloud::tick(sim, st, now);
    // Ingress records, NodePool image defaulting (before a pool may become Ready).
    let d = crate::guest::tick(sim, st, now);
    let a = hosted_clusters(sim, st, now);
    let b = node_pools(sim, st, now);
    let c = crate::privatelink_controllers::tick(sim, st, now);
    a || b || c || g || d
}

fn hosted_clusters(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let key = format!("{HYPERSHIFT}/hostedclusters");
    let Some(kind) = kind_by_key(&key) else {
        return false;
    };
    let lat = sim.config().latency.clone();
    let hcs = objects(st, &key);
    let live: Vec<String> = hcs.iter().map(|(ns, n, _)| format!("{ns}/{n}")).collect();
    st.hcs.retain(|k, _| live.contains(k));
    let mut changed = false;
    for (ns, name, mut obj) in hcs {
        let k = format!("{ns}/{name}");
        let mut sim_state = st.hcs.get(&k).cloned().unwrap_or(HcSim {
            seen_ms: now,
            ..HcSim::default()
        });
        let mut finalizers = store::finalizers(&obj);
        let cp_ns = format!("{ns}-{name}");
        if store::is_deleting(&obj) {
            let since = *sim_state.delete_seen_ms.get_or_insert(now);
            st.hcs.insert(k.clone(), sim_state.clone());
            if !finalizers.iter().any(|f| f == FINALIZER)
                || now < since + sim.scaled(lat.operator_delete)
            {
                continue;
            }
            // HyperShift's private-link controllers finish first (HCP deletion, the
            // AzurePrivateLinkService CR and its finalizers): privatelink_controllers.rs.
            let (pl_done, pl_changed) =
                crate::privatelink_controllers::teardown(sim, st, now, &ns, &name);
            changed |= pl_changed;
            if !pl_done {
                continue;
            }
            if let Some(lb) = &sim_state.lb_id {
                let lb_key = lb.to_ascii_lowercase();
                if crate::arm::prepare_pls_referencing_lb(st, &lb_key).is_some() {
                    // Azure: CannotDeleteLoadBalancerWithPrivateLinkService — retry later.
                    if set_condition(
                        &mut obj,
                        "Degraded",
                        true,
                        "LoadBalancerInUse",
                        "internal load balancer is referenced by a private link service",
                        now,
                    ) {
                        store::update(sim, st, kind, &ns, obj);
                        changed = true;
                    }
                    continue;
                }
                arm_store::remove_tree(st, &lb_key);
            }
            if let Some(svc_kind) = kind_by_key("core/services") {
                store::delete(sim, st, now, svc_kind, &cp_ns, "private-router");
            }
            if let Some(ns_kind) = kind_by_key("core/namespaces") {
                store::delete(sim, st, now, ns_kind, "", &cp_ns);
            }
            finalizers.retain(|f| f != FINALIZER);
            store::set_finalizers(&mut obj, &finalizers);
            store::update(sim, st, kind, &ns, obj);
            changed = true;
            continue;
        }
        let mut dirty = false;
        if !finalizers.iter().any(|f| f == FINALIZER) {
            finalizers.push(FINALIZER.to_string());
            store::set_finalizers(&mut obj, &finalizers);
            dirty = true;
        }
        if obj.pointer("/status/conditions").is_none() {
            dirty |= set_condition(
                &mut obj,
                "Available",
                false,
                "WaitingForControlPlane",
                "the hosted control plane is not available yet",
                now,
            );
        }
        if let Some(b) = release_block(sim, &obj) {
            // The operator or the control-plane operator refuses this spec: the cluster
            // never gets a router or becomes Available.
            dirty |= set_condition(&mut obj, b.ctype, b.status, b.reason, &b.message, now);
            st.hcs.insert(k, sim_state);
            if dirty {
                store::update(sim, st, kind, &ns, obj);
                changed = true;
            }
            continue;
        }
        if release_of(&obj).is_some() {
            dirty |= set_condition(
                &mut obj,
                "ValidReleaseImage",
                true,
                "AsExpected",
                "Release image is valid",
                now,
            );
        }
        if sim_state.router_ip.is_none()
            && private_router_possible(sim, &obj)
            && now >= sim_state.seen_ms + sim.scaled(lat.operator_router)
        {
            let (ip, lb_id) = create_router(sim, st, now, &cp_ns, &ns, &name);
            sim_state.router_ip = Some(ip);
            sim_state.lb_id = Some(lb_id);
            changed = true;
        }
        if !sim_state.available
            && sim_state.router_ip.is_some()
            && now >= sim_state.seen_ms + sim.scaled(lat.operator_available)
        {
            let topology = str_at(&obj, "/spec/platform/azure/topology").unwrap_or("Public");
            let ready = topology.eq_ignore_ascii_case("Public")
                || sim_state
                    .lb_id
                    .as_deref()
                    .is_some_and(|lb| private_path_ready(st, lb));
            if ready {
                sim_state.available = true;
                dirty |= set_condition(
                    &mut obj,
                    "Available",
                    true,
                    "AsExpected",
                    "The hosted control plane is available",
                    now,
                );
            }
        }
        st.hcs.insert(k, sim_state);
        if dirty {
            store::update(sim, st, kind, &ns, obj);
            changed = true;
        }
    }
    changed
}

/// A HostedCluster spec HyperShift refuses: the condition it shows.
struct Block {
    ctype: &'static str,
    status: bool,
    reason: &'static str,
    message: String,
}

/// `(major, minor, version)` of the release image, read from its tag
/// (`…/ocp-release:4.22.0-multi` → 4.22, "4.22.0"); `None` for a digest reference, whose
/// version only the payload knows (the simulator then accepts it).
fn release_of(obj: &Value) -> Option<(u32, u32, String)> {
    let image = str_at(obj, "/spec/release/image")?;
    if image.contains('@') {
        return None;
    }
    let tag = image.rsplit_once(':')?.1;
    let (major, minor) = crate::config::minor_version(tag)?;
    Some((
        major,
        minor,
        tag.split('-').next().unwrap_or(tag).to_string(),
    ))
}

fn topology(obj: &Value) -> &str {
    str_at(obj, "/spec/platform/azure/topology").unwrap_or("Public")
}

/// The release rules of HyperShift's code:
/// - the operator accepts releases from 4.14 up to its own minor
///   (`support/supportedversion/version.go` `IsValidReleaseVersion`, message verbatim),
///   as `ValidReleaseImage=False`, reason `InvalidImage`
///   (`hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`);
/// - Azure workload identities (`AzureWorkloadIdentities`) first ship in 4.19: an older
///   release's components cannot authenticate. *Our model* of how that shows: `Degraded`.
/// - the API server published as a Route without a hostname on a non-Private cluster fails
///   the control-plane operator's infrastructure reconcile ("route hostname is required for
///   service APIServer", `control-plane-operator/controllers/hostedcontrolplane/kas/service.go`,
///   wrapped by `infra/infra.go`), bubbled up from the HostedControlPlane's `Degraded`.
fn release_block(sim: &Simulator, obj: &Value) -> Option<Block> {
    let latest = crate::config::minor_version(&sim.config().hypershift_version).unwrap_or((4, 22));
    if let Some((major, minor, version)) = release_of(obj) {
        if (major, minor) > latest {
            return Some(Block {
                ctype: "ValidReleaseImage",
                status: false,
                reason: "InvalidImage",
                message: format!(
                    "the latest version supported is: \"{}.{}\". Attempting to use: \"{version}\"",
                    latest.0, latest.1
                ),
            });
        }
        if (major, minor) < (4, 14) {
            return Some(Block {
                ctype: "ValidReleaseImage",
                status: false,
                reason: "InvalidImage",
                message: format!(
                    "the minimum version supported for platform Azure is: \"4.14\". Attempting to use: \"{version}\""
                ),
            });
        }
        if (major, minor) < (4, 19)
            && obj
                .pointer("/spec/platform/azure/azureAuthenticationConfig/workloadIdentities")
                .is_some()
        {
            return Some(Block {
                ctype: "Degraded",
                status: true,
                reason: "ReconciliationError",
                message: format!(
                    "release {version} predates Azure workload identities (AzureWorkloadIdentities ships in 4.19): control-plane components cannot authenticate to Azure"
                ),
            });
        }
    }
    if !topology(obj).eq_ignore_ascii_case("Private") {
        let route_without_host = obj
            .pointer("/spec/services")
            .and_then(Value::as_array)
            .and_then(|svcs| {
                svcs.iter()
                    .find(|s| s.get("service").and_then(Value::as_str) == Some("APIServer"))
            })
            .and_then(|s| s.get("servicePublishingStrategy"))
            .is_some_and(|p| {
                p.get("type").and_then(Value::as_str) == Some("Route")
                    && p.pointer("/route/hostname")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
            });
        if route_without_host {
            return Some(Block {
                ctype: "Degraded",
                status: true,
                reason: "ReconciliationError",
                message: "failed to reconcile API server service: route hostname is required for service APIServer".into(),
            });
        }
    }
    None
}

/// Whether the `private-router` Service gets an Azure internal load balancer: only when
/// both the operator and the release know the Azure private topology (4.22: the
/// internal-LB annotation in
/// `control-plane-operator/controllers/hostedcontrolplane/ingress/router.go`). Otherwise
/// a Private/PublicAndPrivate cluster waits for a router IP forever, as on a real one.
fn private_router_possible(sim: &Simulator, obj: &Value) -> bool {
    if topology(obj).eq_ignore_ascii_case("Public") {
        return true;
    }
    let operator =
        crate::config::minor_version(&sim.config().hypershift_version).unwrap_or((4, 22));
    let release_ok = release_of(obj).is_none_or(|(ma, mi, _)| (ma, mi) >= (4, 22));
    operator >= (4, 22) && release_ok
}

/// Creates the control-plane namespace, the `private-router` Service and the internal LB.
fn create_router(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    ns: &str,
    name: &str,
) -> (String, String) {
    let c = sim.config();
    let rg_id = format!(
        "/subscriptions/{}/resourceGroups/{}",
        c.management_subscription, c.management_resource_group
    );
    let subnet = format!(
        "{rg_id}/providers/Microsoft.Network/virtualNetworks/{}/subnets/aks-subnet",
        c.management_vnet
    );
    let ip = arm_store::alloc_ip(st, &subnet);
    let lb_id = format!(
        "{rg_id}/providers/Microsoft.Network/loadBalancers/kubernetes-internal-{ns}-{name}"
    );
    let fe_id = format!("{lb_id}/frontendIPConfigurations/private-router");
    let lb = json!({
        "location": c.management_location,
        "sku": {"name": "Standard", "tier": "Regional"},
        "tags": {"hcp-simulator/hostedcluster": format!("{ns}/{name}")},
        "properties": {
            "frontendIPConfigurations": [{
                "name": "private-router", "id": fe_id,
                "type": "Microsoft.Network/loadBalancers/frontendIPConfigurations",
                "properties": {"privateIPAddress": ip, "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet}},
            }],
            "backendAddressPools": [], "loadBalancingRules": [], "probes": [], "inboundNatRules": [], "inboundNatPools": [], "outboundRules": [],
        }
    });
    arm_store::insert_internal(sim, st, now, &lb_id, types::LB, &rg_id, lb);
    if let Some(ns_kind) = kind_by_key("core/namespaces")
        && store::get(st, "core/namespaces", "", cp_ns).is_none()
    {
        store::create(
            sim,
            st,
            now,
            ns_kind,
            "",
            json!({"metadata": {"name": cp_ns}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        );
    }
    if let Some(svc_kind) = kind_by_key("core/services")
        && store::get(st, "core/services", cp_ns, "private-router").is_none()
    {
        let svc = json!({
            "metadata": {"name": "private-router", "annotations": {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"}},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443}]},
        });
        let mut created = store::create(sim, st, now, svc_kind, cp_ns, svc);
        util::obj_mut(&mut created, "spec")
            .entry("clusterIP")
            .or_insert(json!("10.96.0.100"));
        created["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        store::update(sim, st, svc_kind, cp_ns, created);
    }
    (ip, lb_id)
}

/// Whether an Approved PE reaches a PLS fronting `lb_id` and an `api` A record points at
/// the PE's IP.
fn private_path_ready(st: &State, lb_id: &str) -> bool {
    let Some(pls_key) = crate::arm::prepare_pls_referencing_lb(st, &lb_id.to_ascii_lowercase())
    else {
        return false;
    };
    let approved_pes: Vec<String> = arm_store::children(st, &pls_key, types::PEC)
        .into_iter()
        .filter(|c| {
            str_at(
                &c.body,
                "/properties/privateLinkServiceConnectionState/status",
            ) == Some("Approved")
        })
        .filter_map(|c| {
            str_at(&c.body, "/properties/privateEndpoint/id").map(str::to_ascii_lowercase)
        })
        .collect();
    let ips: Vec<String> = approved_pes
        .iter()
        .filter_map(|pe| st.arm.get(pe))
        .filter(|pe| pe.prov == crate::state::Prov::Succeeded)
        .filter_map(|pe| str_at(&pe.internal, "/ip").map(str::to_string))
        .collect();
    arm_store::of_type(st, types::AREC).into_iter().any(|rec| {
        rec.name == "api"
            && rec
                .body
                .pointer("/properties/aRecords")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter().any(|r| {
                        str_at(r, "/ipv4Address").is_some_and(|ip| ips.iter().any(|x| x == ip))
                    })
                })
    })
}

fn node_pools(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let key = format!("{HYPERSHIFT}/nodepools");
    let Some(kind) = kind_by_key(&key) else {
        return false;
    };
    let lat = sim.config().latency.clone();
    let nps = objects(st, &key);
    let live: Vec<String> = nps.iter().map(|(ns, n, _)| format!("{ns}/{n}")).collect();
    st.nps.retain(|k, _| live.contains(k));
    let mut changed = false;
    for (ns, name, mut obj) in nps {
        let k = format!("{ns}/{name}");
        let mut s = st.nps.get(&k).cloned().unwrap_or(NpSim {
            seen_ms: now,
            ..NpSim::default()
        });
        let mut finalizers = store::finalizers(&obj);
        let mut dirty = false;
        if store::is_deleting(&obj) {
            let since = *s.delete_seen_ms.get_or_insert(now);
            if finalizers.iter().any(|f| f == FINALIZER)
                && now >= since + sim.scaled(lat.nodepool_delete)
            {
                finalizers.retain(|f| f != FINALIZER);
                store::set_finalizers(&mut obj, &finalizers);
                dirty = true;
            }
        } else {
            if !finalizers.iter().any(|f| f == FINALIZER) {
                finalizers.push(FINALIZER.to_string());
                store::set_finalizers(&mut obj, &finalizers);
                dirty = true;
            }
            if obj.pointer("/status/conditions").is_none() {
                dirty |= set_condition(
                    &mut obj,
                    "Ready",
                    false,
                    "WaitingForNodes",
                    "nodes are being provisioned",
                    now,
                );
            }
            if !s.ready
                && now >= s.seen_ms + sim.scaled(lat.nodepool_ready)
                && crate::guest::image_usable(&obj)
            {
                s.ready = true;
                let replicas = obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
                util::obj_mut(&mut obj, "status").insert("replicas".into(), replicas);
                dirty |= set_condition(
                    &mut obj,
                    "Ready",
                    true,
                    "AsExpected",
                    "All nodes are ready",
                    now,
                );
            }
        }
        st.nps.insert(k, s);
        if dirty {
            store::update(sim, st, kind, &ns, obj);
            changed = true;
        }
    }
    changed
}
