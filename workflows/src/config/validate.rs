//! Semantic validation of a parsed cluster file: every rule Azure, HyperShift or our own
//! naming imposes that a type cannot express.
//!
//! Why it collects instead of returning early: one run should show every problem. Each
//! problem carries the field path, a stable rule id and a message that says what was given
//! and what is expected (never the content of a referenced secret file).

use super::arm_id::{ArmKind, ArmResourceId};
use super::error::{ConfigError, FileError};
use super::files;
use super::model::{
    Cloud, ClusterConfig, Identities, ImageType, ManagementCluster, ManagementPlatform, NatSubnet,
    Network, NodePool, OidcIssuer,
};
use super::names::{MAX_NAME_LEN, MAX_NAME_PLUS_INFRA_ID};
use super::regions;
use ipnet::Ipv4Net;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Azure's smallest subnet is a /29 (it reserves 5 addresses per subnet).
const MAX_PREFIX_LEN: u8 = 29;
/// Broader than a /8 is not an address space anyone means.
const MIN_PREFIX_LEN: u8 = 8;

struct Report<'a> {
    base_dir: &'a Path,
    errors: Vec<ConfigError>,
}

impl Report<'_> {
    fn push(&mut self, path: impl Into<String>, rule: &str, message: impl Into<String>) {
        self.errors.push(ConfigError::new(path, rule, message));
    }

    fn check(&mut self, path: &str, rule: &str, result: Result<(), String>) {
        if let Err(message) = result {
            self.push(path, rule, message);
        }
    }

    /// Reads `file` (as written, resolved against the config's directory) and runs
    /// `content` on it; problems are reported under `path` with rule `rule`.
    fn check_file(
        &mut self,
        path: &str,
        rule: &str,
        file: &Path,
        content: impl FnOnce(&[u8]) -> Result<(), Vec<String>>,
    ) {
        let resolved = resolve_path(self.base_dir, file);
        match files::read(&resolved) {
            Ok(bytes) => {
                if let Err(problems) = content(&bytes) {
                    for p in problems {
                        self.push(path, rule, format!("{}: {p}", file.display()));
                    }
                }
            }
            Err(FileError::NotFound { .. }) => self.push(path, "file", not_found_message(file)),
            Err(e @ (FileError::Io { .. } | FileError::Invalid { .. })) => {
                self.push(path, "file", e.to_string());
            }
        }
    }
}

/// "file … not found", with a hint for relative paths (shown as written by the user).
fn not_found_message(file: &Path) -> String {
    let hint = if file.is_relative() && !file.starts_with("~") {
        " (relative paths are resolved against the config file's directory)"
    } else {
        ""
    };
    format!("file {} not found{hint}", file.display())
}

/// Resolves a path from the cluster file: `~/` against `$HOME`, a relative path against
/// the config file's directory, an absolute path as is.
pub(crate) fn resolve_path(base_dir: &Path, file: &Path) -> PathBuf {
    if let Ok(rest) = file.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    base_dir.join(file)
}

/// Every problem in `config`; empty when it is valid. File paths are resolved against
/// `base_dir` for the existence and content checks.
pub(crate) fn validate(config: &ClusterConfig, base_dir: &Path) -> Vec<ConfigError> {
    let mut r = Report {
        base_dir,
        errors: Vec::new(),
    };
    for (key, value, _) in config.wait_budgets.entries() {
        if let Some(v) = value {
            match humantime::parse_duration(v) {
                Ok(d) if !d.is_zero() => {}
                Ok(_) => r.push(
                    format!("waitBudgets.{key}"),
                    "duration",
                    "must be longer than zero: a wait needs some time (e.g. 45m)",
                ),
                Err(e) => r.push(
                    format!("waitBudgets.{key}"),
                    "duration",
                    format!("{v:?} is not a duration ({e}); write it like 45m, 1h30m or 90s"),
                ),
            }
        }
    }
    if let Some(v) = &config.on_failure
        && let Err(e) = crate::workflow::parse_on_failure(v)
    {
        r.push("onFailure", "on-failure", e);
    }
    let name_ok = check_name(&mut r, &config.name);
    if let Some(infra_id) = &config.infra_id {
        let infra_ok = !infra_id.is_empty() && is_dns_label(infra_id, false);
        if !infra_ok {
            r.push(
                "infraID",
                "infra-id",
                format!("must be lowercase letters, digits and '-', starting and ending with a letter or digit (got {infra_id:?})"),
            );
        } else if name_ok && config.name.len() + infra_id.len() > MAX_NAME_PLUS_INFRA_ID {
            r.push(
                "infraID",
                "derived-name-length",
                format!(
                    "`<name>-<infraID>-pe` would be {} characters and Azure allows 64 for private endpoint names: shorten name or infraID (together at most {MAX_NAME_PLUS_INFRA_ID})",
                    config.name.len() + infra_id.len() + 4
                ),
            );
        }
    }
    r.check("subscription", "uuid", check_uuid(&config.subscription));
    r.check("tenant", "uuid", check_uuid(&config.tenant));
    r.check(
        "location",
        "location",
        regions::check_location(&config.location, &config.cloud),
    );
    r.check(
        "baseDomain",
        "dns-name",
        check_dns_name(&config.base_domain),
    );
    if name_ok && is_dns_name(&config.base_domain) {
        let zone = config.name.len() + 1 + config.base_domain.len();
        if zone > 253 {
            r.push(
                "baseDomain",
                "dns-name",
                format!("`<name>.<baseDomain>` would be {zone} characters; DNS allows 253"),
            );
        }
    }
    let image_ok = check_image_ref(&config.release_image);
    let image_valid = image_ok.is_ok();
    r.check("releaseImage", "image-ref", image_ok);
    if image_valid {
        check_release(&mut r, config);
    }
    r.check(
        "persistentResourceGroup",
        "resource-group-name",
        check_resource_group(&config.persistent_resource_group),
    );
    if let Some(rg) = &config.dns_zone_resource_group {
        r.check(
            "dnsZoneResourceGroup",
            "resource-group-name",
            check_resource_group(rg),
        );
    }
    check_oidc(&mut r, &config.oidc_issuer);
    check_identities(&mut r, config);
    check_network(&mut r, &config.network, &config.subscription);
    check_networking(&mut r, config);
    check_management(&mut r, config);
    check_node_pools(&mut r, &config.node_pools, &config.subscription);
    check_control_plane(&mut r, config);
    if image_valid {
        check_node_pool_images(&mut r, config);
    }
    for (i, s) in config.allowed_subscriptions.iter().enumerate() {
        r.check(&format!("allowedSubscriptions[{i}]"), "uuid", check_uuid(s));
    }
    if config.private_link.managed_by == crate::config::PrivateLinkManager::Hypershift
        && !config.topology.uses_private_link()
    {
        r.push(
            "privateLink.managedBy",
            "private-link-mode",
            "`hypershift` names who makes the private link, and topology Public has none: use topology Private or PublicAndPrivate, or remove privateLink",
        );
    }
    r.check_file("pullSecret", "pull-secret", &config.pull_secret, |b| {
        files::check_pull_secret(b).map_err(|e| vec![e])
    });
    r.check_file("sshKey", "ssh-key", &config.ssh_key, |b| {
        files::check_ssh_public_key(b).map_err(|e| vec![e])
    });
    if let Cloud::Custom(c) = &config.cloud {
        // HyperShift has no name for a custom cloud: the HostedCluster would say
        // AzurePublicCloud (the CRD's default) and every in-cluster component would call
        // public Azure. Its own code maps only three clouds (`hypershift-operator/controllers/
        // hostedcluster/internal/platform/azure/azure.go` `parseCloudType`: "unsupported
        // cloud type", `support/azureutil/azureutil.go` `GetAzureCloudConfiguration`).
        r.push(
            "cloud.custom",
            "hypershift-cloud",
            "HyperShift 4.22 runs hosted clusters only in AzurePublicCloud, AzureUSGovernmentCloud and AzureChinaCloud (its CAPZ mapping refuses any other cloud: \"unsupported cloud type\"); use cloud: public, usGovernment or china",
        );
        r.check(
            "cloud.custom.resourceManager",
            "https-url",
            check_https_url(&c.resource_manager, false),
        );
        r.check(
            "cloud.custom.authorityHost",
            "https-url",
            check_https_url(&c.authority_host, false),
        );
        r.check(
            "cloud.custom.storageSuffix",
            "dns-name",
            check_dns_name(&c.storage_suffix),
        );
    }
    r.errors
}

