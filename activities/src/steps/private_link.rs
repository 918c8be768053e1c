//! Private link: the NAT subnet in the management VNet, the Private Link Service in front
//! of the control plane's internal load balancer, the Private Endpoint in the guest VNet
//! and its DNS records; plus the OIDC documents (they also need an earlier output).
//!
//! # Guarantees
//! The PLS compensation (and delete-cluster's PLS delete) always rejects, then removes,
//! every private endpoint connection — ours and anyone else's — before deleting the PLS,
//! and keeps retrying while Azure refuses
//! (`PrivateLinkServiceWithPrivateEndpointConnectionsCannotBeDeleted`).

use super::arm::{
    DeleteOutput, ResourceInput, ResourceOutput, azure_retry, azure_undo_retry, delete_children,
    ensure_children, ensure_resource, ensure_resource_seen, parent_created, record,
    remove_resource,
};
use super::cluster::{HostedClusterOutput, IssuerKeyOutput};
use super::env::{AzureEnv, Clients, Owner};
use super::facts::{Facts, WaitClass};
use crate::azure::durable::{self, Progress};
use crate::azure::models::{API_NETWORK, API_PRIVATE_DNS};
use crate::azure::{privatelink, storage};
use hcp_runtime::ledger::{LedgerAction, LedgerRecord};
use hcp_runtime::{Action, Outcome, Ref, RetryPolicy, StepContext, StepError, UndoOutcome};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

const SUBNET_TYPE: &str = "Microsoft.Network/virtualNetworks/subnets";
const PLS_TYPE: &str = "Microsoft.Network/privateLinkServices";

/// Input of `azure.nat-subnet.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NatSubnetInput {
    /// Azure target (the management subscription).
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// Management VNet id.
    pub vnet_id: String,
    /// Subnet name (`<infraID>-pls-nat`).
    pub name: String,
    /// Fixed CIDR, or `None` for the first free /24 of the VNet's address space.
    pub cidr: Option<String>,
}

/// `azure.nat-subnet.ensure`: the PLS's NAT subnet (`privateLinkServiceNetworkPolicies =
/// Disabled`) in the management VNet, written as a child resource so the VNet's other
/// subnets are never touched.
#[derive(Clone, Debug)]
pub struct EnsureNatSubnet(pub Arc<Clients>);

