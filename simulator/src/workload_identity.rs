//! The workload-identity chain a real hosted cluster depends on.
//!
//! Every Azure-facing component of a self-managed Azure hosted cluster authenticates with a
//! projected service-account token, exchanged at Entra ID for an access token of the user-
//! assigned identity whose client id the HostedCluster names
//! (`spec.platform.azure.azureAuthenticationConfig.workloadIdentities.<component>.clientID`).
//! That exchange, and every call after it, checks:
//! 1. the identity exists (else `AADSTS700016`);
//! 2. a federated credential of that identity matches the token's issuer
//!    (`spec.issuerURL`), subject (`system:serviceaccount:<ns>:<sa>`) and audience
//!    (`openshift`, the guest token minter's) — else `AADSTS70021`;
//! 3. the issuer's OIDC discovery document and JWKS are publicly readable, name that issuer,
//!    and publish the key the tokens are signed with (the Secret
//!    `spec.serviceAccountSigningKey`, key `key`; kid = base64url(SHA-256(DER of the PKIX
//!    public key)), as kube-apiserver computes it) — else `AADSTS50166` (metadata) or
//!    `AADSTS700027` (signature: key not found);
//! 4. the identity's principal holds the component's role at every scope it writes in
//!    (else ARM's `AuthorizationFailed`, message as ARM prints it).
//!
//! Components, subjects and audience are HyperShift's (`cmd/infra/azure/identities.go`
//! `GetWorkloadIdentityDefinitions`, release-4.22); roles and scopes are
//! `support/azureutil/azureutil.go` `GetServicePrincipalScopes` with the built-in role ids
//! of `support/config`. What a failure breaks follows the component: CAPZ
//! (`nodePoolManagement`) cannot create machines and the cloud provider (`cloudProvider`)
//! cannot initialise nodes, so NodePools never become Ready; ingress, the CSI drivers, the
//! image registry and the cloud network config controller are ClusterOperators, so the
//! release never finishes rolling out. The AADSTS codes for metadata (50166) and signature
//! (700027) failures are Entra's documented codes for those cases; the exact message text
//! of those two is ours.
//!
//! A HostedCluster with no `workloadIdentities` at all (the simulator's own API tests) is not
//! checked.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use der::{Decode, Encode};
use serde_json::Value;
use sha2::Digest;

use crate::arm::{store as arm_store, types};
use crate::state::State;
use crate::util::str_at;

/// The audience HyperShift's federated credentials carry (the guest token minter's).
pub(crate) const AUDIENCE: &str = "openshift";

/// Where a broken component shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Machines or nodes: the NodePool never becomes Ready.
    Nodes,
    /// A ClusterOperator (its name): the release never finishes rolling out.
    Operator(&'static str),
    /// The control-plane operator itself (ARO HCP: its pod never starts without its
    /// credentials mount, `crate::aro_hcp`): the hosted control plane never becomes
    /// available, and no node can join it.
    ControlPlane,
}

/// Where a component writes (the resource groups of `GetServicePrincipalScopes`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    Managed,
    Nsg,
    Vnet,
    DnsZone,
}

/// One Azure-facing component: its identity's federated subjects, role, scopes, and what
/// breaks without it.
pub(crate) struct Component {
    /// Field under `workloadIdentities` (and under `managedIdentities.controlPlane`).
    pub(crate) field: &'static str,
    pub(crate) subjects: &'static [&'static str],
    /// Built-in role definition GUID.
    pub(crate) role: &'static str,
    pub(crate) scopes: &'static [Scope],
    /// An ARM action the component performs (named in `AuthorizationFailed`).
    pub(crate) action: &'static str,
    pub(crate) effect: Effect,
}

const CONTRIBUTOR: &str = "b24988ac-6180-42a0-ab88-20f7382dd24c";

/// The component of `workloadIdentities.<field>` (and `managedIdentities.controlPlane.<field>`,
/// whose roles and scopes are the same `GetServicePrincipalScopes` table).
pub(crate) fn component(field: &str) -> Option<&'static Component> {
    COMPONENTS.iter().find(|c| c.field == field)
}

