//! Azure clouds: where ARM, Entra and blob storage live.
//!
//! Public Azure, Azure Government and Azure China differ only in host names; a custom
//! cloud (Azure Stack, a private test cloud) names them explicitly. Every URL the
//! activities build comes from here, so nothing else hard-codes `management.azure.com`.

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

    /// Token scope for ARM: `<resource manager>/.default`.
    pub fn arm_scope(&self) -> String {
        format!("{}/.default", self.resource_manager())
    }

    /// The host name of [`Self::resource_manager`], without port (for checking URLs ARM
    /// hands us).
    pub fn resource_manager_host(&self) -> &str {
        let rm = self.resource_manager();
        let rest = rm.split_once("://").map_or(rm, |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or(rest);
        authority.split(':').next().unwrap_or(authority)
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
}
