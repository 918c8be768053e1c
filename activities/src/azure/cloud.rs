//! Azure clouds: where ARM, Entra, Microsoft Graph, Key Vault and blob storage live.
//!
//! Public Azure, Azure Government and Azure China differ only in host names; a custom
//! cloud (Azure Stack, a private test cloud) names them explicitly. Every URL the
//! activities build comes from here, so nothing else hard-codes `management.azure.com`.
//!
//! Graph and Key Vault hosts per cloud are Microsoft's national-cloud tables
//! (learn.microsoft.com/graph/deployments: `graph.microsoft.com`, `graph.microsoft.us`,
//! `microsoftgraph.chinacloudapi.cn`; learn.microsoft.com/azure/key-vault/general/about-keys-secrets-certificates:
//! `vault.azure.net`, `vault.usgovcloudapi.net`, `vault.azure.cn`).

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use serde::{Deserialize, Serialize};

/// An Azure cloud.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", rename_all_fields = "kebab-case")]
pub enum Cloud {
    /// Public Azure (`management.azure.com`).
    #[default]
    Public,
    /// Azure Government (`management.usgovcloudapi.net`).
    UsGovernment,
    /// Azure operated by 21Vianet (`management.chinacloudapi.cn`).
    China,
    /// Any other cloud, by its endpoints.
    Custom {
        /// ARM endpoint, e.g. `https://management.example.local` (no trailing slash needed).
        resource_manager: String,
        /// Entra authority, e.g. `https://login.example.local`.
        authority_host: String,
        /// Storage suffix, e.g. `core.example.local` (blob host `{account}.blob.{suffix}`).
        storage_suffix: String,
        /// Microsoft Graph endpoint, e.g. `https://graph.example.local`. Absent in journals
        /// written before the ARO HCP identity model; a custom cloud without it cannot
        /// create Entra applications.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        graph: Option<String>,
        /// Key Vault DNS suffix, e.g. `vault.example.local` (vault host
        /// `{vault}.{suffix}`, token scope `https://{suffix}/.default`). Absent in older
        /// journals; a custom cloud without it cannot reach Key Vault's data plane.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key_vault_suffix: Option<String>,
    },
}

impl Cloud {
    /// ARM endpoint without trailing slash, e.g. `https://management.azure.com`.
    pub fn resource_manager(&self) -> &str {
        match self {
            Cloud::Public => "https://management.azure.com",
            Cloud::UsGovernment => "https://management.usgovcloudapi.net",
            Cloud::China => "https://management.chinacloudapi.cn",
            Cloud::Custom {
                resource_manager, ..
            } => resource_manager.trim_end_matches('/'),
        }
    }

    /// Entra authority host without trailing slash, e.g. `https://login.microsoftonline.com`.
    pub fn authority_host(&self) -> &str {
        match self {
            Cloud::Public => "https://login.microsoftonline.com",
            Cloud::UsGovernment => "https://login.microsoftonline.us",
            Cloud::China => "https://login.chinacloudapi.cn",
            Cloud::Custom { authority_host, .. } => authority_host.trim_end_matches('/'),
        }
    }

    /// Storage endpoint suffix, e.g. `core.windows.net`.
    pub fn storage_suffix(&self) -> &str {
        match self {
            Cloud::Public => "core.windows.net",
            Cloud::UsGovernment => "core.usgovcloudapi.net",
            Cloud::China => "core.chinacloudapi.cn",
            Cloud::Custom { storage_suffix, .. } => storage_suffix.trim_matches('.'),
        }
    }

    /// Blob host of a storage account, e.g. `myaccount.blob.core.windows.net`.
    pub fn blob_host(&self, account: &str) -> String {
        format!("{account}.blob.{}", self.storage_suffix())
    }

    /// Blob service URL of a storage account, e.g. `https://myaccount.blob.core.windows.net`.
    pub fn blob_endpoint(&self, account: &str) -> String {
        format!("https://{}", self.blob_host(account))
    }