const COMPONENTS: &[Component] = &[
    Component {
        field: "nodePoolManagement",
        subjects: &["system:serviceaccount:kube-system:capi-provider"],
        role: CONTRIBUTOR,
        scopes: &[Scope::Managed, Scope::Vnet],
        action: "Microsoft.Compute/virtualMachines/write",
        effect: Effect::Nodes,
    },
    Component {
        field: "cloudProvider",
        subjects: &["system:serviceaccount:kube-system:azure-cloud-provider"],
        role: "a1f96423-95ce-4224-ab27-4e3dc72facd4",
        scopes: &[Scope::Managed, Scope::Nsg, Scope::Vnet],
        action: "Microsoft.Network/loadBalancers/write",
        effect: Effect::Nodes,
    },
    Component {
        field: "ingress",
        subjects: &["system:serviceaccount:openshift-ingress-operator:ingress-operator"],
        role: "0336e1d3-7a87-462b-b6db-342b63f7802c",
        scopes: &[Scope::Managed, Scope::Vnet, Scope::DnsZone],
        action: "Microsoft.Network/dnszones/A/write",
        effect: Effect::Operator("ingress"),
    },
    Component {
        field: "disk",
        subjects: &[
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-disk-csi-driver-node-sa",
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-disk-csi-driver-operator",
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-disk-csi-driver-controller-sa",
        ],
        role: "5b7237c5-45e1-49d6-bc18-a1f62f400748",
        scopes: &[Scope::Managed],
        action: "Microsoft.Compute/disks/write",
        effect: Effect::Operator("storage"),
    },
    Component {
        field: "file",
        subjects: &[
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-file-csi-driver-node-sa",
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-file-csi-driver-operator",
            "system:serviceaccount:openshift-cluster-csi-drivers:azure-file-csi-driver-controller-sa",
        ],
        role: "0d7aedc0-15fd-4a67-a412-efad370c947e",
        scopes: &[Scope::Managed, Scope::Nsg, Scope::Vnet],
        action: "Microsoft.Storage/storageAccounts/write",
        effect: Effect::Operator("storage"),
    },
    Component {
        field: "imageRegistry",
        subjects: &[
            "system:serviceaccount:openshift-image-registry:registry",
            "system:serviceaccount:openshift-image-registry:cluster-image-registry-operator",
        ],
        role: "8b32b316-c2f5-4ddf-b05b-83dacd2d08b5",
        scopes: &[Scope::Managed],
        action: "Microsoft.Storage/storageAccounts/write",
        effect: Effect::Operator("image-registry"),
    },
    Component {
        field: "network",
        subjects: &[
            "system:serviceaccount:openshift-cloud-network-config-controller:cloud-network-config-controller",
        ],
        role: "be7a6435-15ae-4171-8f30-4a343eff9e8f",
        scopes: &[Scope::Managed, Scope::Vnet],
        action: "Microsoft.Network/networkInterfaces/write",
        effect: Effect::Operator("network"),
    },
];

/// One broken link of one component's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// `workloadIdentities` field.
    pub component: &'static str,
    /// Where it shows.
    pub effect: Effect,
    /// Azure's error code (`AADSTS70021`, `AuthorizationFailed`, ...).
    pub code: String,
    /// The message, as Entra ID or ARM words it.
    pub message: String,
}

impl Failure {
    /// `code: message`, as Azure SDKs print an error (the AADSTS messages begin with their
    /// code already).
    pub(crate) fn text(&self) -> String {
        if self.message.starts_with(&self.code) {
            self.message.clone()
        } else {
            format!("{}: {}", self.code, self.message)
        }
    }
}