fn check_name(r: &mut Report<'_>, name: &str) -> bool {
    let mut ok = true;
    if name.len() > MAX_NAME_LEN {
        r.push(
            "name",
            "max-length",
            format!(
                "must be at most {MAX_NAME_LEN} characters (got {}): derived Azure resource names embed it",
                name.len()
            ),
        );
        ok = false;
    }
    if name.is_empty() || !is_dns_label(name, true) {
        r.push(
            "name",
            "dns-label",
            format!("must be a DNS label: lowercase letters, digits and '-', starting with a letter and ending with a letter or digit (got {name:?})"),
        );
        ok = false;
    }
    ok
}

fn check_oidc(r: &mut Report<'_>, oidc: &OidcIssuer) {
    match oidc {
        OidcIssuer::Create(c) => {
            if let Some(account) = &c.storage_account {
                r.check(
                    "oidcIssuer.create.storageAccount",
                    "storage-account-name",
                    check_storage_account(account),
                );
            }
            r.check(
                "oidcIssuer.create.container",
                "container-name",
                check_container(&c.container),
            );
        }
        OidcIssuer::Existing(e) => {
            r.check(
                "oidcIssuer.existing.url",
                "https-url",
                check_https_url(&e.url, true),
            );
            // The issuer's own key (HyperShift's `--sa-token-issuer-private-key-path`),
            // parsed by the same code that later stores it; messages never quote the key.
            r.check_file(
                "oidcIssuer.existing.signingKey",
                "signing-key",
                &e.signing_key,
                |b| {
                    let text = std::str::from_utf8(b)
                        .map_err(|_| vec!["is not a PEM text file".to_string()])?;
                    hcp_activities::oidc::IssuerKey::from_private_pem(text)
                        .map(|_| ())
                        .map_err(|err| {
                            vec![format!(
                                "{err}: give the issuer's PEM RSA private key (`openssl genrsa` output or PKCS#8)"
                            )]
                        })
                },
            );
        }
    }
}

fn check_identities(r: &mut Report<'_>, config: &ClusterConfig) {
    match &config.identities {
        Identities::Existing(e) => r.check_file(
            "identities.existing.file",
            "workload-identities",
            &e.file,
            |b| files::parse_workload_identities(b).map(|_| ()),
        ),
        Identities::AroHcp(a) => {
            if let Some(name) = &a.key_vault.name {
                r.check(
                    "identities.aroHcp.keyVault.name",
                    "key-vault-name",
                    check_key_vault_name(name),
                );
            } else if a.key_vault.existing {
                r.push(
                    "identities.aroHcp.keyVault.name",
                    "required",
                    "required with existing: true: name the vault you made",
                );
            }
            if let Some(m) = a.certificate_validity_months
                && !(1..=120).contains(&m)
            {
                r.push(
                    "identities.aroHcp.certificateValidityMonths",
                    "range",
                    format!(
                        "{m} is out of range: Key Vault certificates are valid 1 to 120 months"
                    ),
                );
            }
            if config.management_cluster.platform != ManagementPlatform::Aks {
                r.push(
                    "managementCluster.platform",
                    "aro-hcp-needs-aks",
                    "must be aks with identities.aroHcp: the control-plane certificates are mounted by AKS's Key Vault Secrets Provider (Secrets Store CSI driver), as HyperShift's ManagedIdentities mode expects (support/secretproviderclass)",
                );
            }
        }
        Identities::Create(_) => {}
    }
}

/// Key Vault name rules (`Microsoft.KeyVault/vaults` name pattern
/// `^[a-zA-Z0-9-]{3,24}$`, plus the documented: start with a letter, end with a letter or
/// digit, no consecutive hyphens).
fn check_key_vault_name(s: &str) -> Result<(), String> {
    let ok = (3..=24).contains(&s.len())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        && !s.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a Key Vault name: 3–24 letters, digits and '-', starting with a letter, ending with a letter or digit, no \"--\""
        ))
    }
}

/// OVN-Kubernetes' internal IPv4 ranges when HyperShift renders none (the
/// cluster-network-operator's defaults): the join switch, the transit switch and the
/// masquerade subnet. A node, pod or service network inside them breaks the guest's SDN.
const OVN_INTERNAL: [(&str, &str); 3] = [
    ("100.64.0.0/16", "OVN-Kubernetes' join subnet"),
    ("100.88.0.0/16", "OVN-Kubernetes' transit switch subnet"),
    ("169.254.0.0/17", "OVN-Kubernetes' masquerade subnet"),
];