impl Action for EnsureNatSubnet {
    const NAME: &'static str = "azure.nat-subnet.ensure";
    type Input = NatSubnetInput;
    type Output = ResourceOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: NatSubnetInput,
    ) -> Result<Outcome<ResourceOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let id = format!("{}/subnets/{}", input.vnet_id, input.name);
        // One read of the subnet per attempt. While the PUT of a subnet this run
        // journaled as created (before that PUT) is being polled, the subnet exists with
        // the prefix the PUT sent: a later attempt takes it from the checkpoint and leaves
        // the polling and the read after it to `ensure`. In every other case (no journaled
        // operation: a crash before the PUT's answer was journaled, a refused PUT to be
        // retried with a prefix still free) the subnet is read here, the prefix chosen
        // again if it is missing, and that read is handed on instead of a second GET.
        let polling = super::arm::ChildrenJournal::of_action(ctx)?.lists(&id)
            && durable::has_journaled_put(ctx, &id)?;
        let chosen: Option<String> = if polling {
            match &input.cidr {
                Some(c) => Some(c.clone()),
                None => durable::checkpoint_field(ctx, NAT_CIDR_KEY)?,
            }
        } else {
            None
        };
        if let Some(cidr) = chosen {
            return ensure_resource(ctx, &arm, &nat_subnet_resource(&input, id, &cidr)).await;
        }
        // An auto prefix needs the VNet, whose body lists its subnets in full (as a GET of
        // the subnet answers): one read tells both whether the subnet exists and what is
        // free. A given prefix needs only the subnet.
        let (existing, free) = match &input.cidr {
            Some(c) => (arm.get_value(&id, API_NETWORK).await?, Some(c.clone())),
            None => {
                let vnet = arm
                    .get_value(&input.vnet_id, API_NETWORK)
                    .await?
                    .ok_or_else(|| {
                        StepError::permanent(
                            "validation",
                            format!("management VNet {} not found", input.vnet_id),
                        )
                        .with_code("ResourceNotFound")
                    })?;
                (
                    privatelink::subnet_in(&vnet, &input.name).cloned(),
                    privatelink::free_slash24(&vnet),
                )
            }
        };
        let cidr = match &existing {
            Some(existing) => existing
                .pointer("/properties/addressPrefix")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            None => free.ok_or_else(|| {
                StepError::permanent(
                    "validation",
                    format!(
                        "no free /24 left in the address space of {}; set managementCluster.natSubnet",
                        input.vnet_id
                    ),
                )
                .with_code("NoFreeSubnet")
            })?,
        };
        if existing.is_none() && input.cidr.is_none() {
            // The prefix picked from the VNet's free space, for the attempts after the PUT
            // (the VNet then holds this subnet, so the free /24 would be another one).
            durable::save_checkpoint_field(ctx, NAT_CIDR_KEY, &cidr).await?;
        }
        let r = nat_subnet_resource(&input, id, &cidr);
        ensure_resource_seen(ctx, &arm, &r, Some(existing)).await
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: NatSubnetInput,
        output: Option<ResourceOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let id = format!("{}/subnets/{}", input.vnet_id, input.name);
        // Ours (journaled before its PUT) but still used by a PLS's NAT IP configuration
        // (HyperShift's PLS goes with its finalizers, and HyperShift never deletes this
        // subnet itself): wait rather than have Azure refuse the delete.
        let journaled = super::arm::ChildrenJournal::of_undo(ctx)?.is_some_and(|j| j.lists(&id));
        if journaled
            && let Some(subnet) = arm.get_value(&id, API_NETWORK).await?
            && let Some(users) = subnet
                .pointer("/properties/ipConfigurations")
                .and_then(Value::as_array)
                .filter(|a| !a.is_empty())
        {
            let users: Vec<&str> = users
                .iter()
                .filter_map(|u| u.get("id").and_then(Value::as_str))
                .collect();
            return Ok(ctx.undo_wait(
                self.0.poll(),
                format!("NAT subnet {id} is still used by {}", users.join(", ")),
            ));
        }
        let r = ResourceInput {
            azure: input.azure.clone(),
            owner: input.owner.clone(),
            resource_type: SUBNET_TYPE.into(),
            id,
            api: API_NETWORK.into(),
            body: Value::Null,
            tagged: false,
            persistent: false,
            byo: false,
            shared: false,
            parent: None,
        };
        remove_resource(ctx, &arm, &r, output.as_ref()).await
    }
}

impl Facts for EnsureNatSubnet {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/virtualNetworks/read",
        "Microsoft.Network/virtualNetworks/subnets/read",
        "Microsoft.Network/virtualNetworks/subnets/write",
        "Microsoft.Network/virtualNetworks/subnets/delete",
    ];
}

/// Checkpoint member of `azure.nat-subnet.ensure`: the prefix it chose from the VNet's
/// free space.
const NAT_CIDR_KEY: &str = "nat-cidr";

fn nat_subnet_resource(input: &NatSubnetInput, id: String, cidr: &str) -> ResourceInput {
    ResourceInput {
        azure: input.azure.clone(),
        owner: input.owner.clone(),
        resource_type: SUBNET_TYPE.into(),
        id,
        api: API_NETWORK.into(),
        body: json!({"properties": {
            "addressPrefix": cidr,
            "privateLinkServiceNetworkPolicies": "Disabled",
        }}),
        tagged: false,
        persistent: false,
        byo: false,
        shared: false,
        parent: None,
    }
}

/// Checkpoint member of `azure.private-link-service.ensure`: the load balancer frontend
/// its PUT named.
const PLS_FRONTEND_KEY: &str = "lb-frontend";

