//! Values derived from the cluster file when it leaves them out: the infra id and the OIDC
//! storage account name, and the issuer URL that follows from them.
//!
//! Why deterministic (except the infra id's random suffix): a retried or resumed step must
//! target the same Azure resources, so everything derived is a pure function of `name` and
//! the recorded `infraID`. The infra id itself is generated once and recorded by the caller
//! with the run, never regenerated.

use super::model::{ClusterConfig, OidcIssuer};
use rand::Rng;
use sha2::{Digest, Sha256};

/// Longest cluster `name`.
pub const MAX_NAME_LEN: usize = 40;

/// Longest `name` + `infraID` (lengths added). The tightest derived name is the Private
/// Endpoint `<name>-<infraID>-pe`, and Azure allows 64 characters for private endpoints:
/// 60 + 2 separators + `pe` = 64. Every other derived name (`<name>-<infraID>` VNet ≤ 64,
/// `<name>-<infraID>-nsg` ≤ 80, `<name>-vnet-<infraID>` RG ≤ 90,
/// `<name>-control-plane-operator-<infraID>` identity ≤ 128) then fits as well.
pub const MAX_NAME_PLUS_INFRA_ID: usize = 60;

/// Length of the random suffix of a generated infra id (HyperShift's).
const INFRA_ID_SUFFIX_LEN: usize = 5;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A fresh infra id for `name`: `<name>-<5 random [a-z0-9]>` like HyperShift, with `name`
/// shortened when needed so that `name` + infra id stays within [`MAX_NAME_PLUS_INFRA_ID`].
pub fn generate_infra_id(name: &str, rng: &mut impl Rng) -> String {
    let budget = MAX_NAME_PLUS_INFRA_ID
        .saturating_sub(name.len())
        .saturating_sub(INFRA_ID_SUFFIX_LEN + 1);
    let prefix: String = name.chars().take(budget).collect();
    let prefix = prefix.trim_end_matches('-');
    let suffix: String = (0..INFRA_ID_SUFFIX_LEN)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect();
    if prefix.is_empty() {
        suffix
    } else {
        format!("{prefix}-{suffix}")
    }
}

/// The default Key Vault of the ARO HCP identity model: `hcp-` + 20 hex of
/// SHA-256(`subscription/persistentResourceGroup`, lowercased) — 24 characters, Key
/// Vault's longest name. One vault per persistent group: the seed's "Shared Resources (Per
/// Management Cluster)" keep every cluster's certificates in one vault, and vault names
/// are global (the hash keeps two teams' `hcp-persistent` apart).
pub fn derive_key_vault(subscription: &str, persistent_resource_group: &str) -> String {
    let digest = Sha256::digest(
        format!("{subscription}/{persistent_resource_group}")
            .to_ascii_lowercase()
            .as_bytes(),
    );
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("hcp-{}", &hex[..20])
}

/// The default OIDC storage account name: up to 10 alphanumerics of `name`, then hex of
/// SHA-256(`name/infraID`) up to 24 characters. Storage account names are global, so the
/// hash (at least 56 bits) keeps two clusters called `dev` apart; SHA-256 rather than std's
/// hasher because the name must not change between builds.
pub fn derive_storage_account(name: &str, infra_id: &str) -> String {
    let prefix: String = name
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        .take(10)
        .collect();
    let digest = Sha256::digest(format!("{name}/{infra_id}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let take = 24 - prefix.len();
    format!("{prefix}{}", &hex[..take])
}

impl ClusterConfig {
    /// The configured `infraID`, or a freshly generated one (see [`generate_infra_id`]).
    /// The caller records the result with the run so that it is generated only once.
    pub fn infra_id_or_generate(&self) -> String {
        match &self.infra_id {
            Some(id) => id.clone(),
            None => generate_infra_id(&self.name, &mut rand::rng()),
        }
    }

    /// The storage account of a created OIDC issuer (configured or derived); `None` when the
    /// issuer exists already.
    pub fn oidc_storage_account(&self, infra_id: &str) -> Option<String> {
        match &self.oidc_issuer {
            OidcIssuer::Create(c) => Some(
                c.storage_account
                    .clone()
                    .unwrap_or_else(|| derive_storage_account(&self.name, infra_id)),
            ),
            OidcIssuer::Existing(_) => None,
        }
    }

    /// The issuer URL: the configured one, or
    /// `https://<account>.blob.<storage suffix>/<container>` for a created issuer.
    pub fn oidc_issuer_url(&self, infra_id: &str) -> String {
        match &self.oidc_issuer {
            OidcIssuer::Existing(e) => e.url.clone(),
            OidcIssuer::Create(c) => {
                let account = c
                    .storage_account
                    .clone()
                    .unwrap_or_else(|| derive_storage_account(&self.name, infra_id));
                format!(
                    "https://{account}.blob.{}/{}",
                    self.cloud.endpoints().storage_suffix,
                    c.container
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_infra_ids_fit() {
        let mut rng = rand::rng();
        for len in 1..=MAX_NAME_LEN {
            let name: String = "a-b".chars().cycle().take(len).collect();
            let id = generate_infra_id(&name, &mut rng);
            assert!(
                name.len() + id.len() <= MAX_NAME_PLUS_INFRA_ID,
                "{name} {id}"
            );
            assert!(
                !id.starts_with('-') && !id.ends_with('-') && !id.contains("--"),
                "{id}"
            );
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            );
        }
        let short = generate_infra_id("demo", &mut rng);
        assert!(short.starts_with("demo-") && short.len() == 10, "{short}");
    }

    #[test]
    fn storage_account_is_stable_and_valid() {
        let a = derive_storage_account("demo", "demo-abcde");
        assert_eq!(a, derive_storage_account("demo", "demo-abcde"));
        assert_ne!(a, derive_storage_account("demo", "demo-vwxyz"));
        assert_eq!(a.len(), 24);
        assert!(a.starts_with("demo"));
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        let long = derive_storage_account("a-very-long-cluster-name", "x");
        assert!(long.starts_with("averylongc") && long.len() == 24, "{long}");
    }
}
