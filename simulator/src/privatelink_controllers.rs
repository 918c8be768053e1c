//! HyperShift 4.22's own Azure private-link controllers, simulated.
//!
//! Modelled on (read, not copied):
//! - `control-plane-operator/controllers/azureprivatelinkservice/observer.go` — the CPO's
//!   observer: once the `private-router` Service (internal LB annotation) has an IP, it
//!   creates/updates the `AzurePrivateLinkService` CR `private-router` in the control-plane
//!   namespace from the HostedControlPlane's Azure platform spec;
//! - `control-plane-operator/controllers/azureprivatelinkservice/controller.go` — the CPO's
//!   reconciler: adds the CR finalizer [`CPO_FINALIZER`]; waits for the PLS alias; then
//!   adds the HostedControlPlane finalizer `hypershift.openshift.io/azure-pls-endpoint-cleanup`, creates the private endpoint
//!   `private-router-pe` (manual connection to the alias, in the guest subnet, in
//!   `spec.resourceGroupName`), reports `AzurePrivateEndpointAvailable=False`
//!   (`PrivateEndpointConnectionNotApproved`) while the connection is not `Approved`,
//!   creates zone `<name>.hypershift.local` + link `private-router-vnet-link` + `api` and
//!   `*.apps` A records (TTL 300), and the base-domain zone `<baseDomain>` + link
//!   `private-router-basedomain-vnet-link` + `api-<name>`/`oauth-<name>`; on HCP deletion it
//!   deletes records → link → zone → PE, then removes the HCP finalizer (`main` also removes
//!   the CR finalizer there; `release-4.22`, the default `--hypershift-version`, does not);
//! - `hypershift-operator/controllers/platform/azure/controller.go` — the HyperShift
//!   operator's PLS controller (only with `--private-platform Azure`): finalizer
//!   [`HO_FINALIZER`]; finds the ILB by frontend IP in the management resource group;
//!   creates `pls-<clusterID>` (NAT IP on `spec.natSubnetID`, or an auto-created
//!   `<infraID>-pls-nat`), visibility/auto-approval = guest subscription + additional ones;
//!   on CR deletion it *rejects* Approved/Pending connections (requeue 30 s), then deletes
//!   the PLS (Azure refuses while any connection — a rejected one too — remains);
//! - `control-plane-operator/main.go` `setupPrivatePlatformControllers`: the CPO's
//!   controllers run only when the management cluster serves the Route API and the install
//!   is not ARO HCP (`mgmtClusterCaps.Has(capabilities.CapabilityRoute) &&
//!   !azureutil.IsAroHCP()`): on OpenShift only here, since the simulator's AKS operator is
//!   always installed as ARO HCP (`MANAGED_SERVICE=ARO-HCP`, [`crate::aks`]);
//! - `hypershift-operator/controllers/hostedcluster/hostedcluster_controller.go`: the
//!   HostedCluster gets the CR's conditions (`computeAzurePLSCondition`: `Unknown` when no
//!   CR reports that type). `Available` does not depend on them.
//!
//! The simulator has no HostedControlPlane object: its finalizer and its deletion are
//! [`crate::state::PlsCtrlSim`] flags. HCP deletion happens when the HostedCluster's
//! deletion reaches the operator ([`teardown`]); the CPO stops with the HCP, and the CR
//! (owned by the HCP) is garbage collected then. A CR finalizer the CPO did not remove
//! before that stays: the pessimistic end of the real race the CPO's
//! `reconcileHCPDeletion` comment describes (a stuck per-CR finalizer blocks the namespace,
//! hence the HostedCluster). It happens whenever the CPO added its CR finalizer but never
//! saw a PLS alias (HyperShift installed without `--private-platform Azure`).
//!
//! Azure writes go through the simulated ARM handlers ([`crate::arm::internal_call`]) and
//! are logged in the request log with actor `hypershift-operator` / `control-plane-operator`.

use axum::http::Method;
use serde_json::{Value, json};

use crate::arm::{internal_call, types};
use crate::config::{ManagementPlatform, PrivatePlatform};
use crate::kube::{HYPERSHIFT, kind_by_key, store};
use crate::sim::Simulator;
use crate::state::{PlsCtrlSim, Prov, State};
use crate::util::{self, str_at};

/// Name of the CR (and of the Service it describes).
pub(crate) const CR_NAME: &str = "private-router";
/// The CPO's finalizer on the CR (`azurePrivateLinkServiceFinalizer`).
pub(crate) const CPO_FINALIZER: &str = "hypershift.openshift.io/azure-private-link-service";
/// The HyperShift operator's finalizer on the CR (`azurePLSFinalizer`).
pub(crate) const HO_FINALIZER: &str = "hypershift.openshift.io/azure-pls-cleanup";
/// Annotation the observer copies so the HO finds the HostedCluster.
const HC_ANNOTATION: &str = "hypershift.openshift.io/cluster";