/// The node, pod and service networks must not overlap one another or OVN's
/// internal ranges. HyperShift's own check (`hostedcluster_controller.go`
/// `validateNetworks` → `compareCIDREntries`) compares machine, service and cluster
/// networks only when `machineNetwork` is set; ours runs before anything is created.
/// (vault, key, version) of a Key Vault key identifier, checked as HyperShift's
/// `support/azureutil` `GetAzureEncryptionKeyInfo` does (host, `/keys/<name>/<version>`).
pub fn kms_key(id: &str) -> Result<(String, String, String), String> {
    let shape = "write it as https://<vault>.vault.azure.net/keys/<key>/<version>";
    let rest = id
        .strip_prefix("https://")
        .ok_or_else(|| format!("{id:?} is not an https URL; {shape}"))?;
    let (host, path) = rest
        .split_once('/')
        .ok_or_else(|| format!("{id:?} has no path; {shape}"))?;
    let vault = host.split('.').next().unwrap_or_default();
    let parts: Vec<&str> = path
        .strip_prefix("keys/")
        .ok_or_else(|| format!("{id:?}: expected the path to start with /keys/; {shape}"))?
        .split('/')
        .collect();
    match parts.as_slice() {
        [key, version] if !key.is_empty() && !version.is_empty() && !vault.is_empty() => {
            Ok((vault.to_string(), key.to_string(), version.to_string()))
        }
        _ => Err(format!(
            "{id:?}: expected /keys/<keyName>/<keyVersion>; {shape}"
        )),
    }
}

/// Azure's tag limits (50 per resource, keys ≤ 512 without `<>%&\?/`, values ≤ 256;
/// "Use tags to organize your Azure resources") less the three ownership tags.
const MAX_USER_TAGS: usize = 47;

fn check_control_plane(r: &mut Report<'_>, config: &ClusterConfig) {
    let cp = &config.control_plane;
    // A Kubernetes object name: a DNS-1123 subdomain (lowercase alphanumerics, '-' and
    // '.', ≤ 253 characters, alphanumeric at both ends of each label).
    let subdomain =
        |s: &str| !s.is_empty() && s.len() <= 253 && s.split('.').all(|l| is_dns_label(l, false));
    if let Some(class) = &cp.etcd.storage_class
        && !subdomain(class)
    {
        r.push(
            "controlPlane.etcd.storageClass",
            "dns-name",
            format!(
                "{class:?} is not a storage class name (lowercase letters, digits, '-' and '.')"
            ),
        );
    }
    if let Some(size) = &cp.etcd.size {
        let ok = size
            .strip_suffix("Gi")
            .or_else(|| size.strip_suffix("Ti"))
            .is_some_and(|n| {
                !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
                    && n != "0"
                    && !n.starts_with('0')
            });
        if !ok {
            r.push(
                "controlPlane.etcd.size",
                "quantity",
                format!("{size:?} is not a size like 8Gi or 1Ti (whole Gi or Ti, at least 1Gi)"),
            );
        }
    }
    for (i, ics) in cp.image_content_sources.iter().enumerate() {
        if ics.source.trim().is_empty() {
            r.push(
                format!("controlPlane.imageContentSources[{i}].source"),
                "required",
                "must name the mirrored repository",
            );
        }
        if ics.mirrors.is_empty() || ics.mirrors.iter().any(|m| m.trim().is_empty()) {
            r.push(
                format!("controlPlane.imageContentSources[{i}].mirrors"),
                "required",
                "needs at least one mirror, none empty",
            );
        }
    }
    let reserved =
        |r: &mut Report<'_>, field: &str, map: &std::collections::BTreeMap<String, String>| {
            for k in map.keys() {
                if k.starts_with("hcp-workflow.io/") {
                    r.push(
                        format!("controlPlane.{field}.{k}"),
                        "reserved",
                        "keys starting hcp-workflow.io/ are hcp-workflow's ownership labels",
                    );
                }
            }
        };
    reserved(r, "labels", &cp.labels);
    reserved(r, "annotations", &cp.annotations);
    if let Some(k) = &cp.kms {
        if let Err(e) = kms_key(&k.key_id) {
            r.push("controlPlane.kms.keyId", "key-id", e);
        }
        // Key Vault object names: 1–127 alphanumerics and '-'.
        let n = &k.credentials_secret_name;
        if n.is_empty()
            || n.len() > 127
            || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            r.push(
                "controlPlane.kms.credentialsSecretName",
                "key-vault-name",
                format!("{n:?} is not a Key Vault secret name (1–127 letters, digits and '-')"),
            );
        }
    }
    if let Some(mtu) = config.networking.ovn_kubernetes_mtu
        && !(576..=9216).contains(&mtu)
    {
        r.push(
            "networking.ovnKubernetesMTU",
            "range",
            format!("{mtu} is outside 576–9216 (HyperShift's API); set it 100 below the nodes' uplink MTU"),
        );
    }
    if let Some(n) = &cp.kube_api_server_dns_name
        && !(n.split('.').count() >= 2
            && n.split('.').all(|l| {
                !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }))
    {
        r.push(
            "controlPlane.kubeAPIServerDNSName",
            "dns-name",
            format!("{n:?} is not a DNS name like api.example.com"),
        );
    }
    if let Some(f) = &cp.feature_set
        && !["TechPreviewNoUpgrade", "DevPreviewNoUpgrade"].contains(&f.as_str())
    {
        r.push(
            "controlPlane.featureSet",
            "enum",
            format!("{f:?} is not one of TechPreviewNoUpgrade, DevPreviewNoUpgrade"),
        );
    }
    const CAPABILITIES: [&str; 7] = [
        "ImageRegistry",
        "openshift-samples",
        "Insights",
        "baremetal",
        "Console",
        "NodeTuning",
        "Ingress",
    ];
    for (field, list) in [
        ("enabled", &cp.capabilities.enabled),
        ("disabled", &cp.capabilities.disabled),
    ] {
        for (i, c) in list.iter().enumerate() {
            if !CAPABILITIES.contains(&c.as_str()) {
                r.push(
                    format!("controlPlane.capabilities.{field}[{i}]"),
                    "enum",
                    format!("{c:?} is not one of {}", CAPABILITIES.join(", ")),
                );
            }
        }
    }
    for (i, t) in cp.placement.tolerations.iter().enumerate() {
        let at = format!("controlPlane.placement.tolerations[{i}]");
        if let Some(o) = &t.operator
            && o != "Exists"
            && o != "Equal"
        {
            r.push(
                format!("{at}.operator"),
                "enum",
                format!("{o:?} is not one of Exists, Equal"),
            );
        }
        if let Some(e) = &t.effect
            && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&e.as_str())
        {
            r.push(
                format!("{at}.effect"),
                "enum",
                format!("{e:?} is not one of NoSchedule, PreferNoSchedule, NoExecute"),
            );
        }
        if t.operator.as_deref() == Some("Exists") && t.value.is_some() {
            r.push(
                format!("{at}.value"),
                "forbidden",
                "a toleration with operator Exists has no value",
            );
        }
    }
    for (i, p) in config.node_pools.iter().enumerate() {
        let Some(id) = &p.subnet_id else { continue };
        let at = format!("nodePools[{i}].subnetId");
        match (&config.network, ArmResourceId::parse_kind(id, ArmKind::Subnet)) {
            (_, Err(e)) => r.push(at, "arm-id", e),
            (Network::Create(_), Ok(_)) => r.push(
                at,
                "byo-network-only",
                "a created network has one subnet; per-pool subnets need network.existing (subnets of its vnetId)",
            ),
            (Network::Existing(e), Ok(subnet)) => {
                if let Ok(vnet) = ArmResourceId::parse_kind(&e.vnet_id, ArmKind::VirtualNetwork) {
                    check_subnet_under(r, &at, &subnet, &vnet, "network.existing.vnetId");
                }
            }
        }
    }
    if config.resource_group_tags.len() > MAX_USER_TAGS {
        r.push(
            "resourceGroupTags",
            "too-many",
            format!("{} tags; Azure allows 50 per resource group and hcp-workflow sets 3, so at most {MAX_USER_TAGS}", config.resource_group_tags.len()),
        );
    }
    for (k, v) in &config.resource_group_tags {
        let at = format!("resourceGroupTags.{k}");
        if k.starts_with("hcp-workflow.io/") {
            r.push(
                at,
                "reserved",
                "keys starting hcp-workflow.io/ are hcp-workflow's ownership tags",
            );
        } else if k.is_empty() || k.len() > 512 || k.contains(['<', '>', '%', '&', '\\', '?', '/'])
        {
            r.push(
                at,
                "tag-key",
                "a tag key has 1–512 characters and none of < > % & \\ ? /",
            );
        } else if v.len() > 256 {
            r.push(at, "tag-value", "a tag value has at most 256 characters");
        }
    }
}

