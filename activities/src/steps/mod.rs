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
pub mod entra;
pub mod env;
pub mod facts;
pub mod hosted_cluster;
pub mod hypershift_link;
pub mod identity;
pub mod in_place;
pub mod key_vault;
pub mod node_pool;
pub mod objects;
pub mod permissions;
pub mod pls_access;
pub mod private_link;
pub mod shared_group;

pub use env::{AzureEnv, Clients, MgmtEnv, Owner, Reach};
pub use facts::{StepFacts, WaitClass};

use hcp_runtime::{Registry, RegistryError};
use std::sync::Arc;

/// Call `$m!` with every step type, once: [`register`] and [`catalog`] read the same list,
/// so a step is registered exactly when its declarations are in the catalog.
macro_rules! every_step {
    ($m:ident) => {
        $m!(
            arm::EnsureResourceGroup,
            arm::DeleteResourceGroup,
            arm::EnsureIdentity,
            arm::DeleteIdentity,
            arm::EnsureNsg,
            arm::DeleteNsg,
            arm::EnsureVnet,
            arm::DeleteVnet,
            arm::EnsureSubnet,
            arm::DeleteSubnet,
            arm::EnsurePublicIp,
            arm::DeletePublicIp,
            arm::EnsureLoadBalancer,
            arm::DeleteLoadBalancer,
            arm::EnsureDnsZone,
            arm::DeleteDnsZone,
            arm::EnsureDnsLink,
            arm::DeleteDnsLink,
            arm::EnsureStorageAccount,
            arm::DeleteStorageAccount,
            arm::EnsureContainer,
            arm::DeleteContainer,
            arm::DeleteFederatedCredential,
            arm::DeleteRoleAssignment,
            arm::DeleteDnsRecord,
            arm::DeletePrivateEndpoint,
            cluster::EnsureIssuerKey,
            cluster::EnsureClusterSecrets,
            cluster::ApplyHostedCluster,
            cluster::WaitCondition,
            cluster::WaitRollout,
            cluster::ApplyNodePool,
            cluster::DeleteObject,
            identity::EnsureFederatedCredentials,
            identity::EnsureRoleAssignment,
            identity::ResolveIdentities,
            key_vault::EnsureKeyVault,
            entra::EnsureApplication,
            entra::EnsureServicePrincipal,
            key_vault::EnsureCertificate,
            entra::BindCertificate,
            key_vault::EnsureCredentialsSecret,
            key_vault::DeleteKeyVault,
            entra::DeleteApplication,
            key_vault::DeleteCertificate,
            key_vault::DeleteSecret,
            aks::ReadAksCluster,
            aks::CallerPrincipal,
            dns::FindPublicZone,
            dns::DeleteDnsScopeRoleAssignment,
            dns::EnsurePublicRecords,
            dns::DeletePublicRecords,
            hypershift_link::WaitHyperShiftPls,
            hypershift_link::WaitHyperShiftEndpoint,
            hypershift_link::ReleaseHyperShiftLink,
            hypershift_link::VerifyHyperShiftLinkGone,
            private_link::EnsureNatSubnet,
            private_link::EnsurePrivateLinkService,
            private_link::DeletePrivateLinkService,
            private_link::EnsurePrivateEndpoint,
            private_link::ReadPrivateEndpoint,
            private_link::EnsureARecords,
            private_link::PublishOidcDocuments,
            node_pool::UpdateNodePool,
            hosted_cluster::UpgradeControlPlane,
            node_pool::UpgradeNodePool,
            hosted_cluster::SetAllowedSubscriptions,
            pls_access::SetPlsVisibility,
            pls_access::PruneConnections,
            hosted_cluster::SetTopology,
            hosted_cluster::SetTopologyPrivate,
            hosted_cluster::RotateClusterSecret,
        )
    };
}

/// Register every cluster action on `r`.
///
/// # Errors
/// A duplicate name (a programming error, caught by a unit test).
pub fn register(r: &mut Registry, c: &Arc<Clients>) -> Result<(), RegistryError> {
    macro_rules! reg {
        ($($t:path),* $(,)?) => { $( r.register($t(c.clone()))?; )* };
    }
    every_step!(reg);
    Ok(())
}

/// What every registered step declares ([`facts::Facts`]), in registration order.
pub fn catalog() -> &'static [StepFacts] {
    static CATALOG: std::sync::LazyLock<Vec<StepFacts>> = std::sync::LazyLock::new(|| {
        macro_rules! facts {
            ($($t:path),* $(,)?) => { vec![$( StepFacts::of::<$t>() ),*] };
        }
        every_step!(facts)
    });
    CATALOG.as_slice()
}

/// The declarations of the step registered as `action`.
pub fn facts_of(action: &str) -> Option<&'static StepFacts> {
    catalog().iter().find(|f| f.name == action)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_step_declares_its_facts_once() {
        let mut r = Registry::new();
        let clients = Clients::new(Reach::Simulator("http://127.0.0.1:9".into()));
        assert!(register(&mut r, &clients).is_ok());
        let names: Vec<&str> = catalog().iter().map(|f| f.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a step is in the catalog twice");
        for n in &names {
            assert!(r.contains(n), "{n} is in the catalog, not registered");
        }
        // Azure steps that write say so; Kubernetes steps make no ARM call.
        let f = |n: &str| facts_of(n).map(|f| f.arm_actions.to_vec());
        assert!(
            f("azure.private-link-service.ensure")
                .is_some_and(|a| a.contains(&"Microsoft.Network/privateLinkServices/write"))
        );
        assert_eq!(f("k8s.hosted-cluster.apply"), Some(vec![]));
        assert_eq!(
            facts_of("k8s.node-pool.apply").map(|f| (f.wait, f.undo_wait)),
            Some((WaitClass::NodePoolReady, WaitClass::KubernetesDeletion))
        );
    }
}