const HO: &str = "hypershift-operator";
const CPO: &str = "control-plane-operator";
const NET_API: &str = "2023-11-01";
const DNS_API: &str = "2024-06-01";
/// `azureutil.PLSRequeueInterval`.
const REQUEUE: std::time::Duration = std::time::Duration::from_secs(30);

const CONDITION_TYPES: [&str; 5] = [
    "AzurePrivateLinkServiceAvailable",
    "AzurePLSCreated",
    "AzureInternalLoadBalancerAvailable",
    "AzurePrivateEndpointAvailable",
    "AzurePrivateDNSAvailable",
];

fn cr_key() -> String {
    format!("{HYPERSHIFT}/azureprivatelinkservices")
}

fn cpo_runs(sim: &Simulator, s: &PlsCtrlSim) -> bool {
    sim.config().management_platform == ManagementPlatform::OpenShift && !s.hcp_gone
}

/// Whether the CPO's `reconcileHCPDeletion` also removes the CR's finalizer: `main` only
/// (4.23 on); `release-4.22`'s leaves it
/// (`control-plane-operator/controllers/azureprivatelinkservice/controller.go`).
fn removes_cr_finalizer_on_hcp_deletion(sim: &Simulator) -> bool {
    crate::config::minor_version(&sim.config().hypershift_version).unwrap_or((4, 22)) > (4, 22)
}

fn ho_runs(sim: &Simulator) -> bool {
    sim.config().private_platform == PrivatePlatform::Azure
}

fn is_private(hc: &Value) -> bool {
    str_at(hc, "/spec/platform/azure/topology")
        .is_some_and(|t| t == "Private" || t == "PublicAndPrivate")
}

fn res<'a>(st: &'a State, id: &str) -> Option<&'a crate::state::ArmResource> {
    st.arm.get(&id.to_ascii_lowercase())
}

fn ready(st: &State, id: &str) -> bool {
    res(st, id).is_some_and(|r| r.prov == Prov::Succeeded)
}

fn put(sim: &Simulator, st: &mut State, now: u64, actor: &str, id: &str, api: &str, body: &Value) {
    let path = format!("{id}?api-version={api}");
    if let Err(e) = internal_call(sim, st, now, actor, Method::PUT, &path, Some(body)) {
        tracing::debug!(%actor, %id, code = %e.code, "simulated controller PUT failed");
    }
}

fn delete(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    actor: &str,
    id: &str,
    api: &str,
) -> Result<u16, crate::arm::ArmError> {
    let path = format!("{id}?api-version={api}");
    internal_call(sim, st, now, actor, Method::DELETE, &path, None)
}

fn set_status(obj: &mut Value, field: &str, value: &str) -> bool {
    let st = util::obj_mut(obj, "status");
    if st.get(field).and_then(Value::as_str) == Some(value) {
        return false;
    }
    st.insert(field.to_string(), json!(value));
    true
}

fn save_cr(sim: &Simulator, st: &mut State, ns: &str, obj: Value) {
    if let Some(kind) = kind_by_key(&cr_key()) {
        store::update(sim, st, kind, ns, obj);
    }
}

fn cr(st: &State, cp_ns: &str) -> Option<Value> {
    store::get(st, &cr_key(), cp_ns, CR_NAME).cloned()
}

/// Runs the controllers for every HostedCluster that is not being deleted.
pub(crate) fn tick(sim: &Simulator, st: &mut State, now: u64) -> bool {
    let hc_key = format!("{HYPERSHIFT}/hostedclusters");
    let live: std::collections::BTreeSet<String> = crate::conditions::entries(st, &hc_key, None)
        .map(|e| format!("{}/{}", e.namespace, e.name))
        .collect();
    st.pls_ctrl.retain(|k, _| live.contains(k));
    // Only private clusters not being deleted are reconciled here (by name: the controllers
    // run before every request, and read what they need of the stored objects).
    let hcs: Vec<(String, String)> = crate::conditions::entries(st, &hc_key, None)
        .filter(|e| !store::is_deleting(&e.object) && is_private(&e.object))
        .map(|e| (e.namespace.clone(), e.name.clone()))
        .collect();
    let mut changed = false;
    for (ns, name) in hcs {
        let k = format!("{ns}/{name}");
        let mut s = st.pls_ctrl.get(&k).cloned().unwrap_or_default();
        let cp_ns = format!("{ns}-{name}");
        if cpo_runs(sim, &s) {
            changed |= observe(sim, st, now, (&cp_ns, &ns, &name), &mut s);
        }
        if ho_runs(sim) {
            changed |= ho_reconcile(sim, st, now, &cp_ns, &ns, &name);
        }
        if cpo_runs(sim, &s) {
            changed |= cpo_reconcile(sim, st, now, &cp_ns, &name, &mut s);
        }
        changed |= copy_conditions(sim, st, now, &cp_ns, &ns, &name);
        st.pls_ctrl.insert(k, s);
    }
    changed
}