    /// Microsoft Graph endpoint without trailing slash, e.g. `https://graph.microsoft.com`;
    /// `None` for a custom cloud that names none.
    pub fn graph(&self) -> Option<&str> {
        match self {
            Cloud::Public => Some("https://graph.microsoft.com"),
            Cloud::UsGovernment => Some("https://graph.microsoft.us"),
            Cloud::China => Some("https://microsoftgraph.chinacloudapi.cn"),
            Cloud::Custom { graph, .. } => graph
                .as_deref()
                .map(|g| g.trim_end_matches('/'))
                .filter(|g| !g.is_empty()),
        }
    }

    /// The host name of [`Self::graph`] (no port), e.g. `graph.microsoft.com`.
    pub fn graph_host(&self) -> Option<&str> {
        self.graph().map(host_of)
    }

    /// Token scope for Microsoft Graph: `<graph>/.default`.
    pub fn graph_scope(&self) -> Option<String> {
        self.graph().map(|g| format!("{g}/.default"))
    }

    /// Key Vault DNS suffix, e.g. `vault.azure.net`; `None` for a custom cloud that names
    /// none.
    pub fn key_vault_suffix(&self) -> Option<&str> {
        match self {
            Cloud::Public => Some("vault.azure.net"),
            Cloud::UsGovernment => Some("vault.usgovcloudapi.net"),
            Cloud::China => Some("vault.azure.cn"),
            Cloud::Custom {
                key_vault_suffix, ..
            } => key_vault_suffix
                .as_deref()
                .map(|s| s.trim_matches('.'))
                .filter(|s| !s.is_empty()),
        }
    }

    /// Data-plane host of a vault, e.g. `myvault.vault.azure.net`.
    pub fn key_vault_host(&self, vault: &str) -> Option<String> {
        self.key_vault_suffix()
            .map(|s| format!("{}.{s}", vault.to_ascii_lowercase()))
    }

    /// Token scope for Key Vault's data plane: `https://<suffix>/.default`, e.g.
    /// `https://vault.azure.net/.default`.
    pub fn key_vault_scope(&self) -> Option<String> {
        self.key_vault_suffix()
            .map(|s| format!("https://{s}/.default"))
    }

    /// Token scope for ARM: `<resource manager>/.default`.
    pub fn arm_scope(&self) -> String {
        format!("{}/.default", self.resource_manager())
    }

    /// The host name of [`Self::resource_manager`], without port (for checking URLs ARM
    /// hands us).
    pub fn resource_manager_host(&self) -> &str {
        host_of(self.resource_manager())
    }

    /// The matching azure_core cloud configuration (used by azure_identity to pick the
    /// authority host).
    pub fn configuration(&self) -> CloudConfiguration {
        match self {
            Cloud::Public => CloudConfiguration::AzurePublic,
            Cloud::UsGovernment => CloudConfiguration::AzureGovernment,
            Cloud::China => CloudConfiguration::AzureChina,
            Cloud::Custom { .. } => {
                let mut custom = CustomConfiguration::default();
                custom.authority_host = self.authority_host().to_string();
                custom.into()
            }
        }
    }
}

/// The host of an `https://host[:port]/path` endpoint.
fn host_of(endpoint: &str) -> &str {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    authority.split(':').next().unwrap_or(authority)
}

#[cfg(test)]
mod tests {
    use super::Cloud;

    #[test]
    fn endpoints_per_cloud() {
        assert_eq!(
            Cloud::Public.arm_scope(),
            "https://management.azure.com/.default"
        );
        assert_eq!(
            Cloud::UsGovernment.blob_host("acct"),
            "acct.blob.core.usgovcloudapi.net"
        );
        assert_eq!(Cloud::China.blob_host("a"), "a.blob.core.chinacloudapi.cn");
        assert_eq!(Cloud::Public.blob_host("a"), "a.blob.core.windows.net");
        let custom = Cloud::Custom {
            resource_manager: "https://arm.local:8443/".into(),
            authority_host: "https://login.local".into(),
            storage_suffix: ".core.local".into(),
            graph: None,
            key_vault_suffix: None,
        };
        assert_eq!(custom.arm_scope(), "https://arm.local:8443/.default");
        assert_eq!(custom.blob_host("x"), "x.blob.core.local");
        assert_eq!(custom.resource_manager_host(), "arm.local");
        assert_eq!(
            Cloud::Public.resource_manager_host(),
            "management.azure.com"
        );
    }