/// Where the NAT subnet comes from.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SubnetRef {
    /// Created by a node of this run.
    Node(Ref<ResourceOutput>),
    /// Given.
    Id(String),
}

/// Input of `azure.private-link-service.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlsInput {
    /// Azure target (the management subscription).
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// PLS id (`…/privateLinkServices/pls-<infraID>`).
    pub id: String,
    /// Location.
    pub location: String,
    /// Resource group id of the management cluster's internal load balancers.
    pub lb_resource_group: String,
    /// The HostedCluster node (its private-router IP).
    pub hosted_cluster: Ref<HostedClusterOutput>,
    /// NAT subnet.
    pub nat_subnet: SubnetRef,
    /// Subscriptions allowed to see and auto-approved to connect.
    pub subscriptions: Vec<String>,
}

/// `azure.private-link-service.ensure`: find the internal LB whose frontend has the
/// router's IP, then create the PLS on it. Undo: reject and remove every connection, then
/// delete the PLS.
#[derive(Clone, Debug)]
pub struct EnsurePrivateLinkService(pub Arc<Clients>);

impl Action for EnsurePrivateLinkService {
    const NAME: &'static str = "azure.private-link-service.ensure";
    type Input = PlsInput;
    type Output = ResourceOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry().with_max_attempts(30)
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PlsInput,
    ) -> Result<Outcome<ResourceOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let hc = ctx.output(&input.hosted_cluster)?;
        let Some(ip) = hc.router_ip else {
            return Err(StepError::permanent(
                "definition",
                "the HostedCluster node recorded no private-router IP",
            ));
        };
        let subnet_id = match &input.nat_subnet {
            SubnetRef::Id(s) => s.clone(),
            SubnetRef::Node(r) => ctx.output(r)?.id,
        };
        // While the PUT of the PLS is being polled (its operation journaled), the
        // PLS exists on the frontend that PUT named: that frontend is taken from the
        // checkpoint instead of listing the load balancers on every poll. Without a
        // journaled operation (first attempt, a crash before the PUT's answer was
        // journaled, a failed write to redo) they are listed as before, so a PUT is never
        // sent with a frontend read in an earlier attempt.
        let saved: Option<String> = if durable::has_journaled_put(ctx, &input.id)? {
            durable::checkpoint_field(ctx, PLS_FRONTEND_KEY)?
        } else {
            None
        };
        let found = match saved {
            Some(f) => Some(f),
            None => {
                let found =
                    privatelink::find_internal_lb_frontend(&arm, &input.lb_resource_group, &ip)
                        .await?;
                if let Some(f) = &found
                    && durable::checkpoint_field::<String>(ctx, PLS_FRONTEND_KEY)?.as_ref()
                        != Some(f)
                {
                    durable::save_checkpoint_field(ctx, PLS_FRONTEND_KEY, f).await?;
                }
                found
            }
        };
        let Some(frontend) = found else {
            return Ok(ctx.wait(
                self.0.poll(),
                format!(
                    "waiting for an internal load balancer in {} with frontend IP {ip}",
                    input.lb_resource_group
                ),
            ));
        };
        let name = input.id.rsplit('/').next().unwrap_or_default().to_string();
        let r = ResourceInput {
            azure: input.azure.clone(),
            owner: input.owner.clone(),
            resource_type: PLS_TYPE.into(),
            id: input.id.clone(),
            api: API_NETWORK.into(),
            body: json!({
                "location": input.location,
                "properties": {
                    "loadBalancerFrontendIpConfigurations": [{"id": frontend}],
                    "ipConfigurations": [{
                        "name": format!("{name}-nat"),
                        "properties": {
                            "privateIPAllocationMethod": "Dynamic",
                            "privateIPAddressVersion": "IPv4",
                            "subnet": {"id": subnet_id},
                            "primary": true,
                        }
                    }],
                    "visibility": {"subscriptions": input.subscriptions},
                    "autoApproval": {"subscriptions": input.subscriptions},
                }
            }),
            tagged: true,
            persistent: false,
            byo: false,
            shared: false,
            parent: None,
        };
        ensure_resource(ctx, &arm, &r).await
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: PlsInput,
        _output: Option<ResourceOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        if ctx.checkpoint::<Value>()?.is_none() {
            let Some(current) = arm.get_value(&input.id, API_NETWORK).await? else {
                return Ok(UndoOutcome::Done);
            };
            if !input.owner.created_by(current.get("tags"), ctx) {
                return Ok(UndoOutcome::Done);
            }
        }
        match privatelink::teardown(ctx, &arm, &input.id).await? {
            Progress::Pending { after, reason } => Ok(ctx.undo_wait(after, reason)),
            Progress::Done(_) => Ok(UndoOutcome::Done),
        }
    }
}