/// observer.go: the CR from the `private-router` Service and the HostedControlPlane spec.
///
/// The observer's controller watches only that Service (`SetupWithManager`: `For(&Service{})`
/// with a name predicate; no watch of the HostedControlPlane), so it reconciles when the
/// Service changes — its creation, its address, any update of it — and not when the
/// HostedControlPlane does: a changed `additionalAllowedSubscriptions` reaches the CR only
/// with the Service's next change (controller-runtime's default resync, about 10 hours, is
/// not modelled: it is beyond any wait of hcp-workflow's).
fn observe(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    (cp_ns, ns, name): (&str, &str, &str),
    s: &mut PlsCtrlSim,
) -> bool {
    let Some(svc) = store::get(st, "core/services", cp_ns, CR_NAME) else {
        return false;
    };
    let rv = str_at(svc, "/metadata/resourceVersion").map(str::to_string);
    if rv.is_some() && s.observed_router_rv == rv {
        return false;
    }
    let Some(hc) = store::get(st, &format!("{HYPERSHIFT}/hostedclusters"), ns, name) else {
        return false;
    };
    if str_at(
        svc,
        "/metadata/annotations/service.beta.kubernetes.io~1azure-load-balancer-internal",
    ) != Some("true")
    {
        return false;
    }
    let Some(ip) = str_at(svc, "/status/loadBalancer/ingress/0/ip").map(str::to_string) else {
        return false;
    };
    s.observed_router_rv = rv;
    let s = |p: &str| {
        hc.pointer(&format!("/spec/platform/azure{p}"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut spec = json!({
        "loadBalancerIP": ip,
        "subscriptionID": s("/subscriptionID"),
        "resourceGroupName": s("/resourceGroup"),
        "location": s("/location"),
        "natSubnetID": s("/private/privateLink/natSubnetID"),
        "additionalAllowedSubscriptions": s("/private/privateLink/additionalAllowedSubscriptions"),
        "guestSubnetID": s("/subnetID"),
        "guestVNetID": s("/vnetID"),
        "baseDomain": hc.pointer("/spec/dns/baseDomain").cloned().unwrap_or(Value::Null),
    });
    if let Some(m) = spec.as_object_mut() {
        m.retain(|_, v| !v.is_null());
    }
    match store::get(st, &cr_key(), cp_ns, CR_NAME) {
        None => {
            let Some(kind) = kind_by_key(&cr_key()) else {
                return false;
            };
            let obj = json!({
                "metadata": {"name": CR_NAME, "annotations": {HC_ANNOTATION: format!("{ns}/{name}")}},
                "spec": spec,
            });
            store::create(sim, st, now, kind, cp_ns, obj);
            true
        }
        Some(obj) if obj.get("spec") != Some(&spec) && !store::is_deleting(obj) => {
            let mut obj = obj.clone();
            obj["spec"] = spec;
            save_cr(sim, st, cp_ns, obj);
            true
        }
        Some(_) => false,
    }
}

/// platform/azure/controller.go `Reconcile` (not deleting).
fn ho_reconcile(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    ns: &str,
    name: &str,
) -> bool {
    let Some(mut obj) = cr(st, cp_ns) else {
        return false;
    };
    if store::is_deleting(&obj) {
        return false;
    }
    let mut fins = store::finalizers(&obj);
    if !fins.iter().any(|f| f == HO_FINALIZER) {
        fins.push(HO_FINALIZER.to_string());
        store::set_finalizers(&mut obj, &fins);
        save_cr(sim, st, cp_ns, obj);
        return true;
    }
    let Some(lb_ip) = str_at(&obj, "/spec/loadBalancerIP").map(str::to_string) else {
        return false;
    };
    // The HostedCluster's cluster id names the PLS (`constructPLSName`); HyperShift fills
    // `spec.clusterID` when the HostedCluster has none.
    let Some(cluster_id) = cluster_id(sim, st, ns, name) else {
        return false;
    };
    let c = sim.config();
    let rg_id = format!(
        "/subscriptions/{}/resourceGroups/{}",
        c.management_subscription, c.management_resource_group
    );
    let pls_id =
        format!("{rg_id}/providers/Microsoft.Network/privateLinkServices/pls-{cluster_id}");
    let mut dirty = false;
    if let Some(pls) = res(st, &pls_id) {
        if pls.prov != Prov::Succeeded {
            return false;
        }
        // `reconcilePrivateLinkService`: an existing PLS whose visibility or auto-approval
        // drifted from the CR's allowed subscriptions (`plsSubscriptionsDrifted`, compared
        // sorted) is updated in place, keeping the rest of it (`updatePLSSubscriptions`).
        // Existing private endpoint connections are not touched.
        let desired = allowed_subscriptions(&obj);
        let sorted = |p: &str| {
            let mut v: Vec<String> = pls
                .body
                .pointer(p)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        let mut want: Vec<String> = desired
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect();
        want.sort();
        if sorted("/properties/visibility/subscriptions") != want
            || sorted("/properties/autoApproval/subscriptions") != want
        {
            let mut body = json!({
                "location": pls.body.get("location").cloned().unwrap_or(Value::Null),
                "tags": pls.body.get("tags").cloned().unwrap_or_else(|| json!({})),
                "properties": pls.body.get("properties").cloned().unwrap_or_else(|| json!({})),
            });
            body["properties"]["visibility"] = json!({"subscriptions": desired});
            body["properties"]["autoApproval"] = json!({"subscriptions": desired});
            if let Some(p) = body["properties"].as_object_mut() {
                p.remove("privateEndpointConnections");
                p.remove("provisioningState");
            }
            put(sim, st, now, HO, &pls_id, NET_API, &body);
            return true;
        }
        let alias = str_at(&pls.body, "/properties/alias")
            .unwrap_or_default()
            .to_string();
        let id = pls.id.clone();
        dirty |= set_status(&mut obj, "privateLinkServiceID", &id);
        dirty |= set_status(&mut obj, "privateLinkServiceAlias", &alias);
        for t in ["AzurePLSCreated", "AzurePrivateLinkServiceAvailable"] {
            // The CPO owns the overall condition once it has gone further.
            let cpo_set = t == "AzurePrivateLinkServiceAvailable"
                && obj.pointer("/status/privateEndpointID").is_some();
            if !cpo_set {
                dirty |= crate::conditions::set_condition_status(
                    &mut obj,
                    t,
                    "True",
                    "AzureSuccess",
                    "Azure Private Link Service is ready",
                    now,
                );
            }
        }
        if dirty {
            save_cr(sim, st, cp_ns, obj);
        }
        return dirty;
    }
    // lookupILBByFrontendIP: a frontend of a load balancer in the management group.
    let lbs: Vec<(String, String, String)> = crate::arm::store::of_type(st, types::LB)
        .into_iter()
        .filter(|lb| lb.parent == rg_id.to_ascii_lowercase())
        .flat_map(|lb| {
            lb.body
                .pointer("/properties/frontendIPConfigurations")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|f| str_at(f, "/properties/privateIPAddress") == Some(lb_ip.as_str()))
                .map(|f| {
                    (
                        lb.id.clone(),
                        str_at(&f, "/id").unwrap_or_default().to_string(),
                        str_at(&f, "/properties/subnet/id")
                            .unwrap_or_default()
                            .to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let Some((lb_id, fe_id, lb_subnet)) = lbs.into_iter().next() else {
        return false;
    };
    dirty |= set_status(&mut obj, "internalLoadBalancerID", &lb_id);
    dirty |= crate::conditions::set_condition_status(
        &mut obj,
        "AzureInternalLoadBalancerAvailable",
        "True",
        "AzureSuccess",
        "Internal Load Balancer found",
        now,
    );
    let nat = match str_at(&obj, "/spec/natSubnetID") {
        Some(n) => n.to_string(),
        None => {
            // ensureNATSubnet: `<infraID>-pls-nat` in the ILB's VNet (HyperShift never
            // deletes it).
            let infra = store::get(st, &format!("{HYPERSHIFT}/hostedclusters"), ns, name)
                .and_then(|hc| str_at(hc, "/spec/infraID").map(str::to_string))
                .unwrap_or_else(|| name.to_string());
            let vnet = lb_subnet
                .rsplit_once("/subnets/")
                .map(|(v, _)| v.to_string())
                .unwrap_or_default();
            let id = format!("{vnet}/subnets/{infra}-pls-nat");
            if res(st, &id).is_none() {
                let used: Vec<String> =
                    crate::arm::store::children(st, &vnet.to_ascii_lowercase(), types::SUBNET)
                        .iter()
                        .filter_map(|s| {
                            str_at(&s.body, "/properties/addressPrefix").map(str::to_string)
                        })
                        .collect();
                // findAvailableCIDR: the first 10.0.i.0/24 (i ≥ 1) no subnet uses.
                let cidr = (1..256)
                    .map(|i| format!("10.0.{i}.0/24"))
                    .find(|c| !used.contains(c));
                if let Some(cidr) = cidr {
                    put(
                        sim,
                        st,
                        now,
                        HO,
                        &id,
                        NET_API,
                        &json!({"properties": {"addressPrefix": cidr, "privateLinkServiceNetworkPolicies": "Disabled"}}),
                    );
                }
            }
            if !ready(st, &id) {
                if dirty {
                    save_cr(sim, st, cp_ns, obj);
                }
                return true;
            }
            id
        }
    };
    let subs = allowed_subscriptions(&obj);
    let body = json!({
        "location": str_at(&obj, "/spec/location").unwrap_or_default(),
        "tags": {format!("kubernetes.io_cluster_{name}"): "owned", "hypershift.openshift.io_resource-type": "private-link-service"},
        "properties": {
            "loadBalancerFrontendIpConfigurations": [{"id": fe_id}],
            "ipConfigurations": [{"name": "pls-nat-ip", "properties": {
                "privateIPAllocationMethod": "Dynamic", "subnet": {"id": nat}, "primary": true}}],
            "visibility": {"subscriptions": subs},
            "autoApproval": {"subscriptions": subs},
            "enableProxyProtocol": false,
        }
    });
    save_cr(sim, st, cp_ns, obj);
    put(sim, st, now, HO, &pls_id, NET_API, &body);
    true
}

/// `buildAllowedSubscriptions`: the guest subnet's subscription, then the CR's
/// `additionalAllowedSubscriptions` (without repeating it).
fn allowed_subscriptions(cr: &Value) -> Vec<Value> {
    let guest_sub = str_at(cr, "/spec/guestSubnetID")
        .and_then(|s| s.split('/').nth(2))
        .unwrap_or_default()
        .to_string();
    let mut subs = vec![json!(guest_sub)];
    for s in cr
        .pointer("/spec/additionalAllowedSubscriptions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        if s.as_str() != Some(guest_sub.as_str()) && !subs.contains(&s) {
            subs.push(s);
        }
    }
    subs
}

/// The HostedCluster's `spec.clusterID`, set (as HyperShift does) when missing.
fn cluster_id(sim: &Simulator, st: &mut State, ns: &str, name: &str) -> Option<String> {
    let key = format!("{HYPERSHIFT}/hostedclusters");
    let mut hc = store::get(st, &key, ns, name)?.clone();
    if let Some(id) = str_at(&hc, "/spec/clusterID") {
        return Some(id.to_string());
    }
    let id = util::uuid(st, sim.config().seed).to_string();
    util::obj_mut(&mut hc, "spec").insert("clusterID".into(), json!(id));
    let kind = kind_by_key(&key)?;
    store::update(sim, st, kind, ns, hc);
    Some(id)
}

/// controller.go `Reconcile` (not deleting) for the `private-router` CR.
fn cpo_reconcile(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    hc_name: &str,
    s: &mut PlsCtrlSim,
) -> bool {
    let Some(mut obj) = cr(st, cp_ns) else {
        return false;
    };
    if store::is_deleting(&obj) {
        return false;
    }
    let mut fins = store::finalizers(&obj);
    if !fins.iter().any(|f| f == CPO_FINALIZER) {
        fins.push(CPO_FINALIZER.to_string());
        store::set_finalizers(&mut obj, &fins);
        save_cr(sim, st, cp_ns, obj);
        return true;
    }
    let Some(alias) = str_at(&obj, "/status/privateLinkServiceAlias").map(str::to_string) else {
        return false;
    };
    // Step 7: the HCP finalizer, once there are Azure resources to clean up.
    s.hcp_finalizer = true;
    let rg = str_at(&obj, "/spec/resourceGroupName")
        .unwrap_or_default()
        .to_string();
    let sub = str_at(&obj, "/spec/subscriptionID")
        .unwrap_or_default()
        .to_string();
    let location = str_at(&obj, "/spec/location")
        .unwrap_or_default()
        .to_string();
    let rg_id = format!("/subscriptions/{sub}/resourceGroups/{rg}");
    let pe_id = format!("{rg_id}/providers/Microsoft.Network/privateEndpoints/{CR_NAME}-pe");
    // Step 8: the private endpoint.
    let Some(pe) = res(st, &pe_id) else {
        let body = json!({
            "location": location,
            "tags": {"hypershift.openshift.io_resource-type": "private-endpoint"},
            "properties": {
                "subnet": {"id": str_at(&obj, "/spec/guestSubnetID").unwrap_or_default()},
                "manualPrivateLinkServiceConnections": [{"name": format!("{CR_NAME}-pe"), "properties": {
                    "privateLinkServiceId": alias, "requestMessage": "HyperShift CPO auto-connect"}}],
            }
        });
        put(sim, st, now, CPO, &pe_id, NET_API, &body);
        return true;
    };
    if pe.prov != Prov::Succeeded {
        return false;
    }
    let real_pe_id = pe.id.clone();
    let pe_ip = str_at(&pe.internal, "/ip").unwrap_or_default().to_string();
    let state = crate::arm::store::of_type(st, types::PEC)
        .into_iter()
        .find(|c| {
            str_at(&c.body, "/properties/privateEndpoint/id")
                .is_some_and(|i| i.eq_ignore_ascii_case(&real_pe_id))
        })
        .and_then(|c| {
            str_at(
                &c.body,
                "/properties/privateLinkServiceConnectionState/status",
            )
            .map(str::to_string)
        })
        .unwrap_or_else(|| "Disconnected".to_string());
    let mut dirty = set_status(&mut obj, "privateEndpointID", &real_pe_id);
    dirty |= set_status(&mut obj, "privateEndpointIP", &pe_ip);
    if state != "Approved" {
        dirty |= crate::conditions::set_condition_status(
            &mut obj,
            "AzurePrivateEndpointAvailable",
            "False",
            "PrivateEndpointConnectionNotApproved",
            &format!(
                "Private Endpoint connection state is \"{state}\", not Approved. Ensure the guest subscription is in the PLS auto-approval list, or manually approve the connection on the Private Link Service."
            ),
            now,
        );
        if dirty {
            save_cr(sim, st, cp_ns, obj);
        }
        return dirty;
    }
    dirty |= crate::conditions::set_condition_status(
        &mut obj,
        "AzurePrivateEndpointAvailable",
        "True",
        "AzureSuccess",
        "Private Endpoint is available",
        now,
    );
    // Step 9: `<name>.hypershift.local`; step 10: the base-domain zone.
    let vnet = str_at(&obj, "/spec/guestVNetID")
        .unwrap_or_default()
        .to_string();
    let zone = format!("{hc_name}.hypershift.local");
    let mut zones = vec![(
        zone.clone(),
        format!("{CR_NAME}-vnet-link"),
        vec!["api".to_string(), "*.apps".to_string()],
        "privateDNSZoneID",
    )];
    if let Some(bd) = str_at(&obj, "/spec/baseDomain") {
        zones.push((
            bd.to_string(),
            format!("{CR_NAME}-basedomain-vnet-link"),
            vec![format!("api-{hc_name}"), format!("oauth-{hc_name}")],
            "baseDomainDNSZoneID",
        ));
    }
    for (zname, link, records, field) in zones {
        let zone_id = format!("{rg_id}/providers/Microsoft.Network/privateDnsZones/{zname}");
        if res(st, &zone_id).is_none() {
            put(
                sim,
                st,
                now,
                CPO,
                &zone_id,
                DNS_API,
                &json!({"location": "global", "tags": {"hypershift.openshift.io_resource-type": "private-dns-zone"}}),
            );
        }
        if !ready(st, &zone_id) {
            if dirty {
                save_cr(sim, st, cp_ns, obj);
            }
            return true;
        }
        let link_id = format!("{zone_id}/virtualNetworkLinks/{link}");
        if res(st, &link_id).is_none() {
            put(
                sim,
                st,
                now,
                CPO,
                &link_id,
                DNS_API,
                &json!({"location": "global", "tags": {"hypershift.openshift.io_resource-type": "vnet-link"}, "properties": {"virtualNetwork": {"id": vnet}, "registrationEnabled": false}}),
            );
        }
        if !ready(st, &link_id) {
            if dirty {
                save_cr(sim, st, cp_ns, obj);
            }
            return true;
        }
        for r in &records {
            let rid = format!("{zone_id}/A/{r}");
            if res(st, &rid).is_none() {
                put(
                    sim,
                    st,
                    now,
                    CPO,
                    &rid,
                    DNS_API,
                    &json!({"properties": {"ttl": 300, "aRecords": [{"ipv4Address": pe_ip}]}}),
                );
            }
        }
        let zid = res(st, &zone_id).map(|z| z.id.clone()).unwrap_or(zone_id);
        dirty |= set_status(&mut obj, field, &zid);
        if field == "privateDNSZoneID" {
            dirty |= set_status(&mut obj, "dnsZoneName", &zname);
        }
        dirty |= crate::conditions::set_condition_status(
            &mut obj,
            "AzurePrivateDNSAvailable",
            "True",
            "AzureSuccess",
            "Private DNS zone and A records are available",
            now,
        );
    }
    dirty |= crate::conditions::set_condition_status(
        &mut obj,
        "AzurePrivateLinkServiceAvailable",
        "True",
        "AzureSuccess",
        "All Azure Private Link Service resources are available",
        now,
    );
    if dirty {
        save_cr(sim, st, cp_ns, obj);
    }
    dirty
}

/// hostedcluster_controller.go: the CR's conditions on the HostedCluster
/// (`computeAzurePLSCondition`), when a CR exists.
fn copy_conditions(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    cp_ns: &str,
    ns: &str,
    name: &str,
) -> bool {
    let key = format!("{HYPERSHIFT}/hostedclusters");
    let (Some(obj), Some(hc)) = (
        store::get(st, &cr_key(), cp_ns, CR_NAME),
        store::get(st, &key, ns, name),
    ) else {
        return false;
    };
    let conds = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let wanted: Vec<(&str, &str, &str, String)> = CONDITION_TYPES
        .iter()
        .map(|t| {
            let c = conds
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(t));
            let (status, reason, message) =
                match c.and_then(|c| c.get("status")).and_then(Value::as_str) {
                    None => (
                        "Unknown",
                        "StatusUnknown",
                        "AzurePrivateLinkService conditions not found".to_string(),
                    ),
                    Some("False") => (
                        "False",
                        "AzureError",
                        c.and_then(|c| str_at(c, "/message"))
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    Some(_) => ("True", "AzureSuccess", "All is well".to_string()),
                };
            (*t, status, reason, message)
        })
        .collect();
    // Run on every request: the HostedCluster is copied only when a condition changes.
    if wanted.iter().all(|(t, status, reason, message)| {
        crate::conditions::condition_is(hc, t, status, reason, message)
    }) {
        return false;
    }
    let mut hc = hc.clone();
    let mut dirty = false;
    for (t, status, reason, message) in &wanted {
        dirty |= crate::conditions::set_condition_status(&mut hc, t, status, reason, message, now);
    }
    if dirty && let Some(kind) = kind_by_key(&key) {
        store::update(sim, st, kind, ns, hc);
    }
    dirty
}

/// The private-link part of a HostedCluster's deletion, run by the operator before it
/// deletes the internal load balancer: HCP deletion (the CPO's cleanup when its HCP
/// finalizer is set), the CR's garbage collection and its finalizers (the HO's PLS
/// deletion). Returns `(done, changed)`: done once no CR is left.
pub(crate) fn teardown(
    sim: &Simulator,
    st: &mut State,
    now: u64,
    ns: &str,
    name: &str,
) -> (bool, bool) {
    let k = format!("{ns}/{name}");
    let cp_ns = format!("{ns}-{name}");
    let mut s = st.pls_ctrl.get(&k).cloned().unwrap_or_default();
    let mut changed = false;
    if !s.hcp_gone {
        if s.hcp_finalizer && cpo_runs(sim, &s) {
            // reconcileHCPDeletion → reconcileDelete, one Azure deletion at a time.
            if let Some(obj) = cr(st, &cp_ns)
                && !cpo_delete_step(sim, st, now, &obj)
            {
                st.pls_ctrl.insert(k, s);
                return (false, true);
            }
            // `main` (4.23 on, commit 30d6ce523b) removes the CR's own finalizer here;
            // `release-4.22`'s `reconcileHCPDeletion` removes only the HCP finalizer, so on
            // a 4.22 operator the CR keeps [`CPO_FINALIZER`] after the CPO is gone.
            if removes_cr_finalizer_on_hcp_deletion(sim)
                && let Some(mut obj) = cr(st, &cp_ns)
            {
                let mut f = store::finalizers(&obj);
                f.retain(|x| x != CPO_FINALIZER);
                store::set_finalizers(&mut obj, &f);
                save_cr(sim, st, &cp_ns, obj);
            }
            s.hcp_finalizer = false;
        }
        if s.hcp_finalizer {
            // The CPO is not running (no Route API): the HCP finalizer blocks forever,
            // as it would in HyperShift.
            st.pls_ctrl.insert(k, s);
            return (false, changed);
        }
        // The HCP is gone, the CPO with it; the CR (owned by the HCP) is collected.
        s.hcp_gone = true;
        changed = true;
        if let Some(kind) = kind_by_key(&cr_key()) {
            store::delete(sim, st, now, kind, &cp_ns, CR_NAME);
        }
    }
    if let Some(mut obj) = cr(st, &cp_ns)
        && store::finalizers(&obj).iter().any(|f| f == HO_FINALIZER)
        && ho_runs(sim)
        && now >= s.ho_next_ms
    {
        match ho_delete(sim, st, now, &obj, name) {
            HoDelete::Done => {
                let mut f = store::finalizers(&obj);
                f.retain(|x| x != HO_FINALIZER);
                store::set_finalizers(&mut obj, &f);
                save_cr(sim, st, &cp_ns, obj);
            }
            HoDelete::Requeue => s.ho_next_ms = now + sim.scaled(REQUEUE),
            HoDelete::Waiting => {}
        }
        changed = true;
    }
    st.pls_ctrl.insert(k, s);
    (cr(st, &cp_ns).is_none(), changed)
}

/// One step of controller.go `reconcileDelete` (records → link → zone, base domain, PE);
/// true when everything is gone.
fn cpo_delete_step(sim: &Simulator, st: &mut State, now: u64, obj: &Value) -> bool {
    let rg = str_at(obj, "/spec/resourceGroupName").unwrap_or_default();
    let sub = str_at(obj, "/spec/subscriptionID").unwrap_or_default();
    let rg_id = format!("/subscriptions/{sub}/resourceGroups/{rg}");
    let zones = format!("{rg_id}/providers/Microsoft.Network/privateDnsZones");
    let mut order: Vec<(String, &str)> = Vec::new();
    if let Some(z) = str_at(obj, "/status/dnsZoneName") {
        for r in ["api", "*.apps"] {
            order.push((format!("{zones}/{z}/A/{r}"), DNS_API));
        }
        order.push((
            format!("{zones}/{z}/virtualNetworkLinks/{CR_NAME}-vnet-link"),
            DNS_API,
        ));
        order.push((format!("{zones}/{z}"), DNS_API));
        if let Some(bd) = str_at(obj, "/spec/baseDomain")
            && let Some(name) = z.strip_suffix(".hypershift.local")
        {
            for r in [format!("api-{name}"), format!("oauth-{name}")] {
                order.push((format!("{zones}/{bd}/A/{r}"), DNS_API));
            }
        }
    }
    if let Some(bd) = str_at(obj, "/spec/baseDomain") {
        order.push((
            format!("{zones}/{bd}/virtualNetworkLinks/{CR_NAME}-basedomain-vnet-link"),
            DNS_API,
        ));
        order.push((format!("{zones}/{bd}"), DNS_API));
    }
    order.push((
        format!("{rg_id}/providers/Microsoft.Network/privateEndpoints/{CR_NAME}-pe"),
        NET_API,
    ));
    for (id, api) in order {
        match res(st, &id) {
            None => continue,
            Some(r) if r.prov == Prov::Deleting => return false,
            Some(_) => {
                let _ = delete(sim, st, now, CPO, &id, api);
                return false;
            }
        }
    }
    true
}

enum HoDelete {
    Done,
    Requeue,
    Waiting,
}

/// A PLS the HO's create reconcile is making for HostedCluster `hc` (its tags, set in
/// `ho_reconcile`), and whether it has finished provisioning.
fn in_flight_pls(st: &State, hc: &str) -> Option<(String, bool)> {
    let tag = format!("kubernetes.io_cluster_{hc}");
    crate::arm::store::of_type(st, types::PLS)
        .into_iter()
        .find(|p| {
            str_at(&p.body, &format!("/tags/{tag}")) == Some("owned")
                && str_at(&p.body, "/tags/hypershift.openshift.io_resource-type")
                    == Some("private-link-service")
        })
        .map(|p| (p.id.clone(), p.prov != Prov::Creating))
}

/// controller.go (HO) `delete`: reject active connections (requeue), then delete the PLS.
///
/// The real create reconcile blocks in `PollUntilDone` and writes
/// `status.privateLinkServiceID` before it returns, and controller-runtime never runs two
/// reconciles of one object at once, so the delete reconcile always finds the ID of a PLS
/// the controller made. The simulator runs that create as ticks (PUT, then status once the
/// PLS has succeeded), so a delete can come in between: it then finds the in-flight PLS by
/// the tags the create put on it, and waits for it to finish provisioning, instead of
/// leaking it (a leaked PLS pins the internal load balancer and the HostedCluster's
/// finalizer forever).
fn ho_delete(sim: &Simulator, st: &mut State, now: u64, obj: &Value, hc: &str) -> HoDelete {
    let pls_id = match str_at(obj, "/status/privateLinkServiceID") {
        Some(id) => id.to_string(),
        None => match in_flight_pls(st, hc) {
            Some((_, false)) => return HoDelete::Waiting,
            Some((id, true)) => id,
            None => return HoDelete::Done,
        },
    };
    let Some(pls) = res(st, &pls_id) else {
        return HoDelete::Done;
    };
    if pls.prov == Prov::Deleting {
        return HoDelete::Waiting;
    }
    let pls_key = pls_id.to_ascii_lowercase();
    let active: Vec<(String, String)> = crate::arm::store::children(st, &pls_key, types::PEC)
        .into_iter()
        .filter(|c| {
            matches!(
                str_at(
                    &c.body,
                    "/properties/privateLinkServiceConnectionState/status"
                ),
                Some("Approved") | Some("Pending")
            )
        })
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect();
    if !active.is_empty() {
        for (id, cname) in active {
            let body = json!({"name": cname, "properties": {"privateLinkServiceConnectionState": {
                "status": "Rejected", "description": "Rejected during Private Link Service deletion"}}});
            put(sim, st, now, HO, &id, NET_API, &body);
        }
        return HoDelete::Requeue;
    }
    match delete(sim, st, now, HO, &pls_id, NET_API) {
        Ok(_) => HoDelete::Waiting,
        Err(_) => HoDelete::Requeue,
    }
}