fn check_networking(r: &mut Report<'_>, config: &ClusterConfig) {
    let n = &config.networking;
    let mut ranges: Vec<(String, Ipv4Net)> = Vec::new();
    let mut fields: Vec<(&str, &str)> = Vec::new();
    match &config.network {
        Network::Create(c) => {
            // Its own errors are reported by `check_network`.
            if let Ok(net) = parse_cidr(&c.vnet_cidr) {
                ranges.push((format!("network.create.vnetCidr {net}"), net));
            }
        }
        Network::Existing(e) => {
            if let Some(m) = &e.machine_cidr {
                fields.push(("network.existing.machineCidr", m));
            }
        }
    }
    fields.push(("networking.clusterNetwork", &n.cluster_network));
    fields.push(("networking.serviceNetwork", &n.service_network));
    for (field, value) in fields {
        match parse_any_cidr(value) {
            Ok(net) => ranges.push((format!("{field} {net}"), net)),
            Err(e) => r.push(field, "cidr", e),
        }
    }
    for (i, (what, a)) in ranges.iter().enumerate() {
        for (other, b) in &ranges[i + 1..] {
            if a.contains(b) || b.contains(a) {
                let field = other.split(' ').next().unwrap_or_default();
                r.push(
                    field,
                    "cidr-overlap",
                    format!(
                        "{other} overlaps {what}: nodes, pods and services need separate address ranges; pick ranges that do not overlap"
                    ),
                );
            }
        }
        for (ovn, name) in OVN_INTERNAL {
            let Ok(o) = ovn.parse::<Ipv4Net>() else {
                continue;
            };
            if a.contains(&o) || o.contains(a) {
                let field = what.split(' ').next().unwrap_or_default();
                r.push(
                    field,
                    "cidr-overlap",
                    format!(
                        "{what} overlaps {name} {ovn}, which the guest's network plugin uses internally; pick another range"
                    ),
                );
            }
        }
    }
}

/// An IPv4 CIDR of any prefix length (pod and service networks are larger than a VNet may
/// be).
fn parse_any_cidr(s: &str) -> Result<Ipv4Net, String> {
    let net: Ipv4Net = s
        .parse()
        .map_err(|_| format!("must be an IPv4 CIDR like 10.132.0.0/14 (got {s:?})"))?;
    if net.trunc() != net {
        return Err(format!(
            "{s} has host bits set (did you mean {}?)",
            net.trunc()
        ));
    }
    Ok(net)
}

fn check_network(r: &mut Report<'_>, network: &Network, subscription: &str) {
    match network {
        Network::Create(c) => {
            let vnet = parse_cidr(&c.vnet_cidr);
            let subnet = parse_cidr(&c.subnet_cidr);
            if let Err(e) = &vnet {
                r.push("network.create.vnetCidr", "cidr", e.clone());
            }
            if let Err(e) = &subnet {
                r.push("network.create.subnetCidr", "cidr", e.clone());
            }
            if let (Ok(vnet), Ok(subnet)) = (vnet, subnet)
                && !vnet.contains(&subnet)
            {
                r.push(
                    "network.create.subnetCidr",
                    "subnet-within-vnet",
                    format!("{subnet} is not inside vnetCidr {vnet}"),
                );
            }
        }
        Network::Existing(e) => {
            let vnet = ArmResourceId::parse_kind(&e.vnet_id, ArmKind::VirtualNetwork);
            let subnet = ArmResourceId::parse_kind(&e.subnet_id, ArmKind::Subnet);
            if let Err(m) = &vnet {
                r.push("network.existing.vnetId", "arm-id", m.clone());
            }
            if let Err(m) = &subnet {
                r.push("network.existing.subnetId", "arm-id", m.clone());
            }
            // HyperShift's API requires the VNet in the cluster's subscription
            // (`api/hypershift/v1beta1/azure.go`, `vnetID`: "it must exist under the same
            // subscription as SubscriptionID"); CAPZ, the machine template and the cloud
            // provider all look for it there.
            if let Ok(vnet) = &vnet
                && !vnet.subscription().eq_ignore_ascii_case(subscription)
            {
                r.push(
                    "network.existing.vnetId",
                    "same-subscription",
                    format!(
                        "the VNet is in subscription {}, but the cluster's `subscription` is {subscription}; HyperShift requires the VNet (and so its subnet) in the cluster's subscription: use a VNet there, or set `subscription` to the VNet's",
                        vnet.subscription()
                    ),
                );
            }
            if let (Ok(vnet), Ok(subnet)) = (&vnet, &subnet) {
                check_subnet_under(
                    r,
                    "network.existing.subnetId",
                    subnet,
                    vnet,
                    "network.existing.vnetId",
                );
            }
            if let Err(m) = ArmResourceId::parse_kind(&e.nsg_id, ArmKind::NetworkSecurityGroup) {
                r.push("network.existing.nsgId", "arm-id", m);
            }
        }
    }
}

