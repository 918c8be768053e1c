//! The simulated HyperShift operator, evaluated lazily from timestamps on every tick.
//!
//! For each HostedCluster `<ns>/<name>`:
//! 1. on first sight it adds the finalizer `hypershift.openshift.io/finalizer` and reports
//!    `Available=False`; on every reconcile (unless a refused release or configuration
//!    stops it) it creates the control-plane namespace `<ns>-<name>` and syncs the pull
//!    secret and SSH key into it as `pull-secret` and `ssh-key` ([`sync_secrets`]);
//! 2. after `operator_router` it creates the control plane's Services as
//!    `control-plane-operator/.../infra/infra.go` does for the HostedCluster's topology and
//!    API server publishing ([`Exposure`]): for Private/PublicAndPrivate the
//!    `private-router` (internal LoadBalancer, its IP a new frontend on the management
//!    cluster's **shared** internal load balancer [`SHARED_ILB`]); for a public API server
//!    the public `router` (a Route with a hostname) or `kube-apiserver` (a LoadBalancer).
//!    From then on the public `router` follows the topology on every reconcile
//!    ([`reconcile_public_router`]): a switch from PublicAndPrivate to Private deletes it,
//!    the switch back recreates it (the API server refuses Public ↔ non-Public switches,
//!    `kube::crd::hosted_cluster_transition_rules`);
//! 3. after `operator_available` it sets `Available=True`: HyperShift's `Available` follows
//!    the hosted control plane only — not the private endpoint, DNS, nodes or a topology
//!    switch. It reports `ExternalDNSReachable` for a public cluster's API server hostname
//!    (resolved in the public zones; Unknown, "External DNS is not configured", on a
//!    Private one);
//! 4. on deletion, after `operator_delete`, it removes its frontend from the shared load
//!    balancer (the load balancer itself once no frontend is left) — but only when no PLS
//!    references that frontend (Azure would refuse) — then the Services and namespace, and
//!    drops its finalizer.
//!
//! NodePools get the same finalizer and `Ready=True` after `nodepool_ready` — only when
//! their nodes can reach the API server ([`nodes_reach_api`]: for private topologies an
//! approved private endpoint, an `api` record, and port 443) — and lose the finalizer
//! `nodepool_delete` after deletion was requested; their machines (VMs, NICs, disks in the
//! managed resource group) and every later change to them are `crate::nodepool` and
//! `crate::machines`.
//!
//! Once its first release rolled out, a changed `spec.release.image` upgrades the control
//! plane ([`upgrade`]: a `Partial` history entry, then `Completed` after `guest_rollout`); a
//! y-stream downgrade is refused ([`release_block`]).
//!
//! ARO HCP (`azureAuthenticationConfigType: ManagedIdentities`) is
//! `crate::aro_hcp`: an operator not installed for it fails the reconcile
//! (`ReconciliationSucceeded=False`), one that is makes the control plane's
//! SecretProviderClasses; without its control-plane operator (credentials volume not mounted)
//! the control plane gets no Services and never becomes available, and broken component
//! credentials show on NodePools and ClusterOperators like broken workload identities. On AKS
//! with the Key Vault Secrets Provider off, an ARO HCP operator crash-loops and reconciles
//! nothing (`crate::aks::operator_running`).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::arm::{store as arm_store, types};
use crate::kube::{HYPERSHIFT, kind_by_key, store};
use crate::sim::Simulator;
use crate::state::{HcSim, State};
use crate::util::{self, str_at};

use crate::conditions::*;
use crate::release::*;

/// Finalizer HyperShift puts on HostedClusters and NodePools.
pub const FINALIZER: &str = "hypershift.openshift.io/finalizer";

pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    // The AKS management cluster's add-ons (and whether the operator can run at all), and
    // the ARO HCP control planes' credential mounts (kubelet, whether or not the operator
    // runs).
    let k = crate::aks::tick(sim, st, now);
    let m = crate::aro_hcp::tick(sim, st, now);
    // The guest's cloud cleanup runs before the operator may drop its finalizer.
    let g = crate::guest_cloud::tick(sim, st, now);
    // Ingress records, NodePool image defaulting (before a pool may become Ready).
    let d = crate::guest::tick(sim, st, now);
    // A crash-looping operator (`aks::operator_running`) reconciles no HostedCluster and no
    // NodePool.
    let running = crate::aks::operator_running(sim, st);
    let a = running && hosted_clusters(sim, st, now);
    let b = running && crate::nodepool::tick(sim, st, now);
    let c = crate::privatelink_controllers::tick(sim, st, now);
    a || b || c || g || d || k || m
}

