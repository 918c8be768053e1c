//! With real processes (`simulator serve` and the prebuilt
//! `hcp-workflow`): a PublicAndPrivate cluster's nodes reach the API server through the
//! private endpoint (a Route API server behind the private router on 443), its public
//! hostnames get A records in the base domain's public zone, and the simulator refuses
//! nodes to a private-topology cluster whose API server they cannot reach.
//!
//! Run `cargo build -p hcp-workflow` first.
#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::{Env, GUEST_SUB, cluster_file};
use serde_json::{Value, json};
use std::time::Duration;

const FAST: f64 = 0.002;
const HC: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/hostedclusters";
const NP: &str = "/apis/hypershift.openshift.io/v1beta1/namespaces/clusters/nodepools";
const ZONE: &str = "/subscriptions/11111111-2222-3333-4444-555555555555/resourceGroups/hcp-dns/providers/Microsoft.Network/dnszones/hcp.example.com";

fn record(env: &Env, name: &str) -> Value {
    env.sim
        .get(&format!("{ZONE}/A/{name}?api-version=2018-05-01"))
}

fn service(s: &Value, name: &str) -> Value {
    s["spec"]["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["service"] == name)
        .cloned()
        .unwrap()
}

fn condition(obj: &Value, ctype: &str) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == ctype)
        .cloned()
        .unwrap_or(Value::Null)
}

fn seed_zone(env: &Env) {
    // `simulator serve` seeds hcp.example.com in group hcp-dns of the guest subscription.
    let z = env.sim.get(&format!("{ZONE}?api-version=2018-05-01"));
    if z.get("id").is_none() {
        env.sim.seed_public_zone(GUEST_SUB, "hcp.example.com");
    }
}