/// Every component of `hc` (a HostedCluster in namespace `ns`) whose chain is broken, in
/// the order of [`COMPONENTS`]; at most one failure (the first broken link) per component.
pub(crate) fn failures(
    sim: &crate::sim::Simulator,
    st: &State,
    ns: &str,
    hc: &Value,
) -> Vec<Failure> {
    if crate::preflight::scenario(sim).unchecked_identities {
        return Vec::new();
    }
    let Some(ids) = hc
        .pointer("/spec/platform/azure/azureAuthenticationConfig/workloadIdentities")
        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
    else {
        return Vec::new();
    };
    let issuer = str_at(hc, "/spec/issuerURL").unwrap_or_default();
    let tenant = str_at(hc, "/spec/platform/azure/tenantID").unwrap_or_default();
    let issuer_problem = issuer_problem(st, ns, hc, issuer);
    COMPONENTS
        .iter()
        .filter_map(|c| {
            let client_id = ids
                .pointer(&format!("/{}/clientID", c.field))
                .and_then(Value::as_str)
                .unwrap_or_default();
            federated_failure(st, hc, c, client_id, issuer, tenant, &issuer_problem)
        })
        .collect()
}

/// The first broken link of component `c`'s federated chain for the user-assigned identity
/// `client_id`: the identity (AADSTS700016), a federated credential for each subject with
/// `issuer` and the audience (AADSTS70021), the issuer's documents (`issuer_problem`,
/// [`issuer_problem`]), and its role at every scope ([`role_failure`]).
pub(crate) fn federated_failure(
    st: &State,
    hc: &Value,
    c: &Component,
    client_id: &str,
    issuer: &str,
    tenant: &str,
    issuer_problem: &Option<(String, String)>,
) -> Option<Failure> {
    let fail = |code: &str, message: String| Failure {
        component: c.field,
        effect: c.effect,
        code: code.to_string(),
        message,
    };
    let Some(identity) = arm_store::of_type(st, types::IDENTITY)
        .into_iter()
        .find(|i| {
            str_at(&i.body, "/properties/clientId")
                .is_some_and(|x| x.eq_ignore_ascii_case(client_id))
        })
    else {
        return Some(fail(
            "AADSTS700016",
            format!(
                "AADSTS700016: Application with identifier '{client_id}' was not found in the directory '{tenant}'. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant."
            ),
        ));
    };
    let fics = arm_store::children(st, &identity.id.to_ascii_lowercase(), types::FIC);
    for subject in c.subjects {
        let matched = fics.iter().any(|f| {
            str_at(&f.body, "/properties/issuer") == Some(issuer)
                && str_at(&f.body, "/properties/subject") == Some(subject)
                && f.body
                    .pointer("/properties/audiences")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(AUDIENCE)))
        });
        if !matched {
            return Some(fail(
                "AADSTS70021",
                format!(
                    "AADSTS70021: No matching federated identity record found for presented assertion. Assertion Issuer: '{issuer}'. Assertion Subject: '{subject}'. Assertion Audience: '{AUDIENCE}'."
                ),
            ));
        }
    }
    if let Some((code, message)) = issuer_problem {
        return Some(fail(code, message.clone()));
    }
    let principal = str_at(&identity.body, "/properties/principalId").unwrap_or_default();
    role_failure(st, hc, c, client_id, principal)
}

/// `AuthorizationFailed` (ARM's message) for the first scope of `c` where `principal` (the
/// object id of client `client_id`) lacks `c`'s role.
pub(crate) fn role_failure(
    st: &State,
    hc: &Value,
    c: &Component,
    client_id: &str,
    principal: &str,
) -> Option<Failure> {
    for scope in c.scopes {
        let Some(scope_id) = scope_id(hc, *scope) else {
            continue;
        };
        if !has_role(st, principal, c.role, &scope_id) {
            return Some(Failure {
                component: c.field,
                effect: c.effect,
                code: "AuthorizationFailed".to_string(),
                message: format!(
                    "The client '{client_id}' with object id '{principal}' does not have authorization to perform action '{}' over scope '{scope_id}' or the scope is invalid. If access was recently granted, please refresh your credentials.",
                    c.action
                ),
            });
        }
    }
    None
}

