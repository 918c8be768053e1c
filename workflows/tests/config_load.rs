//! Loading valid cluster files: the documented example, the defaults of a minimal file,
//! bring-your-own network and identities, path resolution, and the use-time readers.
#![allow(clippy::unwrap_used)]

use hcp_workflows::config::{
    self, AuthMode, Cloud, ClusterConfig, Identities, IdentitiesCreate, IdentityComponent,
    NatSubnet, Network, NetworkCreate, OidcIssuer, OidcIssuerCreate, Topology,
};
use std::path::{Path, PathBuf};

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn files_dir() -> PathBuf {
    manifest().join("tests/fixtures/files")
}

const MINIMAL: &str = "
name: demo
subscription: 11111111-2222-3333-4444-555555555555
tenant: 99999999-8888-7777-6666-555555555555
location: eastus
baseDomain: hcp.example.com
releaseImage: quay.io/openshift-release-dev/ocp-release:4.22.0-multi
persistentResourceGroup: hcp-persistent
topology: Public
managementCluster: {}
nodePools:
  - name: workers
    replicas: 0
pullSecret: pull-secret.json
sshKey: id_ed25519.pub
";

#[test]
fn the_documented_example_loads() {
    let path = manifest().join("../examples/cluster.yaml");
    let c = config::load(&path).unwrap_or_else(|e| panic!("examples/cluster.yaml:\n{e}"));
    assert_eq!(c.name, "demo");
    assert_eq!(c.infra_id.as_deref(), Some("demo-x7k2p"));
    assert_eq!(
        c.topology,
        Topology::Private,
        "the example must run every stage"
    );
    assert!(c.topology.uses_private_link());
    assert_eq!(c.management_cluster.nat_subnet, NatSubnet::Auto);
    assert_eq!(c.node_pools[0].zone.as_deref(), Some("1"));
    assert_eq!(c.allowed_subscriptions.len(), 1);
    // Paths are resolved against the example's directory.
    let examples = manifest().join("../examples");
    assert_eq!(c.pull_secret, examples.join("pull-secret.json"));
    assert_eq!(c.ssh_key, examples.join("id_ed25519.pub"));
    assert_eq!(
        c.oidc_storage_account("demo-x7k2p").as_deref(),
        Some("demohcpoidc7f3a")
    );
    assert_eq!(
        c.oidc_issuer_url("demo-x7k2p"),
        "https://demohcpoidc7f3a.blob.core.windows.net/oidc"
    );
    assert_eq!(c.infra_id_or_generate(), "demo-x7k2p");
}

#[test]
fn a_minimal_file_gets_the_documented_defaults() {
    let c = config::parse_str(MINIMAL, &files_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.infra_id, None);
    assert_eq!(
        c.oidc_issuer,
        OidcIssuer::Create(OidcIssuerCreate {
            storage_account: None,
            container: "oidc".into()
        })
    );
    assert_eq!(c.identities, Identities::Create(IdentitiesCreate {}));
    assert_eq!(
        c.network,
        Network::Create(NetworkCreate {
            vnet_cidr: "10.0.0.0/16".into(),
            subnet_cidr: "10.0.0.0/24".into()
        })
    );
    let pool = &c.node_pools[0];
    assert_eq!(pool.replicas, Some(0));
    assert_eq!(pool.vm_size, config::DEFAULT_VM_SIZE);
    assert_eq!(pool.vm_size, "Standard_D4s_v5");
    assert_eq!(pool.os_disk_size_gib, 128);
    assert_eq!(pool.zone, None);
    assert!(c.allowed_subscriptions.is_empty());
    assert_eq!(c.auth, AuthMode::Auto);
    assert_eq!(c.cloud, Cloud::Public);
    assert_eq!(c.management_cluster.nat_subnet, NatSubnet::Auto);
    assert_eq!(c.management_cluster.kubeconfig, None);
    assert_eq!(c.pull_secret, files_dir().join("pull-secret.json"));
}

