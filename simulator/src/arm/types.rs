//! The ARM resource types the simulator serves, with their api-versions and LRO styles.
//!
//! The first api-version of each type is the one DOMAIN.md §2 pins; the others are the
//! versions Azure serves for the provider (see the lists below for where they come from;
//! anything not listed answers 400 like ARM does for an unknown version).

/// How a PUT answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutMode {
    /// 200/201 with the final body.
    Sync,
    /// 200/201 with body (`provisioningState` not terminal) + `Azure-AsyncOperation` —
    /// Microsoft.Network.
    AsyncBody,
    /// Create: 202 without body + `Location` (+ `Retry-After`), no `Azure-AsyncOperation`;
    /// update of an existing resource: synchronous 200 — Microsoft.Storage accounts.
    AcceptedLocation,
    /// 202 without body + `Azure-AsyncOperation` + `Location` — Private DNS zones and links.
    AcceptedAsync,
}

/// How a DELETE answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DelMode {
    /// 200 (or 204 when missing).
    Sync,
    /// 202 + `Azure-AsyncOperation` + `Location`.
    Async,
    /// 202 + `Location` only — resource groups.
    AsyncLocation,
}

/// Static description of one resource type.
#[derive(Debug)]
pub(crate) struct TypeSpec {
    /// Canonical type (`Microsoft.Network/virtualNetworks/subnets`).
    pub rtype: &'static str,
    pub api_versions: &'static [&'static str],
    pub put: PutMode,
    pub delete: DelMode,
    /// Status of DELETE on a missing resource (204 for most types, 404 for groups).
    pub missing_delete: u16,
    /// Whether the body has `properties.provisioningState`.
    pub has_prov: bool,
    /// Whether PUT requires a `location`.
    pub tracked: bool,
    /// `etag` rendering.
    pub etag: bool,
    /// POST actions on a resource of this type.
    pub actions: &'static [&'static str],
}

// The accepted api-versions of each provider: the first is the one DOMAIN.md §2 pins; the
// rest are the stable (and the listed preview) api-version folders of the provider in
// Azure/azure-rest-api-specs (`specification/{service}/resource-manager/{namespace}/…/stable/{version}/`,
// read 2025 with the repository index: e.g. `…/Microsoft.Network/Network/stable/2026-03-01/`
// and `…/stable/2025-05-01/privateLinkService.json`), including the defaults of the
// current Python SDKs (tests/official/requirements.txt): azure-mgmt-network 33.1.0
// 2026-03-01, azure-mgmt-resource 26.0.0 2025-04-01, azure-mgmt-storage 25.3.0
// 2026-09-01, azure-mgmt-msi 7.1.0 2024-11-30, azure-mgmt-privatedns 2.0.0 2024-06-01,
// azure-mgmt-authorization 4.0.0 2022-04-01, azure-mgmt-dns 9.0.0 2018-05-01.
const NET: &[&str] = &[
    "2023-11-01",
    "2019-02-01",
    "2019-04-01",
    "2019-06-01",
    "2019-07-01",
    "2019-08-01",
    "2019-09-01",
    "2019-11-01",
    "2019-12-01",
    "2020-03-01",
    "2020-04-01",
    "2020-05-01",
    "2020-06-01",
    "2020-07-01",
    "2020-08-01",
    "2020-11-01",
    "2021-02-01",
    "2021-03-01",
    "2021-05-01",
    "2021-08-01",
    "2022-01-01",
    "2022-05-01",
    "2022-07-01",
    "2022-09-01",
    "2022-11-01",
    "2023-02-01",
    "2023-04-01",
    "2023-05-01",
    "2023-06-01",
    "2023-09-01",
    "2024-01-01",
    "2024-03-01",
    "2024-05-01",
    "2024-07-01",
    "2024-10-01",
    "2025-01-01",
    "2025-03-01",
    "2025-05-01",
    "2025-07-01",
    "2026-03-01",
];
/// Private DNS (`specification/privatedns/resource-manager/Microsoft.Network/stable/`).
const DNS: &[&str] = &["2024-06-01", "2020-06-01", "2020-01-01", "2018-09-01"];
/// Public Azure DNS (`Microsoft.Network/dnszones`): 2018-05-01 is the stable swagger
/// (`specification/dns/resource-manager/Microsoft.Network/stable/2018-05-01/dns.json`) and
/// what HyperShift's `armdns` v1.2.0 and azure-mgmt-dns 9.0.0 send.
const PUBLIC_DNS: &[&str] = &[
    "2018-05-01",
    "2023-07-01-preview",
    "2018-03-01-preview",
    "2017-10-01",
    "2017-09-01",
    "2016-04-01",
];
const MSI: &[&str] = &[
    "2024-11-30",
    "2023-01-31",
    "2023-07-31-preview",
    "2022-01-31-preview",
    "2021-09-30-preview",
    "2018-11-30",
    "2015-08-31-preview",
];
const AUTHZ: &[&str] = &[
    "2022-04-01",
    "2020-10-01-preview",
    "2020-08-01-preview",
    "2020-04-01-preview",
    "2018-09-01-preview",
    "2018-01-01-preview",
    "2015-07-01",
];
const STORAGE: &[&str] = &[
    "2024-01-01",
    "2019-06-01",
    "2020-08-01-preview",
    "2021-01-01",
    "2021-02-01",
    "2021-04-01",
    "2021-06-01",
    "2021-08-01",
    "2021-09-01",
    "2022-05-01",
    "2022-09-01",
    "2023-01-01",
    "2023-04-01",
    "2023-05-01",
    "2025-01-01",
    "2025-06-01",
    "2026-09-01",
];
/// Key Vault (`specification/keyvault/resource-manager/Microsoft.KeyVault/stable/` and the
/// previews azure-mgmt-keyvault ships; `…/KeyVault/stable/2026-02-01/` and
/// `…/KeyVault/stable/2026-05-15/`, azure-mgmt-keyvault 14.1.0's default).
const KEYVAULT: &[&str] = &[
    "2023-07-01",
    "2024-11-01",
    "2026-02-01",
    "2026-05-15",
    "2024-12-01-preview",
    "2024-04-01-preview",
    "2023-08-01-preview",
    "2023-02-01",
    "2022-11-01",
    "2022-07-01",
    "2022-02-01-preview",
    "2021-11-01-preview",
    "2021-10-01",
    "2021-06-01-preview",
    "2021-04-01-preview",
    "2020-04-01-preview",
    "2019-09-01",
    "2018-02-14",
    "2016-10-01",
    "2015-06-01",
];
const RES: &[&str] = &[
    "2021-04-01",
    "2019-10-01",
    "2020-06-01",
    "2020-10-01",
    "2021-01-01",
    "2022-09-01",
    "2023-07-01",
    "2024-03-01",
    "2024-07-01",
    "2024-11-01",
    "2025-03-01",
    "2025-04-01",
];