impl Facts for EnsurePrivateLinkService {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/privateLinkServices/read",
        "Microsoft.Network/privateLinkServices/write",
        "Microsoft.Network/privateLinkServices/delete",
        "Microsoft.Network/privateLinkServices/privateEndpointConnections/write",
        "Microsoft.Network/privateLinkServices/privateEndpointConnections/delete",
        "Microsoft.Network/loadBalancers/read",
        "Microsoft.Network/virtualNetworks/subnets/join/action",
    ];
    const UNDO_WAIT: WaitClass = WaitClass::PrivateLinkTeardown;
}

/// Input of `azure.private-link-service.delete` (delete-cluster).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlsDeleteInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// PLS id.
    pub id: String,
}

/// `azure.private-link-service.delete`: teardown if ours (connections rejected and removed
/// first).
#[derive(Clone, Debug)]
pub struct DeletePrivateLinkService(pub Arc<Clients>);

impl Action for DeletePrivateLinkService {
    const NAME: &'static str = "azure.private-link-service.delete";
    const HAS_UNDO: bool = false;
    type Input = PlsDeleteInput;
    type Output = DeleteOutput;

    fn retry_policy() -> RetryPolicy {
        azure_undo_retry().with_max_attempts(30)
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PlsDeleteInput,
    ) -> Result<Outcome<DeleteOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        if ctx.checkpoint::<Value>()?.is_none() {
            match arm.get_value(&input.id, API_NETWORK).await? {
                None => {
                    return Ok(Outcome::Done(DeleteOutput {
                        ledger: vec![record(PLS_TYPE, &input.id, LedgerAction::Gone, false, None)],
                    }));
                }
                Some(current) if !input.owner.owns(current.get("tags")) => {
                    return Ok(Outcome::Done(DeleteOutput {
                        ledger: vec![record(
                            PLS_TYPE,
                            &input.id,
                            LedgerAction::Kept,
                            false,
                            Some("not tagged as this cluster's: left in place".into()),
                        )],
                    }));
                }
                Some(_) => {}
            }
        }
        match privatelink::teardown(ctx, &arm, &input.id).await? {
            Progress::Pending { after, reason } => Ok(ctx.wait(after, reason)),
            Progress::Done(_) => Ok(Outcome::Done(DeleteOutput {
                ledger: vec![record(
                    PLS_TYPE,
                    &input.id,
                    LedgerAction::Deleted,
                    false,
                    None,
                )],
            })),
        }
    }
}

impl Facts for DeletePrivateLinkService {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/privateLinkServices/read",
        "Microsoft.Network/privateLinkServices/delete",
        "Microsoft.Network/privateLinkServices/privateEndpointConnections/write",
        "Microsoft.Network/privateLinkServices/privateEndpointConnections/delete",
    ];
    const WAIT: WaitClass = WaitClass::PrivateLinkTeardown;
}

// ---------------------------------------------------------------------------------------

/// Input of `azure.private-endpoint.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeInput {
    /// Azure target (the guest subscription).
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// PE id.
    pub id: String,
    /// Location.
    pub location: String,
    /// Guest subnet id.
    pub subnet_id: String,
    /// The PLS node.
    pub pls: Ref<ResourceOutput>,
    /// The node that ensured the PE's resource group: when this run created it, the PE's
    /// first PUT is sent without a read (`ResourceInput::parent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Ref<ResourceOutput>>,
}