#[test]
fn a_generated_infra_id_is_name_plus_five_random_characters() {
    let c = config::parse_str(MINIMAL, &files_dir()).unwrap();
    let id = c.infra_id_or_generate();
    let suffix = id.strip_prefix("demo-").unwrap_or_else(|| panic!("{id}"));
    assert_eq!(suffix.len(), 5);
    assert!(
        suffix
            .chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit())
    );
    // Recording it makes it stick, and the recorded config still validates.
    let recorded = MINIMAL.replace("name: demo\n", &format!("name: demo\ninfraID: {id}\n"));
    let again = config::parse_str(&recorded, &files_dir()).unwrap();
    assert_eq!(again.infra_id_or_generate(), id);
    // The derived storage account depends on the infra id and is a valid account name.
    let account = again.oidc_storage_account(&id).unwrap();
    assert_eq!(account, config::derive_storage_account("demo", &id));
    assert_eq!(account.len(), 24);
    assert_eq!(
        again.oidc_issuer_url(&id),
        format!("https://{account}.blob.core.windows.net/oidc")
    );
}

#[test]
fn long_names_get_a_shortened_generated_infra_id_that_fits() {
    let name = "a-forty-character-cluster-name-abcdefghi";
    assert_eq!(name.len(), 40);
    let c = config::parse_str(
        &MINIMAL.replace("name: demo", &format!("name: {name}")),
        &files_dir(),
    )
    .unwrap();
    let id = c.infra_id_or_generate();
    assert!(
        name.len() + id.len() <= config::MAX_NAME_PLUS_INFRA_ID,
        "{id}"
    );
    let recorded = MINIMAL.replace("name: demo\n", &format!("name: {name}\ninfraID: {id}\n"));
    config::parse_str(&recorded, &files_dir()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn sovereign_cloud_regions_and_endpoints() {
    let gov =
        MINIMAL.replace("location: eastus", "location: usgovvirginia") + "cloud: usGovernment\n";
    let c = config::parse_str(&gov, &files_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.cloud, Cloud::UsGovernment);
    let endpoints = c.cloud.endpoints();
    assert_eq!(
        endpoints.resource_manager,
        "https://management.usgovcloudapi.net"
    );
    assert_eq!(endpoints.storage_suffix, "core.usgovcloudapi.net");
    assert!(
        c.oidc_issuer_url("demo-abcde")
            .ends_with(".blob.core.usgovcloudapi.net/oidc")
    );

    let custom = MINIMAL.replace("location: eastus", "location: local")
        + "cloud:\n  custom:\n    resourceManager: https://management.local.example/\n    authorityHost: https://login.local.example\n    storageSuffix: core.local.example\n";
    // Well formed, but HyperShift has no name for it: refused, naming the field.
    let e = config::parse_str(&custom, &files_dir())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("cloud.custom") && e.contains("unsupported cloud type"),
        "{e}"
    );
}

#[test]
fn bring_your_own_network_and_identities() {
    let path = manifest().join("tests/fixtures/good/existing-network-and-identities.yaml");
    let c = config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let Network::Existing(net) = &c.network else {
        panic!("{:?}", c.network)
    };
    let subnet =
        config::ArmResourceId::parse_kind(&net.subnet_id, config::ArmKind::Subnet).unwrap();
    // Kept as written; ARM compares case-insensitively.
    assert_eq!(subnet.resource_group(), "BYO-NET");
    assert_eq!(subnet.name(), "nodes");
    let ids = c.read_workload_identities().unwrap().unwrap();
    let client_ids: Vec<&str> = IdentityComponent::ALL
        .iter()
        .map(|comp| ids.get(*comp).client_id.as_str())
        .collect();
    assert_eq!(
        client_ids,
        [
            "00000000-0000-0000-0000-000000000004", // disk
            "00000000-0000-0000-0000-000000000003", // file
            "00000000-0000-0000-0000-000000000001", // imageRegistry
            "00000000-0000-0000-0000-000000000002", // ingress
            "00000000-0000-0000-0000-000000000006", // cloudProvider
            "00000000-0000-0000-0000-000000000005", // nodePoolManagement
            "00000000-0000-0000-0000-000000000007", // network
            "00000000-0000-0000-0000-000000000008", // controlPlaneOperator
        ]
    );
    // Same JSON shape as HostedCluster.spec.platform.azure.azureAuthenticationConfig.workloadIdentities.
    let json = serde_json::to_value(&ids).unwrap();
    assert_eq!(
        json["nodePoolManagement"]["clientID"],
        "00000000-0000-0000-0000-000000000005"
    );
    assert_eq!(
        json.as_object().unwrap().len(),
        8,
        "exactly the 8 components: {json}"
    );
    assert_eq!(
        c.management_cluster.nat_subnet,
        NatSubnet::Cidr("10.224.8.0/24".into())
    );
    assert_eq!(c.topology, Topology::PublicAndPrivate);
    // A created-identities config has nothing to read.
    let minimal = config::parse_str(MINIMAL, &files_dir()).unwrap();
    assert!(minimal.read_workload_identities().unwrap().is_none());
}

#[test]
fn secrets_are_read_at_use_time_and_never_held() {
    let c: ClusterConfig = config::parse_str(MINIMAL, &files_dir()).unwrap();
    let on_disk = std::fs::read(files_dir().join("pull-secret.json")).unwrap();
    assert_eq!(c.read_pull_secret().unwrap(), on_disk);
    let marker = "ZmFrZTpmYWtl"; // the fake pull secret's auth value
    assert!(!format!("{c:?}").contains(marker));
    assert!(!serde_json::to_string(&c).unwrap().contains(marker));
    assert!(
        c.read_ssh_public_key()
            .unwrap()
            .starts_with(b"ssh-ed25519 ")
    );
}

#[test]
fn use_time_reads_report_files_changed_since_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        files_dir().join("pull-secret.json"),
        dir.path().join("pull-secret.json"),
    )
    .unwrap();
    std::fs::copy(
        files_dir().join("id_ed25519.pub"),
        dir.path().join("id_ed25519.pub"),
    )
    .unwrap();
    let c = config::parse_str(MINIMAL, dir.path()).unwrap();

    std::fs::write(
        dir.path().join("pull-secret.json"),
        "{\"auths\": 1, \"x\": \"s3cr3t\"}",
    )
    .unwrap();
    let err = c.read_pull_secret().unwrap_err();
    assert!(matches!(err, config::FileError::Invalid { .. }), "{err:?}");
    assert!(!err.to_string().contains("s3cr3t"), "{err}");
    assert!(!err.is_retryable());

    std::fs::remove_file(dir.path().join("pull-secret.json")).unwrap();
    let err = c.read_pull_secret().unwrap_err();
    assert!(matches!(err, config::FileError::NotFound { .. }), "{err:?}");
    assert!(!err.is_retryable());
}

#[test]
fn yaml_anchors_and_merge_keys_work() {
    let yaml = MINIMAL.replace(
        "nodePools:\n  - name: workers\n    replicas: 0\n",
        "nodePools:\n  - &base\n    name: workers\n    replicas: 1\n    osDiskSizeGiB: 256\n  - <<: *base\n    name: infra\n",
    );
    let c = config::parse_str(&yaml, &files_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.node_pools[1].name, "infra");
    assert_eq!(c.node_pools[1].os_disk_size_gib, 256);
}

#[test]
fn unreadable_and_empty_files() {
    let err = config::load(Path::new("/nonexistent/cluster.yaml")).unwrap_err();
    assert_eq!(err.errors()[0].rule, "file");
    assert!(
        err.to_string()
            .starts_with("cannot read /nonexistent/cluster.yaml: "),
        "{err}"
    );
    let err = config::parse_str("# nothing\n", &files_dir()).unwrap_err();
    assert_eq!(err.to_string(), "the file is empty");
}