fn check_subnet_under(
    r: &mut Report<'_>,
    path: &str,
    subnet: &ArmResourceId,
    vnet: &ArmResourceId,
    vnet_field: &str,
) {
    let under = subnet.parent().is_some_and(|p| p.same_resource(vnet));
    if !under {
        let parent = subnet.parent().map(|p| p.to_string()).unwrap_or_default();
        r.push(
            path,
            "subnet-under-vnet",
            format!(
                "subnet {:?} belongs to {parent}, not to {vnet_field} {vnet}",
                subnet.name()
            ),
        );
    }
}

fn check_management(r: &mut Report<'_>, config: &ClusterConfig) {
    let m: &ManagementCluster = &config.management_cluster;
    if let Some(kubeconfig) = &m.kubeconfig {
        // Only its existence: a kubeconfig holds credentials and kube-rs parses it later.
        if !resolve_path(r.base_dir, kubeconfig).is_file() {
            r.push(
                "managementCluster.kubeconfig",
                "file",
                not_found_message(kubeconfig),
            );
        }
    }
    if let Some(context) = &m.context
        && context.trim().is_empty()
    {
        r.push(
            "managementCluster.context",
            "non-empty",
            "must not be empty when given",
        );
    }
    if config.topology.uses_private_link() {
        let why = format!(
            "required when topology is {:?}: the Private Link Service is created in the management cluster's network",
            config.topology
        );
        if m.subscription.is_none() {
            r.push("managementCluster.subscription", "required", why.clone());
        }
        if m.load_balancer_resource_group.is_none() {
            r.push(
                "managementCluster.loadBalancerResourceGroup",
                "required",
                why.clone(),
            );
        }
        if m.vnet_id.is_none() {
            r.push("managementCluster.vnetId", "required", why);
        }
    }
    if let Some(s) = &m.subscription {
        r.check("managementCluster.subscription", "uuid", check_uuid(s));
    }
    if m.platform == ManagementPlatform::Aks {
        match &m.aks_cluster_id {
            None => r.push(
                "managementCluster.aksClusterId",
                "required",
                "required with platform: aks: the ARM id of the AKS cluster (/subscriptions/<uuid>/resourceGroups/<rg>/providers/Microsoft.ContainerService/managedClusters/<name>)",
            ),
            Some(id) => {
                if let Err(e) = ArmResourceId::parse_kind(id, ArmKind::ManagedCluster) {
                    r.push("managementCluster.aksClusterId", "arm-id", e);
                }
            }
        }
        if config.topology.uses_private_link() {
            r.push(
                "topology",
                "aks-public-only",
                format!(
                    "{:?} is not supported on an AKS management cluster: hcp-workflow's private-link stages are built for an OpenShift management cluster (its router and Route API; control-plane-operator/main.go setupPrivatePlatformControllers); use Public, or an OpenShift management cluster",
                    config.topology
                ),
            );
        }
    } else if m.aks_cluster_id.is_some() {
        r.push(
            "managementCluster.aksClusterId",
            "aks-only",
            "only with platform: aks (set managementCluster.platform: aks, or remove it)",
        );
    }
    if let Some(rg) = &m.load_balancer_resource_group {
        r.check(
            "managementCluster.loadBalancerResourceGroup",
            "resource-group-name",
            check_resource_group(rg),
        );
    }
    let vnet = m.vnet_id.as_ref().map(|v| {
        let parsed = ArmResourceId::parse_kind(v, ArmKind::VirtualNetwork);
        if let Err(e) = &parsed {
            r.push("managementCluster.vnetId", "arm-id", e.clone());
        }
        parsed
    });
    if let (Some(Ok(vnet)), Some(sub)) = (&vnet, &m.subscription)
        && is_uuid(sub)
        && !vnet.subscription().eq_ignore_ascii_case(sub)
    {
        r.push(
            "managementCluster.vnetId",
            "subscription-mismatch",
            format!(
                "is in subscription {} but managementCluster.subscription is {sub}",
                vnet.subscription()
            ),
        );
    }
    match &m.nat_subnet {
        NatSubnet::Auto => {}
        NatSubnet::Id(id) => match ArmResourceId::parse_kind(id, ArmKind::Subnet) {
            Err(e) => r.push("managementCluster.natSubnet.id", "arm-id", e),
            Ok(subnet) => {
                if let Some(Ok(vnet)) = &vnet {
                    check_subnet_under(
                        r,
                        "managementCluster.natSubnet.id",
                        &subnet,
                        vnet,
                        "managementCluster.vnetId",
                    );
                }
            }
        },
        NatSubnet::Cidr(cidr) => {
            if let Err(e) = parse_cidr(cidr) {
                r.push("managementCluster.natSubnet.cidr", "cidr", e);
            }
        }
    }
}

/// The most node pools a cluster file may declare. HyperShift sets no limit of its own;
/// this is AKS's documented "maximum node pools per cluster" (100, "Quotas, virtual machine
/// size restrictions, and region availability in AKS"), the nearest published bound for
/// Azure node pools. Each pool is a step and a NodePool object: 20 000 were accepted before.
pub const MAX_NODE_POOLS: usize = 100;

/// A pool's `nodeDrainTimeout` as the NodePool API takes it (a Go duration, whole
/// seconds): `None` when unset; `Err` with the problem.
pub fn drain_timeout(v: Option<&str>) -> Result<Option<String>, String> {
    let Some(v) = v else { return Ok(None) };
    match humantime::parse_duration(v) {
        Ok(d) => Ok(Some(format!("{}s", d.as_secs()))),
        Err(e) => Err(format!(
            "{v:?} is not a duration ({e}); write it like 30m, 1h or 90s"
        )),
    }
}