/// PE output: id and private IP.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeOutput {
    /// PE id.
    pub id: String,
    /// Its private IP.
    pub ip: String,
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

/// `azure.private-endpoint.ensure`: PE in the guest subnet connected to our PLS; waits for
/// the connection to be `Approved` (saying clearly when it stays `Pending`), then reads the
/// PE's IP.
#[derive(Clone, Debug)]
pub struct EnsurePrivateEndpoint(pub Arc<Clients>);

impl Action for EnsurePrivateEndpoint {
    const NAME: &'static str = "azure.private-endpoint.ensure";
    type Input = PeInput;
    type Output = PeOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(&self, ctx: &StepContext, input: PeInput) -> Result<Outcome<PeOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let pls = ctx.output(&input.pls)?;
        let name = input.id.rsplit('/').next().unwrap_or_default().to_string();
        let r = pe_resource(&input, &pls.id, &name);
        let ensured = match ensure_resource(ctx, &arm, &r).await? {
            Outcome::Wait { until, reason } => return Ok(Outcome::Wait { until, reason }),
            Outcome::Done(o) => o,
        };
        let state = ensured
            .body
            .pointer("/properties/manualPrivateLinkServiceConnections/0/properties/privateLinkServiceConnectionState/status")
            .or_else(|| ensured.body.pointer("/properties/privateLinkServiceConnections/0/properties/privateLinkServiceConnectionState/status"))
            .and_then(Value::as_str)
            .unwrap_or("Unknown")
            .to_string();
        match state.as_str() {
            "Approved" => {}
            "Rejected" | "Disconnected" => {
                return Err(StepError::permanent(
                    "validation",
                    format!(
                        "the private endpoint connection of {} to {} is {state}",
                        input.id, pls.id
                    ),
                )
                .with_code("PrivateEndpointConnectionRejected"));
            }
            other => {
                return Ok(ctx.wait(
                    self.0.poll(),
                    format!(
                        "private endpoint connection is {other}: subscription {} is not auto-approved on {}; approve the connection or add the subscription to allowedSubscriptions",
                        input.azure_subscription(),
                        pls.id
                    ),
                ));
            }
        }
        // `ensure` read it with its NICs: the address is taken from that body.
        let ip = privatelink::endpoint_ip(&arm, &input.id, ensured.body.clone()).await?;
        let ip = match ip {
            Some(ip) => ip,
            None => {
                return Ok(ctx.wait(
                    self.0.poll(),
                    format!("waiting for {} to get a private IP", input.id),
                ));
            }
        };
        Ok(Outcome::Done(PeOutput {
            id: ensured.id,
            ip,
            ledger: ensured.ledger,
        }))
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: PeInput,
        _output: Option<PeOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let pls_id = ctx.output(&input.pls).map(|p| p.id).unwrap_or_default();
        let name = input.id.rsplit('/').next().unwrap_or_default().to_string();
        let r = pe_resource(&input, &pls_id, &name);
        remove_resource(ctx, &arm, &r, None).await
    }
}

impl Facts for EnsurePrivateEndpoint {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/privateEndpoints/read",
        "Microsoft.Network/privateEndpoints/write",
        "Microsoft.Network/privateEndpoints/delete",
        "Microsoft.Network/virtualNetworks/subnets/join/action",
    ];
}

/// Input of `azure.private-endpoint.read`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PeReadInput {
    /// Azure target (the guest subscription).
    pub azure: AzureEnv,
    /// PE id.
    pub id: String,
}

/// `azure.private-endpoint.read`: an existing Private Endpoint's id and address, for a run
/// that writes records at it without making it (update-cluster). Read only: a missing
/// endpoint fails the step for good, naming it.
#[derive(Clone, Debug)]
pub struct ReadPrivateEndpoint(pub Arc<Clients>);

