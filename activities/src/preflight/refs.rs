//! Checks of what the cluster file refers to: an existing OIDC issuer, a bring-your-own
//! network, bring-your-own identities.

use super::{ByoNetwork, Check, CheckResult, Inputs, Workflow, short};
use crate::azure::models::{API_MSI, API_NETWORK};
use crate::steps::Clients;
use serde_json::Value;
use std::sync::Arc;

/// The reference checks that apply.
pub(crate) fn checks(clients: &Arc<Clients>, inputs: &Arc<Inputs>) -> Vec<Check> {
    let mut out = Vec::new();
    if inputs.workflow != Workflow::Create {
        return out;
    }
    if let Some(e) = inputs.oidc_existing.clone() {
        let c = clients.clone();
        out.push(Check::new(
            "oidc.existing",
            e.issuer_url.clone(),
            async move { oidc(&c, &e).await },
        ));
    }
    if let Some(n) = inputs.byo_network.clone() {
        let (c, i) = (clients.clone(), inputs.clone());
        out.push(Check::new(
            "network.existing",
            n.vnet_id.clone(),
            async move { network(&c, &i, &n).await },
        ));
    }
    if inputs.byo_identities.is_some() {
        let (c, i) = (clients.clone(), inputs.clone());
        out.push(Check::new(
            "identities.existing",
            format!(
                "/subscriptions/{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities",
                inputs.subscription
            ),
            async move { identities(&c, &i).await },
        ));
    }
    out
}

/// The `k8s.issuer-key.ensure` step's own check (`steps::cluster::existing_issuer_key`):
/// the key file parses, `GET` of the discovery document's `jwks_uri` (else
/// `<issuer>/openid/v1/jwks`) answers over https and lists the
/// key's kid; plus `GET <issuer>/.well-known/openid-configuration` names the issuer.
async fn oidc(clients: &Clients, e: &crate::steps::cluster::ExistingIssuerKey) -> Vec<CheckResult> {
    let mut rows = Vec::new();
    let base = e.issuer_url.trim_end_matches('/');
    let disc_url = format!("{base}/.well-known/openid-configuration");
    match crate::azure::storage::get_public(&e.azure.cloud, &clients.transport(), &disc_url).await {
        Ok(Some(b)) => {
            let issuer = serde_json::from_slice::<Value>(&b)
                .ok()
                .and_then(|v| v.get("issuer").and_then(Value::as_str).map(str::to_string));
            match issuer {
                Some(i) if i.trim_end_matches('/') == base => rows.push(CheckResult::pass(
                    "oidc.existing",
                    disc_url,
                    "discovery document names this issuer",
                )),
                other => rows.push(CheckResult::fail(
                    "oidc.existing",
                    disc_url,
                    format!("discovery document's issuer is {other:?}, not {base}"),
                    "fix oidcIssuer.existing.url, or republish the issuer's discovery document",
                )),
            }
        }
        Ok(None) => rows.push(CheckResult::fail(
            "oidc.existing",
            disc_url,
            "404: no discovery document",
            "publish it (ccoctl azure create-oidc-issuer), or fix oidcIssuer.existing.url",
        )),
        Err(err) => rows.push(CheckResult::fail(
            "oidc.existing",
            disc_url,
            format!("not reachable: {}", short(&err)),
            "the issuer must be reachable over https from here and from Azure",
        )),
    }
    let jwks = crate::steps::cluster::jwks_url(clients, &e.azure.cloud, &e.issuer_url).await;
    match crate::steps::cluster::existing_issuer_key(clients, e).await {
        Ok(k) => rows.push(CheckResult::pass(
            "oidc.existing",
            jwks,
            format!("the signing key's kid {} is published", k.kid()),
        )),
        Err(err) => rows.push(CheckResult::fail(
            "oidc.existing",
            jwks,
            // The step's own message (bounded, names the kid and what was found).
            err.message.clone(),
            "give the issuer's own signing key in oidcIssuer.existing.signingKey, or publish this key's JWKS",
        )),
    }
    rows
}