    #[test]
    fn serde_is_kebab_case() {
        assert_eq!(
            serde_json::to_value(Cloud::UsGovernment).ok(),
            Some(serde_json::json!("us-government"))
        );
        let c: Cloud = serde_json::from_value(serde_json::json!({"custom": {
            "resource-manager": "https://a", "authority-host": "https://b", "storage-suffix": "c"}}))
        .unwrap_or_default();
        assert_eq!(c.authority_host(), "https://b");
    }

    #[test]
    fn graph_and_key_vault_per_cloud() {
        assert_eq!(Cloud::Public.graph(), Some("https://graph.microsoft.com"));
        assert_eq!(
            Cloud::Public.graph_scope().as_deref(),
            Some("https://graph.microsoft.com/.default")
        );
        assert_eq!(Cloud::UsGovernment.graph_host(), Some("graph.microsoft.us"));
        assert_eq!(
            Cloud::China.graph_host(),
            Some("microsoftgraph.chinacloudapi.cn")
        );
        assert_eq!(
            Cloud::Public.key_vault_host("MyVault").as_deref(),
            Some("myvault.vault.azure.net")
        );
        assert_eq!(
            Cloud::Public.key_vault_scope().as_deref(),
            Some("https://vault.azure.net/.default")
        );
        assert_eq!(
            Cloud::UsGovernment.key_vault_scope().as_deref(),
            Some("https://vault.usgovcloudapi.net/.default")
        );
        assert_eq!(
            Cloud::China.key_vault_host("v").as_deref(),
            Some("v.vault.azure.cn")
        );
        assert_eq!(
            Cloud::China.key_vault_scope().as_deref(),
            Some("https://vault.azure.cn/.default")
        );
        let custom = Cloud::Custom {
            resource_manager: "https://arm.local".into(),
            authority_host: "https://login.local".into(),
            storage_suffix: "core.local".into(),
            graph: Some("https://graph.local:8443/".into()),
            key_vault_suffix: Some(".vault.local".into()),
        };
        assert_eq!(custom.graph(), Some("https://graph.local:8443"));
        assert_eq!(custom.graph_host(), Some("graph.local"));
        assert_eq!(
            custom.key_vault_host("kv").as_deref(),
            Some("kv.vault.local")
        );
        assert_eq!(
            custom.key_vault_scope().as_deref(),
            Some("https://vault.local/.default")
        );
    }

    #[test]
    fn custom_clouds_of_older_journals_still_parse() {
        // Journaled before Graph and Key Vault: no `graph`, no `key-vault-suffix`.
        let old = serde_json::json!({"custom": {
            "resource-manager": "https://a", "authority-host": "https://b", "storage-suffix": "c"}});
        let c: Cloud = serde_json::from_value(old.clone()).unwrap_or_default();
        assert_eq!(c.resource_manager(), "https://a");
        assert_eq!(c.graph(), None);
        assert_eq!(c.key_vault_scope(), None);
        // …and an unset field is not written, so old binaries read new journals too.
        assert_eq!(serde_json::to_value(&c).ok(), Some(old));
        let new: Cloud = serde_json::from_value(serde_json::json!({"custom": {
            "resource-manager": "https://a", "authority-host": "https://b", "storage-suffix": "c",
            "graph": "https://g", "key-vault-suffix": "vault.x"}}))
        .unwrap_or_default();
        assert_eq!(new.graph(), Some("https://g"));
        assert_eq!(new.key_vault_suffix(), Some("vault.x"));
    }
}