fn rg_of(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('/').collect();
    match parts.as_slice() {
        ["", s, sub, g, rg, ..]
            if s.eq_ignore_ascii_case("subscriptions")
                && g.eq_ignore_ascii_case("resourceGroups") =>
        {
            Some(format!("/subscriptions/{sub}/resourceGroups/{rg}"))
        }
        _ => None,
    }
}

fn scope_id(hc: &Value, scope: Scope) -> Option<String> {
    let az = |p: &str| str_at(hc, &format!("/spec/platform/azure/{p}"));
    match scope {
        Scope::Managed => Some(format!(
            "/subscriptions/{}/resourceGroups/{}",
            az("subscriptionID")?,
            az("resourceGroup")?
        )),
        Scope::Nsg => rg_of(az("securityGroupID")?),
        Scope::Vnet => rg_of(az("vnetID")?),
        Scope::DnsZone => rg_of(str_at(hc, "/spec/dns/publicZoneID")?),
    }
}

/// A role assignment of `role` to `principal` at `scope` or above it (ARM inheritance).
pub(crate) fn has_role(st: &State, principal: &str, role: &str, scope: &str) -> bool {
    let scope = scope.to_ascii_lowercase();
    // No ordering needed to answer "any": no sort, no collected list.
    st.arm
        .values()
        .filter(|r| r.rtype.eq_ignore_ascii_case(types::ROLE))
        .any(|a| {
            let at =
                a.id.to_ascii_lowercase()
                    .split("/providers/microsoft.authorization/roleassignments/")
                    .next()
                    .unwrap_or_default()
                    .to_string();
            str_at(&a.body, "/properties/principalId")
                .is_some_and(|p| p.eq_ignore_ascii_case(principal))
                && str_at(&a.body, "/properties/roleDefinitionId")
                    .is_some_and(|r| r.to_ascii_lowercase().ends_with(&role.to_ascii_lowercase()))
                && (scope == at || scope.starts_with(&format!("{at}/")))
        })
}

/// What Entra ID finds when it reads the issuer (discovery document, JWKS) and checks the
/// token's signing key. `None` when all is well (or the issuer is not a blob endpoint of
/// this simulator, or the signing key Secret is not there to compare with).
pub(crate) fn issuer_problem(
    st: &State,
    ns: &str,
    hc: &Value,
    issuer: &str,
) -> Option<(String, String)> {
    let (account, container) = blob_location(issuer)?;
    let metadata = |what: &str| {
        Some((
            "AADSTS50166".to_string(),
            format!("AADSTS50166: Request to External OIDC endpoint failed. {what}"),
        ))
    };
    if !container_public(st, &account, &container) {
        return metadata(&format!(
            "{issuer}/.well-known/openid-configuration: 404 (the container is not publicly readable)"
        ));
    }
    let Some(discovery) = read_json(
        st,
        &format!("{account}/{container}/.well-known/openid-configuration"),
    ) else {
        return metadata(&format!("{issuer}/.well-known/openid-configuration: 404"));
    };
    if str_at(&discovery, "/issuer").map(|i| i.trim_end_matches('/'))
        != Some(issuer.trim_end_matches('/'))
    {
        return metadata(&format!(
            "the discovery document names issuer '{}', not '{issuer}'",
            str_at(&discovery, "/issuer").unwrap_or_default()
        ));
    }
    let jwks_uri = str_at(&discovery, "/jwks_uri").unwrap_or_default();
    let jwks = blob_location_path(jwks_uri).and_then(|k| read_json(st, &k));
    let Some(jwks) = jwks else {
        return metadata(&format!("{jwks_uri}: 404"));
    };
    let secret = str_at(hc, "/spec/serviceAccountSigningKey/name")?;
    let pem = crate::kube::store::get(st, "core/secrets", ns, secret)
        .and_then(|s| str_at(s, "/data/key"))
        .and_then(|b| STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())?;
    let kid = kid_of(&pem)?;
    let published = jwks
        .get("keys")
        .and_then(Value::as_array)
        .is_some_and(|keys| {
            keys.iter()
                .any(|k| k.get("kid").and_then(Value::as_str) == Some(&kid))
        });
    if published {
        None
    } else {
        Some((
            "AADSTS700027".to_string(),
            format!(
                "AADSTS700027: Client assertion failed signature validation. (Reason - The key was not found., Thumbprint of key used by client: '{kid}', Please visit the Azure Portal, Graph Explorer or directly use MS Graph to see configured keys for app Id. Found keys: none matching at {jwks_uri})"
            ),
        ))
    }
}