fn check_node_pools(r: &mut Report<'_>, pools: &[NodePool], subscription: &str) {
    for (i, p) in pools.iter().enumerate() {
        if let Err(e) = drain_timeout(p.node_drain_timeout.as_deref()) {
            r.push(format!("nodePools[{i}].nodeDrainTimeout"), "duration", e);
        }
        if let Err(e) = drain_timeout(p.node_volume_detach_timeout.as_deref()) {
            r.push(
                format!("nodePools[{i}].nodeVolumeDetachTimeout"),
                "duration",
                e,
            );
        }
        let one_of = |r: &mut Report<'_>, field: &str, v: &Option<String>, allowed: &[&str]| {
            if let Some(v) = v
                && !allowed.contains(&v.as_str())
            {
                r.push(
                    format!("nodePools[{i}].{field}"),
                    "enum",
                    format!("{v:?} is not one of {}", allowed.join(", ")),
                );
            }
        };
        one_of(r, "arch", &p.arch, &["amd64", "arm64"]);
        one_of(r, "upgradeType", &p.upgrade_type, &["Replace", "InPlace"]);
        one_of(
            r,
            "encryptionAtHost",
            &p.encryption_at_host,
            &["Enabled", "Disabled"],
        );
        one_of(
            r,
            "osDiskStorageAccountType",
            &p.os_disk_storage_account_type,
            &[
                "Premium_LRS",
                "PremiumV2_LRS",
                "Standard_LRS",
                "StandardSSD_LRS",
            ],
        );
        if let Some(d) = &p.diagnostics {
            let at = format!("nodePools[{i}].diagnostics");
            match (d.storage_account_type.as_str(), &d.storage_account_uri) {
                ("UserManaged", Some(uri)) if uri.starts_with("https://") => {}
                ("UserManaged", _) => r.push(
                    format!("{at}.storageAccountURI"),
                    "required",
                    "UserManaged diagnostics need the storage account's https blob endpoint",
                ),
                ("Managed" | "Disabled", None) => {}
                ("Managed" | "Disabled", Some(_)) => r.push(
                    format!("{at}.storageAccountURI"),
                    "forbidden",
                    "only with storageAccountType UserManaged (HyperShift's API refuses it otherwise)",
                ),
                (other, _) => r.push(
                    format!("{at}.storageAccountType"),
                    "enum",
                    format!("{other:?} is not one of Managed, UserManaged, Disabled"),
                ),
            }
        }
        if let Some(des) = &p.disk_encryption_set_id {
            // HyperShift's API: the set must be in the HostedCluster's subscription
            // (NodePool `osDisk.encryptionSetID`).
            match ArmResourceId::parse_kind(des, ArmKind::DiskEncryptionSet) {
                Err(e) => r.push(format!("nodePools[{i}].diskEncryptionSetId"), "arm-id", e),
                Ok(id) if !id.subscription().eq_ignore_ascii_case(subscription) => r.push(
                    format!("nodePools[{i}].diskEncryptionSetId"),
                    "subscription-mismatch",
                    format!(
                        "is in subscription {} but the cluster's subscription is {subscription}: HyperShift needs the disk encryption set in the cluster's subscription",
                        id.subscription()
                    ),
                ),
                Ok(_) => {}
            }
        }
    }
    if pools.is_empty() {
        r.push(
            "nodePools",
            "required",
            "at least one node pool is required",
        );
    }
    if pools.len() > MAX_NODE_POOLS {
        r.push(
            "nodePools",
            "too-many",
            format!(
                "{} node pools; at most {MAX_NODE_POOLS} (raise replicas instead of adding pools of the same size)",
                pools.len()
            ),
        );
        return;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, p) in pools.iter().enumerate() {
        let at = |field: &str| format!("nodePools[{i}].{field}");
        let name_ok = (1..=15).contains(&p.name.len())
            && p.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !name_ok {
            r.push(
                at("name"),
                "node-pool-name",
                format!(
                    "must be 1–15 lowercase letters or digits (got {:?})",
                    p.name
                ),
            );
        }
        if let Some(first) = seen.get(p.name.as_str()) {
            r.push(
                at("name"),
                "unique",
                format!(
                    "duplicate node pool name {:?} (also nodePools[{first}].name)",
                    p.name
                ),
            );
        } else {
            seen.insert(&p.name, i);
        }
        match (p.replicas, p.auto_scaling) {
            (Some(n), None) if n < 0 => {
                r.push(at("replicas"), "min", format!("must be ≥ 0 (got {n})"));
            }
            (Some(_), Some(_)) => r.push(
                at("autoScaling"),
                "exclusive",
                "set either replicas or autoScaling, not both (HyperShift refuses a NodePool with both: \"Both replicas or autoScaling should not be set\"); remove replicas to let the autoscaler size the pool".to_string(),
            ),
            (None, None) => r.push(
                at("replicas"),
                "required",
                "set replicas (a node count, ≥ 0) or autoScaling: {min, max}".to_string(),
            ),
            (None, Some(a)) => {
                if a.min < 1 {
                    r.push(
                        at("autoScaling.min"),
                        "min",
                        format!("must be ≥ 1 on Azure (got {}): HyperShift supports scale-from-zero on AWS only", a.min),
                    );
                }
                if a.max < a.min {
                    r.push(
                        at("autoScaling.max"),
                        "min",
                        format!("must be ≥ autoScaling.min ({}) (got {})", a.min, a.max),
                    );
                }
            }
            _ => {}
        }
        let vm_ok = !p.vm_size.is_empty()
            && p.vm_size
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !vm_ok {
            r.push(
                at("vmSize"),
                "vm-size",
                format!(
                    "must be an Azure VM size such as Standard_D4s_v5 (got {:?})",
                    p.vm_size
                ),
            );
        }
        if !(30..=4095).contains(&p.os_disk_size_gib) {
            r.push(
                at("osDiskSizeGiB"),
                "range",
                format!("must be between 30 and 4095 (got {})", p.os_disk_size_gib),
            );
        }
        if let Some(zone) = &p.zone
            && !matches!(zone.as_str(), "1" | "2" | "3")
        {
            r.push(
                at("zone"),
                "zone",
                format!("must be \"1\", \"2\" or \"3\" (got {zone:?})"),
            );
        }
    }
}

