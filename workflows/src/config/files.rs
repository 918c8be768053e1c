//! Files the cluster file points at: the pull secret, the SSH public key and HyperShift's
//! workload-identities file.
//!
//! Why here: they are checked when the config is loaded (a missing pull secret should fail
//! `hcp-workflow create` before anything is journaled) and read again at use time, so the
//! config never holds a secret. Checks and messages never echo file content.

use super::error::FileError;
use super::validate::is_uuid;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

/// Reads a whole file, mapping "not found" to its own variant.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    hcp_activities::files::read_regular(path, hcp_activities::files::MAX_INPUT_FILE).map_err(
        |source| match source.kind() {
            io::ErrorKind::NotFound => FileError::NotFound {
                path: path.to_path_buf(),
            },
            _ => FileError::Io {
                path: path.to_path_buf(),
                source,
            },
        },
    )
}

/// A pull secret must be a JSON object with an `auths` object (a `.dockerconfigjson`).
pub(crate) fn check_pull_secret(bytes: &[u8]) -> Result<(), String> {
    // serde_json's syntax errors carry a position, not the text, so they are safe to show.
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| format!("pull secret is not valid JSON ({e})"))?;
    match value.get("auths") {
        Some(serde_json::Value::Object(_)) => Ok(()),
        Some(_) => Err("pull secret's `auths` must be a JSON object".into()),
        None => Err(
            "pull secret has no `auths` object (expected a .dockerconfigjson: {\"auths\": {…}})"
                .into(),
        ),
    }
}

/// An SSH public key in OpenSSH format; a private key is refused with its own message.
pub(crate) fn check_ssh_public_key(bytes: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_start();
    if text.starts_with("-----BEGIN") {
        return Err("this is a private key; give the public key (the .pub file)".into());
    }
    let known = ["ssh-rsa ", "ssh-ed25519 ", "ecdsa-sha2-"];
    if known.iter().any(|p| text.starts_with(p)) {
        Ok(())
    } else {
        Err(
            "not an SSH public key (expected a line starting with ssh-rsa, ssh-ed25519 or ecdsa-)"
                .into(),
        )
    }
}

/// The 8 workload identities of a self-managed Azure hosted cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdentityComponent {
    /// Azure Disk CSI driver.
    Disk,
    /// Azure File CSI driver.
    File,
    /// cluster-image-registry-operator.
    ImageRegistry,
    /// cluster-ingress-operator.
    Ingress,
    /// azure-cloud-provider (cloud controller manager).
    CloudProvider,
    /// cluster-api-provider-azure (node pools).
    NodePoolManagement,
    /// cloud-network-config-controller.
    Network,
    /// control-plane-operator (Private Link Service).
    ControlPlaneOperator,
}

impl IdentityComponent {
    /// All components, in DOMAIN §4 order.
    pub const ALL: [IdentityComponent; 8] = [
        IdentityComponent::Disk,
        IdentityComponent::File,
        IdentityComponent::ImageRegistry,
        IdentityComponent::Ingress,
        IdentityComponent::CloudProvider,
        IdentityComponent::NodePoolManagement,
        IdentityComponent::Network,
        IdentityComponent::ControlPlaneOperator,
    ];

    /// Short name used in Azure resource names (`<name>-<component>-<infraID>`).
    pub fn name(self) -> &'static str {
        match self {
            IdentityComponent::Disk => "disk",
            IdentityComponent::File => "file",
            IdentityComponent::ImageRegistry => "image-registry",
            IdentityComponent::Ingress => "ingress",
            IdentityComponent::CloudProvider => "cloud-provider",
            IdentityComponent::NodePoolManagement => "node-pool-mgmt",
            IdentityComponent::Network => "network",
            IdentityComponent::ControlPlaneOperator => "control-plane-operator",
        }
    }

    /// Key in HyperShift's `workloadIdentities` (and in its workload-identities file).
    pub fn json_key(self) -> &'static str {
        match self {
            IdentityComponent::Disk => "disk",
            IdentityComponent::File => "file",
            IdentityComponent::ImageRegistry => "imageRegistry",
            IdentityComponent::Ingress => "ingress",
            IdentityComponent::CloudProvider => "cloudProvider",
            IdentityComponent::NodePoolManagement => "nodePoolManagement",
            IdentityComponent::Network => "network",
            IdentityComponent::ControlPlaneOperator => "controlPlaneOperator",
        }
    }
}

/// One workload identity: the client id of a federated user-assigned managed identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadIdentity {
    /// Client id (UUID).
    #[serde(rename = "clientID")]
    pub client_id: String,
}