const fn spec(
    rtype: &'static str,
    api_versions: &'static [&'static str],
    put: PutMode,
    delete: DelMode,
    has_prov: bool,
    tracked: bool,
    etag: bool,
) -> TypeSpec {
    TypeSpec {
        rtype,
        api_versions,
        put,
        delete,
        missing_delete: 204,
        has_prov,
        tracked,
        etag,
        actions: &[],
    }
}

pub(crate) const RG: &str = "Microsoft.Resources/resourceGroups";
pub(crate) const IDENTITY: &str = "Microsoft.ManagedIdentity/userAssignedIdentities";
pub(crate) const FIC: &str =
    "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials";
pub(crate) const ROLE: &str = "Microsoft.Authorization/roleAssignments";
pub(crate) const STORAGE_ACCOUNT: &str = "Microsoft.Storage/storageAccounts";
pub(crate) const CONTAINER: &str = "Microsoft.Storage/storageAccounts/blobServices/containers";
pub(crate) const NSG: &str = "Microsoft.Network/networkSecurityGroups";
pub(crate) const VNET: &str = "Microsoft.Network/virtualNetworks";
pub(crate) const SUBNET: &str = "Microsoft.Network/virtualNetworks/subnets";
pub(crate) const PIP: &str = "Microsoft.Network/publicIPAddresses";
pub(crate) const LB: &str = "Microsoft.Network/loadBalancers";
pub(crate) const PLS: &str = "Microsoft.Network/privateLinkServices";
pub(crate) const PEC: &str = "Microsoft.Network/privateLinkServices/privateEndpointConnections";
pub(crate) const PE: &str = "Microsoft.Network/privateEndpoints";
pub(crate) const NIC: &str = "Microsoft.Network/networkInterfaces";
pub(crate) const ZONE: &str = "Microsoft.Network/privateDnsZones";
pub(crate) const LINK: &str = "Microsoft.Network/privateDnsZones/virtualNetworkLinks";
pub(crate) const AREC: &str = "Microsoft.Network/privateDnsZones/A";
/// A public DNS zone (its name is the domain, e.g. `example.com`).
pub(crate) const PUBLIC_ZONE: &str = "Microsoft.Network/dnszones";
/// An A record set of a public DNS zone (`properties.ARecords`, `properties.TTL`).
pub(crate) const PUBLIC_AREC: &str = "Microsoft.Network/dnszones/A";
/// A key vault (soft-deleted on DELETE; data plane in `crate::keyvault`).
pub(crate) const VAULT: &str = "Microsoft.KeyVault/vaults";
/// An AKS cluster: the management cluster of `--management-platform aks` (`crate::aks`),
/// seeded and read-only (GET and list; writes are refused there).
pub(crate) const MANAGED_CLUSTER: &str = "Microsoft.ContainerService/managedClusters";