/// Each pool's boot image: HyperShift's `AzureVMImage` rules (the NodePool CRD's CEL
/// validations), and an explicit image before OpenShift 4.20 — only from 4.20 on does the
/// NodePool controller fill an empty marketplace image from the release payload
/// (openshift/hypershift `hypershift-operator/controllers/nodepool/azure.go`
/// `defaultAzureNodePoolImage`); before, it fails with "no Azure VM image configured".
fn check_node_pool_images(r: &mut Report<'_>, config: &ClusterConfig) {
    // A release too old for anything (reported by `check_release`) needs no image advice.
    let Some(release) = config.release_minor().filter(|r| *r >= (4, 19)) else {
        return;
    };
    let defaulted = release >= (4, 20);
    for (i, p) in config.node_pools.iter().enumerate() {
        let at = |field: &str| format!("nodePools[{i}].{field}");
        let Some(image) = &p.image else {
            if !defaulted {
                r.push(
                    at("image"),
                    "required",
                    format!(
                        "required for release {}.{}: HyperShift fills the RHCOS marketplace image from the release only from 4.20 on; \
                         give {{type: AzureMarketplace, azureMarketplace: {{publisher: azureopenshift, offer: aro4, sku: aro_4{m:02}, version: <x.y.z>}}}} \
                         (Gen1; or sku 4{m:02}-v2 for Gen2) or {{type: ImageID, imageID: <ARM id>}}",
                        release.0,
                        release.1,
                        m = release.1
                    ),
                );
            }
            continue;
        };
        match image.image_type {
            ImageType::ImageId => {
                match &image.image_id {
                    None => r.push(
                        at("image.imageID"),
                        "required",
                        "required with type ImageID (the ARM id of a managed image or gallery image version)",
                    ),
                    Some(id) if id.is_empty() || id.len() > 255 || !id.starts_with('/') => r.push(
                        at("image.imageID"),
                        "arm-id",
                        format!("must be the ARM id of an image, at most 255 characters (got {id:?})"),
                    ),
                    Some(_) => {}
                }
                if image.azure_marketplace.is_some() {
                    r.push(
                        at("image.azureMarketplace"),
                        "forbidden",
                        "only with type AzureMarketplace",
                    );
                }
            }
            ImageType::AzureMarketplace => {
                if image.image_id.is_some() {
                    r.push(at("image.imageID"), "forbidden", "only with type ImageID");
                }
                let m = image.azure_marketplace.clone().unwrap_or_default();
                let parts = [
                    ("publisher", &m.publisher),
                    ("offer", &m.offer),
                    ("sku", &m.sku),
                    ("version", &m.version),
                ];
                let given = parts.iter().filter(|(_, v)| v.is_some()).count();
                if given == 0 && !defaulted {
                    r.push(
                        at("image.azureMarketplace"),
                        "required",
                        format!(
                            "publisher, offer, sku and version are required for release {}.{}: the release default exists from 4.20 on",
                            release.0, release.1
                        ),
                    );
                } else if given != 0 && given != 4 {
                    let missing: Vec<&str> = parts
                        .iter()
                        .filter(|(_, v)| v.is_none())
                        .map(|(k, _)| *k)
                        .collect();
                    r.push(
                        at("image.azureMarketplace"),
                        "all-or-none",
                        format!(
                            "publisher, offer, sku and version must be all set or all omitted (missing: {})",
                            missing.join(", ")
                        ),
                    );
                }
                if let Some(v) = &m.publisher
                    && !is_marketplace_publisher(v)
                {
                    r.push(
                        at("image.azureMarketplace.publisher"),
                        "pattern",
                        format!("must be 3–50 of [a-z0-9-_], starting with a letter or digit (got {v:?})"),
                    );
                }
                if let Some(v) = &m.offer
                    && !(1..=255).contains(&v.len())
                {
                    r.push(
                        at("image.azureMarketplace.offer"),
                        "length",
                        "must be 1–255 characters",
                    );
                }
                if let Some(v) = &m.sku
                    && (v.is_empty()
                        || v.len() > 255
                        || !v.chars().all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                        }))
                {
                    r.push(
                        at("image.azureMarketplace.sku"),
                        "pattern",
                        format!("must be [a-z0-9-_]+ (got {v:?})"),
                    );
                }
                if let Some(v) = &m.version
                    && !is_marketplace_version(v)
                {
                    r.push(
                        at("image.azureMarketplace.version"),
                        "pattern",
                        format!(
                            "must be Major.Minor.Build (decimal numbers) or latest (got {v:?})"
                        ),
                    );
                }
            }
        }
    }
}

fn is_marketplace_publisher(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (3..=50).contains(&s.len())
        && s.chars().next().is_some_and(ok)
        && s.chars().all(|c| ok(c) || c == '-' || c == '_')
}

fn is_marketplace_version(s: &str) -> bool {
    s == "latest"
        || (s.len() <= 32 && {
            let parts: Vec<&str> = s.split('.').collect();
            parts.len() == 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        })
}

/// A canonical (hyphenated, 36-character) UUID, any case.
pub(crate) fn is_uuid(s: &str) -> bool {
    s.len() == 36 && uuid::Uuid::try_parse(s).is_ok()
}

fn check_uuid(s: &str) -> Result<(), String> {
    if is_uuid(s) {
        Ok(())
    } else {
        Err(format!(
            "must be a UUID like 00000000-0000-0000-0000-000000000000 (got {s:?})"
        ))
    }
}

/// Lowercase letters, digits and `-`, not starting or ending with `-`; optionally starting
/// with a letter. Length is checked by callers.
fn is_dns_label(s: &str, letter_first: bool) -> bool {
    let bytes = s.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    let first_ok = if letter_first {
        first.is_ascii_lowercase()
    } else {
        first.is_ascii_lowercase() || first.is_ascii_digit()
    };
    first_ok
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn is_dns_name(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').count() >= 2
        && s.split('.')
            .all(|l| l.len() <= 63 && is_dns_label(l, false))
}

fn check_dns_name(s: &str) -> Result<(), String> {
    if is_dns_name(s) {
        Ok(())
    } else {
        Err(format!(
            "must be a lowercase DNS name of at least two labels, like example.com, without trailing '.' (got {s:?})"
        ))
    }
}

/// Azure resource group names: 1–90 of letters, digits, `-`, `_`, `.`, `(`, `)`, not
/// ending in `.`.
pub(crate) fn is_resource_group_name(s: &str) -> bool {
    let len = s.chars().count();
    (1..=90).contains(&len)
        && !s.ends_with('.')
        && s.chars()
            .all(|c| c.is_alphanumeric() || "-_.()".contains(c))
}

fn check_resource_group(s: &str) -> Result<(), String> {
    if is_resource_group_name(s) {
        Ok(())
    } else {
        Err(format!(
            "must be 1–90 letters, digits, '-', '_', '.', '(' or ')', not ending in '.' (got {s:?})"
        ))
    }
}

fn check_storage_account(s: &str) -> Result<(), String> {
    let ok = (3..=24).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "must be 3–24 lowercase letters or digits, unique across Azure (got {s:?})"
        ))
    }
}

fn check_container(s: &str) -> Result<(), String> {
    let ok = (3..=63).contains(&s.len()) && is_dns_label(s, false) && !s.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "must be 3–63 lowercase letters, digits and single '-', starting and ending with a letter or digit (got {s:?})"
        ))
    }
}

fn check_https_url(s: &str, issuer: bool) -> Result<(), String> {
    let url = url::Url::parse(s).map_err(|e| format!("must be an https URL (got {s:?}: {e})"))?;
    if url.scheme() != "https" {
        return Err(format!("must be an https URL (got {s:?})"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("must name a host (got {s:?})"));
    }
    if issuer {
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("must not have a query or fragment (got {s:?})"));
        }
        if s.ends_with('/') {
            return Err(format!(
                "must not end with '/': it must equal the tokens' `iss` exactly (got {s:?})"
            ));
        }
    }
    Ok(())
}