fn hosted_clusters(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let key = format!("{HYPERSHIFT}/hostedclusters");
    let Some(kind) = kind_by_key(&key) else {
        return false;
    };
    let lat = sim.config().latency.clone();
    let hcs = objects(st, &key);
    let live: std::collections::BTreeSet<String> =
        hcs.iter().map(|(ns, n, _)| format!("{ns}/{n}")).collect();
    st.hcs.retain(|k, _| live.contains(k));
    let mut changed = false;
    for (ns, name, obj) in hcs {
        // This controller sets conditions as it goes: it works on its own copy.
        let mut obj = Arc::unwrap_or_clone(obj);
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
            if let (Some(lb), Some(fe)) = (&sim_state.lb_id, &sim_state.fe_id) {
                // The shared internal load balancer: only this Service's frontend goes
                // (cloud-provider-azure removes a deleted Service's frontend, rules and
                // probes, and the load balancer itself only once no frontend is left).
                if crate::arm::prepare_pls_referencing_frontend(st, &fe.to_ascii_lowercase())
                    .is_some()
                {
                    if set_condition(
                        &mut obj,
                        "Degraded",
                        true,
                        "LoadBalancerInUse",
                        "internal load balancer frontend is referenced by a private link service",
                        now,
                    ) {
                        store::update(sim, st, kind, &ns, obj);
                        changed = true;
                    }
                    continue;
                }
                remove_frontend(st, lb, fe);
            } else if let Some(lb) = &sim_state.lb_id {
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
                for svc in [
                    "private-router",
                    "router",
                    "kube-apiserver",
                    "kube-apiserverlb",
                ] {
                    store::delete(sim, st, now, svc_kind, &cp_ns, svc);
                }
            }
            // HyperShift deletes the cluster's NodePools itself, together with the CAPI
            // Cluster, so their nodes are not drained (`hostedcluster_controller.go`
            // `delete` → `deleteNodePools`; cluster-api `isDeleteNodeAllowed` skips the
            // drain of a Cluster being deleted), and goes on once they are gone.
            let pools: Vec<String> = entries(st, &format!("{HYPERSHIFT}/nodepools"), Some(&ns))
                .filter(|e| {
                    e.object
                        .pointer("/spec/clusterName")
                        .and_then(Value::as_str)
                        == Some(name.as_str())
                })
                .map(|e| e.name.clone())
                .collect();
            if !pools.is_empty() {
                if let Some(np_kind) = kind_by_key(&format!("{HYPERSHIFT}/nodepools")) {
                    for p in &pools {
                        if store::get(st, &np_kind.key(), &ns, p)
                            .is_some_and(|o| !store::is_deleting(o))
                        {
                            store::delete(sim, st, now, np_kind, &ns, p);
                            changed = true;
                        }
                    }
                }
                continue;
            }
            // The CAPI Cluster goes with the HostedCluster: every machine left (of a NodePool
            // that vanished without HyperShift's finalizer) is deleted with its VM.
            crate::nodepool::remove_cluster_machines(st, &k);
            // The admin kubeconfig Secret goes with its HostedCluster (it is owned by it).
            if let Some(secret_kind) = kind_by_key("core/secrets") {
                store::delete(sim, st, now, secret_kind, &ns, &kubeconfig_secret(&name));
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
        let block = release_block(sim, &obj).or_else(|| {
            // ARO HCP (managed identities): the reconcile fails further on, at the CAPI
            // infrastructure or provider (`aro_hcp::block`).
            crate::aro_hcp::block(st, &obj).map(|message| Block {
                ctype: "ReconciliationSucceeded",
                status: false,
                reason: "ReconciliationError",
                message,
            })
        });
        // `reconcile()` sets these two on every pass, before it looks at the release
        // (`hostedcluster_controller.go`: `validateConfigAndClusterCapabilities`,
        // `validateHostedClusterSupport`; messages verbatim), and the payload's
        // architecture after them (`DetermineHostedClusterPayloadArch`).
        if block
            .as_ref()
            .is_none_or(|b| b.ctype != "ValidConfiguration")
        {
            dirty |= set_condition(
                &mut obj,
                "ValidConfiguration",
                true,
                "AsExpected",
                "Configuration passes validation",
                now,
            );
        }
        dirty |= set_condition(
            &mut obj,
            "SupportedHostedCluster",
            true,
            "AsExpected",
            "HostedCluster is supported by operator configuration",
            now,
        );
        let arch = payload_arch(&obj);
        dirty |= set_status_field(&mut obj, "payloadArch", json!(arch));
        // The operator's own reconcile goes on to the control-plane namespace and the
        // Secrets it syncs there unless it stopped at a refused release or configuration
        // (`Degraded` is the control-plane operator's, further on; a failed
        // `ReconciliationSucceeded` comes after them).
        if block
            .as_ref()
            .is_none_or(|b| b.ctype == "Degraded" || b.ctype == "ReconciliationSucceeded")
        {
            changed |= sync_secrets(sim, st, now, &ns, &cp_ns, &obj);
        }
        if let Some(b) = block {
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
        // A reconcile that failed before (`aro_hcp::block`) now succeeds (`Reconcile`; the
        // reason's spelling is HyperShift's).
        if obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("ReconciliationSucceeded")
                        && c.get("status").and_then(Value::as_str) == Some("False")
                })
            })
        {
            dirty |= set_condition(
                &mut obj,
                "ReconciliationSucceeded",
                true,
                "ReconciliatonSucceeded",
                "Reconciliation completed successfully",
                now,
            );
        }
        // ARO HCP: the SecretProviderClasses of the control plane's components.
        changed |= crate::aro_hcp::reconcile(sim, st, now, &cp_ns, &obj);
        // Without its control-plane operator (ARO HCP: its credentials volume never mounted)
        // nothing of the hosted control plane is made, and it never becomes available.
        let cp_up = crate::aro_hcp::control_plane_up(st, &ns, &obj);
        let exposure = Exposure::of(&obj);
        if !sim_state.services
            && cp_up
            && private_router_possible(sim, &obj)
            && now >= sim_state.seen_ms + sim.scaled(lat.operator_router)
        {
            if exposure.private {
                let (ip, lb_id, fe_id) = create_router(sim, st, now, &cp_ns, &name);
                sim_state.router_ip = Some(ip);
                sim_state.lb_id = Some(lb_id);
                sim_state.fe_id = Some(fe_id);
            }
            sim_state.public_ip = public_services(sim, st, now, &cp_ns, &exposure);
            sim_state.services = true;
            changed = true;
        }
        if sim_state.services {
            changed |= reconcile_public_router(sim, st, now, &cp_ns, &exposure, &mut sim_state);
        }
        // `ExternalDNSReachable` (`hostedcontrolplane_controller.go`): the control-plane
        // operator resolves the API server's external hostname, when it has one — only a
        // public cluster has one (`support/util/expose.go` `ServiceExternalDNSHostname`:
        // "external DNS hostname can only be reached when HCP is Public"), so a Private
        // cluster (also one switched from PublicAndPrivate) reports Unknown.
        if sim_state.services {
            let external = exposure.kas_hostname.as_ref().filter(|_| exposure.public);
            let (status, reason, message) = match external {
                None => (
                    "Unknown",
                    "StatusUnknown",
                    "External DNS is not configured".to_string(),
                ),
                Some(host) => match resolve_public(st, &obj, host) {
                    Some(ip) if Some(&ip) == sim_state.public_ip.as_ref() => {
                        ("True", "AsExpected", "All is well".to_string())
                    }
                    Some(ip) => (
                        "False",
                        "ExternalDNSHostNotReachable",
                        format!(
                            "health check to {host} failed: {ip} is not the API server's router"
                        ),
                    ),
                    None => (
                        "False",
                        "ExternalDNSHostNotReachable",
                        format!("lookup {host} on 172.30.0.10:53: no such host"),
                    ),
                },
            };
            dirty |= set_condition_status(
                &mut obj,
                "ExternalDNSReachable",
                status,
                reason,
                &message,
                now,
            );
        }
        // The control-plane operator's infrastructure status (`infra.go`
        // `ReconcileInfrastructureStatus`): without it the control plane never becomes
        // available and no node ever gets an endpoint to join.
        let infra = if sim_state.services {
            infrastructure_block(sim, &obj)
        } else {
            None
        };
        // Infrastructure ready: the HostedControlPlane's `InfrastructureReady` (bubbled up to
        // the HostedCluster) and the Ignition endpoint the NodePools wait for, which the
        // operator reads from the Ignition strategy's hostname or the ignition-server Route
        // the control-plane operator made (`hostedcluster_controller.go`, "Set Ignition
        // Server endpoint").
        if sim_state.services && infra.is_none() {
            dirty |= set_condition(
                &mut obj,
                "InfrastructureReady",
                true,
                "AsExpected",
                "All is well",
                now,
            );
            let endpoint = ignition_endpoint(&obj, &name, &cp_ns);
            dirty |= set_status_field(&mut obj, "ignitionEndpoint", json!(endpoint));
            changed |= ensure_ignition_ca(sim, st, now, &cp_ns);
        }
        if let Some(b) = infra.as_ref().filter(|_| !sim_state.available) {
            if let Some(m) = &b.infrastructure_message {
                dirty |= set_condition(
                    &mut obj,
                    "InfrastructureReady",
                    false,
                    "WaitingOnInfrastructureReady",
                    m,
                    now,
                );
            }
            dirty |= set_condition(&mut obj, "Available", false, b.reason, &b.message, now);
        }
        // HyperShift's `Available` follows the hosted control plane only
        // (`reconcileAvailabilityStatus`): not the private endpoint, nor DNS, nor nodes.
        if !sim_state.available && !cp_up {
            // The HostedControlPlane has no `Available` condition: HyperShift's message
            // (`computeHostedClusterAvailability`).
            dirty |= set_condition(
                &mut obj,
                "Available",
                false,
                "WaitingForAvailable",
                "Waiting for hosted control plane to be healthy",
                now,
            );
        }
        if !sim_state.available
            && sim_state.services
            && cp_up
            && infra.is_none()
            && now >= sim_state.seen_ms + sim.scaled(lat.operator_available)
        {
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
        if sim_state.available {
            dirty |= access_status(sim, st, now, &ns, &name, &mut obj, &sim_state);
        }
        if sim_state.available && !sim_state.rolled_out {
            dirty |= rollout(sim, st, now, &ns, &name, &mut obj, &mut sim_state);
        } else if sim_state.rolled_out {
            dirty |= upgradeable(sim, &mut obj, now);
            dirty |= upgrade(sim, now, &mut obj, &mut sim_state);
        }
        dirty |= progressing(&mut obj, now);
        st.hcs.insert(k, sim_state);
        if dirty {
            store::update(sim, st, kind, &ns, obj);
            changed = true;
        }
    }
    changed
}

/// A controller owner reference to HostedControlPlane `name` in `cp_ns` (`metav1.NewControllerRef`).
/// The simulator keeps no HostedControlPlane object: its uid is derived from its namespace
/// and name, so it is the same on every call.
pub(crate) fn hcp_owner_ref(cp_ns: &str, name: &str) -> Value {
    let uid = uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("hostedcontrolplane/{cp_ns}/{name}").as_bytes(),
    );
    json!({"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedControlPlane",
        "name": name, "uid": uid.to_string(), "controller": true, "blockOwnerDeletion": true})
}