/// PublicAndPrivate is rendered the way HyperShift's own Azure path makes it work: the API
/// server and OAuth as Routes with public hostnames (so the CPO makes the public `router`
/// Service and the `kube-apiserver-internal` Route the private router serves on 443), and
/// hcp-workflow writes their A records in the public zone. The create succeeds with Ready
/// node pools; the records carry this cluster's metadata and point at the router; the
/// delete removes them and leaves a record of someone else's in the same zone.
#[test]
fn public_and_private_nodes_reach_the_api_and_the_public_names_resolve() {
    let env = Env::new("topo-pap", FAST);
    seed_zone(&env);
    // Someone else's record in the shared zone: never touched.
    let (s, b) = env.sim.put(
        &format!("{ZONE}/A/www?api-version=2018-05-01"),
        &json!({"properties": {"TTL": 60, "ARecords": [{"ipv4Address": "192.0.2.7"}]}}),
    );
    assert!((200..300).contains(&s), "{s} {b}");
    let cfg = cluster_file(&env.dir, "pap", "pap-x7k2p", "PublicAndPrivate", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");

    let hc = env.sim.get(&format!("{HC}/pap"));
    let api = service(&hc, "APIServer");
    assert_eq!(api["servicePublishingStrategy"]["type"], "Route", "{api}");
    assert_eq!(
        api["servicePublishingStrategy"]["route"]["hostname"], "api-pap.hcp.example.com",
        "{api}"
    );
    let oauth = service(&hc, "OAuthServer");
    assert_eq!(
        oauth["servicePublishingStrategy"]["route"]["hostname"], "oauth-pap.hcp.example.com",
        "{oauth}"
    );
    for s in ["Konnectivity", "Ignition"] {
        let x = service(&hc, s);
        assert!(x["servicePublishingStrategy"].get("route").is_none(), "{x}");
    }
    assert_eq!(
        condition(&hc, "ExternalDNSReachable")["status"],
        "True",
        "{hc}"
    );

    let router = env
        .sim
        .get("/api/v1/namespaces/clusters-pap/services/router");
    let ip = router["status"]["loadBalancer"]["ingress"][0]["ip"]
        .as_str()
        .unwrap()
        .to_string();
    for name in ["api-pap", "oauth-pap"] {
        let r = record(&env, name);
        assert_eq!(
            r["properties"]["ARecords"][0]["ipv4Address"],
            ip.as_str(),
            "{r}"
        );
        assert_eq!(
            r["properties"]["metadata"]["hcpworkflowcluster"], "pap",
            "{r}"
        );
        assert_eq!(
            r["properties"]["metadata"]["hcpworkflowinfraid"], "pap-x7k2p",
            "{r}"
        );
    }
    for pool in ["pap-workers", "pap-infra"] {
        let np = env.sim.get(&format!("{NP}/{pool}"));
        assert_eq!(condition(&np, "Ready")["status"], "True", "{np}");
    }

    let (code, out, err) = env.start("delete-cluster", &cfg, &["--yes"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    for name in ["api-pap", "oauth-pap"] {
        assert!(record(&env, name).get("id").is_none(), "{name} left behind");
    }
    assert_eq!(
        record(&env, "www")["properties"]["ARecords"][0]["ipv4Address"],
        "192.0.2.7"
    );
}

/// A record of that name that is not this cluster's is refused, never overwritten or
/// adopted: the create fails at the records step, unwinds, and the record is as it was.
#[test]
fn a_foreign_record_with_the_public_name_is_refused_and_kept() {
    let env = Env::new("topo-foreign", FAST);
    seed_zone(&env);
    let (s, b) = env.sim.put(
        &format!("{ZONE}/A/api-taken?api-version=2018-05-01"),
        &json!({"properties": {"TTL": 60, "ARecords": [{"ipv4Address": "192.0.2.9"}]}}),
    );
    assert!((200..300).contains(&s), "{s} {b}");
    let cfg = cluster_file(&env.dir, "taken", "taken-x7k2p", "PublicAndPrivate", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_ne!(code, 0, "{out}\n{err}");
    let all = format!("{out}\n{err}");
    assert!(all.contains("public-dns.records"), "{all}");
    assert!(all.contains("not this cluster's"), "{all}");
    let r = record(&env, "api-taken");
    assert_eq!(
        r["properties"]["ARecords"][0]["ipv4Address"], "192.0.2.9",
        "{r}"
    );
    assert!(record(&env, "oauth-taken").get("id").is_none());
}

fn wait_for<F: Fn() -> Option<Value>>(what: &str, f: F) -> Value {
    for _ in 0..400 {
        if let Some(v) = f() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("timed out waiting for {what}");
}

/// The simulator models the ports (HyperShift's `APIPortForLocalZone`, and a Private Link
/// Service that fronts only the private router on 443): a PublicAndPrivate HostedCluster
/// whose API server is a LoadBalancer — what hcp-workflow once rendered — is
/// Available, but its nodes dial `api.<name>.hypershift.local:6443` and never register, so
/// its NodePool never becomes Ready.
#[test]
fn a_load_balancer_api_server_behind_private_link_never_gets_nodes() {
    let env = Env::new("topo-lbkas", FAST);
    seed_zone(&env);
    // A real create renders a valid HostedCluster and NodePool to copy from.
    let cfg = cluster_file(&env.dir, "good", "good-x7k2p", "PublicAndPrivate", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let mut hc = env.sim.get(&format!("{HC}/good"));
    let mut np = env.sim.get(&format!("{NP}/good-workers"));
    for o in [&mut hc, &mut np] {
        o.as_object_mut().unwrap().remove("status");
        let meta = o["metadata"].as_object_mut().unwrap();
        meta.retain(|k, _| k == "namespace" || k == "labels");
    }
    hc["metadata"]["name"] = json!("lbkas");
    hc["spec"]["infraID"] = json!("lbkas-x7k2p");
    for s in hc["spec"]["services"].as_array_mut().unwrap() {
        if s["service"] == "APIServer" {
            s["servicePublishingStrategy"] = json!({"type": "LoadBalancer"});
        }
    }
    np["metadata"]["name"] = json!("lbkas-workers");
    np["spec"]["clusterName"] = json!("lbkas");
    let (s, b) = env.sim.post(HC, &hc);
    assert!((200..300).contains(&s), "{s} {b}");
    let (s, b) = env.sim.post(NP, &np);
    assert!((200..300).contains(&s), "{s} {b}");

    let hc = wait_for("the LoadBalancer-KAS cluster to be Available", || {
        let v = env.sim.get(&format!("{HC}/lbkas"));
        (condition(&v, "Available")["status"] == "True").then_some(v)
    });
    assert_eq!(condition(&hc, "Available")["status"], "True");
    let np = wait_for("the pool's nodes to fail to register", || {
        let v = env.sim.get(&format!("{NP}/lbkas-workers"));
        (condition(&v, "AllNodesHealthy")["reason"] == "WaitingForNodeRef").then_some(v)
    });
    assert_eq!(condition(&np, "Ready")["status"], "False", "{np}");
    assert_eq!(
        condition(&np, "Ready")["reason"],
        "WaitingForAvailableMachines",
        "{np}"
    );
    assert!(
        condition(&np, "AllNodesHealthy")["message"]
            .as_str()
            .unwrap()
            .contains(":6443"),
        "{np}"
    );
    // Much later (in simulated time) it is still not Ready.
    std::thread::sleep(Duration::from_millis(500));
    let np = env.sim.get(&format!("{NP}/lbkas-workers"));
    assert_eq!(condition(&np, "Ready")["status"], "False", "{np}");
}

/// On `simulator serve`: Azure's own refusals of a Private Link Service whose
/// load balancer frontend is in another region (`InvalidResourceReference`, Azure's
/// message) or whose NAT subnet is outside the frontend's VNet.
#[test]
fn the_simulator_refuses_a_pls_across_regions_or_vnets() {
    let env = Env::new("topo-pls", FAST);
    let cfg = cluster_file(&env.dir, "plsr", "plsr-x7k2p", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let mgmt = "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management";
    // The frontend the run's PLS is in front of.
    let pls_id = env
        .sim
        .inventory()
        .into_iter()
        .filter_map(|i| i["id"].as_str().map(str::to_string))
        .find(|i| i.to_ascii_lowercase().contains("/privatelinkservices/"))
        .unwrap();
    let run_pls = env.sim.get(&format!("{pls_id}?api-version=2023-11-01"));
    let fe = run_pls["properties"]["loadBalancerFrontendIpConfigurations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let nat = format!(
        "{mgmt}/providers/Microsoft.Network/virtualNetworks/management-vnet/subnets/plsr-x7k2p-pls-nat"
    );
    assert!(
        env.sim
            .get(&format!("{nat}?api-version=2023-11-01"))
            .get("id")
            .is_some(),
        "the run's NAT subnet {nat}"
    );
    let body = |location: &str, subnet: &str| {
        json!({"location": location, "properties": {
            "loadBalancerFrontendIpConfigurations": [{"id": fe}],
            "ipConfigurations": [{"name": "nat", "properties": {"subnet": {"id": subnet}}}],
        }})
    };
    let pls = format!("{mgmt}/providers/Microsoft.Network/privateLinkServices/pls-probe");
    let (s, b) = env.sim.put(
        &format!("{pls}?api-version=2023-11-01"),
        &body("westus", &nat),
    );
    assert_eq!(s, 400, "{b}");
    assert_eq!(b["error"]["code"], "InvalidResourceReference", "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("both resources are in the same region"),
        "{b}"
    );
    // The guest VNet's subnet as NAT subnet: not the frontend's VNet.
    let guest_subnet = format!(
        "/subscriptions/{GUEST_SUB}/resourceGroups/plsr-vnet-plsr-x7k2p/providers/Microsoft.Network/virtualNetworks/plsr-plsr-x7k2p/subnets/default"
    );
    let (s, b) = env.sim.put(
        &format!("{pls}?api-version=2023-11-01"),
        &body("eastus", &guest_subnet),
    );
    assert_eq!(s, 400, "{b}");
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("virtual network of the load balancer"),
        "{b}"
    );
    // Nothing was created by either refusal.
    assert!(
        env.sim
            .get(&format!("{pls}?api-version=2023-11-01"))
            .get("id")
            .is_none()
    );
}

const MGMT_LB: &str = "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/loadBalancers/kubernetes-internal";

fn frontends(env: &Env) -> Vec<String> {
    let lb = env.sim.get(&format!("{MGMT_LB}?api-version=2023-11-01"));
    lb["properties"]["frontendIPConfigurations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["id"].as_str().map(str::to_ascii_lowercase))
        .collect()
}

fn pls_frontend(env: &Env, infra: &str) -> String {
    let pls = env.sim.get(&format!(
        "/subscriptions/00000000-0000-0000-0000-00000000a0a0/resourceGroups/hcp-management/providers/Microsoft.Network/privateLinkServices/pls-{infra}?api-version=2023-11-01"
    ));
    pls["properties"]["loadBalancerFrontendIpConfigurations"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no PLS for {infra}: {pls}"))
        .to_ascii_lowercase()
}

/// The management cluster's internal load balancer is one, shared
/// by every hosted cluster's `private-router` (one frontend each), as a real cloud provider
/// makes it. Deleting one cluster removes only its frontend: the other cluster's frontend,
/// and the PLS in front of it, survive; the load balancer goes with the last frontend.
#[test]
fn the_shared_internal_load_balancer_keeps_another_clusters_frontend() {
    let env = Env::new("topo-shared-lb", FAST);
    let a = cluster_file(&env.dir, "ilba", "ilba-x7k2p", "Private", "");
    let b = cluster_file(&env.dir, "ilbb", "ilbb-x7k2p", "Private", "");
    for cfg in [&a, &b] {
        let (code, out, err) = env.start("create-cluster", cfg, &[], &[]);
        assert_eq!(code, 0, "{out}\n{err}");
    }
    let (fa, fb) = (
        pls_frontend(&env, "ilba-x7k2p"),
        pls_frontend(&env, "ilbb-x7k2p"),
    );
    assert_ne!(fa, fb);
    let both = frontends(&env);
    assert!(both.contains(&fa) && both.contains(&fb), "{both:?}");

    let (code, out, err) = env.start("delete-cluster", &a, &["--yes"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        frontends(&env),
        vec![fb.clone()],
        "only ilbb's frontend is left"
    );
    assert_eq!(pls_frontend(&env, "ilbb-x7k2p"), fb);
    let np = env.sim.get(&format!("{NP}/ilbb-workers"));
    assert_eq!(condition(&np, "Ready")["status"], "True", "{np}");

    let (code, out, err) = env.start("delete-cluster", &b, &["--yes"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        env.sim
            .get(&format!("{MGMT_LB}?api-version=2023-11-01"))
            .get("id")
            .is_none(),
        "the load balancer goes with its last frontend"
    );
}

/// A Private guest's ingress is published on an internal load
/// balancer `<infraID>-internal` in the managed resource group, its frontend an IP of the
/// guest subnet. A delete without the guest's cloud cleanup leaves it to the group's
/// deletion — which must come before the VNet's (Azure refuses to delete a subnet a
/// frontend still uses): the delete succeeds and nothing is left.
#[test]
fn a_private_guests_ingress_load_balancer_goes_with_the_managed_group() {
    let env = Env::new("topo-ingress-ilb", FAST);
    let cfg = cluster_file(&env.dir, "ing", "ing-x7k2p", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let rg = format!("/subscriptions/{GUEST_SUB}/resourceGroups/ing-ing-x7k2p");
    let ilb_id = format!("{rg}/providers/Microsoft.Network/loadBalancers/ing-x7k2p-internal");
    let ilb = wait_for("the guest's ingress internal load balancer", || {
        let v = env.sim.get(&format!("{ilb_id}?api-version=2023-11-01"));
        v.get("id").is_some().then_some(v)
    });
    let fe = &ilb["properties"]["frontendIPConfigurations"][0]["properties"];
    assert!(
        fe["subnet"]["id"]
            .as_str()
            .unwrap()
            .to_ascii_lowercase()
            .ends_with("/virtualnetworks/ing-ing-x7k2p/subnets/default"),
        "{ilb}"
    );
    let (code, out, err) = env.start(
        "delete-cluster",
        &cfg,
        &["--yes", "--skip-cloud-cleanup"],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    for (id, api) in [(&ilb_id, "2023-11-01"), (&rg, "2021-04-01")] {
        let v = env.sim.get(&format!("{id}?api-version={api}"));
        assert_eq!(
            v["error"]["code"].as_str().map(|c| c.contains("NotFound")),
            Some(true),
            "{id} left: {v}"
        );
    }
}

/// (flag parity): `examples/enterprise.yaml` — HA control plane and
/// infrastructure, FIPS, a 32Gi premium etcd volume, custom networks, resource-group tags,
/// encryption at host with a disk encryption set, and registry mirrors — creates on
/// `simulator serve` (which validates every object against HyperShift's CRDs), and each
/// option lands where HyperShift's CLI puts it.
#[test]
fn the_enterprise_example_creates_with_every_option_rendered() {
    let env = Env::new("topo-enterprise", FAST);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for f in ["enterprise.yaml", "pull-secret.json", "id_ed25519.pub"] {
        std::fs::copy(root.join(f), env.dir.join(f)).unwrap();
    }
    let cfg = env.dir.join("enterprise.yaml");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let hc = env.sim.get(&format!("{HC}/corp"));
    let spec = &hc["spec"];
    assert_eq!(
        spec["controllerAvailabilityPolicy"], "HighlyAvailable",
        "{spec}"
    );
    assert_eq!(spec["infrastructureAvailabilityPolicy"], "HighlyAvailable");
    assert_eq!(spec["fips"], true);
    let pv = &spec["etcd"]["managed"]["storage"]["persistentVolume"];
    assert_eq!(pv["size"], "32Gi");
    assert_eq!(pv["storageClassName"], "managed-csi-premium");
    assert_eq!(
        spec["networking"]["clusterNetwork"][0]["cidr"],
        "10.140.0.0/14"
    );
    assert_eq!(
        spec["networking"]["serviceNetwork"][0]["cidr"],
        "172.30.0.0/16"
    );
    assert_eq!(
        spec["networking"]["machineNetwork"][0]["cidr"],
        "10.20.0.0/16"
    );
    assert_eq!(spec["imageContentSources"].as_array().unwrap().len(), 2);
    assert_eq!(
        spec["tolerations"][0]["key"],
        "hypershift.openshift.io/control-plane"
    );
    assert_eq!(spec["capabilities"]["disabled"][0], "Insights");
    assert_eq!(spec["secretEncryption"]["type"], "kms");
    assert_eq!(
        spec["secretEncryption"]["kms"]["azure"]["activeKey"]["keyName"],
        "etcd"
    );
    assert_eq!(hc["metadata"]["labels"]["team"], "platform");
    assert_eq!(hc["metadata"]["labels"]["hcp-workflow.io/cluster"], "corp");
    let np = env.sim.get(&format!("{NP}/corp-workers"));
    let az = &np["spec"]["platform"]["azure"];
    assert_eq!(az["encryptionAtHost"], "Enabled", "{np}");
    assert!(
        az["osDisk"]["encryptionSetID"]
            .as_str()
            .unwrap()
            .ends_with("/diskEncryptionSets/corp-des")
    );
    assert_eq!(np["spec"]["nodeVolumeDetachTimeout"], "300s");
    assert_eq!(np["spec"]["management"]["autoRepair"], true);
    assert_eq!(az["diagnostics"]["storageAccountType"], "Managed");
    let rg = env.sim.get(&format!(
        "/subscriptions/{GUEST_SUB}/resourceGroups/corp-{}?api-version=2021-04-01",
        hc["spec"]["infraID"].as_str().unwrap()
    ));
    assert_eq!(rg["tags"]["costCenter"], "4711", "{rg}");
    assert_eq!(rg["tags"]["owner"], "platform-team");
    assert_eq!(rg["tags"]["hcp-workflow.io/cluster"], "corp");
}

/// What Azure DNS answers a machine in `vnet` for `name` (`GET /_sim/dns`).
fn resolve(env: &Env, vnet: Option<&str>, name: &str) -> Value {
    let q = match vnet {
        Some(v) => format!("/_sim/dns?vnet={v}&name={name}"),
        None => format!("/_sim/dns?name={name}"),
    };
    env.sim.get(&q)
}

/// A Private cluster on a 4.22 management cluster (the quick start's topology):
/// HyperShift's 4.22 control-plane operator panics on a Route API server without a
/// hostname (`kas/service.go` `ReconcileServiceStatus`), so the API server and OAuth are
/// published as `api-<name>.<baseDomain>` / `oauth-<name>.<baseDomain>`, and hcp-workflow
/// makes both names resolve inside the guest VNet: a private zone per name, linked to the
/// guest VNet, its apex at the private endpoint. Every name the nodes, the kubeconfig,
/// OAuth and `*.apps` need resolves from the guest VNet; the API name resolves nowhere
/// else (the public zone holds no record of it); the outcome says so; the delete removes
/// the zones.
#[test]
fn a_private_cluster_comes_up_on_4_22_and_its_names_resolve_only_in_the_guest_vnet() {
    let env = Env::new("topo-priv-names", FAST);
    seed_zone(&env);
    // A name of the team's in the base domain, which the guest must still resolve.
    let (s, b) = env.sim.put(
        &format!("{ZONE}/A/www?api-version=2018-05-01"),
        &json!({"properties": {"TTL": 60, "ARecords": [{"ipv4Address": "192.0.2.7"}]}}),
    );
    assert!((200..300).contains(&s), "{s} {b}");
    let cfg = cluster_file(&env.dir, "prv", "prv-x7k2p", "Private", "");
    let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("Creation complete"), "{out}");
    assert!(
        out.contains("resolve only inside the guest VNet"),
        "the outcome says where the names resolve: {out}"
    );

    let hc = env.sim.get(&format!("{HC}/prv"));
    let api = service(&hc, "APIServer");
    assert_eq!(api["servicePublishingStrategy"]["type"], "Route", "{api}");
    assert_eq!(
        api["servicePublishingStrategy"]["route"]["hostname"], "api-prv.hcp.example.com",
        "{api}"
    );
    let oauth = service(&hc, "OAuthServer");
    assert_eq!(
        oauth["servicePublishingStrategy"]["route"]["hostname"], "oauth-prv.hcp.example.com",
        "{oauth}"
    );
    for s in ["Konnectivity", "Ignition"] {
        let x = service(&hc, s);
        assert!(x["servicePublishingStrategy"].get("route").is_none(), "{x}");
    }
    assert_eq!(condition(&hc, "Available")["status"], "True", "{hc}");
    assert_eq!(
        hc["status"]["controlPlaneEndpoint"]["host"], "api-prv.hcp.example.com",
        "{hc}"
    );
    for pool in ["prv-workers", "prv-infra"] {
        let np = env.sim.get(&format!("{NP}/{pool}"));
        assert_eq!(condition(&np, "Ready")["status"], "True", "{np}");
    }

    let vnet = hc["spec"]["platform"]["azure"]["vnetID"]
        .as_str()
        .unwrap()
        .to_string();
    // The nodes' own name: the simulator lets nodes join only when it answers an approved
    // private endpoint's address from the guest VNet.
    let local = resolve(&env, Some(&vnet), "api.prv.hypershift.local");
    assert_eq!(local["answer"], "a", "{local}");
    let pe_ip = local["ips"][0].as_str().map(str::to_string);
    for name in [
        "api-prv.hcp.example.com",
        "oauth-prv.hcp.example.com",
        "ignition-server.apps.prv.hypershift.local",
    ] {
        let a = resolve(&env, Some(&vnet), name);
        assert_eq!(a["answer"], "a", "{name} from the guest VNet: {a}");
        assert_eq!(a["ips"][0].as_str(), pe_ip.as_deref(), "{name}: {a}");
    }
    // `*.apps` is the guest ingress's, answered by the infra zone (more specific than any
    // zone of ours): the per-name zones shadow nothing else of the base domain.
    let console = resolve(
        &env,
        Some(&vnet),
        "console-openshift-console.apps.prv.hcp.example.com",
    );
    assert_ne!(console["answer"], "nxdomain", "{console}");
    let www = resolve(&env, Some(&vnet), "www.hcp.example.com");
    assert_eq!(
        www["ips"][0], "192.0.2.7",
        "a name of the base domain that is not ours still resolves publicly: {www}"
    );
    // Outside the guest VNet the API name resolves nowhere.
    let outside = resolve(&env, None, "api-prv.hcp.example.com");
    assert_ne!(outside["answer"], "a", "{outside}");

    let (code, out, err) = env.start("delete-cluster", &cfg, &["--yes"], &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    for name in ["api-prv.hcp.example.com", "oauth-prv.hcp.example.com"] {
        let z = env.sim.get(&format!(
            "/subscriptions/{GUEST_SUB}/resourceGroups/prv-x7k2p/providers/Microsoft.Network/privateDnsZones/{name}?api-version=2024-06-01"
        ));
        assert!(z.get("id").is_none(), "{name} left behind: {z}");
    }
}

/// The simulator fails the way a 4.22 management cluster fails: a Private HostedCluster
/// whose API server is a Route without a hostname (what hcp-workflow rendered before)
/// never becomes Available and its nodes never get an ignition endpoint; the same object
/// on a 4.23 operator (the guard of `main`, commit `30d61dfa07`) comes up.
#[test]
fn a_4_22_operator_never_readies_a_private_route_api_server_without_a_hostname() {
    for (version, comes_up) in [("4.22", false), ("4.23", true)] {
        let env = Env::with_sim_args(
            &format!("topo-nohost-{version}"),
            FAST,
            &["--hypershift-version", version],
        );
        seed_zone(&env);
        let cfg = cluster_file(&env.dir, "good", "good-x7k2p", "Private", "");
        // A real create renders a valid HostedCluster and NodePool to copy from.
        let (code, out, err) = env.start("create-cluster", &cfg, &[], &[]);
        assert_eq!(code, 0, "{out}\n{err}");
        let hc = env.sim.get(&format!("{HC}/good"));
        let np = env.sim.get(&format!("{NP}/good-workers"));
        let (mut hc, mut np) = (hc, np);
        for o in [&mut hc, &mut np] {
            o.as_object_mut().unwrap().remove("status");
            let meta = o["metadata"].as_object_mut().unwrap();
            meta.retain(|k, _| k == "namespace" || k == "labels");
        }
        hc["metadata"]["name"] = json!("nohost");
        hc["spec"]["infraID"] = json!("nohost-x7k2p");
        for s in hc["spec"]["services"].as_array_mut().unwrap() {
            if s["service"] == "APIServer" || s["service"] == "OAuthServer" {
                s["servicePublishingStrategy"] = json!({"type": "Route"});
            }
        }
        np["metadata"]["name"] = json!("nohost-workers");
        np["spec"]["clusterName"] = json!("nohost");
        let (s, b) = env.sim.post(HC, &hc);
        assert!((200..300).contains(&s), "{s} {b}");
        let (s, b) = env.sim.post(NP, &np);
        assert!((200..300).contains(&s), "{s} {b}");
        if comes_up {
            let hc = wait_for("the 4.23 control plane to be Available", || {
                let v = env.sim.get(&format!("{HC}/nohost"));
                (condition(&v, "Available")["status"] == "True").then_some(v)
            });
            assert_eq!(condition(&hc, "Available")["status"], "True");
            continue;
        }
        let np = wait_for("the pool to wait for an ignition endpoint", || {
            let v = env.sim.get(&format!("{NP}/nohost-workers"));
            (condition(&v, "IgnitionEndpointAvailable")["reason"] == "IgnitionEndpointMissing")
                .then_some(v)
        });
        assert_eq!(condition(&np, "Ready")["status"], "False", "{np}");
        // Much later (in simulated time) the control plane is still not available.
        std::thread::sleep(Duration::from_millis(500));
        let hc = env.sim.get(&format!("{HC}/nohost"));
        assert_eq!(condition(&hc, "Available")["status"], "False", "{hc}");
        assert!(
            env.sim
                .get("/api/v1/namespaces/clusters-nohost/services/private-router")
                .get("spec")
                .is_some(),
            "the private router exists: the operator got as far as its Services"
        );
    }
}