/// `GET` (Network 2023-11-01) of the VNet, the subnet and the NSG; the subnet must be a
/// child of the VNet.
async fn network(clients: &Clients, i: &Inputs, n: &ByoNetwork) -> Vec<CheckResult> {
    let arm = match clients.arm(&i.azure).await {
        Ok(a) => a,
        Err(e) => {
            return vec![CheckResult::fail(
                "network.existing",
                &n.vnet_id,
                format!("{}{}", super::azure::NO_CLIENT, short(&e.message)),
                super::azure::NO_CLIENT_FIX,
            )];
        }
    };
    let (v, s, g) = futures::join!(
        arm.get_value(&n.vnet_id, API_NETWORK),
        arm.get_value(&n.subnet_id, API_NETWORK),
        arm.get_value(&n.nsg_id, API_NETWORK)
    );
    let mut rows = Vec::new();
    if let Ok(Some(vnet)) = &v {
        rows.extend(custom_dns(&n.vnet_id, vnet));
    }
    for (what, id, r) in [
        ("VNet", &n.vnet_id, v),
        ("subnet", &n.subnet_id, s),
        ("NSG", &n.nsg_id, g),
    ] {
        rows.push(match r {
            Ok(Some(_)) => CheckResult::pass("network.existing", id, format!("{what} exists")),
            Ok(None) => CheckResult::fail(
                "network.existing",
                id,
                format!("the {what} does not exist"),
                format!(
                    "create it or fix network.existing.{}Id",
                    match what {
                        "VNet" => "vnet",
                        "subnet" => "subnet",
                        _ => "nsg",
                    }
                ),
            ),
            Err(e) => CheckResult::fail("network.existing", id, short(&e), "grant Reader on it"),
        });
    }
    let prefix = format!("{}/subnets/", n.vnet_id.trim_end_matches('/')).to_ascii_lowercase();
    if !n.subnet_id.to_ascii_lowercase().starts_with(&prefix) {
        rows.push(CheckResult::fail(
            "network.existing",
            &n.subnet_id,
            format!("the subnet is not in VNet {}", n.vnet_id),
            "set network.existing.subnetId to a subnet of network.existing.vnetId",
        ));
    }
    rows
}

/// Azure's DNS resolver, the only one that answers for private DNS zones linked to a VNet.
const AZURE_DNS: &str = "168.63.129.16";

/// A bring-your-own VNet with custom DNS servers (`dhcpOptions.dnsServers`)
/// resolves the cluster's private zones (the infra zone, and with private link `api` and
/// `*.apps`) only if those servers forward to Azure DNS, which preflight cannot see: warn,
/// naming the VNet and its servers.
fn custom_dns(vnet_id: &str, vnet: &Value) -> Option<CheckResult> {
    let servers: Vec<&str> = vnet
        .pointer("/properties/dhcpOptions/dnsServers")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if servers.is_empty() || servers.contains(&AZURE_DNS) {
        return None;
    }
    Some(CheckResult::warn(
        "network.existing-dns",
        vnet_id,
        format!(
            "the VNet uses custom DNS servers ({}): the nodes resolve the cluster's private DNS zones (the infra zone; with private link also api and *.apps) only if these servers forward those zones to Azure DNS {AZURE_DNS}, or no node joins",
            servers.join(", ")
        ),
        Some(format!(
            "make the servers forward the cluster's zones (or everything) to {AZURE_DNS}, or add {AZURE_DNS} to the VNet's DNS servers"
        )),
    ))
}