/// The ignition server's CA certificate Secret the control-plane operator's PKI makes
/// (`manifests/ignitionserver` `IgnitionCACertSecret`: `ignition-server-ca-cert`), which
/// the NodePool controller requires with a `tls.crt` before it makes machines
/// (`ignitionEndpointAvailableCondition`). Its certificate is a placeholder: nothing in the
/// simulator verifies it.
fn ensure_ignition_ca(sim: &Simulator, st: &mut State, now: u64, cp_ns: &str) -> bool {
    use base64::Engine as _;
    const NAME: &str = "ignition-server-ca-cert";
    let Some(kind) = kind_by_key("core/secrets") else {
        return false;
    };
    if store::get(st, "core/secrets", cp_ns, NAME).is_some() {
        return false;
    }
    let pem =
        "-----BEGIN CERTIFICATE-----\nc2ltdWxhdGVkIGlnbml0aW9uIENB\n-----END CERTIFICATE-----\n";
    store::create(
        sim,
        st,
        now,
        kind,
        cp_ns,
        json!({
            "metadata": {"name": NAME},
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": base64::engine::general_purpose::STANDARD.encode(pem),
                "tls.key": "",
            },
        }),
    );
    true
}

/// Sets `status.<field>`; whether it changed.
fn set_status_field(obj: &mut Value, field: &str, value: Value) -> bool {
    let status = util::obj_mut(obj, "status");
    if status.get(field) == Some(&value) {
        return false;
    }
    status.insert(field.into(), value);
    true
}

/// `status.payloadArch`: `Multi` for a multi-arch release (a manifest list, which the
/// `-multi` tags are), else the image's own architecture, `AMD64` for the simulated
/// registry's single-arch releases (`support/util` `DetermineHostedClusterPayloadArch`).
fn payload_arch(obj: &Value) -> &'static str {
    let image = str_at(obj, "/spec/release/image").unwrap_or_default();
    let tag = if image.contains('@') {
        digest_tag(image).unwrap_or_default()
    } else {
        image
            .rsplit_once(':')
            .map(|(_, t)| t.to_string())
            .unwrap_or_default()
    };
    if tag.ends_with("-multi") {
        "Multi"
    } else {
        "AMD64"
    }
}

/// The management cluster's default ingress domain (OpenShift's router): a Route made
/// without a host gets `<name>-<namespace>.<domain>` from it.
pub(crate) const MANAGEMENT_APPS_DOMAIN: &str = "apps.management.example.com";

/// What the HyperShift operator writes as `status.ignitionEndpoint`: the Ignition Route
/// strategy's hostname; else the host of the control-plane operator's `ignition-server`
/// Route: `ignition-server.apps.<name>.hypershift.local` on a Private or PublicAndPrivate
/// cluster (`support/util/route.go` `ReconcileInternalRoute`), else the one the router
/// allocates (`ReconcileExternalRoute` leaves it empty for a short name).
fn ignition_endpoint(obj: &Value, name: &str, cp_ns: &str) -> String {
    let ignition = obj
        .pointer("/spec/services")
        .and_then(Value::as_array)
        .and_then(|svcs| {
            svcs.iter()
                .find(|s| s.get("service").and_then(Value::as_str) == Some("Ignition"))
        })
        .and_then(|s| s.pointer("/servicePublishingStrategy/route/hostname"))
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty());
    match ignition {
        Some(h) => h.to_string(),
        None if Exposure::of(obj).private => {
            format!("ignition-server.apps.{name}.hypershift.local")
        }
        None => format!("ignition-server-{cp_ns}.{MANAGEMENT_APPS_DOMAIN}"),
    }
}

/// The admin kubeconfig Secret of HostedCluster `name`
/// (`hypershift-operator/controllers/manifests/manifests.go` `KubeConfigSecret`).
pub(crate) fn kubeconfig_secret(name: &str) -> String {
    format!("{name}-admin-kubeconfig")
}

/// How users reach an available cluster, as HyperShift reports it on the HostedCluster
/// (`hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`):
/// `status.kubeconfig` names the Secret `<name>-admin-kubeconfig` (key `kubeconfig`, copied
/// from the control plane's, with the HostedCluster's labels) once it exists, and
/// `status.controlPlaneEndpoint` is the HostedControlPlane's: the API server Route's
/// hostname on 443 (port forced to 443 for a Route, `isAPIServerRoute`), a public
/// LoadBalancer's address on 6443, or, private only, `api.<name>.hypershift.local` (what
/// the private endpoint's DNS answers). The kubeconfig's credential is a random token of
/// the simulator's own.
fn access_status(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    ns: &str,
    name: &str,
    obj: &mut Value,
    s: &crate::state::HcSim,
) -> bool {
    let e = Exposure::of(obj);
    let (host, port) = match (&e.kas_hostname, e.kas_lb && e.public, &s.public_ip) {
        (Some(h), _, _) => (h.clone(), 443),
        // A public LoadBalancer API server on Azure: `kube-apiserverlb` on 7443, since
        // 6443 collides with the management cluster's own public LB rule
        // (`infra/infra.go` `reconcileAPIServerServiceStatus`, `support/config/constants.go`
        // `KASSVCLBAzurePort`).
        (None, true, Some(ip)) => (ip.clone(), KAS_LB_AZURE_PORT),
        _ => (format!("api.{name}.hypershift.local"), e.local_zone_port()),
    };
    let endpoint = json!({"host": host, "port": port});
    let secret = kubeconfig_secret(name);
    let mut dirty = false;
    if let Some(secret_kind) = kind_by_key("core/secrets")
        && store::get(st, "core/secrets", ns, &secret).is_none()
    {
        use base64::Engine;
        let token = util::uuid(st, sim.config().seed);
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://{host}:{port}\n  name: {name}\ncontexts:\n- context:\n    cluster: {name}\n    user: admin\n  name: admin\ncurrent-context: admin\nusers:\n- name: admin\n  user:\n    token: sim-{token}\n"
        );
        let labels = obj
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or_else(|| json!({}));
        store::create(
            sim,
            st,
            now,
            secret_kind,
            ns,
            json!({
                "metadata": {"name": secret, "labels": labels},
                "type": "Opaque",
                "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig)},
            }),
        );
    }
    let status = util::obj_mut(obj, "status");
    if status.get("controlPlaneEndpoint") != Some(&endpoint) {
        status.insert("controlPlaneEndpoint".into(), endpoint);
        dirty = true;
    }
    let kc = json!({"name": secret});
    if status.get("kubeconfig") != Some(&kc) {
        status.insert("kubeconfig".into(), kc);
        dirty = true;
    }
    dirty
}