/// `https://<account>.blob.<suffix>/<container>` → (account, container).
fn blob_location(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("https://")?;
    let (host, path) = rest.split_once('/')?;
    let (account, suffix) = host.split_once('.')?;
    if !suffix.starts_with("blob.") {
        return None;
    }
    let container = path.trim_end_matches('/').split('/').next()?;
    Some((account.to_ascii_lowercase(), container.to_string()))
}

/// A blob URL → the simulator's blob key `<account>/<container>/<path>`.
fn blob_location_path(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://")?;
    let (host, path) = rest.split_once('/')?;
    let (account, suffix) = host.split_once('.')?;
    suffix
        .starts_with("blob.")
        .then(|| format!("{}/{path}", account.to_ascii_lowercase()))
}

fn read_json(st: &State, key: &str) -> Option<Value> {
    let b = st.blobs.get(key)?;
    let bytes = STANDARD.decode(&b.data_b64).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Anonymous reads: the account allows public blob access and the container's
/// `publicAccess` is `Blob` or `Container`. An account or container the simulator does not
/// hold (an issuer hosted elsewhere) counts as readable.
fn container_public(st: &State, account: &str, container: &str) -> bool {
    let needle = format!("/storageaccounts/{account}/blobservices/default/containers/{container}");
    let Some(c) = arm_store::of_type(st, types::CONTAINER)
        .into_iter()
        .find(|c| c.id.to_ascii_lowercase().ends_with(&needle))
    else {
        return true;
    };
    let access = str_at(&c.body, "/properties/publicAccess").unwrap_or("None");
    !access.eq_ignore_ascii_case("None")
}

/// kube-apiserver's key id of an RSA signing key: base64url (no padding) of the SHA-256 of
/// the DER SubjectPublicKeyInfo of its public half. The PEM is PKCS#1 (`RSA PRIVATE KEY`,
/// what hcp-workflow writes) or PKCS#8 (`PRIVATE KEY`).
pub(crate) fn kid_of(pem: &str) -> Option<String> {
    let (label, der) = der::pem::decode_vec(pem.trim().as_bytes()).ok()?;
    let pkcs1_der = match label {
        "RSA PRIVATE KEY" => der,
        "PRIVATE KEY" => {
            let info = pkcs8::PrivateKeyInfo::from_der(&der).ok()?;
            info.private_key.to_vec()
        }
        _ => return None,
    };
    let private = pkcs1::RsaPrivateKey::from_der(&pkcs1_der).ok()?;
    let public = private.public_key().to_der().ok()?;
    let spki = spki::SubjectPublicKeyInfoOwned {
        algorithm: spki::AlgorithmIdentifierOwned {
            oid: pkcs1::ALGORITHM_OID,
            parameters: Some(der::asn1::Null.into()),
        },
        subject_public_key: der::asn1::BitString::from_bytes(&public).ok()?,
    };
    let spki_der = spki.to_der().ok()?;
    Some(URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&spki_der)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_urls_map_to_blob_keys() {
        assert_eq!(
            blob_location("https://Acct1.blob.core.windows.net/oidc"),
            Some(("acct1".into(), "oidc".into()))
        );
        assert_eq!(
            blob_location_path("https://acct1.blob.core.windows.net/oidc/openid/v1/jwks")
                .as_deref(),
            Some("acct1/oidc/openid/v1/jwks")
        );
        assert_eq!(blob_location("https://issuer.example.com/x"), None);
    }
}