impl Action for ReadPrivateEndpoint {
    const NAME: &'static str = "azure.private-endpoint.read";
    const HAS_UNDO: bool = false;
    type Input = PeReadInput;
    type Output = PeOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: PeReadInput,
    ) -> Result<Outcome<PeOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let Some(body) = arm
            .get_value_with(&input.id, API_NETWORK, &[("$expand", "networkInterfaces")])
            .await?
        else {
            return Err(StepError::permanent(
                "validation",
                format!(
                    "the private endpoint {} does not exist: repair-cluster makes it again",
                    input.id
                ),
            )
            .with_code("PrivateEndpointNotFound"));
        };
        match privatelink::endpoint_ip(&arm, &input.id, body).await? {
            Some(ip) => Ok(Outcome::Done(PeOutput {
                id: input.id,
                ip,
                ledger: Vec::new(),
            })),
            None => Ok(ctx.wait(
                self.0.poll(),
                format!("waiting for {} to get a private IP", input.id),
            )),
        }
    }
}

impl Facts for ReadPrivateEndpoint {
    const ARM_ACTIONS: &'static [&'static str] = &["Microsoft.Network/privateEndpoints/read"];
}

impl PeInput {
    fn azure_subscription(&self) -> &str {
        self.id.split('/').nth(2).unwrap_or_default()
    }
}

fn pe_resource(input: &PeInput, pls_id: &str, name: &str) -> ResourceInput {
    ResourceInput {
        azure: input.azure.clone(),
        owner: input.owner.clone(),
        resource_type: "Microsoft.Network/privateEndpoints".into(),
        id: input.id.clone(),
        api: API_NETWORK.into(),
        body: json!({
            "location": input.location,
            "properties": {
                "subnet": {"id": input.subnet_id},
                "manualPrivateLinkServiceConnections": [{
                    "name": name,
                    "properties": {
                        "privateLinkServiceId": pls_id,
                        "requestMessage": format!("hcp-workflow: cluster {} ({})", input.owner.cluster, input.owner.infra_id),
                    }
                }]
            }
        }),
        tagged: true,
        persistent: false,
        byo: false,
        shared: false,
        parent: input.group.clone(),
    }
}

// ---------------------------------------------------------------------------------------

/// Input of `azure.private-dns-a-record.ensure`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ARecordInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Ownership.
    pub owner: Owner,
    /// Zone id.
    pub zone_id: String,
    /// Record names (`api`, `*.apps`).
    pub names: Vec<String>,
    /// The PE node (its IP).
    pub endpoint: Ref<PeOutput>,
    /// The node that ensured the zone: when this run created it, a record not yet
    /// journaled cannot exist and is written without a read (`arm::ensure_children`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<Ref<ResourceOutput>>,
    /// repair-cluster: write again what exists but drifted (see `arm::ensure_children`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub converge: bool,
}

/// Output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ARecordOutput {
    /// Ledger.
    pub ledger: Vec<LedgerRecord>,
}

/// `azure.private-dns-a-record.ensure`: `api` and `*.apps` → the PE's IP (TTL 300).
#[derive(Clone, Debug)]
pub struct EnsureARecords(pub Arc<Clients>);

const A_TYPE: &str = "Microsoft.Network/privateDnsZones/A";

impl Action for EnsureARecords {
    const NAME: &'static str = "azure.private-dns-a-record.ensure";
    type Input = ARecordInput;
    type Output = ARecordOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    fn undo_retry_policy() -> RetryPolicy {
        azure_undo_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: ARecordInput,
    ) -> Result<Outcome<ARecordOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let pe = ctx.output(&input.endpoint)?;
        let body = json!({"properties": {"ttl": 300, "aRecords": [{"ipv4Address": pe.ip}]}});
        let children = record_ids(&input)
            .into_iter()
            .map(|id| (id, body.clone()))
            .collect();
        match ensure_children(
            ctx,
            &arm,
            &input.owner,
            A_TYPE,
            API_PRIVATE_DNS,
            children,
            false,
            input.converge,
            parent_created(ctx, input.zone.as_ref())?,
        )
        .await?
        {
            Outcome::Wait { until, reason } => Ok(Outcome::Wait { until, reason }),
            Outcome::Done(ledger) => Ok(Outcome::Done(ARecordOutput { ledger })),
        }
    }

    async fn undo(
        &self,
        ctx: &StepContext,
        input: ARecordInput,
        output: Option<ARecordOutput>,
    ) -> Result<UndoOutcome, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        // Only the record sets this run created (journaled before each PUT): a record set
        // that existed before the run stays.
        delete_children(
            ctx,
            &arm,
            A_TYPE,
            API_PRIVATE_DNS,
            &record_ids(&input),
            output.as_ref().map(|o| o.ledger.as_slice()),
            false,
        )
        .await
    }
}