/// The guest's rollout, as the HostedCluster shows it: `status.version`
/// (HyperShift copies the guest ClusterVersion's history; `hypershift create cluster
/// --wait` waits for `history[0].completionTime`, `cmd/cluster/core/create.go`) and the
/// `ClusterVersion*` conditions it bubbles up from the CVO
/// (`api/hypershift/v1beta1/hostedcluster_conditions.go`). The release rolls out
/// `guest_rollout` after every NodePool of the cluster is Ready; with failing cluster
/// operators (scenario) it stays `Partial`, with *our model* of the CVO's messages.
fn rollout(
    sim: &Simulator,
    st: &State,
    now: u64,
    ns: &str,
    name: &str,
    obj: &mut Value,
    s: &mut crate::state::HcSim,
) -> bool {
    let mut pools = entries(st, &format!("{HYPERSHIFT}/nodepools"), Some(ns))
        .map(|e| &*e.object)
        .filter(|p| str_at(p, "/spec/clusterName") == Some(name))
        .peekable();
    let ready = pools.peek().is_some() && pools.all(|p| condition_true(p, "Ready"));
    if !ready {
        s.pools_ready_ms = None;
        return false;
    }
    let since = *s.pools_ready_ms.get_or_insert(now);
    if now < since + sim.scaled(sim.config().latency.guest_rollout) {
        return false;
    }
    let version = release_of(obj).map(|r| r.2).unwrap_or_default();
    let image = resolved_pullspec(str_at(obj, "/spec/release/image").unwrap_or_default());
    // Cluster operators that cannot reach Azure (their workload identities) never become
    // available, beside those a test scenario names.
    let mut failing: Vec<String> = crate::preflight::scenario(sim).failing_cluster_operators;
    let mut details: Vec<(String, String)> = Vec::new();
    for f in identity_failures(sim, st, ns, obj) {
        if let crate::workload_identity::Effect::Operator(co) = f.effect {
            if !failing.iter().any(|x| x == co) {
                failing.push(co.to_string());
            }
            if !details.iter().any(|(c, _)| c == co) {
                details.push((co.to_string(), f.text()));
            }
        }
    }
    // Inside the guest VNet, the console reaches the API server and the OAuth server by the
    // names the control plane publishes (`status.controlPlaneEndpoint`, the OAuth Route's
    // hostname): *our model* of the console operator's checks, failing the way a pod's
    // lookup fails when no zone answers (`crate::dns`: a linked private zone is
    // authoritative, with no fall-through).
    if let Some(why) = guest_lookup_failure(st, obj) {
        if !failing.iter().any(|x| x == "console") {
            failing.push("console".into());
        }
        details.push(("console".into(), why));
    }
    let detail = |co: &str| {
        details
            .iter()
            .find(|(c, _)| c == co)
            .map(|(_, d)| format!(": {d}"))
            .unwrap_or_default()
    };
    let at = crate::util::rfc3339_secs(now);
    let started = crate::util::rfc3339_secs(since);
    let mut dirty = false;
    // The CRD requires `desired`, `observedGeneration` and `availableUpdates` (none here)
    // in `status.version`, and every history entry's `completionTime` (nullable).
    let generation = obj
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    if failing.is_empty() {
        s.rolled_out = true;
        crate::util::obj_mut(obj, "status").insert(
            "version".into(),
            json!({
                "desired": {"image": image, "version": version},
                "history": [{"state": "Completed", "version": version, "image": image,
                    "startedTime": started, "completionTime": at, "verified": false}],
                "observedGeneration": generation,
                "availableUpdates": [],
            }),
        );
        cluster_version_done(obj, &version, now);
        return true;
    }
    let failing_msg = if failing.len() == 1 {
        format!(
            "Cluster operator {} is not available{}",
            failing[0],
            detail(&failing[0])
        )
    } else {
        format!(
            "Multiple errors are preventing progress:\n{}",
            failing
                .iter()
                .map(|o| format!("* Cluster operator {o} is not available{}", detail(o)))
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    if obj.pointer("/status/version/history/0").is_none() {
        crate::util::obj_mut(obj, "status").insert(
            "version".into(),
            json!({
                "desired": {"image": image, "version": version},
                "history": [{"state": "Partial", "version": version, "image": image,
                    "startedTime": started, "completionTime": null, "verified": false}],
                "observedGeneration": generation,
                "availableUpdates": [],
            }),
        );
        dirty = true;
    }
    dirty |= set_condition(
        obj,
        "ClusterVersionFailing",
        true,
        if failing.len() == 1 {
            "ClusterOperatorNotAvailable"
        } else {
            "MultipleErrors"
        },
        &failing_msg,
        now,
    );
    dirty |= set_condition(
        obj,
        "ClusterVersionProgressing",
        true,
        "FromClusterVersion",
        &format!("Unable to apply {version}: some cluster operators are not available"),
        now,
    );
    dirty |= set_condition(
        obj,
        "ClusterVersionAvailable",
        false,
        "FromClusterVersion",
        &format!("Unable to apply {version}"),
        now,
    );
    dirty
}

/// The first name the guest must resolve from its VNet that no zone answers there: on a
/// private topology, the API server's endpoint host and the OAuth server's hostname
/// (`api.<name>.hypershift.local` is the nodes' own, checked by [`nodes_reach_api`]).
pub(crate) fn guest_lookup_failure(st: &State, obj: &Value) -> Option<String> {
    if !Exposure::of(obj).private {
        return None;
    }
    let vnet = str_at(obj, "/spec/platform/azure/vnetID")?;
    let oauth = obj
        .pointer("/spec/services")
        .and_then(Value::as_array)
        .and_then(|svcs| {
            svcs.iter()
                .find(|s| s.get("service").and_then(Value::as_str) == Some("OAuthServer"))
        })
        .and_then(|s| s.pointer("/servicePublishingStrategy/route/hostname"))
        .and_then(Value::as_str);
    let api = str_at(obj, "/status/controlPlaneEndpoint/host");
    [api, oauth]
        .into_iter()
        .flatten()
        .filter(|h| !h.ends_with(".hypershift.local") && !h.is_empty())
        .find(|h| crate::dns::resolve_in_vnet(st, vnet, h).ip().is_none())
        .map(|h| format!("lookup {h} on 168.63.129.16:53: no such host"))
}

fn topology(obj: &Value) -> &str {
    str_at(obj, "/spec/platform/azure/topology").unwrap_or("Public")
}

/// Why the control-plane operator never reports its infrastructure ready, as the
/// HostedCluster shows it.
#[derive(Debug, Clone)]
pub(crate) struct InfraBlock {
    /// `Available`'s reason.
    pub reason: &'static str,
    /// `Available`'s message.
    pub message: String,
    /// `InfrastructureReady`'s message, when the reconcile gets as far as reporting it.
    pub infrastructure_message: Option<String>,
}

/// Whether the control-plane operator can compute the control plane's infrastructure
/// status (`control-plane-operator/controllers/hostedcontrolplane/infra/infra.go`
/// `ReconcileInfrastructureStatus`, `InfrastructureStatus.IsReady`), once its Services
/// exist:
/// - **4.22, a Route API server without a hostname**: `reconcileAPIServerServiceStatus`
///   hands the `private-router` (or public `router`) Service to `kas.ReconcileServiceStatus`
///   (`kas/service.go`), whose Route case reads `strategy.Route.Hostname` with no nil check:
///   a nil-pointer panic on every HostedControlPlane reconcile once the router has its
///   address (controller-runtime recovers it and requeues). The reconcile never reaches its
///   status update, so the HostedControlPlane is never available. An empty hostname (a
///   `route: {}`) gives an empty API host, so `IsReady` is false. Only `main` (4.23,
///   commit `30d61dfa07`) falls back to the router's address.
/// - **Shared ingress** (`support/util/visibility.go` `UseSharedIngressHCP`:
///   `azureAuthenticationConfigType: ManagedIdentities` and a public topology): the API
///   host is `sharedingress.KasRouteHostname` (`hypershift-operator/controllers/sharedingress/
///   sharedingress_controller.go`), empty unless the API server is a Route with a hostname;
///   and on AKS, where no OpenShift router admits Routes and the default ingress domain is
///   empty, a hostname-less Konnectivity or OAuth Route gets no host. `IsReady` needs all
///   three: `InfrastructureReady=False`, "Cluster infrastructure is still provisioning".
pub(crate) fn infrastructure_block(sim: &Simulator, obj: &Value) -> Option<InfraBlock> {
    let version = crate::config::minor_version(&sim.config().hypershift_version).unwrap_or((4, 22));
    let strategy = |service: &str| {
        obj.pointer("/spec/services")
            .and_then(Value::as_array)
            .and_then(|svcs| {
                svcs.iter()
                    .find(|s| s.get("service").and_then(Value::as_str) == Some(service))
            })
            .and_then(|s| s.get("servicePublishingStrategy"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let is_route = |p: &Value| p.get("type").and_then(Value::as_str) == Some("Route");
    let hostname = |p: &Value| {
        p.pointer("/route/hostname")
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty())
            .map(str::to_string)
    };
    let kas = strategy("APIServer");
    let shared_ingress = str_at(
        obj,
        "/spec/platform/azure/azureAuthenticationConfig/azureAuthenticationConfigType",
    ) == Some("ManagedIdentities")
        && !topology(obj).eq_ignore_ascii_case("Private");
    let provisioning = || InfraBlock {
        reason: "WaitingOnInfrastructureReady",
        message: "Cluster infrastructure is still provisioning".into(),
        infrastructure_message: Some("Cluster infrastructure is still provisioning".into()),
    };
    if shared_ingress {
        if hostname(&kas).filter(|_| is_route(&kas)).is_none() {
            return Some(provisioning());
        }
        if crate::aks::is_aks(sim) {
            for service in ["Konnectivity", "OAuthServer"] {
                let p = strategy(service);
                if is_route(&p) && hostname(&p).is_none() {
                    return Some(provisioning());
                }
            }
        }
        return None;
    }
    if version <= (4, 22) && is_route(&kas) && hostname(&kas).is_none() {
        if kas.get("route").is_none() {
            return Some(InfraBlock {
                reason: "WaitingForAvailable",
                message: "Waiting for hosted control plane to be healthy".into(),
                infrastructure_message: None,
            });
        }
        return Some(provisioning());
    }
    None
}

/// A Go `time.Duration` string as the NodePool API takes it (`30s`, `5m`, `1h30m`, `0s`).
pub(crate) fn parse_go_duration(s: &str) -> Option<std::time::Duration> {
    let mut total = 0f64;
    let mut num = String::new();
    let mut chars = s.trim().chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push('s');
            chars.next();
        }
        let v: f64 = num.parse().ok()?;
        num.clear();
        total += v * match unit.as_str() {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        any = true;
    }
    (any && num.is_empty()).then(|| std::time::Duration::from_secs_f64(total))
}

/// HyperShift's network overlap check (`hypershift-operator/controllers/hostedcluster/
/// hostedcluster_controller.go` `validateSliceNetworkCIDRs` → `compareCIDREntries`): the
/// machine, service and cluster networks, in that order, pairwise; each overlap is a
/// `field.Invalid` on the first of the pair, aggregated into `ValidConfiguration=False`
/// (reason `InvalidConfiguration`), and the cluster never becomes Available.
/// On a management cluster without the Route API (AKS), HyperShift refuses a
/// HostedCluster whose services are Routes, whatever its topology
/// (`hostedcluster_controller.go` `validateConfigAndClusterCapabilities`, message verbatim).
fn route_capability_errors(sim: &Simulator, obj: &Value) -> Vec<String> {
    if crate::aks::routes_served(sim) {
        return Vec::new();
    }
    obj.pointer("/spec/services")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| {
            s.pointer("/servicePublishingStrategy/type")
                .and_then(Value::as_str)
                == Some("Route")
        })
        .filter_map(|s| s.get("service").and_then(Value::as_str))
        .map(|svc| {
            format!("cluster does not support Routes, but service \"{svc}\" is exposed via a Route")
        })
        .collect()
}

fn network_overlaps(obj: &Value) -> Vec<String> {
    let mut entries: Vec<(&str, ipnet::Ipv4Net)> = Vec::new();
    for (key, path) in [
        ("machineNetwork", "spec.networking.MachineNetwork"),
        ("serviceNetwork", "spec.networking.ServiceNetwork"),
        ("clusterNetwork", "spec.networking.ClusterNetwork"),
    ] {
        for e in obj
            .pointer(&format!("/spec/networking/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(net) = e
                .get("cidr")
                .and_then(Value::as_str)
                .and_then(|c| c.parse::<ipnet::Ipv4Net>().ok())
            {
                entries.push((path, net));
            }
        }
    }
    let mut errs = Vec::new();
    for (o, (po, a)) in entries.iter().enumerate() {
        for (pi, b) in &entries[o + 1..] {
            if a.contains(&b.network()) || b.contains(&a.network()) {
                errs.push(format!(
                    "{po}: Invalid value: \"{a}\": {po} and {pi} overlap: {a} and {b}"
                ));
            }
        }
    }
    errs
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

/// Name of the management cluster's shared internal load balancer (cloud-provider-azure:
/// `<clusterName>-internal`, `kubernetes` by default; an OpenShift management cluster's is
/// `<infraID>-internal`).
pub(crate) const SHARED_ILB: &str = "kubernetes-internal";

/// Creates the control-plane namespace and the `private-router` Service, whose internal
/// load balancer IP is a new frontend on the management cluster's **shared** internal load
/// balancer (cloud-provider-azure `reconcileLoadBalancer`: one internal LB per cluster,
/// one frontend per Service, named `a` + the Service's UID without dashes,
/// `getDefaultFrontendIPConfigName`). Returns (IP, LB id, frontend id).
fn create_router(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    name: &str,
) -> (String, String, String) {
    let c = sim.config();
    let rg_id = format!(
        "/subscriptions/{}/resourceGroups/{}",
        c.management_subscription, c.management_resource_group
    );
    let subnet = format!(
        "{rg_id}/providers/Microsoft.Network/virtualNetworks/{}/subnets/aks-subnet",
        c.management_vnet
    );
    ensure_cp_namespace(sim, st, now, cp_ns);
    let Some(svc_kind) = kind_by_key("core/services") else {
        return Default::default();
    };
    let svc = match store::get_shared(st, "core/services", cp_ns, "private-router") {
        Some(s) => s,
        None => store::create(
            sim,
            st,
            now,
            svc_kind,
            cp_ns,
            // The router's port is named: `targetPort: https` (`ingress/router.go`).
            // Owned by the HostedControlPlane (`config.OwnerRefFrom(hcp)`, a controller
            // reference), which the private-link observer follows to its HCP.
            json!({
                "metadata": {"name": "private-router", "annotations": {"service.beta.kubernetes.io/azure-load-balancer-internal": "true"},
                    "ownerReferences": [hcp_owner_ref(cp_ns, name)]},
                "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}]},
            }),
        ),
    };
    let uid = str_at(&svc, "/metadata/uid")
        .unwrap_or(cp_ns)
        .replace('-', "");
    let ip = arm_store::alloc_ip(st, &subnet);
    let lb_id = format!("{rg_id}/providers/Microsoft.Network/loadBalancers/{SHARED_ILB}");
    let fe_name = format!("a{uid}");
    let fe_id = format!("{lb_id}/frontendIPConfigurations/{fe_name}");
    let fe = json!({
        "name": fe_name, "id": fe_id,
        "type": "Microsoft.Network/loadBalancers/frontendIPConfigurations",
        "properties": {"privateIPAddress": ip, "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4", "subnet": {"id": subnet}},
    });
    match st.arm.get_mut(&lb_id.to_ascii_lowercase()) {
        Some(lb) => {
            if let Some(fes) = lb
                .body
                .pointer_mut("/properties/frontendIPConfigurations")
                .and_then(Value::as_array_mut)
            {
                fes.push(fe);
            }
        }
        None => {
            let lb = json!({
                "location": c.management_location,
                "sku": {"name": "Standard", "tier": "Regional"},
                "tags": {"kubernetes-cluster-name": "kubernetes"},
                "properties": {
                    "frontendIPConfigurations": [fe],
                    "backendAddressPools": [], "loadBalancingRules": [], "probes": [], "inboundNatRules": [], "inboundNatPools": [], "outboundRules": [],
                }
            });
            arm_store::insert_internal(sim, st, now, &lb_id, types::LB, &rg_id, lb);
        }
    }
    let mut updated = Arc::unwrap_or_clone(svc);
    util::obj_mut(&mut updated, "spec")
        .entry("clusterIP")
        .or_insert(json!("10.96.0.100"));
    updated["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
    store::update(sim, st, svc_kind, cp_ns, updated);
    (ip, lb_id, fe_id)
}

/// Removes one frontend from the shared internal load balancer, and the load balancer once
/// it has none left.
fn remove_frontend(st: &mut State, lb_id: &str, fe_id: &str) {
    let key = lb_id.to_ascii_lowercase();
    let empty = match st.arm.get_mut(&key) {
        Some(lb) => match lb
            .body
            .pointer_mut("/properties/frontendIPConfigurations")
            .and_then(Value::as_array_mut)
        {
            Some(fes) => {
                fes.retain(|f| !str_at(f, "/id").is_some_and(|i| i.eq_ignore_ascii_case(fe_id)));
                fes.is_empty()
            }
            None => true,
        },
        None => false,
    };
    if empty {
        arm_store::remove_tree(st, &key);
    }
}

/// How a HostedCluster publishes its API server (`spec.services`, topology).
#[derive(Debug, Clone)]
pub(crate) struct Exposure {
    /// Private or PublicAndPrivate (`IsPrivateHC`).
    pub private: bool,
    /// Public or PublicAndPrivate (`IsPublicHC`).
    pub public: bool,
    /// The API server is a LoadBalancer (`IsLBKAS`), else a Route.
    pub kas_lb: bool,
    /// The API server Route's hostname (`UseDedicatedDNSForKAS`).
    pub kas_hostname: Option<String>,
    /// Served by the management cluster's shared ingress (`support/util/visibility.go`
    /// `UseSharedIngressHC`: `ManagedIdentities` and a public topology).
    pub shared_ingress: bool,
}

impl Exposure {
    pub(crate) fn of(obj: &Value) -> Self {
        let t = topology(obj);
        let kas = obj
            .pointer("/spec/services")
            .and_then(Value::as_array)
            .and_then(|svcs| {
                svcs.iter()
                    .find(|s| s.get("service").and_then(Value::as_str) == Some("APIServer"))
            })
            .and_then(|s| s.get("servicePublishingStrategy"));
        Self {
            private: !t.eq_ignore_ascii_case("Public"),
            public: !t.eq_ignore_ascii_case("Private"),
            kas_lb: kas.and_then(|k| k.get("type")).and_then(Value::as_str) == Some("LoadBalancer"),
            kas_hostname: kas
                .and_then(|k| k.pointer("/route/hostname"))
                .and_then(Value::as_str)
                .filter(|h| !h.is_empty())
                .map(str::to_string),
            shared_ingress: !t.eq_ignore_ascii_case("Private")
                && str_at(
                    obj,
                    "/spec/platform/azure/azureAuthenticationConfig/azureAuthenticationConfigType",
                ) == Some("ManagedIdentities"),
        }
    }

    /// The port nodes dial at `api.<name>.hypershift.local` on a private topology
    /// (`support/util/networking.go` `APIPortForLocalZone`).
    pub(crate) fn local_zone_port(&self) -> u16 {
        if self.kas_lb { 6443 } else { 443 }
    }
}

/// HyperShift's `KASSVCLBAzurePort`: the port of a public LoadBalancer API server on Azure.
pub(crate) const KAS_LB_AZURE_PORT: u16 = 7443;

/// Namespace of the management cluster's shared ingress router, which the HyperShift
/// operator installed with `--managed-service ARO-HCP` runs
/// (`hypershift-operator/controllers/sharedingress/manifests.go`: Service `router`, a
/// public LoadBalancer).
pub(crate) const SHARED_INGRESS_NAMESPACE: &str = "hypershift-sharedingress";

/// Label HyperShift puts on a control-plane namespace
/// (`hostedcluster_controller.go` `ControlPlaneNamespaceLabelKey`).
const CP_NAMESPACE_LABEL: &str = "hypershift.openshift.io/hosted-control-plane";

/// Creates the control-plane namespace `<ns>-<name>` if it is missing ("Reconcile the
/// hosted cluster namespace", `hostedcluster_controller.go` `reconcile`). Returns whether
/// it was created.
fn ensure_cp_namespace(sim: &Simulator, st: &mut State, now: u64, cp_ns: &str) -> bool {
    let Some(ns_kind) = kind_by_key("core/namespaces") else {
        return false;
    };
    if store::get(st, "core/namespaces", "", cp_ns).is_some() {
        return false;
    }
    store::create(
        sim,
        st,
        now,
        ns_kind,
        "",
        json!({"metadata": {"name": cp_ns, "labels": {CP_NAMESPACE_LABEL: "true"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
    );
    true
}

/// Name of the pull secret the operator syncs into the control-plane namespace
/// (`hypershift-operator/controllers/manifests/controlplaneoperator/manifests.go` `PullSecret`).
pub(crate) const CP_PULL_SECRET: &str = "pull-secret";
/// Name of the SSH key Secret it syncs there (`manifests.go` `SSHKey`).
pub(crate) const CP_SSH_KEY: &str = "ssh-key";
/// The pull secret's key (`corev1.DockerConfigJsonKey`).
const PULL_SECRET_KEY: &str = ".dockerconfigjson";
/// The SSH key Secret's key.
pub(crate) const SSH_KEY_KEY: &str = "id_rsa.pub";

/// The HyperShift operator's sync of the HostedCluster's pull secret and SSH key into the
/// control-plane namespace, on every reconcile
/// (`hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go` `reconcile`:
/// "Reconcile the HostedControlPlane pull secret" and "… SSH secret"): Secret
/// `spec.pullSecret.name` of the HostedCluster's namespace, key `.dockerconfigjson` →
/// `<cp-ns>/pull-secret`, type `kubernetes.io/dockerconfigjson`; then, with
/// `spec.sshKey.name`, key `id_rsa.pub` → `<cp-ns>/ssh-key`, type `Opaque`. The namespace is
/// created first. A copy is written only when its data differs (`createOrUpdate` does not
/// update an unchanged object); other keys of the copy are kept, as the mutate function
/// keeps them.
///
/// A missing source, or one without its key, fails the real reconcile ("failed to get pull
/// secret …", "hostedcluster pull secret %q must have a .dockerconfigjson key", "hostedcluster
/// SSHKey secret %q must have a id_rsa.pub key") before anything after it: here nothing is
/// copied from there on (the SSH key is not synced after a failed pull secret), and the rest
/// of the simulated operator goes on as before (`ReconciliationSucceeded` is not modelled).
/// HyperShift also annotates each source with `referenced-resource.hypershift.openshift.io/<hc
/// name>: "true"` (`ensureReferencedResourceAnnotation`); the simulator leaves the user's
/// Secrets untouched. Returns whether anything was written.
fn sync_secrets(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    ns: &str,
    cp_ns: &str,
    hc: &Value,
) -> bool {
    let mut changed = ensure_cp_namespace(sim, st, now, cp_ns);
    if let Some(name) = str_at(hc, "/spec/pullSecret/name").filter(|n| !n.is_empty()) {
        match copy_secret_key(
            sim,
            st,
            now,
            (ns, name),
            (cp_ns, CP_PULL_SECRET),
            PULL_SECRET_KEY,
            "kubernetes.io/dockerconfigjson",
        ) {
            Some(c) => changed |= c,
            None => return changed,
        }
    }
    if let Some(name) = str_at(hc, "/spec/sshKey/name").filter(|n| !n.is_empty()) {
        changed |= copy_secret_key(
            sim,
            st,
            now,
            (ns, name),
            (cp_ns, CP_SSH_KEY),
            SSH_KEY_KEY,
            "Opaque",
        )
        .unwrap_or(false);
    }
    changed
}

/// Copies `key` of Secret `src` into Secret `dst` (created with type `stype`) when it
/// differs. `None` when the source or its key is missing (the real reconcile fails),
/// else whether it wrote.
fn copy_secret_key(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    (src_ns, src): (&str, &str),
    (dst_ns, dst): (&str, &str),
    key: &str,
    stype: &str,
) -> Option<bool> {
    let kind = kind_by_key("core/secrets")?;
    let data = store::get(st, "core/secrets", src_ns, src)?
        .pointer(&format!(
            "/data/{}",
            key.replace('~', "~0").replace('/', "~1")
        ))
        .cloned()?;
    match store::get(st, "core/secrets", dst_ns, dst).cloned() {
        None => {
            store::create(
                sim,
                st,
                now,
                kind,
                dst_ns,
                json!({"metadata": {"name": dst}, "type": stype, "data": {key: data}}),
            );
            Some(true)
        }
        Some(existing) if existing.get("data").and_then(|d| d.get(key)) == Some(&data) => {
            Some(false)
        }
        Some(mut existing) => {
            util::obj_mut(&mut existing, "data").insert(key.to_string(), data);
            store::update(sim, st, kind, dst_ns, existing);
            Some(true)
        }
    }
}

/// The public half of `reconcileHCPRouterServices`
/// (`control-plane-operator/controllers/hostedcontrolplane/infra/infra.go`), on every
/// reconcile once the control plane's Services exist: with `IsPublicHCP && LabelHCPRoutes`
/// (`support/util/visibility.go`; on Azure a public topology whose API server is a Route
/// with a hostname, `UseDedicatedDNSForKAS`) the public `router` LoadBalancer Service is
/// created (its public IP in `status.loadBalancer`), otherwise it is deleted
/// (`util.DeleteIfNeeded`). So switching `spec.platform.azure.topology` from
/// PublicAndPrivate to Private removes `router` and the public IP, and switching back
/// recreates them (the same IP: it derives from the Service's name). The `private-router`
/// and its internal load balancer frontend stay: both topologies are private. A
/// LoadBalancer API server's `kube-apiserver` Service is left as it was created. Returns
/// whether anything changed.
fn reconcile_public_router(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    e: &Exposure,
    s: &mut HcSim,
) -> bool {
    if e.shared_ingress {
        // The shared ingress router serves the cluster's Routes: no router of its own.
        let ip = ensure_public_service(sim, st, now, SHARED_INGRESS_NAMESPACE, "router", 443);
        let changed = s.public_ip.as_deref() != Some(ip.as_str());
        s.public_ip = Some(ip);
        return changed;
    }
    if e.public && e.kas_hostname.is_some() {
        let exists = store::get(st, "core/services", cp_ns, "router").is_some();
        let ip = ensure_public_service(sim, st, now, cp_ns, "router", 443);
        let changed = !exists || s.public_ip.as_deref() != Some(ip.as_str());
        s.public_ip = Some(ip);
        return changed;
    }
    let mut changed = false;
    if store::get(st, "core/services", cp_ns, "router").is_some()
        && let Some(svc_kind) = kind_by_key("core/services")
    {
        store::delete(sim, st, now, svc_kind, cp_ns, "router");
        changed = true;
    }
    if !e.kas_lb && s.public_ip.is_some() {
        s.public_ip = None;
        changed = true;
    }
    changed
}

/// Creates public LoadBalancer Service `name` in `cp_ns` if it is missing, with its public
/// IP in `status.loadBalancer`; returns the IP.
pub(crate) fn ensure_public_service(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    name: &str,
    port: u16,
) -> String {
    let ip = crate::guest::public_ip(&format!("{cp_ns}/{name}"));
    if let Some(svc_kind) = kind_by_key("core/services")
        && store::get(st, "core/services", cp_ns, name).is_none()
    {
        let svc = json!({
            "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "https", "port": port, "protocol": "TCP"}]},
        });
        let mut created = Arc::unwrap_or_clone(store::create(sim, st, now, svc_kind, cp_ns, svc));
        created["status"] = json!({"loadBalancer": {"ingress": [{"ip": ip}]}});
        store::update(sim, st, svc_kind, cp_ns, created);
    }
    ip
}

/// The public Services of `reconcileHCPRouterServices` and `reconcileAPIServerService`
/// (`control-plane-operator/controllers/hostedcontrolplane/infra/infra.go`): the public
/// `router` when the HCP router serves a public cluster's Routes (`LabelHCPRoutes`: a
/// Route API server with a hostname), and the `kube-apiserver` LoadBalancer Service of a
/// public LoadBalancer API server. Returns the public IP the API server is reached at.
fn public_services(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    e: &Exposure,
) -> Option<String> {
    if !e.public {
        return None;
    }
    if e.shared_ingress {
        return Some(ensure_public_service(
            sim,
            st,
            now,
            SHARED_INGRESS_NAMESPACE,
            "router",
            443,
        ));
    }
    let (name, port) = if e.kas_hostname.is_some() {
        ("router", 443)
    } else if e.kas_lb {
        ("kube-apiserverlb", KAS_LB_AZURE_PORT)
    } else {
        return None;
    };
    Some(ensure_public_service(sim, st, now, cp_ns, name, port))
}

/// What public DNS answers for `host` (`crate::dns::resolve_publicly`, the cluster's
/// `spec.dns.publicZoneID` being the zone delegated for its base domain).
fn resolve_public(st: &State, hc: &Value, host: &str) -> Option<String> {
    crate::dns::resolve_publicly(st, host, str_at(hc, "/spec/dns/publicZoneID"))
        .ip()
        .map(str::to_string)
}

/// Whether a node of this cluster can reach its API server, as kubelet and
/// the node's HAProxy dial it (`hypershift-operator/controllers/nodepool/apiserver-haproxy/
/// haproxy.go`): public topologies through the public endpoint; private ones at
/// `api.<name>.hypershift.local`, on 443 for a Route API server, 6443 for a LoadBalancer
/// one. On Azure the Private Link Service fronts only the `private-router`, on 443
/// (`controllers/azureprivatelinkservice/controller.go`), so a LoadBalancer API server
/// behind a private topology is unreachable from the nodes: none of them ever registers.
fn nodes_reach_api(st: &State, hc: &HcSim, obj: &Value, e: &Exposure) -> Result<(), String> {
    if e.shared_ingress {
        // A machine fetches its ignition and kubelet dials the API server by the Routes'
        // public hostnames, which must resolve to the shared ingress router
        // (`apiserver-haproxy/haproxy.go`: the shared ingress's address for a non-private
        // ARO HCP cluster; the ignition endpoint is the Ignition Route's host).
        for service in ["Ignition", "APIServer"] {
            let host = obj
                .pointer("/spec/services")
                .and_then(Value::as_array)
                .and_then(|svcs| {
                    svcs.iter()
                        .find(|s| s.get("service").and_then(Value::as_str) == Some(service))
                })
                .and_then(|s| s.pointer("/servicePublishingStrategy/route/hostname"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let answer = resolve_public(st, obj, host);
            if answer.is_none() || answer != hc.public_ip {
                return Err(format!(
                    "{service} endpoint {host}: lookup {host}: no such host at the shared ingress router"
                ));
            }
        }
        return Ok(());
    }
    if !e.private {
        return Ok(());
    }
    let port = e.local_zone_port();
    if port != 443 {
        return Err(format!(
            "nodes dial api.<cluster>.hypershift.local:{port}, but the private endpoint reaches only the private router on 443"
        ));
    }
    if private_path_ready(st, hc, obj) {
        Ok(())
    } else {
        Err("nodes cannot reach api.<cluster>.hypershift.local: no approved private endpoint with an `api` record".into())
    }
}

/// Why a pool's nodes never become Ready: the NodePool condition that says so.
#[derive(Debug, Clone)]
pub(crate) struct NodeBlock {
    pub ctype: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Whether the nodes of pool `pool` of `hc` can come up: CAPZ must be able to create their
/// machines and the cloud provider to initialise them (their workload identities,
/// [`crate::workload_identity`]), and kubelet must reach the API server
/// ([`nodes_reach_api`]).
pub(crate) fn node_block(
    sim: &Simulator,
    st: &State,
    ns: &str,
    pool: &str,
    hc: &Value,
    hs: &HcSim,
) -> Result<(), NodeBlock> {
    use crate::workload_identity::Effect;
    let failures = identity_failures(sim, st, ns, hc);
    let capz = failures
        .iter()
        .find(|f| f.effect == Effect::Nodes && f.component == "nodePoolManagement");
    if let Some(f) = capz.filter(|f| f.code == "FailedMount") {
        // ARO HCP: CAPZ's pod never starts (its credentials volume): no AzureMachine is
        // reconciled, no VM made (*our model* of the machine's reason).
        return Err(NodeBlock {
            ctype: "AllMachinesReady",
            reason: "WaitingForInfrastructure",
            message: format!(
                "Machine {pool}-0: WaitingForInfrastructure (capi-provider is ContainerCreating: {})",
                f.text()
            ),
        });
    }
    if capz.is_none()
        && let Some(f) = failures.iter().find(|f| f.effect == Effect::ControlPlane)
    {
        // No control plane (its operator never started): the machines come up, their nodes
        // never register.
        return Err(NodeBlock {
            ctype: "AllNodesHealthy",
            reason: "WaitingForNodeRef",
            message: format!(
                "Machine {pool}-0: WaitingForNodeRef (the hosted control plane is not running: control-plane-operator is ContainerCreating: {})",
                f.text()
            ),
        });
    }
    if let Some(f) = capz
        .or_else(|| failures.iter().find(|f| f.effect == Effect::Nodes))
        .cloned()
    {
        return Err(if f.component == "nodePoolManagement" {
            // CAPZ cannot create the VM (AzureMachine `VMRunning=False`, VMProvisionFailed).
            NodeBlock {
                ctype: "AllMachinesReady",
                reason: "VMProvisionFailed",
                message: format!("Machine {pool}-0: VMProvisionFailed: {}", f.text()),
            }
        } else {
            // The cloud provider cannot initialise the node (it keeps its uninitialized
            // taint and never turns Ready).
            NodeBlock {
                ctype: "AllNodesHealthy",
                reason: "NodeConditionsFailed",
                message: format!(
                    "Machine {pool}-0: NodeConditionsFailed: cloud provider: {}",
                    f.text()
                ),
            }
        });
    }
    // A control plane whose infrastructure is never ready publishes no ignition endpoint
    // (`status.ignitionEndpoint` stays empty): no machine ever gets its payload
    // (`hypershift-operator/controllers/nodepool/conditions.go`).
    if str_at(hc, "/status/ignitionEndpoint").is_none_or(str::is_empty) {
        return Err(NodeBlock {
            ctype: "IgnitionEndpointAvailable",
            reason: "IgnitionEndpointMissing",
            message: "Ignition endpoint not available, waiting".into(),
        });
    }
    nodes_reach_api(st, hs, hc, &Exposure::of(hc)).map_err(|why| NodeBlock {
        ctype: "AllNodesHealthy",
        reason: "WaitingForNodeRef",
        message: format!("Machine {pool}-0: WaitingForNodeRef ({why})"),
    })
}

/// Every broken identity link of `hc`: its workload identities (`crate::workload_identity`)
/// or, ARO HCP, its managed identities (`crate::aro_hcp`).
fn identity_failures(
    sim: &Simulator,
    st: &State,
    ns: &str,
    hc: &Value,
) -> Vec<crate::workload_identity::Failure> {
    let mut f = crate::workload_identity::failures(sim, st, ns, hc);
    f.extend(crate::aro_hcp::failures(sim, st, ns, hc));
    f
}

/// Whether an Approved PE reaches a PLS in front of this cluster's private router (its
/// frontend on the shared internal LB) and an `api` A record points at the PE's IP.
fn private_path_ready(st: &State, hc: &HcSim, obj: &Value) -> bool {
    let pls = match (&hc.fe_id, &hc.lb_id) {
        (Some(fe), _) => crate::arm::prepare_pls_referencing_frontend(st, &fe.to_ascii_lowercase()),
        (None, Some(lb)) => crate::arm::prepare_pls_referencing_lb(st, &lb.to_ascii_lowercase()),
        _ => None,
    };
    let Some(pls_key) = pls else {
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
    // What a node in the guest VNet gets for the name it dials (`crate::dns`): the
    // private-link zone must be linked to that VNet, and its record name an approved
    // endpoint's address.
    let name = str_at(obj, "/metadata/name").unwrap_or_default();
    let vnet = str_at(obj, "/spec/platform/azure/vnetID").unwrap_or_default();
    crate::dns::resolve_in_vnet(st, vnet, &format!("api.{name}.hypershift.local"))
        .ip()
        .is_some_and(|ip| ips.iter().any(|x| x == ip))
}

/// A HostedCluster spec HyperShift refuses: the condition it shows.
pub(crate) struct Block {
    ctype: &'static str,
    status: bool,
    reason: &'static str,
    message: String,
}

/// The release rules of HyperShift's code:
/// - the operator accepts releases from 4.14 up to its own minor, and refuses a y-stream
///   downgrade from the version the cluster is at or rolling to (`status.version.desired`
///   when `spec.release.image` asks for another: "y-stream downgrade from \"4.22.0\" to
///   \"4.21.3\" is not supported") (`support/supportedversion/version.go`
///   `IsValidReleaseVersion`, messages verbatim), as `ValidReleaseImage=False`, reason
///   `InvalidImage` (`hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`
///   `validateReleaseImage`); the reconcile is then blocked and the cluster keeps its version;
/// - Azure workload identities (`AzureWorkloadIdentities`) first ship in 4.19: an older
///   release's components cannot authenticate. *Our model* of how that shows: `Degraded`.
/// - the API server published as a Route without a hostname on a non-Private cluster fails
///   the control-plane operator's infrastructure reconcile ("route hostname is required for
///   service APIServer", `control-plane-operator/controllers/hostedcontrolplane/kas/service.go`,
///   wrapped by `infra/infra.go`), bubbled up from the HostedControlPlane's `Degraded`.
pub(crate) fn release_block(sim: &Simulator, obj: &Value) -> Option<Block> {
    let latest = crate::config::minor_version(&sim.config().hypershift_version).unwrap_or((4, 22));
    // How the operator prints a supported version: `release-4.22` formats the semver as is
    // (`"4.22.0"`, `support/supportedversion/version.go` `IsValidReleaseVersion`); `main`
    // (4.23 on) trims a `.0` patch (`trimVersion`: `"4.22"`).
    let shown = |major: u32, minor: u32| {
        if latest <= (4, 22) {
            format!("{major}.{minor}.0")
        } else {
            format!("{major}.{minor}")
        }
    };
    if let Some((major, minor, version)) = release_of(obj) {
        // The version the cluster is at or rolling to, when the spec asks for another
        // (`validateReleaseImage`: `status.version.desired`, compared by minor only).
        let current = obj
            .pointer("/status/version/desired")
            .filter(|_| !desired_is_spec(obj))
            .and_then(|d| str_at(d, "/version"))
            .and_then(SemVer::parse);
        if let Some(current) = current
            && current.minor > minor
        {
            let wanted = SemVer::parse(&version).unwrap_or(SemVer::new(major, minor, 0));
            return Some(Block {
                ctype: "ValidReleaseImage",
                status: false,
                reason: "InvalidImage",
                message: format!(
                    "y-stream downgrade from \"{current}\" to \"{wanted}\" is not supported"
                ),
            });
        }
        if (major, minor) > latest {
            return Some(Block {
                ctype: "ValidReleaseImage",
                status: false,
                reason: "InvalidImage",
                message: format!(
                    "the latest version supported is: \"{}\". Attempting to use: \"{version}\"",
                    shown(latest.0, latest.1)
                ),
            });
        }
        if (major, minor) < (4, 14) {
            return Some(Block {
                ctype: "ValidReleaseImage",
                status: false,
                reason: "InvalidImage",
                message: format!(
                    "the minimum version supported for platform Azure is: \"{}\". Attempting to use: \"{version}\"",
                    shown(4, 14)
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
    // `validateConfigAndClusterCapabilities`: every error, aggregated, in HyperShift's order
    // (services exposed as Routes on a cluster without the Route API first, networks last).
    let mut errs = route_capability_errors(sim, obj);
    errs.extend(network_overlaps(obj));
    let message = match errs.len() {
        0 => None,
        // utilerrors.NewAggregate: one error as is, several as "[e1, e2]".
        1 => errs.pop(),
        _ => Some(format!("[{}]", errs.join(", "))),
    };
    if let Some(message) = message {
        return Some(Block {
            ctype: "ValidConfiguration",
            status: false,
            reason: "InvalidConfiguration",
            message,
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::KubeEntry;

    fn put(st: &mut State, kind: &str, ns: &str, name: &str) {
        st.kube.insert(
            store::key(kind, ns, name),
            KubeEntry {
                kind_key: kind.into(),
                namespace: ns.into(),
                name: name.into(),
                object: Arc::new(json!({"metadata": {"name": name, "namespace": ns}})),
                created_seq: 0,
            },
        );
    }

    #[test]
    fn entries_are_the_kind_and_namespace_asked_and_nothing_else() {
        let mut st = State::default();
        let np = format!("{HYPERSHIFT}/nodepools");
        let hc = format!("{HYPERSHIFT}/hostedclusters");
        // Neighbours in key order: a kind whose name extends this one's, a namespace
        // whose name extends the one asked.
        put(&mut st, &np, "clusters", "a");
        put(&mut st, &np, "clusters", "b");
        put(&mut st, &np, "clusters2", "c");
        put(&mut st, &format!("{np}x"), "clusters", "d");
        put(&mut st, &hc, "clusters", "e");
        let names = |it: Vec<&KubeEntry>| it.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        // In the store's key order (`kind|namespace|name`), as the old full scan gave them.
        assert_eq!(names(entries(&st, &np, None).collect()), ["c", "a", "b"]);
        assert_eq!(
            names(entries(&st, &np, Some("clusters")).collect()),
            ["a", "b"]
        );
        assert_eq!(names(entries(&st, &np, Some("clusters2")).collect()), ["c"]);
        assert_eq!(names(entries(&st, &hc, None).collect()), ["e"]);
        assert!(entries(&st, &np, Some("other")).next().is_none());
        // `objects` is the same selection, copied, in the same order.
        let copied: Vec<String> = objects(&st, &np).into_iter().map(|(_, n, _)| n).collect();
        assert_eq!(copied, ["c", "a", "b"]);
    }
}