/// HyperShift's `AzureWorkloadIdentities`: the shape of `workload-identities.json` and of
/// `HostedCluster.spec.platform.azure.azureAuthenticationConfig.workloadIdentities`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadIdentities {
    /// cluster-image-registry-operator.
    pub image_registry: WorkloadIdentity,
    /// cluster-ingress-operator.
    pub ingress: WorkloadIdentity,
    /// Azure File CSI driver.
    pub file: WorkloadIdentity,
    /// Azure Disk CSI driver.
    pub disk: WorkloadIdentity,
    /// cluster-api-provider-azure.
    pub node_pool_management: WorkloadIdentity,
    /// azure-cloud-provider.
    pub cloud_provider: WorkloadIdentity,
    /// cloud-network-config-controller.
    pub network: WorkloadIdentity,
    /// control-plane-operator.
    pub control_plane_operator: WorkloadIdentity,
}

impl WorkloadIdentities {
    /// The identity of `component`.
    pub fn get(&self, component: IdentityComponent) -> &WorkloadIdentity {
        match component {
            IdentityComponent::Disk => &self.disk,
            IdentityComponent::File => &self.file,
            IdentityComponent::ImageRegistry => &self.image_registry,
            IdentityComponent::Ingress => &self.ingress,
            IdentityComponent::CloudProvider => &self.cloud_provider,
            IdentityComponent::NodePoolManagement => &self.node_pool_management,
            IdentityComponent::Network => &self.network,
            IdentityComponent::ControlPlaneOperator => &self.control_plane_operator,
        }
    }
}

/// Parses a workload-identities file, reporting every problem (missing components, bad
/// client ids). Extra keys are ignored, as HyperShift's Go decoder does.
pub(crate) fn parse_workload_identities(bytes: &[u8]) -> Result<WorkloadIdentities, Vec<String>> {
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| vec![format!("workload identities file is not valid JSON ({e})")])?;
    let Some(object) = value.as_object() else {
        return Err(vec![
            "workload identities file must be a JSON object of component → {\"clientID\": …}"
                .into(),
        ]);
    };
    let mut problems = Vec::new();
    let mut missing = Vec::new();
    for component in IdentityComponent::ALL {
        let key = component.json_key();
        match object.get(key) {
            None => missing.push(key),
            Some(entry) => match entry.get("clientID").and_then(|c| c.as_str()) {
                None => problems.push(format!("component {key} has no string `clientID`")),
                Some(id) if !is_uuid(id) => {
                    problems.push(format!("component {key}: clientID {id:?} is not a UUID"));
                }
                Some(_) => {}
            },
        }
    }
    if !missing.is_empty() {
        problems.insert(
            0,
            format!(
                "workload identities file lacks component{} {} (each needs {{\"clientID\": \"<uuid>\"}})",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ),
        );
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    serde_json::from_value(value).map_err(|e| vec![format!("workload identities file: {e}")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_secret_shapes() {
        assert_eq!(check_pull_secret(br#"{"auths":{}}"#), Ok(()));
        assert!(check_pull_secret(b"auths: {}").is_err());
        assert!(check_pull_secret(br#"{"auths":[]}"#).is_err());
        assert!(check_pull_secret(br#"{"other":{}}"#).is_err());
    }

    #[test]
    fn pull_secret_errors_do_not_echo_content() {
        let secret = br#"{"auths": {"quay.io": {"auth": "c2VjcmV0"}}, oops}"#;
        let Err(message) = check_pull_secret(secret) else {
            panic!("accepted invalid JSON")
        };
        assert!(!message.contains("c2VjcmV0"), "{message}");
    }

    #[test]
    fn ssh_keys() {
        assert_eq!(check_ssh_public_key(b"ssh-ed25519 AAAA x@y\n"), Ok(()));
        assert_eq!(check_ssh_public_key(b"ecdsa-sha2-nistp256 AAAA"), Ok(()));
        assert_eq!(
            check_ssh_public_key(b"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA"),
            Err("this is a private key; give the public key (the .pub file)".into())
        );
        assert!(check_ssh_public_key(b"hello").is_err());
    }

    #[test]
    fn workload_identities_all_problems() {
        let bad = br#"{"disk":{"clientID":"nope"},"file":{},"ingress":{"clientID":"11111111-1111-1111-1111-111111111111"}}"#;
        let Err(problems) = parse_workload_identities(bad) else {
            panic!("accepted")
        };
        assert_eq!(
            problems,
            vec![
                "workload identities file lacks components imageRegistry, cloudProvider, nodePoolManagement, network, controlPlaneOperator (each needs {\"clientID\": \"<uuid>\"})".to_string(),
                "component disk: clientID \"nope\" is not a UUID".to_string(),
                "component file has no string `clientID`".to_string(),
            ]
        );
    }
}