/// An IPv4 network address with a prefix Azure accepts.
fn parse_cidr(s: &str) -> Result<Ipv4Net, String> {
    let net: Ipv4Net = s
        .parse()
        .map_err(|_| format!("must be an IPv4 CIDR like 10.0.0.0/16 (got {s:?})"))?;
    if net.trunc() != net {
        return Err(format!(
            "{s} has host bits set (did you mean {}?)",
            net.trunc()
        ));
    }
    if !(MIN_PREFIX_LEN..=MAX_PREFIX_LEN).contains(&net.prefix_len()) {
        return Err(format!(
            "prefix /{} is outside /{MIN_PREFIX_LEN}–/{MAX_PREFIX_LEN} (got {s})",
            net.prefix_len()
        ));
    }
    Ok(net)
}

/// A container image reference with a tag or a sha256 digest:
/// `registry[:port]/path[:tag][@sha256:<64 hex>]`.
/// The release must be new enough for what the cluster uses (openshift/hypershift: the
/// `AzureWorkloadIdentities` API first ships in `release-4.19`; the Azure private topology —
/// `topology`/`private`, the internal-LB annotation on the `private-router` Service in
/// `control-plane-operator/controllers/hostedcontrolplane/ingress/router.go` and the
/// AzurePrivateLinkService controllers — in `release-4.22`). On an older release such a
/// cluster would wait forever for a router IP.
fn check_release(r: &mut Report<'_>, config: &ClusterConfig) {
    let digest = config.release_image.contains('@');
    let Some((major, minor)) = config.release_minor() else {
        if let Some(v) = &config.release_version {
            r.push(
                "releaseVersion",
                "release-version",
                format!("must be an OpenShift version like 4.22.0 (got {v:?})"),
            );
        } else if digest {
            r.push(
                "releaseVersion",
                "release-version",
                "required when releaseImage is pinned by digest (@sha256:…), which carries no version: set it to the release's OpenShift version, e.g. 4.22.0",
            );
        } else {
            r.push(
                "releaseImage",
                "release-version",
                "its tag does not start with an OpenShift version (like 4.22.0-multi): use a versioned tag or set releaseVersion",
            );
        }
        return;
    };
    let field = if config.release_version.is_some() {
        "releaseVersion"
    } else {
        "releaseImage"
    };
    let private = !matches!(config.topology, crate::config::Topology::Public);
    let (need, why) = if private {
        (
            (4, 22),
            format!(
                "topology {:?} needs HyperShift's Azure private topology, which ships in OpenShift 4.22",
                config.topology
            ),
        )
    } else {
        (
            (4, 19),
            "the cluster's components authenticate with Azure workload identities (HyperShift's AzureWorkloadIdentities), which ship in OpenShift 4.19".to_string(),
        )
    };
    if (major, minor) < need {
        r.push(
            field,
            "release-too-old",
            format!(
                "release {major}.{minor} is too old: {why}; use a {}.{} or newer release",
                need.0, need.1
            ),
        );
    }
}

fn check_image_ref(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    let bad = || {
        format!(
            "must be an image reference like quay.io/openshift-release-dev/ocp-release:4.22.0-multi or …@sha256:<64 hex> (got {s:?})"
        )
    };
    if s.chars().any(char::is_whitespace) || s.contains("://") {
        return Err(bad());
    }
    let (name_tag, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        let hex_ok = d.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        });
        if !hex_ok {
            return Err(bad());
        }
    }
    let Some(slash) = name_tag.rfind('/') else {
        return Err(bad());
    };
    let (repo, tag) = match name_tag[slash..].find(':') {
        Some(colon) => (
            &name_tag[..slash + colon],
            Some(&name_tag[slash + colon + 1..]),
        ),
        None => (name_tag, None),
    };
    if let Some(tag) = tag {
        let tag_ok = (1..=128).contains(&tag.len())
            && !tag.starts_with(['.', '-'])
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !tag_ok {
            return Err(bad());
        }
    } else if digest.is_none() {
        return Err(format!(
            "must carry a tag or a digest (got {s:?}): a release image is pinned"
        ));
    }
    let mut components = repo.split('/');
    let registry_ok = components.next().is_some_and(|host| {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:".contains(c))
    });
    let path_ok = components.all(|c| {
        !c.is_empty()
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
    });
    if registry_ok && path_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_refs() {
        for ok in [
            "quay.io/openshift-release-dev/ocp-release:4.22.0-multi",
            "registry.example.com:5000/ocp/release:4.18.1",
            "quay.io/openshift-release-dev/ocp-release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_image_ref(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "ocp-release:4.18",
            "quay.io/openshift-release-dev/ocp-release",
            "quay.io/Openshift/ocp:4.18",
            "https://quay.io/x/y:1",
            "quay.io/x/y@sha256:abc",
            "quay.io/x/y:",
            "quay.io/x y:1",
        ] {
            assert!(check_image_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cidrs() {
        assert!(parse_cidr("10.0.0.0/16").is_ok());
        assert_eq!(
            parse_cidr("10.0.0.1/16"),
            Err("10.0.0.1/16 has host bits set (did you mean 10.0.0.0/16?)".into())
        );
        assert!(parse_cidr("10.0.0.0/30").is_err());
        assert!(parse_cidr("10.0.0.0").is_err());
        assert!(parse_cidr("fd00::/64").is_err());
    }

    #[test]
    fn names() {
        assert!(is_resource_group_name("rg-hcp_persist.(1)"));
        assert!(!is_resource_group_name("rg."));
        assert!(!is_resource_group_name("rg/x"));
        assert!(!is_resource_group_name(&"r".repeat(91)));
        assert!(is_dns_name("example.com"));
        assert!(!is_dns_name("example"));
        assert!(!is_dns_name("Example.com"));
        assert!(!is_dns_name("example.com."));
        assert!(check_container("oidc").is_ok());
        assert!(check_container("a--b").is_err());
        assert!(check_storage_account("abc123").is_ok());
        assert!(check_storage_account("ab").is_err());
        assert!(is_uuid("6F9619FF-8B86-D011-B42D-00C04FC964FF"));
        assert!(!is_uuid("6f9619ff8b86d011b42d00c04fc964ff"));
    }

    #[test]
    fn urls() {
        assert!(check_https_url("https://issuer.example.com/oidc", true).is_ok());
        assert!(check_https_url("http://issuer.example.com", true).is_err());
        assert!(check_https_url("https://issuer.example.com/", true).is_err());
        assert!(check_https_url("https://issuer.example.com/?a=b", true).is_err());
        assert!(check_https_url("https://management.example.com/", false).is_ok());
    }
}
