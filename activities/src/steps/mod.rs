//! The engine actions the cluster workflows are made of.
//!
//! Each action is one resource kind and one operation (`azure.vnet.ensure`,
//! `azure.vnet.delete`, `k8s.hosted-cluster.apply`, ...). Names are persisted in journals:
//! renaming one breaks runs in flight. Every action holds the process's [`Clients`], and its
//! input names the targets (journaled), so a resumed run reaches the same cloud and cluster.
//!
//! Conventions shared by all of them:
//! - outputs carry a `ledger` (see `hcp_runtime::ledger`): what the step created, adopted,
//!   kept or deleted;
//! - ensure = create, or adopt what carries our ownership tags; undo = delete only what this
//!   run created — proven by the run tag for tagged resources, and by the step's own journal
//!   (written before each create) for untagged children and Kubernetes objects
//!   (`arm::ChildrenJournal`, `cluster::ObjectJournal`), never by a name alone;
//!   delete (delete-cluster) = delete only what carries our cluster's tags;
//! - long operations are durable waits, never sleeps.

pub mod aks;
pub mod arm;
pub mod aro_identity;
pub mod cluster;
pub mod dns;
pub mod env;
pub mod hypershift_link;
pub mod identity;
pub mod permissions;
pub mod private_link;
pub mod shared_group;
pub mod update;

pub use env::{AzureEnv, Clients, MgmtEnv, Owner, Reach};

use hcp_runtime::{Registry, RegistryError};
use std::sync::Arc;

/// Register every cluster action on `r`.
///
/// # Errors
/// A duplicate name (a programming error, caught by a unit test).
pub fn register(r: &mut Registry, c: &Arc<Clients>) -> Result<(), RegistryError> {
    use arm::*;
    macro_rules! reg {
        ($($t:ident),* $(,)?) => { $( r.register($t(c.clone()))?; )* };
    }
    reg!(
        EnsureResourceGroup,
        DeleteResourceGroup,
        EnsureIdentity,
        DeleteIdentity,
        EnsureNsg,
        DeleteNsg,
        EnsureVnet,
        DeleteVnet,
        EnsureSubnet,
        DeleteSubnet,
        EnsurePublicIp,
        DeletePublicIp,
        EnsureLoadBalancer,
        DeleteLoadBalancer,
        EnsureDnsZone,
        DeleteDnsZone,
        EnsureDnsLink,
        DeleteDnsLink,
        EnsureStorageAccount,
        DeleteStorageAccount,
        EnsureContainer,
        DeleteContainer,
        DeleteFederatedCredential,
        DeleteRoleAssignment,
        DeleteDnsRecord,
        DeletePrivateEndpoint,
    );
    use cluster::*;
    reg!(
        EnsureIssuerKey,
        EnsureClusterSecrets,
        ApplyHostedCluster,
        WaitCondition,
        WaitRollout,
        ApplyNodePool,
        DeleteObject
    );
    use identity::*;
    reg!(
        EnsureFederatedCredentials,
        EnsureRoleAssignment,
        ResolveIdentities
    );
    use aro_identity::*;
    reg!(
        EnsureKeyVault,
        EnsureApplication,
        EnsureServicePrincipal,
        EnsureCertificate,
        BindCertificate,
        EnsureCredentialsSecret,
        DeleteKeyVault,
        DeleteApplication,
        DeleteCertificate,
        DeleteSecret,
    );
    use aks::*;
    reg!(ReadAksCluster, CallerPrincipal);
    use dns::*;
    reg!(
        FindPublicZone,
        DeleteDnsScopeRoleAssignment,
        EnsurePublicRecords,
        DeletePublicRecords
    );
    use hypershift_link::*;
    reg!(
        WaitHyperShiftPls,
        WaitHyperShiftEndpoint,
        ReleaseHyperShiftLink,
        VerifyHyperShiftLinkGone
    );
    use private_link::*;
    reg!(
        EnsureNatSubnet,
        EnsurePrivateLinkService,
        DeletePrivateLinkService,
        EnsurePrivateEndpoint,
        ReadPrivateEndpoint,
        EnsureARecords,
        PublishOidcDocuments,
    );
    use update::*;
    reg!(
        UpdateNodePool,
        UpgradeControlPlane,
        UpgradeNodePool,
        SetAllowedSubscriptions,
        SetPlsVisibility,
        PruneConnections,
        SetTopology,
        SetTopologyPrivate,
        RotateClusterSecret,
    );
    Ok(())
}