impl Facts for EnsureARecords {
    const ARM_ACTIONS: &'static [&'static str] = &[
        "Microsoft.Network/privateDnsZones/A/read",
        "Microsoft.Network/privateDnsZones/A/write",
        "Microsoft.Network/privateDnsZones/A/delete",
    ];
}

fn record_ids(input: &ARecordInput) -> Vec<String> {
    input
        .names
        .iter()
        .map(|n| format!("{}/A/{n}", input.zone_id))
        .collect()
}

// ---------------------------------------------------------------------------------------

/// Input of `azure.oidc-documents.publish`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OidcDocsInput {
    /// Azure target.
    pub azure: AzureEnv,
    /// Storage account id.
    pub account_id: String,
    /// Container.
    pub container: String,
    /// Issuer URL.
    pub issuer: String,
    /// The issuer key node (public half).
    pub key: Ref<IssuerKeyOutput>,
}

/// Output.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OidcDocsOutput {
    /// Issuer URL.
    pub issuer: String,
    /// Key id published.
    pub kid: String,
}

/// `azure.oidc-documents.publish`: upload the discovery document and the JWKS (storage
/// account key from `listKeys`, used in memory only). No undo of its own, on purpose: no
/// undo ever deletes a blob by name. The documents go with the container when (and only
/// when) the container's undo deletes it, i.e. when this run created the container
/// (journaled, see `arm::delete_children`); in a container that existed before the run
/// (the persistent OIDC issuer of an earlier run) they stay, and hold the same documents:
/// the issuer key Secret they are derived from is reused, never regenerated.
#[derive(Clone, Debug)]
pub struct PublishOidcDocuments(pub Arc<Clients>);

impl Action for PublishOidcDocuments {
    const NAME: &'static str = "azure.oidc-documents.publish";
    const HAS_UNDO: bool = false;
    type Input = OidcDocsInput;
    type Output = OidcDocsOutput;

    fn retry_policy() -> RetryPolicy {
        azure_retry()
    }

    async fn run(
        &self,
        ctx: &StepContext,
        input: OidcDocsInput,
    ) -> Result<Outcome<OidcDocsOutput>, StepError> {
        let arm = self.0.arm(&input.azure).await?;
        let key = ctx.output(&input.key)?;
        let account = input
            .account_id
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let secret = storage::storage_account_key(&arm, &input.account_id).await?;
        let discovery = crate::oidc::discovery_document(&input.issuer);
        let blob =
            storage::BlobClient::new(&input.azure.cloud, &self.0.transport(), &account, secret)
                .map_err(|e| StepError::permanent("configuration", e.to_string()))?;
        for (path, doc) in [
            (".well-known/openid-configuration", &discovery),
            ("openid/v1/jwks", &key.jwks),
        ] {
            let bytes = serde_json::to_vec(doc)
                .map_err(|e| StepError::permanent("internal", e.to_string()))?;
            blob.put(&input.container, path, bytes, "application/json")
                .await?;
        }
        Ok(Outcome::Done(OidcDocsOutput {
            issuer: input.issuer,
            kid: key.kid,
        }))
    }
}

impl Facts for PublishOidcDocuments {
    const ARM_ACTIONS: &'static [&'static str] =
        &["Microsoft.Storage/storageAccounts/listKeys/action"];
}