pub(crate) static TYPES: &[TypeSpec] = &[
    TypeSpec {
        missing_delete: 404,
        ..spec(
            RG,
            RES,
            PutMode::Sync,
            DelMode::AsyncLocation,
            true,
            true,
            false,
        )
    },
    spec(
        IDENTITY,
        MSI,
        PutMode::Sync,
        DelMode::Sync,
        false,
        true,
        false,
    ),
    spec(FIC, MSI, PutMode::Sync, DelMode::Sync, false, false, false),
    spec(
        ROLE,
        AUTHZ,
        PutMode::Sync,
        DelMode::Sync,
        false,
        false,
        false,
    ),
    TypeSpec {
        actions: &["listKeys"],
        ..spec(
            STORAGE_ACCOUNT,
            STORAGE,
            PutMode::AcceptedLocation,
            DelMode::Sync,
            true,
            true,
            false,
        )
    },
    // `blobServices/default` is a path segment only: it is never stored, and existence
    // checks skip to the account (`store::real_parent_key`).
    spec(
        "Microsoft.Storage/storageAccounts/blobServices",
        STORAGE,
        PutMode::Sync,
        DelMode::Sync,
        false,
        false,
        false,
    ),
    spec(
        CONTAINER,
        STORAGE,
        PutMode::Sync,
        DelMode::Sync,
        false,
        false,
        true,
    ),
    spec(
        NSG,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(
        VNET,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(
        SUBNET,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        false,
        true,
    ),
    spec(
        PIP,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(
        LB,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(
        PLS,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(PEC, NET, PutMode::Sync, DelMode::Async, true, false, true),
    spec(
        PE,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(
        NIC,
        NET,
        PutMode::AsyncBody,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(
        ZONE,
        DNS,
        PutMode::AcceptedAsync,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(
        LINK,
        DNS,
        PutMode::AcceptedAsync,
        DelMode::Async,
        true,
        true,
        true,
    ),
    spec(AREC, DNS, PutMode::Sync, DelMode::Sync, false, false, true),
    // Public zones: PUT answers 200/201 with the zone; DELETE is long-running.
    spec(
        PUBLIC_ZONE,
        PUBLIC_DNS,
        PutMode::Sync,
        DelMode::Async,
        false,
        true,
        true,
    ),
    spec(
        PUBLIC_AREC,
        PUBLIC_DNS,
        PutMode::Sync,
        DelMode::Sync,
        true,
        false,
        true,
    ),
    // `Vaults_CreateOrUpdate` answers 200/201 with the vault (`provisioningState`
    // `Succeeded`); DELETE answers 200 and soft-deletes it (`crate::keyvault`).
    spec(
        VAULT,
        KEYVAULT,
        PutMode::Sync,
        DelMode::Sync,
        true,
        true,
        false,
    ),
    // AKS (`specification/containerservice/resource-manager/Microsoft.ContainerService/aks/stable/`,
    // newest first): the simulator seeds the management cluster; PUT/PATCH/DELETE are refused
    // (`crate::aks::refuse_write`), so the modes below are never used.
    spec(
        MANAGED_CLUSTER,
        &[
            "2025-08-01",
            "2025-07-01",
            "2025-01-01",
            "2024-10-01",
            "2024-09-01",
        ],
        PutMode::AcceptedAsync,
        DelMode::Async,
        true,
        true,
        false,
    ),
];

/// Looks a type up by its case-insensitive full name.
pub(crate) fn lookup(rtype: &str) -> Option<&'static TypeSpec> {
    TYPES.iter().find(|t| t.rtype.eq_ignore_ascii_case(rtype))
}

/// Whether `v` is an api-version some type of this resource provider accepts (used for
/// operation-status URLs, which belong to the provider rather than a type).
pub(crate) fn provider_knows_version(namespace: &str, v: &str) -> bool {
    TYPES
        .iter()
        .filter(|t| {
            t.rtype
                .split('/')
                .next()
                .is_some_and(|ns| ns.eq_ignore_ascii_case(namespace))
        })
        .any(|t| t.api_versions.contains(&v))
}