/// `GET /subscriptions/{s}/providers/Microsoft.ManagedIdentity/userAssignedIdentities`
/// (2024-11-30), each client id matched to `properties.clientId` — the resolution the
/// `azure.identities.resolve` step makes.
async fn identities(clients: &Clients, i: &Inputs) -> Vec<CheckResult> {
    let path = format!(
        "/subscriptions/{}/providers/Microsoft.ManagedIdentity/userAssignedIdentities",
        i.subscription
    );
    let arm = match clients.arm(&i.azure).await {
        Ok(a) => a,
        Err(e) => {
            return vec![CheckResult::fail(
                "identities.existing",
                &path,
                format!("{}{}", super::azure::NO_CLIENT, short(&e.message)),
                super::azure::NO_CLIENT_FIX,
            )];
        }
    };
    let listed = match arm.list_values(&path, API_MSI).await {
        Ok(l) => l,
        Err(e) => {
            return vec![CheckResult::fail(
                "identities.existing",
                &path,
                short(&e),
                "grant Reader on the subscription",
            )];
        }
    };
    let mut rows = Vec::new();
    for (component, client_id) in i.byo_identities.iter().flatten() {
        match crate::steps::identity::find_by_client_id(&listed, client_id) {
            Some(r) => {
                rows.push(CheckResult::pass(
                    "identities.existing",
                    r.id.clone(),
                    format!("{component}: client id {client_id} resolves"),
                ));
                let subjects = i.byo_subjects.get(component).cloned().unwrap_or_default();
                rows.push(federation(&arm, &i.issuer_url, component, &r.id, &subjects).await);
            }
            None => rows.push(CheckResult::fail(
                "identities.existing",
                format!("{path} [clientId {client_id}]"),
                format!("{component}: no user-assigned identity with client id {client_id} in subscription {}", i.subscription),
                "fix the client id in the workload-identities file, or create the identity in that subscription",
            )),
        }
    }
    rows
}

/// `GET {identity}/federatedIdentityCredentials`: a bring-your-own identity is the
/// owner's, and hcp-workflow gives it no federated credential, so each of the component's
/// service accounts needs one of the owner's for this cluster's issuer (audience
/// `openshift`). Without it the component never gets a token (Entra's `AADSTS70021`): the
/// guest's machines are never created and the run would wait out its budgets for a token
/// that cannot come.
async fn federation(
    arm: &crate::azure::ArmClient,
    issuer: &str,
    component: &str,
    identity: &str,
    subjects: &[String],
) -> CheckResult {
    let path = format!("{identity}/federatedIdentityCredentials");
    let listed = match arm.list_values(&path, API_MSI).await {
        Ok(l) => l,
        Err(e) => {
            return CheckResult::fail(
                "identities.federation",
                &path,
                short(&e),
                "grant Reader on the identity",
            );
        }
    };
    let issuer = issuer.trim_end_matches('/');
    let covers = |subject: &str| {
        listed.iter().any(|f| {
            let s = |p: &str| f.pointer(p).and_then(Value::as_str).unwrap_or_default();
            s("/properties/issuer").trim_end_matches('/') == issuer
                && s("/properties/subject") == subject
                && f.pointer("/properties/audiences")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("openshift")))
        })
    };
    let missing: Vec<&String> = subjects.iter().filter(|s| !covers(s)).collect();
    if missing.is_empty() {
        return CheckResult::pass(
            "identities.federation",
            identity,
            format!(
                "{component}: federated credentials for issuer {issuer} cover {} service account(s)",
                subjects.len()
            ),
        );
    }
    let (rg, name) = (
        identity.split('/').nth(4).unwrap_or_default(),
        identity.rsplit('/').next().unwrap_or_default(),
    );
    let fixes: Vec<String> = missing
        .iter()
        .enumerate()
        .map(|(n, subject)| {
            format!(
                "az identity federated-credential create --resource-group {rg} --identity-name {name} --name {name}-{n} --issuer {issuer} --subject {subject} --audiences openshift"
            )
        })
        .collect();
    CheckResult::fail(
        "identities.federation",
        identity,
        format!(
            "{component}: no federated credential for issuer {issuer} with subject {} (audience openshift): the component could never get a token (AADSTS70021)",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        fixes.join(" && "),
    )
}
