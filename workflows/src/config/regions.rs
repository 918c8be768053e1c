//! Azure region names accepted for `location`, per cloud.
//!
//! Why a fixed list: a misspelt location (`eastus3`, `East US`) is otherwise only noticed
//! when the first ARM PUT fails, after the run has started and journaled steps. The list is a
//! snapshot of the regions that accept deployments (`az account list-locations` programmatic
//! names, physical regions only); when Azure opens a region, add it here. A custom cloud
//! (Azure Stack, air-gapped clouds) has its own names, so any lowercase alphanumeric name is
//! accepted there.

use super::model::Cloud;

/// Regions of the public Azure cloud (`AzureCloud`).
pub const PUBLIC_REGIONS: &[&str] = &[
    "australiacentral",
    "australiacentral2",
    "australiaeast",
    "australiasoutheast",
    "austriaeast",
    "belgiumcentral",
    "brazilsouth",
    "brazilsoutheast",
    "canadacentral",
    "canadaeast",
    "centralindia",
    "centralus",
    "centraluseuap",
    "chilecentral",
    "denmarkeast",
    "eastasia",
    "eastus",
    "eastus2",
    "eastus2euap",
    "francecentral",
    "francesouth",
    "germanynorth",
    "germanywestcentral",
    "indonesiacentral",
    "israelcentral",
    "italynorth",
    "japaneast",
    "japanwest",
    "jioindiacentral",
    "jioindiawest",
    "koreacentral",
    "koreasouth",
    "malaysiawest",
    "mexicocentral",
    "newzealandnorth",
    "northcentralus",
    "northeurope",
    "norwayeast",
    "norwaywest",
    "polandcentral",
    "qatarcentral",
    "southafricanorth",
    "southafricawest",
    "southcentralus",
    "southeastasia",
    "southindia",
    "spaincentral",
    "swedencentral",
    "swedensouth",
    "switzerlandnorth",
    "switzerlandwest",
    "taiwannorth",
    "taiwannorthwest",
    "uaecentral",
    "uaenorth",
    "uksouth",
    "ukwest",
    "westcentralus",
    "westeurope",
    "westindia",
    "westus",
    "westus2",
    "westus3",
];

/// Regions of Azure Government (`AzureUSGovernment`).
pub const US_GOVERNMENT_REGIONS: &[&str] = &[
    "usdodcentral",
    "usdodeast",
    "usgovarizona",
    "usgovtexas",
    "usgovvirginia",
];

/// Regions of Azure operated by 21Vianet (`AzureChinaCloud`).
pub const CHINA_REGIONS: &[&str] = &[
    "chinaeast",
    "chinaeast2",
    "chinaeast3",
    "chinanorth",
    "chinanorth2",
    "chinanorth3",
];

/// The regions `cloud` accepts; `None` for a custom cloud (any well-formed name).
pub fn regions_for(cloud: &Cloud) -> Option<&'static [&'static str]> {
    match cloud {
        Cloud::Public => Some(PUBLIC_REGIONS),
        Cloud::UsGovernment => Some(US_GOVERNMENT_REGIONS),
        Cloud::China => Some(CHINA_REGIONS),
        Cloud::Custom(_) => None,
    }
}

/// Checks `location` against the cloud's list; the error names the closest known region.
pub(crate) fn check_location(location: &str, cloud: &Cloud) -> Result<(), String> {
    let Some(known) = regions_for(cloud) else {
        let well_formed = !location.is_empty()
            && location
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        return if well_formed {
            Ok(())
        } else {
            Err(format!(
                "must be a region name of lowercase letters and digits (got {location:?})"
            ))
        };
    };
    if known.contains(&location) {
        return Ok(());
    }
    let mut message = format!(
        "unknown location {location:?} for the {} cloud",
        cloud.label()
    );
    if let Some(hint) = suggest(location, known) {
        message.push_str(&format!(" (did you mean {hint:?}?)"));
    } else if let Some(other) = other_cloud_of(location) {
        message.push_str(&format!(
            " ({location:?} is a region of the {other} cloud: set `cloud`)"
        ));
    }
    Err(message)
}

/// The known region closest to `input`: its display form normalised (`East US 2` →
/// `eastus2`), else the nearest name within a small edit distance.
fn suggest(input: &str, known: &[&'static str]) -> Option<&'static str> {
    let normalised: String = input
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect();
    if let Some(exact) = known.iter().find(|k| **k == normalised) {
        return Some(exact);
    }
    known
        .iter()
        .map(|k| (strsim::levenshtein(&normalised, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

fn other_cloud_of(location: &str) -> Option<&'static str> {
    if US_GOVERNMENT_REGIONS.contains(&location) {
        Some("usGovernment")
    } else if CHINA_REGIONS.contains(&location) {
        Some("china")
    } else if PUBLIC_REGIONS.contains(&location) {
        Some("public")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_lowercase_and_disjoint() {
        for list in [PUBLIC_REGIONS, US_GOVERNMENT_REGIONS, CHINA_REGIONS] {
            assert!(
                list.windows(2).all(|w| w[0] < w[1]),
                "{list:?} not sorted/unique"
            );
            assert!(list.iter().all(|r| {
                r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            }));
        }
        assert!(
            !PUBLIC_REGIONS
                .iter()
                .any(|r| US_GOVERNMENT_REGIONS.contains(r))
        );
        assert!(!PUBLIC_REGIONS.iter().any(|r| CHINA_REGIONS.contains(r)));
    }

    #[test]
    fn suggestions() {
        assert_eq!(check_location("eastus", &Cloud::Public), Ok(()));
        assert_eq!(
            check_location("East US 2", &Cloud::Public),
            Err(
                r#"unknown location "East US 2" for the public cloud (did you mean "eastus2"?)"#
                    .into()
            )
        );
        assert_eq!(
            check_location("westeurop", &Cloud::Public),
            Err(
                r#"unknown location "westeurop" for the public cloud (did you mean "westeurope"?)"#
                    .into()
            )
        );
        assert_eq!(
            check_location("usgovvirginia", &Cloud::Public),
            Err(r#"unknown location "usgovvirginia" for the public cloud ("usgovvirginia" is a region of the usGovernment cloud: set `cloud`)"#.into())
        );
        assert_eq!(
            check_location("usgovvirginia", &Cloud::UsGovernment),
            Ok(())
        );
        assert_eq!(check_location("chinanorth3", &Cloud::China), Ok(()));
        assert!(check_location("moon", &Cloud::Public).is_err());
    }
}
